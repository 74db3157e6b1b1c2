//! The catch-up rounds' bookkeeping: what one network batch holds (`Batch`), and when the
//! rounds have done what they can before the seal (`Convergence`).

use std::time::Instant;

use super::{BATCH, BATCH_BYTES};

/// The keys a catch-up round has queued on the link and not yet sent: at most `BATCH` keys,
/// or about `BATCH_BYTES`, go in one network batch (the copy's bounds per lock hold).
pub(super) struct Batch {
    pub keys: usize,
    bytes: usize,
    /// When the first of them was read: the work `pace` leaves room after.
    pub started: Instant,
}

impl Default for Batch {
    fn default() -> Self {
        Batch { keys: 0, bytes: 0, started: Instant::now() }
    }
}

impl Batch {
    pub fn add(&mut self, bytes: usize) {
        self.keys += 1;
        self.bytes += bytes;
    }

    pub fn full(&self) -> bool {
        self.keys >= BATCH || self.bytes >= BATCH_BYTES
    }
}

/// A round this small or smaller makes the job `Ready` to seal.
pub(super) const READY_ROUND: u64 = 1000;
/// Rounds in a row no smaller than the smallest so far: the keys the clients keep changing
/// are changed again within a round, and more rounds would not make the last one shorter.
const STALLED_ROUNDS: u32 = 8;

/// Decides when catching up has converged: a small round, or rounds that stopped
/// shrinking (then the sealed round sends about one round's keys — the clients' working
/// set in the slots — rather than the job catching up for ever).
#[derive(Debug)]
pub(super) struct Convergence {
    smallest: u64,
    stalled: u32,
}

impl Default for Convergence {
    fn default() -> Self {
        Convergence { smallest: u64::MAX, stalled: 0 }
    }
}

impl Convergence {
    /// Takes a round's size; true once the job may be sealed.
    pub fn round(&mut self, keys: u64) -> bool {
        if keys < self.smallest {
            self.smallest = keys;
            self.stalled = 0;
        } else {
            self.stalled += 1;
        }
        keys <= READY_ROUND || self.stalled >= STALLED_ROUNDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_round_is_ready_at_once() {
        assert!(Convergence::default().round(0));
        assert!(Convergence::default().round(READY_ROUND));
    }

    #[test]
    fn shrinking_rounds_are_waited_for() {
        let mut c = Convergence::default();
        for keys in (2000..100_000).rev().step_by(500) {
            assert!(!c.round(keys), "{keys} keys, still shrinking");
        }
    }

    #[test]
    fn rounds_that_stopped_shrinking_are_ready_after_a_few() {
        // The working set is changed again within every round: about 1,200 keys each time.
        let mut c = Convergence::default();
        let sizes = [5000, 1300, 1210, 1250, 1190, 1220, 1230, 1200, 1195, 1240, 1210, 1205, 1230, 1199];
        let ready: Vec<bool> = sizes.iter().map(|&k| c.round(k)).collect();
        let first = ready.iter().position(|&r| r).expect("ready in the end");
        // 1190 was the smallest; the eight rounds after it, none smaller, make it ready.
        assert_eq!(first, 4 + STALLED_ROUNDS as usize);
        assert!(ready[..first].iter().all(|&r| !r));
    }

    #[test]
    fn a_batch_is_full_at_its_keys_or_its_bytes() {
        let mut b = Batch::default();
        for _ in 0..BATCH - 1 {
            b.add(10);
        }
        assert!(!b.full());
        b.add(10);
        assert!(b.full());
        let mut b = Batch::default();
        b.add(BATCH_BYTES);
        assert!(b.full());
    }
}
