//! Recording a tenant's traffic for the cost framework (`TERRACE.RECORD`, `terrace record`):
//! while a recording runs, every data command on a sampled key of the tenant is kept — time,
//! database, value size and its arguments, long ones (values) replaced by their length — in a
//! bounded buffer the recorder drains. Keys are sampled spatially (by hash, as the miss-ratio
//! curve is), so a sampled key keeps all its references and the trace keeps the key
//! popularity; `sample_line` writes the same keys' data for the data sample.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

/// Arguments longer than this are recorded as their length only.
pub const KEEP_ARG: usize = 64;
/// Entries kept until drained (a recording that is not drained drops the rest, counted).
pub const DEFAULT_MAX: usize = 1_000_000;

pub struct Recorder {
    /// Namespace being recorded + 1 (0: none), and its sampling threshold: read by every
    /// command without the lock.
    active: AtomicUsize,
    threshold: AtomicU64,
    inner: Mutex<Option<Recording>>,
}

pub struct Recording {
    pub ns: usize,
    pub rate: f64,
    started: Instant,
    lines: String,
    held: usize,
    max: usize,
    pub recorded: u64,
    pub dropped: u64,
}

fn hex(out: &mut String, b: &[u8]) {
    for x in b {
        let _ = write!(out, "{x:02x}");
    }
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder { active: AtomicUsize::new(0), threshold: AtomicU64::new(0), inner: Mutex::new(None) }
    }
}

impl Recorder {
    /// The namespace being recorded, if any.
    #[inline]
    pub fn recording(&self) -> Option<usize> {
        self.active.load(Ordering::Relaxed).checked_sub(1)
    }

    pub fn start(&self, ns: usize, rate: f64, max: usize) -> Result<(), String> {
        let mut g = self.inner.lock();
        if let Some(r) = g.as_ref() {
            return Err(format!("a recording of namespace {} is already running", r.ns));
        }
        *g = Some(Recording { ns, rate, started: Instant::now(), lines: String::new(), held: 0, max, recorded: 0, dropped: 0 });
        self.threshold.store(super::mrc::threshold_for(rate), Ordering::Relaxed);
        self.active.store(ns + 1, Ordering::Relaxed);
        Ok(())
    }

    /// The running recording's sampling threshold (compare with `mrc::spatial`).
    pub fn threshold(&self) -> u64 {
        self.threshold.load(Ordering::Relaxed)
    }

    /// Keeps one command: `time_us \t db \t value_size \t arg,arg,…` (hex; `#n`: n bytes elided).
    pub fn note(&self, db: usize, argv: &[&[u8]], value_size: usize) {
        let mut g = self.inner.lock();
        let Some(r) = g.as_mut() else { return };
        if r.held >= r.max {
            r.dropped += 1;
            return;
        }
        let micros = r.started.elapsed().as_micros();
        let _ = write!(r.lines, "{micros}\t{}\t{value_size}\t", db % crate::keyspace::NUM_DBS);
        for (i, a) in argv.iter().enumerate() {
            if i > 0 {
                r.lines.push(',');
            }
            if a.len() > KEEP_ARG {
                let _ = write!(r.lines, "#{}", a.len());
            } else if i == 0 {
                hex(&mut r.lines, &a.to_ascii_uppercase());
            } else {
                hex(&mut r.lines, a);
            }
        }
        r.lines.push('\n');
        r.held += 1;
        r.recorded += 1;
    }

    /// Takes the lines kept so far.
    pub fn drain(&self) -> Option<String> {
        let mut g = self.inner.lock();
        let r = g.as_mut()?;
        r.held = 0;
        Some(std::mem::take(&mut r.lines))
    }

    /// Ends the recording: (its namespace, rate, seconds, recorded, dropped, lines not drained).
    pub fn stop(&self) -> Option<(usize, f64, f64, u64, u64, String)> {
        let mut g = self.inner.lock();
        let r = g.take()?;
        self.active.store(0, Ordering::Relaxed);
        Some((r.ns, r.rate, r.started.elapsed().as_secs_f64(), r.recorded, r.dropped, r.lines))
    }
}

/// One data-sample line: `db \t key \t pttl \t dump` (hex; pttl -1 for no expiry).
pub fn sample_line(out: &mut String, db: usize, key: &[u8], pttl: i64, dump: &[u8]) {
    let _ = write!(out, "{}\t", db % crate::keyspace::NUM_DBS);
    hex(out, key);
    let _ = write!(out, "\t{pttl}\t");
    hex(out, dump);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_elide_values_and_stop_at_the_bound() {
        let r = Recorder::default();
        assert_eq!(r.recording(), None);
        r.start(3, 1.0, 2).unwrap();
        assert!(r.start(4, 1.0, 2).is_err());
        assert_eq!(r.recording(), Some(3));
        let big = vec![b'x'; 100];
        r.note(49, &[b"set", b"k", &big], 100);
        r.note(48, &[b"get", b"k"], 7);
        r.note(48, &[b"get", b"k"], 7);
        let lines = r.drain().unwrap();
        let l: Vec<&str> = lines.lines().collect();
        assert_eq!(l.len(), 2);
        assert!(l[0].ends_with("\t1\t100\t534554,6b,#100"), "{}", l[0]);
        assert!(l[1].ends_with("\t0\t7\t474554,6b"), "{}", l[1]);
        r.note(48, &[b"get", b"k"], 7);
        let (ns, _, _, recorded, dropped, rest) = r.stop().unwrap();
        assert_eq!((ns, recorded, dropped), (3, 3, 1));
        assert_eq!(rest.lines().count(), 1);
        assert_eq!(r.recording(), None);
    }
}
