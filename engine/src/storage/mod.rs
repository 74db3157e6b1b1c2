//! The storage tier: where tiered tenants' data lives beyond the cache (../shared/DESIGN.md
//! §3 "Storage tier"). An adapter stores opaque values under (tenant, key), in batches:
//!
//! - `lsm`: embedded, in the data directory (fjall), the default.
//! - `postgres`: one table keyed by (tenant, key) in PostgreSQL or anything that speaks its
//!   wire protocol (CockroachDB, YugabyteDB, Citus), which is how the tier grows past one
//!   machine.
//!
//! `Storage` owns a small runtime of its own on which every adapter call runs, so reactors
//! (each a single-threaded runtime) and plain threads (the flusher) can all call it: a
//! connection pool must live on one runtime. `record` is how an entry becomes a stored value.
//!
//! Fencing. A storage tier another engine may write too (PostgreSQL: the replica promoted
//! when this engine's primary term ended) must refuse a demoted primary's writes. Each
//! primary term of a slot range (a `Term`: the range's group and a number the coordinator
//! raises at every failover) is given to the engine that holds it (`TERRACE.EPOCH`), which
//! raises the group's fence in storage before it writes; every write carries the engine's
//! term and is refused (`StorageError::Fenced`) once storage holds a newer one for its group,
//! atomically with the write. An engine given no term writes unfenced (a single engine).

pub mod census;
pub mod dirty;
pub mod flusher;
#[cfg(feature = "lsm")]
pub mod lsm;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod record;
pub mod tier;

/// The internal WAL record of a write-back after-image: `TERRACE.WB key [record]` (no record:
/// deleted). Not a command clients can send: replay installs it directly.
pub const WB_RECORD: &[u8] = b"TERRACE.WB";

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed future, so adapters can be trait objects.
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

#[derive(Debug, thiserror::Error, Clone)]
pub enum StorageError {
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("storage error: {0}")]
    Backend(String),
    #[error("storage refused the write: a newer primary (epoch {newer} of group '{group}') took over from this engine (epoch {mine})")]
    Fenced { group: String, mine: u64, newer: u64 },
}

/// A primary term: the slot range (`group`) and its epoch, raised at every failover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub group: String,
    pub epoch: u64,
}

impl Term {
    /// The refusal of a write made in this term, storage holding epoch `newer`.
    pub fn fenced(&self, newer: u64) -> StorageError {
        StorageError::Fenced { group: self.group.clone(), mine: self.epoch, newer }
    }
}

/// One write of a batch: a value, or a deletion.
pub type Op = (Vec<u8>, Option<Vec<u8>>);
/// Key-value pairs a scan returns.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
/// Values of a batched get, in the keys' order (None: absent).
pub type Values = Vec<Option<Vec<u8>>>;

/// A storage backend. Every method is batched; a `write` is atomic (all or nothing) and
/// durable when it returns Ok.
pub trait StorageAdapter: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// Whether other engines reach the same data (a database server), rather than this
    /// engine alone (an embedded tree). A replica of a shared storage tier holds its
    /// primary's cache and writes nothing to storage; of a private one, nothing.
    fn shared(&self) -> bool {
        false
    }
    /// Values of `keys` (None: absent), in the same order.
    fn get<'a>(&'a self, tenant: &'a str, keys: &'a [Vec<u8>]) -> BoxFut<'a, Result<Values, StorageError>>;
    /// Puts and deletes, atomically. The batch is handed over (an adapter that writes on
    /// another thread moves it there rather than copying it). Made in `term`, it is refused
    /// with `Fenced` if storage holds a newer epoch for the term's group — checked in the
    /// same atomic step as the write — and it raises the group's epoch to the term's.
    fn write<'a>(&'a self, tenant: &'a str, ops: Vec<Op>, term: Option<&'a Term>) -> BoxFut<'a, Result<(), StorageError>>;
    /// Raises the fence of `term`'s group to its epoch (no lower epoch writes from then on,
    /// and a write of a lower one in flight finishes first); `Fenced` if a newer one is
    /// there already.
    fn fence<'a>(&'a self, term: &'a Term) -> BoxFut<'a, Result<(), StorageError>>;
    /// Up to `limit` entries with keys after `after` (None: from the start), in key order —
    /// recovery and warm-up walk the tenant with it.
    fn scan<'a>(&'a self, tenant: &'a str, after: Option<&'a [u8]>, limit: usize) -> BoxFut<'a, Result<Pairs, StorageError>>;
}

/// The runtime storage calls run on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("terrace-storage").enable_all().build()
}

/// An adapter, the runtime its calls run on, and the primary term this engine writes in.
pub struct Storage {
    adapter: Arc<dyn StorageAdapter>,
    rt: tokio::runtime::Runtime,
    term: parking_lot::Mutex<Option<Term>>,
    /// A write was refused for a newer term: this engine is no longer its range's primary.
    superseded: std::sync::atomic::AtomicBool,
}

impl Storage {
    pub fn new(adapter: Arc<dyn StorageAdapter>) -> std::io::Result<Storage> {
        Ok(Storage::from_parts(adapter, runtime()?))
    }

    /// An adapter that had to be built on the runtime its calls will run on.
    pub fn from_parts(adapter: Arc<dyn StorageAdapter>, rt: tokio::runtime::Runtime) -> Storage {
        Storage { adapter, rt, term: parking_lot::Mutex::new(None), superseded: Default::default() }
    }

    /// The term this engine writes in (None: unfenced).
    pub fn term(&self) -> Option<Term> {
        self.term.lock().clone()
    }

    /// Takes `term` for this engine's writes, once storage's fence is raised to it.
    pub async fn begin_term(&self, term: Term) -> Result<(), StorageError> {
        let fenced = term.clone();
        self.run(move |a| Box::pin(async move { a.fence(&fenced).await })).await?;
        *self.term.lock() = Some(term);
        self.superseded.store(false, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Whether storage refused a write of this engine's term for a newer one.
    pub fn superseded(&self) -> bool {
        self.superseded.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn name(&self) -> &'static str {
        self.adapter.name()
    }

    pub fn shared(&self) -> bool {
        self.adapter.shared()
    }

    /// Runs `f` on the storage runtime; awaitable from any runtime.
    async fn run<T: Send + 'static>(
        &self,
        f: impl for<'a> FnOnce(&'a dyn StorageAdapter) -> BoxFut<'a, Result<T, StorageError>> + Send + 'static,
    ) -> Result<T, StorageError> {
        let a = self.adapter.clone();
        self.rt.spawn(async move { f(&*a).await }).await.map_err(|e| StorageError::Backend(format!("storage task failed: {e}")))?
    }

    pub async fn get(&self, tenant: String, keys: Vec<Vec<u8>>) -> Result<Values, StorageError> {
        self.run(move |a| Box::pin(async move { a.get(&tenant, &keys).await })).await
    }

    pub async fn write(&self, tenant: String, ops: Vec<Op>) -> Result<(), StorageError> {
        let term = self.term();
        let written = self.run(move |a| Box::pin(async move { a.write(&tenant, ops, term.as_ref()).await })).await;
        if let Err(e @ StorageError::Fenced { .. }) = &written {
            if !self.superseded.swap(true, std::sync::atomic::Ordering::SeqCst) {
                tracing::error!("{e}: this engine writes nothing more to storage until it is given a new term");
            }
        }
        written
    }

    pub async fn scan(&self, tenant: String, after: Option<Vec<u8>>, limit: usize) -> Result<Pairs, StorageError> {
        self.run(move |a| Box::pin(async move { a.scan(&tenant, after.as_deref(), limit).await })).await
    }

    /// The same calls from a plain thread (the flusher, tests).
    pub fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        self.rt.block_on(f)
    }
}
