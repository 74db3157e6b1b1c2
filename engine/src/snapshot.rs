//! RDB snapshots (keys and FUNCTION libraries): SAVE, BGSAVE, LASTSAVE, and loading `dump.rdb`
//! from the data directory at start, in Redis's RDB format (version 10), so the file also loads into redis-server and
//! works with Redis's RDB tools.
//!
//! SAVE writes a point-in-time image while the command holds every shard. BGSAVE asks the
//! saver thread (`run_saver`, started with the engine and holding the keyspace's lock
//! capability, which command handlers never have), and a replica's full sync asks for an
//! image in memory: both take one instant too, but hold every shard only to start a sweep
//! (`keyspace::sweep`: each shard is read as it was then, before its first change), and
//! write the image while writes go on — what Redis forks for. The file is written to a
//! temporary name, synced, and renamed over `dump.rdb`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::keyspace::sweep::SweepHandle;
use crate::keyspace::{access, Entry, Guards, Keyspace, LockCap, Meta, ValueRef};
use crate::rdb::{crc64, crc64_update, decode_value, encode_object, put_len, put_str, RdbError, Reader, Restored, RDB_VERSION};
use crate::server::state::{now_ms, Server};

const OP_AUX: u8 = 0xFA;
const OP_RESIZEDB: u8 = 0xFB;
const OP_EXPIRETIME_MS: u8 = 0xFC;
const OP_EXPIRETIME: u8 = 0xFD;
const OP_SELECTDB: u8 = 0xFE;
const OP_EOF: u8 = 0xFF;
const OP_IDLE: u8 = 0xF8;
const OP_FREQ: u8 = 0xF9;
/// Terrace's own, in a Terrace replica's image only: a key as this engine's own storage
/// tier holds it (`storage key, record`, in the database SELECTDB named), for the replica's
/// own storage tier, not its cache.
const OP_STORED: u8 = 0xF0;
/// The RDB opcode that carries one library's code (FUNCTION DUMP payloads, RDB files).
pub const OP_FUNCTION2: u8 = 245;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot write {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a valid RDB file: {why}")]
    Corrupt { path: PathBuf, why: String },
    #[error("cannot save key '{key}': its compressed value does not decode: {source}")]
    Undecodable { key: String, source: crate::compress::CodecError },
}

/// Snapshot bookkeeping for INFO persistence, LASTSAVE and BGSAVE's exclusivity.
pub struct SnapshotState {
    pub in_progress: AtomicBool,
    pub scheduled: AtomicBool,
    /// Unix seconds of the last successful save (or of the start).
    pub last_save: AtomicI64,
    pub last_ok: AtomicBool,
    /// Snapshots written since the start (INFO's `rdb_saves`, as Redis 7).
    pub saves: AtomicU64,
    /// Writes since the last successful save (INFO's `rdb_changes_since_last_save`; what
    /// the save points count).
    pub changes: AtomicU64,
    /// When the last save points' snapshot was tried (a failed one is tried again after
    /// `SAVE_RETRY_MS`, as Redis does).
    last_try_ms: AtomicI64,
    /// BGSAVE's request to the saver thread.
    requested: Arc<(parking_lot::Mutex<bool>, parking_lot::Condvar)>,
}

impl Default for SnapshotState {
    fn default() -> Self {
        SnapshotState {
            in_progress: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            last_save: AtomicI64::new(now_ms() / 1000),
            last_ok: AtomicBool::new(true),
            saves: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            last_try_ms: AtomicI64::new(0),
            requested: Arc::default(),
        }
    }
}

pub fn rdb_path(data_dir: &Path) -> PathBuf {
    data_dir.join("dump.rdb")
}

/// Which part of the keyspace an image holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every namespace (`dump.rdb`), with Terrace's own aux fields.
    Everything,
    /// The default namespace's databases 0-15, as a Redis replica reads them.
    DefaultNamespace,
    /// Every namespace, with their names and libraries, for a Terrace replica (no WAL
    /// position: the replica's log is its own).
    EveryNamespace,
}

fn header(srv: &Server, scope: Scope) -> Vec<u8> {
    let mut out = format!("REDIS{RDB_VERSION:04}").into_bytes();
    let aux = |out: &mut Vec<u8>, k: &str, v: &str| {
        out.push(OP_AUX);
        put_str(out, k.as_bytes());
        put_str(out, v.as_bytes());
    };
    aux(&mut out, "redis-ver", terrace_commands::REDIS_VERSION);
    aux(&mut out, "redis-bits", "64");
    aux(&mut out, "ctime", &(now_ms() / 1000).to_string());
    aux(&mut out, "used-mem", &crate::alloc::used_memory().to_string());
    aux(&mut out, "aof-base", "0");
    // Which tenant owns which block of databases (namespace n: databases 16n..16n+15).
    let names = srv.namespaces.lock();
    if names.len() > 1 && scope != Scope::DefaultNamespace {
        aux(&mut out, "terrace-namespaces", &names[1..].join(","));
    }
    // The WAL position this image covers (taken under every shard lock): recovery replays
    // the log after it.
    if let Some(wal) = srv.wal().filter(|_| scope == Scope::Everything) {
        aux(&mut out, "terrace-wal-seq", &wal.last_assigned().to_string());
    }
    // FUNCTION libraries: the default namespace's as Redis 7 stores them; a tenant's as an
    // aux field naming it (`terrace-function:<tenant>`, which redis-server skips).
    let libraries = srv.scripts.functions.all();
    for (ns, libs) in &libraries {
        let Some(tenant) = names.get(*ns).filter(|_| *ns > 0 && scope != Scope::DefaultNamespace) else { continue };
        for lib in libs.values() {
            aux(&mut out, &format!("{FUNCTION_AUX}{tenant}"), &lib.code);
        }
    }
    drop(names);
    for lib in libraries.get(&0).into_iter().flat_map(|libs| libs.values()) {
        out.push(OP_FUNCTION2);
        put_str(&mut out, lib.code.as_bytes());
    }
    out
}

/// Appends one key's record (expiry, type, key, value).
/// Compressed strings are written decoded: the file stays a Redis RDB file.
fn write_entry(out: &mut Vec<u8>, ks: &Keyspace, db: usize, e: &Entry, now: i64) -> Result<(), SnapshotError> {
    if let Some(t) = e.expire() {
        if t <= now {
            return Ok(());
        }
        out.push(OP_EXPIRETIME_MS);
        out.extend_from_slice(&t.to_le_bytes());
    }
    let decoded = match e.value() {
        ValueRef::Encoded(_) => ks.string(db, e).map_err(|source| SnapshotError::Undecodable { key: String::from_utf8_lossy(e.key()).into_owned(), source })?,
        _ => None,
    };
    let value = match &decoded {
        Some(v) => ValueRef::Str(v),
        None => e.value(),
    };
    encode_object(value, Some(e.key()), out);
    Ok(())
}

/// Streams the file out, keeping the running CRC.
struct RdbWriter {
    w: BufWriter<File>,
    crc: u64,
    path: PathBuf,
}

impl RdbWriter {
    fn create(path: &Path) -> Result<Self, SnapshotError> {
        let f = File::create(path).map_err(|source| SnapshotError::Io { path: path.into(), source })?;
        Ok(RdbWriter { w: BufWriter::with_capacity(1 << 20, f), crc: 0, path: path.into() })
    }
    fn io(&self, source: std::io::Error) -> SnapshotError {
        SnapshotError::Io { path: self.path.clone(), source }
    }
    fn write(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.crc = crc64_update(self.crc, bytes);
        self.w.write_all(bytes).map_err(|e| self.io(e))
    }
    fn finish(mut self) -> Result<(), SnapshotError> {
        self.write(&[OP_EOF])?;
        let crc = self.crc;
        self.w.write_all(&crc.to_le_bytes()).map_err(|e| self.io(e))?;
        let path = self.path.clone();
        let f = self.w.into_inner().map_err(|e| SnapshotError::Io { path: path.clone(), source: e.into_error() })?;
        f.sync_all().map_err(|source| SnapshotError::Io { path, source })
    }
}

/// Whether database `db`'s keys belong in an image of `scope`: not a storage-backed tenant's.
/// Its data is storage's plus (write-back) the WAL's unflushed after-images; a snapshot of
/// it could be stale after a crash (a key written, flushed and its record pruned since). A
/// Terrace replica's image has it when storage is shared: the replica holds the primary's
/// cache (and the stream after the image marks what is dirty).
fn in_snapshots(srv: &Server, db: usize, scope: Scope) -> bool {
    srv.storage_tier().is_none_or(|t| !t.backs(db / crate::keyspace::NUM_DBS)) || scope == Scope::EveryNamespace
}

/// Adds to a Terrace replica's `image` (made by `replication_image`) what this engine's own
/// storage tier (the embedded LSM: no other engine reaches it) holds for each storage-backed
/// tenant, every key as stored (`OP_STORED`), for the replica's storage tier. Read after the
/// image's instant, without the shards: a key written since is in the stream after the
/// image too, and the replica applies that after this, so it ends with the newest value.
/// (The section is held in memory with the rest of the image.)
pub fn add_own_storage(srv: &Server, image: &mut Vec<u8>) -> Result<(), SnapshotError> {
    let Some(tier) = srv.storage_tier().filter(|t| !t.storage.shared()) else { return Ok(()) };
    let failed = |e: crate::storage::StorageError| SnapshotError::Corrupt { path: "(this engine's storage tier)".into(), why: e.to_string() };
    image.truncate(image.len() - 9); // OP_EOF and the checksum, put back below
    let namespaces = srv.namespaces.lock().len();
    for ns in (0..namespaces).filter(|&ns| tier.backs(ns)) {
        let tenant = crate::storage::flusher::Source::tenant_of(srv, ns * crate::keyspace::NUM_DBS);
        let mut after: Option<Vec<u8>> = None;
        let mut selected = None;
        loop {
            let page = tier.storage.block_on(tier.storage.scan(tenant.clone(), after.clone(), 1024)).map_err(failed)?;
            let Some(last) = page.last() else { break };
            after = Some(last.0.clone());
            for (key, record) in page {
                let Some((&db_in_tenant, key)) = key.split_first() else { continue };
                let db = ns * crate::keyspace::NUM_DBS + db_in_tenant as usize;
                if selected != Some(db) {
                    image.push(OP_SELECTDB);
                    put_len(image, db);
                    selected = Some(db);
                }
                image.push(OP_STORED);
                put_str(image, key);
                put_str(image, &record);
            }
        }
    }
    image.push(OP_EOF);
    let crc = crc64(image);
    image.extend_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Where an image's bytes go, in order.
type Sink<'s> = dyn FnMut(&[u8]) -> Result<(), SnapshotError> + 's;

/// Writes a snapshot file: `body` writes the image's header and keys to the sink it is given.
fn write_snapshot(srv: &Server, body: impl FnOnce(&mut Sink) -> Result<(), SnapshotError>) -> Result<(), SnapshotError> {
    let data_dir = &srv.config.data_dir;
    std::fs::create_dir_all(data_dir).map_err(|source| SnapshotError::Io { path: data_dir.into(), source })?;
    let tmp = data_dir.join(format!("temp-{}.rdb", std::process::id()));
    let mut w = RdbWriter::create(&tmp)?;
    body(&mut |bytes| w.write(bytes))?;
    w.finish()?;
    let path = rdb_path(data_dir);
    std::fs::rename(&tmp, &path).map_err(|source| SnapshotError::Io { path: path.clone(), source })
}

/// A replica's RDB image in memory — the default namespace's keys and libraries, or
/// (`every_namespace`, for a Terrace replica) every namespace's with their names — of the
/// instant the caller holds every shard (`guards`; a full sync, one instant of the stream).
/// The image is made by `finish`, after the caller lets the shards go.
pub fn replication_image<'k>(srv: &'k Server, guards: &mut Guards, every_namespace: bool) -> ImageOfAnInstant<'k> {
    ImageOfAnInstant::start(srv, guards, if every_namespace { Scope::EveryNamespace } else { Scope::DefaultNamespace })
}

/// An image of one instant, made shard by shard while writes go on (`keyspace::sweep`):
/// its header and each database's key counts are taken at the instant, each shard's records
/// as the sweep saw it then.
pub struct ImageOfAnInstant<'k> {
    srv: &'k Server,
    sweep: SweepHandle<'k>,
    head: Vec<u8>,
    /// Per physical database: its keys and keys with an expiry then (none for a database
    /// the image leaves out).
    dbs: Vec<(usize, usize)>,
    /// Per shard of a database with keys then: its records, once visited (taken out as
    /// they are written).
    records: Arc<std::collections::HashMap<u32, ShardRecords>>,
}

/// One shard's records in an image of one instant: None until the sweep visits it.
type ShardRecords = parking_lot::Mutex<Option<Result<Vec<u8>, SnapshotError>>>;

impl<'k> ImageOfAnInstant<'k> {
    /// Starts the image while `guards` holds every shard.
    fn start(srv: &'k Server, guards: &mut Guards, scope: Scope) -> Self {
        let ks = &srv.keyspace;
        let now = now_ms();
        let included = |db| in_snapshots(srv, db, scope) && (scope != Scope::DefaultNamespace || db < crate::keyspace::NUM_DBS);
        let dbs: Vec<(usize, usize)> = (0..ks.dbs()).map(|db| if included(db) { db_counts(ks, guards, db) } else { (0, 0) }).collect();
        let wanted = dbs.iter().enumerate().filter(|(_, &(keys, _))| keys > 0).flat_map(|(db, _)| ks.db_shard_ids(db));
        let records: Arc<std::collections::HashMap<u32, ShardRecords>> = Arc::new(wanted.map(|id| (id, parking_lot::Mutex::new(None))).collect());
        let (into, per_db) = (records.clone(), ks.shards_per_db());
        let sweep = ks.start_sweep(
            guards,
            Box::new(move |ks, id, shard| {
                if let Some(slot) = into.get(&id) {
                    let mut out = Vec::new();
                    let r = shard_records(&mut out, ks, id as usize / per_db, shard, now).map(|()| out);
                    *slot.lock() = Some(r);
                }
            }),
        );
        ImageOfAnInstant { srv, sweep, head: header(srv, scope), dbs, records }
    }

    /// Writes the image's header and keys (not its end) to `sink`, visiting the shards no
    /// write has visited yet in order, one lock at a time.
    fn write_to(self, locks: &LockCap, sink: &mut Sink) -> Result<(), SnapshotError> {
        sink(&self.head)?;
        let ks = &self.srv.keyspace;
        for (db, &(keys, expires)) in self.dbs.iter().enumerate() {
            if keys == 0 {
                continue;
            }
            sink(&db_head(db, keys, expires))?;
            for id in ks.db_shard_ids(db) {
                self.sweep.visit(locks, id);
                if let Some(records) = self.records.get(&id).and_then(|slot| slot.lock().take()) {
                    sink(&records?)?;
                }
            }
        }
        Ok(())
    }

    /// The whole image in memory, with its end and checksum.
    pub fn finish(self, locks: &LockCap) -> Result<Vec<u8>, SnapshotError> {
        let mut image = Vec::new();
        self.write_to(locks, &mut |bytes| {
            image.extend_from_slice(bytes);
            Ok(())
        })?;
        image.push(OP_EOF);
        let crc = crc64(&image);
        image.extend_from_slice(&crc.to_le_bytes());
        Ok(image)
    }
}

/// Database `db`'s keys and keys with an expiry, through the shards `guards` holds.
fn db_counts(ks: &Keyspace, guards: &mut Guards, db: usize) -> (usize, usize) {
    if !ks.db_opened(db) {
        return (0, 0);
    }
    ks.db_shard_ids(db).fold((0, 0), |(keys, expires), id| {
        let shard = guards.shard(id);
        (keys + shard.len(), expires + shard.volatile)
    })
}

/// Appends the records of shard `shard` of database `db` to `out`.
fn shard_records(out: &mut Vec<u8>, ks: &Keyspace, db: usize, shard: &crate::keyspace::Shard, now: i64) -> Result<(), SnapshotError> {
    shard.iter().try_for_each(|e| write_entry(out, ks, db, e, now))
}

/// A database's start in an image: SELECTDB and its key counts (RESIZEDB, a hint).
fn db_head(db: usize, keys: usize, expires: usize) -> Vec<u8> {
    let mut head = vec![OP_SELECTDB];
    put_len(&mut head, db);
    head.push(OP_RESIZEDB);
    put_len(&mut head, keys);
    put_len(&mut head, expires);
    head
}

/// Writes `dump.rdb`'s header and keys (not its end) to `sink` through the shards `guards`
/// holds (every one: SAVE).
fn write_held_image(srv: &Server, guards: &mut Guards, sink: &mut Sink) -> Result<(), SnapshotError> {
    sink(&header(srv, Scope::Everything))?;
    let now = now_ms();
    let ks = &srv.keyspace;
    let mut buf = Vec::new();
    for db in (0..ks.dbs()).filter(|&db| in_snapshots(srv, db, Scope::Everything)) {
        let (keys, expires) = db_counts(ks, guards, db);
        if keys == 0 {
            continue;
        }
        sink(&db_head(db, keys, expires))?;
        for id in ks.db_shard_ids(db) {
            shard_records(&mut buf, ks, db, guards.shard(id), now)?;
            sink(&buf)?;
            buf.clear();
        }
    }
    Ok(())
}

/// SAVE: a point-in-time image, through the shards the command holds.
pub fn save_with_guards(srv: &Server, guards: &mut Guards) -> Result<(), SnapshotError> {
    let seq = srv.wal().map(|w| w.last_assigned());
    let r = write_recorded(srv, |sink| write_held_image(srv, guards, sink));
    if let (Ok(()), Some(seq)) = (&r, seq) {
        checkpoint(srv, seq, |tier| relog_dirty(srv, tier, guards));
    }
    r
}

/// After an image covering the log up to `seq` is durable: the log before it can go.
/// Write-back keys storage has not taken yet are logged again after it (`relog`, given the
/// storage tier: `relog_dirty` through every shard), so a restart still knows they are dirty.
fn checkpoint(srv: &Server, seq: u64, relog: impl FnOnce(&crate::storage::tier::StorageTier)) {
    let Some(wal) = srv.wal() else { return };
    wal.checkpoint(seq);
    if let Some(tier) = srv.storage_tier() {
        relog(tier);
    }
}

/// After a checkpoint (every shard held): the dirty keys' after-images again, so the log
/// that is left still marks them dirty on a restart.
fn relog_dirty(srv: &Server, tier: &crate::storage::tier::StorageTier, guards: &mut Guards) {
    let Some(wal) = srv.wal() else { return };
    let now = now_ms();
    let mut records = Vec::new();
    let mut count = 0u32;
    for (db, key) in tier.dirty.keys() {
        let ns_base = db / crate::keyspace::NUM_DBS * crate::keyspace::NUM_DBS;
        match guards.shard(srv.keyspace.shard_id(db, &key)).peek(&key, now) {
            Some(e) => {
                let mut v = Vec::new();
                if crate::storage::record::encode(&srv.keyspace, db, e, &mut v).is_ok() {
                    crate::wal::frame::put_record(&mut records, now, db, ns_base, &[crate::storage::WB_RECORD, &key, &v]);
                    count += 1;
                }
            }
            None => {
                crate::wal::frame::put_record(&mut records, now, db, ns_base, &[crate::storage::WB_RECORD, &key]);
                count += 1;
            }
        }
    }
    if count > 0 {
        wal.append_after_images(&records, count);
    }
}

/// Writes the snapshot and notes its outcome: on success its time, and the changes it
/// covers (those counted when it began) are no longer unsaved.
fn write_recorded(srv: &Server, body: impl FnOnce(&mut Sink) -> Result<(), SnapshotError>) -> Result<(), SnapshotError> {
    let before = srv.snapshot.changes.load(Ordering::Relaxed);
    let r = write_snapshot(srv, body);
    srv.snapshot.last_ok.store(r.is_ok(), Ordering::Relaxed);
    if r.is_ok() {
        srv.snapshot.last_save.store(now_ms() / 1000, Ordering::Relaxed);
        srv.snapshot.changes.fetch_sub(before, Ordering::Relaxed);
        srv.snapshot.saves.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// How long a failed save points' snapshot waits before it is tried again.
const SAVE_RETRY_MS: i64 = 5000;

/// Save points ("SECONDS CHANGES …", CONFIG's `save`) as pairs; None for "" or a value
/// that does not parse (CONFIG SET validates it).
pub fn save_points(text: &str) -> Option<Vec<(i64, u64)>> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(2) {
        return None;
    }
    words.chunks(2).map(|p| Some((p[0].parse().ok()?, p[1].parse().ok()?))).collect()
}

/// Starts a background save when a save point is reached: at least CHANGES writes since the
/// last save and it is at least SECONDS old (called every second by the cron).
pub fn save_if_due(srv: &Server) {
    let Some(points) = srv.param("save").as_deref().and_then(save_points) else { return };
    let state = &srv.snapshot;
    let (changes, now) = (state.changes.load(Ordering::Relaxed), now_ms());
    let age_s = now / 1000 - state.last_save.load(Ordering::Relaxed);
    let due = points.iter().any(|&(secs, n)| changes >= n && changes > 0 && age_s >= secs);
    let may_retry = state.last_ok.load(Ordering::Relaxed) || now - state.last_try_ms.load(Ordering::Relaxed) >= SAVE_RETRY_MS;
    if due && may_retry && start_background(srv) {
        state.last_try_ms.store(now, Ordering::Relaxed);
        tracing::info!(changes, seconds = age_s, "save point reached: saving in the background");
    }
}

/// BGSAVE: has the saver thread write the snapshot (`save_in_background`). False if a save
/// is already running.
pub fn start_background(srv: &Server) -> bool {
    if srv.snapshot.in_progress.swap(true, Ordering::AcqRel) {
        return false;
    }
    let (requested, wake) = &*srv.snapshot.requested;
    *requested.lock() = true;
    wake.notify_one();
    true
}

/// Starts the saver thread, which writes BGSAVE's snapshots until the server is gone.
pub fn spawn_saver(srv: &Arc<Server>, locks: LockCap) -> std::io::Result<std::thread::JoinHandle<()>> {
    let (weak, request) = (Arc::downgrade(srv), srv.snapshot.requested.clone());
    std::thread::Builder::new().name("terrace-bgsave".into()).spawn(move || loop {
        {
            let (requested, wake) = &*request;
            let mut asked = requested.lock();
            if !*asked {
                wake.wait_for(&mut asked, std::time::Duration::from_secs(1));
            }
            if !std::mem::take(&mut *asked) {
                if weak.strong_count() == 0 {
                    return;
                }
                continue;
            }
        }
        let Some(srv) = weak.upgrade() else { return };
        save_in_background(&srv, &locks);
    })
}

/// One BGSAVE (and the one scheduled meanwhile, if any): an image of one instant (the
/// log's position then, when there is a log), every shard held only to start it.
fn save_in_background(srv: &Server, locks: &LockCap) {
    let every_shard = || srv.keyspace.lock_all(locks);
    loop {
        let mut guards = every_shard();
        let seq = srv.wal().map(|w| w.last_assigned());
        let image = ImageOfAnInstant::start(srv, &mut guards, Scope::Everything);
        drop(guards);
        let r = write_recorded(srv, |sink| image.write_to(locks, sink));
        if let (Ok(()), Some(seq)) = (&r, seq) {
            // (Every shard again only to log the dirty keys again, if there is storage.)
            checkpoint(srv, seq, |tier| relog_dirty(srv, tier, &mut every_shard()));
        }
        match &r {
            Ok(()) => tracing::info!("background saving terminated with success"),
            Err(e) => tracing::error!("background saving failed: {e}"),
        }
        if !srv.snapshot.scheduled.swap(false, Ordering::AcqRel) {
            srv.snapshot.in_progress.store(false, Ordering::Release);
            return;
        }
    }
}

/// Loads `dump.rdb` from the data directory into an empty keyspace; returns the keys loaded
/// (0 when there is no file). With `keys` false only FUNCTION libraries are taken (the
/// keys came from a warm restart of the PMem tier, which is newer).
pub fn load(srv: &Server, locks: &LockCap, keys: bool) -> Result<Loaded, SnapshotError> {
    let path = rdb_path(&srv.config.data_dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(source) => return Err(SnapshotError::Io { path, source }),
    };
    load_image(srv, locks, &bytes, keys, path)
}

/// Loads an RDB image (`path`: where it came from, for errors) into an empty keyspace, as
/// `load` does with `dump.rdb` (a replica loads its master's this way).
pub fn load_image(srv: &Server, locks: &LockCap, bytes: &[u8], keys: bool, path: PathBuf) -> Result<Loaded, SnapshotError> {
    load_image_into(srv, locks, bytes, Loading::Apply { keys }, path, None)
}

/// Reads a master's image through without applying any of it: whether it would load. A
/// replica checks before it lets its own keys go, so that a bad image (truncated, corrupt,
/// a database or a type this engine does not have) leaves it as it was.
pub fn check_replica_image(srv: &Server, locks: &LockCap, bytes: &[u8]) -> Result<(), SnapshotError> {
    load_image_into(srv, locks, bytes, Loading::Check, "(the master's snapshot)".into(), None).map(|_| ())
}

/// What loading an image does with it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Loading {
    /// Applies it: its namespaces and functions, and its keys when `keys`.
    Apply { keys: bool },
    /// Only decodes it (keys, and libraries' code run as loading them would), to find what
    /// is wrong with it.
    Check,
}

/// As `load_image`, for a replica: with storage of its own (`own`), every storage-backed
/// tenant's data there is replaced by what the image carries of its master's storage
/// (`OP_STORED`, written in batches) — tenants it knows now are wiped first, tenants the
/// image names anew when their first key comes.
pub fn load_replica_image(srv: &Server, locks: &LockCap, bytes: &[u8], own: Option<&crate::storage::tier::StorageTier>) -> Result<Loaded, SnapshotError> {
    let path: PathBuf = "(the master's snapshot)".into();
    let mut batch = None;
    if let Some(tier) = own {
        let mut wiped = std::collections::HashSet::new();
        let namespaces = srv.namespaces.lock().len();
        for ns in (0..namespaces).filter(|&ns| tier.backs(ns)) {
            let tenant = crate::storage::flusher::Source::tenant_of(srv, ns * crate::keyspace::NUM_DBS);
            wipe_own_storage(tier, &tenant).map_err(|e| SnapshotError::Corrupt { path: path.clone(), why: format!("its storage tier: {e}") })?;
            wiped.insert(tenant);
        }
        batch = Some(StoredBatch { tier, ops: Vec::new(), wiped });
    }
    load_image_into(srv, locks, bytes, Loading::Apply { keys: true }, path, batch)
}

/// Deletes everything `tenant` has in this engine's own storage tier (a replica's full sync
/// replaces it with its master's).
pub(crate) fn wipe_own_storage(tier: &crate::storage::tier::StorageTier, tenant: &str) -> Result<(), crate::storage::StorageError> {
    let storage = &tier.storage;
    loop {
        let page = storage.block_on(storage.scan(tenant.to_string(), None, 1024))?;
        if page.is_empty() {
            return Ok(());
        }
        storage.block_on(storage.write(tenant.to_string(), page.into_iter().map(|(k, _)| (k, None)).collect()))?;
    }
}

/// Keys bound for a replica's own storage tier, by tenant, written a batch at a time (each
/// tenant's old data wiped first).
struct StoredBatch<'t> {
    tier: &'t crate::storage::tier::StorageTier,
    ops: Vec<(String, crate::storage::Op)>,
    wiped: std::collections::HashSet<String>,
}

impl StoredBatch<'_> {
    const SIZE: usize = 1024;

    fn add(&mut self, tenant: String, db: usize, key: Vec<u8>, record: Vec<u8>) -> Result<(), crate::storage::StorageError> {
        if !self.wiped.contains(&tenant) {
            wipe_own_storage(self.tier, &tenant)?;
            self.wiped.insert(tenant.clone());
        }
        self.ops.push((tenant, (crate::storage::tier::storage_key(db % crate::keyspace::NUM_DBS, &key), Some(record))));
        if self.ops.len() >= Self::SIZE {
            self.write()?;
        }
        Ok(())
    }

    fn write(&mut self) -> Result<(), crate::storage::StorageError> {
        let mut ops = std::mem::take(&mut self.ops);
        while !ops.is_empty() {
            let tenant = ops[0].0.clone();
            let (mine, rest): (Vec<_>, Vec<_>) = ops.into_iter().partition(|(t, _)| *t == tenant);
            ops = rest;
            let storage = &self.tier.storage;
            storage.block_on(storage.write(tenant, mine.into_iter().map(|(_, op)| op).collect()))?;
        }
        Ok(())
    }
}

fn load_image_into(
    srv: &Server,
    locks: &LockCap,
    bytes: &[u8],
    loading: Loading,
    path: PathBuf,
    mut for_storage: Option<StoredBatch>,
) -> Result<Loaded, SnapshotError> {
    let (apply, keys) = match loading {
        Loading::Apply { keys } => (true, keys),
        Loading::Check => (false, false),
    };
    let corrupt = |why: String| SnapshotError::Corrupt { path: path.clone(), why };
    if bytes.len() < 9 + 9 || &bytes[..5] != b"REDIS" {
        return Err(corrupt("missing the REDIS header".into()));
    }
    let version: u16 = std::str::from_utf8(&bytes[5..9]).ok().and_then(|v| v.parse().ok()).ok_or_else(|| corrupt("bad version".into()))?;
    if version > RDB_VERSION {
        return Err(corrupt(format!("RDB version {version} is newer than {RDB_VERSION}")));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 8);
    let stored = u64::from_le_bytes(crc.try_into().expect("8 bytes"));
    if stored != 0 && crc64(body) != stored {
        return Err(corrupt("checksum mismatch".into()));
    }
    let mut r = Reader::new(body);
    r.pos = 9;
    let now = now_ms();
    let (mut db, mut loaded, mut expire) = (0usize, 0usize, None::<i64>);
    let mut wal_seq = None;
    let lfu = srv.keyspace.lfu.load(Ordering::Relaxed);
    loop {
        let op = r.byte().map_err(|_| corrupt("truncated".into()))?;
        let bad = |e: RdbError| corrupt(e.to_string());
        match op {
            OP_EOF => break,
            OP_AUX => {
                let k = r.string().map_err(bad)?;
                let v = r.string().map_err(bad)?;
                if k == b"terrace-wal-seq" {
                    wal_seq = std::str::from_utf8(&v).ok().and_then(|v| v.parse().ok());
                }
                if k == b"terrace-namespaces" && keys {
                    let mut names = srv.namespaces.lock();
                    names.truncate(1);
                    names.extend(String::from_utf8_lossy(&v).split(',').filter(|n| !n.is_empty()).map(str::to_string));
                }
                if let Some(tenant) = k.strip_prefix(FUNCTION_AUX.as_bytes()) {
                    let tenant = String::from_utf8_lossy(tenant);
                    // (Checking, the tenant's namespace is not known: the image's list is not
                    // applied. The code is.)
                    let ns = match apply {
                        true => srv
                            .tenant_namespace(&tenant)
                            .filter(|&ns| ns > 0)
                            .ok_or_else(|| corrupt(format!("a function library of tenant '{tenant}', which has no namespace")))?,
                        false => 0,
                    };
                    library(srv, ns, &String::from_utf8_lossy(&v), apply).map_err(corrupt)?;
                }
            }
            OP_SELECTDB => {
                db = r.length().map_err(bad)?;
                if db >= srv.keyspace.dbs() {
                    return Err(corrupt(format!("database {db} out of range")));
                }
            }
            OP_RESIZEDB => {
                r.length().map_err(bad)?;
                r.length().map_err(bad)?;
            }
            OP_EXPIRETIME_MS => expire = Some(i64::from_le_bytes(r.take(8).map_err(bad)?.try_into().expect("8"))),
            OP_EXPIRETIME => expire = Some(i32::from_le_bytes(r.take(4).map_err(bad)?.try_into().expect("4")) as i64 * 1000),
            OP_IDLE => {
                r.length().map_err(bad)?;
            }
            OP_FREQ => {
                r.byte().map_err(bad)?;
            }
            OP_FUNCTION2 => {
                let code = String::from_utf8_lossy(&r.string().map_err(bad)?).into_owned();
                library(srv, 0, &code, apply).map_err(corrupt)?;
            }
            OP_STORED => {
                let key = r.string().map_err(bad)?;
                let record = r.string().map_err(bad)?;
                if !apply {
                    continue;
                }
                let Some(batch) = for_storage.as_mut() else {
                    return Err(corrupt("a stored key outside a replica's image, or for an engine without a storage tier".into()));
                };
                let tenant = crate::storage::flusher::Source::tenant_of(srv, db);
                batch.add(tenant, db, key, record).map_err(|e| corrupt(format!("its storage tier refused the master's keys: {e}")))?;
            }
            t => {
                let key = r.string().map_err(bad)?;
                let value = decode_value(&mut r, t)
                    .map_err(|e| corrupt(format!("key '{}': {}", String::from_utf8_lossy(&key), e.to_string().trim_start_matches("ERR "))))?;
                let exp = expire.take();
                if !keys || exp.is_some_and(|t| t <= now) {
                    continue;
                }
                let meta = Meta { expire: exp, flags: 0, version: srv.keyspace.next_version(), access: access::new_stamp(lfu, now) };
                let entry = match value {
                    Restored::Str(v) => Entry::new_str(&key, &v, &meta),
                    Restored::Coll(c) => Entry::new_coll(&key, c, &meta),
                };
                srv.keyspace.lock_one(locks, srv.keyspace.shard_id(db, &key)).insert(entry);
                loaded += 1;
            }
        }
    }
    if let Some(batch) = for_storage.as_mut() {
        batch.write().map_err(|e| corrupt(format!("its storage tier refused the master's keys: {e}")))?;
    }
    Ok(Loaded { keys: loaded, wal_seq, exists: true })
}

/// What loading `dump.rdb` found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub keys: usize,
    /// The WAL position the image covers (written while the WAL was on).
    pub wal_seq: Option<u64>,
    /// Whether there was a file at all.
    pub exists: bool,
}

/// The aux field a tenant's FUNCTION library is saved in, followed by the tenant's name.
const FUNCTION_AUX: &str = "terrace-function:";

/// Loads a saved FUNCTION library into namespace `ns` (`apply`), or only finds whether its
/// code loads (checking an image).
fn library(srv: &Server, ns: usize, code: &str, apply: bool) -> Result<(), String> {
    if apply {
        add_library(srv, ns, code)
    } else {
        check_library(srv, code).map(drop).map_err(|e| format!("function library: {e}"))
    }
}

/// Loads a saved FUNCTION library into namespace `ns`.
fn add_library(srv: &Server, ns: usize, code: &str) -> Result<(), String> {
    let (name, lib) = check_library(srv, code).map_err(|e| format!("function library: {e}"))?;
    srv.scripts.functions.add(ns, &name, lib, true).map_err(|e| format!("function library '{name}': {e}"))
}

/// A function library's name and functions, found by running its code.
#[cfg(feature = "lua")]
fn check_library(srv: &Server, code: &str) -> Result<(String, crate::scripting::functions::Library), String> {
    crate::scripting::with_vm(&srv.scripts, |vm| vm.check_library(code))
}

/// Without Lua a library cannot be loaded: a file holding one is refused, not half loaded.
#[cfg(not(feature = "lua"))]
fn check_library(_srv: &Server, _code: &str) -> Result<(String, crate::scripting::functions::Library), String> {
    Err("this build has no Lua scripting (cargo feature `lua`)".into())
}
