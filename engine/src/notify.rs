//! Keyspace notifications (`notify-keyspace-events`): which event classes are on, and the
//! publishing of events as Redis does — `__keyspace@<db>__:<key>` with the event as the
//! message, `__keyevent@<db>__:<event>` with the key — to channel and pattern subscribers.
//!
//! Shards note what happens to keys while notifications are on (`Keyspace::set_notify`);
//! the command pipeline names the events after each command, the cron tells expirations it
//! swept, eviction tells evictions.

use std::sync::atomic::{AtomicU32, Ordering};

use bytes::BytesMut;
use terrace_commands::notify::class;

use crate::keyspace::{Keyspace, NUM_DBS};
use crate::protocol::ReplyWriter;
use crate::pubsub::PubSub;

/// One event to publish: (database, class, event, key).
pub type Event = (usize, u32, &'static str, Vec<u8>);

/// The classes on, per namespace: a tenant chooses its own (CONFIG SET
/// notify-keyspace-events on a connection of its namespace), as its events go to its own
/// subscribers.
pub struct Notifications {
    flags: Box<[AtomicU32]>,
}

impl Notifications {
    pub fn new(namespaces: usize) -> Notifications {
        Notifications { flags: (0..namespaces.max(1)).map(|_| AtomicU32::new(0)).collect() }
    }

    /// Takes the classes CONFIG SET chose for namespace `ns`; shards note events only while
    /// some namespace has some on.
    pub fn set(&self, ns: usize, flags: u32, keyspace: &Keyspace) {
        if let Some(f) = self.flags.get(ns) {
            f.store(flags, Ordering::Relaxed);
        }
        keyspace.set_notify(self.flags.iter().any(|f| Self::active(f.load(Ordering::Relaxed))));
    }

    /// Namespace `ns`'s classes (CONFIG GET notify-keyspace-events).
    pub fn flags(&self, ns: usize) -> u32 {
        self.flags.get(ns).map_or(0, |f| f.load(Ordering::Relaxed))
    }

    fn active(flags: u32) -> bool {
        flags & (class::KEYSPACE | class::KEYEVENT) != 0 && flags & !(class::KEYSPACE | class::KEYEVENT) != 0
    }

    /// Whether events of `class` are published in namespace `ns`.
    pub fn wants(&self, ns: usize, event_class: u32) -> bool {
        let flags = self.flags(ns);
        Self::active(flags) && flags & event_class != 0
    }

    /// Publishes the events whose class is on, in order. `db` is the absolute database
    /// (a tenant's databases are numbered from 0 on its channels).
    pub fn publish(&self, pubsub: &PubSub, events: Vec<Event>) {
        let mut unused = BytesMut::new();
        for (db, event_class, event, key) in events {
            // By the classes of the key's namespace, on its channels (its tenant's
            // subscribers alone).
            let (ns, db) = (db / NUM_DBS, db % NUM_DBS);
            let flags = self.flags(ns);
            if flags & event_class == 0 {
                continue;
            }
            // Publisher 0 is no client: every subscriber gets it through its mailbox.
            let mut own = ReplyWriter::new(&mut unused, false);
            if flags & class::KEYSPACE != 0 {
                let channel = [format!("__keyspace@{db}__:").as_bytes(), &key].concat();
                pubsub.publish(false, ns, &channel, event.as_bytes(), 0, &mut own);
            }
            if flags & class::KEYEVENT != 0 {
                let channel = format!("__keyevent@{db}__:{event}");
                pubsub.publish(false, ns, channel.as_bytes(), &key, 0, &mut own);
            }
        }
    }
}
