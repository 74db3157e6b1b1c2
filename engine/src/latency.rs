//! The latency monitor (`latency-monitor-threshold`, LATENCY LATEST/HISTORY/RESET/DOCTOR):
//! events — a command (`command`, or `fast-command` for O(1) ones), an active expiry cycle
//! (`expire-cycle`) — that took at least the threshold, kept per event as Redis keeps them:
//! one sample per second (the worst of that second), the last 160, and the worst ever.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Samples kept per event (Redis's LATENCY_TS_LEN).
const SAMPLES: usize = 160;

#[derive(Default)]
struct Series {
    /// (unix seconds, milliseconds), oldest first.
    samples: VecDeque<(i64, u64)>,
    max: u64,
}

/// The latest sample of an event, and its worst.
pub struct Latest {
    pub event: &'static str,
    pub time: i64,
    pub latest: u64,
    pub max: u64,
}

#[derive(Default)]
pub struct LatencyMonitor {
    /// Milliseconds; 0: off.
    threshold_ms: AtomicU64,
    events: Mutex<BTreeMap<&'static str, Series>>,
}

impl LatencyMonitor {
    pub fn set_threshold(&self, ms: u64) {
        self.threshold_ms.store(ms, Ordering::Relaxed);
    }

    /// Whether an event of `nanos` is recorded (cheap: one load, no lock, when off).
    #[inline]
    pub fn crosses(&self, nanos: u64) -> bool {
        let t = self.threshold_ms.load(Ordering::Relaxed);
        t > 0 && nanos / 1_000_000 >= t
    }

    /// Records an event that took `nanos`, at unix time `now_secs`, if it crosses the threshold.
    pub fn observe(&self, event: &'static str, nanos: u64, now_secs: i64) {
        if !self.crosses(nanos) {
            return;
        }
        let ms = nanos / 1_000_000;
        let mut events = self.events.lock();
        let series = events.entry(event).or_default();
        series.max = series.max.max(ms);
        match series.samples.back_mut() {
            Some((t, worst)) if *t == now_secs => *worst = (*worst).max(ms),
            _ => {
                series.samples.push_back((now_secs, ms));
                if series.samples.len() > SAMPLES {
                    series.samples.pop_front();
                }
            }
        }
    }

    /// Every event's latest sample and worst, by name.
    pub fn latest(&self) -> Vec<Latest> {
        let events = self.events.lock();
        events.iter().filter_map(|(event, s)| s.samples.back().map(|&(time, latest)| Latest { event, time, latest, max: s.max })).collect()
    }

    /// An event's samples, oldest first (none for an unknown event).
    pub fn history(&self, event: &[u8]) -> Vec<(i64, u64)> {
        let events = self.events.lock();
        events.iter().find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(event)).map(|(_, s)| s.samples.iter().copied().collect()).unwrap_or_default()
    }

    /// Forgets the named events (all when none are named); how many there were.
    pub fn reset(&self, names: &[&[u8]]) -> usize {
        let mut events = self.events.lock();
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        let before = events.len();
        events.retain(|name, _| !names.iter().any(|n| name.as_bytes().eq_ignore_ascii_case(n)));
        before - events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_a_second_the_worst_kept() {
        let m = LatencyMonitor::default();
        m.observe("command", 300_000_000, 10);
        assert!(m.latest().is_empty(), "off until a threshold is set");
        m.set_threshold(100);
        m.observe("command", 50_000_000, 10);
        m.observe("command", 300_000_000, 10);
        m.observe("command", 200_000_000, 10);
        m.observe("command", 150_000_000, 11);
        assert_eq!(m.history(b"command"), vec![(10, 300), (11, 150)]);
        let l = &m.latest()[0];
        assert_eq!((l.event, l.time, l.latest, l.max), ("command", 11, 150, 300));
        assert_eq!(m.reset(&[b"nosuch"]), 0);
        assert_eq!(m.reset(&[]), 1);
        assert!(m.history(b"command").is_empty());
    }
}
