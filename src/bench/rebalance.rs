//! `terrace bench rebalance`: growing from one engine to two under load, against a Redis
//! Cluster doing the same. Each side starts with one node owning every slot and the data
//! (`--keys` × `--value-size`), and an empty second node; a background load (90% GET, 10%
//! SET, uniform keys) runs at a fixed rate — half of what the one-node setup serves, measured
//! first — while the slots are rebalanced over the two nodes: Terrace's console
//! (`POST /api/v1/rebalance`, moves of at most 4096 slots), Redis's `redis-cli --cluster rebalance
//! --cluster-use-empty-masters`. Every server process (and the console, and redis-cli) is
//! pinned to core 0, the load generator to core 1. Reported: the rebalance's time, the
//! load's throughput and p99 before, during and after it, requests that failed, and the
//! pauses (Terrace: how long each move held its slots; Redis: the redirections the load met).
//!
//! The load's latency is measured from when a request was due (open loop, paced per
//! connection), so a stall shows as the queue behind it, not as one slow request.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;

use super::console_web::Web;
use super::resp_client::Client;
use super::{free_port, wait_port};

#[derive(Args)]
pub struct RebalanceArgs {
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Requests a second of the background load (0: half of what one node served).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Connections of the background load.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Seconds of load measured before and after the rebalance.
    #[arg(long, default_value_t = 5.0)]
    window: f64,
    #[arg(long, default_value = "redis-server")]
    redis_server: String,
    #[arg(long, default_value = "redis-cli")]
    redis_cli: String,
    /// The console's `move_pace` (percent of the time a move works on the engines).
    #[arg(long, default_value_t = 50)]
    move_pace: u8,
    /// Print each side's load second by second (requests, p99, the rebalance's span).
    #[arg(long)]
    timeline: bool,
    /// Run one side only (`terrace` or `redis`).
    #[arg(long)]
    only: Option<String>,
    /// Runs of each side, alternating (terrace, redis, terrace, …); with more than one, the
    /// table ends with each side's medians.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Where the nodes keep their files.
    #[arg(long, default_value = "/tmp/terrace-bench-rebalance")]
    dir: PathBuf,
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn pinned(core: &str, program: &str) -> Command {
    let mut c = Command::new("taskset");
    c.args(["-c", core, program]);
    c
}

/// Where a key goes: Terrace's proxy takes every key; a Redis Cluster client follows MOVED.
#[derive(Clone)]
enum Routing {
    One(String),
    Cluster(Arc<Mutex<Vec<String>>>),
}

/// One measured request: when it completed (seconds since the load began) and how long
/// after it was due (µs).
type Sample = (f32, u32);

/// What the background load saw.
#[derive(Default)]
struct LoadReport {
    samples: Vec<Sample>,
    errors: u64,
    last_error: Option<String>,
    redirects: u64,
}

/// A paced load until `stop`: `rate` requests a second over `clients` connections.
fn background_load(
    routing: Routing,
    keys: u64,
    value: Arc<Vec<u8>>,
    rate: u64,
    clients: usize,
    stop: Arc<AtomicBool>,
    began: Instant,
) -> Vec<std::thread::JoinHandle<LoadReport>> {
    (0..clients)
        .map(|t| {
            let (routing, value, stop) = (routing.clone(), value.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut report = LoadReport::default();
                let mut conns: std::collections::HashMap<String, Client> = Default::default();
                let interval = Duration::from_secs_f64(clients as f64 / rate as f64);
                let mut due = began + interval.mul_f64(t as f64 / clients as f64);
                let mut rng = fastrand::Rng::with_seed(t as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    due += interval;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let key = format!("key:{}", rng.u64(..keys));
                    let set = rng.u8(..10) == 0;
                    let args: Vec<&[u8]> = if set { vec![b"SET", key.as_bytes(), &value] } else { vec![b"GET", key.as_bytes()] };
                    match request(&routing, &mut conns, &args, &mut report) {
                        Ok(()) => report.samples.push((began.elapsed().as_secs_f32(), due.elapsed().as_micros() as u32)),
                        Err(e) => {
                            report.errors += 1;
                            report.last_error = Some(e.to_string());
                            conns.clear();
                        }
                    }
                }
                report
            })
        })
        .collect()
}

/// One request, following a cluster's redirections (MOVED updates the slot's node; ASK
/// asks the importing node once; TRYAGAIN waits a moment).
fn request(routing: &Routing, conns: &mut std::collections::HashMap<String, Client>, args: &[&[u8]], report: &mut LoadReport) -> anyhow::Result<()> {
    let slot = terrace_proxy::slots::key_slot(args[1]) as usize;
    let mut addr = match routing {
        Routing::One(a) => a.clone(),
        Routing::Cluster(map) => map.lock().unwrap()[slot].clone(),
    };
    let mut asking = false;
    for _ in 0..10 {
        let c = match conns.entry(addr.clone()) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(Client::connect_to(&addr)?),
        };
        if asking {
            c.call(&[b"ASKING"])?;
        }
        match c.call(args) {
            Ok(_) => return Ok(()),
            Err(e) => {
                let msg = e.to_string();
                let mut words = msg.split_whitespace();
                match (words.next(), words.next(), words.next(), routing) {
                    (Some("MOVED"), Some(_), Some(to), Routing::Cluster(map)) => {
                        report.redirects += 1;
                        map.lock().unwrap()[slot] = to.to_string();
                        addr = to.to_string();
                        asking = false;
                    }
                    (Some("ASK"), Some(_), Some(to), _) => {
                        report.redirects += 1;
                        addr = to.to_string();
                        asking = true;
                    }
                    (Some("TRYAGAIN"), ..) => {
                        report.redirects += 1;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    _ => return Err(e),
                }
            }
        }
    }
    bail!("redirected ten times")
}

/// Every key once, pipelined 1000 at a time, into `addr`.
fn load_data(addr: &str, keys: u64, value: &[u8]) -> anyhow::Result<()> {
    let mut c = Client::connect_to(addr)?;
    for chunk in (0..keys).collect::<Vec<_>>().chunks(1000) {
        for i in chunk {
            let key = format!("key:{i}");
            c.push(&[b"SET", key.as_bytes(), value]);
        }
        c.flush()?;
        if c.errors > 0 {
            bail!("loading the data: {}", c.last_error.clone().unwrap_or_default());
        }
    }
    Ok(())
}

/// How fast one node serves the load's mix with `clients` connections, closed loop (the
/// background rate is half of it).
fn capacity(addr: &str, keys: u64, value: &[u8], clients: usize) -> anyhow::Result<f64> {
    let port: u16 = addr.rsplit(':').next().and_then(|p| p.parse().ok()).context("port")?;
    let value = value.to_vec();
    let run = super::closed_loop(port, clients, super::Until::Seconds(3.0), move |_, n, c| {
        let key = format!("key:{}", fastrand::u64(..keys));
        if n % 10 == 0 {
            c.call(&[b"SET", key.as_bytes(), &value])?;
        } else {
            c.call(&[b"GET", key.as_bytes()])?;
        }
        Ok(())
    })?;
    Ok(run.per_sec)
}

/// One side's outcome.
struct Outcome {
    name: &'static str,
    rebalance_s: f64,
    phases: [(f64, f64); 3],
    errors: u64,
    last_error: Option<String>,
    redirects: u64,
    pauses_ms: Vec<f64>,
}

/// Throughput (requests/s) and p99 (ms) of the samples completed in [from, to).
fn phase(samples: &[Sample], from: f64, to: f64) -> (f64, f64) {
    let mut lat: Vec<u32> = samples.iter().filter(|(t, _)| (*t as f64) >= from && (*t as f64) < to).map(|s| s.1).collect();
    if lat.is_empty() || to <= from {
        return (0.0, 0.0);
    }
    lat.sort_unstable();
    let p99 = lat[(lat.len() * 99 / 100).min(lat.len() - 1)] as f64 / 1000.0;
    (lat.len() as f64 / (to - from), p99)
}

/// Runs the load around `rebalance` (which answers the pauses it measured).
fn measured(
    name: &'static str,
    routing: Routing,
    args: &RebalanceArgs,
    rate: u64,
    value: &Arc<Vec<u8>>,
    rebalance: impl FnOnce() -> anyhow::Result<Vec<f64>>,
) -> anyhow::Result<Outcome> {
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let load = background_load(routing, args.keys, value.clone(), rate, args.clients, stop.clone(), began);
    std::thread::sleep(Duration::from_secs_f64(args.window));
    let start = began.elapsed().as_secs_f64();
    let pauses_ms = rebalance()?;
    let end = began.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs_f64(args.window));
    stop.store(true, Ordering::Relaxed);
    let mut all = LoadReport::default();
    for h in load {
        let r = h.join().map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
        all.samples.extend(r.samples);
        all.errors += r.errors;
        all.redirects += r.redirects;
        all.last_error = r.last_error.or(all.last_error);
    }
    let last = began.elapsed().as_secs_f64();
    let phases = [phase(&all.samples, 0.5, start), phase(&all.samples, start, end), phase(&all.samples, end, last - 0.5)];
    if args.timeline {
        println!("{name}: second, requests, p99 ms (rebalance from {start:.1} s to {end:.1} s)");
        let mut t = 0.0;
        while t < last {
            let (n, p99) = phase(&all.samples, t, t + 1.0);
            println!("  {t:>5.0} {n:>8.0} {p99:>9.2}");
            t += 1.0;
        }
    }
    Ok(Outcome { name, rebalance_s: end - start, phases, errors: all.errors, last_error: all.last_error, redirects: all.redirects, pauses_ms })
}

/// Pins this process (the load generator, and the threads it starts) to core 1.
fn pin_to_core_1() -> anyhow::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it, and
    // sched_setaffinity reads size_of::<cpu_set_t>() bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(1, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!("cannot pin the load generator to core 1: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

pub fn run(args: RebalanceArgs) -> anyhow::Result<()> {
    pin_to_core_1()?;
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let value = Arc::new(vec![b'v'; args.value_size]);
    // Each run on fresh directories (an engine keeps refusing the slots it gave away in its
    // data directory's `sealed-slots`).
    let fresh = || -> anyhow::Result<()> {
        let _ = std::fs::remove_dir_all(&args.dir);
        std::fs::create_dir_all(&args.dir)?;
        Ok(())
    };
    println!("rebalance: {} keys × {} B from one node to two, under a background load (90% GET, 10% SET)", args.keys, args.value_size);
    let (mut terrace, mut redis) = (Vec::new(), Vec::new());
    for run in 1..=args.runs {
        if args.runs > 1 {
            println!("run {run} of {}", args.runs);
        }
        if args.only.as_deref() != Some("redis") {
            fresh()?;
            terrace.push(run_terrace(&args, &value)?);
        }
        if args.only.as_deref() != Some("terrace") {
            fresh()?;
            redis.push(run_redis(&args, &value)?);
        }
    }
    println!();
    println!(
        "| | rebalance (s) | req/s before | during | after | p99 ms before | during | after | failed requests | redirections | pauses (ms): median / max |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, o) in terrace.iter().chain(redis.iter()).enumerate() {
        let run = if args.runs > 1 { format!(" (run {})", i % args.runs + 1) } else { String::new() };
        print_row(&format!("{}{run}", o.name), &Row::of(std::slice::from_ref(o)));
        if let Some(e) = &o.last_error {
            println!("  ({} last error: {e})", o.name);
        }
    }
    let (t, r) = (Row::of(&terrace), Row::of(&redis));
    if args.runs > 1 {
        for (name, row, outcomes) in [("terrace", &t, &terrace), ("redis cluster", &r, &redis)] {
            if !outcomes.is_empty() {
                print_row(&format!("**{name}: median of {}**", outcomes.len()), row);
            }
        }
    }
    if terrace.is_empty() || redis.is_empty() {
        return Ok(());
    }
    let medians = if args.runs > 1 { "medians: " } else { "" };
    println!(
        "\nterrace / redis {medians}rebalance time {:.2}x, throughput during {:.2}x of before (redis {:.2}x), p99 during {:.2} ms vs {:.2} ms",
        t.rebalance_s / r.rebalance_s,
        t.phases[1].0 / t.phases[0].0.max(1.0),
        r.phases[1].0 / r.phases[0].0.max(1.0),
        t.phases[1].1,
        r.phases[1].1
    );
    Ok(())
}

/// One line of the table: one run, or the medians of several (each column's own median).
struct Row {
    rebalance_s: f64,
    phases: [(f64, f64); 3],
    errors: u64,
    redirects: u64,
    pauses_ms: Vec<f64>,
}

impl Row {
    fn of(outcomes: &[Outcome]) -> Row {
        let med = |f: &dyn Fn(&Outcome) -> f64| super::median(&outcomes.iter().map(f).collect::<Vec<_>>());
        let phase = |i: usize| (med(&|o| o.phases[i].0), med(&|o| o.phases[i].1));
        Row {
            rebalance_s: med(&|o| o.rebalance_s),
            phases: [phase(0), phase(1), phase(2)],
            errors: outcomes.iter().map(|o| o.errors).sum(),
            redirects: med(&|o| o.redirects as f64) as u64,
            pauses_ms: outcomes.iter().flat_map(|o| o.pauses_ms.iter().copied()).collect(),
        }
    }
}

fn print_row(label: &str, o: &Row) {
    let pauses = if o.pauses_ms.is_empty() {
        "—".to_string()
    } else {
        format!("{:.0} / {:.0}", super::median(&o.pauses_ms), o.pauses_ms.iter().cloned().fold(0.0, f64::max))
    };
    println!(
        "| {label} | {:.1} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} | {} |",
        o.rebalance_s, o.phases[0].0, o.phases[1].0, o.phases[2].0, o.phases[0].1, o.phases[1].1, o.phases[2].1, o.errors, o.redirects, pauses
    );
}

fn run_terrace(args: &RebalanceArgs, value: &Arc<Vec<u8>>) -> anyhow::Result<Outcome> {
    let exe = std::env::current_exe()?.display().to_string();
    let engine = |n: &str| -> anyhow::Result<(Proc, String)> {
        let port = free_port()?;
        let dir = args.dir.join(format!("terrace-{n}"));
        std::fs::create_dir_all(&dir)?;
        let child =
            pinned("0", &exe).args(["engine", "--port", &port.to_string(), "--data-dir"]).arg(&dir).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
        wait_port(port)?;
        Ok((Proc(child), format!("127.0.0.1:{port}")))
    };
    let (_a, a) = engine("a")?;
    let (_b, b) = engine("b")?;
    let proxy_port = free_port()?;
    let admin = "bench-admin-pw";
    let _proxy = Proc(
        pinned("0", &exe)
            .args(["proxy", "--port", &proxy_port.to_string(), "--memcache-port", "0", "--engines", &a])
            .env("TERRACE_PROXY_ADMIN_PASSWORD", admin)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    wait_port(proxy_port)?;
    let proxy = format!("127.0.0.1:{proxy_port}");
    let console_port = free_port()?;
    let console_pw = "bench-console-pw";
    let _console = Proc(
        pinned("0", &exe)
            .args(["console", "--port", &console_port.to_string(), "--reconcile-ms", "1000", "--engines", &a, "--proxies", &proxy])
            .args(["--move-pace", &args.move_pace.to_string(), "--db"])
            .arg(args.dir.join("console.db"))
            .env("TERRACE_ADMIN_PASSWORD", console_pw)
            .env("TERRACE_PROXY_ADMIN_PASSWORD", admin)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    wait_port(console_port)?;
    let web = Web::login(&format!("127.0.0.1:{console_port}"), console_pw)?;
    load_data(&proxy, args.keys, value)?;
    let rate = match args.rate {
        0 => (capacity(&proxy, args.keys, value, args.clients)? / 2.0) as u64,
        r => r,
    };
    println!("terrace: {} keys on one engine behind the proxy; background load {rate} req/s", args.keys);
    let (status, body) = web.call("POST", "/api/v1/engines", &format!("{{\"address\":\"{b}\"}}"))?;
    if status != 201 {
        bail!("adding the second engine: {status} {body}");
    }
    measured("terrace", Routing::One(proxy), args, rate, value, || {
        let (status, body) = web.call("POST", "/api/v1/rebalance", "{}")?;
        if status != 201 {
            bail!("rebalance: {status} {body}");
        }
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let (_, body) = web.call("GET", "/api/v1/moves", "")?;
            let v: serde_json::Value = serde_json::from_str(&body)?;
            let moves = v["moves"].as_array().cloned().unwrap_or_default();
            if moves.iter().any(|m| m["state"] == "failed") {
                bail!("a move failed: {body}");
            }
            if !moves.is_empty() && moves.iter().all(|m| m["state"] == "done") {
                return Ok(moves.iter().filter_map(|m| m["pause_ms"].as_f64()).collect());
            }
        }
    })
}

fn run_redis(args: &RebalanceArgs, value: &Arc<Vec<u8>>) -> anyhow::Result<Outcome> {
    let node = |n: &str| -> anyhow::Result<(Proc, String)> {
        let port = free_port()?;
        let dir = args.dir.join(format!("redis-{n}"));
        std::fs::create_dir_all(&dir)?;
        let child = pinned("0", &args.redis_server)
            .args(["--port", &port.to_string(), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "no", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {} (apt-get install redis-server)", args.redis_server))?;
        wait_port(port)?;
        Ok((Proc(child), format!("127.0.0.1:{port}")))
    };
    let (_a, a) = node("a")?;
    let (_b, b) = node("b")?;
    let mut ca = Client::connect_to(&a)?;
    ca.call(&[b"CLUSTER", b"ADDSLOTSRANGE", b"0", b"16383"])?;
    let (b_host, b_port) = b.rsplit_once(':').context("address")?;
    ca.call(&[b"CLUSTER", b"MEET", b_host.as_bytes(), b_port.as_bytes()])?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = Client::connect_to(&b)?.call(&[b"CLUSTER", b"INFO"])?.unwrap_or_default();
        if info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:2") {
            break;
        }
        if Instant::now() > deadline {
            bail!("the Redis Cluster did not form: {info}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    load_data(&a, args.keys, value)?;
    let rate = match args.rate {
        0 => (capacity(&a, args.keys, value, args.clients)? / 2.0) as u64,
        r => r,
    };
    println!("redis: {} keys on one cluster node; background load {rate} req/s", args.keys);
    let map = Arc::new(Mutex::new(vec![a.clone(); terrace_proxy::slots::SLOTS]));
    measured("redis cluster", Routing::Cluster(map), args, rate, value, || {
        let out = pinned("0", &args.redis_cli)
            .args(["--cluster", "rebalance", &a, "--cluster-use-empty-masters", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {} (apt-get install redis-tools)", args.redis_cli))?;
        if !out.status.success() {
            bail!("redis-cli --cluster rebalance: {}", String::from_utf8_lossy(&out.stdout));
        }
        Ok(Vec::new())
    })
}
