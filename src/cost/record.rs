//! `terrace record`: a sampled trace of a tenant's commands and a sample of its data, taken
//! from a live engine with `TERRACE.RECORD` (see `trace` for the files).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use super::trace::Meta;
use crate::bench::resp_client::Client;

#[derive(Args)]
pub struct RecordArgs {
    /// The tenant (`default` for the default namespace).
    #[arg(long)]
    pub tenant: String,
    /// How long to record.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Directory to write meta.json, trace.tsv and data.tsv into (created).
    #[arg(long)]
    pub out: PathBuf,
    /// The engine, host:port.
    #[arg(long, default_value = "127.0.0.1:7001")]
    pub engine: String,
    /// Share of the tenant's keys sampled (by key hash: a sampled key keeps all its commands).
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
}

pub fn run(args: RecordArgs) -> anyhow::Result<()> {
    let meta = record(&args)?;
    println!("recorded {} commands on {} sampled keys of tenant {} in {:.1} s (rate {}{}) into {}",
        meta.recorded, meta.sampled_keys, meta.tenant, meta.seconds, meta.rate,
        if meta.dropped > 0 { format!(", {} dropped", meta.dropped) } else { String::new() }, args.out.display());
    Ok(())
}

fn call(c: &mut Client, args: &[&str]) -> anyhow::Result<String> {
    let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    Ok(c.call(&argv).with_context(|| args.join(" "))?.unwrap_or_default())
}

pub fn record(args: &RecordArgs) -> anyhow::Result<Meta> {
    if !(args.rate > 0.0 && args.rate <= 1.0) {
        anyhow::bail!("--rate must be in (0, 1], got {}", args.rate);
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut c = Client::connect_to(&args.engine)?;
    let rate = args.rate.to_string();
    let mut trace = std::io::BufWriter::new(std::fs::File::create(args.out.join("trace.tsv"))?);
    call(&mut c, &["TERRACE.RECORD", "START", &args.tenant, "RATE", &rate])?;
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(args.seconds);
    let mut last_print = start;
    let mut lines = 0usize;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100).min(until.saturating_duration_since(Instant::now())));
        let chunk = call(&mut c, &["TERRACE.RECORD", "READ"])?;
        lines += chunk.lines().count();
        trace.write_all(chunk.as_bytes())?;
        if last_print.elapsed() >= Duration::from_secs(1) {
            eprint!("\r  {:>5.1} s  {lines} commands", start.elapsed().as_secs_f64());
            last_print = Instant::now();
        }
    }
    let stop: serde_json::Value = serde_json::from_str(&call(&mut c, &["TERRACE.RECORD", "STOP"])?)?;
    trace.write_all(stop["rest"].as_str().unwrap_or_default().as_bytes())?;
    trace.flush()?;
    eprintln!();
    // The data sample: the same keys (by hash), one shard per call.
    let mut data = std::io::BufWriter::new(std::fs::File::create(args.out.join("data.tsv"))?);
    let mut cursor = "0".to_string();
    let mut sampled_keys = 0u64;
    loop {
        let reply = call(&mut c, &["TERRACE.RECORD", "SAMPLE", &args.tenant, &cursor, "RATE", &rate])?;
        let (next, body) = reply.split_once('\n').unwrap_or((&reply, ""));
        sampled_keys += body.lines().count() as u64;
        data.write_all(body.as_bytes())?;
        if next == "0" {
            break;
        }
        cursor = next.to_string();
    }
    data.flush()?;
    let workload: serde_json::Value = serde_json::from_str(&call(&mut c, &["TERRACE.WORKLOAD", &args.tenant])?)?;
    let meta = Meta {
        tenant: args.tenant.clone(),
        source: args.engine.clone(),
        rate: args.rate,
        seconds: stop["seconds"].as_f64().unwrap_or(args.seconds),
        recorded: stop["recorded"].as_u64().unwrap_or(0),
        dropped: stop["dropped"].as_u64().unwrap_or(0),
        sampled_keys,
        workload,
    };
    std::fs::write(args.out.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
    Ok(meta)
}
