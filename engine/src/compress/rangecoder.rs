//! A carry-less range coder (after Subbotin's 32-bit design) for the context-model stage:
//! symbols are coded from (cumulative frequency, frequency, total) with totals below 2^16.
//! Hand-written because no maintained crate offers a byte-oriented multi-symbol range coder
//! that takes frequencies from a caller's model.
//!
//! The encoder ends with as few bytes as identify the final interval; the decoder reads
//! zeros past the end of its input, so a value is exactly its bytes.

const TOP: u32 = 1 << 24;
const BOT: u32 = 1 << 16;
/// Largest total frequency a model may use.
pub const MAX_TOTAL: u32 = BOT;

pub struct Encoder<'a> {
    low: u32,
    range: u32,
    out: &'a mut Vec<u8>,
}

impl<'a> Encoder<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Encoder<'a> {
        Encoder { low: 0, range: u32::MAX, out }
    }

    pub fn encode(&mut self, cum: u32, freq: u32, total: u32) {
        debug_assert!(freq > 0 && cum + freq <= total && total <= MAX_TOTAL);
        self.range /= total;
        self.low = self.low.wrapping_add(cum * self.range);
        self.range *= freq;
        self.normalize();
    }

    fn normalize(&mut self) {
        loop {
            if (self.low ^ self.low.wrapping_add(self.range)) >= TOP {
                if self.range >= BOT {
                    return;
                }
                self.range = self.low.wrapping_neg() & (BOT - 1);
            }
            self.out.push((self.low >> 24) as u8);
            self.low <<= 8;
            self.range <<= 8;
        }
    }

    /// Ends the code with the fewest bytes whose zero-padded value lies in the final interval.
    pub fn finish(self) {
        for k in 0..=4u32 {
            let bits = 32 - 8 * k;
            let (v, fits) = if bits == 32 {
                (0u32, self.low == 0)
            } else {
                let unit = 1u32 << bits;
                let v = self.low.checked_add(unit - 1).map(|x| x & !(unit - 1));
                match v {
                    Some(v) => (v, (v - self.low) < self.range),
                    None => (0, false),
                }
            };
            if fits {
                for i in 0..k {
                    self.out.push((v >> (24 - 8 * i)) as u8);
                }
                return;
            }
        }
        unreachable!("four bytes always identify the interval");
    }
}

pub struct Decoder<'a> {
    low: u32,
    range: u32,
    code: u32,
    input: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(input: &'a [u8]) -> Decoder<'a> {
        let mut d = Decoder { low: 0, range: u32::MAX, code: 0, input, pos: 0 };
        for _ in 0..4 {
            d.code = (d.code << 8) | d.next() as u32;
        }
        d
    }

    fn next(&mut self) -> u8 {
        let b = self.input.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// The cumulative frequency the next symbol falls at (call `decode` with its interval).
    pub fn target(&mut self, total: u32) -> u32 {
        self.range /= total;
        (self.code.wrapping_sub(self.low) / self.range).min(total - 1)
    }

    pub fn decode(&mut self, cum: u32, freq: u32) {
        self.low = self.low.wrapping_add(cum * self.range);
        self.range *= freq;
        loop {
            if (self.low ^ self.low.wrapping_add(self.range)) >= TOP {
                if self.range >= BOT {
                    return;
                }
                self.range = self.low.wrapping_neg() & (BOT - 1);
            }
            self.code = (self.code << 8) | self.next() as u32;
            self.low <<= 8;
            self.range <<= 8;
        }
    }

    /// Whether the decoder read past its input by more than the padding a finished code
    /// implies (a corrupt value).
    pub fn overran(&self) -> bool {
        self.pos > self.input.len() + 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Codes `syms` under a fixed skewed model and decodes them back.
    fn round_trip(syms: &[u8]) -> usize {
        let freq = |s: u8| if s < 4 { 1000 } else { 10 };
        let cum = |s: u8| (0..s).map(freq).sum::<u32>();
        let total: u32 = (0..=255u8).map(freq).sum();
        let mut out = Vec::new();
        let mut e = Encoder::new(&mut out);
        for &s in syms {
            e.encode(cum(s), freq(s), total);
        }
        e.finish();
        let mut d = Decoder::new(&out);
        for &s in syms {
            let t = d.target(total);
            let got = (0..=255u8).find(|&c| cum(c) <= t && t < cum(c) + freq(c)).unwrap();
            assert_eq!(got, s);
            d.decode(cum(got), freq(got));
        }
        out.len()
    }

    #[test]
    fn round_trips_and_compresses_a_skewed_source() {
        assert_eq!(round_trip(&[]), 0);
        round_trip(&[255]);
        round_trip(&[0]);
        let skewed: Vec<u8> = (0..10_000).map(|i| (i * 7 % 4) as u8).collect();
        let n = round_trip(&skewed);
        assert!(n < 10_000 * 3 / 8 + 16, "{n}");
        for seed in 0..200u64 {
            let mut r = fastrand::Rng::with_seed(seed);
            let v: Vec<u8> = (0..r.usize(0..300)).map(|_| if r.bool() { r.u8(0..4) } else { r.u8(..) }).collect();
            round_trip(&v);
        }
    }
}
