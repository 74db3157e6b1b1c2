//! Command dispatch: lookup in the command table, arity, transactions' queueing, memory
//! admission (eviction / OOM), locking the shards a command declares, running its handler,
//! and the per-command statistics. One file per command family beside this one.

pub mod acl;
pub mod advise;
pub mod args;
pub mod bitmap;
pub mod compact;
pub mod compression;
pub mod config;
pub mod diagnostics;
pub mod dump;
pub mod function;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod keyspecs;
pub mod list;
pub mod memcache;
pub mod pubsub;
pub mod script;
pub mod server;
pub mod set;
pub mod sort;
pub mod stats;
pub mod storage;
pub mod stream;
pub mod stream_group;
pub mod stream_rdb;
pub mod string;
pub mod table;
pub mod tally;
pub mod txn;
pub mod zset;

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use tokio::sync::Notify;

use crate::keyspace::{access, eviction, Collection, Entry, Guards, Keyspace, Kind, Meta, Shard, ShardIds};
use crate::protocol::ReplyWriter;
use crate::server::state::{now_ms, now_ms_at, ClientInfo, Server};
pub use args::CmdError;
use table::{CommandSpec, Lock, COMMANDS};

pub type CmdResult = Result<(), CmdError>;
pub type Handler = fn(&mut Ctx, &[&[u8]]) -> CmdResult;

/// Per-connection state the commands see and change.
pub struct Conn {
    pub info: Arc<ClientInfo>,
    /// The physical database: `ns_base` + the SELECTed one.
    pub db: usize,
    /// First physical database of the connection's namespace (TERRACE.NAMESPACE).
    pub ns_base: usize,
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user, and the ACL generation it was read at.
    pub user: Arc<crate::acl::User>,
    pub acl_gen: u64,
    /// Queued commands while inside MULTI.
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    pub multi_error: bool,
    /// WATCHed keys: (db, key, touch epoch at WATCH time).
    pub watched: Vec<txn::Watched>,
    pub block_notify: Arc<Notify>,
    /// CLIENT REPLY OFF.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: replies still to suppress (this command's and the next one's).
    pub reply_skip: u8,
    /// Pub/sub subscriptions.
    pub subs: pubsub::Subscriptions,
    /// In MONITOR mode.
    pub monitor: bool,
    /// Re-running a command after a wake-up (blocked or paused): MONITOR saw it already.
    pub retrying: bool,
    /// CLIENT TRACKING options while tracking is on.
    pub tracking: Option<crate::tracking::Options>,
    /// CLIENT CACHING YES/NO for the next command.
    pub caching: Option<bool>,
    /// The WAL sequence number this connection's replies wait for (0: none).
    pub wal_pending: u64,
    /// Replaying the WAL at start: commands run at the logged time, are not logged again,
    /// and skip memory admission (the log's state is reproduced exactly).
    pub replay_now: Option<i64>,
    /// Write-through batches the pending replies wait for (settled before they are sent).
    pub storage_waits: Vec<StorageWait>,
    /// Keys read-through made sure the cache has for the next command: (database, key).
    pub read_through_present: Vec<(usize, Vec<u8>)>,
    /// Every key read-through looked at for the next command (it must not be pending when
    /// the command runs).
    pub read_through_checked: Vec<(usize, Vec<u8>)>,
    /// One of them was evicted before the command got its locks, or has an unconfirmed
    /// write: the command did not run, and the connection reads through and runs it again.
    pub read_through_lost: bool,
    /// Counters of the commands run, not yet in the server's statistics.
    pub tally: tally::Tally,
}

/// What a write-through command's reply waits for, and what to undo if storage refuses it.
#[derive(Debug)]
pub struct StorageWait {
    pub seq: u64,
    /// Where the command's reply lies in the output buffer.
    pub reply_at: usize,
    pub reply_end: usize,
    /// (database, key) written: they leave the cache if the batch fails.
    pub keys: Vec<(usize, Vec<u8>)>,
}

impl Conn {
    /// Whether the connection receives pushes (pub/sub messages, MONITOR lines).
    pub fn receives_pushes(&self) -> bool {
        self.monitor || self.subs.any() || self.tracking.is_some() || self.info.push_target.load(Ordering::Relaxed)
    }

    pub fn new(info: Arc<ClientInfo>, srv: &Server) -> Conn {
        Conn {
            info,
            user: srv.acl.default_user(),
            acl_gen: srv.acl.generation(),
            db: 0,
            ns_base: 0,
            resp3: false,
            authenticated: !srv.acl.auth_required(),
            multi: None,
            multi_error: false,
            watched: Vec::new(),
            block_notify: Arc::new(Notify::new()),
            reply_off: false,
            reply_skip: 0,
            subs: pubsub::Subscriptions::default(),
            monitor: false,
            retrying: false,
            tracking: None,
            caching: None,
            wal_pending: 0,
            replay_now: None,
            storage_waits: Vec::new(),
            read_through_present: Vec::new(),
            read_through_checked: Vec::new(),
            read_through_lost: false,
            tally: tally::Tally::default(),
        }
    }
}

/// What the reply to a blocking command that timed out looks like.
#[derive(Debug, Clone, Copy)]
pub enum TimeoutReply {
    NullArray,
    NullBulk,
    /// The integer 0 (WAIT: no replica acknowledged).
    Zero,
}

/// A blocking command that found nothing to pop.
#[derive(Debug)]
pub struct BlockRequest {
    pub keys: Vec<Vec<u8>>,
    pub db: usize,
    pub deadline: Option<Instant>,
    pub timeout_reply: TimeoutReply,
    /// The arguments to re-run the command with after a wake-up, when they differ from the
    /// original (XREAD's `$` becomes the ID it meant at the first attempt).
    pub retry_argv: Option<Vec<Vec<u8>>>,
}

pub enum Outcome {
    Done,
    Close,
    Block(BlockRequest),
    /// CLIENT PAUSE is in force for this command until this unix time (ms): retry then.
    Paused(i64),
}

/// The locked part of the keyspace a command works on.
pub struct Data<'a> {
    pub ks: &'a Keyspace,
    pub guards: Guards<'a>,
    pub db: usize,
    pub now: i64,
    pub lfu: bool,
    /// Keys that became poppable (to wake blocked clients after the locks are released).
    pub ready: Vec<(usize, Vec<u8>)>,
    pub hits: u64,
    pub misses: u64,
    /// Of `hits`, reads served by a value in PMem.
    pub pmem_hits: u64,
    /// WAL records of the writes this command made (`wal::frame::put_record`), appended
    /// while its locks are still held.
    pub wal_buf: Vec<u8>,
    pub wal_count: u32,
    /// Keys written by this command in a write-through tenant: (database, key).
    pub touched: Vec<(usize, Vec<u8>)>,
}

impl<'a> Data<'a> {
    #[inline]
    pub fn shard(&mut self, key: &[u8]) -> &mut Shard {
        let id = self.ks.shard_id(self.db, key);
        self.guards.shard(id)
    }

    pub fn shard_in(&mut self, db: usize, key: &[u8]) -> &mut Shard {
        let id = self.ks.shard_id(db, key);
        self.guards.shard(id)
    }

    /// Looks a key up (lazy expiry) and stamps the access.
    pub fn get(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let (now, lfu) = (self.now, self.lfu);
        let e = self.shard(key).get(key, now)?;
        e.set_access(access::touched(e.access(), lfu, now));
        Some(e)
    }

    /// As `get`, counting a keyspace hit or miss. In a lazy-compression tenant a compressed
    /// value read is stored plain again (it is hot now; the background pass compresses it
    /// once it has been cold for a while).
    pub fn read(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let (now, lfu, ks, db) = (self.now, self.lfu, self.ks, self.db);
        let id = self.ks.shard_id(self.db, key);
        let mut in_pmem = false;
        let promote = |e: &mut Entry| {
            if e.in_pmem() {
                in_pmem = true;
                if let Some(dram) = ks.tier().and_then(|t| t.on_read(db / crate::keyspace::NUM_DBS, e)) {
                    return Some(dram);
                }
            }
            if !e.is_encoded() || !ks.compression(ks.namespace_of(db)).promotes_on_read() {
                return None;
            }
            // Undecodable: left as it is; the command reading it reports the error.
            ks.plain_copy(db, e).ok().flatten()
        };
        match self.guards.shard(id).get_rewriting(key, now, promote) {
            Some(e) => {
                self.hits += 1;
                self.pmem_hits += in_pmem as u64;
                e.set_access(access::touched(e.access(), lfu, now));
                Some(e)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Looks a key up without touching its access stamp.
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        let now = self.now;
        self.shard(key).get(key, now).map(|e| &*e)
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.peek(key).is_some()
    }

    /// The entry if it has the kind, None if missing, WRONGTYPE otherwise.
    pub fn typed(&mut self, key: &[u8], kind: Kind) -> Result<Option<&mut Entry>, CmdError> {
        match self.read(key) {
            Some(e) if e.kind() != kind => Err(CmdError::WrongType),
            other => Ok(other),
        }
    }

    pub fn meta(&self, expire: Option<i64>) -> Meta {
        Meta { expire, flags: 0, version: self.ks.next_version(), access: access::new_stamp(self.lfu, self.now) }
    }

    /// Stores a string value, replacing whatever the key held (compressed if the tenant's
    /// settings say so).
    pub fn set_str(&mut self, key: &[u8], value: &[u8], expire: Option<i64>) {
        let e = self.ks.new_str_entry(self.db, key, value, &self.meta(expire));
        self.shard(key).insert(e);
    }

    /// The string at `key`, decoded: None if missing, WRONGTYPE if not a string. Counts a
    /// keyspace hit or miss and stamps the access, as `read`.
    pub fn read_str(&mut self, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>, CmdError> {
        let (ks, db) = (self.ks, self.db);
        match self.read(key) {
            None => Ok(None),
            Some(e) => decoded(ks, db, e),
        }
    }

    /// Makes the string at `key` plain and in DRAM (decompressing it, or bringing it from
    /// PMem) so it can be edited byte by byte; the version and stamps stay (not a write).
    pub fn ensure_plain(&mut self, key: &[u8]) -> Result<(), CmdError> {
        let (ks, db, now) = (self.ks, self.db, self.now);
        let shard = self.shard(key);
        let Some(e) = shard.get(key, now) else { return Ok(()) };
        if let Some(new) = ks.plain_copy(db, e).map_err(|why| undecodable(e, why))? {
            shard.rewrite(new);
        }
        Ok(())
    }

    pub fn insert(&mut self, e: Entry) {
        let id = self.ks.shard_id(self.db, e.key());
        self.guards.shard(id).insert(e);
    }

    pub fn delete(&mut self, key: &[u8]) -> bool {
        let now = self.now;
        let s = self.shard(key);
        if s.get(key, now).is_none() {
            return false;
        }
        s.remove(key).is_some()
    }

    /// The collection at `key` if it has `kind` (None if missing, WRONGTYPE otherwise).
    pub fn coll(&mut self, key: &[u8], kind: Kind) -> Result<Option<&mut Collection>, CmdError> {
        match self.read(key) {
            None => Ok(None),
            Some(e) if e.kind() == kind => Ok(e.coll_mut()),
            Some(_) => Err(CmdError::WrongType),
        }
    }

    /// The collection at `key`, created empty if missing. The caller must call `modified`
    /// afterwards (which also drops it again if it stayed empty).
    pub fn coll_or_create(&mut self, key: &[u8], kind: Kind, make: fn() -> Collection) -> Result<&mut Collection, CmdError> {
        let exists = match self.read(key) {
            None => false,
            Some(e) if e.kind() == kind => true,
            Some(_) => return Err(CmdError::WrongType),
        };
        if !exists {
            let e = Entry::new_coll(key, make(), &self.meta(None));
            self.shard(key).insert(e);
        }
        let now = self.now;
        Ok(self.shard(key).get(key, now).and_then(|e| e.coll_mut()).expect("just ensured"))
    }

    /// Records that a key was modified in place: new version, WATCH touched, and an emptied
    /// collection deleted (Redis never keeps empty aggregates).
    pub fn modified(&mut self, key: &[u8]) {
        let v = self.ks.next_version();
        let s = self.shard(key);
        let mut empty = false;
        if let Some(e) = s.get(key, i64::MIN) {
            e.set_version(v);
            // Streams are the exception: an empty stream is kept (it carries IDs and groups).
            empty = e.coll().map(|c| c.is_empty() && c.kind() != Kind::Stream).unwrap_or(false);
        }
        if empty {
            s.remove(key);
        } else {
            s.touch(key);
        }
    }

    /// Adds a WAL record for a write this command made, in its database.
    pub fn log(&mut self, ns_base: usize, argv: &[&[u8]]) {
        crate::wal::frame::put_record(&mut self.wal_buf, self.now, self.db, ns_base, argv);
        self.wal_count += 1;
    }

    /// Marks a list or sorted set key as having new elements for blocked clients.
    pub fn signal(&mut self, key: &[u8]) {
        self.ready.push((self.db, key.to_vec()));
    }
}

/// The decoded string of an entry of database `db` (WRONGTYPE if not a string).
pub fn decoded<'e>(ks: &Keyspace, db: usize, e: &'e Entry) -> Result<Option<Cow<'e, [u8]>>, CmdError> {
    match ks.string(db, e) {
        Ok(Some(v)) => Ok(Some(v)),
        Ok(None) => Err(CmdError::WrongType),
        Err(why) => Err(undecodable(e, why)),
    }
}

/// Calls `f` with the decoded string of an entry (WRONGTYPE if not a string), without
/// allocating for a compressed one.
pub fn with_decoded<R>(ks: &Keyspace, db: usize, e: &Entry, f: impl FnOnce(&[u8]) -> R) -> Result<R, CmdError> {
    match ks.with_string(db, e, f) {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(CmdError::WrongType),
        Err(why) => Err(undecodable(e, why)),
    }
}

fn undecodable(e: &Entry, why: crate::compress::CodecError) -> CmdError {
    args::err(format!("ERR the value of '{}' could not be decompressed: {why}", String::from_utf8_lossy(e.key())))
}

/// Everything a command handler can reach.
pub struct Ctx<'a> {
    pub srv: &'a Server,
    pub conn: &'a mut Conn,
    pub out: ReplyWriter<'a>,
    pub data: Data<'a>,
    pub block: Option<BlockRequest>,
    pub close: bool,
    /// True while running inside EXEC (blocking commands must not block).
    pub in_exec: bool,
    /// The spec of the running command.
    pub spec: &'static CommandSpec,
}

impl Ctx<'_> {
    pub fn resp3(&self) -> bool {
        self.out.resp3
    }
}

fn lowercase_name(name: &[u8], buf: &mut [u8; 32]) -> Option<usize> {
    if name.len() > 32 {
        return None;
    }
    for (i, b) in name.iter().enumerate() {
        buf[i] = b.to_ascii_lowercase();
    }
    Some(name.len())
}

/// Finds a command's spec by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<(usize, &'static CommandSpec)> {
    let mut buf = [0u8; 32];
    let n = lowercase_name(name, &mut buf)?;
    let s = std::str::from_utf8(&buf[..n]).ok()?;
    table::INDEX.get(s).map(|&i| (i, &COMMANDS[i]))
}

pub fn unknown_command_error(argv: &[&[u8]]) -> String {
    let mut msg = format!("ERR unknown command '{}', with args beginning with: ", String::from_utf8_lossy(argv[0]));
    for a in argv.iter().skip(1).take(20) {
        msg.push_str(&format!("'{}' ", String::from_utf8_lossy(&a[..a.len().min(128)])));
    }
    msg
}

/// Checks a command's arity (positive: exact; negative: at least).
pub fn arity_ok(spec: &CommandSpec, argc: usize) -> bool {
    let a = spec.arity;
    (a > 0 && argc == a as usize) || (a < 0 && argc >= (-a) as usize)
}

/// The shard ids a command must lock.
pub fn lock_ids(srv: &Server, spec: &CommandSpec, argv: &[&[u8]], db: usize) -> ShardIds {
    let ks = &srv.keyspace;
    match spec.lock {
        Lock::None => ShardIds::new(),
        Lock::Keys if spec.first == 1 && spec.last == 1 && spec.keys_from == table::KeysFrom::Range => std::iter::once(ks.shard_id(db, argv[1])).collect(),
        Lock::Db => ks.db_shard_ids(db).collect(),
        Lock::All => ks.all_shard_ids().collect(),
        Lock::Keys => table::key_positions(spec, argv).into_iter().map(|i| ks.shard_id(db, argv[i])).collect(),
    }
}

/// CLIENT TRACKING: remembers the keys a tracking client's read command used (default mode,
/// subject to OPTIN/OPTOUT and CLIENT CACHING), and consumes the CACHING flag.
pub fn track_reads(srv: &Server, conn: &mut Conn, spec: &CommandSpec, argv: &[&[u8]]) {
    let Some(t) = &conn.tracking else { return };
    let caching_cmd = spec.name == "client" && argv.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"caching"));
    if spec.flags.contains(&"readonly") && !t.bcast {
        let wanted = if t.optin {
            conn.caching == Some(true)
        } else if t.optout {
            conn.caching != Some(false)
        } else {
            true
        };
        if wanted {
            srv.tracking.remember(conn.info.id, table::key_positions(spec, argv).into_iter().map(|i| argv[i]));
        }
    }
    if !caching_cmd && conn.multi.is_none() {
        conn.caching = None;
    }
}

/// What may run while a script is busy: SCRIPT KILL, SHUTDOWN, and the connection
/// commands Redis flags `allow_busy`.
fn allowed_while_busy(spec: &CommandSpec, argv: &[&[u8]]) -> bool {
    spec.flags.contains(&"allow_busy") || (spec.name == "script" && argv.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"kill")))
}

/// Re-reads the connection's user after an ACL change; false if the user was deleted (the
/// connection must close).
fn refresh_user(srv: &Server, conn: &mut Conn) -> bool {
    conn.acl_gen = srv.acl.generation();
    match srv.acl.user(&conn.user.name) {
        Some(u) => {
            conn.user = u;
            true
        }
        None => false,
    }
}

/// Logs a write command that ran, at the leaf: nothing if the WAL is off, the command is
/// being replayed, failed or blocked, or its handler logged records itself (the commands an
/// EXEC or a script ran; SPOP's SREM).
pub(crate) fn log_write(ctx: &mut Ctx, spec: &CommandSpec, argv: &[&[u8]], ok: bool, before: u32) {
    if !spec.write || !ok || ctx.block.is_some() || ctx.conn.replay_now.is_some() {
        return;
    }
    if ctx.srv.storage_tier().is_some_and(|t| t.backs(ctx.data.db / crate::keyspace::NUM_DBS)) {
        // A storage-backed tenant: the declared keys' after-images go to storage (and, for
        // write-back, to the WAL) at the end, instead of the command.
        let db = ctx.data.db;
        for i in table::key_positions(spec, argv) {
            ctx.data.touched.push((db, argv[i].to_vec()));
        }
        if spec.name == "move" {
            // Its other database is not a declared key.
            if let Some(to) = std::str::from_utf8(argv[2]).ok().and_then(|s| s.parse::<usize>().ok()).filter(|&d| d < crate::keyspace::NUM_DBS) {
                ctx.data.touched.push((ctx.conn.ns_base + to, argv[1].to_vec()));
            }
        }
        return;
    }
    if ctx.srv.wal().is_none() || ctx.data.wal_count != before {
        return;
    }
    ctx.data.log(ctx.conn.ns_base, argv);
}

/// What eviction tells the server and asks of it: a removal is logged to the WAL (under the
/// shard's lock, so it is ordered with writes), and the write-back dirty set says whether a
/// dirty-bit entry still waits for storage.
struct Evictions<'a> {
    srv: &'a Server,
    now: i64,
}

fn evictions(srv: &Server, now: i64) -> Evictions<'_> {
    Evictions { srv, now }
}

impl eviction::Observer for Evictions<'_> {
    fn evicted(&mut self, db: usize, key: &[u8]) {
        let srv = self.srv;
        // A storage-backed tenant's evicted key is still in storage: nothing to log.
        if srv.storage_tier().is_some_and(|t| t.backs(db / crate::keyspace::NUM_DBS)) {
            return;
        }
        if let Some(wal) = srv.wal() {
            wal.append_one(self.now, db, db / crate::keyspace::NUM_DBS * crate::keyspace::NUM_DBS, &[b"DEL", key]);
        }
    }

    fn still_dirty(&self, db: usize, key: &[u8]) -> bool {
        self.srv.storage_tier().map_or(false, |t| t.dirty.contains(&(db, key.to_vec())))
    }
}

/// Frees memory by eviction until under maxmemory; false if the command must be refused.
pub fn admit_memory(srv: &Server) -> bool {
    let max = srv.runtime.maxmemory.load(Ordering::Relaxed);
    if let Some(tier) = srv.keyspace.tier() {
        if tier.over_budget() {
            let samples = srv.runtime.maxmemory_samples.load(Ordering::Relaxed);
            let now = now_ms();
            if !crate::tier::demote::make_room(&srv.keyspace, tier, srv.policy(), samples, now, &mut evictions(srv, now)) {
                return false;
            }
        }
    }
    if max == 0 {
        return true;
    }
    let policy = srv.policy();
    let samples = srv.runtime.maxmemory_samples.load(Ordering::Relaxed);
    let now = now_ms();
    let mut rounds = 0;
    while crate::alloc::used_memory() > max {
        if !eviction::evict_one(&srv.keyspace, policy, samples, now, &mut evictions(srv, now)) {
            return false;
        }
        rounds += 1;
        if rounds > 100_000 {
            return false;
        }
    }
    true
}

/// Whether namespace `ns` may grow. Over its data limit, a storage-backed tenant evicts its
/// own coldest keys (they are in storage: the limit is its cache's size; LRU when the server
/// does not evict); any other tenant's write is refused.
pub fn admit_namespace(srv: &Server, ns: usize) -> bool {
    let ks = &srv.keyspace;
    if ks.namespace_admits(ns) {
        return true;
    }
    if !srv.storage_tier().is_some_and(|t| t.backs(ns)) {
        return false;
    }
    let policy = match srv.policy() {
        eviction::Policy::NoEviction => eviction::Policy::AllKeysLru,
        p => p,
    };
    let per_ns = (ks.shards_per_db() * crate::keyspace::NUM_DBS) as u32;
    let shards = ns as u32 * per_ns..(ns as u32 + 1) * per_ns;
    let samples = srv.runtime.maxmemory_samples.load(Ordering::Relaxed);
    let now = now_ms();
    for _ in 0..100_000 {
        if ks.namespace_admits(ns) {
            return true;
        }
        if !eviction::evict_one_within(ks, shards.clone(), policy, samples, now, &mut evictions(srv, now)) {
            return false;
        }
    }
    false
}

/// Executes one request on a connection and writes its reply into `out` (unless the client
/// turned replies off with CLIENT REPLY).
pub fn execute(srv: &Server, conn: &mut Conn, argv: &[&[u8]], out: &mut BytesMut) -> Outcome {
    let before = out.len();
    let outcome = execute_inner(srv, conn, argv, out);
    if conn.reply_off {
        out.truncate(before);
    } else if conn.reply_skip > 0 {
        out.truncate(before);
        conn.reply_skip -= 1;
    }
    if let Some(w) = conn.storage_waits.last_mut().filter(|w| w.reply_at == usize::MAX) {
        (w.reply_at, w.reply_end) = (before, out.len());
    }
    outcome
}

fn execute_inner(srv: &Server, conn: &mut Conn, argv: &[&[u8]], out: &mut BytesMut) -> Outcome {
    let mut w = ReplyWriter::new(out, conn.resp3);
    let Some((idx, spec)) = lookup(argv[0]) else {
        if conn.multi.is_some() {
            conn.multi_error = true;
        }
        srv.stats.total_error_replies.fetch_add(1, Ordering::Relaxed);
        w.error(&unknown_command_error(argv));
        return Outcome::Done;
    };
    // Counts of an earlier, different command become visible before this one runs.
    conn.tally.before(srv, idx);
    if !arity_ok(spec, argv.len()) {
        if conn.multi.is_some() {
            conn.multi_error = true;
        }
        srv.stats.per_command[idx].rejected.fetch_add(1, Ordering::Relaxed);
        srv.stats.total_error_replies.fetch_add(1, Ordering::Relaxed);
        w.error(&CmdError::WrongArgs(spec.name).to_string());
        return Outcome::Done;
    }
    if !conn.authenticated && !spec.no_auth {
        if srv.acl.auth_required() {
            w.error("NOAUTH Authentication required.");
            return Outcome::Done;
        }
        conn.authenticated = true;
    }
    if conn.acl_gen != srv.acl.generation() && !refresh_user(srv, conn) {
        return Outcome::Close;
    }
    if !conn.user.unrestricted {
        if let Err(denied) = conn.user.check(idx, argv) {
            srv.acl.log_denied(&denied, if conn.multi.is_some() { "multi" } else { "toplevel" }, &conn.user.name, server::client_line(srv, &conn.info));
            if conn.multi.is_some() {
                conn.multi_error = true;
            }
            srv.stats.per_command[idx].rejected.fetch_add(1, Ordering::Relaxed);
            srv.stats.total_error_replies.fetch_add(1, Ordering::Relaxed);
            w.error(&denied.error());
            return Outcome::Done;
        }
    }
    if !conn.resp3 && conn.subs.any() && !pubsub::allowed_while_subscribed(spec.name) {
        w.error(&format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            table::full_name(spec, argv)
        ));
        return Outcome::Done;
    }
    if srv.scripts.busy() && !allowed_while_busy(spec, argv) {
        w.error("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.");
        return Outcome::Done;
    }
    if let Some(until) = srv.paused_until(spec) {
        return Outcome::Paused(until);
    }
    if spec.write {
        if let Some(why) = srv.wal().and_then(|w| w.poisoned()) {
            srv.stats.total_error_replies.fetch_add(1, Ordering::Relaxed);
            w.error(&format!("MISCONF Errors writing to the WAL ({why}): write commands are refused"));
            return Outcome::Done;
        }
    }
    if spec.denyoom && conn.replay_now.is_none() && !(admit_memory(srv) && admit_namespace(srv, conn.ns_base / crate::keyspace::NUM_DBS)) {
        srv.stats.per_command[idx].rejected.fetch_add(1, Ordering::Relaxed);
        srv.stats.total_error_replies.fetch_add(1, Ordering::Relaxed);
        if conn.multi.is_some() {
            conn.multi_error = true;
        }
        w.error("OOM command not allowed when used memory > 'maxmemory'.");
        return Outcome::Done;
    }
    if spec.monitored && !conn.retrying && srv.monitors.active() {
        srv.monitors.feed(conn.db, &conn.info.addr, argv);
    }
    if conn.multi.is_some() && !spec.txn_control {
        if spec.no_multi {
            conn.multi_error = true;
            w.error("ERR Command not allowed inside a transaction");
            return Outcome::Done;
        }
        conn.multi.as_mut().unwrap().push(argv.iter().map(|a| a.to_vec()).collect());
        w.simple("QUEUED");
        return Outcome::Done;
    }
    if srv.storage_tier().is_some_and(|t| t.backs(conn.db / crate::keyspace::NUM_DBS)) && matches!(spec.name, "flushall" | "flushdb" | "swapdb") {
        srv.stats.total_error_replies.fetch_add(1, Ordering::Relaxed);
        w.error(&format!("ERR {} is not supported for a tenant with a storage tier yet", spec.name.to_ascii_uppercase()));
        return Outcome::Done;
    }
    conn.info.last_cmd.store(idx, Ordering::Relaxed);
    let ids = lock_ids(srv, spec, argv, conn.db);
    let start = quanta::Instant::now();
    let mut guards = srv.keyspace.lock(ids);
    if !conn.read_through_present.is_empty() {
        // A key read through (or found) for this command was evicted meanwhile: running now
        // would take it for absent while storage has it. The connection reads it again.
        let now = now_ms();
        let present = std::mem::take(&mut conn.read_through_present);
        let lost = present.iter().any(|(db, k)| {
            let id = srv.keyspace.shard_id(*db, k);
            guards.holds(id) && guards.shard(id).peek(k, now).is_none()
        });
        if lost {
            conn.read_through_lost = true;
            return Outcome::Done;
        }
    }
    if !conn.read_through_checked.is_empty() {
        // Another connection's write to one of these keys is not confirmed yet: wait for it
        // (the connection does) rather than see or build on it.
        let checked = std::mem::take(&mut conn.read_through_checked);
        if let Some(tier) = srv.storage_tier() {
            if checked.iter().any(|k| tier.pending_seq(k).is_some()) {
                conn.read_through_lost = true;
                return Outcome::Done;
            }
        }
    }
    let (result, ready, block, close, hits, misses) = {
        let db = conn.db;
        let now = conn.replay_now.unwrap_or_else(|| now_ms_at(start));
        let mut ctx = Ctx {
            srv,
            conn,
            out: w,
            data: Data {
                ks: &srv.keyspace,
                guards,
                db,
                now,
                lfu: srv.keyspace.lfu.load(Ordering::Relaxed),
                ready: Vec::new(),
                hits: 0,
                misses: 0,
                pmem_hits: 0,
                wal_buf: Vec::new(),
                wal_count: 0,
                touched: Vec::new(),
            },
            block: None,
            close: false,
            in_exec: false,
            spec,
        };
        let before = ctx.data.wal_count;
        let reply_at = ctx.out.buf.len();
        let result = (spec.handler)(&mut ctx, argv);
        if ctx.conn.replay_now.is_none() {
            crate::stats::observe(srv, db, spec, argv, now, ctx.out.buf.len() - reply_at);
        }
        log_write(&mut ctx, spec, argv, result.is_ok(), before);
        if let Err(e) = &result {
            ctx.out.error(&e.to_string());
        }
        if let Some(b) = &ctx.block {
            // Register while the shards are still locked, so no push can slip in between.
            srv.blocking.register(ctx.conn.info.id, b.db, &b.keys, &ctx.conn.block_notify);
        }
        let Ctx { mut data, block, close, conn, .. } = ctx;
        if let Some(t) = srv.keyspace.tier() {
            t.count_hits(data.hits - data.pmem_hits, data.pmem_hits);
        }
        // Still under the command's locks: the log and storage get writes in execution order.
        if let Some(tier) = srv.storage_tier().filter(|t| t.backs(conn.ns_base / crate::keyspace::NUM_DBS)) {
            // Storage-backed: no command records (write-through's durability is storage's;
            // write-back logs after-images).
            data.wal_buf.clear();
            data.wal_count = 0;
            if !data.touched.is_empty() {
                let touched = std::mem::take(&mut data.touched);
                if tier.writes_back(conn.ns_base / crate::keyspace::NUM_DBS) {
                    if let Some(seq) = storage::mark_write_back(srv, tier, &mut data, touched) {
                        conn.wal_pending = conn.wal_pending.max(seq);
                    }
                } else {
                    conn.storage_waits.push(storage::queue_after_images(srv, tier, &mut data, touched));
                }
            }
        }
        let logged = srv.wal_off.get(conn.ns_base / crate::keyspace::NUM_DBS).is_none_or(|off| !off.load(Ordering::Relaxed));
        if data.wal_count > 0 && logged {
            if let Some(wal) = srv.wal() {
                let seq = wal.append(&data.wal_buf, data.wal_count);
                if wal.mode.waits() {
                    conn.wal_pending = seq;
                }
            }
        }
        (result, data.ready, block, close, data.hits, data.misses)
    };
    let micros = start.elapsed().as_micros() as u64;
    // Server and connection commands (INFO, CONFIG RESETSTAT…) are counted at once: one may
    // read or reset the counters the next one adds to.
    conn.tally.add(srv, idx, spec.class != crate::stats::tenant::OTHER, micros, result.is_err(), hits, misses);
    wake_ready(srv, &ready);
    srv.slowlog.maybe_record(argv, micros, &conn.info);
    if crate::tracking::any() {
        track_reads(srv, conn, spec, argv);
        srv.tracking.flush(&srv.clients, Some(conn.info.id));
    }
    if close {
        return Outcome::Close;
    }
    match block {
        Some(b) => Outcome::Block(b),
        None => Outcome::Done,
    }
}

/// Wakes clients blocked on the keys a command made ready (locks already released).
fn wake_ready(srv: &Server, ready: &[(usize, Vec<u8>)]) {
    if !ready.is_empty() && srv.blocking.any_waiting() {
        for (db, key) in ready {
            srv.blocking.signal(*db, key);
        }
    }
}

pub use storage::{invalidate, read_through, tenant_of};
