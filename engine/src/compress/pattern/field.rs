//! Typed fields of the pattern codec: what a template's gap holds, learned from the sample.
//!
//! Each field encodes into the record's head (varints) and, for text, into the residual that
//! the second stage compresses. Every typed encoding reserves 0 as an escape: a value that does
//! not fit the learned type (a non-canonical number, an unseen enum value) is stored as text,
//! so encoding never fails and decoding is exact.

use hashbrown::HashMap;

use super::super::bytes::{put_bytes, put_varint, unzigzag, zigzag, Reader};
use super::super::CodecError;

/// Longest digit string kept as a number (fits i64 with room).
const MAX_DIGITS: usize = 18;

#[derive(Debug, Clone, PartialEq)]
pub enum FieldType {
    /// A canonical decimal integer (`0`, `-12`, no leading zeros).
    Int,
    /// `-?int.frac` with `frac` of 1..=15 digits; `decimals` is the usual count.
    Decimal { decimals: u8 },
    /// One of a few values seen in the sample, most frequent first.
    Enum(Enum),
    /// Anything: length in the head, bytes in the residual.
    Text,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Enum {
    pub values: Vec<Vec<u8>>,
    index: HashMap<Vec<u8>, u32, foldhash::fast::RandomState>,
}

impl Enum {
    pub fn new(values: Vec<Vec<u8>>) -> Enum {
        let mut index = HashMap::with_capacity_and_hasher(values.len(), foldhash::fast::RandomState::default());
        for (i, v) in values.iter().enumerate() {
            index.insert(v.clone(), i as u32);
        }
        Enum { values, index }
    }
}

/// Parses a canonical integer.
pub fn parse_int(v: &[u8]) -> Option<i64> {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    if digits.is_empty() || digits.len() > MAX_DIGITS || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits[0] == b'0' && (digits.len() > 1 || digits.len() < v.len()) {
        return None; // leading zero, or "-0"
    }
    // At most 18 digits: no overflow.
    let n = digits.iter().fold(0i64, |n, &d| n * 10 + (d - b'0') as i64);
    Some(if digits.len() < v.len() { -n } else { n })
}

/// Parses `-?int.frac` into (mantissa, decimals), only if it renders back identically.
pub fn parse_decimal(v: &[u8]) -> Option<(i64, u8)> {
    let neg = v.first() == Some(&b'-');
    let body = if neg { &v[1..] } else { v };
    let dot = body.iter().position(|&b| b == b'.')?;
    let (int, frac) = (&body[..dot], &body[dot + 1..]);
    if int.is_empty() || frac.is_empty() || frac.len() > 15 || int.len() + frac.len() > MAX_DIGITS {
        return None;
    }
    if !int.iter().chain(frac).all(u8::is_ascii_digit) || (int[0] == b'0' && int.len() > 1) {
        return None;
    }
    let mut m: i64 = 0;
    for &d in int.iter().chain(frac) {
        m = m * 10 + (d - b'0') as i64;
    }
    if neg && m == 0 {
        return None; // "-0.0" would lose its sign
    }
    Some((if neg { -m } else { m }, frac.len() as u8))
}

/// Renders a decimal mantissa with `decimals` fraction digits.
pub fn render_decimal(m: i64, decimals: u8, out: &mut Vec<u8>) {
    if m < 0 {
        out.push(b'-');
    }
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(m.unsigned_abs()).as_bytes();
    let d = decimals as usize;
    if digits.len() <= d {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', d - digits.len()));
        out.extend_from_slice(digits);
    } else {
        out.extend_from_slice(&digits[..digits.len() - d]);
        out.push(b'.');
        out.extend_from_slice(&digits[digits.len() - d..]);
    }
}

fn varint_size(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

impl FieldType {
    /// Chooses the type for a gap from the values it held in the sample: the one that would
    /// encode them smallest (text estimated at half its length, FSST's usual rate).
    pub fn learn(values: &[&[u8]]) -> FieldType {
        if values.is_empty() {
            return FieldType::Text;
        }
        let text_cost = |v: &[u8]| 1 + v.len().div_ceil(2);
        let total_text: usize = values.iter().map(|v| text_cost(v)).sum();
        let mut candidates: Vec<(usize, FieldType)> = vec![(total_text, FieldType::Text)];

        let ints = values.iter().filter(|v| parse_int(v).is_some()).count();
        if ints * 10 >= values.len() * 9 {
            let cost = values.iter().map(|v| parse_int(v).map(|n| varint_size(zigzag(n) + 1)).unwrap_or(1 + text_cost(v))).sum();
            candidates.push((cost, FieldType::Int));
        }
        let decs: Vec<Option<(i64, u8)>> = values.iter().map(|v| parse_decimal(v)).collect();
        if decs.iter().filter(|d| d.is_some()).count() * 10 >= values.len() * 9 {
            let mut freq = [0usize; 16];
            for (_, d) in decs.iter().flatten() {
                freq[*d as usize] += 1;
            }
            let decimals = (0..16).max_by_key(|&d| freq[d]).unwrap_or(0) as u8;
            let t = FieldType::Decimal { decimals };
            let cost = values.iter().map(|v| t.cost(v)).sum();
            candidates.push((cost, t));
        }
        let mut counts: HashMap<&[u8], usize, foldhash::fast::RandomState> = HashMap::default();
        for v in values {
            *counts.entry(v).or_default() += 1;
        }
        if counts.len() <= 60_000 && counts.len() * 2 <= values.len() + 1 {
            let mut byfreq: Vec<(&[u8], usize)> = counts.into_iter().collect();
            byfreq.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let t = FieldType::Enum(Enum::new(byfreq.into_iter().map(|(v, _)| v.to_vec()).collect()));
            let cost = values.iter().map(|v| t.cost(v)).sum();
            candidates.push((cost, t));
        }
        candidates.into_iter().min_by_key(|(c, _)| *c).map(|(_, t)| t).unwrap_or(FieldType::Text)
    }

    /// Estimated encoded bytes of one value.
    fn cost(&self, v: &[u8]) -> usize {
        let mut head = Vec::new();
        let mut text = Vec::new();
        self.encode(v, &mut head, &mut text);
        head.len() + text.len().div_ceil(2)
    }

    /// Encodes one value: varints into `head`, text bytes into `text`.
    pub fn encode(&self, v: &[u8], head: &mut Vec<u8>, text: &mut Vec<u8>) {
        match self {
            FieldType::Int => {
                if let Some(n) = parse_int(v) {
                    return put_varint(head, zigzag(n) + 1);
                }
            }
            FieldType::Decimal { decimals } => {
                if let Some((m, d)) = parse_decimal(v) {
                    let z = zigzag(m);
                    if z < u64::MAX >> 2 {
                        put_varint(head, ((z << 1) | (d != *decimals) as u64) + 1);
                        if d != *decimals {
                            head.push(d);
                        }
                        return;
                    }
                }
            }
            FieldType::Enum(e) => {
                if let Some(&i) = e.index.get(v) {
                    return put_varint(head, i as u64 + 1);
                }
            }
            FieldType::Text => {
                put_varint(head, v.len() as u64);
                text.extend_from_slice(v);
                return;
            }
        }
        // Escape: 0, then the value as text.
        head.push(0);
        put_varint(head, v.len() as u64);
        text.extend_from_slice(v);
    }

    /// Reads one value's head; returns how many residual bytes it takes (text) or renders the
    /// value into `out` when `out` is given.
    pub fn decode(&self, head: &mut Reader, text: &mut Reader, out: Option<&mut Vec<u8>>) -> Result<usize, CodecError> {
        let tag = if matches!(self, FieldType::Text) { None } else { Some(head.varint()?) };
        match (self, tag) {
            (FieldType::Text, _) | (_, Some(0)) => {
                let n = head.varint()? as usize;
                if let Some(out) = out {
                    out.extend_from_slice(text.take(n)?);
                }
                Ok(n)
            }
            (FieldType::Int, Some(t)) => {
                if let Some(out) = out {
                    out.extend_from_slice(itoa::Buffer::new().format(unzigzag(t - 1)).as_bytes());
                }
                Ok(0)
            }
            (FieldType::Decimal { decimals }, Some(t)) => {
                let t = t - 1;
                let d = if t & 1 == 1 { head.byte()? } else { *decimals };
                if d == 0 || d > 15 {
                    return Err(CodecError::Corrupt("decimal places outside 1..15"));
                }
                if let Some(out) = out {
                    render_decimal(unzigzag(t >> 1), d, out);
                }
                Ok(0)
            }
            (FieldType::Enum(e), Some(t)) => {
                let v = e.values.get(t as usize - 1).ok_or(CodecError::Corrupt("enum index beyond the dictionary"))?;
                if let Some(out) = out {
                    out.extend_from_slice(v);
                }
                Ok(0)
            }
            (_, None) => Err(CodecError::Corrupt("typed field without a tag")),
        }
    }

    pub fn serialize(&self, out: &mut Vec<u8>) {
        match self {
            FieldType::Int => out.push(0),
            FieldType::Decimal { decimals } => {
                out.push(1);
                out.push(*decimals);
            }
            FieldType::Enum(e) => {
                out.push(2);
                put_varint(out, e.values.len() as u64);
                for v in &e.values {
                    put_bytes(out, v);
                }
            }
            FieldType::Text => out.push(3),
        }
    }

    pub fn deserialize(r: &mut Reader) -> Result<FieldType, CodecError> {
        Ok(match r.byte()? {
            0 => FieldType::Int,
            1 => {
                let decimals = r.byte()?;
                if decimals > 15 {
                    return Err(CodecError::BadDictionary("decimal places beyond 15"));
                }
                FieldType::Decimal { decimals }
            }
            2 => {
                let n = r.varint()? as usize;
                if n > 1 << 20 {
                    return Err(CodecError::BadDictionary("enum too large"));
                }
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    values.push(r.bytes()?.to_vec());
                }
                FieldType::Enum(Enum::new(values))
            }
            3 => FieldType::Text,
            _ => return Err(CodecError::BadDictionary("unknown field type")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(t: &FieldType, v: &[u8]) {
        let (mut head, mut text) = (Vec::new(), Vec::new());
        t.encode(v, &mut head, &mut text);
        let mut out = Vec::new();
        t.decode(&mut Reader::new(&head), &mut Reader::new(&text), Some(&mut out)).unwrap();
        assert_eq!(out, v, "{t:?} {:?}", String::from_utf8_lossy(v));
    }

    #[test]
    fn numbers_parse_only_in_canonical_form() {
        assert_eq!(parse_int(b"0"), Some(0));
        assert_eq!(parse_int(b"-12"), Some(-12));
        for bad in [&b""[..], b"-", b"-0", b"007", b"1e3", b"12345678901234567890", b" 1"] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
        assert_eq!(parse_decimal(b"42.50729"), Some((4250729, 5)));
        assert_eq!(parse_decimal(b"-0.5"), Some((-5, 1)));
        for bad in [&b"1."[..], b".5", b"-0.0", b"01.5", b"1.2.3", b"1"] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_type_round_trips_including_escapes() {
        let e = FieldType::Enum(Enum::new(vec![b"Europe/Paris".to_vec(), b"".to_vec()]));
        let types = [FieldType::Int, FieldType::Decimal { decimals: 5 }, e, FieldType::Text];
        for t in &types {
            for v in [&b""[..], b"0", b"-17", b"007", b"42.50729", b"-0.50", b"-0.0", b"1.5", b"Europe/Paris", "Zürich".as_bytes()] {
                round_trip(t, v);
            }
        }
    }

    #[test]
    fn learning_picks_the_compact_type() {
        let ids: Vec<Vec<u8>> = (0..100).map(|i| format!("{}", 3_000_000 + i * 17).into_bytes()).collect();
        let refs: Vec<&[u8]> = ids.iter().map(|v| &v[..]).collect();
        assert_eq!(FieldType::learn(&refs), FieldType::Int);
        let lat: Vec<Vec<u8>> = (0..100).map(|i| format!("{}.{:05}", i - 50, i * 37 % 100000).into_bytes()).collect();
        let refs: Vec<&[u8]> = lat.iter().map(|v| &v[..]).collect();
        assert_eq!(FieldType::learn(&refs), FieldType::Decimal { decimals: 5 });
        let tz: Vec<&[u8]> = (0..100).map(|i| if i % 3 == 0 { &b"Asia/Tokyo"[..] } else { b"Europe/Rome" }).collect();
        assert!(matches!(FieldType::learn(&tz), FieldType::Enum(_)));
        let names: Vec<Vec<u8>> = (0..100).map(|i| format!("name number {i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = names.iter().map(|v| &v[..]).collect();
        assert_eq!(FieldType::learn(&refs), FieldType::Text);
    }
}
