//! `terrace bench …`: benchmarks that ship with the binary.

pub mod compress;
pub mod compress_e2e;
pub mod resp_client;
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
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Compress(args) => compress::run(args),
        BenchCommand::Tiers(args) => tiers::run(args),
        BenchCommand::Wal(args) => wal::run(args),
    }
}
