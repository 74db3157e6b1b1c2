//! Commands: what a handler sees (`Ctx`, the connection's `Conn`, the locked `Data`), lookup
//! in the command table, and one file per command family. How a command is admitted, run
//! and committed is `pipeline`, the one path for clients, EXEC, scripts and WAL replay.

pub mod acl;
pub mod advise;
pub mod args;
pub mod bitmap;
pub mod compression;
pub mod config;
pub mod diagnostics;
pub mod dump;
#[cfg(feature = "lua")]
pub mod function;
pub mod geo;
pub mod handlers;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod list;
pub mod memcache;
pub mod migrate;
pub mod pipeline;
pub mod pubsub;
#[cfg(feature = "lua")]
pub mod script;
pub mod server;
pub mod set;
pub mod sort;
pub mod stats;
pub mod stream;
pub mod stream_group;
pub mod string;
pub mod table;
pub use terrace_commands::keyspecs;
pub mod tally;
pub mod txn;
pub mod zset;

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;

use crate::keyspace::{access, Collection, Entry, Guards, Keyspace, Kind, Meta, Shard, ShardIds};
use crate::protocol::ReplyWriter;
use crate::server::state::{ClientInfo, Server};
pub use args::CmdError;
use table::{CommandSpec, Lock};

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
    /// The ACL user, and the ACL generation it was read at.
    pub user: Arc<crate::acl::User>,
    pub acl_gen: u64,
    /// Queued commands while inside MULTI.
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    pub multi_error: bool,
    /// A command queued in MULTI writes or may replicate (CLIENT PAUSE WRITE holds EXEC).
    pub multi_writes: bool,
    /// … or may grow memory (EXEC is refused while out of memory).
    pub multi_denyoom: bool,
    /// What the queued commands hold, charged to the namespace's quota until the
    /// transaction ends.
    pub multi_charge: Option<crate::keyspace::queued::QueuedCharge>,
    /// WATCHed keys: (db, key, touch epoch at WATCH time).
    pub watched: Vec<txn::Watched>,
    pub block_notify: Arc<Notify>,
    /// CLIENT REPLY OFF.
    pub reply_off: bool,
    /// Pushes for this client wait in its mailbox though it has no subscriptions (a
    /// confirmation sent with replies off).
    pub pushes_waiting: bool,
    /// The last command woke blocked clients: its reply waits until they have run again
    /// (`BlockRegistry::woken_pending`).
    pub woke_blocked: bool,
    /// The replication link's own connection: it applies the master's stream, so it may
    /// write on a replica and CLIENT PAUSE does not hold it.
    pub from_master: bool,
    /// A migration's own connection (copying, catching up, deleting moved keys): sealed
    /// slots do not refuse it.
    pub migrator: bool,
    /// The replication offsets after this client's last write (what its WAIT waits for).
    pub repl_offsets: crate::replication::Offsets,
    /// PSYNC/SYNC asked for this connection to become a replica's link: the connection
    /// hands its socket to `server::replicas` once the reply so far is written.
    pub psync: Option<crate::replication::Psync>,
    /// What REPLCONF said before PSYNC (listening-port, capa).
    pub replica_hello: crate::replication::Psync,
    /// CLIENT REPLY SKIP: replies still to suppress (this command's and the next one's).
    pub reply_skip: u8,
    /// Pub/sub subscriptions.
    pub subs: pubsub::Subscriptions,
    /// In MONITOR mode.
    pub monitor: bool,
    /// CLIENT TRACKING options while tracking is on.
    pub tracking: Option<crate::tracking::Options>,
    /// CLIENT CACHING YES/NO for the next command.
    pub caching: Option<bool>,
    /// The WAL sequence number this connection's replies wait for (0: none).
    pub wal_pending: u64,
    /// A write ran since the replies were last sent: they acknowledge it, and leave only
    /// while this primary's term lease holds (`server::connection::flush`).
    pub acks_writes: bool,
    /// Replaying the WAL at start: commands run at the logged time, are not logged again,
    /// and skip memory admission (the log's state is reproduced exactly).
    pub replay_now: Option<i64>,
    /// Write-through batches the pending replies wait for (settled before they are sent).
    pub storage_waits: Vec<StorageWait>,
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
}

impl Conn {
    /// Whether the connection receives pushes (pub/sub messages, MONITOR lines).
    pub fn receives_pushes(&self) -> bool {
        self.monitor || self.subs.any() || self.tracking.is_some() || self.info.push_target.load(Ordering::Relaxed)
    }

    /// Whether the connection has authenticated (or needs not). Kept in its `ClientInfo`,
    /// where `server::busy` reads it too.
    pub fn authenticated(&self) -> bool {
        self.info.authenticated.load(Ordering::Relaxed)
    }

    /// Marks the connection authenticated or not.
    pub fn set_authenticated(&self, yes: bool) {
        self.info.authenticated.store(yes, Ordering::Relaxed);
    }

    pub fn new(info: Arc<ClientInfo>, srv: &Server) -> Conn {
        info.authenticated.store(!srv.acl.auth_required(), Ordering::Relaxed);
        Conn {
            info,
            user: srv.acl.default_user(),
            acl_gen: srv.acl.generation(),
            db: 0,
            ns_base: 0,
            resp3: false,
            multi: None,
            multi_error: false,
            multi_writes: false,
            multi_denyoom: false,
            multi_charge: None,
            watched: Vec::new(),
            block_notify: Arc::new(Notify::new()),
            reply_off: false,
            pushes_waiting: false,
            woke_blocked: false,
            from_master: false,
            migrator: false,
            repl_offsets: [0; 2],
            psync: None,
            replica_hello: Default::default(),
            reply_skip: 0,
            subs: pubsub::Subscriptions::default(),
            monitor: false,
            tracking: None,
            caching: None,
            wal_pending: 0,
            acks_writes: false,
            replay_now: None,
            storage_waits: Vec::new(),
            tally: tally::Tally::default(),
        }
    }
}

/// What the reply to a blocking command that timed out looks like.
#[derive(Debug, Clone, Copy)]
pub enum TimeoutReply {
    NullArray,
    NullBulk,
    /// WAIT: how many replicas acknowledged these replication offsets by then.
    Replicas(crate::replication::Offsets),
}

/// A blocking command that found nothing to pop.
#[derive(Debug, Clone)]
pub struct BlockRequest {
    pub keys: Vec<Vec<u8>>,
    pub db: usize,
    pub deadline: Option<Instant>,
    pub timeout_reply: TimeoutReply,
    /// The arguments to re-run the command with after a wake-up, when they differ from the
    /// original (XREAD's `$` becomes the ID it meant at the first attempt).
    pub retry_argv: Option<Vec<Vec<u8>>>,
    /// Woken also when a key is deleted or changes type (XREADGROUP, which then fails).
    pub wake_on_delete: bool,
}

pub enum Outcome {
    Done,
    Close,
    Block(BlockRequest),
    /// CLIENT PAUSE is in force for this command until this unix time (ms): retry then.
    Paused(i64),
    /// A key read through from storage for this command was evicted, or written again and
    /// not yet confirmed, before it got its locks: it did not run; read through again.
    ReadAgain,
    /// Another command holds, or is taking, the whole of the connection's namespace (a
    /// script, a long EXEC): this one did not run; wait for it off the thread, then run it.
    NamespaceHeld,
}

/// The locked part of the keyspace a command works on.
pub struct Data<'a> {
    pub ks: &'a Keyspace,
    pub guards: Guards<'a>,
    pub db: usize,
    pub now: i64,
    pub lfu: bool,
    /// What the command did besides its reply (`pipeline::Effects`).
    pub fx: pipeline::Effects,
}

impl<'a> Data<'a> {
    /// The data a command holds `guards` of, in database `db`, at time `now`.
    pub fn new(ks: &'a Keyspace, guards: Guards<'a>, db: usize, now: i64) -> Data<'a> {
        Data { ks, guards, db, now, lfu: ks.lfu.load(Ordering::Relaxed), fx: pipeline::Effects::default() }
    }

    /// Releases the locks and hands over the effects.
    pub fn release(self) -> pipeline::Effects {
        self.fx
    }

    #[inline]
    pub fn shard(&mut self, key: &[u8]) -> &mut Shard {
        let id = self.ks.shard_id(self.db, key);
        self.guards.shard(id)
    }

    pub fn shard_in(&mut self, db: usize, key: &[u8]) -> &mut Shard {
        let id = self.ks.shard_id(db, key);
        self.guards.shard(id)
    }

    /// Totals over every shard, visited one at a time (`Keyspace::visit`).
    pub fn totals(&mut self) -> Result<crate::keyspace::Totals, crate::keyspace::Undeclared> {
        self.ks.totals(&mut self.guards)
    }

    /// Reads one shard by id for a command that visits shards (`Keyspace::visit`); None if
    /// another command held it for longer than `wait`.
    pub fn visit<R>(&mut self, id: u32, wait: std::time::Duration, f: impl FnOnce(&Shard) -> R) -> Result<Option<R>, crate::keyspace::Undeclared> {
        self.ks.visit(&mut self.guards, id, wait, f)
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
                self.fx.hits += 1;
                self.fx.pmem_hits += in_pmem as u64;
                e.set_access(access::touched(e.access(), lfu, now));
                Some(e)
            }
            None => {
                self.fx.misses += 1;
                key_missed(self.ks, &mut self.fx, self.db, key);
                None
            }
        }
    }

    /// Looks a key up without touching its access stamp.
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        let now = self.now;
        self.shard(key).get(key, now).map(|e| &*e)
    }

    /// As `read` without stamping the access or promoting the value (TTL, TYPE, EXISTS:
    /// Redis's LOOKUP_NOTOUCH), still counting a keyspace hit or miss.
    pub fn read_untouched(&mut self, key: &[u8]) -> Option<&Entry> {
        let now = self.now;
        let id = self.ks.shard_id(self.db, key);
        let found = self.guards.shard(id).get(key, now).map(|e| &*e);
        if found.is_some() {
            self.fx.hits += 1;
        } else {
            self.fx.misses += 1;
            key_missed(self.ks, &mut self.fx, self.db, key);
        }
        found
    }

    /// Adds a keyspace notification a handler names itself (one a change of the key alone
    /// cannot tell, such as a stream consumer created on the way), if notifications are on.
    pub fn notify_event(&mut self, event_class: u32, event: &'static str, key: &[u8]) {
        if self.ks.notifying() {
            self.fx.notifications.push((self.db, event_class, event, key.to_vec()));
        }
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.peek(key).is_some()
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

    /// As `modified` when the command changed the collection at `key`; when it did not, only
    /// drops it if `coll_or_create` made it and it stayed empty — quietly, as nothing
    /// happened to the key (Redis's ZADD XX or SADD of members already there).
    pub fn settle(&mut self, key: &[u8], changed: bool) {
        if changed {
            return self.modified(key);
        }
        let s = self.shard(key);
        let empty = s.get(key, i64::MIN).and_then(|e| e.coll()).is_some_and(|c| c.is_empty() && c.kind() != Kind::Stream);
        if empty {
            s.discard(key);
        }
    }

    /// Adds a WAL record for a write this command made, in its database.
    pub fn log(&mut self, ns_base: usize, argv: &[&[u8]]) {
        self.fx.log(self.now, self.db, ns_base, argv);
    }

    /// Marks a list or sorted set key as having new elements for blocked clients.
    pub fn signal(&mut self, key: &[u8]) {
        self.fx.ready.push((self.db, key.to_vec()));
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

/// A read found no key: the `keymiss` event (class `m`), as Redis fires it on a read lookup
/// (published only if that class is on).
fn key_missed(ks: &Keyspace, fx: &mut pipeline::Effects, db: usize, key: &[u8]) {
    if ks.notifying() {
        fx.notifications.push((db, terrace_commands::notify::class::KEY_MISS, "keymiss", key.to_vec()));
    }
}

/// Everything a command handler can reach.
pub struct Ctx<'a> {
    pub srv: &'a Server,
    pub conn: &'a mut Conn,
    pub out: ReplyWriter<'a>,
    pub data: Data<'a>,
    pub block: Option<BlockRequest>,
    pub close: bool,
    /// True while running inside EXEC or a script (blocking commands must not block).
    pub in_exec: bool,
    /// True while running inside a script (`redis.call`).
    pub in_script: bool,
    /// The spec of the running command.
    pub spec: &'static CommandSpec,
}

impl Ctx<'_> {
    pub fn resp3(&self) -> bool {
        self.out.resp3
    }
}

pub use terrace_commands::{arity_ok, lookup, unknown_command_error};

/// The shard ids a command must lock.
pub fn lock_ids(srv: &Server, spec: &CommandSpec, argv: &[&[u8]], db: usize) -> ShardIds {
    let ks = &srv.keyspace;
    match spec.lock {
        Lock::None | Lock::Visit => ShardIds::new(),
        Lock::Keys if spec.first == 1 && spec.last == 1 && spec.keys_from == table::KeysFrom::Range => std::iter::once(ks.shard_id(db, argv[1])).collect(),
        Lock::Db => ks.db_shard_ids(db).collect(),
        Lock::Namespace => ks.namespace_shard_ids(ks.namespace_of(db)).collect(),
        // (The pipeline takes every shard with `Keyspace::lock_all`: this is the same set.)
        Lock::All => ks.all_shard_ids().collect(),
        Lock::Keys => table::key_positions(spec, argv).into_iter().map(|i| ks.shard_id(db, argv[i])).collect(),
    }
}

pub use pipeline::storage::{invalidate, read_through};
pub use pipeline::{admit_memory, admit_namespace, execute, execute_request, Request};
