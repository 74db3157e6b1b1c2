//! Key → slot → engine: the slot of a key (`terrace_commands::slots`, as Redis Cluster) and
//! the slot map that assigns slot ranges to engines.

use std::ops::RangeInclusive;

pub use terrace_commands::slots::{crc16, hash_tag, key_slot, SLOTS};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SlotMapError {
    #[error("slot range {0}-{1} is invalid (slots are 0-16383)")]
    BadRange(usize, usize),
    #[error("slot {0} is assigned twice")]
    Overlap(usize),
    #[error("slot {0} is not assigned to any engine")]
    Unassigned(usize),
    #[error("engine index {0} does not exist")]
    NoEngine(usize),
}

/// Which engine owns each slot.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotMap {
    owner: Vec<u16>,
    engines: usize,
}

impl SlotMap {
    /// Slots split into `engines` contiguous, near-equal ranges (engine 0 gets 0..8191 of two).
    pub fn even(engines: usize) -> SlotMap {
        assert!(engines > 0);
        let owner = (0..SLOTS).map(|s| (s * engines / SLOTS) as u16).collect();
        SlotMap { owner, engines }
    }

    /// Explicit ranges per engine; every slot must be assigned exactly once.
    pub fn from_ranges(engines: usize, ranges: &[(usize, RangeInclusive<usize>)]) -> Result<SlotMap, SlotMapError> {
        let mut owner = vec![u16::MAX; SLOTS];
        for (engine, r) in ranges {
            if *engine >= engines {
                return Err(SlotMapError::NoEngine(*engine));
            }
            if r.start() > r.end() || *r.end() >= SLOTS {
                return Err(SlotMapError::BadRange(*r.start(), *r.end()));
            }
            for s in r.clone() {
                if owner[s] != u16::MAX {
                    return Err(SlotMapError::Overlap(s));
                }
                owner[s] = *engine as u16;
            }
        }
        if let Some(s) = owner.iter().position(|&o| o == u16::MAX) {
            return Err(SlotMapError::Unassigned(s));
        }
        Ok(SlotMap { owner, engines })
    }

    pub fn engines(&self) -> usize {
        self.engines
    }

    pub fn engine_of_slot(&self, slot: u16) -> usize {
        self.owner[slot as usize] as usize
    }

    pub fn engine_of_key(&self, key: &[u8]) -> usize {
        self.engine_of_slot(key_slot(key))
    }

    /// The ranges each engine owns, as (engine, first, last), in slot order.
    pub fn ranges(&self) -> Vec<(usize, usize, usize)> {
        let mut out: Vec<(usize, usize, usize)> = Vec::new();
        for (s, &o) in self.owner.iter().enumerate() {
            match out.last_mut() {
                Some(last) if last.0 == o as usize && last.2 + 1 == s => last.2 = s,
                _ => out.push((o as usize, s, s)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_map_and_ranges() {
        let m = SlotMap::even(2);
        assert_eq!(m.ranges(), vec![(0, 0, 8191), (1, 8192, 16383)]);
        assert_eq!(m.engine_of_key(b"foo"), 1);
        assert_eq!(m.engine_of_key(b"bar"), 0);
    }

    #[test]
    fn explicit_ranges_are_checked() {
        assert_eq!(SlotMap::from_ranges(2, &[(0, 0..=100)]).unwrap_err(), SlotMapError::Unassigned(101));
        assert_eq!(SlotMap::from_ranges(2, &[(0, 0..=16383), (1, 5..=5)]).unwrap_err(), SlotMapError::Overlap(5));
        assert_eq!(SlotMap::from_ranges(1, &[(1, 0..=16383)]).unwrap_err(), SlotMapError::NoEngine(1));
        let m = SlotMap::from_ranges(2, &[(1, 0..=99), (0, 100..=16383)]).unwrap();
        assert_eq!(m.ranges(), vec![(1, 0, 99), (0, 100, 16383)]);
    }
}
