//! HyperLogLog commands (PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST) over string values in
//! Redis's own format (`repr`: sparse while small, dense past `hll-sparse-max-bytes`, the
//! cardinality cached in the header), so values move between Terrace and Redis with
//! GET/SET and behave alike.
//!
//! Hashing (MurmurHash64A, seed 0xadc83b19) and the estimator (Ertl's improved raw estimator)
//! follow Redis so counts agree.

mod repr;

use std::sync::atomic::Ordering;

use super::args::{err, CmdError};
use super::string::{get_str, replace_value};
use super::{CmdResult, Ctx};
use repr::{count, Encoding, Hll, Invalid, REGISTERS};

fn invalid(why: Invalid) -> CmdError {
    match why {
        Invalid::NotHll => err("WRONGTYPE Key is not a valid HyperLogLog string value."),
        Invalid::Corrupt => err("INVALIDOBJ Corrupted HLL object detected"),
    }
}

fn load(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Hll>, CmdError> {
    match get_str(&mut ctx.data, key)? {
        None => Ok(None),
        Some(v) => Hll::from_bytes(v.into_owned()).map(Some).map_err(invalid),
    }
}

fn sparse_max(ctx: &Ctx) -> usize {
    ctx.srv.runtime.hll_sparse_max_bytes.load(Ordering::Relaxed)
}

pub fn pfadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let (mut h, created) = match load(ctx, key)? {
        Some(h) => (h, false),
        None => (Hll::new(), true),
    };
    let changed = h.add(argv[2..].iter().copied(), sparse_max(ctx)).map_err(invalid)? || created;
    if changed {
        replace_value(ctx, key, h.as_bytes());
    }
    ctx.out.int(changed as i64);
    Ok(())
}

pub fn pfcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if let [_, key] = argv {
        let Some(mut h) = load(ctx, key)? else {
            ctx.out.int(0);
            return Ok(());
        };
        let n = match h.cached_count() {
            Some(n) => n,
            None => {
                // Counted once, then cached in the value's header until the next change
                // (as Redis does: PFCOUNT writes the cache back).
                let n = count(&h.registers().map_err(invalid)?);
                h.set_cached_count(n);
                replace_value(ctx, key, h.as_bytes());
                n
            }
        };
        ctx.out.int(n as i64);
        return Ok(());
    }
    let mut max = vec![0u8; REGISTERS];
    for k in &argv[1..] {
        if let Some(h) = load(ctx, k)? {
            h.merge_into(&mut max).map_err(invalid)?;
        }
    }
    ctx.out.int(count(&max) as i64);
    Ok(())
}

pub fn pfmerge(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut max = vec![0u8; REGISTERS];
    // The result is dense when any input is (Redis's choice, to save a conversion).
    let mut dense = false;
    let mut dest = None;
    for (i, k) in argv[1..].iter().enumerate() {
        if let Some(h) = load(ctx, k)? {
            dense |= h.encoding() == Encoding::Dense;
            h.merge_into(&mut max).map_err(invalid)?;
            if i == 0 {
                dest = Some(h);
            }
        }
    }
    let mut dest = dest.unwrap_or_else(Hll::new);
    dest.store_registers(&max, dense, sparse_max(ctx)).map_err(invalid)?;
    replace_value(ctx, argv[1], dest.as_bytes());
    ctx.out.ok();
    Ok(())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key.
pub fn pfdebug(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
    if argv.len() != 3 {
        return Err(CmdError::WrongArgs("pfdebug"));
    }
    let key = argv[2];
    let Some(mut h) = load(ctx, key)? else {
        return Err(err("ERR The specified key does not exist"));
    };
    match sub.as_str() {
        "getreg" => {
            // As Redis: the registers are read from the dense form, which it keeps.
            if h.make_dense().map_err(invalid)? {
                replace_value(ctx, key, h.as_bytes());
            }
            let regs = h.registers().map_err(invalid)?;
            ctx.out.array_len(regs.len());
            for r in regs {
                ctx.out.int(r as i64);
            }
        }
        "decode" => {
            if h.encoding() != Encoding::Sparse {
                return Err(err("ERR HLL encoding is not sparse"));
            }
            let text = h.describe_sparse().map_err(invalid)?;
            ctx.out.bulk(text.as_bytes());
        }
        "encoding" => ctx.out.simple(if h.encoding() == Encoding::Dense { "dense" } else { "sparse" }),
        "todense" => {
            let converted = h.make_dense().map_err(invalid)?;
            if converted {
                replace_value(ctx, key, h.as_bytes());
            }
            ctx.out.int(converted as i64);
        }
        _ => return Err(err(format!("ERR Unknown PFDEBUG subcommand '{}'", String::from_utf8_lossy(argv[1])))),
    }
    Ok(())
}

/// PFSELFTEST: the dense registers read back what was written, and the estimate of a
/// sparse and a dense HyperLogLog fed the same elements stays within a few standard errors
/// and agrees between the two (Redis's self test, in its spirit).
pub fn pfselftest(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    match selftest(sparse_max(ctx)) {
        Ok(()) => ctx.out.ok(),
        Err(why) => return Err(err(format!("ERR TESTFAILED {why}"))),
    }
    Ok(())
}

fn selftest(sparse_max: usize) -> Result<(), String> {
    let mut seed = [0u8; 8];
    let _ = getrandom::fill(&mut seed);
    let seed = u64::from_le_bytes(seed);
    // Registers: every value at every place survives its neighbours being written.
    let mut dense = Hll::new();
    dense.make_dense().map_err(|e| format!("{e:?}"))?;
    for round in 0..8u64 {
        let regs: Vec<u8> = (0..REGISTERS as u64).map(|i| ((i.wrapping_mul(2654435761) ^ seed.rotate_left(round as u32) ^ round) % 64) as u8).collect();
        let mut h = Hll::new();
        h.store_registers(&regs, true, sparse_max).map_err(|e| format!("{e:?}"))?;
        if h.registers().map_err(|e| format!("{e:?}"))? != regs {
            return Err("Register error".into());
        }
    }
    // Estimates.
    let mut sparse = Hll::new();
    let relative = 1.04 / (REGISTERS as f64).sqrt();
    let mut added = 0u64;
    let mut checkpoint = 1u64;
    while checkpoint <= 1_000_000 {
        let batch: Vec<[u8; 8]> = (added..checkpoint).map(|j| (j ^ seed).to_le_bytes()).collect();
        sparse.add(batch.iter().map(|e| e.as_slice()), sparse_max).map_err(|e| format!("{e:?}"))?;
        dense.add(batch.iter().map(|e| e.as_slice()), sparse_max).map_err(|e| format!("{e:?}"))?;
        added = checkpoint;
        let (s, d) = (count(&sparse.registers().map_err(|e| format!("{e:?}"))?), count(&dense.registers().map_err(|e| format!("{e:?}"))?));
        if s != d {
            return Err(format!("Sparse and dense cardinality mismatch: {s} vs {d} after {checkpoint} elements"));
        }
        // A cardinality of 10 may err by one more through collisions alone.
        let max_error = if checkpoint == 10 { 1.0 } else { (relative * 6.0 * checkpoint as f64).ceil() };
        if (checkpoint as f64 - d as f64).abs() > max_error {
            return Err(format!("Too big error. card:{checkpoint} abserr:{}", (checkpoint as f64 - d as f64).abs()));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_self_test_passes() {
        super::selftest(3000).unwrap();
    }
}
