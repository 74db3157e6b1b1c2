//! How commands meet the storage tier (../shared/DESIGN.md §3 "Storage tier"): read-through
//! before a command runs (with write-back's backpressure), and after a write, under its
//! locks, write-through's queued after-images or write-back's dirty marks and WAL
//! after-images.

use std::sync::atomic::Ordering;

use crate::command::table::{self, CommandId, CommandSpec, Lock};
use crate::command::{arity_ok, lookup, Conn, Data, StorageWait};
use crate::keyspace::{access, LockCap};
use crate::server::state::{now_ms, Server};
use crate::storage::flusher::Source as _;
use crate::storage::tier::{CacheKey, StorageTier};

pub use crate::storage::WB_RECORD;

/// Whether a command replaces its keys' values without looking at them (so a miss needs no
/// storage read): SET without NX/XX/GET/KEEPTTL, SETEX, PSETEX, MSET.
fn overwrites_blindly(spec: &CommandSpec, argv: &[&[u8]]) -> bool {
    match spec.id {
        CommandId::Setex | CommandId::Psetex | CommandId::Mset | CommandId::TerraceImport => true,
        CommandId::Set => !argv[3..].iter().any(|a| ["nx", "xx", "get", "keepttl"].iter().any(|o| a.eq_ignore_ascii_case(o.as_bytes()))),
        _ => false,
    }
}

/// What read-through did for a command: the keys it must still find when it runs, and
/// every key it looked at (none may have an unconfirmed write then).
#[derive(Debug, Default)]
pub struct ReadThrough {
    /// Keys the cache had, or was given from storage: (database, key).
    present: Vec<CacheKey>,
    /// Every key looked at.
    checked: Vec<CacheKey>,
}

impl ReadThrough {
    /// Under the command's locks: whether it must not run now. A key read through (or found)
    /// was evicted meanwhile, so the command would take it for absent while storage has it;
    /// or another connection's write to one of the keys is not confirmed yet, and the command
    /// must not see or build on it. Either way the connection reads through again.
    pub fn lost(&self, srv: &Server, guards: &mut crate::keyspace::Guards) -> bool {
        let now = now_ms();
        let evicted = self.present.iter().any(|(db, k)| {
            let id = srv.keyspace.shard_id(*db, k);
            guards.holds(id) && guards.shard(id).peek(k, now).is_none()
        });
        evicted || srv.storage_tier().is_some_and(|tier| self.checked.iter().any(|k| tier.pending_seq(k).is_some()))
    }
}

/// Read-through: before a command runs, the keys it declares that the cache lacks are read
/// from storage and admitted (a batched get per command). Err: storage could not be read,
/// and the command must not run on a cache that may be missing its keys.
pub async fn read_through(srv: &Server, locks: &LockCap, conn: &Conn, argv: &[&[u8]]) -> Result<ReadThrough, String> {
    let Some(tier) = srv.storage_tier() else {
        return Ok(ReadThrough::default());
    };
    let ns = conn.db / crate::keyspace::NUM_DBS;
    if !tier.backs(ns) || conn.replay_now.is_some() {
        return Ok(ReadThrough::default());
    }
    let mut wanted: Vec<CacheKey> = Vec::new();
    let mut writes = false;
    let (db, ns_base) = (conn.db, conn.ns_base);
    let mut add = |args: &[&[u8]]| {
        if let Some(spec) = lookup(args[0]) {
            writes |= spec.write;
            if spec.lock == Lock::Keys && arity_ok(spec, args.len()) && !overwrites_blindly(spec, args) {
                wanted.extend(table::key_positions(spec, args).into_iter().map(|i| (db, args[i].to_vec())));
            }
            if spec.id == CommandId::Move && arity_ok(spec, args.len()) {
                // MOVE fails if the key exists in the other database: storage must say.
                wanted.push((db, args[1].to_vec()));
                if let Some(to) = std::str::from_utf8(args[2]).ok().and_then(|s| s.parse::<usize>().ok()).filter(|&d| d < crate::keyspace::NUM_DBS) {
                    wanted.push((ns_base + to, args[1].to_vec()));
                }
            }
        }
    };
    let exec = lookup(argv[0]).is_some_and(|spec| spec.id == CommandId::Exec);
    if exec {
        for queued in conn.multi.iter().flatten() {
            let args: Vec<&[u8]> = queued.iter().map(Vec::as_slice).collect();
            add(&args);
        }
    } else {
        add(argv);
    }
    let queuing = conn.multi.is_some() && !exec;
    if writes && !queuing && tier.storage.superseded() {
        // Fenced: its writes would never reach storage (write-back) or be refused there.
        return Err(
            "READONLY this engine's primary term ended: storage holds a newer primary's epoch for its slots; it takes writes again once it is given a new role"
                .into(),
        );
    }
    if writes && tier.writes_back(ns) && !queuing {
        // Write-back: room under `dirty_max` first (backpressure), and memory — the server's
        // and the tenant's own limit — that the flusher can free when only dirty keys are
        // left to evict (else a write-back tenant at its limit got OOM while storage was
        // still taking what it had written).
        // (Room for what the write adds, as admission will ask; a write larger than the
        // whole limit is left to admission's OOM rather than waited for.)
        let incoming = match lookup(argv[0]).filter(|spec| spec.denyoom && !exec) {
            Some(spec) => super::admit::growth_bound(spec, argv),
            None => 0,
        };
        let limit = srv.keyspace.namespace_limit(ns);
        let incoming = if limit != 0 && incoming > limit { 0 } else { incoming };
        tier.admit_dirty(|| !(super::admit_memory(srv, locks) && super::admit_namespace(srv, locks, ns, incoming))).await?;
    }
    if wanted.is_empty() {
        return Ok(ReadThrough::default());
    }
    let ks = &srv.keyspace;
    wanted.sort();
    wanted.dedup();
    // A key whose write is not confirmed yet is read only once it is (install on success).
    for k in &wanted {
        if let Some(seq) = tier.pending_seq(k) {
            let _ = tier.wait(seq).await;
        }
    }
    // Keys read through are admitted: make room first, as a write would (reads alone must
    // not grow the cache past maxmemory; a read is never refused for memory).
    let _ = super::admit_memory(srv, locks);
    let _ = super::admit_namespace(srv, locks, ns, 0);
    // One batched read per database (a command's keys are in one, MOVE's in two).
    let mut rest = &wanted[..];
    while let Some(((db, _), _)) = rest.split_first() {
        let n = rest.iter().take_while(|(d, _)| d == db).count();
        let keys: Vec<Vec<u8>> = rest[..n].iter().map(|(_, k)| k.clone()).collect();
        read_keys(srv, locks, tier, *db, &keys).await.map_err(|why| format!("ERR storage read failed ({why})"))?;
        rest = &rest[n..];
    }
    // What the command will find: keys that must still be there when it runs (and still
    // confirmed: checked again under its locks).
    let now = now_ms();
    let present = wanted.iter().filter(|(db, k)| ks.lock_one(locks, ks.shard_id(*db, k)).peek(k, now).is_some()).cloned().collect();
    Ok(ReadThrough { present, checked: wanted })
}

/// Reads the keys of `wanted` the cache lacks from storage and admits them.
async fn read_keys(srv: &Server, locks: &LockCap, tier: &crate::storage::tier::StorageTier, db: usize, wanted: &[Vec<u8>]) -> Result<(), String> {
    let ks = &srv.keyspace;
    let lfu = ks.lfu.load(Ordering::Relaxed);
    for _attempt in 0..10 {
        let now = now_ms();
        // Keys the cache lacks, with their shard's modification count.
        // A dirty key (write-back) is what the cache says, present or deleted.
        let missing: Vec<(Vec<u8>, u64)> = wanted
            .iter()
            .filter_map(|k| {
                let shard = ks.lock_one(locks, ks.shard_id(db, k));
                (shard.peek(k, now).is_none() && !tier.dirty.contains(&(db, k.clone()))).then(|| (k.clone(), shard.mods))
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        // Writes queued before this point are in storage before it is read.
        tier.wait(tier.last_queued()).await.ok();
        let storage_keys = missing.iter().map(|(k, _)| crate::storage::tier::storage_key(db % crate::keyspace::NUM_DBS, k)).collect();
        tier.counters.reads.fetch_add(missing.len() as u64, Ordering::Relaxed);
        let values = tier.storage.get(srv.tenant_of(db), storage_keys).await.map_err(|e| {
            tier.counters.read_errors.fetch_add(1, Ordering::Relaxed);
            e.to_string()
        })?;
        let mut changed = false;
        // Our own inserts change their shard's count too: (count seen, count after ours).
        let mut ours: std::collections::HashMap<u32, (u64, u64)> = std::collections::HashMap::new();
        for ((key, mods), value) in missing.iter().zip(values) {
            let entry = match value {
                None => None,
                Some(bytes) => {
                    let stored = crate::storage::record::decode(&bytes).map_err(|e| format!("key '{}': {e}", String::from_utf8_lossy(key)))?;
                    if crate::keyspace::is_expired(stored.expire, now) {
                        None
                    } else {
                        Some(stored.into_entry(ks, db, key, access::new_stamp(lfu, now)))
                    }
                }
            };
            let id = ks.shard_id(db, key);
            let mut shard = ks.lock_one(locks, id);
            let unchanged = shard.mods == *mods || ours.get(&id) == Some(&(*mods, shard.mods));
            if !unchanged {
                // Written meanwhile: what storage said may already be old. Look again.
                changed = true;
                continue;
            }
            if let Some(e) = entry {
                tier.counters.read_hits.fetch_add(1, Ordering::Relaxed);
                shard.insert(e);
                ours.insert(id, (*mods, shard.mods));
            }
        }
        if !changed {
            return Ok(());
        }
    }
    Err("the keys kept changing while they were read from storage".into())
}

/// After a write-through command's batch failed: its keys leave the cache, so reads go to
/// storage (which did not take the write) — replicas' caches too, which had the write's
/// after-images.
pub fn invalidate(srv: &Server, locks: &LockCap, keys: &[(usize, Vec<u8>)]) {
    for (db, key) in keys {
        let mut shard = srv.keyspace.lock_one(locks, srv.keyspace.shard_id(*db, key));
        shard.remove(key);
        if srv.replication.feeding() {
            srv.replicate(|stream, carry| {
                if carry(*db) == crate::replication::Carry::AfterImages {
                    stream.after_image(*db, key, None);
                }
            });
        }
    }
    srv.replication.publish();
}

/// The after-image of `key` in database `db` through the shards `guards` hold: its stored
/// form, or None if it is gone.
pub fn after_image(
    srv: &Server,
    guards: &mut crate::keyspace::Guards,
    db: usize,
    key: &[u8],
    now: i64,
) -> Result<Option<Vec<u8>>, crate::storage::StorageError> {
    match guards.shard(srv.keyspace.shard_id(db, key)).peek(key, now) {
        Some(e) => {
            let mut v = Vec::new();
            crate::storage::record::encode(&srv.keyspace, db, e, &mut v)?;
            Ok(Some(v))
        }
        None => Ok(None),
    }
}

/// Queues the after-images of the keys a write-through command wrote (their stored form, or
/// their deletion) — the command's locks are still held.
pub(super) fn queue_after_images(srv: &Server, tier: &crate::storage::tier::StorageTier, data: &mut Data, mut touched: Vec<(usize, Vec<u8>)>) -> StorageWait {
    touched.sort();
    touched.dedup();
    let mut ops = Vec::with_capacity(touched.len());
    for (db, key) in &touched {
        let value = match after_image(srv, &mut data.guards, *db, key, data.now) {
            Ok(value) => value,
            Err(why) => {
                tracing::error!("not written to storage: {why}");
                continue;
            }
        };
        ops.push((srv.tenant_of(*db), (crate::storage::tier::storage_key(*db % crate::keyspace::NUM_DBS, key), value), (*db, key.clone())));
    }
    StorageWait { seq: tier.enqueue(ops), reply_at: usize::MAX, reply_end: usize::MAX }
}

/// Write-back, after a command ran (its locks still held): logs the after-images of the keys
/// it declared to the WAL (if on) and marks them dirty; returns the WAL sequence number the
/// reply must wait for.
pub(super) fn mark_write_back(srv: &Server, tier: &StorageTier, data: &mut Data, mut touched: Vec<CacheKey>) -> Option<u64> {
    touched.sort();
    touched.dedup();
    let wal = srv.wal();
    // Keys are marked at a position no later than their records', before those are appended:
    // the log is never pruned past a record whose key is not marked yet.
    let since = wal.map_or(0, |w| w.last_assigned() + 1);
    let mut records = Vec::new();
    let mut count = 0u32;
    let mut marked = 0;
    for (db, key) in &touched {
        let ns_base = db / crate::keyspace::NUM_DBS * crate::keyspace::NUM_DBS;
        let shard = data.guards.shard(srv.keyspace.shard_id(*db, key));
        let size = match shard.mark_dirty(key, data.now) {
            Some(e) => {
                if wal.is_some() {
                    let mut v = Vec::new();
                    match crate::storage::record::encode(&srv.keyspace, *db, e, &mut v) {
                        Ok(()) => {
                            crate::wal::frame::put_record(&mut records, data.now, *db, ns_base, &[WB_RECORD, key, &v]);
                            count += 1;
                        }
                        Err(why) => tracing::error!("not logged: {why}"),
                    }
                }
                e.heap_size()
            }
            None => {
                if wal.is_some() {
                    crate::wal::frame::put_record(&mut records, data.now, *db, ns_base, &[WB_RECORD, key]);
                    count += 1;
                }
                0
            }
        };
        marked = tier.dirty.mark(&(*db, key.clone()), size, since);
    }
    let seq = match wal {
        Some(wal) if count > 0 => {
            let seq = wal.append_after_images(&records, count);
            wal.mode.waits().then_some(seq)
        }
        _ => None,
    };
    if marked >= tier.write_back.flush_batch {
        tier.flush_wake.notify_one();
    }
    seq
}

/// Installs an after-image (`WB_RECORD`): the key gets the logged value (or is deleted) and,
/// if `dirty`, is marked so the flusher writes it to storage (a write-back WAL record
/// replayed; a write-back tenant's write from a replica's master).
pub fn replay_write_back(srv: &Server, locks: &LockCap, db: usize, argv: &[&[u8]], now: i64, dirty: bool) -> Result<(), String> {
    let key = argv.get(1).ok_or("a write-back record without a key")?;
    let ks = &srv.keyspace;
    let mut shard = ks.lock_one(locks, ks.shard_id(db, key));
    let size = match argv.get(2) {
        None => {
            shard.remove(key);
            0
        }
        Some(bytes) => {
            let stored = crate::storage::record::decode(bytes).map_err(|e| e.to_string())?;
            let mut e = stored.into_entry(ks, db, key, access::new_stamp(ks.lfu.load(Ordering::Relaxed), now));
            e.set_dirty(dirty);
            let size = e.heap_size();
            shard.insert(e);
            size
        }
    };
    if let Some(tier) = srv.storage_tier().filter(|_| dirty) {
        tier.dirty.mark(&(db, key.to_vec()), size, 0);
    }
    Ok(())
}
