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

/// Keys tracked in default mode before the oldest are invalidated (Redis's
/// tracking-table-max-keys default).
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
        Tracking { clients: Mutex::default(), switch, keys: Mutex::default(), forgotten: Mutex::default() }
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

    /// Remembers that a default-mode client read these keys.
    pub fn remember<'a>(&self, client: u64, keys: impl Iterator<Item = &'a [u8]>) {
        let mut table = self.keys.lock();
        for k in keys {
            table.entry(k.to_vec()).or_default().insert(client);
        }
        if table.len() > MAX_TRACKED_KEYS {
            // Over the limit: forget (and invalidate) some keys, as Redis does.
            let victims: Vec<Vec<u8>> = table.keys().take(table.len() - MAX_TRACKED_KEYS).cloned().collect();
            drop(table);
            self.forgotten.lock().extend(victims);
        }
    }

    /// Delivers invalidations for `changed` keys (and for keys forgotten since the last
    /// delivery); `writer` is the client whose command changed them (NOLOOP clients don't
    /// hear about their own writes).
    pub fn invalidate(&self, registry: &Mutex<HashMap<u64, Arc<ClientInfo>>>, mut pending: Vec<Vec<u8>>, writer: Option<u64>) {
        {
            let mut forgotten = self.forgotten.lock();
            if !forgotten.is_empty() {
                pending.append(&mut forgotten);
            }
        }
        if pending.is_empty() {
            return;
        }
        let mut per_client: HashMap<u64, Vec<Vec<u8>>> = HashMap::new();
        {
            let mut table = self.keys.lock();
            for key in &pending {
                if let Some(ids) = table.remove(key) {
                    for id in ids {
                        per_client.entry(id).or_default().push(key.clone());
                    }
                }
            }
        }
        let clients = self.clients.lock();
        for (id, t) in clients.iter() {
            if t.opts.bcast {
                let hits: Vec<Vec<u8>> =
                    pending.iter().filter(|k| t.opts.prefixes.is_empty() || t.opts.prefixes.iter().any(|p| k.starts_with(p))).cloned().collect();
                if !hits.is_empty() {
                    per_client.entry(*id).or_default().extend(hits);
                }
            }
        }
        for (id, keys) in per_client {
            let Some(t) = clients.get(&id) else { continue };
            if t.opts.noloop && Some(id) == writer {
                continue;
            }
            self.send(registry, t, Some(&keys));
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client drops its whole cache.
    pub fn invalidate_all(&self, registry: &Mutex<HashMap<u64, Arc<ClientInfo>>>) {
        self.keys.lock().clear();
        self.forgotten.lock().clear();
        let clients = self.clients.lock();
        for t in clients.values() {
            self.send(registry, t, None);
        }
    }

    fn send(&self, registry: &Mutex<HashMap<u64, Arc<ClientInfo>>>, t: &Tracker, keys: Option<&[Vec<u8>]>) {
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
