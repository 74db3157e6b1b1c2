//! Loading a recorded data sample into an engine and replaying a recorded trace against it:
//! `terrace replay`, and the measuring half of `terrace cost-eval`. Elided arguments (values)
//! are filled from the sample's own values — the key's value when the sample has it, another
//! sampled value otherwise, cut or repeated to the recorded length — so compressibility
//! survives the replay. Commands that would block or need state the sample lacks (blocking
//! pops, EVALSHA) are left out and counted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use super::trace::{read_data, read_meta, read_trace, Arg, Op, Record};
use crate::bench::resp_client::Client;

/// Commands not replayed.
const SKIPPED: &[&[u8]] = &[
    b"BLPOP",
    b"BRPOP",
    b"BLMOVE",
    b"BRPOPLPUSH",
    b"BLMPOP",
    b"BZPOPMIN",
    b"BZPOPMAX",
    b"BZMPOP",
    b"XREAD",
    b"XREADGROUP",
    b"EVALSHA",
    b"EVALSHA_RO",
    b"FCALL",
    b"FCALL_RO",
    b"WAIT",
];

/// Restores `data` (pipelined, REPLACE) into the engine at `addr`.
pub fn load(addr: &str, data: &[Record]) -> anyhow::Result<()> {
    let mut c = Client::connect_to(addr)?;
    let mut db = 0u8;
    for chunk in data.chunks(256) {
        for r in chunk {
            if r.db != db {
                c.push(&[b"SELECT", r.db.to_string().as_bytes()]);
                db = r.db;
            }
            let ttl = if r.pttl < 0 { "0".to_string() } else { r.pttl.to_string() };
            c.push(&[b"RESTORE", &r.key, ttl.as_bytes(), &r.dump, b"REPLACE"]);
        }
        c.flush()?;
    }
    if c.errors > 0 {
        anyhow::bail!("{} keys of the sample were refused: {}", c.errors, c.last_error.clone().unwrap_or_default());
    }
    Ok(())
}

/// Values of the sample's string keys, read back from the engine they were loaded into.
pub fn sample_values(addr: &str, data: &[Record]) -> anyhow::Result<HashMap<Vec<u8>, Vec<u8>>> {
    let mut c = Client::connect_to(addr)?;
    let mut out = HashMap::new();
    let mut db = None;
    for r in data.iter().take(200_000) {
        if db != Some(r.db) {
            c.call(&[b"SELECT", r.db.to_string().as_bytes()])?;
            db = Some(r.db);
        }
        if let Ok(Some(v)) = c.call(&[b"GET", &r.key]) {
            out.insert(r.key.clone(), v.into_bytes());
        }
    }
    Ok(out)
}

/// A trace made ready to send: each command's arguments with values filled in.
pub struct Prepared {
    pub commands: Vec<(u8, Vec<Vec<u8>>)>,
    pub skipped: usize,
}

fn fit(v: &[u8], n: usize) -> Vec<u8> {
    if v.is_empty() {
        return vec![b'x'; n];
    }
    v.iter().copied().cycle().take(n).collect()
}

pub fn prepare(ops: &[Op], values: &HashMap<Vec<u8>, Vec<u8>>) -> Prepared {
    let pool: Vec<&Vec<u8>> = values.values().collect();
    let mut rng = fastrand::Rng::with_seed(42);
    let mut skipped = 0;
    let mut commands = Vec::with_capacity(ops.len());
    for op in ops {
        if SKIPPED.contains(&op.name()) {
            skipped += 1;
            continue;
        }
        let own = op.key().and_then(|k| values.get(k));
        let args = op
            .args
            .iter()
            .map(|a| match a {
                Arg::Bytes(b) => b.clone(),
                Arg::Elided(n) => {
                    let v = own.or_else(|| (!pool.is_empty()).then(|| pool[rng.usize(0..pool.len())]));
                    fit(v.map(|v| v.as_slice()).unwrap_or(b""), *n)
                }
            })
            .collect();
        commands.push((op.db, args));
    }
    Prepared { commands, skipped }
}

/// What one closed-loop run measured.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Run {
    pub connections: usize,
    /// Requests each connection has in flight (one pipelined batch).
    pub pipeline: usize,
    pub qps: f64,
    /// Latency of a batch, µs.
    pub p50_us: f64,
    pub p99_us: f64,
    pub errors: u64,
    /// Commands per second of the engine's CPU time (all its threads), when its pid is known:
    /// what one fully used core sustains, unaffected by time the machine gave to others.
    pub per_cpu_second: Option<f64>,
}

/// CPU time of every thread of process `pid`, seconds (from /proc/PID/task/*/schedstat).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let mut ns = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        ns += text.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Some(ns as f64 / 1e9)
}

/// `connections` clients, each sending `pipeline` commands at a time, for `seconds`;
/// connection i takes the commands whose key hashes to it (so one key's commands keep their
/// order), and starts over at the end of the trace. `engine_pid`: to count its CPU time.
pub fn closed_loop(addr: &str, prepared: &Arc<Prepared>, connections: usize, pipeline: usize, seconds: f64, engine_pid: Option<u32>) -> anyhow::Result<Run> {
    let pipeline = pipeline.max(1);
    let cpu_start = engine_pid.and_then(cpu_seconds);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut handles = Vec::new();
    for t in 0..connections {
        let (stop, prepared, addr) = (stop.clone(), prepared.clone(), addr.to_string());
        handles.push(std::thread::spawn(move || -> anyhow::Result<(Vec<u32>, u64, u64)> {
            let mut c = Client::connect_to(&addr)?;
            let mine: Vec<usize> = (0..prepared.commands.len())
                .filter(|i| {
                    let args = &prepared.commands[*i].1;
                    let h = args.get(1).map(|k| k.iter().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(*b as u64))).unwrap_or(*i as u64);
                    (h % connections as u64) as usize == t
                })
                .collect();
            let mut lat = Vec::with_capacity(1 << 16);
            let mut db = 0u8;
            let mut sent = 0u64;
            if mine.is_empty() {
                return Ok((lat, 0, 0));
            }
            'outer: loop {
                for batch in mine.chunks(pipeline) {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break 'outer;
                    }
                    let start = Instant::now();
                    for &i in batch {
                        let (cdb, args) = &prepared.commands[i];
                        if *cdb != db {
                            c.push(&[b"SELECT", cdb.to_string().as_bytes()]);
                            db = *cdb;
                        }
                        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                        c.push(&argv);
                    }
                    c.flush()?;
                    lat.push(start.elapsed().as_micros() as u32);
                    sent += batch.len() as u64;
                }
            }
            Ok((lat, c.errors, sent))
        }));
    }
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut lat = Vec::new();
    let mut errors = 0;
    let mut sent = 0;
    for h in handles {
        let (l, e, n) = h.join().map_err(|_| anyhow::anyhow!("a replay thread panicked"))??;
        lat.extend(l);
        errors += e;
        sent += n;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = match (cpu_start, engine_pid.and_then(cpu_seconds)) {
        (Some(a), Some(b)) if b > a => Some(b - a),
        _ => None,
    };
    lat.sort_unstable();
    let pct = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0) as f64;
    Ok(Run { connections, pipeline, qps: sent as f64 / secs, p50_us: pct(0.5), p99_us: pct(0.99), errors, per_cpu_second: cpu.map(|c| sent as f64 / c) })
}

/// Requests in flight per replay connection: enough that the engine, not the replaying
/// client (which shares the machine), is what saturates.
pub const PIPELINE: usize = 8;

/// MaxPerf's search: over growing connection counts (stopping when QPS no longer grows by 3%
/// or a batch's p99 passes `p99_bound_us`), the run with the highest QPS within the bound
/// (None: even one connection is over it — no load meets it, infinite cost) and every run.
/// cost-eval then repeats the chosen load and keeps the median `rate`: commands per engine
/// CPU-second when the engine's pid is known (a saturated engine uses one core; on a shared
/// machine wall-clock QPS also counts the time others took), else QPS.
pub fn search(addr: &str, prepared: &Arc<Prepared>, seconds: f64, p99_bound_us: f64, engine_pid: Option<u32>) -> anyhow::Result<(Option<Run>, Vec<Run>)> {
    let mut runs: Vec<Run> = Vec::new();
    let mut best: Option<Run> = None;
    for connections in [1, 2, 4, 8, 16] {
        let run = closed_loop(addr, prepared, connections, PIPELINE, seconds, engine_pid)?;
        runs.push(run);
        if run.p99_us > p99_bound_us {
            break;
        }
        let grew = best.is_none_or(|b| run.qps > b.qps * 1.03);
        if best.is_none_or(|b| run.qps > b.qps) {
            best = Some(run);
        }
        if !grew {
            break;
        }
    }
    Ok((best, runs))
}

/// What a run counts for MaxPerf: per engine CPU-second when known, else QPS.
pub fn rate(run: &Run) -> f64 {
    run.per_cpu_second.unwrap_or(run.qps)
}

pub fn median(rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates.get(rates.len() / 2).copied().unwrap_or(0.0)
}

#[derive(Args)]
pub struct ReplayArgs {
    /// A directory written by `terrace record`.
    #[arg(long)]
    pub trace: PathBuf,
    /// The engine to replay against, host:port.
    #[arg(long)]
    pub engine: String,
    /// Restore the data sample first.
    #[arg(long)]
    pub load: bool,
    /// Play the trace once, in order, on one connection (instead of a timed closed loop).
    #[arg(long)]
    pub once: bool,
    /// Seconds of closed-loop replay.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let meta = read_meta(&args.trace)?;
    let ops = read_trace(&args.trace)?;
    let data = read_data(&args.trace)?;
    if args.load {
        load(&args.engine, &data).context("loading the data sample")?;
    }
    let values = sample_values(&args.engine, &data)?;
    let prepared = Arc::new(prepare(&ops, &values));
    if args.once {
        let mut c = Client::connect_to(&args.engine)?;
        let mut db = 0u8;
        for (cdb, argv) in &prepared.commands {
            if *cdb != db {
                c.call(&[b"SELECT", cdb.to_string().as_bytes()])?;
                db = *cdb;
            }
            let a: Vec<&[u8]> = argv.iter().map(|x| x.as_slice()).collect();
            c.push(&a);
            c.flush()?;
        }
        println!("replayed {} commands of tenant {} ({} skipped, {} errors)", prepared.commands.len(), meta.tenant, prepared.skipped, c.errors);
        return Ok(());
    }
    let run = closed_loop(&args.engine, &prepared, args.connections, 1, args.seconds, None)?;
    println!(
        "{} connections: {:.0} commands/s, p50 {:.0} µs, p99 {:.0} µs, {} errors ({} commands skipped)",
        run.connections, run.qps, run.p50_us, run.p99_us, run.errors, prepared.skipped
    );
    Ok(())
}
