//! The end-to-end half of `terrace bench compress`: one engine per codec/mode, all pinned to
//! core 0 with `taskset` (only the one being measured is busy), this client on core 1. Each
//! engine is loaded with the dataset and trained; then rounds alternate between the engines
//! (order flipped every round) measuring pipelined SET and GET throughput with dataset values.
//! Prints medians and the ratio against `none`, the engine's own CPU time per request (from
//! /proc, steadier than req/s on a shared machine), and the memory each engine uses.

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::resp_client::Client;

pub struct Setup {
    pub codec: &'static str,
    pub mode: &'static str,
}

pub const SETUPS: [Setup; 7] = [
    Setup { codec: "none", mode: "eager" },
    Setup { codec: "zstd", mode: "eager" },
    Setup { codec: "zstd-dict", mode: "eager" },
    Setup { codec: "pattern", mode: "eager" },
    Setup { codec: "zstd-dict", mode: "lazy" },
    Setup { codec: "pattern", mode: "lazy" },
    Setup { codec: "none", mode: "lazy" },
];

struct Server {
    setup: &'static Setup,
    child: Child,
    port: u16,
    dir: PathBuf,
    set: Vec<f64>,
    get: Vec<f64>,
    set_cpu: Vec<f64>,
    get_cpu: Vec<f64>,
    used_memory: u64,
    data_bytes: u64,
    cold_data_bytes: Option<u64>,
    /// Trainings during the measured rounds (each one makes the background pass re-encode).
    retrains: u64,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn pin_self_to(core: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn start(setup: &'static Setup, tag: usize) -> anyhow::Result<Server> {
    let dir = std::env::temp_dir().join(format!("terrace-bench-compress-{}-{tag}", std::process::id()));
    let flags: Vec<&std::ffi::OsStr> = ["--compression", setup.codec, "--compression-mode", setup.mode].into_iter().map(std::ffi::OsStr::new).collect();
    let (child, port) = super::spawn_pinned_engine(&dir, &flags)?;
    Ok(Server {
        setup,
        child,
        port,
        dir,
        set: Vec::new(),
        get: Vec::new(),
        set_cpu: Vec::new(),
        get_cpu: Vec::new(),
        used_memory: 0,
        data_bytes: 0,
        cold_data_bytes: None,
        retrains: 0,
    })
}

fn info_field(c: &mut Client, section: &str, name: &str) -> anyhow::Result<u64> {
    let text = c.call(&[b"INFO", section.as_bytes()])?.unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).and_then(|v| v.trim().parse().ok()).with_context(|| format!("INFO {section} has no {name}"))
}

fn stats(c: &mut Client) -> anyhow::Result<serde_json::Value> {
    let s = c.call(&[b"TERRACE.COMPRESSION", b"STATS", b"default"])?.unwrap_or_default();
    Ok(serde_json::from_str(&s)?)
}

/// Waits for two full cycles of the engine's background pass.
fn settle(c: &mut Client) -> anyhow::Result<serde_json::Value> {
    let start = stats(c)?["census_cycles"].as_u64().unwrap_or(0);
    let t = Instant::now();
    loop {
        let s = stats(c)?;
        if s["census_cycles"].as_u64().unwrap_or(0) >= start + 2 {
            return Ok(s);
        }
        if t.elapsed() > Duration::from_secs(120) {
            bail!("the compression pass did not finish a cycle in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("rec:{i:08}").into_bytes()
}

/// SETs every record once (pipelined).
fn load(c: &mut Client, records: &[Vec<u8>], pipeline: usize) -> anyhow::Result<()> {
    for (chunk_no, chunk) in records.chunks(pipeline).enumerate() {
        for (j, r) in chunk.iter().enumerate() {
            c.push(&[b"SET", &key(chunk_no * pipeline + j), r]);
        }
        c.flush()?;
    }
    if c.errors > 0 {
        bail!("{} SETs failed: {:?}", c.errors, c.last_error);
    }
    Ok(())
}

/// Requests per second of `ops` SETs (random records) or GETs (random keys).
fn measure(c: &mut Client, records: &[Vec<u8>], ops: usize, pipeline: usize, set: bool) -> anyhow::Result<f64> {
    let mut rng = fastrand::Rng::with_seed(7);
    let start = Instant::now();
    let mut done = 0;
    while done < ops {
        for _ in 0..pipeline {
            let i = rng.usize(..records.len());
            if set {
                c.push(&[b"SET", &key(i), &records[i]]);
            } else {
                c.push(&[b"GET", &key(i)]);
            }
        }
        c.flush()?;
        done += pipeline;
    }
    if c.errors > 0 {
        bail!("{} requests failed: {:?}", c.errors, c.last_error);
    }
    Ok(done as f64 / start.elapsed().as_secs_f64())
}

pub fn run(records: &[Vec<u8>], rounds: usize, ops: usize, pipeline: usize, only: &[String]) -> anyhow::Result<()> {
    pin_self_to(1);
    let mut servers: Vec<Server> = Vec::new();
    for (i, s) in SETUPS.iter().enumerate() {
        let name = format!("{}:{}", s.codec, s.mode);
        if only.is_empty() || s.codec == "none" || only.contains(&name) {
            servers.push(start(s, i)?);
        }
    }
    if std::env::var_os("TERRACE_BENCH_PIDS").is_some() {
        for s in &servers {
            eprintln!("{}:{} pid {}", s.setup.codec, s.setup.mode, s.child.id());
        }
    }
    println!(
        "\nend to end: {} records, {} SET + {} GET per round, pipeline {}, {} rounds; engines on core 0, client on core 1",
        records.len(),
        ops,
        ops,
        pipeline,
        rounds
    );
    for s in servers.iter_mut() {
        let mut c = Client::connect(s.port)?;
        load(&mut c, records, 64)?;
        if s.setup.codec != "none" {
            c.call(&[b"TERRACE.RETRAIN", b"default", b"SYNC"])?;
            load(&mut c, records, 64)?;
            settle(&mut c)?;
        }
        s.used_memory = info_field(&mut c, "memory", "used_memory")?;
        s.data_bytes = info_field(&mut c, "memory", "terrace_namespace_data_bytes")?;
    }
    // One unmeasured round first: the monitor may retrain once writes arrive in random order.
    for round in 0..=rounds {
        let order: Vec<usize> = if round % 2 == 0 { (0..servers.len()).collect() } else { (0..servers.len()).rev().collect() };
        for &i in &order {
            let s = &mut servers[i];
            let mut c = Client::connect(s.port)?;
            if round == 1 && s.setup.codec != "none" {
                s.retrains = stats(&mut c)?["retrains"].as_u64().unwrap_or(0);
            }
            let pid = s.child.id();
            let cpu = super::cpu_seconds(pid);
            let set = measure(&mut c, records, ops, pipeline, true)?;
            let mid = super::cpu_seconds(pid);
            let get = measure(&mut c, records, ops, pipeline, false)?;
            let end = super::cpu_seconds(pid);
            if round > 0 {
                s.set.push(set);
                s.get.push(get);
                s.set_cpu.push((mid - cpu) * 1e6 / ops as f64);
                s.get_cpu.push((end - mid) * 1e6 / ops as f64);
            }
        }
        eprint!(".");
    }
    eprintln!();
    for s in servers.iter_mut().filter(|s| s.setup.codec != "none") {
        let mut c = Client::connect(s.port)?;
        s.retrains = stats(&mut c)?["retrains"].as_u64().unwrap_or(0) - s.retrains;
    }
    // Lazy engines: the memory once every value has gone cold.
    for s in servers.iter_mut().filter(|s| s.setup.mode == "lazy" && s.setup.codec != "none") {
        let mut c = Client::connect(s.port)?;
        c.call(&[b"TERRACE.COMPRESSION", b"CONFIG", b"default", b"compression_cold_seconds", b"0"])?;
        settle(&mut c)?;
        s.cold_data_bytes = Some(info_field(&mut c, "memory", "terrace_namespace_data_bytes")?);
    }
    let base = |mode: &str| servers.iter().find(|s| s.setup.codec == "none" && s.setup.mode == mode).expect("a none engine per mode");
    println!(
        "{:<10} {:<6} {:>10} {:>7} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>12} {:>12} {:>7} {:>8}",
        "codec",
        "mode",
        "SET req/s",
        "x none",
        "GET req/s",
        "x none",
        "SET µs",
        "x none",
        "GET µs",
        "x none",
        "used_memory",
        "data B/val",
        "x none",
        "retrains"
    );
    for s in &servers {
        let b = base(s.setup.mode);
        let data = s.cold_data_bytes.unwrap_or(s.data_bytes);
        let (set_cpu, get_cpu) = (super::median(&s.set_cpu), super::median(&s.get_cpu));
        println!(
            "{:<10} {:<6} {:>10.0} {:>7.3} {:>10.0} {:>7.3} {:>8.2} {:>8.3} {:>8.2} {:>8.3} {:>12} {:>12.1} {:>7.3} {:>8}{}",
            s.setup.codec,
            s.setup.mode,
            super::median(&s.set),
            super::median(&s.set) / super::median(&b.set),
            super::median(&s.get),
            super::median(&s.get) / super::median(&b.get),
            set_cpu,
            super::median(&b.set_cpu) / set_cpu,
            get_cpu,
            super::median(&b.get_cpu) / get_cpu,
            s.used_memory,
            data as f64 / records.len() as f64,
            data as f64 / b.data_bytes as f64,
            s.retrains,
            if s.cold_data_bytes.is_some() { "  (after the cold pass)" } else { "" }
        );
    }
    Ok(())
}
