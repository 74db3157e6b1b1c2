//! The keyspace entry: key, value and metadata in one heap allocation behind a thin pointer.
//!
//! Space cost is half of Terrace's cost model, so an entry is packed by hand rather than as a
//! Rust struct with `Box<[u8]>` fields (which would cost two allocations and two fat pointers):
//!
//! ```text
//! [0]      tag: bits 0-2 kind (6: a string stored compressed), bit 3 has-expiry, bit 4 has-flags, bit 5 dirty, bit 6 in-PMem, bit 7 recalled
//! [1..4]   access stamp (24 bits: LRU clock, or LFU minutes+counter, as Redis)
//! [4..10]  version (48 bits; bumped on every write: WATCH, Memcached CAS, TierBase CAS)
//! varint   key length
//! varint   value length (strings, and any value in PMem; a DRAM collection stores an 8-byte pointer)
//! [8]      expiry, unix ms (only if has-expiry)
//! [4]      Memcached client flags (only if has-flags)
//! key bytes, then value bytes (or the collection pointer)
//! ```
//!
//! A value in the PMem tier (location 1) keeps only a reference in the entry: an 8-byte
//! address into the arena's mapping and a 1-byte read counter (for promotion after N hits).
//! Strings there are read in place; a collection there is frozen (serialized as an RDB
//! object, see `tier`) and is thawed back into DRAM by any lookup through its shard. The
//! entry owns its PMem range: dropping the entry gives it back to the arena.
//!
//! The dirty bit marks a write-back tenant's entry storage has not caught up with (it must
//! not be evicted); re-laying an entry keeps it. The recalled bit marks a DRAM value brought
//! back from PMem (a thawed collection, a promoted string): among values equally cold,
//! demotion takes it last, so a value just read back is not frozen again at once (see
//! `tier::demote`). Any write lays a new entry without it.
//! A compressed string's value bytes are `[codec header][payload]` (see `compress`); only
//! the keyspace's tenant state decodes them.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use super::value::Collection;
pub use super::value::{Kind, ValueRef};

/// Kind bits of a string whose value bytes are compressed.
pub(crate) const ENCODED_STR: u8 = 6;
const HAS_EXPIRE: u8 = 1 << 3;
const HAS_FLAGS: u8 = 1 << 4;
const DIRTY: u8 = 1 << 5;
const IN_PMEM: u8 = 1 << 6;
const RECALLED: u8 = 1 << 7;
const FIXED: usize = 10;
/// A PMem reference: address and read counter.
const PMEM_REF: usize = 9;
const PTR: usize = std::mem::size_of::<*mut Collection>();
pub const MAX_VERSION: u64 = (1 << 48) - 1;

/// An entry's value as laid out in the entry: bytes inline, or a reference into PMem.
#[derive(Clone, Copy)]
pub enum Body<'a> {
    Inline(&'a [u8]),
    Pmem { addr: *const u8, len: usize, hits: u8 },
}

/// A value brought back into DRAM.
pub enum DramValue<'a> {
    Bytes(&'a [u8]),
    Coll(Collection),
}

/// Parameters of a new entry.
pub struct Meta {
    pub expire: Option<i64>,
    pub flags: u32,
    pub version: u64,
    pub access: u32,
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

unsafe fn write_varint(mut p: *mut u8, mut v: usize) -> *mut u8 {
    while v >= 0x80 {
        *p = (v as u8) | 0x80;
        p = p.add(1);
        v >>= 7;
    }
    *p = v as u8;
    p.add(1)
}

unsafe fn read_varint(mut p: *const u8) -> (usize, *const u8) {
    let mut v = 0usize;
    let mut shift = 0;
    loop {
        let b = *p;
        p = p.add(1);
        v |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return (v, p);
        }
        shift += 7;
    }
}

/// A keyspace entry (thin, owning pointer). `Send` because it is only reached through its
/// shard's lock.
///
/// Layout invariant, relied on by every `unsafe` block below: the pointer is one allocation
/// of `total_size()` bytes with alignment 1, written once by `build_body`: the tag byte, a
/// 3-byte access stamp, a 6-byte version (`FIXED` bytes), the key length as a varint, the
/// value length as a varint (strings and PMem references), an 8-byte expiry if HAS_EXPIRE,
/// 4-byte flags if HAS_FLAGS, the key, then the value area: a string's bytes, a collection's
/// `Box` pointer, or a PMem reference (8-byte address, 1-byte hit counter). Only `rebuild`,
/// `renamed` and `Drop` free it.
pub struct Entry(NonNull<u8>);

// SAFETY: an Entry owns its allocation and its collection or PMem range exclusively (no
// shared interior state); it is only reached through its shard's lock.
unsafe impl Send for Entry {}
// SAFETY: as for Send: `&Entry` only reads, and writes need `&mut Entry`.
unsafe impl Sync for Entry {}

struct Parsed {
    key_off: usize,
    key_len: usize,
    val_off: usize,
    val_len: usize,
    expire_off: usize,
    flags_off: usize,
}

impl Entry {
    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 1).expect("entry layout")
    }

    fn build(kind: Kind, key: &[u8], value: &[u8], meta: &Meta) -> Entry {
        Self::build_bits(kind as u8, key, value, meta)
    }

    fn build_bits(kind_bits: u8, key: &[u8], value: &[u8], meta: &Meta) -> Entry {
        Self::build_body(kind_bits, key, Body::Inline(value), meta)
    }

    fn build_body(kind_bits: u8, key: &[u8], body: Body, meta: &Meta) -> Entry {
        let kind = Kind::from_bits(kind_bits);
        let has_exp = meta.expire.is_some();
        let has_flags = meta.flags != 0;
        let (val_len_field, area) = match body {
            Body::Inline(v) => (if kind == Kind::Str { varint_len(v.len()) } else { 0 }, v.len()),
            Body::Pmem { len, .. } => (varint_len(len), PMEM_REF),
        };
        let size = FIXED + varint_len(key.len()) + val_len_field + if has_exp { 8 } else { 0 } + if has_flags { 4 } else { 0 } + key.len() + area;
        // SAFETY: `size` counts every field written below (same terms as the sum above), so each
        // write stays inside the fresh allocation; `alloc` failure is handled.
        unsafe {
            let base = alloc(Self::layout(size));
            let Some(nn) = NonNull::new(base) else { handle_alloc_error(Self::layout(size)) };
            let mut tag = kind_bits & (7 | DIRTY);
            if let Body::Pmem { .. } = body {
                tag |= IN_PMEM;
            }
            if has_exp {
                tag |= HAS_EXPIRE;
            }
            if has_flags {
                tag |= HAS_FLAGS;
            }
            *base = tag;
            let acc = meta.access.to_le_bytes();
            std::ptr::copy_nonoverlapping(acc.as_ptr(), base.add(1), 3);
            let ver = (meta.version & MAX_VERSION).to_le_bytes();
            std::ptr::copy_nonoverlapping(ver.as_ptr(), base.add(4), 6);
            let mut p = write_varint(base.add(FIXED), key.len());
            match body {
                Body::Inline(v) if kind == Kind::Str => p = write_varint(p, v.len()),
                Body::Inline(_) => {}
                Body::Pmem { len, .. } => p = write_varint(p, len),
            }
            if let Some(e) = meta.expire {
                std::ptr::copy_nonoverlapping(e.to_le_bytes().as_ptr(), p, 8);
                p = p.add(8);
            }
            if has_flags {
                std::ptr::copy_nonoverlapping(meta.flags.to_le_bytes().as_ptr(), p, 4);
                p = p.add(4);
            }
            std::ptr::copy_nonoverlapping(key.as_ptr(), p, key.len());
            p = p.add(key.len());
            match body {
                Body::Inline(v) => std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()),
                Body::Pmem { addr, hits, .. } => {
                    std::ptr::copy_nonoverlapping((addr as usize).to_ne_bytes().as_ptr(), p, 8);
                    *p.add(8) = hits;
                }
            }
            Entry(nn)
        }
    }

    /// A string entry.
    pub fn new_str(key: &[u8], value: &[u8], meta: &Meta) -> Entry {
        Self::build(Kind::Str, key, value, meta)
    }

    /// A string entry with its stored bytes as laid out by `kind_bits` (plain or compressed).
    pub fn new_stored_str(kind_bits: u8, key: &[u8], stored: &[u8], meta: &Meta) -> Entry {
        Self::build_bits(kind_bits & 7, key, stored, meta)
    }

    /// A string entry whose value is compressed (`stored` = header + payload).
    pub fn new_encoded_str(key: &[u8], stored: &[u8], meta: &Meta) -> Entry {
        Self::build_bits(ENCODED_STR, key, stored, meta)
    }

    /// An entry whose value (`len` bytes: a string's stored bytes, or a frozen collection)
    /// lies in the PMem arena at `addr`; the entry takes ownership of that range.
    pub fn new_pmem(kind_bits: u8, key: &[u8], addr: *const u8, len: usize, meta: &Meta) -> Entry {
        Self::build_body(kind_bits, key, Body::Pmem { addr, len, hits: 0 }, meta)
    }

    /// The kind bits as stored (a compressed string has its own), for re-laying the entry.
    #[inline]
    pub fn kind_bits(&self) -> u8 {
        self.tag() & 7
    }

    /// Whether this is a string stored compressed.
    #[inline]
    pub fn is_encoded(&self) -> bool {
        self.tag() & 7 == ENCODED_STR
    }

    /// A collection entry; the collection is boxed and owned by the entry.
    pub fn new_coll(key: &[u8], coll: Collection, meta: &Meta) -> Entry {
        let kind = coll.kind();
        let ptr = Box::into_raw(Box::new(coll)) as usize;
        Self::build(kind, key, &ptr.to_ne_bytes(), meta)
    }

    #[inline]
    fn tag(&self) -> u8 {
        // SAFETY: the tag byte is the first byte of every entry's allocation.
        unsafe { *self.0.as_ptr() }
    }

    fn parsed(&self) -> Parsed {
        // SAFETY: the varints and optional fields are read exactly as `build_body` wrote them,
        // inside the entry's allocation (layout invariant above).
        unsafe {
            let base = self.0.as_ptr() as *const u8;
            let tag = *base;
            let (key_len, mut p) = read_varint(base.add(FIXED));
            let val_len = if Kind::from_bits(tag) == Kind::Str || tag & IN_PMEM != 0 {
                let (v, np) = read_varint(p);
                p = np;
                v
            } else {
                PTR
            };
            let mut off = p.offset_from(base) as usize;
            let expire_off = off;
            if tag & HAS_EXPIRE != 0 {
                off += 8;
            }
            let flags_off = off;
            if tag & HAS_FLAGS != 0 {
                off += 4;
            }
            Parsed { key_off: off, key_len, val_off: off + key_len, val_len, expire_off, flags_off }
        }
    }

    fn total_size(&self) -> usize {
        let p = self.parsed();
        p.val_off + if self.in_pmem() { PMEM_REF } else { p.val_len }
    }

    /// Whether the value lies in the PMem tier.
    #[inline]
    pub fn in_pmem(&self) -> bool {
        self.tag() & IN_PMEM != 0
    }

    /// Address and length of a value in PMem.
    pub fn pmem(&self) -> Option<(*const u8, usize)> {
        if !self.in_pmem() {
            return None;
        }
        let p = self.parsed();
        // SAFETY: the entry is in PMem, so its value area holds an 8-byte address (IN_PMEM set
        // only by `build_body` with a `Body::Pmem`).
        Some((unsafe { self.pmem_addr(p.val_off) }, p.val_len))
    }

    unsafe fn pmem_addr(&self, val_off: usize) -> *const u8 {
        let mut raw = [0u8; 8];
        std::ptr::copy_nonoverlapping(self.0.as_ptr().add(val_off), raw.as_mut_ptr(), 8);
        usize::from_ne_bytes(raw) as *const u8
    }

    /// Counts one read of a PMem value; returns the new count.
    pub fn note_pmem_hit(&mut self) -> u8 {
        if !self.in_pmem() {
            return 0;
        }
        let p = self.parsed();
        // SAFETY: a PMem entry's value area is the 8-byte address then the hit counter byte;
        // `&mut self` makes the write exclusive.
        unsafe {
            let c = self.0.as_ptr().add(p.val_off + 8);
            *c = (*c).saturating_add(1);
            *c
        }
    }

    /// The value as laid out: inline bytes (or a collection pointer), or a PMem reference.
    fn body(&self) -> Body<'_> {
        let p = self.parsed();
        // SAFETY: offsets from `parsed` lie inside the entry's allocation (layout invariant above); a PMem address
        // and length are the range the entry owns in the mapping.
        unsafe {
            if self.in_pmem() {
                Body::Pmem { addr: self.pmem_addr(p.val_off), len: p.val_len, hits: *self.0.as_ptr().add(p.val_off + 8) }
            } else {
                Body::Inline(std::slice::from_raw_parts(self.0.as_ptr().add(p.val_off), p.val_len))
            }
        }
    }

    /// The value's bytes in PMem (a string's stored bytes or a frozen collection).
    pub fn pmem_bytes(&self) -> Option<&[u8]> {
        // SAFETY: the entry owns this range of the mapping while it lives.
        // SAFETY: the entry owns this range of the mapping while it lives.
        self.pmem().map(|(addr, len)| unsafe { std::slice::from_raw_parts(addr, len) })
    }

    /// Bytes of this entry's value held in DRAM (0 for a value in PMem).
    pub fn dram_value_size(&self) -> usize {
        if self.in_pmem() {
            0
        } else {
            self.heap_size() - self.header_size()
        }
    }

    /// Bytes before the value: tag, stamps, lengths, expiry, flags and key.
    pub fn header_size(&self) -> usize {
        self.parsed().val_off
    }

    #[inline]
    pub fn kind(&self) -> Kind {
        Kind::from_bits(self.tag())
    }

    pub fn is_dirty(&self) -> bool {
        self.tag() & DIRTY != 0
    }

    /// Whether the value was brought back into DRAM from PMem (and not written since).
    #[inline]
    pub fn is_recalled(&self) -> bool {
        self.tag() & RECALLED != 0
    }

    /// Marks or clears the dirty bit in place.
    pub fn set_dirty(&mut self, dirty: bool) {
        // SAFETY: the tag byte is the entry's own; `&mut self` makes the write exclusive.
        unsafe {
            let tag = self.0.as_ptr();
            *tag = if dirty { *tag | DIRTY } else { *tag & !DIRTY };
        }
    }

    /// The kind bits plus the dirty bit: what re-laying the same entry keeps.
    fn relay_bits(&self) -> u8 {
        self.tag() & (7 | DIRTY)
    }

    /// Asks the CPU to bring the entry's first cache line (its header and, usually, its key)
    /// into the cache; a hint that never faults.
    #[inline]
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: PREFETCHT0 only hints the cache; it reads nothing the program sees and
        // never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(self.0.as_ptr() as *const i8)
        };
    }

    #[inline]
    pub fn key(&self) -> &[u8] {
        let p = self.parsed();
        // SAFETY: the key lies at `key_off..key_off + key_len` inside the entry's allocation (layout invariant above).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(p.key_off), p.key_len) }
    }

    pub fn value(&self) -> ValueRef<'_> {
        let p = self.parsed();
        // SAFETY: the value area lies inside the entry's allocation (layout invariant above) (or is the PMem range the entry
        // owns); a collection entry's area holds the pointer `new_coll` boxed, live until drop.
        unsafe {
            let v = if self.in_pmem() { self.pmem_addr(p.val_off) as *mut u8 } else { self.0.as_ptr().add(p.val_off) };
            if self.in_pmem() && self.kind() != Kind::Str {
                ValueRef::Frozen(self.kind(), std::slice::from_raw_parts(v, p.val_len))
            } else if self.is_encoded() {
                ValueRef::Encoded(std::slice::from_raw_parts(v, p.val_len))
            } else if self.kind() == Kind::Str {
                ValueRef::Str(std::slice::from_raw_parts(v, p.val_len))
            } else {
                ValueRef::Coll(&*self.coll_ptr(v))
            }
        }
    }

    unsafe fn coll_ptr(&self, v: *const u8) -> *mut Collection {
        let mut raw = [0u8; PTR];
        std::ptr::copy_nonoverlapping(v, raw.as_mut_ptr(), PTR);
        usize::from_ne_bytes(raw) as *mut Collection
    }

    /// A plain (uncompressed) string value's bytes, writable in place (same length).
    pub fn str_value_mut(&mut self) -> Option<&mut [u8]> {
        if self.kind() != Kind::Str || self.is_encoded() || self.in_pmem() {
            return None;
        }
        let p = self.parsed();
        // SAFETY: the value bytes lie inside this entry's own allocation, which `&mut self`
        // borrows exclusively; the length stays the same, so the header stays valid.
        unsafe { Some(std::slice::from_raw_parts_mut(self.0.as_ptr().add(p.val_off), p.val_len)) }
    }

    /// The value of a plain (uncompressed) string (the tests' reader; the engine reads
    /// through `Keyspace::string`, which knows the tenant's codecs).
    #[cfg(test)]
    pub fn plain_str(&self) -> Option<&[u8]> {
        match self.value() {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn coll(&self) -> Option<&Collection> {
        match self.value() {
            ValueRef::Coll(c) => Some(c),
            _ => None,
        }
    }

    pub fn coll_mut(&mut self) -> Option<&mut Collection> {
        if self.kind() == Kind::Str || self.in_pmem() {
            return None;
        }
        let p = self.parsed();
        // SAFETY: a DRAM collection entry's value area holds the Box pointer `new_coll` made;
        // `&mut self` makes the returned borrow exclusive.
        unsafe { Some(&mut *self.coll_ptr(self.0.as_ptr().add(p.val_off))) }
    }

    pub fn expire(&self) -> Option<i64> {
        if self.tag() & HAS_EXPIRE == 0 {
            return None;
        }
        let p = self.parsed();
        let mut raw = [0u8; 8];
        // SAFETY: HAS_EXPIRE is set, so 8 bytes at `expire_off` lie inside the entry's allocation (layout invariant above).
        unsafe { std::ptr::copy_nonoverlapping(self.0.as_ptr().add(p.expire_off), raw.as_mut_ptr(), 8) };
        Some(i64::from_le_bytes(raw))
    }

    pub fn flags(&self) -> u32 {
        if self.tag() & HAS_FLAGS == 0 {
            return 0;
        }
        let p = self.parsed();
        let mut raw = [0u8; 4];
        // SAFETY: HAS_FLAGS is set, so 4 bytes at `flags_off` lie inside the entry's allocation (layout invariant above).
        unsafe { std::ptr::copy_nonoverlapping(self.0.as_ptr().add(p.flags_off), raw.as_mut_ptr(), 4) };
        u32::from_le_bytes(raw)
    }

    #[inline]
    pub fn access(&self) -> u32 {
        let mut raw = [0u8; 4];
        // SAFETY: bytes 1..4 of every entry are its access stamp.
        unsafe { std::ptr::copy_nonoverlapping(self.0.as_ptr().add(1), raw.as_mut_ptr(), 3) };
        u32::from_le_bytes(raw)
    }

    #[inline]
    pub fn set_access(&mut self, stamp: u32) {
        let raw = stamp.to_le_bytes();
        // SAFETY: bytes 1..4 of every entry are its access stamp; `&mut self` is exclusive.
        unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), self.0.as_ptr().add(1), 3) };
    }

    pub fn version(&self) -> u64 {
        let mut raw = [0u8; 8];
        // SAFETY: bytes 4..10 of every entry are its version.
        unsafe { std::ptr::copy_nonoverlapping(self.0.as_ptr().add(4), raw.as_mut_ptr(), 6) };
        u64::from_le_bytes(raw)
    }

    pub fn set_version(&mut self, v: u64) {
        let raw = (v & MAX_VERSION).to_le_bytes();
        // SAFETY: bytes 4..10 of every entry are its version; `&mut self` is exclusive.
        unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), self.0.as_ptr().add(4), 6) };
    }

    pub fn meta(&self) -> Meta {
        Meta { expire: self.expire(), flags: self.flags(), version: self.version(), access: self.access() }
    }

    /// Sets or clears the expiry. Changing whether an expiry is present reallocates.
    pub fn set_expire(&mut self, expire: Option<i64>) {
        match (self.expire(), expire) {
            (Some(_), Some(e)) => {
                let p = self.parsed();
                // SAFETY: the entry has an expiry field (checked above): 8 bytes at `expire_off`.
                unsafe { std::ptr::copy_nonoverlapping(e.to_le_bytes().as_ptr(), self.0.as_ptr().add(p.expire_off), 8) };
            }
            (None, None) => {}
            _ => {
                let mut meta = self.meta();
                meta.expire = expire;
                self.rebuild(meta);
            }
        }
    }

    /// Re-lays the entry with new metadata, moving the value (a collection pointer moves
    /// without being dropped).
    fn rebuild(&mut self, meta: Meta) {
        let new = Self::build_body(self.relay_bits(), self.key(), self.body(), &meta);
        let old = std::mem::replace(self, new);
        old.free_shell();
    }

    /// Frees the allocation without dropping a collection it points to.
    fn free_shell(self) {
        let size = self.total_size();
        // SAFETY: the allocation was made with this layout (`total_size` re-derives `size`);
        // `forget` below keeps Drop from freeing it, or the collection, again.
        unsafe { dealloc(self.0.as_ptr(), Self::layout(size)) };
        std::mem::forget(self);
    }

    /// The same entry under another key (RENAME, MOVE); a collection moves without a copy.
    pub fn renamed(self, key: &[u8]) -> Entry {
        let new = Self::build_body(self.relay_bits(), key, self.body(), &self.meta());
        self.free_shell();
        new
    }

    /// The same entry with its value in DRAM as `value` (a PMem string's bytes, or a thawed
    /// collection); metadata stays. The PMem range is released when `self` is dropped.
    pub fn in_dram(&self, value: DramValue) -> Entry {
        let mut e = match value {
            DramValue::Bytes(v) => Self::build_bits(self.kind_bits(), self.key(), v, &self.meta()),
            DramValue::Coll(c) => Self::new_coll(self.key(), c, &self.meta()),
        };
        e.set_dirty(self.is_dirty());
        // SAFETY: the tag byte is `e`'s own, and `e` is not shared yet.
        unsafe { *e.0.as_ptr() |= RECALLED };
        e
    }

    /// The same entry with its value moved to PMem at `addr` (the caller copied it there);
    /// metadata stays. A collection pointed to by `self` is dropped with `self`.
    pub fn in_pmem_at(&self, addr: *const u8, len: usize) -> Entry {
        Self::new_pmem(self.relay_bits(), self.key(), addr, len, &self.meta())
    }

    /// A deep copy under another key (COPY).
    pub fn copied(&self, key: &[u8], meta: &Meta) -> Entry {
        match self.value() {
            ValueRef::Str(v) => Self::build(Kind::Str, key, v, meta),
            ValueRef::Encoded(v) => Self::new_encoded_str(key, v, meta),
            ValueRef::Coll(c) => Self::new_coll(key, c.deep_clone(), meta),
            // Lookups thaw frozen collections, so a command never copies one; a whole-keyspace
            // walk that does gets the thawed copy.
            ValueRef::Frozen(..) => crate::tier::thaw(self).expect("a frozen collection decodes (checked when frozen)").copied(key, meta),
        }
    }

    /// The same string stored compressed (`stored` = header + payload) or plain, keeping key
    /// and every piece of metadata (compression is not a write: versions and stamps stay).
    pub fn restored_as(&self, stored: &[u8], encoded: bool) -> Entry {
        let kind = if encoded { ENCODED_STR } else { Kind::Str as u8 };
        Self::build_bits(kind | (self.tag() & DIRTY), self.key(), stored, &self.meta())
    }

    /// Bytes this entry occupies on the heap, its collection included (a value in PMem
    /// counts only its reference).
    pub fn heap_size(&self) -> usize {
        self.total_size() + self.coll().map(|c| c.heap_size()).unwrap_or(0)
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let size = self.total_size();
        // SAFETY: the allocation was made with this layout; a collection pointer came from
        // `Box::into_raw` in `new_coll` and is dropped once, here; a PMem range is released once.
        unsafe {
            if let Some((addr, len)) = self.pmem() {
                crate::tier::arena::release(addr, len);
            } else if self.kind() != Kind::Str {
                let p = self.parsed();
                drop(Box::from_raw(self.coll_ptr(self.0.as_ptr().add(p.val_off))));
            }
            dealloc(self.0.as_ptr(), Self::layout(size));
        }
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry").field("key", &String::from_utf8_lossy(self.key())).field("kind", &self.kind()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::value::Collection;

    fn meta(expire: Option<i64>, flags: u32) -> Meta {
        Meta { expire, flags, version: 42, access: 0xABCDEF }
    }

    #[test]
    fn string_entry_roundtrip_and_metadata_changes() {
        let long = vec![7u8; 300];
        for val in [&b""[..], b"v", &long[..]] {
            let mut e = Entry::new_str(b"key", val, &meta(None, 99));
            assert_eq!(e.key(), b"key");
            assert_eq!(e.plain_str(), Some(val));
            assert_eq!(e.expire(), None);
            assert_eq!(e.version(), 42);
            assert_eq!(e.access(), 0xABCDEF);
            e.set_expire(Some(1234));
            assert_eq!(e.expire(), Some(1234));
            assert_eq!(e.key(), b"key");
            assert_eq!(e.plain_str(), Some(val));
            e.set_expire(Some(5));
            assert_eq!((e.expire(), e.flags()), (Some(5), 99));
            e.set_expire(None);
            assert_eq!((e.expire(), e.flags()), (None, 99));
            assert_eq!(e.plain_str(), Some(val));
            e.set_version(MAX_VERSION + 5);
            assert_eq!(e.version(), 4);
        }
    }

    #[test]
    fn collection_survives_rebuilds_and_drops_once() {
        let mut e = Entry::new_coll(b"l", Collection::List(Default::default()), &meta(None, 0));
        if let Some(Collection::List(l)) = e.coll_mut() {
            l.push_back(b"a".to_vec().into_boxed_slice());
        }
        e.set_expire(Some(10));
        e.set_expire(None);
        assert_eq!(e.kind(), Kind::List);
        match e.coll() {
            Some(Collection::List(l)) => assert_eq!(&*l[0], b"a"),
            _ => panic!("not a list"),
        }
    }

    #[test]
    fn compact_size_for_small_strings() {
        let e = Entry::new_str(&[b'k'; 16], &[b'v'; 100], &meta(None, 0));
        assert_eq!(e.total_size(), 10 + 1 + 1 + 16 + 100);
    }

    #[test]
    fn encoded_strings_keep_their_kind_and_metadata() {
        let m = meta(Some(99), 7);
        let e = Entry::new_encoded_str(b"k", &[0x41, 1, 2, 3], &m);
        assert_eq!(e.kind(), Kind::Str);
        assert!(e.is_encoded());
        assert_eq!(e.plain_str(), None);
        assert!(matches!(e.value(), ValueRef::Encoded(&[0x41, 1, 2, 3])));
        assert_eq!((e.expire(), e.flags(), e.version()), (Some(99), 7, 42));
        let moved = e.renamed(b"other");
        assert!(moved.is_encoded());
        let copy = moved.copied(b"copy", &m);
        assert!(copy.is_encoded());
        let plain = copy.restored_as(b"hello", false);
        assert!(!plain.is_encoded());
        assert_eq!(plain.plain_str(), Some(&b"hello"[..]));
        assert_eq!((plain.expire(), plain.flags(), plain.version(), plain.access()), (Some(99), 7, 42, 0xABCDEF));
        let mut p = plain;
        assert!(p.str_value_mut().is_some());
        let mut enc = p.restored_as(&[0x41, 9], true);
        assert!(enc.str_value_mut().is_none(), "compressed bytes are never edited in place");
    }
}
