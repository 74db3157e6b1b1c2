//! Warm restart: at a clean shutdown the keyspace's index is written beside the arena file,
//! so the next start maps the same file and serves its values without reloading them.
//!
//! `<pmem_path>.index`:
//!
//! ```text
//! "TRCTIDX1" | arena id u64 | stamp u64 | WAL sequence number covered u64
//! | namespace names (count, then len+bytes each)
//! records: 1 | db u16 | kind bits u8 | in-PMem u8 | access u32 | version u64 | flags u32
//!          | has-expiry u8 [expiry i64] | key (len, bytes)
//!          | in PMem: offset u64, len u64, crc32 of the value | in DRAM: len u64, bytes
//! 0 | crc32 of everything before
//! ```
//!
//! The arena's header carries the same id and stamp, written after the index is synced and
//! the mapping flushed; the start clears it before serving. So the index is used only if the
//! previous run closed cleanly and nothing ran since; otherwise the arena starts cold (the
//! WAL and storage tier provide durability, not this). Each PMem value's checksum is checked
//! when it is mapped back: a value damaged on the medium is reported and skipped, never served.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::arena::Arena;
use super::thaw_bytes;
use crate::keyspace::{Entry, Keyspace, Kind, Meta, ValueRef};

const MAGIC: &[u8; 8] = b"TRCTIDX1";

#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    #[error("cannot write the warm-restart index {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// Where the index of the arena at `pmem_path` lives.
pub fn index_path(pmem_path: &Path) -> PathBuf {
    let mut p = pmem_path.as_os_str().to_owned();
    p.push(".index");
    PathBuf::from(p)
}

/// A writer that checksums what it writes.
struct Out {
    w: BufWriter<File>,
    crc: crc32fast::Hasher,
}

impl Out {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.crc.update(b);
        self.w.write_all(b)
    }
    fn bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.put(&(b.len() as u64).to_le_bytes())?;
        self.put(b)
    }
}

/// Writes the index of every key, then flushes the arena and marks it closed cleanly.
/// Runs after the reactors stopped: nothing changes the keyspace meanwhile.
pub fn save(ks: &Keyspace, cap: &crate::keyspace::LockCap, arena: &Arena, namespaces: &[String], wal_seq: u64) -> Result<usize, WarmError> {
    let path = index_path(arena.path());
    let tmp = path.with_extension("index.tmp");
    let io = |source| WarmError::Io { path: path.clone(), source };
    let stamp = loop {
        let s = fastrand::u64(..);
        if s != 0 {
            break s;
        }
    };
    let file = File::create(&tmp).map_err(io)?;
    let mut out = Out { w: BufWriter::with_capacity(1 << 20, file), crc: crc32fast::Hasher::new() };
    out.put(MAGIC).map_err(io)?;
    out.put(&arena.id().to_le_bytes()).map_err(io)?;
    out.put(&stamp.to_le_bytes()).map_err(io)?;
    out.put(&wal_seq.to_le_bytes()).map_err(io)?;
    out.put(&(namespaces.len() as u64).to_le_bytes()).map_err(io)?;
    for n in namespaces {
        out.bytes(n.as_bytes()).map_err(io)?;
    }
    let now = crate::clock::now_ms();
    let mut written = 0;
    let mut frozen = Vec::new();
    let per_db = ks.shards_per_db();
    for id in ks.all_shard_ids() {
        let db = id as usize / per_db;
        let shard = ks.lock_one(cap, id);
        for e in shard.iter() {
            if crate::keyspace::is_expired(e.expire(), now) {
                continue;
            }
            write_record(&mut out, db as u16, e, arena, &mut frozen).map_err(io)?;
            written += 1;
        }
    }
    out.put(&[0]).map_err(io)?;
    let crc = out.crc.clone().finalize();
    out.w.write_all(&crc.to_le_bytes()).map_err(io)?;
    let file = out.w.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    arena.close_clean(stamp).map_err(io)?;
    Ok(written)
}

fn write_record(out: &mut Out, db: u16, e: &Entry, arena: &Arena, frozen: &mut Vec<u8>) -> std::io::Result<()> {
    out.put(&[1])?;
    out.put(&db.to_le_bytes())?;
    out.put(&[e.kind_bits(), e.in_pmem() as u8])?;
    out.put(&e.access().to_le_bytes())?;
    out.put(&e.version().to_le_bytes())?;
    out.put(&e.flags().to_le_bytes())?;
    match e.expire() {
        Some(t) => {
            out.put(&[1])?;
            out.put(&t.to_le_bytes())?;
        }
        None => out.put(&[0])?,
    }
    out.bytes(e.key())?;
    if let Some(bytes) = e.pmem_bytes() {
        let (addr, len) = e.pmem().expect("in PMem");
        out.put(&arena.offset_of(addr).to_le_bytes())?;
        out.put(&(len as u64).to_le_bytes())?;
        return out.put(&crc32fast::hash(bytes).to_le_bytes());
    }
    match e.value() {
        ValueRef::Str(v) | ValueRef::Encoded(v) => out.bytes(v),
        _ => {
            frozen.clear();
            super::freeze(e, frozen);
            out.bytes(frozen)
        }
    }
}

/// What a warm start found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub keys: usize,
    /// PMem values whose checksum did not match (skipped, and logged by key).
    pub damaged: usize,
    pub namespaces: Vec<String>,
    /// The WAL position the index covers (recovery replays the log after it).
    pub wal_seq: u64,
}

/// Reads the index if it belongs to this arena's last clean close; None means start cold.
/// On success the keys are in `ks` and the arena has claimed their ranges.
pub fn load(ks: &Keyspace, cap: &crate::keyspace::LockCap, arena: &Arena) -> Option<Loaded> {
    let prev = arena.previous();
    if prev.clean_stamp == 0 {
        return None;
    }
    let path = index_path(arena.path());
    let bytes = std::fs::read(&path).ok()?;
    if bytes.len() < 8 + 8 + 8 + 8 + 1 + 4 {
        return None;
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().ok()?) {
        tracing::warn!(file = %path.display(), "the warm-restart index fails its checksum; starting cold");
        return None;
    }
    let mut r = Cursor { b: body, pos: 0 };
    if r.take(8)? != MAGIC || r.u64()? != prev.id || r.u64()? != prev.clean_stamp {
        tracing::warn!(file = %path.display(), "the warm-restart index belongs to another arena or close; starting cold");
        return None;
    }
    let mut loaded = Loaded { wal_seq: r.u64()?, ..Default::default() };
    for _ in 0..r.u64()? {
        loaded.namespaces.push(String::from_utf8_lossy(r.bytes()?).into_owned());
    }
    let now = crate::clock::now_ms();
    while r.take(1)? == [1] {
        let db = u16::from_le_bytes(r.take(2)?.try_into().ok()?) as usize;
        let (kind_bits, in_pmem) = (r.take(1)?[0], r.take(1)?[0] == 1);
        let access = u32::from_le_bytes(r.take(4)?.try_into().ok()?);
        let version = r.u64()?;
        let flags = u32::from_le_bytes(r.take(4)?.try_into().ok()?);
        let expire = if r.take(1)?[0] == 1 { Some(r.u64()? as i64) } else { None };
        let key = r.bytes()?;
        if db >= ks.dbs() {
            return None;
        }
        let meta = Meta { expire, flags, version, access };
        let kind = Kind::from_bits(kind_bits);
        let entry = if in_pmem {
            let (off, len, crc) = (r.u64()?, r.u64()? as usize, u32::from_le_bytes(r.take(4)?.try_into().ok()?));
            if !arena.claim(off, len) {
                tracing::warn!(key = %String::from_utf8_lossy(key), "the warm-restart index disagrees with the arena; starting cold");
                return None;
            }
            let addr = arena.address_of(off);
            // SAFETY: claimed just now: inside the data region and owned by this entry.
            let value = unsafe { std::slice::from_raw_parts(addr, len) };
            let valid = crc32fast::hash(value) == crc && (kind == Kind::Str || thaw_bytes(kind, value).is_some());
            if !valid {
                tracing::error!(key = %String::from_utf8_lossy(key), "a PMem value fails its checksum after the restart; the key is dropped");
                loaded.damaged += 1;
                arena.free(addr, len);
                continue;
            }
            Entry::new_pmem(kind_bits, key, addr, len, &meta)
        } else {
            let v = r.bytes()?;
            match kind {
                Kind::Str => Entry::new_stored_str(kind_bits, key, v, &meta),
                k => Entry::new_coll(key, thaw_bytes(k, v)?, &meta),
            }
        };
        if crate::keyspace::is_expired(expire, now) {
            continue;
        }
        ks.lock_one(cap, ks.shard_id(db, key)).insert(entry);
        loaded.keys += 1;
    }
    Some(loaded)
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u64()? as usize;
        self.take(n)
    }
}
