//! Access stamps: Redis's 24-bit LRU clock or LFU (16-bit minutes + 8-bit log counter).
//!
//! The same 24 bits serve eviction, OBJECT IDLETIME/FREQ and, later, tier placement.

const LRU_MASK: u32 = (1 << 24) - 1;
pub const LFU_INIT: u8 = 5;
const LFU_LOG_FACTOR: f64 = 10.0;
/// Minutes after which an LFU counter is halved/decremented (lfu-decay-time).
const LFU_DECAY_MINUTES: u32 = 1;

/// The LRU clock at `now_ms` (seconds, 24 bits).
pub fn lru_clock(now_ms: i64) -> u32 {
    ((now_ms / 1000) as u32) & LRU_MASK
}

/// Seconds since the stamp was set.
pub fn idle_seconds(stamp: u32, now_ms: i64) -> u64 {
    let now = lru_clock(now_ms);
    (if now >= stamp { now - stamp } else { LRU_MASK - stamp + now }) as u64
}

fn minutes(now_ms: i64) -> u32 {
    ((now_ms / 60_000) as u32) & 0xFFFF
}

/// A new LFU stamp with the initial counter.
pub fn lfu_new(now_ms: i64) -> u32 {
    (minutes(now_ms) << 8) | LFU_INIT as u32
}

/// The counter after applying decay for the minutes elapsed.
pub fn lfu_decayed(stamp: u32, now_ms: i64) -> u8 {
    let last = stamp >> 8;
    let counter = (stamp & 0xFF) as u8;
    let now = minutes(now_ms);
    let elapsed = if now >= last { now - last } else { 0xFFFF - last + now };
    let periods = elapsed / LFU_DECAY_MINUTES;
    counter.saturating_sub(periods.min(255) as u8)
}

/// The stamp after one access: decay, then a logarithmic increment.
pub fn lfu_touch(stamp: u32, now_ms: i64) -> u32 {
    let mut c = lfu_decayed(stamp, now_ms);
    if c < 255 {
        let base = c.saturating_sub(LFU_INIT) as f64;
        let p = 1.0 / (base * LFU_LOG_FACTOR + 1.0);
        if fastrand::f64() < p {
            c += 1;
        }
    }
    (minutes(now_ms) << 8) | c as u32
}

/// A stamp for a fresh entry under the current policy.
pub fn new_stamp(lfu: bool, now_ms: i64) -> u32 {
    if lfu {
        lfu_new(now_ms)
    } else {
        lru_clock(now_ms)
    }
}

/// Seconds since the last access under either policy (LFU stamps keep minutes).
pub fn idle_secs(stamp: u32, lfu: bool, now_ms: i64) -> u64 {
    if lfu {
        let last = stamp >> 8;
        let now = minutes(now_ms);
        (if now >= last { now - last } else { 0xFFFF - last + now }) as u64 * 60
    } else {
        idle_seconds(stamp, now_ms)
    }
}

/// How cold a stamp is (higher: colder) — what eviction and demotion pick victims by: LRU
/// idle seconds, or 255 minus the decayed LFU counter.
pub fn coldness(stamp: u32, lfu: bool, now_ms: i64) -> u64 {
    if lfu {
        255 - lfu_decayed(stamp, now_ms) as u64
    } else {
        idle_seconds(stamp, now_ms)
    }
}

/// The stamp after an access under the current policy.
pub fn touched(stamp: u32, lfu: bool, now_ms: i64) -> u32 {
    if lfu {
        lfu_touch(stamp, now_ms)
    } else {
        lru_clock(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_idle_time() {
        let t = 1_700_000_000_000;
        let s = lru_clock(t);
        assert_eq!(idle_seconds(s, t + 5_500), 5);
    }

    #[test]
    fn lfu_grows_with_hits_and_decays() {
        let t = 1_700_000_000_000;
        let mut s = lfu_new(t);
        for _ in 0..1000 {
            s = lfu_touch(s, t);
        }
        let c = lfu_decayed(s, t);
        assert!(c > LFU_INIT + 3, "counter {c}");
        assert_eq!(lfu_decayed(s, t + 3 * 60_000), c - 3);
    }
}
