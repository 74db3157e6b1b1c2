//! The space–performance cost model for one configuration (TierBase §2, DESIGN §4).
//!
//! For a workload w on instance type i with configuration s:
//! `PC = Cost(i)·QPS/MaxPerf`, `SC = Cost(i)·DataSize/MaxSpace`, `C = max(PC, SC)`,
//! `CPQPS = Cost(i)/MaxPerf`, `CPGB = Cost(i)/MaxSpace`. The paper writes PC and SC with a
//! ceiling (whole instances); tenants of an appliance share instances, so comparisons use the
//! fractional form and `instances` gives the ceiling for provisioning one tenant alone.
//! Replication r multiplies the data kept and the writes applied; reads spread over copies.

use serde::Serialize;

use super::prices::GB;

/// What a tenant asks of its instances.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Workload {
    /// Operations per second.
    pub qps: f64,
    /// Share of operations that only read (0..=1).
    pub read_ratio: f64,
    /// Logical (uncompressed) bytes of data: keys, values and per-record metadata.
    pub data_bytes: f64,
    /// Average logical bytes per record.
    pub avg_record_bytes: f64,
}

/// What one instance of a configuration was measured (or estimated) to sustain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Capacity {
    /// MaxPerf: operations per second at saturation with p99 under the bound.
    pub max_perf: f64,
    /// MaxSpace: logical bytes of data one instance holds.
    pub max_space: f64,
}

/// Which side of the model sets a workload's cost under a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// PC > SC: the data would fit on fewer instances than the traffic needs.
    PerformanceCritical,
    /// SC > PC: the traffic would fit on fewer instances than the data needs.
    SpaceCritical,
    /// PC and SC within 10% of each other: the configuration sits at the optimum's balance.
    Balanced,
}

impl Category {
    pub fn name(self) -> &'static str {
        match self {
            Category::PerformanceCritical => "performance-critical",
            Category::SpaceCritical => "space-critical",
            Category::Balanced => "balanced",
        }
    }
}

/// The model's numbers for one (workload, configuration).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Evaluation {
    /// Cost per (operation per second) of capacity.
    pub cpqps: f64,
    /// Cost per GB of data held.
    pub cpgb: f64,
    pub pc: f64,
    pub sc: f64,
    /// max(PC, SC).
    pub c: f64,
    /// Whole instances for this tenant alone: max(⌈QPS'/MaxPerf⌉, ⌈Data'/MaxSpace⌉).
    pub instances: u64,
    pub category: Category,
}

/// Operations per second the instances must apply: reads once, writes on every copy.
pub fn effective_qps(w: &Workload, replication: f64) -> f64 {
    let reads = w.qps * w.read_ratio.clamp(0.0, 1.0);
    reads + (w.qps - reads) * replication
}

/// Classifies by which of PC and SC is larger (within 10%: balanced).
pub fn classify(pc: f64, sc: f64) -> Category {
    let top = pc.max(sc);
    if top <= 0.0 || (pc - sc).abs() <= 0.1 * top {
        Category::Balanced
    } else if pc > sc {
        Category::PerformanceCritical
    } else {
        Category::SpaceCritical
    }
}

/// Evaluates `w` on instances costing `instance_cost` with capacity `cap`.
pub fn evaluate(w: &Workload, cap: &Capacity, instance_cost: f64, replication: f64) -> Evaluation {
    let qps = effective_qps(w, replication);
    let data = w.data_bytes * replication;
    let cpqps = instance_cost / cap.max_perf;
    let cpgb = instance_cost / (cap.max_space / GB);
    let pc = cpqps * qps;
    let sc = instance_cost * data / cap.max_space;
    let instances = ((qps / cap.max_perf).ceil().max((data / cap.max_space).ceil()).max(1.0)) as u64;
    Evaluation { cpqps, cpgb, pc, sc, c: pc.max(sc), instances, category: classify(pc, sc) }
}

/// The candidate with the lowest C (first on ties); None for no candidates.
pub fn optimal<'a, T>(candidates: impl IntoIterator<Item = (&'a T, Evaluation)>) -> Option<(&'a T, Evaluation)> {
    candidates.into_iter().fold(None, |best, (t, e)| match best {
        Some((_, b)) if b.c <= e.c => best,
        _ => Some((t, e)),
    })
}

/// For a family of configurations s(θ), θ in [0, 1], whose PC rises and SC falls with θ (more
/// compression, more data per tier…), the θ where PC = SC, found by bisection — the optimum
/// of max(PC, SC) when the two cross (otherwise the end where the larger one is smaller).
/// The tests check the model's optimum against it.
#[cfg(test)]
fn balance_point(pc: impl Fn(f64) -> f64, sc: impl Fn(f64) -> f64) -> f64 {
    let gap = |t: f64| pc(t) - sc(t);
    if gap(0.0) >= 0.0 {
        return 0.0;
    }
    if gap(1.0) <= 0.0 {
        return 1.0;
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if gap(mid) < 0.0 {
            lo = mid
        } else {
            hi = mid
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(qps: f64, data_gb: f64) -> Workload {
        Workload { qps, read_ratio: 0.9, data_bytes: data_gb * GB, avg_record_bytes: 100.0 }
    }

    #[test]
    fn the_definitions() {
        let cap = Capacity { max_perf: 100_000.0, max_space: 2.0 * GB };
        let e = evaluate(&w(250_000.0, 3.0), &cap, 1.0, 1.0);
        assert!((e.cpqps - 1e-5).abs() < 1e-15);
        assert!((e.cpgb - 0.5).abs() < 1e-12);
        assert!((e.pc - 2.5).abs() < 1e-9);
        assert!((e.sc - 1.5).abs() < 1e-9);
        assert_eq!(e.c, e.pc);
        assert_eq!(e.instances, 3);
        assert_eq!(e.category, Category::PerformanceCritical);
        let e = evaluate(&w(10_000.0, 9.0), &cap, 1.0, 1.0);
        assert_eq!(e.category, Category::SpaceCritical);
        assert_eq!(e.instances, 5);
    }

    #[test]
    fn replication_copies_data_and_writes_not_reads() {
        let cap = Capacity { max_perf: 100_000.0, max_space: 2.0 * GB };
        let one = evaluate(&w(100_000.0, 1.0), &cap, 1.0, 1.0);
        let three = evaluate(&w(100_000.0, 1.0), &cap, 1.0, 3.0);
        assert!((three.sc / one.sc - 3.0).abs() < 1e-9);
        // 90% reads: 90k + 3 × 10k = 120k operations applied.
        assert!((three.pc / one.pc - 1.2).abs() < 1e-9);
    }

    #[test]
    fn optimal_takes_the_cheapest_first_on_ties() {
        let cap = |p, s| Capacity { max_perf: p, max_space: s * GB };
        let names = ["a", "b", "c"];
        let evals = [cap(1e5, 1.0), cap(5e4, 4.0), cap(5e4, 4.0)].map(|c| evaluate(&w(50_000.0, 2.0), &c, 1.0, 1.0));
        let (best, e) = optimal(names.iter().zip(evals)).unwrap();
        assert_eq!(*best, "b");
        assert!((e.c - 1.0).abs() < 1e-9);
    }

    proptest! {
        /// Theorem: over a family trading performance for space, max(PC, SC) is smallest where
        /// the two meet (checked against a fine grid).
        #[test]
        fn the_optimum_is_where_pc_meets_sc(p0 in 1e4f64..1e6, p_drop in 0.05f64..0.95, s0 in 0.5f64..8.0, s_gain in 1.1f64..6.0, qps in 1e3f64..1e6, gb in 0.1f64..100.0, curve in 0.5f64..2.0) {
            let cap = |t: f64| Capacity { max_perf: p0 * (1.0 - p_drop * t.powf(curve)), max_space: s0 * GB * (1.0 + (s_gain - 1.0) * t) };
            let wl = w(qps, gb);
            let c = |t: f64| evaluate(&wl, &cap(t), 1.0, 1.0).c;
            let theta = balance_point(|t| evaluate(&wl, &cap(t), 1.0, 1.0).pc, |t| evaluate(&wl, &cap(t), 1.0, 1.0).sc);
            let grid = (0..=2000).map(|i| c(i as f64 / 2000.0)).fold(f64::INFINITY, f64::min);
            prop_assert!(c(theta) <= grid * (1.0 + 1e-9), "balance {} costs {} > grid min {}", theta, c(theta), grid);
        }

        /// Performance-critical: only more MaxPerf lowers C; space-critical: only more MaxSpace.
        #[test]
        fn the_critical_side_is_the_only_lever(perf in 1e4f64..1e6, space in 0.5f64..64.0, qps in 1e3f64..1e6, gb in 0.1f64..100.0, k in 1.01f64..4.0) {
            let wl = w(qps, gb);
            let base = evaluate(&wl, &Capacity { max_perf: perf, max_space: space * GB }, 1.0, 1.0);
            let faster = evaluate(&wl, &Capacity { max_perf: perf * k, max_space: space * GB }, 1.0, 1.0);
            let denser = evaluate(&wl, &Capacity { max_perf: perf, max_space: space * k * GB }, 1.0, 1.0);
            if base.pc > base.sc {
                prop_assert!(faster.c < base.c);
                prop_assert!((denser.c - base.c).abs() <= 1e-12 * base.c);
            } else if base.sc > base.pc {
                prop_assert!(denser.c < base.c);
                prop_assert!((faster.c - base.c).abs() <= 1e-12 * base.c);
            }
        }

        /// C never falls below either side, and whole instances cover the fractional cost.
        #[test]
        fn c_bounds(perf in 1e3f64..1e6, space in 0.1f64..64.0, qps in 0.0f64..1e7, gb in 0.0f64..1000.0, r in 1.0f64..5.0) {
            let e = evaluate(&w(qps, gb), &Capacity { max_perf: perf, max_space: space * GB }, 1.0, r);
            prop_assert!(e.c >= e.pc && e.c >= e.sc);
            prop_assert!(e.instances as f64 >= e.c - 1e-9);
        }
    }
}
