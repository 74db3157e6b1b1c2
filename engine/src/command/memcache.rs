//! Memcached semantics on engine entries, for the proxy's Memcached front end: `MC.GET`,
//! `MC.GAT`, `MC.STORE`, `MC.ARITH`, `MC.DELETE`, `MC.TOUCH`.
//!
//! Values stored through Memcached are ordinary strings (a Redis client of the same tenant
//! reads them with GET); the entry also keeps the 32-bit client flags, and its version — bumped
//! on every write, unique across keys — is the CAS unique. Keys of other types look missing to
//! Memcached reads and can't be appended to, as no Memcached item can be a list.
//!
//! Expiry times are Memcached's: 0 never, up to 30 days relative seconds, beyond that an
//! absolute unix time, negative already expired; the engine's clock applies them.

use super::args::{err, int, is, CmdError};
use super::{CmdResult, Ctx};
use crate::keyspace::{access, Kind, Meta};

/// Memcached's boundary between relative and absolute expiry times (30 days in seconds).
const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expiry {
    Never,
    At(i64),
    /// Negative or in the past: the item is invisible at once.
    Expired,
}

fn expiry(exptime: i64, now_ms: i64) -> Expiry {
    match exptime {
        0 => Expiry::Never,
        t if t < 0 => Expiry::Expired,
        t if t <= REALTIME_MAXDELTA => Expiry::At(now_ms + t * 1000),
        t if t * 1000 <= now_ms => Expiry::Expired,
        t => Expiry::At(t * 1000),
    }
}

fn u64_arg(a: &[u8]) -> Result<u64, CmdError> {
    std::str::from_utf8(a).ok().and_then(|s| s.parse().ok()).ok_or_else(|| err("ERR value is not an integer or out of range"))
}

/// Reads a counter value as Memcached does (strtoull): optional leading spaces, digits, then
/// the end or a space.
fn counter_value(v: &[u8]) -> Option<u64> {
    let s = v.iter().position(|b| !b.is_ascii_whitespace()).map(|i| &v[i..])?;
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || (digits < s.len() && !s[digits].is_ascii_whitespace()) {
        return None;
    }
    std::str::from_utf8(&s[..digits]).ok()?.parse().ok()
}

/// One item as `MC.GET` answers it: [value, flags, cas, ttl ms or -1], or nil.
fn reply_item(ctx: &mut Ctx, key: &[u8]) {
    let (ks, db, now) = (ctx.data.ks, ctx.data.db, ctx.data.now);
    match ctx.data.read(key) {
        Some(e) if e.kind() == Kind::Str => {
            let ttl = e.expire().map(|at| (at - now).max(0)).unwrap_or(-1);
            let (flags, cas) = (e.flags() as i64, e.version() as i64);
            let v = match super::decoded(ks, db, e) {
                Ok(v) => v.unwrap_or_default(),
                Err(CmdError::Msg(m)) => return ctx.out.error(&m),
                Err(_) => return ctx.out.null(),
            };
            ctx.out.array_len(4);
            ctx.out.bulk(&v);
            ctx.out.int(flags);
            ctx.out.int(cas);
            ctx.out.int(ttl);
        }
        _ => ctx.out.null(),
    }
}

/// MC.GET key [key ...]
pub fn get(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ctx.out.array_len(argv.len() - 1);
    for key in &argv[1..] {
        reply_item(ctx, key);
    }
    Ok(())
}

/// MC.GAT exptime key [key ...]: get and touch.
pub fn gat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let exp = expiry(int(argv[1])?, ctx.data.now);
    ctx.out.array_len(argv.len() - 2);
    for key in &argv[2..] {
        reply_item(ctx, key);
        set_expiry(ctx, key, exp);
    }
    Ok(())
}

/// Applies a Memcached expiry to an existing item without changing its CAS unique.
fn set_expiry(ctx: &mut Ctx, key: &[u8], exp: Expiry) -> bool {
    let now = ctx.data.now;
    let shard = ctx.data.shard(key);
    if shard.get(key, now).is_none() {
        return false;
    }
    match exp {
        Expiry::Expired => {
            shard.remove(key);
        }
        Expiry::Never => shard.set_expire(key, None),
        Expiry::At(at) => shard.set_expire(key, Some(at)),
    }
    true
}

/// What a store finds at its key.
struct Existing {
    is_str: bool,
    version: u64,
    flags: u32,
    expire: Option<i64>,
    value: Option<Vec<u8>>,
}

fn existing(ctx: &mut Ctx, key: &[u8], want_value: bool) -> Result<Option<Existing>, CmdError> {
    let (ks, db) = (ctx.data.ks, ctx.data.db);
    let Some(e) = ctx.data.read(key) else { return Ok(None) };
    let is_str = e.kind() == Kind::Str;
    let value = if want_value && is_str { super::decoded(ks, db, e)?.map(|v| v.into_owned()) } else { None };
    Ok(Some(Existing { is_str, version: e.version(), flags: e.flags(), expire: e.expire(), value }))
}

fn store_entry(ctx: &mut Ctx, key: &[u8], value: &[u8], flags: u32, expire: Option<i64>) -> u64 {
    let version = ctx.data.ks.next_version();
    let meta = Meta { expire, flags, version, access: access::new_stamp(ctx.data.lfu, ctx.data.now) };
    let e = ctx.data.ks.new_str_entry(ctx.data.db, key, value, &meta);
    ctx.data.insert(e);
    version
}

fn status(ctx: &mut Ctx, s: &str, cas: u64) -> CmdResult {
    ctx.out.array_len(2);
    ctx.out.simple(s);
    ctx.out.int(cas as i64);
    Ok(())
}

/// MC.STORE set|cas|add|replace|append|prepend key value flags exptime cas — with mode cas
/// the unique is always compared (no item has 0, so 0 never matches, as in memcached);
/// with the others 0 means no compare. Answers [STORED|NOT_STORED|EXISTS|NOT_FOUND, new cas].
pub fn store(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (mode, key, value) = (argv[1], argv[2], argv[3]);
    let flags = u32::try_from(int(argv[4])?).map_err(|_| err("ERR flags must be a 32-bit unsigned integer"))?;
    let exp = expiry(int(argv[5])?, ctx.data.now);
    let cas = u64_arg(argv[6])?;
    let compare = is(mode, "cas");
    let concat = is(mode, "append") || is(mode, "prepend");
    if !(compare || concat || is(mode, "set") || is(mode, "add") || is(mode, "replace")) {
        return Err(err("ERR mode must be one of set, cas, add, replace, append, prepend"));
    }
    let old = existing(ctx, key, concat)?;
    if cas != 0 || compare {
        match &old {
            None => return status(ctx, "NOT_FOUND", 0),
            // (A key written by a Redis command may have no version: 0 still never matches.)
            Some(o) if o.version != cas || cas == 0 => return status(ctx, "EXISTS", 0),
            _ => {}
        }
    }
    match (&old, mode) {
        (Some(_), m) if is(m, "add") => return status(ctx, "NOT_STORED", 0),
        (None, m) if !is(m, "set") && !is(m, "add") => return status(ctx, "NOT_STORED", 0),
        (Some(o), _) if concat && !o.is_str => return status(ctx, "NOT_STORED", 0),
        _ => {}
    }
    if concat {
        let o = old.expect("checked above");
        let old_value = o.value.unwrap_or_default();
        let mut v = Vec::with_capacity(old_value.len() + value.len());
        if is(mode, "append") {
            v.extend_from_slice(&old_value);
            v.extend_from_slice(value);
        } else {
            v.extend_from_slice(value);
            v.extend_from_slice(&old_value);
        }
        let version = store_entry(ctx, key, &v, o.flags, o.expire);
        return status(ctx, "STORED", version);
    }
    match exp {
        // Stored and at once invisible, as in Memcached.
        Expiry::Expired => {
            ctx.data.delete(key);
            status(ctx, "STORED", 0)
        }
        Expiry::Never => {
            let version = store_entry(ctx, key, value, flags, None);
            status(ctx, "STORED", version)
        }
        Expiry::At(at) => {
            let version = store_entry(ctx, key, value, flags, Some(at));
            status(ctx, "STORED", version)
        }
    }
}

/// MC.ARITH key incr|decr delta cas vivify initial exptime — Memcached's incr/decr (64-bit
/// unsigned, incr wraps, decr stops at 0, flags and expiry kept, a shorter result padded with
/// spaces to the old length, as Memcached rewrites it in place). With vivify 1 a missing key is created holding
/// `initial`. Answers [OK|NOT_FOUND|EXISTS, value or nil, cas].
pub fn arith(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let incr = if is(argv[2], "incr") {
        true
    } else if is(argv[2], "decr") {
        false
    } else {
        return Err(err("ERR mode must be incr or decr"));
    };
    let delta = u64_arg(argv[3])?;
    let cas = u64_arg(argv[4])?;
    let vivify = int(argv[5])? != 0;
    let initial = u64_arg(argv[6])?;
    let exp = expiry(int(argv[7])?, ctx.data.now);
    let reply = |ctx: &mut Ctx, s: &str, value: Option<&[u8]>, cas: u64| {
        ctx.out.array_len(3);
        ctx.out.simple(s);
        match value {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        }
        ctx.out.int(cas as i64);
        Ok(())
    };
    let Some(old) = existing(ctx, key, true)? else {
        if !vivify {
            return reply(ctx, "NOT_FOUND", None, 0);
        }
        let v = initial.to_string();
        let expire = match exp {
            Expiry::At(at) => Some(at),
            _ => None,
        };
        let version = store_entry(ctx, key, v.as_bytes(), 0, expire);
        return reply(ctx, "OK", Some(v.as_bytes()), version);
    };
    if cas != 0 && old.version != cas {
        return reply(ctx, "EXISTS", None, 0);
    }
    let current = old.value.as_deref().filter(|_| old.is_str).and_then(counter_value);
    let Some(current) = current else {
        return Err(err("CLIENT_ERROR cannot increment or decrement non-numeric value"));
    };
    let next = if incr { current.wrapping_add(delta) } else { current.saturating_sub(delta) };
    let mut text = next.to_string().into_bytes();
    let old_len = old.value.as_ref().map(|v| v.len()).unwrap_or(0);
    let shown = text.clone();
    if text.len() < old_len {
        text.resize(old_len, b' ');
    }
    let version = store_entry(ctx, key, &text, old.flags, old.expire);
    reply(ctx, "OK", Some(&shown), version)
}

/// MC.DELETE key cas — cas 0 means no compare. Answers DELETED, NOT_FOUND or EXISTS.
pub fn delete(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let cas = u64_arg(argv[2])?;
    match existing(ctx, argv[1], false)? {
        None => ctx.out.simple("NOT_FOUND"),
        Some(o) if cas != 0 && o.version != cas => ctx.out.simple("EXISTS"),
        Some(_) => {
            ctx.data.delete(argv[1]);
            ctx.out.simple("DELETED");
        }
    }
    Ok(())
}

/// MC.TOUCH key exptime. Answers TOUCHED or NOT_FOUND.
pub fn touch(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let exp = expiry(int(argv[2])?, ctx.data.now);
    let found = set_expiry(ctx, argv[1], exp);
    ctx.out.simple(if found { "TOUCHED" } else { "NOT_FOUND" });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_rules_follow_memcached() {
        let now = 1_700_000_000_000;
        assert_eq!(expiry(0, now), Expiry::Never);
        assert_eq!(expiry(-1, now), Expiry::Expired);
        assert_eq!(expiry(10, now), Expiry::At(now + 10_000));
        assert_eq!(expiry(REALTIME_MAXDELTA, now), Expiry::At(now + REALTIME_MAXDELTA * 1000));
        assert_eq!(expiry(REALTIME_MAXDELTA + 1, now), Expiry::Expired, "an absolute time in 1970");
        assert_eq!(expiry(1_800_000_000, now), Expiry::At(1_800_000_000_000));
    }

    #[test]
    fn counters_parse_as_strtoull() {
        assert_eq!(counter_value(b"10"), Some(10));
        assert_eq!(counter_value(b" 1"), Some(1));
        assert_eq!(counter_value(b"9 "), Some(9));
        assert_eq!(counter_value(b"1 2"), Some(1));
        assert_eq!(counter_value(b"abc"), None);
        assert_eq!(counter_value(b"1a"), None);
        assert_eq!(counter_value(b""), None);
        assert_eq!(counter_value(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(counter_value(b"18446744073709551616"), None);
    }
}
