//! Streams in RDB objects (`RDB_TYPE_STREAM_LISTPACKS_2`, Redis 7.0's; also reads the 6.x and
//! 7.2 variants): entries as listpack nodes keyed by their master ID, the stream's IDs and
//! counters, and every consumer group with its pending entries and consumers.
//!
//! Hand-written like the other RDB encodings: the format is Redis's own (rdb.c, t_stream.c)
//! and no crate implements it.

use std::collections::{BTreeMap, BTreeSet};

use super::{compact, put_len, put_str, RdbError, Reader};
use crate::keyspace::stream::{Consumer, Group, Pending, Stream, StreamId, INVALID_ENTRIES_READ};
use crate::keyspace::value::Bytes;

pub const T_STREAM_LISTPACKS: u8 = 15;
pub const T_STREAM_LISTPACKS_2: u8 = 19;
pub const T_STREAM_LISTPACKS_3: u8 = 21;

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

fn bad() -> RdbError {
    RdbError::BadFormat
}

/// Appends one listpack element holding an integer.
fn lp_int(out: &mut Vec<u8>, v: i64) {
    let start = out.len();
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = (v as u16) & 0x1FFF;
        out.push(0xC0 | (u >> 8) as u8);
        out.push(u as u8);
    } else if i16::try_from(v).is_ok() {
        out.push(0xF1);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        out.push(0xF2);
        out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if i32::try_from(v).is_ok() {
        out.push(0xF3);
        out.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        out.push(0xF4);
        out.extend_from_slice(&v.to_le_bytes());
    }
    lp_backlen(out, out.len() - start);
}

/// Appends one listpack element holding a string.
fn lp_str(out: &mut Vec<u8>, s: &[u8]) {
    let start = out.len();
    if s.len() < 64 {
        out.push(0x80 | s.len() as u8);
    } else if s.len() < 4096 {
        out.push(0xE0 | (s.len() >> 8) as u8);
        out.push(s.len() as u8);
    } else {
        out.push(0xF0);
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(s);
    lp_backlen(out, out.len() - start);
}

/// The element's length, written backwards-readable (7 bits per byte), as listpack.c does.
fn lp_backlen(out: &mut Vec<u8>, l: usize) {
    let l = l as u64;
    if l <= 127 {
        out.push(l as u8);
    } else if l < 16383 {
        out.extend_from_slice(&[(l >> 7) as u8, ((l & 127) | 128) as u8]);
    } else if l < 2097151 {
        out.extend_from_slice(&[(l >> 14) as u8, (((l >> 7) & 127) | 128) as u8, ((l & 127) | 128) as u8]);
    } else if l < 268435455 {
        out.extend_from_slice(&[(l >> 21) as u8, (((l >> 14) & 127) | 128) as u8, (((l >> 7) & 127) | 128) as u8, ((l & 127) | 128) as u8]);
    } else {
        out.extend_from_slice(&[
            (l >> 28) as u8,
            (((l >> 21) & 127) | 128) as u8,
            (((l >> 14) & 127) | 128) as u8,
            (((l >> 7) & 127) | 128) as u8,
            ((l & 127) | 128) as u8,
        ]);
    }
}

/// Wraps elements into a listpack (header, elements, terminator).
fn listpack(body: Vec<u8>, count: usize) -> Vec<u8> {
    let mut lp = ((body.len() + 7) as u32).to_le_bytes().to_vec();
    lp.extend_from_slice(&(count.min(65535) as u16).to_le_bytes());
    lp.extend_from_slice(&body);
    lp.push(0xFF);
    lp
}

fn id_key(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

/// One node: master entry (live count, deleted count, master fields, 0), then each entry
/// (flags, ID deltas from the master, fields unless the same as the master's, values,
/// element count).
fn node_listpack(master: StreamId, entries: &[(StreamId, &[Bytes])]) -> Vec<u8> {
    let master_fields: Vec<&[u8]> = entries[0].1.iter().step_by(2).map(|f| &**f).collect();
    let mut body = Vec::new();
    let mut n = 0;
    let mut el = |body: &mut Vec<u8>, f: &dyn Fn(&mut Vec<u8>)| {
        f(body);
        n += 1;
    };
    el(&mut body, &|b| lp_int(b, entries.len() as i64));
    el(&mut body, &|b| lp_int(b, 0));
    el(&mut body, &|b| lp_int(b, master_fields.len() as i64));
    for f in &master_fields {
        el(&mut body, &|b| lp_str(b, f));
    }
    el(&mut body, &|b| lp_int(b, 0));
    for (id, fields) in entries {
        let same = fields.len() / 2 == master_fields.len() && fields.iter().step_by(2).zip(&master_fields).all(|(a, b)| &**a == *b);
        el(&mut body, &|b| lp_int(b, if same { FLAG_SAMEFIELDS } else { 0 }));
        el(&mut body, &|b| lp_int(b, id.ms.wrapping_sub(master.ms) as i64));
        el(&mut body, &|b| lp_int(b, id.seq.wrapping_sub(master.seq) as i64));
        let pairs = fields.len() / 2;
        if same {
            for v in fields.iter().skip(1).step_by(2) {
                el(&mut body, &|b| lp_str(b, v));
            }
            el(&mut body, &|b| lp_int(b, pairs as i64 + 3));
        } else {
            el(&mut body, &|b| lp_int(b, pairs as i64));
            for x in fields.iter() {
                el(&mut body, &|b| lp_str(b, x));
            }
            el(&mut body, &|b| lp_int(b, 2 * pairs as i64 + 4));
        }
    }
    listpack(body, n)
}

/// Writes a stream's RDB body (after the type byte and key).
pub(crate) fn write(out: &mut Vec<u8>, s: &Stream) {
    let nodes = s.nodes_with_entries();
    put_len(out, nodes.len());
    for (master, entries) in &nodes {
        put_str(out, &id_key(*master));
        put_str(out, &node_listpack(*master, entries));
    }
    put_len(out, s.len());
    for id in [s.last_id, s.first_id, s.max_deleted] {
        put_len(out, id.ms as usize);
        put_len(out, id.seq as usize);
    }
    put_len(out, s.entries_added as usize);
    put_len(out, s.groups.len());
    for (name, g) in &s.groups {
        put_str(out, name);
        put_len(out, g.last_id.ms as usize);
        put_len(out, g.last_id.seq as usize);
        put_len(out, g.entries_read as u64 as usize);
        put_len(out, g.pel.len());
        for (id, p) in &g.pel {
            out.extend_from_slice(&id_key(*id));
            out.extend_from_slice(&p.delivery_time.to_le_bytes());
            put_len(out, p.delivery_count as usize);
        }
        put_len(out, g.consumers.len());
        for (cname, c) in &g.consumers {
            put_str(out, cname);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            put_len(out, c.pel.len());
            for id in &c.pel {
                out.extend_from_slice(&id_key(*id));
            }
        }
    }
}

fn read_id_key(b: &[u8]) -> Result<StreamId, RdbError> {
    if b.len() != 16 {
        return Err(bad());
    }
    Ok(StreamId::new(u64::from_be_bytes(b[..8].try_into().unwrap()), u64::from_be_bytes(b[8..].try_into().unwrap())))
}

fn read_id(r: &mut Reader) -> Result<StreamId, RdbError> {
    Ok(StreamId::new(r.length()? as u64, r.length()? as u64))
}

fn num(e: &[u8]) -> Result<i64, RdbError> {
    std::str::from_utf8(e).ok().and_then(|s| s.parse().ok()).ok_or_else(bad)
}

/// Reads a stream's RDB body of type `t` (15, 19 or 21).
pub(crate) fn read(r: &mut Reader, t: u8) -> Result<Stream, RdbError> {
    let mut s = Stream::default();
    for _ in 0..r.length()? {
        let master = read_id_key(&r.string()?)?;
        let els = compact::listpack(&r.string()?).map_err(|_| bad())?;
        let mut it = els.iter();
        let mut next = || it.next().ok_or_else(bad);
        let count = num(next()?)?;
        let deleted = num(next()?)?;
        let nfields = num(next()?)? as usize;
        let mut master_fields = Vec::with_capacity(nfields);
        for _ in 0..nfields {
            master_fields.push(next()?.clone());
        }
        next()?; // master entry terminator
        for _ in 0..count + deleted {
            let flags = num(next()?)?;
            let ms = master.ms.wrapping_add(num(next()?)? as u64);
            let seq = master.seq.wrapping_add(num(next()?)? as u64);
            let mut fields: Vec<Bytes> = Vec::new();
            if flags & FLAG_SAMEFIELDS != 0 {
                for f in &master_fields {
                    fields.push(f.clone().into_boxed_slice());
                    fields.push(next()?.clone().into_boxed_slice());
                }
            } else {
                let n = num(next()?)? as usize;
                for _ in 0..2 * n {
                    fields.push(next()?.clone().into_boxed_slice());
                }
            }
            next()?; // element count
            if flags & FLAG_DELETED == 0 {
                s.append(fields.into_boxed_slice(), Some((StreamId::new(ms, seq), true)), 0).map_err(|_| bad())?;
            }
        }
    }
    let _length = r.length()?;
    s.last_id = read_id(r)?;
    if t != T_STREAM_LISTPACKS {
        s.first_id = read_id(r)?;
        s.max_deleted = read_id(r)?;
        s.entries_added = r.length()? as u64;
    } else {
        s.first_id = s.first_entry().map(|(id, _)| *id).unwrap_or_default();
        s.entries_added = s.len() as u64;
    }
    for _ in 0..r.length()? {
        let name = r.string()?;
        let last_id = read_id(r)?;
        let entries_read = if t != T_STREAM_LISTPACKS { r.length()? as u64 as i64 } else { INVALID_ENTRIES_READ };
        let mut g = Group::new(last_id, entries_read);
        let mut nacks: BTreeMap<StreamId, (i64, u64)> = BTreeMap::new();
        for _ in 0..r.length()? {
            let id = read_id_key(r.take(16)?)?;
            let time = i64::from_le_bytes(r.take(8)?.try_into().unwrap());
            nacks.insert(id, (time, r.length()? as u64));
        }
        for _ in 0..r.length()? {
            let cname = r.string()?;
            let seen_time = i64::from_le_bytes(r.take(8)?.try_into().unwrap());
            if t == T_STREAM_LISTPACKS_3 {
                r.take(8)?; // active time
            }
            let mut pel = BTreeSet::new();
            for _ in 0..r.length()? {
                let id = read_id_key(r.take(16)?)?;
                let (time, count) = nacks.get(&id).copied().ok_or_else(bad)?;
                g.pel.insert(id, Pending { consumer: cname.clone().into_boxed_slice(), delivery_time: time, delivery_count: count });
                pel.insert(id);
            }
            g.consumers.insert(cname.into_boxed_slice(), Consumer { seen_time, pel });
        }
        s.groups.insert(name.into_boxed_slice(), g);
    }
    Ok(s)
}
