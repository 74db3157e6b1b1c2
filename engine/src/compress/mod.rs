//! Value compression: the `Codec` trait, the one-byte value header, and the codecs
//! (zstd, zstd with a trained dictionary, the PBC-style pattern codec).
//!
//! A compressed string value is `[header][payload]`. The header names the codec (3 bits) and
//! the dictionary slot (5 bits) of the tenant's generation that encoded it, so values written
//! under an older generation stay readable until the background pass re-encodes them. Values
//! that do not shrink are stored raw, without a header (the entry says which it is).
//!
//! Training (`train`), the per-tenant state (`tenant`), dictionary files (`store`), the
//! write sampler (`sample`) and the recommender (`advise`) live in the submodules.

pub mod advise;
pub mod bytes;
pub mod fsst;
pub mod pass;
pub mod pattern;
pub mod ppm;
pub mod rangecoder;
pub mod sample;
pub mod store;
pub mod tenant;
pub mod train;
pub mod zstd;

use std::fmt;

/// The codecs, as named in configuration and in value headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodecKind {
    Zstd = 1,
    ZstdDict = 2,
    Pattern = 3,
}

impl CodecKind {
    pub const ALL: [CodecKind; 3] = [CodecKind::Zstd, CodecKind::ZstdDict, CodecKind::Pattern];

    pub fn name(self) -> &'static str {
        match self {
            CodecKind::Zstd => "zstd",
            CodecKind::ZstdDict => "zstd-dict",
            CodecKind::Pattern => "pattern",
        }
    }

    pub fn from_bits(b: u8) -> Option<CodecKind> {
        match b {
            1 => Some(CodecKind::Zstd),
            2 => Some(CodecKind::ZstdDict),
            3 => Some(CodecKind::Pattern),
            _ => None,
        }
    }

    /// Whether the codec needs a trained dictionary.
    pub fn trained(self) -> bool {
        self != CodecKind::Zstd
    }
}

/// What a tenant is configured to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    None,
    Codec(CodecKind),
    /// The recommender picks among the codecs at each training.
    Auto,
}

impl Choice {
    pub fn parse(s: &str) -> Option<Choice> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" => Choice::None,
            "zstd" => Choice::Codec(CodecKind::Zstd),
            "zstd-dict" => Choice::Codec(CodecKind::ZstdDict),
            "pattern" => Choice::Codec(CodecKind::Pattern),
            "auto" => Choice::Auto,
            _ => return None,
        })
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Choice::None => "none",
            Choice::Codec(k) => k.name(),
            Choice::Auto => "auto",
        })
    }
}

/// Eager: compressed on write. Lazy: stored raw, compressed once cold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Eager,
    Lazy,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s.to_ascii_lowercase().as_str() {
            "eager" => Some(Mode::Eager),
            "lazy" => Some(Mode::Lazy),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Mode::Eager => "eager",
            Mode::Lazy => "lazy",
        }
    }
}

/// Dictionary slots per tenant: generation `g` lives in slot `g % SLOTS`.
pub const SLOTS: u32 = 32;

/// The value header: codec in the top 3 bits, dictionary slot in the low 5.
pub fn header(kind: CodecKind, slot: u8) -> u8 {
    ((kind as u8) << 5) | (slot & 0x1f)
}

/// Splits a header into codec and slot.
pub fn parse_header(h: u8) -> Option<(CodecKind, u8)> {
    Some((CodecKind::from_bits(h >> 5)?, h & 0x1f))
}

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("corrupt compressed value: {0}")]
    Corrupt(&'static str),
    #[error("zstd: {0}")]
    Zstd(&'static str),
    #[error("value compressed with {codec} dictionary slot {slot}, which this tenant no longer has")]
    MissingDictionary { codec: &'static str, slot: u8 },
    #[error("training failed: {0}")]
    Training(String),
    #[error("corrupt dictionary: {0}")]
    BadDictionary(&'static str),
}

/// A value codec. Implementations are immutable once built (trained state is shared by every
/// thread); per-thread scratch state lives in thread-locals.
pub trait Codec: Send + Sync {
    fn kind(&self) -> CodecKind;
    /// Appends the payload encoding `raw` to `out`.
    fn encode(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError>;
    /// Appends the value a payload encodes to `out`.
    fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError>;
    /// The trained state, as stored in a dictionary file (empty for untrained codecs).
    fn serialize(&self) -> Vec<u8>;
    /// Size of the trained state in memory (for STATS).
    fn dictionary_bytes(&self) -> usize;
    /// Whether the last `encode` of this thread matched no template (pattern codec only).
    fn last_unmatched(&self) -> bool {
        false
    }
}

/// Rebuilds a codec from a dictionary file's payload.
pub fn deserialize(kind: CodecKind, data: &[u8]) -> Result<std::sync::Arc<dyn Codec>, CodecError> {
    Ok(match kind {
        CodecKind::Zstd => std::sync::Arc::new(zstd::Zstd::new(zstd::LEVEL)),
        CodecKind::ZstdDict => std::sync::Arc::new(zstd::ZstdDict::from_dictionary(data.to_vec(), zstd::LEVEL)?),
        CodecKind::Pattern => std::sync::Arc::new(pattern::PatternCodec::deserialize(data)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        for k in CodecKind::ALL {
            for slot in 0..SLOTS as u8 {
                assert_eq!(parse_header(header(k, slot)), Some((k, slot)));
            }
        }
        assert_eq!(parse_header(0), None);
    }
}

#[cfg(test)]
mod roundtrip_tests;
