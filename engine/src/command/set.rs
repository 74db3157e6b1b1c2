//! Set commands.

use super::args::{count, err, int, is, numkeys, CmdError};
use super::hash::{parse_cursor, scan_page, write_random_entries, write_scan};
use super::keys::ScanOpts;
use super::{CmdResult, Ctx, Data};
use crate::keyspace::value::{Bytes, BytesMap};
use crate::keyspace::{Collection, Entry, Kind};

type Set = BytesMap<()>;

fn new_set() -> Collection {
    Collection::Set(BytesMap::new())
}

fn as_set(c: &mut Collection) -> &mut Set {
    match c {
        Collection::Set(s) => s,
        _ => unreachable!("kind checked by Data::coll"),
    }
}

fn set<'a>(data: &'a mut Data, key: &[u8]) -> Result<Option<&'a mut Set>, CmdError> {
    Ok(data.coll(key, Kind::Set)?.map(as_set))
}

pub fn sadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let s = as_set(ctx.data.coll_or_create(key, Kind::Set, new_set)?);
    let n = argv[2..].iter().filter(|m| s.insert(m, ()).is_none()).count();
    // Nothing added is no change (WATCH, notifications).
    ctx.data.settle(key, n > 0);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn srem(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(s) = set(&mut ctx.data, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let n = argv[2..].iter().filter(|m| s.remove(m).is_some()).count();
    if n > 0 {
        ctx.data.modified(key);
    }
    ctx.out.int(n as i64);
    Ok(())
}

pub fn smembers(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match set(&mut ctx.data, argv[1])? {
        None => ctx.out.set_len(0),
        Some(s) => {
            ctx.out.set_len(s.len());
            for (m, _) in s.iter() {
                ctx.out.bulk(m);
            }
        }
    }
    Ok(())
}

pub fn sismember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let b = set(&mut ctx.data, argv[1])?.map(|s| s.contains(argv[2])).unwrap_or(false);
    ctx.out.int(b as i64);
    Ok(())
}

pub fn smismember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let s = set(&mut ctx.data, argv[1])?;
    let flags: Vec<bool> = argv[2..].iter().map(|m| s.as_ref().map(|s| s.contains(m)).unwrap_or(false)).collect();
    ctx.out.array_len(flags.len());
    for f in flags {
        ctx.out.int(f as i64);
    }
    Ok(())
}

pub fn scard(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = set(&mut ctx.data, argv[1])?.map(|s| s.len()).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn spop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let n = argv.get(2).map(|a| count(a)).transpose()?;
    let key = argv[1];
    let Some(s) = set(&mut ctx.data, key)? else {
        if n.is_some() {
            ctx.out.set_len(0)
        } else {
            ctx.out.null()
        }
        return Ok(());
    };
    let popped = match n {
        None => {
            let (m, _) = s.remove_bucket(s.random_bucket().unwrap()).unwrap();
            ctx.out.bulk(&m);
            vec![m]
        }
        Some(n) => {
            let n = n.min(s.len());
            let mut popped = Vec::with_capacity(n);
            for _ in 0..n {
                popped.push(s.remove_bucket(s.random_bucket().unwrap()).unwrap().0);
            }
            ctx.out.set_len(popped.len());
            for m in &popped {
                ctx.out.bulk(m);
            }
            popped
        }
    };
    ctx.data.modified(key);
    // The members were picked at random: the WAL and replicas get what was removed, not
    // the dice.
    if ctx.srv.records_writes() && ctx.conn.replay_now.is_none() && !popped.is_empty() {
        let mut srem: Vec<&[u8]> = vec![b"SREM", key];
        srem.extend(popped.iter().map(|m| &m[..]));
        ctx.data.log(ctx.conn.ns_base, &srem);
    }
    Ok(())
}

pub fn srandmember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let c = super::hash::random_count(argv.get(2))?;
    let cap = ctx.srv.limits.hard(ctx.conn.info.class());
    let Some(s) = set(&mut ctx.data, argv[1])? else {
        if c.is_some() {
            ctx.out.array_len(0)
        } else {
            ctx.out.null()
        }
        return Ok(());
    };
    match c {
        None => {
            let m = s.bucket(s.random_bucket().unwrap()).unwrap().0.clone();
            ctx.out.bulk(&m);
        }
        Some(c) => write_random_entries(&mut ctx.out, s, c, cap, false, |_, _| {}),
    }
    Ok(())
}

pub fn smove(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (src, dst, m) = (argv[1], argv[2], argv[3]);
    if set(&mut ctx.data, dst)?.is_none() && ctx.data.exists(dst) {
        return Err(CmdError::WrongType);
    }
    let Some(s) = set(&mut ctx.data, src)? else {
        ctx.out.int(0);
        return Ok(());
    };
    if src == dst {
        let b = s.contains(m);
        ctx.out.int(b as i64);
        return Ok(());
    }
    if s.remove(m).is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    ctx.data.modified(src);
    // The destination changes only if it lacked the member (a WATCH on it holds otherwise).
    let added = as_set(ctx.data.coll_or_create(dst, Kind::Set, new_set)?).insert(m, ()).is_none();
    ctx.data.settle(dst, added);
    ctx.out.int(1);
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Computes an intersection, union or difference of the sets at `keys` (missing = empty).
fn combine(data: &mut Data, keys: &[&[u8]], op: Op) -> Result<Vec<Bytes>, CmdError> {
    // Type-check everything first, as Redis does.
    let mut sets: Vec<Option<Set>> = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(set(data, k)?.map(|s| s.clone()));
    }
    Ok(match op {
        Op::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return Ok(Vec::new());
            }
            let mut sets: Vec<Set> = sets.into_iter().flatten().collect();
            sets.sort_by_key(|s| s.len());
            let (first, rest) = sets.split_first().unwrap();
            first.iter().filter(|(m, _)| rest.iter().all(|s| s.contains(m))).map(|(m, _)| m.clone()).collect()
        }
        Op::Union => {
            let mut acc: Set = BytesMap::new();
            for s in sets.iter().flatten() {
                for (m, _) in s.iter() {
                    acc.insert(m, ());
                }
            }
            acc.iter().map(|(m, _)| m.clone()).collect()
        }
        Op::Diff => match &sets[0] {
            None => Vec::new(),
            Some(first) => first.iter().filter(|(m, _)| !sets[1..].iter().flatten().any(|s| s.contains(m))).map(|(m, _)| m.clone()).collect(),
        },
    })
}

fn reply_members(ctx: &mut Ctx, ms: &[Bytes]) {
    ctx.out.set_len(ms.len());
    for m in ms {
        ctx.out.bulk(m);
    }
}

fn store(ctx: &mut Ctx, dst: &[u8], ms: Vec<Bytes>) {
    let n = ms.len();
    ctx.data.delete(dst);
    if n > 0 {
        let mut s: Set = BytesMap::new();
        for m in &ms {
            s.insert(m, ());
        }
        let e = Entry::new_coll(dst, Collection::Set(s), &ctx.data.meta(None));
        ctx.data.insert(e);
    }
    ctx.out.int(n as i64);
}

pub fn sinter(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let ms = combine(&mut ctx.data, &argv[1..], Op::Inter)?;
    reply_members(ctx, &ms);
    Ok(())
}
pub fn sunion(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let ms = combine(&mut ctx.data, &argv[1..], Op::Union)?;
    reply_members(ctx, &ms);
    Ok(())
}
pub fn sdiff(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let ms = combine(&mut ctx.data, &argv[1..], Op::Diff)?;
    reply_members(ctx, &ms);
    Ok(())
}
pub fn sinterstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let ms = combine(&mut ctx.data, &argv[2..], Op::Inter)?;
    store(ctx, argv[1], ms);
    Ok(())
}
pub fn sunionstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let ms = combine(&mut ctx.data, &argv[2..], Op::Union)?;
    store(ctx, argv[1], ms);
    Ok(())
}
pub fn sdiffstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let ms = combine(&mut ctx.data, &argv[2..], Op::Diff)?;
    store(ctx, argv[1], ms);
    Ok(())
}

/// Parses `numkeys key... [LIMIT n]` of SINTERCARD/ZINTERCARD.
pub fn parse_card_args<'a>(args: &[&'a [u8]]) -> Result<(Vec<&'a [u8]>, usize), CmdError> {
    let nk = numkeys(args)?;
    let mut limit = 0usize;
    let rest = &args[nk + 1..];
    let mut i = 0;
    while i < rest.len() {
        if is(rest[i], "LIMIT") && i + 1 < rest.len() {
            let l = int(rest[i + 1]).map_err(|_| err("ERR LIMIT can't be negative"))?;
            if l < 0 {
                return Err(err("ERR LIMIT can't be negative"));
            }
            limit = l as usize;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((args[1..=nk].to_vec(), limit))
}

pub fn sintercard(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (keys, limit) = parse_card_args(&argv[1..])?;
    let n = combine(&mut ctx.data, &keys, Op::Inter)?.len();
    ctx.out.int(if limit > 0 { n.min(limit) } else { n } as i64);
    Ok(())
}

pub fn sscan(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let cursor = parse_cursor(argv[2])?;
    let opts = ScanOpts::parse(&argv[3..], false)?;
    let mut items = Vec::new();
    let next = match set(&mut ctx.data, argv[1])? {
        Some(s) => scan_page(s, cursor, &opts, |k, _| items.push(k.clone())),
        None => 0,
    };
    write_scan(ctx, next, &items);
    Ok(())
}
