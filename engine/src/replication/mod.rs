//! Replication's state, both ways. As a replica: whom this engine follows (`REPLICAOF`) and
//! how its link to that master stands (`server::follower` runs the link). As a master: its
//! replication ID, the backlog its writes are fed into (`backlog`, in the form `propagate`
//! gives them), the replicas attached (`server::replicas` serves each) with what each has
//! acknowledged, and the clients waiting in WAIT for those acknowledgements.
//!
//! Both directions speak Redis's protocol (redis-server 7.0 follows this engine, this engine
//! follows a redis-server), for the default namespace's data.

pub mod backlog;
pub mod propagate;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

pub use backlog::{Backlog, Stream};

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
    /// The database the master's stream is in at `offset` (kept for a partial resync).
    pub db: usize,
    pub last_io: Instant,
    /// Why the last attempt failed, if it did (logged once per change).
    pub last_error: Option<String>,
}

/// A replica's PSYNC (SYNC: `?`, -1) and what it said in REPLCONF before it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Psync {
    pub replid: String,
    pub offset: i64,
    /// REPLCONF listening-port.
    pub port: u16,
    /// REPLCONF capa eof: it reads a diskless `$EOF:` snapshot.
    pub eof: bool,
    /// SYNC (the old protocol: no `+FULLRESYNC` line before the snapshot).
    pub old_sync: bool,
}

/// Where a replica attached to this engine is, as INFO's `slaveN:state=` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaState {
    /// Its snapshot is being made.
    WaitBgsave,
    /// Its snapshot is being sent.
    SendBulk,
    /// It follows the stream.
    Online,
}

impl ReplicaState {
    pub fn name(self) -> &'static str {
        match self {
            ReplicaState::WaitBgsave => "wait_bgsave",
            ReplicaState::SendBulk => "send_bulk",
            ReplicaState::Online => "online",
        }
    }
}

/// A replica attached to this engine.
#[derive(Clone, Debug)]
pub struct Replica {
    pub id: u64,
    pub ip: String,
    /// The port it listens on (REPLCONF listening-port).
    pub port: u16,
    pub state: ReplicaState,
    /// The offset it acknowledged last (REPLCONF ACK).
    pub acked: u64,
    pub acked_at: Instant,
}

/// INFO stats' counts of the synchronizations served to replicas.
#[derive(Default)]
pub struct Syncs {
    pub full: AtomicU64,
    pub partial_ok: AtomicU64,
    /// PSYNCs with a replication ID and offset that could not continue (a full sync followed).
    pub partial_err: AtomicU64,
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
    /// As a master: the stream (made when the first replica attaches), whether writes are fed
    /// into it, the replicas attached, and WAIT's waiting clients.
    backlog: OnceLock<Backlog>,
    feeding: AtomicBool,
    replicas: Mutex<Vec<Replica>>,
    ack_waiters: Mutex<Vec<Arc<tokio::sync::Notify>>>,
    pub syncs: Syncs,
    /// The offset after the last GETACK sent.
    getack_at: Mutex<u64>,
    /// `repl-backlog-size`, `min-replicas-to-write`, `min-replicas-max-lag` (seconds).
    pub backlog_size: AtomicUsize,
    pub min_replicas: AtomicUsize,
    pub min_replicas_max_lag: AtomicU64,
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
            backlog: OnceLock::new(),
            feeding: AtomicBool::new(false),
            replicas: Mutex::new(Vec::new()),
            ack_waiters: Mutex::new(Vec::new()),
            getack_at: Mutex::new(0),
            syncs: Syncs::default(),
            backlog_size: AtomicUsize::new(1 << 20),
            min_replicas: AtomicUsize::new(0),
            min_replicas_max_lag: AtomicU64::new(10),
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
        *self.link.lock() = master.as_ref().map(|_| Link {
            state: LinkState::Connecting,
            master_replid: "?".into(),
            offset: -1,
            db: 0,
            last_io: Instant::now(),
            last_error: None,
        });
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

/// As a master.
impl Replication {
    /// The backlog writes go to, once a replica has attached (None before: nothing is fed).
    #[inline]
    pub fn feed(&self) -> Option<&Backlog> {
        if self.feeding.load(Ordering::Relaxed) {
            self.backlog.get()
        } else {
            None
        }
    }

    /// The backlog, made now if there was none; writes are fed into it from now on (the
    /// caller holds every shard, so no write is half in the snapshot it takes).
    pub fn start_feeding(&self) -> &Backlog {
        let backlog = self.backlog.get_or_init(|| Backlog::new(0, self.backlog_size.load(Ordering::Relaxed)));
        self.feeding.store(true, Ordering::SeqCst);
        backlog
    }

    /// The backlog, if one was ever made.
    pub fn backlog(&self) -> Option<&Backlog> {
        self.backlog.get()
    }

    pub fn set_backlog_size(&self, size: usize) {
        self.backlog_size.store(size, Ordering::Relaxed);
        if let Some(b) = self.backlog.get() {
            b.set_keep(size);
        }
    }

    /// The master replication offset (0 before any replica attached).
    pub fn offset(&self) -> u64 {
        self.backlog.get().map_or(0, Backlog::offset)
    }

    pub fn attach_replica(&self, replica: Replica) {
        self.replicas.lock().push(replica);
    }

    pub fn update_replica(&self, id: u64, f: impl FnOnce(&mut Replica)) {
        if let Some(r) = self.replicas.lock().iter_mut().find(|r| r.id == id) {
            f(r);
        }
    }

    pub fn detach_replica(&self, id: u64) {
        self.replicas.lock().retain(|r| r.id != id);
        if let Some(b) = self.backlog.get() {
            b.detach(id);
        }
        self.wake_waiters();
    }

    pub fn replicas(&self) -> Vec<Replica> {
        self.replicas.lock().clone()
    }

    /// A replica acknowledged `offset`: WAIT's clients look again.
    pub fn acknowledged(&self, id: u64, offset: u64) {
        self.update_replica(id, |r| {
            r.acked = r.acked.max(offset);
            r.acked_at = Instant::now();
        });
        self.wake_waiters();
    }

    /// How many online replicas acknowledged `offset` or more.
    pub fn acked_at_least(&self, offset: u64) -> usize {
        self.replicas.lock().iter().filter(|r| r.state == ReplicaState::Online && r.acked >= offset).count()
    }

    /// Online replicas that acknowledged within `min-replicas-max-lag` seconds.
    pub fn good_replicas(&self) -> usize {
        let lag = std::time::Duration::from_secs(self.min_replicas_max_lag.load(Ordering::Relaxed));
        self.replicas.lock().iter().filter(|r| r.state == ReplicaState::Online && r.acked_at.elapsed() <= lag).count()
    }

    /// Whether writes must be refused for want of good replicas (`min-replicas-to-write`).
    pub fn too_few_replicas(&self) -> bool {
        let min = self.min_replicas.load(Ordering::Relaxed);
        min > 0 && self.good_replicas() < min
    }

    /// A WAIT waits: `notify` is told when an acknowledgement arrives (once; it registers
    /// again if it still waits). Replicas are asked to acknowledge at once, unless nothing
    /// was written since they were last asked (a WAIT woken by an acknowledgement that was
    /// not enough would otherwise ask again and again).
    pub fn wait_for_acks(&self, notify: Arc<tokio::sync::Notify>) {
        self.ack_waiters.lock().push(notify);
        if let Some(b) = self.feed() {
            let mut asked = self.getack_at.lock();
            if b.offset() > *asked {
                *asked = b.append_raw(GETACK);
            }
        }
    }

    /// Puts a PING in the stream while replicas are attached.
    pub fn ping_replicas(&self) {
        if let Some(b) = self.feed().filter(|_| !self.replicas.lock().is_empty()) {
            b.append_raw(PING);
        }
    }

    fn wake_waiters(&self) {
        for n in std::mem::take(&mut *self.ack_waiters.lock()) {
            n.notify_one();
        }
    }
}

/// What a master sends its replicas now and then (a write that changes nothing).
pub const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// What a master sends to have its replicas acknowledge at once.
pub const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";

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

    #[test]
    fn wait_counts_online_replicas_that_acknowledged_enough() {
        let r = Replication::default();
        assert!(r.feed().is_none(), "nothing fed before a replica attaches");
        r.start_feeding().append_raw(b"0123456789");
        assert_eq!(r.offset(), 10);
        let replica = |id| Replica { id, ip: "127.0.0.1".into(), port: 1, state: ReplicaState::Online, acked: 0, acked_at: Instant::now() };
        r.attach_replica(replica(1));
        r.attach_replica(Replica { state: ReplicaState::SendBulk, ..replica(2) });
        let notify = Arc::new(tokio::sync::Notify::new());
        r.wait_for_acks(notify.clone());
        assert_eq!(r.offset(), 10 + GETACK.len() as u64, "replicas asked to acknowledge");
        r.wait_for_acks(notify.clone());
        assert_eq!(r.offset(), 10 + GETACK.len() as u64, "not again while nothing was written");
        r.acknowledged(1, 10);
        r.acknowledged(2, 10);
        assert_eq!(r.acked_at_least(10), 1, "a replica still syncing does not count");
        assert_eq!(r.acked_at_least(11), 0);
        assert!(r.ack_waiters.lock().is_empty(), "the waiter was told");
        r.min_replicas.store(2, Ordering::Relaxed);
        assert!(r.too_few_replicas());
        r.update_replica(2, |x| x.state = ReplicaState::Online);
        assert!(!r.too_few_replicas());
        r.detach_replica(2);
        assert!(r.too_few_replicas());
    }
}
