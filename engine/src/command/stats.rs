//! `TERRACE.STATS`: the engine's state as one JSON document, for the console and the cost
//! model — keys, memory, the PMem tier's placement and traffic (null without a tier), and
//! the WAL's position and sync costs (null when off). `TERRACE.WORKLOAD tenant`: one
//! tenant's workload statistics (rates, mix, bytes, access intervals, miss-ratio curve).
//! `TERRACE.RECORD START tenant [RATE r] [MAX n] | READ | STOP | SAMPLE tenant cursor RATE r`:
//! a sampled trace of the tenant's commands and a sample of its data (`stats::recorder`).

use super::args::{err, is, CmdError};
use super::{CmdResult, Ctx};
use crate::stats::recorder;
use crate::stats::workload::{Sources, Workload};

pub fn stats(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let totals = ctx.data.totals()?;
    let keys: u64 = totals.keys.iter().map(|&k| k as u64).sum();
    let tiers = ctx.srv.keyspace.tier().map(|t| t.to_json(keys));
    let doc = serde_json::json!({
        "keys": keys,
        "used_memory": crate::alloc::used_memory(),
        "tiers": tiers,
        "wal": ctx.srv.wal().map(|w| w.to_json()),
        "storage": ctx.srv.storage_tier().map(|t| t.to_json()),
        "threads": ctx.srv.reactors.to_json(),
        "device": ctx.srv.device.get(),
    });
    ctx.out.bulk(doc.to_string().as_bytes());
    Ok(())
}

pub fn workload(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (ns, _) = tenant_arg(ctx.srv, argv[1])?;
    let w = gather_workload(ctx.srv, &mut ctx.data.guards, ns)?;
    let mut doc = w.to_json();
    // Totals since the start, for the console's history (it charts their rates).
    if let Some(t) = ctx.srv.tenant_stats.get(ns) {
        doc["counters"] = t.counters();
    }
    ctx.out.bulk(doc.to_string().as_bytes());
    Ok(())
}

/// The workload of namespace `ns`, its census visited through a command's `guards`.
pub fn gather_workload(srv: &crate::server::state::Server, guards: &mut crate::keyspace::Guards, ns: usize) -> Result<Workload, crate::keyspace::Undeclared> {
    let tenant = srv.namespaces.lock().get(ns).cloned().unwrap_or_default();
    let census = srv.keyspace.namespace_census(guards, ns)?;
    let storage = srv.storage_tier().filter(|t| t.backs(ns)).and_then(|t| {
        let name = if tenant.is_empty() { "default" } else { tenant.as_str() };
        let count = t.census.get(name);
        if count.is_none() {
            t.census.wake();
        }
        count.map(|c| (c.keys, c.bytes, c.at.elapsed().as_secs_f64()))
    });
    let compression = srv.keyspace.compression(ns).stats();
    Ok(Workload::from_sources(Sources { tenant, namespace: ns, stats: &srv.tenant_stats[ns], census, compression, storage }))
}

/// A tenant named in a command: its namespace and its name (`default` for the default one).
pub fn tenant_arg(srv: &crate::server::state::Server, name: &[u8]) -> Result<(usize, String), CmdError> {
    let name = String::from_utf8_lossy(name).into_owned();
    let ns = srv.tenant_namespace(&name).ok_or_else(|| err(format!("ERR no such tenant '{name}'")))?;
    Ok((ns, if name.is_empty() { "default".into() } else { name }))
}

/// `RATE r` and `MAX n` / `COUNT n` options from `i` on.
fn rate_and_max(argv: &[&[u8]], mut i: usize) -> Result<(f64, usize), CmdError> {
    let (mut rate, mut max) = (1.0, recorder::DEFAULT_MAX);
    while i < argv.len() {
        let v = argv.get(i + 1).ok_or(CmdError::Syntax)?;
        let text = std::str::from_utf8(v).map_err(|_| CmdError::Syntax)?;
        if is(argv[i], "RATE") {
            rate = text.parse().ok().filter(|r: &f64| *r > 0.0 && *r <= 1.0).ok_or_else(|| err("ERR RATE must be a number in (0, 1]"))?;
        } else if is(argv[i], "MAX") {
            max = text.parse().ok().filter(|n: &usize| *n > 0).ok_or_else(|| err("ERR MAX must be a positive integer"))?;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok((rate, max))
}

pub fn record(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let rec = &ctx.srv.recorder;
    match argv[1] {
        s if is(s, "START") && argv.len() >= 3 => {
            let (ns, _) = tenant_arg(ctx.srv, argv[2])?;
            let (rate, max) = rate_and_max(argv, 3)?;
            rec.start(ns, rate, max).map_err(|e| err(format!("ERR {e}")))?;
            ctx.out.ok();
        }
        s if is(s, "READ") && argv.len() == 2 => match rec.drain() {
            Some(lines) => ctx.out.bulk(lines.as_bytes()),
            None => return Err(err("ERR no recording is running")),
        },
        s if is(s, "STOP") && argv.len() == 2 => {
            let (ns, rate, seconds, recorded, dropped, rest) = rec.stop().ok_or_else(|| err("ERR no recording is running"))?;
            let tenant = ctx.srv.namespaces.lock().get(ns).cloned().unwrap_or_default();
            let doc = serde_json::json!({
                "tenant": if tenant.is_empty() { "default" } else { &tenant },
                "rate": rate, "seconds": seconds, "recorded": recorded, "dropped": dropped, "rest": rest,
            });
            ctx.out.bulk(doc.to_string().as_bytes());
        }
        s if is(s, "SAMPLE") && argv.len() >= 4 => {
            let (ns, _) = tenant_arg(ctx.srv, argv[2])?;
            let cursor: usize = std::str::from_utf8(argv[3]).ok().and_then(|c| c.parse().ok()).ok_or_else(|| err("ERR invalid cursor"))?;
            let (rate, _) = rate_and_max(argv, 4)?;
            let threshold = crate::stats::mrc::threshold_for(rate);
            let ks = ctx.data.ks;
            let per_ns = crate::keyspace::NUM_DBS * ks.shards_per_db();
            if cursor >= per_ns {
                return Err(err("ERR invalid cursor"));
            }
            let db = ns * crate::keyspace::NUM_DBS + cursor / ks.shards_per_db();
            let id = (ns * per_ns + cursor) as u32;
            let now = crate::server::state::now_ms();
            let mut out = String::new();
            let next = if cursor + 1 == per_ns { 0 } else { cursor + 1 };
            out.push_str(&format!("{next}\n"));
            let sampled = ctx.data.visit(id, std::time::Duration::MAX, |shard| -> Result<(), CmdError> {
                for e in shard.iter() {
                    if crate::stats::mrc::spatial(crate::keyspace::hash_bytes(e.key())) >= threshold {
                        continue;
                    }
                    let dump = if e.is_encoded() {
                        let v = super::decoded(ks, db, e)?.unwrap_or_default();
                        crate::rdb::dump_value(crate::keyspace::ValueRef::Str(&v))
                    } else {
                        crate::rdb::dump_value(e.value())
                    };
                    let pttl = e.expire().map_or(-1, |at| (at - now).max(1));
                    recorder::sample_line(&mut out, db, e.key(), pttl, &dump);
                }
                Ok(())
            })?;
            sampled.transpose()?;
            ctx.out.bulk(out.as_bytes());
        }
        _ => return Err(CmdError::Syntax),
    }
    Ok(())
}
