//! `terrace cost-eval`: for each candidate configuration, start a test engine pinned to one
//! core, load the recorded data sample, replay the recorded trace at full speed, and measure
//! MaxPerf (the highest closed-loop QPS whose p99 stays under the bound) and the bytes each
//! resource holds per logical byte (→ MaxSpace on the instance shape); then compute CPQPS, CPGB,
//! PC, SC and C with the cost model, the optimum, break-even intervals between the
//! configurations, and the tiered optimum cache ratio from the tenant's miss-ratio curve.
//! Prints a table (or JSON), writes `cost-eval.json` into the trace directory and hands the
//! result to the engine the trace came from (`TERRACE.COSTEVAL SET`), where the advisor and
//! the console read it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use serde_json::{json, Value};
use terrace_engine::cost::{self, break_even, evaluate, Capacity, Curve, Evaluation, Instance, Tiered, UnitCosts, Workload, GB};

use super::candidates::{self, Candidate, Candidates};
use super::replay::{self, Run};
use super::trace::{read_data, read_meta, read_trace, Meta, Record};
use crate::bench::resp_client::Client;

#[derive(Args)]
pub struct CostEvalArgs {
    /// A directory written by `terrace record`.
    #[arg(long)]
    pub trace: PathBuf,
    /// The candidate configurations (TOML; see `terrace cost-eval --help` and the README).
    #[arg(long)]
    pub candidates: PathBuf,
    /// The tenant's QPS to cost (default: its 1-minute QPS when recorded).
    #[arg(long)]
    pub qps: Option<f64>,
    /// The tenant's data size to cost, GB (default: its logical bytes when recorded).
    #[arg(long)]
    pub data_gb: Option<f64>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Engine to hand the result to, host:port, or `none` (default: where the trace came from).
    #[arg(long)]
    pub publish: Option<String>,
}

/// What one candidate's test engine measured.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Operations per second one core sustains (per engine CPU-second at saturation).
    pub max_perf_per_core: f64,
    pub runs: Vec<Run>,
    pub dram_per_byte: f64,
    pub pmem_per_byte: f64,
    pub flash_per_byte: f64,
    /// Share of key lookups that missed the cache during the replay (storage candidates).
    pub miss_ratio: Option<f64>,
}

fn info(c: &mut Client, section: &str, field: &str) -> anyhow::Result<f64> {
    let text = c.call(&[b"INFO", section.as_bytes()])?.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("INFO {section} has no {field}"))
}

fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Logical bytes of the sample: keys plus values at their raw size (read back when the sample
/// has them, else the DUMP payload less its ~10 bytes of framing).
pub fn sample_bytes(data: &[Record], values: &std::collections::HashMap<Vec<u8>, Vec<u8>>) -> f64 {
    data.iter().map(|r| (r.key.len() + values.get(&r.key).map_or(r.dump.len().saturating_sub(10), |v| v.len())) as f64).sum()
}

struct Progress {
    total: usize,
}

impl Progress {
    fn step(&self, i: usize, name: &str, what: &str) {
        let done = i * 20 / self.total.max(1);
        eprint!("\r\x1b[2K[{}{}] {}/{} {name}: {what}", "#".repeat(done), ".".repeat(20 - done), i + 1, self.total);
    }
}

/// A test engine process and its directory: killed and removed on drop.
struct TestEngine {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Drop for TestEngine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A candidate's test engine, loaded, measured for space and searched for its best load, kept
/// running for the repeat runs.
struct Running {
    _engine: TestEngine,
    addr: String,
    pid: u32,
    prepared: Arc<replay::Prepared>,
    /// The load the search chose (None: no load met the p99 bound).
    best: Option<Run>,
    rates: Vec<f64>,
    measured: Measured,
}

/// Starts a candidate's engine, loads the sample, measures its bytes, warms it up and searches
/// for its best load (its first MaxPerf run).
#[allow(clippy::too_many_arguments)]
fn start(
    cand: &Candidate,
    i: usize,
    progress: &Progress,
    data: &[Record],
    ops: &[super::trace::Op],
    values: &mut Option<std::collections::HashMap<Vec<u8>, Vec<u8>>>,
    logical: &mut f64,
    m: &candidates::Measure,
) -> anyhow::Result<Running> {
    let dir = std::env::temp_dir().join(format!("terrace-cost-eval-{}-{i}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    // The sample's size is known after the first engine has it; size the PMem file from a
    // generous guess until then.
    let guess = if *logical > 0.0 { *logical } else { data.iter().map(|r| (r.key.len() + r.dump.len()) as f64).sum() };
    let flags = cand.engine_flags(&dir, guess);
    let os: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
    let (child, port) = crate::bench::spawn_pinned_engine(&dir.join("data"), &os).with_context(|| format!("starting an engine with {flags:?}"))?;
    // `taskset` execs the engine: the same process.
    let child_pid = child.id();
    let engine = TestEngine { child, dir };
    let dir = &engine.dir;
    let result = (|| -> anyhow::Result<(Arc<replay::Prepared>, Option<Run>, Measured, String)> {
        let addr = format!("127.0.0.1:{port}");
        let mut c = Client::connect(port)?;
        let empty = info(&mut c, "memory", "used_memory")?;
        // Flash in use before any data (a journal's preallocation is per instance, not per byte).
        let flash_empty = if cand.uses_storage() { dir_bytes(&dir.join("data").join("storage")) as f64 } else { 0.0 };
        progress.step(i, &cand.name, &format!("loading {} keys", data.len()));
        replay::load(&addr, data)?;
        if cand.compression.as_deref().is_some_and(|x| x != "none") {
            progress.step(i, &cand.name, "training the codec");
            if c.call(&[b"TERRACE.RETRAIN", b"default", b"SYNC"]).is_ok() {
                // Again, so every value is written with the trained codec.
                replay::load(&addr, data)?;
            }
        }
        if cand.uses_storage() {
            crate::bench::storage::wait_flushed(port)?;
        }
        if values.is_none() {
            *values = Some(replay::sample_values(&addr, data)?);
            *logical = sample_bytes(data, values.as_ref().unwrap());
        }
        let full = info(&mut c, "memory", "used_memory")?;
        if let (true, Some(cr)) = (cand.uses_storage(), cand.cache_ratio) {
            // The cache keeps cr of the entries' bytes: the tenant's data limit, which a
            // storage-backed tenant enforces by evicting its own keys. (Not maxmemory: that
            // also counts the storage engine's memtables and block cache, which grow during
            // the replay and would squeeze the cache towards nothing.)
            let w: Value = serde_json::from_str(&c.call(&[b"TERRACE.WORKLOAD", b"default"])?.unwrap_or_default())?;
            let entries = w["bytes"]["entries"].as_f64().unwrap_or(full - empty);
            let limit = ((cr * entries) as u64).max(1);
            c.call(&[b"TERRACE.NAMESPACE", b"default", b"MAXMEMORY", limit.to_string().as_bytes()])?;
            // A write makes the tenant evict down to the limit.
            c.call(&[b"SET", b"terrace:cost-eval:probe", b"1"])?;
            c.call(&[b"DEL", b"terrace:cost-eval:probe"])?;
        }
        // DRAM for the data: the engine's own accounting of the tenant's entries and tables
        // (the process's fixed memory — buffers, statistics, a storage engine's memtables — is
        // per instance, not per byte, and would swamp a small sample).
        let w: Value = serde_json::from_str(&c.call(&[b"TERRACE.WORKLOAD", b"default"])?.unwrap_or_default())?;
        let dram = w["bytes"]["entries"].as_f64().unwrap_or(0.0) + w["bytes"]["table"].as_f64().unwrap_or(0.0);
        let stats: Value = serde_json::from_str(&c.call(&[b"TERRACE.STATS"])?.unwrap_or_default())?;
        let pmem = stats["tiers"]["pmem"]["allocated_bytes"].as_f64().unwrap_or(0.0);
        let flash = if cand.uses_storage() { (dir_bytes(&dir.join("data").join("storage")) as f64 - flash_empty).max(0.0) } else { 0.0 };
        let prepared = Arc::new(replay::prepare(ops, values.as_ref().unwrap()));
        progress.step(i, &cand.name, "warming up");
        replay::closed_loop(&addr, &prepared, 1, replay::PIPELINE, (m.seconds / 4.0).max(0.25), None)?;
        let storage_reads = |c: &mut Client| if cand.uses_storage() { info(c, "storage", "storage_reads") } else { Ok(0.0) };
        let (h0, m0, s0) = (info(&mut c, "stats", "keyspace_hits")?, info(&mut c, "stats", "keyspace_misses")?, storage_reads(&mut c)?);
        progress.step(i, &cand.name, "searching for its best load");
        let (best, runs) = replay::search(&addr, &prepared, m.seconds, m.p99_bound_us, Some(child_pid))?;
        let (h1, m1, s1) = (info(&mut c, "stats", "keyspace_hits")?, info(&mut c, "stats", "keyspace_misses")?, storage_reads(&mut c)?);
        let lookups = (h1 - h0) + (m1 - m0);
        let measured = Measured {
            max_perf_per_core: 0.0,
            runs,
            dram_per_byte: dram / *logical,
            pmem_per_byte: pmem / *logical,
            // At least the logical bytes: a storage engine that has not laid the sample out in
            // files yet (journal preallocated, memtables) still holds it once.
            flash_per_byte: if cand.uses_storage() { (flash / *logical).max(1.0) } else { 0.0 },
            // Lookups the cache could not answer: read from storage (found or not).
            miss_ratio: (cand.uses_storage() && lookups > 0.0).then(|| ((s1 - s0) / lookups).min(1.0)),
        };
        Ok((prepared, best, measured, addr))
    })();
    let (prepared, best, measured, addr) = result?;
    Ok(Running { _engine: engine, addr, pid: child_pid, prepared, rates: best.iter().map(replay::rate).collect(), best, measured })
}

/// One candidate's row of the result.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub setup: terrace_engine::cost::advisor::Setup,
    pub instance: Instance,
    pub instance_cost: f64,
    pub measured: Measured,
    pub capacity: Capacity,
    pub evaluation: Evaluation,
}

/// MaxSpace: logical bytes one instance holds, the scarcest of its resources deciding.
pub fn max_space(inst: &Instance, m: &Measured) -> f64 {
    let mut space = f64::INFINITY;
    for (have_gb, per_byte) in [(inst.dram_gb, m.dram_per_byte), (inst.pmem_gb, m.pmem_per_byte), (inst.flash_gb, m.flash_per_byte)] {
        if per_byte > 0.0 {
            space = space.min(have_gb * GB / per_byte);
        }
    }
    if space.is_finite() {
        space
    } else {
        inst.dram_gb * GB
    }
}

/// The tenant's workload to cost: QPS, mix and data size scaled up from the sample.
pub fn tenant_workload(meta: &Meta, sample_logical: f64, sampled_keys: usize, qps: Option<f64>) -> Workload {
    let w = &meta.workload;
    let keys = w["keys"].as_f64().unwrap_or(sampled_keys as f64).max(1.0);
    let data_bytes = sample_logical * keys / (sampled_keys.max(1) as f64);
    let recorded_qps = meta.recorded as f64 / meta.seconds.max(1e-3) / meta.rate.max(1e-9);
    let qps = qps.or_else(|| w["qps_1m"].as_f64().filter(|q| *q > 0.0)).unwrap_or(recorded_qps);
    Workload { qps, read_ratio: w["read_ratio"].as_f64().unwrap_or(1.0), data_bytes, avg_record_bytes: data_bytes / keys }
}

/// The whole computation from measurements (pure: the end-to-end test and the advisor check it).
pub fn compute(cands: &Candidates, measured: Vec<(&Candidate, Measured)>, workload: &Workload, curve: Option<&Curve>) -> Value {
    let rows: Vec<Row> = measured
        .into_iter()
        .map(|(c, m)| {
            let instance = c.instance(&cands.instance);
            let instance_cost = instance.cost(&cands.prices);
            let capacity = Capacity { max_perf: m.max_perf_per_core * instance.cores, max_space: max_space(&instance, &m) };
            let evaluation = evaluate(workload, &capacity, instance_cost, cands.prices.replication);
            let setup = terrace_engine::cost::advisor::Setup {
                compression: c.compression.clone(),
                pmem: c.pmem,
                storage_mode: c.uses_storage().then(|| c.storage_mode.clone().unwrap_or_else(|| "write-through".into())),
            };
            Row { name: c.name.clone(), setup, instance, instance_cost, measured: m, capacity, evaluation }
        })
        .collect();
    let best = cost::optimal(rows.iter().map(|r| (r, r.evaluation))).map(|(r, _)| r.name.clone());
    let mut pairs = Vec::new();
    for (i, a) in rows.iter().enumerate() {
        for b in &rows[i + 1..] {
            let (fast, slow) = if a.evaluation.cpgb >= b.evaluation.cpgb { (a, b) } else { (b, a) };
            let u = |r: &Row| UnitCosts { cpqps: r.evaluation.cpqps, cpgb: r.evaluation.cpgb };
            pairs.push(json!({"fast": fast.name, "slow": slow.name, "break_even": break_even(u(fast), u(slow), workload.avg_record_bytes)}));
        }
    }
    let tiered = tiered(cands, &rows, workload, curve);
    json!({
        "workload": workload,
        "prices": cands.prices,
        "candidates": rows,
        "optimum": best,
        "break_even": pairs,
        "tiered": tiered,
    })
}

/// The tiered model over the miss-ratio curve: the best cache-only candidate as the cache tier
/// and a storage candidate's measured storage speed (from its MaxPerf and miss ratio).
fn tiered(cands: &Candidates, rows: &[Row], w: &Workload, curve: Option<&Curve>) -> Value {
    let curve = match curve {
        Some(c) => c,
        None => return Value::Null,
    };
    let by_name = |n: &str| cands.candidates.iter().find(|c| c.name == n);
    let cache = rows.iter().filter(|r| by_name(&r.name).is_some_and(|c| !c.uses_storage())).min_by(|a, b| a.evaluation.c.total_cmp(&b.evaluation.c));
    let storage = rows.iter().find(|r| by_name(&r.name).is_some_and(|c| c.uses_storage()) && r.measured.miss_ratio.is_some_and(|m| m > 0.0));
    let (Some(cache), Some(st)) = (cache, storage) else { return Value::Null };
    let mr = st.measured.miss_ratio.unwrap();
    let p_cache = cache.capacity.max_perf;
    let denom = 1.0 / st.capacity.max_perf - (1.0 - mr) / p_cache;
    if denom <= 0.0 {
        return json!({"note": format!("{}'s misses cost nothing measurable over {}'s hits", st.name, cache.name)});
    }
    let p_storage = mr / denom;
    let data_gb = w.data_bytes * cands.prices.replication / GB;
    let t = Tiered {
        pc_cache: cache.evaluation.cpqps * w.qps,
        // A miss costs the cache tier about one more operation (read-through and admission).
        pc_miss: cache.evaluation.cpqps * w.qps,
        sc_cache: cache.evaluation.cpgb * data_gb,
        pc_storage: st.instance_cost / p_storage * w.qps,
        sc_storage: cands.prices.flash_gb() * st.measured.flash_per_byte.max(1.0) * data_gb,
    };
    let opt = t.optimum(curve);
    json!({
        "cache": cache.name,
        "storage": st.name,
        "storage_ops_per_core": p_storage,
        "inputs": t,
        "optimum": opt,
        "all_in_cache": t.cost_at(curve, 1.0),
        "best_single_tier": rows.iter().map(|r| r.evaluation.c).fold(f64::INFINITY, f64::min),
    })
}

pub fn table(result: &Value) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let w = &result["workload"];
    let _ = writeln!(
        s,
        "workload: {:.0} QPS, {:.0}% reads, {:.2} GB, {:.0} B per record",
        w["qps"].as_f64().unwrap_or(0.0),
        w["read_ratio"].as_f64().unwrap_or(0.0) * 100.0,
        w["data_bytes"].as_f64().unwrap_or(0.0) / GB,
        w["avg_record_bytes"].as_f64().unwrap_or(0.0)
    );
    let _ = writeln!(
        s,
        "{:<22} {:>11} {:>10} {:>11} {:>9} {:>8} {:>8} {:>8}  category",
        "configuration", "MaxPerf/s", "MaxSpace", "CPQPS", "CPGB", "PC", "SC", "C"
    );
    for r in result["candidates"].as_array().into_iter().flatten() {
        let e = &r["evaluation"];
        let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        let best = result["optimum"] == r["name"];
        let _ = writeln!(
            s,
            "{:<22} {:>11.0} {:>8.2}GB {:>11.3e} {:>9.4} {:>8.4} {:>8.4} {:>8.4}  {}{}",
            r["name"].as_str().unwrap_or(""),
            f(&r["capacity"]["max_perf"]),
            f(&r["capacity"]["max_space"]) / GB,
            f(&e["cpqps"]),
            f(&e["cpgb"]),
            f(&e["pc"]),
            f(&e["sc"]),
            f(&e["c"]),
            e["category"].as_str().unwrap_or(""),
            if best { "  ← cheapest" } else { "" }
        );
    }
    let _ = writeln!(s, "\nbreak-even intervals (records accessed more often than this belong in the first):");
    for p in result["break_even"].as_array().into_iter().flatten() {
        let be = &p["break_even"];
        let text = match be["kind"].as_str() {
            Some("interval") => format!("{:.0} s", be["seconds"].as_f64().unwrap_or(0.0)),
            Some("always-fast") => format!("always {}", p["fast"].as_str().unwrap_or("")),
            _ => format!("always {}", p["slow"].as_str().unwrap_or("")),
        };
        let _ = writeln!(s, "  {} ↔ {}: {text}", p["fast"].as_str().unwrap_or(""), p["slow"].as_str().unwrap_or(""));
    }
    let t = &result["tiered"];
    if let Some(opt) = t.get("optimum") {
        let _ = writeln!(
            s,
            "\ntiered ({} in front of {}): optimal cache ratio {:.2} (miss ratio {:.3}), C = {:.4} against {:.4} for the best single configuration",
            t["cache"].as_str().unwrap_or(""),
            t["storage"].as_str().unwrap_or(""),
            opt["cache_ratio"].as_f64().unwrap_or(0.0),
            opt["miss_ratio"].as_f64().unwrap_or(0.0),
            opt["total"].as_f64().unwrap_or(0.0),
            t["best_single_tier"].as_f64().unwrap_or(0.0)
        );
    }
    s
}

pub fn curve_of(meta: &Meta) -> Option<Curve> {
    let pts: Vec<(f64, f64)> = meta.workload["mrc"]["points"].as_array()?.iter().filter_map(|p| Some((p[0].as_f64()?, p[2].as_f64()?))).collect();
    (!pts.is_empty()).then(|| Curve::new(pts).steady_state())
}

/// Measures every candidate on a trace's sample: (measurements in candidate order, the
/// sample's logical bytes).
pub fn measure_all(cands: &Candidates, ops: &[super::trace::Op], data: &[Record]) -> anyhow::Result<(Vec<Measured>, f64)> {
    Ok(measure_sets(cands, &[(ops, data)])?.remove(0))
}

/// `measure_all` for several traces at once (the validation bench: a sample and its full
/// data). Every candidate's engine of every trace stays up until all are measured: the repeat
/// runs go round them all in turn, so a slow spell of a shared machine falls on all of them
/// alike rather than on whichever was being measured. Per trace: its rows and logical bytes.
pub fn measure_sets(cands: &Candidates, sets: &[(&[super::trace::Op], &[Record])]) -> anyhow::Result<Vec<(Vec<Measured>, f64)>> {
    for (ops, data) in sets {
        if data.is_empty() {
            anyhow::bail!("the data sample is empty (record with a higher --rate?)");
        }
        if ops.is_empty() {
            anyhow::bail!("the trace holds no commands (was the tenant busy while it was recorded?)");
        }
    }
    let n = cands.candidates.len();
    let progress = Progress { total: n * sets.len() };
    let mut running: Vec<Running> = Vec::new();
    let mut logicals = Vec::new();
    for (s, (ops, data)) in sets.iter().enumerate() {
        let mut values = None;
        let mut logical = 0.0;
        for (i, c) in cands.candidates.iter().enumerate() {
            running
                .push(start(c, s * n + i, &progress, data, ops, &mut values, &mut logical, &cands.measure).with_context(|| format!("candidate {}", c.name))?);
        }
        logicals.push(logical);
    }
    for round in 0..REPEATS {
        for (k, r) in running.iter_mut().enumerate() {
            let Some(best) = r.best else { continue };
            let name = &cands.candidates[k % n].name;
            progress.step(k, name, &format!("MaxPerf run {} of {}", round + 2, REPEATS + 1));
            let run = replay::closed_loop(&r.addr, &r.prepared, best.connections, replay::PIPELINE, cands.measure.seconds, Some(r.pid))
                .with_context(|| format!("candidate {name}"))?;
            r.rates.push(replay::rate(&run));
            r.measured.runs.push(run);
        }
    }
    let mut out: Vec<(Vec<Measured>, f64)> = logicals.into_iter().map(|l| (Vec::new(), l)).collect();
    for (k, r) in running.iter_mut().enumerate() {
        let mut m = r.measured.clone();
        // The median of the runs at the chosen load; 0 (infinite cost) when no load met the bound.
        m.max_perf_per_core = if r.best.is_some() { replay::median(&mut r.rates) } else { 0.0 };
        out[k / n].0.push(m);
    }
    eprintln!("\r\x1b[2K[{}] {} configurations measured", "#".repeat(20), n * sets.len());
    Ok(out)
}

/// Runs at the chosen load after the search's best, per candidate (the median of the five is kept).
const REPEATS: usize = 4;

pub fn run(args: CostEvalArgs) -> anyhow::Result<()> {
    crate::bench::compress_e2e::pin_self_to(1);
    let cands = candidates::read(&args.candidates)?;
    let meta = read_meta(&args.trace)?;
    let ops = read_trace(&args.trace)?;
    let data = read_data(&args.trace)?;
    let factor = super::footprint::factor(&meta, &data);
    if factor > 1 {
        eprintln!("the sample holds 1/{factor} of the tenant's keys or less: replayed over {factor} replicas of it (see `footprint`)");
    }
    let (data, ops) = super::footprint::scale_up(&data, &ops, factor);
    let (measured, logical) = measure_all(&cands, &ops, &data).with_context(|| args.trace.display().to_string())?;
    let mut workload = tenant_workload(&meta, logical, data.len(), args.qps);
    if let Some(gb) = args.data_gb {
        workload.data_bytes = gb * GB;
    }
    let curve = curve_of(&meta);
    let mut result = compute(&cands, cands.candidates.iter().zip(measured).collect(), &workload, curve.as_ref());
    result["tenant"] = json!(meta.tenant);
    result["trace"] = json!(args.trace.display().to_string());
    result["measured_at"] = json!(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0));
    let text = serde_json::to_string_pretty(&result)?;
    std::fs::write(args.trace.join("cost-eval.json"), &text)?;
    if args.json {
        println!("{text}")
    } else {
        print!("{}", table(&result))
    }
    // Every engine holding the tenant gets the result (its advisor reads it).
    let targets = match &args.publish {
        Some(t) if t == "none" => Vec::new(),
        Some(t) => vec![t.clone()],
        None if !meta.engines.is_empty() => meta.engines.clone(),
        None => vec![meta.source.clone()],
    };
    let body = serde_json::to_string(&result)?;
    for target in targets {
        match Client::connect_to(&target).and_then(|mut c| c.call(&[b"TERRACE.COSTEVAL", b"SET", meta.tenant.as_bytes(), body.as_bytes()])) {
            Ok(_) => eprintln!("result handed to the engine at {target} (TERRACE.ADVISE {} reads it)", meta.tenant),
            Err(e) => eprintln!("could not hand the result to {target}: {e:#} (it is in {})", args.trace.join("cost-eval.json").display()),
        }
    }
    Ok(())
}
