//! Client-side caching (CLIENT TRACKING), as Redis 6+: the server remembers which keys each
//! tracking client read (default mode) or which key prefixes it follows (BCAST mode), and
//! sends it an `invalidate` message when one of them changes, is deleted, expires or is
//! evicted — as a RESP3 push, or through the `__redis__:invalidate` channel of the client it
//! redirects to.
//!
//! Every keyspace change passes `Shard::touch`, which notes the key in its shard while the
//! keyspace's tracking switch is on (this service holds it on while any client tracks); a
//! command takes its shards' notes when it commits and delivers them here once its locks are
//! released (`invalidate`), and the cron delivers what background work (expiry, eviction)
//! left.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::clients::ClientInfo;
use crate::protocol::ReplyWriter;

/// Keys tracked in default mode before some are invalidated (Redis's
/// tracking-table-max-keys default; CONFIG SET changes it, 0 means no limit).
const MAX_TRACKED_KEYS: usize = 1_000_000;

/// A connection's tracking options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub redirect: Option<u64>,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Vec<u8>>,
}

struct Tracker {
    info: Arc<ClientInfo>,
    opts: Options,
}

pub struct Tracking {
    clients: Mutex<HashMap<u64, Tracker>>,
    /// The keyspace's switch that makes shards note changed keys: on while `clients` is not
    /// empty (set under its lock).
    switch: Arc<AtomicBool>,
    /// Default mode: key → clients that read it.
    keys: Mutex<HashMap<Vec<u8>, HashSet<u64>>>,
    /// Keys forgotten because the table was full: invalidated with the next delivery.
    forgotten: Mutex<Vec<Vec<u8>>>,
    /// `tracking-table-max-keys`.
    max_keys: std::sync::atomic::AtomicUsize,
}

/// What INFO shows of tracking.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Clients with tracking on.
    pub clients: usize,
    /// Keys remembered (default mode), and (key, client) pairs.
    pub keys: usize,
    pub items: usize,
    /// Distinct BCAST prefixes.
    pub prefixes: usize,
}

/// The channel RESP2 clients receive redirected invalidations on.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

fn write_invalidate(w: &mut ReplyWriter, keys: Option<&[Vec<u8>]>, via_channel: bool) {
    if via_channel {
        w.push_len(3);
        w.bulk(b"message");
        w.bulk(CHANNEL);
    } else {
        w.push_len(2);
        w.bulk(b"invalidate");
    }
    match keys {
        Some(keys) => {
            w.array_len(keys.len());
            for k in keys {
                w.bulk(k);
            }
        }
        None => w.null_array(),
    }
}

impl Tracking {
    /// Tracking that turns the keyspace's `switch` on while any client tracks.
    pub fn new(switch: Arc<AtomicBool>) -> Tracking {
        Tracking { clients: Mutex::default(), switch, keys: Mutex::default(), forgotten: Mutex::default(), max_keys: MAX_TRACKED_KEYS.into() }
    }

    /// Whether any client tracks keys.
    #[inline]
    pub fn any(&self) -> bool {
        self.switch.load(Ordering::Relaxed)
    }

    pub fn enable(&self, info: &Arc<ClientInfo>, opts: Options, redirect_to: Option<&Arc<ClientInfo>>) {
        if let Some(target) = redirect_to {
            target.push_target.store(true, Ordering::Relaxed);
        }
        let mut clients = self.clients.lock();
        clients.insert(info.id, Tracker { info: info.clone(), opts });
        self.switch.store(!clients.is_empty(), Ordering::Relaxed);
    }

    pub fn disable(&self, id: u64) {
        let mut clients = self.clients.lock();
        clients.remove(&id);
        self.switch.store(!clients.is_empty(), Ordering::Relaxed);
    }

    /// INFO's tracking figures.
    pub fn counts(&self) -> Counts {
        let clients = self.clients.lock();
        let mut prefixes: HashSet<&[u8]> = HashSet::new();
        for t in clients.values().filter(|t| t.opts.bcast) {
            if t.opts.prefixes.is_empty() {
                prefixes.insert(b"");
            }
            prefixes.extend(t.opts.prefixes.iter().map(Vec::as_slice));
        }
        let table = self.keys.lock();
        Counts { clients: clients.len(), keys: table.len(), items: table.values().map(HashSet::len).sum(), prefixes: prefixes.len() }
    }

    /// Remembers that a default-mode client read these keys.
    pub fn remember<'a>(&self, client: u64, keys: impl Iterator<Item = &'a [u8]>) {
        let mut table = self.keys.lock();
        for k in keys {
            table.entry(k.to_vec()).or_default().insert(client);
        }
        drop(table);
        self.trim();
    }

    /// CONFIG SET tracking-table-max-keys: keys past the new limit are forgotten (and
    /// invalidated with the next delivery, the cron's at the latest).
    pub fn set_max_keys(&self, max: usize) {
        self.max_keys.store(max, Ordering::Relaxed);
        self.trim();
    }

    /// Over the limit: forget (and invalidate) some keys, as Redis does.
    fn trim(&self) {
        let max = self.max_keys.load(Ordering::Relaxed);
        let table = self.keys.lock();
        if max == 0 || table.len() <= max {
            return;
        }
        // (They stay in the table, with who read them, until the delivery takes them.)
        let victims: Vec<Vec<u8>> = table.keys().take(table.len() - max).cloned().collect();
        drop(table);
        self.forgotten.lock().extend(victims);
    }

    /// Delivers invalidations for `changed` keys (and for keys forgotten since the last
    /// delivery); `writer` is the client whose command changed them (NOLOOP clients don't
    /// hear about their own writes).
    pub fn invalidate(&self, registry: &crate::clients::Registry, pending: Vec<Vec<u8>>, writer: Option<u64>) {
        // Keys the full table forgot were changed by no one: NOLOOP does not hide them.
        let forgotten = std::mem::take(&mut *self.forgotten.lock());
        if !forgotten.is_empty() {
            self.deliver(registry, forgotten, None);
        }
        self.deliver(registry, pending, writer);
    }

    fn deliver(&self, registry: &crate::clients::Registry, mut pending: Vec<Vec<u8>>, writer: Option<u64>) {
        if pending.is_empty() {
            return;
        }
        // A key changed twice is invalidated once.
        let mut seen = HashSet::new();
        pending.retain(|k| seen.insert(k.clone()));
        // Default mode: one message per key, in the order the keys changed (as Redis sends
        // them, key by key), to each client that read it.
        // (A client that has since switched to BCAST, or off, is not told of keys it read
        // before: as Redis, which skips such clients.)
        let mut messages: Vec<(u64, Vec<Vec<u8>>)> = Vec::new();
        let clients = self.clients.lock();
        {
            let mut table = self.keys.lock();
            for key in &pending {
                if let Some(ids) = table.remove(key) {
                    let reading = ids.into_iter().filter(|id| clients.get(id).is_some_and(|t| !t.opts.bcast));
                    messages.extend(reading.map(|id| (id, vec![key.clone()])));
                }
            }
        }
        // BCAST: one message per prefix the client follows (the empty prefix when it named
        // none), with the changed keys under it, as Redis sends them.
        for (id, t) in clients.iter().filter(|(_, t)| t.opts.bcast) {
            let every: [&[u8]; 1] = [b""];
            let prefixes: Vec<&[u8]> = if t.opts.prefixes.is_empty() { every.to_vec() } else { t.opts.prefixes.iter().map(Vec::as_slice).collect() };
            for prefix in prefixes {
                let hits: Vec<Vec<u8>> = pending.iter().filter(|k| k.starts_with(prefix)).cloned().collect();
                if !hits.is_empty() {
                    messages.push((*id, hits));
                }
            }
        }
        for (id, keys) in messages {
            let Some(t) = clients.get(&id) else { continue };
            if t.opts.noloop && Some(id) == writer {
                continue;
            }
            self.send(registry, t, Some(&keys));
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client drops its whole cache.
    pub fn invalidate_all(&self, registry: &crate::clients::Registry) {
        self.keys.lock().clear();
        self.forgotten.lock().clear();
        let clients = self.clients.lock();
        for t in clients.values() {
            self.send(registry, t, None);
        }
    }

    fn send(&self, registry: &crate::clients::Registry, t: &Tracker, keys: Option<&[Vec<u8>]>) {
        let target = match t.opts.redirect {
            None => t.info.clone(),
            Some(rid) => match registry.lock().get(&rid).cloned() {
                Some(c) => c,
                None => {
                    // The redirect target is gone: tell the client (RESP3 can hear it).
                    if t.info.resp.load(Ordering::Relaxed) == 3 {
                        crate::pubsub::deliver(&t.info, |w| {
                            w.push_len(2);
                            w.bulk(b"tracking-redir-broken");
                            w.int(rid as i64);
                        });
                    }
                    return;
                }
            },
        };
        let resp3 = target.resp.load(Ordering::Relaxed) == 3;
        let subscribed = target.sub.load(Ordering::Relaxed) > 0;
        if resp3 {
            crate::pubsub::deliver(&target, |w| write_invalidate(w, keys, false));
        } else if t.opts.redirect.is_some() && subscribed {
            crate::pubsub::deliver(&target, |w| write_invalidate(w, keys, true));
        }
        // A RESP2 client without a redirect can't receive pushes on its own connection.
    }
}

/// Checks that no prefix of a BCAST client is a prefix of another.
pub fn prefixes_overlap(prefixes: &[Vec<u8>]) -> Option<(Vec<u8>, Vec<u8>)> {
    for (i, a) in prefixes.iter().enumerate() {
        for b in &prefixes[i + 1..] {
            if a.starts_with(b) || b.starts_with(a) {
                return Some((a.clone(), b.clone()));
            }
        }
    }
    None
}
