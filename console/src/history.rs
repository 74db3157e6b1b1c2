//! The history: every `sample_ms` (10 s) the coordinator samples every engine, replica and
//! proxy, and every tenant over all of them (with its usage: keys, logical and stored bytes),
//! into SQLite (`db::add_node_sample`,
//! `db::add_tenant_samples`; bounded by `db::downsample_history`). Engines give totals (INFO,
//! `TERRACE.WORKLOAD`'s counters) whose differences over the interval become rates; proxies
//! give the interval's latency histograms per tenant (`TERRACE.LATENCY TAKE`), merged here so
//! that percentiles over several proxies are exact.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::db::{self, NodeSample, TenantSample};
use crate::nodes::Node;
use crate::reconcile::Desired;
use crate::Console;

/// Totals seen at the previous sample (at Unix seconds), for rates.
#[derive(Default)]
pub struct Previous {
    engines: HashMap<String, (i64, EngineTotals)>,
    tenants: HashMap<String, (i64, TenantTotals)>,
    /// Each tenant's last sample (the alerts read it).
    pub latest: HashMap<String, TenantSample>,
    /// The alerts at the last sample (raising or clearing one is an event).
    alerts: Vec<crate::alerts::Alert>,
}

#[derive(Clone, Copy, Default)]
struct EngineTotals {
    hits: f64,
    misses: f64,
    evicted: f64,
    oom: f64,
}

#[derive(Clone, Default)]
struct TenantTotals {
    hits: f64,
    misses: f64,
    oom: f64,
    by_class: BTreeMap<String, f64>,
}

/// A latency histogram as [microseconds, count] pairs, merged from several proxies.
#[derive(Default)]
pub struct Latency(BTreeMap<u64, u64>);

impl Latency {
    fn add(&mut self, pairs: &Value) {
        for p in pairs.as_array().into_iter().flatten() {
            if let (Some(us), Some(n)) = (p[0].as_u64(), p[1].as_u64()) {
                *self.0.entry(us).or_default() += n;
            }
        }
    }

    /// The value at quantile `q` (None: no request).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total: u64 = self.0.values().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        self.0
            .iter()
            .find(|(_, n)| {
                seen += **n;
                seen >= rank
            })
            .map(|(us, _)| *us as f64)
    }
}

/// A rate per second from two totals `dt` seconds apart (None: no earlier total, or a
/// counter that went back — a restart).
fn rate(now: f64, before: Option<f64>, dt: i64) -> Option<f64> {
    let before = before?;
    (dt > 0 && now >= before).then(|| (now - before) / dt as f64)
}

/// A ratio of hits over lookups in the interval (None: no lookup).
fn ratio(hits: Option<f64>, misses: Option<f64>) -> Option<f64> {
    let (h, m) = (hits?, misses?);
    (h + m > 0.0).then(|| h / (h + m))
}

fn count_of(stat: Option<&String>) -> f64 {
    // errorstat_OOM:count=3
    stat.and_then(|v| v.strip_prefix("count=")).and_then(|n| n.parse().ok()).unwrap_or(0.0)
}

/// Samples everything every `sample` interval while this console coordinates (a loop of its
/// own: a change made through the API does not wait for a sample).
pub async fn run(console: std::sync::Arc<Console>) {
    loop {
        if console.coordination.leading() {
            let members = console.state.lock().members.clone();
            match crate::reconcile::desired(&console.db, &members).await {
                Ok(want) => sample(&console, &want).await,
                Err(e) => tracing::warn!(error = %e, "history: cannot read the desired state"),
            }
        }
        tokio::time::sleep(console.config.sample).await;
    }
}

/// How many tenants' TERRACE.WORKLOAD go in one round trip.
const WORKLOAD_BATCH: usize = 256;

/// One sample of everything; then the history is bounded.
pub async fn sample(console: &Console, want: &Desired) {
    let at = db::now();
    let password = &console.config.engine_auth;
    let lags: HashMap<String, i64> = console.state.lock().members.iter().filter_map(|m| Some((m.address.clone(), m.lag?))).collect();
    // Proxies: their interval's latency per tenant.
    let mut tenant_latency: HashMap<String, Latency> = HashMap::new();
    for addr in db::proxies(&console.db).await.unwrap_or_default() {
        let got = async {
            let mut n = Node::proxy(&addr, console.config.proxy_admin_password.as_deref()).await?;
            let info = n.info("all").await?;
            let taken = n.json(&["TERRACE.LATENCY", "TAKE"]).await?;
            Ok::<_, crate::nodes::NodeError>((info, taken))
        }
        .await;
        let Ok((info, taken)) = got else { continue };
        let mut all = Latency::default();
        for (tenant, t) in taken.as_object().into_iter().flatten() {
            all.add(&t["latency_us"]);
            tenant_latency.entry(tenant.clone()).or_default().add(&t["latency_us"]);
        }
        let num = |k: &str| info.get(k).and_then(|v| v.parse::<f64>().ok());
        let s = NodeSample {
            at,
            resolution: console.config.sample.as_secs().max(1) as i64,
            kind: "proxy".into(),
            ops_per_sec: num("instantaneous_ops_per_sec"),
            p50_us: all.quantile(0.5),
            p99_us: all.quantile(0.99),
            clients: num("connected_clients"),
            ..Default::default()
        };
        if let Err(e) = db::add_node_sample(&console.db, &addr, &s).await {
            tracing::warn!(error = %e, "cannot store a proxy's sample");
        }
    }
    // Engines (primaries and replicas): INFO's totals and each tenant's counters.
    let replicas: Vec<String> = db::replicas(&console.db).await.unwrap_or_default().into_iter().map(|(a, _)| a).collect();
    let mut tenants: HashMap<String, (TenantTotals, db::Usage)> = HashMap::new();
    for addr in want.engines.iter().chain(&replicas) {
        let Ok(mut n) = Node::engine(addr, password).await else { continue };
        let Ok(info) = n.info("all").await else { continue };
        let num = |k: &str| info.get(k).and_then(|v| v.parse::<f64>().ok());
        let totals = EngineTotals {
            hits: num("keyspace_hits").unwrap_or(0.0),
            misses: num("keyspace_misses").unwrap_or(0.0),
            evicted: num("evicted_keys").unwrap_or(0.0),
            oom: count_of(info.get("errorstat_OOM")),
        };
        let previous = console.history.lock().engines.insert(addr.clone(), (at, totals));
        let dt = previous.map_or(0, |(t, _)| at - t);
        let before = previous.map(|(_, p)| p);
        let s = NodeSample {
            at,
            resolution: console.config.sample.as_secs().max(1) as i64,
            kind: "engine".into(),
            ops_per_sec: num("instantaneous_ops_per_sec"),
            hit_ratio: ratio(rate(totals.hits, before.map(|b| b.hits), dt), rate(totals.misses, before.map(|b| b.misses), dt)),
            used_memory: num("used_memory"),
            maxmemory: num("maxmemory").filter(|m| *m > 0.0),
            evicted_per_sec: rate(totals.evicted, before.map(|b| b.evicted), dt),
            oom_per_sec: rate(totals.oom, before.map(|b| b.oom), dt),
            repl_lag: lags.get(addr).map(|l| *l as f64),
            clients: num("connected_clients"),
            ..Default::default()
        };
        if let Err(e) = db::add_node_sample(&console.db, addr, &s).await {
            tracing::warn!(error = %e, "cannot store an engine's sample");
        }
        if replicas.contains(addr) {
            continue; // (a tenant's operations are its primaries')
        }
        // Every tenant's counters, many to a round trip (a thousand tenants, one round trip
        // each, made a sample take seconds).
        let mut workloads = Vec::with_capacity(want.tenants.len());
        for batch in want.tenants.chunks(WORKLOAD_BATCH) {
            let commands: Vec<Vec<Vec<u8>>> = batch.iter().map(|t| vec![b"TERRACE.WORKLOAD".to_vec(), t.name.as_bytes().to_vec()]).collect();
            let Ok(replies) = n.pipeline_each::<String>(&commands).await else { break };
            workloads.extend(batch.iter().zip(replies));
        }
        for (t, reply) in workloads {
            let Some(w) = reply.ok().and_then(|text| serde_json::from_str::<Value>(&text).ok()) else { continue };
            let (sum, usage) = tenants
                .entry(t.name.clone())
                .or_insert_with(|| (TenantTotals::default(), db::Usage { at, keys: 0, logical_bytes: 0.0, stored_bytes: 0.0, qps: 0.0 }));
            let c = &w["counters"];
            sum.hits += c["hits"].as_f64().unwrap_or(0.0);
            sum.misses += c["misses"].as_f64().unwrap_or(0.0);
            sum.oom += c["oom_refused"].as_f64().unwrap_or(0.0);
            for (class, v) in c["ops_by_class"].as_object().into_iter().flatten() {
                *sum.by_class.entry(class.clone()).or_default() += v.as_f64().unwrap_or(0.0);
            }
            usage.keys += w["keys"].as_i64().unwrap_or(0);
            usage.logical_bytes += w["bytes"]["logical"].as_f64().unwrap_or(0.0);
            usage.stored_bytes += w["bytes"]["entries"].as_f64().unwrap_or(0.0) + w["bytes"]["table"].as_f64().unwrap_or(0.0);
            usage.qps += w["qps_1m"].as_f64().unwrap_or(0.0);
        }
    }
    let mut samples = Vec::with_capacity(want.tenants.len());
    for t in &want.tenants {
        let Some((totals, usage)) = tenants.remove(&t.name) else { continue };
        let used = usage.logical_bytes;
        let previous = console.history.lock().tenants.insert(t.name.clone(), (at, totals.clone()));
        let dt = previous.as_ref().map_or(0, |(p, _)| at - p);
        let before = previous.map(|(_, p)| p);
        let by_class: BTreeMap<String, f64> = totals
            .by_class
            .iter()
            .filter_map(|(class, n)| Some((class.clone(), rate(*n, before.as_ref().map(|b| b.by_class.get(class).copied().unwrap_or(0.0)), dt)?)))
            .filter(|(_, r)| *r > 0.0)
            .collect();
        let latency = tenant_latency.remove(&t.name).unwrap_or_default();
        let s = TenantSample {
            at,
            resolution: console.config.sample.as_secs().max(1) as i64,
            ops_per_sec: before.as_ref().map(|_| by_class.values().sum()),
            hit_ratio: ratio(rate(totals.hits, before.as_ref().map(|b| b.hits), dt), rate(totals.misses, before.as_ref().map(|b| b.misses), dt)),
            used_bytes: Some(used),
            quota_bytes: t.max_memory.map(|m| m as f64),
            oom_per_sec: rate(totals.oom, before.as_ref().map(|b| b.oom), dt),
            p50_us: latency.quantile(0.5),
            p99_us: latency.quantile(0.99),
            by_class,
        };
        console.history.lock().latest.insert(t.name.clone(), s.clone());
        samples.push((t.name.clone(), usage, s));
    }
    if let Err(e) = db::add_tenant_samples(&console.db, &samples).await {
        tracing::warn!(error = %e, "cannot store the tenants' samples");
    }
    console.history.lock().latest.retain(|name, _| want.tenants.iter().any(|t| t.name == *name));
    raise_and_clear_alerts(console).await;
    if let Err(e) = db::downsample_history(&console.db, at).await {
        tracing::warn!(error = %e, "cannot bound the history");
    }
}

/// The alerts now against those of the last sample: each raised or cleared is an event.
async fn raise_and_clear_alerts(console: &Console) {
    let now = {
        let st = console.state.lock();
        let h = console.history.lock();
        crate::alerts::current(&st.proxies, &st.engines, &st.members, &h.latest)
    };
    let before = std::mem::replace(&mut console.history.lock().alerts, now.clone());
    let (raised, cleared) = crate::alerts::changes(&before, &now);
    for a in raised {
        let _ = db::add_event(&console.db, "alert", &a.message).await;
    }
    for a in cleared {
        let _ = db::add_event(&console.db, "alert cleared", &format!("cleared: {}", a.message)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_merged_histograms_are_exact() {
        let mut l = Latency::default();
        l.add(&serde_json::json!([[100, 98], [5000, 1]]));
        l.add(&serde_json::json!([[100, 0], [20000, 1]]));
        assert_eq!(l.quantile(0.5), Some(100.0));
        assert_eq!(l.quantile(0.99), Some(5000.0));
        assert_eq!(l.quantile(1.0), Some(20000.0));
        assert_eq!(Latency::default().quantile(0.5), None);
    }

    #[test]
    fn rates_need_an_earlier_total_and_survive_no_restart() {
        assert_eq!(rate(30.0, Some(10.0), 10), Some(2.0));
        assert_eq!(rate(30.0, None, 10), None, "the first sample");
        assert_eq!(rate(5.0, Some(10.0), 10), None, "a counter that went back: a restart");
        assert_eq!(ratio(Some(3.0), Some(1.0)), Some(0.75));
        assert_eq!(ratio(Some(0.0), Some(0.0)), None, "no lookups: no ratio");
    }
}
