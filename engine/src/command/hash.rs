//! Hash commands.

use super::args::{err, float, int, CmdError};
use super::keys::ScanOpts;
use super::{CmdResult, Ctx, Data};
use crate::keyspace::value::{Bytes, BytesMap};
use crate::keyspace::{Collection, Kind};
use crate::protocol::{format_double, parse_i64, ReplyWriter};

fn new_hash() -> Collection {
    Collection::Hash(BytesMap::new())
}

fn as_hash(c: &mut Collection) -> &mut BytesMap<Bytes> {
    match c {
        Collection::Hash(h) => h,
        _ => unreachable!("kind checked by Data::coll"),
    }
}

fn hash<'a>(data: &'a mut Data, key: &[u8]) -> Result<Option<&'a mut BytesMap<Bytes>>, CmdError> {
    Ok(data.coll(key, Kind::Hash)?.map(as_hash))
}

fn hset_generic(ctx: &mut Ctx, argv: &[&[u8]], reply_ok: bool) -> CmdResult {
    if !argv.len().is_multiple_of(2) {
        return Err(CmdError::WrongArgs(ctx.spec.name));
    }
    let key = argv[1];
    let h = as_hash(ctx.data.coll_or_create(key, Kind::Hash, new_hash)?);
    let mut added = 0;
    for fv in argv[2..].chunks(2) {
        if h.insert(fv[0], fv[1].into()).is_none() {
            added += 1;
        }
    }
    ctx.data.modified(key);
    if reply_ok {
        ctx.out.ok()
    } else {
        ctx.out.int(added)
    }
    Ok(())
}

pub fn hset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    hset_generic(ctx, argv, false)
}
pub fn hmset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    hset_generic(ctx, argv, true)
}

pub fn hsetnx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let h = as_hash(ctx.data.coll_or_create(key, Kind::Hash, new_hash)?);
    let added = if h.contains(argv[2]) {
        false
    } else {
        h.insert(argv[2], argv[3].into());
        true
    };
    ctx.data.modified(key);
    ctx.out.int(added as i64);
    Ok(())
}

pub fn hget(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match hash(&mut ctx.data, argv[1])?.and_then(|h| h.get(argv[2])) {
        Some(v) => ctx.out.bulk(v),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn hmget(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let h = hash(&mut ctx.data, argv[1])?;
    ctx.out.array_len(argv.len() - 2);
    for f in &argv[2..] {
        match h.as_ref().and_then(|h| h.get(f)) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

pub fn hdel(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(h) = hash(&mut ctx.data, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let n = argv[2..].iter().filter(|f| h.remove(f).is_some()).count();
    if n > 0 {
        ctx.data.modified(key);
    }
    ctx.out.int(n as i64);
    Ok(())
}

pub fn hexists(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let b = hash(&mut ctx.data, argv[1])?.map(|h| h.contains(argv[2])).unwrap_or(false);
    ctx.out.int(b as i64);
    Ok(())
}

pub fn hlen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = hash(&mut ctx.data, argv[1])?.map(|h| h.len()).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn hstrlen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = hash(&mut ctx.data, argv[1])?.and_then(|h| h.get(argv[2]).map(|v| v.len())).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

fn hgetall_generic(ctx: &mut Ctx, key: &[u8], fields: bool, values: bool) -> CmdResult {
    let Some(h) = hash(&mut ctx.data, key)? else {
        if fields && values {
            ctx.out.map_len(0)
        } else {
            ctx.out.array_len(0)
        }
        return Ok(());
    };
    if fields && values {
        ctx.out.map_len(h.len());
    } else {
        ctx.out.array_len(h.len());
    }
    for (f, v) in h.iter() {
        if fields {
            ctx.out.bulk(f);
        }
        if values {
            ctx.out.bulk(v);
        }
    }
    Ok(())
}

pub fn hkeys(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    hgetall_generic(ctx, argv[1], true, false)
}
pub fn hvals(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    hgetall_generic(ctx, argv[1], false, true)
}
pub fn hgetall(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    hgetall_generic(ctx, argv[1], true, true)
}

pub fn hincrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = int(argv[3])?;
    let key = argv[1];
    let h = as_hash(ctx.data.coll_or_create(key, Kind::Hash, new_hash)?);
    let cur = match h.get(argv[2]) {
        Some(v) => parse_i64(v).ok_or_else(|| err("ERR hash value is not an integer")),
        None => Ok(0),
    };
    let n = cur.and_then(|c| c.checked_add(by).ok_or(CmdError::Overflow));
    if let Ok(n) = n {
        h.insert(argv[2], itoa::Buffer::new().format(n).as_bytes().into());
    }
    ctx.data.modified(key);
    ctx.out.int(n?);
    Ok(())
}

pub fn hincrbyfloat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = float(argv[3])?;
    if !by.is_finite() {
        // Refused before the key is created, as Redis does.
        return Err(err("ERR value is NaN or Infinity"));
    }
    let key = argv[1];
    let h = as_hash(ctx.data.coll_or_create(key, Kind::Hash, new_hash)?);
    let cur = match h.get(argv[2]) {
        Some(v) => super::args::parse_f64(v).ok_or_else(|| err("ERR hash value is not a float")),
        None => Ok(0.0),
    };
    let n = cur.and_then(|c| {
        let n = c + by;
        if n.is_finite() {
            Ok(n)
        } else {
            Err(err("ERR increment would produce NaN or Infinity"))
        }
    });
    let s = n.map(format_double);
    if let Ok(s) = &s {
        h.insert(argv[2], s.as_bytes().into());
    }
    ctx.data.modified(key);
    ctx.out.bulk(s?.as_bytes());
    Ok(())
}

/// The most elements a negative count (picks that may repeat) asks SRANDMEMBER, HRANDFIELD
/// or ZRANDMEMBER for. Redis takes any count and stops at the output buffer's limit; here the
/// work a client chooses is bounded up front, so that one call cannot hold the other clients
/// of its reactor (other tenants') for seconds — at this bound it is tens of milliseconds.
pub const MAX_REPEATED_PICKS: u64 = 1_000_000;

/// A random-element command's optional count, checked: Redis's range, and a negative count
/// asks for at most `MAX_REPEATED_PICKS` elements.
pub fn random_count(arg: Option<&&[u8]>) -> Result<Option<i64>, CmdError> {
    let Some(c) = arg.map(|a| int(a)).transpose()? else { return Ok(None) };
    if c < -(i64::MAX / 2) {
        return Err(err("ERR value is out of range"));
    }
    if c < 0 && c.unsigned_abs() > MAX_REPEATED_PICKS {
        return Err(err(format!("ERR value is out of range: a negative count asks for at most {MAX_REPEATED_PICKS} elements (call again for more)")));
    }
    Ok(Some(c))
}

/// RANDMEMBER/RANDFIELD with a count (`random_count`), each entry written as it is drawn:
/// positive → distinct, at most all; negative → `|count|` picks that may repeat — never
/// collected: the writing stops once the output passes `cap` (the client's output limit),
/// and the pipeline then closes the client. With values, entries are `[key, value]` pairs
/// in RESP3 and flat in RESP2.
pub fn write_random_entries<V>(out: &mut ReplyWriter, map: &BytesMap<V>, count: i64, cap: usize, with_values: bool, value: impl Fn(&mut ReplyWriter, &V)) {
    let n = if count < 0 { count.unsigned_abs() as usize } else { (count as usize).min(map.len()) };
    let pairs = with_values && out.resp3;
    out.array_len(if with_values && !pairs { n.saturating_mul(2) } else { n });
    let entry = |out: &mut ReplyWriter, k: &Bytes, v: &V| {
        if pairs {
            out.array_len(2);
        }
        out.bulk(k);
        if with_values {
            value(out, v);
        }
    };
    let draw = || map.random_bucket().and_then(|b| map.bucket(b)).expect("a non-empty collection has an occupied bucket");
    if count < 0 {
        for i in 0..n {
            if i % 1024 == 0 && out.buf.len() > cap {
                return;
            }
            let (k, v) = draw();
            entry(out, k, v);
        }
    } else if n == map.len() {
        for (k, v) in map.iter() {
            entry(out, k, v);
        }
    } else {
        let mut chosen: BytesMap<()> = BytesMap::new();
        while chosen.len() < n {
            let (k, v) = draw();
            if chosen.insert(k, ()).is_none() {
                entry(out, k, v);
            }
        }
    }
}

pub fn hrandfield(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let count = random_count(argv.get(2))?;
    let with_values = match argv.get(3) {
        None => false,
        Some(a) if super::args::is(a, "WITHVALUES") => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    if argv.len() > 4 {
        return Err(CmdError::Syntax);
    }
    let cap = ctx.srv.limits.hard(ctx.conn.info.class());
    let Some(h) = hash(&mut ctx.data, argv[1])? else {
        if count.is_some() {
            ctx.out.array_len(0)
        } else {
            ctx.out.null()
        }
        return Ok(());
    };
    match count {
        None => {
            let (f, _) = h.bucket(h.random_bucket().unwrap()).unwrap();
            let f = f.clone();
            ctx.out.bulk(&f);
        }
        Some(c) => write_random_entries(&mut ctx.out, h, c, cap, with_values, |out, v| out.bulk(v)),
    }
    Ok(())
}

/// One page of a collection scan. Small collections are returned whole with cursor 0, as
/// Redis does for its compact encodings.
pub fn scan_page<V>(map: &BytesMap<V>, cursor: usize, opts: &ScanOpts, mut emit: impl FnMut(&Bytes, &V)) -> usize {
    if map.len() <= 128 {
        for (k, v) in map.iter() {
            if opts.matches(k) {
                emit(k, v);
            }
        }
        return 0;
    }
    let n = map.num_buckets();
    let mut b = cursor;
    let mut seen = 0;
    while b < n {
        if let Some((k, v)) = map.bucket(b) {
            seen += 1;
            if opts.matches(k) {
                emit(k, v);
            }
        }
        b += 1;
        if seen >= opts.count {
            break;
        }
    }
    if b >= n {
        0
    } else {
        b
    }
}

/// Parses a collection SCAN cursor.
pub fn parse_cursor(arg: &[u8]) -> Result<usize, CmdError> {
    std::str::from_utf8(arg).ok().and_then(|s| s.parse::<u64>().ok()).map(|c| c as usize).ok_or_else(|| err("ERR invalid cursor"))
}

/// Writes `[cursor, [items...]]`.
pub fn write_scan(ctx: &mut Ctx, next: usize, items: &[Bytes]) {
    ctx.out.array_len(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array_len(items.len());
    for i in items {
        ctx.out.bulk(i);
    }
}

pub fn hscan(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let cursor = parse_cursor(argv[2])?;
    let opts = ScanOpts::parse(&argv[3..], false)?;
    let mut items = Vec::new();
    let next = match hash(&mut ctx.data, argv[1])? {
        Some(h) => scan_page(h, cursor, &opts, |k, v| {
            items.push(k.clone());
            items.push(v.clone());
        }),
        None => 0,
    };
    write_scan(ctx, next, &items);
    Ok(())
}
