//! The commit stage: a command's effects, made visible in order. Under its locks (so the
//! log and storage see writes in execution order): a blocked client's registration for its
//! keys, the PMem tier's hit counters, write-through's queued after-images or write-back's
//! dirty marks, the WAL records, and the keys its shards noted for tracking clients. After
//! the locks are released: the command's counters, blocked clients woken on ready keys, the
//! slow log, tracking invalidations.

use std::sync::atomic::Ordering;

use super::storage;
use super::Effects;
use crate::command::table::CommandSpec;
use crate::command::{BlockRequest, Conn, Data};
use crate::keyspace::{LockCap, NUM_DBS};
use crate::replication::{propagate, Carry};
use crate::server::state::Server;

/// Commits what must be ordered with other writes; the caller still holds the locks.
pub(crate) fn under_locks(srv: &Server, conn: &mut Conn, block: Option<&BlockRequest>, data: &mut Data) {
    if let Some(b) = block {
        // Registered while the shards are still locked, so no push can slip in between.
        srv.blocking.register(conn.info.id, b.db, &b.keys, &conn.block_notify, b.wake_on_delete);
    }
    if let Some(t) = srv.keyspace.tier() {
        let fx = &data.fx;
        t.count_hits(fx.hits - fx.pmem_hits, fx.pmem_hits);
    }
    if srv.replication.feeding() {
        feed_replicas(srv, conn, data);
    }
    let ns = conn.ns_base / NUM_DBS;
    if let Some(tier) = srv.storage_tier().filter(|t| t.backs(ns)) {
        // Storage-backed: no command records (write-through's durability is storage's;
        // write-back logs after-images).
        data.fx.wal_buf.clear();
        data.fx.wal_count = 0;
        if !data.fx.touched.is_empty() {
            let touched = std::mem::take(&mut data.fx.touched);
            if conn.from_master && tier.storage.shared() {
                // A replica writes no shared storage: its master did (write-through) or will
                // (write-back: the keys stay dirty here until it says they are clean, so
                // this engine, promoted, flushes what it had not).
                if tier.writes_back(ns) {
                    for key in &touched {
                        tier.dirty.mark(key, 0, 0);
                    }
                }
            } else if tier.writes_back(ns) {
                if let Some(seq) = storage::mark_write_back(srv, tier, data, touched) {
                    conn.wal_pending = conn.wal_pending.max(seq);
                }
            } else {
                let wait = storage::queue_after_images(srv, tier, data, touched);
                // (A replica's copy in its own storage: written in order, not waited for.)
                if !conn.from_master {
                    conn.storage_waits.push(wait);
                }
            }
        }
    }
    if srv.tracking.any() {
        data.guards.take_invalidated(&mut data.fx.invalidated);
    }
    let fx = &data.fx;
    let logged = srv.wal_off.get(ns).is_none_or(|off| !off.load(Ordering::Relaxed));
    if fx.wal_count > 0 && logged {
        if let Some(wal) = srv.wal() {
            let seq = wal.append(&fx.wal_buf, fx.wal_count);
            if wal.mode.waits() {
                conn.wal_pending = seq;
            }
        }
    }
}

/// Sends the command's writes, and the keys it found expired, to replicas — under its
/// locks, so the stream's order is the execution order — and notes the offsets the client's
/// WAIT waits for. A storage-backed tenant's writes go as their keys' after-images.
fn feed_replicas(srv: &Server, conn: &mut Conn, data: &mut Data) {
    let mut expired = Vec::new();
    data.guards.take_expired(srv.keyspace.shards_per_db(), &mut expired);
    let images = after_images(srv, data);
    let fx = &data.fx;
    if expired.is_empty() && fx.wal_count == 0 && images.is_empty() {
        return;
    }
    let offsets = srv.replicate(|stream, carry| {
        for (db, key) in expired.iter().filter(|(db, _)| carry(*db) != Carry::Nothing) {
            stream.command(*db, &[b"DEL".as_slice(), key]);
        }
        if fx.wal_count > 0 {
            propagate::put_commit(stream, &fx.wal_buf, fx.wal_count, &|db| carry(db) == Carry::Commands);
        }
        for (db, key, record) in images.iter().filter(|(db, ..)| carry(*db) == Carry::AfterImages) {
            stream.after_image(*db, key, record.as_deref());
        }
    });
    for (mine, now) in conn.repl_offsets.iter_mut().zip(offsets) {
        *mine = (*mine).max(now);
    }
}

/// The after-images of the keys a storage-backed tenant's command wrote, when a stream
/// carries them (Terrace's): (database, key, stored record or deletion).
fn after_images(srv: &Server, data: &mut Data) -> Vec<(usize, Vec<u8>, Option<Vec<u8>>)> {
    let terrace = crate::replication::Flavor::Terrace;
    if data.fx.touched.is_empty() || srv.replication.feed(terrace).is_none() {
        return Vec::new();
    }
    let mut keys: Vec<&(usize, Vec<u8>)> = data.fx.touched.iter().filter(|(db, _)| srv.carry(terrace, *db) == Carry::AfterImages).collect();
    keys.sort();
    keys.dedup();
    let mut images = Vec::with_capacity(keys.len());
    for (db, key) in keys {
        match storage::after_image(srv, &mut data.guards, *db, key, data.now) {
            Ok(record) => images.push((*db, key.clone(), record)),
            Err(why) => tracing::error!(key = %String::from_utf8_lossy(key), "not sent to replicas: {why}"),
        }
    }
    images
}

/// A command that ran: what the rest of its commit needs.
pub(crate) struct Ran<'a> {
    pub idx: usize,
    pub spec: &'a CommandSpec,
    pub argv: &'a [&'a [u8]],
    pub failed: bool,
    pub nanos: u64,
    /// It blocked: counted when it completes, as Redis counts a blocked command once.
    pub blocked: bool,
}

/// Commits the rest once the locks are released.
pub(crate) fn after_locks(srv: &Server, locks: &LockCap, conn: &mut Conn, ran: &Ran, fx: Effects) {
    let Ran { idx, spec, argv, failed, nanos, blocked } = *ran;
    // Server and connection commands (INFO, CONFIG RESETSTAT…) are counted at once: one may
    // read or reset the counters the next one adds to.
    if !blocked {
        conn.tally.add(srv, idx, spec.class != crate::stats::tenant::OTHER, nanos, failed, fx.hits, fx.misses);
    }
    if !fx.ready.is_empty() && srv.blocking.any_waiting() {
        for (db, key) in &fx.ready {
            conn.woke_blocked |= srv.blocking.signal(*db, key);
        }
    }
    if !fx.notifications.is_empty() {
        srv.notifications.publish(&srv.pubsub, fx.notifications);
    }
    if fx.make_room {
        let _ = super::admit_memory(srv, locks);
    }
    srv.slowlog.maybe_record(argv, nanos / 1000, &conn.info);
    if srv.latency.crosses(nanos) {
        let event = if spec.flags.has(crate::command::table::Flags::FAST) { "fast-command" } else { "command" };
        srv.latency.observe(event, nanos, crate::clock::now_ms() / 1000);
    }
    if srv.tracking.any() {
        super::run::track_reads(srv, conn, spec, argv);
        // In the order the command names its keys (shards note theirs apart).
        let mut invalidated = fx.invalidated;
        if invalidated.len() > 1 {
            invalidated.sort_by_key(|k| argv.iter().skip(1).position(|a| *a == k.as_slice()).unwrap_or(usize::MAX));
        }
        srv.tracking.invalidate(&srv.clients, invalidated, Some(conn.info.id));
    }
}
