//! Stream commands without consumer groups: XADD XRANGE XREVRANGE XLEN XDEL XTRIM XSETID
//! XREAD (and the shared XREAD/XREADGROUP argument parsing and reply), XINFO. Consumer-group
//! commands are in `stream_group.rs`.

use super::args::{err, int, is, subcommand_error, CmdError};
use super::list::block_or_timeout;
use super::stream_group;
use super::{CmdResult, Ctx, Data, TimeoutReply};
use crate::keyspace::stream::{AppendError, Group, Stream, StreamId, TrimStrategy, INVALID_ENTRIES_READ};
use crate::keyspace::value::Bytes;
use crate::keyspace::{Collection, Kind};
use crate::protocol::ReplyWriter;

pub const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

fn new_stream() -> Collection {
    Collection::Stream(Box::default())
}

pub fn as_stream(c: &mut Collection) -> &mut Stream {
    match c {
        Collection::Stream(s) => s,
        _ => unreachable!("kind checked by Data::coll"),
    }
}

/// The stream at `key` (None if missing, WRONGTYPE if another type).
pub fn stream<'a>(data: &'a mut Data, key: &[u8]) -> Result<Option<&'a mut Stream>, CmdError> {
    Ok(data.coll(key, Kind::Stream)?.map(as_stream))
}

/// Parses an unsigned 64-bit decimal as Redis's `string2ull` accepts it.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Parses `ms-seq` or `ms` (sequence `missing_seq`); `-` and `+` unless `strict`.
/// With `allow_auto_seq`, `ms-*` parses as (ms, seq_given = false).
fn parse_id_generic(arg: &[u8], missing_seq: u64, strict: bool, allow_auto_seq: bool) -> Result<(StreamId, bool), CmdError> {
    let invalid = || err(INVALID_ID);
    if arg.len() > 127 {
        return Err(invalid());
    }
    match arg {
        b"-" | b"+" if strict => return Err(invalid()),
        b"-" => return Ok((StreamId::ZERO, true)),
        b"+" => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    match arg.iter().position(|&b| b == b'-') {
        None => Ok((StreamId::new(parse_u64(arg).ok_or_else(invalid)?, missing_seq), true)),
        Some(dash) => {
            let ms = parse_u64(&arg[..dash]).ok_or_else(invalid)?;
            let rest = &arg[dash + 1..];
            if allow_auto_seq && rest == b"*" {
                return Ok((StreamId::new(ms, 0), false));
            }
            Ok((StreamId::new(ms, parse_u64(rest).ok_or_else(invalid)?), true))
        }
    }
}

/// An ID where `-` and `+` are allowed.
pub fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    parse_id_generic(arg, missing_seq, false, false).map(|(id, _)| id)
}

/// An ID where `-` and `+` are not allowed.
pub fn parse_strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_id_generic(arg, 0, true, false).map(|(id, _)| id)
}

/// One end of a range: an ID, `-`/`+`, or `(ID` for an exclusive end.
pub fn parse_interval(arg: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id_generic(&arg[1..], missing_seq, true, false)?.0;
        let moved = if start { id.incr() } else { id.decr() };
        return moved.ok_or_else(|| err(if start { "ERR invalid start ID for the interval" } else { "ERR invalid end ID for the interval" }));
    }
    parse_id(arg, missing_seq)
}

pub fn write_id(out: &mut ReplyWriter, id: StreamId) {
    out.bulk(id.to_string().as_bytes());
}

/// `[id, [field, value, ...]]`.
pub fn write_entry(out: &mut ReplyWriter, id: StreamId, fields: &[Bytes]) {
    out.array_len(2);
    write_id(out, id);
    out.array_len(fields.len());
    for f in fields {
        out.bulk(f);
    }
}

/// Trimming options shared by XADD and XTRIM.
struct TrimArgs {
    strategy: Option<TrimStrategy>,
    approx: bool,
    limit: u64,
}

/// What XADD's options parse into.
struct AddArgs {
    trim: TrimArgs,
    nomkstream: bool,
    /// None = `*`; Some((id, seq_given)).
    id: Option<(StreamId, bool)>,
    /// Index of the ID argument.
    id_pos: usize,
}

/// Parses the options of XADD (`xadd`) or XTRIM, as Redis's streamParseAddOrTrimArgsOrReply.
fn parse_add_or_trim(argv: &[&[u8]], xadd: bool) -> Result<AddArgs, CmdError> {
    let mut strategy = None;
    let mut approx = false;
    let mut limit: Option<i64> = None;
    let mut nomkstream = false;
    let mut id = None;
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        let opt = argv[i];
        if xadd && opt == b"*" {
            break;
        } else if more > 0 && (is(opt, "MAXLEN") || is(opt, "MINID")) {
            if strategy.is_some() {
                return Err(err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            approx = false;
            let next = argv[i + 1];
            if more >= 2 && (next == b"~" || next == b"=") {
                approx = next == b"~";
                i += 1;
            }
            let arg = argv[i + 1];
            strategy = Some(if is(opt, "MAXLEN") {
                let n = int(arg)?;
                if n < 0 {
                    return Err(err("ERR The MAXLEN argument must be >= 0."));
                }
                TrimStrategy::MaxLen(n as u64)
            } else {
                TrimStrategy::MinId(parse_strict_id(arg)?)
            });
            i += 1;
        } else if more > 0 && is(opt, "LIMIT") {
            let n = int(argv[i + 1])?;
            if n < 0 {
                return Err(err("ERR The LIMIT argument must be >= 0."));
            }
            limit = Some(n);
            i += 1;
        } else if xadd && is(opt, "NOMKSTREAM") {
            nomkstream = true;
        } else if xadd {
            id = Some(parse_id_generic(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if limit.unwrap_or(0) != 0 && strategy.is_none() {
        return Err(err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && strategy.is_none() {
        return Err(err("ERR syntax error, XTRIM must be called with a trimming strategy"));
    }
    let limit = match limit {
        Some(_) if !approx => return Err(err("ERR syntax error, LIMIT cannot be used without the special ~ option")),
        Some(n) => n as u64,
        None if approx => 100 * crate::keyspace::stream::NODE_MAX_ENTRIES as u64,
        None => 0,
    };
    Ok(AddArgs { trim: TrimArgs { strategy, approx, limit }, nomkstream, id, id_pos: i })
}

pub fn xadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let args = parse_add_or_trim(argv, true)?;
    let fields = &argv[(args.id_pos + 1).min(argv.len())..];
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return Err(CmdError::WrongArgs("xadd"));
    }
    if let Some((id, true)) = args.id {
        if id.is_zero() {
            return Err(err("ERR The ID specified in XADD must be greater than 0-0"));
        }
    }
    if args.nomkstream && stream(&mut ctx.data, key)?.is_none() {
        ctx.out.null();
        return Ok(());
    }
    let now = ctx.data.now.max(0) as u64;
    let s = as_stream(ctx.data.coll_or_create(key, Kind::Stream, new_stream)?);
    if s.last_id == StreamId::MAX {
        return Err(err("ERR The stream has exhausted the last possible ID, unable to add more items"));
    }
    let fields: Box<[Bytes]> = fields.iter().map(|f| Bytes::from(*f)).collect();
    let id = match s.append(fields, args.id, now) {
        Ok(id) => id,
        Err(AppendError::NotGreater) => {
            ctx.data.modified(key);
            return Err(err("ERR The ID specified in XADD is equal or smaller than the target stream top item"));
        }
    };
    if let Some(strategy) = args.trim.strategy {
        s.trim(strategy, args.trim.approx, args.trim.limit);
    }
    write_id(&mut ctx.out, id);
    ctx.data.modified(key);
    ctx.data.signal(key);
    if !matches!(args.id, Some((_, true))) && ctx.srv.records_writes() && ctx.conn.replay_now.is_none() {
        // The ID was made here (`*`, `ms-*`): the log and replicas get it, not the clock.
        let made = id.to_string();
        let mut logged = argv.to_vec();
        logged[args.id_pos] = made.as_bytes();
        ctx.data.log(ctx.conn.ns_base, &logged);
    }
    Ok(())
}

fn range_generic(ctx: &mut Ctx, argv: &[&[u8]], rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (argv[3], argv[2]) } else { (argv[2], argv[3]) };
    let start = parse_interval(start_arg, 0, true)?;
    let end = parse_interval(end_arg, u64::MAX, false)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < argv.len() {
        if is(argv[j], "COUNT") && j + 1 < argv.len() {
            count = int(argv[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = stream(&mut ctx.data, argv[1])? else {
        ctx.out.array_len(0);
        return Ok(());
    };
    if count == 0 {
        ctx.out.null_array();
        return Ok(());
    }
    let limit = if count < 0 { usize::MAX } else { count as usize };
    let items: Vec<_> = s.range(start, end, rev).take(limit).collect();
    ctx.out.array_len(items.len());
    for (id, f) in items {
        write_entry(&mut ctx.out, *id, f);
    }
    Ok(())
}

pub fn xrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    range_generic(ctx, argv, false)
}
pub fn xrevrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    range_generic(ctx, argv, true)
}

pub fn xlen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = stream(&mut ctx.data, argv[1])?.map(|s| s.len()).unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn xdel(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(s) = stream(&mut ctx.data, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let ids = argv[2..].iter().map(|a| parse_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let deleted = ids.into_iter().filter(|id| s.delete(*id)).count();
    if deleted > 0 {
        s.refresh_first_id();
        ctx.data.modified(key);
    }
    ctx.out.int(deleted as i64);
    Ok(())
}

pub fn xtrim(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let args = parse_add_or_trim(argv, false)?;
    let Some(s) = stream(&mut ctx.data, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let strategy = args.trim.strategy.expect("XTRIM parsing requires a strategy");
    let deleted = s.trim(strategy, args.trim.approx, args.trim.limit);
    if deleted > 0 {
        ctx.data.modified(key);
    }
    ctx.out.int(deleted as i64);
    Ok(())
}

pub fn xsetid(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let id = parse_strict_id(argv[2])?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::ZERO;
    let mut i = 3;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        if is(argv[i], "ENTRIESADDED") && more > 0 {
            let n = int(argv[i + 1])?;
            if n < 0 {
                return Err(err("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if is(argv[i], "MAXDELETEDID") && more > 0 {
            max_deleted = parse_strict_id(argv[i + 1])?;
            if id < max_deleted {
                return Err(err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let Some(s) = stream(&mut ctx.data, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    if !s.is_empty() {
        if id < s.last_valid_id() {
            return Err(err("ERR The ID specified in XSETID is smaller than the target stream top item"));
        }
        if entries_added.is_some_and(|n| (s.len() as u64) > n) {
            return Err(err("ERR The entries_added specified in XSETID is smaller than the target stream length"));
        }
    }
    s.last_id = id;
    if let Some(n) = entries_added {
        s.entries_added = n;
    }
    if !max_deleted.is_zero() {
        s.max_deleted = max_deleted;
    }
    ctx.data.modified(key);
    ctx.out.ok();
    Ok(())
}

/// XREAD / XREADGROUP arguments.
pub struct ReadArgs<'a> {
    pub block_ms: Option<u64>,
    pub count: usize,
    pub group: Option<(&'a [u8], &'a [u8])>,
    pub noack: bool,
    /// Index of the first key.
    pub keys_at: usize,
    pub nkeys: usize,
}

/// Parses XREAD / XREADGROUP options up to STREAMS (no key is looked at).
pub fn parse_read_args<'a>(argv: &[&'a [u8]], xreadgroup: bool) -> Result<ReadArgs<'a>, CmdError> {
    let mut a = ReadArgs { block_ms: None, count: 0, group: None, noack: false, keys_at: 0, nkeys: 0 };
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = argv[i];
        if is(o, "BLOCK") && more > 0 {
            i += 1;
            let t = int(argv[i]).map_err(|_| err("ERR timeout is not an integer or out of range"))?;
            if t < 0 {
                return Err(CmdError::NegativeTimeout);
            }
            a.block_ms = Some(t as u64);
        } else if is(o, "COUNT") && more > 0 {
            i += 1;
            a.count = int(argv[i])?.max(0) as usize;
        } else if is(o, "STREAMS") && more > 0 {
            a.keys_at = i + 1;
            let n = argv.len() - a.keys_at;
            if !n.is_multiple_of(2) {
                let (name, symbol) = if xreadgroup { ("xreadgroup", '>') } else { ("xread", '$') };
                return Err(err(format!("ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{symbol}' must be specified.")));
            }
            a.nkeys = n / 2;
            break;
        } else if is(o, "GROUP") && more >= 2 {
            if !xreadgroup {
                return Err(err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
            }
            a.group = Some((argv[i + 1], argv[i + 2]));
            i += 2;
        } else if is(o, "NOACK") {
            if !xreadgroup {
                return Err(err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
            }
            a.noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if a.keys_at == 0 {
        return Err(CmdError::Syntax);
    }
    if xreadgroup && a.group.is_none() {
        return Err(err("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(a)
}

/// Where a read starts for one stream.
#[derive(Clone, Copy)]
enum ReadFrom {
    /// Entries after this ID (XREAD, and XREADGROUP history).
    After(StreamId),
    /// XREADGROUP `>`: entries never delivered to the group.
    New,
}

pub fn xread(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    read_generic(ctx, argv, false)
}
pub fn xreadgroup(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    read_generic(ctx, argv, true)
}

fn read_generic(ctx: &mut Ctx, argv: &[&[u8]], xreadgroup: bool) -> CmdResult {
    let a = parse_read_args(argv, xreadgroup)?;
    if a.block_ms.is_some() && ctx.in_script {
        // Inside MULTI a BLOCK answers at once; a script is refused it, as Redis does.
        let name = if xreadgroup { "xreadgroup" } else { "xread" };
        return Err(super::args::err(format!("ERR {name} command is not allowed with BLOCK option from scripts")));
    }
    let keys = &argv[a.keys_at..a.keys_at + a.nkeys];
    let id_args = &argv[a.keys_at + a.nkeys..];
    // Resolve every ID (and check types and groups) before serving anything.
    let mut from = Vec::with_capacity(keys.len());
    let mut dollar_rewrites = Vec::new();
    for (i, (key, id_arg)) in keys.iter().zip(id_args).enumerate() {
        let s = stream(&mut ctx.data, key)?;
        if let Some((group, _)) = a.group {
            if !s.as_ref().is_some_and(|s| s.groups.contains_key(group)) {
                return Err(err(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(group)
                )));
            }
        }
        let f = match *id_arg {
            b"$" => {
                if xreadgroup {
                    return Err(err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
                }
                let last = s.map(|s| s.last_id).unwrap_or_default();
                dollar_rewrites.push((a.keys_at + a.nkeys + i, last));
                ReadFrom::After(last)
            }
            b">" => {
                if !xreadgroup {
                    return Err(err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
                }
                ReadFrom::New
            }
            other => ReadFrom::After(parse_strict_id(other)?),
        };
        from.push(f);
    }
    let now = ctx.data.now;
    let mut served = Vec::new();
    for (key, f) in keys.iter().zip(&from) {
        let Some(s) = stream(&mut ctx.data, key)? else { continue };
        let mut body = bytes::BytesMut::new();
        let mut w = ReplyWriter::new(&mut body, ctx.out.resp3);
        let mut created_consumer = false;
        let serve = match (a.group, *f) {
            (Some((group, consumer)), f) => {
                let g = s.groups.get_mut(group).expect("checked above");
                created_consumer = g.touch_consumer(consumer, now);
                match f {
                    ReadFrom::After(id) => {
                        stream_group::reply_history(&mut w, s, group, consumer, id.incr().unwrap_or(StreamId::MAX), a.count, now);
                        true
                    }
                    ReadFrom::New => {
                        let last = s.groups[group].last_id;
                        if !s.is_empty() && s.last_valid_id() > last {
                            stream_group::reply_new(&mut w, s, group, consumer, a.count, a.noack, now);
                            true
                        } else {
                            false
                        }
                    }
                }
            }
            (None, ReadFrom::After(id)) => {
                if !s.is_empty() && s.last_valid_id() > id {
                    let start = id.incr().unwrap_or(StreamId::MAX);
                    let items: Vec<_> = s.range(start, StreamId::MAX, false).take(if a.count == 0 { usize::MAX } else { a.count }).collect();
                    w.array_len(items.len());
                    for (id, fl) in items {
                        write_entry(&mut w, *id, fl);
                    }
                    true
                } else {
                    false
                }
            }
            (None, ReadFrom::New) => unreachable!("'>' is rejected for XREAD"),
        };
        if a.group.is_some() {
            ctx.data.modified(key);
        }
        if created_consumer {
            ctx.data.notify_event(terrace_commands::notify::class::STREAM, "xgroup-createconsumer", key);
        }
        if serve {
            served.push((*key, body));
        }
    }
    if !served.is_empty() {
        if ctx.resp3() {
            ctx.out.map_len(served.len());
        } else {
            ctx.out.array_len(served.len());
        }
        for (key, body) in served {
            if !ctx.resp3() {
                ctx.out.array_len(2);
            }
            ctx.out.bulk(key);
            ctx.out.raw(&body);
        }
        return Ok(());
    }
    match a.block_ms {
        Some(ms) => {
            // `$` means "after the last ID now": a retry after a wake-up must not re-read it.
            let retry = (!dollar_rewrites.is_empty()).then(|| {
                let mut v: Vec<Vec<u8>> = argv.iter().map(|x| x.to_vec()).collect();
                for (pos, id) in &dollar_rewrites {
                    v[*pos] = id.to_string().into_bytes();
                }
                v
            });
            let t = (ms > 0).then(|| std::time::Duration::from_millis(ms));
            block_or_timeout(ctx, keys.iter().map(|k| k.to_vec()).collect(), t, TimeoutReply::NullArray);
            if let Some(b) = ctx.block.as_mut() {
                b.retry_argv = retry;
                b.wake_on_delete = a.group.is_some();
            }
        }
        None => ctx.out.null_array(),
    }
    Ok(())
}

fn group_lag(out: &mut ReplyWriter, s: &Stream, g: &Group) {
    match s.lag(g) {
        Some(l) => out.int(l),
        None => out.null(),
    }
}

fn entries_read(out: &mut ReplyWriter, g: &Group) {
    if g.entries_read != INVALID_ENTRIES_READ {
        out.int(g.entries_read)
    } else {
        out.null()
    }
}

pub fn xinfo(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[1], "HELP") {
        if argv.len() != 2 {
            return Err(super::args::err("ERR wrong number of arguments for 'xinfo|help' command"));
        }
        ctx.out.help(&[
            "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
            "HELP",
            "    Prints this help.",
        ]);
        return Ok(());
    }
    let arity_ok = match () {
        _ if is(argv[1], "CONSUMERS") => argv.len() == 4,
        _ if is(argv[1], "GROUPS") => argv.len() == 3,
        _ if is(argv[1], "STREAM") => argv.len() >= 3,
        _ => false,
    };
    if !arity_ok {
        return Err(subcommand_error("xinfo", argv));
    }
    let key = argv[2];
    let now = ctx.data.now;
    let Some(s) = stream(&mut ctx.data, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let out = &mut ctx.out;
    if is(argv[1], "CONSUMERS") {
        let Some(g) = s.groups.get(argv[3]) else {
            return Err(no_group_for_key(argv[3], key));
        };
        out.array_len(g.consumers.len());
        for (name, c) in &g.consumers {
            out.map_len(3);
            out.bulk(b"name");
            out.bulk(name);
            out.bulk(b"pending");
            out.int(c.pel.len() as i64);
            out.bulk(b"idle");
            out.int((now - c.seen_time).max(0));
        }
    } else if is(argv[1], "GROUPS") {
        out.array_len(s.groups.len());
        for (name, g) in &s.groups {
            out.map_len(6);
            out.bulk(b"name");
            out.bulk(name);
            out.bulk(b"consumers");
            out.int(g.consumers.len() as i64);
            out.bulk(b"pending");
            out.int(g.pel.len() as i64);
            out.bulk(b"last-delivered-id");
            write_id(out, g.last_id);
            out.bulk(b"entries-read");
            entries_read(out, g);
            out.bulk(b"lag");
            group_lag(out, s, g);
        }
    } else {
        xinfo_stream(out, s, &argv[3..])?;
    }
    Ok(())
}

pub fn no_group_for_key(group: &[u8], key: &[u8]) -> CmdError {
    err(format!("NOGROUP No such consumer group '{}' for key name '{}'", String::from_utf8_lossy(group), String::from_utf8_lossy(key)))
}

fn xinfo_stream(out: &mut ReplyWriter, s: &Stream, opts: &[&[u8]]) -> CmdResult {
    let mut count: usize = 10;
    let full = match opts.len() {
        0 => false,
        1 | 3 => {
            if !is(opts[0], "FULL") {
                return Err(xinfo_syntax());
            }
            if opts.len() == 3 {
                if !is(opts[1], "COUNT") {
                    return Err(xinfo_syntax());
                }
                let n = int(opts[2])?;
                count = if n < 0 { 10 } else { n as usize };
            }
            true
        }
        _ => return Err(xinfo_syntax()),
    };
    let limit = if count == 0 { usize::MAX } else { count };
    out.map_len(if full { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int((s.node_count() + 1) as i64);
    out.bulk(b"last-generated-id");
    write_id(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    write_id(out, s.max_deleted);
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    write_id(out, s.first_id);
    if !full {
        out.bulk(b"groups");
        out.int(s.groups.len() as i64);
        out.bulk(b"first-entry");
        match s.first_entry() {
            Some((id, f)) => write_entry(out, *id, f),
            None => out.null(),
        }
        out.bulk(b"last-entry");
        match s.last_entry() {
            Some((id, f)) => write_entry(out, *id, f),
            None => out.null(),
        }
        return Ok(());
    }
    out.bulk(b"entries");
    let items: Vec<_> = s.range(StreamId::ZERO, StreamId::MAX, false).take(limit).collect();
    out.array_len(items.len());
    for (id, f) in items {
        write_entry(out, *id, f);
    }
    out.bulk(b"groups");
    out.array_len(s.groups.len());
    for (name, g) in &s.groups {
        out.map_len(7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        write_id(out, g.last_id);
        out.bulk(b"entries-read");
        entries_read(out, g);
        out.bulk(b"lag");
        group_lag(out, s, g);
        out.bulk(b"pel-count");
        out.int(g.pel.len() as i64);
        out.bulk(b"pending");
        let pel: Vec<_> = g.pel.iter().take(limit).collect();
        out.array_len(pel.len());
        for (id, p) in pel {
            out.array_len(4);
            write_id(out, *id);
            out.bulk(&p.consumer);
            out.int(p.delivery_time);
            out.int(p.delivery_count as i64);
        }
        out.bulk(b"consumers");
        out.array_len(g.consumers.len());
        for (cname, c) in &g.consumers {
            out.map_len(4);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.int(c.seen_time);
            out.bulk(b"pel-count");
            out.int(c.pel.len() as i64);
            out.bulk(b"pending");
            let cpel: Vec<_> = c.pel.iter().take(limit).collect();
            out.array_len(cpel.len());
            for id in cpel {
                let p = &g.pel[id];
                out.array_len(3);
                write_id(out, *id);
                out.int(p.delivery_time);
                out.int(p.delivery_count as i64);
            }
        }
    }
    Ok(())
}

fn xinfo_syntax() -> CmdError {
    err("ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_forms() {
        assert_eq!(parse_id(b"5", 0).unwrap(), StreamId::new(5, 0));
        assert_eq!(parse_id(b"5", u64::MAX).unwrap(), StreamId::new(5, u64::MAX));
        assert_eq!(parse_id(b"5-3", 0).unwrap(), StreamId::new(5, 3));
        assert_eq!(parse_id(b"-", 0).unwrap(), StreamId::ZERO);
        assert_eq!(parse_id(b"+", 0).unwrap(), StreamId::MAX);
        assert!(parse_strict_id(b"+").is_err());
        assert!(parse_id(b"5-x", 0).is_err());
        assert!(parse_id(b"18446744073709551616", 0).is_err());
        assert_eq!(parse_id_generic(b"7-*", 0, true, true).unwrap(), (StreamId::new(7, 0), false));
        assert_eq!(parse_interval(b"(5-3", 0, true).unwrap(), StreamId::new(5, 4));
        assert_eq!(parse_interval(b"(5-0", u64::MAX, false).unwrap(), StreamId::new(4, u64::MAX));
        assert!(parse_interval(b"(0-0", 0, false).is_err());
    }
}
