//! The migration thread: moves the keys of a set of slots to another engine, online
//! (`crate::migration` describes the phases; `TERRACE.MIGRATE` drives them).
//!
//! The copy reads each shard a batch at a time under its lock (bounded: at most `BATCH`
//! keys or `BATCH_BYTES` per hold, so the shard keeps serving) and sends the keys as
//! `TERRACE.IMPORT key record` — the storage tier's record: value, absolute expiry,
//! Memcached flags — on one connection to the target, which logs and replicates them as any
//! write. Shards note the slots' keys that change from before the first read
//! (`keyspace::moving`), so a key changed after it was copied is sent again (or deleted)
//! by the catch-up rounds (their keys batched over shards, until a round is small or they
//! stop shrinking: `rounds`); on one connection, in order, the target ends with what this
//! engine has. SEAL refuses commands on the slots under the shard locks; the last notes are
//! taken after it, so nothing is left behind. A tenant on storage the engines share
//! (PostgreSQL) is not copied — storage holds its data: its write-back keys of the slots are
//! flushed before the hand-over; one on storage of this engine's own (the LSM) is copied
//! from storage and from memory. Deleting (after FINISH here, PURGE on a target) runs DEL
//! through the command pipeline on a connection of the thread's own, so the log, the
//! replicas and a private storage see the keys go; a shared-storage tenant's cached keys
//! are only dropped from memory. Copying, catching up before the seal and deleting are
//! paced (the job works at most `pace`% of the time) and the thread runs at the lowest CPU
//! priority, so a busy engine serves its clients first.

mod link;
mod rounds;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::BytesMut;

use self::link::{Link, LinkError, Reply};
use self::rounds::{Batch, Convergence};
use super::state::{ClientInfo, Server};
use crate::clock::now_ms;
use crate::keyspace::{Entry, LockCap, NUM_DBS};
use crate::migration::{Job, Phase};
use terrace_commands::slots::SlotSet;

/// At most this many keys, or about this many bytes, are read per shard lock hold (and sent
/// per network batch of a catch-up round: `rounds::Batch`).
const BATCH: usize = 256;
const BATCH_BYTES: usize = 1 << 20;
/// At most this many table buckets are read per shard lock hold.
const SCAN: usize = 8192;
/// How long sealing may wait for write-back keys of the slots to reach storage.
const FLUSH_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
enum JobError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error("aborted")]
    Aborted,
    #[error("the engine is shutting down")]
    Shutdown,
    #[error("{0}")]
    Local(String),
}

/// The file in the data directory keeping the slots this engine gave away, so a restart
/// keeps refusing them.
const SEALED_FILE: &str = "sealed-slots";

/// At start: seals the slots this engine had given away before it stopped.
pub fn load_sealed(srv: &Server) -> std::io::Result<()> {
    let path = srv.config.data_dir.join(SEALED_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let slots = SlotSet::parse(&text).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?;
    if !slots.is_empty() {
        tracing::info!(slots = %slots, "slots given away before the restart stay sealed");
        srv.keyspace.moving().seal(&slots);
    }
    Ok(())
}

/// Records the slots sealed now, durably.
fn save_sealed(srv: &Server) {
    let text = srv.keyspace.moving().sealed_slots().to_string();
    if let Err(e) = crate::files::replace_durably(&srv.config.data_dir, SEALED_FILE, text.as_bytes()) {
        tracing::warn!(error = %e, "cannot record the sealed slots; after a restart this engine would serve them again");
    }
}

/// Starts the thread, which runs the jobs `TERRACE.MIGRATE` starts until the server is gone.
pub fn spawn(srv: &Arc<Server>, locks: LockCap) -> std::io::Result<std::thread::JoinHandle<()>> {
    let weak = Arc::downgrade(srv);
    std::thread::Builder::new().name("terrace-migrate".into()).spawn(move || run(weak, locks))
}

fn run(weak: Weak<Server>, locks: LockCap) {
    lowest_priority();
    loop {
        let Some(srv) = weak.upgrade() else { return };
        if srv.shutdown.load(Ordering::Relaxed) {
            return;
        }
        let requests = srv.migration.take_requests(Duration::from_millis(200));
        let Some(job) = requests.start else { continue };
        let mut worker = Worker { srv: &srv, locks: &locks, job: &job, conn: None };
        let outcome = match &job.target {
            Some(target) => worker.move_slots(target),
            None => worker.delete_slots().map(|()| Phase::Done),
        };
        let moving = srv.keyspace.moving();
        moving.note(None);
        let sealed_before = moving.sealed_slots();
        match outcome {
            Ok(phase) => {
                // Moved away: the slots stay sealed here. Purged for a move in: unsealed.
                if job.target.is_none() {
                    moving.unseal(&job.slots);
                }
                srv.migration.set_phase(phase);
                tracing::info!(id = %job.id, slots = %job.slots, phase = phase.name(), "slot migration ended");
            }
            Err(JobError::Aborted) => {
                moving.unseal(&job.slots);
                srv.migration.set_phase(Phase::Aborted);
                tracing::info!(id = %job.id, slots = %job.slots, "slot migration aborted; the slots stay here");
            }
            Err(e) => {
                // Slots whose keys are being deleted stay sealed: the target owns them.
                if srv.migration.status().phase != Phase::Deleting {
                    moving.unseal(&job.slots);
                }
                tracing::warn!(id = %job.id, slots = %job.slots, "slot migration failed: {e}");
                srv.migration.fail(e.to_string());
            }
        }
        if moving.sealed_slots() != sealed_before {
            save_sealed(&srv);
        }
    }
}

/// Gives this thread the lowest CPU priority (nice 19): when a core is busy, the engine's
/// reactors run before the copy, which takes what they leave (the pace bounds it further).
fn lowest_priority() {
    // SAFETY: setpriority has no memory preconditions; on Linux, PRIO_PROCESS with who 0
    // applies to the calling thread alone.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot lower the migration thread's priority");
    }
}

/// A position in a shard's table, read a bounded batch per lock hold: the bucket to read
/// next and the table layout it is a position in (a table rebuilt meanwhile — grown or
/// shrunk — is read again from the start: its entries moved; reading one twice is harmless).
#[derive(Default)]
struct Cursor {
    bucket: usize,
    layout: Option<u32>,
}

impl Cursor {
    /// Under shard `id`'s lock, gives `take` the entries of `slots` that are not expired,
    /// from the cursor on, until it answers true (the batch is full) or the table ends, and
    /// answers whether it ended. At most `SCAN` buckets are read per call.
    fn next_batch(&mut self, ks: &crate::keyspace::Keyspace, locks: &LockCap, id: u32, slots: &SlotSet, mut take: impl FnMut(&Entry) -> bool) -> bool {
        let now = now_ms();
        self.next_batch_all(ks, locks, id, slots, |e| !crate::keyspace::is_expired(e.expire(), now) && take(e))
    }

    /// As `next_batch`, expired entries included.
    fn next_batch_all(&mut self, ks: &crate::keyspace::Keyspace, locks: &LockCap, id: u32, slots: &SlotSet, mut take: impl FnMut(&Entry) -> bool) -> bool {
        let shard = ks.lock_one(locks, id);
        if self.layout.is_some_and(|l| l != shard.layout_epoch) {
            self.bucket = 0;
        }
        self.layout = Some(shard.layout_epoch);
        let end = shard.num_buckets().min(self.bucket + SCAN);
        while self.bucket < end {
            let full = shard.bucket(self.bucket).is_some_and(|e| slots.contains_key(e.key()) && take(e));
            self.bucket += 1;
            if full {
                break;
            }
        }
        self.bucket >= shard.num_buckets()
    }
}

/// A tenant's namespace as a migration treats it.
struct Tenant {
    ns: usize,
    /// Its name (`""`: the default namespace).
    name: String,
    /// Storage-backed with storage of this engine's own (the embedded LSM): its keys, in
    /// storage and in memory, are copied like a cache tenant's.
    private_storage: bool,
    /// Storage-backed with storage every engine shares (PostgreSQL): only ownership moves.
    shared_storage: bool,
}

impl Tenant {
    fn storage_name(&self) -> &str {
        if self.name.is_empty() {
            "default"
        } else {
            &self.name
        }
    }
}

/// One job's work.
struct Worker<'a> {
    srv: &'a Server,
    locks: &'a LockCap,
    job: &'a Job,
    /// The thread's own connection into the command pipeline (for deleting).
    conn: Option<crate::command::Conn>,
}

impl Worker<'_> {
    fn check(&self) -> Result<(), JobError> {
        if self.srv.shutdown.load(Ordering::Relaxed) {
            return Err(JobError::Shutdown);
        }
        if self.srv.migration.take_abort() {
            return Err(JobError::Aborted);
        }
        // A source that is no longer its group's primary (demoted, or its term lease ran
        // out: paused or cut off while a replica was promoted) sends nothing more: a resumed
        // job would copy stale keys over the new primary's attempt into the target.
        if self.job.target.is_some() && (self.srv.replication.is_replica() || self.srv.replication.lease_lapsed()) {
            return Err(JobError::Local("this engine is no longer its group's primary (its term lease ran out or it follows a master)".into()));
        }
        Ok(())
    }

    /// Every tenant's namespace.
    fn tenants(&self) -> Vec<Tenant> {
        let names = self.srv.namespaces.lock().clone();
        let tier = self.srv.storage_tier();
        names
            .into_iter()
            .enumerate()
            .filter(|(_, name)| super::namespaces::is_live(name))
            .map(|(ns, name)| {
                let backed = tier.is_some_and(|t| t.backs(ns));
                let shared = tier.is_some_and(|t| t.storage.shared());
                Tenant { ns, name, private_storage: backed && !shared, shared_storage: backed && shared }
            })
            .collect()
    }

    /// The keys of the slots a private storage holds for `tenant`, with their records, a
    /// batch at a time (`each` gets (database in the tenant, key, record)).
    fn scan_storage(&self, tenant: &Tenant, mut each: impl FnMut(usize, &[u8], &[u8]) -> Result<(), JobError>) -> Result<(), JobError> {
        let Some(tier) = self.srv.storage_tier() else { return Ok(()) };
        let mut after: Option<Vec<u8>> = None;
        loop {
            self.check()?;
            let pairs = tier
                .storage
                .block_on(tier.storage.scan(tenant.storage_name().to_string(), after.clone(), BATCH))
                .map_err(|e| JobError::Local(format!("reading storage: {e}")))?;
            let Some(last) = pairs.last() else { return Ok(()) };
            after = Some(last.0.clone());
            for (skey, record) in &pairs {
                if let Some((&d, key)) = skey.split_first() {
                    if (d as usize) < NUM_DBS && self.job.slots.contains_key(key) {
                        each(d as usize, key, record)?;
                    }
                }
            }
            if pairs.len() < BATCH {
                return Ok(());
            }
        }
    }

    /// The source's side: purge the target, copy, catch up, seal, hand over, then delete
    /// on FINISH. Returns the phase it ends in.
    fn move_slots(&mut self, target: &str) -> Result<Phase, JobError> {
        let m = &self.srv.migration;
        let password = self.job.auth.clone().or_else(|| self.srv.replication.masterauth.lock().clone());
        let mut link = Link::open(&self.srv.config.tls, target, password.as_deref())?;
        // The target forgets whatever it holds in the slots (an older owner's keys, an
        // aborted copy): what it ends with must be exactly this engine's.
        let purge_id = format!("{}-purge", self.job.id);
        let mut purge: Vec<Vec<u8>> = vec![b"TERRACE.MIGRATE".to_vec(), b"PURGE".to_vec(), purge_id.into_bytes()];
        purge.extend(self.job.slots.range_args().into_iter().map(String::into_bytes));
        link.call(&purge.iter().map(Vec::as_slice).collect::<Vec<_>>())?;
        loop {
            self.check()?;
            let Reply::Bulk(Some(json)) = link.call(&[b"TERRACE.MIGRATE", b"STATUS"])? else {
                return Err(JobError::Local("the target's TERRACE.MIGRATE STATUS is not JSON".into()));
            };
            let status: serde_json::Value = serde_json::from_slice(&json).map_err(|e| JobError::Local(format!("the target's status: {e}")))?;
            match status["phase"].as_str() {
                Some("done") => break,
                Some("deleting") => std::thread::sleep(Duration::from_millis(5)),
                other => return Err(JobError::Local(format!("the target's purge ended {other:?}: {}", status["error"]))),
            }
        }
        // Changes are noted from before the first key is read.
        self.srv.keyspace.moving().note(Some(&self.job.slots));
        m.set_phase(Phase::Copying);
        self.copy(&mut link)?;
        m.set_phase(Phase::CatchingUp);
        let mut convergence = Convergence::default();
        loop {
            self.check()?;
            if m.take_seal() {
                break;
            }
            let n = self.catch_up(&mut link, false)?;
            m.counters.last_round.store(n, Ordering::Relaxed);
            if convergence.round(n) && m.status().phase == Phase::CatchingUp {
                if n > rounds::READY_ROUND {
                    tracing::warn!(id = %self.job.id, keys = n, "catch-up rounds stopped shrinking: ready to seal with a round this size");
                }
                m.set_phase(Phase::Ready);
            }
            if n == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        // Sealed: from here no command changes the slots; what was changed before is in
        // the notes the next round takes (each shard's lock orders it after the seal).
        let sealed = Instant::now();
        self.srv.keyspace.moving().seal(&self.job.slots);
        save_sealed(self.srv);
        m.update(|s| {
            s.phase = Phase::Sealed;
            s.sealed_ms = now_ms();
        });
        let n = self.catch_up(&mut link, true)?;
        m.counters.last_round.store(n, Ordering::Relaxed);
        // Clients blocked on the slots' keys (BLPOP & co.) would wait here for pushes that
        // now go to the target: woken, they are refused and their proxy sends them there.
        // (After the round: it took every shard's lock, so a command that passed the seal
        // check before it has registered its wait by now.)
        let moving = self.srv.keyspace.moving();
        let woken = self.srv.blocking.wake_gone(|key| moving.sealed(key).is_some());
        if woken > 0 {
            tracing::info!(id = %self.job.id, woken, "clients blocked on the slots' keys told to go to the new engine");
        }
        self.flush_written_back()?;
        self.srv.keyspace.moving().note(None);
        m.update(|s| {
            s.phase = Phase::HandedOver;
            s.seal_catch_up_ms = sealed.elapsed().as_millis() as u64;
        });
        tracing::info!(id = %self.job.id, slots = %self.job.slots, target, "slots handed over");
        // The coordinator switches the slot map, then says FINISH (or ABORT: the slots are
        // unsealed and stay here; the target's copy is purged by the next migration to it).
        loop {
            if self.srv.shutdown.load(Ordering::Relaxed) {
                return Err(JobError::Shutdown);
            }
            if m.take_abort() {
                return Err(JobError::Aborted);
            }
            if m.take_finish() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        m.set_phase(Phase::Deleting);
        self.delete_slots()?;
        Ok(Phase::Done)
    }

    /// Every key of the slots, a bounded batch per shard lock hold.
    fn copy(&mut self, link: &mut Link) -> Result<(), JobError> {
        let ks = &self.srv.keyspace;
        let slots = &self.job.slots;
        let counters = &self.srv.migration.counters;
        let started = Instant::now();
        let mut record = Vec::new();
        for tenant in self.tenants().into_iter().filter(|t| !t.shared_storage) {
            let (ns, name) = (tenant.ns, tenant.name.clone());
            if tenant.private_storage {
                // What storage holds first; the cache's values (newer where they differ:
                // write-back keys not flushed yet) are sent after them.
                let mut sent = 0;
                let mut worked = Instant::now();
                self.scan_storage(&tenant, |d, key, record| {
                    link.place(&name, d);
                    link.send(&[b"TERRACE.IMPORT", key, record]);
                    sent += 1;
                    if sent % BATCH == 0 {
                        link.flush()?;
                        self.pace(worked.elapsed());
                        worked = Instant::now();
                    }
                    counters.keys_copied.fetch_add(1, Ordering::Relaxed);
                    let total = counters.bytes_copied.fetch_add((key.len() + record.len()) as u64, Ordering::Relaxed);
                    self.throttle(total, started);
                    Ok(())
                })?;
                link.flush()?;
            }
            // (A database opened after its turn came has only keys written since: noted.)
            for d in (0..NUM_DBS).filter(|d| ks.db_opened(ns * NUM_DBS + d)) {
                let db = ns * NUM_DBS + d;
                for id in ks.db_shard_ids(db) {
                    let mut cursor = Cursor::default();
                    loop {
                        self.check()?;
                        let worked = Instant::now();
                        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                        let mut bytes = 0;
                        let mut failed = None;
                        let done = cursor.next_batch(ks, self.locks, id, slots, |e| {
                            record.clear();
                            if let Err(why) = crate::storage::record::encode(ks, db, e, &mut record) {
                                failed = Some(why.to_string());
                            }
                            bytes += record.len() + e.key().len();
                            batch.push((e.key().to_vec(), record.clone()));
                            batch.len() >= BATCH || bytes >= BATCH_BYTES
                        });
                        if let Some(why) = failed {
                            return Err(JobError::Local(why));
                        }
                        if !batch.is_empty() {
                            link.place(&name, d);
                            for (key, record) in &batch {
                                link.send(&[b"TERRACE.IMPORT", key, record]);
                            }
                            link.flush()?;
                            counters.keys_copied.fetch_add(batch.len() as u64, Ordering::Relaxed);
                            let total = counters.bytes_copied.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
                            self.pace(worked.elapsed());
                            self.throttle(total, started);
                        }
                        if done {
                            break;
                        }
                    }
                }
            }
        }
        counters.keys_total.store(counters.keys_copied.load(Ordering::Relaxed), Ordering::Relaxed);
        Ok(())
    }

    /// Leaves the engine the share of a core the job does not take (`pace`): after a batch
    /// that took `worked`, waits so that the job works at most `pace`% of the time.
    fn pace(&self, worked: Duration) {
        let pace = self.job.pace.clamp(1, 100) as u32;
        if pace < 100 {
            std::thread::sleep((worked * (100 - pace) / pace).min(Duration::from_millis(20)));
        }
    }

    /// Keeps the copy under the job's rate (bytes a second).
    fn throttle(&self, bytes: u64, started: Instant) {
        if self.job.rate == 0 {
            return;
        }
        let due = Duration::from_secs_f64(bytes as f64 / self.job.rate as f64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait.min(Duration::from_millis(100)));
        }
    }

    /// One catch-up round: every key noted since the last one, sent again as it is now (or
    /// deleted). Returns how many keys it sent.
    fn catch_up(&mut self, link: &mut Link, sealed: bool) -> Result<u64, JobError> {
        let (copied, shared): (Vec<Tenant>, Vec<Tenant>) = self.tenants().into_iter().partition(|t| !t.shared_storage);
        let ks = &self.srv.keyspace;
        // Shared storage holds those tenants' keys: their notes are not needed.
        for t in shared {
            for id in ks.namespace_shard_ids(t.ns) {
                ks.take_moved(self.locks, id);
            }
        }
        let mut sent = 0u64;
        let mut record = Vec::new();
        // Keys of many shards share a batch: a round costs a round trip per `BATCH` keys,
        // not one per shard with a change — under load, a round that took a round trip per
        // shard lasted long enough for the clients to change every key again, and the
        // rounds never shrank (CI saw a move catch up for two minutes).
        let mut batch = Batch::default();
        for Tenant { ns, name, .. } in copied {
            for d in 0..NUM_DBS {
                let db = ns * NUM_DBS + d;
                for id in ks.db_shard_ids(db) {
                    let mut keys = ks.take_moved(self.locks, id);
                    if keys.is_empty() {
                        continue;
                    }
                    keys.sort_unstable();
                    keys.dedup();
                    for chunk in keys.chunks(BATCH) {
                        link.place(&name, d);
                        {
                            let shard = ks.lock_one(self.locks, id);
                            let now = now_ms();
                            for key in chunk {
                                match shard.peek(key, now) {
                                    Some(e) => {
                                        record.clear();
                                        crate::storage::record::encode(ks, db, e, &mut record).map_err(|e| JobError::Local(e.to_string()))?;
                                        link.send(&[b"TERRACE.IMPORT", key, &record]);
                                        batch.add(key.len() + record.len());
                                    }
                                    None => {
                                        link.send(&[b"DEL", key]);
                                        batch.add(key.len());
                                    }
                                }
                            }
                        }
                        sent += chunk.len() as u64;
                        if batch.full() {
                            self.send_batch(link, &mut batch, sealed)?;
                        }
                    }
                }
            }
        }
        self.send_batch(link, &mut batch, sealed)?;
        self.srv.migration.counters.keys_caught_up.fetch_add(sent, Ordering::Relaxed);
        Ok(sent)
    }

    /// Sends a catch-up round's queued keys and waits for the target's replies; paced
    /// unless sealed (then the proxies hold the slots until the round is done).
    fn send_batch(&self, link: &mut Link, batch: &mut Batch, sealed: bool) -> Result<(), JobError> {
        if batch.keys == 0 {
            return Ok(());
        }
        link.flush()?;
        if !sealed {
            self.pace(batch.started.elapsed());
        }
        *batch = Batch::default();
        Ok(())
    }

    /// Write-back tenants: waits until no key of the slots is dirty (sealed, none becomes
    /// dirty again), so storage has every write before the target reads it.
    fn flush_written_back(&self) -> Result<(), JobError> {
        let Some(tier) = self.srv.storage_tier() else { return Ok(()) };
        let started = Instant::now();
        loop {
            let pending = tier.dirty.keys().iter().filter(|(_, k)| self.job.slots.contains_key(k)).count();
            if pending == 0 {
                return Ok(());
            }
            if started.elapsed() > FLUSH_WAIT {
                return Err(JobError::Local(format!("{pending} write-back keys of the slots did not reach storage in {FLUSH_WAIT:?}")));
            }
            tier.flush_wake.notify_one();
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Deletes every key of the slots here: DEL through the pipeline (so the log, the
    /// replicas and a private storage see them go), except for tenants on shared storage,
    /// whose cached keys are only dropped from memory (storage is the target's now).
    fn delete_slots(&mut self) -> Result<(), JobError> {
        let ks = &self.srv.keyspace;
        let slots = self.job.slots.clone();
        for tenant in self.tenants() {
            let (ns, backed) = (tenant.ns, tenant.shared_storage);
            if tenant.private_storage {
                let mut by_db: Vec<Vec<Vec<u8>>> = vec![Vec::new(); NUM_DBS];
                self.scan_storage(&tenant, |d, key, _| {
                    by_db[d].push(key.to_vec());
                    Ok(())
                })?;
                for (d, keys) in by_db.iter().enumerate() {
                    for chunk in keys.chunks(BATCH) {
                        let worked = Instant::now();
                        self.delete(ns * NUM_DBS + d, chunk)?;
                        self.pace(worked.elapsed());
                        self.srv.migration.counters.keys_deleted.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    }
                }
            }
            for d in (0..NUM_DBS).filter(|d| ks.db_opened(ns * NUM_DBS + d)) {
                let db = ns * NUM_DBS + d;
                for id in ks.db_shard_ids(db) {
                    if self.srv.shutdown.load(Ordering::Relaxed) {
                        return Err(JobError::Shutdown);
                    }
                    let mut cursor = Cursor::default();
                    loop {
                        let worked = Instant::now();
                        let mut chunk: Vec<Vec<u8>> = Vec::new();
                        // (Expired keys too: they go as well.)
                        let done = cursor.next_batch_all(ks, self.locks, id, &slots, |e| {
                            chunk.push(e.key().to_vec());
                            chunk.len() >= BATCH
                        });
                        if chunk.is_empty() {
                            if done {
                                break;
                            }
                            continue;
                        }
                        let chunk = &chunk[..];
                        if backed {
                            // (A dirty key stays: its write is not in storage yet.)
                            let mut shard = ks.lock_one(self.locks, id);
                            for k in chunk {
                                if shard.peek(k, i64::MIN).is_some_and(|e| !e.is_dirty()) {
                                    shard.evict(k);
                                }
                            }
                        } else {
                            self.delete(db, chunk)?;
                        }
                        self.pace(worked.elapsed());
                        self.srv.migration.counters.keys_deleted.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        if done {
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// DEL of `keys` in physical database `db`, through the command pipeline.
    fn delete(&mut self, db: usize, keys: &[Vec<u8>]) -> Result<(), JobError> {
        let srv = self.srv;
        let conn = self.conn.get_or_insert_with(|| {
            let info = Arc::new(ClientInfo::new(0, -1, "migration".into(), "migration".into(), 0, srv.limits.clone()));
            let mut conn = crate::command::Conn::new(info, srv);
            conn.set_authenticated(true);
            conn.migrator = true;
            conn
        });
        conn.ns_base = db / NUM_DBS * NUM_DBS;
        conn.info.namespace.store(db / NUM_DBS, Ordering::Relaxed);
        conn.db = db;
        conn.info.db.store(db % NUM_DBS, Ordering::Relaxed);
        let mut argv: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
        argv.push(b"DEL");
        argv.extend(keys.iter().map(Vec::as_slice));
        let mut out = BytesMut::new();
        loop {
            out.clear();
            match crate::command::execute(srv, self.locks, conn, &argv, &mut out) {
                crate::command::Outcome::NamespaceHeld => std::thread::sleep(Duration::from_millis(1)),
                crate::command::Outcome::Paused(_) => std::thread::sleep(Duration::from_millis(10)),
                _ => break,
            }
        }
        if out.first() == Some(&b'-') {
            return Err(JobError::Local(format!("deleting moved keys: {}", String::from_utf8_lossy(&out).trim_end())));
        }
        Ok(())
    }
}
