//! The pattern codec, after PBC (Zhang et al., "High-Ratio Compression for Machine-Generated
//! Data", SIGMOD 2024): records are matched against templates learned from a sample; a matched
//! record is stored as its template id plus its gap fields, typed (integers and decimals as
//! varints, enumerations as indexes) where the sample allows, and the remaining text — the
//! residual — goes through a trained second stage: an FSST symbol table (short text), a zstd
//! dictionary, or a static order-2 context model with a range coder (long multilingual text),
//! whichever encoded the template's samples smallest — or a faster one within 10% of it.
//! Records that match no template go through the second stage alone.
//!
//! Value layout: `varint(template id + 1)`, the fields' head varints, then the residual (its
//! length is the sum of the text lengths in the head). Unmatched: `0`, `varint(len)`, residual.

pub mod field;
pub mod template;

use std::cell::{Cell, RefCell};

use field::FieldType;
use template::{Fields, Matcher, Part, Template};

use super::bytes::{put_bytes, put_varint, Reader};
use super::fsst::Fsst;
use super::ppm::Ppm;
use super::zstd::ZstdDict;
use super::{Codec, CodecError, CodecKind};

const FORMAT: u8 = 1;
/// Templates kept at most.
pub const MAX_TEMPLATES: usize = 64;
/// Samples the clustering looks at (the reference implementation's range is 500–1000).
const CLUSTER_SAMPLES: usize = 1000;
/// Largest zstd dictionary of the second stage.
const ZSTD_DICT_BYTES: usize = 64 * 1024;

/// The second stage of one template (or of unmatched records), fastest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Raw = 0,
    Fsst = 1,
    Zstd = 2,
    Ppm = 3,
}

impl Stage {
    const ALL: [Stage; 4] = [Stage::Raw, Stage::Fsst, Stage::Zstd, Stage::Ppm];

    fn from_byte(b: u8) -> Result<Stage, CodecError> {
        match b {
            0 => Ok(Stage::Raw),
            1 => Ok(Stage::Fsst),
            2 => Ok(Stage::Zstd),
            3 => Ok(Stage::Ppm),
            _ => Err(CodecError::BadDictionary("unknown second stage")),
        }
    }
}

/// A slower stage must make the template's records this much smaller than a faster one does
/// to be chosen.
const SLOWER_STAGE_GAIN: f64 = 0.10;

struct Tmpl {
    matcher: Matcher,
    fields: Vec<FieldType>,
    stage: Stage,
}

pub struct PatternCodec {
    templates: Vec<Tmpl>,
    unmatched: Stage,
    fsst: Fsst,
    zdict: Option<ZstdDict>,
    ppm: Option<Ppm>,
}

thread_local! {
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    static LAST_UNMATCHED: Cell<bool> = const { Cell::new(false) };
}

/// Statistics of a training run (returned for the recommender and STATS).
#[derive(Debug, Clone, Default)]
pub struct TrainReport {
    pub templates: usize,
    pub unmatched_share: f64,
}

impl PatternCodec {
    /// Learns templates, field types and the second stage from `samples`.
    pub fn train<S: AsRef<[u8]>>(samples: &[S]) -> Result<(PatternCodec, TrainReport), CodecError> {
        let all: Vec<&[u8]> = samples.iter().map(|s| s.as_ref()).collect();
        if all.len() < 8 {
            return Err(CodecError::Training(format!("too few samples ({})", all.len())));
        }
        let step = all.len().div_ceil(CLUSTER_SAMPLES);
        let for_clustering: Vec<&[u8]> = all.iter().step_by(step).copied().collect();
        let learned = template::learn(&for_clustering, MAX_TEMPLATES);
        let mut matchers: Vec<Matcher> = learned.into_iter().map(Matcher::new).collect();

        // Keep templates that enough samples use.
        let min_support = (all.len() / 200).max(2);
        let assign = |ms: &[Matcher]| -> Vec<Option<usize>> { all.iter().map(|r| best_match(ms, r, &mut Fields::new())).collect() };
        let mut assigned = assign(&matchers);
        let mut support = vec![0usize; matchers.len()];
        for t in assigned.iter().flatten() {
            support[*t] += 1;
        }
        let mut order: Vec<usize> = (0..matchers.len()).filter(|&t| support[t] >= min_support).collect();
        order.sort_by(|a, b| support[*b].cmp(&support[*a]));
        if order.len() != matchers.len() {
            let mut old: Vec<Option<Matcher>> = matchers.into_iter().map(Some).collect();
            matchers = order.iter().map(|&t| old[t].take().expect("each kept once")).collect();
            assigned = assign(&matchers);
        }

        // Field types per gap, from the values the sample put there.
        let mut values: Vec<Vec<Vec<&[u8]>>> = matchers.iter().map(|m| vec![Vec::new(); m.gaps]).collect();
        let mut fields = Fields::new();
        for (r, t) in all.iter().zip(&assigned) {
            if let Some(t) = *t {
                matchers[t].split(r, &mut fields);
                for (g, f) in fields.iter().enumerate() {
                    values[t][g].push(f);
                }
            }
        }
        let types: Vec<Vec<FieldType>> = values.iter().map(|per_gap| per_gap.iter().map(|v| FieldType::learn(v)).collect()).collect();

        // Residuals, then the second stages trained on them.
        let mut residuals: Vec<Vec<u8>> = Vec::with_capacity(all.len());
        let mut head_bytes: Vec<usize> = Vec::with_capacity(all.len());
        for (r, t) in all.iter().zip(&assigned) {
            let mut text = Vec::new();
            let mut head = Vec::new();
            match t {
                Some(t) => {
                    matchers[*t].split(r, &mut fields);
                    for (f, ty) in fields.iter().zip(&types[*t]) {
                        ty.encode(f, &mut head, &mut text);
                    }
                }
                None => text.extend_from_slice(r),
            }
            head_bytes.push(head.len() + 2);
            residuals.push(text);
        }
        // Stages are chosen out of sample: trained on two thirds of the residuals, measured on
        // the rest (a dictionary measured on its own training data looks far better than it
        // is). The stages kept are then trained on all of them.
        let nonempty = |keep: &dyn Fn(usize) -> bool| -> Vec<&[u8]> {
            residuals.iter().enumerate().filter(|(i, r)| !r.is_empty() && keep(*i)).map(|(_, r)| &r[..]).collect()
        };
        let stages_from = |texts: &[&[u8]]| -> (Fsst, Option<ZstdDict>, Option<Ppm>) {
            (Fsst::train(texts), ZstdDict::train(texts, ZSTD_DICT_BYTES).ok(), (!texts.is_empty()).then(|| Ppm::train(texts)))
        };
        let (fsst, zdict, ppm) = stages_from(&nonempty(&|i| i % 3 != 2));
        let probe = PatternCodec { templates: Vec::new(), unmatched: Stage::Raw, fsst, zdict, ppm };
        let stage_of = |which: Option<usize>| -> Stage {
            let mut sizes = [0usize; 4];
            let mut heads = 0usize;
            let mut buf = Vec::new();
            for (i, (res, t)) in residuals.iter().zip(&assigned).enumerate() {
                if *t != which || res.is_empty() || (i % 3 != 2 && residuals.len() >= 30) {
                    continue;
                }
                heads += head_bytes[i];
                for stage in Stage::ALL {
                    buf.clear();
                    if probe.stage_encode(stage, res, &mut buf).is_ok() {
                        sizes[stage as usize] += buf.len();
                    } else {
                        sizes[stage as usize] = usize::MAX / 4;
                    }
                }
            }
            // The fastest stage whose records (head and residual) are within reach of the
            // smallest.
            let best = (heads + sizes.iter().copied().min().unwrap_or(0)) as f64;
            Stage::ALL.into_iter().find(|s| (heads + sizes[*s as usize]) as f64 <= best * (1.0 + SLOWER_STAGE_GAIN)).unwrap_or(Stage::Raw)
        };
        let stages: Vec<Stage> = (0..matchers.len()).map(|t| stage_of(Some(t))).collect();
        let unmatched_stage = stage_of(None);
        let (fsst, zdict, ppm) = stages_from(&nonempty(&|_| true));
        let mut codec = PatternCodec { templates: Vec::new(), unmatched: unmatched_stage, fsst, zdict, ppm };
        let missing = |s: Stage| (s == Stage::Zstd && codec.zdict.is_none()) || (s == Stage::Ppm && codec.ppm.is_none());
        let stages: Vec<Stage> = stages.into_iter().map(|s| if missing(s) { Stage::Fsst } else { s }).collect();
        if missing(codec.unmatched) {
            codec.unmatched = Stage::Fsst;
        }
        // Stages no template uses are not kept (nor saved).
        let used = |s: Stage| codec.unmatched == s || stages.contains(&s);
        if !used(Stage::Zstd) {
            codec.zdict = None;
        }
        if !used(Stage::Ppm) {
            codec.ppm = None;
        }
        codec.templates = matchers.into_iter().zip(types).zip(stages).map(|((matcher, fields), stage)| Tmpl { matcher, fields, stage }).collect();
        let unmatched = assigned.iter().filter(|t| t.is_none()).count();
        let report = TrainReport { templates: codec.templates.len(), unmatched_share: unmatched as f64 / all.len() as f64 };
        Ok((codec, report))
    }

    fn stage_encode(&self, stage: Stage, text: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        match stage {
            Stage::Raw => out.extend_from_slice(text),
            Stage::Fsst => self.fsst.compress(text, out),
            Stage::Zstd if text.is_empty() => {}
            Stage::Zstd => self.zdict.as_ref().ok_or(CodecError::Training("no zstd stage".into()))?.frame(text, out)?,
            Stage::Ppm => self.ppm.as_ref().ok_or(CodecError::Training("no context-model stage".into()))?.encode(text, out),
        }
        Ok(())
    }

    fn stage_decode(&self, stage: Stage, bytes: &[u8], n: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let start = out.len();
        match stage {
            Stage::Raw => out.extend_from_slice(bytes),
            Stage::Fsst => self.fsst.decompress(bytes, out)?,
            Stage::Zstd if n == 0 && bytes.is_empty() => {}
            Stage::Zstd => self.zdict.as_ref().ok_or(CodecError::BadDictionary("no zstd stage"))?.unframe(bytes, n, out)?,
            Stage::Ppm => self.ppm.as_ref().ok_or(CodecError::BadDictionary("no context-model stage"))?.decode(bytes, n, out)?,
        }
        if out.len() - start != n {
            out.truncate(start);
            return Err(CodecError::Corrupt("residual length differs from its fields"));
        }
        Ok(())
    }

    pub fn deserialize(data: &[u8]) -> Result<PatternCodec, CodecError> {
        let mut r = Reader::new(data);
        let bad = |_| CodecError::BadDictionary("truncated pattern dictionary");
        if r.byte().map_err(bad)? != FORMAT {
            return Err(CodecError::BadDictionary("unknown pattern dictionary format"));
        }
        let n = r.varint().map_err(bad)? as usize;
        if n > 4096 {
            return Err(CodecError::BadDictionary("too many templates"));
        }
        let mut templates = Vec::with_capacity(n);
        for _ in 0..n {
            let parts_n = r.varint().map_err(bad)? as usize;
            let mut parts = Vec::new();
            for _ in 0..parts_n.min(1 << 16) {
                parts.push(match r.byte().map_err(bad)? {
                    0 => Part::Lit(r.bytes().map_err(bad)?.to_vec()),
                    1 => Part::Gap,
                    _ => return Err(CodecError::BadDictionary("unknown template part")),
                });
            }
            if parts.windows(2).any(|w| w[0] == Part::Gap && w[1] == Part::Gap) || !parts.iter().any(|p| matches!(p, Part::Lit(_))) {
                return Err(CodecError::BadDictionary("malformed template"));
            }
            let matcher = Matcher::new(Template { parts });
            let mut fields = Vec::with_capacity(matcher.gaps);
            for _ in 0..matcher.gaps {
                fields.push(FieldType::deserialize(&mut r).map_err(|e| match e {
                    CodecError::Corrupt(_) => CodecError::BadDictionary("truncated pattern dictionary"),
                    e => e,
                })?);
            }
            let stage = Stage::from_byte(r.byte().map_err(bad)?)?;
            templates.push(Tmpl { matcher, fields, stage });
        }
        let unmatched = Stage::from_byte(r.byte().map_err(bad)?)?;
        let fsst = Fsst::deserialize(&mut r).map_err(|e| match e {
            CodecError::Corrupt(_) => CodecError::BadDictionary("truncated FSST table"),
            e => e,
        })?;
        let zbytes = r.bytes().map_err(bad)?;
        let zdict = if zbytes.is_empty() { None } else { Some(ZstdDict::from_dictionary(zbytes.to_vec(), super::zstd::LEVEL)?) };
        let ppm = match r.byte().map_err(bad)? {
            0 => None,
            1 => Some(Ppm::deserialize(&mut r).map_err(|e| match e {
                CodecError::Corrupt(_) => CodecError::BadDictionary("truncated context model"),
                e => e,
            })?),
            _ => return Err(CodecError::BadDictionary("bad context-model flag")),
        };
        if !r.is_empty() {
            return Err(CodecError::BadDictionary("trailing bytes in pattern dictionary"));
        }
        let uses = |s: Stage| unmatched == s || templates.iter().any(|t| t.stage == s);
        if uses(Stage::Zstd) && zdict.is_none() {
            return Err(CodecError::BadDictionary("a template uses the zstd stage, which is missing"));
        }
        if uses(Stage::Ppm) && ppm.is_none() {
            return Err(CodecError::BadDictionary("a template uses the context-model stage, which is missing"));
        }
        Ok(PatternCodec { templates, unmatched, fsst, zdict, ppm })
    }
}

/// The template matching `r` with the most literal bytes (the most specific).
fn best_match<'r>(ms: &[Matcher], r: &'r [u8], fields: &mut Fields<'r>) -> Option<usize> {
    let mut best: Option<usize> = None;
    let mut scratch = Fields::new();
    for (i, m) in ms.iter().enumerate() {
        if best.is_some_and(|b| ms[b].literal_bytes >= m.literal_bytes) {
            continue;
        }
        if m.split(r, &mut scratch) {
            best = Some(i);
            std::mem::swap(fields, &mut scratch);
        }
    }
    best
}

impl Codec for PatternCodec {
    fn kind(&self) -> CodecKind {
        CodecKind::Pattern
    }

    fn encode(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let mut fields = Fields::new();
        let mut best: Option<usize> = None;
        let mut scratch = Fields::new();
        for (i, t) in self.templates.iter().enumerate() {
            if best.is_some_and(|b| self.templates[b].matcher.literal_bytes >= t.matcher.literal_bytes) {
                continue;
            }
            if t.matcher.split(raw, &mut scratch) {
                best = Some(i);
                std::mem::swap(&mut fields, &mut scratch);
            }
        }
        LAST_UNMATCHED.with(|c| c.set(best.is_none()));
        match best {
            None => {
                out.push(0);
                put_varint(out, raw.len() as u64);
                self.stage_encode(self.unmatched, raw, out)
            }
            Some(t) => {
                let tmpl = &self.templates[t];
                put_varint(out, t as u64 + 1);
                SCRATCH.with(|s| {
                    let (text, _) = &mut *s.borrow_mut();
                    text.clear();
                    for (f, ty) in fields.iter().zip(&tmpl.fields) {
                        ty.encode(f, out, text);
                    }
                    self.stage_encode(tmpl.stage, text, out)
                })
            }
        }
    }

    fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let mut r = Reader::new(payload);
        let t = r.varint()? as usize;
        if t == 0 {
            let n = r.varint()? as usize;
            return self.stage_decode(self.unmatched, r.rest(), n, out);
        }
        let tmpl = self.templates.get(t - 1).ok_or(CodecError::Corrupt("template id beyond the dictionary"))?;
        // Pass 1: walk the head to learn the residual's length and where it starts.
        let head_start = r.clone();
        let mut empty = Reader::new(&[]);
        let mut text_len = 0usize;
        for ty in &tmpl.fields {
            text_len = text_len.checked_add(ty.decode(&mut r, &mut empty, None)?).ok_or(CodecError::Corrupt("length overflow"))?;
        }
        let residual = r.rest();
        SCRATCH.with(|s| {
            let (_, text) = &mut *s.borrow_mut();
            text.clear();
            self.stage_decode(tmpl.stage, residual, text_len, text)?;
            // Pass 2: literals and fields in order.
            let mut head = head_start;
            let mut texts = Reader::new(text);
            let mut fields = tmpl.fields.iter();
            for p in &tmpl.matcher.template.parts {
                match p {
                    Part::Lit(l) => out.extend_from_slice(l),
                    Part::Gap => {
                        fields.next().ok_or(CodecError::Corrupt("template without field"))?.decode(&mut head, &mut texts, Some(out))?;
                    }
                }
            }
            Ok(())
        })
    }

    fn serialize(&self) -> Vec<u8> {
        let mut out = vec![FORMAT];
        put_varint(&mut out, self.templates.len() as u64);
        for t in &self.templates {
            put_varint(&mut out, t.matcher.template.parts.len() as u64);
            for p in &t.matcher.template.parts {
                match p {
                    Part::Lit(l) => {
                        out.push(0);
                        put_bytes(&mut out, l);
                    }
                    Part::Gap => out.push(1),
                }
            }
            for f in &t.fields {
                f.serialize(&mut out);
            }
            out.push(t.stage as u8);
        }
        out.push(self.unmatched as u8);
        self.fsst.serialize(&mut out);
        put_bytes(&mut out, self.zdict.as_ref().map(|z| z.serialize()).as_deref().unwrap_or(&[]));
        match &self.ppm {
            None => out.push(0),
            Some(m) => {
                out.push(1);
                m.serialize(&mut out);
            }
        }
        out
    }

    fn dictionary_bytes(&self) -> usize {
        // Serialized size, but the context model counted as it sits in memory.
        let ppm = self.ppm.as_ref().map(|m| {
            let mut buf = Vec::new();
            m.serialize(&mut buf);
            (buf.len(), m.model_bytes())
        });
        let (on_disk, in_memory) = ppm.unwrap_or((0, 0));
        self.serialize().len() - on_disk + in_memory
    }

    fn last_unmatched(&self) -> bool {
        LAST_UNMATCHED.with(|c| c.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(n: usize) -> Vec<String> {
        let tz = ["Europe/Andorra", "Asia/Dubai", "America/New_York", "Asia/Kabul"];
        (0..n)
            .map(|i| {
                format!(
                    r#"{{"geonameid":{},"name":"City {} {}","latitude":{}.{:05},"longitude":-{}.{:05},"population":{},"timezone":"{}","admin1code":"{:02}"}}"#,
                    3_000_000 + i * 37,
                    i,
                    ["North", "South", "Old"][i % 3],
                    i % 90,
                    i * 7919 % 100_000,
                    i % 180,
                    i * 104_729 % 100_000,
                    15_000 + i * 13,
                    tz[i % 4],
                    i % 30
                )
            })
            .collect()
    }

    #[test]
    fn trained_codec_round_trips_and_compresses_records() {
        let recs = records(600);
        let (c, report) = PatternCodec::train(&recs).unwrap();
        assert_eq!(report.templates, 1, "{:?}", c.templates.iter().map(|t| &t.matcher.template).collect::<Vec<_>>());
        let again = PatternCodec::deserialize(&c.serialize()).unwrap();
        let (mut raw, mut enc) = (0, 0);
        for r in records(700).iter().skip(600) {
            let mut e = Vec::new();
            c.encode(r.as_bytes(), &mut e).unwrap();
            assert!(!c.last_unmatched());
            let mut d = Vec::new();
            again.decode(&e, &mut d).unwrap();
            assert_eq!(d, r.as_bytes());
            raw += r.len();
            enc += e.len();
        }
        assert!((enc as f64) < 0.25 * raw as f64, "{enc} of {raw}");
    }

    #[test]
    fn unmatched_and_odd_values_round_trip() {
        let (c, _) = PatternCodec::train(&records(200)).unwrap();
        let odd = [
            "".as_bytes().to_vec(),
            b"plain text that matches nothing".to_vec(),
            vec![0u8, 255, 1, 2, 3],
            r#"{"geonameid":-0,"name":"","latitude":1.,"longitude":-007.5,"population":1e9,"timezone":"X","admin1code":""}"#.as_bytes().to_vec(),
            "{\"geonameid\":1,\"name\":\"東京 ✓\"".as_bytes().to_vec(),
            vec![b'x'; 100_000],
        ];
        for r in odd {
            let mut e = Vec::new();
            c.encode(&r, &mut e).unwrap();
            let mut d = Vec::new();
            c.decode(&e, &mut d).unwrap();
            assert_eq!(d, r);
        }
    }

    #[test]
    fn corrupt_values_and_dictionaries_are_errors() {
        let (c, _) = PatternCodec::train(&records(200)).unwrap();
        let mut e = Vec::new();
        c.encode(records(201)[200].as_bytes(), &mut e).unwrap();
        for cut in 0..e.len() {
            let _ = c.decode(&e[..cut], &mut Vec::new());
        }
        for i in 0..e.len() {
            let mut bad = e.clone();
            bad[i] ^= 0xa5;
            let _ = c.decode(&bad, &mut Vec::new());
        }
        assert!(c.decode(&[200], &mut Vec::new()).is_err());
        let s = c.serialize();
        for cut in [0, 1, 5, s.len() / 2, s.len() - 1] {
            assert!(PatternCodec::deserialize(&s[..cut]).is_err(), "cut at {cut}");
        }
    }
}
