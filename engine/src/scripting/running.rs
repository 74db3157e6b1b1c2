//! The scripts running now: one slot per namespace. A script holds its namespace's shard
//! locks while it runs, so at most one runs per namespace; scripts of different tenants run
//! at the same time on different reactors, and neither waits for the other. What Redis says
//! of "the running script" — SCRIPT KILL, FUNCTION KILL, FUNCTION STATS, `BUSY` replies — is
//! here said of the caller's namespace's slot: one tenant can neither stop nor see another's
//! script, and a tenant's long script makes only its own commands (and the clients of the
//! reactor it holds, `server::busy`) wait.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

thread_local! {
    /// The namespace of the script this thread runs (usize::MAX: none); Lua's hooks ask it.
    static RUNNING_HERE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// What is known of one namespace's running script.
pub struct Slot {
    running: AtomicBool,
    /// When it started (unix ms).
    started_ms: AtomicI64,
    /// It has written (SCRIPT KILL then refuses: UNKILLABLE).
    pub wrote: AtomicBool,
    kill_requested: AtomicBool,
    /// The client running it and its reactor (`server::busy` answers that reactor's other
    /// clients while the script is busy).
    pub client: AtomicU64,
    pub reactor: AtomicUsize,
    /// A library function (FCALL), not an EVAL.
    pub function: AtomicBool,
    /// Its name (the function's, or the EVAL's SHA1) and the command that runs it.
    command: Mutex<Option<(String, Vec<Vec<u8>>)>>,
    /// Taken by `server::busy` while it answers one request, and by the script's end before
    /// `running` goes false: the reactor runs its connections again only after.
    pub busy_gate: Mutex<()>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            running: AtomicBool::new(false),
            started_ms: AtomicI64::new(0),
            wrote: AtomicBool::new(false),
            kill_requested: AtomicBool::new(false),
            client: AtomicU64::new(0),
            reactor: AtomicUsize::new(usize::MAX),
            function: AtomicBool::new(false),
            command: Mutex::new(None),
            busy_gate: Mutex::new(()),
        }
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// How long the script has run, ms.
    pub fn running_ms(&self) -> i64 {
        crate::clock::now_ms() - self.started_ms.load(Ordering::Relaxed)
    }

    /// The running script's name and command, if one runs.
    pub fn command(&self) -> Option<(String, Vec<Vec<u8>>)> {
        self.command.lock().clone().filter(|_| self.is_running())
    }
}

/// Every namespace's slot, and the engine-wide stop (SHUTDOWN ends every script).
pub struct RunningScripts {
    slots: Box<[Slot]>,
    shutting_down: AtomicBool,
}

/// A script is running in a slot until this is dropped.
pub struct Running<'a> {
    slot: &'a Slot,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        {
            // Not while `server::busy` is answering one of this reactor's clients.
            let _gate = self.slot.busy_gate.lock();
            self.slot.running.store(false, Ordering::Release);
        }
        *self.slot.command.lock() = None;
        self.slot.kill_requested.store(false, Ordering::Relaxed);
        RUNNING_HERE.with(|r| r.set(usize::MAX));
    }
}

/// Who starts a script, for its slot.
pub struct Runner<'a> {
    pub client: u64,
    pub reactor: usize,
    pub function: bool,
    pub name: &'a str,
    pub command: Vec<Vec<u8>>,
}

impl RunningScripts {
    pub fn new(namespaces: usize) -> RunningScripts {
        RunningScripts { slots: (0..namespaces.max(1)).map(|_| Slot::new()).collect(), shutting_down: AtomicBool::new(false) }
    }

    /// Namespace `ns`'s slot (a namespace past the configured count shares the last one).
    pub fn slot(&self, ns: usize) -> &Slot {
        &self.slots[ns.min(self.slots.len() - 1)]
    }

    /// Every slot with its namespace.
    pub fn slots(&self) -> impl Iterator<Item = (usize, &Slot)> {
        self.slots.iter().enumerate()
    }

    /// Marks a script of namespace `ns` running on this thread until the guard drops.
    pub fn start(&self, ns: usize, runner: Runner) -> Running<'_> {
        let slot = self.slot(ns);
        slot.wrote.store(false, Ordering::Relaxed);
        slot.kill_requested.store(false, Ordering::Relaxed);
        slot.started_ms.store(crate::clock::now_ms(), Ordering::Relaxed);
        slot.client.store(runner.client, Ordering::Relaxed);
        slot.reactor.store(runner.reactor, Ordering::Relaxed);
        slot.function.store(runner.function, Ordering::Relaxed);
        *slot.command.lock() = Some((runner.name.to_string(), runner.command));
        RUNNING_HERE.with(|r| r.set(ns));
        slot.running.store(true, Ordering::Release);
        Running { slot }
    }

    /// Whether the script this thread runs must stop (SCRIPT/FUNCTION KILL of its namespace,
    /// or SHUTDOWN): asked by Lua's instruction hook and its pcall.
    pub fn stop_requested_here(&self) -> bool {
        if self.shutting_down.load(Ordering::Relaxed) {
            return true;
        }
        let ns = RUNNING_HERE.with(Cell::get);
        ns != usize::MAX && self.slot(ns).kill_requested.load(Ordering::Relaxed)
    }

    /// SHUTDOWN: every running script stops, even one that wrote.
    pub fn stop_all(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Whether namespace `ns`'s script has run past `threshold_ms`.
    pub fn busy(&self, ns: usize, threshold_ms: i64) -> bool {
        let slot = self.slot(ns);
        slot.is_running() && slot.running_ms() > threshold_ms
    }

    /// Whether any namespace's script has run past `threshold_ms`.
    pub fn any_busy(&self, threshold_ms: i64) -> bool {
        self.slots.iter().any(|s| s.is_running() && s.running_ms() > threshold_ms)
    }

    /// SCRIPT KILL (`function` false) / FUNCTION KILL (true) from namespace `ns`: asks its
    /// running script to stop, unless it has written or is of the other kind.
    pub fn kill(&self, ns: usize, function: bool) -> Result<(), &'static str> {
        let slot = self.slot(ns);
        if !slot.is_running() {
            return Err("NOTBUSY No scripts in execution right now.");
        }
        if slot.wrote.load(Ordering::Relaxed) {
            return Err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        }
        match (function, slot.function.load(Ordering::Relaxed)) {
            (false, true) => Err("BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."),
            (true, false) => Err("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."),
            _ => {
                slot.kill_requested.store(true, Ordering::Relaxed);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(function: bool) -> Runner<'static> {
        Runner { client: 7, reactor: 0, function, name: "f", command: vec![b"fcall".to_vec()] }
    }

    #[test]
    fn a_kill_reaches_only_its_own_namespaces_script() {
        let scripts = RunningScripts::new(4);
        let running = scripts.start(1, runner(false));
        assert_eq!(scripts.kill(2, false), Err("NOTBUSY No scripts in execution right now."));
        assert!(!scripts.stop_requested_here());
        assert!(scripts.slot(2).command().is_none());
        assert!(scripts.slot(1).command().is_some());
        assert!(scripts.kill(1, true).unwrap_err().starts_with("BUSY"));
        assert_eq!(scripts.kill(1, false), Ok(()));
        assert!(scripts.stop_requested_here());
        drop(running);
        assert!(!scripts.slot(1).is_running());
        assert!(!scripts.stop_requested_here());
        assert_eq!(scripts.kill(1, false), Err("NOTBUSY No scripts in execution right now."));
    }

    #[test]
    fn busy_is_per_namespace_and_shutdown_stops_every_script() {
        let scripts = RunningScripts::new(3);
        let _running = scripts.start(2, runner(true));
        assert!(scripts.busy(2, -1));
        assert!(!scripts.busy(0, -1));
        assert!(scripts.any_busy(-1));
        assert!(!scripts.any_busy(60_000));
        scripts.slot(2).wrote.store(true, Ordering::Relaxed);
        assert!(scripts.kill(2, true).unwrap_err().starts_with("UNKILLABLE"));
        assert!(!scripts.stop_requested_here());
        scripts.stop_all();
        assert!(scripts.stop_requested_here());
    }
}
