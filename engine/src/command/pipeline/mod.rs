//! The one path every command takes, whoever asks for it: a client's request (`execute`),
//! a WAL record being replayed (`execute` on the replay connection), EXEC's queued commands
//! and a script's `redis.call` (`run::nested`, on the outer command's locks). Three stages:
//!
//! 1. `admit` — pure: whether the command may run now (arity, authentication, ACL, pub/sub
//!    context, busy script, CLIENT PAUSE, a poisoned WAL, memory, MULTI queuing), with
//!    Redis's error for each refusal in the words of its origin.
//! 2. `run` — the handler under the locks the command declared, gathering its `Effects`
//!    (WAL records or storage after-images, ready keys, hits and misses).
//! 3. `commit` — the effects, in order: what must be ordered with other writes under the
//!    locks (blocked-client registration, storage, WAL), the rest after them (counters,
//!    waking blocked clients, slow log, tracking).

mod admit;
mod commit;
mod effects;
mod events;
mod memory;
mod run;
pub mod storage;

pub use admit::{admit, busy_error, Caller, Gate, Origin, Refusal, Verdict};
pub use effects::Effects;
pub use memory::{admit_memory, admit_namespace};
pub(crate) use run::{nested, Nested};

use std::sync::atomic::Ordering;

use bytes::BytesMut;

use super::table::CommandSpec;
use super::{lock_ids, lookup, BlockRequest, CmdError, Conn, Ctx, Data, Outcome};
use crate::keyspace::{LockCap, NUM_DBS};
use crate::protocol::ReplyWriter;
use crate::server::state::{now_ms_at, Server};
use storage::ReadThrough;

/// One request from a client, with what the connection did for it before.
pub struct Request<'r> {
    pub argv: &'r [&'r [u8]],
    /// The keys read through from storage for it (checked again under its locks).
    pub read_through: Option<&'r ReadThrough>,
    /// Run again after a blocked wait, for what it waited: MONITOR was shown it the first
    /// time, and it waits again if its key now holds another type.
    pub waited: Option<&'r BlockRequest>,
}

/// Executes one request on a connection and writes its reply into `out` (unless the client
/// turned replies off with CLIENT REPLY). `locks` is the keyspace's lock capability: the
/// pipeline takes the command's locks with it; its handler never sees it.
pub fn execute(srv: &Server, locks: &LockCap, conn: &mut Conn, argv: &[&[u8]], out: &mut BytesMut) -> Outcome {
    execute_request(srv, locks, conn, &Request { argv, read_through: None, waited: None }, out)
}

/// As `execute`, for a request read through from storage or run again after a wait.
pub fn execute_request(srv: &Server, locks: &LockCap, conn: &mut Conn, req: &Request, out: &mut BytesMut) -> Outcome {
    let before = out.len();
    let outcome = execute_inner(srv, locks, conn, req, out);
    if conn.reply_off {
        out.truncate(before);
    } else if conn.reply_skip > 0 {
        out.truncate(before);
        conn.reply_skip -= 1;
    }
    if let Some(w) = conn.storage_waits.last_mut().filter(|w| w.reply_at == usize::MAX) {
        (w.reply_at, w.reply_end) = (before, out.len());
    }
    outcome
}

fn execute_inner(srv: &Server, locks: &LockCap, conn: &mut Conn, req: &Request, out: &mut BytesMut) -> Outcome {
    let argv = req.argv;
    let mut w = ReplyWriter::new(out, conn.resp3);
    let Some(spec) = lookup(argv[0]) else {
        let text = Refusal::Unknown.error(Origin::Client, None, argv);
        account(srv, conn, None, &Refusal::Unknown, Origin::Client, &text);
        w.error(&text);
        return Outcome::Done;
    };
    // Statistics are kept per command, or per subcommand for a container (CLIENT LIST).
    let idx = terrace_commands::stat_index::of(spec, argv);
    // Counts of an earlier, different command become visible before this one runs.
    conn.tally.before(srv, idx, conn.ns_base / crate::keyspace::NUM_DBS);
    if conn.acl_gen != srv.acl.generation() && !refresh_user(srv, conn) {
        return Outcome::Close;
    }
    let origin = if conn.replay_now.is_some() { Origin::Replay } else { Origin::Client };
    let verdict = admit(origin, spec, argv, &caller(conn), &ServerGate { srv, locks: Some(locks) });
    match verdict {
        Verdict::Refuse(r) => {
            if r == Refusal::Oom {
                if let Some(t) = srv.tenant_stats.get(conn.ns_base / crate::keyspace::NUM_DBS) {
                    t.count_oom();
                }
            }
            let text = r.error(origin, Some(spec), argv);
            account(srv, conn, Some(idx), &r, origin, &text);
            if spec.id == terrace_commands::table::CommandId::Exec {
                // Redis refuses EXEC itself by aborting the transaction (and its WATCHes).
                crate::command::txn::end_multi(conn);
                release_watches(srv, locks, conn);
                w.error(&format!("EXECABORT Transaction discarded because of: {text}"));
                return Outcome::Done;
            }
            w.error(&text);
            return Outcome::Done;
        }
        Verdict::Pause(until) => return Outcome::Paused(until),
        Verdict::Queue { .. } | Verdict::Run => {}
    }
    // A client's command that needs shards of a namespace another command holds whole
    // waits for it off the thread (it is told before MONITOR sees it: seen once, when it runs).
    // (Commands that lock nothing or visit shards one at a time do not wait; nor does any
    // once the holder is a busy script: admission answered those that would need its shards.)
    use super::table::Lock;
    let ns = srv.keyspace.namespace_of(conn.db);
    let client = conn.replay_now.is_none();
    let waits_for_namespace = client && matches!(spec.lock, Lock::Keys | Lock::Db | Lock::Namespace);
    if waits_for_namespace && !matches!(verdict, Verdict::Queue { .. }) && srv.keyspace.namespace_held_for(ns).is_some() && !srv.scripts.busy(ns) {
        return Outcome::NamespaceHeld;
    }
    if spec.monitored && req.waited.is_none() && srv.monitors.active() {
        srv.monitors.feed(conn.db, &conn.info.addr, argv);
    }
    if let Verdict::Queue { writes, denyoom } = verdict {
        if let Some(queue) = conn.multi.as_mut() {
            queue.push(argv.iter().map(|a| a.to_vec()).collect());
            let ns = conn.ns_base / NUM_DBS;
            conn.multi_charge.get_or_insert_with(|| srv.keyspace.queued_charge(ns)).add(crate::keyspace::queued::queued_size(argv));
        }
        conn.multi_writes |= writes;
        conn.multi_denyoom |= denyoom;
        w.simple("QUEUED");
        return Outcome::Done;
    }
    conn.info.last_cmd.store(idx, Ordering::Relaxed);
    let start = quanta::Instant::now();
    let guards = match spec.lock {
        Lock::Visit => Some(srv.keyspace.visiting(locks)),
        Lock::Namespace if waits_for_namespace => srv.keyspace.try_lock_namespace(locks, ns),
        Lock::Namespace => Some(srv.keyspace.lock_namespace(locks, ns)),
        Lock::All => Some(srv.keyspace.lock_all(locks)),
        _ if waits_for_namespace => srv.keyspace.lock_shards_unless_held(locks, lock_ids(srv, spec, argv, conn.db), ns),
        _ => Some(srv.keyspace.lock_shards(locks, lock_ids(srv, spec, argv, conn.db))),
    };
    let Some(mut guards) = guards else { return Outcome::NamespaceHeld };
    if client && conn.info.killed.load(Ordering::Relaxed) {
        // Killed while it waited for its locks (CLIENT KILL, or its namespace was dropped by
        // the command that held them): it runs nothing more.
        return Outcome::Close;
    }
    if req.read_through.is_some_and(|rt| rt.lost(srv, &mut guards)) {
        return Outcome::ReadAgain;
    }
    let (db, now) = (conn.db, conn.replay_now.unwrap_or_else(|| now_ms_at(start)));
    let mut ctx = Ctx { srv, conn, out: w, data: Data::new(&srv.keyspace, guards, db, now), block: None, close: false, in_exec: false, in_script: false, spec };
    let reply_at = ctx.out.buf.len();
    let mut result = run::run(&mut ctx, spec, argv);
    if let (Some(waited), Err(e), None) = (req.waited, &result, &ctx.block) {
        if let Some(why) = stream_gone(&mut ctx.data, spec, argv, &waited.keys) {
            // A blocked XREADGROUP whose stream or group went while it waited, as Redis 7.0
            // tells it.
            ctx.out.buf.truncate(reply_at);
            ctx.out.error(why);
            srv.stats.unnote_error(&e.to_string());
            srv.stats.note_error(why);
        }
    }
    if let (Some(waited), Err(CmdError::WrongType), None) = (req.waited, &result, &ctx.block) {
        if waits_on_another_type(&mut ctx.data, spec, &waited.keys) {
            // Redis serves a blocked client only from a key of the type it waits for: one
            // that now holds another (LPUSH, DEL, SET in one transaction) leaves it blocked.
            // (A wrong BLMOVE destination is still an error.)
            ctx.out.buf.truncate(reply_at);
            ctx.block = Some(waited.clone());
            result = Ok(());
        }
    }
    let Ctx { mut data, block, close, conn, .. } = ctx;
    commit::under_locks(srv, conn, block.as_ref(), &mut data);
    let fx = data.release();
    let nanos = start.elapsed().as_nanos() as u64;
    commit::after_locks(srv, locks, conn, &commit::Ran { idx, spec, argv, failed: result.is_err(), nanos, blocked: block.is_some() }, fx);
    if close {
        return Outcome::Close;
    }
    match block {
        Some(b) => Outcome::Block(b),
        None => Outcome::Done,
    }
}

/// Whether a key a woken blocking command waits on now holds a type other than the one it
/// takes from.
fn waits_on_another_type(data: &mut Data, spec: &CommandSpec, keys: &[Vec<u8>]) -> bool {
    use crate::command::table::CommandId::*;
    use crate::keyspace::Kind;
    let wanted = match spec.id {
        Blpop | Brpop | Blmove | Brpoplpush | Blmpop => Kind::List,
        Bzpopmin | Bzpopmax | Bzmpop => Kind::ZSet,
        Xread => Kind::Stream,
        _ => return false,
    };
    let now = data.now;
    keys.iter().any(|k| data.shard(k).peek(k, now).is_some_and(|e| e.kind() != wanted))
}

/// Why a woken XREADGROUP failed, in Redis 7.0's words, when its stream is gone or no longer
/// a stream, or its group was destroyed; None for any other failure.
fn stream_gone(data: &mut Data, spec: &CommandSpec, argv: &[&[u8]], keys: &[Vec<u8>]) -> Option<&'static str> {
    if spec.id != crate::command::table::CommandId::Xreadgroup {
        return None;
    }
    let group = argv.iter().position(|a| a.eq_ignore_ascii_case(b"GROUP")).and_then(|i| argv.get(i + 1))?;
    let now = data.now;
    for k in keys {
        match data.shard(k).get(k, now).and_then(|e| e.coll()) {
            Some(crate::keyspace::Collection::Stream(s)) if !s.groups.contains_key(*group) => {
                return Some("NOGROUP the consumer group this client was blocked on no longer exists")
            }
            Some(crate::keyspace::Collection::Stream(_)) => {}
            _ => return Some("UNBLOCKED the stream key no longer exists"),
        }
    }
    None
}

/// Drops a connection's WATCH registrations outside any command: when it closes, or when
/// its EXEC was refused (visiting the shards one at a time).
pub fn release_watches(srv: &Server, locks: &LockCap, conn: &mut Conn) {
    let mut visiting = srv.keyspace.visiting(locks);
    super::txn::release_watches_with(&srv.keyspace, &mut visiting, conn);
}

/// The connection as admission sees it.
fn caller(conn: &Conn) -> Caller<'_> {
    Caller {
        authenticated: conn.authenticated(),
        in_multi: conn.multi.is_some(),
        multi_writes: conn.multi_writes,
        multi_denyoom: conn.multi_denyoom,
        multi_bytes: conn.multi_charge.as_ref().map_or(0, |c| c.bytes()),
        subscribed_resp2: !conn.resp3 && conn.subs.any(),
        master: conn.from_master,
        user: &conn.user,
        namespace: conn.ns_base / NUM_DBS,
        peer: &conn.info.addr,
    }
}

/// The server as admission sees it; `locks` None inside EXEC or a script, which hold their
/// locks already (they never make room: admission does it for the outer command).
struct ServerGate<'a> {
    srv: &'a Server,
    locks: Option<&'a LockCap>,
}

impl Gate for ServerGate<'_> {
    fn auth_required(&self) -> bool {
        self.srv.acl.auth_required()
    }
    fn script_busy(&self, ns: usize) -> Option<bool> {
        let scripts = &self.srv.scripts;
        scripts.busy(ns).then(|| scripts.running.slot(ns).function.load(Ordering::Relaxed))
    }
    fn paused_until(&self, writes: bool, spec: &CommandSpec) -> Option<i64> {
        self.srv.paused_until(writes, spec)
    }
    fn declared_flags(&self, spec: &CommandSpec, ns: usize, argv: &[&[u8]]) -> Option<crate::scripting::shebang::Declared> {
        self.srv.scripts.declared_flags(spec.id, ns, argv)
    }
    fn over_memory(&self, ns: usize, incoming: u64) -> bool {
        let max = self.srv.runtime.maxmemory.load(Ordering::Relaxed);
        (max > 0 && crate::alloc::used_memory() > max) || !self.srv.keyspace.namespace_admits(ns, incoming)
    }
    fn namespace_room(&self, ns: usize, incoming: u64) -> bool {
        self.srv.keyspace.namespace_admits(ns, incoming)
    }
    fn queue_limit(&self) -> u64 {
        self.srv.limits.query_buffer.load(Ordering::Relaxed) as u64
    }
    fn wal_poisoned(&self) -> Option<String> {
        self.srv.wal().and_then(|w| w.poisoned())
    }
    fn storage_backed(&self, ns: usize) -> bool {
        self.srv.storage_tier().is_some_and(|t| t.backs(ns))
    }
    fn make_room(&self, ns: usize, incoming: u64) -> bool {
        match self.locks {
            Some(locks) => admit_memory(self.srv, locks) && admit_namespace(self.srv, locks, ns, incoming),
            None => !self.over_memory(ns, incoming),
        }
    }
    fn debug_command(&self) -> crate::config::DebugCommand {
        self.srv.config.debug_command
    }
    fn read_only_replica(&self) -> bool {
        self.srv.replication.is_replica()
    }
    fn too_few_replicas(&self) -> bool {
        self.srv.replication.too_few_replicas()
    }
    fn fenced(&self) -> bool {
        self.srv.replication.fenced()
    }
    fn loading(&self) -> bool {
        self.srv.replication.loading()
    }
    fn lease_lapsed(&self) -> bool {
        self.srv.replication.lease_lapsed()
    }
}

/// Counts a refusal (answered with `text`), logs an ACL denial, and marks a transaction being
/// queued as aborted.
fn account(srv: &Server, conn: &mut Conn, idx: Option<usize>, refusal: &Refusal, origin: Origin, text: &str) {
    if let Refusal::Denied(denied) = refusal {
        let context = match origin {
            Origin::Script { .. } => "lua",
            Origin::Exec => "multi",
            Origin::Client if conn.multi.is_some() => "multi",
            Origin::Client | Origin::Replay => "toplevel",
        };
        srv.acl.log_denied(denied, context, &conn.user.name, super::server::client_line(srv, &conn.info));
    }
    if origin == Origin::Client && conn.multi.is_some() && refusal.aborts_multi() {
        conn.multi_error = true;
    }
    if let Some(idx) = idx.filter(|_| refusal.counts_rejected()) {
        srv.stats.per_command[idx].rejected.fetch_add(1, Ordering::Relaxed);
    }
    if refusal.counts_error_reply() {
        srv.stats.total_error_replies.fetch_add(1, Ordering::Relaxed);
        srv.stats.note_error(text);
    }
}

/// Re-reads the connection's user after an ACL change; false if the user was deleted (the
/// connection must close).
fn refresh_user(srv: &Server, conn: &mut Conn) -> bool {
    conn.acl_gen = srv.acl.generation();
    match srv.acl.user(&conn.user.name) {
        Some(u) => {
            conn.user = u;
            true
        }
        None => false,
    }
}
