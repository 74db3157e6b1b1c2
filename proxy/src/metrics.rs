//! Per-tenant, per-command counters and latency histograms of the proxy, exported as
//! Prometheus text (`--metrics-port`, GET /metrics) and in INFO (commandstats, latencystats).
//!
//! Each reactor thread records into its own `Recorder` (an uncontended lock per request);
//! readers merge all of them.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

/// What a command is counted as: its tenant, protocol and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub tenant: Arc<str>,
    pub protocol: &'static str,
    pub command: &'static str,
}

pub struct Stat {
    pub calls: u64,
    pub errors: u64,
    /// Microseconds from a request's arrival to its reply being ready.
    pub latency: Histogram<u64>,
}

impl Stat {
    fn new() -> Stat {
        // Two significant digits (values within 1%): a histogram is about 27 KB (at three,
        // 220 KB — and there is one per tenant and command, a thousand tenants' worth).
        Stat { calls: 0, errors: 0, latency: Histogram::new_with_bounds(1, 60_000_000, 2).expect("valid bounds") }
    }
}

/// One thread's measurements: since the start (per command) and since the console last took
/// them (per tenant, `Registry::take_interval`).
#[derive(Default)]
pub struct Recorder {
    stats: Mutex<Maps>,
}

#[derive(Default)]
struct Maps {
    total: HashMap<Key, Stat, foldhash::fast::RandomState>,
    interval: HashMap<Arc<str>, Stat, foldhash::fast::RandomState>,
}

impl Stat {
    fn add(&mut self, us: u64, error: bool) {
        self.calls += 1;
        self.errors += error as u64;
        let _ = self.latency.record(us);
    }

    fn merge(&mut self, other: &Stat) {
        self.calls += other.calls;
        self.errors += other.errors;
        let _ = self.latency.add(&other.latency);
    }
}

impl Recorder {
    pub fn record(&self, key: &Key, took: Duration, error: bool) {
        let us = (took.as_micros() as u64).clamp(1, 60_000_000);
        let mut maps = self.stats.lock();
        match maps.total.get_mut(key) {
            Some(s) => s.add(us, error),
            None => maps.total.entry(key.clone()).or_insert_with(Stat::new).add(us, error),
        }
        match maps.interval.get_mut(&key.tenant) {
            Some(s) => s.add(us, error),
            None => maps.interval.entry(key.tenant.clone()).or_insert_with(Stat::new).add(us, error),
        }
    }

    pub fn reset(&self) {
        self.stats.lock().total.clear();
    }

    fn retain_tenants(&self, keep: &dyn Fn(&str) -> bool) {
        let mut maps = self.stats.lock();
        maps.total.retain(|k, _| keep(&k.tenant));
        maps.interval.retain(|t, _| keep(t));
    }
}

/// Every thread's recorders.
#[derive(Default)]
pub struct Registry {
    recorders: Mutex<Vec<Arc<Recorder>>>,
}

impl Registry {
    pub fn recorder(&self) -> Arc<Recorder> {
        let r = Arc::new(Recorder::default());
        self.recorders.lock().push(r.clone());
        r
    }

    /// All threads' stats merged.
    pub fn snapshot(&self) -> BTreeMap<Key, Stat> {
        let mut out: BTreeMap<Key, Stat> = BTreeMap::new();
        for r in self.recorders.lock().iter() {
            for (k, s) in r.stats.lock().total.iter() {
                out.entry(k.clone()).or_insert_with(Stat::new).merge(s);
            }
        }
        out
    }

    /// Per tenant, every thread's requests since the last call, merged (and forgotten): the
    /// console's history samples (`TERRACE.LATENCY TAKE`).
    pub fn take_interval(&self) -> BTreeMap<Arc<str>, Stat> {
        let mut out: BTreeMap<Arc<str>, Stat> = BTreeMap::new();
        for r in self.recorders.lock().iter() {
            let taken = std::mem::take(&mut r.stats.lock().interval);
            for (tenant, s) in taken {
                out.entry(tenant).or_insert_with(Stat::new).merge(&s);
            }
        }
        out
    }

    pub fn reset(&self) {
        for r in self.recorders.lock().iter() {
            r.reset();
        }
    }

    /// Forgets the measurements of the tenants `keep` does not keep (deleted ones).
    pub fn retain_tenants(&self, keep: &dyn Fn(&str) -> bool) {
        for r in self.recorders.lock().iter() {
            r.retain_tenants(keep);
        }
    }
}

fn labels(k: &Key) -> String {
    format!("tenant=\"{}\",protocol=\"{}\",command=\"{}\"", escape(&k.tenant), k.protocol, k.command)
}

/// Prometheus label values escape backslash, quote and newline.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

const QUANTILES: &[f64] = &[0.5, 0.9, 0.99, 0.999];
/// The request-duration histogram's bucket bounds, µs: 50 µs to 5 s.
const BUCKETS_US: &[u64] = &[50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 5_000_000];

/// The Prometheus text exposition of `stats` plus the given gauges (name, help, value).
pub fn prometheus(stats: &BTreeMap<Key, Stat>, gauges: &[(String, &str, f64)]) -> String {
    let mut out = String::new();
    out += "# HELP terrace_proxy_commands_total Commands the proxy answered.\n# TYPE terrace_proxy_commands_total counter\n";
    for (k, s) in stats {
        let _ = writeln!(out, "terrace_proxy_commands_total{{{}}} {}", labels(k), s.calls);
    }
    out += "# HELP terrace_proxy_command_errors_total Commands answered with an error.\n# TYPE terrace_proxy_command_errors_total counter\n";
    for (k, s) in stats {
        let _ = writeln!(out, "terrace_proxy_command_errors_total{{{}}} {}", labels(k), s.errors);
    }
    out += "# HELP terrace_proxy_command_latency_seconds Time from a request's arrival to its reply.\n# TYPE terrace_proxy_command_latency_seconds summary\n";
    for (k, s) in stats {
        let l = labels(k);
        for q in QUANTILES {
            let v = s.latency.value_at_quantile(*q) as f64 / 1e6;
            let _ = writeln!(out, "terrace_proxy_command_latency_seconds{{{l},quantile=\"{q}\"}} {v}");
        }
        let sum = s.latency.mean() * s.latency.len() as f64 / 1e6;
        let _ = writeln!(out, "terrace_proxy_command_latency_seconds_sum{{{l}}} {sum}");
        let _ = writeln!(out, "terrace_proxy_command_latency_seconds_count{{{l}}} {}", s.latency.len());
    }
    // Per tenant, every command: a histogram Prometheus can take quantiles of over any window
    // (`histogram_quantile(0.99, rate(…_bucket[5m]))`; the summary above is since the start).
    let mut per_tenant: BTreeMap<&str, Stat> = BTreeMap::new();
    for (k, s) in stats {
        per_tenant.entry(&k.tenant).or_insert_with(Stat::new).merge(s);
    }
    out += "# HELP terrace_proxy_request_duration_seconds Time from a request's arrival to its reply, per tenant.\n# TYPE terrace_proxy_request_duration_seconds histogram\n";
    for (tenant, s) in &per_tenant {
        let t = escape(tenant);
        for le in BUCKETS_US {
            let n = s.latency.count_between(0, *le);
            let _ = writeln!(out, "terrace_proxy_request_duration_seconds_bucket{{tenant=\"{t}\",le=\"{}\"}} {n}", *le as f64 / 1e6);
        }
        let _ = writeln!(out, "terrace_proxy_request_duration_seconds_bucket{{tenant=\"{t}\",le=\"+Inf\"}} {}", s.latency.len());
        let _ = writeln!(out, "terrace_proxy_request_duration_seconds_sum{{tenant=\"{t}\"}} {}", s.latency.mean() * s.latency.len() as f64 / 1e6);
        let _ = writeln!(out, "terrace_proxy_request_duration_seconds_count{{tenant=\"{t}\"}} {}", s.latency.len());
    }
    let mut last = "";
    for (name, help, value) in gauges {
        let base = name.split('{').next().unwrap_or(name);
        if base != last {
            let _ = writeln!(out, "# HELP {base} {help}\n# TYPE {base} gauge");
            last = base;
        }
        let _ = writeln!(out, "{name} {value}");
    }
    out
}

/// `TERRACE.LATENCY TAKE`'s answer: per tenant, its requests since the last take — calls,
/// errors and the latency histogram as [microseconds, count] pairs (the recorded values, at
/// two significant digits), so that the console can merge several proxies' exactly.
pub fn interval_json(taken: &BTreeMap<Arc<str>, Stat>) -> String {
    let tenants: serde_json::Map<String, serde_json::Value> = taken
        .iter()
        .map(|(tenant, s)| {
            let buckets: Vec<[u64; 2]> = s.latency.iter_recorded().map(|v| [v.value_iterated_to(), v.count_at_value()]).collect();
            (tenant.to_string(), serde_json::json!({ "calls": s.calls, "errors": s.errors, "latency_us": buckets }))
        })
        .collect();
    serde_json::Value::Object(tenants).to_string()
}

/// INFO's `commandstats` and `latencystats` sections (Redis 7's layout), one tenant's.
pub fn info_sections(stats: &BTreeMap<Key, Stat>, tenant: &str, protocol: &str) -> (String, String) {
    let mut cmd = String::from("# Commandstats\r\n");
    let mut lat = String::from("# Latencystats\r\n");
    for (k, s) in stats.iter().filter(|(k, _)| &*k.tenant == tenant && k.protocol == protocol) {
        let usec = (s.latency.mean() * s.latency.len() as f64) as u64;
        let per = if s.calls > 0 { usec as f64 / s.calls as f64 } else { 0.0 };
        let _ = write!(cmd, "cmdstat_{}:calls={},usec={usec},usec_per_call={per:.2},rejected_calls=0,failed_calls={}\r\n", k.command, s.calls, s.errors);
        let h = &s.latency;
        let _ = write!(
            lat,
            "latency_percentiles_usec_{}:p50={:.3},p99={:.3},p99.9={:.3}\r\n",
            k.command,
            h.value_at_quantile(0.5) as f64,
            h.value_at_quantile(0.99) as f64,
            h.value_at_quantile(0.999) as f64
        );
    }
    (cmd, lat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_tenants_measurements_go() {
        let reg = Registry::default();
        let r = reg.recorder();
        for tenant in ["shop", "gone"] {
            r.record(&Key { tenant: tenant.into(), protocol: "redis", command: "get" }, Duration::from_micros(100), false);
        }
        reg.retain_tenants(&|t| t == "shop");
        assert_eq!(reg.snapshot().keys().map(|k| &*k.tenant).collect::<Vec<_>>(), ["shop"]);
        assert_eq!(reg.take_interval().keys().map(|t| &**t).collect::<Vec<_>>(), ["shop"]);
    }

    #[test]
    fn merges_threads_and_renders_prometheus() {
        let reg = Registry::default();
        let (a, b) = (reg.recorder(), reg.recorder());
        let key = Key { tenant: "default".into(), protocol: "redis", command: "get" };
        a.record(&key, Duration::from_micros(100), false);
        b.record(&key, Duration::from_micros(300), true);
        let snap = reg.snapshot();
        assert_eq!(snap[&key].calls, 2);
        assert_eq!(snap[&key].errors, 1);
        let text = prometheus(&snap, &[("terrace_proxy_connected_clients".into(), "Clients connected.", 3.0)]);
        assert!(text.contains("terrace_proxy_commands_total{tenant=\"default\",protocol=\"redis\",command=\"get\"} 2\n"), "{text}");
        assert!(text.contains("terrace_proxy_command_latency_seconds_count{tenant=\"default\",protocol=\"redis\",command=\"get\"} 2\n"));
        assert!(text.contains("# TYPE terrace_proxy_connected_clients gauge\nterrace_proxy_connected_clients 3\n"));
        assert!(text.contains("terrace_proxy_request_duration_seconds_bucket{tenant=\"default\",le=\"0.00025\"} 1\n"), "{text}");
        assert!(text.contains("terrace_proxy_request_duration_seconds_bucket{tenant=\"default\",le=\"+Inf\"} 2\n"), "{text}");
        let (cmd, lat) = info_sections(&snap, "default", "redis");
        assert!(cmd.contains("cmdstat_get:calls=2,"), "{cmd}");
        assert!(lat.contains("latency_percentiles_usec_get:p50="), "{lat}");
        reg.reset();
        assert!(reg.snapshot().is_empty());
        // The interval since the last take: both threads' requests, then none.
        let taken = reg.take_interval();
        assert_eq!((taken[&key.tenant].calls, taken[&key.tenant].errors), (2, 1));
        let doc: serde_json::Value = serde_json::from_str(&interval_json(&taken)).unwrap();
        let buckets = doc["default"]["latency_us"].as_array().unwrap();
        assert_eq!(buckets.iter().map(|b| b[1].as_u64().unwrap()).sum::<u64>(), 2, "{doc}");
        assert!(reg.take_interval().is_empty(), "taken once");
    }
}
