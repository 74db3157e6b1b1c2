//! One Redis client of the proxy, as a `Frontend` of the shared connection loop: parse
//! pipelined requests, route each (see `route`), compose each reply when its engines have
//! answered.
//!
//! Replies wait in the connection's queue, one entry per request, filled by backends as
//! engines answer; the front of the queue is written as soon as it is complete, so a slow
//! engine delays only the replies behind it on this connection. Transactions and blocking
//! commands use a connection of the client's own (its "pin"); SUBSCRIBE turns the client into
//! a relay.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

use terrace_commands::connection::{client_name, write_hello, Auth, Hello, HELLO_NOAUTH};
use terrace_commands::resp::{Limits, ReplyWriter, RequestParser};
use terrace_commands::table::{full_name, CommandId, CommandSpec};
use terrace_commands::tenancy::{names_tenant, tenancy, Tenancy};
use terrace_commands::{arity_ok, lookup, unknown_command_error};

use super::connection::{self, ClientStream, Frontend, Handled, Replies, State};
use super::{info, Reactor};
use crate::backend::{send, take_all, Backend, Owner, Slot};
use crate::blocking::{self, BlockingCall};
use crate::merge::{self, Merge};
use crate::resp;
use crate::route::{self, Kind, Local, Split, Target, Txn};
use crate::tenants::Tenant;
use std::sync::Arc;

const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
/// An engine-wide command asked by a tenant (`terrace_commands::tenancy`).
const OPERATORS: &str = "NOPERM this command acts on the whole engine, which tenants share: it is the operator's (AUTH admin <password>)";
const NUM_DBS: i64 = 16;

enum Pending {
    Ready(Bytes),
    Reply(Rc<Slot>),
    /// Answered already (a MULTI or queued command sent once the transaction's engine was
    /// known); the engine's reply is dropped.
    Hidden(Rc<Slot>),
    /// A blocking command: the client reads no further requests until it is answered. The
    /// call is kept to be sent again if its slot moves while it waits (`crate::blocking`).
    Unblock(Rc<Slot>, Option<Box<BlockingCall>>),
    Merged(Vec<Rc<Slot>>, Merge),
    /// WAIT on each engine written to: the smallest count; the client reads no further
    /// requests until it is answered.
    Waited(Vec<Rc<Slot>>),
    /// A GET missed in the near cache: its reply goes to the client and, if cacheable, into
    /// the cache (database, key, cache generation at the miss).
    Fill(Rc<Slot>, u32, Bytes, u64),
    Info(Vec<Rc<Slot>>, Vec<&'static str>),
}

/// MULTI … EXEC in progress.
struct TxnState {
    /// The engine connection is chosen (by WATCH, or by the first command with keys); until
    /// then keyless commands are answered QUEUED here and sent when it is.
    placed: bool,
    buffered: Vec<Bytes>,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    dirty: bool,
    /// The slots of the queued commands' keys: EXEC waits while one is held, and is refused
    /// if one has moved off the transaction's engine meanwhile.
    slots: Vec<u16>,
}

struct Client {
    rx: Rc<Reactor>,
    /// Whose keyspace the client works in (the default tenant until AUTH says otherwise).
    tenant: Arc<Tenant>,
    id: u64,
    name: Option<Vec<u8>>,
    db: u32,
    resp3: bool,
    authed: bool,
    /// Authenticated as `admin` (may run TERRACE.TOPOLOGY).
    admin: bool,
    owner: Rc<Owner>,
    parser: RequestParser,
    replies: Replies<Pending>,
    /// The command being handled (for metrics).
    current: &'static str,
    /// The connection a WATCH or MULTI holds, and whether a SELECT went through it.
    pin: Option<(Rc<Backend>, bool)>,
    txn: Option<TxnState>,
    /// The client's own connections, per (engine, db, resp3), kept for reuse.
    dedicated: HashMap<(usize, u32, bool), Rc<Backend>>,
    /// The connections the last SCRIPT/FUNCTION KILL went on (closed by the next one).
    killers: Vec<Rc<Backend>>,
    relay: Option<Rc<Backend>>,
    /// The client's address (failed AUTH attempts are limited per address).
    peer: Option<std::net::IpAddr>,
    /// The proxy's address the client reached (its node in the cluster view).
    local_addr: Option<std::net::SocketAddr>,
    blocked: bool,
    /// A blocking call whose engine handed its slot over while it waited, and the slot: to
    /// be sent where the slot went (`resume`).
    moved: Option<(Box<BlockingCall>, u16)>,
    closing: bool,
    /// Engines the client sent writes to since its last WAIT.
    written: std::collections::BTreeSet<usize>,
}

/// How long TERRACE.TOPOLOGY HOLD waits for the requests sent before it.
const HOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Redis's reply to wrong credentials.
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Serves a Redis client; `peer` and `local_addr` are its TCP connection's ends.
pub async fn serve<S: ClientStream>(rx: Rc<Reactor>, stream: S, id: u64, peer: Option<std::net::SocketAddr>, local_addr: Option<std::net::SocketAddr>) {
    let peer = peer.map(|a| a.ip());
    let tenant = rx.topology().default_tenant();
    let authed = tenant.password.is_none();
    let owner = Rc::new(Owner::counted(rx.shared.client_bytes.clone()));
    let client = Client {
        rx,
        tenant,
        id,
        peer,
        local_addr,
        name: None,
        db: 0,
        resp3: false,
        authed,
        admin: false,
        owner,
        parser: RequestParser::new(Limits::default()),
        replies: Replies::default(),
        current: "unknown",
        pin: None,
        txn: None,
        dedicated: HashMap::new(),
        killers: Vec::new(),
        relay: None,
        blocked: false,
        moved: None,
        closing: false,
        written: Default::default(),
    };
    connection::serve(client, stream, id).await
}

impl Frontend for Client {
    type Pending = Pending;
    const PROTOCOL: &'static str = "redis";

    async fn request(&mut self, input: &[u8]) -> Option<Handled> {
        let req = match self.parser.parse(input) {
            Ok(Some(r)) => r,
            Ok(None) => return None,
            Err(e) => {
                self.ready(format!("-ERR {e}\r\n"));
                self.closing = true;
                return Some(Handled { consumed: 0, command: None });
            }
        };
        self.parser.reset();
        if req.args.is_empty() {
            return Some(Handled { consumed: req.consumed, command: None });
        }
        let argv: SmallVec<[&[u8]; 8]> = (0..req.args.len()).map(|i| req.arg(input, i)).collect();
        let encoded;
        let raw: &[u8] = if req.inline.is_some() {
            let mut b = BytesMut::new();
            resp::encode_request(&mut b, &argv);
            encoded = b;
            &encoded
        } else {
            &input[..req.consumed]
        };
        self.current = "unknown";
        self.handle(&argv, raw).await;
        Some(Handled { consumed: req.consumed, command: Some(self.current) })
    }

    fn compose(&mut self, entry: &mut Pending, out: &mut BytesMut) -> bool {
        match entry {
            Pending::Ready(b) => out.extend_from_slice(b),
            Pending::Reply(s) | Pending::Hidden(s) => {
                let Some(reply) = s.take() else { return false };
                if matches!(entry, Pending::Reply(_)) {
                    out.extend_from_slice(&reply);
                }
            }
            Pending::Unblock(s, call) => {
                let Some(reply) = s.take() else { return false };
                if let Some(slot) = terrace_commands::slots::handed_over_slot(&reply) {
                    if let Some(c) = call.take().filter(|c| c.resends < blocking::MAX_RESENDS) {
                        self.moved = Some((c, slot));
                        return false;
                    }
                }
                out.extend_from_slice(&reply);
                self.blocked = false;
            }
            Pending::Fill(s, db, key, generation) => {
                let Some(reply) = s.take() else { return false };
                out.extend_from_slice(&reply);
                if let Some(cache) = &self.rx.shared.near_cache {
                    cache.fill(*db, key.clone(), reply, *generation);
                }
            }
            Pending::Merged(parts, m) => {
                let Some(replies) = take_all(parts) else { return false };
                let frames: Vec<&[u8]> = replies.iter().map(|r| &r[..]).collect();
                merge::merge(m, &frames, out);
            }
            Pending::Waited(parts) => {
                let Some(replies) = take_all(parts) else { return false };
                let frames: Vec<&[u8]> = replies.iter().map(|r| &r[..]).collect();
                merge::merge(&Merge::Min, &frames, out);
                self.blocked = false;
            }
            Pending::Info(parts, sections) => {
                let Some(replies) = take_all(parts) else { return false };
                let frames: Vec<&[u8]> = replies.iter().map(|r| &r[..]).collect();
                let text = info::render(&self.rx, sections, &frames);
                ReplyWriter::new(out, self.resp3).verbatim(&text);
            }
        }
        true
    }

    fn is_error(reply: &[u8]) -> bool {
        reply.first() == Some(&b'-')
    }

    /// A subscribed client's messages go out between replies.
    fn idle(&mut self, out: &mut BytesMut) {
        if let Some(relay) = &self.relay {
            while let Some(frame) = relay.next_unsolicited() {
                out.extend_from_slice(&frame);
            }
        }
    }

    fn replies(&mut self) -> &mut Replies<Pending> {
        &mut self.replies
    }

    fn state(&self) -> State {
        if self.relay.as_ref().is_some_and(|r| r.is_dead()) {
            State::Finished
        } else if self.closing {
            State::Closing
        } else if self.blocked {
            State::Blocked
        } else {
            State::Reading
        }
    }

    fn reactor(&self) -> &Rc<Reactor> {
        &self.rx
    }

    fn tenant_name(&self) -> Arc<str> {
        self.tenant.name.clone()
    }

    fn owner(&self) -> &Owner {
        &self.owner
    }

    fn subscribed(&self) -> bool {
        self.relay.is_some()
    }

    /// A blocking call whose slot moved while it waited goes where the slot went.
    async fn resume(&mut self) -> bool {
        let Some((mut call, slot)) = self.moved.take() else { return false };
        let (reply, call) = match self.engine_after_move(slot, call.engine).await {
            Ok(engine) => {
                call.engine = engine;
                call.resends += 1;
                let b = self.dedicated(engine);
                (send(&b, &call.request_now(), &self.owner, true).await, Some(call))
            }
            Err(why) => (Slot::ready(Bytes::from(format!("-{why}\r\n")), &self.owner), None),
        };
        match self.replies.front_mut() {
            Some(Pending::Unblock(s, c)) => {
                *s = reply;
                *c = call;
            }
            _ => unreachable!("a moved blocking call's entry is at the front of the queue until it is answered"),
        }
        true
    }

    fn close(&mut self) {
        for (_, b) in self.dedicated.drain().chain(self.killers.drain(..).map(|b| ((0, 0, false), b))) {
            b.shutdown();
        }
        if let Some(r) = self.relay.take() {
            r.shutdown();
        }
    }
}

/// Drops near-cache entries a write may change: its keys, or everything for commands whose
/// effects reach beyond their key arguments.
fn invalidate(cache: &crate::near_cache::NearCache, spec: &CommandSpec, argv: &[&[u8]], db: u32) {
    use CommandId::*;
    let broad = matches!(
        spec.id,
        Flushdb | Flushall | Swapdb | Move | Copy | Restore | Sort | Eval | Evalsha | EvalRo | EvalshaRo | Fcall | FcallRo | Function | Script
    );
    if broad {
        return cache.clear();
    }
    for i in terrace_commands::table::key_positions(spec, argv) {
        cache.invalidate(db, argv[i]);
    }
}

impl Client {
    fn push(&mut self, p: Pending) {
        self.replies.push(p);
    }

    fn ready(&mut self, reply: impl Into<Bytes>) {
        self.push(Pending::Ready(reply.into()));
    }

    fn error(&mut self, msg: &str) {
        let mut b = BytesMut::new();
        ReplyWriter::new(&mut b, self.resp3).error(msg);
        self.ready(b.freeze());
    }

    fn reply_with(&mut self, f: impl FnOnce(&mut ReplyWriter)) {
        let mut b = BytesMut::new();
        f(&mut ReplyWriter::new(&mut b, self.resp3));
        self.ready(b.freeze());
    }

    fn engines(&self) -> usize {
        self.rx.engines()
    }

    /// The engine a call goes to by its keys (the first with none); None when they span
    /// engines (CROSSSLOT).
    fn key_engine(&self, spec: &CommandSpec, argv: &[&[u8]]) -> Option<usize> {
        match route::target(spec, argv, &self.rx.topology().slot_map) {
            Target::Any => Some(0),
            Target::One(e) => Some(e),
            Target::Spans => None,
        }
    }

    /// For a tenant with `replica_reads`, the connection index of a replica of `engine` that
    /// serves a read-only call (chosen by client, so one client's reads stay on one replica
    /// while it is up); None: the engine itself.
    fn replica_for_read(&self, spec: &CommandSpec, engine: usize) -> Option<usize> {
        if !self.tenant.replica_reads || spec.write || !spec.flags.has(terrace_commands::table::Flags::READONLY) || self.pin.is_some() {
            return None;
        }
        let topo = self.rx.topology();
        let replicas = topo.replicas_of.get(engine)?;
        if replicas.is_empty() {
            return None;
        }
        let first = self.id as usize % replicas.len();
        (0..replicas.len()).map(|i| replicas[(first + i) % replicas.len()]).find(|&r| self.rx.backend(r, &self.tenant.namespace, self.db, self.resp3).is_up())
    }

    /// The client's own connection to `engine` (a new one if the last one failed, or if
    /// the engine's place is another address now: after a failover, WAIT, MULTI and
    /// blocking calls go to the new primary, never on to the old one, now a replica).
    fn dedicated(&mut self, engine: usize) -> Rc<Backend> {
        let key = (engine, self.db, self.resp3);
        let topo = self.rx.topology();
        if let Some(b) = self.dedicated.get(&key) {
            if !b.is_dead() && topo.addrs.get(engine) == Some(&b.spec.addr) {
                return b.clone();
            }
        }
        let b = self.rx.dedicated(engine, &self.tenant.namespace, self.db, self.resp3);
        if let Some(old) = self.dedicated.insert(key, b.clone()) {
            old.shutdown();
        }
        b
    }

    fn unpin(&mut self) {
        if let Some((b, tainted)) = self.pin.take() {
            if tainted {
                self.dedicated.retain(|_, d| !Rc::ptr_eq(d, &b));
                b.shutdown();
            }
        }
    }

    async fn send_to(&mut self, engine: usize, raw: &[u8]) {
        let b = match &self.pin {
            Some((p, _)) if p.spec.engine == engine => p.clone(),
            _ => self.rx.backend(engine, &self.tenant.namespace, self.db, self.resp3),
        };
        let slot = send(&b, raw, &self.owner, false).await;
        self.push(Pending::Reply(slot));
    }

    /// One request, counted in flight (`crate::hold`) until the replies it sent for arrive.
    async fn handle(&mut self, argv: &[&[u8]], raw: &[u8]) {
        *self.owner.ticket.borrow_mut() = Some(self.rx.enter());
        self.handle_counted(argv, raw).await;
        self.owner.ticket.borrow_mut().take();
    }

    /// The engine serving `slot` once its move is over: waits while this proxy holds the
    /// slot (the coordinator releases it with the map that moves it, or on a rollback). A
    /// slot not held here whose map still names `from` (a map on its way, or a rolled back
    /// move) goes to `from` again after a pause.
    /// The wait is every held request's (`Reactor::wait_for_slots`, bounded by
    /// `held_slot_limit_ms`: past it, the error to answer).
    async fn engine_after_move(&self, slot: u16, from: usize) -> Result<usize, String> {
        let waited = self.rx.wait_for_slots(&self.owner, |f| f(slot)).await;
        // (Between requests: the call keeps no place in the in-flight count a hold waits on.)
        self.owner.ticket.borrow_mut().take();
        waited?;
        let engine = self.rx.topology().slot_map.engine_of_slot(slot);
        if engine == from {
            tokio::time::sleep(blocking::SAME_ENGINE_PAUSE).await;
            return Ok(self.rx.topology().slot_map.engine_of_slot(slot));
        }
        Ok(engine)
    }

    /// Waits while a slot of the call's keys (EXEC: of its transaction's) is held.
    async fn wait_for_slots(&mut self, spec: &CommandSpec, argv: &[&[u8]]) -> Result<(), String> {
        if !self.rx.shared.holds.any() {
            return Ok(());
        }
        let mut slots: SmallVec<[u16; 4]> = SmallVec::new();
        terrace_commands::table::for_each_key(spec, argv, |k| slots.push(crate::slots::key_slot(k)));
        if let (CommandId::Exec, Some(t)) = (spec.id, &self.txn) {
            slots.extend(t.slots.iter().copied());
        }
        if slots.is_empty() {
            return Ok(());
        }
        self.rx.wait_for_slots(&self.owner, |f| slots.iter().for_each(|&s| f(s))).await
    }

    async fn handle_counted(&mut self, argv: &[&[u8]], raw: &[u8]) {
        self.rx.shared.stats.commands.fetch_add(1, Ordering::Relaxed);
        if let Some(relay) = &self.relay {
            if argv[0].eq_ignore_ascii_case(b"quit") {
                self.ready(&b"+OK\r\n"[..]);
                self.closing = true;
            } else if relay.send_relayed(raw).is_err() {
                self.closing = true;
            }
            return;
        }
        if argv[0].eq_ignore_ascii_case(b"terrace.reload") {
            if !self.admin {
                return self.error(OPERATORS);
            }
            return match (argv.len(), self.rx.shared.reload()) {
                (1, Ok(())) => self.ready(&b"+OK\r\n"[..]),
                (1, Err(e)) => self.error(&format!("ERR reload failed: {e}")),
                _ => self.error("ERR wrong number of arguments for 'terrace.reload' command"),
            };
        }
        if argv[0].eq_ignore_ascii_case(b"terrace.topology") {
            return self.topology_command(argv).await;
        }
        if argv[0].eq_ignore_ascii_case(b"terrace.latency") {
            // TERRACE.LATENCY TAKE: every tenant's requests since the last take (the console's
            // history of latency percentiles), then forgotten.
            if !self.admin {
                return self.error(OPERATORS);
            }
            return match argv.get(1) {
                Some(a) if a.eq_ignore_ascii_case(b"take") && argv.len() == 2 => {
                    let doc = crate::metrics::interval_json(&self.rx.shared.metrics.take_interval());
                    self.reply_with(|w| w.bulk(doc.as_bytes()))
                }
                _ => self.error("ERR TERRACE.LATENCY TAKE is the one form"),
            };
        }
        let Some(spec) = lookup(argv[0]) else {
            self.refuse_in_txn();
            return self.error(&unknown_command_error(argv));
        };
        self.current = spec.name;
        if !arity_ok(spec, argv.len()) || (spec.id == CommandId::Mset && argv.len().is_multiple_of(2)) {
            self.refuse_in_txn();
            return self.error(&format!("ERR wrong number of arguments for '{}' command", full_name(spec, argv)));
        }
        if !self.authed && !spec.no_auth {
            return self.error("NOAUTH Authentication required.");
        }
        if let Err(why) = self.permitted(spec, argv) {
            self.refuse_in_txn();
            return self.error(&why);
        }
        if !self.tenant.admit() {
            let msg = format!("ERR {}", self.tenant.over_limit_message());
            return self.error(&msg);
        }
        if let Err(why) = self.wait_for_slots(spec, argv).await {
            if spec.id == CommandId::Exec {
                // The transaction ends with its EXEC, refused or not.
                if self.txn.take().is_some_and(|t| t.placed) {
                    self.discard_pinned().await;
                }
                self.error(&why);
                return self.unpin();
            }
            self.refuse_in_txn();
            return self.error(&why);
        }
        let kind = route::classify(spec, argv);
        if let Some(cache) = &self.rx.shared.near_cache {
            if spec.write {
                invalidate(cache, spec, argv, self.tenant.cache_id * 16 + self.db);
            } else if spec.id == CommandId::Get && self.txn.is_none() && self.pin.is_none() {
                let part = self.tenant.cache_id * 16 + self.db;
                match cache.get(part, argv[1]) {
                    Ok(reply) => return self.ready(reply),
                    Err(generation) => {
                        let e = self.rx.topology().slot_map.engine_of_key(argv[1]);
                        let b = self.rx.backend(e, &self.tenant.namespace, self.db, self.resp3);
                        let slot = send(&b, raw, &self.owner, false).await;
                        return self.push(Pending::Fill(slot, part, Bytes::copy_from_slice(argv[1]), generation));
                    }
                }
            }
        }
        if spec.write || spec.flags.has(terrace_commands::table::Flags::MAY_REPLICATE) {
            // What WAIT will wait for: the engine of the keys, else every engine.
            match (&kind, self.key_engine(spec, argv)) {
                (Kind::Keyed | Kind::Blocking, Some(e)) => {
                    self.written.insert(e);
                }
                _ => self.written.extend(0..self.engines()),
            }
        }
        if self.txn.is_some() {
            return self.queue(spec, kind, argv, raw).await;
        }
        match kind {
            Kind::Local(l) => self.local(l, argv).await,
            Kind::Refused(why) => self.error(&format!("ERR {why}")),
            Kind::Keyed => match self.key_engine(spec, argv) {
                Some(e) => {
                    let target = self.replica_for_read(spec, e).unwrap_or(e);
                    self.send_to(target, raw).await
                }
                None => self.error(CROSSSLOT),
            },
            Kind::Split(s) => self.split(s, argv, raw).await,
            Kind::FanOut(m) => {
                if spec.id == CommandId::Config && argv[1].eq_ignore_ascii_case(b"resetstat") {
                    self.rx.shared.metrics.reset();
                    self.rx.shared.stats.commands.store(0, Ordering::Relaxed);
                }
                self.fan_out(m, raw).await
            }
            Kind::Scan => self.scan(argv).await,
            Kind::Info => {
                let sections = info::wanted(&argv[1..]);
                let mut req = BytesMut::new();
                resp::encode_request(&mut req, &["INFO", "keyspace"]);
                let parts = self.send_to_all(&req).await;
                self.push(Pending::Info(parts, sections));
            }
            Kind::Blocking => {
                let Some(e) = self.key_engine(spec, argv) else {
                    return self.error(CROSSSLOT);
                };
                let b = match &self.pin {
                    Some((p, _)) if p.spec.engine == e => p.clone(),
                    _ => self.dedicated(e),
                };
                let slot = send(&b, raw, &self.owner, true).await;
                self.push(Pending::Unblock(slot, Some(Box::new(BlockingCall::new(spec.id, argv, e)))));
                self.blocked = true;
            }
            Kind::Txn(t) => self.txn_control(t, spec, argv, raw).await,
            Kind::Wait => {
                // Each engine written to since the last WAIT (engine 0 when none: WAIT then
                // answers how many replicas are there) waits for every write it took so far,
                // which covers the client's: their connections are shared.
                let engines: Vec<usize> = std::mem::take(&mut self.written).into_iter().collect();
                let engines = if engines.is_empty() { vec![0] } else { engines };
                let mut req = BytesMut::new();
                resp::encode_request(&mut req, &[b"TERRACE.WAIT".as_slice(), argv[1], argv[2]]);
                let mut parts = Vec::with_capacity(engines.len());
                for e in engines {
                    let b = self.dedicated(e);
                    parts.push(send(&b, &req, &self.owner, true).await);
                }
                self.push(Pending::Waited(parts));
                self.blocked = true;
            }
            Kind::Kill => {
                // In the tenant's namespace (an engine stops only the caller's namespace's
                // script), with no database or protocol set up first: the kill needs none,
                // and while its script is busy the namespace refuses all but a few commands.
                for b in self.killers.drain(..) {
                    b.shutdown();
                }
                let mut parts = Vec::with_capacity(self.engines());
                for e in 0..self.engines() {
                    let b = self.rx.dedicated(e, &self.tenant.namespace, 0, false);
                    parts.push(send(&b, raw, &self.owner, false).await);
                    self.killers.push(b);
                }
                self.push(Pending::Merged(parts, crate::merge::Merge::AnyOk));
            }
            Kind::Subscribe => {
                let e = if spec.id == CommandId::Ssubscribe {
                    match self.key_engine(spec, argv) {
                        Some(e) => e,
                        None => return self.error(CROSSSLOT),
                    }
                } else {
                    0
                };
                let b = self.rx.dedicated(e, &self.tenant.namespace, self.db, self.resp3);
                b.relay_to(&self.owner);
                let _ = b.send_relayed(raw);
                self.relay = Some(b);
            }
        }
    }

    /// Whether this client may run the call, by the command's tenancy: engine-wide commands
    /// are the admin user's, a TERRACE.* command may name only the caller's own tenant, and
    /// nothing may move the pooled engine connections into another namespace.
    fn permitted(&self, spec: &CommandSpec, argv: &[&[u8]]) -> Result<(), String> {
        match tenancy(spec, argv) {
            Tenancy::Never if spec.id == CommandId::TerraceNamespace => {
                Err(format!("NOPERM {} is not available through the proxy: AUTH <tenant> <password> chooses the keyspace", spec.name.to_ascii_uppercase()))
            }
            Tenancy::Never => Err(format!("NOPERM {} is not available through the proxy: the console runs it on the engines", spec.name.to_ascii_uppercase())),
            Tenancy::Tenant => Ok(()),
            _ if self.admin => Ok(()),
            Tenancy::Operator => Err(OPERATORS.to_string()),
            t @ Tenancy::OwnTenant(_) if names_tenant(t, argv, &self.tenant.name) => Ok(()),
            Tenancy::OwnTenant(_) => Err(format!("NOPERM tenant '{}' may only name itself in {}", self.tenant.name, spec.name.to_ascii_uppercase())),
        }
    }

    /// Marks the open transaction as failed (EXEC will answer EXECABORT).
    /// Ends the transaction queued on the pinned connection (its reply is not the client's).
    async fn discard_pinned(&mut self) {
        let mut discard = BytesMut::new();
        resp::encode_request(&mut discard, &["DISCARD"]);
        let b = self.pin.as_ref().expect("placed").0.clone();
        let hidden = send(&b, &discard, &self.owner, false).await;
        self.push(Pending::Hidden(hidden));
    }

    fn refuse_in_txn(&mut self) {
        if let Some(t) = &mut self.txn {
            t.dirty = true;
        }
    }

    async fn send_to_all(&mut self, req: &[u8]) -> Vec<Rc<Slot>> {
        let mut parts = Vec::with_capacity(self.engines());
        for e in 0..self.engines() {
            let b = self.rx.backend(e, &self.tenant.namespace, self.db, self.resp3);
            parts.push(send(&b, req, &self.owner, false).await);
        }
        parts
    }

    async fn fan_out(&mut self, m: Merge, raw: &[u8]) {
        let mut parts = self.send_to_all(raw).await;
        if matches!(m, Merge::FirstNonNull) {
            let n = parts.len();
            parts.rotate_left(fastrand::usize(..n));
        }
        self.push(Pending::Merged(parts, m));
    }

    async fn split(&mut self, s: Split, argv: &[&[u8]], raw: &[u8]) {
        let Some(plan) = route::plan_split(s, argv, &self.rx.topology().slot_map) else {
            let e = self.rx.topology().slot_map.engine_of_key(argv[1]);
            return self.send_to(e, raw).await;
        };
        let mut parts = Vec::with_capacity(plan.parts.len());
        for (e, args) in &plan.parts {
            let mut req = BytesMut::new();
            resp::encode_request(&mut req, args);
            let b = self.rx.backend(*e, &self.tenant.namespace, self.db, self.resp3);
            parts.push(send(&b, &req, &self.owner, false).await);
        }
        let m = match s {
            Split::Mget => Merge::Positional(plan.positions),
            Split::Mset => Merge::AllOk,
            Split::Sum => Merge::Sum,
        };
        self.push(Pending::Merged(parts, m));
    }

    async fn scan(&mut self, argv: &[&[u8]]) {
        let n = self.engines();
        let cursor = std::str::from_utf8(argv[1]).ok().and_then(|c| c.parse::<u128>().ok());
        let Some((engine, own)) = cursor.map(|c| merge::decode_scan_cursor(c, n)).filter(|(_, own)| *own <= u64::MAX as u128) else {
            return self.error("ERR invalid cursor");
        };
        // The engine's own cursor there; the engines after it from their start, in case it
        // finishes (a call then returns keys from several engines).
        let own = own.to_string();
        let mut parts = Vec::with_capacity(n - engine);
        for e in engine..n {
            let mut args: Vec<&[u8]> = argv.to_vec();
            args[1] = if e == engine { own.as_bytes() } else { b"0" };
            let mut req = BytesMut::new();
            resp::encode_request(&mut req, &args);
            let b = self.rx.backend(e, &self.tenant.namespace, self.db, self.resp3);
            parts.push(send(&b, &req, &self.owner, false).await);
        }
        self.push(Pending::Merged(parts, Merge::Scan { engine, engines: n }));
    }

    async fn txn_control(&mut self, t: Txn, spec: &CommandSpec, argv: &[&[u8]], raw: &[u8]) {
        match t {
            Txn::Watch => {
                let Some(e) = self.key_engine(spec, argv) else {
                    return self.error(CROSSSLOT);
                };
                match &self.pin {
                    Some((p, _)) if p.spec.engine != e => return self.error(CROSSSLOT),
                    Some(_) => {}
                    None => self.pin = Some((self.dedicated(e), false)),
                }
                self.send_to(e, raw).await;
            }
            Txn::Multi => match &self.pin {
                Some((p, _)) => {
                    let e = p.spec.engine;
                    self.send_to(e, raw).await;
                    self.txn = Some(TxnState { placed: true, buffered: Vec::new(), dirty: false, slots: Vec::new() });
                }
                None => {
                    self.txn = Some(TxnState { placed: false, buffered: Vec::new(), dirty: false, slots: Vec::new() });
                    self.ready(&b"+OK\r\n"[..]);
                }
            },
            Txn::Unwatch => match &self.pin {
                Some((p, _)) => {
                    let e = p.spec.engine;
                    self.send_to(e, raw).await;
                    self.unpin();
                }
                None => self.ready(&b"+OK\r\n"[..]),
            },
            Txn::Exec => self.error("ERR EXEC without MULTI"),
            Txn::Discard => self.error("ERR DISCARD without MULTI"),
        }
    }

    /// Chooses the transaction's engine: sends MULTI and the commands queued so far.
    async fn place(&mut self, engine: usize) {
        let b = self.dedicated(engine);
        self.pin = Some((b.clone(), false));
        let mut multi = BytesMut::new();
        resp::encode_request(&mut multi, &["MULTI"]);
        let slot = send(&b, &multi, &self.owner, false).await;
        self.push(Pending::Hidden(slot));
        let buffered = std::mem::take(&mut self.txn.as_mut().expect("in a transaction").buffered);
        for req in buffered {
            let slot = send(&b, &req, &self.owner, false).await;
            self.push(Pending::Hidden(slot));
        }
        self.txn.as_mut().expect("in a transaction").placed = true;
    }

    /// A command inside MULTI.
    async fn queue(&mut self, spec: &CommandSpec, kind: Kind, argv: &[&[u8]], raw: &[u8]) {
        let map = &self.rx.topology().slot_map;
        let placed = self.txn.as_ref().is_some_and(|t| t.placed);
        let pinned_engine = self.pin.as_ref().map(|(p, _)| p.spec.engine);
        match kind {
            Kind::Txn(Txn::Multi) => return self.error("ERR MULTI calls can not be nested"),
            Kind::Txn(Txn::Watch) => return self.error("ERR WATCH inside MULTI is not allowed"),
            Kind::Txn(Txn::Exec) => {
                let t = self.txn.take().expect("in a transaction");
                if t.dirty {
                    if placed {
                        self.discard_pinned().await;
                    }
                    self.error("EXECABORT Transaction discarded because of previous errors.");
                } else if !placed && t.buffered.is_empty() {
                    self.ready(&b"*0\r\n"[..]);
                } else if let Some(slot) = t.slots.iter().copied().find(|&s| pinned_engine.is_some_and(|e| map.engine_of_slot(s) != e)) {
                    // A slot of the transaction moved to another engine while it was
                    // queued: it cannot run where it was queued (Redis Cluster answers so).
                    self.discard_pinned().await;
                    self.error(&format!("TRYAGAIN slot {slot} moved to another engine during the transaction; run it again"));
                } else {
                    if !placed {
                        self.txn = Some(t);
                        self.place(0).await;
                        self.txn = None;
                    }
                    let e = self.pin.as_ref().expect("placed").0.spec.engine;
                    self.send_to(e, raw).await;
                }
                return self.unpin();
            }
            Kind::Txn(Txn::Discard) => {
                self.txn = None;
                if placed {
                    let e = pinned_engine.expect("placed");
                    self.send_to(e, raw).await;
                } else {
                    self.ready(&b"+OK\r\n"[..]);
                }
                return self.unpin();
            }
            Kind::Local(l @ (Local::Quit | Local::Reset)) => return self.local(l, argv).await,
            Kind::Local(Local::Ping | Local::Echo) => {}
            Kind::Local(_) | Kind::Subscribe => {
                self.refuse_in_txn();
                return self.error(&format!("ERR {} inside MULTI is not supported through the Terrace proxy", spec.name.to_uppercase()));
            }
            Kind::Refused(why) => {
                self.refuse_in_txn();
                return self.error(&format!("ERR {why}"));
            }
            _ => {}
        }
        let target = match kind {
            Kind::Keyed | Kind::Split(_) | Kind::Blocking => route::target(spec, argv, map),
            _ => Target::Any,
        };
        match target {
            Target::Spans => {
                self.refuse_in_txn();
                self.error(CROSSSLOT)
            }
            Target::One(e) if placed && pinned_engine != Some(e) => {
                self.refuse_in_txn();
                self.error(CROSSSLOT)
            }
            Target::One(e) => {
                if !placed {
                    self.place(e).await;
                }
                if let Some(t) = self.txn.as_mut() {
                    terrace_commands::table::for_each_key(spec, argv, |k| t.slots.push(crate::slots::key_slot(k)));
                }
                self.send_to(e, raw).await;
            }
            Target::Any if placed => {
                let e = pinned_engine.expect("placed");
                self.send_to(e, raw).await;
            }
            Target::Any => {
                self.txn.as_mut().expect("in a transaction").buffered.push(Bytes::copy_from_slice(raw));
                self.ready(&b"+QUEUED\r\n"[..]);
            }
        }
    }

    async fn local(&mut self, l: Local, argv: &[&[u8]]) {
        match l {
            Local::Ping => match argv.get(1) {
                None => self.ready(&b"+PONG\r\n"[..]),
                Some(m) => {
                    let m = m.to_vec();
                    self.reply_with(|w| w.bulk(&m))
                }
            },
            Local::Echo => {
                let m = argv[1].to_vec();
                self.reply_with(|w| w.bulk(&m))
            }
            Local::Quit => {
                self.ready(&b"+OK\r\n"[..]);
                self.closing = true;
            }
            Local::Select => {
                let db = std::str::from_utf8(argv[1]).ok().and_then(|s| s.parse::<i64>().ok());
                let Some(db) = db else { return self.error("ERR value is not an integer or out of range") };
                if !(0..NUM_DBS).contains(&db) {
                    return self.error("ERR DB index is out of range");
                }
                if let Some((p, _)) = &self.pin {
                    // The pinned connection follows the client's database.
                    let e = p.spec.engine;
                    let mut req = BytesMut::new();
                    resp::encode_request(&mut req, argv);
                    self.send_to(e, &req).await;
                    if let Some(pin) = &mut self.pin {
                        pin.1 = true;
                    }
                } else {
                    self.ready(&b"+OK\r\n"[..]);
                }
                self.db = db as u32;
            }
            Local::Auth => {
                let auth = match Auth::parse(argv) {
                    Ok(a) => a,
                    Err(e) => return self.error(&e.to_string()),
                };
                if let Err(e) = self.authenticate(auth.user, auth.password).await {
                    return self.error(&e);
                }
                self.ready(&b"+OK\r\n"[..]);
            }
            Local::Hello => self.hello(argv).await,
            Local::Client => self.client(argv),
            Local::Cluster if super::cluster::asks_engine(argv) => {
                // COUNTKEYSINSLOT, GETKEYSINSLOT: the engine owning the slot counts its keys
                // (an invalid slot goes to engine 0, which says so in Redis's words).
                let slot = std::str::from_utf8(argv[2]).ok().and_then(|s| s.parse::<u16>().ok()).filter(|s| usize::from(*s) < crate::slots::SLOTS);
                let engine = slot.map_or(0, |s| self.rx.topology().slot_map.engine_of_slot(s));
                let mut req = BytesMut::new();
                resp::encode_request(&mut req, argv);
                self.send_to(engine, &req).await;
            }
            Local::Cluster => {
                let Some(local) = self.local_addr else {
                    return self.error("ERR the proxy does not know the address this client reached");
                };
                let nodes = super::cluster::nodes(&self.rx.topology().cluster_nodes, local);
                let mut b = BytesMut::new();
                match super::cluster::answer(argv, &nodes, &mut ReplyWriter::new(&mut b, self.resp3)) {
                    super::cluster::Answer::Done => self.ready(b.freeze()),
                    super::cluster::Answer::Error(e) => self.error(&e),
                }
            }
            Local::ClusterMode => self.ready(&b"+OK\r\n"[..]),
            Local::Reset => {
                self.txn = None;
                self.pin = None;
                for (_, b) in self.dedicated.drain() {
                    b.shutdown();
                }
                self.db = 0;
                self.resp3 = false;
                self.name = None;
                self.tenant = self.rx.topology().default_tenant();
                self.authed = self.tenant.password.is_none();
                self.admin = false;
                let tenant = self.tenant.name.clone();
                self.rx.shared.clients.lock().entry(self.id).and_modify(|c| {
                    c.name = None;
                    c.tenant = tenant;
                });
                self.ready(&b"+RESET\r\n"[..]);
            }
        }
    }

    /// TERRACE.TOPOLOGY GET | SET <json> | HOLD <ranges> | RELEASE [<ranges>]: the
    /// console's view of engines, slots and tenants (`Shared::topology_json`,
    /// `Shared::set_topology`) and the slots held while they move (`crate::hold`); only for
    /// the admin user.
    async fn topology_command(&mut self, argv: &[&[u8]]) {
        if self.rx.shared.config.admin_password.is_none() {
            return self.error("ERR admin commands are disabled (set the proxy's admin_password)");
        }
        if !self.admin {
            return self.error("NOPERM this command needs the admin user (AUTH admin <password>)");
        }
        match argv {
            [_, sub] if sub.eq_ignore_ascii_case(b"GET") => {
                let json = self.rx.shared.topology_json();
                self.reply_with(|w| w.bulk(json.as_bytes()))
            }
            [_, sub, doc] if sub.eq_ignore_ascii_case(b"SET") => match self.rx.shared.set_topology(doc) {
                Ok(digest) => self.reply_with(|w| w.bulk(digest.as_bytes())),
                Err(e) => self.error(&format!("ERR {}", e.replace(['\r', '\n'], " "))),
            },
            [_, sub, ranges @ ..] if sub.eq_ignore_ascii_case(b"HOLD") || sub.eq_ignore_ascii_case(b"RELEASE") => {
                let slots = ranges.iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect::<Vec<_>>().join(" ");
                let slots = match terrace_commands::slots::SlotSet::parse(&slots) {
                    Ok(s) => s,
                    Err(e) => return self.error(&format!("ERR {e}")),
                };
                let holds = &self.rx.shared.holds;
                if sub.eq_ignore_ascii_case(b"RELEASE") {
                    holds.release((!slots.is_empty()).then_some(&slots));
                    return self.ready(&b"+OK\r\n"[..]);
                }
                if slots.is_empty() {
                    return self.error("ERR TERRACE.TOPOLOGY HOLD needs slot ranges");
                }
                // This request's own ticket must not be waited for.
                self.owner.ticket.borrow_mut().take();
                match self.rx.shared.holds.hold(&slots, HOLD_WAIT).await {
                    Ok(()) => self.ready(&b"+OK\r\n"[..]),
                    Err(e) => self.error(&format!("ERR {e}")),
                }
            }
            _ => self.error("ERR syntax error (TERRACE.TOPOLOGY GET | SET <json> | HOLD <ranges> | RELEASE [<ranges>])"),
        }
    }

    /// AUTH and HELLO AUTH, under the proxy's limit on failed attempts per client address
    /// and user (as the console's login): after 5 in a minute, that user is refused from that
    /// address for the rest of the minute without its passwords being checked — other users
    /// of the address (tenants behind one NAT, a made-up name's failures) are not. The
    /// operator (`admin`, the console's link) is never locked out: whoever fails as admin
    /// would otherwise lock the console out of every proxy on its host; its password is the
    /// appliance's secret (`terrace up` makes 48 random hex digits) and each failure is
    /// logged. While the proxy waits for the console's first topology (`await_console`), a
    /// credential it cannot check yet is answered TRYAGAIN, not WRONGPASS, and not counted.
    async fn authenticate(&mut self, user: Option<&[u8]>, pass: &[u8]) -> Result<(), String> {
        let shared = self.rx.shared.clone();
        let limiter = &shared.auth_failures;
        let admin = user == Some(crate::tenants::ADMIN.as_bytes()) && shared.config.admin_password.is_some();
        let name = user.unwrap_or(b"default");
        let key = self.peer.filter(|_| !admin).map(|ip| (ip, name[..name.len().min(64)].to_vec()));
        if let Some(key) = &key {
            if let Err(wait) = limiter.check(key) {
                return Err(format!("ERR too many failed authentication attempts as this user from {}; try again in {wait} s", key.0));
            }
        }
        let outcome = self.check_credentials(user, pass).await;
        if outcome.is_err() && !admin && shared.holds.awaiting_console() {
            return Err("TRYAGAIN this proxy has not received its tenants from the console yet; try again".into());
        }
        match (outcome, key) {
            (Err(WRONGPASS), Some(key)) => {
                tracing::warn!(ip = %key.0, user = %String::from_utf8_lossy(&key.1), "failed AUTH");
                limiter.failed(key);
            }
            (Err(WRONGPASS), None) if admin => tracing::warn!(ip = ?self.peer, "failed AUTH as the operator (admin)"),
            (Ok(()), Some(key)) => limiter.succeeded(&key),
            _ => {}
        }
        outcome.map_err(str::to_string)
    }

    /// AUTH: `password` for the default tenant, `tenant password` for another (the
    /// connection moves into that tenant's keyspace).
    async fn check_credentials(&mut self, user: Option<&[u8]>, pass: &[u8]) -> Result<(), &'static str> {
        if user == Some(crate::tenants::ADMIN.as_bytes()) {
            if let Some(p) = &self.rx.shared.config.admin_password {
                if !terrace_commands::passwords::constant_time_eq(p.as_bytes(), pass) {
                    return Err(WRONGPASS);
                }
                self.admin = true;
                self.authed = true;
                return Ok(());
            }
        }
        let topo = self.rx.topology();
        let tenant = match user {
            None => {
                let default = topo.default_tenant();
                if default.password.is_none() {
                    return Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
                }
                default
            }
            Some(name) => topo.tenant(name).ok_or(WRONGPASS)?,
        };
        if !tenant.accepts(pass).await {
            return Err(WRONGPASS);
        }
        if !Arc::ptr_eq(&tenant, &self.tenant) {
            // Another keyspace: connections of the old tenant's namespace are no use now.
            self.txn = None;
            self.pin = None;
            for (_, b) in self.dedicated.drain() {
                b.shutdown();
            }
            self.rx.shared.clients.lock().entry(self.id).and_modify(|c| c.tenant = tenant.name.clone());
            self.tenant = tenant;
        }
        self.authed = true;
        Ok(())
    }

    async fn hello(&mut self, argv: &[&[u8]]) {
        let hello = match Hello::parse(argv) {
            Ok(h) => h,
            Err(e) => return self.error(&e.to_string()),
        };
        if let Some(a) = &hello.auth {
            if let Err(e) = self.authenticate(a.user, a.password).await {
                return self.error(&e);
            }
        }
        if !self.authed {
            return self.error(HELLO_NOAUTH);
        }
        if let Some(name) = hello.name {
            self.set_name(Some(name.into_bytes()));
        }
        let proto = hello.protocol.unwrap_or(if self.resp3 { 3 } else { 2 });
        self.resp3 = proto == 3;
        let id = self.id;
        self.reply_with(|w| write_hello(w, proto, id));
    }

    fn set_name(&mut self, name: Option<Vec<u8>>) {
        self.rx.shared.clients.lock().entry(self.id).and_modify(|c| c.name = name.clone());
        self.name = name;
    }

    fn client_line(&self, id: u64, addr: &str, name: &Option<Vec<u8>>) -> String {
        let name = name.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        format!("id={id} addr={addr} name={name} db={} resp={}\n", self.db, if self.resp3 { 3 } else { 2 })
    }

    fn client(&mut self, argv: &[&[u8]]) {
        let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
        match (sub.as_str(), argv.len()) {
            ("id", 2) => {
                let id = self.id as i64;
                self.reply_with(|w| w.int(id))
            }
            ("getname", 2) => {
                let name = self.name.clone();
                self.reply_with(|w| match &name {
                    Some(n) => w.bulk(n),
                    None => w.null(),
                })
            }
            ("setname", 3) => {
                if let Err(e) = client_name(argv[2]) {
                    return self.error(&e.to_string());
                }
                self.set_name(if argv[2].is_empty() { None } else { Some(argv[2].to_vec()) });
                self.ready(&b"+OK\r\n"[..]);
            }
            ("setinfo", 4) => self.ready(&b"+OK\r\n"[..]),
            ("info", 2) => {
                let addr = self.rx.shared.clients.lock().get(&self.id).map(|c| c.addr.clone()).unwrap_or_default();
                let line = self.client_line(self.id, &addr, &self.name);
                self.reply_with(|w| w.verbatim(&line))
            }
            ("list", 2) => {
                // A tenant's clients see their own tenant's; the admin user sees all.
                let clients: Vec<(u64, String, Option<Vec<u8>>)> = self
                    .rx
                    .shared
                    .clients
                    .lock()
                    .iter()
                    .filter(|(_, c)| self.admin || c.tenant == self.tenant.name)
                    .map(|(id, c)| (*id, c.addr.clone(), c.name.clone()))
                    .collect();
                let mut text = String::new();
                for (id, addr, name) in &clients {
                    text += &self.client_line(*id, addr, name);
                }
                self.reply_with(|w| w.verbatim(&text))
            }
            ("help", 2) => self.reply_with(|w| {
                w.help(&[
                    "CLIENT <subcommand> [<arg> ...]. Subcommands through the Terrace proxy are:",
                    "GETNAME",
                    "    Return the name of the current connection.",
                    "ID",
                    "    Return the ID of the current connection.",
                    "INFO",
                    "    Return information about the current client connection.",
                    "LIST",
                    "    Return information about the proxy's client connections.",
                    "SETNAME <name>",
                    "    Assign the name <name> to the current connection.",
                ])
            }),
            _ => self.error(&format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.", String::from_utf8_lossy(argv[1]))),
        }
    }
}
