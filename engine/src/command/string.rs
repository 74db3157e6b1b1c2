//! String commands, and TierBase's CAS/CAD extensions.

use std::borrow::Cow;

use super::args::{err, float, int, is, CmdError};
use super::{CmdResult, Ctx, Data};
use crate::protocol::{format_double, parse_i64};

pub const MAX_STRING: usize = 512 * 1024 * 1024;

/// Expiry options shared by SET, GETEX and CAS.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum ExpireOpt {
    None,
    At(i64),
    KeepTtl,
    Persist,
}

/// Parses `EX s | PX ms | EXAT ts | PXAT ts` at `argv[i]`; returns the absolute time.
fn expire_arg(ctx: &Ctx, argv: &[&[u8]], i: usize, cmd: &str) -> Result<i64, CmdError> {
    let opt = argv[i];
    let v = int(argv.get(i + 1).ok_or(CmdError::Syntax)?)?;
    let invalid = || err(format!("ERR invalid expire time in '{cmd}' command"));
    if v <= 0 {
        return Err(invalid());
    }
    let now = ctx.data.now;
    let at = if is(opt, "EX") {
        v.checked_mul(1000).and_then(|ms| ms.checked_add(now))
    } else if is(opt, "PX") {
        v.checked_add(now)
    } else if is(opt, "EXAT") {
        v.checked_mul(1000)
    } else {
        Some(v)
    };
    at.ok_or_else(invalid)
}

fn is_expire_kw(a: &[u8]) -> bool {
    is(a, "EX") || is(a, "PX") || is(a, "EXAT") || is(a, "PXAT")
}

/// The string value of a key: Ok(None) if missing, WRONGTYPE if not a string.
pub fn get_str<'a>(data: &'a mut Data, key: &[u8]) -> Result<Option<Cow<'a, [u8]>>, CmdError> {
    data.read_str(key)
}

pub fn get(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (ks, db) = (ctx.data.ks, ctx.data.db);
    match ctx.data.read(argv[1]) {
        None => ctx.out.null(),
        Some(e) => super::with_decoded(ks, db, e, |v| ctx.out.bulk(v))?,
    }
    Ok(())
}

pub fn set(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (key, val) = (argv[1], argv[2]);
    let (mut nx, mut xx, mut get, mut exp) = (false, false, false, ExpireOpt::None);
    let mut i = 3;
    while i < argv.len() {
        let a = argv[i];
        if is(a, "NX") && !xx {
            nx = true;
        } else if is(a, "XX") && !nx {
            xx = true;
        } else if is(a, "GET") {
            get = true;
        } else if is(a, "KEEPTTL") && exp == ExpireOpt::None {
            exp = ExpireOpt::KeepTtl;
        } else if is_expire_kw(a) && exp == ExpireOpt::None && i + 1 < argv.len() {
            exp = ExpireOpt::At(expire_arg(ctx, argv, i, "set")?);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let (ks, db) = (ctx.data.ks, ctx.data.db);
    let (old_exists, old_expire) = match ctx.data.get(key) {
        Some(e) => {
            if get {
                super::with_decoded(ks, db, e, |v| ctx.out.bulk(v))?;
            }
            (true, e.expire())
        }
        None => {
            if get {
                ctx.out.null();
            }
            (false, None)
        }
    };
    if (nx && old_exists) || (xx && !old_exists) {
        if !get {
            ctx.out.null();
        }
        return Ok(());
    }
    let expire = match exp {
        ExpireOpt::At(t) => Some(t),
        ExpireOpt::KeepTtl => old_expire,
        _ => None,
    };
    if matches!(expire, Some(t) if t < ctx.data.now) {
        ctx.data.delete(key);
    } else {
        ctx.data.set_str(key, val, expire);
    }
    if !get {
        ctx.out.ok();
    }
    Ok(())
}

pub fn setnx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.data.exists(argv[1]) {
        ctx.out.int(0);
    } else {
        ctx.data.set_str(argv[1], argv[2], None);
        ctx.out.int(1);
    }
    Ok(())
}

fn set_with_ttl(ctx: &mut Ctx, argv: &[&[u8]], unit_ms: i64, cmd: &str) -> CmdResult {
    let t = int(argv[2])?;
    let at = t.checked_mul(unit_ms).and_then(|ms| ms.checked_add(ctx.data.now));
    match at {
        Some(at) if t > 0 => {
            ctx.data.set_str(argv[1], argv[3], Some(at));
            ctx.out.ok();
            Ok(())
        }
        _ => Err(err(format!("ERR invalid expire time in '{cmd}' command"))),
    }
}

pub fn setex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_with_ttl(ctx, argv, 1000, "setex")
}

pub fn psetex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_with_ttl(ctx, argv, 1, "psetex")
}

pub fn mget(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ctx.out.array_len(argv.len() - 1);
    for key in &argv[1..] {
        let (ks, db) = (ctx.data.ks, ctx.data.db);
        // Missing keys and non-strings are nil; an undecodable value is an error element.
        let r = match ctx.data.read(key) {
            None => Err(CmdError::WrongType),
            Some(e) => super::with_decoded(ks, db, e, |v| ctx.out.bulk(v)),
        };
        match r {
            Ok(()) => {}
            Err(CmdError::Msg(m)) => ctx.out.error(&m),
            Err(_) => ctx.out.null(),
        }
    }
    Ok(())
}

pub fn mset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::WrongArgs(ctx.spec.name));
    }
    for kv in argv[1..].chunks(2) {
        ctx.data.set_str(kv[0], kv[1], None);
    }
    ctx.out.ok();
    Ok(())
}

pub fn msetnx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::WrongArgs(ctx.spec.name));
    }
    if argv[1..].chunks(2).any(|kv| ctx.data.exists(kv[0])) {
        ctx.out.int(0);
        return Ok(());
    }
    for kv in argv[1..].chunks(2) {
        ctx.data.set_str(kv[0], kv[1], None);
    }
    ctx.out.int(1);
    Ok(())
}

pub fn getset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match get_str(&mut ctx.data, argv[1])? {
        Some(v) => {
            let v = v.to_vec();
            ctx.out.bulk(&v);
        }
        None => ctx.out.null(),
    }
    ctx.data.set_str(argv[1], argv[2], None);
    Ok(())
}

pub fn getdel(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match get_str(&mut ctx.data, argv[1])? {
        Some(v) => {
            let v = v.to_vec();
            ctx.out.bulk(&v);
            ctx.data.delete(argv[1]);
        }
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn getex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut exp = ExpireOpt::None;
    let mut i = 2;
    while i < argv.len() {
        if is(argv[i], "PERSIST") && exp == ExpireOpt::None {
            exp = ExpireOpt::Persist;
        } else if is_expire_kw(argv[i]) && exp == ExpireOpt::None && i + 1 < argv.len() {
            exp = ExpireOpt::At(expire_arg(ctx, argv, i, "getex")?);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let key = argv[1];
    let Some(v) = get_str(&mut ctx.data, key)? else {
        ctx.out.null();
        return Ok(());
    };
    ctx.out.bulk(&v);
    match exp {
        ExpireOpt::At(t) if t < ctx.data.now => {
            ctx.data.delete(key);
        }
        ExpireOpt::At(t) => ctx.data.shard(key).set_expire(key, Some(t)),
        ExpireOpt::Persist if ctx.data.peek(key).and_then(|e| e.expire()).is_some() => {
            ctx.data.shard(key).set_expire(key, None);
        }
        _ => {}
    }
    Ok(())
}

/// Replaces a string's value keeping its TTL and flags (APPEND, SETRANGE, INCR…).
pub fn replace_value(ctx: &mut Ctx, key: &[u8], value: &[u8]) {
    let ver = ctx.data.ks.next_version();
    let (ks, db) = (ctx.data.ks, ctx.data.db);
    let new = match ctx.data.get(key) {
        Some(e) => {
            let mut meta = e.meta();
            meta.version = ver;
            ks.new_str_entry(db, key, value, &meta)
        }
        None => {
            ctx.data.set_str(key, value, None);
            return;
        }
    };
    ctx.data.insert(new);
}

pub fn append(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let new = match get_str(&mut ctx.data, key)? {
        Some(v) => {
            if v.len() + argv[2].len() > MAX_STRING {
                return Err(CmdError::TooBig);
            }
            let mut n = Vec::with_capacity(v.len() + argv[2].len());
            n.extend_from_slice(&v);
            n.extend_from_slice(argv[2]);
            n
        }
        None => argv[2].to_vec(),
    };
    replace_value(ctx, key, &new);
    ctx.out.int(new.len() as i64);
    Ok(())
}

pub fn strlen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = get_str(&mut ctx.data, argv[1])?.map(|v| v.len()).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

fn incr_by(ctx: &mut Ctx, key: &[u8], by: i64) -> CmdResult {
    ctx.data.ensure_plain(key)?;
    let mut b = itoa::Buffer::new();
    let n = match ctx.data.read(key) {
        None => {
            ctx.data.set_str(key, b.format(by).as_bytes(), None);
            by
        }
        Some(e) => {
            let v = e.str_value_mut().ok_or(CmdError::WrongType)?;
            let n = parse_i64(v).ok_or(CmdError::NotInteger)?.checked_add(by).ok_or(CmdError::Overflow)?;
            let digits = b.format(n).as_bytes();
            if digits.len() == v.len() {
                // Same width (the common case): rewrite the digits in place, no reallocation.
                v.copy_from_slice(digits);
                ctx.data.modified(key);
            } else {
                replace_value(ctx, key, digits);
            }
            n
        }
    };
    ctx.out.int(n);
    Ok(())
}

pub fn incr(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    incr_by(ctx, argv[1], 1)
}
pub fn decr(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    incr_by(ctx, argv[1], -1)
}
pub fn incrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = int(argv[2])?;
    incr_by(ctx, argv[1], by)
}
pub fn decrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = int(argv[2])?;
    if by == i64::MIN {
        return Err(err("ERR decrement would overflow"));
    }
    incr_by(ctx, argv[1], -by)
}

pub fn incrbyfloat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = float(argv[2])?;
    let key = argv[1];
    let cur = match get_str(&mut ctx.data, key)? {
        Some(v) => super::args::parse_f64(&v).ok_or(CmdError::NotFloat)?,
        None => 0.0,
    };
    let n = cur + by;
    if !n.is_finite() {
        return Err(err("ERR increment would produce NaN or Infinity"));
    }
    let s = format_double(n);
    replace_value(ctx, key, s.as_bytes());
    ctx.out.bulk(s.as_bytes());
    Ok(())
}

pub fn getrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (start, end) = (int(argv[2])?, int(argv[3])?);
    let v = get_str(&mut ctx.data, argv[1])?.unwrap_or_default();
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        ctx.out.bulk(b"");
        return Ok(());
    }
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    if s > e || len == 0 {
        ctx.out.bulk(b"");
    } else {
        let slice = v[s as usize..=e as usize].to_vec();
        ctx.out.bulk(&slice);
    }
    Ok(())
}

pub fn setrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let off = int(argv[2])?;
    if off < 0 {
        return Err(err("ERR offset is out of range"));
    }
    let off = off as usize;
    let val = argv[3];
    let key = argv[1];
    let cur = get_str(&mut ctx.data, key)?.map(|v| v.to_vec());
    if val.is_empty() {
        ctx.out.int(cur.map(|c| c.len()).unwrap_or(0) as i64);
        return Ok(());
    }
    if off + val.len() > MAX_STRING {
        return Err(CmdError::TooBig);
    }
    let mut buf = cur.unwrap_or_default();
    if buf.len() < off + val.len() {
        buf.resize(off + val.len(), 0);
    }
    buf[off..off + val.len()].copy_from_slice(val);
    replace_value(ctx, key, &buf);
    ctx.out.int(buf.len() as i64);
    Ok(())
}

pub fn lcs(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (mut want_len, mut want_idx, mut with_len, mut min_len) = (false, false, false, 0i64);
    let mut i = 3;
    while i < argv.len() {
        if is(argv[i], "LEN") {
            want_len = true;
        } else if is(argv[i], "IDX") {
            want_idx = true;
        } else if is(argv[i], "WITHMATCHLEN") {
            with_len = true;
        } else if is(argv[i], "MINMATCHLEN") && i + 1 < argv.len() {
            min_len = int(argv[i + 1])?.max(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let mut fetch = |k: &[u8]| -> Result<Vec<u8>, CmdError> {
        match ctx.data.read_str(k) {
            Ok(v) => Ok(v.map(|v| v.into_owned()).unwrap_or_default()),
            Err(CmdError::WrongType) => Err(err("ERR The specified keys must contain string values")),
            Err(e) => Err(e),
        }
    };
    let a = fetch(argv[1])?;
    let b = fetch(argv[2])?;
    if want_len && want_idx {
        return Err(err("ERR If you want both the length and indexes, please just use IDX."));
    }
    let cells = (a.len() + 1).saturating_mul(b.len() + 1);
    if cells >= MAX_STRING / 4 {
        return Err(err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"));
    }
    let w = b.len() + 1;
    let mut dp = vec![0u32; cells];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            dp[i * w + j] = if a[i - 1] == b[j - 1] { dp[(i - 1) * w + j - 1] + 1 } else { dp[(i - 1) * w + j].max(dp[i * w + j - 1]) };
        }
    }
    let total = dp[a.len() * w + b.len()] as usize;
    // Walk back from the end collecting the LCS and its matching ranges.
    let mut out = vec![0u8; total];
    // (range in a, range in b, length), ranges inclusive.
    type Match = ((usize, usize), (usize, usize), usize);
    let mut matches: Vec<Match> = Vec::new();
    let (mut i, mut j, mut idx) = (a.len(), b.len(), total);
    let mut cur: Option<((usize, usize), (usize, usize))> = None;
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            out[idx - 1] = a[i - 1];
            idx -= 1;
            match &mut cur {
                Some((ra, rb)) if ra.0 == i && rb.0 == j => {
                    ra.0 = i - 1;
                    rb.0 = j - 1;
                }
                _ => {
                    if let Some((ra, rb)) = cur.take() {
                        let l = ra.1 - ra.0 + 1;
                        if l as i64 >= min_len {
                            matches.push((ra, rb, l));
                        }
                    }
                    cur = Some(((i - 1, i - 1), (j - 1, j - 1)));
                }
            }
            i -= 1;
            j -= 1;
        } else if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    if let Some((ra, rb)) = cur.take() {
        let l = ra.1 - ra.0 + 1;
        if l as i64 >= min_len {
            matches.push((ra, rb, l));
        }
    }
    if want_idx {
        ctx.out.map_len(2);
        ctx.out.bulk(b"matches");
        ctx.out.array_len(matches.len());
        for (ra, rb, l) in &matches {
            ctx.out.array_len(if with_len { 3 } else { 2 });
            for r in [ra, rb] {
                ctx.out.array_len(2);
                ctx.out.int(r.0 as i64);
                ctx.out.int(r.1 as i64);
            }
            if with_len {
                ctx.out.int(*l as i64);
            }
        }
        ctx.out.bulk(b"len");
        ctx.out.int(total as i64);
    } else if want_len {
        ctx.out.int(total as i64);
    } else {
        ctx.out.bulk(&out);
    }
    Ok(())
}

/// `CAS key expected new [EX s|PX ms]`: set `new` if the string equals `expected`.
pub fn cas(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut expire = None;
    if argv.len() == 6 && (is(argv[4], "EX") || is(argv[4], "PX")) {
        expire = Some(expire_arg(ctx, argv, 4, "cas")?);
    } else if argv.len() != 4 {
        return Err(CmdError::Syntax);
    }
    let key = argv[1];
    let matches = get_str(&mut ctx.data, key)?.map(|v| v == argv[2]).unwrap_or(false);
    if !matches {
        ctx.out.int(0);
        return Ok(());
    }
    match expire {
        Some(t) => ctx.data.set_str(key, argv[3], Some(t)),
        None => replace_value(ctx, key, argv[3]),
    }
    ctx.out.int(1);
    Ok(())
}

/// `CAD key expected`: delete the key if its string equals `expected`.
pub fn cad(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let matches = get_str(&mut ctx.data, argv[1])?.map(|v| v == argv[2]).unwrap_or(false);
    if matches {
        ctx.data.delete(argv[1]);
    }
    ctx.out.int(matches as i64);
    Ok(())
}
