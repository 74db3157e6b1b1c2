//! What the pages show: askama templates (`templates/`) and the view models that turn engine
//! JSON (`TERRACE.ADVISE`, `TERRACE.WORKLOAD`, `TERRACE.COMPRESSION STATS`) into tables and
//! charts.

use askama::Template;
use askama_web::WebTemplate;
use serde_json::Value;
use terrace_cost::breakeven::{break_even, UnitCosts};

use crate::charts::{self, Axes, Marker, Point, Series};
use crate::db::{ApiToken, Retrain, Usage};
use crate::reconcile::NodeStatus;
use crate::tenants::{Tenant, COMPRESSIONS, COMPRESSION_MODES, STORAGE_MODES, TIER_POLICIES, WAL_MODES};

pub fn human_bytes<T: std::borrow::Borrow<f64>>(v: T) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = *v.borrow();
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

pub fn opt_bytes(v: &Option<u64>) -> String {
    v.map(|b| human_bytes(b as f64)).unwrap_or_else(|| "—".into())
}

pub fn opt_num(v: &Option<u64>) -> String {
    v.map(|b| b.to_string()).unwrap_or_else(|| "—".into())
}

/// What every page's frame needs: the user, the CSRF token for its forms, and the one
/// tenant the user is for (None: the whole appliance; the menu then shows that tenant).
pub struct Frame {
    pub user: String,
    pub csrf: String,
    pub tenant: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "login.html")]
pub struct LoginPage {
    pub csrf: String,
    pub error: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    pub frame: Frame,
    pub proxies: Vec<NodeStatus>,
    pub engines: Vec<NodeStatus>,
    pub tenants: usize,
    pub alerts: Vec<crate::alerts::Alert>,
}

impl OverviewPage {
    /// Whether a node's row is flagged by an alert.
    pub fn flagged(&self, n: &NodeStatus) -> bool {
        let subject = format!("{} {}", n.kind, n.address);
        self.alerts.iter().any(|a| a.subject == subject)
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "tenants.html")]
pub struct TenantsPage {
    pub frame: Frame,
    pub tenants: Vec<Tenant>,
}

#[derive(Template, WebTemplate)]
#[template(path = "tenant_form.html")]
pub struct TenantFormPage {
    pub frame: Frame,
    /// None: a new tenant.
    pub tenant: Option<Tenant>,
    pub error: Option<String>,
    /// The fields as the operator submitted them, when the form comes back with an error:
    /// shown again instead of the stored values (passwords never are).
    pub submitted: Option<std::collections::HashMap<String, String>>,
    pub compressions: &'static [&'static str],
    pub compression_modes: &'static [&'static str],
    pub storage_modes: &'static [&'static str],
    pub tier_policies: &'static [&'static str],
    pub wal_modes: &'static [&'static str],
}

/// Whether a form's checkbox `name` (value "1") was ticked: a form sends nothing for one
/// that is not.
pub fn checked(fields: &std::collections::HashMap<String, String>, name: &str) -> bool {
    fields.get(name).is_some_and(|v| v == "1")
}

impl TenantFormPage {
    pub fn new(frame: Frame, tenant: Option<Tenant>, error: Option<String>) -> TenantFormPage {
        TenantFormPage {
            frame,
            tenant,
            error,
            submitted: None,
            compressions: &COMPRESSIONS,
            compression_modes: &COMPRESSION_MODES,
            storage_modes: &STORAGE_MODES,
            tier_policies: &TIER_POLICIES,
            wal_modes: &WAL_MODES,
        }
    }

    /// The form as submitted (a form that came back with an error keeps what was typed).
    pub fn with_submitted(mut self, fields: std::collections::HashMap<String, String>) -> TenantFormPage {
        self.submitted = Some(fields);
        self
    }

    fn field(&self, key: &str, f: impl Fn(&Tenant) -> String) -> String {
        if let Some(s) = &self.submitted {
            return s.get(key).cloned().unwrap_or_default();
        }
        self.tenant.as_ref().map(f).unwrap_or_default()
    }

    /// A new tenant's name as submitted.
    pub fn name(&self) -> String {
        self.field("name", |t| t.name.clone())
    }

    pub fn max_memory(&self) -> String {
        self.field("max_memory", |t| t.max_memory.map(terrace_commands::settings::format_size).unwrap_or_default())
    }

    pub fn max_qps(&self) -> String {
        self.field("max_qps", |t| t.max_qps.map(|m| m.to_string()).unwrap_or_default())
    }

    pub fn memcache_port(&self) -> String {
        self.field("memcache_port", |t| t.memcache_port.map(|m| m.to_string()).unwrap_or_default())
    }

    pub fn replica_reads(&self) -> bool {
        match &self.submitted {
            Some(s) => checked(s, "replica_reads"),
            None => self.tenant.as_ref().is_some_and(|t| t.replica_reads),
        }
    }

    pub fn selected(&self, which: &str, value: &str) -> bool {
        if let Some(v) = self.submitted.as_ref().and_then(|s| s.get(which)) {
            return v == value;
        }
        let current = match (&self.tenant, which) {
            (Some(t), "compression") => t.compression.as_str(),
            (Some(t), "compression_mode") => t.compression_mode.as_str(),
            (Some(t), "storage_mode") => t.storage_mode.as_str(),
            (Some(t), "tier_policy") => t.tier_policy.as_str(),
            (Some(t), "wal") => t.wal.as_str(),
            (None, "compression") => "none",
            (None, "compression_mode") => "eager",
            (None, "storage_mode") => "cache",
            _ => "engine",
        };
        current == value
    }
}

/// One dictionary generation of one engine.
pub struct Generation {
    pub engine: String,
    pub slot: String,
    pub codec: String,
    /// Raw bytes per stored byte on held-out samples.
    pub trained_ratio: String,
    pub values: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "tenant.html")]
pub struct TenantPage {
    pub frame: Frame,
    pub tenant: Tenant,
    pub usage_svg: String,
    /// Its history: operations by class, hit ratio, latency, memory against quota, OOM.
    pub history_svgs: Vec<String>,
    pub latest: Option<Usage>,
    pub compression_ratio: Option<f64>,
    /// Keys and bytes in the storage tier over the engines (storage-backed tenants).
    pub storage: Option<(u64, u64)>,
    pub generations: Vec<Generation>,
    pub retrain: Option<Retrain>,
    pub advice: Option<AdvisorView>,
    pub engine_errors: Vec<String>,
}

impl TenantPage {
    pub fn retrain_running(&self) -> bool {
        self.retrain.as_ref().is_some_and(|r| r.status == "running")
    }

    pub fn retrain_total(&self) -> i64 {
        self.retrain.as_ref().map(|r| r.engines_total).unwrap_or(1)
    }

    pub fn retrain_done(&self) -> i64 {
        self.retrain.as_ref().map(|r| r.engines_done).unwrap_or(0)
    }

    pub fn retrain_summary(&self) -> String {
        let Some(r) = &self.retrain else { return String::new() };
        let mut s = format!("{} — {} of {} engines", r.status, r.engines_done, r.engines_total);
        if let Some(Value::Object(m)) = &r.result {
            for (engine, v) in m {
                if let Some(e) = v.get("error").and_then(Value::as_str) {
                    s += &format!("; {engine}: {e}");
                } else {
                    let ratio =
                        v.get("trained_ratio").and_then(Value::as_f64).filter(|r| *r > 0.0).map(|r| format!("{:.2}×", 1.0 / r)).unwrap_or_else(|| "—".into());
                    let generation = v.get("generation").map(|g| g.to_string()).unwrap_or_default();
                    s += &format!("; {engine}: generation {generation}, trained ratio {ratio}");
                }
            }
        }
        s
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "advisor.html")]
pub struct AdvisorPage {
    pub frame: Frame,
    pub tenant: String,
    pub advice: Option<AdvisorView>,
    pub error: Option<String>,
    pub message: Option<String>,
    /// Every engine, for choosing whose view to show.
    pub engines: Vec<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "topology.html")]
pub struct TopologyPage {
    pub frame: Frame,
    pub engines: Vec<String>,
    /// Primaries and replicas as the coordinator last saw them (empty: no replicas).
    pub members: Vec<crate::failover::Member>,
    pub events: Vec<crate::db::Event>,
    pub ranges: Vec<(u16, u16, usize)>,
    pub proxies: Vec<String>,
    pub map_svg: String,
    /// The latest slot moves, newest first, and the one under way's progress.
    pub moves: Vec<crate::db::SlotMove>,
    pub progress: Option<crate::moves::Progress>,
    pub paused: bool,
    /// A plan shown for the operator to apply (and the engine it drains).
    pub plan: Option<crate::moves::Plan>,
    pub plan_error: Option<String>,
    pub drain: Option<String>,
    /// Engines can be added without an address (`terrace up` starts them).
    pub can_start: bool,
}

impl TopologyPage {
    /// Whether engine `address` owns no slot (it may be removed).
    pub fn owns_nothing(&self, address: &str) -> bool {
        let idx = self.engines.iter().position(|e| e == address);
        !self.ranges.iter().any(|(_, _, e)| Some(*e) == idx)
    }

    /// A byte count as the pages show sizes.
    pub fn size(&self, bytes: &i64) -> String {
        match *bytes {
            b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
            b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
            b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
            b => format!("{b} B"),
        }
    }

    /// A move's progress: live for the one under way, its totals otherwise.
    pub fn move_progress(&self, m: &crate::db::SlotMove) -> String {
        match &self.progress {
            Some(p) if p.id == m.id => {
                let of = m.estimated_keys.map(|k| format!(" of ~{k}")).unwrap_or_default();
                format!("{}: {} keys{of} copied, {} caught up, {} deleted", p.phase, p.keys_copied, p.keys_caught_up, p.keys_deleted)
            }
            _ => format!("{} keys, {}", m.keys, self.size(&m.bytes)),
        }
    }

    pub fn engine_address(&self, index: &usize) -> String {
        self.engines.get(*index).cloned().unwrap_or_default()
    }

    /// A unix time as the pages show times.
    pub fn when(&self, at: &i64) -> String {
        crate::charts::date_time(*at)
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "tokens.html")]
pub struct TokensPage {
    pub frame: Frame,
    pub tokens: Vec<ApiToken>,
    /// A token just created: shown this once.
    pub created: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "account.html")]
pub struct AccountPage {
    pub frame: Frame,
    pub message: Option<String>,
    pub error: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "error.html")]
pub struct ErrorPage {
    pub frame: Option<Frame>,
    pub status: u16,
    pub message: String,
}

/// One evaluated configuration in the advisor's table.
pub struct OptionRow {
    pub name: String,
    pub setup: String,
    pub cpqps: String,
    pub cpgb: String,
    pub pc: String,
    pub sc: String,
    pub c: String,
    pub category: String,
    pub instances: String,
    pub recommended: bool,
    pub current: bool,
    /// Why the engines cannot run it (None: they can).
    pub cannot_run: Option<String>,
    /// What Apply sets on the tenant for it.
    pub compression: String,
    pub storage_mode: String,
    /// The confirmation Apply asks: its effect on cost, memory and CPU against today's.
    pub effect: String,
}

pub struct BreakEvenRow {
    pub slow: String,
    pub interval: String,
    pub meaning: String,
}

/// The cost advisor's view of one tenant (from one engine: each engine holds an even share of
/// the slots, so each sees the same workload at its share of the rate and the data).
pub struct AdvisorView {
    pub engine: String,
    pub category: String,
    pub current: String,
    pub recommended: String,
    pub expected_change: String,
    pub estimate: bool,
    pub reasons: Vec<String>,
    pub features: Vec<(String, String)>,
    pub applicable: Vec<(String, String, String)>,
    pub options: Vec<OptionRow>,
    pub break_even: Vec<BreakEvenRow>,
    pub pcsc_svg: String,
    pub mrc_svg: String,
    pub optimal_cache_ratio: Option<f64>,
}

impl OptionRow {
    /// Whether Apply is offered for it: the engines can run it and it is not today's.
    pub fn can_apply(&self) -> bool {
        self.cannot_run.is_none() && !self.current
    }

    /// The PMem tier is an engine setting: Apply sets the tenant's part only.
    pub fn engine_part(&self) -> bool {
        self.setup.contains("PMem")
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn fmt(v: &Value) -> String {
    match v {
        Value::Null => "—".into(),
        Value::Number(n) => n.as_f64().map(charts::number).unwrap_or_default(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn setup_text(s: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(c) = s["compression"].as_str() {
        parts.push(format!("compression {c}"));
    }
    if s["pmem"].as_bool() == Some(true) {
        parts.push("PMem tier".into());
    }
    if let Some(m) = s["storage_mode"].as_str() {
        parts.push(format!("storage {m}"));
    }
    if parts.is_empty() {
        "all in DRAM, raw".into()
    } else {
        parts.join(", ")
    }
}

/// What applying configuration `name` changes against today's, for the confirmation: the
/// cost (C), the memory it takes (SC, space cost) and the CPU (PC, performance cost).
fn effect(name: &str, e: &Value, today: Option<&Value>) -> String {
    let change = |key: &str| match (e[key].as_f64(), today.and_then(|t| t[key].as_f64())) {
        (Some(new), Some(old)) if old > 0.0 => format!("{} → {} ({:+.0}%)", charts::number(old), charts::number(new), (new / old - 1.0) * 100.0),
        (Some(new), _) => charts::number(new),
        _ => "—".into(),
    };
    format!(
        "Apply {name}? Cost {}; memory (space cost) {}; CPU (performance cost) {}. Values are re-encoded in the background; the tenant's quota is unchanged.",
        change("c"),
        change("sc"),
        change("pc")
    )
}

impl AdvisorView {
    /// The configurations' names, for an error naming the choices.
    pub fn option_names(&self) -> String {
        self.options.iter().map(|o| o.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// From an engine's `TERRACE.ADVISE` and `TERRACE.WORKLOAD` answers.
    pub fn build(engine: &str, advise: &Value, workload: &Value) -> AdvisorView {
        let a = &advise["advice"];
        let recommended = a["recommended"].as_str().unwrap_or("").to_string();
        let current = a["current"].as_str().unwrap_or("").to_string();
        let empty = Vec::new();
        let options_json = a["options"].as_array().unwrap_or(&empty);
        let today = options_json.iter().find(|o| o["name"].as_str() == Some(current.as_str())).map(|o| &o["evaluation"]);
        let options: Vec<OptionRow> = options_json
            .iter()
            .map(|o| {
                let e = &o["evaluation"];
                let name = o["name"].as_str().unwrap_or("").to_string();
                OptionRow {
                    cannot_run: o["cannot_run"].as_str().map(str::to_string),
                    compression: o["setup"]["compression"].as_str().unwrap_or("none").to_string(),
                    storage_mode: o["setup"]["storage_mode"].as_str().unwrap_or("cache").to_string(),
                    effect: effect(&name, e, today),
                    setup: setup_text(&o["setup"]),
                    cpqps: fmt(&e["cpqps"]),
                    cpgb: fmt(&e["cpgb"]),
                    pc: fmt(&e["pc"]),
                    sc: fmt(&e["sc"]),
                    c: fmt(&e["c"]),
                    category: fmt(&e["category"]),
                    instances: fmt(&e["instances"]),
                    recommended: name == recommended,
                    current: name == current,
                    name,
                }
            })
            .collect();
        let points: Vec<Point> = options_json
            .iter()
            .map(|o| Point {
                x: num(&o["evaluation"]["pc"]).unwrap_or(f64::NAN),
                y: num(&o["evaluation"]["sc"]).unwrap_or(f64::NAN),
                label: o["name"].as_str().unwrap_or("").to_string(),
                highlight: o["name"].as_str() == Some(recommended.as_str()),
            })
            .collect();
        let pcsc_svg = charts::balance(
            &Axes {
                id: "pcsc-chart",
                title: "Performance cost vs space cost",
                x_label: "PC (instance units)",
                y_label: "SC (instance units)",
                x_fmt: charts::number,
                y_fmt: charts::number,
            },
            &points,
        );
        let curve: Vec<(f64, f64)> =
            workload["mrc"]["points"].as_array().unwrap_or(&empty).iter().filter_map(|p| Some((p[0].as_f64()?, p[2].as_f64()?))).collect();
        let optimal_cache_ratio = options_json
            .iter()
            .filter(|o| o["name"].as_str() == Some(recommended.as_str()))
            .find_map(|o| o["cache_ratio"].as_f64())
            .or_else(|| options_json.iter().find_map(|o| o["cache_ratio"].as_f64()));
        let markers: Vec<Marker> = optimal_cache_ratio.map(|r| Marker { x: r, label: format!("optimal cache ratio {:.0}%", r * 100.0) }).into_iter().collect();
        let mrc_svg = charts::line(
            &Axes {
                id: "mrc-chart",
                title: "Miss-ratio curve (LRU, sampled)",
                x_label: "cache size / data size",
                y_label: "miss ratio",
                x_fmt: charts::ratio,
                y_fmt: charts::ratio,
            },
            &[Series { name: "miss ratio".into(), points: curve }],
            &markers,
        );
        let record_bytes = workload["avg_record_bytes"].as_f64().unwrap_or(0.0);
        let unit = |o: &Value| Some(UnitCosts { cpqps: o["evaluation"]["cpqps"].as_f64()?, cpgb: o["evaluation"]["cpgb"].as_f64()? });
        let raw = options_json.iter().find(|o| o["name"].as_str() == Some("raw")).and_then(unit);
        let mut break_even_rows = Vec::new();
        if let Some(fast) = raw.filter(|_| record_bytes > 0.0) {
            for o in options_json.iter().filter(|o| o["name"].as_str() != Some("raw")) {
                let Some(slow) = unit(o) else { continue };
                let b = break_even(fast, slow, record_bytes);
                let (interval, meaning) = match b.seconds() {
                    Some(s) => (format!("{s:.0} s"), format!("records read more often than every {s:.0} s are cheaper kept raw in DRAM")),
                    None if slow.cpgb >= fast.cpgb => ("—".into(), "never cheaper per GB: keep every record raw in DRAM".into()),
                    None => ("—".into(), "no dearer per operation: every record belongs there".into()),
                };
                break_even_rows.push(BreakEvenRow { slow: o["name"].as_str().unwrap_or("").to_string(), interval, meaning });
            }
        }
        let f = &a["features"];
        let mut features: Vec<(String, String)> = vec![
            ("category".into(), fmt(&f["category"])),
            ("read ratio".into(), f["read_ratio"].as_f64().map(charts::ratio).unwrap_or_else(|| "—".into())),
            ("average record".into(), f["avg_record_bytes"].as_f64().map(human_bytes).unwrap_or_else(|| "—".into())),
            ("burstiness (peak / mean QPS)".into(), fmt(&f["burstiness"])),
            ("miss ratio at 20% cache".into(), f["miss_ratio_at_20"].as_f64().map(charts::ratio).unwrap_or_else(|| "—".into())),
            ("stored / raw bytes (compression)".into(), fmt(&f["compression_ratio"])),
        ];
        features.push(("QPS (1 min)".into(), fmt(&workload["qps_1m"])));
        features.push(("keys".into(), fmt(&workload["keys"])));
        features.push((
            "median access interval".into(),
            workload["access_interval_ms"]["median"].as_f64().map(|m| format!("{:.1} s", m / 1000.0)).unwrap_or_else(|| "—".into()),
        ));
        let applicable =
            a["applicable"].as_array().unwrap_or(&empty).iter().map(|x| (fmt(&x["feature"]), fmt(&x["optimization"]), fmt(&x["reason"]))).collect();
        AdvisorView {
            engine: engine.to_string(),
            category: fmt(&a["category"]),
            current,
            recommended,
            expected_change: a["expected_change"].as_f64().map(|c| format!("{:+.1}%", c * 100.0)).unwrap_or_else(|| "—".into()),
            estimate: a["estimate"].as_bool().unwrap_or(true),
            reasons: a["reasons"].as_array().unwrap_or(&empty).iter().filter_map(|r| r.as_str().map(str::to_string)).collect(),
            features,
            applicable,
            options,
            break_even: break_even_rows,
            pcsc_svg,
            mrc_svg,
            optimal_cache_ratio,
        }
    }
}

/// The usage chart of a tenant: logical and stored bytes over time.
pub fn usage_chart(samples: &[Usage]) -> String {
    let logical = Series { name: "logical bytes".into(), points: samples.iter().map(|u| (u.at as f64, u.logical_bytes)).collect() };
    let stored = Series { name: "stored bytes".into(), points: samples.iter().map(|u| (u.at as f64, u.stored_bytes)).collect() };
    charts::over_time(
        &Axes { id: "usage-chart", title: "Data over time", x_label: "time", y_label: "bytes", x_fmt: charts::clock, y_fmt: charts::bytes },
        &[logical, stored],
    )
}

/// A series over time from samples: (at, value) where the value is known.
fn series_of<S>(name: &str, samples: &[S], at: impl Fn(&S) -> i64, value: impl Fn(&S) -> Option<f64>) -> Series {
    Series { name: name.into(), points: samples.iter().filter_map(|s| Some((at(s) as f64, value(s)?))).collect() }
}

fn time_axes<'a>(id: &'a str, title: &'a str, y_label: &'a str, y_fmt: fn(f64) -> String) -> Axes<'a> {
    Axes { id, title, x_label: "time", y_label, x_fmt: charts::clock, y_fmt }
}

/// A tenant's history charts: operations per second by command class, hit ratio, the
/// proxies' latency percentiles, memory against its quota, OOM refusals.
pub fn tenant_history_charts(samples: &[crate::db::TenantSample]) -> Vec<String> {
    let at = |s: &crate::db::TenantSample| s.at;
    let classes: std::collections::BTreeSet<&String> = samples.iter().flat_map(|s| s.by_class.keys()).collect();
    let by_class: Vec<Series> = classes.iter().map(|c| series_of(c, samples, at, |s| Some(s.by_class.get(*c).copied().unwrap_or(0.0)))).collect();
    vec![
        charts::over_time(&time_axes("tenant-ops-chart", "Operations per second by command class", "ops/s", charts::number), &by_class),
        charts::over_time(
            &time_axes("tenant-hit-chart", "Hit ratio", "hits / lookups", charts::ratio),
            &[series_of("hit ratio", samples, at, |s| s.hit_ratio)],
        ),
        charts::over_time(
            &time_axes("tenant-latency-chart", "Latency at the proxies", "latency", charts::micros),
            &[series_of("p50", samples, at, |s| s.p50_us), series_of("p99", samples, at, |s| s.p99_us)],
        ),
        charts::over_time(
            &time_axes("tenant-memory-chart", "Memory against quota", "bytes", charts::bytes),
            &[series_of("logical bytes", samples, at, |s| s.used_bytes), series_of("quota", samples, at, |s| s.quota_bytes)],
        ),
        charts::over_time(
            &time_axes("tenant-oom-chart", "Writes refused (OOM) per second", "refusals/s", charts::number),
            &[series_of("OOM refusals", samples, at, |s| s.oom_per_sec)],
        ),
    ]
}

/// A node's history charts: for an engine, operations, hit ratio, memory against
/// `maxmemory`, evictions and OOM refusals, replication lag, clients; for a proxy,
/// operations, latency percentiles, clients.
pub fn node_history_charts(samples: &[crate::db::NodeSample], kind: &str) -> Vec<String> {
    let at = |s: &crate::db::NodeSample| s.at;
    let ops = charts::over_time(
        &time_axes("node-ops-chart", "Operations per second", "ops/s", charts::number),
        &[series_of("ops/s", samples, at, |s| s.ops_per_sec)],
    );
    let clients = charts::over_time(
        &time_axes("node-clients-chart", "Connected clients", "clients", charts::number),
        &[series_of("clients", samples, at, |s| s.clients)],
    );
    if kind == "proxy" {
        let latency = charts::over_time(
            &time_axes("node-latency-chart", "Latency (arrival to reply)", "latency", charts::micros),
            &[series_of("p50", samples, at, |s| s.p50_us), series_of("p99", samples, at, |s| s.p99_us)],
        );
        return vec![ops, latency, clients];
    }
    vec![
        ops,
        charts::over_time(&time_axes("node-hit-chart", "Hit ratio", "hits / lookups", charts::ratio), &[series_of("hit ratio", samples, at, |s| s.hit_ratio)]),
        charts::over_time(
            &time_axes("node-memory-chart", "Memory against maxmemory", "bytes", charts::bytes),
            &[series_of("used", samples, at, |s| s.used_memory), series_of("maxmemory", samples, at, |s| s.maxmemory)],
        ),
        charts::over_time(
            &time_axes("node-evictions-chart", "Evictions and OOM refusals per second", "per second", charts::number),
            &[series_of("evicted keys", samples, at, |s| s.evicted_per_sec), series_of("OOM refusals", samples, at, |s| s.oom_per_sec)],
        ),
        charts::over_time(
            &time_axes("node-lag-chart", "Replication lag (a replica's bytes behind)", "bytes", charts::bytes),
            &[series_of("lag", samples, at, |s| s.repl_lag)],
        ),
        clients,
    ]
}

#[derive(Template, WebTemplate)]
#[template(path = "keys.html")]
pub struct KeysPage {
    pub frame: Frame,
    pub tenant: String,
    pub pattern: String,
    pub page: crate::browse::KeyPage,
}

#[derive(Template, WebTemplate)]
#[template(path = "key.html")]
pub struct KeyPage {
    pub frame: Frame,
    pub tenant: String,
    pub key: crate::browse::KeyView,
}

/// A slow log entry as the page shows it.
pub struct SlowRow {
    pub time: i64,
    pub took: String,
    pub tenant: String,
    pub command: String,
    pub client: String,
    pub engine: String,
}

impl SlowRow {
    pub fn of(e: &Value) -> SlowRow {
        let args: Vec<&str> = e["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        SlowRow {
            time: e["time"].as_i64().unwrap_or(0),
            took: charts::micros(e["duration_us"].as_f64().unwrap_or(0.0)),
            tenant: e["tenant"].as_str().unwrap_or("").to_string(),
            command: args.join(" "),
            client: e["client"].as_str().unwrap_or("").to_string(),
            engine: e["engine"].as_str().unwrap_or("").to_string(),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "slowlog.html")]
pub struct SlowlogPage {
    pub frame: Frame,
    pub tenant: String,
    pub entries: Vec<SlowRow>,
    pub problems: Vec<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "users.html")]
pub struct UsersPage {
    pub frame: Frame,
    pub users: Vec<crate::db::User>,
    pub roles: [&'static str; 3],
}

#[derive(Template, WebTemplate)]
#[template(path = "events.html")]
pub struct EventsPage {
    pub frame: Frame,
    pub events: Vec<crate::db::Event>,
}

/// An event's before → after, field by field where both are objects.
pub fn changes(e: &crate::db::Event) -> String {
    let (before, after) = e.states();
    match (before.as_object(), after.as_object()) {
        (Some(b), Some(a)) => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            let lines: Vec<String> = keys
                .into_iter()
                .filter(|k| b.get(*k) != a.get(*k))
                .map(|k| format!("{k}: {} → {}", b.get(k).map_or("—".into(), Value::to_string), a.get(k).map_or("—".into(), Value::to_string)))
                .collect();
            if lines.is_empty() {
                "no change".into()
            } else {
                lines.join("\n")
            }
        }
        _ => format!("{} → {}", if before.is_null() { "—".into() } else { before.to_string() }, if after.is_null() { "—".into() } else { after.to_string() }),
    }
}

/// A time on a page: UTC with the date, marked with its instant for `console.js` to write in
/// the viewer's local time (HTML: the caller marks it `safe`; nothing in it comes from input).
pub fn when(unix: &i64) -> String {
    format!(r#"<time data-epoch="{unix}" data-span="86400">{}</time>"#, charts::date_time(*unix))
}

/// `when`, or "never".
pub fn when_opt(unix: &Option<i64>) -> String {
    unix.as_ref().map_or_else(|| "never".into(), when)
}

/// A key's time to live ("none": no expiry).
pub fn ttl(ms: &Option<i64>) -> String {
    ms.map_or_else(|| "none".into(), duration_ms)
}

/// A key's size in bytes ("—": unknown).
pub fn size(bytes: &Option<i64>) -> String {
    bytes.map_or_else(|| "—".into(), |b| human_bytes(b as f64))
}

pub fn opt_i64(v: &Option<i64>) -> String {
    v.map_or_else(|| "—".into(), |v| v.to_string())
}

/// Milliseconds for a person: "850 ms", "12 s", "3 min", "5 h", "2 days".
pub fn duration_ms(ms: i64) -> String {
    match ms {
        ms if ms < 1000 => format!("{ms} ms"),
        ms if ms < 120_000 => format!("{} s", ms / 1000),
        ms if ms < 7_200_000 => format!("{} min", ms / 60_000),
        ms if ms < 172_800_000 => format!("{} h", ms / 3_600_000),
        ms => format!("{} days", ms / 86_400_000),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "node.html")]
pub struct NodePage {
    pub frame: Frame,
    pub address: String,
    pub kind: String,
    pub status: Option<NodeStatus>,
    pub hours: i64,
    pub charts: Vec<String>,
}

/// A move not yet done, as the slot map shows it: its slots, where they go, and how far
/// it got (None: queued).
pub struct MovingSlots {
    pub id: i64,
    pub slots: String,
    pub target: usize,
    /// The phase and the share of its keys copied, while it runs.
    pub running: Option<(String, f64)>,
}

const ENGINE_COLORS: [&str; 6] = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2"];

/// The slot map as a bar: one colored span per range; under it, each slot of a move not yet
/// done — in its target's color while it moves (with how far), grey while queued — so every
/// slot's state is on the bar.
pub fn slot_map_svg(ranges: &[(u16, u16, usize)], moving: &[MovingSlots]) -> String {
    let x_of = |slot: f64| 10.0 + slot / 16384.0 * 540.0;
    let mut out = String::from(
        r##"<svg id="slot-map" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 560 74" role="img" aria-label="slot map"><title>Slot map</title>"##,
    );
    for (first, last, engine) in ranges {
        let x = x_of(*first as f64);
        let w = x_of(*last as f64 + 1.0) - x;
        out += &format!(
            r##"<rect x="{x:.1}" y="10" width="{w:.1}" height="24" fill="{}"><title>slots {first}-{last}: engine {engine}</title></rect>"##,
            ENGINE_COLORS[engine % ENGINE_COLORS.len()]
        );
        out += &format!(r##"<text x="{:.1}" y="64" font-size="11" text-anchor="middle">engine {engine}: {first}-{last}</text>"##, x + w / 2.0);
    }
    for m in moving {
        let Ok(set) = terrace_commands::slots::SlotSet::parse(&m.slots) else { continue };
        let (fill, opacity, what) = match &m.running {
            Some((phase, done)) => (
                ENGINE_COLORS[m.target % ENGINE_COLORS.len()],
                "0.6",
                format!("moving to engine {} ({phase}, {:.0}% of the keys copied)", m.target, done * 100.0),
            ),
            None => ("#9ca3af", "1", format!("queued to move to engine {}", m.target)),
        };
        for (first, last) in set.ranges() {
            let x = x_of(first as f64);
            let w = (x_of(last as f64 + 1.0) - x).max(0.5);
            out += &format!(
                r##"<rect class="moving" x="{x:.1}" y="37" width="{w:.1}" height="10" fill="{fill}" fill-opacity="{opacity}"><title>slots {first}-{last}: {what} (move #{})</title></rect>"##,
                m.id
            );
        }
    }
    out + "</svg>"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advisor_view_reads_the_engine_json() {
        let advise: Value = serde_json::json!({"advice": {"category": "space-critical", "current": "raw", "recommended": "storage tier (write-through)", "estimate": true, "expected_change": -0.5,
        "reasons": ["a", "b"], "features": {"read_ratio": 0.9, "avg_record_bytes": 100.0},
        "applicable": [{"feature": "space-critical", "optimization": "pmem-tier", "reason": "cheap"}],
        "options": [
            {"name": "raw", "cache_ratio": null, "setup": {"compression": null, "pmem": false, "storage_mode": null}, "evaluation": {"c": 1.0, "cpgb": 0.3, "cpqps": 6e-6, "pc": 0.2, "sc": 1.0, "instances": 1, "category": "space-critical"}},
            {"name": "storage tier (write-through)", "cache_ratio": 0.2, "setup": {"compression": null, "pmem": false, "storage_mode": "write-through"}, "evaluation": {"c": 0.5, "cpgb": 0.01, "cpqps": 4e-5, "pc": 0.5, "sc": 0.4, "instances": 1, "category": "balanced"}}
        ]}});
        let workload = serde_json::json!({"avg_record_bytes": 100.0, "mrc": {"points": [[0.1, 10.0, 0.8], [0.2, 20.0, 0.5], [1.0, 100.0, 0.0]]}});
        let v = AdvisorView::build("127.0.0.1:7001", &advise, &workload);
        assert_eq!(v.options.len(), 2);
        assert!(v.options[1].recommended && v.options[0].current);
        assert_eq!(v.optimal_cache_ratio, Some(0.2));
        assert!(v.mrc_svg.contains("optimal cache ratio 20%"));
        assert_eq!(v.break_even.len(), 1);
        // (4e-5 − 6e-6) / ((0.3 − 0.01) · 100 / 2^30) s
        let expect = (4e-5 - 6e-6) / ((0.3 - 0.01) * 100.0 / (1u64 << 30) as f64);
        assert_eq!(v.break_even[0].interval, format!("{expect:.0} s"));
        let wt = &v.options[1];
        assert!(wt.can_apply() && !v.options[0].can_apply(), "today's is not offered");
        assert_eq!((wt.compression.as_str(), wt.storage_mode.as_str()), ("none", "write-through"));
        assert!(wt.effect.starts_with("Apply storage tier (write-through)? Cost 1.00 → 0.50 (-50%); memory (space cost) 1.00 → 0.40 (-60%)"), "{}", wt.effect);
        assert_eq!(v.expected_change, "-50.0%");
    }

    #[test]
    fn the_slot_map_shows_each_moving_and_queued_slot() {
        let moving = [
            MovingSlots { id: 3, slots: "0-99 200".into(), target: 1, running: Some(("copying".into(), 0.25)) },
            MovingSlots { id: 4, slots: "300-399".into(), target: 1, running: None },
        ];
        let svg = slot_map_svg(&[(0, 8191, 0), (8192, 16383, 1)], &moving);
        assert_eq!(svg.matches(r#"class="moving""#).count(), 3, "{svg}");
        assert!(svg.contains("slots 0-99: moving to engine 1 (copying, 25% of the keys copied) (move #3)"), "{svg}");
        assert!(svg.contains("slots 200-200: moving to engine 1"), "{svg}");
        assert!(svg.contains("slots 300-399: queued to move to engine 1 (move #4)"), "{svg}");
    }

    #[test]
    fn bytes_are_human() {
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GiB");
    }
}
