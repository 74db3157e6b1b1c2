//! Files mapped into memory at a fixed size: the PMem arena and the WAL's PMem ring. A new
//! (or empty) file is sized; an existing file of another size is refused, never truncated,
//! because it may hold data the caller will want back. And how stores to such a mapping are
//! made durable (`Persistence`): by `msync`, or — where the file is memory — by writing the
//! touched cache lines back in user space, as software for persistent memory does.

use std::fs::OpenOptions;
use std::path::Path;

use memmap2::MmapRaw;

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("{0}")]
    Open(std::io::Error),
    #[error("has {actual} bytes, not {configured}")]
    WrongSize { configured: u64, actual: u64 },
    #[error("cannot be mapped: {0}")]
    Map(std::io::Error),
}

/// Opens `path` (created if missing) as exactly `size` bytes and maps it shared.
pub fn map_sized(path: &Path, size: u64) -> Result<MmapRaw, MapError> {
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(MapError::Open)?;
    let actual = file.metadata().map_err(MapError::Open)?.len();
    if actual == 0 {
        file.set_len(size).map_err(MapError::Open)?;
    } else if actual != size {
        return Err(MapError::WrongSize { configured: size, actual });
    }
    MmapRaw::map_raw(&file).map_err(MapError::Map)
}

/// How stores to a mapped file are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// The file is memory (tmpfs or ramfs: `/dev/shm` standing in for persistent memory):
    /// its pages are the data and `msync` has nothing to write. Stores are persisted as on
    /// persistent memory — each touched cache line written back (CLWB, else CLFLUSHOPT, else
    /// CLFLUSH), then a store fence — without a system call.
    CacheLines,
    /// A file in the page cache: `msync` writes the range to the device. (A DAX file on real
    /// persistent memory also lands here: persisting it by cache lines needs a `MAP_SYNC`
    /// mapping, which memmap2 does not make.)
    Msync,
}

impl Persistence {
    /// The persistence of the file at `path` (by its filesystem); `Msync` when unsure.
    pub fn of(path: &Path) -> Persistence {
        if cache_lines::supported() && is_memory_filesystem(path) {
            Persistence::CacheLines
        } else {
            Persistence::Msync
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Persistence::CacheLines => "cache-lines",
            Persistence::Msync => "msync",
        }
    }

    /// Makes the stores to `map[offset..offset + len]` durable.
    pub fn persist(self, map: &MmapRaw, offset: usize, len: usize) -> std::io::Result<()> {
        match self {
            Persistence::Msync => map.flush_range(offset, len),
            Persistence::CacheLines => {
                assert!(offset.checked_add(len).is_some_and(|end| end <= map.len()), "persist past the end of the mapping");
                // SAFETY: the range is inside the mapping (checked above).
                unsafe { cache_lines::write_back(map.as_ptr().add(offset), len) };
                Ok(())
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn is_memory_filesystem(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: an all-zero statfs is a valid value (plain integers), filled by statfs below.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a statfs to fill.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    // RAMFS_MAGIC from linux/magic.h (the libc crate has TMPFS_MAGIC only).
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let kind = st.f_type as i64;
    kind == libc::TMPFS_MAGIC || kind == RAMFS_MAGIC
}

#[cfg(not(target_os = "linux"))]
fn is_memory_filesystem(_: &Path) -> bool {
    false
}

/// Cache-line write-back by hand: Rust's `std::arch` has CLFLUSH but neither CLWB nor
/// CLFLUSHOPT, and no crate we use offers persistent-memory flushing.
#[cfg(target_arch = "x86_64")]
mod cache_lines {
    use std::arch::asm;
    use std::arch::x86_64::{__cpuid, __cpuid_count, _mm_clflush, _mm_sfence};
    use std::sync::OnceLock;

    const LINE: usize = 64;

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Insn {
        Clwb,
        Clflushopt,
        Clflush,
    }

    fn insn() -> Insn {
        static INSN: OnceLock<Insn> = OnceLock::new();
        *INSN.get_or_init(|| {
            // CPUID leaf 7 (structured extended features), where the CPU has it.
            let ebx = if __cpuid(0).eax >= 7 { __cpuid_count(7, 0).ebx } else { 0 };
            if ebx & (1 << 24) != 0 {
                Insn::Clwb
            } else if ebx & (1 << 23) != 0 {
                Insn::Clflushopt
            } else {
                Insn::Clflush
            }
        })
    }

    pub fn supported() -> bool {
        true // CLFLUSH is part of SSE2, which every x86_64 CPU has
    }

    /// Writes back every cache line of `ptr..ptr + len`, then fences the stores.
    ///
    /// # Safety
    /// The range must be mapped.
    pub unsafe fn write_back(ptr: *const u8, len: usize) {
        if len == 0 {
            return;
        }
        let first = ptr as usize & !(LINE - 1);
        let end = ptr as usize + len;
        let insn = insn();
        for line in (first..end).step_by(LINE) {
            let p = line as *const u8;
            // SAFETY: `p` is inside (or at the line start of) the mapped range.
            unsafe {
                match insn {
                    Insn::Clwb => asm!("clwb [{p}]", p = in(reg) p, options(nostack, preserves_flags)),
                    Insn::Clflushopt => asm!("clflushopt [{p}]", p = in(reg) p, options(nostack, preserves_flags)),
                    Insn::Clflush => _mm_clflush(p),
                }
            }
        }
        // SAFETY: SSE is part of x86_64.
        unsafe { _mm_sfence() };
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod cache_lines {
    pub fn supported() -> bool {
        false
    }

    pub unsafe fn write_back(_: *const u8, _: usize) {
        unreachable!("cache-line persistence is only chosen on x86_64")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn a_file_in_memory_is_persisted_by_cache_lines_and_a_disk_file_by_msync() {
        let path = Path::new("/dev/shm").join(format!("terrace-mapped-test-{}", std::process::id()));
        let map = map_sized(&path, 8192).unwrap();
        let p = Persistence::of(&path);
        assert_eq!(p, Persistence::CacheLines);
        // SAFETY: inside the 8 KiB mapping.
        unsafe { std::ptr::copy_nonoverlapping(b"persisted".as_ptr(), map.as_mut_ptr().add(4090), 9) };
        p.persist(&map, 4090, 9).unwrap(); // across a page boundary and two lines
        p.persist(&map, 8191, 1).unwrap();
        p.persist(&map, 0, 0).unwrap();
        drop(map);
        assert_eq!(&std::fs::read(&path).unwrap()[4090..4099], b"persisted");
        std::fs::remove_file(&path).unwrap();
        // The checkout is on a disk; an unreadable path falls back to msync.
        assert_eq!(Persistence::of(Path::new(env!("CARGO_MANIFEST_DIR"))), Persistence::Msync);
        assert_eq!(Persistence::of(Path::new("/no/such/dir")), Persistence::Msync);
    }
}
