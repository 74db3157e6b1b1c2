//! `terrace bench …`: benchmarks that ship with the binary.

pub mod burst;
pub mod compress;
pub mod compress_e2e;
pub mod console_web;
pub mod cost;
mod faults;
pub mod rebalance;
pub mod resp_client;
pub mod storage;
pub mod sync;
pub mod tenants;
pub mod tiers;
pub mod wal;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Compression ratio and speed per codec on a dataset (one value per line), then SET/GET
    /// through real engines with each codec against `none`.
    Compress(compress::CompressArgs),
    /// The PMem tier (each policy, arena on /dev/shm and on disk) against all-DRAM: a
    /// zipfian GET/SET mix, throughput, p99, DRAM hit share and memory.
    Tiers(tiers::TiersArgs),
    /// The WAL's modes (off, file, always, pmem) under a write load from many connections:
    /// throughput, latency and fsyncs per second.
    Wal(wal::WalArgs),
    /// The cache alone against the storage tier (LSM, and PostgreSQL with --postgres-url) in
    /// write-through, write-back and write-back with each WAL mode: the load phase and YCSB A, B.
    Storage(storage::StorageArgs),
    /// Elastic threading: a low rate, a burst as fast as possible, the low rate again, against
    /// --threads single, 2, elastic:2 and redis-server: throughput, p99 and CPU per second.
    Burst(burst::BurstArgs),
    /// The cost framework's validation: for three workloads, costs predicted from a sampled
    /// trace against costs measured on the full data, and the break-even intervals.
    Cost(cost::CostArgs),
    /// Growing from one node to two under a background load, against a Redis Cluster
    /// rebalanced with redis-cli: time, throughput and p99 before, during and after, pauses.
    Rebalance(rebalance::RebalanceArgs),
    /// The fault suite: kill -9, SIGSTOP and partitions of a primary, the proxy and the
    /// console, each a host of its own (network namespaces; run as root), under a logged
    /// workload, checked for acknowledged writes lost.
    Faults(faults::FaultsArgs),
    /// A replica's full sync under a write load, against redis-server's (which forks): the
    /// longest write while it ran, p99, throughput and the sync's time.
    Sync(sync::SyncArgs),
    /// What a tenant costs: `terrace up` with N tenants made and deleted through the API,
    /// a sample of them used: each call's time, each process's memory, the console's pages.
    Tenants(tenants::TenantsArgs),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Compress(args) => compress::run(args),
        BenchCommand::Tiers(args) => tiers::run(args),
        BenchCommand::Wal(args) => wal::run(args),
        BenchCommand::Storage(args) => storage::run(args),
        BenchCommand::Burst(args) => burst::run(args),
        BenchCommand::Cost(args) => cost::run(args),
        BenchCommand::Rebalance(args) => rebalance::run(args),
        BenchCommand::Faults(args) => faults::run(args),
        BenchCommand::Sync(args) => sync::run(args),
        BenchCommand::Tenants(args) => tenants::run(args),
    }
}

/// A `terrace engine` for a benchmark: this binary, pinned to core 0 with `taskset`, on a
/// free port, with a fresh data directory `dir` and extra flags; returns it and its port.
pub fn spawn_pinned_engine(dir: &std::path::Path, flags: &[&std::ffi::OsStr]) -> anyhow::Result<(std::process::Child, u16)> {
    spawn_engine_of(&std::env::current_exe()?, "0", dir, flags)
}

/// As `spawn_pinned_engine`, for the engine of binary `exe` pinned to `cores` (taskset's list).
pub fn spawn_engine_of(exe: &std::path::Path, cores: &str, dir: &std::path::Path, flags: &[&std::ffi::OsStr]) -> anyhow::Result<(std::process::Child, u16)> {
    use anyhow::Context;
    use std::io::BufRead;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let mut child = std::process::Command::new("taskset")
        .args(["-c", cores])
        .arg(exe)
        .args(["engine", "--port", "0", "--data-dir"])
        .arg(dir)
        .args(flags)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting an engine under taskset (apt-get install util-linux)")?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).with_context(|| format!("engine said {line:?}"))?;
    Ok((child, port))
}

/// A redis-server for a benchmark: `exe` pinned to `cores` with `taskset`, on a free port,
/// without save points or AOF, with extra flags; returns it and its port once it answers.
pub fn spawn_redis(exe: &str, cores: &str, flags: &[&std::ffi::OsStr]) -> anyhow::Result<(std::process::Child, u16)> {
    use anyhow::Context;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut child = std::process::Command::new("taskset")
        .args(["-c", cores, exe, "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
        .args(flags)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("starting {exe} under taskset (apt-get install redis-server util-linux)"))?;
    for _ in 0..100 {
        if resp_client::Client::connect(port).is_ok() {
            return Ok((child, port));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    anyhow::bail!("{exe} did not start")
}

/// CPU seconds (user + system) a process has used, from /proc/PID/stat (0 once it is gone).
/// (VmRSS, RssAnon) of process `pid`, in bytes.
pub fn rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |name: &str| {
        status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 1024
    };
    (kb("VmRSS:"), kb("RssAnon:"))
}

/// A port free on 127.0.0.1 now.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits up to 30 s for something to listen on `port`.
pub fn wait_port(port: u16) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if std::time::Instant::now() > deadline {
            anyhow::bail!("nothing listens on port {port}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}

pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    (ticks(11) + ticks(12)) * clock_tick()
}

/// Seconds per clock tick, the unit of /proc's CPU times.
fn clock_tick() -> f64 {
    // SAFETY: sysconf has no preconditions.
    1.0 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Waits until a process is (nearly) idle — at most one clock tick of CPU in 100 ms — and returns
/// how long that took: the work it deferred (flushes, compaction) after a measured phase, so
/// that it neither spills into the next engine's phase on a shared core nor goes unpaid.
pub fn wait_idle(pid: u32, give_up: std::time::Duration) -> std::time::Duration {
    let start = std::time::Instant::now();
    let window = std::time::Duration::from_millis(100);
    let tick = clock_tick();
    let mut last = cpu_seconds(pid);
    while start.elapsed() < give_up {
        std::thread::sleep(window);
        let now = cpu_seconds(pid);
        if now - last < 1.5 * tick {
            // The window that showed it idle is not part of the work.
            return start.elapsed().saturating_sub(window);
        }
        last = now;
    }
    start.elapsed()
}

/// The median of a round's measurements (0 for none).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        0.0
    } else {
        s[s.len() / 2]
    }
}

/// What a closed-loop load measured: requests per second and each request's latency (µs,
/// sorted).
pub struct ClosedLoop {
    pub per_sec: f64,
    /// How long the run took.
    pub seconds: f64,
    latencies: Vec<u32>,
}

impl ClosedLoop {
    /// Requests answered.
    pub fn requests(&self) -> usize {
        self.latencies.len()
    }

    /// The `p`th percentile latency in µs.
    pub fn percentile(&self, p: usize) -> f64 {
        let l = &self.latencies;
        l.get((l.len() * p / 100).min(l.len().saturating_sub(1))).copied().unwrap_or(0) as f64
    }
}

/// How long a closed loop runs.
#[derive(Clone, Copy)]
pub enum Until {
    Seconds(f64),
    /// This many requests in all (a load phase: every key once).
    Requests(u64),
}

/// Runs `clients` connections to `port`, each sending one request at a time, as YCSB's
/// clients do: `request(connection number, n, client)`, where n counts the connection's own
/// requests from 1 (`Until::Seconds`) or numbers every request of the run from 0
/// (`Until::Requests`: each n is sent once, by one connection).
pub fn closed_loop<F>(port: u16, clients: usize, until: Until, request: F) -> anyhow::Result<ClosedLoop>
where
    F: Fn(usize, u64, &mut resp_client::Client) -> anyhow::Result<()> + Send + Sync + 'static,
{
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let request = Arc::new(request);
    let start = std::time::Instant::now();
    let mut handles = Vec::new();
    for t in 0..clients {
        let (stop, issued, request) = (stop.clone(), issued.clone(), request.clone());
        handles.push(std::thread::spawn(move || -> anyhow::Result<Vec<u32>> {
            let mut c = resp_client::Client::connect(port)?;
            let mut lat = Vec::with_capacity(1 << 16);
            let mut own = 0u64;
            loop {
                let n = match until {
                    Until::Seconds(_) if stop.load(Ordering::Relaxed) => break,
                    Until::Seconds(_) => {
                        own += 1;
                        own
                    }
                    Until::Requests(total) => match issued.fetch_add(1, Ordering::Relaxed) {
                        n if n < total => n,
                        _ => break,
                    },
                };
                let sent = std::time::Instant::now();
                request(t, n, &mut c)?;
                lat.push(sent.elapsed().as_micros() as u32);
            }
            Ok(lat)
        }));
    }
    if let Until::Seconds(seconds) = until {
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
    }
    let mut latencies = Vec::new();
    for h in handles {
        latencies.extend(h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??);
    }
    let secs = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Ok(ClosedLoop { per_sec: latencies.len() as f64 / secs, latencies, seconds: secs })
}
