//! `terrace record`: a sampled trace of a tenant's commands and a sample of its data, taken
//! with `TERRACE.RECORD` from a live engine, or from every engine behind a proxy (the proxy
//! names them in `INFO proxy`; a tenant's namespace has its name on every engine). With several
//! engines the traces are merged in time order, the data samples put together and the workload
//! statistics summed (see `trace` for the files).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde_json::{json, Value};

use super::trace::Meta;
use crate::bench::resp_client::Client;

#[derive(Args)]
pub struct RecordArgs {
    /// The tenant (`default` for the default namespace).
    #[arg(long)]
    pub tenant: String,
    /// How long to record (SIGINT or SIGTERM ends it early; what was recorded is kept).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Directory to write meta.json, trace.tsv and data.tsv into (created).
    #[arg(long)]
    pub out: PathBuf,
    /// The engine, host:port.
    #[arg(long, default_value = "127.0.0.1:7001")]
    pub engine: String,
    /// A proxy, host:port: record from every engine behind it instead of `--engine`.
    #[arg(long)]
    pub proxy: Option<String>,
    /// The tenant's password, to ask the proxy for its engines.
    #[arg(long, env = "TERRACE_TENANT_PASSWORD")]
    pub password: Option<String>,
    /// Share of the tenant's keys sampled (by key hash: a sampled key keeps all its commands).
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
}

pub fn run(args: RecordArgs) -> anyhow::Result<()> {
    let meta = record(&args)?;
    println!(
        "recorded {} commands on {} sampled keys of tenant {} in {:.1} s (rate {}{}) into {}",
        meta.recorded,
        meta.sampled_keys,
        meta.tenant,
        meta.seconds,
        meta.rate,
        if meta.dropped > 0 { format!(", {} dropped", meta.dropped) } else { String::new() },
        args.out.display()
    );
    Ok(())
}

fn call(c: &mut Client, args: &[&str]) -> anyhow::Result<String> {
    let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    Ok(c.call(&argv).with_context(|| args.join(" "))?.unwrap_or_default())
}

/// The engines behind the proxy at `proxy`, from its `INFO proxy`.
pub fn engines_behind(proxy: &str, tenant: &str, password: Option<&str>) -> anyhow::Result<Vec<String>> {
    let mut c = Client::connect_to(proxy)?;
    if let Some(p) = password {
        call(&mut c, &["AUTH", tenant, p])?;
    }
    let info = call(&mut c, &["INFO", "proxy"])?;
    let engines: Vec<String> = info
        .lines()
        .filter(|l| l.starts_with("engine") && l.contains(":addr="))
        .filter_map(|l| l.split(":addr=").nth(1)?.split(',').next().map(str::to_string))
        .collect();
    if engines.is_empty() {
        anyhow::bail!("{proxy} listed no engines in INFO proxy (is it a Terrace proxy?)");
    }
    Ok(engines)
}

/// Workload statistics of one tenant over several engines: counts, rates and bytes summed,
/// ratios recomputed, the miss-ratio curves averaged weighted by keys (each engine's curve is
/// over the same shares of its own keys, and slots spread keys evenly).
pub fn merge_workloads(parts: &[Value]) -> Value {
    if parts.len() == 1 {
        return parts[0].clone();
    }
    let sum = |path: &[&str]| -> f64 { parts.iter().map(|p| path.iter().fold(p, |v, k| &v[*k]).as_f64().unwrap_or(0.0)).sum() };
    let mut w = parts[0].clone();
    for k in ["qps_1s", "qps_1m", "peak_1s"] {
        w[k] = json!(sum(&[k]));
    }
    for k in ["reads", "writes", "keys"] {
        w[k] = json!(sum(&[k]) as u64);
    }
    for k in ["logical", "entries", "table", "keys", "dram_values", "pmem_values", "compressed_values", "compressed_stored"] {
        w["bytes"][k] = json!(sum(&["bytes", k]) as u64);
    }
    let (reads, writes, keys) = (sum(&["reads"]), sum(&["writes"]), sum(&["keys"]));
    w["read_ratio"] = json!(if reads + writes > 0.0 { reads / (reads + writes) } else { 1.0 });
    w["avg_record_bytes"] = json!(if keys > 0.0 { sum(&["bytes", "logical"]) / keys } else { 0.0 });
    w["burstiness"] = json!(if sum(&["qps_1m"]) > 0.0 { sum(&["peak_1s"]) / sum(&["qps_1m"]) } else { 1.0 });
    let n = parts[0]["mrc"]["points"].as_array().map_or(0, |a| a.len());
    let points: Vec<Value> = (0..n)
        .map(|i| {
            let (mut cache, mut mr) = (0.0, 0.0);
            for p in parts {
                let pt = &p["mrc"]["points"][i];
                cache += pt[1].as_f64().unwrap_or(0.0);
                mr += pt[2].as_f64().unwrap_or(1.0) * p["keys"].as_f64().unwrap_or(0.0);
            }
            json!([parts[0]["mrc"]["points"][i][0], cache, if keys > 0.0 { mr / keys } else { 1.0 }])
        })
        .collect();
    w["mrc"]["points"] = json!(points);
    w["engines"] = json!(parts.len());
    w
}

/// Set by SIGINT/SIGTERM while recording: stop and write what was recorded.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn request_stop(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

pub fn record(args: &RecordArgs) -> anyhow::Result<Meta> {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, request_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, request_stop as *const () as libc::sighandler_t);
    }
    if !(args.rate > 0.0 && args.rate <= 1.0) {
        anyhow::bail!("--rate must be in (0, 1], got {}", args.rate);
    }
    let engines = match &args.proxy {
        Some(p) => engines_behind(p, &args.tenant, args.password.as_deref())?,
        None => vec![args.engine.clone()],
    };
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut clients = engines.iter().map(|e| Client::connect_to(e)).collect::<anyhow::Result<Vec<_>>>()?;
    let rate = args.rate.to_string();
    for (c, e) in clients.iter_mut().zip(&engines) {
        call(c, &["TERRACE.RECORD", "START", &args.tenant, "RATE", &rate]).with_context(|| e.clone())?;
    }
    eprintln!("recording tenant {} on {} (SIGINT ends it)", args.tenant, engines.join(", "));
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(args.seconds);
    let mut last_print = start;
    // (µs since the engine's start, line); engines started within a few ms of each other.
    let mut lines: Vec<(u64, String)> = Vec::new();
    let keep = |chunk: &str, lines: &mut Vec<(u64, String)>| {
        for l in chunk.lines() {
            let t = l.split('\t').next().and_then(|t| t.parse().ok()).unwrap_or(0);
            lines.push((t, l.to_string()));
        }
    };
    while Instant::now() < until && !STOP.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100).min(until.saturating_duration_since(Instant::now())));
        for c in clients.iter_mut() {
            let chunk = call(c, &["TERRACE.RECORD", "READ"])?;
            keep(&chunk, &mut lines);
        }
        if last_print.elapsed() >= Duration::from_secs(1) {
            eprint!("\r  {:>5.1} s  {} commands", start.elapsed().as_secs_f64(), lines.len());
            last_print = Instant::now();
        }
    }
    let (mut recorded, mut dropped, mut seconds) = (0, 0, 0.0f64);
    for c in clients.iter_mut() {
        let stop: Value = serde_json::from_str(&call(c, &["TERRACE.RECORD", "STOP"])?)?;
        keep(stop["rest"].as_str().unwrap_or_default(), &mut lines);
        recorded += stop["recorded"].as_u64().unwrap_or(0);
        dropped += stop["dropped"].as_u64().unwrap_or(0);
        seconds = seconds.max(stop["seconds"].as_f64().unwrap_or(args.seconds));
    }
    eprintln!();
    lines.sort_by_key(|(t, _)| *t);
    let mut trace = std::io::BufWriter::new(std::fs::File::create(args.out.join("trace.tsv"))?);
    for (_, l) in &lines {
        writeln!(trace, "{l}")?;
    }
    trace.flush()?;
    // The data sample: the same keys (by hash), one shard per call, from every engine.
    let mut data = std::io::BufWriter::new(std::fs::File::create(args.out.join("data.tsv"))?);
    let mut sampled_keys = 0u64;
    let mut workloads = Vec::new();
    for c in clients.iter_mut() {
        let mut cursor = "0".to_string();
        loop {
            let reply = call(c, &["TERRACE.RECORD", "SAMPLE", &args.tenant, &cursor, "RATE", &rate])?;
            let (next, body) = reply.split_once('\n').unwrap_or((&reply, ""));
            sampled_keys += body.lines().count() as u64;
            data.write_all(body.as_bytes())?;
            if next == "0" {
                break;
            }
            cursor = next.to_string();
        }
        workloads.push(serde_json::from_str::<Value>(&call(c, &["TERRACE.WORKLOAD", &args.tenant])?)?);
    }
    data.flush()?;
    let meta = Meta {
        tenant: args.tenant.clone(),
        source: engines[0].clone(),
        engines: engines.clone(),
        rate: args.rate,
        seconds,
        recorded,
        dropped,
        sampled_keys,
        workload: merge_workloads(&workloads),
    };
    std::fs::write(args.out.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
    Ok(meta)
}
