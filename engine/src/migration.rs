//! A slot migration's state, shared by `TERRACE.MIGRATE` (which asks) and the migration
//! thread (`server::migrate`, which does the work): the job, its phase and counters, and the
//! requests the thread has not taken yet.
//!
//! On the source engine a job goes: `Purging` (the target drops whatever it holds in the
//! slots: leftovers of an older owner or of an aborted copy) → `Copying` (every key of the
//! slots, in batches, while shards note the keys that change) → `CatchingUp` (the noted keys
//! sent again, or deleted) → `Ready` (what is left to catch up is small, or the rounds stopped
//! shrinking — the clients change their working set again within a round; the coordinator
//! may hold the slots on the proxies and seal) → `Sealed` (commands on the slots are refused; the
//! last notes are sent; write-back keys of the slots flushed) → `HandedOver` (the target has
//! everything; the coordinator switches the slot map) → `Deleting` (FINISH: the slots' keys
//! leave this engine, lazily) → `Done`, the slots still sealed (no longer this engine's).
//! ABORT, or a failure, before `Deleting` ends in `Failed`/`Aborted` with the slots
//! unsealed: this engine still owns them. On a target, `PURGE` runs `Deleting` alone and
//! unseals the slots (they are coming to it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use terrace_commands::slots::SlotSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Purging,
    Copying,
    CatchingUp,
    Ready,
    Sealed,
    HandedOver,
    Deleting,
    Done,
    Aborted,
    Failed,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Purging => "purging",
            Phase::Copying => "copying",
            Phase::CatchingUp => "catching-up",
            Phase::Ready => "ready",
            Phase::Sealed => "sealed",
            Phase::HandedOver => "handed-over",
            Phase::Deleting => "deleting",
            Phase::Done => "done",
            Phase::Aborted => "aborted",
            Phase::Failed => "failed",
        }
    }

    /// Whether a job is under way (a new one may not start).
    pub fn running(self) -> bool {
        !matches!(self, Phase::Idle | Phase::Done | Phase::Aborted | Phase::Failed)
    }
}

/// What START asks for.
#[derive(Clone)]
pub struct Job {
    /// The coordinator's name for it (so it can tell, after a restart, that the job is gone).
    pub id: String,
    /// `host:port` of the target engine; None for a PURGE (this engine deletes alone).
    pub target: Option<String>,
    pub slots: SlotSet,
    /// Copy at most this many bytes a second (0: as fast as the batches go).
    pub rate: u64,
    /// Work at most this share of the time, in percent (the rest is the engine's).
    pub pace: u8,
    /// The target's password (START's `AUTH`; None: this engine's `masterauth`).
    pub auth: Option<String>,
}

impl std::fmt::Debug for Job {
    // (Without the target's password.)
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .field("target", &self.target)
            .field("slots", &self.slots)
            .field("rate", &self.rate)
            .field("pace", &self.pace)
            .finish_non_exhaustive()
    }
}

/// Requests the thread has not taken yet.
#[derive(Debug, Default)]
pub struct Requests {
    pub start: Option<Job>,
    pub seal: bool,
    pub finish: bool,
    pub abort: bool,
}

/// The job and how far it got.
#[derive(Debug, Clone)]
pub struct Status {
    pub phase: Phase,
    pub job: Option<Job>,
    pub error: Option<String>,
    /// When the job started and when it was sealed (unix ms; 0: not yet).
    pub started_ms: i64,
    pub sealed_ms: i64,
    /// How long the last catch-up after sealing took.
    pub seal_catch_up_ms: u64,
}

/// The counters of the running (or last) job.
#[derive(Debug, Default)]
pub struct Counters {
    pub keys_copied: AtomicU64,
    pub bytes_copied: AtomicU64,
    pub keys_caught_up: AtomicU64,
    /// Keys noted in the last catch-up round.
    pub last_round: AtomicU64,
    pub keys_deleted: AtomicU64,
    /// Keys of the slots found in the first pass (what there is to copy).
    pub keys_total: AtomicU64,
}

pub struct Migration {
    status: Mutex<Status>,
    requests: Mutex<Requests>,
    wake: Condvar,
    pub counters: Counters,
}

impl Default for Migration {
    fn default() -> Self {
        Migration {
            status: Mutex::new(Status { phase: Phase::Idle, job: None, error: None, started_ms: 0, sealed_ms: 0, seal_catch_up_ms: 0 }),
            requests: Mutex::new(Requests::default()),
            wake: Condvar::new(),
            counters: Counters::default(),
        }
    }
}

/// Why a request was refused, in the words `TERRACE.MIGRATE` answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("ERR a migration is under way (phase {0}); ABORT it or wait")]
    Running(&'static str),
    #[error("ERR no migration is at a phase that allows {what} (phase {phase})")]
    WrongPhase { what: &'static str, phase: &'static str },
}

impl Migration {
    pub fn status(&self) -> Status {
        self.status.lock().clone()
    }

    /// Starts a job (the thread takes it within its next wait).
    pub fn start(&self, job: Job, now_ms: i64) -> Result<(), Refused> {
        let mut st = self.status.lock();
        if st.phase.running() {
            return Err(Refused::Running(st.phase.name()));
        }
        for c in [
            &self.counters.keys_copied,
            &self.counters.bytes_copied,
            &self.counters.keys_caught_up,
            &self.counters.last_round,
            &self.counters.keys_deleted,
            &self.counters.keys_total,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        *st = Status {
            phase: if job.target.is_some() { Phase::Purging } else { Phase::Deleting },
            job: Some(job.clone()),
            error: None,
            started_ms: now_ms,
            sealed_ms: 0,
            seal_catch_up_ms: 0,
        };
        *self.requests.lock() = Requests { start: Some(job), ..Default::default() };
        self.wake.notify_all();
        Ok(())
    }

    /// Asks the thread to seal (from `Ready`, or while it still catches up).
    pub fn seal(&self) -> Result<(), Refused> {
        self.ask(&[Phase::CatchingUp, Phase::Ready], "SEAL", |r| r.seal = true)
    }

    /// Asks the thread to delete the slots' keys (after the hand-over).
    pub fn finish(&self) -> Result<(), Refused> {
        self.ask(&[Phase::HandedOver], "FINISH", |r| r.finish = true)
    }

    /// Asks the thread to give the job up (anything before `Deleting`).
    pub fn abort(&self) -> Result<(), Refused> {
        self.ask(&[Phase::Purging, Phase::Copying, Phase::CatchingUp, Phase::Ready, Phase::Sealed, Phase::HandedOver], "ABORT", |r| r.abort = true)
    }

    fn ask(&self, phases: &[Phase], what: &'static str, set: impl FnOnce(&mut Requests)) -> Result<(), Refused> {
        let st = self.status.lock();
        if !phases.contains(&st.phase) {
            return Err(Refused::WrongPhase { what, phase: st.phase.name() });
        }
        set(&mut self.requests.lock());
        self.wake.notify_all();
        Ok(())
    }

    /// The thread: waits up to `wait` for a request, then takes what there is.
    pub fn take_requests(&self, wait: Duration) -> Requests {
        let mut r = self.requests.lock();
        if r.start.is_none() && !r.seal && !r.finish && !r.abort {
            self.wake.wait_for(&mut r, wait);
        }
        std::mem::take(&mut *r)
    }

    /// Whether ABORT was asked (the thread checks between batches); consumes it.
    pub fn take_abort(&self) -> bool {
        std::mem::take(&mut self.requests.lock().abort)
    }

    /// Whether SEAL was asked; consumes it.
    pub fn take_seal(&self) -> bool {
        std::mem::take(&mut self.requests.lock().seal)
    }

    /// Whether FINISH was asked; consumes it.
    pub fn take_finish(&self) -> bool {
        std::mem::take(&mut self.requests.lock().finish)
    }

    /// The thread moves the job on.
    pub fn set_phase(&self, phase: Phase) {
        self.status.lock().phase = phase;
    }

    pub fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock());
    }

    /// The job ends with an error (the slots stay this engine's).
    pub fn fail(&self, why: String) {
        let mut st = self.status.lock();
        st.phase = Phase::Failed;
        st.error = Some(why);
    }

    /// STATUS's answer.
    pub fn to_json(&self) -> serde_json::Value {
        let st = self.status();
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        serde_json::json!({
            "phase": st.phase.name(),
            "id": st.job.as_ref().map(|j| j.id.clone()),
            "target": st.job.as_ref().and_then(|j| j.target.clone()),
            "slots": st.job.as_ref().map(|j| j.slots.to_string()),
            "rate": st.job.as_ref().map(|j| j.rate),
            "pace": st.job.as_ref().map(|j| j.pace),
            "error": st.error,
            "started_ms": st.started_ms,
            "sealed_ms": st.sealed_ms,
            "seal_catch_up_ms": st.seal_catch_up_ms,
            "keys_total": load(&c.keys_total),
            "keys_copied": load(&c.keys_copied),
            "bytes_copied": load(&c.bytes_copied),
            "keys_caught_up": load(&c.keys_caught_up),
            "last_round": load(&c.last_round),
            "keys_deleted": load(&c.keys_deleted),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(target: Option<&str>) -> Job {
        Job { id: "j1".into(), target: target.map(str::to_string), slots: SlotSet::parse("0-9").unwrap(), rate: 0, pace: 50, auth: None }
    }

    #[test]
    fn one_job_at_a_time_and_requests_by_phase() {
        let m = Migration::default();
        assert!(matches!(m.seal(), Err(Refused::WrongPhase { .. })));
        m.start(job(Some("127.0.0.1:1")), 1).unwrap();
        assert_eq!(m.status().phase, Phase::Purging);
        assert_eq!(m.start(job(Some("x:1")), 2), Err(Refused::Running("purging")));
        assert!(m.take_requests(Duration::ZERO).start.is_some());
        assert!(matches!(m.finish(), Err(Refused::WrongPhase { .. })));
        m.set_phase(Phase::Ready);
        m.seal().unwrap();
        assert!(m.take_seal() && !m.take_seal());
        m.set_phase(Phase::HandedOver);
        m.finish().unwrap();
        assert!(m.take_requests(Duration::ZERO).finish);
        m.fail("boom".into());
        m.start(job(None), 3).unwrap();
        assert_eq!(m.status().phase, Phase::Deleting);
        assert_eq!(m.to_json()["slots"], "0-9");
    }
}
