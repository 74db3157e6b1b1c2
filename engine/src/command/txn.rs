//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC holds every shard lock while the queued commands run, so a transaction is atomic
//! with respect to all other clients on all reactor threads. WATCH records each key's touch
//! epoch (see `Shard::touch`); any write, deletion, expiry or flush moves it on.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::args::err;
use super::{lookup, CmdResult, Conn, Ctx};
use crate::keyspace::Keyspace;
use crate::server::state::Server;

/// A watched key: (db, key, epoch at WATCH, whether it existed then).
pub type Watched = (usize, Vec<u8>, u64, bool);

pub fn multi(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(err("ERR MULTI calls can not be nested"));
    }
    ctx.conn.multi = Some(Vec::new());
    ctx.conn.multi_error = false;
    ctx.conn.info.in_multi.store(true, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

pub fn discard(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.conn.multi.is_none() {
        return Err(err("ERR DISCARD without MULTI"));
    }
    end_multi(ctx.conn);
    release_watches(&ctx.srv.keyspace, ctx.conn);
    ctx.out.ok();
    Ok(())
}

pub fn end_multi(conn: &mut Conn) {
    conn.multi = None;
    conn.multi_error = false;
    conn.info.in_multi.store(false, Ordering::Relaxed);
}

/// Drops a connection's WATCH registrations (caller holds no shard locks).
pub fn release_watches(ks: &Keyspace, conn: &mut Conn) {
    for (db, key, _, _) in conn.watched.drain(..) {
        ks.lock_one(ks.shard_id(db, &key)).unwatch(&key);
    }
}

pub fn watch(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(err("ERR WATCH inside MULTI is not allowed"));
    }
    let db = ctx.data.db;
    for key in &argv[1..] {
        if ctx.conn.watched.iter().any(|(d, k, _, _)| *d == db && k == key) {
            continue;
        }
        let existed = ctx.data.peek(key).is_some();
        let epoch = ctx.data.shard(key).watch(key);
        ctx.conn.watched.push((db, key.to_vec(), epoch, existed));
    }
    ctx.out.ok();
    Ok(())
}

pub fn unwatch(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    release_watches(&ctx.srv.keyspace, ctx.conn);
    ctx.out.ok();
    Ok(())
}

/// Whether any watched key changed (or expired) since WATCH. Runs with all locks held.
fn watch_broken(ctx: &mut Ctx) -> bool {
    let now = ctx.data.now;
    let watched = std::mem::take(&mut ctx.conn.watched);
    let mut broken = false;
    for (db, key, epoch, existed) in &watched {
        let shard = ctx.data.shard_in(*db, key);
        if shard.watch_epoch(key) != *epoch || (*existed && shard.peek(key, now).is_none()) {
            broken = true;
        }
    }
    // Unregister under the locks we hold.
    for (db, key, _, _) in &watched {
        ctx.data.shard_in(*db, key).unwatch(key);
    }
    broken
}

pub fn exec(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let Some(queued) = ctx.conn.multi.take() else {
        return Err(err("ERR EXEC without MULTI"));
    };
    let had_error = ctx.conn.multi_error;
    end_multi(ctx.conn);
    if had_error {
        let _ = watch_broken(ctx);
        return Err(err("EXECABORT Transaction discarded because of previous errors."));
    }
    if watch_broken(ctx) {
        ctx.out.null_array();
        return Ok(());
    }
    ctx.srv.dirty.fetch_add(1, Ordering::Relaxed);
    ctx.out.array_len(queued.len());
    let exec_spec = ctx.spec;
    ctx.in_exec = true;
    for cmd in &queued {
        let argv: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
        let (idx, spec) = lookup(argv[0]).expect("validated when queued");
        ctx.spec = spec;
        let start = Instant::now();
        // Permissions may have changed since the command was queued.
        if let Err(denied) = ctx.conn.user.check(idx, &argv) {
            let info = super::server::client_line(ctx.srv, &ctx.conn.info);
            ctx.srv.acl.log_denied(&denied, "multi", &ctx.conn.user.name, info);
            ctx.out.error(&denied.error());
            continue;
        }
        let before = ctx.data.wal_count;
        let r = (spec.handler)(ctx, &argv);
        super::log_write(ctx, spec, &argv, r.is_ok(), before);
        if ctx.conn.replay_now.is_none() {
            crate::stats::observe(ctx.srv, ctx.data.db, spec, &argv, ctx.data.now, 0);
        }
        if let Err(e) = &r {
            ctx.out.error(&e.to_string());
        }
        run_stats(ctx.srv, idx, start, r.is_err());
        if ctx.conn.tracking.is_some() {
            super::track_reads(ctx.srv, ctx.conn, spec, &argv);
        }
        if ctx.close {
            break;
        }
    }
    ctx.in_exec = false;
    ctx.spec = exec_spec;
    Ok(())
}

pub(crate) fn run_stats(srv: &Server, idx: usize, start: Instant, failed: bool) {
    let st = &srv.stats.per_command[idx];
    st.calls.fetch_add(1, Ordering::Relaxed);
    st.usec.fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
    if failed {
        st.failed.fetch_add(1, Ordering::Relaxed);
    }
}
