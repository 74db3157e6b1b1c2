//! Periodic work (every 100 ms, as Redis's `hz 10`): active expiry, the ops/sec sample, and
//! giving table memory back after mass deletions (and freed memory to the OS once a second). It runs on the control thread and never
//! waits for a shard lock, so a long script or transaction can't stall accepting clients.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::state::{now_ms, Server};
use crate::keyspace::LockCap;

/// Budget of one active-expiry cycle (Redis spends at most 25% of a 100 ms tick).
const CYCLE_BUDGET: Duration = Duration::from_millis(25);

pub async fn run(srv: Arc<Server>, locks: LockCap) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_cmds = srv.stats.commands_processed.load(Ordering::Relaxed);
    let mut last_at = Instant::now();
    let mut n: u64 = 0;
    let mut compression = crate::compress::pass::Pass::new(&srv.keyspace);
    loop {
        tick.tick().await;
        if srv.shutdown.load(Ordering::Relaxed) {
            return;
        }
        // A replica does not expire keys on its own: its master's DELs do (as Redis's
        // replicas), so it never deletes a key its master still writes to.
        if srv.active_expire.load(Ordering::Relaxed) && !srv.replication.is_replica() {
            active_expire(&srv, &locks);
        }
        if n.is_multiple_of(100) {
            // Replicas hear from their master at least every 10 s, writes or not (Redis's
            // `repl-ping-replica-period`): their link's silence timeout stays for real faults.
            srv.replication.ping_replicas();
        }
        // What no connection published: the sweep's DELs, evictions outside a batch.
        srv.replication.publish();
        // Tenant memory and the DRAM budget: collections that grew in place are measured
        // again, a slice a tick.
        srv.keyspace.remeasure_slice(&locks, Duration::from_millis(5), n.is_multiple_of(20));
        // Compression: cold values, old dictionary generations, the census.
        compression.run_slice(&srv.keyspace, &locks, now_ms(), Duration::from_millis(5));
        if srv.tracking.any() {
            srv.tracking.invalidate(&srv.clients, srv.keyspace.take_invalidated(), None);
        }
        n += 1;
        if n.is_multiple_of(10) {
            crate::snapshot::save_if_due(&srv);
            for t in srv.keyspace.compressions() {
                t.check_drift();
            }
            let cmds = srv.stats.commands_processed.load(Ordering::Relaxed);
            let secs = last_at.elapsed().as_secs_f64().max(0.001);
            srv.stats.instantaneous_ops.store(((cmds.saturating_sub(last_cmds)) as f64 / secs) as u64, Ordering::Relaxed);
            last_cmds = cmds;
            last_at = Instant::now();
            for t in srv.tenant_stats.iter() {
                t.tick_second();
            }
            for id in srv.keyspace.all_shard_ids() {
                if let Some(mut shard) = srv.keyspace.try_lock_one(&locks, id) {
                    shard.maybe_shrink();
                }
            }
            crate::alloc::release_freed();
        }
    }
}

/// Sends the keys a sweep expired to replicas as DELs (Redis's replicas do not expire keys
/// on their own), before the shard is released.
fn feed_expired(srv: &Server, id: u32, shard: &mut crate::keyspace::Shard) {
    if shard.expired.is_empty() {
        return;
    }
    let keys = std::mem::take(&mut shard.expired);
    let db = id as usize / srv.keyspace.shards_per_db();
    srv.replicate(|stream, carries| {
        if carries(db) != crate::replication::Carry::Nothing {
            for key in &keys {
                stream.command(db, &[b"DEL".as_slice(), key]);
            }
        }
    });
}

/// Sweeps every shard with keys that have a TTL, a slice of its table per tick, so that a
/// full pass over a shard takes about two seconds whatever its size.
fn active_expire(srv: &Server, locks: &LockCap) {
    let start = Instant::now();
    let now = now_ms();
    for id in srv.keyspace.all_shard_ids() {
        // A shard a command holds (a long script, EXEC) is swept on a later tick.
        let Some(mut shard) = srv.keyspace.try_lock_one(locks, id) else { continue };
        if shard.volatile == 0 {
            continue;
        }
        let budget = (shard.num_buckets() / 20).max(256);
        shard.sweep_expired(budget, now);
        // Told before the shard is released: a client that waited on it for this sweep sees
        // the event in LATENCY LATEST (one sample a second is kept, the cycle's longest).
        let spent = start.elapsed().as_nanos() as u64;
        if srv.latency.crosses(spent) {
            srv.latency.observe("expire-cycle", spent, now / 1000);
        }
        let events = if srv.keyspace.notifying() { shard.take_events() } else { Vec::new() };
        feed_expired(srv, id, &mut shard);
        drop(shard);
        if !events.is_empty() {
            // What the sweep expired (anything else a shard noted outside a command is not
            // an event of any command).
            let db = id as usize / srv.keyspace.shards_per_db();
            let expired = events.into_iter().filter(|(what, _)| *what == crate::keyspace::Happened::Expired);
            let events = expired.map(|(_, key)| (db, terrace_commands::notify::class::EXPIRED, "expired", key)).collect();
            srv.notifications.publish(&srv.pubsub, events);
        }
        if start.elapsed() > CYCLE_BUDGET {
            break;
        }
    }
}
