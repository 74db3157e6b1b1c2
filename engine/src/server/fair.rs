//! Fair turns between tenants on one reactor (X-DB's resource isolation, TierBase's
//! multi-tenancy). A reactor runs every connection it holds on one thread, and tokio's run
//! queue is first come, first served: a tenant with many busy connections, or long pipelines
//! of heavy commands, would get the thread in proportion to what it sends, and another
//! tenant's GET would wait behind all of it.
//!
//! So each tenant (namespace) has one *turn* per reactor. A connection runs requests only
//! while it holds its tenant's turn, and for at most `tenant_slice` at a stretch; then it
//! hands the turn to the next waiting connection of its tenant and queues behind it (or, with
//! no one waiting, keeps it and yields once, so that the connections of other tenants that
//! became ready meanwhile run first — if other tenants have connections on this reactor at
//! all: a reactor serving one tenant never yields for fairness). The reactor's run queue thus holds at most one
//! connection per tenant: tenants take the thread round robin, one slice each, however many
//! connections they have, and a tenant's new request waits for at most one slice of each
//! other busy tenant (plus whatever single command is running then — a command, or a script,
//! is never cut in the middle). Within a tenant, connections take turns first come, first
//! served.
//!
//! Whoever starts a turn it waited for, or goes on after using up a slice, first yields to
//! the runtime (`tokio::task::yield_now`, which holds the task back until the I/O driver has
//! been polled): sockets that became readable meanwhile — another tenant's GET — are found
//! and queued before the turn goes on.
//!
//! A turn is only ever held while its connection runs commands or yields for the slice's
//! end: the connection gives it back before anything else it may wait for (its socket,
//! storage, a blocking command), so every holder is runnable and waiting for a turn cannot
//! deadlock.
//!
//! Hand-written: tokio has no notion of groups of tasks sharing a thread fairly, and no
//! crate schedules tasks of a current-thread runtime by group.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// One tenant's turn on this reactor.
#[derive(Default)]
struct Tenant {
    /// Connections of the tenant on this reactor, counted from their arrival until they go.
    residents: usize,
    /// A connection holds the turn (running, or handed it and about to run).
    held: bool,
    /// Connections waiting for the turn, first come first served.
    waiting: VecDeque<Rc<Waiter>>,
}

#[derive(Default)]
struct Waiter {
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

thread_local! {
    /// This reactor's tenants' turns, by namespace (grown to the largest seen).
    static TURNS: RefCell<Vec<Tenant>> = const { RefCell::new(Vec::new()) };
}

/// Namespace `ns`'s turn.
fn tenant(turns: &mut Vec<Tenant>, ns: usize) -> &mut Tenant {
    if turns.len() <= ns {
        turns.resize_with(ns + 1, Tenant::default);
    }
    &mut turns[ns]
}

/// Hands tenant `ns`'s turn to its next waiting connection, or frees it.
fn pass_on(ns: usize) {
    // (At thread exit the table may be gone already, and with it every waiter.)
    let _ = TURNS.try_with(|t| {
        let mut turns = t.borrow_mut();
        let tenant = tenant(&mut turns, ns);
        match tenant.waiting.pop_front() {
            Some(next) => {
                next.granted.set(true);
                if let Some(w) = next.waker.borrow_mut().take() {
                    w.wake();
                }
            }
            None => tenant.held = false,
        }
    });
}

/// Takes tenant `ns`'s turn if it is free; else queues for it.
fn take_or_queue(ns: usize) -> Option<Rc<Waiter>> {
    TURNS.with(|t| {
        let mut turns = t.borrow_mut();
        let tenant = tenant(&mut turns, ns);
        if !tenant.held {
            tenant.held = true;
            return None;
        }
        let waiter = Rc::new(Waiter::default());
        tenant.waiting.push_back(waiter.clone());
        Some(waiter)
    })
}

/// Whether other connections of tenant `ns` wait for its turn.
fn others_waiting(ns: usize) -> bool {
    TURNS.with(|t| t.borrow().get(ns).is_some_and(|tenant| !tenant.waiting.is_empty()))
}

/// Whether a tenant other than `ns` has connections on this reactor.
fn others_resident(ns: usize) -> bool {
    TURNS.with(|t| t.borrow().iter().enumerate().any(|(i, tenant)| i != ns && tenant.residents > 0))
}

/// Moves a connection's residency on this reactor from namespace `from` to `to`.
fn move_residency(from: Option<usize>, to: Option<usize>) {
    let _ = TURNS.try_with(|t| {
        let mut turns = t.borrow_mut();
        if let Some(ns) = from {
            let tenant = tenant(&mut turns, ns);
            tenant.residents = tenant.residents.saturating_sub(1);
        }
        if let Some(ns) = to {
            tenant(&mut turns, ns).residents += 1;
        }
    });
}

/// Whether a tenant other than `ns` holds or waits for its turn on this reactor.
fn others_active(ns: usize) -> bool {
    TURNS.with(|t| t.borrow().iter().enumerate().any(|(i, tenant)| i != ns && (tenant.held || !tenant.waiting.is_empty())))
}

/// Waiting for a turn; dropped before it is granted, it leaves the queue, and after, it
/// passes the turn on.
struct Wait {
    ns: usize,
    waiter: Rc<Waiter>,
    done: bool,
}

impl Future for Wait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.waiter.granted.get() {
            self.done = true;
            return Poll::Ready(());
        }
        *self.waiter.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self.waiter.granted.get() {
            pass_on(self.ns);
        } else {
            let _ = TURNS.try_with(|t| {
                if let Some(tenant) = t.borrow_mut().get_mut(self.ns) {
                    tenant.waiting.retain(|w| !Rc::ptr_eq(w, &self.waiter));
                }
            });
        }
    }
}

/// A connection's claim on its tenant's turn (at most one held at a time).
pub struct Turn {
    slice: Duration,
    /// The namespace whose turn is held, and since when.
    held: Option<(usize, quanta::Instant)>,
    /// The namespace this connection is counted a resident of on this reactor.
    resident: Option<usize>,
}

impl Turn {
    /// Turns of `slice` (zero: no fairness — requests run as they come) for a connection
    /// that has just come to this reactor in namespace `ns`: from now on, the other tenants
    /// running here let its requests in at the end of each of their slices.
    pub fn new(slice: Duration, ns: usize) -> Turn {
        let mut turn = Turn { slice, held: None, resident: None };
        if !slice.is_zero() {
            move_residency(None, Some(ns));
            turn.resident = Some(ns);
        }
        turn
    }

    /// Takes namespace `ns`'s turn, waiting behind its other connections if one holds it.
    pub async fn take(&mut self, ns: usize) {
        if self.slice.is_zero() {
            return;
        }
        if let Some((held, _)) = self.held {
            if held == ns {
                return;
            }
            self.give_back();
        }
        if self.resident != Some(ns) {
            move_residency(self.resident, Some(ns));
            self.resident = Some(ns);
        }
        if let Some(waiter) = take_or_queue(ns) {
            Wait { ns, waiter, done: false }.await;
            // Handed the turn by another connection of the tenant, which woke this one
            // directly: let the runtime look for newly readable sockets first (it does once
            // its run queue drains), or connections of one tenant handing the turn to each
            // other would keep the queue full and other tenants' requests undiscovered.
            tokio::task::yield_now().await;
        }
        self.held = Some((ns, quanta::Instant::now()));
    }

    /// Gives the turn back (to the tenant's next waiting connection), before the connection
    /// waits for anything else.
    pub fn give_back(&mut self) {
        if let Some((ns, _)) = self.held.take() {
            pass_on(ns);
        }
    }

    /// Whether this connection's replies may wait for the other connections the reactor
    /// found ready (written once per burst, as Redis writes before it sleeps): not while
    /// another tenant is running here, whose commands they would wait behind.
    pub fn may_batch_replies(&self, ns: usize) -> bool {
        self.slice.is_zero() || !others_active(ns)
    }

    /// After a request of namespace `ns`: once the slice is used up, lets the others run —
    /// the tenant's next waiting connection (this one queues behind it), and the other
    /// tenants' ready connections.
    pub async fn after_request(&mut self, ns: usize) {
        let Some((held, since)) = self.held else {
            return self.take(ns).await;
        };
        if held != ns {
            // The request moved the connection to another namespace.
            return self.take(ns).await;
        }
        if since.elapsed() < self.slice {
            return;
        }
        if others_waiting(ns) {
            self.give_back();
            self.take(ns).await;
        } else if !others_resident(ns) {
            // Alone on this reactor: nobody else's requests to let in (tokio's own polling
            // of the I/O driver keeps the tenant's other connections going).
            self.held = Some((ns, quanta::Instant::now()));
        } else {
            // Kept across the yield: the tenant's connections that become ready meanwhile
            // queue behind this one rather than run beside it.
            tokio::task::yield_now().await;
            self.held = Some((ns, quanta::Instant::now()));
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.give_back();
        move_residency(self.resident.take(), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_free() -> bool {
        TURNS.with(|t| t.borrow().iter().all(|tenant| !tenant.held && tenant.waiting.is_empty()))
    }

    fn residents(ns: usize) -> usize {
        TURNS.with(|t| t.borrow().get(ns).map_or(0, |tenant| tenant.residents))
    }

    fn run<F: Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    /// Runs `requests` requests of `cost` each for a connection of `ns` (arrived on the
    /// reactor when `Turn::new` was called), recording the order.
    async fn connection(mut turn: Turn, ns: usize, name: &'static str, requests: usize, cost: Duration, log: Rc<RefCell<Vec<&'static str>>>) {
        turn.take(ns).await;
        for _ in 0..requests {
            let until = std::time::Instant::now() + cost;
            while std::time::Instant::now() < until {}
            log.borrow_mut().push(name);
            turn.after_request(ns).await;
        }
        turn.give_back();
    }

    #[test]
    fn a_tenant_with_many_connections_gets_one_turn_per_round() {
        let log = Rc::new(RefCell::new(Vec::new()));
        run(async {
            let mut tasks = Vec::new();
            // Tenant 1: four connections of heavy requests; tenant 2: one, started last.
            for name in ["a1", "a2", "a3", "a4"] {
                let turn = Turn::new(Duration::from_micros(500), 1);
                tasks.push(tokio::task::spawn_local(connection(turn, 1, name, 20, Duration::from_micros(300), log.clone())));
            }
            let turn = Turn::new(Duration::from_micros(500), 2);
            tasks.push(tokio::task::spawn_local(connection(turn, 2, "b", 10, Duration::from_micros(300), log.clone())));
            for t in tasks {
                t.await.unwrap();
            }
        });
        let log = log.borrow();
        let b_done = log.iter().rposition(|n| *n == "b").unwrap();
        let a_before = log[..b_done].iter().filter(|n| n.starts_with('a')).count();
        // B's ten requests finish while tenant 1 has run about as many slices (two requests
        // a slice): round robin between tenants, not between connections (which would let
        // tenant 1 run four times as many).
        assert!(a_before <= 2 * 10 + 4, "tenant 1 ran {a_before} requests before tenant 2's ten were done: {log:?}");
        assert_eq!(log.iter().filter(|n| n.starts_with('a')).count(), 80);
    }

    #[test]
    fn a_dropped_waiter_leaves_the_queue_and_the_turn_moves_on() {
        run(async {
            let mut holder = Turn::new(Duration::from_millis(1), 0);
            holder.take(3).await;
            // A connection that stops waiting (closed) must not keep the turn from others.
            let gone = tokio::task::spawn_local(async {
                let mut t = Turn::new(Duration::from_millis(1), 0);
                t.take(3).await;
            });
            tokio::task::yield_now().await;
            gone.abort();
            let _ = gone.await;
            let next = tokio::task::spawn_local(async {
                let mut t = Turn::new(Duration::from_millis(1), 0);
                t.take(3).await;
                true
            });
            tokio::task::yield_now().await;
            holder.give_back();
            assert!(next.await.unwrap());
            assert!(all_free(), "the turn is free once nobody holds or waits for it");
        });
    }

    #[test]
    fn a_connection_is_a_resident_of_its_current_namespace_until_it_goes() {
        run(async {
            let mut a = Turn::new(Duration::from_millis(1), 0);
            a.take(4).await;
            a.give_back();
            assert_eq!(residents(4), 1, "still here while idle");
            assert!(!others_resident(4) && others_resident(5));
            a.take(6).await;
            assert_eq!((residents(4), residents(6)), (0, 1), "moved to another namespace");
            drop(a);
            assert_eq!(residents(6), 0);
            assert!(all_free());
        });
    }

    #[test]
    fn replies_are_batched_only_while_no_other_tenant_runs_here() {
        run(async {
            let mut a = Turn::new(Duration::from_millis(1), 0);
            let mut b = Turn::new(Duration::from_millis(1), 0);
            b.take(2).await;
            assert!(b.may_batch_replies(2), "alone on the reactor");
            a.take(1).await;
            assert!(!b.may_batch_replies(2), "tenant 1 runs here: its commands would delay tenant 2's replies");
            a.give_back();
            assert!(b.may_batch_replies(2));
            b.give_back();
            assert!(Turn::new(Duration::ZERO, 0).may_batch_replies(2), "no turns: as before");
        });
    }

    #[test]
    fn a_zero_slice_turns_fairness_off() {
        run(async {
            let mut a = Turn::new(Duration::ZERO, 0);
            let mut b = Turn::new(Duration::ZERO, 0);
            a.take(1).await;
            b.take(1).await;
            a.after_request(1).await;
            assert!(all_free());
        });
    }
}
