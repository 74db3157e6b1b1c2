//! Generic key commands: deletion, expiry, renaming, copying, iteration and introspection.

use super::args::{err, glob_match, int, is, CmdError};
use super::{CmdResult, Ctx};
use crate::keyspace::{access, Kind, Meta, ValueRef, NUM_DBS};
use crate::protocol::parse_i64;

pub fn del(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = argv[1..].iter().filter(|k| ctx.data.delete(k)).count();
    ctx.out.int(n as i64);
    Ok(())
}

pub fn exists(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = argv[1..].iter().filter(|k| ctx.data.read_untouched(k).is_some()).count();
    ctx.out.int(n as i64);
    Ok(())
}

pub fn touch(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = argv[1..].iter().filter(|k| ctx.data.get(k).is_some()).count();
    ctx.out.int(n as i64);
    Ok(())
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX | XX | GT | LT.
fn expire_generic(ctx: &mut Ctx, argv: &[&[u8]], unit_ms: i64, absolute: bool) -> CmdResult {
    let key = argv[1];
    let v = int(argv[2])?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &argv[3..] {
        if is(a, "NX") {
            nx = true;
        } else if is(a, "XX") {
            xx = true;
        } else if is(a, "GT") {
            gt = true;
        } else if is(a, "LT") {
            lt = true;
        } else {
            return Err(err(format!("ERR Unsupported option {}", String::from_utf8_lossy(a))));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(err("ERR NX and XX, GT or LT options at the same time are not compatible"));
    }
    if gt && lt {
        return Err(err("ERR GT and LT options at the same time are not compatible"));
    }
    let invalid = || err(format!("ERR invalid expire time in '{}' command", ctx.spec.name));
    let mut at = v.checked_mul(unit_ms).ok_or_else(invalid)?;
    if !absolute {
        at = at.checked_add(ctx.data.now).ok_or_else(invalid)?;
    }
    let now = ctx.data.now;
    let Some(e) = ctx.data.get(key) else {
        ctx.out.int(0);
        return Ok(());
    };
    let cur = e.expire();
    let _ = e;
    let ok = match cur {
        None => !(xx || gt),
        Some(c) => !nx && (!gt || at > c) && (!lt || at < c),
    };
    if !ok {
        ctx.out.int(0);
        return Ok(());
    }
    if at <= now {
        ctx.data.delete(key);
    } else {
        ctx.data.shard(key).set_expire(key, Some(at));
        ctx.data.modified(key);
    }
    ctx.out.int(1);
    Ok(())
}

pub fn expire(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, argv, 1000, false)
}
pub fn pexpire(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, argv, 1, false)
}
pub fn expireat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, argv, 1000, true)
}
pub fn pexpireat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, argv, 1, true)
}

fn ttl_generic(ctx: &mut Ctx, argv: &[&[u8]], ms: bool, absolute: bool) -> CmdResult {
    let now = ctx.data.now;
    let reply = match ctx.data.read_untouched(argv[1]) {
        None => -2,
        Some(e) => match e.expire() {
            None => -1,
            Some(at) if absolute => {
                if ms {
                    at
                } else {
                    at / 1000
                }
            }
            Some(at) => {
                let ttl = (at - now).max(0);
                if ms {
                    ttl
                } else {
                    (ttl + 500) / 1000
                }
            }
        },
    };
    ctx.out.int(reply);
    Ok(())
}

pub fn ttl(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, argv, false, false)
}
pub fn pttl(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, argv, true, false)
}
pub fn expiretime(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, argv, false, true)
}
pub fn pexpiretime(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, argv, true, true)
}

pub fn persist(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let had = ctx.data.get(key).map(|e| e.expire().is_some()).unwrap_or(false);
    if had {
        ctx.data.shard(key).set_expire(key, None);
        ctx.data.modified(key);
    }
    ctx.out.int(had as i64);
    Ok(())
}

pub fn type_(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let t = ctx.data.read_untouched(argv[1]).map(|e| e.kind().type_name()).unwrap_or("none");
    ctx.out.simple(t);
    Ok(())
}

fn rename_generic(ctx: &mut Ctx, argv: &[&[u8]], nx: bool) -> CmdResult {
    let (src, dst) = (argv[1], argv[2]);
    if ctx.data.peek(src).is_none() {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        if nx {
            ctx.out.int(0)
        } else {
            ctx.out.ok()
        }
        return Ok(());
    }
    if nx && ctx.data.exists(dst) {
        ctx.out.int(0);
        return Ok(());
    }
    let e = ctx.data.shard(src).remove(src).expect("checked above");
    let mut moved = e.renamed(dst);
    moved.set_version(ctx.data.ks.next_version());
    let list_like = matches!(moved.kind(), Kind::List | Kind::ZSet | Kind::Stream);
    ctx.data.shard(dst).insert(moved);
    if list_like {
        ctx.data.signal(dst);
    }
    if nx {
        ctx.out.int(1)
    } else {
        ctx.out.ok()
    }
    Ok(())
}

pub fn rename(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, argv, false)
}
pub fn renamenx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, argv, true)
}

/// A database argument (MOVE, COPY … DB) as the physical database of the caller's namespace.
fn parse_db(ctx: &Ctx, arg: &[u8]) -> Result<usize, CmdError> {
    let db = int(arg)?;
    if db < 0 || db >= NUM_DBS as i64 {
        return Err(err("ERR DB index is out of range"));
    }
    Ok(ctx.conn.ns_base + db as usize)
}

pub fn copy(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (src, dst) = (argv[1], argv[2]);
    let mut dst_db = ctx.data.db;
    let mut replace = false;
    let mut i = 3;
    while i < argv.len() {
        if is(argv[i], "REPLACE") {
            replace = true;
        } else if is(argv[i], "DB") && i + 1 < argv.len() {
            dst_db = parse_db(ctx, argv[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src == dst && dst_db == ctx.data.db {
        return Err(err("ERR source and destination objects are the same"));
    }
    let now = ctx.data.now;
    let meta_base = ctx.data.meta(None);
    let Some(e) = ctx.data.peek(src) else {
        ctx.out.int(0);
        return Ok(());
    };
    let copy = e.copied(dst, &Meta { expire: e.expire(), flags: e.flags(), ..meta_base });
    let kind = copy.kind();
    let shard = ctx.data.shard_in(dst_db, dst);
    if shard.get(dst, now).is_some() {
        if !replace {
            ctx.out.int(0);
            return Ok(());
        }
        shard.remove(dst);
    }
    shard.insert(copy);
    if matches!(kind, Kind::List | Kind::ZSet | Kind::Stream) {
        ctx.data.fx.ready.push((dst_db, dst.to_vec()));
    }
    ctx.out.int(1);
    Ok(())
}

pub fn move_(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let db = parse_db(ctx, argv[2])?;
    if db == ctx.data.db {
        return Err(err("ERR source and destination objects are the same"));
    }
    let now = ctx.data.now;
    if ctx.data.peek(key).is_none() || ctx.data.shard_in(db, key).get(key, now).is_some() {
        ctx.out.int(0);
        return Ok(());
    }
    let e = ctx.data.shard(key).remove(key).expect("checked above");
    let kind = e.kind();
    ctx.data.shard_in(db, key).insert(e);
    if matches!(kind, Kind::List | Kind::ZSet | Kind::Stream) {
        ctx.data.fx.ready.push((db, key.to_vec()));
    }
    ctx.out.int(1);
    Ok(())
}

pub fn keys(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let pat = argv[1];
    let all = pat == b"*";
    let now = ctx.data.now;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let ids: Vec<u32> = ctx.data.ks.db_shard_ids(ctx.data.db).collect();
    for id in ids {
        let shard = ctx.data.guards.shard(id);
        for e in shard.iter() {
            if !crate::keyspace::is_expired(e.expire(), now) && (all || glob_match(pat, e.key(), false)) {
                found.push(e.key().to_vec());
            }
        }
    }
    ctx.out.array_len(found.len());
    for k in &found {
        ctx.out.bulk(k);
    }
    Ok(())
}

/// SCAN cursor layout: bits 0-39 bucket, 40-47 shard within the db, 48-61 layout epoch of
/// that shard. When the shard's table was reorganized since, the shard is scanned again from
/// its start: keys may repeat (as Redis allows) but none present all along is missed.
const BUCKET_BITS: u32 = 40;

pub fn scan(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let cursor: u64 = std::str::from_utf8(argv[1]).ok().and_then(|s| s.parse().ok()).ok_or_else(|| err("ERR invalid cursor"))?;
    let opts = ScanOpts::parse(&argv[2..], true)?;
    let per_db = ctx.data.ks.shards_per_db() as u64;
    let mut shard = (cursor >> BUCKET_BITS) & 0xFF;
    let mut bucket = (cursor & ((1 << BUCKET_BITS) - 1)) as usize;
    let epoch = (cursor >> 48) as u32 & 0x3FFF;
    let now = ctx.data.now;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut next = 0u64;
    let first_id = ctx.data.ks.db_shard_ids(ctx.data.db).next().unwrap();
    if shard >= per_db {
        return Err(err("ERR invalid cursor"));
    }
    let mut check_epoch = cursor != 0;
    'outer: while shard < per_db {
        let s = ctx.data.guards.shard(first_id + shard as u32);
        if check_epoch && (s.layout_epoch & 0x3FFF) != epoch {
            bucket = 0;
        }
        check_epoch = false;
        let n = s.num_buckets();
        while bucket < n {
            if let Some(e) = s.bucket(bucket) {
                if !crate::keyspace::is_expired(e.expire(), now) && opts.matches(e.key()) && opts.kind.is_none_or(|k| k == e.kind()) {
                    found.push(e.key().to_vec());
                }
            }
            bucket += 1;
            if found.len() >= opts.count && bucket < n {
                next = ((s.layout_epoch & 0x3FFF) as u64) << 48 | shard << BUCKET_BITS | bucket as u64;
                break 'outer;
            }
        }
        shard += 1;
        bucket = 0;
        if found.len() >= opts.count && shard < per_db {
            let s = ctx.data.guards.shard(first_id + shard as u32);
            next = ((s.layout_epoch & 0x3FFF) as u64) << 48 | shard << BUCKET_BITS;
            break;
        }
    }
    ctx.out.array_len(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array_len(found.len());
    for k in &found {
        ctx.out.bulk(k);
    }
    Ok(())
}

/// Options of SCAN, HSCAN, SSCAN, ZSCAN.
pub struct ScanOpts<'a> {
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub kind: Option<Kind>,
}

impl<'a> ScanOpts<'a> {
    pub fn parse(args: &[&'a [u8]], allow_type: bool) -> Result<ScanOpts<'a>, CmdError> {
        let mut o = ScanOpts { pattern: None, count: 10, kind: None };
        let mut i = 0;
        while i < args.len() {
            if is(args[i], "MATCH") && i + 1 < args.len() {
                o.pattern = Some(args[i + 1]).filter(|p| *p != b"*");
                i += 2;
            } else if is(args[i], "COUNT") && i + 1 < args.len() {
                let c = int(args[i + 1])?;
                if c < 1 {
                    return Err(CmdError::Syntax);
                }
                o.count = c as usize;
                i += 2;
            } else if allow_type && is(args[i], "TYPE") && i + 1 < args.len() {
                let t = String::from_utf8_lossy(args[i + 1]).to_ascii_lowercase();
                o.kind = Some(match t.as_str() {
                    "string" => Kind::Str,
                    "list" => Kind::List,
                    "hash" => Kind::Hash,
                    "set" => Kind::Set,
                    "zset" => Kind::ZSet,
                    "stream" => Kind::Stream,
                    // Unknown types match nothing, as in Redis 7.0.
                    _ => {
                        o.pattern = Some(b"\x00\x01impossible-type\x02");
                        Kind::Str
                    }
                });
                i += 2;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(o)
    }

    pub fn matches(&self, key: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, key, false))
    }
}

pub fn randomkey(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let ids: Vec<u32> = ctx.data.ks.db_shard_ids(ctx.data.db).collect();
    let now = ctx.data.now;
    for _ in 0..100 {
        let lens: Vec<usize> = ids.iter().map(|&id| ctx.data.guards.shard(id).len()).collect();
        let total: usize = lens.iter().sum();
        if total == 0 {
            break;
        }
        let mut pick = fastrand::usize(..total);
        let mut chosen = ids[0];
        for (i, l) in lens.iter().enumerate() {
            if pick < *l {
                chosen = ids[i];
                break;
            }
            pick -= l;
        }
        let shard = ctx.data.guards.shard(chosen);
        let Some(e) = shard.random_entry() else { continue };
        let key = e.key().to_vec();
        if shard.get(&key, now).is_some() {
            ctx.out.bulk(&key);
            return Ok(());
        }
    }
    ctx.out.null();
    Ok(())
}

pub fn dbsize(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let ids: Vec<u32> = ctx.data.ks.db_shard_ids(ctx.data.db).collect();
    let n: usize = ids.iter().map(|&id| ctx.data.guards.shard(id).len()).sum();
    ctx.out.int(n as i64);
    Ok(())
}

/// OBJECT ENCODING of a string, by Redis 7.0's rules.
pub fn string_encoding(v: &[u8]) -> &'static str {
    if v.len() <= 20 && parse_i64(v).is_some() {
        "int"
    } else if v.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

pub fn object(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = argv[1];
    if is(sub, "HELP") {
        let lines = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Print this help.",
        ];
        ctx.out.help(&lines);
        return Ok(());
    }
    if argv.len() != 3 {
        return Err(super::args::subcommand_error("object", argv));
    }
    let now = ctx.data.now;
    let lfu = ctx.data.lfu;
    let Some(e) = ctx.data.peek(argv[2]) else {
        ctx.out.null();
        return Ok(());
    };
    if is(sub, "ENCODING") {
        let limits = super::config::encoding_limits(ctx.srv);
        let enc = match e.value() {
            ValueRef::Str(v) => string_encoding(v),
            // Terrace's own encoding: the value is stored by a codec (see TERRACE.COMPRESSION).
            ValueRef::Encoded(_) => "compressed",
            ValueRef::Coll(c) => c.encoding(&limits),
            // Lookups thaw collections from PMem; kept for completeness.
            ValueRef::Frozen(..) => "frozen",
        };
        ctx.out.bulk_str(enc);
    } else if is(sub, "REFCOUNT") {
        ctx.out.int(1);
    } else if is(sub, "IDLETIME") {
        if lfu {
            return Err(err("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
        }
        ctx.out.int(access::idle_seconds(e.access(), now) as i64);
    } else if is(sub, "FREQ") {
        if !lfu {
            return Err(err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
        }
        ctx.out.int(access::lfu_decayed(e.access(), now) as i64);
    } else {
        return Err(super::args::subcommand_error("object", argv));
    }
    Ok(())
}
