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

/// The command a stream carries a write-back or write-through after-image as (storage's
/// record form), and the one that tells a replica its master flushed a key.
pub const CLEAN_RECORD: &[u8] = b"TERRACE.CLEAN";

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

/// Which stream a replica follows: Redis's (the default namespace's databases 0-15, what a
/// redis-server replica can apply) or Terrace's (every namespace, switched by
/// `TERRACE.NAMESPACE`; a replica asks for it with `REPLCONF capa terrace`). Each has its own
/// replication ID and offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Redis,
    Terrace,
}

impl Flavor {
    pub const ALL: [Flavor; 2] = [Flavor::Redis, Flavor::Terrace];

    fn index(self) -> usize {
        self as usize
    }
}

/// How a stream carries a database's writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carry {
    /// Not at all (another namespace than a Redis stream's; storage-backed data a replica
    /// cannot hold).
    Nothing,
    /// As the commands that made them.
    Commands,
    /// As each written key's after-image (`TERRACE.WB key [record]`): a storage-backed
    /// tenant's, whose commands ran on keys read through from storage.
    AfterImages,
}

/// A replication offset in each stream (what a client's WAIT waits for).
pub type Offsets = [u64; 2];

/// One stream as a master feeds it (or, on a replica, as it mirrors its master's).
#[derive(Default)]
struct Feed {
    /// Its replication ID: this engine's as a master, its master's while it is a replica.
    replid: Mutex<String>,
    /// The ID it had before this engine was promoted, and the offset up to which that
    /// history is this stream's too (a replica of the old master continues here: PSYNC2).
    replid2: Mutex<Option<(String, u64)>>,
    backlog: OnceLock<Backlog>,
    feeding: AtomicBool,
    /// The offset after the last GETACK sent.
    getack_at: Mutex<u64>,
    /// The offset after the last write (what a GETACK's answer covers: a replica
    /// acknowledges the offset before the GETACK itself, as Redis's do).
    written_to: AtomicU64,
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
    /// REPLCONF capa terrace: it takes the stream of every namespace.
    pub terrace: bool,
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
    pub flavor: Flavor,
    /// The offset it acknowledged last (REPLCONF ACK), in its flavor's stream.
    pub acked: u64,
    pub acked_at: Instant,
    /// How many acknowledgements it sent (a diskless sync's stream starts after the first).
    pub acks: u64,
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
    /// Bumped by every REPLICAOF: a follower started for an older one stops.
    generation: AtomicU64,
    master: Mutex<Option<Master>>,
    changed: Condvar,
    replica: AtomicBool,
    link: Mutex<Option<Link>>,
    /// As a master: its streams (each made when its first replica attaches), the replicas
    /// attached, and WAIT's waiting clients.
    streams: [Feed; 2],
    replicas: Mutex<Vec<Replica>>,
    ack_waiters: Mutex<Vec<Arc<tokio::sync::Notify>>>,
    pub syncs: Syncs,
    /// While a replica: which stream (1 Redis, 2 Terrace) mirrors its master's (0: none).
    mirrored: std::sync::atomic::AtomicU8,
    /// Fenced until a REPLICAOF gives this engine a role (`wait_for_role`).
    fenced: AtomicBool,
    /// A replica is replacing its keyspace with its master's snapshot.
    loading: AtomicBool,
    /// Until when (unix ms, the coordinator's clock) this primary's term lease lets it take
    /// writes (`i64::MAX`: no lease was given — an engine no coordinator watches).
    lease_until: std::sync::atomic::AtomicI64,
    /// The password given to the master (`masterauth`: the configuration's, or CONFIG SET's).
    pub masterauth: Mutex<Option<String>>,
    /// `repl-backlog-size`, `min-replicas-to-write`, `min-replicas-max-lag` (seconds).
    pub backlog_size: AtomicUsize,
    pub min_replicas: AtomicUsize,
    pub min_replicas_max_lag: AtomicU64,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            generation: AtomicU64::new(0),
            master: Mutex::new(None),
            changed: Condvar::new(),
            replica: AtomicBool::new(false),
            link: Mutex::new(None),
            streams: [Feed::new(), Feed::new()],
            replicas: Mutex::new(Vec::new()),
            ack_waiters: Mutex::new(Vec::new()),
            syncs: Syncs::default(),
            mirrored: Default::default(),
            masterauth: Mutex::new(None),
            fenced: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            lease_until: std::sync::atomic::AtomicI64::new(i64::MAX),
            backlog_size: AtomicUsize::new(1 << 20),
            min_replicas: AtomicUsize::new(0),
            min_replicas_max_lag: AtomicU64::new(10),
        }
    }
}

impl Feed {
    fn new() -> Feed {
        Feed { replid: Mutex::new(random_replid()), ..Feed::default() }
    }
}

/// 40 random hex digits, as Redis's replication IDs.
pub fn random_replid() -> String {
    (0..40).map(|_| char::from_digit(fastrand::u32(0..16), 16).expect("a hex digit")).collect()
}

impl Replication {
    /// Follows `master` from now on (None: REPLICAOF NO ONE, this engine is a master again
    /// and keeps its data). Returns false when it already followed that master.
    pub fn follow(&self, master: Option<Master>) -> bool {
        if master.is_none() {
            // A master again: it serves what it has. (Told to follow a master, a fenced
            // engine stays fenced until its first sync is done: `unfence`.)
            self.unfence();
        }
        let mut current = self.master.lock();
        if *current == master {
            return false;
        }
        if master.is_none() && self.replica.load(Ordering::SeqCst) {
            self.promote();
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

    /// Fences the engine until a REPLICAOF (it restarted and waits for its role).
    pub fn fence(&self) {
        self.fenced.store(true, Ordering::SeqCst);
    }

    /// While a replica loads its master's snapshot, clients get -LOADING (but for Redis's
    /// `loading` commands): they would see the keyspace half replaced.
    pub fn set_loading(&self, on: bool) {
        self.loading.store(on, Ordering::SeqCst);
    }

    pub fn loading(&self) -> bool {
        self.loading.load(Ordering::Relaxed)
    }

    /// Serves clients again (REPLICAOF NO ONE, or a replica's first sync done).
    pub fn unfence(&self) {
        if self.fenced.swap(false, Ordering::SeqCst) {
            tracing::info!("serving clients: this engine has its role");
        }
    }

    /// Sets the term lease: writes are taken until `until` (unix ms), none after; None:
    /// no lease (writes as long as the engine is a primary).
    pub fn set_lease(&self, until: Option<i64>) {
        self.lease_until.store(until.unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    /// The lease's end (None: no lease).
    pub fn lease(&self) -> Option<i64> {
        Some(self.lease_until.load(Ordering::SeqCst)).filter(|&u| u != i64::MAX)
    }

    /// Whether this engine's term lease has run out: it may have been superseded (paused,
    /// cut off, its coordinator gone) and must neither take nor acknowledge writes until
    /// the coordinator renews it. One atomic load when no lease was given; with one, a TSC
    /// read (`clock::now_ms_at`: the wall clock re-read once a millisecond), not a
    /// clock_gettime per write.
    #[inline]
    pub fn lease_lapsed(&self) -> bool {
        let until = self.lease_until.load(Ordering::Relaxed);
        until != i64::MAX && crate::clock::now_ms_at(quanta::Instant::now()) >= until
    }

    /// Whether the engine waits for a REPLICAOF before it serves clients.
    pub fn fenced(&self) -> bool {
        self.fenced.load(Ordering::Relaxed)
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
    /// The backlog of stream `flavor`, if writes are fed into it (a replica attached).
    #[inline]
    pub fn feed(&self, flavor: Flavor) -> Option<&Backlog> {
        let f = &self.streams[flavor.index()];
        if f.feeding.load(Ordering::Relaxed) {
            f.backlog.get()
        } else {
            None
        }
    }

    /// Whether writes are fed into any stream.
    #[inline]
    pub fn feeding(&self) -> bool {
        self.streams.iter().any(|f| f.feeding.load(Ordering::Relaxed))
    }

    /// The backlog of stream `flavor`, made now if there was none; writes are fed into it
    /// from now on (the caller holds every shard, so no write is half in the snapshot it
    /// takes).
    pub fn start_feeding(&self, flavor: Flavor) -> &Backlog {
        let f = &self.streams[flavor.index()];
        let backlog = f.backlog.get_or_init(|| Backlog::new(0, self.backlog_size.load(Ordering::Relaxed)));
        f.feeding.store(true, Ordering::SeqCst);
        backlog
    }

    /// The backlog of stream `flavor`, if one was ever made.
    pub fn backlog(&self, flavor: Flavor) -> Option<&Backlog> {
        self.streams[flavor.index()].backlog.get()
    }

    /// The replication ID of stream `flavor`.
    pub fn replid_of(&self, flavor: Flavor) -> String {
        self.streams[flavor.index()].replid.lock().clone()
    }

    /// The previous ID of stream `flavor` and the offset its history is shared up to.
    pub fn replid2_of(&self, flavor: Flavor) -> Option<(String, u64)> {
        self.streams[flavor.index()].replid2.lock().clone()
    }

    /// Whether a replica that followed `replid` up to `offset` (PSYNC's offset less one) can
    /// continue in stream `flavor`: the ID is this stream's, or its previous one with the
    /// offset within the shared history (PSYNC2).
    pub fn continues(&self, flavor: Flavor, replid: &str, offset: u64) -> bool {
        let f = &self.streams[flavor.index()];
        *f.replid.lock() == replid || f.replid2.lock().as_ref().is_some_and(|(id, upto)| id == replid && offset < *upto)
    }

    /// As a replica, after a full sync: stream `flavor` mirrors the master's from `offset`
    /// on, under its ID (so that this engine, promoted, continues it for the other replicas).
    pub fn mirror_from(&self, flavor: Flavor, replid: &str, offset: u64) {
        let f = &self.streams[flavor.index()];
        let backlog = f.backlog.get_or_init(|| Backlog::new(offset, self.backlog_size.load(Ordering::Relaxed)));
        backlog.reset(offset);
        f.feeding.store(false, Ordering::SeqCst);
        *f.replid.lock() = replid.to_string();
        *f.replid2.lock() = None;
        self.mirrored.store(flavor.index() as u8 + 1, Ordering::SeqCst);
    }

    /// As a replica: the master continued under a new ID (`+CONTINUE <id>`: it was promoted);
    /// the old one stays this stream's previous ID.
    pub fn mirror_renamed(&self, flavor: Flavor, replid: &str) {
        let f = &self.streams[flavor.index()];
        let mut id = f.replid.lock();
        if *id != replid {
            let upto = f.backlog.get().map_or(0, |b| b.offset() + 1);
            *f.replid2.lock() = Some((id.clone(), upto));
            *id = replid.to_string();
        }
    }

    /// As a replica: the master's stream as received, appended to the mirror.
    pub fn mirror(&self, bytes: &[u8]) {
        if let Some(flavor) = self.mirrored() {
            if let Some(b) = self.backlog(flavor) {
                b.append_raw(bytes);
            }
        }
    }

    /// The stream this replica mirrors, if any.
    pub fn mirrored(&self) -> Option<Flavor> {
        match self.mirrored.load(Ordering::SeqCst) {
            1 => Some(Flavor::Redis),
            2 => Some(Flavor::Terrace),
            _ => None,
        }
    }

    /// Where this engine's history stands, for a PSYNC to a new master: (stream, replication
    /// ID, offset, the database the stream is in there). As a replica, its master's stream
    /// as mirrored; as a master, its own stream (Terrace's if it had replicas of it).
    pub fn history(&self) -> Option<(Flavor, String, u64, Option<usize>)> {
        let flavor = self.mirrored().or_else(|| Flavor::ALL.into_iter().rev().find(|f| self.backlog(*f).is_some()))?;
        let b = self.backlog(flavor)?;
        Some((flavor, self.replid_of(flavor), b.offset(), b.selected()))
    }

    /// REPLICAOF NO ONE on a replica: the mirrored stream goes on as this engine's own under
    /// a new ID, the old one kept as its previous ID up to here, so the old master's other
    /// replicas (and the old master) continue with a partial resync.
    fn promote(&self) {
        let Some(flavor) = self.mirrored() else { return };
        self.mirrored.store(0, Ordering::SeqCst);
        let f = &self.streams[flavor.index()];
        let Some(b) = f.backlog.get() else { return };
        let mut id = f.replid.lock();
        *f.replid2.lock() = Some((id.clone(), b.offset() + 1));
        *id = random_replid();
        b.forget_selected();
        f.written_to.store(b.offset(), Ordering::SeqCst);
        f.feeding.store(true, Ordering::SeqCst);
    }

    pub fn set_backlog_size(&self, size: usize) {
        self.backlog_size.store(size, Ordering::Relaxed);
        for f in &self.streams {
            if let Some(b) = f.backlog.get() {
                b.set_keep(size);
            }
        }
    }

    /// The master replication offset of Redis's stream, what INFO and ROLE show (0 before
    /// any replica attached).
    pub fn offset(&self) -> u64 {
        self.offset_of(Flavor::Redis)
    }

    pub fn offset_of(&self, flavor: Flavor) -> u64 {
        self.backlog(flavor).map_or(0, Backlog::offset)
    }

    /// Each stream's offset after its last write (TERRACE.WAIT waits for these: not for the
    /// GETACKs and PINGs after them).
    pub fn written_offsets(&self) -> Offsets {
        Flavor::ALL.map(|f| self.streams[f.index()].written_to.load(Ordering::SeqCst))
    }

    /// Appends to every stream being fed what `write` puts in it for that flavor, and
    /// returns each stream's offset after it (unfed streams: unchanged). `names` names a
    /// namespace for Terrace's stream.
    pub fn append_everywhere(&self, names: backlog::Names, mut write: impl FnMut(Flavor, &mut Stream)) -> Offsets {
        let mut offsets = [0; 2];
        for flavor in Flavor::ALL {
            if let Some(b) = self.feed(flavor) {
                let names = (flavor == Flavor::Terrace).then_some(names);
                let end = b.append(names, |s| write(flavor, s));
                self.streams[flavor.index()].written_to.fetch_max(end, Ordering::SeqCst);
                offsets[flavor.index()] = end;
            }
        }
        offsets
    }

    /// Wakes the replicas' senders for what was appended since (a connection calls it once
    /// per batch, before its replies go out; the cron once per tick, for the rest).
    #[inline]
    pub fn publish(&self) {
        for f in &self.streams {
            if f.feeding.load(Ordering::Relaxed) {
                if let Some(b) = f.backlog.get() {
                    b.publish();
                }
            }
        }
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
        for f in &self.streams {
            if let Some(b) = f.backlog.get() {
                b.detach(id);
            }
        }
        self.wake_waiters();
    }

    pub fn replicas(&self) -> Vec<Replica> {
        self.replicas.lock().clone()
    }

    /// How long replica `id` has not acknowledged anything (its sender checks it after
    /// every chunk: a lookup, not a copy of every replica).
    pub fn silent_for(&self, id: u64) -> Option<std::time::Duration> {
        self.replicas.lock().iter().find(|r| r.id == id).map(|r| r.acked_at.elapsed())
    }

    /// How many acknowledgements replica `id` sent.
    pub fn acks_of(&self, id: u64) -> Option<u64> {
        self.replicas.lock().iter().find(|r| r.id == id).map(|r| r.acks)
    }

    /// A replica acknowledged `offset`: WAIT's clients look again.
    pub fn acknowledged(&self, id: u64, offset: u64) {
        self.update_replica(id, |r| {
            r.acked = r.acked.max(offset);
            r.acked_at = Instant::now();
            r.acks += 1;
        });
        self.wake_waiters();
    }

    /// How many online replicas acknowledged `offsets` (each in its own stream) or more.
    pub fn acked_at_least(&self, offsets: Offsets) -> usize {
        self.replicas.lock().iter().filter(|r| r.state == ReplicaState::Online && r.acked >= offsets[r.flavor.index()]).count()
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
    /// was written to their stream since they were last asked (a WAIT woken by an
    /// acknowledgement that was not enough would otherwise ask again and again).
    pub fn wait_for_acks(&self, notify: Arc<tokio::sync::Notify>) {
        self.ack_waiters.lock().push(notify);
        for flavor in Flavor::ALL {
            if let Some(b) = self.feed(flavor) {
                let mut asked = self.streams[flavor.index()].getack_at.lock();
                if b.offset() > *asked {
                    *asked = b.append_raw(GETACK);
                }
            }
        }
    }

    /// Puts a PING in the streams while replicas are attached.
    pub fn ping_replicas(&self) {
        if self.replicas.lock().is_empty() {
            return;
        }
        for flavor in Flavor::ALL {
            if let Some(b) = self.feed(flavor) {
                b.append_raw(PING);
            }
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
        assert_eq!(r.replid_of(Flavor::Redis).len(), 40);
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
        assert!(r.feed(Flavor::Redis).is_none() && !r.feeding(), "nothing fed before a replica attaches");
        r.start_feeding(Flavor::Redis).append_raw(b"0123456789");
        assert_eq!(r.offset(), 10);
        assert_ne!(r.replid_of(Flavor::Redis), r.replid_of(Flavor::Terrace));
        let replica = |id| Replica {
            id,
            ip: "127.0.0.1".into(),
            port: 1,
            state: ReplicaState::Online,
            flavor: Flavor::Redis,
            acked: 0,
            acked_at: Instant::now(),
            acks: 0,
        };
        r.attach_replica(replica(1));
        r.attach_replica(Replica { state: ReplicaState::SendBulk, ..replica(2) });
        let notify = Arc::new(tokio::sync::Notify::new());
        r.wait_for_acks(notify.clone());
        assert_eq!(r.offset(), 10 + GETACK.len() as u64, "replicas asked to acknowledge");
        r.wait_for_acks(notify.clone());
        assert_eq!(r.offset(), 10 + GETACK.len() as u64, "not again while nothing was written");
        let written = r.append_everywhere(&|_| None, |_, s| s.command(0, &["SET", "k", "v"]))[0];
        r.wait_for_acks(notify.clone());
        assert_eq!(r.written_offsets()[0], written, "a GETACK is not a write a WAIT waits for");
        assert!(r.offset() > written);
        r.acknowledged(1, 10);
        r.acknowledged(2, 10);
        assert_eq!(r.acked_at_least([10, 0]), 1, "a replica still syncing does not count");
        assert_eq!(r.acked_at_least([11, 0]), 0);
        r.attach_replica(Replica { flavor: Flavor::Terrace, ..replica(3) });
        r.acknowledged(3, 5);
        assert_eq!(r.acked_at_least([10, 5]), 2, "each replica by its own stream's offset");
        r.detach_replica(3);
        assert!(r.ack_waiters.lock().is_empty(), "the waiter was told");
        r.min_replicas.store(2, Ordering::Relaxed);
        assert!(r.too_few_replicas());
        r.update_replica(2, |x| x.state = ReplicaState::Online);
        assert!(!r.too_few_replicas());
        r.detach_replica(2);
        assert!(r.too_few_replicas());
    }

    #[test]
    fn a_promoted_replica_keeps_its_masters_id_as_the_previous_one() {
        let r = Replication::default();
        r.follow(Some(Master { host: "a".into(), port: 1 }));
        let master_id = "m".repeat(40);
        r.mirror_from(Flavor::Terrace, &master_id, 100);
        r.mirror(b"0123456789");
        assert!(r.feed(Flavor::Terrace).is_none(), "a replica feeds nothing from its commits");
        assert_eq!(r.history(), Some((Flavor::Terrace, master_id.clone(), 110, None)));
        assert!(r.continues(Flavor::Terrace, &master_id, 105));
        r.follow(None);
        let new_id = r.replid_of(Flavor::Terrace);
        assert_ne!(new_id, master_id);
        assert_eq!(r.replid2_of(Flavor::Terrace), Some((master_id.clone(), 111)));
        assert!(r.continues(Flavor::Terrace, &master_id, 110), "the old master's replicas continue");
        assert!(!r.continues(Flavor::Terrace, &master_id, 111), "past the shared history");
        assert!(r.continues(Flavor::Terrace, &new_id, 200));
        assert!(r.feed(Flavor::Terrace).is_some(), "its own stream from now on");
        assert_eq!(r.mirrored(), None);
    }
}
