//! `terrace bench tiers`: the PMem tier against all-DRAM, side by side in one run.
//!
//! One engine keeps everything in DRAM; one engine per (arena location × policy) keeps
//! `dram_max` = a share (20%) of the value bytes in DRAM and the rest in an arena file on
//! /dev/shm (memory standing in for PMem/CXL) or on disk. All engines are pinned to core 0
//! with `taskset` (only the measured one is busy), this client to core 1. Every engine is
//! loaded with the same keys and warmed up; then rounds alternate between the engines
//! (order flipped every round) running a scrambled-zipfian (YCSB) GET/SET mix, pipelined.
//! Prints medians of throughput and of p99 batch latency, the DRAM hit share of the
//! measured reads, and memory: RSS, and its anonymous part (DRAM proper — the mapped arena
//! file is counted in RSS by the kernel even though on PMem it would not be DRAM).

use std::path::PathBuf;
use std::process::Child;
use std::time::Instant;

use anyhow::bail;
use clap::Args;

use super::resp_client::Client;
use super::rss;

#[derive(Args)]
pub struct TiersArgs {
    /// Keys loaded into every engine.
    #[arg(long, default_value_t = 2_000_000)]
    keys: usize,
    /// Bytes per value.
    #[arg(long, default_value_t = 256)]
    value_size: usize,
    /// Zipfian skew (YCSB's default 0.99).
    #[arg(long, default_value_t = 0.99)]
    theta: f64,
    /// Share of requests that are GETs (the rest SETs).
    #[arg(long, default_value_t = 0.95)]
    get_share: f64,
    /// DRAM budget of the tiered engines, as a share of the value bytes.
    #[arg(long, default_value_t = 0.2)]
    dram_share: f64,
    /// Requests per engine per round.
    #[arg(long, default_value_t = 1_000_000)]
    ops: usize,
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Requests per pipelined batch.
    #[arg(long, default_value_t = 16)]
    pipeline: usize,
    /// Where the on-disk arena files go.
    #[arg(long, default_value = "/var/tmp")]
    disk_dir: PathBuf,
    /// Only these setups (e.g. dram,shm:dram-first).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// YCSB's zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"), scrambled by a hash so hot keys spread over the keyspace as YCSB does.
/// Written here because the crates that sample a Zipf distribution don't scramble, and the
/// benchmark must match YCSB's key choice.
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    pub fn new(n: usize, theta: f64) -> Zipf {
        let zeta = |k: u64| (1..=k).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let (zetan, zeta2) = (zeta(n as u64), zeta(2));
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf { n: n as u64, theta, alpha: 1.0 / (1.0 - theta), zetan, eta }
    }

    /// A rank: 0 is the most popular.
    fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            ((self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n - 1)
        }
    }

    /// A key index (scrambled rank).
    pub fn next(&self) -> u64 {
        // As YCSB's ScrambledZipfianGenerator.
        fnv1a64(self.rank(fastrand::f64())) % self.n
    }
}

/// FNV-1a of a number's bytes: YCSB's scrambling of zipfian ranks and of its "hashed" insert
/// order.
pub fn fnv1a64(x: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in x.to_le_bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

struct Setup {
    name: String,
    /// (arena file, policy); None: all in DRAM.
    tier: Option<(PathBuf, &'static str)>,
}

struct Engine {
    setup: Setup,
    child: Child,
    port: u16,
    dir: PathBuf,
    ops: Vec<f64>,
    p99: Vec<f64>,
    dram_hits: u64,
    pmem_hits: u64,
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some((file, _)) = &self.setup.tier {
            let _ = std::fs::remove_file(file);
            let _ = std::fs::remove_file(terrace_engine::tier::warm::index_path(file));
        }
    }
}

fn start(setup: Setup, tag: usize, pmem_size: u64, dram_max: u64) -> anyhow::Result<Engine> {
    let dir = std::env::temp_dir().join(format!("terrace-bench-tiers-{}-{tag}", std::process::id()));
    let (pmem_size, dram_max) = (pmem_size.to_string(), dram_max.to_string());
    let mut flags: Vec<&std::ffi::OsStr> = Vec::new();
    if let Some((file, policy)) = &setup.tier {
        let _ = std::fs::remove_file(file);
        flags.extend([std::ffi::OsStr::new("--pmem-path"), file.as_os_str()]);
        flags.extend(["--pmem-size", &pmem_size, "--dram-max", &dram_max, "--tier-policy", policy].into_iter().map(std::ffi::OsStr::new));
    }
    let (child, port) = super::spawn_pinned_engine(&dir, &flags)?;
    Ok(Engine { setup, child, port, dir, ops: Vec::new(), p99: Vec::new(), dram_hits: 0, pmem_hits: 0 })
}

fn key(i: u64) -> Vec<u8> {
    format!("key:{i:010}").into_bytes()
}

fn value(size: usize) -> Vec<u8> {
    (0..size).map(|_| fastrand::alphanumeric() as u8).collect()
}

/// Runs `ops` requests of the mix; returns (requests/s, p99 batch latency in µs).
fn run_mix(c: &mut Client, z: &Zipf, args: &TiersArgs, ops: usize, val: &[u8]) -> anyhow::Result<(f64, f64)> {
    let mut lat = Vec::with_capacity(ops / args.pipeline + 1);
    let start = Instant::now();
    let mut done = 0;
    while done < ops {
        let n = args.pipeline.min(ops - done);
        for _ in 0..n {
            let k = key(z.next());
            if fastrand::f64() < args.get_share {
                c.push(&[b"GET", &k]);
            } else {
                c.push(&[b"SET", &k, val]);
            }
        }
        let t = Instant::now();
        c.flush()?;
        lat.push(t.elapsed().as_micros() as u32);
        done += n;
    }
    let secs = start.elapsed().as_secs_f64();
    if c.errors > 0 {
        bail!("{} requests failed: {:?}", c.errors, c.last_error);
    }
    lat.sort_unstable();
    Ok((ops as f64 / secs, lat[(lat.len() * 99 / 100).min(lat.len() - 1)] as f64))
}

fn tier_hits(c: &mut Client) -> anyhow::Result<(u64, u64)> {
    let text = c.call(&[b"INFO", b"tiers"])?.unwrap_or_default();
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    Ok((field("dram_hits"), field("pmem_hits")))
}

fn mb(b: u64) -> String {
    format!("{:.0} MB", b as f64 / (1 << 20) as f64)
}

pub fn run(args: TiersArgs) -> anyhow::Result<()> {
    super::compress_e2e::pin_self_to(1);
    let data = (args.keys * args.value_size) as u64;
    let dram_max = (data as f64 * args.dram_share) as u64;
    // Room for every value plus slot rounding and the SETs' churn.
    let pmem_size = (data * 3 / 2).max(64 << 20);
    let shm = PathBuf::from("/dev/shm");
    let mut setups = vec![Setup { name: "dram".into(), tier: None }];
    for (place, dir) in [("shm", &shm), ("disk", &args.disk_dir)] {
        for policy in ["dram-first", "pmem-first", "bidirectional"] {
            let file = dir.join(format!("terrace-bench-{}-{place}-{policy}.pmem", std::process::id()));
            setups.push(Setup { name: format!("{place}:{policy}"), tier: Some((file, policy)) });
        }
    }
    setups.retain(|s| args.only.is_empty() || args.only.contains(&s.name));
    println!(
        "terrace bench tiers: {} keys x {} B ({}), zipfian theta {}, {:.0}% GET, pipeline {}, dram_max {} ({:.0}% of values), pmem_size {}",
        args.keys,
        args.value_size,
        mb(data),
        args.theta,
        args.get_share * 100.0,
        args.pipeline,
        mb(dram_max),
        args.dram_share * 100.0,
        mb(pmem_size)
    );
    let z = Zipf::new(args.keys, args.theta);
    let mut engines = Vec::new();
    for (i, s) in setups.into_iter().enumerate() {
        let name = s.name.clone();
        let e = start(s, i, pmem_size, dram_max)?;
        let mut c = Client::connect(e.port)?;
        let t = Instant::now();
        for chunk in (0..args.keys as u64).collect::<Vec<_>>().chunks(256) {
            for &k in chunk {
                c.push(&[b"SET", &key(k), &value(args.value_size)]);
            }
            c.flush()?;
        }
        if c.errors > 0 {
            bail!("{name}: {} SETs failed while loading: {:?}", c.errors, c.last_error);
        }
        let val = value(args.value_size);
        run_mix(&mut c, &z, &args, args.ops, &val)?; // warm-up: placement settles
        eprintln!("{name}: loaded and warmed up in {:.1} s", t.elapsed().as_secs_f64());
        engines.push(e);
    }
    let val = value(args.value_size);
    for round in 0..args.rounds {
        let order: Vec<usize> = if round % 2 == 0 { (0..engines.len()).collect() } else { (0..engines.len()).rev().collect() };
        for i in order {
            let e = &mut engines[i];
            let mut c = Client::connect(e.port)?;
            let before = tier_hits(&mut c)?;
            let (ops, p99) = run_mix(&mut c, &z, &args, args.ops, &val)?;
            let after = tier_hits(&mut c)?;
            e.dram_hits += after.0 - before.0;
            e.pmem_hits += after.1 - before.1;
            e.ops.push(ops);
            e.p99.push(p99);
        }
        eprintln!("round {} of {} done", round + 1, args.rounds);
    }
    // Ratios against the all-DRAM engine (or the first one measured without it).
    let base = engines.iter().position(|e| e.setup.tier.is_none()).unwrap_or(0);
    let base_ops = super::median(&engines[base].ops);
    let base_anon = rss(engines[base].child.id()).1.max(1);
    println!();
    println!("| setup | GET+SET req/s (median) | vs all-DRAM | p99 batch µs | DRAM hit share | RSS | RSS anon (DRAM) | anon vs all-DRAM |");
    println!("|---|---|---|---|---|---|---|---|");
    for e in &engines {
        let (vm, anon) = rss(e.child.id());
        let ops = super::median(&e.ops);
        let share =
            if e.setup.tier.is_none() { "100%".to_string() } else { format!("{:.1}%", 100.0 * e.dram_hits as f64 / (e.dram_hits + e.pmem_hits).max(1) as f64) };
        println!(
            "| {} | {:.0} | {:.2}x | {:.0} | {} | {} | {} | {:.2}x |",
            e.setup.name,
            ops,
            ops / base_ops,
            super::median(&e.p99),
            share,
            mb(vm),
            mb(anon),
            anon as f64 / base_anon as f64
        );
    }
    Ok(())
}
