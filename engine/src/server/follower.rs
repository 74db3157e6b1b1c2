//! The replica's side of Redis's replication protocol: the thread that follows the master a
//! `REPLICAOF host port` named. It connects, does the handshake (`PING`, `REPLCONF
//! listening-port`, `REPLCONF capa eof capa psync2`, `PSYNC ? -1`), takes the full sync
//! (`+FULLRESYNC replid offset`, then the master's RDB, as `$<length>` or in the diskless
//! `$EOF:<mark>` form, after any newlines the master sends while it prepares it), replaces
//! the keyspace with it, and then applies the master's command stream in order on a
//! connection of its own that may write (clients of a replica may not). It acknowledges its
//! offset (`REPLCONF ACK`) every second and when the master asks (`REPLCONF GETACK`) — with
//! `wal = always` or `pmem`, only once what it applied is durable in its own log. A
//! broken link is tried again every second, with a full sync each time (no partial resync
//! yet). `REPLICAOF NO ONE` or another master ends the link within 100 ms.
//!
//! The master's data lands in the default namespace (a Redis master has no tenants).
//! Hand-written over a blocking socket on a thread of its own: the stream is applied in
//! order, one command at a time, and no crate implements the replica side of the protocol.

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::prefetch::Prefetcher;
use super::socket::StdSocket;
use super::state::{ClientInfo, Server};
use crate::keyspace::LockCap;
use crate::protocol::{Limits, RequestParser};
use crate::replication::{Flavor, LinkState, Master, CLEAN_RECORD};
use crate::storage::WB_RECORD;

/// How long a reply of the handshake may take.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(10);
/// How long the master may stay silent before the link counts as broken (Redis's
/// `repl-timeout` default).
const SILENCE: Duration = Duration::from_secs(60);
/// How often the offset is acknowledged.
const ACK_EVERY: Duration = Duration::from_secs(1);

/// Why a link ended.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the master answered {0}")]
    Master(String),
    #[error("the master's snapshot could not be loaded: {0}")]
    Load(String),
    #[error("the master closed the link")]
    Closed,
    #[error("the master sent nothing for {0:?}")]
    Silent(Duration),
    #[error("this engine's WAL cannot make what it applied durable ({0}): it acknowledges nothing")]
    NotDurable(String),
    /// REPLICAOF changed (or the server stops): not an error to report.
    #[error("replication changed")]
    Superseded,
}

/// Starts the follower thread, which follows whatever master REPLICAOF names until the
/// server is gone.
pub fn spawn(srv: &Arc<Server>, locks: LockCap) -> std::io::Result<std::thread::JoinHandle<()>> {
    let weak = Arc::downgrade(srv);
    std::thread::Builder::new().name("terrace-replica".into()).spawn(move || run(weak, locks))
}

fn run(weak: Weak<Server>, locks: LockCap) {
    loop {
        let Some(srv) = weak.upgrade() else { return };
        if srv.shutdown.load(Ordering::Relaxed) {
            return;
        }
        let Some((generation, master)) = srv.replication.wait_for_master(Duration::from_millis(500)) else { continue };
        match follow(&srv, &locks, generation, &master) {
            Err(LinkError::Superseded) | Ok(()) => {}
            Err(e) => {
                let why = e.to_string();
                srv.replication.update_link(generation, |l| {
                    if l.last_error.as_deref() != Some(why.as_str()) {
                        tracing::warn!(master = %format!("{}:{}", master.host, master.port), "replication link: {why}; trying again every second");
                    }
                    l.state = LinkState::Connecting;
                    l.last_error = Some(why.clone());
                });
                drop(srv);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

/// The socket to the master, with what was read and not yet used.
struct Wire<'a> {
    srv: &'a Server,
    generation: u64,
    stream: StdSocket,
    buf: BytesMut,
    last_io: Instant,
}

impl Wire<'_> {
    /// Reads more into the buffer, giving up when REPLICAOF changes or after `silence`.
    fn fill(&mut self, silence: Duration) -> Result<(), LinkError> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if self.srv.replication.generation() != self.generation || self.srv.shutdown.load(Ordering::Relaxed) {
                return Err(LinkError::Superseded);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(LinkError::Closed),
                Ok(n) => {
                    // Checked again: what the master sent after a REPLICAOF NO ONE was
                    // answered must not be applied.
                    if self.srv.replication.generation() != self.generation {
                        return Err(LinkError::Superseded);
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                    self.last_io = Instant::now();
                    return Ok(());
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    if self.last_io.elapsed() >= silence {
                        return Err(LinkError::Silent(silence));
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// One reply line of the handshake (without its CRLF); newlines the master sends to
    /// keep the link alive before a line are skipped.
    fn line(&mut self) -> Result<String, LinkError> {
        loop {
            while self.buf.first() == Some(&b'\n') {
                let _ = self.buf.split_to(1);
            }
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf.split_to(end + 2);
                return Ok(String::from_utf8_lossy(&line[..end]).into_owned());
            }
            self.fill(HANDSHAKE_WAIT)?;
        }
    }

    /// Sends a command and reads its one-line reply.
    fn call(&mut self, argv: &[&str]) -> Result<String, LinkError> {
        self.send(argv)?;
        self.line()
    }

    fn send(&mut self, argv: &[&str]) -> Result<(), LinkError> {
        let mut out = BytesMut::new();
        terrace_commands::resp::encode_request(&mut out, argv);
        self.stream.write_all(&out)?;
        Ok(())
    }

    /// The master's snapshot after `+FULLRESYNC`: `$<length>` then that many bytes, or
    /// `$EOF:<40-byte mark>` then bytes up to the mark.
    fn snapshot(&mut self) -> Result<BytesMut, LinkError> {
        let header = self.line()?;
        let not_a_snapshot = || LinkError::Master(format!("'{header}' where the snapshot should begin"));
        let Some(spec) = header.strip_prefix('$') else {
            return Err(not_a_snapshot());
        };
        if let Some(mark) = spec.strip_prefix("EOF:") {
            let mark = mark.as_bytes().to_vec();
            if mark.len() != 40 {
                return Err(LinkError::Master(format!("an end mark of {} bytes", mark.len())));
            }
            // The mark is looked for in what each read added (and the 39 bytes before it):
            // a master may send the stream right behind it (an engine does once the replica
            // acknowledged; a redis-server the same).
            let finder = memchr::memmem::Finder::new(&mark);
            let mut searched: usize = 0;
            loop {
                let from = searched.saturating_sub(mark.len() - 1);
                if let Some(at) = finder.find(&self.buf[from..]) {
                    let end = from + at;
                    let image = self.buf.split_to(end);
                    let _ = self.buf.split_to(mark.len());
                    self.own_buffer();
                    return Ok(image);
                }
                searched = self.buf.len();
                self.fill(SILENCE)?;
            }
        }
        let len: usize = spec.parse().map_err(|_| not_a_snapshot())?;
        // Its size is known: one allocation, not a doubling buffer.
        self.buf.reserve(len.saturating_sub(self.buf.len()));
        while self.buf.len() < len {
            self.fill(SILENCE)?;
        }
        let image = self.buf.split_to(len);
        self.own_buffer();
        Ok(image)
    }

    /// Moves what follows a snapshot into a buffer of its own: split off, the snapshot still
    /// shares its allocation with the rest, which would keep all of it alive after the
    /// snapshot is loaded and dropped.
    fn own_buffer(&mut self) {
        let mut fresh = BytesMut::with_capacity(self.buf.len().max(64 * 1024));
        fresh.extend_from_slice(&self.buf);
        self.buf = fresh;
    }
}

/// Follows `master` (REPLICAOF generation `generation`) until the link breaks or
/// REPLICAOF changes.
fn follow(srv: &Server, locks: &LockCap, generation: u64, master: &Master) -> Result<(), LinkError> {
    // (Over TLS with `tls_replication`.)
    let stream = super::tls::connect(&srv.config.tls, super::tls::Link::Replication, &master.host, master.port, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut wire = Wire { srv, generation, stream, buf: BytesMut::with_capacity(64 * 1024), last_io: Instant::now() };
    let expect_ok = |reply: String, what: &str| -> Result<(), LinkError> {
        if reply.starts_with('+') {
            Ok(())
        } else {
            Err(LinkError::Master(format!("{reply} to {what}")))
        }
    };
    let password = srv.replication.masterauth.lock().clone();
    if let Some(p) = password.filter(|p| !p.is_empty()) {
        let auth = wire.call(&["AUTH", &p])?;
        expect_ok(auth, "AUTH (masterauth)")?;
    }
    let pong = wire.call(&["PING"])?;
    if !pong.starts_with("+PONG") {
        return Err(LinkError::Master(format!("{pong} to PING (set masterauth if the master needs a password)")));
    }
    expect_ok(wire.call(&["REPLCONF", "listening-port", &srv.config.port.to_string()])?, "REPLCONF listening-port")?;
    // (`capa terrace`: an engine master sends every namespace, and says so; redis-server
    // ignores it.)
    let capa = wire.call(&["REPLCONF", "capa", "eof", "capa", "psync2", "capa", "terrace"])?;
    let flavor = if capa.starts_with("+OK terrace") { Flavor::Terrace } else { Flavor::Redis };
    expect_ok(capa, "REPLCONF capa")?;
    // Continue where this engine's history stands, if the master still has what follows
    // (PSYNC replid offset+1 → +CONTINUE): after a broken link, the stream as followed; after
    // REPLICAOF to another master, what it mirrored of its old master's stream (which a
    // promoted replica continues) or, for a master turned replica, its own stream.
    let followed = srv.replication.link().filter(|l| l.master_replid.len() == 40 && l.offset >= 0);
    let resume = match &followed {
        Some(l) => Some((l.master_replid.clone(), l.offset, l.db)),
        None => srv.replication.history().filter(|h| h.0 == flavor).map(|(_, id, offset, db)| (id, offset as i64, db.unwrap_or(0))),
    };
    let reply = match &resume {
        Some((id, offset, _)) => wire.call(&["PSYNC", id, &(offset + 1).to_string()])?,
        None => wire.call(&["PSYNC", "?", "-1"])?,
    };
    if let (Some((id, offset, db)), Some(rest)) = (&resume, reply.strip_prefix("+CONTINUE")) {
        let new_replid = rest.trim();
        let replid = if new_replid.len() == 40 { new_replid.to_string() } else { id.clone() };
        if srv.replication.mirrored() != Some(flavor) || srv.replication.backlog(flavor).is_none_or(|b| b.offset() != *offset as u64) {
            srv.replication.mirror_from(flavor, &replid, *offset as u64);
        } else {
            srv.replication.mirror_renamed(flavor, &replid);
        }
        srv.replication.update_link(generation, |link| {
            link.state = LinkState::Connected;
            link.master_replid = replid;
            link.offset = *offset;
            link.db = *db;
            link.last_io = Instant::now();
            link.last_error = None;
        });
        tracing::info!(master = %format!("{}:{}", master.host, master.port), offset, "replication: partial resynchronization, following the master's stream");
        srv.replication.unfence();
        return apply_stream(&mut wire, locks, *offset, *db);
    }
    let mut words = reply.split(' ');
    let (Some("+FULLRESYNC"), Some(replid), Some(offset)) = (words.next(), words.next(), words.next().and_then(|o| o.parse::<i64>().ok())) else {
        return Err(LinkError::Master(format!("{reply} to PSYNC")));
    };
    if let Some(l) = followed.as_ref().filter(|l| l.master_replid != replid && offset < l.offset) {
        // The same master (same REPLICAOF) under a new ID and with less history than this
        // replica has: it restarted without its data. Following it would empty this replica
        // too; it waits instead, for the coordinator's failover or an operator's REPLICAOF.
        return Err(LinkError::Master(format!(
            "its history restarted (ID {replid} at offset {offset}, this replica is at {} of {}): not following it into emptiness; REPLICAOF again to resync from it",
            l.offset, l.master_replid
        )));
    }
    let replid = replid.to_string();
    srv.replication.update_link(generation, |l| {
        l.state = LinkState::Sync;
        l.master_replid = replid.clone();
        l.offset = -1;
    });
    let image = wire.snapshot()?;
    replace_keyspace(srv, locks, &image)?;
    srv.replication.mirror_from(flavor, &replid, offset.max(0) as u64);
    srv.replication.update_link(generation, |l| {
        l.state = LinkState::Connected;
        l.offset = offset;
        l.db = 0;
        l.last_io = Instant::now();
        l.last_error = None;
    });
    tracing::info!(master = %format!("{}:{}", master.host, master.port), bytes = image.len(), offset, "replication: full sync done, following the master's stream");
    srv.replication.unfence();
    drop(image);
    apply_stream(&mut wire, locks, offset, 0)
}

/// Replaces every key with the master's snapshot (the default namespace's libraries too),
/// once it is known to load.
fn replace_keyspace(srv: &Server, locks: &LockCap, image: &[u8]) -> Result<(), LinkError> {
    // An image that would not load leaves this replica's keys as they were.
    crate::snapshot::check_replica_image(srv, locks, image).map_err(|e| LinkError::Load(e.to_string()))?;
    srv.replication.set_loading(true);
    srv.keyspace.clear_all(locks);
    if let Some(tier) = srv.storage_tier() {
        // Its unflushed writes went with its keyspace (a former primary's: storage fenced
        // them out, and flushing them as deletions now would lose the new primary's data).
        tier.dirty.clear();
    }
    for ns in srv.scripts.functions.all().into_keys() {
        srv.scripts.functions.flush(ns);
    }
    // (With storage of its own, that storage's tenants are replaced by the master's too.)
    let own = srv.storage_tier().filter(|t| !t.storage.shared()).map(|t| &**t);
    let loaded = crate::snapshot::load_replica_image(srv, locks, image, own).map_err(|e| LinkError::Load(e.to_string()));
    let based = loaded.and_then(|_| rebase_log(srv, locks));
    srv.replication.set_loading(false);
    based
}

/// With the WAL on, makes the master's image the log's new base: a snapshot of it (with the
/// log position it covers) replaces `dump.rdb` and the records before it are dropped. What
/// this engine logged before the sync — a former primary's writes, since superseded — must
/// never be replayed over the master's newer state after a crash (it would bring back keys
/// the master deleted or overwrote). Nothing writes meanwhile: the stream is applied after.
fn rebase_log(srv: &Server, locks: &LockCap) -> Result<(), LinkError> {
    if srv.wal().is_none() {
        return Ok(());
    }
    let mut guards = srv.keyspace.lock_all(locks);
    crate::snapshot::save_with_guards(srv, &mut guards)
        .map_err(|e| LinkError::Load(format!("the image could not become the log's base ({e}); the sync is tried again")))
}

/// A storage-backed tenant's write as its master sent it: `TERRACE.WB key [record]`, the
/// key's after-image (dirty here if the tenant writes back, until the master says
/// `TERRACE.CLEAN key`: it flushed it).
fn apply_storage_record(srv: &Server, locks: &LockCap, db: usize, argv: &[&[u8]]) {
    let Some(tier) = srv.storage_tier() else {
        tracing::warn!("the master sent a storage-backed write, and this engine has no storage tier");
        return;
    };
    if argv[0] == CLEAN_RECORD {
        // (With storage of its own, this engine flushes its dirty keys itself.)
        if let Some(key) = argv.get(1).filter(|_| tier.storage.shared()) {
            tier.dirty.forget(&(db, key.to_vec()));
        }
        return;
    }
    let dirty = tier.writes_back(db / crate::keyspace::NUM_DBS);
    if let Err(why) = crate::command::pipeline::storage::replay_write_back(srv, locks, db, argv, crate::clock::now_ms(), dirty) {
        tracing::warn!("an after-image from the master does not apply: {why}");
        return;
    }
    if !dirty && !tier.storage.shared() {
        // Write-through, to its own storage: written in order behind its other writes (not
        // waited for: the master's storage took it already).
        if let Some(key) = argv.get(1) {
            let op = (crate::storage::tier::storage_key(db % crate::keyspace::NUM_DBS, key), argv.get(2).map(|r| r.to_vec()));
            tier.enqueue(vec![(crate::storage::flusher::Source::tenant_of(srv, db), op, (db, key.to_vec()))]);
        }
    }
}

/// Applies the master's command stream from offset `offset` (in database `db`),
/// acknowledging as it goes. The offset counts whole commands outside a transaction: a
/// link broken inside MULTI resumes before it.
fn apply_stream(wire: &mut Wire, locks: &LockCap, mut offset: i64, db: usize) -> Result<(), LinkError> {
    let srv = wire.srv;
    let info = Arc::new(ClientInfo::new(0, -1, "master".into(), "master".into(), 0, srv.limits.clone()));
    let mut conn = crate::command::Conn::new(info, srv);
    conn.set_authenticated(true);
    conn.from_master = true;
    // (In the namespace the stream was in: an engine master's stream switches them.)
    conn.ns_base = db / crate::keyspace::NUM_DBS * crate::keyspace::NUM_DBS;
    conn.info.namespace.store(db / crate::keyspace::NUM_DBS, Ordering::Relaxed);
    conn.db = db;
    conn.info.db.store(db % crate::keyspace::NUM_DBS, Ordering::Relaxed);
    // The offset read so far, and the last one outside a transaction (what is applied).
    let mut read = offset;
    let mut parser = RequestParser::new(Limits { max_bulk_len: usize::MAX >> 1, ..Limits::default() });
    let mut out = BytesMut::new();
    // Acknowledged at once: a master sending its snapshot diskless starts the stream only
    // after the replica's first ACK (Redis's replica sends it as soon as it has loaded).
    acknowledge(wire, offset)?;
    let mut acked = Instant::now();
    let mut prefetcher = Prefetcher::default();
    loop {
        prefetcher.restart();
        loop {
            prefetcher.next(srv, locks, conn.db, &wire.buf);
            let req = match parser.parse(&wire.buf) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(e) => return Err(LinkError::Master(format!("a malformed command in its stream ({e})"))),
            };
            let argv: Vec<&[u8]> = (0..req.args.len()).map(|i| req.arg(&wire.buf, i)).collect();
            let getack = argv.len() == 3 && argv[0].eq_ignore_ascii_case(b"replconf") && argv[1].eq_ignore_ascii_case(b"getack");
            if argv.first().is_some_and(|a| *a == WB_RECORD || *a == CLEAN_RECORD) {
                apply_storage_record(srv, locks, conn.db, &argv);
            } else if getack {
                // The offset before this request, as Redis acknowledges it.
                acknowledge(wire, offset)?;
                acked = Instant::now();
            } else if !argv.is_empty() {
                out.clear();
                // A tenant's script or transaction holding the namespace whole: run the
                // command once it is done (it did not run).
                while matches!(crate::command::execute(srv, locks, &mut conn, &argv, &mut out), crate::command::Outcome::NamespaceHeld) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if out.first() == Some(&b'-') {
                    tracing::warn!(reply = %String::from_utf8_lossy(&out).trim_end(), command = %String::from_utf8_lossy(argv[0]), "a command of the master's stream failed here");
                }
            }
            read += req.consumed as i64;
            // The stream as received, kept with the master's offsets (this engine, promoted,
            // continues it for the master's other replicas).
            srv.replication.mirror(&wire.buf[..req.consumed]);
            if conn.multi.is_none() {
                offset = read;
            }
            let _ = wire.buf.split_to(req.consumed);
            parser.reset();
        }
        srv.replication.update_link(wire.generation, |l| {
            l.offset = offset;
            l.db = conn.db;
            l.last_io = wire.last_io;
        });
        if acked.elapsed() >= ACK_EVERY {
            acknowledge(wire, offset)?;
            acked = Instant::now();
        }
        wire.fill(SILENCE)?;
    }
}

/// Tells the master this engine has its stream through `offset`. With a WAL that
/// acknowledges only durable writes (`always`, `pmem`), only once what it applied is durable
/// here: a write the master's WAIT counted on this replica must outlive both engines
/// crashing, as it outlives the master's crash alone.
fn acknowledge(wire: &mut Wire, offset: i64) -> Result<(), LinkError> {
    if let Some(wal) = wire.srv.wal().filter(|wal| wal.mode.waits()) {
        if !wal.wait_durable_blocking(wal.last_assigned()) {
            return Err(LinkError::NotDurable(wal.poisoned().unwrap_or_else(|| "it stopped".into())));
        }
    }
    wire.send(&["REPLCONF", "ACK", &offset.to_string()])
}
