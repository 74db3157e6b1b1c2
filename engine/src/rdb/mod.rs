//! Redis's RDB object codec: the encoding of one value (type byte, then the value) shared by
//! DUMP/RESTORE payloads (`command::dump`), RDB files (`snapshot`), the PMem tier's frozen
//! collections and the storage tier's records.
//!
//! It writes the plain object types (string, list, set, hash, zset2, stream), which every
//! Redis since 4.0 can RESTORE, and reads those plus integer- and LZF-encoded strings and
//! Redis's compact encodings (listpack, quicklist, ziplist, intset: `compact`), so what Redis
//! DUMPs restores here too. Streams are in `stream`.
//!
//! Written by hand: no maintained crate reads and writes Redis's object encodings.

pub mod compact;
pub mod stream;

use std::collections::VecDeque;

use crate::keyspace::value::{Bytes, BytesMap, Collection, ValueRef, ZSet};
use terrace_commands::numbers::parse_f64;

/// Why an RDB object could not be read. The texts are the errors RESTORE answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RdbError {
    /// Truncated, malformed or inconsistent data.
    #[error("ERR Bad data format")]
    BadFormat,
    #[error("ERR unsupported RDB object type {0}")]
    UnsupportedType(u8),
    /// A DUMP payload from a newer RDB version, or whose checksum does not match.
    #[error("ERR DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
}

pub const RDB_VERSION: u16 = 10;
const T_STRING: u8 = 0;
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_HASH: u8 = 4;
const T_ZSET2: u8 = 5;
// Read-only: the old string-scored zset and Redis's compact encodings.
const T_ZSET: u8 = 3;
const T_LIST_ZIPLIST: u8 = 10;
const T_SET_INTSET: u8 = 11;
const T_ZSET_ZIPLIST: u8 = 12;
const T_HASH_ZIPLIST: u8 = 13;
const T_LIST_QUICKLIST: u8 = 14;
const T_HASH_LISTPACK: u8 = 16;
const T_ZSET_LISTPACK: u8 = 17;
const T_LIST_QUICKLIST_2: u8 = 18;
const T_SET_LISTPACK: u8 = 20;

/// Whether `t` is an object type this module reads.
pub fn readable_type(t: u8) -> bool {
    matches!(
        t,
        T_STRING
            | T_LIST
            | T_SET
            | T_ZSET
            | T_HASH
            | T_ZSET2
            | T_LIST_ZIPLIST
            | T_SET_INTSET
            | T_ZSET_ZIPLIST
            | T_HASH_ZIPLIST
            | T_LIST_QUICKLIST
            | T_HASH_LISTPACK
            | T_ZSET_LISTPACK
            | T_LIST_QUICKLIST_2
            | T_SET_LISTPACK
            | stream::T_STREAM_LISTPACKS
            | stream::T_STREAM_LISTPACKS_2
            | stream::T_STREAM_LISTPACKS_3
    )
}

/// CRC-64/Jones (reflected, poly 0xad93d23594c935a9), as Redis's crc64.c.
pub fn crc64(data: &[u8]) -> u64 {
    crc64_update(0, data)
}

/// `crc64` resumed from a previous value, for data written in pieces (RDB files).
pub fn crc64_update(mut crc: u64, data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 bit-reversed
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLY } else { crc >> 1 };
        }
    }
    crc
}

pub fn put_len(out: &mut Vec<u8>, n: usize) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as usize {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(n as u64).to_be_bytes());
    }
}

pub fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len());
    out.extend_from_slice(s);
}

/// Writes a value as an RDB object: its type byte, then `key` if given (RDB files put the key
/// between type and value; DUMP payloads have none), then the value.
pub fn encode_object(value: ValueRef, key: Option<&[u8]>, out: &mut Vec<u8>) {
    if let ValueRef::Frozen(_, frozen) = value {
        // Already an RDB object (type byte, then the value): the key goes between.
        out.push(frozen[0]);
        if let Some(k) = key {
            put_str(out, k);
        }
        out.extend_from_slice(&frozen[1..]);
        return;
    }
    let t = match value {
        ValueRef::Str(_) => T_STRING,
        ValueRef::Encoded(_) => unreachable!("compressed strings are decoded before they are serialized"),
        ValueRef::Coll(Collection::List(_)) => T_LIST,
        ValueRef::Coll(Collection::Set(_)) => T_SET,
        ValueRef::Coll(Collection::Hash(_)) => T_HASH,
        ValueRef::Coll(Collection::ZSet(_)) => T_ZSET2,
        ValueRef::Coll(Collection::Stream(_)) => stream::T_STREAM_LISTPACKS_2,
        ValueRef::Frozen(..) => unreachable!("written above"),
    };
    out.push(t);
    if let Some(k) = key {
        put_str(out, k);
    }
    match value {
        ValueRef::Str(v) => put_str(out, v),
        ValueRef::Encoded(_) => unreachable!("compressed strings are decoded before they are serialized"),
        ValueRef::Coll(Collection::List(l)) => {
            put_len(out, l.len());
            for v in l {
                put_str(out, v);
            }
        }
        ValueRef::Coll(Collection::Set(s)) => {
            put_len(out, s.len());
            for (m, _) in s.iter() {
                put_str(out, m);
            }
        }
        ValueRef::Coll(Collection::Hash(h)) => {
            put_len(out, h.len());
            for (f, v) in h.iter() {
                put_str(out, f);
                put_str(out, v);
            }
        }
        ValueRef::Coll(Collection::ZSet(z)) => {
            put_len(out, z.len());
            for e in z.tree.iter() {
                put_str(out, &e.member);
                out.extend_from_slice(&e.score.to_le_bytes());
            }
        }
        ValueRef::Coll(Collection::Stream(s)) => stream::write(out, s),
        ValueRef::Frozen(..) => unreachable!("written above"),
    }
}

/// Serializes a value (a compressed string decoded first) as a DUMP payload.
pub fn dump_value(value: ValueRef) -> Vec<u8> {
    let mut out = Vec::new();
    encode_object(value, None, &mut out);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn bad_payload() -> RdbError {
    RdbError::BadFormat
}

pub struct Reader<'a> {
    pub b: &'a [u8],
    pub pos: usize,
}

/// A decoded length or a special string encoding.
enum Len {
    Plain(usize),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Reader { b, pos: 0 }
    }
    pub fn byte(&mut self) -> Result<u8, RdbError> {
        let v = *self.b.get(self.pos).ok_or_else(bad_payload)?;
        self.pos += 1;
        Ok(v)
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(bad_payload)?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn len_or_enc(&mut self) -> Result<Len, RdbError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Len::Plain((first & 0x3F) as usize),
            1 => Len::Plain((((first & 0x3F) as usize) << 8) | self.byte()? as usize),
            2 if first == 0x80 => Len::Plain(u32::from_be_bytes(self.take(4)?.try_into().unwrap()) as usize),
            2 if first == 0x81 => Len::Plain(u64::from_be_bytes(self.take(8)?.try_into().unwrap()) as usize),
            3 => Len::Encoded(first & 0x3F),
            _ => return Err(bad_payload()),
        })
    }
    /// Reads a length (a special string encoding there is bad data).
    pub fn length(&mut self) -> Result<usize, RdbError> {
        match self.len_or_enc()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(bad_payload()),
        }
    }
    pub fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.len_or_enc()? {
            Len::Plain(n) => Ok(self.take(n)?.to_vec()),
            Len::Encoded(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Len::Encoded(1) => Ok(i16::from_le_bytes(self.take(2)?.try_into().unwrap()).to_string().into_bytes()),
            Len::Encoded(2) => Ok(i32::from_le_bytes(self.take(4)?.try_into().unwrap()).to_string().into_bytes()),
            Len::Encoded(3) => {
                let clen = self.length()?;
                let ulen = self.length()?;
                lzf_decompress(self.take(clen)?, ulen)
            }
            Len::Encoded(_) => Err(bad_payload()),
        }
    }
}

/// LZF decompression (the format of liblzf, which Redis uses for RDB strings).
fn lzf_decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, RdbError> {
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(i..i + n).ok_or_else(bad_payload)?;
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i).ok_or_else(bad_payload)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1F) << 8) + *input.get(i).ok_or_else(bad_payload)? as usize + 1;
            i += 1;
            if back > out.len() {
                return Err(bad_payload());
            }
            let start = out.len() - back;
            for k in 0..len + 2 {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > out_len {
            return Err(bad_payload());
        }
    }
    if out.len() != out_len {
        return Err(bad_payload());
    }
    Ok(out)
}

/// A decoded RDB object.
pub enum Restored {
    Str(Vec<u8>),
    Coll(Collection),
}

/// Reads an RDB object's value of type `t` (the type byte already read).
pub fn decode_value(r: &mut Reader, t: u8) -> Result<Restored, RdbError> {
    Ok(match t {
        T_STRING => Restored::Str(r.string()?),
        T_LIST => {
            let n = r.length()?;
            let mut l = VecDeque::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                l.push_back(r.string()?.into_boxed_slice());
            }
            Restored::Coll(Collection::List(l))
        }
        T_SET => {
            let n = r.length()?;
            let mut s = BytesMap::new();
            for _ in 0..n {
                s.insert(&r.string()?, ());
            }
            Restored::Coll(Collection::Set(s))
        }
        T_HASH => {
            let n = r.length()?;
            let mut h: BytesMap<Bytes> = BytesMap::new();
            for _ in 0..n {
                let f = r.string()?;
                let v = r.string()?;
                h.insert(&f, v.into_boxed_slice());
            }
            Restored::Coll(Collection::Hash(h))
        }
        T_ZSET2 => {
            let n = r.length()?;
            let mut z = ZSet::default();
            for _ in 0..n {
                let m = r.string()?;
                let s = f64::from_le_bytes(r.take(8)?.try_into().unwrap());
                if s.is_nan() {
                    return Err(bad_payload());
                }
                z.insert(&m, s);
            }
            Restored::Coll(Collection::ZSet(z))
        }
        T_ZSET => {
            let n = r.length()?;
            let mut z = ZSet::default();
            for _ in 0..n {
                let m = r.string()?;
                let score = match r.byte()? {
                    253 => return Err(bad_payload()),
                    254 => f64::INFINITY,
                    255 => f64::NEG_INFINITY,
                    len => parse_f64(r.take(len as usize)?).ok_or_else(bad_payload)?,
                };
                z.insert(&m, score);
            }
            Restored::Coll(Collection::ZSet(z))
        }
        T_LIST_ZIPLIST | T_LIST_QUICKLIST | T_LIST_QUICKLIST_2 => {
            let mut l: VecDeque<Bytes> = VecDeque::new();
            let mut push = |items: Vec<Vec<u8>>| l.extend(items.into_iter().map(Vec::into_boxed_slice));
            match t {
                T_LIST_ZIPLIST => push(compact::ziplist(&r.string()?).map_err(|_| bad_payload())?),
                T_LIST_QUICKLIST => {
                    for _ in 0..r.length()? {
                        push(compact::ziplist(&r.string()?).map_err(|_| bad_payload())?);
                    }
                }
                _ => {
                    for _ in 0..r.length()? {
                        // Container 1 holds one plain element, 2 a listpack.
                        match r.length()? {
                            1 => push(vec![r.string()?]),
                            2 => push(compact::listpack(&r.string()?).map_err(|_| bad_payload())?),
                            _ => return Err(bad_payload()),
                        }
                    }
                }
            }
            Restored::Coll(Collection::List(l))
        }
        T_SET_INTSET | T_SET_LISTPACK => {
            let blob = r.string()?;
            let items = if t == T_SET_INTSET { compact::intset(&blob) } else { compact::listpack(&blob) }.map_err(|_| bad_payload())?;
            let mut s = BytesMap::new();
            for m in items {
                s.insert(&m, ());
            }
            Restored::Coll(Collection::Set(s))
        }
        T_HASH_ZIPLIST | T_HASH_LISTPACK | T_ZSET_ZIPLIST | T_ZSET_LISTPACK => {
            let blob = r.string()?;
            let items =
                if matches!(t, T_HASH_ZIPLIST | T_ZSET_ZIPLIST) { compact::ziplist(&blob) } else { compact::listpack(&blob) }.map_err(|_| bad_payload())?;
            if items.len() % 2 != 0 {
                return Err(bad_payload());
            }
            let mut pairs = items.into_iter();
            if matches!(t, T_HASH_ZIPLIST | T_HASH_LISTPACK) {
                let mut h: BytesMap<Bytes> = BytesMap::new();
                while let (Some(f), Some(v)) = (pairs.next(), pairs.next()) {
                    h.insert(&f, v.into_boxed_slice());
                }
                Restored::Coll(Collection::Hash(h))
            } else {
                let mut z = ZSet::default();
                while let (Some(m), Some(s)) = (pairs.next(), pairs.next()) {
                    let score = parse_f64(&s).filter(|s| !s.is_nan()).ok_or_else(bad_payload)?;
                    z.insert(&m, score);
                }
                Restored::Coll(Collection::ZSet(z))
            }
        }
        stream::T_STREAM_LISTPACKS | stream::T_STREAM_LISTPACKS_2 | stream::T_STREAM_LISTPACKS_3 => {
            Restored::Coll(Collection::Stream(Box::new(stream::read(r, t)?)))
        }
        _ => return Err(RdbError::UnsupportedType(t)),
    })
}

/// Reads a DUMP payload: one object, the RDB version it was written with (not newer than
/// ours) and its CRC64.
pub fn parse_payload(p: &[u8]) -> Result<Restored, RdbError> {
    let wrong = || RdbError::VersionOrChecksum;
    if p.len() < 10 {
        return Err(wrong());
    }
    let (body, footer) = p.split_at(p.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().unwrap());
    if version > RDB_VERSION || crc64(&p[..p.len() - 8]) != crc {
        return Err(wrong());
    }
    let mut r = Reader { b: body, pos: 0 };
    let t = r.byte()?;
    let v = match t {
        t if readable_type(t) => decode_value(&mut r, t)?,
        _ => return Err(wrong()),
    };
    if r.pos != body.len() {
        return Err(bad_payload());
    }
    if let Restored::Coll(c) = &v {
        if c.is_empty() {
            return Err(bad_payload());
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis() {
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn lzf_literals_and_backrefs() {
        // "aaaaaaaaaa": literal 'a', then a back-reference of length 9 at distance 1.
        let c = [0x00, b'a', 0xE0, 0x00, 0x00];
        assert_eq!(lzf_decompress(&c, 10).unwrap(), b"aaaaaaaaaa".to_vec());
        assert!(lzf_decompress(&[0x05, b'a'], 6).is_err());
    }

    #[test]
    fn payloads_roundtrip() {
        let mut z = ZSet::default();
        z.insert(b"m", 1.5);
        match parse_payload(&dump_value(ValueRef::Coll(&Collection::ZSet(z)))).unwrap() {
            Restored::Coll(Collection::ZSet(z)) => assert_eq!(z.score(b"m"), Some(1.5)),
            _ => panic!("wrong type"),
        }
        let mut p = dump_value(ValueRef::Str(b"v"));
        let last = p.len() - 1;
        p[last] ^= 1;
        assert_eq!(parse_payload(&p).err(), Some(RdbError::VersionOrChecksum));
        assert_eq!(parse_payload(&[0xF0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).err(), Some(RdbError::VersionOrChecksum));
    }
}
