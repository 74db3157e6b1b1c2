//! `TERRACE.STATS`: the engine's state as one JSON document, for the console and the cost
//! model — keys, memory, the PMem tier's placement and traffic (null without a tier), and
//! the WAL's position and sync costs (null when off). `TERRACE.WORKLOAD tenant`: one
//! tenant's workload statistics (rates, mix, bytes, access intervals, miss-ratio curve).

use super::args::err;
use super::{CmdResult, Ctx};

pub fn stats(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let totals = ctx.data.ks.totals_with(&mut ctx.data.guards);
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
    let name = String::from_utf8_lossy(argv[1]).into_owned();
    let ns = ctx.srv.tenant_namespace(&name).ok_or_else(|| err(format!("ERR no such tenant '{name}'")))?;
    let tenant = ctx.srv.namespaces.lock()[ns].clone();
    let w = crate::stats::workload::Workload::gather(ctx.srv, ns, &tenant);
    ctx.out.bulk(w.to_json().to_string().as_bytes());
    Ok(())
}
