//! Failed authentications per key — a client address (the console's login form), or an
//! address and the user name tried (the proxy's AUTH and HELLO, so one tenant's failures,
//! or a made-up name's, lock out no other user of that address): after `max_failures`
//! failures within `window` of the first, the key is refused until that window ends; a
//! success forgets it.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses remembered before those whose window ended are dropped.
const PRUNE_AT: usize = 100_000;

pub struct FailureLimiter<K = IpAddr> {
    max_failures: u32,
    window: Duration,
    failures: Mutex<HashMap<K, (u32, Instant)>>,
}

impl<K: Hash + Eq> FailureLimiter<K> {
    pub fn new(max_failures: u32, window: Duration) -> FailureLimiter<K> {
        FailureLimiter { max_failures, window, failures: Mutex::new(HashMap::new()) }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<K, (u32, Instant)>> {
        // A panic elsewhere while holding it leaves counts, which stay usable.
        self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `key` may try now; Err: seconds until it may.
    pub fn check(&self, key: &K) -> Result<(), u64> {
        let mut f = self.failures();
        match f.get(key) {
            Some((n, since)) if *n >= self.max_failures && since.elapsed() < self.window => Err((self.window - since.elapsed()).as_secs() + 1),
            Some((_, since)) if since.elapsed() >= self.window => {
                f.remove(key);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    pub fn failed(&self, key: K) {
        let mut f = self.failures();
        if f.len() > PRUNE_AT {
            let window = self.window;
            f.retain(|_, (_, since)| since.elapsed() < window);
        }
        f.entry(key).or_insert((0, Instant::now())).0 += 1;
    }

    pub fn succeeded(&self, key: &K) {
        self.failures().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_failures_and_forgets_on_success() {
        let l = FailureLimiter::new(5, Duration::from_secs(60));
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..5 {
            assert!(l.check(&ip).is_ok());
            l.failed(ip);
        }
        assert!(matches!(l.check(&ip), Err(s) if (1..=60).contains(&s)));
        assert!(l.check(&"10.0.0.2".parse().unwrap()).is_ok(), "other addresses are not affected");
        l.succeeded(&ip);
        assert!(l.check(&ip).is_ok());
    }

    #[test]
    fn keyed_by_address_and_user_one_users_failures_lock_out_no_other() {
        let l: FailureLimiter<(IpAddr, Vec<u8>)> = FailureLimiter::new(5, Duration::from_secs(60));
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..5 {
            l.failed((ip, b"made-up".to_vec()));
        }
        assert!(l.check(&(ip, b"made-up".to_vec())).is_err());
        assert!(l.check(&(ip, b"alice".to_vec())).is_ok(), "another user of the address");
    }

    #[test]
    fn the_window_ends() {
        let l = FailureLimiter::new(1, Duration::from_millis(20));
        let ip: IpAddr = "::1".parse().unwrap();
        l.failed(ip);
        assert!(l.check(&ip).is_err());
        std::thread::sleep(Duration::from_millis(30));
        assert!(l.check(&ip).is_ok());
    }
}
