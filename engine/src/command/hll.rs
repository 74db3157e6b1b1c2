//! HyperLogLog commands (PFADD, PFCOUNT, PFMERGE) over string values in Redis's dense
//! representation: a 16-byte "HYLL" header and 16384 six-bit registers, so values can be moved
//! between Terrace and Redis with GET/SET. Terrace always writes the dense encoding; it reads
//! Redis's sparse encoding too.
//!
//! Hashing (MurmurHash64A, seed 0xadc83b19) and the estimator (Ertl's improved raw estimator)
//! follow Redis so counts agree.

use super::args::{err, CmdError};
use super::string::get_str;
use super::{CmdResult, Ctx};

const P: u32 = 14;
const REGISTERS: usize = 1 << P;
const Q: u32 = 64 - P;
const HDR: usize = 16;
const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

fn not_hll() -> CmdError {
    err("WRONGTYPE Key is not a valid HyperLogLog string value.")
}

/// MurmurHash64A, as Redis uses for HyperLogLog.
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h: u64 = seed ^ (key.len() as u64).wrapping_mul(M);
    let chunks = key.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u64::from_le_bytes(c.try_into().unwrap());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate() {
            h ^= (*b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// Register index and run length (count of trailing zeros + 1) of an element.
fn pattern(elem: &[u8]) -> (usize, u8) {
    let hash = murmur64a(elem, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Dense registers, unpacked one per byte while we work on them.
struct Hll {
    regs: Vec<u8>,
}

impl Hll {
    fn new() -> Hll {
        Hll { regs: vec![0; REGISTERS] }
    }

    fn decode(v: &[u8]) -> Result<Hll, CmdError> {
        if v.len() < HDR || &v[..4] != b"HYLL" {
            return Err(not_hll());
        }
        let mut h = Hll::new();
        match v[4] {
            0 => {
                if v.len() != DENSE_SIZE {
                    return Err(not_hll());
                }
                let p = &v[HDR..];
                for (i, r) in h.regs.iter_mut().enumerate() {
                    let byte = i * 6 / 8;
                    let fb = (i * 6) & 7;
                    let b0 = p[byte] as u16;
                    let b1 = *p.get(byte + 1).unwrap_or(&0) as u16;
                    *r = (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8;
                }
            }
            1 => {
                // Sparse: ZERO (00xxxxxx), XZERO (01xxxxxx xxxxxxxx), VAL (1vvvvvxx).
                let mut idx = 0usize;
                let mut i = HDR;
                while i < v.len() {
                    let op = v[i];
                    if op & 0xC0 == 0 {
                        idx += (op & 0x3F) as usize + 1;
                        i += 1;
                    } else if op & 0xC0 == 0x40 {
                        let n = ((((op & 0x3F) as usize) << 8) | *v.get(i + 1).ok_or_else(not_hll)? as usize) + 1;
                        idx += n;
                        i += 2;
                    } else {
                        let val = ((op >> 2) & 0x1F) + 1;
                        let run = (op & 0x3) as usize + 1;
                        for _ in 0..run {
                            *h.regs.get_mut(idx).ok_or_else(not_hll)? = val;
                            idx += 1;
                        }
                        i += 1;
                    }
                }
                if idx != REGISTERS {
                    return Err(not_hll());
                }
            }
            _ => return Err(not_hll()),
        }
        Ok(h)
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = vec![0u8; DENSE_SIZE];
        v[..4].copy_from_slice(b"HYLL");
        // Cached cardinality marked invalid (MSB of its last byte), as Redis does after writes.
        v[15] = 0x80;
        let p = &mut v[HDR..];
        for (i, &r) in self.regs.iter().enumerate() {
            let byte = i * 6 / 8;
            let fb = (i * 6) & 7;
            let val = r as u16;
            p[byte] &= !((63u16 << fb) as u8);
            p[byte] |= (val << fb) as u8;
            if byte + 1 < p.len() {
                let fb8 = 8 - fb;
                p[byte + 1] &= !((63u16 >> fb8) as u8);
                p[byte + 1] |= (val >> fb8) as u8;
            }
        }
        v
    }

    fn add(&mut self, elem: &[u8]) -> bool {
        let (i, c) = pattern(elem);
        if c > self.regs[i] {
            self.regs[i] = c;
            true
        } else {
            false
        }
    }

    fn merge(&mut self, o: &Hll) {
        for (a, b) in self.regs.iter_mut().zip(&o.regs) {
            *a = (*a).max(*b);
        }
    }

    fn count(&self) -> u64 {
        let mut histo = [0u32; 64];
        for &r in &self.regs {
            histo[r as usize] += 1;
        }
        let m = REGISTERS as f64;
        let mut z = m * tau((m - histo[Q as usize + 1] as f64) / m);
        for j in (1..=Q as usize).rev() {
            z += histo[j] as f64;
            z *= 0.5;
        }
        z += m * sigma(histo[0] as f64 / m);
        (ALPHA_INF * m * m / z).round() as u64
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

fn load(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Hll>, CmdError> {
    match get_str(&mut ctx.data, key)? {
        None => Ok(None),
        Some(v) => Hll::decode(&v).map(Some),
    }
}

pub fn pfadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let (mut h, created) = match load(ctx, key)? {
        Some(h) => (h, false),
        None => (Hll::new(), true),
    };
    let mut changed = created;
    for e in &argv[2..] {
        changed |= h.add(e);
    }
    if changed {
        super::string::replace_value(ctx, key, &h.encode());
    }
    ctx.out.int(changed as i64);
    Ok(())
}

pub fn pfcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut acc = Hll::new();
    for k in &argv[1..] {
        if let Some(h) = load(ctx, k)? {
            acc.merge(&h);
        }
    }
    ctx.out.int(acc.count() as i64);
    Ok(())
}

pub fn pfmerge(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut acc = Hll::new();
    for k in &argv[1..] {
        if let Some(h) = load(ctx, k)? {
            acc.merge(&h);
        }
    }
    super::string::replace_value(ctx, argv[1], &acc.encode());
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_counts_are_exact_and_large_ones_close() {
        let mut h = Hll::new();
        for i in 0..3 {
            h.add(format!("{i}").as_bytes());
        }
        assert_eq!(h.count(), 3);
        let mut h = Hll::new();
        for i in 0..100_000 {
            h.add(format!("element:{i}").as_bytes());
        }
        let c = h.count() as f64;
        assert!((c - 100_000.0).abs() / 100_000.0 < 0.02, "{c}");
    }

    #[test]
    fn dense_encoding_roundtrips() {
        let mut h = Hll::new();
        for i in 0..5000 {
            h.add(format!("{i}").as_bytes());
        }
        let enc = h.encode();
        assert_eq!(enc.len(), DENSE_SIZE);
        let back = Hll::decode(&enc).unwrap();
        assert_eq!(back.regs, h.regs);
        assert!(Hll::decode(b"not an hll").is_err());
    }
}
