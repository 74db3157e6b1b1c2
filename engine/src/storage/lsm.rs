//! The embedded storage adapter: an LSM tree (fjall) in the data directory.
//!
//! One fjall keyspace holds every tenant; a key is stored as `tenant 0x00 key` (tenant names
//! never contain a zero byte), so a tenant's keys are one contiguous, ordered range. A write
//! batch is one atomic fjall batch, and it is synced to disk (`PersistMode::SyncData`) before
//! it counts as written. Calls block on disk, so they run on tokio's blocking pool.

use std::path::Path;
use std::sync::Arc;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{BoxFut, Op, Pairs, StorageAdapter, StorageError, Values};

const CACHE_BYTES: u64 = 8 << 20;
const MEMTABLE_BYTES: u64 = 8 << 20;
/// Memtables (active and sealed, waiting to be written out) past which a write waits for the
/// tree's flushes: a burst of writes (write-back flushing a backlog) must not pile memtables
/// up in memory, which counts against `maxmemory`.
const WRITE_BUFFER_BYTES: u64 = 2 * MEMTABLE_BYTES;
/// How long a write waits for that before it goes ahead anyway.
const WRITE_BUFFER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

pub struct Lsm {
    db: Database,
    kv: Keyspace,
}

fn backend(e: impl std::fmt::Display) -> StorageError {
    StorageError::Backend(format!("lsm: {e}"))
}

fn full_key(tenant: &str, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(tenant.len() + 1 + key.len());
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(key);
    k
}

impl Lsm {
    /// Opens (or creates) the tree in `dir`.
    pub fn open(dir: &Path) -> Result<Arc<Lsm>, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| StorageError::Backend(format!("lsm: {}: {e}", dir.display())))?;
        // Its memory counts in the engine's used_memory (maxmemory): a bounded block cache and
        // memtable keep it to a few tens of MB, leaving memory to the cache tier.
        let db = Database::builder(dir).cache_size(CACHE_BYTES).open().map_err(|e| StorageError::Backend(format!("lsm: {}: {e}", dir.display())))?;
        let kv = db.keyspace("kv", || KeyspaceCreateOptions::default().max_memtable_size(MEMTABLE_BYTES)).map_err(backend)?;
        Ok(Arc::new(Lsm { db, kv }))
    }

    fn get_sync(&self, tenant: &str, keys: &[Vec<u8>]) -> Result<Values, StorageError> {
        keys.iter().map(|k| self.kv.get(full_key(tenant, k)).map(|v| v.map(|v| v.to_vec())).map_err(backend)).collect()
    }

    fn write_sync(&self, tenant: &str, mut ops: Vec<Op>) -> Result<(), StorageError> {
        // In key order, each insert walks the memtable's skiplist where the last one did, in
        // cache: far cheaper than scattered inserts. Stable, so a key written twice in one
        // batch keeps its last value.
        ops.sort_by(|a, b| a.0.cmp(&b.0));
        let start = std::time::Instant::now();
        while self.db.write_buffer_size() > WRITE_BUFFER_BYTES && start.elapsed() < WRITE_BUFFER_WAIT {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut batch = self.db.batch();
        // The tree copies keys in: one buffer serves every key of the batch.
        let mut key = full_key(tenant, &[]);
        let prefix = key.len();
        for (k, v) in &ops {
            key.truncate(prefix);
            key.extend_from_slice(k);
            match v {
                Some(v) => batch.insert(&self.kv, key.as_slice(), v.as_slice()),
                None => batch.remove(&self.kv, key.as_slice()),
            }
        }
        batch.commit().map_err(backend)?;
        self.db.persist(PersistMode::SyncData).map_err(backend)
    }

    fn scan_sync(&self, tenant: &str, after: Option<&[u8]>, limit: usize) -> Result<Pairs, StorageError> {
        let prefix_len = tenant.len() + 1;
        let start = full_key(tenant, after.unwrap_or(&[]));
        let mut end = tenant.as_bytes().to_vec();
        end.push(1); // just past "tenant\0…"
        let mut out = Vec::new();
        for guard in self.kv.range(start.as_slice()..end.as_slice()) {
            let (k, v) = guard.into_inner().map_err(backend)?;
            if after.is_some() && k.as_ref() == start.as_slice() {
                continue;
            }
            out.push((k[prefix_len..].to_vec(), v.to_vec()));
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }
}

/// Runs a blocking call on the runtime's blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, StorageError> + Send + 'static) -> Result<T, StorageError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| StorageError::Backend(format!("lsm task failed: {e}")))?
}

/// The adapter over a shared tree (the `Arc` lets calls move to the blocking pool).
pub struct LsmAdapter(pub Arc<Lsm>);

impl StorageAdapter for LsmAdapter {
    fn name(&self) -> &'static str {
        "lsm"
    }

    fn get<'a>(&'a self, tenant: &'a str, keys: &'a [Vec<u8>]) -> BoxFut<'a, Result<Values, StorageError>> {
        let (lsm, tenant, keys) = (self.0.clone(), tenant.to_owned(), keys.to_vec());
        Box::pin(blocking(move || lsm.get_sync(&tenant, &keys)))
    }

    fn write<'a>(&'a self, tenant: &'a str, ops: Vec<Op>) -> BoxFut<'a, Result<(), StorageError>> {
        let (lsm, tenant) = (self.0.clone(), tenant.to_owned());
        Box::pin(blocking(move || lsm.write_sync(&tenant, ops)))
    }

    fn scan<'a>(&'a self, tenant: &'a str, after: Option<&'a [u8]>, limit: usize) -> BoxFut<'a, Result<Pairs, StorageError>> {
        let (lsm, tenant, after) = (self.0.clone(), tenant.to_owned(), after.map(<[u8]>::to_vec));
        Box::pin(blocking(move || lsm.scan_sync(&tenant, after.as_deref(), limit)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Storage;
    use super::*;

    fn temp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("terrace-lsm-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn batches_are_atomic_tenants_apart_and_durable_across_reopen() {
        let dir = temp("basic");
        {
            let s = Storage::new(Arc::new(LsmAdapter(Lsm::open(&dir).unwrap()))).unwrap();
            let ops: Vec<Op> = (0..100u32).map(|i| (format!("k{i:03}").into_bytes(), Some(vec![i as u8; 10]))).collect();
            s.block_on(s.write("shop".into(), ops)).unwrap();
            s.block_on(s.write("blog".into(), vec![(b"k000".to_vec(), Some(b"other tenant".to_vec()))])).unwrap();
            s.block_on(s.write("shop".into(), vec![(b"k001".to_vec(), None), (b"k002".to_vec(), Some(b"new".to_vec()))])).unwrap();
            let got = s.block_on(s.get("shop".into(), vec![b"k000".to_vec(), b"k001".to_vec(), b"k002".to_vec(), b"nope".to_vec()])).unwrap();
            assert_eq!(got, vec![Some(vec![0u8; 10]), None, Some(b"new".to_vec()), None]);
        }
        let s = Storage::new(Arc::new(LsmAdapter(Lsm::open(&dir).unwrap()))).unwrap();
        let blog = s.block_on(s.get("blog".into(), vec![b"k000".to_vec()])).unwrap();
        assert_eq!(blog, vec![Some(b"other tenant".to_vec())]);
        // Scan walks one tenant in key order, in pages.
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = s.block_on(s.scan("shop".into(), after.clone(), 30)).unwrap();
            if page.is_empty() {
                break;
            }
            after = Some(page.last().unwrap().0.clone());
            all.extend(page);
        }
        assert_eq!(all.len(), 99, "k001 was deleted");
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(all[1], (b"k002".to_vec(), b"new".to_vec()));
    }
}
