//! Tenants: who a client is (`AUTH tenant password`, or a tenant's own Memcached port), which
//! engine namespace its keys live in, and its request budget (`max_qps`, a token bucket here
//! in the proxy).

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use terrace_commands::passwords::constant_time_eq;

/// The tenant of clients that do not say otherwise.
pub const DEFAULT: &str = "default";

/// The user who may change the topology (`AUTH admin <admin_password>`); not a tenant name.
pub const ADMIN: &str = "admin";

/// How a tenant's password is kept: as given in the configuration file, as its argon2id hash
/// (what the console pushes: it never holds the password itself), or as the SHA-256 of it
/// (what the console pushed before, as Redis's ACL `#hash`).
#[derive(Debug, Clone)]
pub enum Password {
    Plain(String),
    Sha256([u8; 32]),
    /// A PHC string (`$argon2id$…`).
    Argon2(String),
}

/// Argon2 hashes a password was found to match, each with that password's digest under this
/// process's salt: AUTH with a password seen before is checked in microseconds, a new one
/// (or a wrong one) pays argon2's cost, off the reactor. (The password itself is not kept.)
struct Remembered {
    salt: [u8; 16],
    matched: Mutex<std::collections::HashMap<String, [u8; 32]>>,
}

/// Hashes remembered at most; past it the memory starts over (passwords changed leave
/// theirs behind).
const REMEMBERED_MAX: usize = 100_000;

fn remembered() -> &'static Remembered {
    static REMEMBERED: std::sync::OnceLock<Remembered> = std::sync::OnceLock::new();
    REMEMBERED.get_or_init(|| {
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt).expect("the system's random source");
        Remembered { salt, matched: Mutex::new(std::collections::HashMap::new()) }
    })
}

fn salted(salt: &[u8; 16], given: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(salt);
    h.update(given);
    h.finalize().into()
}

impl Password {
    /// Whether `given` is the password, when that can be told at once: None for an argon2
    /// hash not yet matched by it (`verify` tells, slowly).
    pub fn quick_match(&self, given: &[u8]) -> Option<bool> {
        use sha2::Digest;
        match self {
            Password::Plain(p) => Some(constant_time_eq(p.as_bytes(), given)),
            Password::Sha256(h) => Some(constant_time_eq(h, &sha2::Sha256::digest(given))),
            Password::Argon2(phc) => {
                let r = remembered();
                let known = r.matched.lock().get(phc).copied();
                known.filter(|k| constant_time_eq(k, &salted(&r.salt, given))).map(|_| true)
            }
        }
    }

    /// Whether `given` is the password (argon2: slow on purpose, run it off the reactor); a
    /// match is remembered for `quick_match`.
    pub fn verify(&self, given: &[u8]) -> bool {
        if let Some(known) = self.quick_match(given) {
            return known;
        }
        let Password::Argon2(phc) = self else { return false };
        if !terrace_commands::passwords::verify(given, phc) {
            return false;
        }
        let r = remembered();
        let mut matched = r.matched.lock();
        if matched.len() >= REMEMBERED_MAX {
            matched.clear();
        }
        matched.insert(phc.clone(), salted(&r.salt, given));
        true
    }

    /// Parses 64 hex digits.
    pub fn from_sha256_hex(hex: &str) -> Option<Password> {
        if hex.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Password::Sha256(out))
    }
}

pub struct Tenant {
    pub name: Arc<str>,
    pub password: Option<Password>,
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
    /// Reads go to the owning engine's replicas when it has some (`replica_reads`).
    pub replica_reads: bool,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Tenant {
    pub fn new(name: &str, password: Option<Password>, memcache_port: Option<u16>, max_qps: Option<u64>, max_memory: u64, cache_id: u32) -> Arc<Tenant> {
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
            replica_reads: false,
            bucket: Mutex::new(Bucket { tokens, at: Instant::now() }),
        })
    }

    /// The same tenant with options for its namespace.
    pub fn with_namespace_options(self: Arc<Self>, options: Vec<(&'static str, String)>) -> Arc<Tenant> {
        let mut t = Arc::into_inner(self).expect("a tenant under construction has one owner");
        t.namespace_options = options;
        Arc::new(t)
    }

    pub fn with_replica_reads(self: Arc<Self>, on: bool) -> Arc<Tenant> {
        let mut t = Arc::into_inner(self).expect("a tenant under construction has one owner");
        t.replica_reads = on;
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

    /// Whether `password` opens this tenant (a tenant without a password takes any); an
    /// argon2 hash not yet matched by it is checked on the blocking pool.
    pub async fn accepts(&self, password: &[u8]) -> bool {
        let Some(p) = &self.password else { return true };
        if let Some(known) = p.quick_match(password) {
            return known;
        }
        let (p, given) = (p.clone(), password.to_vec());
        tokio::task::spawn_blocking(move || p.verify(&given)).await.unwrap_or(false)
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

    #[tokio::test]
    async fn passwords_plain_hashed_and_argon2() {
        let plain = Tenant::new("a", Some(Password::Plain("s3cret".into())), None, None, 0, 1);
        assert!(plain.accepts(b"s3cret").await && !plain.accepts(b"s3cre").await && !plain.accepts(b"s3cret!").await);
        // sha256("s3cret")
        let hashed = Password::from_sha256_hex("7d2c4a9a2c51c5f4e7cdae0a4bff0ea2ab1a47e6b0a4d3f3c7e0dd7a8a4a3f1b").unwrap();
        assert!(!hashed.verify(b"s3cret"));
        use sha2::Digest;
        let hex: String = sha2::Sha256::digest(b"s3cret").iter().map(|b| format!("{b:02x}")).collect();
        let hashed = Tenant::new("b", Password::from_sha256_hex(&hex), None, None, 0, 2);
        assert!(hashed.accepts(b"s3cret").await && !hashed.accepts(b"other").await);
        assert!(Password::from_sha256_hex("xyz").is_none());
        assert!(Password::from_sha256_hex(&"g".repeat(64)).is_none());
        // Argon2: checked slowly until matched once, then at once; a wrong one never is.
        let phc = terrace_commands::passwords::hash(b"s3cret");
        let argon = Password::Argon2(phc.clone());
        assert_eq!(argon.quick_match(b"s3cret"), None, "not matched yet");
        let tenant = Tenant::new("c", Some(argon.clone()), None, None, 0, 3);
        assert!(!tenant.accepts(b"wrong").await);
        assert!(tenant.accepts(b"s3cret").await);
        assert_eq!(argon.quick_match(b"s3cret"), Some(true), "remembered");
        assert_eq!(argon.quick_match(b"wrong"), None, "a wrong password is never taken quickly");
        assert!(!tenant.accepts(b"wrong").await);
    }
}
