//! Lua scripting (EVAL, EVALSHA, SCRIPT, FUNCTION), as Redis 7.0 runs it: Lua 5.1, the
//! `redis` library (`call`, `pcall`, `error_reply`, `status_reply`, `sha1hex`, `log`,
//! `setresp`…), `bit`, `cjson`, `cmsgpack` and `struct`, read-only globals, and Redis's reply
//! conversions in both directions.
//!
//! Each reactor thread owns one Lua VM (`vm`; a Lua state is not `Send`) with the functions it
//! has compiled; the script bodies are shared in `ScriptCache`, so SCRIPT LOAD on one
//! connection serves EVALSHA on any. A script runs while its EVAL holds every shard lock, so
//! it is atomic like a transaction, and `redis.call` runs command handlers directly on those
//! locks. The Lua side is the cargo feature `lua`; without it the shared state below still
//! exists (the server holds it) and the scripting commands refuse.

#[cfg(feature = "lua")]
mod convert;
pub mod functions;
#[cfg(feature = "lua")]
mod libs;
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

/// Script bodies by SHA1, shared by all threads, plus the state of the running script for
/// SCRIPT KILL.
pub struct ScriptCache {
    bodies: Mutex<HashMap<String, Arc<[u8]>>>,
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
        }
    }
}

/// After this long a running script makes the server "busy" (Redis's busy-reply-threshold,
/// its default; CONFIG SET changes it): new clients are served by the control thread and most
/// commands answer BUSY.
pub const BUSY_THRESHOLD_MS: i64 = 5000;

impl ScriptCache {
    pub fn insert(&self, body: &[u8]) -> String {
        let sha = sha1_hex(body);
        self.bodies.lock().entry(sha.clone()).or_insert_with(|| Arc::from(body));
        sha
    }
    pub fn get(&self, sha: &str) -> Option<Arc<[u8]>> {
        self.bodies.lock().get(sha).cloned()
    }
    pub fn contains(&self, sha: &str) -> bool {
        self.bodies.lock().contains_key(sha)
    }
    pub fn flush(&self) {
        self.bodies.lock().clear();
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
    /// Whether a script has been running longer than the busy threshold.
    pub fn busy(&self) -> bool {
        self.running.load(Ordering::Relaxed)
            && crate::clock::now_ms() - self.started_ms.load(Ordering::Relaxed) > self.busy_threshold_ms.load(Ordering::Relaxed)
    }
}
