//! Bytes of commands a namespace's clients have queued in MULTI: memory the tenant holds
//! before its transaction runs, counted against its quota beside its data.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// One transaction's queued bytes, charged to its namespace's counter while it lives
/// (EXEC, DISCARD, a refused EXEC or the connection's end drops it).
#[derive(Debug)]
pub struct QueuedCharge {
    counter: Arc<AtomicI64>,
    bytes: u64,
}

impl QueuedCharge {
    pub fn new(counter: Arc<AtomicI64>) -> QueuedCharge {
        QueuedCharge { counter, bytes: 0 }
    }

    /// Charges `bytes` more (one more queued command).
    pub fn add(&mut self, bytes: u64) {
        self.bytes += bytes;
        self.counter.fetch_add(bytes as i64, Ordering::Relaxed);
    }

    /// What this transaction has queued so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for QueuedCharge {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.bytes as i64, Ordering::Relaxed);
    }
}

/// What a queued command costs to hold: its arguments and their vectors.
pub fn queued_size(argv: &[&[u8]]) -> u64 {
    argv.iter().map(|a| a.len() as u64 + 24).sum::<u64>() + 24
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_is_given_back_when_dropped() {
        let counter = Arc::new(AtomicI64::new(0));
        let mut a = QueuedCharge::new(counter.clone());
        let mut b = QueuedCharge::new(counter.clone());
        a.add(100);
        b.add(queued_size(&[b"SET", b"k", b"v"]));
        assert_eq!(counter.load(Ordering::Relaxed), 100 + 5 + 3 * 24 + 24);
        drop(a);
        assert_eq!(counter.load(Ordering::Relaxed), 101);
        drop(b);
        assert_eq!(counter.load(Ordering::Relaxed), 0);
    }
}
