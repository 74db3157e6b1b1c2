//! Workload features → the optimizations worth evaluating (after TierBase's Table 1): which
//! side of the model a workload leans on decides which knobs can lower its cost at all, and
//! the workload's shape decides which of them fit. The advisor evaluates the rows that apply;
//! this table only says where to look, the cost model says what wins.

use serde::Serialize;

use super::model::Category;

/// What the advisor knows of a tenant's workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Features {
    pub category: Category,
    /// Share of operations that only read.
    pub read_ratio: f64,
    pub avg_record_bytes: f64,
    /// Best codec's stored/raw size on the tenant's sample (None: not measured).
    pub compression_ratio: Option<f64>,
    /// Miss ratio with 20% of the data cached, from the tenant's miss-ratio curve.
    pub miss_ratio_at_20: Option<f64>,
    /// Highest 1 s QPS over the mean of the last minute.
    pub burstiness: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimization {
    /// Pre-trained value compression.
    Compression,
    /// Cold values in the PMem tier.
    PmemTier,
    /// A storage tier with a cache of the hot part (write-through).
    WriteThrough,
    /// A storage tier with write-back caching.
    WriteBack,
    /// Elastic reactor threads.
    ElasticThreads,
    /// More reactor threads, values raw in DRAM.
    RawDram,
    /// The WAL in the PMem ring instead of fsync per batch.
    WalPmem,
}

impl Optimization {
    pub fn name(self) -> &'static str {
        match self {
            Optimization::Compression => "compression",
            Optimization::PmemTier => "pmem-tier",
            Optimization::WriteThrough => "write-through",
            Optimization::WriteBack => "write-back",
            Optimization::ElasticThreads => "elastic-threads",
            Optimization::RawDram => "raw-dram",
            Optimization::WalPmem => "wal-pmem",
        }
    }
}

/// One row of the table: a feature, the optimization it calls for, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Applies {
    pub optimization: Optimization,
    pub feature: &'static str,
    pub reason: String,
}

/// Thresholds of the table (shares and ratios).
pub const COMPRESSIBLE: f64 = 0.7;
pub const SKEWED_MISS_AT_20: f64 = 0.2;
pub const LARGE_RECORD: f64 = 256.0;
pub const BURSTY: f64 = 2.0;
pub const WRITE_HEAVY: f64 = 0.5;

/// The rows of the table that apply to `f`, most specific first.
pub fn applicable(f: &Features) -> Vec<Applies> {
    let mut out = Vec::new();
    let mut add = |optimization, feature, reason: String| out.push(Applies { optimization, feature, reason });
    let space = matches!(f.category, Category::SpaceCritical | Category::Balanced);
    let perf = matches!(f.category, Category::PerformanceCritical | Category::Balanced);
    let write_share = 1.0 - f.read_ratio;
    if space {
        if let Some(r) = f.compression_ratio.filter(|r| *r <= COMPRESSIBLE) {
            add(Optimization::Compression, "space-critical, compressible values", format!("the best codec stores the sample in {:.0}% of its size", r * 100.0));
        }
        if let Some(mr) = f.miss_ratio_at_20.filter(|m| *m <= SKEWED_MISS_AT_20) {
            let (opt, how) = if write_share >= WRITE_HEAVY {
                (Optimization::WriteBack, "write-heavy: write-back")
            } else {
                (Optimization::WriteThrough, "read-mostly: write-through")
            };
            add(opt, "space-critical, skewed access", format!("with 20% of the data cached {:.0}% of reads would miss; {how}", mr * 100.0));
        }
        if f.avg_record_bytes >= LARGE_RECORD {
            add(
                Optimization::PmemTier,
                "space-critical, large records",
                format!("records average {:.0} bytes, so values dominate the keys and index kept in DRAM", f.avg_record_bytes),
            );
        } else {
            add(Optimization::PmemTier, "space-critical", "PMem costs 0.38× DRAM per GB".to_string());
        }
    }
    if perf {
        if f.burstiness >= BURSTY {
            add(Optimization::ElasticThreads, "performance-critical, bursty", format!("peak second {:.1}× the minute's mean", f.burstiness));
        }
        if write_share >= WRITE_HEAVY {
            add(Optimization::WalPmem, "performance-critical, write-heavy", format!("{:.0}% writes wait for the log", write_share * 100.0));
        }
        add(Optimization::RawDram, "performance-critical", "every codec and slower tier costs CPU per operation".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(category: Category) -> Features {
        Features { category, read_ratio: 0.9, avg_record_bytes: 100.0, compression_ratio: Some(0.3), miss_ratio_at_20: Some(0.05), burstiness: 3.0 }
    }

    #[test]
    fn space_critical_looks_at_space_knobs_only() {
        let rows: Vec<_> = applicable(&f(Category::SpaceCritical)).iter().map(|a| a.optimization).collect();
        assert_eq!(rows, vec![Optimization::Compression, Optimization::WriteThrough, Optimization::PmemTier]);
        let mut wh = f(Category::SpaceCritical);
        wh.read_ratio = 0.2;
        wh.compression_ratio = Some(0.95);
        let rows: Vec<_> = applicable(&wh).iter().map(|a| a.optimization).collect();
        assert_eq!(rows, vec![Optimization::WriteBack, Optimization::PmemTier]);
    }

    #[test]
    fn performance_critical_looks_at_cpu_knobs_only() {
        let rows: Vec<_> = applicable(&f(Category::PerformanceCritical)).iter().map(|a| a.optimization).collect();
        assert_eq!(rows, vec![Optimization::ElasticThreads, Optimization::RawDram]);
        let balanced = applicable(&f(Category::Balanced));
        assert!(balanced.len() >= 5);
    }
}
