//! An online miss-ratio curve for LRU, estimated by spatial sampling with a fixed sample size
//! (SHARDS: Waldspurger et al., FAST 2015). A key is sampled when its hash falls under a
//! threshold; for sampled keys the reuse distance (distinct sampled keys referenced since the
//! key's previous reference) is measured exactly with a Fenwick tree over reference times, and
//! scaled by 1/R, R being the sampling rate. When more than `max_samples` keys are sampled the
//! threshold drops to exclude the keys of largest hash, and the histogram is rescaled by
//! R_new/R_old, so memory stays bounded whatever the key count. The same samples give the
//! access interval (time between two references to a key).
//!
//! Written here rather than taken from a crate: no maintained Rust crate does SHARDS.

use std::collections::BinaryHeap;

use hashbrown::HashMap;

/// Spatial values are 24 bits of the key's hash.
const SPACE: u64 = 1 << 24;
/// Distances below this get a bucket each; above, 32 buckets per doubling (2.2% wide).
const LINEAR: usize = 64;
const PER_DOUBLING: f64 = 32.0;
const BUCKETS: usize = LINEAR + 40 * PER_DOUBLING as usize;
/// Access-interval buckets: 4 per doubling of milliseconds, up to 2^40 ms.
const INTERVAL_BUCKETS: usize = 4 * 40 + 1;
/// Reference-time slots in the Fenwick tree per sampled key: the clock runs through them
/// before the live ones are renumbered (`compact`, an O(n) rebuild). 16 makes the tree of
/// 8,192 samples 512 KiB + 4 bytes, just above mimalloc's large-object limit (512 KiB), so it
/// gets pages of its own: at 4 (128 KiB) it shared a 4 MiB page with the keyspace's growing
/// hash tables and kept that page resident after they had moved on — measured as +3 MB of
/// RSS after loading 1,000,000 keys (BENCHMARKS, "Memory").
const SLOTS_PER_SAMPLE: usize = 16;
/// The Fenwick tree's first size, in slots, until the sample outgrows it (`compact`): most
/// tenants of a thousand are small.
const FIRST_TREE: usize = 1024;
/// Sampled references after which every count is halved (older traffic fades).
const AGE_EVERY: u64 = 1 << 21;

struct Sampled {
    slot: u32,
    last_ms: u64,
}

pub struct Mrc {
    max_samples: usize,
    /// Sample a key iff its spatial value is below this.
    threshold: u64,
    keys: HashMap<u64, Sampled, foldhash::fast::FixedState>,
    /// (spatial value, hash) of sampled keys, largest first.
    heap: BinaryHeap<(u64, u64)>,
    /// Fenwick tree over reference times: 1 at each sampled key's latest reference.
    tree: Vec<i32>,
    clock: usize,
    /// Scaled reference counts by scaled reuse distance; cold (first) references apart.
    hist: Vec<f64>,
    cold: f64,
    total: f64,
    /// Every reference to the tenant's keys, sampled or not (aged like the rest), and the
    /// caller's counter when last read.
    actual: f64,
    actual_seen: u64,
    since_aging: u64,
    interval_hist: Vec<f64>,
    interval_sum_ms: f64,
    interval_count: f64,
}

/// The spatial value of a key hash.
#[inline]
pub fn spatial(hash: u64) -> u64 {
    (hash >> 8) & (SPACE - 1)
}

/// The threshold on spatial values that samples a share `rate` of keys.
pub fn threshold_for(rate: f64) -> u64 {
    (rate.clamp(0.0, 1.0) * SPACE as f64).round() as u64
}

fn bucket_of(distance: f64) -> usize {
    if distance < LINEAR as f64 {
        distance as usize
    } else {
        (LINEAR + ((distance / LINEAR as f64).log2() * PER_DOUBLING) as usize).min(BUCKETS - 1)
    }
}

fn bucket_bounds(i: usize) -> (f64, f64) {
    if i < LINEAR {
        (i as f64, i as f64 + 1.0)
    } else {
        let at = |j: usize| LINEAR as f64 * ((j - LINEAR) as f64 / PER_DOUBLING).exp2();
        (at(i), at(i + 1))
    }
}

fn interval_bucket(ms: u64) -> usize {
    if ms == 0 {
        0
    } else {
        (1 + ((ms as f64).log2() * 4.0) as usize).min(INTERVAL_BUCKETS - 1)
    }
}

fn interval_upper_ms(i: usize) -> f64 {
    if i == 0 {
        1.0
    } else {
        (i as f64 / 4.0).exp2()
    }
}

impl Mrc {
    /// Samples at most `max_samples` keys (at least 64), starting at rate 1.
    pub fn new(max_samples: usize) -> Mrc {
        let max_samples = max_samples.max(64);
        Mrc {
            max_samples,
            threshold: SPACE,
            // Allocated at the first sampled reference: most namespaces are never used.
            keys: HashMap::default(),
            heap: BinaryHeap::new(),
            tree: Vec::new(),
            clock: 0,
            // (Allocated with `tree`, at the first sampled reference.)
            hist: Vec::new(),
            cold: 0.0,
            total: 0.0,
            actual: 0.0,
            actual_seen: 0,
            since_aging: 0,
            interval_hist: Vec::new(),
            interval_sum_ms: 0.0,
            interval_count: 0.0,
        }
    }

    /// The sampling threshold (compare with `spatial(hash)` before taking any lock).
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// The sampling rate R.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / SPACE as f64
    }

    pub fn sampled_keys(&self) -> usize {
        self.keys.len()
    }

    /// Estimated distinct keys referenced (sampled keys / R).
    pub fn distinct_keys(&self) -> f64 {
        self.keys.len() as f64 / self.rate()
    }

    fn tree_add(&mut self, slot: usize, delta: i32) {
        let mut i = slot + 1;
        while i < self.tree.len() {
            self.tree[i] += delta;
            i += i & i.wrapping_neg();
        }
    }

    /// Set slots in 0..end.
    fn tree_prefix(&self, end: usize) -> i64 {
        let mut i = end;
        let mut s = 0i64;
        while i > 0 {
            s += self.tree[i] as i64;
            i &= i - 1;
        }
        s
    }

    /// Renumbers the live slots 0..n in time order when the clock reaches the tree's end.
    fn compact(&mut self) {
        let mut live: Vec<(u32, u64)> = self.keys.iter().map(|(h, s)| (s.slot, *h)).collect();
        live.sort_unstable();
        // A tenant whose sample outgrew the first tree gets the whole one, and room for the
        // whole sample, at once (one large allocation each: see SLOTS_PER_SAMPLE).
        let full = SLOTS_PER_SAMPLE * self.max_samples + 1;
        if live.len() * SLOTS_PER_SAMPLE * 2 > self.tree.len() && self.tree.len() < full {
            self.tree = vec![0; full];
            self.keys.reserve((self.max_samples + 1).saturating_sub(self.keys.len()));
        }
        self.tree.iter_mut().for_each(|t| *t = 0);
        for (i, (_, h)) in live.iter().enumerate() {
            self.keys.get_mut(h).unwrap().slot = i as u32;
        }
        // Build the tree in O(n): every live slot holds 1.
        let n = self.tree.len();
        for i in 1..n {
            if i - 1 < live.len() {
                self.tree[i] += 1;
            }
            let parent = i + (i & i.wrapping_neg());
            if parent < n {
                self.tree[parent] += self.tree[i];
            }
        }
        self.clock = live.len();
    }

    fn scale(&mut self, by: f64) {
        self.hist.iter_mut().for_each(|c| *c *= by);
        self.cold *= by;
        self.total *= by;
        self.actual *= by;
    }

    /// Brings in the caller's count of all references (sampled or not) so far.
    pub fn count_all(&mut self, so_far: u64) {
        self.actual += so_far.saturating_sub(self.actual_seen) as f64;
        self.actual_seen = so_far.max(self.actual_seen);
    }

    /// Drops the keys of largest spatial value until at most `max_samples` remain, lowering
    /// the threshold below them. Counts already recorded keep their weight (1/R at the time):
    /// they are estimates of the whole traffic, as the new ones are.
    fn shrink(&mut self) {
        while self.keys.len() > self.max_samples {
            let Some(&(v, _)) = self.heap.peek() else { break };
            while let Some(&(w, h)) = self.heap.peek() {
                if w != v {
                    break;
                }
                self.heap.pop();
                if let Some(s) = self.keys.remove(&h) {
                    self.tree_add(s.slot as usize, -1);
                }
            }
            self.threshold = v;
        }
    }

    /// Notes a reference to the key of `hash` at `now_ms`; `all_so_far` counts every
    /// reference to the tenant's keys up to this one (see `count_all`). Keys whose spatial
    /// value is not under the threshold are ignored.
    pub fn reference(&mut self, hash: u64, now_ms: u64, all_so_far: u64) {
        self.count_all(all_so_far);
        let v = spatial(hash);
        if v >= self.threshold {
            return;
        }
        if self.tree.is_empty() {
            self.tree = vec![0; FIRST_TREE.min(SLOTS_PER_SAMPLE * self.max_samples) + 1];
            self.hist = vec![0.0; BUCKETS];
            self.interval_hist = vec![0.0; INTERVAL_BUCKETS];
        } else if self.clock == self.tree.len() - 1 {
            self.compact();
        }
        let now = self.clock;
        self.clock += 1;
        let weight = 1.0 / self.rate();
        self.total += weight;
        match self.keys.get_mut(&hash) {
            Some(s) => {
                let prev = s.slot as usize;
                let gap = now_ms.saturating_sub(s.last_ms);
                s.slot = now as u32;
                s.last_ms = now_ms;
                let distance = (self.tree_prefix(now) - self.tree_prefix(prev + 1)) as f64;
                self.tree_add(prev, -1);
                self.hist[bucket_of(distance * weight)] += weight;
                self.interval_hist[interval_bucket(gap)] += 1.0;
                self.interval_sum_ms += gap as f64;
                self.interval_count += 1.0;
            }
            None => {
                self.keys.insert(hash, Sampled { slot: now as u32, last_ms: now_ms });
                self.heap.push((v, hash));
                self.cold += weight;
                if self.keys.len() > self.max_samples {
                    self.shrink();
                }
            }
        }
        self.tree_add(now, 1);
        self.since_aging += 1;
        if self.since_aging >= AGE_EVERY {
            self.since_aging = 0;
            self.scale(0.5);
            self.interval_hist.iter_mut().for_each(|c| *c *= 0.5);
            self.interval_sum_ms *= 0.5;
            self.interval_count *= 0.5;
        }
    }

    /// LRU miss ratio with room for `size` keys (1.0 before any reference).
    ///
    /// SHARDS_adj: under skew the sampled references over- or under-represent the traffic
    /// (a very hot key is sampled or not). When the count of all references is known the
    /// difference is put on the shortest distances — the hot keys that cause it — added to
    /// the first bucket, or taken from the first buckets up.
    pub fn miss_ratio(&self, size: f64) -> f64 {
        if self.total <= 0.0 {
            return 1.0;
        }
        let total = if self.actual > 0.0 { self.actual } else { self.total };
        let mut adjust = total - self.total;
        let mut hits = 0.0;
        for (i, &c) in self.hist.iter().enumerate() {
            let mut c = c;
            if adjust != 0.0 {
                let taken = if adjust > 0.0 { -adjust } else { (-adjust).min(c) };
                c -= taken;
                adjust += taken;
            }
            if c == 0.0 {
                continue;
            }
            let (lo, hi) = bucket_bounds(i);
            if hi <= size {
                hits += c;
            } else if lo < size {
                hits += c * (size - lo) / (hi - lo);
            }
        }
        (1.0 - hits / total).clamp(0.0, 1.0)
    }

    /// The curve at `points` cache sizes spread over 1/points … 1 of `keys` (the tenant's key
    /// count, or the distinct keys referenced when 0): (cache ratio, keys, miss ratio).
    pub fn curve(&self, keys: f64, points: usize) -> Vec<(f64, f64, f64)> {
        let keys = if keys > 0.0 { keys } else { self.distinct_keys() };
        (1..=points)
            .map(|i| {
                let cr = i as f64 / points as f64;
                (cr, cr * keys, self.miss_ratio(cr * keys))
            })
            .collect()
    }

    /// Mean time between two references to a key, in ms (None before any re-reference).
    pub fn mean_interval_ms(&self) -> Option<f64> {
        (self.interval_count > 0.0).then(|| self.interval_sum_ms / self.interval_count)
    }

    /// Median access interval (ms), from the histogram.
    pub fn median_interval_ms(&self) -> Option<f64> {
        if self.interval_count <= 0.0 {
            return None;
        }
        let half = self.interval_count / 2.0;
        let mut seen = 0.0;
        for (i, &c) in self.interval_hist.iter().enumerate() {
            seen += c;
            if seen >= half {
                return Some(interval_upper_ms(i));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(k: u64) -> u64 {
        use std::hash::BuildHasher;
        foldhash::fast::FixedState::with_seed(7).hash_one(k)
    }

    /// Exact LRU stack distances for every reference (an independent Fenwick over all
    /// reference times), → miss ratio at `size`.
    fn exact(trace: &[u64], sizes: &[f64]) -> Vec<f64> {
        let n = trace.len();
        let mut tree = vec![0i64; n + 1];
        let add = |tree: &mut Vec<i64>, i: usize, d: i64| {
            let mut i = i + 1;
            while i <= n {
                tree[i] += d;
                i += i & i.wrapping_neg();
            }
        };
        let sum = |tree: &Vec<i64>, mut i: usize| {
            let mut s = 0;
            while i > 0 {
                s += tree[i];
                i &= i - 1;
            }
            s
        };
        let mut last: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
        let mut distances = Vec::with_capacity(n);
        for (t, k) in trace.iter().enumerate() {
            match last.insert(*k, t) {
                Some(p) => {
                    distances.push((sum(&tree, t) - sum(&tree, p + 1)) as f64);
                    add(&mut tree, p, -1);
                }
                None => distances.push(f64::INFINITY),
            }
            add(&mut tree, t, 1);
        }
        sizes.iter().map(|s| distances.iter().filter(|d| **d >= *s).count() as f64 / n as f64).collect()
    }

    fn zipf_trace(keys: u64, n: usize, theta: f64, rng: &mut fastrand::Rng) -> Vec<u64> {
        // Inverse CDF over precomputed weights (exact Zipf), ranks scrambled over the keys.
        let w: Vec<f64> = (1..=keys).map(|r| 1.0 / (r as f64).powf(theta)).collect();
        let total: f64 = w.iter().sum();
        let mut cdf = Vec::with_capacity(w.len());
        let mut acc = 0.0;
        for x in w {
            acc += x / total;
            cdf.push(acc);
        }
        (0..n)
            .map(|_| {
                let u = rng.f64();
                let r = cdf.partition_point(|c| *c < u) as u64;
                r.wrapping_mul(0x9E37_79B9_7F4A_7C15) % (keys * 4)
            })
            .collect()
    }

    fn mae(trace: &[u64], max_samples: usize) -> (f64, f64) {
        let distinct = trace.iter().collect::<std::collections::HashSet<_>>().len() as f64;
        let sizes: Vec<f64> = (1..=20).map(|i| distinct * i as f64 / 20.0).collect();
        let want = exact(trace, &sizes);
        let mut m = Mrc::new(max_samples);
        for (t, k) in trace.iter().enumerate() {
            m.reference(hash(*k), t as u64, t as u64 + 1);
        }
        let got: Vec<f64> = sizes.iter().map(|s| m.miss_ratio(*s)).collect();
        let err = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).sum::<f64>() / sizes.len() as f64;
        (err, m.rate())
    }

    #[test]
    fn zipfian_traces_are_within_two_points_of_exact_lru() {
        let mut rng = fastrand::Rng::with_seed(11);
        for theta in [0.8, 0.99, 1.2] {
            let trace = zipf_trace(200_000, 1_000_000, theta, &mut rng);
            let (err, rate) = mae(&trace, 8192);
            eprintln!("zipf {theta}: mean absolute error {err:.4} at rate {rate:.4}");
            assert!(rate < 0.2, "the sample must have shrunk (rate {rate})");
            assert!(err <= 0.02, "zipf {theta}: mean absolute error {err:.4} at rate {rate:.4}");
        }
    }

    #[test]
    fn scan_mixed_traces_are_within_two_points_of_exact_lru() {
        let mut rng = fastrand::Rng::with_seed(12);
        let hot = zipf_trace(50_000, 1_000_000, 0.99, &mut rng);
        // A sequential scan over 150k other keys interleaved: 30% of references.
        let mut scan = 0u64;
        let trace: Vec<u64> = hot
            .into_iter()
            .map(|k| {
                if rng.f64() < 0.3 {
                    scan = (scan + 1) % 150_000;
                    1_000_000_000 + scan
                } else {
                    k
                }
            })
            .collect();
        let (err, rate) = mae(&trace, 8192);
        eprintln!("scan-mixed: mean absolute error {err:.4} at rate {rate:.4}");
        assert!(err <= 0.02, "scan-mixed: mean absolute error {err:.4} at rate {rate:.4}");
    }

    #[test]
    fn memory_stays_bounded_and_the_rate_falls() {
        let mut m = Mrc::new(1000);
        for i in 0..200_000u64 {
            m.reference(hash(i), i, i + 1);
        }
        assert!(m.sampled_keys() <= 1000);
        let est = m.distinct_keys();
        assert!((est / 200_000.0 - 1.0).abs() < 0.15, "distinct estimate {est}");
        // Every reference was a first reference (what the sample over-counts the adjustment
        // books as hits at distance 0, so not exactly 1).
        let mr = m.miss_ratio(1e9);
        assert!(mr > 0.85, "{mr}");
    }

    #[test]
    fn intervals() {
        let mut m = Mrc::new(1000);
        for round in 0..10u64 {
            for k in 0..100u64 {
                m.reference(hash(k), round * 1000 + k, round * 100 + k + 1);
            }
        }
        let mean = m.mean_interval_ms().unwrap();
        assert!((mean - 1000.0).abs() < 1e-9, "{mean}");
        let median = m.median_interval_ms().unwrap();
        assert!((900.0..=1300.0).contains(&median), "{median}");
        // A 100-key cycle: every reuse distance is 99, so LRU with 100 slots hits everything
        // after the first round (101: the end of the 2%-wide bucket holding 99) and with 98
        // nothing.
        let at_101 = m.miss_ratio(101.0);
        assert!((at_101 - 0.1).abs() < 1e-9, "{at_101}");
        assert!(m.miss_ratio(98.0) > 0.999);
    }
}
