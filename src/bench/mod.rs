//! `terrace bench …`: benchmarks that ship with the binary.

pub mod compress;
pub mod compress_e2e;
pub mod resp_client;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Compression ratio and speed per codec on a dataset (one value per line), then SET/GET
    /// through real engines with each codec against `none`.
    Compress(compress::CompressArgs),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Compress(args) => compress::run(args),
    }
}
