//! A reservoir sample of written values (Vitter's algorithm R), drawn on the write path: a
//! relaxed counter per write, the lock only when a value is taken (probability k/n).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Reservoir {
    capacity: std::sync::atomic::AtomicUsize,
    /// Longest value kept (longer values are sampled by their prefix).
    max_value: usize,
    seen: AtomicU64,
    items: Mutex<Vec<Box<[u8]>>>,
}

impl Reservoir {
    pub fn new(capacity: usize, max_value: usize) -> Reservoir {
        Reservoir { capacity: capacity.into(), max_value, seen: AtomicU64::new(0), items: Mutex::new(Vec::new()) }
    }

    /// Offers one written value.
    pub fn offer(&self, value: &[u8]) {
        let capacity = self.capacity.load(Ordering::Relaxed);
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        let slot = if (n as usize) < capacity {
            None
        } else {
            let j = fastrand::u64(..=n) as usize;
            if j >= capacity {
                return;
            }
            Some(j)
        };
        let v: Box<[u8]> = value[..value.len().min(self.max_value)].into();
        let mut items = self.items.lock();
        match slot {
            Some(j) if j < items.len() => items[j] = v,
            _ if items.len() < capacity => items.push(v),
            _ => {}
        }
    }

    pub fn len(&self) -> usize {
        self.items.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the sample.
    pub fn snapshot(&self) -> Vec<Box<[u8]>> {
        self.items.lock().clone()
    }

    /// Starts over with room for `capacity` values.
    pub fn resize(&self, capacity: usize) {
        let mut items = self.items.lock();
        items.clear();
        items.shrink_to_fit();
        self.capacity.store(capacity, Ordering::Relaxed);
        self.seen.store(0, Ordering::Relaxed);
    }

    /// Starts over (after the data changed enough to retrain).
    pub fn clear(&self) {
        self.items.lock().clear();
        self.seen.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_capacity_values_drawn_from_the_whole_stream() {
        let r = Reservoir::new(100, 16);
        for i in 0..10_000u32 {
            r.offer(format!("{i:05}").as_bytes());
        }
        let s = r.snapshot();
        assert_eq!(s.len(), 100);
        assert_eq!(r.seen.load(Ordering::Relaxed), 10_000);
        let late = s.iter().filter(|v| std::str::from_utf8(v).unwrap().parse::<u32>().unwrap() >= 5000).count();
        assert!((25..=75).contains(&late), "{late} of 100 from the second half");
        r.offer(&[b'x'; 100]);
        r.clear();
        assert!(r.is_empty());
    }
}
