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

#[derive(Default)]
pub struct Notifications {
    flags: AtomicU32,
}

impl Notifications {
    /// Takes the classes CONFIG SET chose; shards note events only while some are on.
    pub fn set(&self, flags: u32, keyspace: &Keyspace) {
        self.flags.store(flags, Ordering::Relaxed);
        keyspace.set_notify(Self::active(flags));
    }

    fn active(flags: u32) -> bool {
        flags & (class::KEYSPACE | class::KEYEVENT) != 0 && flags & !(class::KEYSPACE | class::KEYEVENT) != 0
    }

    /// Whether events of `class` are published.
    pub fn wants(&self, event_class: u32) -> bool {
        let flags = self.flags.load(Ordering::Relaxed);
        Self::active(flags) && flags & event_class != 0
    }

    /// Publishes the events whose class is on, in order. `db` is the absolute database
    /// (a tenant's databases are numbered from 0 on its channels).
    pub fn publish(&self, pubsub: &PubSub, events: Vec<Event>) {
        let flags = self.flags.load(Ordering::Relaxed);
        let mut unused = BytesMut::new();
        for (db, event_class, event, key) in events {
            if flags & event_class == 0 {
                continue;
            }
            // On the channels of the key's namespace (its tenant's subscribers alone).
            let (ns, db) = (db / NUM_DBS, db % NUM_DBS);
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
