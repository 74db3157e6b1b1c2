//! zstd codecs: plain, and with a trained dictionary.
//!
//! Frames are minimal — magicless, no dictionary id, no checksum, no content size — because our
//! header already names codec and dictionary; the payload starts with the raw length (varint)
//! so decompression writes into an exactly sized buffer. Dictionaries are digested once
//! (`CDict`/`DDict`) and shared; compression contexts are reused per thread.

use std::cell::RefCell;

use zstd_safe::{CCtx, CDict, CParameter, DCtx, DDict, DParameter, DictAttachPref, FrameFormat};

use super::bytes::{put_varint, Reader};
use super::{Codec, CodecError, CodecKind};

/// The compression level of both codecs (zstd's default; values are small, higher levels
/// buy little).
pub const LEVEL: i32 = 3;

/// Largest value a payload may claim to decode to (Redis's string limit).
const MAX_RAW: u64 = 512 * 1024 * 1024;

fn minimal_cctx() -> CCtx<'static> {
    let mut c = CCtx::create();
    for p in [
        CParameter::Format(FrameFormat::Magicless),
        CParameter::ContentSizeFlag(false),
        CParameter::DictIdFlag(false),
        CParameter::ChecksumFlag(false),
        CParameter::CompressionLevel(LEVEL),
        // Small values: reference the digested dictionary's tables instead of copying them
        // into the context on every call.
        CParameter::ForceAttachDict(DictAttachPref::ForceAttach),
    ] {
        c.set_parameter(p).expect("zstd accepts its own parameters");
    }
    c
}

fn minimal_dctx() -> DCtx<'static> {
    let mut d = DCtx::create();
    d.set_parameter(DParameter::Format(FrameFormat::Magicless)).expect("zstd accepts its own parameters");
    d
}

thread_local! {
    static PLAIN_CCTX: RefCell<CCtx<'static>> = RefCell::new(minimal_cctx());
    static DICT_CCTX: RefCell<CCtx<'static>> = RefCell::new(minimal_cctx());
    static DCTX: RefCell<DCtx<'static>> = RefCell::new(minimal_dctx());
}

fn zerr(code: usize) -> CodecError {
    CodecError::Zstd(zstd_safe::get_error_name(code))
}

/// Compresses `raw` with `cctx` into `out` as `[raw len][frame]`.
fn compress_with(cctx: &mut CCtx<'static>, raw: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
    let start = out.len();
    put_varint(out, raw.len() as u64);
    frame_into(cctx, raw, out).inspect_err(|_| out.truncate(start))
}

/// Appends a bare frame of `raw` to `out`.
fn frame_into(cctx: &mut CCtx<'static>, raw: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
    let start = out.len();
    let bound = zstd_safe::compress_bound(raw.len());
    out.resize(start + bound, 0);
    match cctx.compress2(&mut out[start..], raw) {
        Ok(n) => {
            out.truncate(start + n);
            Ok(())
        }
        Err(code) => {
            out.truncate(start);
            Err(zerr(code))
        }
    }
}

fn decompress_with(payload: &[u8], ddict: Option<&DDict<'static>>, out: &mut Vec<u8>) -> Result<(), CodecError> {
    let mut r = Reader::new(payload);
    let n = r.varint()?;
    if n > MAX_RAW {
        return Err(CodecError::Corrupt("length beyond the string limit"));
    }
    unframe(r.rest(), n as usize, ddict, out)
}

/// The unused capacity at the end of a Vec, as zstd's output buffer: decompression writes
/// straight after the existing bytes without zeroing the space first.
struct Tail<'a> {
    vec: &'a mut Vec<u8>,
    start: usize,
    limit: usize,
}

// SAFETY: the pointer and capacity describe `limit` bytes of the Vec's own allocation after
// `start`; `filled_until` only extends the length over bytes zstd reports as written.
unsafe impl zstd_safe::WriteBuf for Tail<'_> {
    fn as_slice(&self) -> &[u8] {
        &self.vec[self.start..]
    }
    fn capacity(&self) -> usize {
        self.limit
    }
    fn as_mut_ptr(&mut self) -> *mut u8 {
        // SAFETY: `start` is the Vec's length, within its allocation.
        unsafe { self.vec.as_mut_ptr().add(self.start) }
    }
    unsafe fn filled_until(&mut self, n: usize) {
        self.vec.set_len(self.start + n);
    }
}

/// The most a zstd frame can expand: an RLE block of a few bytes stands for 128 KiB.
const MAX_EXPANSION: usize = 32 * 1024;

/// Appends the `n` bytes a bare frame decodes to to `out`.
fn unframe(frame: &[u8], n: usize, ddict: Option<&DDict<'static>>, out: &mut Vec<u8>) -> Result<(), CodecError> {
    if n > (frame.len() + 1).saturating_mul(MAX_EXPANSION) {
        return Err(CodecError::Corrupt("length beyond what the frame can hold"));
    }
    let start = out.len();
    out.reserve(n);
    let res = DCTX.with(|d| {
        let mut d = d.borrow_mut();
        let mut dst = Tail { vec: &mut *out, start, limit: n };
        match ddict {
            Some(dd) => d.decompress_using_ddict(&mut dst, frame, dd),
            None => d.decompress(&mut dst, frame),
        }
    });
    match res {
        Ok(got) if got == n => Ok(()),
        Ok(_) => {
            out.truncate(start);
            Err(CodecError::Corrupt("zstd frame length differs from the header"))
        }
        Err(code) => {
            out.truncate(start);
            Err(zerr(code))
        }
    }
}

/// zstd without a dictionary.
pub struct Zstd {
    level: i32,
}

impl Zstd {
    pub fn new(level: i32) -> Zstd {
        Zstd { level }
    }
}

impl Codec for Zstd {
    fn kind(&self) -> CodecKind {
        CodecKind::Zstd
    }
    fn encode(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        PLAIN_CCTX.with(|c| {
            let mut c = c.borrow_mut();
            if self.level != LEVEL {
                c.set_parameter(CParameter::CompressionLevel(self.level)).map_err(zerr)?;
            }
            let r = compress_with(&mut c, raw, out);
            if self.level != LEVEL {
                c.set_parameter(CParameter::CompressionLevel(LEVEL)).map_err(zerr)?;
            }
            r
        })
    }
    fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        decompress_with(payload, None, out)
    }
    fn serialize(&self) -> Vec<u8> {
        Vec::new()
    }
    fn dictionary_bytes(&self) -> usize {
        0
    }
}

/// zstd with a trained dictionary.
pub struct ZstdDict {
    dict: Vec<u8>,
    cdict: CDict<'static>,
    ddict: DDict<'static>,
}

// SAFETY: CDict and DDict are immutable after creation; zstd documents them as usable from
// several threads at once (read-only).
unsafe impl Sync for ZstdDict {}
// SAFETY: as for Sync: the dictionaries own their zstd objects and have no thread affinity.
unsafe impl Send for ZstdDict {}

impl ZstdDict {
    /// Trains a dictionary of at most `max_size` bytes on `samples`.
    pub fn train<S: AsRef<[u8]>>(samples: &[S], max_size: usize) -> Result<ZstdDict, CodecError> {
        let total: usize = samples.iter().map(|s| s.as_ref().len()).sum();
        if samples.len() < 8 || total < 256 {
            return Err(CodecError::Training(format!("too few samples ({} values, {total} bytes)", samples.len())));
        }
        let size = max_size.min(total / 2).max(256);
        let dict = ::zstd::dict::from_samples(samples, size).map_err(|e| CodecError::Training(format!("zstd: {e}")))?;
        Self::from_dictionary(dict, LEVEL)
    }

    pub fn from_dictionary(dict: Vec<u8>, level: i32) -> Result<ZstdDict, CodecError> {
        if dict.is_empty() {
            return Err(CodecError::BadDictionary("empty zstd dictionary"));
        }
        let cdict = CDict::create(&dict, level);
        let ddict = DDict::create(&dict);
        Ok(ZstdDict { dict, cdict, ddict })
    }
}

impl ZstdDict {
    /// A bare frame (no length prefix): for callers that know the raw length themselves.
    pub fn frame(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        DICT_CCTX.with(|c| {
            let mut c = c.borrow_mut();
            c.ref_cdict(&self.cdict).map_err(zerr)?;
            frame_into(&mut c, raw, out)
        })
    }

    /// Decodes a bare frame of `n` raw bytes.
    pub fn unframe(&self, frame: &[u8], n: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        unframe(frame, n, Some(&self.ddict), out)
    }
}

impl Codec for ZstdDict {
    fn kind(&self) -> CodecKind {
        CodecKind::ZstdDict
    }
    fn encode(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        DICT_CCTX.with(|c| {
            let mut c = c.borrow_mut();
            // The context only borrows the dictionary during this call (it is re-referenced
            // before every use, so a dropped dictionary is never reached).
            c.ref_cdict(&self.cdict).map_err(zerr)?;
            compress_with(&mut c, raw, out)
        })
    }
    fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        decompress_with(payload, Some(&self.ddict), out)
    }
    fn serialize(&self) -> Vec<u8> {
        self.dict.clone()
    }
    fn dictionary_bytes(&self) -> usize {
        self.dict.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(c: &dyn Codec, raw: &[u8]) {
        let mut enc = Vec::new();
        c.encode(raw, &mut enc).unwrap();
        let mut dec = b"prefix".to_vec();
        c.decode(&enc, &mut dec).unwrap();
        assert_eq!(&dec[6..], raw);
    }

    fn samples() -> Vec<Vec<u8>> {
        (0..400).map(|i| format!("{{\"id\":{i},\"name\":\"user-{}\",\"city\":\"Hangzhou\",\"score\":{}}}", i * 7, i % 13).into_bytes()).collect()
    }

    #[test]
    fn plain_round_trips_and_frames_are_minimal() {
        let z = Zstd::new(LEVEL);
        for raw in [&b""[..], b"a", &[0u8; 100_000], "héllo wörld ✓".as_bytes()] {
            round_trip(&z, raw);
        }
        let mut enc = Vec::new();
        z.encode(&[7u8; 1000], &mut enc).unwrap();
        assert!(enc.len() < 20, "{} bytes", enc.len());
        assert_ne!(&enc[2..6], &[0x28, 0xb5, 0x2f, 0xfd], "no magic number");
    }

    #[test]
    fn dictionary_round_trips_and_shrinks_small_records() {
        let s = samples();
        let d = ZstdDict::train(&s, 16 * 1024).unwrap();
        let rec = b"{\"id\":9999,\"name\":\"user-123\",\"city\":\"Hangzhou\",\"score\":5}";
        round_trip(&d, rec);
        let mut enc = Vec::new();
        d.encode(rec, &mut enc).unwrap();
        assert!(enc.len() * 2 < rec.len(), "{} of {}", enc.len(), rec.len());
        let again = ZstdDict::from_dictionary(d.serialize(), LEVEL).unwrap();
        let mut dec = Vec::new();
        again.decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, rec);
    }

    #[test]
    fn corrupt_payloads_are_errors() {
        let d = ZstdDict::train(&samples(), 16 * 1024).unwrap();
        let mut enc = Vec::new();
        d.encode(b"{\"id\":1,\"name\":\"user-1\"}", &mut enc).unwrap();
        for cut in 0..enc.len() {
            let _ = d.decode(&enc[..cut], &mut Vec::new());
        }
        assert!(d.decode(&[0xff, 0xff, 0xff, 0xff, 0x0f], &mut Vec::new()).is_err());
        let mut bad = enc.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x55;
        let _ = d.decode(&bad, &mut Vec::new());
        assert!(Zstd::new(LEVEL).decode(&[3, 1, 2, 3], &mut Vec::new()).is_err());
    }

    #[test]
    fn too_few_samples_is_a_training_error() {
        assert!(matches!(ZstdDict::train(&[b"x".to_vec()], 1024), Err(CodecError::Training(_))));
    }
}
