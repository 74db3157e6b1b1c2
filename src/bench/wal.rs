//! `terrace bench wal`: the write-ahead log's modes side by side in one run.
//!
//! One engine per mode (off, file, always, pmem with its ring on /dev/shm), each pinned to
//! core 0 with `taskset`; the clients run on core 1. Each round gives every engine the same
//! load (order flipped every round): `clients` connections, each sending one SET at a time
//! (no pipelining, as YCSB's load phase does), for `seconds`. Prints the median throughput,
//! p50/p99 request latency, fsyncs per second and the ratio to `always`.

use std::path::PathBuf;
use std::process::Child;
use std::time::Instant;

use clap::Args;

use super::resp_client::Client;

#[derive(Args)]
pub struct WalArgs {
    /// Concurrent connections.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Seconds per engine per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Where the engines' data directories (and so the log files) go.
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
}

struct Engine {
    mode: &'static str,
    child: Child,
    port: u16,
    dir: PathBuf,
    ring: PathBuf,
    ops: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    syncs: Vec<f64>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.ring);
    }
}

fn start(mode: &'static str, args: &WalArgs) -> anyhow::Result<Engine> {
    let dir = args.dir.join(format!("terrace-bench-wal-{}-{mode}", std::process::id()));
    let ring = PathBuf::from(format!("/dev/shm/terrace-bench-wal-{}.ring", std::process::id()));
    let mut flags: Vec<&std::ffi::OsStr> = ["--wal", mode].into_iter().map(std::ffi::OsStr::new).collect();
    if mode == "pmem" {
        flags.extend([std::ffi::OsStr::new("--wal-ring-path"), ring.as_os_str()]);
    }
    let (child, port) = super::spawn_pinned_engine(&dir, &flags)?;
    Ok(Engine { mode, child, port, dir, ring, ops: Vec::new(), p50: Vec::new(), p99: Vec::new(), syncs: Vec::new() })
}

fn wal_syncs(port: u16) -> u64 {
    let Ok(mut c) = Client::connect(port) else { return 0 };
    let text = c.call(&[b"INFO", b"wal"]).ok().flatten().unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("wal_syncs:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// One timed load of SETs of new keys: (requests/s, p50 µs, p99 µs).
fn run_load(port: u16, args: &WalArgs, round: usize) -> anyhow::Result<(f64, f64, f64)> {
    let value = vec![b'v'; args.value_size];
    let r = super::closed_loop(port, args.clients, super::Until::Seconds(args.seconds), move |t, n, c| {
        let key = format!("load:{round}:{t}:{n}");
        c.call(&[b"SET", key.as_bytes(), &value]).map(drop)
    })?;
    Ok((r.per_sec, r.percentile(50), r.percentile(99)))
}

pub fn run(args: WalArgs) -> anyhow::Result<()> {
    super::compress_e2e::pin_self_to(1);
    println!(
        "terrace bench wal: {} connections, one SET ({} B values) at a time each, {} s per engine per round, {} rounds, logs under {}",
        args.clients,
        args.value_size,
        args.seconds,
        args.rounds,
        args.dir.display()
    );
    let mut engines = Vec::new();
    for mode in ["off", "file", "always", "pmem"] {
        engines.push(start(mode, &args)?);
    }
    for round in 0..args.rounds {
        let order: Vec<usize> = if round % 2 == 0 { (0..engines.len()).collect() } else { (0..engines.len()).rev().collect() };
        for i in order {
            let e = &mut engines[i];
            let before = wal_syncs(e.port);
            let t = Instant::now();
            let (ops, p50, p99) = run_load(e.port, &args, round)?;
            let syncs = (wal_syncs(e.port) - before) as f64 / t.elapsed().as_secs_f64();
            e.ops.push(ops);
            e.p50.push(p50);
            e.p99.push(p99);
            e.syncs.push(syncs);
        }
        eprintln!("round {} of {} done", round + 1, args.rounds);
    }
    let always = super::median(&engines.iter().find(|e| e.mode == "always").expect("always runs").ops);
    println!();
    println!("| wal | SET/s (median) | vs always | p50 µs | p99 µs | fsyncs/s |");
    println!("|---|---|---|---|---|---|");
    for e in &engines {
        println!(
            "| {} | {:.0} | {:.2}x | {:.0} | {:.0} | {:.0} |",
            e.mode,
            super::median(&e.ops),
            super::median(&e.ops) / always,
            super::median(&e.p50),
            super::median(&e.p99),
            super::median(&e.syncs)
        );
    }
    Ok(())
}
