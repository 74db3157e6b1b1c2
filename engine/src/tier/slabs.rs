//! Space bookkeeping of the PMem arena: slabs carved into size classes, as memcached does,
//! plus runs of whole slabs for values larger than a slab.
//!
//! Pure bookkeeping over offsets (no memory is touched here), so it is unit-tested alone.
//! A slab belongs to one class until its last slot is freed, then returns to the free pool
//! and can serve any class: free space is reused across sizes without moving live values.
//! Written by hand because allocators over a caller-owned byte range that report their own
//! fragmentation are not what general-purpose allocator crates offer.

/// Smallest slot: a value smaller than this still takes it.
pub const MIN_SLOT: usize = 32;
/// Each class's slot is about this factor larger than the previous one.
const GROWTH: f64 = 1.125;

#[derive(Debug, Clone)]
enum Slab {
    Free,
    Class {
        class: u16,
        used: u32,
        /// One bit per slot, set when allocated.
        bits: Box<[u64]>,
        /// Where the search for a clear bit starts.
        hint: u32,
    },
    /// First slab of a run of `slabs` whole slabs holding one large value.
    Large {
        slabs: u32,
    },
    /// A slab inside a large run.
    LargeTail,
}

/// Space statistics, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// The data region (every slab).
    pub capacity: u64,
    /// Slabs given to a class or a large value.
    pub assigned: u64,
    /// Slots (or large runs) in use.
    pub allocated: u64,
    /// Bytes of the values stored in them.
    pub values: u64,
    /// Live allocations.
    pub count: u64,
}

impl Usage {
    /// Share of assigned space not holding value bytes (slot rounding and free slots in
    /// partly used slabs): what the arena loses to fragmentation.
    pub fn fragmentation(&self) -> f64 {
        if self.assigned == 0 {
            0.0
        } else {
            1.0 - self.values as f64 / self.assigned as f64
        }
    }
}

#[derive(Debug)]
pub struct Slabs {
    slab_size: usize,
    /// Slot size per class, ascending; the last equals `slab_size`.
    classes: Vec<usize>,
    slabs: Vec<Slab>,
    /// Per class: slabs with at least one free slot.
    partial: Vec<Vec<u32>>,
    free_slabs: usize,
    /// Where the search for a free slab starts.
    free_hint: usize,
    usage: Usage,
}

impl Slabs {
    /// Bookkeeping for `n` slabs of `slab_size` bytes (a multiple of 64).
    pub fn new(n: usize, slab_size: usize) -> Slabs {
        let mut classes = Vec::new();
        let mut size = MIN_SLOT;
        while size < slab_size {
            classes.push(size);
            size = (((size as f64 * GROWTH) as usize).max(size + 8) + 7) & !7;
        }
        classes.push(slab_size);
        Slabs {
            slab_size,
            partial: vec![Vec::new(); classes.len()],
            classes,
            slabs: vec![Slab::Free; n],
            free_slabs: n,
            free_hint: 0,
            usage: Usage { capacity: (n * slab_size) as u64, ..Default::default() },
        }
    }

    pub fn slab_size(&self) -> usize {
        self.slab_size
    }

    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Bytes an allocation of `len` takes.
    #[cfg(test)]
    pub fn footprint(&self, len: usize) -> usize {
        match self.class_of(len) {
            Some(c) => self.classes[c],
            None => len.div_ceil(self.slab_size) * self.slab_size,
        }
    }

    fn class_of(&self, len: usize) -> Option<usize> {
        if len > self.slab_size {
            return None;
        }
        Some(self.classes.partition_point(|&s| s < len.max(1)))
    }

    /// Reserves space for `len` bytes; returns its offset in the data region, or None when
    /// no slot of its class and no free slab is left.
    pub fn alloc(&mut self, len: usize) -> Option<u64> {
        let (off, footprint) = match self.class_of(len) {
            Some(c) => {
                let c = self.class_with_room(c)?;
                (self.alloc_slot(c)?, self.classes[c])
            }
            None => {
                let count = len.div_ceil(self.slab_size);
                (self.alloc_large(count)?, count * self.slab_size)
            }
        };
        self.usage.allocated += footprint as u64;
        self.usage.values += len as u64;
        self.usage.count += 1;
        Some(off)
    }

    /// `class` if it has a free slot or a free slab is left; otherwise a larger class (up to
    /// twice the slot) with a free slot: when the arena is full, slabs that went to other
    /// sizes still serve, at the price of rounding.
    fn class_with_room(&self, class: usize) -> Option<usize> {
        if !self.partial[class].is_empty() || self.free_slabs > 0 {
            return Some(class);
        }
        let limit = self.classes[class] * 2;
        (class + 1..self.classes.len()).take_while(|&c| self.classes[c] <= limit).find(|&c| !self.partial[c].is_empty())
    }

    fn take_free_slab(&mut self) -> Option<usize> {
        if self.free_slabs == 0 {
            return None;
        }
        let n = self.slabs.len();
        for i in 0..n {
            let id = (self.free_hint + i) % n;
            if matches!(self.slabs[id], Slab::Free) {
                self.free_hint = id + 1;
                self.free_slabs -= 1;
                self.usage.assigned += self.slab_size as u64;
                return Some(id);
            }
        }
        None
    }

    fn alloc_slot(&mut self, class: usize) -> Option<u64> {
        let slot = self.classes[class];
        let per_slab = self.slab_size / slot;
        let id = match self.partial[class].last() {
            Some(&id) => id as usize,
            None => {
                let id = self.take_free_slab()?;
                self.slabs[id] = Slab::Class { class: class as u16, used: 0, bits: vec![0u64; per_slab.div_ceil(64)].into(), hint: 0 };
                self.partial[class].push(id as u32);
                id
            }
        };
        let Slab::Class { used, bits, hint, .. } = &mut self.slabs[id] else { unreachable!("partial lists hold class slabs") };
        let words = bits.len();
        let mut found = None;
        for k in 0..words {
            let w = (*hint as usize + k) % words;
            let free = !bits[w];
            if free != 0 {
                let bit = free.trailing_zeros() as usize;
                let index = w * 64 + bit;
                if index < per_slab {
                    bits[w] |= 1 << bit;
                    *hint = w as u32;
                    found = Some(index);
                    break;
                }
            }
        }
        let index = found.expect("a partial slab has a free slot");
        *used += 1;
        if *used as usize == per_slab {
            self.partial[class].pop();
        }
        Some((id * self.slab_size + index * slot) as u64)
    }

    fn alloc_large(&mut self, count: usize) -> Option<u64> {
        if count > self.free_slabs {
            return None;
        }
        let mut run = 0;
        for id in 0..self.slabs.len() {
            if matches!(self.slabs[id], Slab::Free) {
                run += 1;
                if run == count {
                    let first = id + 1 - count;
                    self.slabs[first] = Slab::Large { slabs: count as u32 };
                    for tail in &mut self.slabs[first + 1..=id] {
                        *tail = Slab::LargeTail;
                    }
                    self.free_slabs -= count;
                    self.usage.assigned += (count * self.slab_size) as u64;
                    return Some((first * self.slab_size) as u64);
                }
            } else {
                run = 0;
            }
        }
        None
    }

    /// Gives back the space of an allocation of `len` bytes at `off`. Panics on an offset
    /// that was not allocated with that length: the entry and the arena disagree, a bug.
    pub fn free(&mut self, off: u64, len: usize) {
        let off = off as usize;
        let id = off / self.slab_size;
        let footprint = match self.class_of(len) {
            Some(smallest) => {
                let Slab::Class { class: c, used, bits, .. } = &mut self.slabs[id] else {
                    panic!("freeing {len} bytes at {off}: slab {id} holds no size class");
                };
                // The slot may be of a larger class than the value needs (see `class_with_room`).
                let class = *c as usize;
                assert!(class >= smallest, "freeing {len} bytes at {off}: slab {id} holds smaller slots");
                let slot = self.classes[class];
                let per_slab = self.slab_size / slot;
                let index = (off % self.slab_size) / slot;
                assert_eq!(index * slot, off % self.slab_size, "freeing {len} bytes at {off}: not a slot start");
                let (w, b) = (index / 64, index % 64);
                assert!(bits[w] & (1 << b) != 0, "double free of {len} bytes at {off}");
                bits[w] &= !(1 << b);
                let was_full = *used as usize == per_slab;
                *used -= 1;
                if *used == 0 {
                    self.partial[class].retain(|&s| s as usize != id);
                    self.slabs[id] = Slab::Free;
                    self.free_slabs += 1;
                    self.usage.assigned -= self.slab_size as u64;
                } else if was_full {
                    self.partial[class].push(id as u32);
                }
                slot
            }
            None => {
                let count = len.div_ceil(self.slab_size);
                assert!(matches!(self.slabs[id], Slab::Large { slabs } if slabs as usize == count), "freeing {len} bytes at {off}: no large run there");
                for s in &mut self.slabs[id..id + count] {
                    *s = Slab::Free;
                }
                self.free_slabs += count;
                self.usage.assigned -= (count * self.slab_size) as u64;
                count * self.slab_size
            }
        };
        self.usage.allocated -= footprint as u64;
        self.usage.values -= len as u64;
        self.usage.count -= 1;
    }

    /// Marks an allocation made in an earlier run as live (warm restart). False if it
    /// overlaps what is already marked or does not fit the layout.
    pub fn claim(&mut self, off: u64, len: usize) -> bool {
        let off = off as usize;
        let id = off / self.slab_size;
        if off.checked_add(len).is_none_or(|end| end > self.slabs.len() * self.slab_size) {
            return false;
        }
        let footprint = match self.class_of(len) {
            Some(smallest) => {
                // An existing slab keeps its class (the value may sit in a larger slot).
                let class = match &self.slabs[id] {
                    Slab::Class { class, .. } if *class as usize >= smallest => *class as usize,
                    Slab::Free => smallest,
                    _ => return false,
                };
                let slot = self.classes[class];
                let per_slab = self.slab_size / slot;
                let index = (off % self.slab_size) / slot;
                if index * slot != off % self.slab_size || index >= per_slab {
                    return false;
                }
                if matches!(self.slabs[id], Slab::Free) {
                    self.slabs[id] = Slab::Class { class: class as u16, used: 0, bits: vec![0u64; per_slab.div_ceil(64)].into(), hint: 0 };
                    self.free_slabs -= 1;
                    self.usage.assigned += self.slab_size as u64;
                    self.partial[class].push(id as u32);
                }
                let Slab::Class { class: c, used, bits, .. } = &mut self.slabs[id] else { return false };
                let (w, b) = (index / 64, index % 64);
                if *c as usize != class || bits[w] & (1 << b) != 0 {
                    return false;
                }
                bits[w] |= 1 << b;
                *used += 1;
                if *used as usize == per_slab {
                    self.partial[class].retain(|&s| s as usize != id);
                }
                slot
            }
            None => {
                let count = len.div_ceil(self.slab_size);
                if !off.is_multiple_of(self.slab_size) || !self.slabs[id..id + count].iter().all(|s| matches!(s, Slab::Free)) {
                    return false;
                }
                self.slabs[id] = Slab::Large { slabs: count as u32 };
                for tail in &mut self.slabs[id + 1..id + count] {
                    *tail = Slab::LargeTail;
                }
                self.free_slabs -= count;
                self.usage.assigned += (count * self.slab_size) as u64;
                count * self.slab_size
            }
        };
        self.usage.allocated += footprint as u64;
        self.usage.values += len as u64;
        self.usage.count += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_with_bounded_rounding() {
        let s = Slabs::new(4, 64 << 10);
        for len in [0, 1, 31, 32, 33, 100, 256, 1000, 4096, 40_000, 64 << 10] {
            let f = s.footprint(len);
            assert!(f >= len.max(1));
            if len >= MIN_SLOT {
                assert!((f as f64) <= len as f64 * 1.13 + 8.0, "{len} rounds to {f}");
            }
        }
        assert_eq!(s.footprint((64 << 10) + 1), 128 << 10, "large values take whole slabs");
    }

    #[test]
    fn slots_are_disjoint_and_reused_after_free() {
        // Every class takes a slab of its own: room for the ~30 classes used here.
        let mut s = Slabs::new(64, 64 << 10);
        let mut spans: Vec<(u64, usize)> = Vec::new();
        for i in 0..500 {
            let len = 20 + (i * 37) % 900;
            let off = s.alloc(len).unwrap();
            spans.push((off, len));
        }
        let mut sorted: Vec<(u64, u64)> = spans.iter().map(|&(o, l)| (o, o + s.footprint(l) as u64)).collect();
        sorted.sort();
        for w in sorted.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap {w:?}");
        }
        let before = s.usage();
        for &(o, l) in &spans[..250] {
            s.free(o, l);
        }
        for &(_, l) in &spans[..250] {
            s.alloc(l).unwrap();
        }
        assert_eq!(s.usage().assigned, before.assigned, "freed slots are reused before new slabs");
    }

    #[test]
    fn empty_slabs_return_to_the_pool_for_other_classes() {
        let mut s = Slabs::new(2, 64 << 10);
        let small: Vec<u64> = (0..2 * 2048).map_while(|_| s.alloc(32)).collect();
        assert_eq!(small.len(), 2 * 2048, "both slabs hold 32-byte slots");
        assert_eq!(s.alloc(1000), None, "full");
        for &o in &small {
            s.free(o, 32);
        }
        assert_eq!(s.usage(), Usage { capacity: 128 << 10, ..Default::default() });
        assert!(s.alloc(100 << 10).is_some(), "a large run over both freed slabs");
    }

    #[test]
    fn claim_rebuilds_the_same_state_and_rejects_overlaps() {
        let mut a = Slabs::new(8, 64 << 10);
        let spans: Vec<(u64, usize)> = [40, 300, 300, 5000, 70_000, 40].iter().map(|&l| (a.alloc(l).unwrap(), l)).collect();
        let mut b = Slabs::new(8, 64 << 10);
        for &(o, l) in &spans {
            assert!(b.claim(o, l));
        }
        assert_eq!(a.usage(), b.usage());
        assert!(!b.claim(spans[1].0, 300), "already live");
        assert!(!b.claim(spans[1].0 + 1, 300), "not a slot start");
        assert!(!b.claim(u64::MAX - 10, 300), "outside");
        // Both hand out the same next slots.
        assert_eq!(a.alloc(300), b.alloc(300));
    }

    #[test]
    fn a_full_arena_serves_from_larger_slots_and_frees_them_right() {
        let slab = 64 << 10;
        let mut s = Slabs::new(2, slab);
        let x = s.alloc(48).unwrap();
        let mut small = Vec::new();
        while let Some(o) = s.alloc(40) {
            small.push(o);
        }
        let (per40, per48) = (slab / 40, slab / 48);
        assert_eq!(small.len(), per40 + per48 - 1, "40-byte values spill into the 48-byte slab's free slots");
        assert_eq!(s.usage().allocated as usize, per40 * 40 + per48 * 48);
        let mut r = Slabs::new(2, slab);
        assert!(r.claim(x, 48));
        for &o in &small {
            assert!(r.claim(o, 40), "a small value in a larger slot claims back");
        }
        assert_eq!(r.usage(), s.usage());
        for &o in &small {
            s.free(o, 40);
        }
        s.free(x, 48);
        assert_eq!(s.usage(), Usage { capacity: 2 * slab as u64, ..Default::default() });
    }

    #[test]
    fn fragmentation_counts_rounding_and_holes() {
        let mut s = Slabs::new(1, 64 << 10);
        let offs: Vec<u64> = (0..100).map(|_| s.alloc(256).unwrap()).collect();
        let f0 = s.usage().fragmentation();
        for o in &offs[..90] {
            s.free(*o, 256);
        }
        assert!(s.usage().fragmentation() > f0);
        assert!(s.usage().fragmentation() > 0.9);
    }
}
