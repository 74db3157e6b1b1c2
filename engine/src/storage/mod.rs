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
    /// Values of `keys` (None: absent), in the same order.
    fn get<'a>(&'a self, tenant: &'a str, keys: &'a [Vec<u8>]) -> BoxFut<'a, Result<Values, StorageError>>;
    /// Puts and deletes, atomically. The batch is handed over (an adapter that writes on
    /// another thread moves it there rather than copying it).
    fn write<'a>(&'a self, tenant: &'a str, ops: Vec<Op>) -> BoxFut<'a, Result<(), StorageError>>;
    /// Up to `limit` entries with keys after `after` (None: from the start), in key order —
    /// recovery and warm-up walk the tenant with it.
    fn scan<'a>(&'a self, tenant: &'a str, after: Option<&'a [u8]>, limit: usize) -> BoxFut<'a, Result<Pairs, StorageError>>;
}

/// The runtime storage calls run on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("terrace-storage").enable_all().build()
}

/// An adapter and the runtime its calls run on.
pub struct Storage {
    adapter: Arc<dyn StorageAdapter>,
    rt: tokio::runtime::Runtime,
}

impl Storage {
    pub fn new(adapter: Arc<dyn StorageAdapter>) -> std::io::Result<Storage> {
        Ok(Storage { adapter, rt: runtime()? })
    }

    /// An adapter that had to be built on the runtime its calls will run on.
    pub fn from_parts(adapter: Arc<dyn StorageAdapter>, rt: tokio::runtime::Runtime) -> Storage {
        Storage { adapter, rt }
    }

    pub fn name(&self) -> &'static str {
        self.adapter.name()
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
        self.run(move |a| Box::pin(async move { a.write(&tenant, ops).await })).await
    }

    pub async fn scan(&self, tenant: String, after: Option<Vec<u8>>, limit: usize) -> Result<Pairs, StorageError> {
        self.run(move |a| Box::pin(async move { a.scan(&tenant, after.as_deref(), limit).await })).await
    }

    /// The same calls from a plain thread (the flusher, tests).
    pub fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        self.rt.block_on(f)
    }
}
