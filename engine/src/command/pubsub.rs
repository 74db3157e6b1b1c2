//! Pub/sub commands: SUBSCRIBE PSUBSCRIBE SSUBSCRIBE and their UNSUBSCRIBEs, PUBLISH,
//! SPUBLISH, PUBSUB. Subscriptions live in `crate::pubsub`; the connection's own set is in
//! `Conn::subs`.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::args::subcommand_error;
use super::table::CommandId;
use super::{CmdResult, Conn, Ctx};
use crate::protocol::ReplyWriter;
use crate::pubsub::Kind;
use crate::server::state::Server;

/// A connection's subscriptions, in subscription order per kind.
#[derive(Default)]
pub struct Subscriptions {
    pub channels: BTreeSet<Vec<u8>>,
    pub patterns: BTreeSet<Vec<u8>>,
    pub shard: BTreeSet<Vec<u8>>,
}

impl Subscriptions {
    pub fn any(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }
    fn set(&mut self, kind: Kind) -> &mut BTreeSet<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
    /// The count Redis reports after (un)subscribing: channels + patterns, or shard channels.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }
}

fn names(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Channel => ("subscribe", "unsubscribe"),
        Kind::Pattern => ("psubscribe", "punsubscribe"),
        Kind::Shard => ("ssubscribe", "sunsubscribe"),
    }
}

fn publish_counts(conn: &Conn) {
    let s = &conn.subs;
    conn.info.sub.store(s.channels.len(), Ordering::Relaxed);
    conn.info.psub.store(s.patterns.len(), Ordering::Relaxed);
    conn.info.ssub.store(s.shard.len(), Ordering::Relaxed);
}

fn confirm(out: &mut ReplyWriter, what: &str, name: Option<&[u8]>, count: usize) {
    out.push_len(3);
    out.bulk(what.as_bytes());
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
}

/// Writes a (un)subscribe confirmation. Redis sends them even to a client that turned its
/// replies off (CLIENT REPLY OFF/SKIP): they are pushes, not replies, and go through the
/// client's mailbox then.
fn send_confirm(ctx: &mut Ctx, what: &str, name: Option<&[u8]>, count: usize) {
    if ctx.conn.reply_off || ctx.conn.reply_skip > 0 {
        crate::pubsub::deliver(&ctx.conn.info, |w| confirm(w, what, name, count));
        ctx.conn.pushes_waiting = true;
    } else {
        confirm(&mut ctx.out, what, name, count);
    }
}

/// The namespace a connection's channels belong to (its tenant's).
fn namespace(conn: &Conn) -> usize {
    conn.ns_base / crate::keyspace::NUM_DBS
}

fn subscribe_generic(ctx: &mut Ctx, argv: &[&[u8]], kind: Kind) -> CmdResult {
    let ns = namespace(ctx.conn);
    for name in &argv[1..] {
        if ctx.conn.subs.set(kind).insert(name.to_vec()) {
            ctx.srv.pubsub.subscribe(kind, ns, name, &ctx.conn.info);
        }
        let count = ctx.conn.subs.count(kind);
        send_confirm(ctx, names(kind).0, Some(name), count);
    }
    publish_counts(ctx.conn);
    Ok(())
}

fn unsubscribe_generic(ctx: &mut Ctx, argv: &[&[u8]], kind: Kind) -> CmdResult {
    let what = names(kind).1;
    let targets: Vec<Vec<u8>> = if argv.len() > 1 { argv[1..].iter().map(|a| a.to_vec()).collect() } else { ctx.conn.subs.set(kind).iter().cloned().collect() };
    if targets.is_empty() {
        let count = ctx.conn.subs.count(kind);
        send_confirm(ctx, what, None, count);
    }
    let ns = namespace(ctx.conn);
    for name in targets {
        if ctx.conn.subs.set(kind).remove(&name) {
            ctx.srv.pubsub.unsubscribe(kind, ns, &name, ctx.conn.info.id);
        }
        let count = ctx.conn.subs.count(kind);
        send_confirm(ctx, what, Some(&name), count);
    }
    publish_counts(ctx.conn);
    Ok(())
}

/// Drops every subscription of a connection (RESET, disconnect).
pub fn unsubscribe_all(srv: &Server, conn: &mut Conn) {
    let ns = namespace(conn);
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in std::mem::take(conn.subs.set(kind)) {
            srv.pubsub.unsubscribe(kind, ns, &name, conn.info.id);
        }
    }
    publish_counts(conn);
}

pub fn subscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    subscribe_generic(ctx, argv, Kind::Channel)
}
pub fn psubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    subscribe_generic(ctx, argv, Kind::Pattern)
}
pub fn ssubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    subscribe_generic(ctx, argv, Kind::Shard)
}
pub fn unsubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    unsubscribe_generic(ctx, argv, Kind::Channel)
}
pub fn punsubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    unsubscribe_generic(ctx, argv, Kind::Pattern)
}
pub fn sunsubscribe(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    unsubscribe_generic(ctx, argv, Kind::Shard)
}

fn publish_generic(ctx: &mut Ctx, argv: &[&[u8]], shard: bool) -> CmdResult {
    let n = ctx.srv.pubsub.publish(shard, namespace(ctx.conn), argv[1], argv[2], ctx.conn.info.id, &mut ctx.out);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn publish(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    publish_generic(ctx, argv, false)
}
pub fn spublish(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    publish_generic(ctx, argv, true)
}

pub fn pubsub(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let ps = &ctx.srv.pubsub;
    let ns = namespace(ctx.conn);
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
    match (sub.as_str(), argv.len()) {
        ("channels" | "shardchannels", 2 | 3) => {
            let kind = if sub == "channels" { Kind::Channel } else { Kind::Shard };
            let list = ps.active(kind, ns, argv.get(2).copied());
            ctx.out.array_len(list.len());
            for c in list {
                ctx.out.bulk(&c);
            }
        }
        ("numsub" | "shardnumsub", _) => {
            let kind = if sub == "numsub" { Kind::Channel } else { Kind::Shard };
            ctx.out.map_len(argv.len() - 2);
            for c in &argv[2..] {
                ctx.out.bulk(c);
                ctx.out.int(ps.count(kind, ns, c) as i64);
            }
        }
        ("numpat", 2) => ctx.out.int(ps.pattern_count(ns) as i64),
        ("help", 2) => ctx.out.help(&[
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        ]),
        _ => return Err(subcommand_error("pubsub", argv)),
    }
    Ok(())
}

/// Commands a RESP2 client may send while subscribed.
pub fn allowed_while_subscribed(id: CommandId) -> bool {
    use CommandId::*;
    matches!(id, Subscribe | Psubscribe | Ssubscribe | Unsubscribe | Punsubscribe | Sunsubscribe | Ping | Quit | Reset)
}

/// PING from a subscribed RESP2 client answers `["pong", message]`.
pub fn subscribed_ping(out: &mut ReplyWriter, argv: &[&[u8]]) {
    out.array_len(2);
    out.bulk(b"pong");
    out.bulk(argv.get(1).copied().unwrap_or(b""));
}
