//! Per-client bounds that CONFIG parameters set — output buffers by client class
//! (`client-output-buffer-limit`), the query buffer (`client-query-buffer-limit`), one bulk
//! argument (`proto-max-bulk-len`), the number of clients (`maxclients`) — and the counters
//! of clients closed for crossing one.
//!
//! A class whose hard and soft limits are both 0 (Redis's "unlimited", the default for
//! normal clients) is still bounded here, at `UNLIMITED_CEILING`: one client must not be able
//! to grow the process without bound (a huge SRANDMEMBER count, a MONITOR that never reads).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The output bound of a class configured as unlimited (above `proto-max-bulk-len`'s
/// default, so the largest string Redis accepts can still be read back).
pub const UNLIMITED_CEILING: usize = 1 << 30;

/// Redis's client classes for output limits. A MONITOR client is a normal client, as in
/// Redis; a client with subscriptions is a pub/sub client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Normal,
    Replica,
    Pubsub,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Normal => "normal",
            Class::Replica => "replica",
            Class::Pubsub => "pubsub",
        }
    }

    fn parse(word: &str) -> Option<Class> {
        match word {
            "normal" => Some(Class::Normal),
            "replica" | "slave" => Some(Class::Replica),
            "pubsub" => Some(Class::Pubsub),
            _ => None,
        }
    }
}

/// One class's limits: over `hard` bytes the client is closed at once; over `soft` for
/// longer than `soft_secs` seconds, too.
#[derive(Default)]
struct ClassLimit {
    hard: AtomicUsize,
    soft: AtomicUsize,
    soft_secs: AtomicU64,
}

pub struct ClientLimits {
    output: [ClassLimit; 3],
    pub query_buffer: AtomicUsize,
    pub max_bulk_len: AtomicUsize,
    pub maxclients: AtomicUsize,
    /// Clients closed for their output or query buffer (INFO stats).
    pub output_disconnections: AtomicU64,
    pub query_disconnections: AtomicU64,
}

impl Default for ClientLimits {
    /// Redis 7.0's defaults (as the parameter table has them).
    fn default() -> Self {
        let limits = ClientLimits {
            output: Default::default(),
            query_buffer: AtomicUsize::new(1 << 30),
            max_bulk_len: AtomicUsize::new(512 << 20),
            maxclients: AtomicUsize::new(10_000),
            output_disconnections: AtomicU64::new(0),
            query_disconnections: AtomicU64::new(0),
        };
        limits.apply("client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60");
        limits
    }
}

/// Whether a client's pending output is within its class's limits.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    Within,
    /// Over a limit: the client is to be closed (with the limit it crossed, for the log).
    Over(&'static str),
}

impl ClientLimits {
    /// Takes a parameter's value as CONFIG SET validated it (others are ignored).
    pub fn apply(&self, name: &str, value: &str) {
        let number = || value.parse::<usize>().ok();
        match name {
            "client-query-buffer-limit" => self.query_buffer.store(number().unwrap_or(1 << 30), Ordering::Relaxed),
            "proto-max-bulk-len" => self.max_bulk_len.store(number().unwrap_or(512 << 20), Ordering::Relaxed),
            "maxclients" => self.maxclients.store(number().unwrap_or(10_000), Ordering::Relaxed),
            "client-output-buffer-limit" => {
                let words: Vec<&str> = value.split_whitespace().collect();
                for set in words.chunks_exact(4) {
                    let Some(class) = Class::parse(set[0]) else { continue };
                    let limit = &self.output[class as usize];
                    limit.hard.store(set[1].parse().unwrap_or(0), Ordering::Relaxed);
                    limit.soft.store(set[2].parse().unwrap_or(0), Ordering::Relaxed);
                    limit.soft_secs.store(set[3].parse().unwrap_or(0), Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }

    /// The most output a client of `class` may have pending before it is closed.
    pub fn hard(&self, class: Class) -> usize {
        match self.output[class as usize].hard.load(Ordering::Relaxed) {
            0 => UNLIMITED_CEILING,
            hard => hard.min(UNLIMITED_CEILING),
        }
    }

    /// The soft limit and how long a client may stay over it (None: no soft limit).
    pub fn soft(&self, class: Class) -> Option<(usize, u64)> {
        let l = &self.output[class as usize];
        let soft = l.soft.load(Ordering::Relaxed);
        (soft > 0).then(|| (soft, l.soft_secs.load(Ordering::Relaxed)))
    }

    /// Checks `pending` bytes of output as Redis does when output is added: over the hard
    /// limit, or over the soft limit continuously (since `soft_since`, unix ms, 0 = not over)
    /// for more than its seconds.
    pub fn check(&self, class: Class, pending: usize, soft_since: &AtomicU64, now_ms: u64) -> Check {
        if pending >= self.hard(class) {
            return Check::Over("hard");
        }
        match self.soft(class) {
            Some((soft, secs)) if pending >= soft => {
                let since = soft_since.load(Ordering::Relaxed);
                if since == 0 {
                    soft_since.store(now_ms.max(1), Ordering::Relaxed);
                    Check::Within
                } else if now_ms.saturating_sub(since) > secs * 1000 {
                    Check::Over("soft")
                } else {
                    Check::Within
                }
            }
            _ => {
                soft_since.store(0, Ordering::Relaxed);
                Check::Within
            }
        }
    }
}

/// Descriptors the engine keeps for itself (listeners, files, the WAL), as Redis's
/// CONFIG_MIN_RESERVED_FDS.
pub const RESERVED_FDS: usize = 32;

/// How many clients the open-file limit leaves room for (None: unknown).
pub fn client_fds() -> Option<usize> {
    terrace_commands::fds::room_for_clients(RESERVED_FDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_redis_with_a_ceiling_for_unlimited() {
        let l = ClientLimits::default();
        assert_eq!(l.hard(Class::Normal), UNLIMITED_CEILING);
        assert_eq!(l.hard(Class::Pubsub), 32 << 20);
        assert_eq!(l.soft(Class::Pubsub), Some((8 << 20, 60)));
        assert_eq!(l.soft(Class::Normal), None);
    }

    #[test]
    fn a_class_set_alone_leaves_the_others() {
        let l = ClientLimits::default();
        l.apply("client-output-buffer-limit", "normal 1048576 0 0");
        assert_eq!(l.hard(Class::Normal), 1 << 20);
        assert_eq!(l.hard(Class::Pubsub), 32 << 20);
    }

    #[test]
    fn soft_limit_closes_only_after_its_seconds() {
        let l = ClientLimits::default();
        l.apply("client-output-buffer-limit", "pubsub 0 100 2");
        let since = AtomicU64::new(0);
        assert_eq!(l.check(Class::Pubsub, 200, &since, 10_000), Check::Within);
        assert_eq!(l.check(Class::Pubsub, 200, &since, 11_000), Check::Within);
        assert_eq!(l.check(Class::Pubsub, 200, &since, 12_001), Check::Over("soft"));
        // Back under the soft limit: the clock restarts.
        assert_eq!(l.check(Class::Pubsub, 50, &since, 12_002), Check::Within);
        assert_eq!(l.check(Class::Pubsub, 200, &since, 20_000), Check::Within);
        assert_eq!(l.check(Class::Pubsub, 1 << 31, &since, 20_000), Check::Over("hard"));
    }
}
