//! `terrace bench sync`: what a replica's full sync costs the primary's writers, Terrace
//! against redis-server (which forks for its image), side by side in one run.
//!
//! Per round and system (order flipped every round): a primary pinned to core 0 holding
//! `keys` keys, and a fresh replica of the same kind pinned to core 1; `clients`
//! connections (core 1) SET one key at a time for `seconds`, and one second in the replica
//! is told REPLICAOF. Prints the medians over the rounds of the longest write (the stall a
//! writer saw), p99, the writes per second over the run, and how long the sync took until
//! the replica's link was up.

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use clap::Args;

use super::resp_client::Client;

#[derive(Args)]
pub struct SyncArgs {
    /// Keys on the primary before the sync.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Writing connections.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Seconds of writes per run (the sync starts one second in).
    #[arg(long, default_value_t = 6.0)]
    seconds: f64,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The redis-server to compare with.
    #[arg(long, default_value = "redis-server")]
    redis_server: String,
    /// Also run this other `terrace` binary's engine (an older build, to compare with).
    #[arg(long)]
    other_terrace: Option<PathBuf>,
}

#[derive(Clone, PartialEq)]
enum Kind {
    /// A `terrace` binary's engine: this one, or `--other-terrace`.
    Terrace(PathBuf),
    Redis,
}

impl Kind {
    fn name(&self) -> String {
        match self {
            Kind::Terrace(exe) if *exe == std::env::current_exe().unwrap_or_default() => "terrace".into(),
            Kind::Terrace(exe) => format!("terrace ({})", exe.display()),
            Kind::Redis => "redis-server".into(),
        }
    }
}

/// A server of one run, gone with its data directory when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start(kind: &Kind, core: &str, tag: &str, args: &SyncArgs) -> anyhow::Result<Server> {
    let dir = std::env::temp_dir().join(format!("terrace-bench-sync-{}-{tag}", std::process::id()));
    match kind {
        Kind::Terrace(exe) => {
            let (child, port) = super::spawn_engine_of(exe, core, &dir, &[])?;
            Ok(Server { child, port, dir })
        }
        Kind::Redis => {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            // A diskless sync without Redis's 5 s wait for more replicas (what an operator of a
            // one-replica setup would set).
            let flags =
                ["--repl-diskless-sync".as_ref(), "yes".as_ref(), "--repl-diskless-sync-delay".as_ref(), "0".as_ref(), "--dir".as_ref(), dir.as_os_str()];
            let (child, port) = super::spawn_redis(&args.redis_server, core, &flags)?;
            Ok(Server { child, port, dir })
        }
    }
}

/// Fills the primary: `keys` SETs, pipelined.
fn load(port: u16, args: &SyncArgs) -> anyhow::Result<()> {
    let mut c = Client::connect(port)?;
    let value = vec![b'v'; args.value_size];
    for i in 0..args.keys {
        c.push(&[b"SET", format!("key:{i}").as_bytes(), &value]);
        if i % 1000 == 999 {
            c.flush()?;
        }
    }
    c.flush()
}

/// What one run measured.
struct Run {
    longest_ms: f64,
    p99_ms: f64,
    per_sec: f64,
    sync_s: f64,
}

fn link_up(port: u16) -> bool {
    let Ok(mut c) = Client::connect(port) else { return false };
    c.call(&[b"INFO", b"replication"]).ok().flatten().is_some_and(|t| t.contains("master_link_status:up"))
}

fn run_once(kind: &Kind, tag: usize, args: &SyncArgs, round: usize) -> anyhow::Result<Run> {
    let primary = start(kind, "0", &format!("{tag}-{round}-primary"), args)?;
    load(primary.port, args)?;
    let replica = start(kind, "1", &format!("{tag}-{round}-replica"), args)?;
    let (primary_port, replica_port) = (primary.port, replica.port);
    let syncing = std::thread::spawn(move || -> anyhow::Result<f64> {
        std::thread::sleep(Duration::from_secs(1));
        let t = Instant::now();
        Client::connect(replica_port)?.call(&[b"REPLICAOF", b"127.0.0.1", primary_port.to_string().as_bytes()])?;
        while !link_up(replica_port) {
            anyhow::ensure!(t.elapsed() < Duration::from_secs(120), "the replica did not sync within 120 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(t.elapsed().as_secs_f64())
    });
    let (keys, value) = (args.keys, vec![b'w'; args.value_size]);
    let writes = super::closed_loop(primary.port, args.clients, super::Until::Seconds(args.seconds), move |t, n, c| {
        let key = format!("key:{}", (n * 7919 + t as u64 * 104_729) % keys);
        c.call(&[b"SET", key.as_bytes(), &value]).map(drop)
    })?;
    let sync_s = syncing.join().map_err(|_| anyhow::anyhow!("the sync thread panicked"))??;
    Ok(Run { longest_ms: writes.percentile(100) / 1000.0, p99_ms: writes.percentile(99) / 1000.0, per_sec: writes.per_sec, sync_s })
}

pub fn run(args: SyncArgs) -> anyhow::Result<()> {
    super::compress_e2e::pin_self_to(1);
    println!(
        "terrace bench sync: {} keys of {} B on the primary (core 0), a replica (core 1) syncing one second into {} s of SETs from {} connections (core 1), {} rounds",
        args.keys, args.value_size, args.seconds, args.clients, args.rounds
    );
    let mut kinds = vec![Kind::Terrace(std::env::current_exe()?), Kind::Redis];
    kinds.extend(args.other_terrace.clone().map(Kind::Terrace));
    let mut runs: Vec<Vec<Run>> = kinds.iter().map(|_| Vec::new()).collect();
    for round in 0..args.rounds {
        let order: Vec<usize> = if round % 2 == 0 { (0..kinds.len()).collect() } else { (0..kinds.len()).rev().collect() };
        for i in order {
            let r = run_once(&kinds[i], i, &args, round)?;
            eprintln!(
                "round {round} {}: longest write {:.1} ms, p99 {:.2} ms, {:.0} SET/s, synced in {:.2} s",
                kinds[i].name(),
                r.longest_ms,
                r.p99_ms,
                r.per_sec,
                r.sync_s
            );
            runs[i].push(r);
        }
    }
    println!();
    println!("| primary | longest write during the sync, ms (median) | p99 ms | SET/s | sync s |");
    println!("|---|---|---|---|---|");
    for (kind, runs) in kinds.iter().zip(&runs) {
        let m = |f: fn(&Run) -> f64| super::median(&runs.iter().map(f).collect::<Vec<f64>>());
        println!("| {} | {:.1} | {:.2} | {:.0} | {:.2} |", kind.name(), m(|r| r.longest_ms), m(|r| r.p99_ms), m(|r| r.per_sec), m(|r| r.sync_s));
    }
    Ok(())
}
