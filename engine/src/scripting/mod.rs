//! Lua scripting (EVAL, EVALSHA, SCRIPT, FUNCTION), as Redis 7.0 runs it: Lua 5.1, the
//! `redis` library (`call`, `pcall`, `error_reply`, `status_reply`, `sha1hex`, `log`,
//! `setresp`…), `bit`, `cjson`, `cmsgpack` and `struct`, read-only globals, and Redis's reply
//! conversions in both directions.
//!
//! Each reactor thread owns one Lua VM (`vm`; a Lua state is not `Send`) with the functions it
//! has compiled; the script bodies are shared in `ScriptCache`, so SCRIPT LOAD on one
//! connection serves EVALSHA on any connection of the same namespace: scripts, like
//! FUNCTION libraries, are a tenant's own (EVALSHA, SCRIPT EXISTS and SCRIPT FLUSH see the
//! caller's namespace's). A script runs while its EVAL holds every shard lock of
//! its namespace, so it is atomic like a transaction (other tenants do not wait for it), and `redis.call` runs command handlers directly on those
//! locks. The Lua side is the cargo feature `lua`; without it the shared state below still
//! exists (the server holds it) and the scripting commands refuse.

#[cfg(feature = "lua")]
mod cjson;
#[cfg(feature = "lua")]
mod convert;
pub mod functions;
#[cfg(feature = "lua")]
mod libs;
pub mod running;
pub mod shebang;
#[cfg(feature = "lua")]
mod vm;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// One namespace's script bodies by SHA1.
type Scripts = HashMap<String, Arc<[u8]>>;

/// Script bodies by namespace and SHA1, shared by all threads, the FUNCTION libraries, and
/// the scripts running now (`running`).
pub struct ScriptCache {
    /// Per namespace, by SHA1 (looked up by `&str`: EVALSHA allocates nothing).
    bodies: Mutex<HashMap<usize, Scripts>>,
    /// Bumped by SCRIPT FLUSH so threads drop what they compiled.
    generation: AtomicU64,
    /// The running scripts, one slot per namespace (SCRIPT KILL, BUSY, FUNCTION STATS).
    pub running: running::RunningScripts,
    /// FUNCTION libraries.
    pub functions: functions::Registry,
    /// `busy-reply-threshold` (`lua-time-limit`), ms.
    pub busy_threshold_ms: std::sync::atomic::AtomicI64,
    /// How much a script run may add to its thread's Lua heap (bytes).
    pub run_memory_limit: AtomicU64,
}

impl ScriptCache {
    /// The cache of an engine with `namespaces` namespaces.
    pub fn new(namespaces: usize) -> ScriptCache {
        ScriptCache {
            bodies: Default::default(),
            generation: Default::default(),
            running: running::RunningScripts::new(namespaces),
            functions: Default::default(),
            busy_threshold_ms: std::sync::atomic::AtomicI64::new(BUSY_THRESHOLD_MS),
            run_memory_limit: AtomicU64::new(RUN_MEMORY_LIMIT),
        }
    }
}

/// The most one script run (EVAL, FCALL, FUNCTION LOAD's code) may grow its thread's Lua heap
/// by: past it the allocation fails ("not enough memory") and the script stops. Redis has no
/// bound; one tenant's `string.rep('x', 2^30)` must not take the engine's memory.
pub const RUN_MEMORY_LIMIT: u64 = 256 << 20;

/// Heap growth over a run after which the heap is collected at once (the run's garbage is
/// not left for the collector's next cycle, which a quiet VM may not reach for long).
pub const COLLECT_AFTER_GROWTH: usize = 8 << 20;

/// After this long a running script makes the server "busy" (Redis's busy-reply-threshold,
/// its default; CONFIG SET changes it): new clients are served by the control thread and most
/// commands answer BUSY.
pub const BUSY_THRESHOLD_MS: i64 = 5000;

impl ScriptCache {
    /// Keeps a script body for namespace `ns`; its SHA1.
    pub fn insert(&self, ns: usize, body: &[u8]) -> String {
        let sha = sha1_hex(body);
        self.bodies.lock().entry(ns).or_default().entry(sha.clone()).or_insert_with(|| Arc::from(body));
        sha
    }
    pub fn get(&self, ns: usize, sha: &str) -> Option<Arc<[u8]>> {
        self.bodies.lock().get(&ns).and_then(|scripts| scripts.get(sha)).cloned()
    }
    pub fn contains(&self, ns: usize, sha: &str) -> bool {
        self.bodies.lock().get(&ns).is_some_and(|scripts| scripts.contains_key(sha))
    }
    /// SCRIPT FLUSH: namespace `ns`'s scripts go (threads drop what they compiled, which
    /// other namespaces' scripts only pay for with a compilation).
    pub fn flush(&self, ns: usize) {
        self.bodies.lock().remove(&ns);
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

    /// FUNCTION STATS: the running script (its name, command and how long it has run) and
    /// namespace `ns`'s library counts.
    pub fn write_stats(&self, ns: usize, out: &mut crate::protocol::ReplyWriter) {
        let (libs, fns) = self.functions.counts(ns);
        out.map_len(2);
        out.bulk(b"running_script");
        // Another tenant's running script (its name, keys and arguments) is not shown.
        let slot = self.running.slot(ns);
        match slot.command() {
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
                out.int(slot.running_ms());
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

    /// Whether namespace `ns`'s script has been running longer than the busy threshold.
    pub fn busy(&self, ns: usize) -> bool {
        self.running.busy(ns, self.busy_threshold_ms.load(Ordering::Relaxed))
    }

    /// Whether some namespace's script has been running longer than the busy threshold.
    pub fn any_busy(&self) -> bool {
        self.running.any_busy(self.busy_threshold_ms.load(Ordering::Relaxed))
    }
}
