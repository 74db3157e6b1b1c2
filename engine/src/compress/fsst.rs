//! FSST (Boncz, Neumann, Leis, VLDB 2020) symbol tables via the `fsst-rs` crate: the second
//! stage of the pattern codec for short text. Input to the decoder is validated first (codes
//! within the table, no dangling escape) because the crate's decoder trusts its input.

use std::mem::MaybeUninit;

use fsst::{Compressor, Symbol, ESCAPE_CODE};

use super::bytes::{put_varint, Reader};
use super::CodecError;

pub struct Fsst {
    compressor: Compressor,
    lengths: [u8; 256],
}

impl Fsst {
    pub fn train<S: AsRef<[u8]>>(samples: &[S]) -> Fsst {
        let refs: Vec<&[u8]> = samples.iter().map(|s| s.as_ref()).collect();
        Self::wrap(Compressor::train(&refs))
    }

    fn wrap(compressor: Compressor) -> Fsst {
        let mut lengths = [0u8; 256];
        for (i, &l) in compressor.symbol_lengths().iter().enumerate() {
            lengths[i] = l;
        }
        Fsst { compressor, lengths }
    }

    /// Appends the codes of `raw` to `out`.
    pub fn compress(&self, raw: &[u8], out: &mut Vec<u8>) {
        if raw.is_empty() {
            return;
        }
        out.reserve(raw.len() * 2 + 8);
        let spare = out.spare_capacity_mut();
        // SAFETY: compress_into writes at most 2 bytes per input byte (all escapes), which
        // `reserve` guaranteed, and returns how many it initialized.
        let n = unsafe { self.compressor.compress_into(raw, spare) };
        // SAFETY: `n` bytes after the old length were initialized by compress_into (above).
        unsafe { out.set_len(out.len() + n) };
    }

    /// Appends the bytes `codes` decode to to `out`.
    pub fn decompress(&self, codes: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let mut len = 0usize;
        let mut i = 0;
        while i < codes.len() {
            let c = codes[i];
            if c == ESCAPE_CODE {
                if i + 1 >= codes.len() {
                    return Err(CodecError::Corrupt("dangling FSST escape"));
                }
                len += 1;
                i += 2;
            } else {
                let l = self.lengths[c as usize];
                if l == 0 {
                    return Err(CodecError::Corrupt("FSST code outside the symbol table"));
                }
                len += l as usize;
                i += 1;
            }
        }
        if len == 0 {
            return Ok(());
        }
        out.reserve(len + 8);
        let start = out.len();
        let spare: &mut [MaybeUninit<u8>] = &mut out.spare_capacity_mut()[..len + 8];
        let n = self.compressor.decompressor().decompress_into(codes, spare);
        debug_assert_eq!(n, len);
        // SAFETY: the decoder initialized `n` bytes, n == len as validated above.
        unsafe { out.set_len(start + n.min(len)) };
        Ok(())
    }

    pub fn serialize(&self, out: &mut Vec<u8>) {
        let syms = self.compressor.symbol_table();
        put_varint(out, syms.len() as u64);
        for (s, &l) in syms.iter().zip(self.compressor.symbol_lengths()) {
            out.push(l);
            out.extend_from_slice(&s.to_u64().to_le_bytes()[..l as usize]);
        }
    }

    pub fn deserialize(r: &mut Reader) -> Result<Fsst, CodecError> {
        let n = r.varint()? as usize;
        if n > 255 {
            return Err(CodecError::BadDictionary("FSST table longer than 255 symbols"));
        }
        let mut syms = Vec::with_capacity(n);
        let mut lens = Vec::with_capacity(n);
        for _ in 0..n {
            let l = r.byte()?;
            if !(1..=8).contains(&l) {
                return Err(CodecError::BadDictionary("FSST symbol length outside 1..8"));
            }
            let mut b = [0u8; 8];
            b[..l as usize].copy_from_slice(r.take(l as usize)?);
            syms.push(Symbol::from_slice(&b));
            lens.push(l);
        }
        // FSST tables list 2..8-byte symbols by length, then the 1-byte ones; the crate
        // asserts this, and a corrupt file must be an error, not a panic.
        let ordered = {
            let multi = lens.iter().take_while(|&&l| l > 1).count();
            lens[..multi].windows(2).all(|w| w[0] <= w[1]) && lens[multi..].iter().all(|&l| l == 1)
        };
        if !ordered {
            return Err(CodecError::BadDictionary("FSST symbol table out of order"));
        }
        // Symbols the crate cannot index (which its trainer never emits) still trip an
        // assertion inside it; that one is caught.
        let built =
            std::panic::catch_unwind(|| Compressor::rebuild_from(&syms, &lens)).map_err(|_| CodecError::BadDictionary("FSST symbol table out of order"))?;
        Ok(Self::wrap(built))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_survives_serialization() {
        let samples: Vec<String> = (0..300).map(|i| format!("Airport {} of Springfield, county {}", i, i % 7)).collect();
        let f = Fsst::train(&samples);
        let mut buf = Vec::new();
        f.serialize(&mut buf);
        let g = Fsst::deserialize(&mut Reader::new(&buf)).unwrap();
        for raw in [&b""[..], b"Airport 12 of Springfield", "日本語 ✓".as_bytes(), &[0u8, 255, 254, 1]] {
            let mut enc = Vec::new();
            f.compress(raw, &mut enc);
            let mut dec = Vec::new();
            g.decompress(&enc, &mut dec).unwrap();
            assert_eq!(dec, raw);
        }
        let mut enc = Vec::new();
        f.compress(b"Airport 77 of Springfield, county 3", &mut enc);
        assert!(enc.len() < 20, "{}", enc.len());
    }

    #[test]
    fn corrupt_codes_are_errors() {
        let f = Fsst::train(&["abcabcabc"; 50]);
        assert!(f.decompress(&[ESCAPE_CODE], &mut Vec::new()).is_err());
        assert!(f.decompress(&[250], &mut Vec::new()).is_err());
        let mut bad = Vec::new();
        put_varint(&mut bad, 2);
        bad.extend_from_slice(&[1, b'a', 2, b'b', b'c']);
        assert!(Fsst::deserialize(&mut Reader::new(&bad)).is_err(), "1-byte symbol before a 2-byte one");
    }
}
