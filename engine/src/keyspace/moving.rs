//! Slots this engine is moving to another (`TERRACE.MIGRATE`): while their keys are copied,
//! shards note every key of those slots that changes (`Shard::touch`, as the tracking switch
//! does for CLIENT TRACKING), so the copy can catch up; once the engine hands the slots
//! over, they are sealed — commands on their keys are refused under the shard locks, so
//! nothing changes them after the last catch-up.
//!
//! Both are off (one relaxed load per change or command) unless a migration runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use terrace_commands::slots::{key_slot, SlotSet, SLOTS};

/// A slot bitmap readable without a lock, behind an on/off switch.
struct Bitmap {
    on: AtomicBool,
    bits: Box<[AtomicU64]>,
}

impl Bitmap {
    fn new() -> Bitmap {
        Bitmap { on: AtomicBool::new(false), bits: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect() }
    }

    fn word(slots: &SlotSet, i: usize) -> u64 {
        (0..64).filter(|b| slots.contains((i * 64 + b) as u16)).fold(0u64, |acc, b| acc | 1 << b)
    }

    fn set(&self, slots: Option<&SlotSet>) {
        for (i, w) in self.bits.iter().enumerate() {
            w.store(slots.map_or(0, |s| Self::word(s, i)), Ordering::SeqCst);
        }
        self.on.store(slots.is_some_and(|s| !s.is_empty()), Ordering::SeqCst);
    }

    fn add(&self, slots: &SlotSet) {
        for (i, w) in self.bits.iter().enumerate() {
            w.fetch_or(Self::word(slots, i), Ordering::SeqCst);
        }
        self.on.store(self.bits.iter().any(|w| w.load(Ordering::SeqCst) != 0), Ordering::SeqCst);
    }

    fn remove(&self, slots: &SlotSet) {
        for (i, w) in self.bits.iter().enumerate() {
            w.fetch_and(!Self::word(slots, i), Ordering::SeqCst);
        }
        self.on.store(self.bits.iter().any(|w| w.load(Ordering::SeqCst) != 0), Ordering::SeqCst);
    }

    fn slots(&self) -> SlotSet {
        let mut out = SlotSet::default();
        for s in 0..SLOTS as u16 {
            if self.holds(s) {
                out.insert(s);
            }
        }
        out
    }

    #[inline]
    fn holds(&self, slot: u16) -> bool {
        self.bits[slot as usize / 64].load(Ordering::SeqCst) & (1 << (slot % 64)) != 0
    }

    #[inline]
    fn any(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }
}

/// The slots being moved away (noted) and those handed over (sealed).
pub struct Moving {
    noted: Bitmap,
    sealed: Bitmap,
}

impl Default for Moving {
    fn default() -> Self {
        Moving { noted: Bitmap::new(), sealed: Bitmap::new() }
    }
}

impl Moving {
    /// Starts (Some) or stops (None) noting changes to the keys of `slots`.
    pub fn note(&self, slots: Option<&SlotSet>) {
        self.noted.set(slots);
    }

    /// Refuses commands on the keys of `slots` from now on (with the slots sealed before):
    /// this engine gave them away.
    pub fn seal(&self, slots: &SlotSet) {
        self.sealed.add(slots);
    }

    /// Admits commands on the keys of `slots` again (a move away undone, or the slots
    /// coming back).
    pub fn unseal(&self, slots: &SlotSet) {
        self.sealed.remove(slots);
    }

    /// The slots sealed now.
    pub fn sealed_slots(&self) -> SlotSet {
        self.sealed.slots()
    }

    /// Whether some slot's changes are noted.
    #[inline]
    pub fn noting(&self) -> bool {
        self.noted.any()
    }

    /// Whether a change to `key` is to be noted.
    #[inline]
    pub fn notes(&self, key: &[u8]) -> bool {
        self.noted.any() && self.noted.holds(key_slot(key))
    }

    /// Whether some slot is sealed.
    #[inline]
    pub fn sealing(&self) -> bool {
        self.sealed.any()
    }

    /// The slot of `key` if it is sealed.
    pub fn sealed(&self, key: &[u8]) -> Option<u16> {
        if !self.sealed.any() {
            return None;
        }
        let slot = key_slot(key);
        self.sealed.holds(slot).then_some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_and_seals_only_the_slots_given() {
        let m = Moving::default();
        assert!(!m.notes(b"foo") && m.sealed(b"foo").is_none());
        let set = SlotSet::parse("12182").unwrap(); // foo's slot
        m.note(Some(&set));
        assert!(m.notes(b"foo") && !m.notes(b"bar"));
        m.seal(&set);
        m.seal(&SlotSet::parse("1").unwrap());
        assert_eq!(m.sealed(b"foo"), Some(12182));
        assert_eq!(m.sealed(b"bar"), None);
        assert_eq!(m.sealed_slots().to_string(), "1 12182");
        m.note(None);
        m.unseal(&SlotSet::parse("0-16383").unwrap());
        assert!(!m.noting() && !m.sealing() && !m.notes(b"foo"));
    }
}
