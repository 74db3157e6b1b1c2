//! Sorted set commands.

use super::args::{count, err, float, int, is, parse_f64, timeout, CmdError};
use super::hash::{parse_cursor, scan_page, write_random_entries, write_scan};
use super::keys::ScanOpts;
use super::list::{block_or_timeout, parse_mpop};
use super::set::parse_card_args;
use super::{CmdResult, Ctx, Data, TimeoutReply};
use crate::keyspace::value::{Bytes, BytesMap, ScoredMember, ZSet};
use crate::keyspace::{Collection, Entry, Kind};
use crate::protocol::format_double_g17;

fn new_zset() -> Collection {
    Collection::ZSet(ZSet::default())
}

fn as_z(c: &mut Collection) -> &mut ZSet {
    match c {
        Collection::ZSet(z) => z,
        _ => unreachable!("kind checked by Data::coll"),
    }
}

fn zset<'a>(data: &'a mut Data, key: &[u8]) -> Result<Option<&'a mut ZSet>, CmdError> {
    Ok(data.coll(key, Kind::ZSet)?.map(as_z))
}

/// A score bound: value and whether it is exclusive.
#[derive(Clone, Copy, Debug)]
pub struct ScoreBound {
    v: f64,
    excl: bool,
}

fn score_bound(a: &[u8]) -> Result<ScoreBound, CmdError> {
    let (excl, s) = if a.first() == Some(&b'(') { (true, &a[1..]) } else { (false, a) };
    let v = parse_f64(s).ok_or(CmdError::MinMaxNotFloat)?;
    Ok(ScoreBound { v, excl })
}

impl ScoreBound {
    fn above_min(&self, s: f64) -> bool {
        if self.excl {
            s > self.v
        } else {
            s >= self.v
        }
    }
    fn below_max(&self, s: f64) -> bool {
        if self.excl {
            s < self.v
        } else {
            s <= self.v
        }
    }
}

#[derive(Clone, Debug)]
pub enum LexBound {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

fn lex_bound(a: &[u8]) -> Result<LexBound, CmdError> {
    match a.first() {
        Some(b'-') if a.len() == 1 => Ok(LexBound::NegInf),
        Some(b'+') if a.len() == 1 => Ok(LexBound::PosInf),
        Some(b'[') => Ok(LexBound::Incl(a[1..].to_vec())),
        Some(b'(') => Ok(LexBound::Excl(a[1..].to_vec())),
        _ => Err(CmdError::MinMaxNotLex),
    }
}

impl LexBound {
    fn above_min(&self, m: &[u8]) -> bool {
        match self {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Incl(v) => m >= &v[..],
            LexBound::Excl(v) => m > &v[..],
        }
    }
    fn below_max(&self, m: &[u8]) -> bool {
        match self {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(v) => m <= &v[..],
            LexBound::Excl(v) => m < &v[..],
        }
    }
}

/// What a range command selects.
#[derive(Clone, Debug)]
pub enum RangeBy {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// What `by` covers, as ascending ranks `[start, end)`, in O(log n); `rev` reads a rank range
/// from the end. `None` for lex bounds on a set whose scores differ: its members are then not
/// in lex order and only a scan answers (Redis leaves that case unspecified; we filter every
/// member, so the answer does not depend on the layout).
fn span(z: &ZSet, by: &RangeBy, rev: bool) -> Option<(usize, usize)> {
    let (start, end) = match by {
        RangeBy::Rank(s, e) => match super::args::range(*s, *e, z.len()) {
            None => (0, 0),
            Some((s, e)) if rev => (z.len() - 1 - e, z.len() - s),
            Some((s, e)) => (s, e + 1),
        },
        RangeBy::Score(min, max) => (z.tree.rank_by(|e| !min.above_min(e.score)), z.tree.rank_by(|e| max.below_max(e.score))),
        RangeBy::Lex(min, max) => {
            let (Some(first), Some(last)) = (z.tree.first(), z.tree.last()) else { return Some((0, 0)) };
            if first.score.total_cmp(&last.score) != std::cmp::Ordering::Equal {
                return None;
            }
            (z.tree.rank_by(|e| !min.above_min(&e.member)), z.tree.rank_by(|e| max.below_max(&e.member)))
        }
    };
    Some((start, end.max(start)))
}

/// Every member within lex bounds, by a scan (for sets of mixed scores; see `span`).
fn lex_scan<'a>(z: &'a ZSet, min: &'a LexBound, max: &'a LexBound, rev: bool) -> impl Iterator<Item = &'a ScoredMember> + 'a {
    let from = if rev { z.len().saturating_sub(1) } else { 0 };
    z.tree.iter_from(from, z.len(), rev).filter(move |e| min.above_min(&e.member) && max.below_max(&e.member))
}

/// How many elements `by` covers (ZCOUNT, ZLEXCOUNT), without visiting them.
fn count_in(z: &ZSet, by: &RangeBy) -> usize {
    match (span(z, by, false), by) {
        (Some((start, end)), _) => end - start,
        (None, RangeBy::Lex(min, max)) => lex_scan(z, min, max, false).count(),
        (None, _) => unreachable!("only lex bounds need a scan"),
    }
}

/// Selects elements; `min`/`max` are in ascending terms whatever `rev` is. `offset` and
/// `limit` (LIMIT; -1: no limit) apply to score and lex ranges.
pub fn select(z: &ZSet, by: &RangeBy, rev: bool, offset: i64, limit: i64) -> Vec<(Bytes, f64)> {
    let pair = |e: &ScoredMember| (e.member.clone(), e.score);
    if offset < 0 && !matches!(by, RangeBy::Rank(..)) {
        return Vec::new();
    }
    let (skip, limit) = match by {
        RangeBy::Rank(..) => (0, usize::MAX),
        _ => (offset as usize, usize::try_from(limit).unwrap_or(usize::MAX)),
    };
    match (span(z, by, rev), by) {
        (Some((start, end)), _) => {
            let n = (end - start).saturating_sub(skip).min(limit);
            if n == 0 {
                return Vec::new();
            }
            let from = if rev { end - 1 - skip } else { start + skip };
            z.tree.iter_from(from, n, rev).map(pair).collect()
        }
        (None, RangeBy::Lex(min, max)) => lex_scan(z, min, max, rev).skip(skip).take(limit).map(pair).collect(),
        (None, _) => unreachable!("only lex bounds need a scan"),
    }
}

/// Writes members, with scores as Redis does (RESP2: flat; RESP3: [member, score] pairs).
fn write_with_scores(ctx: &mut Ctx, items: &[(Bytes, f64)], with_scores: bool) {
    if with_scores && ctx.resp3() {
        ctx.out.array_len(items.len());
        for (m, s) in items {
            ctx.out.array_len(2);
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    } else {
        ctx.out.array_len(items.len() * if with_scores { 2 } else { 1 });
        for (m, s) in items {
            ctx.out.bulk(m);
            if with_scores {
                ctx.out.double(*s);
            }
        }
    }
}

pub fn zadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) = (false, false, false, false, false, false);
    let mut i = 2;
    while i < argv.len() {
        let a = argv[i];
        if is(a, "NX") {
            nx = true;
        } else if is(a, "XX") {
            xx = true;
        } else if is(a, "GT") {
            gt = true;
        } else if is(a, "LT") {
            lt = true;
        } else if is(a, "CH") {
            ch = true;
        } else if is(a, "INCR") {
            incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let pairs = &argv[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if nx && xx {
        return Err(err("ERR XX and NX options at the same time are not compatible"));
    }
    if (gt as u8 + lt as u8 + nx as u8) > 1 {
        return Err(err("ERR GT, LT, and/or NX options at the same time are not compatible"));
    }
    if incr && pairs.len() > 2 {
        return Err(err("ERR INCR option supports a single increment-element pair"));
    }
    let scores: Vec<f64> = pairs.chunks(2).map(|p| float(p[0])).collect::<Result<_, _>>()?;
    let key = argv[1];
    if xx && zset(&mut ctx.data, key)?.is_none() {
        if incr {
            ctx.out.null()
        } else {
            ctx.out.int(0)
        }
        return Ok(());
    }
    let z = as_z(ctx.data.coll_or_create(key, Kind::ZSet, new_zset)?);
    let (mut added, mut changed) = (0, 0);
    let mut incr_result = None;
    for (p, &score) in pairs.chunks(2).zip(&scores) {
        let m = p[1];
        match z.score(m) {
            Some(cur) => {
                if nx {
                    continue;
                }
                let new = if incr { cur + score } else { score };
                if new.is_nan() {
                    ctx.data.modified(key);
                    return Err(err("ERR resulting score is not a number (NaN)"));
                }
                if (gt && new <= cur) || (lt && new >= cur) {
                    continue;
                }
                if new != cur {
                    z.insert(m, new);
                    changed += 1;
                }
                incr_result = Some(new);
            }
            None => {
                if xx {
                    continue;
                }
                z.insert(m, score);
                added += 1;
                incr_result = Some(score);
            }
        }
    }
    // Nothing added or changed is no change (WATCH, notifications).
    ctx.data.settle(key, added + changed > 0);
    if added > 0 {
        ctx.data.signal(key);
    }
    if incr {
        match incr_result {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    } else {
        ctx.out.int(if ch { added + changed } else { added });
    }
    Ok(())
}

pub fn zincrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = float(argv[2])?;
    let key = argv[1];
    let z = as_z(ctx.data.coll_or_create(key, Kind::ZSet, new_zset)?);
    let new = z.score(argv[3]).unwrap_or(0.0) + by;
    if new.is_nan() {
        ctx.data.modified(key);
        return Err(err("ERR resulting score is not a number (NaN)"));
    }
    z.insert(argv[3], new);
    ctx.data.modified(key);
    ctx.data.signal(key);
    ctx.out.double(new);
    Ok(())
}

pub fn zrem(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(z) = zset(&mut ctx.data, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let n = argv[2..].iter().filter(|m| z.remove(m).is_some()).count();
    if n > 0 {
        ctx.data.modified(key);
    }
    ctx.out.int(n as i64);
    Ok(())
}

pub fn zcard(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = zset(&mut ctx.data, argv[1])?.map(|z| z.len()).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn zcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = RangeBy::Score(score_bound(argv[2])?, score_bound(argv[3])?);
    let n = zset(&mut ctx.data, argv[1])?.map(|z| count_in(z, &by)).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn zlexcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = RangeBy::Lex(lex_bound(argv[2])?, lex_bound(argv[3])?);
    let n = zset(&mut ctx.data, argv[1])?.map(|z| count_in(z, &by)).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn zscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match zset(&mut ctx.data, argv[1])?.and_then(|z| z.score(argv[2])) {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn zmscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let z = zset(&mut ctx.data, argv[1])?;
    let scores: Vec<Option<f64>> = argv[2..].iter().map(|m| z.as_ref().and_then(|z| z.score(m))).collect();
    ctx.out.array_len(scores.len());
    for s in scores {
        match s {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn rank_generic(ctx: &mut Ctx, argv: &[&[u8]], rev: bool) -> CmdResult {
    let r = zset(&mut ctx.data, argv[1])?.and_then(|z| z.rank(argv[2]).map(|r| if rev { z.len() - 1 - r } else { r }));
    match r {
        Some(r) => ctx.out.int(r as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn zrank(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    rank_generic(ctx, argv, false)
}
pub fn zrevrank(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    rank_generic(ctx, argv, true)
}

/// A parsed range request of ZRANGE and its older forms.
struct RangeReq {
    by: RangeBy,
    rev: bool,
    offset: i64,
    limit: i64,
    with_scores: bool,
}

#[derive(PartialEq, Clone, Copy)]
enum Style {
    Rank,
    Score,
    Lex,
}

/// Parses `start stop [options]` where `min_first` says whether the first bound is the
/// minimum (ZRANGE without REV) or the maximum (ZREV* and ZRANGE … REV).
fn parse_range(args: &[&[u8]], style: Style, rev: bool, allow_opts: bool, store: bool) -> Result<RangeReq, CmdError> {
    let (mut style, mut rev) = (style, rev);
    let (mut offset, mut limit, mut with_scores, mut has_limit) = (0, -1, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if is(a, "WITHSCORES") && !store {
            with_scores = true;
        } else if is(a, "LIMIT") && i + 2 < args.len() {
            offset = int(args[i + 1])?;
            limit = int(args[i + 2])?;
            has_limit = true;
            i += 2;
        } else if allow_opts && is(a, "BYSCORE") && style == Style::Rank {
            style = Style::Score;
        } else if allow_opts && is(a, "BYLEX") && style == Style::Rank {
            style = Style::Lex;
        } else if allow_opts && is(a, "REV") {
            rev = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if has_limit && style == Style::Rank {
        return Err(err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
    }
    if with_scores && style == Style::Lex {
        return Err(err("ERR syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (a, b) = if rev && style != Style::Rank { (args[1], args[0]) } else { (args[0], args[1]) };
    let by = match style {
        Style::Rank => RangeBy::Rank(int(a)?, int(b)?),
        Style::Score => RangeBy::Score(score_bound(a)?, score_bound(b)?),
        Style::Lex => RangeBy::Lex(lex_bound(a)?, lex_bound(b)?),
    };
    Ok(RangeReq { by, rev, offset, limit, with_scores })
}

fn range_reply(ctx: &mut Ctx, key: &[u8], req: RangeReq) -> CmdResult {
    let items = match zset(&mut ctx.data, key)? {
        Some(z) => select(z, &req.by, req.rev, req.offset, req.limit),
        None => Vec::new(),
    };
    write_with_scores(ctx, &items, req.with_scores);
    Ok(())
}

pub fn zrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = parse_range(&argv[2..], Style::Rank, false, true, false)?;
    range_reply(ctx, argv[1], req)
}
pub fn zrevrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = parse_range(&argv[2..], Style::Rank, true, false, false)?;
    range_reply(ctx, argv[1], req)
}
pub fn zrangebyscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = parse_range(&argv[2..], Style::Score, false, false, false)?;
    range_reply(ctx, argv[1], req)
}
pub fn zrevrangebyscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = parse_range(&argv[2..], Style::Score, true, false, false)?;
    range_reply(ctx, argv[1], req)
}
pub fn zrangebylex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = parse_range(&argv[2..], Style::Lex, false, false, false)?;
    range_reply(ctx, argv[1], req)
}
pub fn zrevrangebylex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = parse_range(&argv[2..], Style::Lex, true, false, false)?;
    range_reply(ctx, argv[1], req)
}

fn store_items(ctx: &mut Ctx, dst: &[u8], items: &[(Bytes, f64)]) {
    ctx.data.delete(dst);
    if !items.is_empty() {
        let mut z = ZSet::default();
        for (m, s) in items {
            z.insert(m, *s);
        }
        let e = Entry::new_coll(dst, Collection::ZSet(z), &ctx.data.meta(None));
        ctx.data.insert(e);
        ctx.data.signal(dst);
    }
    ctx.out.int(items.len() as i64);
}

pub fn zrangestore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = parse_range(&argv[3..], Style::Rank, false, true, true)?;
    let items = match zset(&mut ctx.data, argv[2])? {
        Some(z) => select(z, &req.by, req.rev, req.offset, req.limit),
        None => Vec::new(),
    };
    store_items(ctx, argv[1], &items);
    Ok(())
}

fn remrange(ctx: &mut Ctx, argv: &[&[u8]], by: RangeBy) -> CmdResult {
    let key = argv[1];
    let Some(z) = zset(&mut ctx.data, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let items = select(z, &by, false, 0, -1);
    for (m, _) in &items {
        z.remove(m);
    }
    if !items.is_empty() {
        ctx.data.modified(key);
    }
    ctx.out.int(items.len() as i64);
    Ok(())
}

pub fn zremrangebyrank(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = RangeBy::Rank(int(argv[2])?, int(argv[3])?);
    remrange(ctx, argv, by)
}
pub fn zremrangebyscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = RangeBy::Score(score_bound(argv[2])?, score_bound(argv[3])?);
    remrange(ctx, argv, by)
}
pub fn zremrangebylex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let by = RangeBy::Lex(lex_bound(argv[2])?, lex_bound(argv[3])?);
    remrange(ctx, argv, by)
}

fn pop_n(z: &mut ZSet, max: bool, n: usize) -> Vec<(Bytes, f64)> {
    let mut out = Vec::with_capacity(n.min(z.len()));
    for _ in 0..n {
        let first = if max { z.tree.last() } else { z.tree.first() };
        let Some(e) = first.cloned() else { break };
        z.remove(&e.member);
        out.push((e.member, e.score));
    }
    out
}

fn zpop(ctx: &mut Ctx, argv: &[&[u8]], max: bool) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let n = argv.get(2).map(|a| count(a)).transpose()?;
    let key = argv[1];
    let items = match zset(&mut ctx.data, key)? {
        Some(z) => pop_n(z, max, n.unwrap_or(1)),
        None => Vec::new(),
    };
    if !items.is_empty() {
        ctx.data.modified(key);
    }
    if n.is_some() && ctx.resp3() {
        write_with_scores(ctx, &items, true);
    } else {
        ctx.out.array_len(items.len() * 2);
        for (m, s) in &items {
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    }
    Ok(())
}

pub fn zpopmin(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zpop(ctx, argv, false)
}
pub fn zpopmax(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zpop(ctx, argv, true)
}

fn bzpop(ctx: &mut Ctx, argv: &[&[u8]], max: bool) -> CmdResult {
    let t = timeout(argv[argv.len() - 1])?;
    let keys = &argv[1..argv.len() - 1];
    for key in keys {
        if let Some(z) = zset(&mut ctx.data, key)? {
            let items = pop_n(z, max, 1);
            ctx.data.modified(key);
            ctx.out.array_len(3);
            ctx.out.bulk(key);
            ctx.out.bulk(&items[0].0);
            ctx.out.double(items[0].1);
            return Ok(());
        }
    }
    block_or_timeout(ctx, keys.iter().map(|k| k.to_vec()).collect(), t, TimeoutReply::NullArray);
    Ok(())
}

pub fn bzpopmin(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bzpop(ctx, argv, false)
}
pub fn bzpopmax(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bzpop(ctx, argv, true)
}

fn min_max(a: &[u8]) -> Result<bool, CmdError> {
    if is(a, "MIN") {
        Ok(false)
    } else if is(a, "MAX") {
        Ok(true)
    } else {
        Err(CmdError::Syntax)
    }
}

fn zmpop_try(ctx: &mut Ctx, keys: &[&[u8]], max: bool, n: usize) -> Result<bool, CmdError> {
    for key in keys {
        if let Some(z) = zset(&mut ctx.data, key)? {
            let items = pop_n(z, max, n);
            ctx.data.modified(key);
            ctx.out.array_len(2);
            ctx.out.bulk(key);
            ctx.out.array_len(items.len());
            for (m, s) in &items {
                ctx.out.array_len(2);
                ctx.out.bulk(m);
                ctx.out.double(*s);
            }
            return Ok(true);
        }
    }
    Ok(false)
}

pub fn zmpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (keys, max, n) = parse_mpop(&argv[1..], min_max)?;
    if !zmpop_try(ctx, &keys, max, n)? {
        ctx.out.null_array();
    }
    Ok(())
}

pub fn bzmpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let t = timeout(argv[1])?;
    let (keys, max, n) = parse_mpop(&argv[2..], min_max)?;
    if !zmpop_try(ctx, &keys, max, n)? {
        block_or_timeout(ctx, keys.iter().map(|k| k.to_vec()).collect(), t, TimeoutReply::NullArray);
    }
    Ok(())
}

pub fn zrandmember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let c = super::hash::random_count(argv.get(2))?;
    let with_scores = match argv.get(3) {
        None => false,
        Some(a) if is(a, "WITHSCORES") => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    if argv.len() > 4 {
        return Err(CmdError::Syntax);
    }
    let cap = ctx.srv.limits.hard(ctx.conn.info.class());
    let Some(z) = zset(&mut ctx.data, argv[1])? else {
        if c.is_some() {
            ctx.out.array_len(0)
        } else {
            ctx.out.null()
        }
        return Ok(());
    };
    match c {
        None => {
            let m = z.dict.bucket(z.dict.random_bucket().unwrap()).unwrap().0.clone();
            ctx.out.bulk(&m);
        }
        Some(c) => write_random_entries(&mut ctx.out, &z.dict, c, cap, with_scores, |out, s| out.double(*s)),
    }
    Ok(())
}

pub fn zscan(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let cursor = parse_cursor(argv[2])?;
    let opts = ScanOpts::parse(&argv[3..], false)?;
    let mut items = Vec::new();
    let next = match zset(&mut ctx.data, argv[1])? {
        Some(z) => scan_page(&z.dict, cursor, &opts, |k, s| {
            items.push(k.clone());
            items.push(format_double_g17(*s).into_bytes().into_boxed_slice());
        }),
        None => 0,
    };
    write_scan(ctx, next, &items);
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// Reads the members and scores of a zset or plain set (score 1) for ZUNION & co.
fn input_members(data: &mut Data, key: &[u8]) -> Result<Option<Vec<(Bytes, f64)>>, CmdError> {
    match data.read(key) {
        None => Ok(None),
        Some(e) => match e.coll() {
            Some(Collection::ZSet(z)) => Ok(Some(z.tree.iter().map(|e| (e.member.clone(), e.score)).collect())),
            Some(Collection::Set(s)) => Ok(Some(s.iter().map(|(m, _)| (m.clone(), 1.0)).collect())),
            _ => Err(CmdError::WrongType),
        },
    }
}

fn aggregate(a: f64, b: f64, agg: Agg) -> f64 {
    match agg {
        Agg::Sum => {
            let s = a + b;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Agg::Min => a.min(b),
        Agg::Max => a.max(b),
    }
}

/// Parses `numkeys key... [WEIGHTS w...] [AGGREGATE x] [WITHSCORES]` and computes the result.
fn setop(ctx: &mut Ctx, args: &[&[u8]], op: SetOp, store: bool, cmd: &str) -> Result<(Vec<(Bytes, f64)>, bool), CmdError> {
    let nk = int(args[0])?;
    if nk <= 0 {
        return Err(err(format!("ERR at least 1 input key is needed for '{cmd}' command")));
    }
    let nk = nk as usize;
    if nk > args.len() - 1 {
        return Err(CmdError::Syntax);
    }
    let keys = &args[1..=nk];
    let mut weights = vec![1.0; nk];
    let mut agg = Agg::Sum;
    let mut with_scores = false;
    let mut i = nk + 1;
    while i < args.len() {
        if op != SetOp::Diff && is(args[i], "WEIGHTS") && i + nk < args.len() {
            for (j, w) in weights.iter_mut().enumerate() {
                *w = parse_f64(args[i + 1 + j]).ok_or_else(|| err("ERR weight value is not a float"))?;
            }
            i += nk + 1;
        } else if op != SetOp::Diff && is(args[i], "AGGREGATE") && i + 1 < args.len() {
            agg = match &*String::from_utf8_lossy(args[i + 1]).to_ascii_uppercase() {
                "SUM" => Agg::Sum,
                "MIN" => Agg::Min,
                "MAX" => Agg::Max,
                _ => return Err(CmdError::Syntax),
            };
            i += 2;
        } else if !store && is(args[i], "WITHSCORES") {
            with_scores = true;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut inputs = Vec::with_capacity(nk);
    for k in keys {
        inputs.push(input_members(&mut ctx.data, k)?);
    }
    let weigh = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut acc: BytesMap<f64> = BytesMap::new();
    match op {
        SetOp::Union => {
            for (inp, w) in inputs.iter().zip(&weights) {
                for (m, s) in inp.iter().flatten() {
                    let v = weigh(*s, *w);
                    let nv = match acc.get(m) {
                        Some(c) => aggregate(*c, v, agg),
                        None => v,
                    };
                    acc.insert(m, nv);
                }
            }
        }
        SetOp::Inter => {
            if inputs.iter().all(|i| i.is_some()) {
                let first = inputs[0].as_ref().unwrap();
                let lookups: Vec<BytesMap<f64>> = inputs[1..]
                    .iter()
                    .map(|i| {
                        let mut m = BytesMap::new();
                        for (k, s) in i.as_ref().unwrap() {
                            m.insert(k, *s);
                        }
                        m
                    })
                    .collect();
                'members: for (m, s) in first {
                    let mut v = weigh(*s, weights[0]);
                    for (j, l) in lookups.iter().enumerate() {
                        match l.get(m) {
                            Some(o) => v = aggregate(v, weigh(*o, weights[j + 1]), agg),
                            None => continue 'members,
                        }
                    }
                    acc.insert(m, v);
                }
            }
        }
        SetOp::Diff => {
            if let Some(first) = &inputs[0] {
                for (m, s) in first {
                    if !inputs[1..].iter().flatten().any(|i| i.iter().any(|(o, _)| o == m)) {
                        acc.insert(m, *s);
                    }
                }
            }
        }
    }
    let mut items: Vec<(Bytes, f64)> = acc.iter().map(|(m, s)| (m.clone(), *s)).collect();
    items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok((items, with_scores))
}

pub fn zunion(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (items, ws) = setop(ctx, &argv[1..], SetOp::Union, false, "zunion")?;
    write_with_scores(ctx, &items, ws);
    Ok(())
}
pub fn zinter(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (items, ws) = setop(ctx, &argv[1..], SetOp::Inter, false, "zinter")?;
    write_with_scores(ctx, &items, ws);
    Ok(())
}
pub fn zdiff(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (items, ws) = setop(ctx, &argv[1..], SetOp::Diff, false, "zdiff")?;
    write_with_scores(ctx, &items, ws);
    Ok(())
}
pub fn zunionstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (items, _) = setop(ctx, &argv[2..], SetOp::Union, true, "zunionstore")?;
    store_items(ctx, argv[1], &items);
    Ok(())
}
pub fn zinterstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (items, _) = setop(ctx, &argv[2..], SetOp::Inter, true, "zinterstore")?;
    store_items(ctx, argv[1], &items);
    Ok(())
}
pub fn zdiffstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (items, _) = setop(ctx, &argv[2..], SetOp::Diff, true, "zdiffstore")?;
    store_items(ctx, argv[1], &items);
    Ok(())
}

pub fn zintercard(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // Redis shares ZINTER's numkeys check (and words) here, unlike SINTERCARD's.
    if int(argv[1]).is_ok_and(|n| n <= 0) {
        return Err(err("ERR at least 1 input key is needed for 'zintercard' command"));
    }
    let (keys, limit) = parse_card_args(&argv[1..])?;
    let mut args: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
    let nk = keys.len().to_string();
    args.push(nk.as_bytes());
    args.extend(keys);
    let (items, _) = setop(ctx, &args, SetOp::Inter, true, "zintercard")?;
    let n = items.len();
    ctx.out.int(if limit > 0 { n.min(limit) } else { n } as i64);
    Ok(())
}
