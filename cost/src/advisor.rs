//! The advisor's decision, pure: from a tenant's live workload, its current configuration,
//! the configurations a `terrace cost-eval` measured (when there is one) and the device
//! profile, the cost of each option under the live workload, the cheapest, the expected
//! change against today's, and the reasons. Without measurements it estimates capacities
//! from the live statistics and the device probe with the constants below, and says so.

use serde::Serialize;

use super::features::{self, Applies, Features};
use super::model::{evaluate, Capacity, Category, Evaluation, Workload};
use super::prices::{Instance, Prices, GB};
use super::tiered::{Curve, Tiered};

/// Per-request cost on one core outside the command itself (network, parsing, reply) in µs,
/// for estimates: measured on this code at about 3–5 µs per unpipelined request.
pub const REQUEST_OVERHEAD_US: f64 = 4.0;
/// DRAM bytes per logical byte of raw records (table, entry headers, allocator), estimated.
pub const RAW_DRAM_PER_BYTE: f64 = 1.2;
/// DRAM share of values a PMem configuration keeps (its `dram_max`), for estimates.
pub const PMEM_DRAM_SHARE: f64 = 0.2;
/// CPU per storage-tier read on the engine side (LSM lookup or a PostgreSQL round trip's
/// share), µs, added to the device's read latency for estimates.
pub const STORAGE_READ_CPU_US: f64 = 20.0;

/// What the engine knows of the tenant now.
#[derive(Debug, Clone, Serialize)]
pub struct Live {
    pub qps: f64,
    pub read_ratio: f64,
    pub data_bytes: f64,
    pub keys: f64,
    pub avg_record_bytes: f64,
    /// Value bytes over logical bytes.
    pub value_share: f64,
    /// Mean engine time per data command, µs.
    pub command_us: f64,
    pub burstiness: f64,
    /// Best known stored/raw ratio of a codec on the tenant's values, with its codec and
    /// encode/decode µs per value.
    pub codec: Option<(String, f64, f64, f64)>,
    #[serde(skip)]
    pub curve: Option<Curve>,
}

/// How the tenant is configured now.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
#[serde(default)]
pub struct Setup {
    pub compression: Option<String>,
    pub pmem: bool,
    pub storage_mode: Option<String>,
}

/// A configuration with a capacity (measured by cost-eval, or estimated).
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    pub name: String,
    pub setup: Setup,
    pub capacity: Capacity,
    pub instance_cost: f64,
    pub evaluation: Evaluation,
    /// For the tiered option: the cache ratio it assumes.
    pub cache_ratio: Option<f64>,
    /// Why the node cannot run it (no PMem tier, no storage tier); None: it can. Only
    /// options it can run are recommended.
    pub cannot_run: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub category: Category,
    /// True when no cost-eval measured these configurations.
    pub estimate: bool,
    pub options: Vec<Choice>,
    pub current: Option<String>,
    pub recommended: String,
    /// The cheapest option the node can run (the recommendation unless hysteresis keeps the
    /// incumbent: `MATERIAL_GAIN`).
    pub cheapest: String,
    /// C(recommended) / C(current) − 1 (negative: cheaper).
    pub expected_change: Option<f64>,
    pub features: Features,
    pub applicable: Vec<Applies>,
    pub reasons: Vec<String>,
}

/// Device latencies the estimates use.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Device {
    pub dram_read_ns: f64,
    pub pmem_read_ns: Option<f64>,
    pub storage_read_us: Option<f64>,
}

fn workload(l: &Live) -> Workload {
    Workload { qps: l.qps, read_ratio: l.read_ratio, data_bytes: l.data_bytes, avg_record_bytes: l.avg_record_bytes }
}

fn option(name: &str, setup: Setup, cap: Capacity, inst: &Instance, prices: &Prices, l: &Live, cache_ratio: Option<f64>) -> Choice {
    let cost = inst.cost(prices);
    Choice {
        name: name.into(),
        setup,
        capacity: cap,
        instance_cost: cost,
        evaluation: evaluate(&workload(l), &cap, cost, prices.replication),
        cache_ratio,
        cannot_run: None,
    }
}

/// Capacities estimated from live statistics and the device (no cost-eval yet).
pub fn estimate(l: &Live, d: &Device, prices: &Prices, inst: &Instance) -> Vec<Choice> {
    let base_us = l.command_us + REQUEST_OVERHEAD_US;
    let raw_perf = inst.cores * 1e6 / base_us;
    let mut out =
        vec![option("raw", Setup::default(), Capacity { max_perf: raw_perf, max_space: inst.dram_gb * GB / RAW_DRAM_PER_BYTE }, inst, prices, l, None)];
    if let Some((codec, ratio, enc, dec)) = &l.codec {
        let per = RAW_DRAM_PER_BYTE * (1.0 - l.value_share + l.value_share * ratio);
        let us = base_us + l.read_ratio * dec + (1.0 - l.read_ratio) * enc;
        let setup = Setup { compression: Some(codec.clone()), ..Setup::default() };
        out.push(option(codec, setup, Capacity { max_perf: inst.cores * 1e6 / us, max_space: inst.dram_gb * GB / per }, inst, prices, l, None));
    }
    if let Some(pmem_ns) = d.pmem_read_ns {
        let pinst = Instance { pmem_gb: if inst.pmem_gb > 0.0 { inst.pmem_gb } else { 16.0 }, ..inst.clone() };
        let dram_per = RAW_DRAM_PER_BYTE * (1.0 - l.value_share + l.value_share * PMEM_DRAM_SHARE);
        let pmem_per = l.value_share * (1.0 - PMEM_DRAM_SHARE) * 1.1;
        let miss = l.curve.as_ref().map_or(1.0 - PMEM_DRAM_SHARE, |c| c.miss_ratio(PMEM_DRAM_SHARE));
        let lines = (l.avg_record_bytes * l.value_share / 64.0).ceil().max(1.0);
        let extra_us = miss * lines * (pmem_ns - d.dram_read_ns).max(0.0) / 1000.0;
        let space = (pinst.dram_gb * GB / dram_per).min(pinst.pmem_gb * GB / pmem_per.max(1e-9));
        out.push(option(
            "pmem dram-first",
            Setup { pmem: true, ..Setup::default() },
            Capacity { max_perf: pinst.cores * 1e6 / (base_us + extra_us), max_space: space },
            &pinst,
            prices,
            l,
            None,
        ));
    }
    if let (Some(read_us), Some(curve)) = (d.storage_read_us, l.curve.as_ref()) {
        // The tiered model: raw DRAM in front of the storage tier, at its best cache ratio.
        let raw = &out[0];
        let sinst = Instance { flash_gb: if inst.flash_gb > 0.0 { inst.flash_gb } else { 200.0 }, ..inst.clone() };
        let data_gb = l.data_bytes * prices.replication / GB;
        let storage_perf = sinst.cores * 1e6 / (base_us + read_us + STORAGE_READ_CPU_US);
        let t = Tiered {
            pc_cache: raw.evaluation.cpqps * l.qps,
            pc_miss: raw.evaluation.cpqps * l.qps,
            sc_cache: raw.evaluation.cpgb * data_gb,
            pc_storage: sinst.cost(prices) / storage_perf * l.qps,
            sc_storage: prices.flash_gb() * 1.5 * data_gb,
        };
        let opt = t.optimum(curve);
        // As one configuration: DRAM holds the cache's share, flash all of it (with the LSM's
        // space amplification), operations cost a hit or a miss by the curve.
        let miss_us = base_us + read_us + STORAGE_READ_CPU_US;
        let cap = Capacity {
            max_perf: sinst.cores * 1e6 / (base_us * (1.0 - opt.miss_ratio) + miss_us * opt.miss_ratio),
            max_space: (sinst.dram_gb * GB / (RAW_DRAM_PER_BYTE * opt.cache_ratio.max(1e-3))).min(sinst.flash_gb * GB / 1.5),
        };
        let o = option(
            "storage tier (write-through)",
            Setup { storage_mode: Some("write-through".into()), ..Setup::default() },
            cap,
            &sinst,
            prices,
            l,
            Some(opt.cache_ratio),
        );
        out.push(o);
    }
    out
}

/// Re-costs measured configurations under the live workload.
pub fn from_measured(measured: &[(String, Setup, Capacity, f64)], l: &Live, prices: &Prices) -> Vec<Choice> {
    measured
        .iter()
        .map(|(name, setup, cap, cost)| Choice {
            name: name.clone(),
            setup: setup.clone(),
            capacity: *cap,
            instance_cost: *cost,
            evaluation: evaluate(&workload(l), cap, *cost, prices.replication),
            cache_ratio: None,
            cannot_run: None,
        })
        .collect()
}

fn matches(a: &Setup, b: &Setup) -> bool {
    let codec = |s: &Setup| s.compression.clone().filter(|c| c != "none");
    let storage = |s: &Setup| s.storage_mode.clone().filter(|m| m != "cache");
    codec(a) == codec(b) && a.pmem == b.pmem && storage(a).is_some() == storage(b).is_some()
}

/// What a node can run: `cannot_run` gives the reason a setup is out of its reach.
pub struct Runnable<'a>(pub &'a dyn Fn(&Setup) -> Option<String>);

/// Hysteresis: the recommendation moves off the incumbent (the previous recommendation, else
/// the tenant's configuration) only to an option cheaper by at least this share of the
/// incumbent's cost. Live statistics of an idle or steady tenant wander by a few percent
/// (rates over a minute, a sampled miss-ratio curve, a census taken shard by shard); costs
/// that close are a tie, and a recommendation that flipped on them would have operators
/// apply and undo changes that save nothing.
pub const MATERIAL_GAIN: f64 = 0.10;

/// The advice among `options`: the cheapest one the node can run is recommended (options it
/// cannot run are listed with the reason, never recommended) — unless the incumbent, the
/// `previous` recommendation or today's configuration, costs within `MATERIAL_GAIN` of it.
pub fn advise(l: &Live, current: &Setup, mut options: Vec<Choice>, estimate: bool, runnable: Runnable, previous: Option<&str>) -> Advice {
    for o in &mut options {
        o.cannot_run = (runnable.0)(&o.setup);
    }
    let cheapest = options
        .iter()
        .filter(|o| o.cannot_run.is_none())
        .min_by(|a, b| a.evaluation.c.total_cmp(&b.evaluation.c))
        .or_else(|| options.first())
        .expect("at least one option");
    let cur = options.iter().find(|o| matches(&o.setup, current));
    let runnable_named = |name: &str| options.iter().find(|o| o.name == name && o.cannot_run.is_none());
    let incumbent = previous.and_then(runnable_named).or(cur.filter(|c| c.cannot_run.is_none()));
    let best = match incumbent {
        Some(inc) if cheapest.evaluation.c > inc.evaluation.c * (1.0 - MATERIAL_GAIN) => inc,
        _ => cheapest,
    };
    let category = cur.unwrap_or(best).evaluation.category;
    let f = Features {
        category,
        read_ratio: l.read_ratio,
        avg_record_bytes: l.avg_record_bytes,
        compression_ratio: l.codec.as_ref().map(|c| c.1),
        miss_ratio_at_20: l.curve.as_ref().map(|c| c.miss_ratio(0.2)),
        burstiness: l.burstiness,
    };
    let applicable = features::applicable(&f);
    let mut reasons = Vec::new();
    let e = &cur.unwrap_or(best).evaluation;
    reasons.push(format!(
        "{}: serving {:.0} QPS takes {:.3} units of instances (PC), holding {:.2} GB takes {:.3} (SC)",
        category.name(),
        l.qps,
        e.pc,
        l.data_bytes / GB,
        e.sc
    ));
    for a in &applicable {
        reasons.push(format!("{} → {}: {}", a.feature, a.optimization.name(), a.reason));
    }
    let change = cur.map(|c| best.evaluation.c / c.evaluation.c - 1.0);
    match (cur, change) {
        (Some(c), Some(ch)) if c.name != best.name => {
            reasons.push(format!("{} costs {:.4} against {:.4} today ({:+.0}%)", best.name, best.evaluation.c, c.evaluation.c, ch * 100.0))
        }
        (Some(_), _) => reasons.push(format!(
            "the current configuration ({}) is already the cheapest of those {}",
            best.name,
            if estimate { "estimated" } else { "measured" }
        )),
        (None, _) => reasons.push("the current configuration is not among those evaluated".into()),
    }
    if best.name != cheapest.name {
        reasons.push(format!(
            "{} would cost {:.1}% less than {}: under the {:.0}% a recommendation changes for (hysteresis)",
            cheapest.name,
            (1.0 - cheapest.evaluation.c / best.evaluation.c) * 100.0,
            best.name,
            MATERIAL_GAIN * 100.0
        ));
    }
    if estimate {
        reasons
            .push("estimate: no cost-eval results for this tenant; capacities come from live statistics, the device probe and the advisor's constants".into());
    }
    Advice {
        category,
        estimate,
        current: cur.map(|c| c.name.clone()),
        recommended: best.name.clone(),
        cheapest: cheapest.name.clone(),
        expected_change: change,
        features: f,
        applicable,
        reasons,
        options,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(qps: f64, gb: f64) -> Live {
        let curve = Curve::new(
            (1..=20)
                .map(|i| {
                    let cr = i as f64 / 20.0;
                    (cr, (0.05 / cr).min(1.0))
                })
                .collect(),
        );
        Live {
            qps,
            read_ratio: 0.9,
            data_bytes: gb * GB,
            keys: gb * GB / 200.0,
            avg_record_bytes: 200.0,
            value_share: 0.8,
            command_us: 1.0,
            burstiness: 1.2,
            codec: Some(("zstd-dict".into(), 0.3, 3.0, 1.0)),
            curve: Some(curve),
        }
    }

    fn dev() -> Device {
        Device { dram_read_ns: 90.0, pmem_read_ns: Some(300.0), storage_read_us: Some(100.0) }
    }

    #[test]
    fn a_big_quiet_tenant_is_told_to_save_space_and_a_busy_small_one_to_stay_raw() {
        let (p, i) = (Prices::default(), Instance::default());
        let big = live(1_000.0, 100.0);
        let a = advise(&big, &Setup::default(), estimate(&big, &dev(), &p, &i), true, Runnable(&|_| None), None);
        assert_eq!(a.current.as_deref(), Some("raw"));
        assert_eq!(a.category, Category::SpaceCritical);
        assert_ne!(a.recommended, "raw", "{a:#?}");
        assert!(a.expected_change.unwrap() < -0.5, "{a:#?}");
        assert!(a.estimate && a.reasons.iter().any(|r| r.starts_with("estimate")));
        let busy = live(2_000_000.0, 0.5);
        let a = advise(&busy, &Setup::default(), estimate(&busy, &dev(), &p, &i), true, Runnable(&|_| None), None);
        assert_eq!(a.category, Category::PerformanceCritical);
        assert_eq!(a.recommended, "raw", "{a:#?}");
        assert_eq!(a.expected_change, Some(0.0));
    }

    #[test]
    fn only_options_the_node_can_run_are_recommended() {
        let (p, i) = (Prices::default(), Instance::default());
        let big = live(1_000.0, 500.0);
        let all = advise(&big, &Setup::default(), estimate(&big, &dev(), &p, &i), true, Runnable(&|_| None), None);
        assert!(all.recommended.contains("storage") || all.recommended.contains("pmem"), "{}", all.recommended);
        let no_tiers = |s: &Setup| {
            if s.pmem {
                Some("no PMem tier".to_string())
            } else if s.storage_mode.as_deref().is_some_and(|m| m != "cache") {
                Some("no storage tier".to_string())
            } else {
                None
            }
        };
        let a = advise(&big, &Setup::default(), estimate(&big, &dev(), &p, &i), true, Runnable(&no_tiers), None);
        let best = a.options.iter().find(|o| o.name == a.recommended).unwrap();
        assert!(best.cannot_run.is_none() && !best.setup.pmem && best.setup.storage_mode.is_none(), "{}", a.recommended);
        assert!(a.options.iter().any(|o| o.cannot_run.as_deref() == Some("no storage tier")), "listed with the reason");
    }

    #[test]
    fn measured_options_are_recosted_under_the_live_workload() {
        let p = Prices::default();
        let m = vec![
            ("raw".to_string(), Setup::default(), Capacity { max_perf: 100_000.0, max_space: 3.0 * GB }, 1.0),
            ("zstd".to_string(), Setup { compression: Some("zstd".into()), ..Setup::default() }, Capacity { max_perf: 60_000.0, max_space: 9.0 * GB }, 1.0),
        ];
        let quiet = advise(&live(10_000.0, 30.0), &Setup::default(), from_measured(&m, &live(10_000.0, 30.0), &p), false, Runnable(&|_| None), None);
        assert_eq!(quiet.recommended, "zstd");
        assert!((quiet.expected_change.unwrap() - (30.0 / 9.0) / (30.0 / 3.0) + 1.0).abs() < 1e-9);
        let busy = advise(
            &live(600_000.0, 1.0),
            &Setup { compression: Some("zstd".into()), ..Setup::default() },
            from_measured(&m, &live(600_000.0, 1.0), &p),
            false,
            Runnable(&|_| None),
            None,
        );
        assert_eq!(busy.current.as_deref(), Some("zstd"));
        assert_eq!(busy.recommended, "raw");
        assert!(!busy.estimate);
    }

    /// Two options whose costs under a space-critical workload differ by `gain`: raw (today's)
    /// and zstd.
    fn two_options(gain: f64) -> (Live, Vec<Choice>) {
        let p = Prices::default();
        let l = live(10_000.0, 30.0);
        let m = vec![
            ("raw".to_string(), Setup::default(), Capacity { max_perf: 1e9, max_space: 3.0 * GB }, 1.0),
            (
                "zstd".to_string(),
                Setup { compression: Some("zstd".into()), ..Setup::default() },
                Capacity { max_perf: 1e9, max_space: 3.0 * GB / (1.0 - gain) },
                1.0,
            ),
        ];
        let options = from_measured(&m, &l, &p);
        (l, options)
    }

    #[test]
    fn a_recommendation_changes_only_for_a_material_gain() {
        let zstd = Setup { compression: Some("zstd".into()), ..Setup::default() };
        // 5% cheaper: a tie, today's configuration stays recommended, and the reason says why.
        let (l, o) = two_options(0.05);
        let a = advise(&l, &Setup::default(), o, false, Runnable(&|_| None), None);
        assert_eq!((a.recommended.as_str(), a.cheapest.as_str()), ("raw", "zstd"));
        assert_eq!(a.expected_change, Some(0.0));
        assert!(a.reasons.iter().any(|r| r.contains("hysteresis")), "{:?}", a.reasons);
        // 15% cheaper: material.
        let (l, o) = two_options(0.15);
        let a = advise(&l, &Setup::default(), o, false, Runnable(&|_| None), None);
        assert_eq!(a.recommended, "zstd");
        // Once zstd was recommended, raw coming back within 10% does not flip it back.
        let (l, o) = two_options(-0.05);
        let a = advise(&l, &Setup::default(), o, false, Runnable(&|_| None), Some("zstd"));
        assert_eq!((a.recommended.as_str(), a.cheapest.as_str()), ("zstd", "raw"));
        // Noise around a threshold: costs wandering ±8% never change the recommendation.
        let mut previous = "raw".to_string();
        for (i, gain) in [0.08, -0.07, 0.05, 0.079, -0.08, 0.0].into_iter().enumerate() {
            let (l, o) = two_options(gain);
            let current = if previous == "zstd" { zstd.clone() } else { Setup::default() };
            let a = advise(&l, &current, o, false, Runnable(&|_| None), Some(&previous));
            assert_eq!(a.recommended, "raw", "step {i}: gain {gain}");
            previous = a.recommended;
        }
        // A previous recommendation the node can no longer run does not hold.
        let (l, o) = two_options(0.05);
        let no_zstd = |s: &Setup| s.compression.is_some().then(|| "no".to_string());
        let a = advise(&l, &Setup::default(), o, false, Runnable(&no_zstd), Some("zstd"));
        assert_eq!(a.recommended, "raw");
    }
}
