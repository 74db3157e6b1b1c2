//! The storage tier behind the cache: read-through on a miss, write-through or write-back on
//! a write.
//!
//! Write-back (`dirty`, `flusher`): a write is applied in the cache, its keys are marked
//! dirty and it is acknowledged (after the WAL, which logs its after-images); the flusher
//! writes dirty keys' latest values in batches. Dirty bytes are bounded by `dirty_max`:
//! above it, writes wait for the flusher, then fail with a clear error.
//!
//! Write-through:
//! A write command's after-images (the keys it declared, as they are once it ran, or their
//! deletion) are queued while the command still holds its shard locks, so the queue's order
//! is the execution order for every key. One writer thread takes whatever is queued, keeps
//! the last write per key, and writes each tenant's share as one atomic storage batch (group
//! commit across connections). The connection waits for its batch before replying; if the
//! batch failed, the writer removes its keys from the cache before it says so, and the reply
//! becomes an error. Until a key's write is confirmed the key is pending: any other command
//! that needs it waits for the confirmation first, so no command ever sees (or builds on) a
//! value storage has not taken — the write is installed for others only on success.
//!
//! Storage keys are `db (1 byte, within the tenant) | key`; values are `record`s.

use std::collections::VecDeque;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{Op, Storage};

/// How a tenant's data relates to the storage tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// The cache alone (what Redis is).
    Cache = 0,
    /// Every write is in storage before it is acknowledged; misses read through.
    WriteThrough = 1,
    /// Writes are acknowledged from the cache (and the WAL) and flushed to storage in
    /// batches; misses read through.
    WriteBack = 2,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s.to_ascii_lowercase().as_str() {
            "cache" => Ok(Mode::Cache),
            "write-through" => Ok(Mode::WriteThrough),
            "write-back" => Ok(Mode::WriteBack),
            _ => Err(format!("'{s}' is not one of cache, write-through, write-back")),
        }
    }
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Cache => "cache",
            Mode::WriteThrough => "write-through",
            Mode::WriteBack => "write-back",
        }
    }
}

/// The storage key of `key` in database `db_in_tenant` (0–15).
pub fn storage_key(db_in_tenant: usize, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(db_in_tenant as u8);
    k.extend_from_slice(key);
    k
}

#[derive(Default)]
pub struct Counters {
    pub reads: AtomicU64,
    pub read_hits: AtomicU64,
    pub read_errors: AtomicU64,
    pub writes: AtomicU64,
    pub write_batches: AtomicU64,
    pub write_errors: AtomicU64,
    pub write_micros: AtomicU64,
    pub write_max_micros: AtomicU64,
}

/// Write-back's knobs.
#[derive(Debug, Clone)]
pub struct WriteBackConfig {
    /// Dirty bytes above which writes wait for the flusher (`dirty_max`).
    pub dirty_max: u64,
    /// How long a write waits for room before it fails (`dirty_timeout_ms`).
    pub dirty_timeout: Duration,
    /// The flusher writes at least this often (`flush_interval_ms`)…
    pub flush_interval: Duration,
    /// …or as soon as this many keys are dirty, in batches of at most this many (`flush_batch`).
    pub flush_batch: usize,
}

impl Default for WriteBackConfig {
    fn default() -> Self {
        WriteBackConfig { dirty_max: 64 << 20, dirty_timeout: Duration::from_secs(5), flush_interval: Duration::from_millis(100), flush_batch: 1024 }
    }
}

#[derive(Default)]
pub struct FlushCounters {
    pub batches: AtomicU64,
    pub keys: AtomicU64,
    pub errors: AtomicU64,
    pub micros: AtomicU64,
    pub max_micros: AtomicU64,
    /// Writes that had to wait for room under `dirty_max`, and those refused after waiting.
    pub waits: AtomicU64,
    pub refused: AtomicU64,
}

/// Why a write-back write waits.
enum Blocked {
    Bytes(usize),
    Memory,
}

/// A (database, key) of the cache.
pub type CacheKey = (usize, Vec<u8>);
/// What removes keys from the cache.
pub type Invalidator = Box<dyn Fn(&[CacheKey]) + Send + Sync>;

struct Queue {
    ops: Vec<(String, Op, CacheKey)>,
    /// Sequence number of the first queued op.
    first: u64,
}

pub struct StorageTier {
    pub storage: Storage,
    /// The engine's default mode (`storage_mode`).
    pub mode: Mode,
    /// Per namespace (tenant): its mode, set by `TERRACE.NAMESPACE … STORAGE-MODE`.
    modes: Box<[std::sync::atomic::AtomicU8]>,
    queue: Mutex<Queue>,
    wake: Condvar,
    done: tokio::sync::watch::Sender<u64>,
    /// Recent failed batches: (first, last sequence number, why).
    failures: Mutex<VecDeque<(u64, u64, String)>>,
    stop: AtomicBool,
    pub counters: Counters,
    /// Keys with a write not yet confirmed, and the sequence number of their latest one.
    pending: Mutex<std::collections::HashMap<CacheKey, u64>>,
    /// Removes keys from the cache (set at start: the writer calls it for a refused batch).
    invalidate: std::sync::OnceLock<Invalidator>,
    /// Write-back: the dirty keys, the knobs, and the flusher's progress (bumped after every
    /// batch, for writes waiting for room).
    pub dirty: super::dirty::DirtySet,
    pub write_back: WriteBackConfig,
    pub flush_counters: FlushCounters,
    pub(crate) flushed: tokio::sync::watch::Sender<u64>,
    pub(crate) flush_wake: Condvar,
    pub(crate) flush_lock: Mutex<()>,
    pub last_flush_error: Mutex<Option<String>>,
    /// Keys and bytes per tenant in storage, counted in the background.
    pub census: super::census::Census,
}

impl StorageTier {
    pub fn new(storage: Storage, mode: Mode, namespaces: usize, write_back: WriteBackConfig) -> Arc<StorageTier> {
        Arc::new(StorageTier {
            storage,
            mode,
            modes: (0..namespaces.max(1)).map(|_| std::sync::atomic::AtomicU8::new(mode as u8)).collect(),
            queue: Mutex::new(Queue { ops: Vec::new(), first: 1 }),
            wake: Condvar::new(),
            done: tokio::sync::watch::Sender::new(0),
            failures: Mutex::new(VecDeque::new()),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            pending: Mutex::new(Default::default()),
            invalidate: std::sync::OnceLock::new(),
            dirty: Default::default(),
            write_back,
            flush_counters: FlushCounters::default(),
            flushed: tokio::sync::watch::Sender::new(0),
            flush_wake: Condvar::new(),
            flush_lock: Mutex::new(()),
            last_flush_error: Mutex::new(None),
            census: Default::default(),
        })
    }

    /// Write-back: waits while dirty bytes are at `dirty_max`, or while memory is full
    /// (`memory_full`: nothing clean is left to evict) and the flusher can make entries clean,
    /// at most `dirty_timeout`; then the error says why.
    pub async fn admit_dirty(&self, memory_full: impl Fn() -> bool) -> Result<(), String> {
        let max = self.write_back.dirty_max as usize;
        let blocked = || {
            let (keys, bytes) = self.dirty.size();
            if bytes >= max {
                Some(Blocked::Bytes(bytes))
            } else if keys > 0 && memory_full() {
                Some(Blocked::Memory)
            } else {
                None
            }
        };
        if blocked().is_none() {
            return Ok(());
        }
        self.flush_counters.waits.fetch_add(1, Ordering::Relaxed);
        self.flush_wake.notify_one();
        let mut rx = self.flushed.subscribe();
        let deadline = tokio::time::Instant::now() + self.write_back.dirty_timeout;
        loop {
            let Some(why) = blocked() else { return Ok(()) };
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                self.flush_counters.refused.fetch_add(1, Ordering::Relaxed);
                let last = self.last_flush_error.lock().clone().map(|e| format!(" (last flush error: {e})")).unwrap_or_default();
                let ms = self.write_back.dirty_timeout.as_millis();
                return Err(match why {
                    Blocked::Bytes(bytes) => {
                        format!("ERR write-back backlog full: {bytes} dirty bytes reached dirty_max ({max}) and storage did not catch up within {ms} ms{last}")
                    }
                    Blocked::Memory => format!(
                        "OOM command not allowed when used memory > 'maxmemory': the rest is write-back data storage has not taken yet (waited {ms} ms){last}"
                    ),
                });
            }
        }
    }

    /// How the writer removes the keys of a refused batch from the cache.
    pub fn set_invalidator(&self, f: Invalidator) {
        let _ = self.invalidate.set(f);
    }

    /// The sequence number of the unconfirmed write `key` waits for, if any.
    pub fn pending_seq(&self, key: &CacheKey) -> Option<u64> {
        let p = self.pending.lock();
        if p.is_empty() {
            None
        } else {
            p.get(key).copied()
        }
    }

    /// The mode of namespace `ns`.
    pub fn mode_of(&self, ns: usize) -> Mode {
        match self.modes.get(ns).map(|m| m.load(Ordering::Relaxed)) {
            Some(0) => Mode::Cache,
            Some(1) => Mode::WriteThrough,
            Some(_) => Mode::WriteBack,
            None => self.mode,
        }
    }

    /// Whether namespace `ns` keeps its data in storage (write-through or write-back): its
    /// misses read through.
    pub fn backs(&self, ns: usize) -> bool {
        self.mode_of(ns) != Mode::Cache
    }

    /// Whether namespace `ns` writes back.
    pub fn writes_back(&self, ns: usize) -> bool {
        self.mode_of(ns) == Mode::WriteBack
    }

    pub fn set_mode(&self, ns: usize, mode: Mode) {
        if let Some(m) = self.modes.get(ns) {
            m.store(mode as u8, Ordering::Relaxed);
        }
    }

    /// Queues writes (under the command's locks); returns the last one's sequence number.
    /// Their keys are pending until the writer confirms them.
    pub fn enqueue(&self, ops: Vec<(String, Op, CacheKey)>) -> u64 {
        let mut q = self.queue.lock();
        let base = q.first + q.ops.len() as u64;
        {
            let mut pending = self.pending.lock();
            for (i, (_, _, key)) in ops.iter().enumerate() {
                pending.insert(key.clone(), base + i as u64);
            }
        }
        q.ops.extend(ops);
        let last = q.first + q.ops.len() as u64 - 1;
        drop(q);
        self.wake.notify_one();
        last
    }

    /// The sequence number of the last queued write (0: none yet).
    pub fn last_queued(&self) -> u64 {
        let q = self.queue.lock();
        q.first + q.ops.len() as u64 - 1
    }

    /// Waits until the batch holding `seq` was written; the error if it was not.
    pub async fn wait(&self, seq: u64) -> Result<(), String> {
        let mut rx = self.done.subscribe();
        if rx.wait_for(|&d| d >= seq).await.is_err() {
            return Err("the storage writer stopped".into());
        }
        match self.failures.lock().iter().find(|(a, b, _)| (*a..=*b).contains(&seq)) {
            Some((_, _, why)) => Err(why.clone()),
            None => Ok(()),
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// The writer thread: batches, one atomic write per tenant, results published in order.
    pub fn run_writer(self: &Arc<Self>) {
        loop {
            let (ops, first) = {
                let mut q = self.queue.lock();
                while q.ops.is_empty() && !self.stop.load(Ordering::SeqCst) {
                    self.wake.wait_for(&mut q, Duration::from_millis(100));
                }
                if q.ops.is_empty() {
                    return;
                }
                let ops = std::mem::take(&mut q.ops);
                let first = q.first;
                q.first += ops.len() as u64;
                (ops, first)
            };
            let last = first + ops.len() as u64 - 1;
            let mut by_tenant: Vec<(String, Vec<Op>)> = Vec::new();
            let mut keys = Vec::with_capacity(ops.len());
            for (tenant, op, key) in ops {
                keys.push(key);
                match by_tenant.iter_mut().find(|(t, _)| *t == tenant) {
                    Some((_, v)) => v.push(op),
                    None => by_tenant.push((tenant, vec![op])),
                }
            }
            let t = Instant::now();
            let mut failed = None;
            for (tenant, ops) in by_tenant {
                let n = ops.len() as u64;
                match self.storage.block_on(self.storage.write(tenant, ops)) {
                    Ok(()) => {
                        self.counters.writes.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(e) => failed = Some(e.to_string()),
                }
            }
            let us = t.elapsed().as_micros() as u64;
            self.counters.write_batches.fetch_add(1, Ordering::Relaxed);
            self.counters.write_micros.fetch_add(us, Ordering::Relaxed);
            self.counters.write_max_micros.fetch_max(us, Ordering::Relaxed);
            if let Some(why) = failed {
                self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("storage write failed: {why}");
                // Out of the cache before anyone waiting on these keys runs again.
                if let Some(invalidate) = self.invalidate.get() {
                    invalidate(&keys);
                }
                let mut f = self.failures.lock();
                f.push_back((first, last, why));
                while f.len() > 1024 {
                    f.pop_front();
                }
            }
            {
                let mut pending = self.pending.lock();
                for key in &keys {
                    if pending.get(key).is_some_and(|&s| s <= last) {
                        pending.remove(key);
                    }
                }
            }
            self.done.send_replace(last);
        }
    }

    /// The `# Storage` section of INFO.
    pub fn info(&self) -> String {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let batches = l(&c.write_batches);
        format!(
            "# Storage\r\nstorage_adapter:{}\r\nstorage_default_mode:{}\r\nstorage_reads:{}\r\nstorage_read_hits:{}\r\nstorage_read_errors:{}\r\nstorage_writes:{}\r\nstorage_write_batches:{}\r\nstorage_write_errors:{}\r\nstorage_write_avg_us:{}\r\nstorage_write_max_us:{}\r\n",
            self.storage.name(),
            self.mode.name(),
            l(&c.reads),
            l(&c.read_hits),
            l(&c.read_errors),
            l(&c.writes),
            batches,
            l(&c.write_errors),
            l(&c.write_micros).checked_div(batches).unwrap_or(0),
            l(&c.write_max_micros),
        ) + &self.write_back_info()
    }

    /// Write-back's lines of the `# Storage` section (before its blank line).
    fn write_back_info(&self) -> String {
        let f = &self.flush_counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (keys, bytes) = self.dirty.size();
        let batches = l(&f.batches);
        format!(
            "dirty_keys:{keys}\r\ndirty_bytes:{bytes}\r\ndirty_max:{}\r\nflush_batches:{batches}\r\nflush_keys:{}\r\nflush_errors:{}\r\nflush_avg_us:{}\r\nflush_max_us:{}\r\ndirty_waits:{}\r\ndirty_refused:{}\r\nlast_flush_error:{}\r\n\r\n",
            self.write_back.dirty_max,
            l(&f.keys),
            l(&f.errors),
            l(&f.micros).checked_div(batches).unwrap_or(0),
            l(&f.max_micros),
            l(&f.waits),
            l(&f.refused),
            self.last_flush_error.lock().as_deref().unwrap_or(""),
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // One look at the dirty set, so keys and bytes agree.
        let (dirty_keys, dirty_bytes) = self.dirty.size();
        serde_json::json!({
            "adapter": self.storage.name(),
            "mode": self.mode.name(),
            "reads": l(&c.reads),
            "read_hits": l(&c.read_hits),
            "read_errors": l(&c.read_errors),
            "writes": l(&c.writes),
            "write_batches": l(&c.write_batches),
            "write_errors": l(&c.write_errors),
            "write_micros_total": l(&c.write_micros),
            "write_max_micros": l(&c.write_max_micros),
            "write_back": {
                "dirty_keys": dirty_keys,
                "dirty_bytes": dirty_bytes,
                "dirty_max": self.write_back.dirty_max,
                "flush_batches": l(&self.flush_counters.batches),
                "flush_keys": l(&self.flush_counters.keys),
                "flush_errors": l(&self.flush_counters.errors),
                "flush_micros_total": l(&self.flush_counters.micros),
                "flush_max_micros": l(&self.flush_counters.max_micros),
                "dirty_waits": l(&self.flush_counters.waits),
                "dirty_refused": l(&self.flush_counters.refused),
                "last_flush_error": *self.last_flush_error.lock(),
            },
        })
    }
}
