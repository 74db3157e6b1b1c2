//! The write-back flusher: one thread that writes dirty keys to storage in batches.
//!
//! It wakes every `flush_interval`, or as soon as `flush_batch` keys are dirty (or a write
//! waits for room), takes up to `flush_batch` keys in the order they became dirty, reads each
//! one's current value under its shard lock (absent: a deletion) and writes them, one atomic
//! batch per tenant. On success a key is clean unless it was written meanwhile; on failure
//! the keys go back to the front of the line and the flusher backs off (up to a second), so a
//! storage outage loses nothing: writes pile up to `dirty_max`, then wait, then fail.
//! At shutdown it keeps flushing until nothing is dirty or storage keeps refusing. Once
//! storage refused a write for a newer primary term (fencing: `super::Term`) it stops.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::dirty::Taken;
use super::tier::{storage_key, StorageTier};
use super::Op;
use crate::clock::now_ms;
use crate::keyspace::{Keyspace, LockCap};

/// What the flusher needs of the node it flushes for (the server's state implements it).
pub trait Source: Send + Sync {
    fn keyspace(&self) -> &Keyspace;
    /// The storage tenant name of the namespace holding database `db`.
    fn tenant_of(&self, db: usize) -> String;
    /// The device probe's batch size, once measured.
    fn batch_bytes(&self) -> Option<usize>;
    /// Whether this engine writes storage now (a replica does not: its primary does).
    fn writes_storage(&self) -> bool {
        true
    }
    /// The keys of `taken` are in storage: each is clean unless written meanwhile.
    fn cleaned(&self, _locks: &LockCap, tier: &StorageTier, taken: &[Taken]) {
        tier.dirty.flushed_all(taken);
    }
}

/// How long a stopping engine keeps retrying a refusing storage before it gives up (what is
/// still dirty is in the WAL, if it is on).
const DRAIN_GIVE_UP: Duration = Duration::from_secs(10);

/// A batch stops growing past this many value bytes (the rest waits for the next one): a
/// batch is copied on its way to storage, and its memory counts against `maxmemory`. The
/// device probe's measure replaces it once known (enough bytes to amortise one sync).
const BATCH_BYTES: usize = 1 << 20;

pub fn run<S: Source>(srv: std::sync::Weak<S>, locks: LockCap, tier: Arc<StorageTier>, stop: &std::sync::atomic::AtomicBool) {
    let cfg = tier.write_back.clone();
    let mut backoff = Duration::ZERO;
    let mut stopping_since: Option<Instant> = None;
    loop {
        {
            let mut guard = tier.flush_lock.lock();
            let wait = if backoff.is_zero() { cfg.flush_interval } else { backoff };
            let full = tier.dirty.size().0 >= cfg.flush_batch;
            if !full && !stop.load(Ordering::SeqCst) {
                tier.flush_wake.wait_for(&mut guard, wait);
            }
        }
        let stopping = stop.load(Ordering::SeqCst);
        if stopping {
            let since = *stopping_since.get_or_insert_with(Instant::now);
            if tier.dirty.size().0 == 0 || since.elapsed() > DRAIN_GIVE_UP {
                let (keys, bytes) = tier.dirty.size();
                if keys > 0 {
                    tracing::error!(keys, bytes, "stopping with dirty keys storage did not take (the WAL has them if it is on)");
                }
                return;
            }
        }
        if tier.storage.superseded() {
            // A newer primary of this range writes storage now: nothing of this engine's
            // goes there (its dirty keys stay in its cache until it resyncs as a replica).
            if stopping {
                tracing::error!(keys = tier.dirty.size().0, "stopping with dirty keys that a newer primary's term keeps out of storage");
                return;
            }
            idle(&tier, Duration::from_secs(1));
            continue;
        }
        let Some(srv) = srv.upgrade() else { return };
        if !srv.writes_storage() {
            // A replica: its primary flushes these keys and says so in the stream.
            if stopping {
                return;
            }
            drop(srv);
            idle(&tier, cfg.flush_interval);
            continue;
        }
        // Several batches per wake-up while there is a backlog.
        loop {
            let taken = tier.dirty.take(cfg.flush_batch);
            if taken.is_empty() {
                break;
            }
            let full = taken.len() == cfg.flush_batch;
            match flush_batch(&*srv, &locks, &tier, taken) {
                Ok(()) => backoff = Duration::ZERO,
                Err(()) => {
                    backoff = (backoff * 2).clamp(Duration::from_millis(50), Duration::from_secs(1));
                    break;
                }
            }
            if !full || tier.dirty.size().0 < cfg.flush_batch && !stopping && tier.dirty.size().1 < cfg.dirty_max as usize / 2 {
                break;
            }
        }
    }
}

/// Waits `wait` without flushing (however many keys are dirty), or until woken to stop.
fn idle(tier: &StorageTier, wait: Duration) {
    let mut guard = tier.flush_lock.lock();
    tier.flush_wake.wait_for(&mut guard, wait);
}

/// Writes `taken` (one batch per tenant); Err if storage refused (the keys are back in line).
fn flush_batch(srv: &impl Source, locks: &LockCap, tier: &StorageTier, taken: Vec<Taken>) -> Result<(), ()> {
    let ks = srv.keyspace();
    let now = now_ms();
    let mut by_tenant: Vec<(String, Vec<Op>, Vec<Taken>)> = Vec::new();
    // Tenant names by namespace, looked up once per batch.
    let mut tenants: Vec<(usize, String)> = Vec::new();
    let mut bytes = 0usize;
    let cap = srv.batch_bytes().unwrap_or(BATCH_BYTES);
    let mut taken = taken.into_iter();
    for t in taken.by_ref() {
        if bytes >= cap {
            // Back to the front of the line, with the rest, in order.
            let back: Vec<Taken> = std::iter::once(t).chain(taken.by_ref()).collect();
            tier.dirty.failed(back);
            break;
        }
        let (db, key) = (t.key.0, &t.key.1);
        let value = {
            let shard = ks.lock_one(locks, ks.shard_id(db, key));
            match shard.peek(key, now) {
                Some(e) => {
                    let mut v = Vec::new();
                    if let Err(why) = super::record::encode(ks, db, e, &mut v) {
                        tracing::error!(key = %String::from_utf8_lossy(key), "not flushed: {why}");
                        continue;
                    }
                    bytes += v.len() + key.len();
                    Some(v)
                }
                None => None,
            }
        };
        let ns = db / crate::keyspace::NUM_DBS;
        let tenant = match tenants.iter().find(|(n, _)| *n == ns) {
            Some((_, name)) => name.clone(),
            None => {
                let name = srv.tenant_of(db);
                tenants.push((ns, name.clone()));
                name
            }
        };
        let op = (storage_key(db % crate::keyspace::NUM_DBS, key), value);
        match by_tenant.iter_mut().find(|(name, _, _)| *name == tenant) {
            Some((_, ops, ts)) => {
                ops.push(op);
                ts.push(t);
            }
            None => by_tenant.push((tenant, vec![op], vec![t])),
        }
    }
    let c = &tier.flush_counters;
    let mut result = Ok(());
    for (tenant, ops, taken) in by_tenant {
        let n = ops.len() as u64;
        let start = Instant::now();
        let written = tier.storage.block_on(tier.storage.write(tenant, ops));
        let us = start.elapsed().as_micros() as u64;
        c.batches.fetch_add(1, Ordering::Relaxed);
        c.micros.fetch_add(us, Ordering::Relaxed);
        c.max_micros.fetch_max(us, Ordering::Relaxed);
        match written {
            Ok(()) => {
                c.keys.fetch_add(n, Ordering::Relaxed);
                tier.counters.writes.fetch_add(n, Ordering::Relaxed);
                // The entries' dirty bits are left: eviction clears a bit once it finds the
                // key gone from the dirty set (going back to a million cold entries here
                // would cost more than the write).
                srv.cleaned(locks, tier, &taken);
            }
            Err(e) => {
                c.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("write-back flush failed: {e}");
                *tier.last_flush_error.lock() = Some(e.to_string());
                tier.dirty.failed(taken);
                result = Err(());
            }
        }
    }
    if result.is_ok() {
        *tier.last_flush_error.lock() = None;
    }
    tier.flushed.send_modify(|n| *n += 1);
    result
}
