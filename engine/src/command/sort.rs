//! SORT and SORT_RO: sort a list, set or sorted set, optionally by and with values of other
//! keys (`BY weight_*`, `GET object_*->field`), and store the result as a list.
//!
//! The patterns can name any key, so SORT locks the whole current database.

use std::cmp::Ordering;
use std::collections::VecDeque;

use super::args::{err, int, is, parse_f64, CmdError};
use super::{CmdResult, Ctx, Data};
use crate::keyspace::value::Bytes;
use crate::keyspace::{Collection, Entry, ValueRef};

/// Resolves a BY/GET pattern for one element: `#` is the element itself; otherwise the first
/// `*` is replaced by it, and `key->field` reads a hash field.
fn lookup(data: &mut Data, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(elem.to_vec());
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let (key_pat, field) = match pattern.windows(2).rposition(|w| w == b"->") {
        // (`key->` with nothing after the arrow names a plain key, arrow included.)
        Some(arrow) if arrow > star && arrow + 2 < pattern.len() => (&pattern[..arrow], Some(&pattern[arrow + 2..])),
        _ => (pattern, None),
    };
    let mut key = key_pat[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(&key_pat[star + 1..]);
    let (ks, db) = (data.ks, data.db);
    let e = data.peek(&key)?;
    match (e.value(), field) {
        (ValueRef::Str(v), None) => Some(v.to_vec()),
        (ValueRef::Encoded(_), None) => super::decoded(ks, db, e).ok().flatten().map(|v| v.into_owned()),
        (ValueRef::Coll(Collection::Hash(h)), Some(f)) => h.get(f).map(|v| v.to_vec()),
        _ => None,
    }
}

fn sort_generic(ctx: &mut Ctx, argv: &[&[u8]], read_only: bool) -> CmdResult {
    let mut by: Option<&[u8]> = None;
    let mut gets: Vec<&[u8]> = Vec::new();
    let (mut desc, mut alpha) = (false, false);
    let mut limit: Option<(i64, i64)> = None;
    let mut store: Option<&[u8]> = None;
    let mut i = 2;
    while i < argv.len() {
        let a = argv[i];
        if is(a, "ASC") {
            desc = false;
        } else if is(a, "DESC") {
            desc = true;
        } else if is(a, "ALPHA") {
            alpha = true;
        } else if is(a, "LIMIT") && i + 2 < argv.len() {
            limit = Some((int(argv[i + 1])?, int(argv[i + 2])?));
            i += 2;
        } else if is(a, "STORE") && i + 1 < argv.len() && !read_only {
            store = Some(argv[i + 1]);
            i += 1;
        } else if is(a, "BY") && i + 1 < argv.len() {
            by = Some(argv[i + 1]);
            i += 1;
        } else if is(a, "GET") && i + 1 < argv.len() {
            gets.push(argv[i + 1]);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let key = argv[1];
    let (mut elems, ordered, is_set): (Vec<Bytes>, bool, bool) = match ctx.data.read(key) {
        None => (Vec::new(), false, false),
        Some(e) => match e.coll() {
            Some(Collection::List(l)) => (l.iter().cloned().collect(), false, false),
            Some(Collection::Set(s)) => (s.iter().map(|(m, _)| m.clone()).collect(), false, true),
            Some(Collection::ZSet(z)) => (z.tree.iter().map(|e| e.member.clone()).collect(), true, false),
            _ => return Err(CmdError::WrongType),
        },
    };
    // BY with no '*' means "don't sort" (for a sorted set, keep its order) — but a set
    // stored or sorted inside a script is sorted by its elements, so the result does not
    // depend on the set's internal order (Redis forces ALPHA there).
    let mut dont_sort = by.is_some_and(|p| !p.contains(&b'*'));
    if dont_sort && is_set && (store.is_some() || ctx.in_script) {
        (dont_sort, alpha, by) = (false, true, None);
    }
    if !dont_sort {
        let mut keyed: Vec<(Bytes, Option<Vec<u8>>)> = elems
            .into_iter()
            .map(|e| {
                let w = match by {
                    Some(p) => lookup(&mut ctx.data, p, &e),
                    None => Some(e.to_vec()),
                };
                (e, w)
            })
            .collect();
        elems = if alpha {
            keyed.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            keyed.into_iter().map(|(e, _)| e).collect()
        } else {
            let mut scored = Vec::with_capacity(keyed.len());
            for (e, w) in keyed {
                let s = match &w {
                    None => 0.0,
                    Some(v) => parse_f64(v).ok_or_else(|| err("ERR One or more scores can't be converted into double"))?,
                };
                scored.push((e, s));
            }
            scored.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(Ordering::Equal).then_with(|| a.0.cmp(&b.0)));
            scored.into_iter().map(|(e, _)| e).collect()
        };
        if desc {
            elems.reverse();
        }
    } else if ordered && desc {
        elems.reverse();
    }
    if let Some((off, count)) = limit {
        let off = off.max(0) as usize;
        let count = if count < 0 { usize::MAX } else { count as usize };
        elems = elems.into_iter().skip(off).take(count).collect();
    }
    // Each output row: the element itself, or one value per GET pattern.
    let rows: Vec<Option<Vec<u8>>> = if gets.is_empty() {
        elems.iter().map(|e| Some(e.to_vec())).collect()
    } else {
        let mut v = Vec::with_capacity(elems.len() * gets.len());
        for e in &elems {
            for g in &gets {
                v.push(lookup(&mut ctx.data, g, e));
            }
        }
        v
    };
    match store {
        Some(dst) => {
            let n = rows.len();
            ctx.data.delete(dst);
            if n > 0 {
                let list: VecDeque<Bytes> = rows.into_iter().map(|r| r.unwrap_or_default().into_boxed_slice()).collect();
                let e = Entry::new_coll(dst, Collection::List(list), &ctx.data.meta(None));
                ctx.data.insert(e);
                ctx.data.signal(dst);
            }
            ctx.out.int(n as i64);
        }
        None => {
            ctx.out.array_len(rows.len());
            for r in rows {
                match r {
                    Some(v) => ctx.out.bulk(&v),
                    None => ctx.out.null(),
                }
            }
        }
    }
    Ok(())
}

pub fn sort(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, argv, false)
}

pub fn sort_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, argv, true)
}
