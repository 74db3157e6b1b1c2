//! Publish/subscribe: who listens to which channel, pattern or shard channel, and delivery.
//!
//! Channels belong to a namespace (a tenant's keyspace): a message published in one reaches
//! the subscribers and patterns of that namespace only, and PUBSUB lists only its channels,
//! so tenants sharing an engine never see each other's messages. (The default namespace is
//! what a plain Redis client of the engine uses.)
//!
//! Each connection has a mailbox (`ClientInfo::mailbox`): PUBLISH encodes the message for
//! the receiver's protocol (RESP2 array or RESP3 push), appends it there and wakes the
//! connection, which writes it out between requests. A receiver whose pending output
//! crosses its class's `client-output-buffer-limit` is disconnected, as in Redis.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::Mutex;

use crate::clients::ClientInfo;
use crate::protocol::ReplyWriter;
use terrace_commands::glob::glob_match;

/// The three namespaces: channels (SUBSCRIBE), patterns (PSUBSCRIBE), shard channels
/// (SSUBSCRIBE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

/// Per namespace: channel (or pattern) → subscribers by client id.
type Subscribers = HashMap<usize, HashMap<Vec<u8>, HashMap<u64, Arc<ClientInfo>>>>;

#[derive(Default)]
pub struct PubSub {
    channels: Mutex<Subscribers>,
    patterns: Mutex<Subscribers>,
    shard: Mutex<Subscribers>,
}

/// Appends a message to a client's mailbox and wakes it; disconnects it past its output
/// limit (a killed client gets nothing more).
pub(crate) fn deliver(c: &ClientInfo, encode: impl FnOnce(&mut ReplyWriter)) {
    if c.killed.load(Ordering::Relaxed) {
        return;
    }
    let mut mb = c.mailbox.lock();
    let resp3 = c.resp.load(Ordering::Relaxed) == 3;
    encode(&mut ReplyWriter::new(&mut mb, resp3));
    let pending = mb.len() + c.out_pending.load(Ordering::Relaxed);
    drop(mb);
    if c.within_output_limit(pending) {
        c.mailbox_notify.notify_one();
    }
}

/// Writes a `message`/`smessage` push.
pub fn write_message(w: &mut ReplyWriter, kind: &str, channel: &[u8], msg: &[u8]) {
    w.push_len(3);
    w.bulk(kind.as_bytes());
    w.bulk(channel);
    w.bulk(msg);
}

fn write_pmessage(w: &mut ReplyWriter, pattern: &[u8], channel: &[u8], msg: &[u8]) {
    w.push_len(4);
    w.bulk(b"pmessage");
    w.bulk(pattern);
    w.bulk(channel);
    w.bulk(msg);
}

impl PubSub {
    fn map(&self, kind: Kind) -> &Mutex<Subscribers> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    pub fn subscribe(&self, kind: Kind, ns: usize, name: &[u8], client: &Arc<ClientInfo>) {
        self.map(kind).lock().entry(ns).or_default().entry(name.to_vec()).or_default().insert(client.id, client.clone());
    }

    pub fn unsubscribe(&self, kind: Kind, ns: usize, name: &[u8], client: u64) {
        let mut m = self.map(kind).lock();
        let Some(space) = m.get_mut(&ns) else { return };
        if let Some(subs) = space.get_mut(name) {
            subs.remove(&client);
            if subs.is_empty() {
                space.remove(name);
            }
        }
        if space.is_empty() {
            m.remove(&ns);
        }
    }

    /// Publishes to a channel (or shard channel) of namespace `ns`: returns how many clients
    /// received it. The publishing client's own copy (if it listens) is written to `own`
    /// instead of its mailbox, so it precedes the PUBLISH reply as in Redis.
    pub fn publish(&self, shard: bool, ns: usize, channel: &[u8], msg: &[u8], publisher: u64, own: &mut ReplyWriter) -> usize {
        let mut n = 0;
        let kind = if shard { "smessage" } else { "message" };
        let direct: Vec<Arc<ClientInfo>> = self
            .map(if shard { Kind::Shard } else { Kind::Channel })
            .lock()
            .get(&ns)
            .and_then(|space| space.get(channel))
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default();
        for c in direct {
            n += 1;
            if c.id == publisher {
                write_message(own, kind, channel, msg);
            } else {
                deliver(&c, |w| write_message(w, kind, channel, msg));
            }
        }
        if shard {
            return n;
        }
        let matching: Vec<(Vec<u8>, Arc<ClientInfo>)> = self
            .patterns
            .lock()
            .get(&ns)
            .into_iter()
            .flatten()
            .filter(|(p, _)| glob_match(p, channel, false))
            .flat_map(|(p, subs)| subs.values().map(move |c| (p.clone(), c.clone())))
            .collect();
        for (p, c) in matching {
            n += 1;
            if c.id == publisher {
                write_pmessage(own, &p, channel, msg);
            } else {
                deliver(&c, |w| write_pmessage(w, &p, channel, msg));
            }
        }
        n
    }

    /// Namespace `ns`'s active channels (or shard channels) matching an optional pattern.
    pub fn active(&self, kind: Kind, ns: usize, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let m = self.map(kind).lock();
        let mut v: Vec<Vec<u8>> =
            m.get(&ns).into_iter().flat_map(|space| space.keys()).filter(|c| pattern.is_none_or(|p| glob_match(p, c, false))).cloned().collect();
        v.sort();
        v
    }

    pub fn count(&self, kind: Kind, ns: usize, name: &[u8]) -> usize {
        self.map(kind).lock().get(&ns).and_then(|space| space.get(name)).map_or(0, |s| s.len())
    }

    /// Patterns subscribed to in namespace `ns`.
    pub fn pattern_count(&self, ns: usize) -> usize {
        self.patterns.lock().get(&ns).map_or(0, |space| space.len())
    }
}

/// Drains a client's mailbox into `out`.
pub fn drain_mailbox(c: &ClientInfo, out: &mut BytesMut) {
    let mut mb = c.mailbox.lock();
    if !mb.is_empty() {
        out.extend_from_slice(&mb);
        mb.clear();
    }
}
