//! The tiered model: a cache tier in front of a storage tier, sized by the cache ratio CR
//! (share of the data kept in the cache), with the miss ratio MR = f(CR) read off the
//! tenant's miss-ratio curve (TierBase §2.3, DESIGN §4):
//!
//! `C(CR) = max(PC_cache + PC_miss·MR, SC_cache·CR) + max(PC_storage·MR, SC_storage)`
//!
//! where PC_cache serves every request at the cache tier, PC_miss is the cache tier's extra
//! work per miss (the read-through), SC_cache holds all data in the cache, PC_storage serves
//! every request at the storage tier and SC_storage holds all data there. The optimum is
//! found exactly: MR is piecewise linear between the curve's points, so on each piece C is
//! the sum of two maxima of linear functions (convex), whose minimum lies at the piece's ends
//! or where the lines of a maximum cross.

use serde::Serialize;

/// The model's five inputs, each a cost (same unit as `Evaluation::c`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tiered {
    pub pc_cache: f64,
    pub pc_miss: f64,
    pub sc_cache: f64,
    pub pc_storage: f64,
    pub sc_storage: f64,
}

/// A miss-ratio curve: (cache ratio, miss ratio) points, cache ratios ascending in [0, 1].
/// Between points the miss ratio is interpolated linearly; below the first point it rises
/// linearly to 1 at CR = 0, above the last it stays flat.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Curve {
    points: Vec<(f64, f64)>,
}

impl Curve {
    /// Sorts, clamps into [0, 1], makes the miss ratio non-increasing (a larger LRU cache
    /// never misses more) and anchors CR = 0 at MR = 1.
    pub fn new(mut points: Vec<(f64, f64)>) -> Curve {
        points.retain(|(c, m)| c.is_finite() && m.is_finite());
        for p in &mut points {
            p.0 = p.0.clamp(0.0, 1.0);
            p.1 = p.1.clamp(0.0, 1.0);
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points.dedup_by(|b, a| a.0 == b.0);
        if points.first().is_none_or(|p| p.0 > 0.0) {
            points.insert(0, (0.0, 1.0));
        } else {
            points[0].1 = 1.0;
        }
        for i in 1..points.len() {
            points[i].1 = points[i].1.min(points[i - 1].1);
        }
        if points.last().is_some_and(|p| p.0 < 1.0) {
            let last = points.last().unwrap().1;
            points.push((1.0, last));
        }
        Curve { points }
    }

    /// The curve of a cache that has run long enough to have seen every key: a measured curve
    /// counts each key's first reference in its window as a miss even with the whole data set
    /// cached; here the miss ratio with all data cached is 0 and the rest scaled to match
    /// (`(MR − MR(1)) / (1 − MR(1))`).
    pub fn steady_state(&self) -> Curve {
        let floor = self.points.last().map_or(0.0, |p| p.1);
        if floor <= 0.0 || floor >= 1.0 {
            return self.clone();
        }
        Curve::new(self.points.iter().map(|&(c, m)| (c, ((m - floor) / (1.0 - floor)).max(0.0))).collect())
    }

    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    pub fn miss_ratio(&self, cr: f64) -> f64 {
        let cr = cr.clamp(0.0, 1.0);
        let i = self.points.partition_point(|p| p.0 < cr);
        if i == 0 {
            return self.points[0].1;
        }
        if i == self.points.len() {
            return self.points[i - 1].1;
        }
        let (a, b) = (self.points[i - 1], self.points[i]);
        if b.0 == a.0 {
            b.1
        } else {
            a.1 + (b.1 - a.1) * (cr - a.0) / (b.0 - a.0)
        }
    }
}

/// The cost at one cache ratio, with its parts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TieredCost {
    pub cache_ratio: f64,
    pub miss_ratio: f64,
    pub cache_tier: f64,
    pub storage_tier: f64,
    pub total: f64,
}

impl Tiered {
    pub fn cost_at(&self, curve: &Curve, cr: f64) -> TieredCost {
        let mr = curve.miss_ratio(cr);
        let cache_tier = (self.pc_cache + self.pc_miss * mr).max(self.sc_cache * cr);
        let storage_tier = (self.pc_storage * mr).max(self.sc_storage);
        TieredCost { cache_ratio: cr, miss_ratio: mr, cache_tier, storage_tier, total: cache_tier + storage_tier }
    }

    /// The cache ratio of least total cost (the smallest such ratio on ties).
    pub fn optimum(&self, curve: &Curve) -> TieredCost {
        let mut best = self.cost_at(curve, 0.0);
        let pts = curve.points();
        for seg in pts.windows(2) {
            let ((a, ma), (b, mb)) = (seg[0], seg[1]);
            if b <= a {
                continue;
            }
            let slope = (mb - ma) / (b - a);
            // Lines in cr on this piece: L1 = pc_cache + pc_miss·MR, L2 = sc_cache·cr,
            // R1 = pc_storage·MR, R2 = sc_storage.
            let mut candidates = vec![a, b];
            // L1 = L2: pc_cache + pc_miss·(ma + slope·(cr − a)) = sc_cache·cr
            let denom = self.sc_cache - self.pc_miss * slope;
            if denom.abs() > f64::EPSILON {
                candidates.push((self.pc_cache + self.pc_miss * (ma - slope * a)) / denom);
            }
            // R1 = R2: pc_storage·(ma + slope·(cr − a)) = sc_storage
            if (self.pc_storage * slope).abs() > f64::EPSILON {
                candidates.push(a + (self.sc_storage / self.pc_storage - ma) / slope);
            }
            for cr in candidates {
                if cr.is_finite() && cr >= a && cr <= b {
                    let c = self.cost_at(curve, cr);
                    if c.total < best.total - 1e-12 * best.total.abs().max(1.0) {
                        best = c;
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn curves_are_anchored_and_monotone() {
        let c = Curve::new(vec![(0.5, 0.2), (0.25, 0.1), (0.75, 0.3)]);
        assert_eq!(c.points(), &[(0.0, 1.0), (0.25, 0.1), (0.5, 0.1), (0.75, 0.1), (1.0, 0.1)]);
        assert!((c.miss_ratio(0.125) - 0.55).abs() < 1e-12);
        assert_eq!(c.miss_ratio(2.0), 0.1);
    }

    #[test]
    fn the_steady_state_drops_first_references() {
        let c = Curve::new(vec![(0.5, 0.6), (1.0, 0.2)]).steady_state();
        assert_eq!(c.miss_ratio(1.0), 0.0);
        assert!((c.miss_ratio(0.5) - 0.5).abs() < 1e-12);
        assert_eq!(c.miss_ratio(0.0), 1.0);
    }

    #[test]
    fn a_skewed_curve_wants_a_small_cache_and_costs_less_than_a_uniform_one() {
        let skewed = Curve::new(
            (1..=20)
                .map(|i| {
                    let cr = i as f64 / 20.0;
                    (cr, 0.02 / cr.max(0.02))
                })
                .collect(),
        );
        // Storage much cheaper per GB, cache much cheaper per operation.
        let t = Tiered { pc_cache: 1.0, pc_miss: 0.5, sc_cache: 20.0, pc_storage: 5.0, sc_storage: 0.4 };
        let opt = t.optimum(&skewed);
        assert!(opt.cache_ratio > 0.0 && opt.cache_ratio < 0.3, "{opt:?}");
        assert!(opt.total < t.cost_at(&skewed, 1.0).total && opt.total < t.cost_at(&skewed, 0.0).total);
        // Without skew (MR = 1 − CR) the same prices cost more at any cache ratio.
        let uniform = Curve::new(vec![(1.0, 0.0)]);
        let u = t.optimum(&uniform);
        assert!(u.total > opt.total, "{u:?} vs {opt:?}");
    }

    fn arb_curve() -> impl Strategy<Value = Curve> {
        prop::collection::vec((0.0f64..1.0, 0.0f64..1.0), 1..25).prop_map(Curve::new)
    }

    proptest! {
        /// The exact optimum is never beaten by a fine grid over the cache ratio.
        #[test]
        fn the_optimum_beats_a_grid(curve in arb_curve(), pc_cache in 0.0f64..10.0, pc_miss in 0.0f64..10.0, sc_cache in 0.0f64..50.0, pc_storage in 0.0f64..100.0, sc_storage in 0.0f64..5.0) {
            let t = Tiered { pc_cache, pc_miss, sc_cache, pc_storage, sc_storage };
            let opt = t.optimum(&curve);
            let grid = (0..=4000).map(|i| t.cost_at(&curve, i as f64 / 4000.0).total).fold(f64::INFINITY, f64::min);
            prop_assert!(opt.total <= grid + 1e-9 * grid.max(1.0), "optimum {:?} > grid {}", opt, grid);
        }

        /// At an interior optimum of a convex curve one of the maxima is balanced (its two
        /// sides meet) or the curve bends there.
        #[test]
        fn interior_optima_sit_on_a_balance_or_a_bend(pc_cache in 0.1f64..10.0, pc_miss in 0.0f64..10.0, sc_cache in 0.1f64..50.0, pc_storage in 0.1f64..100.0, sc_storage in 0.01f64..5.0, alpha in 0.3f64..3.0) {
            let curve = Curve::new((1..=40).map(|i| { let cr = i as f64 / 40.0; (cr, (1.0 - cr).powf(alpha)) }).collect());
            let t = Tiered { pc_cache, pc_miss, sc_cache, pc_storage, sc_storage };
            let opt = t.optimum(&curve);
            if opt.cache_ratio > 0.0 && opt.cache_ratio < 1.0 {
                let on_point = curve.points().iter().any(|p| (p.0 - opt.cache_ratio).abs() < 1e-9);
                let l = (pc_cache + pc_miss * opt.miss_ratio - sc_cache * opt.cache_ratio).abs() < 1e-6 * (pc_cache + sc_cache);
                let r = (pc_storage * opt.miss_ratio - sc_storage).abs() < 1e-6 * (pc_storage + sc_storage);
                prop_assert!(on_point || l || r, "{:?}", opt);
            }
        }
    }
}
