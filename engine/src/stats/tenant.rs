//! One tenant's workload statistics: operations by command class and kind (read or write),
//! QPS over the last second and the last minute (with the minute's peak second), and the key
//! references that feed the miss-ratio curve and the access intervals. Counting is one relaxed
//! add per command and one hash per key; only sampled keys take the curve's lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::mrc::{spatial, Mrc};

pub use terrace_commands::class::{CLASSES, OTHER};

/// Keys sampled for the curve, per tenant (the curve's memory: ~100 bytes a key).
pub const MRC_SAMPLES: usize = 8192;
/// Seconds kept for the QPS windows.
const WINDOW: usize = 60;

pub struct TenantStats {
    /// [class][0: read, 1: write].
    ops: [[AtomicU64; 2]; CLASSES.len()],
    key_refs: AtomicU64,
    /// Keyspace hits and misses of its reads (published in batches by connections' tallies).
    hits: AtomicU64,
    misses: AtomicU64,
    /// Writes refused with OOM (its limit or the engine's).
    oom_refused: AtomicU64,
    /// Mirror of the curve's threshold, checked without the lock.
    threshold: AtomicU64,
    mrc: Mutex<Mrc>,
    window: Mutex<Window>,
}

#[derive(Default)]
struct Window {
    last_total: u64,
    /// Operations in each of the last seconds, newest last.
    seconds: VecDeque<u64>,
}

/// The tenant's operation mix and rates at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub reads: u64,
    pub writes: u64,
    pub qps_1s: f64,
    pub qps_1m: f64,
    pub peak_1s: f64,
}

impl Rates {
    pub fn read_ratio(&self) -> f64 {
        let all = self.reads + self.writes;
        if all == 0 {
            1.0
        } else {
            self.reads as f64 / all as f64
        }
    }

    /// Peak second over the minute's mean (1 when idle).
    pub fn burstiness(&self) -> f64 {
        if self.qps_1m > 0.0 {
            self.peak_1s / self.qps_1m
        } else {
            1.0
        }
    }
}

impl Default for TenantStats {
    fn default() -> TenantStats {
        let mrc = Mrc::new(MRC_SAMPLES);
        TenantStats {
            ops: std::array::from_fn(|_| [AtomicU64::new(0), AtomicU64::new(0)]),
            key_refs: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            oom_refused: AtomicU64::new(0),
            threshold: AtomicU64::new(mrc.threshold()),
            mrc: Mutex::new(mrc),
            window: Mutex::new(Window::default()),
        }
    }
}

impl TenantStats {
    /// Forgets everything counted (the namespace was dropped; the next tenant given its
    /// number starts from nothing).
    pub fn reset(&self) {
        for class in &self.ops {
            for c in class {
                c.store(0, Ordering::Relaxed);
            }
        }
        for c in [&self.key_refs, &self.hits, &self.misses, &self.oom_refused] {
            c.store(0, Ordering::Relaxed);
        }
        let mrc = Mrc::new(MRC_SAMPLES);
        self.threshold.store(mrc.threshold(), Ordering::Relaxed);
        *self.mrc.lock() = mrc;
        *self.window.lock() = Window::default();
    }

    /// Adds a batch of keyspace hits and misses.
    pub fn count_lookups(&self, hits: u64, misses: u64) {
        self.hits.fetch_add(hits, Ordering::Relaxed);
        self.misses.fetch_add(misses, Ordering::Relaxed);
    }

    /// Counts a write refused with OOM.
    pub fn count_oom(&self) {
        self.oom_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// (hits, misses, OOM refusals, commands per class) since the start, for /metrics.
    pub fn lifetime_totals(&self) -> (u64, u64, u64, Vec<(&'static str, u64)>) {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let by_class = CLASSES.iter().zip(&self.ops).map(|(name, rw)| (*name, l(&rw[0]) + l(&rw[1]))).collect();
        (l(&self.hits), l(&self.misses), l(&self.oom_refused), by_class)
    }

    /// Totals since the start (or the namespace's drop): hits, misses, OOM refusals, and
    /// commands per class.
    pub fn counters(&self) -> serde_json::Value {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let by_class: serde_json::Map<String, serde_json::Value> =
            CLASSES.iter().zip(&self.ops).map(|(name, rw)| (name.to_string(), serde_json::json!(l(&rw[0]) + l(&rw[1])))).collect();
        serde_json::json!({ "hits": l(&self.hits), "misses": l(&self.misses), "oom_refused": l(&self.oom_refused), "ops_by_class": by_class })
    }

    /// Counts one command of `class`.
    #[inline]
    pub fn count(&self, class: u8, write: bool) {
        self.ops[class as usize][write as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Notes a reference to the key of `hash`.
    #[inline]
    pub fn reference(&self, hash: u64, now_ms: u64) {
        let all = self.key_refs.fetch_add(1, Ordering::Relaxed) + 1;
        if spatial(hash) < self.threshold.load(Ordering::Relaxed) {
            let mut m = self.mrc.lock();
            m.reference(hash, now_ms, all);
            self.threshold.store(m.threshold(), Ordering::Relaxed);
        }
    }

    fn totals(&self) -> (u64, u64) {
        let mut r = 0;
        let mut w = 0;
        for c in &self.ops {
            r += c[0].load(Ordering::Relaxed);
            w += c[1].load(Ordering::Relaxed);
        }
        (r, w)
    }

    /// Called once a second (the cron): closes the current second of the QPS windows.
    pub fn tick_second(&self) {
        let (r, w) = self.totals();
        let mut win = self.window.lock();
        let total = r + w;
        let done = total.saturating_sub(win.last_total);
        win.last_total = total;
        win.seconds.push_back(done);
        while win.seconds.len() > WINDOW {
            win.seconds.pop_front();
        }
    }

    pub fn rates(&self) -> Rates {
        let (reads, writes) = self.totals();
        let win = self.window.lock();
        let n = win.seconds.len().max(1) as f64;
        Rates {
            reads,
            writes,
            qps_1s: win.seconds.back().copied().unwrap_or(0) as f64,
            qps_1m: win.seconds.iter().sum::<u64>() as f64 / n,
            peak_1s: win.seconds.iter().copied().max().unwrap_or(0) as f64,
        }
    }

    /// Runs `f` over the curve (under its lock, after counting every reference so far).
    pub fn with_mrc<T>(&self, f: impl FnOnce(&Mrc) -> T) -> T {
        let mut m = self.mrc.lock();
        m.count_all(self.key_refs.load(Ordering::Relaxed));
        f(&m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_commands::class::class_of;

    #[test]
    fn windows_and_mix() {
        let t = TenantStats::default();
        for _ in 0..30 {
            t.count(class_of("string"), false);
        }
        for _ in 0..10 {
            t.count(class_of("hash"), true);
        }
        t.tick_second();
        for _ in 0..4 {
            t.count(class_of("generic"), false);
        }
        t.tick_second();
        let r = t.rates();
        assert_eq!((r.reads, r.writes), (34, 10));
        assert_eq!(r.qps_1s, 4.0);
        assert_eq!(r.qps_1m, 22.0);
        assert_eq!(r.peak_1s, 40.0);
        assert!((r.read_ratio() - 34.0 / 44.0).abs() < 1e-12);
        let class = |name: &str| {
            let ops = &t.ops[CLASSES.iter().position(|c| *c == name).unwrap()];
            (ops[0].load(Ordering::Relaxed), ops[1].load(Ordering::Relaxed))
        };
        assert_eq!(class("keyspace").0, 4);
        assert_eq!(class("hash").1, 10);
        assert_eq!(class("list"), (0, 0));
    }
}
