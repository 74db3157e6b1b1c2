//! The embedded storage adapter: an LSM tree (fjall) in the data directory.
//!
//! One fjall keyspace holds every tenant; a key is stored as `tenant 0x00 key` (tenant names
//! never contain a zero byte), so a tenant's keys are one contiguous, ordered range. A write
//! batch is one atomic fjall batch, and it is synced to disk (`PersistMode::SyncData`) before
//! it counts as written. Calls block on disk, so they run on tokio's blocking pool.
//!
//! Fences (`super::Term`) are kept in a keyspace of their own, group → epoch; a fenced write
//! checks and raises its group's epoch under one lock, in the same batch as its data. (The
//! tree is this engine's alone — fjall locks its directory — so here a fence keeps out
//! nothing but this engine's own writes of an older term, issued before it was given a new
//! one; shared storage is where fencing matters, and it is the same contract.)

use std::path::Path;
use std::sync::Arc;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{BoxFut, Op, Pairs, StorageAdapter, StorageError, Term, Values};

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
    fences: Keyspace,
    /// Held from a fenced write's check to its commit, and by a fence being raised.
    fence_lock: parking_lot::Mutex<()>,
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
        let fences = db.keyspace("fences", KeyspaceCreateOptions::default).map_err(backend)?;
        Ok(Arc::new(Lsm { db, kv, fences, fence_lock: parking_lot::Mutex::new(()) }))
    }

    /// The epoch storage holds for `group` (0: none).
    fn epoch_of(&self, group: &str) -> Result<u64, StorageError> {
        let stored = self.fences.get(group.as_bytes()).map_err(backend)?;
        Ok(stored.and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok()).map_or(0, u64::from_be_bytes))
    }

    fn fence_sync(&self, term: &Term) -> Result<(), StorageError> {
        let _held = self.fence_lock.lock();
        let stored = self.epoch_of(&term.group)?;
        if stored > term.epoch {
            return Err(term.fenced(stored));
        }
        if stored < term.epoch {
            self.fences.insert(term.group.as_bytes(), term.epoch.to_be_bytes()).map_err(backend)?;
            self.db.persist(PersistMode::SyncData).map_err(backend)?;
        }
        Ok(())
    }

    fn get_sync(&self, tenant: &str, keys: &[Vec<u8>]) -> Result<Values, StorageError> {
        keys.iter().map(|k| self.kv.get(full_key(tenant, k)).map(|v| v.map(|v| v.to_vec())).map_err(backend)).collect()
    }

    fn write_sync(&self, tenant: &str, mut ops: Vec<Op>, term: Option<&Term>) -> Result<(), StorageError> {
        // In key order, each insert walks the memtable's skiplist where the last one did, in
        // cache: far cheaper than scattered inserts. Stable, so a key written twice in one
        // batch keeps its last value.
        ops.sort_by(|a, b| a.0.cmp(&b.0));
        let start = std::time::Instant::now();
        while self.db.write_buffer_size() > WRITE_BUFFER_BYTES && start.elapsed() < WRITE_BUFFER_WAIT {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let _held = term.map(|_| self.fence_lock.lock());
        let mut batch = self.db.batch();
        if let Some(term) = term {
            let stored = self.epoch_of(&term.group)?;
            if stored > term.epoch {
                return Err(term.fenced(stored));
            }
            if stored < term.epoch {
                batch.insert(&self.fences, term.group.as_bytes(), term.epoch.to_be_bytes());
            }
        }
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

    fn write<'a>(&'a self, tenant: &'a str, ops: Vec<Op>, term: Option<&'a Term>) -> BoxFut<'a, Result<(), StorageError>> {
        let (lsm, tenant, term) = (self.0.clone(), tenant.to_owned(), term.cloned());
        Box::pin(blocking(move || lsm.write_sync(&tenant, ops, term.as_ref())))
    }

    fn fence<'a>(&'a self, term: &'a Term) -> BoxFut<'a, Result<(), StorageError>> {
        let (lsm, term) = (self.0.clone(), term.clone());
        Box::pin(blocking(move || lsm.fence_sync(&term)))
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

    #[test]
    fn a_write_of_an_older_term_is_refused_once_a_newer_term_raised_its_fence() {
        use super::super::Term;
        let dir = temp("fence");
        let term = |group: &str, epoch| Term { group: group.into(), epoch };
        {
            let lsm = Lsm::open(&dir).unwrap();
            let old = Storage::new(Arc::new(LsmAdapter(lsm.clone()))).unwrap();
            let new = Storage::new(Arc::new(LsmAdapter(lsm))).unwrap();
            let put = |s: &Storage, v: &str| s.block_on(s.write("t".into(), vec![(b"k".to_vec(), Some(v.as_bytes().to_vec()))]));
            old.block_on(old.begin_term(term("slots-0", 1))).unwrap();
            put(&old, "first").unwrap();
            new.block_on(new.begin_term(term("slots-0", 2))).unwrap();
            let refused = put(&old, "stale");
            assert!(matches!(refused, Err(StorageError::Fenced { mine: 1, newer: 2, .. })), "{refused:?}");
            assert!(old.superseded() && !new.superseded());
            put(&new, "second").unwrap();
            assert_eq!(new.block_on(new.get("t".into(), vec![b"k".to_vec()])).unwrap(), vec![Some(b"second".to_vec())]);
            assert!(old.block_on(old.begin_term(term("slots-0", 1))).is_err(), "an older term cannot be taken again");
            old.block_on(old.begin_term(term("slots-1", 1))).unwrap();
            put(&old, "another range").unwrap();
            assert!(!old.superseded(), "a new term clears it");
        }
        let s = Storage::new(Arc::new(LsmAdapter(Lsm::open(&dir).unwrap()))).unwrap();
        s.block_on(s.begin_term(term("slots-0", 2))).unwrap();
        assert!(s.block_on(s.begin_term(term("slots-0", 1))).is_err(), "the fence survives a restart");
    }
}
