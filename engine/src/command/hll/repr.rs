//! Redis's HyperLogLog string format, byte for byte, so values move between Terrace and
//! Redis with GET/SET/DUMP: a 16-byte header (`HYLL`, the encoding, three unused bytes, the
//! cached cardinality as 8 little-endian bytes whose top bit marks it stale) and 16384
//! six-bit registers, either dense (12 KiB, packed) or sparse (runs: ZERO `00xxxxxx`, XZERO
//! `01xxxxxx xxxxxxxx`, VAL `1vvvvvxx`).
//!
//! A new HyperLogLog is sparse; it turns dense when a register needs a value above 32 or its
//! sparse form grows past `hll-sparse-max-bytes`, as in Redis. Dense registers are read and
//! written in place; a sparse value is worked on as a list of runs and written back once.

/// Registers: 2^14.
pub const P: u32 = 14;
pub const REGISTERS: usize = 1 << P;
/// Bits of the hash that pick the run of zeros after the register index.
pub const Q: u32 = 64 - P;
pub const HDR: usize = 16;
pub const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
/// The largest value a sparse VAL opcode holds.
const SPARSE_VAL_MAX: u8 = 32;
/// The longest run one ZERO opcode covers (XZERO beyond).
const ZERO_MAX: u32 = 64;
const XZERO_MAX: u32 = 16384;
/// The longest run one VAL opcode covers.
const VAL_RUN_MAX: u32 = 4;

/// What is wrong with a value read as a HyperLogLog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Not a HyperLogLog at all (bad header, or a dense one of the wrong length): WRONGTYPE.
    NotHll,
    /// A sparse HyperLogLog whose runs do not cover the registers exactly: INVALIDOBJ.
    Corrupt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

/// A run of registers holding one value (0: a run of zeros).
type Run = (u8, u32);

/// A HyperLogLog value in Redis's format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hll {
    bytes: Vec<u8>,
}

fn header(encoding: u8) -> Vec<u8> {
    let mut v = vec![0u8; HDR];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = encoding;
    v
}

impl Hll {
    /// An empty HyperLogLog: sparse, one XZERO over every register, cached count 0 (valid).
    pub fn new() -> Hll {
        let mut bytes = header(SPARSE);
        encode_runs(&[(0, REGISTERS as u32)], &mut bytes);
        Hll { bytes }
    }

    /// Takes a stored value, checking its header (and a dense one's length) as Redis's
    /// `isHLLObjectOrReply` does; a sparse body is checked when it is read.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Hll, Invalid> {
        if bytes.len() < HDR || &bytes[..4] != b"HYLL" || bytes[4] > SPARSE {
            return Err(Invalid::NotHll);
        }
        if bytes[4] == DENSE && bytes.len() != DENSE_SIZE {
            return Err(Invalid::NotHll);
        }
        Ok(Hll { bytes })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn encoding(&self) -> Encoding {
        if self.bytes[4] == DENSE {
            Encoding::Dense
        } else {
            Encoding::Sparse
        }
    }

    /// The cached cardinality, if it is still valid.
    pub fn cached_count(&self) -> Option<u64> {
        let card = u64::from_le_bytes(self.bytes[8..16].try_into().expect("8 header bytes"));
        (self.bytes[15] & 0x80 == 0).then_some(card)
    }

    pub fn set_cached_count(&mut self, count: u64) {
        self.bytes[8..16].copy_from_slice(&(count & !(1 << 63)).to_le_bytes());
    }

    fn invalidate_cache(&mut self) {
        self.bytes[15] |= 0x80;
    }

    /// Adds elements' hashes; whether a register changed. Turns dense when a value does
    /// not fit a sparse opcode or the sparse form would pass `sparse_max` bytes. (A sparse
    /// value is unpacked to registers, updated and packed again once: linear in the
    /// registers whatever the number of elements, where updating its runs element by element
    /// is linear in the runs for each one.)
    pub fn add<'a>(&mut self, elements: impl IntoIterator<Item = &'a [u8]>, sparse_max: usize) -> Result<bool, Invalid> {
        let mut changed = false;
        match self.encoding() {
            Encoding::Dense => {
                for e in elements {
                    let (index, count) = pattern(e);
                    if dense_get(&self.bytes[HDR..], index) < count {
                        dense_set(&mut self.bytes[HDR..], index, count);
                        changed = true;
                    }
                }
            }
            Encoding::Sparse => {
                let mut regs = self.registers()?;
                for e in elements {
                    let (index, count) = pattern(e);
                    if regs[index] < count {
                        regs[index] = count;
                        changed = true;
                    }
                }
                if changed {
                    let card = self.bytes[8..16].to_vec();
                    self.store_registers(&regs, false, sparse_max)?;
                    self.bytes[8..16].copy_from_slice(&card);
                }
            }
        }
        if changed {
            self.invalidate_cache();
        }
        Ok(changed)
    }

    /// The registers, one per byte.
    pub fn registers(&self) -> Result<Vec<u8>, Invalid> {
        match self.encoding() {
            Encoding::Dense => Ok((0..REGISTERS).map(|i| dense_get(&self.bytes[HDR..], i)).collect()),
            Encoding::Sparse => {
                let mut regs = Vec::with_capacity(REGISTERS);
                for (v, len) in self.runs()? {
                    regs.extend(std::iter::repeat_n(v, len as usize));
                }
                Ok(regs)
            }
        }
    }

    /// Raises every register to at least `max`'s (PFMERGE, PFCOUNT of several keys).
    pub fn merge_into(&self, max: &mut [u8]) -> Result<(), Invalid> {
        for (m, r) in max.iter_mut().zip(self.registers()?) {
            *m = (*m).max(r);
        }
        Ok(())
    }

    /// Writes `regs` (only ever raising registers), keeping the sparse form when it still fits.
    pub fn store_registers(&mut self, regs: &[u8], dense: bool, sparse_max: usize) -> Result<(), Invalid> {
        if dense || self.encoding() == Encoding::Dense || regs.iter().any(|&r| r > SPARSE_VAL_MAX) {
            let mut bytes = empty_dense();
            for (i, &r) in regs.iter().enumerate() {
                dense_set(&mut bytes[HDR..], i, r);
            }
            self.bytes = bytes;
        } else {
            let runs = runs_of(regs);
            let mut sparse = header(SPARSE);
            encode_runs(&runs, &mut sparse);
            self.bytes = if sparse.len() > sparse_max { dense_from_runs(&runs) } else { sparse };
        }
        self.invalidate_cache();
        Ok(())
    }

    /// Turns a sparse HyperLogLog dense; false if it was dense already.
    pub fn make_dense(&mut self) -> Result<bool, Invalid> {
        if self.encoding() == Encoding::Dense {
            return Ok(false);
        }
        let runs = self.runs()?;
        let card = self.bytes[8..16].to_vec();
        self.bytes = dense_from_runs(&runs);
        self.bytes[8..16].copy_from_slice(&card);
        Ok(true)
    }

    /// A sparse HyperLogLog's opcodes as PFDEBUG DECODE shows them (`Z:1 XZ:100 v:3,2`).
    pub fn describe_sparse(&self) -> Result<String, Invalid> {
        let mut parts = Vec::new();
        for op in opcodes(&self.bytes[HDR..]) {
            parts.push(match op? {
                Op::Zero(len) => format!("z:{len}"),
                Op::XZero(len) => format!("Z:{len}"),
                Op::Val(v, len) => format!("v:{v},{len}"),
            });
        }
        Ok(parts.join(" "))
    }

    /// The runs of a sparse body, checked to cover the registers exactly.
    fn runs(&self) -> Result<Vec<Run>, Invalid> {
        let mut runs: Vec<Run> = Vec::new();
        let mut covered = 0u32;
        for op in opcodes(&self.bytes[HDR..]) {
            let (v, len) = match op? {
                Op::Zero(len) | Op::XZero(len) => (0, len),
                Op::Val(v, len) => (v, len),
            };
            covered += len;
            if covered > REGISTERS as u32 {
                return Err(Invalid::Corrupt);
            }
            push_run(&mut runs, v, len);
        }
        if covered != REGISTERS as u32 {
            return Err(Invalid::Corrupt);
        }
        Ok(runs)
    }
}

/// The cardinality estimate of registers (Ertl's improved raw estimator, as Redis 7).
pub fn count(regs: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[(r & 63) as usize] += 1;
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

const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

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

/// MurmurHash64A, as Redis uses for HyperLogLog.
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h: u64 = seed ^ (key.len() as u64).wrapping_mul(M);
    let chunks = key.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
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

/// The register an element goes to and the value it offers (its run of zeros + 1).
pub fn pattern(elem: &[u8]) -> (usize, u8) {
    let hash = murmur64a(elem, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The bit past the Q used ones is set, so the count ends by Q + 1 at most.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// A dense register (the byte after the last register reads as zero).
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = regs[byte] as u16;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let val = val as u16;
    regs[byte] &= !((63u16 << fb) as u8);
    regs[byte] |= (val << fb) as u8;
    if byte + 1 < regs.len() {
        let fb8 = 8 - fb;
        regs[byte + 1] &= !((63u16 >> fb8) as u8);
        regs[byte + 1] |= (val >> fb8) as u8;
    }
}

/// A dense HyperLogLog with every register zero.
fn empty_dense() -> Vec<u8> {
    let mut bytes = header(DENSE);
    bytes.resize(DENSE_SIZE, 0);
    bytes
}

fn dense_from_runs(runs: &[Run]) -> Vec<u8> {
    let mut bytes = empty_dense();
    let mut i = 0;
    for &(v, len) in runs {
        if v > 0 {
            for r in i..i + len as usize {
                dense_set(&mut bytes[HDR..], r, v);
            }
        }
        i += len as usize;
    }
    bytes
}

enum Op {
    Zero(u32),
    XZero(u32),
    Val(u8, u32),
}

/// The opcodes of a sparse body; an XZERO cut short is corrupt.
fn opcodes(body: &[u8]) -> impl Iterator<Item = Result<Op, Invalid>> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let op = *body.get(i)?;
        Some(if op & 0xC0 == 0 {
            i += 1;
            Ok(Op::Zero((op & 0x3F) as u32 + 1))
        } else if op & 0xC0 == 0x40 {
            let Some(&low) = body.get(i + 1) else {
                i = body.len();
                return Some(Err(Invalid::Corrupt));
            };
            i += 2;
            Ok(Op::XZero((((op & 0x3F) as u32) << 8 | low as u32) + 1))
        } else {
            i += 1;
            Ok(Op::Val(((op >> 2) & 0x1F) + 1, (op & 0x3) as u32 + 1))
        })
    })
}

/// Appends a run, merged with the last one when they hold the same value.
fn push_run(runs: &mut Vec<Run>, v: u8, len: u32) {
    match runs.last_mut() {
        Some((last, n)) if *last == v => *n += len,
        _ => runs.push((v, len)),
    }
}

fn runs_of(regs: &[u8]) -> Vec<Run> {
    let mut runs = Vec::new();
    for &r in regs {
        push_run(&mut runs, r, 1);
    }
    runs
}

/// Writes runs as opcodes: zeros as ZERO (up to 64) or XZERO, values as VALs of up to 4.
fn encode_runs(runs: &[Run], out: &mut Vec<u8>) {
    for &(v, mut len) in runs {
        while len > 0 {
            if v == 0 {
                if len <= ZERO_MAX {
                    out.push((len - 1) as u8);
                    len = 0;
                } else {
                    let n = len.min(XZERO_MAX);
                    out.push(0x40 | ((n - 1) >> 8) as u8);
                    out.push(((n - 1) & 0xFF) as u8);
                    len -= n;
                }
            } else {
                let n = len.min(VAL_RUN_MAX);
                out.push(0x80 | ((v - 1) << 2) | (n - 1) as u8);
                len -= n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elements(n: usize, tag: &str) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("{tag}{i}").into_bytes()).collect()
    }

    #[test]
    fn a_new_hll_is_sparse_with_a_valid_zero_count() {
        let h = Hll::new();
        assert_eq!(h.encoding(), Encoding::Sparse);
        assert_eq!(h.cached_count(), Some(0));
        assert_eq!(h.as_bytes().len(), HDR + 2);
        assert_eq!(count(&h.registers().unwrap()), 0);
    }

    #[test]
    fn sparse_and_dense_agree_register_for_register() {
        for n in [1, 3, 50, 700, 3000] {
            let items = elements(n, "e");
            let mut sparse = Hll::new();
            sparse.add(items.iter().map(Vec::as_slice), 1 << 20).unwrap();
            let mut dense = Hll::new();
            dense.make_dense().unwrap();
            dense.add(items.iter().map(Vec::as_slice), 1 << 20).unwrap();
            assert_eq!(dense.encoding(), Encoding::Dense);
            assert_eq!(sparse.registers().unwrap(), dense.registers().unwrap(), "n = {n}");
            // Round trip through the stored bytes.
            let back = Hll::from_bytes(sparse.as_bytes().to_vec()).unwrap();
            assert_eq!(back.registers().unwrap(), dense.registers().unwrap());
        }
    }

    #[test]
    fn sparse_turns_dense_past_the_size_limit() {
        let mut h = Hll::new();
        h.add(elements(100, "a").iter().map(Vec::as_slice), 3000).unwrap();
        assert_eq!(h.encoding(), Encoding::Sparse);
        h.add(elements(20_000, "b").iter().map(Vec::as_slice), 3000).unwrap();
        assert_eq!(h.encoding(), Encoding::Dense);
        let c = count(&h.registers().unwrap()) as f64;
        assert!((c - 20_100.0).abs() / 20_100.0 < 0.03, "{c}");
    }

    #[test]
    fn counts_are_close() {
        let mut h = Hll::new();
        h.add(elements(3, "").iter().map(Vec::as_slice), 3000).unwrap();
        assert_eq!(count(&h.registers().unwrap()), 3);
        let mut h = Hll::new();
        h.add(elements(100_000, "element:").iter().map(Vec::as_slice), 3000).unwrap();
        let c = count(&h.registers().unwrap()) as f64;
        assert!((c - 100_000.0).abs() / 100_000.0 < 0.02, "{c}");
    }

    #[test]
    fn corruption_is_told_apart() {
        assert_eq!(Hll::from_bytes(b"not an hll at all".to_vec()).unwrap_err(), Invalid::NotHll);
        let mut h = Hll::new();
        h.add([b"a".as_slice(), b"b", b"c"], 3000).unwrap();
        let mut tail = h.as_bytes().to_vec();
        tail.extend_from_slice(b"hello");
        assert_eq!(Hll::from_bytes(tail).unwrap().registers().unwrap_err(), Invalid::Corrupt);
        let mut wrong_len = h.as_bytes().to_vec();
        wrong_len[4] = 0;
        assert_eq!(Hll::from_bytes(wrong_len).unwrap_err(), Invalid::NotHll);
        let mut short = Hll::new().as_bytes().to_vec();
        short.pop();
        assert_eq!(Hll::from_bytes(short).unwrap().registers().unwrap_err(), Invalid::Corrupt);
    }

    #[test]
    fn runs_are_encoded_as_redis_writes_them() {
        let runs = vec![(0u8, 5u32), (3, 2), (0, REGISTERS as u32 - 7)];
        let mut out = Vec::new();
        encode_runs(&runs, &mut out);
        assert_eq!(out, vec![4, 0x80 | (2 << 2) | 1, 0x40 | ((16377 - 1) >> 8) as u8, ((16377 - 1) & 0xFF) as u8]);
    }
}
