//! Diagnostics commands: SLOWLOG, LATENCY, MEMORY, DEBUG, LOLWUT.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::args::{err, int, is, subcommand_error, CmdError};
use super::{CmdResult, Ctx};
use crate::keyspace::{access, ValueRef, NUM_DBS};

pub fn slowlog(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let log = &ctx.srv.slowlog;
    if is(argv[1], "GET") && argv.len() <= 3 {
        let n = match argv.get(2) {
            None => 10,
            Some(a) => {
                let n = int(a)?;
                if n < -1 {
                    return Err(err("ERR count should be greater than or equal to -1"));
                }
                if n == -1 {
                    usize::MAX
                } else {
                    n as usize
                }
            }
        };
        let entries = log.entries.lock();
        let n = n.min(entries.len());
        ctx.out.array_len(n);
        for e in entries.iter().take(n) {
            ctx.out.array_len(6);
            ctx.out.int(e.id as i64);
            ctx.out.int(e.time);
            ctx.out.int(e.duration_us as i64);
            ctx.out.array_len(e.args.len());
            for a in &e.args {
                ctx.out.bulk(a);
            }
            ctx.out.bulk(e.addr.as_bytes());
            ctx.out.bulk(e.name.as_bytes());
        }
    } else if is(argv[1], "LEN") && argv.len() == 2 {
        ctx.out.int(log.entries.lock().len() as i64);
    } else if is(argv[1], "RESET") && argv.len() == 2 {
        log.entries.lock().clear();
        ctx.out.ok();
    } else if is(argv[1], "HELP") {
        ctx.out.help(&["SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GET [<count>]", "LEN", "RESET", "HELP"]);
    } else {
        return Err(subcommand_error("slowlog", argv));
    }
    Ok(())
}

/// TERRACE.SLOWLOG [count] — the slow log's newest `count` (10; -1: all) entries as JSON,
/// each with the tenant whose namespace it ran in (the console merges every engine's).
pub fn terrace_slowlog(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let n = match argv.get(1) {
        None => 10,
        Some(a) => match int(a)? {
            -1 => usize::MAX,
            n if n >= 0 => n as usize,
            _ => return Err(err("ERR count should be greater than or equal to -1")),
        },
    };
    if argv.len() > 2 {
        return Err(CmdError::Syntax);
    }
    let names = ctx.srv.namespaces.lock().clone();
    let entries: Vec<serde_json::Value> = ctx
        .srv
        .slowlog
        .entries
        .lock()
        .iter()
        .take(n)
        .map(|e| {
            let tenant = match names.get(e.namespace).map(String::as_str) {
                None | Some("") => "default",
                Some(t) => t,
            };
            serde_json::json!({
                "id": e.id,
                "time": e.time,
                "duration_us": e.duration_us,
                "args": e.args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>(),
                "client": e.addr,
                "client_name": e.name,
                "tenant": tenant,
            })
        })
        .collect();
    ctx.out.bulk(serde_json::Value::Array(entries).to_string().as_bytes());
    Ok(())
}

/// LATENCY: Terrace does not run Redis's latency monitor; the event lists are always empty.
/// LATENCY: the latency monitor's events (`crate::latency`) and the per-command latency
/// histograms.
pub fn latency(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let monitor = &ctx.srv.latency;
    if is(argv[1], "LATEST") && argv.len() == 2 {
        let latest = monitor.latest();
        ctx.out.array_len(latest.len());
        for l in latest {
            ctx.out.array_len(4);
            ctx.out.bulk(l.event.as_bytes());
            ctx.out.int(l.time);
            ctx.out.int(l.latest as i64);
            ctx.out.int(l.max as i64);
        }
    } else if is(argv[1], "HISTORY") && argv.len() == 3 {
        let samples = monitor.history(argv[2]);
        ctx.out.array_len(samples.len());
        for (time, ms) in samples {
            ctx.out.array_len(2);
            ctx.out.int(time);
            ctx.out.int(ms as i64);
        }
    } else if is(argv[1], "RESET") {
        let n = monitor.reset(&argv[2..]);
        ctx.out.int(n as i64);
    } else if is(argv[1], "DOCTOR") && argv.len() == 2 {
        let report = doctor(&monitor.latest());
        ctx.out.verbatim(&report);
    } else if is(argv[1], "HISTOGRAM") {
        histogram(ctx, &argv[2..]);
    } else if is(argv[1], "HELP") && argv.len() == 2 {
        ctx.out.help(&[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "HELP",
        ]);
    } else {
        return Err(subcommand_error("latency", argv));
    }
    Ok(())
}

/// LATENCY DOCTOR's report: what was seen, event by event.
fn doctor(latest: &[crate::latency::Latest]) -> String {
    if latest.is_empty() {
        return "Dave, no latency spike was observed during the lifetime of this Terrace instance, not in the slightest bit. I honestly think you ought to sleep better.\n".into();
    }
    let mut s = String::from("Dave, I have observed latency spikes in this Terrace instance. You don't mind talking about it, do you Dave?\n\n");
    for (i, l) in latest.iter().enumerate() {
        let _ = writeln!(s, "{}. {}: latest latency spike {} milliseconds, worst {} milliseconds.", i + 1, l.event, l.latest, l.max);
    }
    s
}

/// LATENCY HISTOGRAM [command ...]: each command (or subcommand) called since the last CONFIG
/// RESETSTAT, with its calls and their cumulative distribution over power-of-two microsecond
/// buckets, as Redis reports its histograms; unknown names are skipped.
fn histogram(ctx: &mut Ctx, names: &[&[u8]]) {
    use terrace_commands::stat_index;
    let stats = &ctx.srv.stats.per_command;
    let mut slots: Vec<usize> =
        if names.is_empty() { (0..stats.len()).collect() } else { names.iter().flat_map(|n| stat_index::named(&String::from_utf8_lossy(n))).collect() };
    slots.sort_unstable();
    slots.dedup();
    slots.retain(|&i| stats.get(i).is_some_and(|st| st.calls.load(Ordering::Relaxed) > 0));
    ctx.out.map_len(slots.len());
    for i in slots {
        let st = &stats[i];
        ctx.out.bulk(stat_index::name(i).as_bytes());
        ctx.out.map_len(2);
        ctx.out.bulk(b"calls");
        ctx.out.int(st.calls.load(Ordering::Relaxed) as i64);
        ctx.out.bulk(b"histogram_usec");
        let mut cumulative = 0u64;
        let mut points = Vec::new();
        for (b, count) in st.latency.iter().enumerate() {
            let n = count.load(Ordering::Relaxed);
            if n > 0 {
                cumulative += n;
                points.push(((1024u64 << b) / 1000, cumulative));
            }
        }
        ctx.out.map_len(points.len());
        for (usec, count) in points {
            ctx.out.int(usec as i64);
            ctx.out.int(count as i64);
        }
    }
}

pub fn lolwut(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // `LOLWUT [VERSION v [art parameters...]]`: the art's parameters are integers.
    if argv.len() > 1 {
        if !is(argv[1], "VERSION") || argv.len() < 3 {
            return Err(CmdError::Syntax);
        }
        for a in &argv[2..] {
            int(a)?;
        }
    }
    let art = "  _                                \n | |_ ___ _ __ _ __ __ _  ___ ___  \n | __/ _ \\ '__| '__/ _` |/ __/ _ \\ \n | ||  __/ |  | | | (_| | (_|  __/ \n  \\__\\___|_|  |_|  \\__,_|\\___\\___| \n\n";
    let text = format!("{art}Terrace ver. {} (Redis ver. {})\n", super::server::TERRACE_VERSION, super::server::REDIS_VERSION);
    ctx.out.verbatim(&text);
    Ok(())
}

fn memory_stats(ctx: &mut Ctx) -> CmdResult {
    let used = crate::alloc::used_memory();
    let totals = ctx.data.totals()?;
    let dbs: Vec<(usize, usize, usize)> = (0..NUM_DBS)
        .map(|db| (db, totals.keys.get(ctx.conn.ns_base + db).copied().unwrap_or(0), totals.expires.get(ctx.conn.ns_base + db).copied().unwrap_or(0)))
        .filter(|d| d.1 > 0)
        .collect();
    let keys: usize = dbs.iter().map(|d| d.1).sum();
    let table_bytes = totals.table_bytes;
    ctx.out.map_len(10 + dbs.len());
    for (k, v) in [
        ("peak.allocated", used),
        ("total.allocated", used),
        ("startup.allocated", 0),
        ("replication.backlog", 0),
        ("clients.normal", 0),
        ("aof.buffer", 0),
        ("overhead.total", table_bytes),
        ("keys.count", keys as u64),
        ("keys.bytes-per-key", if keys > 0 { used / keys as u64 } else { 0 }),
        ("dataset.bytes", used.saturating_sub(table_bytes)),
    ] {
        ctx.out.bulk(k.as_bytes());
        ctx.out.int(v as i64);
    }
    for (db, keys, expires) in dbs {
        ctx.out.bulk(format!("db.{db}").as_bytes());
        ctx.out.map_len(2);
        ctx.out.bulk(b"overhead.hashtable.main");
        ctx.out.int((keys * 18) as i64);
        ctx.out.bulk(b"overhead.hashtable.expires");
        ctx.out.int(expires as i64 * 8);
    }
    Ok(())
}

pub fn memory(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[1], "USAGE") && (argv.len() == 3 || (argv.len() == 5 && is(argv[3], "SAMPLES"))) {
        // MEMORY visits shards (STATS counts them all): the key's shard, alone.
        let (id, now, key) = (ctx.srv.keyspace.shard_id(ctx.data.db, argv[2]), ctx.data.now, argv[2]);
        let size = ctx.data.visit(id, std::time::Duration::MAX, |s| s.peek(key, now).map(|e| e.heap_size()))?.flatten();
        match size {
            // The entry plus its share of the hash table slot (8-byte pointer + control byte).
            Some(n) => ctx.out.int((n + 9) as i64),
            None => ctx.out.null(),
        }
    } else if is(argv[1], "STATS") && argv.len() == 2 {
        memory_stats(ctx)?;
    } else if is(argv[1], "MALLOC-STATS") && argv.len() == 2 {
        let mut s = String::new();
        let _ = writeln!(s, "Terrace uses mimalloc; live bytes requested through it: {}", crate::alloc::used_memory());
        ctx.out.verbatim(&s);
    } else if is(argv[1], "DOCTOR") && argv.len() == 2 {
        ctx.out.verbatim("Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n");
    } else if is(argv[1], "PURGE") && argv.len() == 2 {
        crate::alloc::purge();
        ctx.out.ok();
    } else if is(argv[1], "HELP") {
        ctx.out.help(&[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "MALLOC-STATS",
            "PURGE",
            "STATS",
            "USAGE <key> [SAMPLES <count>]",
            "HELP",
        ]);
    } else {
        return Err(subcommand_error("memory", argv));
    }
    Ok(())
}

/// The longest DEBUG SLEEP (Redis's own test suite sleeps 20 s at most).
const DEBUG_SLEEP_MAX_SECS: f64 = 30.0;

pub fn debug(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[1], "SLEEP") && argv.len() == 3 {
        let secs = super::args::parse_f64(argv[2]).ok_or(CmdError::NotFloat)?;
        // Like Redis, DEBUG SLEEP blocks the thread serving this client — every client of
        // its reactor — so it is bounded: no sleep outlasts a client's patience.
        if secs.is_nan() || secs > DEBUG_SLEEP_MAX_SECS {
            return Err(err(format!("ERR DEBUG SLEEP sleeps at most {DEBUG_SLEEP_MAX_SECS} seconds")));
        }
        if secs > 0.0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
        }
        ctx.out.ok();
    } else if is(argv[1], "OBJECT") && argv.len() == 3 {
        let now = ctx.data.now;
        let limits = super::config::encoding_limits(ctx.srv);
        // A raw look (no thawing of a frozen collection), so it shows where the value is.
        let Some(e) = ctx.data.shard(argv[2]).peek(argv[2], now) else {
            return Err(CmdError::NoSuchKey);
        };
        let (enc, ser) = match e.value() {
            ValueRef::Str(v) => (super::keys::string_encoding(v), v.len()),
            ValueRef::Encoded(v) => ("compressed", v.len()),
            ValueRef::Coll(c) => (c.encoding(&limits), e.heap_size()),
            ValueRef::Frozen(_, v) => ("frozen", v.len()),
        };
        let line = format!(
            "Value at:0x{:x} refcount:1 encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{} tier:{}",
            e as *const _ as usize,
            enc,
            ser,
            e.access(),
            access::idle_seconds(e.access(), now),
            if e.in_pmem() { "pmem" } else { "dram" }
        );
        ctx.out.simple(&line);
    } else if is(argv[1], "SET-ACTIVE-EXPIRE") && argv.len() == 3 {
        let on = int(argv[2])? != 0;
        ctx.srv.active_expire.store(on, Ordering::Relaxed);
        ctx.out.ok();
    } else if is(argv[1], "HELP") {
        ctx.out.help(&["DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "OBJECT <key>", "SET-ACTIVE-EXPIRE <0|1>", "SLEEP <seconds>", "HELP"]);
    } else {
        // DEBUG is not a container command in Redis: one text for every bad subcommand.
        return Err(err(format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.", String::from_utf8_lossy(argv[1]))));
    }
    Ok(())
}
