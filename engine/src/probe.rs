//! The device probe (after DOTA's device-oriented tuning): a few seconds at start measuring
//! what this machine's memory and storage paths cost — DRAM random-read latency and copy
//! bandwidth, the PMem path (a mapped file beside `pmem_path`: random reads, writes made
//! durable with a flush), and the storage path (a file beside the data: sequential writes with
//! fsync, the latency of one small synced write, random reads). The result is cached in the
//! temporary directory per set of devices for a day, so engines started together probe once.
//! The write-back flusher sizes its batches from it and the advisor reads it.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A cached profile is used for this long.
const CACHE_FOR: Duration = Duration::from_secs(24 * 3600);
const DRAM_BYTES: usize = 64 << 20;
const MAPPED_BYTES: usize = 64 << 20;
const FILE_BYTES: usize = 32 << 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Dram {
    pub random_read_ns: f64,
    pub copy_gbps: f64,
}

/// A mapped (PMem) or file (storage) path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Media {
    pub dir: String,
    /// One random 8-byte (mapped) or 4 KiB (file) read.
    pub random_read_ns: f64,
    /// Sequential writes, durable at the end (flush of the mapping, fsync of the file).
    pub write_gbps: f64,
    /// One small write made durable (a 4 KiB write + fdatasync, or a 256-byte store + flush).
    pub sync_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceProfile {
    pub dram: Dram,
    pub pmem: Option<Media>,
    pub storage: Option<Media>,
    /// Unix seconds when measured.
    pub measured_at: u64,
    pub probe_seconds: f64,
}

impl DeviceProfile {
    /// Bytes a batch should carry so that its one durable sync costs at most a tenth of the
    /// batch's transfer time on the storage path (1 MB when unknown), within 256 KB..8 MB.
    pub fn storage_batch_bytes(&self) -> usize {
        match &self.storage {
            Some(s) if s.write_gbps > 0.0 => ((9.0 * s.sync_us * 1e-6 * s.write_gbps * 1e9) as usize).clamp(256 << 10, 8 << 20),
            _ => 1 << 20,
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Scratch memory mapped straight from the kernel: the probe's buffers (a few hundred MB for
/// a moment) must not go through the counting allocator, where they would count in
/// used_memory and trip maxmemory while the engine is already serving.
struct Scratch(memmap2::MmapMut);

impl Scratch {
    fn new(bytes: usize) -> std::io::Result<Scratch> {
        Ok(Scratch(memmap2::MmapMut::map_anon(bytes.max(8).next_multiple_of(8))?))
    }

    fn words(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is page-aligned, its length a multiple of 8, and any bit pattern
        // is a valid u64.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u64>(), self.0.len() / 8) }
    }
}

/// A random cyclic permutation of 0..n (Sattolo): `next[i]`, so a pointer chase visits every slot.
fn cycle(n: usize, rng: &mut fastrand::Rng) -> std::io::Result<Scratch> {
    let mut order = Scratch::new(n * 8)?;
    let p = order.words();
    for (i, x) in p.iter_mut().enumerate() {
        *x = i as u64;
    }
    for i in (1..n).rev() {
        let j = rng.usize(0..i);
        p.swap(i, j);
    }
    let mut next = Scratch::new(n * 8)?;
    let nx = next.words();
    for i in 0..n {
        nx[p[i] as usize] = p[(i + 1) % n];
    }
    Ok(next)
}

pub fn probe_dram() -> std::io::Result<Dram> {
    let mut rng = fastrand::Rng::with_seed(1);
    // Slots a cache line apart, so each step misses the caches.
    let n = DRAM_BYTES / 64;
    let mut idx = cycle(n, &mut rng)?;
    let mut table = Scratch::new(n * 64)?;
    let t = table.words();
    for (i, nx) in idx.words().iter().enumerate() {
        t[i * 8] = nx * 8;
    }
    let start = Instant::now();
    let steps = 1_000_000;
    let mut at = 0u64;
    for _ in 0..steps {
        at = t[at as usize];
    }
    std::hint::black_box(at);
    let random_read_ns = start.elapsed().as_nanos() as f64 / steps as f64;
    let mut src = Scratch::new(DRAM_BYTES)?;
    src.0.fill(1);
    let mut dst = Scratch::new(DRAM_BYTES)?;
    let start = Instant::now();
    for _ in 0..4 {
        dst.0.copy_from_slice(std::hint::black_box(&src.0));
    }
    std::hint::black_box(&dst.0);
    Ok(Dram { random_read_ns, copy_gbps: 4.0 * DRAM_BYTES as f64 / start.elapsed().as_secs_f64() / 1e9 })
}

/// The PMem path: a mapping of a scratch file in `dir`.
pub fn probe_mapped(dir: &Path) -> std::io::Result<Media> {
    let path = dir.join(format!(".terrace-probe-{}", std::process::id()));
    let result = (|| {
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        f.set_len(MAPPED_BYTES as u64)?;
        // SAFETY: a scratch file only this function uses, removed below.
        let mut map = unsafe { memmap2::MmapMut::map_mut(&f)? };
        let start = Instant::now();
        for chunk in map.chunks_mut(1 << 20) {
            chunk.fill(0xA5);
        }
        map.flush()?;
        let write_gbps = MAPPED_BYTES as f64 / start.elapsed().as_secs_f64() / 1e9;
        let start = Instant::now();
        let rounds = 200;
        for i in 0..rounds {
            let at = (i * 7919 * 4096) % (MAPPED_BYTES - 4096);
            map[at..at + 256].fill(i as u8);
            map.flush_range(at, 256)?;
        }
        let sync_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
        let n = MAPPED_BYTES / 64;
        let mut idx = cycle(n, &mut fastrand::Rng::with_seed(2))?;
        for (i, nx) in idx.words().iter().enumerate() {
            map[i * 64..i * 64 + 8].copy_from_slice(&(nx * 64).to_le_bytes());
        }
        let start = Instant::now();
        let steps = 500_000;
        let mut at = 0usize;
        for _ in 0..steps {
            at = u64::from_le_bytes(map[at..at + 8].try_into().unwrap()) as usize;
        }
        std::hint::black_box(at);
        let random_read_ns = start.elapsed().as_nanos() as f64 / steps as f64;
        Ok(Media { dir: dir.display().to_string(), random_read_ns, write_gbps, sync_us })
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// The storage path: a scratch file in `dir`.
pub fn probe_file(dir: &Path) -> std::io::Result<Media> {
    let path = dir.join(format!(".terrace-probe-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        let block = vec![0x5Au8; 1 << 20];
        let start = Instant::now();
        for _ in 0..FILE_BYTES >> 20 {
            f.write_all(&block)?;
        }
        f.sync_all()?;
        let write_gbps = FILE_BYTES as f64 / start.elapsed().as_secs_f64() / 1e9;
        let rounds = 64;
        let start = Instant::now();
        for i in 0..rounds {
            f.write_all_at(&block[..4096], (i * 4096) as u64)?;
            f.sync_data()?;
        }
        let sync_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
        let mut buf = vec![0u8; 4096];
        let mut rng = fastrand::Rng::with_seed(3);
        let reads = 2000;
        let start = Instant::now();
        for _ in 0..reads {
            let at = rng.u64(0..(FILE_BYTES as u64 / 4096)) * 4096;
            f.seek(SeekFrom::Start(at))?;
            f.read_exact(&mut buf)?;
        }
        let random_read_ns = start.elapsed().as_nanos() as f64 / reads as f64;
        Ok(Media { dir: dir.display().to_string(), random_read_ns, write_gbps, sync_us })
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// The cache file for this set of directories (named by their devices).
fn cache_path(pmem_dir: Option<&Path>, storage_dir: &Path) -> PathBuf {
    let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).unwrap_or(0);
    let name = format!("terrace-device-probe-{}-{}.json", pmem_dir.map(dev).unwrap_or(0), dev(storage_dir));
    std::env::temp_dir().join(name)
}

/// The profile for these directories: from the cache when fresh, else measured (and cached).
pub fn cached_or_probe(pmem_dir: Option<&Path>, storage_dir: &Path) -> DeviceProfile {
    let cache = cache_path(pmem_dir, storage_dir);
    if let Ok(text) = std::fs::read_to_string(&cache) {
        if let Ok(p) = serde_json::from_str::<DeviceProfile>(&text) {
            if unix_now().saturating_sub(p.measured_at) < CACHE_FOR.as_secs() && p.pmem.is_some() == pmem_dir.is_some() {
                return p;
            }
        }
    }
    // One engine probes at a time (engines started together would otherwise all measure at
    // once, disturbing each other and what they serve); the others wait for its result.
    let lock = cache.with_extension("lock");
    let owned = std::fs::OpenOptions::new().write(true).create_new(true).open(&lock).is_ok()
        || std::fs::metadata(&lock).and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(60));
    if !owned {
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
            if let Some(p) = std::fs::read_to_string(&cache).ok().and_then(|t| serde_json::from_str::<DeviceProfile>(&t).ok()) {
                return p;
            }
        }
    }
    let p = probe(pmem_dir, storage_dir);
    let _ = std::fs::remove_file(&lock);
    if let Ok(text) = serde_json::to_string(&p) {
        let tmp = cache.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &cache);
        }
    }
    p
}

pub fn probe(pmem_dir: Option<&Path>, storage_dir: &Path) -> DeviceProfile {
    let start = Instant::now();
    let dram = probe_dram().unwrap_or_else(|e| {
        tracing::warn!("device probe of DRAM: {e}");
        Dram { random_read_ns: 0.0, copy_gbps: 0.0 }
    });
    let pmem = pmem_dir.and_then(|d| probe_mapped(d).map_err(|e| tracing::warn!("device probe of the PMem path {}: {e}", d.display())).ok());
    let storage = probe_file(storage_dir).map_err(|e| tracing::warn!("device probe of the storage path {}: {e}", storage_dir.display())).ok();
    DeviceProfile { dram, pmem, storage, measured_at: unix_now(), probe_seconds: start.elapsed().as_secs_f64() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_measures_every_path_and_leaves_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("terrace-probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = probe(Some(&dir), &dir);
        assert!(p.dram.random_read_ns > 0.0 && p.dram.copy_gbps > 0.0, "{p:?}");
        let m = p.pmem.as_ref().unwrap();
        let s = p.storage.as_ref().unwrap();
        assert!(m.random_read_ns > 0.0 && m.write_gbps > 0.0 && m.sync_us > 0.0, "{p:?}");
        assert!(s.random_read_ns > 0.0 && s.write_gbps > 0.0 && s.sync_us > 0.0, "{p:?}");
        let batch = p.storage_batch_bytes();
        assert!((256 << 10..=8 << 20).contains(&batch));
        // No scratch files left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_fresh_profile_is_read_back_from_the_cache() {
        let dir = std::env::temp_dir().join(format!("terrace-probe-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = cached_or_probe(None, &dir);
        let again = cached_or_probe(None, &dir);
        assert_eq!(first, again);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_cycle_visits_every_slot() {
        let mut next = cycle(1000, &mut fastrand::Rng::with_seed(9)).unwrap();
        let next = next.words();
        let mut seen = vec![false; 1000];
        let mut at = 0;
        for _ in 0..1000 {
            assert!(!seen[at]);
            seen[at] = true;
            at = next[at] as usize;
        }
        assert_eq!(at, 0);
    }
}
