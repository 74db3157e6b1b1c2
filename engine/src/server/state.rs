//! Process-wide engine state shared by all reactors: keyspace, runtime settings, counters,
//! the client registry and the blocked-client registry.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

pub use crate::clients::ClientInfo;
pub use crate::clock::{now_ms, now_ms_at, now_us};
use crate::config::EngineConfig;
use crate::keyspace::eviction::Policy;
use crate::keyspace::{Keyspace, LockCap};
use crate::lock_order::{Rank, Ranked};
use crate::replication::Carry;
use terrace_commands::table::CommandSpec;

/// Per-command counters (INFO commandstats).
#[derive(Default)]
pub struct CommandStat {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
    /// Calls by duration (LATENCY HISTOGRAM): bucket `b` counts calls that took at most
    /// 1024·2^b ns (`latency_bucket`).
    pub latency: [AtomicU64; LATENCY_BUCKETS],
}

/// Duration buckets per command: powers of two from 1,024 ns (Redis's histogram reports
/// these) to ~37 minutes.
pub const LATENCY_BUCKETS: usize = 32;

/// The bucket of a call that took `nanos`.
#[inline]
pub fn latency_bucket(nanos: u64) -> usize {
    let units = nanos.div_ceil(1024).max(1);
    (units.next_power_of_two().trailing_zeros() as usize).min(LATENCY_BUCKETS - 1)
}

#[derive(Default)]
pub struct Stats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub total_error_replies: AtomicU64,
    pub per_command: Vec<CommandStat>,
    /// Commands per second, sampled by the cron.
    pub instantaneous_ops: AtomicU64,
    /// Error replies by their code (the error's first word: ERR, WRONGTYPE, NOGROUP…), for
    /// INFO errorstats.
    pub errors: Mutex<std::collections::BTreeMap<String, u64>>,
}

/// Distinct error codes INFO errorstats keeps (Redis's limit); others are not counted.
const ERROR_CODES_KEPT: usize = 128;

impl Stats {
    /// Counts an error reply under its code.
    pub fn note_error(&self, text: &str) {
        let code = text.split(' ').next().unwrap_or("ERR").trim_start_matches('-');
        let mut errors = self.errors.lock();
        if let Some(n) = errors.get_mut(code) {
            *n += 1;
        } else if errors.len() < ERROR_CODES_KEPT {
            errors.insert(code.to_string(), 1);
        }
    }

    /// Takes back a count `note_error` made (an error replaced by another before replying).
    pub fn unnote_error(&self, text: &str) {
        let code = text.split(' ').next().unwrap_or("ERR").trim_start_matches('-');
        let mut errors = self.errors.lock();
        if let Some(n) = errors.get_mut(code) {
            *n -= 1;
            if *n == 0 {
                errors.remove(code);
            }
        }
    }
}

/// Whether the engine saves a snapshot as it stops: as Redis, when it has save points
/// (SIGTERM, SHUTDOWN), always (SHUTDOWN SAVE), or never (SHUTDOWN NOSAVE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ShutdownSave {
    IfSavePoints = 0,
    Yes = 1,
    No = 2,
}

impl ShutdownSave {
    pub fn of(srv: &Server) -> ShutdownSave {
        match srv.shutdown_save.load(Ordering::Relaxed) {
            1 => ShutdownSave::Yes,
            2 => ShutdownSave::No,
            _ => ShutdownSave::IfSavePoints,
        }
    }
}

/// Clients blocked on keys (BLPOP & co.), by (db, key), oldest first.
#[derive(Default)]
pub struct BlockRegistry {
    waiting: AtomicUsize,
    map: Mutex<HashMap<DbKey, Vec<Waiter>>>,
    /// Waiters that must also hear of their key's deletion (XREADGROUP), and the keyspace's
    /// switch that makes shards note changed keys while there are any.
    deletion_waiters: AtomicUsize,
    deletions: Arc<AtomicBool>,
    /// Clients whose command CLIENT PAUSE holds back (counted as blocked, as Redis does).
    postponed: AtomicUsize,
    /// Clients a signal woke that have not yet run their command again (`signal`, `served`).
    woken: Mutex<HashSet<u64>>,
}

/// A client held back by CLIENT PAUSE, counted among the blocked clients while this lives.
pub struct Postponed<'a>(&'a BlockRegistry);

impl Drop for Postponed<'_> {
    fn drop(&mut self) {
        self.0.postponed.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A key in a physical database.
type DbKey = (usize, Vec<u8>);
/// A blocked client waiting on a key: its id, how to wake it, and whether it waits for the
/// key's deletion too.
type Waiter = (u64, Arc<Notify>, bool);

impl BlockRegistry {
    /// A registry that turns `deletions` on while some waiter must hear of deletions.
    pub fn with_deletion_switch(deletions: Arc<AtomicBool>) -> BlockRegistry {
        BlockRegistry { deletions, ..Default::default() }
    }

    pub fn register(&self, client: u64, db: usize, keys: &[Vec<u8>], notify: &Arc<Notify>, on_delete: bool) {
        let mut m = self.map.lock();
        for k in keys {
            m.entry((db, k.clone())).or_default().push((client, notify.clone(), on_delete));
            self.waiting.fetch_add(1, Ordering::SeqCst);
            if on_delete && self.deletion_waiters.fetch_add(1, Ordering::SeqCst) == 0 {
                self.deletions.store(true, Ordering::SeqCst);
            }
        }
    }

    pub fn unregister(&self, client: u64, db: usize, keys: &[Vec<u8>]) {
        let mut m = self.map.lock();
        for k in keys {
            let key = (db, k.clone());
            if let Some(v) = m.get_mut(&key) {
                let before = v.len();
                let on_delete = v.iter().filter(|(c, _, d)| *c == client && *d).count();
                v.retain(|(c, _, _)| *c != client);
                self.waiting.fetch_sub(before - v.len(), Ordering::SeqCst);
                if on_delete > 0 && self.deletion_waiters.fetch_sub(on_delete, Ordering::SeqCst) == on_delete {
                    self.deletions.store(false, Ordering::SeqCst);
                }
                if v.is_empty() {
                    m.remove(&key);
                }
            }
        }
    }

    #[inline]
    pub fn any_waiting(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// The keys of databases `dbs` clients wait on for deletion (a FLUSHDB or SWAPDB wakes
    /// them).
    pub fn deletion_keys(&self, dbs: std::ops::Range<usize>) -> Vec<(usize, Vec<u8>)> {
        if self.deletion_waiters.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        let m = self.map.lock();
        m.iter().filter(|((db, _), v)| dbs.contains(db) && v.iter().any(|w| w.2)).map(|(k, _)| k.clone()).collect()
    }

    /// Whether some client waits for its key's deletion.
    pub fn deletions_watched(&self) -> bool {
        self.deletion_waiters.load(Ordering::Relaxed) > 0
    }

    /// Wakes the oldest client blocked on a key; true if there was one. Once it is served, or
    /// stops waiting, it signals the key again for the next one (the connection's
    /// `pass_the_turn`): blocked clients are served in the order they blocked, not in the
    /// order their threads run. Until it says it is `served`, `woken_pending` holds.
    pub fn signal(&self, db: usize, key: &[u8]) -> bool {
        let m = self.map.lock();
        let Some((client, n, _)) = m.get(&(db, key.to_vec())).and_then(|v| v.first()) else {
            return false;
        };
        // (Noted under the map's lock: the client cannot end its wait and say it is served
        // before it is noted as woken.)
        self.woken.lock().insert(*client);
        n.notify_one();
        true
    }

    /// Wakes every client blocked on a key `gone` says this engine no longer serves (its
    /// slot was handed over): each runs its command again and is refused, so its proxy can
    /// send it to the slot's new engine. Returns how many were woken.
    pub fn wake_gone(&self, gone: impl Fn(&[u8]) -> bool) -> usize {
        let m = self.map.lock();
        let mut woken = 0;
        for ((_, key), waiters) in m.iter() {
            if gone(key) {
                for (_, notify, _) in waiters {
                    notify.notify_one();
                    woken += 1;
                }
            }
        }
        woken
    }

    /// A woken client ran its command again (served, blocked again or failed), or stopped
    /// waiting: whatever its command made ready has been signalled already.
    pub fn served(&self, client: u64) {
        self.woken.lock().remove(&client);
    }

    /// Whether some woken client has yet to run its command again. A command that woke
    /// clients replies once they have (`served`), as Redis serves blocked clients before it
    /// runs the next command: a chain of them (BRPOPLPUSH a→b, b→a) completes before the
    /// writer's client can look.
    pub fn woken_pending(&self) -> bool {
        !self.woken.lock().is_empty()
    }

    /// Counts a client CLIENT PAUSE holds back until the returned guard goes.
    pub fn postpone(&self) -> Postponed<'_> {
        self.postponed.fetch_add(1, Ordering::Relaxed);
        Postponed(self)
    }

    /// Number of clients blocked on anything: on keys, or held back by CLIENT PAUSE.
    pub fn blocked_clients(&self) -> usize {
        let m = self.map.lock();
        let mut ids: Vec<u64> = m.values().flatten().map(|(c, _, _)| *c).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len() + self.postponed.load(Ordering::Relaxed)
    }
}

/// One SLOWLOG entry.
pub struct SlowEntry {
    pub id: u64,
    pub time: i64,
    pub duration_us: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: String,
    /// The namespace it ran in (its tenant, for the console's slow log).
    pub namespace: usize,
}

/// The slow log: commands slower than `threshold_us` (negative: off), newest first.
pub struct SlowLog {
    pub entries: Mutex<VecDeque<SlowEntry>>,
    pub next_id: AtomicU64,
    pub threshold_us: AtomicI64,
    pub max_len: AtomicUsize,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog { entries: Mutex::new(VecDeque::new()), next_id: AtomicU64::new(0), threshold_us: AtomicI64::new(10_000), max_len: AtomicUsize::new(128) }
    }
}

impl SlowLog {
    /// Records a command if it took at least the threshold.
    pub fn maybe_record(&self, argv: &[&[u8]], micros: u64, client: &ClientInfo) {
        let t = self.threshold_us.load(Ordering::Relaxed);
        if t < 0 || (micros as i64) < t {
            return;
        }
        // As Redis: at most 32 arguments, each cut to 128 bytes.
        let mut args: Vec<Vec<u8>> = Vec::new();
        for (i, a) in argv.iter().enumerate() {
            if i == 31 && argv.len() > 32 {
                args.push(format!("... ({} more arguments)", argv.len() - 31).into_bytes());
                break;
            }
            if crate::monitor::redacted(argv, i) {
                args.push(b"(redacted)".to_vec());
            } else if a.len() > 128 {
                let mut v = a[..128].to_vec();
                v.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
                args.push(v);
            } else {
                args.push(a.to_vec());
            }
        }
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            time: now_ms() / 1000,
            duration_us: micros,
            args,
            addr: client.addr.clone(),
            name: client.name.lock().clone().unwrap_or_default(),
            namespace: client.namespace.load(Ordering::Relaxed),
        };
        let mut e = self.entries.lock();
        e.push_front(entry);
        e.truncate(self.max_len.load(Ordering::Relaxed));
    }
}

/// Settings changeable at run time (CONFIG SET). Hot ones are atomics.
pub struct Runtime {
    pub maxmemory: AtomicU64,
    pub policy: Mutex<Policy>,
    /// As set (CONFIG GET shows it); eviction reads `eviction_samples`.
    pub maxmemory_samples: AtomicUsize,
    /// `hll-sparse-max-bytes`: past this a sparse HyperLogLog becomes dense.
    pub hll_sparse_max_bytes: AtomicUsize,
    /// Other parameters clients may set and read back (CONFIG GET/SET).
    pub params: Mutex<Vec<(String, String)>>,
}

impl Runtime {
    /// Keys eviction samples per round: `maxmemory-samples`, at most 64 (Redis takes up to
    /// INT_MAX; past 64 more samples only cost time).
    pub fn eviction_samples(&self) -> usize {
        self.maxmemory_samples.load(Ordering::Relaxed).min(64)
    }
}

pub struct Server {
    pub config: EngineConfig,
    /// The reactor threads and elastic threading's state.
    pub reactors: super::elastic::Reactors,
    /// Users, permissions and the ACL log.
    pub acl: crate::acl::Acl,
    pub pubsub: crate::pubsub::PubSub,
    /// Keyspace notifications (`notify-keyspace-events`).
    pub notifications: crate::notify::Notifications,
    pub monitors: crate::monitor::Monitors,
    pub tracking: crate::tracking::Tracking,
    pub snapshot: crate::snapshot::SnapshotState,
    /// Lua script bodies (EVALSHA) and the running script's state (SCRIPT KILL).
    pub scripts: Arc<crate::scripting::ScriptCache>,
    pub keyspace: Keyspace,
    /// The write-ahead log (unset when `wal = off`; set once at start, after the snapshot
    /// is loaded and before the log is replayed).
    wal: std::sync::OnceLock<Arc<crate::wal::Wal>>,
    /// The storage tier behind the cache (unset without one).
    storage: std::sync::OnceLock<Arc<crate::storage::tier::StorageTier>>,
    /// Tenant namespaces by index ("" is the default one, index 0).
    pub namespaces: Ranked<Vec<String>>,
    /// The primary term the coordinator gave this engine (`TERRACE.EPOCH`), if any: its
    /// storage writes carry it.
    pub term: Mutex<Option<crate::storage::Term>>,
    /// What the device probe measured (set once, in the background, after start).
    pub device: std::sync::OnceLock<crate::probe::DeviceProfile>,
    /// Tenants' latest `terrace cost-eval` results, by tenant name.
    pub cost_evals: Mutex<HashMap<String, serde_json::Value>>,
    /// Per namespace: its commands are not logged (`TERRACE.NAMESPACE … WAL off`; a cache
    /// tenant that may lose its writes since the last snapshot in a crash).
    pub wal_off: Box<[std::sync::atomic::AtomicBool]>,
    /// The running traffic recording (`TERRACE.RECORD`), if any.
    pub recorder: crate::stats::recorder::Recorder,
    /// Whom this engine follows (REPLICAOF) and how the link stands.
    pub replication: crate::replication::Replication,
    /// The slot migration this engine runs, as source or as the target of a PURGE.
    pub migration: crate::migration::Migration,
    /// Per namespace: the workload statistics the cost model reads.
    pub tenant_stats: Box<[crate::stats::tenant::TenantStats]>,
    /// Compression settings and dictionaries read at start, by tenant directory name, until
    /// their namespace is registered.
    pub saved_tenants: Mutex<std::collections::HashMap<String, crate::compress::tenant::LoadedTenant>>,
    pub runtime: Runtime,
    pub stats: Stats,
    pub clients: crate::clients::Registry,
    /// Output, query and client-count limits (CONFIG), shared with every client's info.
    pub limits: Arc<crate::limits::ClientLimits>,
    pub next_client_id: AtomicU64,
    pub blocking: BlockRegistry,
    pub started: Instant,
    pub run_id: String,
    pub port: AtomicU64,
    pub shutdown: AtomicBool,
    pub shutdown_notify: Notify,
    /// Whether stopping saves a snapshot (`ShutdownSave`, set by SHUTDOWN's flags).
    pub shutdown_save: std::sync::atomic::AtomicU8,
    /// A listener CONFIG SET port bound, for the control thread to accept on instead.
    pub new_listener: Mutex<Option<std::net::TcpListener>>,
    pub listener_changed: Notify,
    /// Commands that take every lock (transactions, FLUSHALL) bump this so INFO can tell.
    pub dirty: AtomicU64,
    pub slowlog: SlowLog,
    /// LATENCY's events (`latency-monitor-threshold`).
    pub latency: crate::latency::LatencyMonitor,
    /// DEBUG SET-ACTIVE-EXPIRE.
    pub active_expire: AtomicBool,
    /// CLIENT PAUSE: until when (unix ms), and whether all commands or only writes wait.
    pub pause_until_ms: AtomicI64,
    pub pause_all: AtomicBool,
}

impl crate::storage::flusher::Source for Server {
    fn keyspace(&self) -> &Keyspace {
        &self.keyspace
    }

    fn tenant_of(&self, db: usize) -> String {
        let names = self.namespaces.lock();
        match names.get(db / crate::keyspace::NUM_DBS).map(String::as_str) {
            None | Some("") => "default".to_string(),
            Some(n) => n.to_string(),
        }
    }

    fn batch_bytes(&self) -> Option<usize> {
        self.device.get().map(|d| d.storage_batch_bytes())
    }

    /// A primary; or a replica with storage of its own (the embedded LSM: it keeps its own
    /// copy of its master's), not one sharing its master's.
    fn writes_storage(&self) -> bool {
        !self.replication.is_replica() || self.storage_tier().is_some_and(|t| !t.storage.shared())
    }

    /// Tells replicas which keys are clean (`TERRACE.CLEAN key`), each under its shard's
    /// lock: a write to the key lands wholly before the check (then it is not clean) or
    /// after the CLEAN in the stream (then it is dirty again there too).
    fn cleaned(&self, locks: &LockCap, tier: &crate::storage::tier::StorageTier, taken: &[crate::storage::dirty::Taken]) {
        let terrace = crate::replication::Flavor::Terrace;
        if self.replication.feed(terrace).is_none() || !tier.storage.shared() {
            // (Replicas with storage of their own flush their own dirty keys.)
            tier.dirty.flushed_all(taken);
            return;
        }
        for t in taken {
            let (db, key) = (t.key.0, &t.key.1);
            if self.carry(terrace, db) != Carry::AfterImages {
                tier.dirty.flushed(t);
                continue;
            }
            let _held = self.keyspace.lock_one(locks, self.keyspace.shard_id(db, key));
            if tier.dirty.flushed(t) {
                self.replicate(|stream, carry| {
                    if carry(db) == Carry::AfterImages {
                        stream.command(db, &[crate::replication::CLEAN_RECORD, key]);
                    }
                });
            }
        }
        self.replication.publish();
    }
}

impl Server {
    /// Gives namespace `index` its tenant name and whatever was saved for that tenant.
    pub fn attach_tenant(&self, index: usize, name: &str) {
        if !super::namespaces::is_live(name) {
            return;
        }
        let t = self.keyspace.compression(index);
        t.set_name(name);
        let dir = if name.is_empty() { "default" } else { name };
        if let Some(saved) = self.saved_tenants.lock().remove(dir) {
            t.adopt(saved);
        }
    }

    /// The namespace of a tenant by name (`default` or "" for the default namespace).
    pub fn tenant_namespace(&self, name: &str) -> Option<usize> {
        let key = if name == "default" { "" } else { name };
        self.namespaces.lock().iter().position(|n| n == key)
    }

    /// The node's state, and the keyspace's lock capability (for the pipeline and the
    /// background workers the caller starts; never for command handlers).
    pub fn new(config: EngineConfig, tier: Option<Arc<crate::tier::Tier>>, wal: Option<Arc<crate::wal::Wal>>) -> (Arc<Server>, LockCap) {
        let run_id: String = (0..40).map(|_| fastrand::alphanumeric().to_ascii_lowercase()).collect();
        let (keyspace, locks) = Keyspace::new(config.shard_bits, config.namespaces, &config.compression, Some(config.data_dir.join("compression")), tier);
        let keyspace_deletions = keyspace.deletion_switch();
        keyspace.lfu.store(config.maxmemory_policy.is_lfu(), Ordering::Relaxed);
        let tracking = crate::tracking::Tracking::new(keyspace.tracking_switch());
        let notifications = crate::notify::Notifications::new(config.namespaces);
        let scripts = Arc::new(crate::scripting::ScriptCache::new(config.namespaces));
        let stats = Stats { per_command: (0..terrace_commands::stat_index::count()).map(|_| CommandStat::default()).collect(), ..Default::default() };
        let reactors =
            super::elastic::Reactors::new(config.threads.reactors(), matches!(config.threads, crate::config::Threads::Elastic(_)), config.elastic.clone());
        let srv = Arc::new(Server {
            reactors,
            runtime: Runtime {
                maxmemory: AtomicU64::new(config.maxmemory),
                policy: Mutex::new(config.maxmemory_policy),
                maxmemory_samples: AtomicUsize::new(5),
                hll_sparse_max_bytes: AtomicUsize::new(3000),
                params: Mutex::new(crate::config::start_params(&config)),
            },
            keyspace,
            wal: wal.map(std::sync::OnceLock::from).unwrap_or_default(),
            storage: Default::default(),
            namespaces: Ranked::new(Rank::Namespaces, vec![String::new()]),
            term: Mutex::new(None),
            device: Default::default(),
            recorder: Default::default(),
            replication: Default::default(),
            migration: Default::default(),
            cost_evals: Mutex::new(HashMap::new()),
            wal_off: (0..config.namespaces.max(1)).map(|_| Default::default()).collect(),
            tenant_stats: (0..config.namespaces.max(1)).map(|_| Default::default()).collect(),
            saved_tenants: Mutex::new(Default::default()),
            config,
            acl: crate::acl::Acl::default(),
            pubsub: crate::pubsub::PubSub::default(),
            notifications,
            monitors: crate::monitor::Monitors::default(),
            tracking,
            snapshot: crate::snapshot::SnapshotState::default(),
            scripts,
            stats,
            clients: crate::clients::registry(),
            limits: Arc::default(),
            next_client_id: AtomicU64::new(1),
            blocking: BlockRegistry::with_deletion_switch(keyspace_deletions),
            started: Instant::now(),
            run_id,
            port: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            shutdown_notify: Notify::new(),
            shutdown_save: std::sync::atomic::AtomicU8::new(ShutdownSave::IfSavePoints as u8),
            new_listener: Mutex::new(None),
            listener_changed: Notify::new(),
            dirty: AtomicU64::new(0),
            slowlog: SlowLog::default(),
            latency: Default::default(),
            active_expire: AtomicBool::new(true),
            pause_until_ms: AtomicI64::new(0),
            pause_all: AtomicBool::new(false),
        });
        (srv, locks)
    }

    /// The same server with its WAL attached (at start, before any client connects).
    pub fn with_wal(srv: Arc<Server>, wal: Arc<crate::wal::Wal>) -> Arc<Server> {
        assert!(srv.wal.set(wal).is_ok(), "the WAL is attached once");
        srv
    }

    /// Attaches the storage tier (at start, before any client connects).
    pub fn attach_storage(&self, tier: Arc<crate::storage::tier::StorageTier>) {
        assert!(self.storage.set(tier).is_ok(), "the storage tier is attached once");
    }

    /// The storage tier, when configured.
    pub fn storage_tier(&self) -> Option<&Arc<crate::storage::tier::StorageTier>> {
        self.storage.get()
    }

    /// The write-ahead log, when on.
    pub fn wal(&self) -> Option<&Arc<crate::wal::Wal>> {
        self.wal.get()
    }

    /// Whether writes are recorded as they commit (`Effects::log`): for the WAL, or for
    /// replicas.
    #[inline]
    pub fn records_writes(&self) -> bool {
        self.wal.get().is_some() || self.replication.feeding()
    }

    /// Appends what `write` puts in every replication stream being fed; `write` is told
    /// how its stream carries each physical database (`carry`): Redis's, the default
    /// namespace's commands unless storage backs it; Terrace's, every namespace's commands,
    /// but a storage-backed one's as after-images (its commands ran on keys read through
    /// from storage). Returns each stream's offset after it (0: not fed).
    pub fn replicate(&self, mut write: impl FnMut(&mut crate::replication::Stream, &dyn Fn(usize) -> Carry)) -> crate::replication::Offsets {
        let names = |ns: usize| self.namespaces.lock().get(ns).cloned();
        self.replication.append_everywhere(&names, |flavor, stream| write(stream, &|db| self.carry(flavor, db)))
    }

    /// How stream `flavor` carries database `db`'s writes (see `replicate`).
    pub fn carry(&self, flavor: crate::replication::Flavor, db: usize) -> Carry {
        let ns = db / crate::keyspace::NUM_DBS;
        let backed = self.storage_tier().filter(|t| t.backs(ns));
        match (flavor, backed) {
            (crate::replication::Flavor::Redis, _) if ns > 0 => Carry::Nothing,
            (_, None) => Carry::Commands,
            (crate::replication::Flavor::Terrace, Some(_)) => Carry::AfterImages,
            (crate::replication::Flavor::Redis, Some(_)) => Carry::Nothing,
        }
    }

    pub fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        // A running script stops too (SHUTDOWN NOSAVE ends even an unkillable one).
        self.scripts.running.stop_all();
        self.shutdown_notify.notify_waiters();
        for c in self.clients.lock().values() {
            c.kill_locked();
        }
    }

    /// Kills every client authenticated as one of `users` (they were deleted).
    pub fn kill_clients_of(&self, users: &[String]) {
        for c in self.clients.lock().values() {
            if users.contains(&c.user.lock()) {
                c.kill_locked();
            }
        }
    }

    /// Kills a client if it is still connected; returns whether it was.
    pub fn kill_client(&self, id: u64) -> bool {
        let clients = self.clients.lock();
        match clients.get(&id) {
            Some(c) => {
                c.kill_locked();
                true
            }
            None => false,
        }
    }

    /// Until when a command must wait because of CLIENT PAUSE, if it must. WRITE pauses write
    /// commands and EXEC; ALL pauses everything but the transaction controls that must stay
    /// usable (MULTI, DISCARD, WATCH, QUIT, RESET), again except EXEC.
    /// Until when CLIENT PAUSE holds a command back: every command but the transaction
    /// controls (and EXEC) with PAUSE ALL; with PAUSE WRITE those that write or may
    /// replicate (`writes`, which for EXEC tells whether its transaction does).
    pub fn paused_until(&self, writes: bool, spec: &CommandSpec) -> Option<i64> {
        let until = self.pause_until_ms.load(Ordering::Relaxed);
        if until == 0 || now_ms() >= until {
            return None;
        }
        let exec = spec.id == terrace_commands::table::CommandId::Exec;
        let applies = if self.pause_all.load(Ordering::Relaxed) { !spec.txn_control || exec } else { writes };
        applies.then_some(until)
    }

    /// A CONFIG parameter's current text (those kept as text: not maxmemory, port…).
    pub fn param(&self, name: &str) -> Option<String> {
        self.runtime.params.lock().iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    pub fn policy(&self) -> Policy {
        *self.runtime.policy.lock()
    }
}
