//! Connections from the proxy to engines.
//!
//! A `Backend` is one TCP connection to one engine, owned by one reactor thread. Requests of
//! many clients are appended to its output buffer and written together (one write per
//! event-loop turn, not one per request); replies come back in order and fill the waiting
//! clients' `Slot`s. Shared backends are pooled per (engine, database, protocol) and reconnect
//! with backoff; dedicated ones belong to one client (transactions, blocking commands,
//! pub/sub) and die with it.
//!
//! Failure is quick: while an engine is down, requests to it are answered with an error at
//! once; a request unanswered after `timeout` fails every request in flight on that
//! connection (their replies could no longer be matched) and the connection is replaced.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::resp::{self, FrameScanner};

/// How every backend link is made and bounded (shared by a reactor's backends).
#[derive(Debug, Clone)]
pub struct LinkSettings {
    pub connect_timeout: Duration,
    /// How long a request may wait for its reply.
    pub timeout: Duration,
    /// Requests in flight per connection before senders wait.
    pub max_inflight: usize,
    /// The links over TLS (`tls_engines`), else plain TCP.
    pub tls: Option<terrace_tls::LinkTls>,
}

/// Where a backend connects and how its connection is set up.
#[derive(Debug, Clone)]
pub struct BackendSpec {
    pub engine: usize,
    pub addr: String,
    /// This engine's password (`engine_key_file`, `engine_password_file`), sent first on
    /// every connection.
    pub password: Option<std::sync::Arc<str>>,
    /// The tenant's engine namespace (None: the default one).
    pub namespace: Option<std::sync::Arc<str>>,
    /// The namespace's data limit on this engine (0: none).
    pub ns_maxmemory: u64,
    /// The namespace's compression options (`TERRACE.NAMESPACE` arguments).
    pub ns_options: Vec<(&'static str, String)>,
    pub db: u32,
    pub resp3: bool,
    /// Requests sent first on every (re)connection, their replies swallowed: the tenant's
    /// namespace, HELLO 3, SELECT.
    pub dedicated: bool,
    /// Set while connected (the shared connections report engine health for /metrics).
    pub up_flag: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Set once the tenant is deleted: the connection is not made again.
    pub tenant_gone: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// The client replies are for: woken when one arrives, and keeping count of the reply
/// bytes it holds and has not written yet (its output buffer, which the front end bounds).
#[derive(Default)]
pub struct Owner {
    pub notify: Notify,
    held: Cell<usize>,
    /// The request being handled now: its ticket is kept by each reply it waits for, until
    /// the reply arrives (`crate::hold`).
    pub ticket: crate::hold::Current,
    /// Every client's held bytes together (`Shared::client_bytes`), for a client's owner.
    total: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
}

impl Owner {
    /// A client's owner, its held bytes counted in `total` too.
    pub fn counted(total: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> Owner {
        Owner { total: Some(total), ..Owner::default() }
    }

    /// Reply bytes that arrived for this client and are not yet taken.
    pub fn held(&self) -> usize {
        self.held.get()
    }

    fn hold(&self, n: usize) {
        self.held.set(self.held.get() + n);
        if let Some(t) = &self.total {
            t.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn release(&self, n: usize) {
        let n = n.min(self.held.get());
        self.held.set(self.held.get() - n);
        if let Some(t) = &self.total {
            t.fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// One reply to wait for.
pub struct Slot {
    reply: RefCell<Option<Bytes>>,
    owner: Rc<Owner>,
    sent_at: Instant,
    /// Blocking commands: no timeout.
    patient: bool,
    /// Counts the request as in flight until its reply arrives (blocking commands have
    /// none: a hold does not wait for them).
    ticket: RefCell<Option<Rc<crate::hold::Ticket>>>,
}

impl Slot {
    pub fn ready(reply: Bytes, owner: &Rc<Owner>) -> Rc<Slot> {
        owner.hold(reply.len());
        Rc::new(Slot { reply: RefCell::new(Some(reply)), owner: owner.clone(), sent_at: Instant::now(), patient: false, ticket: RefCell::new(None) })
    }

    pub fn is_ready(&self) -> bool {
        self.reply.borrow().is_some()
    }

    pub fn take(&self) -> Option<Bytes> {
        let reply = self.reply.borrow_mut().take();
        if let Some(r) = &reply {
            self.owner.release(r.len());
        }
        reply
    }

    fn fill(&self, reply: Bytes) {
        self.ticket.borrow_mut().take();
        self.owner.hold(reply.len());
        *self.reply.borrow_mut() = Some(reply);
        self.owner.notify.notify_one();
    }
}

impl Drop for Slot {
    /// A reply never taken (its client left) is no longer held.
    fn drop(&mut self) {
        if let Some(r) = self.reply.get_mut() {
            self.owner.release(r.len());
        }
    }
}

#[derive(Debug, Clone)]
enum Health {
    Connecting,
    Up,
    Down(String),
}

struct State {
    out: BytesMut,
    inflight: VecDeque<Rc<Slot>>,
    /// How many of `inflight`'s last requests are still wholly in `out`: never handed to
    /// the socket, so certainly not run. The others may have run.
    unsent: usize,
    health: Health,
    /// Frames no request waits for (pub/sub messages on a relayed connection).
    unsolicited: VecDeque<Bytes>,
}

pub struct Backend {
    pub spec: BackendSpec,
    links: Rc<LinkSettings>,
    state: RefCell<State>,
    /// Wakes the writer.
    wake: Notify,
    /// Wakes senders waiting for room under `max_inflight`.
    pub space: Notify,
    /// Told about unsolicited frames (relay mode).
    relay_owner: RefCell<Option<Rc<Owner>>>,
    stop: Notify,
    stopped: Cell<bool>,
}

/// The connection has `max_inflight` requests outstanding; wait on `Backend::space`.
#[derive(Debug)]
pub struct Full;

impl Backend {
    /// Creates the backend and starts its connection task on the current `LocalSet`.
    pub fn start(spec: BackendSpec, links: Rc<LinkSettings>) -> Rc<Backend> {
        let b = Rc::new(Backend {
            spec,
            links,
            state: RefCell::new(State {
                out: BytesMut::with_capacity(16 * 1024),
                inflight: VecDeque::new(),
                unsent: 0,
                health: Health::Connecting,
                unsolicited: VecDeque::new(),
            }),
            wake: Notify::new(),
            space: Notify::new(),
            relay_owner: RefCell::new(None),
            stop: Notify::new(),
            stopped: Cell::new(false),
        });
        tokio::task::spawn_local(run(b.clone()));
        b
    }

    /// Queues one request (complete RESP bytes); its reply will fill the returned slot.
    pub fn send(&self, request: &[u8], owner: &Rc<Owner>, patient: bool) -> Result<Rc<Slot>, Full> {
        let mut st = self.state.borrow_mut();
        if let Health::Down(why) = &st.health {
            return Ok(Slot::ready(self.error_reply(why), owner));
        }
        if st.inflight.len() >= self.links.max_inflight {
            return Err(Full);
        }
        let ticket = if patient { None } else { owner.ticket.borrow().clone() };
        let slot = Rc::new(Slot { reply: RefCell::new(None), owner: owner.clone(), sent_at: Instant::now(), patient, ticket: RefCell::new(ticket) });
        st.out.extend_from_slice(request);
        st.inflight.push_back(slot.clone());
        st.unsent += 1;
        drop(st);
        self.wake.notify_one();
        Ok(slot)
    }

    /// Relay mode (pub/sub, MONITOR): every frame from now on is unsolicited and goes to
    /// `owner`; requests are sent with `send_relayed`.
    pub fn relay_to(&self, owner: &Rc<Owner>) {
        *self.relay_owner.borrow_mut() = Some(owner.clone());
    }

    pub fn send_relayed(&self, request: &[u8]) -> Result<(), String> {
        let mut st = self.state.borrow_mut();
        if let Health::Down(why) = &st.health {
            return Err(why.clone());
        }
        st.out.extend_from_slice(request);
        drop(st);
        self.wake.notify_one();
        Ok(())
    }

    pub fn next_unsolicited(&self) -> Option<Bytes> {
        let frame = self.state.borrow_mut().unsolicited.pop_front();
        if let (Some(f), Some(owner)) = (&frame, self.relay_owner.borrow().as_ref()) {
            owner.release(f.len());
        }
        frame
    }

    /// A dedicated connection that failed stays down; its owner replaces it.
    pub fn is_dead(&self) -> bool {
        matches!(self.state.borrow().health, Health::Down(_))
    }

    pub fn is_up(&self) -> bool {
        matches!(self.state.borrow().health, Health::Up)
    }

    /// Closes the connection and ends its task.
    pub fn shutdown(&self) {
        self.stopped.set(true);
        self.stop.notify_one();
    }

    /// `-TRYAGAIN`, the error Redis clients retry (a failover may be replacing the engine),
    /// for a request that was never sent: it certainly did not run.
    fn error_reply(&self, why: &str) -> Bytes {
        Bytes::from(format!("-TRYAGAIN engine {} unavailable: {why}\r\n", self.spec.addr))
    }

    /// The error for a request that was sent and got no reply: it may have run (an engine
    /// that timed out may still be running it; one that died may have applied it), so not
    /// TRYAGAIN, which promises it did not — a client retrying on it would apply it twice.
    /// (twemproxy answers such requests with `-ERR` too.)
    fn uncertain_reply(&self, why: &str) -> Bytes {
        Bytes::from(format!("-ERR engine {} unavailable after the request was sent ({why}): it may or may not have run\r\n", self.spec.addr))
    }

    fn set_up(&self, up: bool) {
        if let Some(f) = &self.spec.up_flag {
            f.store(up, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn fail_all(&self, why: &str) {
        self.set_up(false);
        let (never_sent, maybe_run) = (self.error_reply(why), self.uncertain_reply(why));
        let mut st = self.state.borrow_mut();
        st.out.clear();
        st.health = Health::Down(why.to_string());
        let sent = st.inflight.len() - st.unsent.min(st.inflight.len());
        st.unsent = 0;
        let failed: Vec<Rc<Slot>> = st.inflight.drain(..).collect();
        drop(st);
        for (i, slot) in failed.into_iter().enumerate() {
            slot.fill(if i < sent { maybe_run.clone() } else { never_sent.clone() });
        }
        self.space.notify_waiters();
        if let Some(owner) = self.relay_owner.borrow().as_ref() {
            owner.notify.notify_one();
        }
    }

    fn deliver(&self, frame: Bytes) {
        let mut st = self.state.borrow_mut();
        if let Some(owner) = self.relay_owner.borrow().as_ref() {
            owner.hold(frame.len());
            st.unsolicited.push_back(frame);
            drop(st);
            owner.notify.notify_one();
            return;
        }
        match st.inflight.pop_front() {
            Some(slot) => {
                let was_full = st.inflight.len() + 1 >= self.links.max_inflight;
                drop(st);
                slot.fill(frame);
                if was_full {
                    self.space.notify_waiters();
                }
            }
            None => tracing::warn!(engine = %self.spec.addr, "dropping a reply no request waits for"),
        }
    }

    fn prologue(&self) -> (BytesMut, usize) {
        let mut out = BytesMut::new();
        let mut n = 0;
        if let Some(password) = &self.spec.password {
            resp::encode_request(&mut out, &["AUTH", password]);
            n += 1;
        }
        if let Some(ns) = &self.spec.namespace {
            let limit = self.spec.ns_maxmemory.to_string();
            let mut args: Vec<&[u8]> = vec![b"TERRACE.NAMESPACE", ns.as_bytes(), b"MAXMEMORY", limit.as_bytes()];
            for (k, v) in &self.spec.ns_options {
                args.push(k.as_bytes());
                args.push(v.as_bytes());
            }
            resp::encode_request(&mut out, &args);
            n += 1;
        } else if self.spec.ns_maxmemory > 0 {
            // The default tenant's quota (`default_max_memory`).
            let limit = self.spec.ns_maxmemory.to_string();
            resp::encode_request(&mut out, &["TERRACE.NAMESPACE", crate::tenants::DEFAULT, "MAXMEMORY", &limit]);
            n += 1;
        }
        if self.spec.resp3 {
            resp::encode_request(&mut out, &["HELLO", "3"]);
            n += 1;
        }
        if self.spec.db != 0 {
            resp::encode_request(&mut out, &["SELECT".to_string(), self.spec.db.to_string()]);
            n += 1;
        }
        (out, n)
    }

    /// Requests in flight past the timeout (blocking commands excepted)?
    fn overdue(&self) -> bool {
        let st = self.state.borrow();
        st.inflight.iter().find(|s| !s.patient).is_some_and(|s| s.sent_at.elapsed() > self.links.timeout)
    }
}

/// The replies of every part of a split or fanned-out request, once all have arrived.
pub fn take_all(parts: &[Rc<Slot>]) -> Option<Vec<Bytes>> {
    parts.iter().all(|p| p.is_ready()).then(|| parts.iter().map(|p| p.take().expect("ready")).collect())
}

/// Sends on `b`, waiting while it has `max_inflight` requests outstanding.
pub async fn send(b: &Rc<Backend>, req: &[u8], owner: &Rc<Owner>, patient: bool) -> Rc<Slot> {
    loop {
        let room = b.space.notified();
        tokio::pin!(room);
        room.as_mut().enable();
        match b.send(req, owner, patient) {
            Ok(slot) => return slot,
            Err(Full) => room.await,
        }
    }
}

async fn run(b: Rc<Backend>) {
    let mut backoff = Duration::from_millis(25);
    loop {
        if b.stopped.get() {
            return;
        }
        if b.spec.tenant_gone.as_ref().is_some_and(|g| g.load(std::sync::atomic::Ordering::SeqCst)) {
            b.fail_all("the tenant was deleted");
            return;
        }
        let connect = tokio::time::timeout(b.links.connect_timeout, connect(&b.spec.addr, b.links.tls.as_ref()));
        let outcome = tokio::select! {
            r = connect => r,
            _ = b.stop.notified() => return,
        };
        let why = match outcome {
            Ok(Ok(link)) => {
                b.state.borrow_mut().health = Health::Up;
                b.set_up(true);
                backoff = Duration::from_millis(25);
                tracing::debug!(engine = %b.spec.addr, "backend connected");
                match link {
                    EngineLink::Tcp(mut stream) => {
                        let (rd, wr) = stream.split();
                        serve(&b, rd, wr).await
                    }
                    EngineLink::Tls(session) => {
                        let (rd, wr) = tokio::io::split(*session);
                        serve(&b, rd, wr).await
                    }
                }
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("connect timed out after {} ms", b.links.connect_timeout.as_millis()),
        };
        if b.stopped.get() {
            // Closed by the proxy (its engine left the slot map, its client went): whatever
            // still waits for a reply is answered, never left waiting.
            b.fail_all("the link was closed: its engine left the slot map");
            return;
        }
        tracing::warn!(engine = %b.spec.addr, reason = %why, "backend connection lost");
        b.fail_all(&why);
        if b.spec.dedicated {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = b.stop.notified() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// A connection to an engine: TCP, or TLS over it (`tls_engines`).
enum EngineLink {
    Tcp(TcpStream),
    Tls(Box<terrace_tls::ClientTlsStream<TcpStream>>),
}

async fn connect(addr: &str, tls: Option<&terrace_tls::LinkTls>) -> std::io::Result<EngineLink> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    Ok(match tls {
        None => EngineLink::Tcp(stream),
        Some(tls) => EngineLink::Tls(Box::new(tls.connect(stream, terrace_tls::host_of(addr)).await?)),
    })
}

/// Runs one connection until it fails; returns why.
async fn serve(b: &Rc<Backend>, mut rd: impl AsyncRead + Unpin, mut wr: impl AsyncWrite + Unpin) -> String {
    let (prologue, swallow) = b.prologue();
    let writer = async {
        let mut taken = prologue;
        loop {
            if taken.is_empty() {
                let mut st = b.state.borrow_mut();
                std::mem::swap(&mut taken, &mut st.out);
                // From here on they may reach the engine.
                st.unsent = 0;
            }
            if taken.is_empty() {
                b.wake.notified().await;
                continue;
            }
            // (A TLS writer may keep the last record until flushed.)
            if let Err(e) = async {
                wr.write_all(&taken).await?;
                wr.flush().await
            }
            .await
            {
                return e.to_string();
            }
            taken.clear();
        }
    };
    let reader = async {
        let mut swallow = swallow;
        let mut inbuf = BytesMut::with_capacity(16 * 1024);
        let mut scanner = FrameScanner::default();
        loop {
            if inbuf.capacity() - inbuf.len() < 4096 {
                inbuf.reserve(16 * 1024);
            }
            match rd.read_buf(&mut inbuf).await {
                Ok(0) => return "connection closed by the engine".to_string(),
                Err(e) => return e.to_string(),
                Ok(_) => {}
            }
            loop {
                match scanner.scan(&inbuf) {
                    Ok(Some(n)) => {
                        let frame = inbuf.split_to(n).freeze();
                        if swallow > 0 {
                            swallow -= 1;
                            if resp::is_error(&frame) {
                                return format!("connection setup refused: {}", String::from_utf8_lossy(&frame).trim_end());
                            }
                        } else {
                            b.deliver(frame);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return format!("bad reply from the engine: {e}"),
                }
            }
        }
    };
    let watchdog = async {
        let tick = (b.links.timeout / 4).max(Duration::from_millis(5));
        loop {
            tokio::time::sleep(tick).await;
            if b.overdue() {
                return format!("no reply within {} ms", b.links.timeout.as_millis());
            }
        }
    };
    tokio::select! {
        why = writer => why,
        why = reader => why,
        why = watchdog => why,
        _ = b.stop.notified() => "closed".to_string(),
    }
}
