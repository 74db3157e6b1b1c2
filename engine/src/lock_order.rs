//! The order in which the engine's shared mutexes may be held together, checked in debug
//! builds (every test build): a `Ranked` mutex is taken only by a thread holding ranked
//! locks of lower ranks alone. A lock taken twice by one thread (parking_lot's mutexes are
//! not reentrant: the namespace list's, re-entered by a tenant's drop, hung every engine of a
//! replicated appliance) or two taken in opposite orders by two threads panics there, naming
//! both, the first time a test walks the path — instead of hanging a production engine the
//! day two threads meet. Release builds compile it to the plain mutex.
//!
//! The ranks, lowest first (a thread may hold them together only in this order; the
//! keyspace's shard locks come before all of them and have their own check):
//! 1. `Backlog` — a replication stream's bytes (`replication::backlog`): a commit appends
//!    under its shard locks, and the stream names namespaces while it is held.
//! 2. `Namespaces` — the tenants' namespace list (`Server::namespaces`): the WAL's pending
//!    records and the script registry may be taken under it (a snapshot's header, a new
//!    namespace's record), never a backlog.
//! 3. `Clients` — the client registry (`Server::clients`): killing a client under it takes
//!    no other lock.

use std::ops::{Deref, DerefMut};

/// A ranked lock's place in the order (see the module's list).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    Backlog,
    Namespaces,
    Clients,
}

/// A mutex with a rank.
pub struct Ranked<T> {
    rank: Rank,
    inner: parking_lot::Mutex<T>,
}

/// A held `Ranked` mutex.
pub struct RankedGuard<'a, T> {
    guard: parking_lot::MutexGuard<'a, T>,
    #[cfg(debug_assertions)]
    rank: Rank,
}

impl<T> Ranked<T> {
    pub const fn new(rank: Rank, value: T) -> Self {
        Ranked { rank, inner: parking_lot::Mutex::new(value) }
    }

    /// Takes the lock; in debug builds, panics if this thread holds this lock or one ranked
    /// at or above it.
    pub fn lock(&self) -> RankedGuard<'_, T> {
        #[cfg(debug_assertions)]
        held::enter(self.rank);
        RankedGuard {
            guard: self.inner.lock(),
            #[cfg(debug_assertions)]
            rank: self.rank,
        }
    }

    pub fn rank(&self) -> Rank {
        self.rank
    }
}

impl<T> RankedGuard<'_, T> {
    /// Waits on `condvar` for at most `timeout`, releasing the lock meanwhile (while it is
    /// released this thread does not hold it). True if it timed out.
    pub fn wait_for(&mut self, condvar: &parking_lot::Condvar, timeout: std::time::Duration) -> bool {
        condvar.wait_for(&mut self.guard, timeout).timed_out()
    }
}

impl<T> Deref for RankedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for RankedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(debug_assertions)]
impl<T> Drop for RankedGuard<'_, T> {
    fn drop(&mut self) {
        held::leave(self.rank);
    }
}

#[cfg(debug_assertions)]
mod held {
    use crate::lock_order::Rank;
    use std::cell::RefCell;

    thread_local! {
        /// The ranked locks this thread holds, in the order it took them.
        static HELD: RefCell<Vec<Rank>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn enter(rank: Rank) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(&top) = held.iter().max() {
                assert!(
                    top < rank,
                    "lock order: taking the {rank:?} lock while this thread holds the {top:?} lock (held: {held:?}); \
                     ranked locks are taken in the order of lock_order::Rank, each once"
                );
            }
            held.push(rank);
        });
    }

    pub(super) fn leave(rank: Rank) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(i) = held.iter().rposition(|&r| r == rank) {
                held.remove(i);
            }
        });
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn locks_taken_in_rank_order_are_fine_and_released_ones_are_forgotten() {
        let (backlog, names, clients) = (Ranked::new(Rank::Backlog, 1), Ranked::new(Rank::Namespaces, 2), Ranked::new(Rank::Clients, 3));
        {
            let _b = backlog.lock();
            let _n = names.lock();
            let _c = clients.lock();
        }
        let _n = names.lock();
        drop(_n);
        let _b = backlog.lock();
        assert_eq!(*_b, 1);
    }

    #[test]
    #[should_panic(expected = "taking the Namespaces lock while this thread holds the Namespaces lock")]
    fn a_lock_taken_twice_by_one_thread_panics_instead_of_hanging() {
        let names = Ranked::new(Rank::Namespaces, ());
        let _held = names.lock();
        let _again = names.lock();
    }

    #[test]
    #[should_panic(expected = "taking the Backlog lock while this thread holds the Namespaces lock")]
    fn locks_taken_out_of_order_panic() {
        let (backlog, names) = (Ranked::new(Rank::Backlog, ()), Ranked::new(Rank::Namespaces, ()));
        let _n = names.lock();
        let _b = backlog.lock();
    }

    #[test]
    fn a_condvar_wait_keeps_the_guard_ranked() {
        let backlog = Ranked::new(Rank::Backlog, 0);
        let condvar = parking_lot::Condvar::new();
        let mut g = backlog.lock();
        assert!(g.wait_for(&condvar, std::time::Duration::from_millis(1)));
        *g += 1;
        drop(g);
        let names = Ranked::new(Rank::Namespaces, ());
        let _n = names.lock();
        let _b = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(backlog.lock())));
        assert!(_b.is_err(), "the backlog after the namespaces is out of order");
    }
}
