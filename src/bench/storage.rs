//! `terrace bench storage`: the cache alone against the storage tier (the embedded LSM, and
//! PostgreSQL when `--postgres-url` is given) in write-through, write-back, and write-back
//! with each WAL mode (file, always, pmem with its ring on /dev/shm), side by side in one run.
//!
//! Engines pinned to core 0 with `taskset`, clients on core 1. First YCSB's load phase: every
//! engine starts empty and is loaded with `keys` records by `clients` connections, one SET at
//! a time, in YCSB's insert order (hashed by default); the load runs in slices of a tenth of
//! the keys, engines taking turns (order flipped every slice). Then rounds of YCSB A (50% GET
//! / 50% SET) and B (95% / 5%) over the loaded keys with scrambled-zipfian keys, each engine in
//! turn. After every slice or phase the engine is left to flush what it deferred and go idle
//! (engines share a core, and deferred work counts against the engine that deferred it).
//! Prints throughput, p99, settling time and CPU per request per phase and engine, and each
//! against the cache alone. The whole run is repeated, on fresh engines, for each connection
//! count of `--clients` (8 and 32 by default).

use std::path::PathBuf;
use std::process::Child;
use std::sync::Arc;

use clap::Args;

use super::resp_client::Client;
use super::tiers::Zipf;

#[derive(Args)]
pub struct StorageArgs {
    /// Records of the load phase (and the YCSB phases' key space).
    #[arg(long, default_value_t = 200_000)]
    keys: usize,
    /// YCSB's `insertorder`: `hashed` (its default: keys in no order) or `ordered`.
    #[arg(long, default_value = "hashed", value_parser = ["hashed", "ordered"])]
    insert_order: String,
    /// Connections (each one request at a time), comma-separated: the whole run (fresh
    /// engines, load, YCSB) is repeated at each level. Group commit makes `wal = always`
    /// cheaper per write the more connections wait on one fsync, so one level tells half the story.
    #[arg(long, value_delimiter = ',', default_values_t = [8, 32])]
    clients: Vec<usize>,
    /// Seconds per phase per engine per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Rounds of the YCSB A and B phases.
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
    /// Only these setups, named as the table prints them, comma-separated (e.g.
    /// `"lsm write-through,lsm write-back"`); the cache alone always runs, as the baseline.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

struct Engine {
    name: String,
    child: Child,
    port: u16,
    dir: PathBuf,
    /// Per phase, each round's measurements.
    results: Vec<Rounds>,
}

/// One phase's measurements on one engine, a value per round.
#[derive(Clone, Default)]
struct Rounds {
    per_sec: Vec<f64>,
    p99_us: Vec<f64>,
    /// Seconds the engine took after the phase to flush what it deferred and go idle.
    settle_s: Vec<f64>,
    /// Requests over the phase plus its settling time: what the engine sustains.
    sustained: Vec<f64>,
    /// The engine's CPU time (all its threads, phase and settling) per request, µs.
    cpu_us: Vec<f64>,
}

impl Engine {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the engine has flushed its dirty keys and its threads (flusher, the LSM's
    /// flushes and compactions) are idle; returns how long that took.
    fn settle(&self) -> anyhow::Result<f64> {
        let start = std::time::Instant::now();
        wait_flushed(self.port)?;
        let flushed = start.elapsed();
        Ok((flushed + super::wait_idle(self.pid(), std::time::Duration::from_secs(120))).as_secs_f64())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const PHASES: [(&str, f64); 3] = [("load", 0.0), ("YCSB A", 0.5), ("YCSB B", 0.95)];
/// The load phase runs in this many slices, engines taking turns.
const LOAD_SLICES: u64 = 10;

/// Record `i`'s key, as YCSB names it: `user` and the record number, or a hash of it.
fn key(i: u64, hashed: bool) -> String {
    if hashed {
        format!("user{}", super::tiers::fnv1a64(i))
    } else {
        format!("user{i:010}")
    }
}

/// What one slice or phase measured on one engine.
struct Measured {
    requests: f64,
    seconds: f64,
    p99_us: f64,
    settle_s: f64,
    cpu_s: f64,
}

/// Runs one slice of the load phase (records `from..to`) or one timed YCSB phase
/// (`get_share` of GETs), then lets the engine settle.
fn run_phase(e: &Engine, args: &StorageArgs, clients: usize, z: &Arc<Zipf>, get_share: f64, from: u64, to: u64) -> anyhow::Result<Measured> {
    let (value, z, hashed) = (vec![b'v'; args.value_size], z.clone(), args.insert_order == "hashed");
    let until = if get_share == 0.0 { super::Until::Requests(to - from) } else { super::Until::Seconds(args.seconds) };
    let cpu_before = super::cpu_seconds(e.pid());
    let r = super::closed_loop(e.port, clients, until, move |_, n, c| {
        if get_share == 0.0 {
            c.call(&[b"SET", key(from + n, hashed).as_bytes(), &value])
        } else if fastrand::f64() < get_share {
            c.call(&[b"GET", key(z.next(), hashed).as_bytes()])
        } else {
            c.call(&[b"SET", key(z.next(), hashed).as_bytes(), &value])
        }
        .map(drop)
    })?;
    let settle_s = e.settle()?;
    Ok(Measured { requests: r.requests() as f64, seconds: r.seconds, p99_us: r.percentile(99), settle_s, cpu_s: super::cpu_seconds(e.pid()) - cpu_before })
}

impl Rounds {
    fn push(&mut self, m: &Measured) {
        self.per_sec.push(m.requests / m.seconds);
        self.p99_us.push(m.p99_us);
        self.settle_s.push(m.settle_s);
        self.sustained.push(m.requests / (m.seconds + m.settle_s));
        self.cpu_us.push(m.cpu_s * 1e6 / m.requests.max(1.0));
    }
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

/// The engines in turn, in order on even turns and in reverse on odd ones.
fn turns(n: usize, turn: usize) -> Vec<usize> {
    if turn.is_multiple_of(2) {
        (0..n).collect()
    } else {
        (0..n).rev().collect()
    }
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
    anyhow::ensure!(!args.clients.is_empty() && !args.clients.contains(&0), "--clients needs one or more counts above 0");
    for &clients in &args.clients {
        run_with(&args, clients)?;
    }
    Ok(())
}

/// The whole run, on fresh engines, with `clients` connections.
fn run_with(args: &StorageArgs, clients: usize) -> anyhow::Result<()> {
    let rings = format!("/dev/shm/terrace-bench-storage-{}", std::process::id());
    let ring = |adapter: &str| format!("{rings}-{adapter}.ring");
    let mut setups: Vec<(String, Vec<String>)> = vec![("cache only".into(), vec![])];
    setups.extend(setups_on("lsm", &["--storage".into(), "lsm".into()], &ring));
    if let Some(url) = &args.postgres_url {
        // A database per engine: engines sharing one would write each other's keys.
        let mut pg = setups_on("postgres", &["--storage".into(), "postgres".into(), "--storage-url".into(), url.clone()], &ring);
        for (i, (_, flags)) in pg.iter_mut().enumerate() {
            let name = format!("terrace_bench_{}_{clients}_{i}", std::process::id());
            flags[3] = terrace_engine::storage::postgres::create_database(url, &name)?;
        }
        setups.extend(pg);
    }
    if !args.only.is_empty() {
        setups.retain(|(name, _)| name == "cache only" || args.only.contains(name));
    }
    println!(
        "terrace bench storage: {} keys loaded in {} insert order, {} connections one request at a time, {} B values, YCSB A and B {} s per phase, {} rounds",
        args.keys, args.insert_order, clients, args.value_size, args.seconds, args.rounds
    );
    let mut engines = Vec::new();
    for (i, (name, flags)) in setups.into_iter().enumerate() {
        let dir = args.dir.join(format!("terrace-bench-storage-{}-{clients}-{i}", std::process::id()));
        let os: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
        let (child, port) = super::spawn_pinned_engine(&dir, &os)?;
        engines.push(Engine { name, child, port, dir, results: vec![Rounds::default(); PHASES.len()] });
    }
    let z = Arc::new(Zipf::new(args.keys, 0.99));
    // The load phase, in slices; an engine's figures are over all its slices.
    let slice = (args.keys as u64).div_ceil(LOAD_SLICES);
    let mut loaded: Vec<Vec<Measured>> = engines.iter().map(|_| Vec::new()).collect();
    for s in 0..LOAD_SLICES {
        let (from, to) = (s * slice, ((s + 1) * slice).min(args.keys as u64));
        for i in turns(engines.len(), s as usize) {
            let m = run_phase(&engines[i], args, clients, &z, 0.0, from, to)?;
            eprintln!("  {} load {from}..{to}: {:.0} req/s, settled in {:.2} s", engines[i].name, m.requests / m.seconds, m.settle_s);
            loaded[i].push(m);
        }
    }
    for (e, slices) in engines.iter_mut().zip(&loaded) {
        let sum = |f: fn(&Measured) -> f64| slices.iter().map(f).sum::<f64>();
        let p99s: Vec<f64> = slices.iter().map(|m| m.p99_us).collect();
        let all = Measured {
            requests: sum(|m| m.requests),
            seconds: sum(|m| m.seconds),
            p99_us: super::median(&p99s),
            settle_s: sum(|m| m.settle_s),
            cpu_s: sum(|m| m.cpu_s),
        };
        e.results[0].push(&all);
    }
    for round in 0..args.rounds {
        for (p, (phase, get_share)) in PHASES.iter().enumerate().skip(1) {
            for i in turns(engines.len(), round) {
                let m = run_phase(&engines[i], args, clients, &z, *get_share, 0, 0)?;
                eprintln!("  {} {phase}: {:.0} req/s, p99 {:.0} µs, settled in {:.2} s", engines[i].name, m.requests / m.seconds, m.p99_us, m.settle_s);
                engines[i].results[p].push(&m);
            }
        }
        eprintln!("round {} of {} done", round + 1, args.rounds);
    }
    let _ = std::fs::remove_file(ring("lsm"));
    let _ = std::fs::remove_file(ring("postgres"));
    println!();
    println!("| engine | phase | req/s (median) | vs cache only | p99 µs | settle s | req/s incl. settle | vs cache only | CPU µs/req |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (p, (phase, _)) in PHASES.iter().enumerate() {
        let base = &engines[0].results[p];
        let (base_ops, base_sustained) = (super::median(&base.per_sec), super::median(&base.sustained));
        for e in &engines {
            let r = &e.results[p];
            let (ops, sustained) = (super::median(&r.per_sec), super::median(&r.sustained));
            println!(
                "| {} | {} | {:.0} | {:.2}x | {:.0} | {:.2} | {:.0} | {:.2}x | {:.1} |",
                e.name,
                phase,
                ops,
                ops / base_ops,
                super::median(&r.p99_us),
                super::median(&r.settle_s),
                sustained,
                sustained / base_sustained,
                super::median(&r.cpu_us)
            );
        }
    }
    // The two targets, per adapter, on the phase's own throughput and including what
    // each engine deferred past it.
    let medians =
        |name: &str, p: usize| engines.iter().find(|e| e.name == name).map(|e| (super::median(&e.results[p].per_sec), super::median(&e.results[p].sustained)));
    println!();
    for adapter in ["lsm", "postgres"] {
        for (p, (phase, _)) in PHASES.iter().enumerate() {
            let ratio = |a: &str, b: &str| Some((medians(&format!("{adapter} {a}"), p)?, medians(&format!("{adapter} {b}"), p)?));
            if let Some(((wb, wb_s), (wt, wt_s))) = ratio("write-back", "write-through") {
                println!("{clients} connections, {adapter} {phase}: write-back / write-through = {:.2}x ({:.2}x incl. settle)", wb / wt, wb_s / wt_s);
            }
            if let Some(((pm, pm_s), (al, al_s))) = ratio("write-back + WAL pmem", "write-back + WAL always") {
                println!("{clients} connections, {adapter} {phase}: WAL pmem / WAL always = {:.2}x ({:.2}x incl. settle)", pm / al, pm_s / al_s);
            }
        }
    }
    println!();
    Ok(())
}
