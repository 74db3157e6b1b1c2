//! The PMem arena: a file mapped with `memmap2` (a DAX file on persistent or CXL memory in
//! production, any file in tests) holding value bytes only; keys, the index and entry
//! metadata stay in DRAM.
//!
//! Layout: a 4 KiB header, then equal slabs managed by `slabs`. The header names the arena
//! (a random id chosen at each cold start) and whether it was closed cleanly, and with which
//! warm-restart index (`warm`). Entries hold absolute addresses into the mapping, so an
//! entry being dropped finds its arena through a process-wide registry of mappings and
//! gives its space back.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use memmap2::MmapRaw;

use crate::mapped::MapError;
use parking_lot::{Mutex, RwLock};

use super::slabs::{Slabs, Usage};

const MAGIC: &[u8; 8] = b"TRCPMEM1";
pub const HEADER: usize = 4096;
/// The smallest arena: the header and a few slabs.
pub const MIN_SIZE: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ArenaError {
    #[error("`pmem_path` {path}: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("`pmem_size` is {configured} bytes but `pmem_path` {path} has {actual} bytes (remove the file or set pmem_size to its size)")]
    WrongSize { path: PathBuf, configured: u64, actual: u64 },
    #[error("`pmem_size` {0} is below the minimum of 1mb")]
    TooSmall(u64),
    #[error("`pmem_path` {path} cannot be mapped: {source}")]
    Map { path: PathBuf, source: std::io::Error },
}

/// What the header says about the previous run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub id: u64,
    /// Nonzero: closed cleanly, with the warm index stamped so.
    pub clean_stamp: u64,
}

pub struct Arena {
    map: MmapRaw,
    path: PathBuf,
    slabs: Mutex<Slabs>,
    /// This run's arena id (kept from the previous run on a warm restart).
    id: AtomicU64,
    /// Stamp of the previous clean close, read at open.
    previous: Header,
}

// SAFETY: the mapping is shared memory; every byte range is owned by exactly one entry (or
// is free), and entries are only reached under their shard's lock.
unsafe impl Send for Arena {}
// SAFETY: as for Send: the arena's own state is behind locks and atomics.
unsafe impl Sync for Arena {}

/// Mapped arenas of this process, by address range, for `release`.
static ARENAS: RwLock<Vec<(usize, usize, Weak<Arena>)>> = RwLock::new(Vec::new());

/// Slabs of 1 MiB, smaller in small arenas so that there are enough of them (about 256)
/// for every size class in use to get its own; never below 64 KiB.
fn slab_size_for(size: u64) -> usize {
    let data = (size as usize).saturating_sub(HEADER);
    let mut s = 1usize << 20;
    while s > 64 << 10 && data / s < 256 {
        s >>= 1;
    }
    s
}

impl Arena {
    /// Opens (creating it if missing or empty) the file at `path` with `size` bytes and
    /// maps it. A file of another size is an error, never truncated: it may hold data.
    pub fn open(path: &Path, size: u64) -> Result<Arc<Arena>, ArenaError> {
        if size < MIN_SIZE {
            return Err(ArenaError::TooSmall(size));
        }
        let map = crate::mapped::map_sized(path, size).map_err(|e| match e {
            MapError::Open(source) => ArenaError::Open { path: path.to_owned(), source },
            MapError::WrongSize { configured, actual } => ArenaError::WrongSize { path: path.to_owned(), configured, actual },
            MapError::Map(source) => ArenaError::Map { path: path.to_owned(), source },
        })?;
        let slab_size = slab_size_for(size);
        let n = (size as usize - HEADER) / slab_size;
        let mut arena = Arena {
            map,
            path: path.to_owned(),
            slabs: Mutex::new(Slabs::new(n, slab_size)),
            id: AtomicU64::new(0),
            previous: Header { id: 0, clean_stamp: 0 },
        };
        arena.previous = arena.read_header().unwrap_or(Header { id: 0, clean_stamp: 0 });
        arena.id = AtomicU64::new(arena.previous.id);
        let arena = Arc::new(arena);
        let base = arena.map.as_ptr() as usize;
        let mut reg = ARENAS.write();
        reg.retain(|(_, _, w)| w.strong_count() > 0);
        reg.push((base, arena.map.len(), Arc::downgrade(&arena)));
        Ok(arena)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }

    /// The header as the previous run left it.
    pub fn previous(&self) -> Header {
        self.previous
    }

    fn read_header(&self) -> Option<Header> {
        // SAFETY: the header lies inside the mapping.
        let h = unsafe { std::slice::from_raw_parts(self.map.as_ptr(), 28) };
        if &h[..8] != MAGIC {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
        let crc = u32::from_le_bytes(h[24..28].try_into().unwrap());
        (crc32fast::hash(&h[..24]) == crc).then(|| Header { id: word(8), clean_stamp: word(16) })
    }

    /// Writes the header and flushes it.
    fn write_header(&self, h: Header) -> std::io::Result<()> {
        let mut buf = [0u8; 28];
        buf[..8].copy_from_slice(MAGIC);
        buf[8..16].copy_from_slice(&h.id.to_le_bytes());
        buf[16..24].copy_from_slice(&h.clean_stamp.to_le_bytes());
        let crc = crc32fast::hash(&buf[..24]);
        buf[24..28].copy_from_slice(&crc.to_le_bytes());
        // SAFETY: the header lies inside the mapping and only this thread writes it (start
        // and shutdown).
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), self.map.as_mut_ptr(), buf.len()) };
        self.map.flush_range(0, HEADER)
    }

    /// Starts this run cold: a fresh id, every slab free, the header marked in use. No entry
    /// may still point into the arena.
    pub fn start_cold(&self) -> std::io::Result<()> {
        let id = loop {
            let id = fastrand::u64(..);
            if id != 0 && id != self.previous.id {
                break id;
            }
        };
        self.id.store(id, Ordering::Relaxed);
        let mut slabs = self.slabs.lock();
        let n = slabs.usage().capacity as usize / slabs.slab_size();
        *slabs = Slabs::new(n, slabs.slab_size());
        drop(slabs);
        self.write_header(Header { id, clean_stamp: 0 })
    }

    /// Marks the arena in use (after a warm start): a crash from here on starts cold.
    pub fn mark_in_use(&self) -> std::io::Result<()> {
        self.write_header(Header { id: self.id(), clean_stamp: 0 })
    }

    /// Flushes every value and marks the arena closed cleanly with `stamp`.
    pub fn close_clean(&self, stamp: u64) -> std::io::Result<()> {
        self.map.flush()?;
        self.write_header(Header { id: self.id(), clean_stamp: stamp })
    }

    fn base(&self) -> *mut u8 {
        // SAFETY: HEADER is inside the mapping (the arena is at least MIN_SIZE).
        unsafe { self.map.as_mut_ptr().add(HEADER) }
    }

    /// Reserves `len` bytes; returns their address, or None when the arena is full.
    pub fn alloc(&self, len: usize) -> Option<*mut u8> {
        let off = self.slabs.lock().alloc(len)?;
        // SAFETY: the allocator hands out ranges inside the data region.
        Some(unsafe { self.base().add(off as usize) })
    }

    /// Reserves space for several values at once (one lock); None entries did not fit.
    pub fn alloc_many(&self, lens: impl Iterator<Item = usize>, out: &mut Vec<Option<*mut u8>>) {
        let mut slabs = self.slabs.lock();
        let base = self.base();
        // SAFETY: as in `alloc`.
        out.extend(lens.map(|len| slabs.alloc(len).map(|off| unsafe { base.add(off as usize) })));
    }

    /// Gives back the space of a value of `len` bytes at `addr`.
    pub fn free(&self, addr: *const u8, len: usize) {
        let off = self.offset_of(addr);
        self.slabs.lock().free(off, len);
    }

    /// The offset in the data region of an address inside it.
    pub fn offset_of(&self, addr: *const u8) -> u64 {
        (addr as usize - self.base() as usize) as u64
    }

    /// The address of an offset in the data region.
    pub fn address_of(&self, off: u64) -> *mut u8 {
        // SAFETY: callers pass offsets the allocator handed out or claimed.
        unsafe { self.base().add(off as usize) }
    }

    /// Marks a value of an earlier run as live (warm restart); false if the index and the
    /// layout disagree.
    pub fn claim(&self, off: u64, len: usize) -> bool {
        self.slabs.lock().claim(off, len)
    }

    /// Schedules writing back `addr..addr+len` (one call per demotion batch). On a DAX
    /// mapping this is where CPU caches are flushed; on a file, the kernel writes back.
    pub fn flush_async(&self, addr: *const u8, len: usize) {
        let off = addr as usize - self.map.as_ptr() as usize;
        let _ = self.map.flush_async_range(off, len);
    }

    pub fn usage(&self) -> Usage {
        self.slabs.lock().usage()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let base = self.map.as_ptr() as usize;
        ARENAS.write().retain(|(b, _, _)| *b != base);
    }
}

/// Gives back the space of a value at `addr` in whichever mapped arena holds it (an entry
/// being dropped). A value outside every arena is a bug; it is logged, not fatal.
pub fn release(addr: *const u8, len: usize) {
    let a = addr as usize;
    let arena = ARENAS.read().iter().find(|(b, l, _)| a >= *b && a < b + l).and_then(|(_, _, w)| w.upgrade());
    match arena {
        Some(arena) => arena.free(addr, len),
        None => tracing::error!(addr = a, len, "released a PMem value outside every arena"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("terrace-arena-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("pmem")
    }

    #[test]
    fn values_written_through_addresses_are_released_by_address() {
        let p = temp("release");
        let a = Arena::open(&p, 4 << 20).unwrap();
        a.start_cold().unwrap();
        let addr = a.alloc(300).unwrap();
        // SAFETY: `alloc` returned a 300-byte range of the mapping that nothing else uses.
        unsafe { std::ptr::copy_nonoverlapping([7u8; 300].as_ptr(), addr, 300) };
        assert_eq!(a.usage().values, 300);
        release(addr, 300);
        assert_eq!(a.usage().values, 0);
    }

    #[test]
    fn sizes_and_headers() {
        let p = temp("sizes");
        assert!(matches!(Arena::open(&p, 1000), Err(ArenaError::TooSmall(_))));
        let a = Arena::open(&p, 2 << 20).unwrap();
        assert_eq!(a.previous(), Header { id: 0, clean_stamp: 0 }, "a new file has no header");
        a.start_cold().unwrap();
        let id = a.id();
        a.close_clean(42).unwrap();
        drop(a);
        let e = Arena::open(&p, 4 << 20).err().unwrap().to_string();
        assert!(e.contains("pmem_size") && e.contains("2097152"), "{e}");
        let b = Arena::open(&p, 2 << 20).unwrap();
        assert_eq!(b.previous(), Header { id, clean_stamp: 42 });
    }
}
