//! The run stage: a command's handler on the locks its caller holds, and what every origin
//! does around it — workload statistics with the reply's real size, the WAL record of a
//! write (or a storage-backed tenant's touched keys), the error reply. `nested` is the whole
//! pipeline for a command run inside another (EXEC's queue, a script's `redis.call`):
//! admission for its origin, this stage, its own counters and client-tracking reads.

use super::admit::{admit, Origin, Refusal, Verdict};
use super::{account, caller, ServerGate};
use crate::command::table::{self, CommandId, CommandSpec};
use crate::command::{lookup, CmdResult, Conn, Ctx};
use crate::keyspace::NUM_DBS;
use crate::server::state::Server;

/// Runs a command's handler as every origin does, on the locks `ctx` holds.
pub(crate) fn run(ctx: &mut Ctx, spec: &'static CommandSpec, argv: &[&[u8]]) -> CmdResult {
    let outer = std::mem::replace(&mut ctx.spec, spec);
    let wal_before = ctx.data.fx.wal_count;
    let reply_at = ctx.out.buf.len();
    let mut result = match sealed_slot(ctx, spec, argv) {
        Some(slot) => Err(crate::command::args::err(terrace_commands::slots::handed_over_error(slot))),
        None => (crate::command::handlers::of(spec))(ctx, argv),
    };
    if ctx.conn.replay_now.is_none() {
        let to = crate::stats::Observer { tenants: &ctx.srv.tenant_stats, recorder: &ctx.srv.recorder };
        crate::stats::observe(to, ctx.data.db, spec, argv, ctx.data.now, ctx.out.buf.len() - reply_at);
    }
    // Logged as the handler ended, so replay reproduces exactly what it did.
    log_write(ctx, spec, argv, result.is_ok(), wal_before);
    if ctx.srv.keyspace.noting() {
        super::events::after_command(ctx, spec, argv, result.is_ok());
    }
    if ctx.out.buf.len() > ctx.srv.limits.hard(ctx.conn.info.class()) && ctx.conn.replay_now.is_none() {
        // A reply past the client's output limit (a huge RANDMEMBER count, a range of a huge
        // collection): Redis closes such a client rather than buffer it; so does this.
        let pending = ctx.out.buf.len();
        ctx.out.buf.truncate(reply_at);
        ctx.conn.info.within_output_limit(pending);
        ctx.close = true;
        result = Err(crate::command::args::err("ERR the reply exceeds the client's output buffer limit: the client is closed"));
    }
    if ctx.data.guards.take_stray() {
        // It reached a shard it did not declare (a command table bug): what it did there
        // was dropped, so it fails rather than answer as if it had worked.
        ctx.out.buf.truncate(reply_at);
        result = Err(crate::keyspace::Undeclared.into());
    }
    if let Err(e) = &result {
        let text = e.to_string();
        ctx.srv.stats.note_error(&text);
        ctx.out.error(&text);
    }
    ctx.spec = outer;
    result
}

/// The slot of a key the command would touch that this engine has handed over (checked
/// under the command's locks, so nothing changes a sealed slot after the migration's last
/// catch-up); EXEC answers for its queued commands. The replication link, the log's replay
/// and the migration itself are not refused.
fn sealed_slot(ctx: &Ctx, spec: &CommandSpec, argv: &[&[u8]]) -> Option<u16> {
    let moving = ctx.srv.keyspace.moving();
    if !moving.sealing() || ctx.conn.from_master || ctx.conn.migrator || ctx.conn.replay_now.is_some() {
        return None;
    }
    let mut found = None;
    table::for_each_key(spec, argv, |k| found = found.or_else(|| moving.sealed(k)));
    if let (None, CommandId::Exec, Some(queue)) = (found, spec.id, &ctx.conn.multi) {
        for queued in queue {
            let argv: Vec<&[u8]> = queued.iter().map(Vec::as_slice).collect();
            if let Some(spec) = argv.first().and_then(|name| lookup(name)) {
                table::for_each_key(spec, &argv, |k| found = found.or_else(|| moving.sealed(k)));
            }
        }
    }
    found
}

/// What a command run inside another came to.
pub(crate) enum Nested {
    /// It ran; its reply (or its error) is in the output. The spec is for `redis.call`
    /// (EXEC does not need it back, and without Lua nothing else reads it).
    Ran(#[cfg_attr(not(feature = "lua"), allow(dead_code))] &'static CommandSpec),
    /// Admission refused it, with this error; nothing was written.
    Refused(String),
}

/// Runs a command inside another one (EXEC, a script), on the outer command's locks.
pub(crate) fn nested(ctx: &mut Ctx, origin: Origin, argv: &[&[u8]]) -> Nested {
    let srv = ctx.srv;
    let Some(spec) = lookup(argv[0]) else {
        let text = Refusal::Unknown.error(origin, None, argv);
        account(srv, ctx.conn, None, &Refusal::Unknown, origin, &text);
        return Nested::Refused(text);
    };
    // Never `Queue` or `Pause` for these origins: they apply to a client's own requests.
    let idx = terrace_commands::stat_index::of(spec, argv);
    if let Verdict::Refuse(r) = admit(origin, spec, argv, &caller(ctx.conn), &ServerGate { srv, locks: None }) {
        let text = r.error(origin, Some(spec), argv);
        account(srv, ctx.conn, Some(idx), &r, origin, &text);
        return Nested::Refused(text);
    }
    if matches!(origin, Origin::Script { .. }) && spec.monitored && srv.monitors.active() {
        srv.monitors.feed(ctx.data.db, "lua", argv);
    }
    let started = quanta::Instant::now();
    let result = run(ctx, spec, argv);
    let nanos = started.elapsed().as_nanos() as u64;
    // Keyspace hits and misses are the outer command's, counted once with it.
    ctx.conn.tally.add(srv, idx, spec.class != crate::stats::tenant::OTHER, nanos, result.is_err(), 0, 0);
    if ctx.conn.tracking.is_some() {
        if matches!(origin, Origin::Script { .. }) {
            // A script that reads anything has its declared keys remembered (Redis 7).
            if spec.flags.has(table::Flags::READONLY) {
                let command = srv.scripts.running.slot(ctx.conn.ns_base / crate::keyspace::NUM_DBS).command().map(|(_, c)| c);
                if let Some(command) = command {
                    let numkeys = command.get(2).and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok()).unwrap_or(0);
                    let keys: Vec<&[u8]> = command.iter().skip(3).take(numkeys).map(Vec::as_slice).collect();
                    remember(srv, ctx.conn, &keys);
                }
            }
        } else {
            track_reads(srv, ctx.conn, spec, argv);
        }
    }
    Nested::Ran(spec)
}

/// Logs a write command that ran, at the leaf: nothing if neither the WAL nor replicas
/// record writes, the command is
/// being replayed, failed or blocked, or its handler logged records itself (SPOP's SREM).
/// A storage-backed tenant's declared keys are noted instead: their after-images go to
/// storage (and, for write-back, to the WAL) when the command commits.
fn log_write(ctx: &mut Ctx, spec: &CommandSpec, argv: &[&[u8]], ok: bool, before: u32) {
    if !spec.write || !ok || ctx.block.is_some() || ctx.conn.replay_now.is_some() {
        return;
    }
    // (What the save points count: replayed records were counted before the restart.)
    ctx.srv.snapshot.changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ctx.conn.acks_writes = true;
    if ctx.srv.storage_tier().is_some_and(|t| t.backs(ctx.data.db / NUM_DBS)) {
        let db = ctx.data.db;
        for i in table::key_positions(spec, argv) {
            ctx.data.fx.touched.push((db, argv[i].to_vec()));
        }
        if spec.id == CommandId::Move {
            // Its other database is not a declared key.
            if let Some(to) = std::str::from_utf8(argv[2]).ok().and_then(|s| s.parse::<usize>().ok()).filter(|&d| d < NUM_DBS) {
                ctx.data.fx.touched.push((ctx.conn.ns_base + to, argv[1].to_vec()));
            }
        }
        return;
    }
    if !ctx.srv.records_writes() || ctx.data.fx.wal_count != before {
        return;
    }
    let (now, db) = (ctx.data.now, ctx.data.db);
    ctx.data.fx.log(now, db, ctx.conn.ns_base, argv);
}

/// CLIENT TRACKING: remembers the keys a tracking client's read command used (default mode,
/// subject to OPTIN/OPTOUT and CLIENT CACHING), and consumes the CACHING flag.
pub(crate) fn track_reads(srv: &Server, conn: &mut Conn, spec: &CommandSpec, argv: &[&[u8]]) {
    let Some(t) = &conn.tracking else { return };
    let caching_cmd = spec.id == CommandId::Client && argv.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"caching"));
    // The read-only script commands are not themselves reads: their scripts' reads count.
    let script = matches!(spec.id, CommandId::EvalRo | CommandId::EvalshaRo | CommandId::FcallRo);
    if spec.flags.has(table::Flags::READONLY) && !t.bcast && !script {
        let keys: Vec<&[u8]> = table::key_positions(spec, argv).into_iter().map(|i| argv[i]).collect();
        remember(srv, conn, &keys);
    }
    if !caching_cmd && conn.multi.is_none() {
        conn.caching = None;
    }
}

/// Remembers keys a default-mode tracking client read, unless OPTIN/OPTOUT and CLIENT
/// CACHING say otherwise for this command.
fn remember(srv: &Server, conn: &Conn, keys: &[&[u8]]) {
    let Some(t) = &conn.tracking else { return };
    if t.bcast {
        return;
    }
    let wanted = if t.optin {
        conn.caching == Some(true)
    } else if t.optout {
        conn.caching != Some(false)
    } else {
        true
    };
    if wanted {
        srv.tracking.remember(conn.info.id, keys.iter().copied());
    }
}
