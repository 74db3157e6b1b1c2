//! List commands, including the blocking pops and moves.

use std::collections::VecDeque;
use std::time::Instant;

use super::args::{count, err, int, is, numkeys, range, timeout, CmdError};
use super::{BlockRequest, CmdResult, Ctx, Data, TimeoutReply};
use crate::keyspace::value::Bytes;
use crate::keyspace::{Collection, Kind};

fn new_list() -> Collection {
    Collection::List(VecDeque::new())
}

fn as_list(c: &mut Collection) -> &mut VecDeque<Bytes> {
    match c {
        Collection::List(l) => l,
        _ => unreachable!("kind checked by Data::coll"),
    }
}

fn list<'a>(data: &'a mut Data, key: &[u8]) -> Result<Option<&'a mut VecDeque<Bytes>>, CmdError> {
    Ok(data.coll(key, Kind::List)?.map(as_list))
}

#[derive(Clone, Copy, PartialEq)]
enum End {
    Left,
    Right,
}

fn end(arg: &[u8]) -> Result<End, CmdError> {
    if is(arg, "LEFT") {
        Ok(End::Left)
    } else if is(arg, "RIGHT") {
        Ok(End::Right)
    } else {
        Err(CmdError::Syntax)
    }
}

fn pop(l: &mut VecDeque<Bytes>, e: End) -> Option<Bytes> {
    match e {
        End::Left => l.pop_front(),
        End::Right => l.pop_back(),
    }
}

fn push_generic(ctx: &mut Ctx, argv: &[&[u8]], e: End, only_existing: bool) -> CmdResult {
    let key = argv[1];
    if only_existing && list(&mut ctx.data, key)?.is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    let l = as_list(ctx.data.coll_or_create(key, Kind::List, new_list)?);
    for v in &argv[2..] {
        match e {
            End::Left => l.push_front((*v).into()),
            End::Right => l.push_back((*v).into()),
        }
    }
    let n = l.len();
    ctx.data.modified(key);
    ctx.data.signal(key);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn lpush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    push_generic(ctx, argv, End::Left, false)
}
pub fn rpush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    push_generic(ctx, argv, End::Right, false)
}
pub fn lpushx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    push_generic(ctx, argv, End::Left, true)
}
pub fn rpushx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    push_generic(ctx, argv, End::Right, true)
}

fn pop_generic(ctx: &mut Ctx, argv: &[&[u8]], e: End) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::WrongArgs(ctx.spec.name));
    }
    let n = argv.get(2).map(|a| count(a)).transpose()?;
    let key = argv[1];
    let Some(l) = list(&mut ctx.data, key)? else {
        if n.is_some() {
            ctx.out.null_array()
        } else {
            ctx.out.null()
        }
        return Ok(());
    };
    match n {
        None => {
            let v = pop(l, e).expect("lists are never empty");
            ctx.out.bulk(&v);
        }
        Some(n) => {
            let n = n.min(l.len());
            ctx.out.array_len(n);
            for _ in 0..n {
                let v = pop(l, e).unwrap();
                ctx.out.bulk(&v);
            }
        }
    }
    ctx.data.modified(key);
    Ok(())
}

pub fn lpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    pop_generic(ctx, argv, End::Left)
}
pub fn rpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    pop_generic(ctx, argv, End::Right)
}

pub fn llen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = list(&mut ctx.data, argv[1])?.map(|l| l.len()).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn lrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (s, e) = (int(argv[2])?, int(argv[3])?);
    let Some(l) = list(&mut ctx.data, argv[1])? else {
        ctx.out.array_len(0);
        return Ok(());
    };
    match range(s, e, l.len()) {
        None => ctx.out.array_len(0),
        Some((s, e)) => {
            ctx.out.array_len(e - s + 1);
            for v in l.range(s..=e) {
                ctx.out.bulk(v);
            }
        }
    }
    Ok(())
}

fn index(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (i >= 0 && (i as usize) < len).then_some(i as usize)
}

pub fn lindex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let i = int(argv[2])?;
    match list(&mut ctx.data, argv[1])?.and_then(|l| index(i, l.len()).map(|i| &l[i])) {
        Some(v) => ctx.out.bulk(v),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn lset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let i = int(argv[2])?;
    let key = argv[1];
    let l = list(&mut ctx.data, key)?.ok_or(CmdError::NoSuchKey)?;
    let i = index(i, l.len()).ok_or(CmdError::IndexOutOfRange)?;
    l[i] = argv[3].into();
    ctx.data.modified(key);
    ctx.out.ok();
    Ok(())
}

pub fn lrem(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = int(argv[2])?;
    let key = argv[1];
    let target = argv[3];
    let Some(l) = list(&mut ctx.data, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let limit = if n == 0 { usize::MAX } else { n.unsigned_abs() as usize };
    let mut removed = 0;
    if n >= 0 {
        let mut i = 0;
        while i < l.len() && removed < limit {
            if &*l[i] == target {
                l.remove(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
    } else {
        let mut i = l.len();
        while i > 0 && removed < limit {
            i -= 1;
            if &*l[i] == target {
                l.remove(i);
                removed += 1;
            }
        }
    }
    if removed > 0 {
        ctx.data.modified(key);
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn ltrim(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (s, e) = (int(argv[2])?, int(argv[3])?);
    let key = argv[1];
    if let Some(l) = list(&mut ctx.data, key)? {
        match range(s, e, l.len()) {
            None => l.clear(),
            Some((s, e)) => {
                l.truncate(e + 1);
                l.drain(..s);
            }
        }
        ctx.data.modified(key);
    }
    ctx.out.ok();
    Ok(())
}

pub fn linsert(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let after = if is(argv[2], "AFTER") {
        true
    } else if is(argv[2], "BEFORE") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let key = argv[1];
    let Some(l) = list(&mut ctx.data, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    match l.iter().position(|v| &**v == argv[3]) {
        None => ctx.out.int(-1),
        Some(p) => {
            l.insert(if after { p + 1 } else { p }, argv[4].into());
            let n = l.len();
            ctx.data.modified(key);
            ctx.data.signal(key);
            ctx.out.int(n as i64);
        }
    }
    Ok(())
}

pub fn lpos(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (mut rank, mut cnt, mut maxlen) = (1i64, None, 0usize);
    let mut i = 3;
    while i < argv.len() {
        let v = argv.get(i + 1).ok_or(CmdError::Syntax)?;
        if is(argv[i], "RANK") {
            rank = int(v)?;
            if rank == 0 || rank == i64::MIN {
                return Err(err(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(argv[i], "COUNT") {
            let c = int(v)?;
            if c < 0 {
                return Err(err("ERR COUNT can't be negative"));
            }
            cnt = Some(c as usize);
        } else if is(argv[i], "MAXLEN") {
            let m = int(v)?;
            if m < 0 {
                return Err(err("ERR MAXLEN can't be negative"));
            }
            maxlen = m as usize;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let target = argv[2];
    let l = list(&mut ctx.data, argv[1])?;
    let mut hits = Vec::new();
    if let Some(l) = l {
        let want = match cnt {
            Some(0) => usize::MAX,
            Some(c) => c,
            None => 1,
        };
        let mut skip = rank.unsigned_abs() as usize - 1;
        let len = l.len();
        let limit = if maxlen == 0 { len } else { maxlen.min(len) };
        for step in 0..limit {
            let idx = if rank > 0 { step } else { len - 1 - step };
            if &*l[idx] == target {
                if skip > 0 {
                    skip -= 1;
                } else {
                    hits.push(idx as i64);
                    if hits.len() >= want {
                        break;
                    }
                }
            }
        }
    }
    match cnt {
        Some(_) => {
            ctx.out.array_len(hits.len());
            for h in hits {
                ctx.out.int(h);
            }
        }
        None => match hits.first() {
            Some(&h) => ctx.out.int(h),
            None => ctx.out.null(),
        },
    }
    Ok(())
}

/// Moves one element from `src` to `dst`; Ok(None) when `src` is missing.
fn move_elem(data: &mut Data, src: &[u8], dst: &[u8], from: End, to: End) -> Result<Option<Bytes>, CmdError> {
    if list(data, src)?.is_none() {
        return Ok(None);
    }
    // Type of the destination is checked before anything moves.
    list(data, dst)?;
    let v = pop(list(data, src)?.unwrap(), from).expect("lists are never empty");
    data.modified(src);
    let l = as_list(data.coll_or_create(dst, Kind::List, new_list)?);
    match to {
        End::Left => l.push_front(v.clone()),
        End::Right => l.push_back(v.clone()),
    }
    data.modified(dst);
    data.signal(dst);
    Ok(Some(v))
}

pub fn lmove(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (from, to) = (end(argv[3])?, end(argv[4])?);
    match move_elem(&mut ctx.data, argv[1], argv[2], from, to)? {
        Some(v) => ctx.out.bulk(&v),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn rpoplpush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match move_elem(&mut ctx.data, argv[1], argv[2], End::Right, End::Left)? {
        Some(v) => ctx.out.bulk(&v),
        None => ctx.out.null(),
    }
    Ok(())
}

/// Blocks the client on `keys` unless inside a transaction (then replies as a timeout).
pub fn block_or_timeout(ctx: &mut Ctx, keys: Vec<Vec<u8>>, t: Option<std::time::Duration>, reply: TimeoutReply) {
    if ctx.in_exec {
        match reply {
            TimeoutReply::NullArray => ctx.out.null_array(),
            TimeoutReply::NullBulk => ctx.out.null(),
            TimeoutReply::Replicas(offsets) => ctx.out.int(ctx.srv.replication.acked_at_least(offsets) as i64),
        }
        return;
    }
    ctx.block =
        Some(BlockRequest { keys, db: ctx.data.db, deadline: t.map(|d| Instant::now() + d), timeout_reply: reply, retry_argv: None, wake_on_delete: false });
}

fn bpop(ctx: &mut Ctx, argv: &[&[u8]], e: End) -> CmdResult {
    let t = timeout(argv[argv.len() - 1])?;
    let keys = &argv[1..argv.len() - 1];
    for key in keys {
        if let Some(l) = list(&mut ctx.data, key)? {
            let v = pop(l, e).expect("lists are never empty");
            ctx.data.modified(key);
            ctx.out.array_len(2);
            ctx.out.bulk(key);
            ctx.out.bulk(&v);
            return Ok(());
        }
    }
    block_or_timeout(ctx, keys.iter().map(|k| k.to_vec()).collect(), t, TimeoutReply::NullArray);
    Ok(())
}

pub fn blpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bpop(ctx, argv, End::Left)
}
pub fn brpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bpop(ctx, argv, End::Right)
}

fn bmove(ctx: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End, t: &[u8]) -> CmdResult {
    let t = timeout(t)?;
    match move_elem(&mut ctx.data, src, dst, from, to)? {
        Some(v) => ctx.out.bulk(&v),
        None => block_or_timeout(ctx, vec![src.to_vec()], t, TimeoutReply::NullBulk),
    }
    Ok(())
}

pub fn blmove(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (from, to) = (end(argv[3])?, end(argv[4])?);
    bmove(ctx, argv[1], argv[2], from, to, argv[5])
}

pub fn brpoplpush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bmove(ctx, argv[1], argv[2], End::Right, End::Left, argv[3])
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT n]` (also MIN|MAX for the zset variant via `dir`).
pub fn parse_mpop<'a, D>(args: &[&'a [u8]], dir: impl Fn(&[u8]) -> Result<D, CmdError>) -> Result<(Vec<&'a [u8]>, D, usize), CmdError> {
    let nk = numkeys(args)?;
    let keys = args[1..=nk].to_vec();
    let rest = &args[nk + 1..];
    let d = dir(rest.first().ok_or(CmdError::Syntax)?)?;
    let mut n = 1;
    let mut i = 1;
    let mut seen_count = false;
    while i < rest.len() {
        if is(rest[i], "COUNT") && i + 1 < rest.len() && !seen_count {
            let c = int(rest[i + 1]).map_err(|_| err("ERR count should be greater than 0"))?;
            if c <= 0 {
                return Err(err("ERR count should be greater than 0"));
            }
            n = c as usize;
            seen_count = true;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((keys, d, n))
}

fn mpop_try(ctx: &mut Ctx, keys: &[&[u8]], e: End, n: usize) -> Result<bool, CmdError> {
    for key in keys {
        if let Some(l) = list(&mut ctx.data, key)? {
            let n = n.min(l.len());
            ctx.out.array_len(2);
            ctx.out.bulk(key);
            ctx.out.array_len(n);
            for _ in 0..n {
                let v = pop(l, e).unwrap();
                ctx.out.bulk(&v);
            }
            ctx.data.modified(key);
            return Ok(true);
        }
    }
    Ok(false)
}

pub fn lmpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (keys, e, n) = parse_mpop(&argv[1..], end)?;
    if !mpop_try(ctx, &keys, e, n)? {
        ctx.out.null_array();
    }
    Ok(())
}

pub fn blmpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let t = timeout(argv[1])?;
    let (keys, e, n) = parse_mpop(&argv[2..], end)?;
    if !mpop_try(ctx, &keys, e, n)? {
        block_or_timeout(ctx, keys.iter().map(|k| k.to_vec()).collect(), t, TimeoutReply::NullArray);
    }
    Ok(())
}
