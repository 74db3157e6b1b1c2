//! `TERRACE.STATS`: the engine's state as one JSON document, for the console and the cost
//! model — keys, memory, the PMem tier's placement and traffic (null without a tier), and
//! the WAL's position and sync costs (null when off).

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
    });
    ctx.out.bulk(doc.to_string().as_bytes());
    Ok(())
}
