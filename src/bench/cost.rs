//! `terrace bench cost`: validates the cost framework. For three workloads (read-heavy skewed,
//! write-heavy, space-critical with cities values) a source engine is loaded and driven while
//! `terrace record` takes a full trace (rate 1); a spatial sample of it (`--sample-rate`, as
//! `record --rate` would take) is what the advisor has. Both go through the cost-eval
//! measurement over the same candidates: the sample's costs are the prediction, the full
//! data's the measurement. Prints, per workload, each candidate's predicted and measured C,
//! whether the predicted cheapest is the measured cheapest and the prediction's error; then
//! the break-even intervals Raw↔PMem, Raw↔Compression, PMem↔Compression next to the paper's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::Value;
use terrace_engine::cost::GB;

use super::resp_client::Client;
use crate::cost::candidates::{Candidate, Candidates, Measure};
use crate::cost::eval;
use crate::cost::record::{record, RecordArgs};
use crate::cost::trace::{read_data, read_meta, read_trace, unhex};

#[derive(Args)]
pub struct CostArgs {
    /// Directory holding cities.jsonl, cities-full.jsonl and airports.jsonl.
    #[arg(long, default_value = "../shared/data")]
    data: PathBuf,
    /// Seconds of traffic recorded per workload.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Seconds per closed-loop step of the MaxPerf search.
    #[arg(long, default_value_t = 1.0)]
    measure_seconds: f64,
    /// Share of keys in the advisor's sample.
    #[arg(long, default_value_t = 0.1)]
    sample_rate: f64,
    /// Only the workloads whose name contains this.
    #[arg(long)]
    only: Option<String>,
}

struct Spec {
    name: &'static str,
    file: &'static str,
    copies: usize,
    theta: f64,
    reads: f64,
    /// The tenant costed: its QPS and data size.
    qps: f64,
    data_gb: f64,
}

const WORKLOADS: &[Spec] = &[
    Spec { name: "read-heavy skewed", file: "airports.jsonl", copies: 4, theta: 0.99, reads: 0.95, qps: 300_000.0, data_gb: 2.0 },
    Spec { name: "write-heavy", file: "cities.jsonl", copies: 3, theta: 0.5, reads: 0.5, qps: 150_000.0, data_gb: 4.0 },
    Spec { name: "space-critical cities", file: "cities-full.jsonl", copies: 3, theta: 0.99, reads: 0.9, qps: 5_000.0, data_gb: 100.0 },
];

fn candidates(seconds: f64) -> Candidates {
    let c = |name: &str| Candidate { name: name.into(), ..Candidate::default() };
    Candidates {
        prices: Default::default(),
        instance: Default::default(),
        measure: Measure { seconds, p99_bound_us: 5000.0 },
        candidates: vec![
            c("raw"),
            Candidate { compression: Some("zstd-dict".into()), ..c("zstd-dict") },
            Candidate { compression: Some("pattern".into()), ..c("pattern") },
            Candidate { pmem: true, dram_share: Some(0.2), ..c("pmem dram-first") },
            Candidate { storage: Some("lsm".into()), storage_mode: Some("write-through".into()), cache_ratio: Some(0.2), ..c("write-through 20%") },
        ],
    }
}

/// Zipf ranks by inverse CDF, scrambled over the keys.
fn zipf_cdf(n: usize, theta: f64) -> Vec<f64> {
    let w: Vec<f64> = (1..=n).map(|r| 1.0 / (r as f64).powf(theta)).collect();
    let total: f64 = w.iter().sum();
    let mut acc = 0.0;
    w.iter()
        .map(|x| {
            acc += x / total;
            acc
        })
        .collect()
}

/// A source engine loaded with the workload's data and driven while it is recorded.
fn record_workload(spec: &Spec, args: &CostArgs, dir: &Path) -> anyhow::Result<PathBuf> {
    let values: Vec<String> = std::fs::read_to_string(args.data.join(spec.file))?.lines().map(str::to_string).collect();
    let n = values.len() * spec.copies;
    let (mut child, port) = super::spawn_pinned_engine(&dir.join("source"), &[std::ffi::OsStr::new("--threads"), std::ffi::OsStr::new("single")])?;
    let result = (|| -> anyhow::Result<PathBuf> {
        let mut c = Client::connect(port)?;
        for chunk in (0..n).collect::<Vec<_>>().chunks(512) {
            for &i in chunk {
                c.push(&[b"SET", format!("k:{i}").as_bytes(), values[i % values.len()].as_bytes()]);
            }
            c.flush()?;
        }
        let out = dir.join("full");
        let rec = {
            let a = RecordArgs {
                tenant: "default".into(),
                seconds: args.seconds,
                out: out.clone(),
                engine: format!("127.0.0.1:{port}"),
                proxy: None,
                password: None,
                rate: 1.0,
            };
            std::thread::spawn(move || record(&a))
        };
        std::thread::sleep(Duration::from_millis(300));
        let cdf = zipf_cdf(n, spec.theta);
        let scramble = |r: usize| r.wrapping_mul(2_654_435_761) % n;
        let mut rng = fastrand::Rng::with_seed(17);
        let until = Instant::now() + Duration::from_secs_f64((args.seconds - 0.6).max(0.5));
        while Instant::now() < until {
            for _ in 0..64 {
                let u = rng.f64();
                let k = scramble(cdf.partition_point(|x| *x < u).min(n - 1));
                let key = format!("k:{k}");
                if rng.f64() < spec.reads {
                    c.push(&[b"GET", key.as_bytes()]);
                } else {
                    c.push(&[b"SET", key.as_bytes(), values[rng.usize(0..values.len())].as_bytes()]);
                }
            }
            c.flush()?;
            // A steady load the recorder keeps up with (and that leaves the engine headroom).
            std::thread::sleep(Duration::from_micros(300));
        }
        rec.join().map_err(|_| anyhow::anyhow!("the recorder panicked"))??;
        Ok(out)
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// The share `rate` of a full trace's keys (by a hash of the key), as `record --rate` takes.
fn subsample(full: &Path, out: &Path, rate: f64) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let keep = |key_hex: &str| -> bool {
        let k = unhex(key_hex).unwrap_or_default();
        let h = k.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3));
        ((h >> 11) as f64 / (1u64 << 53) as f64) < rate
    };
    let trace: String = std::fs::read_to_string(full.join("trace.tsv"))?
        .lines()
        .filter(|l| l.split('\t').nth(3).and_then(|a| a.split(',').nth(1)).is_some_and(keep))
        .map(|l| format!("{l}\n"))
        .collect();
    let data: String =
        std::fs::read_to_string(full.join("data.tsv"))?.lines().filter(|l| l.split('\t').nth(1).is_some_and(keep)).map(|l| format!("{l}\n")).collect();
    std::fs::write(out.join("trace.tsv"), trace)?;
    std::fs::write(out.join("data.tsv"), data)?;
    std::fs::copy(full.join("meta.json"), out.join("meta.json"))?;
    Ok(())
}

/// The costs of every candidate on each trace directory, measured together (`measure_sets`).
fn costs(dirs: &[&Path], cands: &Candidates, spec: &Spec) -> anyhow::Result<Vec<Value>> {
    let mut loaded = Vec::new();
    for dir in dirs {
        let meta = read_meta(dir)?;
        let (ops, data) = (read_trace(dir)?, read_data(dir)?);
        let factor = crate::cost::footprint::factor(&meta, &data);
        let (data, ops) = crate::cost::footprint::scale_up(&data, &ops, factor);
        loaded.push((meta, ops, data));
    }
    let sets: Vec<_> = loaded.iter().map(|(_, ops, data)| (ops.as_slice(), data.as_slice())).collect();
    let measured = eval::measure_sets(cands, &sets)?;
    Ok(loaded
        .iter()
        .zip(measured)
        .map(|((meta, _, data), (rows, logical))| {
            let mut w = eval::tenant_workload(meta, logical, data.len(), Some(spec.qps));
            w.data_bytes = spec.data_gb * GB;
            eval::compute(cands, cands.candidates.iter().zip(rows).collect(), &w, eval::curve_of(meta).as_ref())
        })
        .collect())
}

fn field(r: &Value, name: &str, path: &[&str]) -> f64 {
    let row = r["candidates"].as_array().into_iter().flatten().find(|x| x["name"] == name);
    row.and_then(|x| path.iter().try_fold(x, |v, k| v.get(*k)).and_then(Value::as_f64)).unwrap_or(f64::NAN)
}

/// A candidate's C; infinite when it has none (MaxPerf 0: no load met the p99 bound).
fn c_of(r: &Value, name: &str) -> f64 {
    let c = field(r, name, &["evaluation", "c"]);
    if c.is_nan() {
        f64::INFINITY
    } else {
        c
    }
}

fn break_even_s(r: &Value, a: &str, b: &str) -> String {
    r["break_even"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| (p["fast"] == a && p["slow"] == b) || (p["fast"] == b && p["slow"] == a))
        .map(|p| {
            let be = &p["break_even"];
            match be["kind"].as_str() {
                Some("interval") => format!("{:.0} s ({} fast)", be["seconds"].as_f64().unwrap_or(0.0), p["fast"].as_str().unwrap_or("")),
                Some("always-fast") => format!("always {}", p["fast"].as_str().unwrap_or("")),
                _ => format!("always {}", p["slow"].as_str().unwrap_or("")),
            }
        })
        .unwrap_or_else(|| "-".into())
}

pub fn run(args: CostArgs) -> anyhow::Result<()> {
    super::compress_e2e::pin_self_to(1);
    let root = std::env::temp_dir().join(format!("terrace-bench-cost-{}", std::process::id()));
    let cands = candidates(args.measure_seconds);
    let mut summary = Vec::new();
    let mut fulls = Vec::new();
    for spec in WORKLOADS.iter().filter(|s| args.only.as_deref().is_none_or(|o| s.name.contains(o))) {
        let dir = root.join(spec.name.replace(' ', "-"));
        eprintln!("== {}: recording", spec.name);
        let full = record_workload(spec, &args, &dir)?;
        let sample = dir.join("sample");
        subsample(&full, &sample, args.sample_rate)?;
        eprintln!("== {}: the {:.0}% sample (prediction) and the full data (measurement), measured together", spec.name, args.sample_rate * 100.0);
        let mut both = costs(&[&sample, &full], &cands, spec)?;
        let (predicted, measured) = (both.remove(0), both.remove(0));
        let p_best = predicted["optimum"].as_str().unwrap_or("").to_string();
        let m_best = measured["optimum"].as_str().unwrap_or("").to_string();
        println!("\n{} — {:.0} QPS, {:.0} GB ({} keys recorded)", spec.name, spec.qps, spec.data_gb, read_data(&full)?.len());
        println!(
            "{:<20} {:>17} {:>15} {:>12} {:>12} {:>8}  category (measured)",
            "configuration", "MaxPerf/core p|m", "MaxSpace GB p|m", "C predicted", "C measured", "error"
        );
        for c in &cands.candidates {
            let (p, m) = (c_of(&predicted, &c.name), c_of(&measured, &c.name));
            let cat = measured["candidates"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|x| x["name"] == c.name.as_str())
                .and_then(|x| x["evaluation"]["category"].as_str())
                .unwrap_or("")
                .to_string();
            let perf = |r: &Value| field(r, &c.name, &["capacity", "max_perf"]) / 1000.0;
            let space = |r: &Value| field(r, &c.name, &["capacity", "max_space"]) / GB;
            println!(
                "{:<20} {:>7.0}k|{:>7.0}k {:>7.2}|{:>7.2} {:>12.4} {:>12.4} {:>+7.1}%  {cat}{}",
                c.name,
                perf(&predicted),
                perf(&measured),
                space(&predicted),
                space(&measured),
                p,
                m,
                (p / m - 1.0) * 100.0,
                if c.name == m_best { "  ← measured cheapest" } else { "" }
            );
        }
        let err = (c_of(&predicted, &p_best) / c_of(&measured, &p_best) - 1.0) * 100.0;
        println!(
            "predicted cheapest: {p_best}; measured cheapest: {m_best} → {}; predicted cost of it {err:+.1}% off",
            if p_best == m_best { "same" } else { "DIFFERENT" }
        );
        summary.push((spec.name, p_best == m_best, err));
        fulls.push((spec.name, measured));
    }
    println!("\nbreak-even intervals (full data, this machine) against the paper's:");
    println!("{:<24} {:>22} {:>22} {:>22}", "workload", "Raw↔PMem (98 s)", "Raw↔Compr. (184 s)", "PMem↔Compr. (264 s)");
    for (name, m) in &fulls {
        println!(
            "{:<24} {:>22} {:>22} {:>22}",
            name,
            break_even_s(m, "raw", "pmem dram-first"),
            break_even_s(m, "raw", "zstd-dict"),
            break_even_s(m, "pmem dram-first", "zstd-dict")
        );
    }
    println!("\nsummary:");
    for (name, same, err) in summary {
        println!("  {name}: cheapest {} , prediction {err:+.1}%", if same { "matches" } else { "DIFFERS" });
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
