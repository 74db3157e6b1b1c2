//! Lua scripting (EVAL, EVALSHA, SCRIPT, FUNCTION), as Redis 7.0 runs it: Lua 5.1, the
//! `redis` library (`call`, `pcall`, `error_reply`, `status_reply`, `sha1hex`, `log`,
//! `setresp`…), `bit`, `cjson`, `cmsgpack` and `struct`, read-only globals, and Redis's reply
//! conversions in both directions.
//!
//! Each reactor thread owns one Lua VM (`vm`; a Lua state is not `Send`) with the functions it
//! has compiled; the script bodies are shared in `ScriptCache`, so SCRIPT LOAD on one
//! connection serves EVALSHA on any connection of the same namespace: scripts, like
//! FUNCTION libraries, are a tenant's own (EVALSHA, SCRIPT EXISTS and SCRIPT FLUSH see the
//! caller's namespace's). A script runs while its EVAL holds every shard lock, so
//! it is atomic like a transaction, and `redis.call` runs command handlers directly on those
//! locks. The Lua side is the cargo feature `lua`; without it the shared state below still
//! exists (the server holds it) and the scripting commands refuse.

#[cfg(feature = "lua")]
mod cjson;
#[cfg(feature = "lua")]
mod convert;
pub mod functions;
#[cfg(feature = "lua")]
mod libs;
pub mod shebang;
#[cfg(feature = "lua")]
mod vm;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use sha1::{Digest, Sha1};

#[cfg(feature = "lua")]
pub use convert::{lua_to_reply, reply_to_lua};
#[cfg(feature = "lua")]
pub use libs::{call_args, resp_version, script_line, CallError};
#[cfg(feature = "lua")]
pub use vm::{compile, table_field, with_vm, ScriptError, Vm};

/// SHA1 of a script body, in lowercase hex (the EVALSHA name).
pub fn sha1_hex(body: &[u8]) -> String {
    Sha1::digest(body).iter().map(|b| format!("{b:02x}")).collect()
}

/// A cached script: its namespace and SHA1.
type ScriptKey = (usize, String);

/// Script bodies by namespace and SHA1, shared by all threads, plus the state of the running
/// script for SCRIPT KILL.
pub struct ScriptCache {
    bodies: Mutex<HashMap<ScriptKey, Arc<[u8]>>>,
    /// Bumped by SCRIPT FLUSH so threads drop what they compiled.
    generation: AtomicU64,
    pub running: AtomicBool,
    /// When the running script started (unix ms).
    pub started_ms: std::sync::atomic::AtomicI64,
    pub wrote: AtomicBool,
    pub kill_requested: AtomicBool,
    /// FUNCTION libraries.
    pub functions: functions::Registry,
    /// `busy-reply-threshold` (`lua-time-limit`), ms.
    pub busy_threshold_ms: std::sync::atomic::AtomicI64,
    /// The client running the script and its reactor (`server::busy` answers that reactor's
    /// other clients while the script is busy).
    pub running_client: AtomicU64,
    /// The running script is a library function (FCALL), not an EVAL.
    pub running_function: AtomicBool,
    /// The running script's name (the function's, or the EVAL's SHA1) and the command that
    /// runs it (FUNCTION STATS).
    pub running_command: Mutex<Option<(String, Vec<Vec<u8>>)>>,
    /// The running script's namespace (FUNCTION STATS shows it to that namespace alone).
    pub running_namespace: std::sync::atomic::AtomicUsize,
    pub running_reactor: std::sync::atomic::AtomicUsize,
    /// Taken by `server::busy` while it answers one request, and by the script's end before
    /// `running` goes false: the reactor runs its connections again only after.
    pub busy_gate: Mutex<()>,
}

impl Default for ScriptCache {
    fn default() -> Self {
        ScriptCache {
            bodies: Default::default(),
            generation: Default::default(),
            running: Default::default(),
            started_ms: Default::default(),
            wrote: Default::default(),
            kill_requested: Default::default(),
            functions: Default::default(),
            busy_threshold_ms: std::sync::atomic::AtomicI64::new(BUSY_THRESHOLD_MS),
            running_client: AtomicU64::new(0),
            running_function: AtomicBool::new(false),
            running_command: Mutex::new(None),
            running_namespace: std::sync::atomic::AtomicUsize::new(0),
            running_reactor: std::sync::atomic::AtomicUsize::new(usize::MAX),
            busy_gate: Mutex::new(()),
        }
    }
}

/// After this long a running script makes the server "busy" (Redis's busy-reply-threshold,
/// its default; CONFIG SET changes it): new clients are served by the control thread and most
/// commands answer BUSY.
pub const BUSY_THRESHOLD_MS: i64 = 5000;

impl ScriptCache {
    /// Keeps a script body for namespace `ns`; its SHA1.
    pub fn insert(&self, ns: usize, body: &[u8]) -> String {
        let sha = sha1_hex(body);
        self.bodies.lock().entry((ns, sha.clone())).or_insert_with(|| Arc::from(body));
        sha
    }
    pub fn get(&self, ns: usize, sha: &str) -> Option<Arc<[u8]>> {
        self.bodies.lock().get(&(ns, sha.to_string())).cloned()
    }
    pub fn contains(&self, ns: usize, sha: &str) -> bool {
        self.bodies.lock().contains_key(&(ns, sha.to_string()))
    }
    /// SCRIPT FLUSH: namespace `ns`'s scripts go (threads drop what they compiled, which
    /// other namespaces' scripts only pay for with a compilation).
    pub fn flush(&self, ns: usize) {
        self.bodies.lock().retain(|(space, _), _| *space != ns);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
    /// The flags the script or function a script command of namespace `ns` names declared
    /// (None: not a script command, an unknown script, or a script without a shebang).
    pub fn declared_flags(&self, id: terrace_commands::table::CommandId, ns: usize, argv: &[&[u8]]) -> Option<shebang::Declared> {
        use terrace_commands::table::CommandId;
        let of_body = |body: &[u8]| shebang::parse(body).ok().flatten().map(|(d, _)| d);
        match id {
            CommandId::Eval | CommandId::EvalRo => of_body(argv.get(1)?),
            CommandId::Evalsha | CommandId::EvalshaRo => {
                let sha = String::from_utf8_lossy(argv.get(1)?).to_ascii_lowercase();
                of_body(&self.get(ns, &sha)?)
            }
            CommandId::Fcall | CommandId::FcallRo => {
                let name = std::str::from_utf8(argv.get(1)?).ok()?;
                self.functions.flags_of(ns, name).map(|f| shebang::Declared::of_function(&f))
            }
            _ => None,
        }
    }

    /// SCRIPT KILL (`function` false) / FUNCTION KILL (true): asks the running script to
    /// stop, unless it has written or is of the other kind (each command stops its own).
    pub fn kill(&self, function: bool) -> Result<(), &'static str> {
        if !self.running.load(Ordering::Acquire) {
            return Err("NOTBUSY No scripts in execution right now.");
        }
        if self.wrote.load(Ordering::Relaxed) {
            return Err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        }
        match (function, self.running_function.load(Ordering::Relaxed)) {
            (false, true) => Err("BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."),
            (true, false) => Err("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."),
            _ => {
                self.kill_requested.store(true, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// FUNCTION STATS: the running script (its name, command and how long it has run) and
    /// namespace `ns`'s library counts.
    pub fn write_stats(&self, ns: usize, out: &mut crate::protocol::ReplyWriter) {
        let (libs, fns) = self.functions.counts(ns);
        out.map_len(2);
        out.bulk(b"running_script");
        // Another tenant's running script (its name, keys and arguments) is not shown.
        let own = self.running_namespace.load(Ordering::Relaxed) == ns;
        let running = self.running_command.lock().clone().filter(|_| own && self.running.load(Ordering::Acquire));
        match running {
            Some((name, command)) => {
                out.map_len(3);
                out.bulk(b"name");
                out.bulk(name.as_bytes());
                out.bulk(b"command");
                out.array_len(command.len());
                for a in &command {
                    out.bulk(a);
                }
                out.bulk(b"duration_ms");
                out.int(crate::clock::now_ms() - self.started_ms.load(Ordering::Relaxed));
            }
            None => out.null(),
        }
        out.bulk(b"engines");
        out.map_len(1);
        out.bulk(b"LUA");
        out.map_len(2);
        out.bulk(b"libraries_count");
        out.int(libs as i64);
        out.bulk(b"functions_count");
        out.int(fns as i64);
    }

    /// Whether a script has been running longer than the busy threshold.
    pub fn busy(&self) -> bool {
        self.running.load(Ordering::Relaxed)
            && crate::clock::now_ms() - self.started_ms.load(Ordering::Relaxed) > self.busy_threshold_ms.load(Ordering::Relaxed)
    }
}
