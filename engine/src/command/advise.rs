//! The cost advisor's commands:
//!
//! - `TERRACE.COSTEVAL SET tenant json` — keeps a `terrace cost-eval` result for the tenant
//!   (in memory and in `DATA_DIR/cost-eval/<tenant>.json`); `TERRACE.COSTEVAL GET tenant`
//!   answers it (nil when there is none).
//! - `TERRACE.ADVISE tenant [TOTAL json] [PREVIOUS option]` — JSON: the tenant's category,
//!   the options costed under its live workload (the cost-eval's measured configurations, or
//!   estimates marked as such), the recommended configuration, the expected cost change and
//!   the reasons. An engine holds its share of the tenant's keys: TOTAL gives the tenant's
//!   workload over every engine (`Total`: the console sums each engine's `live`), costed
//!   instead of this engine's share; PREVIOUS names the last recommendation, which stays
//!   unless another option is materially cheaper (`advisor::MATERIAL_GAIN`).

use serde_json::{json, Value};

use super::args::{err, is, CmdError};
use super::stats::tenant_arg;
use super::table::COMMANDS;
use super::{CmdResult, Ctx};
use crate::cost::advisor::{self, Device, Live, Setup};
use crate::cost::{Capacity, Curve, Instance, Prices};
use crate::server::state::Server;
use crate::stats::workload::Workload;

fn file_of(srv: &Server, tenant: &str) -> std::path::PathBuf {
    srv.config.data_dir.join("cost-eval").join(format!("{tenant}.json"))
}

/// The tenant's latest cost-eval result (memory, else its file).
pub fn cost_eval(srv: &Server, tenant: &str) -> Option<Value> {
    if let Some(v) = srv.cost_evals.lock().get(tenant) {
        return Some(v.clone());
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(file_of(srv, tenant)).ok()?).ok()?;
    srv.cost_evals.lock().insert(tenant.to_string(), v.clone());
    Some(v)
}

pub fn costeval(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match (argv.len(), argv[1]) {
        (4, s) if is(s, "SET") => {
            let (_, tenant) = tenant_arg(ctx.srv, argv[2])?;
            let v: Value = serde_json::from_slice(argv[3]).map_err(|e| err(format!("ERR the result is not JSON: {e}")))?;
            if !v["candidates"].is_array() {
                return Err(err("ERR the result has no \"candidates\" array (is it terrace cost-eval's output?)"));
            }
            let path = file_of(ctx.srv, &tenant);
            std::fs::create_dir_all(path.parent().unwrap())
                .and_then(|_| std::fs::write(&path, argv[3]))
                .map_err(|e| err(format!("ERR writing {}: {e}", path.display())))?;
            ctx.srv.cost_evals.lock().insert(tenant, v);
            ctx.out.ok();
        }
        (3, s) if is(s, "GET") => {
            let (_, tenant) = tenant_arg(ctx.srv, argv[2])?;
            match cost_eval(ctx.srv, &tenant) {
                Some(v) => ctx.out.bulk(v.to_string().as_bytes()),
                None => ctx.out.null(),
            }
        }
        _ => return Err(CmdError::Syntax),
    }
    Ok(())
}

/// Mean engine time per data command so far, µs.
fn command_us(srv: &Server) -> f64 {
    let (mut calls, mut usec) = (0u64, 0u64);
    for (spec, st) in COMMANDS.iter().zip(srv.stats.per_command.iter()) {
        if spec.class != crate::stats::tenant::OTHER {
            calls += st.calls.load(std::sync::atomic::Ordering::Relaxed);
            usec += st.usec.load(std::sync::atomic::Ordering::Relaxed);
        }
    }
    if calls == 0 {
        1.0
    } else {
        usec as f64 / calls as f64
    }
}

fn live(srv: &Server, w: &Workload) -> Live {
    let c = &w.census;
    let comp = srv.keyspace.compression(w.namespace).stats();
    // A codec's ratio: the tenant's own live ratio, else the recommender's last measurement.
    let codec = match (comp["codec"].as_str(), w.compression_ratio) {
        (Some(name), Some(r)) => Some((name.to_string(), r, 2.0, 1.0)),
        _ => comp["last_advice"]["candidates"].as_array().and_then(|cs| {
            cs.iter()
                .filter(|c| c["error"].is_null() && c["codec"] != "none")
                .min_by(|a, b| a["ratio"].as_f64().unwrap_or(1.0).total_cmp(&b["ratio"].as_f64().unwrap_or(1.0)))
                .map(|c| {
                    (
                        c["codec"].as_str().unwrap_or("").to_string(),
                        c["ratio"].as_f64().unwrap_or(1.0),
                        c["encode_us"].as_f64().unwrap_or(2.0),
                        c["decode_us"].as_f64().unwrap_or(1.0),
                    )
                })
        }),
    };
    Live {
        qps: if w.rates.qps_1m > 0.0 { w.rates.qps_1m } else { w.rates.qps_1s },
        read_ratio: w.rates.read_ratio(),
        data_bytes: w.logical_bytes,
        keys: c.keys as f64,
        avg_record_bytes: w.avg_record_bytes,
        value_share: if w.logical_bytes > 0.0 { (w.value_bytes / w.logical_bytes).clamp(0.0, 1.0) } else { 0.0 },
        command_us: command_us(srv),
        burstiness: w.rates.burstiness(),
        codec,
        curve: (w.rates.reads + w.rates.writes > 0).then(|| Curve::new(w.curve.iter().map(|p| (p.0, p.2)).collect()).steady_state()),
    }
}

fn current_setup(srv: &Server, ns: usize) -> Setup {
    let comp = srv.keyspace.compression(ns).settings().to_json();
    Setup {
        compression: comp["compression"].as_str().filter(|c| *c != "none").map(str::to_string),
        pmem: srv.keyspace.tier().is_some(),
        storage_mode: srv.storage_tier().filter(|t| t.backs(ns)).map(|t| t.mode_of(ns).name().to_string()),
    }
}

/// A tenant's workload over every engine (TERRACE.ADVISE … TOTAL), replacing this engine's
/// share of it; the rest of `Live` (command time, codec ratio, miss-ratio curve, burstiness)
/// is this engine's, a fair sample of the whole as keys spread evenly over engines.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Total {
    qps: f64,
    read_ratio: f64,
    data_bytes: f64,
    keys: f64,
    value_share: f64,
}

impl Total {
    fn apply(&self, l: &mut Live) -> Result<(), CmdError> {
        let finite = [self.qps, self.read_ratio, self.data_bytes, self.keys, self.value_share].iter().all(|v| v.is_finite() && *v >= 0.0);
        if !finite || self.read_ratio > 1.0 || self.value_share > 1.0 {
            return Err(err("ERR TOTAL: numbers must be finite and not negative, read_ratio and value_share at most 1"));
        }
        l.qps = self.qps;
        l.read_ratio = self.read_ratio;
        l.data_bytes = self.data_bytes;
        l.keys = self.keys;
        l.value_share = self.value_share;
        l.avg_record_bytes = if self.keys > 0.0 { self.data_bytes / self.keys } else { l.avg_record_bytes };
        Ok(())
    }
}

pub fn advise(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (ns, tenant) = tenant_arg(ctx.srv, argv[1])?;
    if !argv.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let (mut total, mut previous) = (None, None);
    for kv in argv[2..].chunks(2) {
        if is(kv[0], "TOTAL") {
            total = Some(serde_json::from_slice::<Total>(kv[1]).map_err(|e| err(format!("ERR TOTAL is not the tenant's workload: {e}")))?);
        } else if is(kv[0], "PREVIOUS") {
            previous = Some(String::from_utf8_lossy(kv[1]).into_owned());
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let w = super::stats::gather_workload(ctx.srv, &mut ctx.data.guards, ns)?;
    let mut l = live(ctx.srv, &w);
    if let Some(t) = &total {
        t.apply(&mut l)?;
    }
    let evaluated = cost_eval(ctx.srv, &tenant);
    let prices: Prices = evaluated.as_ref().and_then(|v| serde_json::from_value(v["prices"].clone()).ok()).unwrap_or_default();
    let (options, based_on) = match &evaluated {
        Some(v) => {
            let measured: Vec<(String, Setup, Capacity, f64)> = v["candidates"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| {
                    let cap: Capacity = serde_json::from_value(r["capacity"].clone()).ok()?;
                    let setup: Setup = serde_json::from_value(r["setup"].clone()).unwrap_or_default();
                    Some((r["name"].as_str()?.to_string(), setup, cap, r["instance_cost"].as_f64()?))
                })
                .collect();
            if measured.is_empty() {
                return Err(err("ERR the stored cost-eval result has no usable candidates"));
            }
            (advisor::from_measured(&measured, &l, &prices), json!({"cost_eval": v["measured_at"], "trace": v["trace"]}))
        }
        None => {
            let d = ctx.srv.device.get();
            let device = Device {
                dram_read_ns: d.map_or(100.0, |d| d.dram.random_read_ns),
                pmem_read_ns: d.and_then(|d| d.pmem.as_ref().map(|m| m.random_read_ns)).or(ctx.srv.keyspace.tier().map(|_| 300.0)),
                storage_read_us: d.and_then(|d| d.storage.as_ref().map(|m| m.random_read_ns / 1000.0)),
            };
            (advisor::estimate(&l, &device, &prices, &Instance::default()), json!({"cost_eval": null, "device_probe": d.is_some()}))
        }
    };
    let (pmem, storage) = (ctx.srv.keyspace.tier().is_some(), ctx.srv.storage_tier().is_some());
    let cannot_run = |setup: &Setup| {
        if setup.pmem && !pmem {
            Some("this engine has no PMem tier (pmem_path)".to_string())
        } else if setup.storage_mode.as_deref().is_some_and(|m| m != "cache") && !storage {
            Some("this engine has no storage tier (storage = lsm or postgres)".to_string())
        } else {
            None
        }
    };
    let advice = advisor::advise(&l, &current_setup(ctx.srv, ns), options, evaluated.is_none(), advisor::Runnable(&cannot_run), previous.as_deref());
    let doc = json!({
        "tenant": tenant,
        "based_on": based_on,
        "workload_of": if total.is_some() { "every engine" } else { "this engine" },
        "live": l,
        "advice": advice,
    });
    ctx.out.bulk(doc.to_string().as_bytes());
    Ok(())
}
