//! The advisor over a whole tenant: every engine holds a share of its keys and serves a share
//! of its requests, so the engines' workloads (`live` in each `TERRACE.ADVISE` answer, and
//! `TERRACE.WORKLOAD`) are summed here and costed as one (`TERRACE.ADVISE … TOTAL`).

use serde_json::{json, Value};

/// The tenant's workload over every engine from each engine's `live`: rates, keys and bytes
/// add up; the read ratio is weighted by requests, the value share by bytes.
pub fn total_live(lives: &[&Value]) -> Value {
    let num = |v: &Value, k: &str| v[k].as_f64().filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0);
    let qps: f64 = lives.iter().map(|l| num(l, "qps")).sum();
    let data: f64 = lives.iter().map(|l| num(l, "data_bytes")).sum();
    let keys: f64 = lives.iter().map(|l| num(l, "keys")).sum();
    let mean = |k: &str| if lives.is_empty() { 0.0 } else { lives.iter().map(|l| num(l, k)).sum::<f64>() / lives.len() as f64 };
    let read_ratio = if qps > 0.0 { lives.iter().map(|l| num(l, "qps") * num(l, "read_ratio")).sum::<f64>() / qps } else { mean("read_ratio") };
    let value_share = if data > 0.0 { lives.iter().map(|l| num(l, "data_bytes") * num(l, "value_share")).sum::<f64>() / data } else { mean("value_share") };
    json!({
        "qps": qps,
        "read_ratio": read_ratio.clamp(0.0, 1.0),
        "data_bytes": data,
        "keys": keys,
        "value_share": value_share.clamp(0.0, 1.0),
    })
}

/// The tenant's `TERRACE.WORKLOAD` over every engine, for the advisor page: keys, rates and
/// logical bytes summed; the sampled miss-ratio curve and access intervals are the first
/// engine's (a fair sample: keys spread evenly over engines).
pub fn total_workload(workloads: &[&Value]) -> Value {
    let Some(first) = workloads.first() else { return Value::Null };
    let mut total = (*first).clone();
    let sum = |path: &[&str]| -> f64 { workloads.iter().map(|w| path.iter().fold(*w, |v, k| &v[*k]).as_f64().unwrap_or(0.0)).sum() };
    let (keys, logical) = (sum(&["keys"]), sum(&["bytes", "logical"]));
    total["keys"] = json!(keys);
    total["qps_1m"] = json!(sum(&["qps_1m"]));
    total["qps_1s"] = json!(sum(&["qps_1s"]));
    total["reads"] = json!(sum(&["reads"]));
    total["writes"] = json!(sum(&["writes"]));
    total["bytes"]["logical"] = json!(logical);
    if keys > 0.0 {
        total["avg_record_bytes"] = json!((logical / keys).round());
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_tenant() {
        let a = json!({"qps": 300.0, "read_ratio": 1.0, "data_bytes": 1000.0, "keys": 10.0, "value_share": 0.5});
        let b = json!({"qps": 100.0, "read_ratio": 0.0, "data_bytes": 3000.0, "keys": 30.0, "value_share": 0.9});
        let t = total_live(&[&a, &b]);
        assert_eq!(t, json!({"qps": 400.0, "read_ratio": 0.75, "data_bytes": 4000.0, "keys": 40.0, "value_share": 0.8}));
        let idle = json!({"qps": 0.0, "read_ratio": 0.5, "data_bytes": 0.0, "keys": 0.0, "value_share": 0.0});
        assert_eq!(total_live(&[&idle, &idle])["read_ratio"], 0.5, "no requests: the engines' mean");
    }

    #[test]
    fn workloads_add_up_keys_rates_and_bytes() {
        let a = json!({"keys": 2557, "qps_1m": 10.0, "qps_1s": 1, "reads": 5, "writes": 1, "bytes": {"logical": 2557.0 * 100.0}, "avg_record_bytes": 100.0, "mrc": {"points": [[0.1, 1, 0.5]]}});
        let b = json!({"keys": 2443, "qps_1m": 30.0, "qps_1s": 3, "reads": 1, "writes": 1, "bytes": {"logical": 2443.0 * 300.0}, "avg_record_bytes": 300.0, "mrc": {"points": []}});
        let t = total_workload(&[&a, &b]);
        assert_eq!(t["keys"], 5000.0);
        assert_eq!(t["qps_1m"], 40.0);
        assert_eq!(t["avg_record_bytes"], ((2557.0 * 100.0 + 2443.0 * 300.0) / 5000.0_f64).round());
        assert_eq!(t["mrc"], a["mrc"], "the first engine's sample");
    }
}
