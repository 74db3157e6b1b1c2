//! Holding slots while they change engine (`TERRACE.TOPOLOGY HOLD`): requests for a held
//! slot wait in the proxy instead of reaching an engine, and the hold is answered only once
//! every request sent before it has been answered — so when the coordinator then seals the
//! slots on their old engine, none of this proxy's requests is still on its way there.
//! The slot map that moves the slots (`TERRACE.TOPOLOGY SET`) releases them; so does
//! `TERRACE.TOPOLOGY RELEASE` (a migration rolled back).
//!
//! Requests in flight are counted per reactor thread (no shared cache line on the request
//! path) in two epochs: a request takes a `Ticket` in the current epoch before it looks at
//! the holds and keeps it until its reply arrives; a hold flips the epoch, then waits until
//! no ticket of the old one is left. A request that looked before the hold was set took
//! its ticket before that, so the hold waits for it; one that looks after sees the hold.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use terrace_commands::slots::SlotSet;

/// One reactor's requests in flight, per epoch parity.
#[derive(Default)]
pub struct InFlight {
    counts: [AtomicI64; 2],
}

/// A request's place in the count until its reply arrives (dropped then).
pub struct Ticket {
    flight: Arc<InFlight>,
    parity: usize,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.flight.counts[self.parity].fetch_sub(1, Ordering::SeqCst);
    }
}

/// The request a client is handling now: its ticket, shared by the replies it waits for.
pub type Current = RefCell<Option<Rc<Ticket>>>;

pub struct Holds {
    held: parking_lot::RwLock<SlotSet>,
    any: AtomicBool,
    epoch: AtomicUsize,
    reactors: parking_lot::Mutex<Vec<Arc<InFlight>>>,
    /// Bumped whenever slots are released (waiting requests look again).
    released: tokio::sync::watch::Sender<u64>,
    /// One hold at a time (each waits on one epoch's parity).
    holding: tokio::sync::Mutex<()>,
    /// Every slot is held until the console's first topology (`await_console`).
    awaiting_push: AtomicBool,
    /// How long a request waits for a held slot: far beyond a move's pause (milliseconds;
    /// at most the 30 s a write-back tenant's flush may take), so it is reached only when
    /// the coordinator that held the slot is gone mid-move (it undoes the hold when it is
    /// back) or no console has sent a map yet (`await_console`).
    limit: Duration,
}

impl Default for Holds {
    fn default() -> Self {
        Holds::new(Duration::from_secs(40))
    }
}

impl Holds {
    /// Holds whose requests wait at most `limit` for a held slot.
    pub fn new(limit: Duration) -> Holds {
        Holds {
            held: Default::default(),
            any: AtomicBool::new(false),
            epoch: AtomicUsize::new(0),
            reactors: Default::default(),
            released: tokio::sync::watch::channel(0).0,
            holding: tokio::sync::Mutex::new(()),
            awaiting_push: AtomicBool::new(false),
            limit,
        }
    }

    /// A reactor thread's counters.
    pub fn register(&self) -> Arc<InFlight> {
        let f = Arc::new(InFlight::default());
        self.reactors.lock().push(f.clone());
        f
    }

    /// A ticket in the current epoch, for a request about to be routed.
    pub fn enter(&self, flight: &Arc<InFlight>) -> Ticket {
        let parity = self.epoch.load(Ordering::SeqCst) & 1;
        flight.counts[parity].fetch_add(1, Ordering::SeqCst);
        Ticket { flight: flight.clone(), parity }
    }

    /// Whether any slot is held (one load: the request path's only cost while none is).
    pub fn any(&self) -> bool {
        self.any.load(Ordering::SeqCst)
    }

    pub fn holds(&self, slot: u16) -> bool {
        self.held.read().contains(slot)
    }

    /// The slots held now.
    pub fn held(&self) -> SlotSet {
        self.held.read().clone()
    }

    /// Notified when slots are released.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.released.subscribe()
    }

    /// The error for a request that has waited `waited` for held slot `slot`, once that is
    /// past the limit.
    pub fn held_too_long(&self, slot: u16, waited: Duration) -> Option<String> {
        if waited < self.limit {
            return None;
        }
        Some(if self.awaiting_push.load(Ordering::SeqCst) {
            format!("TRYAGAIN this proxy has not received its slot map from the console yet (await_console; waited {:.1} s); try again", waited.as_secs_f64())
        } else {
            format!("TRYAGAIN slot {slot} is moving and has been held for {:.1} s; try again", waited.as_secs_f64())
        })
    }

    /// Holds `slots`, then waits (up to `within`) until every request routed before is
    /// answered. On a timeout the slots stay held (the coordinator releases them).
    pub async fn hold(&self, slots: &SlotSet, within: Duration) -> Result<(), String> {
        let _one = self.holding.lock().await;
        {
            let mut held = self.held.write();
            for s in slots.iter() {
                held.insert(s);
            }
        }
        self.any.store(true, Ordering::SeqCst);
        let old = self.epoch.fetch_add(1, Ordering::SeqCst) & 1;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left: i64 = self.reactors.lock().iter().map(|f| f.counts[old].load(Ordering::SeqCst)).sum();
            if left <= 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("{left} requests sent before the hold were still unanswered after {within:?}"));
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// At start, with `await_console`: every slot is held until the console's first
    /// topology (`pushed`); nothing was sent yet, so there is nothing to wait for.
    pub fn hold_all_until_pushed(&self) {
        let mut all = SlotSet::default();
        all.insert_range(0, (terrace_commands::slots::SLOTS - 1) as u16);
        *self.held.write() = all;
        self.any.store(true, Ordering::SeqCst);
        self.awaiting_push.store(true, Ordering::SeqCst);
    }

    /// Whether this proxy still waits for the console's first topology (`await_console`):
    /// its tenants come with it.
    pub fn awaiting_console(&self) -> bool {
        self.awaiting_push.load(Ordering::SeqCst)
    }

    /// A topology was pushed: the hold taken at start for it ends.
    pub fn pushed(&self) {
        if self.awaiting_push.swap(false, Ordering::SeqCst) {
            tracing::info!("the console's topology arrived: serving every slot");
            self.release(None);
        }
    }

    /// Releases `slots` (None: every slot).
    pub fn release(&self, slots: Option<&SlotSet>) {
        {
            let mut held = self.held.write();
            match slots {
                None => *held = SlotSet::default(),
                Some(s) => {
                    let mut kept = SlotSet::default();
                    for slot in held.iter().filter(|x| !s.contains(*x)) {
                        kept.insert(slot);
                    }
                    *held = kept;
                }
            }
            self.any.store(!held.is_empty(), Ordering::SeqCst);
        }
        self.released.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hold_waits_for_requests_of_the_epoch_before_it() {
        let holds = Arc::new(Holds::default());
        let flight = holds.register();
        let before = holds.enter(&flight);
        let slots = SlotSet::parse("5").unwrap();
        let h = holds.clone();
        let s = slots.clone();
        let hold = tokio::spawn(async move { h.hold(&s, Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(holds.any() && holds.holds(5) && !holds.holds(6));
        // A request after the hold does not delay it.
        let _after = holds.enter(&flight);
        assert!(!hold.is_finished());
        drop(before);
        hold.await.unwrap().unwrap();
        let rx = holds.subscribe();
        holds.release(Some(&slots));
        assert!(!holds.any());
        assert!(rx.has_changed().unwrap());
    }

    #[tokio::test]
    async fn a_hold_gives_up_after_its_time_and_keeps_the_slots() {
        let holds = Holds::default();
        let flight = holds.register();
        let _stuck = holds.enter(&flight);
        let err = holds.hold(&SlotSet::parse("1-2").unwrap(), Duration::from_millis(10)).await.unwrap_err();
        assert!(err.contains("1 requests"), "{err}");
        assert!(holds.holds(2));
        holds.release(None);
        assert!(!holds.any());
    }
}
