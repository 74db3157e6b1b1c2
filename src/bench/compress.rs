//! `terrace bench compress`: per codec, the stored/raw ratio over every record of a dataset
//! (trained on a reservoir sample of at most `--sample-share` of them, drawn as the engine
//! draws it), compress and decompress speed.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use terrace_engine::compress::sample::Reservoir;
use terrace_engine::compress::train::{stored_size, train};
use terrace_engine::compress::CodecKind;

#[derive(Args)]
pub struct CompressArgs {
    /// A file with one value per line (e.g. ../shared/data/cities.jsonl).
    #[arg(long)]
    dataset: Vec<PathBuf>,
    /// Largest share of the records the sample may hold.
    #[arg(long, default_value_t = 0.03)]
    sample_share: f64,
    /// Sample size cap (the engine's `compression_sample_size`).
    #[arg(long, default_value_t = 1024)]
    sample_size: usize,
    /// Also measure SET/GET through real engines with each codec against `none`.
    #[arg(long)]
    e2e: bool,
    /// End-to-end rounds (engines alternate within each round).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// End-to-end SETs and GETs per engine per round.
    #[arg(long, default_value_t = 200_000)]
    ops: usize,
    /// End-to-end requests in flight per write.
    #[arg(long, default_value_t = 16)]
    pipeline: usize,
    /// End-to-end engines to run, as codec:mode (default: all, `none` of each mode included).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

fn load(path: &PathBuf) -> anyhow::Result<Vec<Vec<u8>>> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| l.to_vec()).collect())
}

pub fn run(args: CompressArgs) -> anyhow::Result<()> {
    if args.dataset.is_empty() {
        anyhow::bail!("give at least one --dataset FILE");
    }
    for path in &args.dataset {
        let records = load(path)?;
        let raw_bytes: usize = records.iter().map(|r| r.len()).sum();
        let cap = ((records.len() as f64 * args.sample_share) as usize).min(args.sample_size).max(8);
        let reservoir = Reservoir::new(cap, 64 * 1024);
        for r in &records {
            reservoir.offer(r);
        }
        let sample = reservoir.snapshot();
        println!(
            "\n{}: {} records, {:.1} B mean, sample {} ({:.2}%)",
            path.display(),
            records.len(),
            raw_bytes as f64 / records.len() as f64,
            sample.len(),
            100.0 * sample.len() as f64 / records.len() as f64
        );
        println!("{:<10} {:>7} {:>10} {:>12} {:>12} {:>9}  notes", "codec", "ratio", "train s", "comp MB/s", "decomp MB/s", "dict KB");
        for kind in CodecKind::ALL {
            let t = train(kind, &sample).with_context(|| format!("training {}", kind.name()))?;
            let codec = &*t.codec;
            let mut scratch = Vec::new();
            let stored: usize = records.iter().map(|r| stored_size(codec, r, &mut scratch)).sum();
            let mut encoded: Vec<Vec<u8>> = Vec::with_capacity(records.len());
            let start = Instant::now();
            for r in &records {
                let mut e = Vec::with_capacity(r.len());
                codec.encode(r, &mut e)?;
                encoded.push(e);
            }
            let comp = start.elapsed().as_secs_f64();
            let mut out = Vec::with_capacity(64 * 1024);
            let start = Instant::now();
            for (e, r) in encoded.iter().zip(&records) {
                out.clear();
                codec.decode(e, &mut out)?;
                anyhow::ensure!(out == *r, "{} did not round-trip a record", kind.name());
            }
            let decomp = start.elapsed().as_secs_f64();
            let unmatched = records.iter().filter(|r| {
                let mut e = Vec::new();
                codec.encode(r, &mut e).is_ok() && codec.last_unmatched()
            });
            let notes = match t.templates {
                Some(n) => format!("{n} templates, {:.1}% of records unmatched", 100.0 * unmatched.count() as f64 / records.len() as f64),
                None => String::new(),
            };
            println!(
                "{:<10} {:>7.4} {:>10.2} {:>12.1} {:>12.1} {:>9.1}  {}",
                kind.name(),
                stored as f64 / raw_bytes as f64,
                t.seconds,
                raw_bytes as f64 / comp / 1e6,
                raw_bytes as f64 / decomp / 1e6,
                codec.dictionary_bytes() as f64 / 1024.0,
                notes
            );
        }
        if args.e2e {
            super::compress_e2e::run(&records, args.rounds, args.ops, args.pipeline, &args.only)?;
        }
    }
    Ok(())
}
