//! A tenant's workload as the cost model reads it, gathered at one moment: rates and mix
//! (`tenant`), keys and bytes by tier (a census of its shards), compression ratio, access
//! intervals and the miss-ratio curve (`mrc`). `TERRACE.WORKLOAD` answers it as JSON and the
//! advisor builds its features from it.

use serde_json::{json, Value};

use super::tenant::{Rates, TenantStats};
use crate::keyspace::NamespaceCensus;

/// Points on the reported miss-ratio curve.
pub const CURVE_POINTS: usize = 40;

#[derive(Debug, Clone)]
pub struct Workload {
    pub tenant: String,
    pub namespace: usize,
    pub rates: Rates,
    pub census: NamespaceCensus,
    /// Stored/raw size of the tenant's compressed values (None: nothing compressed).
    pub compression_ratio: Option<f64>,
    /// Logical bytes: keys plus values at their raw size, plus the entries' own bytes.
    pub logical_bytes: f64,
    /// Value bytes at their raw size (in either tier).
    pub value_bytes: f64,
    pub avg_record_bytes: f64,
    pub mean_interval_ms: Option<f64>,
    pub median_interval_ms: Option<f64>,
    pub sample_rate: f64,
    pub sampled_keys: usize,
    /// (cache ratio, cache keys, miss ratio); the ratio is of the tenant's keys.
    pub curve: Vec<(f64, f64, f64)>,
    /// A storage-backed tenant: its keys and bytes in storage at the last census, and the
    /// census's age in seconds (None: not backed, or not counted yet).
    pub storage: Option<(u64, u64, f64)>,
}

/// What a workload is computed from, gathered by the command that asks for it (it holds the
/// locks the census is read through).
pub struct Sources<'a> {
    /// The tenant's name ("" for the default tenant).
    pub tenant: String,
    pub namespace: usize,
    pub stats: &'a TenantStats,
    pub census: NamespaceCensus,
    /// The tenant's compression statistics (`live_ratio` is read).
    pub compression: Value,
    /// A storage-backed tenant's (keys, bytes, seconds since counted).
    pub storage: Option<(u64, u64, f64)>,
}

impl Workload {
    pub fn from_sources(sources: Sources<'_>) -> Workload {
        let Sources { tenant, namespace, stats, census, compression: comp, storage } = sources;
        let rates = stats.rates();
        let compression_ratio = comp["live_ratio"].as_f64().filter(|_| census.encoded_values > 0);
        let raw_encoded = compression_ratio.map(|r| census.encoded_bytes as f64 / r.max(1e-6)).unwrap_or(census.encoded_bytes as f64);
        // Entries (headers, keys, DRAM values, collections) and PMem values, with compressed
        // values counted at their raw size.
        let logical_bytes = (census.entry_bytes + census.pmem_value_bytes) as f64 - census.encoded_bytes as f64 + raw_encoded;
        let value_bytes = (census.dram_value_bytes + census.pmem_value_bytes) as f64 - census.encoded_bytes as f64 + raw_encoded;
        let avg_record_bytes = if census.keys > 0 { logical_bytes / census.keys as f64 } else { 0.0 };
        let (mean_interval_ms, median_interval_ms, sample_rate, sampled_keys, curve) =
            stats.with_mrc(|m| (m.mean_interval_ms(), m.median_interval_ms(), m.rate(), m.sampled_keys(), m.curve(census.keys as f64, CURVE_POINTS)));
        Workload {
            tenant,
            namespace,
            rates,
            census,
            compression_ratio,
            logical_bytes,
            value_bytes,
            avg_record_bytes,
            mean_interval_ms,
            median_interval_ms,
            sample_rate,
            sampled_keys,
            curve,
            storage,
        }
    }

    pub fn to_json(&self) -> Value {
        let r = &self.rates;
        let c = &self.census;
        json!({
            "tenant": if self.tenant.is_empty() { "default" } else { &self.tenant },
            "namespace": self.namespace,
            "qps_1s": r.qps_1s,
            "qps_1m": round(r.qps_1m),
            "peak_1s": r.peak_1s,
            "burstiness": round(r.burstiness()),
            "reads": r.reads,
            "writes": r.writes,
            "read_ratio": round(r.read_ratio()),
            "keys": c.keys,
            "bytes": {
                "logical": self.logical_bytes.round(),
                "entries": c.entry_bytes,
                "table": c.table_bytes,
                "keys": c.key_bytes,
                "dram_values": c.dram_value_bytes,
                "pmem_values": c.pmem_value_bytes,
                "compressed_values": c.encoded_values,
                "compressed_stored": c.encoded_bytes,
                "storage": self.storage.map(|(keys, bytes, age)| json!({"keys": keys, "bytes": bytes, "counted_seconds_ago": age.round()})),
            },
            "shards_skipped": c.shards_skipped,
            "compression_ratio": self.compression_ratio.map(round),
            "avg_record_bytes": round(self.avg_record_bytes),
            "access_interval_ms": {"mean": self.mean_interval_ms.map(round), "median": self.median_interval_ms.map(round)},
            "mrc": {
                "sample_rate": round(self.sample_rate),
                "sampled_keys": self.sampled_keys,
                "points": self.curve.iter().map(|(cr, keys, mr)| json!([round(*cr), keys.round(), round(*mr)])).collect::<Vec<_>>(),
            },
        })
    }
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
