//! Tenants: who a client is (`AUTH tenant password`, or a tenant's own Memcached port), which
//! engine namespace its keys live in, and its request budget (`max_qps`, a token bucket here
//! in the proxy).

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

/// The tenant of clients that do not say otherwise.
pub const DEFAULT: &str = "default";

pub struct Tenant {
    pub name: Arc<str>,
    pub password: Option<String>,
    /// The engine namespace (`TERRACE.NAMESPACE`); None for the default tenant.
    pub namespace: Option<Arc<str>>,
    pub memcache_port: Option<u16>,
    pub max_qps: Option<u64>,
    /// Data limit over all engines; 0 = none.
    pub max_memory: u64,
    /// Near-cache partition: distinct per tenant of one topology.
    pub cache_id: u32,
    /// Settings the engines apply to the tenant's namespace (`TERRACE.NAMESPACE` options:
    /// COMPRESSION, COMPRESSION-MODE, COMPRESSION-MIN-SIZE, STORAGE-MODE).
    pub namespace_options: Vec<(&'static str, String)>,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Tenant {
    pub fn new(name: &str, password: Option<String>, memcache_port: Option<u16>, max_qps: Option<u64>, max_memory: u64, cache_id: u32) -> Arc<Tenant> {
        let namespace = (name != DEFAULT).then(|| Arc::from(name));
        let tokens = max_qps.unwrap_or(0) as f64;
        Arc::new(Tenant {
            name: Arc::from(name),
            password,
            namespace,
            memcache_port,
            max_qps,
            max_memory,
            cache_id,
            namespace_options: Vec::new(),
            bucket: Mutex::new(Bucket { tokens, at: Instant::now() }),
        })
    }

    /// The same tenant with options for its namespace.
    pub fn with_namespace_options(self: Arc<Self>, options: Vec<(&'static str, String)>) -> Arc<Tenant> {
        let mut t = Arc::into_inner(self).expect("a tenant under construction has one owner");
        t.namespace_options = options;
        Arc::new(t)
    }

    /// Takes one request from the tenant's budget: up to `max_qps` per second, bursts up to
    /// one second's worth. False: over the limit, refuse the request.
    pub fn admit(&self) -> bool {
        let Some(rate) = self.max_qps else { return true };
        let mut b = self.bucket.lock();
        let now = Instant::now();
        let refill = now.duration_since(b.at).as_secs_f64() * rate as f64;
        b.tokens = (b.tokens + refill).min(rate as f64);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    pub fn over_limit_message(&self) -> String {
        format!("max_qps exceeded for tenant '{}' ({} requests per second)", self.name, self.max_qps.unwrap_or(0))
    }

    /// Whether `password` opens this tenant (a tenant without a password takes any).
    pub fn accepts(&self, password: &[u8]) -> bool {
        self.password.as_ref().is_none_or(|p| p.as_bytes() == password)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_limits_the_rate() {
        let t = Tenant::new("a", None, None, Some(10), 0, 1);
        let admitted = (0..100).filter(|_| t.admit()).count();
        assert_eq!(admitted, 10, "a second's worth of burst");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let more = (0..100).filter(|_| t.admit()).count();
        assert!((2..=4).contains(&more), "about 3 refilled in 300 ms, got {more}");
        let unlimited = Tenant::new("b", None, None, None, 0, 2);
        assert!((0..1000).all(|_| unlimited.admit()));
        assert!(unlimited.namespace.is_some());
        assert!(Tenant::new(DEFAULT, None, None, None, 0, 0).namespace.is_none());
    }
}
