//! `terrace bench …`: benchmarks that ship with the binary.

pub mod compress;
pub mod compress_e2e;
pub mod resp_client;
pub mod storage;
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
    /// The cache alone against write-through to the storage tier (LSM, and PostgreSQL with
    /// --postgres-url): the load phase and YCSB A and B.
    Storage(storage::StorageArgs),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Compress(args) => compress::run(args),
        BenchCommand::Tiers(args) => tiers::run(args),
        BenchCommand::Wal(args) => wal::run(args),
        BenchCommand::Storage(args) => storage::run(args),
    }
}

/// A `terrace engine` for a benchmark: this binary, pinned to core 0 with `taskset`, on a
/// free port, with a fresh data directory `dir` and extra flags; returns it and its port.
pub fn spawn_pinned_engine(dir: &std::path::Path, flags: &[&std::ffi::OsStr]) -> anyhow::Result<(std::process::Child, u16)> {
    use anyhow::Context;
    use std::io::BufRead;
    let exe = std::env::current_exe()?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let mut child = std::process::Command::new("taskset")
        .args(["-c", "0"])
        .arg(&exe)
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
