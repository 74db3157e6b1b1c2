//! `terrace bench storage`: the cache alone against the storage tier (the embedded LSM, and
//! PostgreSQL when `--postgres-url` is given) in write-through, write-back, and write-back
//! with each WAL mode (file, always, pmem with its ring on /dev/shm), side by side in one run.
//!
//! Engines pinned to core 0 with `taskset`, clients on core 1. Phases, each run on every
//! engine in turn (order flipped every round): the load phase (`clients` connections each
//! SETting new keys, one request at a time, as YCSB's load does), then YCSB A (50% GET / 50%
//! SET) and B (95% / 5%) over the loaded keys with scrambled-zipfian keys. Prints the median
//! throughput and p99 per phase and engine, and each against the cache alone.

use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::Args;

use super::resp_client::Client;
use super::tiers::Zipf;

#[derive(Args)]
pub struct StorageArgs {
    /// Keys loaded before the YCSB phases.
    #[arg(long, default_value_t = 200_000)]
    keys: usize,
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Seconds per phase per engine per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// A PostgreSQL to benchmark against (its `terrace_kv` table is used).
    #[arg(long)]
    postgres_url: Option<String>,
    /// Where the engines' data directories go.
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
}

struct Engine {
    name: String,
    child: Child,
    port: u16,
    dir: PathBuf,
    /// Per phase: requests/s and p99 µs of each round.
    results: Vec<(Vec<f64>, Vec<f64>)>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const PHASES: [(&str, f64); 3] = [("load", 0.0), ("YCSB A", 0.5), ("YCSB B", 0.95)];

fn key(i: u64) -> String {
    format!("user{i:010}")
}

/// One timed phase: (requests/s, p99 µs). `get_share` 0 is the load phase (new keys).
fn run_phase(port: u16, args: &StorageArgs, z: &Arc<Zipf>, get_share: f64, next_new: &Arc<AtomicU64>) -> anyhow::Result<(f64, f64)> {
    let (value, z, next_new) = (vec![b'v'; args.value_size], z.clone(), next_new.clone());
    let r = super::closed_loop(port, args.clients, args.seconds, move |_, _, c| {
        if get_share == 0.0 {
            let k = key(next_new.fetch_add(1, Ordering::Relaxed));
            c.call(&[b"SET", k.as_bytes(), &value])
        } else if fastrand::f64() < get_share {
            c.call(&[b"GET", key(z.next()).as_bytes()])
        } else {
            c.call(&[b"SET", key(z.next()).as_bytes(), &value])
        }
        .map(drop)
    })?;
    Ok((r.per_sec, r.percentile(99)))
}

/// The configurations compared on one adapter (`storage` flags): write-through, write-back
/// without a WAL, and write-back with each WAL mode (its durability).
fn setups_on(adapter: &str, storage: &[String], ring: &dyn Fn(&str) -> String) -> Vec<(String, Vec<String>)> {
    let with = |mode: &str, wal: &[&str]| -> Vec<String> {
        let mut f = storage.to_vec();
        f.extend(["--storage-mode".to_string(), mode.to_string()]);
        f.extend(wal.iter().map(|s| s.to_string()));
        f
    };
    let pmem_ring = ring(adapter);
    vec![
        (format!("{adapter} write-through"), with("write-through", &[])),
        (format!("{adapter} write-back"), with("write-back", &[])),
        (format!("{adapter} write-back + WAL file"), with("write-back", &["--wal", "file"])),
        (format!("{adapter} write-back + WAL always"), with("write-back", &["--wal", "always"])),
        (format!("{adapter} write-back + WAL pmem"), with("write-back", &["--wal", "pmem", "--wal-ring-path", &pmem_ring])),
    ]
}

/// Waits until a write-back engine's flusher has nothing left (the pre-load must not spill
/// into the measured phases).
pub fn wait_flushed(port: u16) -> anyhow::Result<()> {
    let mut c = Client::connect(port)?;
    for _ in 0..6000 {
        let text = c.call(&[b"INFO", b"storage"])?.unwrap_or_default();
        let dirty = text.lines().find_map(|l| l.strip_prefix("dirty_keys:")).map(|v| v.trim() == "0").unwrap_or(true);
        if dirty {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    anyhow::bail!("the engine on port {port} did not finish flushing its pre-load")
}

pub fn run(args: StorageArgs) -> anyhow::Result<()> {
    super::compress_e2e::pin_self_to(1);
    let rings = format!("/dev/shm/terrace-bench-storage-{}", std::process::id());
    let ring = |adapter: &str| format!("{rings}-{adapter}.ring");
    let mut setups: Vec<(String, Vec<String>)> = vec![("cache only".into(), vec![])];
    setups.extend(setups_on("lsm", &["--storage".into(), "lsm".into()], &ring));
    if let Some(url) = &args.postgres_url {
        // A database per engine: engines sharing one would write each other's keys.
        let mut pg = setups_on("postgres", &["--storage".into(), "postgres".into(), "--storage-url".into(), url.clone()], &ring);
        for (i, (_, flags)) in pg.iter_mut().enumerate() {
            let name = format!("terrace_bench_{}_{i}", std::process::id());
            flags[3] = terrace_engine::storage::postgres::create_database(url, &name)?;
        }
        setups.extend(pg);
    }
    println!(
        "terrace bench storage: {} keys loaded, {} connections one request at a time, {} B values, {} s per phase, {} rounds",
        args.keys, args.clients, args.value_size, args.seconds, args.rounds
    );
    let mut engines = Vec::new();
    for (i, (name, flags)) in setups.into_iter().enumerate() {
        let dir = args.dir.join(format!("terrace-bench-storage-{}-{i}", std::process::id()));
        let os: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
        let (child, port) = super::spawn_pinned_engine(&dir, &os)?;
        // The YCSB phases read keys 0..keys: load them (pipelined, not measured).
        let mut c = Client::connect(port)?;
        let value = vec![b'v'; args.value_size];
        for chunk in (0..args.keys as u64).collect::<Vec<_>>().chunks(500) {
            for &k in chunk {
                c.push(&[b"SET", key(k).as_bytes(), &value]);
            }
            c.flush()?;
        }
        wait_flushed(port)?;
        eprintln!("{name}: loaded");
        engines.push(Engine { name, child, port, dir, results: vec![(Vec::new(), Vec::new()); PHASES.len()] });
    }
    let z = Arc::new(Zipf::new(args.keys, 0.99));
    // New keys of the load phase start past the loaded ones.
    let next_new = Arc::new(AtomicU64::new(args.keys as u64 * 10));
    for round in 0..args.rounds {
        for (p, (_, get_share)) in PHASES.iter().enumerate() {
            let order: Vec<usize> = if round % 2 == 0 { (0..engines.len()).collect() } else { (0..engines.len()).rev().collect() };
            for i in order {
                let (ops, p99) = run_phase(engines[i].port, &args, &z, *get_share, &next_new)?;
                engines[i].results[p].0.push(ops);
                engines[i].results[p].1.push(p99);
            }
        }
        eprintln!("round {} of {} done", round + 1, args.rounds);
    }
    for e in &engines {
        wait_flushed(e.port)?;
    }
    let _ = std::fs::remove_file(ring("lsm"));
    let _ = std::fs::remove_file(ring("postgres"));
    println!();
    println!("| engine | phase | req/s (median) | vs cache only | p99 µs |");
    println!("|---|---|---|---|---|");
    for (p, (phase, _)) in PHASES.iter().enumerate() {
        let base = super::median(&engines[0].results[p].0);
        for e in &engines {
            let ops = super::median(&e.results[p].0);
            println!("| {} | {} | {:.0} | {:.2}x | {:.0} |", e.name, phase, ops, ops / base, super::median(&e.results[p].1));
        }
    }
    // The two targets, per adapter.
    let ops = |name: &str, p: usize| engines.iter().find(|e| e.name == name).map(|e| super::median(&e.results[p].0));
    println!();
    for adapter in ["lsm", "postgres"] {
        for (p, (phase, _)) in PHASES.iter().enumerate() {
            if let (Some(wb), Some(wt)) = (ops(&format!("{adapter} write-back"), p), ops(&format!("{adapter} write-through"), p)) {
                println!("{adapter} {phase}: write-back / write-through = {:.2}x", wb / wt);
            }
            if let (Some(pm), Some(al)) = (ops(&format!("{adapter} write-back + WAL pmem"), p), ops(&format!("{adapter} write-back + WAL always"), p)) {
                println!("{adapter} {phase}: WAL pmem / WAL always = {:.2}x", pm / al);
            }
        }
    }
    Ok(())
}
