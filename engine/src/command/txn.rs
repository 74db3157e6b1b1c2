//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC holds every shard lock of its namespace while the queued commands run, so a
//! transaction is atomic with respect to all other clients on all reactor threads (other
//! tenants' commands, which cannot reach its keys, do not wait for it). WATCH records each key's touch
//! epoch (see `Shard::touch`); any write, deletion, expiry or flush moves it on.

use std::sync::atomic::Ordering;

use super::args::err;
use super::pipeline::{nested, Nested, Origin};
use super::{CmdResult, Conn, Ctx};
use crate::keyspace::Keyspace;

/// A watched key: (db, key, epoch at WATCH, whether it existed then).
pub type Watched = (usize, Vec<u8>, u64, bool);

pub fn multi(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(err("ERR MULTI calls can not be nested"));
    }
    ctx.conn.multi = Some(Vec::new());
    ctx.conn.multi_error = false;
    ctx.conn.multi_writes = false;
    ctx.conn.multi_denyoom = false;
    ctx.conn.info.in_multi.store(true, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

pub fn discard(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.conn.multi.is_none() {
        return Err(err("ERR DISCARD without MULTI"));
    }
    end_multi(ctx.conn);
    unwatch_all(ctx);
    ctx.out.ok();
    Ok(())
}

pub fn end_multi(conn: &mut Conn) {
    conn.multi = None;
    conn.multi_error = false;
    conn.multi_writes = false;
    conn.multi_denyoom = false;
    conn.multi_charge = None;
    conn.info.in_multi.store(false, Ordering::Relaxed);
}

/// Drops the connection's WATCH registrations through its command's guards (UNWATCH,
/// DISCARD and RESET declare visits; EXEC holds its namespace's shards, where the watched keys are).
pub fn unwatch_all(ctx: &mut Ctx) {
    release_watches_with(&ctx.srv.keyspace, &mut ctx.data.guards, ctx.conn);
}

/// Drops a connection's WATCH registrations through a command's guards (`Keyspace::visit`:
/// the shards it holds, or each shard alone when it holds none).
pub(crate) fn release_watches_with(ks: &Keyspace, guards: &mut crate::keyspace::Guards, conn: &mut Conn) {
    for (db, key, _, _) in conn.watched.drain(..) {
        let id = ks.shard_id(db, &key);
        if ks.visit_mut(guards, id, |s| s.unwatch(&key)).is_err() {
            // Unreachable for UNWATCH and DISCARD (they lock nothing); the registration
            // then stays until the key is next touched, which only costs a stale epoch.
            tracing::warn!("a WATCH registration could not be released");
        }
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
    unwatch_all(ctx);
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
    ctx.in_exec = true;
    for cmd in &queued {
        let argv: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
        // Admitted again: permissions (or the WAL) may have changed since it was queued.
        if let Nested::Refused(error) = nested(ctx, Origin::Exec, &argv) {
            ctx.out.error(&error);
        }
        if ctx.close {
            break;
        }
    }
    ctx.in_exec = false;
    Ok(())
}
