//! Training a codec from a sample, timed; used by the tenant's background trainer, the
//! recommender and `terrace bench compress`.

use std::sync::Arc;
use std::time::Instant;

use super::pattern::PatternCodec;
use super::zstd::{Zstd, ZstdDict, LEVEL};
use super::{Codec, CodecError, CodecKind};

/// Largest dictionary of the zstd-dict codec (zstd's default size).
pub const ZSTD_DICT_BYTES: usize = 110 * 1024;

pub struct Trained {
    pub codec: Arc<dyn Codec>,
    pub seconds: f64,
    /// Pattern codec only: templates kept, and the share of the sample they did not match.
    pub templates: Option<usize>,
    pub unmatched_share: Option<f64>,
}

pub fn train<S: AsRef<[u8]>>(kind: CodecKind, samples: &[S]) -> Result<Trained, CodecError> {
    let start = Instant::now();
    let (codec, templates, unmatched_share): (Arc<dyn Codec>, _, _) = match kind {
        CodecKind::Zstd => (Arc::new(Zstd::new(LEVEL)), None, None),
        CodecKind::ZstdDict => (Arc::new(ZstdDict::train(samples, ZSTD_DICT_BYTES)?), None, None),
        CodecKind::Pattern => {
            let (c, report) = PatternCodec::train(samples)?;
            (Arc::new(c), Some(report.templates), Some(report.unmatched_share))
        }
    };
    Ok(Trained { codec, seconds: start.elapsed().as_secs_f64(), templates, unmatched_share })
}

/// Bytes a value takes stored under `codec`: header + payload, or raw when that is not smaller.
pub fn stored_size(codec: &dyn Codec, raw: &[u8], scratch: &mut Vec<u8>) -> usize {
    scratch.clear();
    match codec.encode(raw, scratch) {
        Ok(()) if scratch.len() + 1 < raw.len() => scratch.len() + 1,
        _ => raw.len(),
    }
}
