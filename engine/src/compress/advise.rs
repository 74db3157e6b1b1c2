//! The recommender behind `compression = auto` and `TERRACE.COMPRESSION ADVISE`: each codec is
//! trained on two thirds of the tenant's sample and measured on the other third (stored/raw
//! ratio, encode and decode time per value). The CPU a codec adds per operation is weighed by
//! the tenant's read/write mix; among the codecs within the CPU budget the smallest ratio wins,
//! and compression is not worth it when no codec saves at least 10%.

use std::time::Instant;

use serde_json::{json, Value};

use super::train::{stored_size, train};
use super::CodecKind;

/// Extra CPU per operation a codec may cost (µs, weighted by the read/write mix).
pub const DEFAULT_CPU_BUDGET_US: f64 = 3.0;
/// A codec must store values in at most this share of their raw size to be worth it.
const WORTH_IT: f64 = 0.9;

#[derive(Debug, Clone)]
pub struct Candidate {
    pub codec: CodecKind,
    pub ratio: f64,
    pub encode_us: f64,
    pub decode_us: f64,
    pub train_seconds: f64,
    pub error: Option<String>,
}

impl Candidate {
    /// CPU added per operation under the mix.
    pub fn cpu_us(&self, read_share: f64) -> f64 {
        read_share * self.decode_us + (1.0 - read_share) * self.encode_us
    }
}

#[derive(Debug, Clone)]
pub struct Advice {
    /// None: store values raw.
    pub choice: Option<CodecKind>,
    pub candidates: Vec<Candidate>,
    pub read_share: f64,
    pub reason: String,
}

impl Advice {
    pub fn to_json(&self) -> Value {
        json!({
            "choice": self.choice.map(|c| c.name()).unwrap_or("none"),
            "read_share": round(self.read_share),
            "reason": self.reason,
            "candidates": self.candidates.iter().map(|c| json!({
                "codec": c.codec.name(),
                "ratio": round(c.ratio),
                "encode_us": round(c.encode_us),
                "decode_us": round(c.decode_us),
                "cpu_us_per_op": round(c.cpu_us(self.read_share)),
                "train_seconds": round(c.train_seconds),
                "error": c.error,
            })).collect::<Vec<_>>(),
        })
    }
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Measures every codec on `sample` and picks one for a tenant with `reads` and `writes`.
pub fn advise<S: AsRef<[u8]>>(sample: &[S], reads: u64, writes: u64, cpu_budget_us: f64) -> Advice {
    let read_share = if reads + writes == 0 { 0.5 } else { reads as f64 / (reads + writes) as f64 };
    let (fit, test): (Vec<&[u8]>, Vec<&[u8]>) = {
        let mut fit = Vec::new();
        let mut test = Vec::new();
        for (i, s) in sample.iter().enumerate() {
            if i % 3 == 2 {
                test.push(s.as_ref())
            } else {
                fit.push(s.as_ref())
            }
        }
        (fit, test)
    };
    let raw: usize = test.iter().map(|t| t.len()).sum();
    let mut candidates = Vec::new();
    for kind in CodecKind::ALL {
        let mut c = Candidate { codec: kind, ratio: 1.0, encode_us: 0.0, decode_us: 0.0, train_seconds: 0.0, error: None };
        match train(kind, &fit) {
            Err(e) => c.error = Some(e.to_string()),
            Ok(t) if test.is_empty() || raw == 0 => c.train_seconds = t.seconds,
            Ok(t) => {
                c.train_seconds = t.seconds;
                let mut scratch = Vec::new();
                let stored: usize = test.iter().map(|v| stored_size(&*t.codec, v, &mut scratch)).sum();
                c.ratio = stored as f64 / raw as f64;
                let mut encoded = Vec::with_capacity(test.len());
                let start = Instant::now();
                for v in &test {
                    let mut e = Vec::new();
                    let _ = t.codec.encode(v, &mut e);
                    encoded.push(e);
                }
                c.encode_us = start.elapsed().as_secs_f64() * 1e6 / test.len() as f64;
                let start = Instant::now();
                let mut out = Vec::new();
                for e in &encoded {
                    out.clear();
                    let _ = t.codec.decode(e, &mut out);
                }
                c.decode_us = start.elapsed().as_secs_f64() * 1e6 / test.len() as f64;
            }
        }
        candidates.push(c);
    }
    let usable: Vec<&Candidate> = candidates.iter().filter(|c| c.error.is_none() && c.ratio < WORTH_IT).collect();
    let within: Vec<&&Candidate> = usable.iter().filter(|c| c.cpu_us(read_share) <= cpu_budget_us).collect();
    let (choice, reason) = if usable.is_empty() {
        (None, format!("no codec stores this tenant's values in under {:.0}% of their size; storing them raw", WORTH_IT * 100.0))
    } else if let Some(best) = within.iter().min_by(|a, b| a.ratio.total_cmp(&b.ratio)) {
        (
            Some(best.codec),
            format!(
                "{} has the smallest ratio ({:.3}) among codecs adding at most {:.1} µs per operation at a {:.0}% read share (it adds {:.2} µs)",
                best.codec.name(),
                best.ratio,
                cpu_budget_us,
                read_share * 100.0,
                best.cpu_us(read_share)
            ),
        )
    } else {
        let fastest = usable.iter().min_by(|a, b| a.cpu_us(read_share).total_cmp(&b.cpu_us(read_share))).expect("non-empty");
        (
            Some(fastest.codec),
            format!(
                "every codec adds more than {:.1} µs per operation; {} is the cheapest ({:.2} µs, ratio {:.3})",
                cpu_budget_us,
                fastest.codec.name(),
                fastest.cpu_us(read_share),
                fastest.ratio
            ),
        )
    };
    Advice { choice, candidates, read_share, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_records_get_a_trained_codec_and_random_bytes_none() {
        let recs: Vec<Vec<u8>> = (0..600)
            .map(|i| {
                format!(r#"{{"id":{},"name":"user {}","zone":"{}","score":{}.{:02}}}"#, 1000 + i * 7, i, ["eu", "us", "ap"][i % 3], i % 50, i % 100)
                    .into_bytes()
            })
            .collect();
        let a = advise(&recs, 90, 10, 1000.0);
        assert!(matches!(a.choice, Some(CodecKind::Pattern) | Some(CodecKind::ZstdDict)), "{:?}", a.to_json());
        assert_eq!(a.to_json()["candidates"].as_array().unwrap().len(), 3);
        assert!((a.read_share - 0.9).abs() < 1e-9);

        let random: Vec<Vec<u8>> = (0..300).map(|_| (0..64).map(|_| fastrand::u8(..)).collect()).collect();
        let a = advise(&random, 1, 1, 1000.0);
        assert_eq!(a.choice, None, "{}", a.reason);
        assert_eq!(a.to_json()["choice"], "none");
    }
}
