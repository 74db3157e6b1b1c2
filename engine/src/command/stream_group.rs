//! Stream consumer groups: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, and what XREADGROUP
//! does to a group when it serves a consumer (new entries, or the consumer's history).

use terrace_commands::notify::class::STREAM;

use super::args::{err, int, is, subcommand_error, CmdError};
use super::stream::{as_stream, no_group_for_key, parse_id, parse_interval, parse_strict_id, stream, write_entry, write_id};
use super::{CmdResult, Ctx};
use crate::keyspace::stream::{Group, Stream, StreamId, INVALID_ENTRIES_READ};
use crate::keyspace::{Collection, Kind};
use crate::protocol::ReplyWriter;

fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    err(format!("NOGROUP No such key '{}' or consumer group '{}'", String::from_utf8_lossy(key), String::from_utf8_lossy(group)))
}

/// XREADGROUP with `>`: delivers entries after the group's last ID to `consumer`, advancing
/// the group and (unless NOACK) adding them to the pending lists.
pub fn reply_new(out: &mut ReplyWriter, s: &mut Stream, group: &[u8], consumer: &[u8], count: usize, noack: bool, now: i64) {
    let start = s.groups[group].last_id.incr().unwrap_or(StreamId::MAX);
    let limit = if count == 0 { usize::MAX } else { count };
    let ids: Vec<StreamId> = s.range(start, StreamId::MAX, false).take(limit).map(|(id, _)| *id).collect();
    out.array_len(ids.len());
    for id in ids {
        s.advance_group(group, id);
        write_entry(out, id, s.get(id).expect("listed above"));
        if !noack {
            s.groups.get_mut(group).expect("exists").assign(id, consumer, now, 1);
        }
    }
}

/// XREADGROUP with an ID: the consumer's own pending entries after `start`; entries deleted
/// from the stream since are reported with a null field list.
pub fn reply_history(out: &mut ReplyWriter, s: &mut Stream, group: &[u8], consumer: &[u8], start: StreamId, count: usize, now: i64) {
    let limit = if count == 0 { usize::MAX } else { count };
    let ids: Vec<StreamId> = s.groups[group].consumers.get(consumer).map(|c| c.pel.range(start..).take(limit).copied().collect()).unwrap_or_default();
    out.array_len(ids.len());
    for id in ids {
        match s.get(id) {
            Some(fields) => {
                write_entry(out, id, fields);
                if let Some(p) = s.groups.get_mut(group).and_then(|g| g.pel.get_mut(&id)) {
                    p.delivery_time = now;
                    p.delivery_count += 1;
                }
            }
            None => {
                out.array_len(2);
                write_id(out, id);
                out.null_array();
            }
        }
    }
}

pub fn xgroup(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = argv[1];
    if is(sub, "HELP") && argv.len() == 2 {
        ctx.out.help(&[
            "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
            "HELP",
            "    Prints this help.",
        ]);
        return Ok(());
    }
    let create = is(sub, "CREATE");
    let setid = is(sub, "SETID");
    let shape_ok = (create && (5..=8).contains(&argv.len()))
        || (setid && (argv.len() == 5 || argv.len() == 7))
        || (is(sub, "DESTROY") && argv.len() == 4)
        || ((is(sub, "CREATECONSUMER") || is(sub, "DELCONSUMER")) && argv.len() == 5);
    if argv.len() < 4 || !shape_ok {
        return Err(subcommand_error("xgroup", argv));
    }
    let (key, group) = (argv[2], argv[3]);
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    let mut i = 5;
    while i < argv.len() {
        if create && is(argv[i], "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && is(argv[i], "ENTRIESREAD") && i + 1 < argv.len() {
            entries_read = int(argv[i + 1])?;
            if entries_read < 0 && entries_read != INVALID_ENTRIES_READ {
                return Err(err("ERR value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(subcommand_error("xgroup", argv));
        }
    }
    let exists = stream(&mut ctx.data, key)?.is_some();
    if !exists && !mkstream {
        return Err(err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
    }
    if exists {
        let s = stream(&mut ctx.data, key)?.expect("exists");
        if !s.groups.contains_key(group) && (setid || is(sub, "CREATECONSUMER") || is(sub, "DELCONSUMER")) {
            return Err(no_group_for_key(group, key));
        }
    }
    let now = ctx.data.now;
    if create {
        let id = match argv[4] {
            b"$" => stream(&mut ctx.data, key)?.map(|s| s.last_id).unwrap_or_default(),
            other => parse_strict_id(other)?,
        };
        let s = as_stream(ctx.data.coll_or_create(key, Kind::Stream, || Collection::Stream(Box::default()))?);
        let created = !s.groups.contains_key(group);
        if created {
            s.groups.insert(group.into(), Group::new(id, entries_read));
        }
        ctx.data.modified(key);
        if !created {
            return Err(err("BUSYGROUP Consumer Group name already exists"));
        }
        ctx.data.notify_event(STREAM, "xgroup-create", key);
        ctx.out.ok();
        return Ok(());
    }
    let s = stream(&mut ctx.data, key)?.expect("exists");
    if setid {
        let id = match argv[4] {
            b"$" => s.last_id,
            other => parse_id(other, 0)?,
        };
        let g = s.groups.get_mut(group).expect("checked");
        g.last_id = id;
        g.entries_read = entries_read;
        ctx.out.ok();
        ctx.data.notify_event(STREAM, "xgroup-setid", key);
    } else if is(sub, "DESTROY") {
        let removed = s.groups.remove(group).is_some();
        ctx.out.int(removed as i64);
        if removed {
            ctx.data.signal(key);
            ctx.data.notify_event(STREAM, "xgroup-destroy", key);
        }
    } else if is(sub, "CREATECONSUMER") {
        let g = s.groups.get_mut(group).expect("checked");
        let created = !g.consumers.contains_key(argv[4]);
        if created {
            g.touch_consumer(argv[4], now);
            ctx.data.notify_event(STREAM, "xgroup-createconsumer", key);
        }
        ctx.out.int(created as i64);
    } else {
        let g = s.groups.get_mut(group).expect("checked");
        let deleted = g.delete_consumer(argv[4]);
        ctx.out.int(deleted.unwrap_or(0) as i64);
        if deleted.is_some() {
            ctx.data.notify_event(STREAM, "xgroup-delconsumer", key);
        }
    }
    ctx.data.modified(key);
    Ok(())
}

pub fn xack(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(g) = stream(&mut ctx.data, key)?.and_then(|s| s.groups.get_mut(argv[2])) else {
        ctx.out.int(0);
        return Ok(());
    };
    let ids = argv[3..].iter().map(|a| parse_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let n = ids.into_iter().filter(|id| g.ack(*id)).count();
    if n > 0 {
        ctx.data.modified(key);
    }
    ctx.out.int(n as i64);
    Ok(())
}

pub fn xpending(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (key, group) = (argv[1], argv[2]);
    let justinfo = argv.len() == 3;
    if argv.len() != 3 && !(6..=9).contains(&argv.len()) {
        return Err(CmdError::Syntax);
    }
    let (mut start, mut end, mut count, mut min_idle, mut consumer) = (StreamId::ZERO, StreamId::MAX, 0i64, 0i64, None);
    if argv.len() >= 6 {
        let mut at = 3;
        if is(argv[3], "IDLE") {
            min_idle = int(argv[4])?;
            if argv.len() < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        count = int(argv[at + 2])?.max(0);
        start = parse_interval(argv[at], 0, true)?;
        end = parse_interval(argv[at + 1], u64::MAX, false)?;
        if at + 3 < argv.len() {
            consumer = Some(argv[at + 3]);
        }
    }
    let now = ctx.data.now;
    let Some(g) = stream(&mut ctx.data, key)?.and_then(|s| s.groups.get(group)) else {
        return Err(no_key_or_group(key, group));
    };
    let out = &mut ctx.out;
    if justinfo {
        out.array_len(4);
        out.int(g.pel.len() as i64);
        if g.pel.is_empty() {
            out.null();
            out.null();
            out.null_array();
        } else {
            write_id(out, *g.pel.keys().next().expect("non-empty"));
            write_id(out, *g.pel.keys().next_back().expect("non-empty"));
            let with: Vec<_> = g.consumers.iter().filter(|(_, c)| !c.pel.is_empty()).collect();
            out.array_len(with.len());
            for (name, c) in with {
                out.array_len(2);
                out.bulk(name);
                out.bulk_int(c.pel.len() as i64);
            }
        }
        return Ok(());
    }
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match g.consumers.get(name) {
            Some(c) if start <= end => c.pel.range(start..=end).copied().collect(),
            Some(_) => Vec::new(),
            None => {
                out.array_len(0);
                return Ok(());
            }
        },
        None if start <= end => g.pel.range(start..=end).map(|(id, _)| *id).collect(),
        None => Vec::new(),
    };
    let rows: Vec<_> =
        ids.into_iter().map(|id| (id, &g.pel[&id])).filter(|(_, p)| min_idle == 0 || now - p.delivery_time >= min_idle).take(count as usize).collect();
    out.array_len(rows.len());
    for (id, p) in rows {
        out.array_len(4);
        write_id(out, id);
        out.bulk(&p.consumer);
        out.int((now - p.delivery_time).max(0));
        out.int(p.delivery_count as i64);
    }
    Ok(())
}

pub fn xclaim(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (key, group, consumer) = (argv[1], argv[2], argv[3]);
    if stream(&mut ctx.data, key)?.and_then(|s| s.groups.get(group)).is_none() {
        return Err(no_key_or_group(key, group));
    }
    let min_idle = int(argv[4]).map_err(|_| err("ERR Invalid min-idle-time argument for XCLAIM"))?.max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < argv.len() {
        match parse_strict_id(argv[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.data.now;
    let (mut force, mut justid, mut retrycount, mut delivery, mut last_id) = (false, false, None, None, StreamId::ZERO);
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let opt = argv[j];
        if is(opt, "FORCE") {
            force = true;
        } else if is(opt, "JUSTID") {
            justid = true;
        } else if is(opt, "IDLE") && more > 0 {
            j += 1;
            delivery = Some(now - int(argv[j]).map_err(|_| err("ERR Invalid IDLE option argument for XCLAIM"))?);
        } else if is(opt, "TIME") && more > 0 {
            j += 1;
            delivery = Some(int(argv[j]).map_err(|_| err("ERR Invalid TIME option argument for XCLAIM"))?);
        } else if is(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            retrycount = Some(int(argv[j]).map_err(|_| err("ERR Invalid RETRYCOUNT option argument for XCLAIM"))?);
        } else if is(opt, "LASTID") && more > 0 {
            j += 1;
            last_id = parse_strict_id(argv[j])?;
        } else {
            return Err(err(format!("ERR Unrecognized XCLAIM option '{}'", String::from_utf8_lossy(opt))));
        }
        j += 1;
    }
    let delivery = match delivery {
        Some(t) if t >= 0 && t <= now => t,
        _ => now,
    };
    let s = stream(&mut ctx.data, key)?.expect("checked");
    let entry_exists: Vec<bool> = ids.iter().map(|id| s.contains(*id)).collect();
    let g = s.groups.get_mut(group).expect("checked");
    if last_id > g.last_id {
        g.last_id = last_id;
    }
    let created_consumer = g.touch_consumer(consumer, now);
    let mut claimed = Vec::new();
    for (id, exists) in ids.into_iter().zip(entry_exists) {
        if !exists {
            // The entry is gone: drop it from the PEL.
            g.ack(id);
            continue;
        }
        let (count, owner_idle) = match g.pel.get(&id) {
            Some(p) => (p.delivery_count, Some(now - p.delivery_time)),
            None if force => (0, None),
            None => continue,
        };
        if let Some(idle) = owner_idle {
            if min_idle > 0 && idle < min_idle {
                continue;
            }
        }
        let count = match retrycount {
            Some(n) if n >= 0 => n as u64,
            _ if justid => count,
            _ => count + 1,
        };
        g.assign(id, consumer, delivery, count);
        claimed.push(id);
    }
    ctx.out.array_len(claimed.len());
    for id in claimed {
        if justid {
            write_id(&mut ctx.out, id);
        } else {
            write_entry(&mut ctx.out, id, s.get(id).expect("checked"));
        }
    }
    if created_consumer {
        ctx.data.notify_event(STREAM, "xgroup-createconsumer", key);
    }
    ctx.data.modified(key);
    Ok(())
}

pub fn xautoclaim(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (key, group, consumer) = (argv[1], argv[2], argv[3]);
    let min_idle = int(argv[4]).map_err(|_| err("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?.max(0);
    let start = parse_interval(argv[5], 0, true)?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is(argv[j], "COUNT") && more > 0 {
            count = int(argv[j + 1]).ok().filter(|n| (1..=i64::MAX / 16).contains(n)).ok_or_else(|| err("ERR COUNT must be > 0"))?;
            j += 1;
        } else if is(argv[j], "JUSTID") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = ctx.data.now;
    let Some(s) = stream(&mut ctx.data, key)?.filter(|s| s.groups.contains_key(group)) else {
        return Err(no_key_or_group(key, group));
    };
    if s.groups.get_mut(group).expect("checked").touch_consumer(consumer, now) {
        ctx.data.notify_event(STREAM, "xgroup-createconsumer", key);
    }
    let s = stream(&mut ctx.data, key)?.expect("checked");
    let mut attempts = count.saturating_mul(10);
    let mut remaining = count;
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let pending: Vec<StreamId> = s.groups[group].pel.range(start..).map(|(id, _)| *id).collect();
    let mut next = StreamId::ZERO;
    let mut iter = pending.into_iter().peekable();
    while attempts > 0 && remaining > 0 {
        let Some(id) = iter.next() else { break };
        attempts -= 1;
        let exists = s.contains(id);
        let g = s.groups.get_mut(group).expect("checked");
        if !exists {
            g.ack(id);
            deleted.push(id);
            remaining -= 1;
            continue;
        }
        let p = &g.pel[&id];
        if min_idle > 0 && now - p.delivery_time < min_idle {
            continue;
        }
        let count = if justid { p.delivery_count } else { p.delivery_count + 1 };
        g.assign(id, consumer, now, count);
        claimed.push(id);
        remaining -= 1;
    }
    if let Some(id) = iter.next() {
        next = id;
    }
    let out = &mut ctx.out;
    out.array_len(3);
    write_id(out, next);
    out.array_len(claimed.len());
    for id in claimed {
        if justid {
            write_id(out, id);
        } else {
            write_entry(out, id, s.get(id).expect("checked"));
        }
    }
    out.array_len(deleted.len());
    for id in deleted {
        write_id(out, id);
    }
    ctx.data.modified(key);
    Ok(())
}
