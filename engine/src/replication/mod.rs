//! Replication's state: whom this engine follows (`REPLICAOF`), how its link to that master
//! stands, and the replication ID it answers with as a master. `server::follower` runs the
//! link.
//!
//! What is built: this engine as a replica of a Redis-protocol master (redis-server 7.0 or
//! anything speaking its replication protocol) — handshake, full sync, the command stream,
//! acknowledgements — for the master's data in the default namespace. Not yet: serving
//! replicas (PSYNC from another server), partial resync, WAIT counting replicas.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// The master a `REPLICAOF host port` named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Master {
    pub host: String,
    pub port: u16,
}

/// Where the link to the master is (ROLE's words in `role_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Connecting, or waiting to connect again after a failure.
    Connecting,
    /// Handshake done; the master's snapshot is being received and loaded.
    Sync,
    /// Following the master's command stream.
    Connected,
}

/// The link to the master, as INFO replication and ROLE show it.
#[derive(Clone, Debug)]
pub struct Link {
    pub state: LinkState,
    /// The master's replication ID and this replica's offset in its stream.
    pub master_replid: String,
    pub offset: i64,
    pub last_io: Instant,
    /// Why the last attempt failed, if it did (logged once per change).
    pub last_error: Option<String>,
}

/// Replication's state on this engine.
pub struct Replication {
    /// This engine's replication ID as a master (40 hex digits, new at every start).
    pub replid: String,
    /// Bumped by every REPLICAOF: a follower started for an older one stops.
    generation: AtomicU64,
    master: Mutex<Option<Master>>,
    changed: Condvar,
    replica: AtomicBool,
    link: Mutex<Option<Link>>,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            replid: random_replid(),
            generation: AtomicU64::new(0),
            master: Mutex::new(None),
            changed: Condvar::new(),
            replica: AtomicBool::new(false),
            link: Mutex::new(None),
        }
    }
}

/// 40 random hex digits, as Redis's replication IDs.
fn random_replid() -> String {
    (0..40).map(|_| char::from_digit(fastrand::u32(0..16), 16).expect("a hex digit")).collect()
}

impl Replication {
    /// Follows `master` from now on (None: REPLICAOF NO ONE, this engine is a master again
    /// and keeps its data). Returns false when it already followed that master.
    pub fn follow(&self, master: Option<Master>) -> bool {
        let mut current = self.master.lock();
        if *current == master {
            return false;
        }
        self.replica.store(master.is_some(), Ordering::SeqCst);
        *self.link.lock() =
            master.as_ref().map(|_| Link { state: LinkState::Connecting, master_replid: "?".into(), offset: -1, last_io: Instant::now(), last_error: None });
        *current = master;
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_all();
        true
    }

    /// Whether this engine follows a master (its clients may not write).
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Relaxed)
    }

    /// The master followed now, if any.
    pub fn master(&self) -> Option<Master> {
        self.master.lock().clone()
    }

    /// The link's state, while following a master.
    pub fn link(&self) -> Option<Link> {
        self.link.lock().clone()
    }

    /// The generation of the current REPLICAOF.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Waits up to `wait` for a master to follow: (generation, master).
    pub fn wait_for_master(&self, wait: std::time::Duration) -> Option<(u64, Master)> {
        let mut current = self.master.lock();
        if current.is_none() {
            self.changed.wait_for(&mut current, wait);
        }
        current.clone().map(|m| (self.generation(), m))
    }

    /// Updates the link of generation `generation` (a stale follower's updates are dropped).
    pub(crate) fn update_link(&self, generation: u64, f: impl FnOnce(&mut Link)) {
        let mut link = self.link.lock();
        if self.generation() != generation {
            return;
        }
        if let Some(l) = link.as_mut() {
            f(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicaof_switches_role_and_a_stale_follower_cannot_touch_the_new_link() {
        let r = Replication::default();
        assert_eq!(r.replid.len(), 40);
        assert!(!r.is_replica() && r.link().is_none());
        let m = Master { host: "127.0.0.1".into(), port: 6379 };
        assert!(r.follow(Some(m.clone())));
        assert!(!r.follow(Some(m.clone())), "already following it");
        let old = r.generation();
        assert!(r.is_replica());
        assert_eq!(r.wait_for_master(std::time::Duration::ZERO), Some((old, m)));
        assert!(r.follow(Some(Master { host: "127.0.0.1".into(), port: 6380 })));
        r.update_link(old, |l| l.state = LinkState::Connected);
        assert_eq!(r.link().unwrap().state, LinkState::Connecting, "the old follower's update is dropped");
        r.update_link(r.generation(), |l| l.state = LinkState::Connected);
        assert_eq!(r.link().unwrap().state, LinkState::Connected);
        assert!(r.follow(None));
        assert!(!r.is_replica() && r.link().is_none() && r.master().is_none());
    }
}
