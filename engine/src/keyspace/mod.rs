//! The keyspace: 16 databases, each split into a power-of-two number of shards with a lock
//! per shard, so that any reactor thread can serve any key.
//!
//! A database's shards are made when it is first locked (`open_db`): an engine holds up to
//! `namespaces` tenants of 16 databases each, and most databases are never used. A database
//! is made under shard 0's lock, which every hold of every shard (`lock_all`) takes first and
//! keeps: no database appears while such a hold lasts, so an image of that instant (a full
//! sync, SAVE) misses none of its writes.
//!
//! A command locks every shard it will touch before it runs, in one global order
//! (database, then shard index), so multi-key commands and transactions are atomic and can't
//! deadlock. `Guards` is the set of locks a command holds.
//!
//! Waiting for a shard lock needs a `LockCap`: `Keyspace::new` makes the only one, and the
//! node hands copies to the command pipeline and to its background workers (cron, eviction,
//! the PMem tier, storage, snapshots) — never to command handlers, which work on the locks
//! the pipeline took for them (`Guards`) and so cannot lock a shard they already hold.

pub mod access;
pub mod entry;
pub mod eviction;
pub mod moving;
pub mod prefetch;
pub mod queued;
pub mod ranked;
pub mod shard;
pub mod stream;
pub mod sweep;
pub mod value;

use std::borrow::Cow;
use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;

use crate::compress::tenant::{Settings, TenantCompression};
use crate::compress::CodecError;

/// A database's shards.
type DbShards = Box<[Mutex<Shard>]>;

/// Shard ids a command locks; most commands lock one.
pub type ShardIds = SmallVec<[u32; 4]>;

pub use entry::{Entry, Kind, Meta, ValueRef};
pub use shard::{is_expired, Happened, Shard};
pub use value::{hash_bytes, Collection};

/// Databases per namespace (SELECT 0-15). Namespace n owns physical databases
/// n*NUM_DBS .. (n+1)*NUM_DBS; namespace 0 is the default one.
pub const NUM_DBS: usize = 16;

/// How long a command holding shards waits for another one it visits (`Keyspace::visit`).
const FOREIGN_VISIT_WAIT: std::time::Duration = std::time::Duration::from_millis(5);
/// How long a client's command waits for a shard at a time before it looks whether its
/// namespace is being taken whole (`Keyspace::lock_shards_unless_held`).
const UNLESS_HELD_WAIT: std::time::Duration = std::time::Duration::from_micros(500);

thread_local! {
    /// Set while this thread holds a command's shard locks (`Guards`).
    static HOLDING_GUARDS: Cell<bool> = const { Cell::new(false) };
}

/// Locking a shard directly while holding a command's guards would deadlock (the locks are
/// not reentrant); fail loudly instead.
fn assert_not_holding_guards() {
    assert!(!HOLDING_GUARDS.with(|h| h.get()), "a shard was locked directly while the command holds its shard locks (use the command's Guards)");
}

/// The right to wait for shard locks outside a command's `Guards`. It cannot be made
/// outside this module: `Keyspace::new` returns the one capability, and whoever holds a copy
/// may lock. Command handlers are never given one (`tests/layers.py` also fails on a command
/// module outside the pipeline that names it), so no client input can make a handler lock a
/// shard, nor wait on one its own command holds.
#[derive(Debug, Clone)]
pub struct LockCap {
    _sealed: (),
}

pub struct Keyspace {
    /// Per physical database: its shards, once it was opened (`open_db`).
    shards: Box<[OnceLock<DbShards>]>,
    /// What a visit of a database never opened reads: an empty shard, never changed.
    unopened: Mutex<Shard>,
    /// The PMem tier's DRAM value bytes, which every shard counts into (kept to make a
    /// database's shards when it opens).
    dram_values: Option<Arc<AtomicI64>>,
    shard_bits: u32,
    /// Physical databases: NUM_DBS per namespace.
    dbs: usize,
    /// Per namespace: data bytes (entries and their collections), the operator's limit and
    /// the one the tenant set itself (Memcached's `cache_memlimit`; 0: none).
    ns_used: Vec<Arc<AtomicI64>>,
    ns_limit: Vec<AtomicU64>,
    ns_own_limit: Vec<AtomicU64>,
    /// Per namespace: bytes its clients' transactions hold queued (`queued::QueuedCharge`).
    ns_queued: Box<[Arc<AtomicI64>]>,
    /// Per namespace: since when (unix µs; 0: not) a command holds every one of its shards
    /// (`lock_namespace`: EXEC, a script, FLUSHALL).
    ns_held_since: Box<[AtomicI64]>,
    /// Where the cron's next re-measuring slice starts.
    remeasure_cursor: AtomicUsize,
    version: AtomicU64,
    /// Access stamps hold LFU counters (true) or LRU clocks (false).
    pub lfu: AtomicBool,
    /// Per namespace: its tenant's value compression.
    compression: Box<[Arc<TenantCompression>]>,
    /// The PMem tier, when configured. Declared after `shards` so entries (which release
    /// their PMem ranges when dropped) go before the arena.
    tier: Option<Arc<crate::tier::Tier>>,
    /// On while some client tracks keys (`tracking_switch`).
    tracking: Arc<AtomicBool>,
    /// On while keyspace notifications are (`set_notify`).
    notify: Arc<AtomicBool>,
    /// On while a blocked client must hear of its key's deletion (`deletion_switch`).
    deletions: Arc<AtomicBool>,
    /// On once replicas are fed: shards note the keys they expire (`Shard::expired`).
    feeding: Arc<AtomicBool>,
    /// Slots being moved to another engine: changes noted, then sealed (`moving`).
    moving: Arc<moving::Moving>,
    /// Point-in-time sweeps in progress: every lock that may change a shard shows it to
    /// them first (`locked`).
    sweeps: sweep::Sweeps,
}

thread_local! {
    /// Where string values are encoded before they are copied into their entry.
    static ENCODE_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Where compressed strings are decoded for a reply (no allocation per read).
    static DECODE_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The shards a command holds, sorted by global shard id.
pub struct Guards<'a> {
    held: SmallVec<[(u32, MutexGuard<'a, Shard>); 4]>,
    /// A command declared `Lock::Visit` (or background work holding a `LockCap`): it may lock
    /// shards one at a time through `Keyspace::visit` while it holds none.
    visits: bool,
    /// Where a command that reached a shard it did not lock was sent instead (`shard`,
    /// `pair`): two empty shards, whose contents are dropped with the guards.
    stray: Option<Box<[Shard; 2]>>,
    /// Holding a whole namespace: its `ns_held_since`, cleared when the guards go.
    whole: Option<&'a AtomicI64>,
}

/// A command reached a shard it neither holds nor may lock: its table entry does not declare
/// the key, or it holds some shards and locking another would break the lock order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ERR internal error: the command reached a shard it did not declare in the command table")]
pub struct Undeclared;

impl Keyspace {
    /// A keyspace whose tenants start with `compression` settings, keeping dictionary files
    /// under `dict_root` (None: not persisted), and the capability to lock its shards.
    pub fn new(
        shard_bits: u32,
        namespaces: usize,
        compression: &Settings,
        dict_root: Option<PathBuf>,
        tier: Option<Arc<crate::tier::Tier>>,
    ) -> (Keyspace, LockCap) {
        let dbs = NUM_DBS * namespaces.max(1);
        let ns_used: Vec<Arc<AtomicI64>> = (0..namespaces.max(1)).map(|_| Arc::new(AtomicI64::new(0))).collect();
        let dram_values = tier.as_ref().map(|t| t.dram_values.clone());
        let tracking = Arc::new(AtomicBool::new(false));
        let notify = Arc::new(AtomicBool::new(false));
        let deletions = Arc::new(AtomicBool::new(false));
        let feeding = Arc::new(AtomicBool::new(false));
        let moving = Arc::new(moving::Moving::default());
        let keyspace = Keyspace {
            tier,
            shards: (0..dbs).map(|_| OnceLock::new()).collect(),
            unopened: Mutex::new(Shard::default()),
            dram_values,
            moving,
            sweeps: Default::default(),
            tracking,
            notify,
            deletions,
            feeding,
            shard_bits,
            dbs,
            ns_limit: (0..ns_used.len()).map(|_| AtomicU64::new(0)).collect(),
            ns_own_limit: (0..ns_used.len()).map(|_| AtomicU64::new(0)).collect(),
            ns_queued: (0..ns_used.len()).map(|_| Arc::new(AtomicI64::new(0))).collect(),
            ns_held_since: (0..ns_used.len()).map(|_| AtomicI64::new(0)).collect(),
            ns_used,
            remeasure_cursor: AtomicUsize::new(0),
            version: AtomicU64::new(1),
            lfu: AtomicBool::new(false),
            compression: (0..namespaces.max(1)).map(|_| Arc::new(TenantCompression::new(compression.clone(), dict_root.clone()))).collect(),
        };
        // Database 0 holds shard 0, the first in the lock order (`lock_all`).
        keyspace.shards[0].get_or_init(|| keyspace.new_db(0));
        (keyspace, LockCap { _sealed: () })
    }

    /// Database `db`'s shards, new and empty.
    fn new_db(&self, db: usize) -> DbShards {
        let counted = &self.ns_used[db / NUM_DBS];
        (0..1usize << self.shard_bits)
            .map(|_| {
                let shard = Shard::counting_into(counted.clone(), self.dram_values.clone());
                let shard = shard.tracked_by(self.tracking.clone(), self.notify.clone(), self.deletions.clone());
                Mutex::new(shard.feeding_into(self.feeding.clone()).moving_with(self.moving.clone()))
            })
            .collect()
    }

    /// Shard `id`, if its database was opened.
    #[inline]
    fn opened(&self, id: u32) -> Option<&Mutex<Shard>> {
        let db = (id >> self.shard_bits) as usize;
        self.shards.get(db)?.get().map(|shards| &shards[id as usize & ((1 << self.shard_bits) - 1)])
    }

    /// Shard `id`, its database opened first if it was not. Not while this thread holds
    /// shards (making a database takes shard 0's lock).
    #[inline]
    fn slot(&self, id: u32) -> &Mutex<Shard> {
        match self.opened(id) {
            Some(shard) => shard,
            None => &self.open_db((id >> self.shard_bits) as usize)[id as usize & ((1 << self.shard_bits) - 1)],
        }
    }

    /// Makes database `db`'s shards (under shard 0's lock: see the module's header).
    #[cold]
    fn open_db(&self, db: usize) -> &[Mutex<Shard>] {
        assert_not_holding_guards();
        let first = self.opened(0).unwrap_or(&self.unopened);
        let _instant = first.lock();
        self.shards[db].get_or_init(|| self.new_db(db))
    }

    /// Whether database `db` has been opened (its shards exist).
    pub fn db_opened(&self, db: usize) -> bool {
        self.shards.get(db).is_some_and(|s| s.get().is_some())
    }

    /// Every shard id there may be (opened or not): the size of a table indexed by id.
    pub fn id_space(&self) -> usize {
        self.shards.len() << self.shard_bits
    }

    /// The slots being moved away: whose changes shards note, which are sealed.
    pub fn moving(&self) -> &moving::Moving {
        &self.moving
    }

    /// Takes the keys of moving slots that changed in shard `id` since the last call (locks
    /// it; a key may be listed more than once).
    pub fn take_moved(&self, _: &LockCap, id: u32) -> Vec<Vec<u8>> {
        let Some(shard) = self.opened(id) else { return Vec::new() };
        std::mem::take(&mut self.locked(id, shard.lock()).moved)
    }

    /// The switch that makes shards note changed keys for CLIENT TRACKING (held by the
    /// tracking service, on while any client tracks).
    pub fn tracking_switch(&self) -> Arc<AtomicBool> {
        self.tracking.clone()
    }

    /// Turns keyspace notifications' event noting on or off (off: what shards noted goes).
    pub fn set_notify(&self, on: bool) {
        if self.notify.swap(on, Ordering::SeqCst) && !on && !self.deletions.load(Ordering::SeqCst) {
            // Never waits: CONFIG SET may run inside EXEC, which holds shards. A shard
            // held now is drained by its command, which drops the events (notifications off).
            for s in self.opened_shards() {
                if let Some(mut s) = s.try_lock() {
                    s.events.clear();
                }
            }
        }
    }

    pub fn notifying(&self) -> bool {
        self.notify.load(Ordering::Relaxed)
    }

    /// The switch that makes shards note changed keys while a blocked client must hear of
    /// its key's deletion (held by the block registry).
    pub fn deletion_switch(&self) -> Arc<AtomicBool> {
        self.deletions.clone()
    }

    /// Whether shards note what happens to keys (notifications, or deletion waiters).
    /// Shards note the keys they expire from now on (replicas are fed).
    pub fn start_feeding(&self) {
        self.feeding.store(true, Ordering::SeqCst);
    }

    pub fn noting(&self) -> bool {
        self.notify.load(Ordering::Relaxed) || self.deletions.load(Ordering::Relaxed)
    }

    /// Takes the changed keys background work (expiry, eviction) left in shards that no
    /// command holds now; a shard a command holds is left to that command's commit.
    pub fn take_invalidated(&self) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        for s in self.opened_shards() {
            if let Some(mut s) = s.try_lock() {
                keys.append(&mut s.invalidated);
            }
        }
        keys
    }

    /// The namespace a physical database belongs to.
    #[inline]
    pub fn namespace_of(&self, db: usize) -> usize {
        db / NUM_DBS
    }

    /// Namespace `ns`'s compression state.
    pub fn compression(&self, ns: usize) -> &Arc<TenantCompression> {
        &self.compression[ns.min(self.compression.len() - 1)]
    }

    pub fn compressions(&self) -> &[Arc<TenantCompression>] {
        &self.compression
    }

    /// The PMem tier, when configured.
    pub fn tier(&self) -> Option<&Arc<crate::tier::Tier>> {
        self.tier.as_ref()
    }

    /// A string entry for `value` in database `db`: compressed when its tenant says so,
    /// placed in PMem when the tier's policy is pmem-first.
    pub fn new_str_entry(&self, db: usize, key: &[u8], value: &[u8], meta: &Meta) -> Entry {
        let t = &self.compression[db / NUM_DBS];
        if t.enabled() {
            let encoded = ENCODE_BUF.with(|b| {
                let mut b = b.borrow_mut();
                t.encode_for_write(value, &mut b).then(|| self.placed(db, entry::ENCODED_STR, key, &b, meta))
            });
            if let Some(e) = encoded {
                return e;
            }
        }
        self.placed(db, Kind::Str as u8, key, value, meta)
    }

    /// A new string entry with `stored` bytes, in PMem if the tier admits it there.
    fn placed(&self, db: usize, kind_bits: u8, key: &[u8], stored: &[u8], meta: &Meta) -> Entry {
        if let Some(e) = self.tier.as_ref().and_then(|t| t.place_new(db / NUM_DBS, kind_bits, key, stored, meta)) {
            return e;
        }
        if kind_bits == entry::ENCODED_STR {
            Entry::new_encoded_str(key, stored, meta)
        } else {
            Entry::new_str(key, stored, meta)
        }
    }

    /// Calls `f` with the value of a string entry of database `db` (decoded into a
    /// per-thread buffer if it is stored compressed); None if the entry is not a string.
    pub fn with_string<R>(&self, db: usize, e: &Entry, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>, CodecError> {
        match e.value() {
            ValueRef::Str(v) => {
                self.compression[db / NUM_DBS].note_read();
                Ok(Some(f(v)))
            }
            ValueRef::Encoded(stored) => {
                let t = &self.compression[db / NUM_DBS];
                t.note_read();
                DECODE_BUF.with(|b| {
                    let mut b = b.borrow_mut();
                    b.clear();
                    t.decode(stored, &mut b)?;
                    let r = f(&b);
                    if b.capacity() > 1 << 20 {
                        *b = Vec::new(); // don't keep a huge value's buffer around
                    }
                    Ok(Some(r))
                })
            }
            ValueRef::Coll(_) | ValueRef::Frozen(..) => Ok(None),
        }
    }

    /// The value of a string entry of database `db`, decoded if it is stored compressed;
    /// None if the entry is not a string.
    pub fn string<'e>(&self, db: usize, e: &'e Entry) -> Result<Option<Cow<'e, [u8]>>, CodecError> {
        match e.value() {
            ValueRef::Str(v) => {
                self.compression[db / NUM_DBS].note_read();
                Ok(Some(Cow::Borrowed(v)))
            }
            _ => self.with_string(db, e, |v| Cow::Owned(v.to_vec())),
        }
    }

    /// The same string entry stored plain and in DRAM, if it is stored compressed or in PMem
    /// (its representation changes, nothing else: see `Entry::restored_as`).
    pub fn plain_copy(&self, db: usize, e: &Entry) -> Result<Option<Entry>, CodecError> {
        if !e.is_encoded() {
            return Ok(if e.in_pmem() { crate::tier::promoted(e) } else { None });
        }
        Ok(self.string(db, e)?.map(|plain| e.restored_as(&plain, false)))
    }

    /// Physical databases (every namespace's).
    pub fn dbs(&self) -> usize {
        self.dbs
    }

    /// Data bytes of namespace `ns` (entries with their collections; not the tables, not
    /// allocator overhead). Exact for strings, re-measured for collections by the cron.
    pub fn namespace_used(&self, ns: usize) -> u64 {
        self.ns_used.get(ns).map(|c| c.load(Ordering::Relaxed).max(0) as u64).unwrap_or(0)
    }

    /// The data limit namespace `ns` is held to (0: none): the operator's, or the tenant's
    /// own when that is lower — a tenant can lower its limit, never raise it.
    pub fn namespace_limit(&self, ns: usize) -> u64 {
        let load = |v: &[AtomicU64]| v.get(ns).map(|l| l.load(Ordering::Relaxed)).unwrap_or(0);
        match (load(&self.ns_limit), load(&self.ns_own_limit)) {
            (0, own) => own,
            (operator, 0) => operator,
            (operator, own) => operator.min(own),
        }
    }

    /// Sets namespace `ns`'s limit: the operator's (`own` false) or the tenant's own.
    pub fn set_namespace_limit(&self, ns: usize, bytes: u64, own: bool) {
        let limits = if own { &self.ns_own_limit } else { &self.ns_limit };
        if let Some(l) = limits.get(ns) {
            l.store(bytes, Ordering::Relaxed);
        }
    }

    /// Whether namespace `ns` may take `incoming` more bytes: its data, what its
    /// transactions hold queued and those stay within its limit (or it has none).
    pub fn namespace_admits(&self, ns: usize, incoming: u64) -> bool {
        let limit = self.namespace_limit(ns);
        limit == 0 || self.namespace_used(ns).saturating_add(self.namespace_queued(ns)).saturating_add(incoming) <= limit
    }

    /// Bytes namespace `ns`'s transactions hold queued.
    pub fn namespace_queued(&self, ns: usize) -> u64 {
        self.ns_queued.get(ns).map(|c| c.load(Ordering::Relaxed).max(0) as u64).unwrap_or(0)
    }

    /// A new transaction's charge against namespace `ns`'s queued bytes.
    pub fn queued_charge(&self, ns: usize) -> queued::QueuedCharge {
        let counter = self.ns_queued.get(ns).cloned().unwrap_or_default();
        queued::QueuedCharge::new(counter)
    }

    /// Re-measures shards for up to `budget` (cron), resuming where the last slice stopped;
    /// shards a command holds are skipped.
    /// Tenant limits need it every tick; the PMem tier's DRAM budget only drifts when
    /// collections grow in place, so `tier_tick` (one tick in 20) is enough for it.
    pub fn remeasure_slice(&self, cap: &LockCap, budget: std::time::Duration, tier_tick: bool) {
        let limits = self.ns_limit.iter().chain(&self.ns_own_limit).any(|l| l.load(Ordering::Relaxed) != 0);
        if !(limits || tier_tick && self.tier.is_some()) {
            return;
        }
        let start = std::time::Instant::now();
        let (n, per_db) = (self.id_space(), 1usize << self.shard_bits);
        for _ in 0..n {
            let id = self.remeasure_cursor.fetch_add(1, Ordering::Relaxed) % n;
            if !self.db_opened(id / per_db) {
                // (Nothing to measure: on to the next database.)
                self.remeasure_cursor.fetch_add(per_db - 1 - id % per_db, Ordering::Relaxed);
                continue;
            }
            if let Some(mut s) = self.try_lock_one(cap, id as u32) {
                s.remeasure();
            }
            if start.elapsed() > budget {
                break;
            }
        }
    }

    pub fn shards_per_db(&self) -> usize {
        1 << self.shard_bits
    }

    /// Global id of the shard holding `key` in database `db`.
    #[inline]
    pub fn shard_id(&self, db: usize, key: &[u8]) -> u32 {
        if self.shard_bits == 0 {
            return db as u32;
        }
        self.shard_of_hash(db, hash_bytes(key))
    }

    /// Global id of the shard holding a key of hash `h` in database `db`.
    #[inline]
    fn shard_of_hash(&self, db: usize, h: u64) -> u32 {
        // Bits 40.. of the hash: hashbrown uses the low bits for the bucket and the top 7
        // for its control bytes, so shard selection must not reuse either.
        let s = (h >> 40) as usize & ((1 << self.shard_bits) - 1);
        ((db << self.shard_bits) | s) as u32
    }

    pub fn db_shard_ids(&self, db: usize) -> impl Iterator<Item = u32> {
        let n = self.shards_per_db();
        ((db * n) as u32)..(((db + 1) * n) as u32)
    }

    /// The ids of every shard of the databases opened now, in order.
    pub fn all_shard_ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.dbs).filter(|&db| self.db_opened(db)).flat_map(|db| self.db_shard_ids(db))
    }

    /// The shards of the databases opened now.
    fn opened_shards(&self) -> impl Iterator<Item = &Mutex<Shard>> {
        self.shards.iter().filter_map(|db| db.get()).flat_map(|shards| shards.iter())
    }

    /// Every shard of namespace `ns`'s databases (a contiguous range: namespace n owns
    /// databases n*NUM_DBS.., and a database's shards are contiguous).
    pub fn namespace_shard_ids(&self, ns: usize) -> std::ops::Range<u32> {
        let per_ns = (NUM_DBS << self.shard_bits) as u32;
        let first = (ns as u32 * per_ns).min(self.id_space() as u32);
        first..(first + per_ns).min(self.id_space() as u32)
    }

    /// Every shard, shard 0 first: which databases exist is read once it is held, and none
    /// is opened until these guards go (see the module's header). A full sync's image, SAVE,
    /// a tenant's drop.
    pub fn lock_all(&self, _: &LockCap) -> Guards<'_> {
        assert_not_holding_guards();
        HOLDING_GUARDS.with(|h| h.set(true));
        let mut held = SmallVec::new();
        held.push((0, self.locked(0, self.slot(0).lock())));
        for id in self.all_shard_ids().skip(1) {
            held.push((id, self.locked(id, self.slot(id).lock())));
        }
        Guards { held, visits: false, stray: None, whole: None }
    }

    /// Locks the given shards (ids may repeat and come in any order).
    pub fn lock_shards(&self, _: &LockCap, mut ids: ShardIds) -> Guards<'_> {
        assert_not_holding_guards();
        if ids.len() > 1 {
            ids.sort_unstable();
            ids.dedup();
        }
        // Databases are opened before any lock is taken (opening one takes shard 0's).
        let slots: SmallVec<[&Mutex<Shard>; 4]> = ids.iter().map(|&id| self.slot(id)).collect();
        if !ids.is_empty() {
            HOLDING_GUARDS.with(|h| h.set(true));
        }
        Guards { held: ids.into_iter().zip(slots).map(|(id, slot)| (id, self.locked(id, slot.lock()))).collect(), visits: false, stray: None, whole: None }
    }

    /// No locks held, and the right to visit shards one at a time (`visit`): for a command
    /// declared `Lock::Visit`, and for background work passing guards to the same functions.
    pub fn visiting(&self, _: &LockCap) -> Guards<'_> {
        Guards { held: SmallVec::new(), visits: true, stray: None, whole: None }
    }

    /// Every shard of namespace `ns` (a command declared `Lock::Namespace`), with the right to
    /// read other shards one at a time, briefly (`visit`: INFO's totals inside a script).
    /// Waits for another whole-namespace holder to finish (replaying the log, where nothing
    /// else runs, it never does).
    pub fn lock_namespace(&self, cap: &LockCap, ns: usize) -> Guards<'_> {
        loop {
            if let Some(guards) = self.try_lock_namespace(cap, ns) {
                return guards;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// As `lock_namespace`, unless another command holds (or is taking) namespace `ns`
    /// whole: then None, and the caller waits for it off its thread. The claim
    /// (`ns_held_since`) comes before the locks, so that a client's command that finds one
    /// of them taken learns why (`lock_shards_unless_held`).
    pub fn try_lock_namespace(&self, cap: &LockCap, ns: usize) -> Option<Guards<'_>> {
        let since = self.ns_held_since.get(ns);
        if let Some(since) = since {
            since.compare_exchange(0, crate::clock::now_us().max(1), Ordering::SeqCst, Ordering::Relaxed).ok()?;
        }
        let mut guards = self.lock_shards(cap, self.namespace_shard_ids(ns).collect());
        guards.visits = true;
        guards.whole = since;
        Some(guards)
    }

    /// As `lock_shards`, for a client's command in namespace `ns`: None (nothing held) when
    /// another command holds, or is taking, every shard of `ns` — a script, a long EXEC — so
    /// that the caller waits for it off its reactor's thread instead of in the lock (which
    /// would stop the reactor's other tenants for as long as the script runs).
    pub fn lock_shards_unless_held(&self, _: &LockCap, mut ids: ShardIds, ns: usize) -> Option<Guards<'_>> {
        assert_not_holding_guards();
        let claimed = || self.ns_held_since.get(ns).is_some_and(|s| s.load(Ordering::SeqCst) != 0);
        if claimed() {
            return None;
        }
        if ids.len() > 1 {
            ids.sort_unstable();
            ids.dedup();
        }
        // Databases are opened before any lock is taken (opening one takes shard 0's).
        let slots: SmallVec<[&Mutex<Shard>; 4]> = ids.iter().map(|&id| self.slot(id)).collect();
        let mut held = SmallVec::new();
        for (id, shard) in ids.into_iter().zip(slots) {
            let guard = loop {
                // A short wait at a time: the holder is another command (it goes in
                // microseconds), unless a claim appears meanwhile.
                if let Some(g) = shard.try_lock_for(UNLESS_HELD_WAIT) {
                    break self.locked(id, g);
                }
                if claimed() {
                    return None;
                }
            };
            held.push((id, guard));
        }
        if !held.is_empty() {
            HOLDING_GUARDS.with(|h| h.set(true));
        }
        Some(Guards { held, visits: false, stray: None, whole: None })
    }

    /// How long a command has held every shard of namespace `ns` (None: none does). A
    /// connection that would wait long for them waits off its thread instead.
    pub fn namespace_held_for(&self, ns: usize) -> Option<std::time::Duration> {
        let since = self.ns_held_since.get(ns)?.load(Ordering::Acquire);
        (since != 0).then(|| std::time::Duration::from_micros(crate::clock::now_us().saturating_sub(since).max(0) as u64))
    }

    /// Reads shard `id` for a command that visits shards one at a time (a census, a sample,
    /// totals): through the command's locks when it holds the shard (EXEC and scripts hold
    /// their namespace's shards), else by locking that shard alone, waiting at most `wait`
    /// (None: it stayed busy). A command that holds shards waits at most `FOREIGN_VISIT_WAIT`
    /// for another (two such commands of different tenants waiting for each other's shards
    /// both give up instead of deadlocking). A command that did not declare visits
    /// (`Guards::visits`) gets `Undeclared`.
    pub fn visit<R>(&self, guards: &mut Guards, id: u32, wait: std::time::Duration, f: impl FnOnce(&Shard) -> R) -> Result<Option<R>, Undeclared> {
        if guards.holds(id) {
            return Ok(Some(f(guards.shard(id))));
        }
        if !guards.visits {
            return Err(Undeclared);
        }
        let wait = if guards.held.is_empty() { wait } else { wait.min(FOREIGN_VISIT_WAIT) };
        // (A database never opened is empty.)
        let shard = self.opened(id).unwrap_or(&self.unopened);
        Ok(shard.try_lock_for(wait).map(|s| f(&s)))
    }

    /// As `visit`, changing the shard; waits for it.
    pub fn visit_mut<R>(&self, guards: &mut Guards, id: u32, f: impl FnOnce(&mut Shard) -> R) -> Result<R, Undeclared> {
        if guards.holds(id) {
            return Ok(f(guards.shard(id)));
        }
        if !guards.held.is_empty() || !guards.visits {
            return Err(Undeclared);
        }
        Ok(f(&mut self.locked(id, self.slot(id).lock())))
    }

    /// Locks one shard by id (background work: expiry, eviction, stats).
    pub fn lock_one(&self, _: &LockCap, id: u32) -> MutexGuard<'_, Shard> {
        assert_not_holding_guards();
        self.locked(id, self.slot(id).lock())
    }

    /// Locks one shard of a database already opened (None: never opened, so empty).
    pub fn lock_opened(&self, _: &LockCap, id: u32) -> Option<MutexGuard<'_, Shard>> {
        assert_not_holding_guards();
        self.opened(id).map(|shard| self.locked(id, shard.lock()))
    }

    /// A shard just locked, shown first to the sweeps in progress (which must see it as it
    /// was when they started): every lock that may change a shard goes through here.
    #[inline]
    fn locked<'s>(&self, id: u32, guard: MutexGuard<'s, Shard>) -> MutexGuard<'s, Shard> {
        self.sweeps.before_change(self, id, &guard);
        guard
    }

    /// Empties every shard, one at a time, dropping each table after its lock is released
    /// (a replica's full sync; a warm start that failed part way).
    pub fn clear_all(&self, locks: &LockCap) {
        for id in self.all_shard_ids() {
            let removed = self.lock_one(locks, id).clear();
            drop(removed);
        }
    }

    /// Empties the databases of namespace `ns`, one shard at a time (at start: a namespace
    /// dropped after the snapshot or the log's records that were loaded into it).
    pub fn clear_namespace(&self, locks: &LockCap, ns: usize) {
        for db in (ns * NUM_DBS..((ns + 1) * NUM_DBS).min(self.dbs())).filter(|&db| self.db_opened(db)) {
            let ids: Vec<u32> = self.db_shard_ids(db).collect();
            for id in ids {
                let removed = self.lock_one(locks, id).clear();
                drop(removed);
            }
        }
    }

    /// Locks one shard if it is free (background work skips shards a command holds).
    pub fn try_lock_one(&self, _: &LockCap, id: u32) -> Option<MutexGuard<'_, Shard>> {
        assert_not_holding_guards();
        self.opened(id)?.try_lock().map(|g| self.locked(id, g))
    }

    /// A fresh version number for a written entry.
    #[inline]
    pub fn next_version(&self) -> u64 {
        self.version.fetch_add(1, Ordering::Relaxed)
    }

    /// Namespace `ns`'s keys and bytes by where they live, visiting one shard at a time
    /// (`visit`). Shards another command holds for long are skipped (`shards_skipped`)
    /// rather than waited for.
    pub fn namespace_census(&self, guards: &mut Guards, ns: usize) -> Result<NamespaceCensus, Undeclared> {
        let per_ns = NUM_DBS << self.shard_bits;
        let mut c = NamespaceCensus::default();
        for id in ns * per_ns..((ns + 1) * per_ns).min(self.id_space()) {
            let counted = self.visit(guards, id as u32, std::time::Duration::from_millis(50), |shard| c.count(shard))?;
            c.shards_skipped += counted.is_none() as u64;
        }
        Ok(c)
    }

    /// Totals over every shard, visited one at a time (`visit`; a shard is waited for,
    /// unless a command holds its whole namespace — a tenant's long script must not stop
    /// another's INFO — and then it is left out).
    pub fn totals(&self, guards: &mut Guards) -> Result<Totals, Undeclared> {
        let mut t = Totals::default();
        let per_ns = NUM_DBS << self.shard_bits;
        for id in self.all_shard_ids() {
            let held_whole = self.namespace_held_for(id as usize / per_ns).is_some() && !guards.holds(id);
            let wait = if held_whole { std::time::Duration::ZERO } else { std::time::Duration::MAX };
            self.visit(guards, id, wait, |s| t.add(id as usize >> self.shard_bits, s))?;
        }
        Ok(t)
    }
}

impl NamespaceCensus {
    fn count(&mut self, shard: &Shard) {
        let c = self;
        {
            c.table_bytes += shard.table_bytes() as u64;
            for e in shard.iter() {
                c.keys += 1;
                c.key_bytes += e.key().len() as u64;
                c.entry_bytes += e.heap_size() as u64;
                match e.pmem() {
                    Some((_, len)) => c.pmem_value_bytes += len as u64,
                    None => c.dram_value_bytes += e.dram_value_size() as u64,
                }
                if e.is_encoded() {
                    c.encoded_values += 1;
                    c.encoded_bytes += e.pmem().map(|p| p.1).unwrap_or_else(|| e.dram_value_size()) as u64;
                }
            }
        }
    }
}

impl Drop for Guards<'_> {
    fn drop(&mut self) {
        if let Some(since) = self.whole {
            since.store(0, Ordering::Release);
        }
        if !self.held.is_empty() {
            HOLDING_GUARDS.with(|h| h.set(false));
        }
    }
}

/// One namespace's keys and bytes (`Keyspace::namespace_census`).
#[derive(Debug, Default, Clone, Copy)]
pub struct NamespaceCensus {
    pub keys: u64,
    pub key_bytes: u64,
    /// Entries on the heap: headers, keys, DRAM values, collections.
    pub entry_bytes: u64,
    pub dram_value_bytes: u64,
    pub pmem_value_bytes: u64,
    /// Compressed string values and their stored bytes (in either tier).
    pub encoded_values: u64,
    pub encoded_bytes: u64,
    /// The shards' hash tables (buckets and control bytes).
    pub table_bytes: u64,
    pub shards_skipped: u64,
}

/// Totals over every shard, for INFO and MEMORY STATS.
#[derive(Default)]
pub struct Totals {
    /// Per physical database.
    pub keys: Vec<usize>,
    pub expires: Vec<usize>,
    pub expired: u64,
    pub evicted: u64,
    pub table_bytes: u64,
}

impl Totals {
    fn add(&mut self, db: usize, s: &Shard) {
        if self.keys.len() <= db {
            self.keys.resize(db + 1, 0);
            self.expires.resize(db + 1, 0);
        }
        self.keys[db] += s.len();
        self.expires[db] += s.volatile;
        self.expired += s.expired_keys;
        self.evicted += s.evicted_keys;
        self.table_bytes += s.table_bytes() as u64;
    }
}

impl<'a> Guards<'a> {
    /// The held shard with this id. A shard the command did not lock is a bug in its command
    /// table entry: debug builds stop there; release builds hand out an empty stray shard
    /// instead of a wrong one, and the pipeline fails the command (`take_stray`).
    #[inline]
    pub fn shard(&mut self, id: u32) -> &mut Shard {
        if self.held.len() == 1 && self.held[0].0 == id {
            return &mut self.held[0].1;
        }
        match self.held.binary_search_by_key(&id, |(i, _)| *i) {
            Ok(i) => &mut self.held[i].1,
            Err(_) => &mut self.strayed(id)[0],
        }
    }

    #[cold]
    fn strayed(&mut self, id: u32) -> &mut [Shard; 2] {
        debug_assert!(false, "shard {id} is not locked by the command: its command table entry does not declare the key");
        tracing::error!(shard = id, "a command reached a shard it did not lock (a command table bug); the command fails");
        self.stray.get_or_insert_with(Default::default)
    }

    /// Whether the command reached a shard it did not lock since the last call: it must fail
    /// (what it did there is dropped).
    pub fn take_stray(&mut self) -> bool {
        self.stray.take().is_some()
    }

    /// Appends what happened to keys in the held shards (keyspace notifications) to `out`,
    /// with each key's database.
    pub fn take_events(&mut self, shards_per_db: usize, out: &mut Vec<(usize, Happened, Vec<u8>)>) {
        for (id, s) in self.held.iter_mut() {
            let db = *id as usize / shards_per_db;
            out.extend(s.events.drain(..).map(|(h, k)| (db, h, k)));
        }
    }

    /// Appends the keys the held shards expired while replicas are fed to `out`, with each
    /// key's database.
    pub fn take_expired(&mut self, shards_per_db: usize, out: &mut Vec<(usize, Vec<u8>)>) {
        for (id, s) in self.held.iter_mut() {
            if !s.expired.is_empty() {
                let db = *id as usize / shards_per_db;
                out.extend(s.expired.drain(..).map(|k| (db, k)));
            }
        }
    }

    /// Appends the keys the held shards noted as changed (CLIENT TRACKING) to `out`.
    pub fn take_invalidated(&mut self, out: &mut Vec<Vec<u8>>) {
        for (_, s) in self.held.iter_mut() {
            out.append(&mut s.invalidated);
        }
    }

    pub fn holds(&self, id: u32) -> bool {
        self.held.binary_search_by_key(&id, |(i, _)| *i).is_ok()
    }

    /// Two distinct held shards at once (RENAME, SMOVE, LMOVE across shards). The same id
    /// twice, or one not held, is a command bug handled as in `shard`.
    pub fn pair(&mut self, a: u32, b: u32) -> (&mut Shard, &mut Shard) {
        let found = |id: u32| self.held.binary_search_by_key(&id, |(i, _)| *i).ok();
        let (ia, ib) = match (found(a), found(b)) {
            (Some(ia), Some(ib)) if ia != ib => (ia, ib),
            _ => {
                let [x, y] = self.strayed(a);
                return (x, y);
            }
        };
        if ia < ib {
            let (l, r) = self.held.split_at_mut(ib);
            (&mut l[ia].1, &mut r[0].1)
        } else {
            let (l, r) = self.held.split_at_mut(ia);
            (&mut r[0].1, &mut l[ib].1)
        }
    }
}

#[cfg(test)]
mod opening_tests {
    use super::*;

    fn set(ks: &Keyspace, locks: &LockCap, db: usize, key: &[u8]) {
        let id = ks.shard_id(db, key);
        let entry = ks.new_str_entry(db, key, b"v", &Meta { expire: None, flags: 0, version: ks.next_version(), access: 0 });
        ks.lock_shards(locks, [id].into_iter().collect()).shard(id).insert(entry);
    }

    #[test]
    fn a_database_is_made_when_it_is_first_locked() {
        let (ks, locks) = Keyspace::new(4, 1000, &Default::default(), None, None);
        assert_eq!(ks.id_space(), 1000 * NUM_DBS * 16);
        assert_eq!(ks.all_shard_ids().count(), 16, "only the default namespace's database 0 at first");
        let db = 500 * NUM_DBS + 3;
        assert!(!ks.db_opened(db));
        // Reads of a database never opened see it empty, and do not make it.
        let mut visiting = ks.visiting(&locks);
        let id = ks.shard_id(db, b"k");
        assert_eq!(ks.visit(&mut visiting, id, std::time::Duration::ZERO, |s| s.len()).unwrap(), Some(0));
        drop(visiting);
        assert!(ks.try_lock_one(&locks, id).is_none() && ks.lock_opened(&locks, id).is_none() && !ks.db_opened(db));
        set(&ks, &locks, db, b"k");
        assert!(ks.db_opened(db) && !ks.db_opened(db + 1));
        assert_eq!(ks.all_shard_ids().count(), 32);
        assert_eq!(ks.lock_all(&locks).held.len(), 32, "every shard there is");
        assert_eq!(ks.lock_opened(&locks, id).map(|s| s.len()), Some(1));
    }

    /// A database is made under shard 0's lock, which holding every shard holds: while
    /// every shard is held (an image's instant), no database appears and takes a write.
    #[test]
    fn no_database_is_made_while_every_shard_is_held() {
        let (ks, locks) = Keyspace::new(2, 4, &Default::default(), None, None);
        let db = 2 * NUM_DBS;
        let all = ks.lock_all(&locks);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                set(&ks, &locks, db, b"late");
                done_tx.send(()).unwrap();
            });
            assert!(done_rx.recv_timeout(std::time::Duration::from_millis(200)).is_err(), "a write made a database while every shard was held");
            assert!(!ks.db_opened(db));
            drop(all);
            done_rx.recv().unwrap();
        });
        assert!(ks.db_opened(db));
    }
}
