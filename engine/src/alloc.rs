//! Memory accounting: a global allocator wrapper that counts live heap bytes (INFO
//! `used_memory`, maxmemory enforcement), over mimalloc — or over the system allocator with
//! the `alloc-system` feature, which exists to measure the choice (see BENCHMARKS.md).
//!
//! The binary installs it with `#[global_allocator]`; without it (unit tests) `used_memory`
//! reports 0 and maxmemory never triggers.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(not(feature = "alloc-system"))]
use mimalloc::MiMalloc as Inner;
#[cfg(feature = "alloc-system")]
use std::alloc::System as Inner;

/// Name reported by INFO `mem_allocator`.
pub const ALLOCATOR: &str = if cfg!(feature = "alloc-system") { "libc" } else { "mimalloc" };

static USED: AtomicUsize = AtomicUsize::new(0);

pub struct CountingAlloc;

// SAFETY: every method forwards to mimalloc's, which upholds GlobalAlloc's contract; the
// counter is only arithmetic on the sizes passed.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = Inner.alloc(layout);
        if !p.is_null() {
            USED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Inner.dealloc(ptr, layout);
        USED.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = Inner.alloc_zeroed(layout);
        if !p.is_null() {
            USED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = Inner.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size > layout.size() {
                USED.fetch_add(new_size - layout.size(), Ordering::Relaxed);
            } else {
                USED.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

/// Allocator settings chosen by measurement (BENCHMARKS.md, "Allocator"): mimalloc's arenas
/// commit memory as it is used rather than eagerly, which keeps RSS close to the live heap
/// (option `arena_eager_commit`; a `MIMALLOC_ARENA_EAGER_COMMIT` environment variable still
/// wins). Options are read when an arena is created, so this runs as a process constructor,
/// before the first allocation.
#[cfg(not(feature = "alloc-system"))]
#[used]
#[link_section = ".init_array"]
static TUNE_ALLOCATOR: extern "C" fn() = {
    extern "C" fn tune() {
        /// `mi_option_arena_eager_commit` in mimalloc.h's `mi_option_e` (the -sys crate does
        /// not name it).
        const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
        // SAFETY: setting a mimalloc option has no preconditions; it only affects arenas
        // created afterwards. getenv is safe here: no other thread exists yet.
        unsafe {
            if libc::getenv(c"MIMALLOC_ARENA_EAGER_COMMIT".as_ptr()).is_null() {
                libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
            }
        }
    }
    tune
};

/// Returns the calling thread's free allocator pages, and the arenas' purgeable memory, to
/// the operating system now rather than when later allocations get round to it: after a
/// FLUSHALL the resident size drops with the data, as with Redis's jemalloc. Pages other
/// threads own are returned as those threads allocate again.
pub fn purge() {
    #[cfg(not(feature = "alloc-system"))]
    // SAFETY: mi_collect has no preconditions; it walks this thread's own heap.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(feature = "alloc-system")]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Returns memory freed longer ago than mimalloc's purge delay to the operating system,
/// process-wide (mimalloc does this itself only on later allocator calls, so an engine that
/// goes quiet after freeing a big block — a hash table that just doubled, say — would keep it
/// resident). Cheap: the calling thread's small heap and the arenas' due purges. The cron
/// calls it once a second.
pub fn release_freed() {
    #[cfg(not(feature = "alloc-system"))]
    // SAFETY: mi_collect has no preconditions; unforced, it purges only what is due.
    unsafe {
        libmimalloc_sys::mi_collect(false);
    }
}

/// Live heap bytes requested through the counting allocator.
pub fn used_memory() -> u64 {
    USED.load(Ordering::Relaxed) as u64
}
