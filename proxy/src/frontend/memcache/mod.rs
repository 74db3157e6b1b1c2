//! One Memcached client of the proxy (text and meta protocol): each request is translated to
//! the engines' `MC.*` commands (Memcached semantics kept engine-side: flags, CAS uniques,
//! exptime rules), routed by key slot like Redis commands, and the replies are turned back
//! into Memcached's lines in request order. `noreply` requests are sent all the same; their
//! replies are dropped.

pub mod binary;
mod binary_front;
pub mod parse;

use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use super::connection::{self, ClientStream, Frontend, Handled, Replies, State};
use super::Reactor;
use crate::backend::{send, take_all, Owner, Slot};
use crate::resp;
use crate::tenants::Tenant;
use parse::{Command, Meta, Parsed};

/// The version reported to clients: the Memcached release whose protocol is implemented.
pub const MEMCACHED_VERSION: &str = "1.6.18";

/// How an engine reply becomes Memcached lines.
enum Fmt {
    Store,
    Arith,
    /// DELETED, NOT_FOUND, EXISTS, TOUCHED: the status line as it is.
    Status,
    /// Every part answered +OK (flush_all).
    Ok,
    Meta(MetaReply),
}

/// A meta command's reply shape: which flags to return, quiet mode, the key as given.
struct MetaReply {
    cmd: u8,
    key: Vec<u8>,
    flags: Vec<u8>,
    opaque: Vec<u8>,
    quiet: bool,
}

impl MetaReply {
    fn new(cmd: u8, meta: &Meta<'_>) -> MetaReply {
        MetaReply { cmd, key: meta.key.given.to_vec(), flags: meta.flags.clone(), opaque: meta.opaque.to_vec(), quiet: meta.quiet }
    }

    fn has(&self, f: u8) -> bool {
        self.flags.contains(&f)
    }
}

enum Pending {
    Ready(Bytes),
    Reply(Vec<Rc<Slot>>, Fmt),
    /// get/gets/gat/gats over one or more engines: (keys, (part, index) per key, with CAS).
    Get(Vec<Rc<Slot>>, Vec<Vec<u8>>, Vec<(u16, u32)>, bool),
    /// noreply.
    Hidden(Vec<Rc<Slot>>),
    /// A binary protocol request's reply.
    Binary(Vec<Rc<Slot>>, BinReply),
}

/// How an engine reply becomes a binary response packet.
struct BinReply {
    opcode: u8,
    opaque: u32,
    quiet: bool,
    key: Vec<u8>,
    kind: BinKind,
}

enum BinKind {
    /// GET/GETK/GAT/GATK (with the value) and TOUCH (flags and CAS only).
    Get {
        with_key: bool,
        with_value: bool,
    },
    Store(binary::StoreMode),
    Delete,
    Arith,
    /// FLUSH: every engine answered +OK.
    Flush,
}

struct Client {
    rx: Rc<Reactor>,
    /// The tenant whose Memcached port the client connected to.
    tenant: Arc<Tenant>,
    owner: Rc<Owner>,
    replies: Replies<Pending>,
    /// Bytes still to discard (the data block of an item refused as too large).
    swallow: usize,
    closing: bool,
    /// Whether the connection speaks the binary protocol (its first byte decides).
    binary: Option<bool>,
}

pub async fn serve<S: ClientStream>(rx: Rc<Reactor>, stream: S, id: u64, tenant: Arc<Tenant>) {
    let owner = Rc::new(Owner::counted(rx.shared.client_bytes.clone()));
    let client = Client { owner, rx, tenant, replies: Replies::default(), swallow: 0, closing: false, binary: None };
    connection::serve(client, stream, id).await
}

impl Frontend for Client {
    type Pending = Pending;
    const PROTOCOL: &'static str = "memcache";

    async fn request(&mut self, input: &[u8]) -> Option<Handled> {
        // Counted in flight until its replies arrive (`crate::hold`).
        *self.owner.ticket.borrow_mut() = Some(self.rx.enter());
        let handled = self.request_counted(input).await;
        self.owner.ticket.borrow_mut().take();
        handled
    }

    fn compose(&mut self, entry: &mut Pending, out: &mut BytesMut) -> bool {
        let parts = match entry {
            Pending::Ready(b) => {
                out.extend_from_slice(b);
                return true;
            }
            Pending::Reply(p, _) | Pending::Get(p, ..) | Pending::Hidden(p) | Pending::Binary(p, _) => p,
        };
        let Some(replies) = take_all(parts) else { return false };
        match entry {
            Pending::Reply(_, fmt) => self.format(fmt, &replies, out),
            Pending::Get(_, keys, positions, cas) => self.format_get(keys, positions, *cas, &replies, out),
            Pending::Binary(_, reply) => self.format_binary(reply, &replies, out),
            _ => {}
        }
        true
    }

    fn is_error(reply: &[u8]) -> bool {
        reply.starts_with(b"CLIENT_ERROR") || reply.starts_with(b"SERVER_ERROR") || reply.starts_with(b"ERROR")
    }

    fn replies(&mut self) -> &mut Replies<Pending> {
        &mut self.replies
    }

    fn state(&self) -> State {
        if self.closing {
            State::Closing
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
}

fn bulk_args(args: &[&[u8]]) -> BytesMut {
    let mut req = BytesMut::new();
    resp::encode_request(&mut req, args);
    req
}

/// An engine error as a Memcached line.
fn error_line(frame: &[u8]) -> String {
    let text = String::from_utf8_lossy(resp::error_text(frame).unwrap_or(b"unexpected reply"));
    if text.starts_with("CLIENT_ERROR") || text.starts_with("SERVER_ERROR") {
        format!("{text}\r\n")
    } else if text.starts_with("OOM") {
        "SERVER_ERROR out of memory storing object\r\n".to_string()
    } else {
        let text = text.strip_prefix("ERR ").or_else(|| text.strip_prefix("TRYAGAIN ")).unwrap_or(&text);
        format!("SERVER_ERROR {text}\r\n")
    }
}

/// An item from an `MC.GET` reply: (value, flags, cas, ttl ms or -1).
fn item(frame: &[u8]) -> Option<(&[u8], i64, i64, i64)> {
    let e = resp::elements(frame)?;
    if e.len() != 4 {
        return None;
    }
    Some((resp::bulk(e[0])?, resp::integer(e[1])?, resp::integer(e[2])?, resp::integer(e[3])?))
}

fn ttl_secs(ttl_ms: i64) -> i64 {
    if ttl_ms < 0 {
        -1
    } else {
        (ttl_ms + 999) / 1000
    }
}

impl Client {
    async fn request_counted(&mut self, input: &[u8]) -> Option<Handled> {
        if self.swallow > 0 {
            if input.is_empty() {
                return None;
            }
            let consumed = self.swallow.min(input.len());
            self.swallow -= consumed;
            return Some(Handled { consumed, command: None });
        }
        if self.binary.is_none() {
            self.binary = Some(*input.first()? == binary::REQUEST_MAGIC);
        }
        if self.binary == Some(true) {
            return self.binary_request(input).await;
        }
        match parse::parse(input, self.rx.shared.config.item_size_max) {
            Err(parse::LineTooLong) => {
                self.ready("CLIENT_ERROR line too long\r\n");
                self.closing = true;
                Some(Handled { consumed: 0, command: None })
            }
            Ok(None) => None,
            Ok(Some(Parsed { consumed, command, swallow })) => {
                self.swallow = swallow;
                let command = match command {
                    Ok(cmd) => {
                        let name = cmd.name();
                        self.handle(cmd).await;
                        Some(name)
                    }
                    Err(parse::SILENT) => None,
                    Err(line) => {
                        self.ready(format!("{line}\r\n"));
                        None
                    }
                };
                Some(Handled { consumed, command })
            }
        }
    }

    fn push(&mut self, p: Pending) {
        self.replies.push(p);
    }

    fn ready(&mut self, line: impl Into<Bytes>) {
        self.push(Pending::Ready(line.into()));
    }

    async fn send_for_key(&mut self, key: &[u8], args: &[&[u8]]) -> Rc<Slot> {
        if let Err(why) = self.rx.wait_for_slots(&self.owner, |f| f(crate::slots::key_slot(key))).await {
            // As an engine's refusal: the reply's translation makes it a SERVER_ERROR.
            return Slot::ready(Bytes::from(format!("-{why}\r\n")), &self.owner);
        }
        let e = self.rx.topology().slot_map.engine_of_key(key);
        let b = self.rx.backend(e, &self.tenant.namespace, 0, false);
        send(&b, &bulk_args(args), &self.owner, false).await
    }

    async fn handle(&mut self, cmd: Command<'_>) {
        if !self.tenant.admit() {
            let msg = format!("SERVER_ERROR {}\r\n", self.tenant.over_limit_message());
            return self.ready(msg);
        }
        if let Some(cache) = &self.rx.shared.near_cache {
            match &cmd {
                Command::Store { key, .. }
                | Command::Arith { key, .. }
                | Command::Delete { key, .. }
                | Command::Touch { key, .. }
                | Command::TooLarge { unlink: Some(key), .. } => cache.invalidate(self.tenant.cache_id * 16, key),
                Command::MetaSet { meta, .. } | Command::MetaDelete { meta, .. } | Command::MetaArith { meta, .. } => {
                    cache.invalidate(self.tenant.cache_id * 16, &meta.key.raw)
                }
                Command::FlushAll { .. } => cache.clear(),
                Command::Get { touch: Some(_), .. } => cache.clear(),
                _ => {}
            }
        }
        let stats = &self.rx.shared.stats;
        match cmd {
            Command::Get { keys, cas, touch } => {
                stats.mc_get.fetch_add(keys.len() as u64, Ordering::Relaxed);
                if let Err(why) = self.rx.wait_for_slots(&self.owner, |f| keys.iter().for_each(|k| f(crate::slots::key_slot(k)))).await {
                    return self.ready(format!("SERVER_ERROR {why}\r\n"));
                }
                let map = &self.rx.topology().slot_map;
                let t = touch.map(|t| t.to_string());
                let head: Vec<&[u8]> = match &t {
                    Some(t) => vec![b"MC.GAT", t.as_bytes()],
                    None => vec![b"MC.GET"],
                };
                let plan = crate::route::group_by_engine(&head, &keys, 1, map);
                let mut parts = Vec::with_capacity(plan.parts.len());
                for (e, args) in &plan.parts {
                    let b = self.rx.backend(*e, &self.tenant.namespace, 0, false);
                    parts.push(send(&b, &bulk_args(args), &self.owner, false).await);
                }
                let positions = plan.positions;
                let keys = keys.iter().map(|k| k.to_vec()).collect();
                self.push(Pending::Get(parts, keys, positions, cas));
            }
            Command::Store { mode, key, flags, exptime, data, cas, noreply } => {
                stats.mc_set.fetch_add(1, Ordering::Relaxed);
                let (f, t, c) = (flags.to_string(), exptime.to_string(), cas.to_string());
                let slot = self.send_for_key(key, &[b"MC.STORE", mode.name().as_bytes(), key, data, f.as_bytes(), t.as_bytes(), c.as_bytes()]).await;
                self.reply(vec![slot], Fmt::Store, noreply);
            }
            Command::Arith { key, incr, delta, noreply } => {
                let d = delta.to_string();
                let mode: &[u8] = if incr { b"incr" } else { b"decr" };
                let slot = self.send_for_key(key, &[b"MC.ARITH", key, mode, d.as_bytes(), b"0", b"0", b"0", b"0"]).await;
                self.reply(vec![slot], Fmt::Arith, noreply);
            }
            Command::Delete { key, noreply } => {
                let slot = self.send_for_key(key, &[b"MC.DELETE", key, b"0"]).await;
                self.reply(vec![slot], Fmt::Status, noreply);
            }
            Command::Touch { key, exptime, noreply } => {
                let t = exptime.to_string();
                let slot = self.send_for_key(key, &[b"MC.TOUCH", key, t.as_bytes()]).await;
                self.reply(vec![slot], Fmt::Status, noreply);
            }
            Command::FlushAll { delay, noreply } => {
                if delay > 0 {
                    // Memcached invalidates at that time; the flush is sent then.
                    let (rx, ns) = (self.rx.clone(), self.tenant.namespace.clone());
                    tokio::task::spawn_local(async move {
                        tokio::time::sleep(std::time::Duration::from_secs(delay as u64)).await;
                        let owner: Rc<Owner> = Rc::default();
                        for e in 0..rx.engines() {
                            let _ = send(&rx.backend(e, &ns, 0, false), &bulk_args(&[b"FLUSHDB"]), &owner, false).await;
                        }
                    });
                    if !noreply {
                        self.ready("OK\r\n");
                    }
                } else {
                    let mut parts = Vec::new();
                    for e in 0..self.rx.engines() {
                        let b = self.rx.backend(e, &self.tenant.namespace, 0, false);
                        parts.push(send(&b, &bulk_args(&[b"FLUSHDB"]), &self.owner, false).await);
                    }
                    self.reply(parts, Fmt::Ok, noreply);
                }
            }
            Command::Version => self.ready(format!("VERSION {MEMCACHED_VERSION}\r\n")),
            Command::Verbosity { noreply } => {
                if !noreply {
                    self.ready("OK\r\n");
                }
            }
            Command::Stats { args } => match args.first().map(|a| &a[..]) {
                None => {
                    let text = self.stats();
                    self.ready(text)
                }
                Some(b"reset") => self.ready("RESET\r\n"),
                // Slab and item internals: Terrace has no slab classes to list.
                Some(b"settings" | b"items" | b"slabs" | b"sizes" | b"conns" | b"cachedump") => self.ready("END\r\n"),
                Some(_) => self.ready("ERROR\r\n"),
            },
            Command::CacheMemlimit { megabytes, noreply } => {
                // The port is a tenant's and the engines' memory every tenant's: the limit is
                // the tenant's own, which lowers the quota its operator set and never raises
                // it (the engines' OWN-MAXMEMORY), shared out evenly between the engines (at
                // most 10^9 MiB, checked by the parser: no overflow in u64).
                let bytes = u64::from(megabytes) << 20;
                let per_engine = (bytes / self.rx.engines().max(1) as u64).to_string();
                let namespace = self.tenant.namespace.as_deref().unwrap_or(crate::tenants::DEFAULT).to_string();
                let mut parts = Vec::new();
                for e in 0..self.rx.engines() {
                    let b = self.rx.backend(e, &self.tenant.namespace, 0, false);
                    let req = bulk_args(&[b"TERRACE.NAMESPACE", namespace.as_bytes(), b"OWN-MAXMEMORY", per_engine.as_bytes()]);
                    parts.push(send(&b, &req, &self.owner, false).await);
                }
                self.reply(parts, Fmt::Ok, noreply);
            }
            Command::Quit | Command::HangUp => self.closing = true,
            Command::Shutdown => self.ready("ERROR: shutdown not enabled\r\n"),
            Command::TooLarge { unlink, noreply } => {
                if let Some(key) = unlink {
                    // No stale value stays readable after a set that was refused.
                    let slot = self.send_for_key(key, &[b"MC.DELETE", key, b"0"]).await;
                    self.push(Pending::Hidden(vec![slot]));
                }
                if !noreply {
                    self.ready(format!("{}\r\n", parse::TOO_LARGE));
                }
            }
            Command::MetaNoop => self.ready("MN\r\n"),
            Command::MetaGet { meta, touch } => {
                stats.mc_get.fetch_add(1, Ordering::Relaxed);
                let key = &meta.key.raw;
                let slot = match touch {
                    Some(t) => self.send_for_key(key, &[b"MC.GAT", t.to_string().as_bytes(), key]).await,
                    None => self.send_for_key(key, &[b"MC.GET", key]).await,
                };
                self.push(Pending::Reply(vec![slot], Fmt::Meta(MetaReply::new(b'g', &meta))));
            }
            Command::MetaDebug { meta } => {
                stats.mc_get.fetch_add(1, Ordering::Relaxed);
                let slot = self.send_for_key(&meta.key.raw, &[b"MC.GET", &meta.key.raw]).await;
                self.push(Pending::Reply(vec![slot], Fmt::Meta(MetaReply::new(b'e', &meta))));
            }
            Command::MetaSet { meta, data, mode, client_flags, exptime, cas } => {
                stats.mc_set.fetch_add(1, Ordering::Relaxed);
                let (f, t, c) = (client_flags.to_string(), exptime.to_string(), cas.to_string());
                let key = &meta.key.raw;
                let slot = self.send_for_key(key, &[b"MC.STORE", mode.name().as_bytes(), key, data, f.as_bytes(), t.as_bytes(), c.as_bytes()]).await;
                self.push(Pending::Reply(vec![slot], Fmt::Meta(MetaReply::new(b's', &meta))));
            }
            Command::MetaDelete { meta, cas } => {
                let c = cas.to_string();
                let slot = self.send_for_key(&meta.key.raw, &[b"MC.DELETE", &meta.key.raw, c.as_bytes()]).await;
                self.push(Pending::Reply(vec![slot], Fmt::Meta(MetaReply::new(b'd', &meta))));
            }
            Command::MetaArith { meta, incr, delta, cas, autovivify, initial } => {
                let mode: &[u8] = if incr { b"incr" } else { b"decr" };
                let vivify: &[u8] = if autovivify.is_some() { b"1" } else { b"0" };
                let (d, c, j, n) = (delta.to_string(), cas.to_string(), initial.to_string(), autovivify.unwrap_or(0).to_string());
                let key = &meta.key.raw;
                let slot = self.send_for_key(key, &[b"MC.ARITH", key, mode, d.as_bytes(), c.as_bytes(), vivify, j.as_bytes(), n.as_bytes()]).await;
                self.push(Pending::Reply(vec![slot], Fmt::Meta(MetaReply::new(b'a', &meta))));
            }
        }
    }

    fn reply(&mut self, parts: Vec<Rc<Slot>>, fmt: Fmt, noreply: bool) {
        self.push(if noreply { Pending::Hidden(parts) } else { Pending::Reply(parts, fmt) });
    }

    fn stats(&self) -> String {
        let sh = &self.rx.shared;
        let s = &sh.stats;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let mut out = String::new();
        let mut stat = |k: &str, v: String| {
            let _ = write!(out, "STAT {k} {v}\r\n");
        };
        stat("pid", std::process::id().to_string());
        stat("uptime", sh.started.elapsed().as_secs().to_string());
        stat("time", now.to_string());
        stat("version", MEMCACHED_VERSION.to_string());
        stat("pointer_size", "64".into());
        stat("curr_connections", s.connected_clients.load(Ordering::Relaxed).to_string());
        stat("total_connections", s.connections_received.load(Ordering::Relaxed).to_string());
        stat("cmd_get", s.mc_get.load(Ordering::Relaxed).to_string());
        stat("cmd_set", s.mc_set.load(Ordering::Relaxed).to_string());
        stat("get_hits", s.mc_hits.load(Ordering::Relaxed).to_string());
        stat("get_misses", (s.mc_get.load(Ordering::Relaxed).saturating_sub(s.mc_hits.load(Ordering::Relaxed))).to_string());
        stat("threads", sh.config.threads.to_string());
        stat("limit_maxbytes", self.tenant.max_memory.to_string());
        out.push_str("END\r\n");
        out
    }

    fn format_get(&self, keys: &[Vec<u8>], positions: &[(u16, u32)], cas: bool, replies: &[Bytes], out: &mut BytesMut) {
        if let Some(e) = replies.iter().find(|r| resp::is_error(r)) {
            out.put_slice(error_line(e).as_bytes());
            return;
        }
        let arrays: Vec<Vec<&[u8]>> = replies.iter().map(|r| resp::elements(r).unwrap_or_default()).collect();
        let mut hits = 0;
        for (key, &(part, idx)) in keys.iter().zip(positions) {
            let Some((value, flags, unique, _)) = arrays.get(part as usize).and_then(|a| a.get(idx as usize)).and_then(|f| item(f)) else {
                continue;
            };
            hits += 1;
            out.put_slice(b"VALUE ");
            out.put_slice(key);
            let mut line = format!(" {flags} {}", value.len());
            if cas {
                let _ = write!(line, " {unique}");
            }
            line.push_str("\r\n");
            out.put_slice(line.as_bytes());
            out.put_slice(value);
            out.put_slice(b"\r\n");
        }
        self.rx.shared.stats.mc_hits.fetch_add(hits, Ordering::Relaxed);
        out.put_slice(b"END\r\n");
    }

    fn format(&self, fmt: &Fmt, replies: &[Bytes], out: &mut BytesMut) {
        let r = &replies[0][..];
        if let Some(e) = replies.iter().find(|r| resp::is_error(r)) {
            out.put_slice(error_line(e).as_bytes());
            return;
        }
        let status = |frame: &[u8]| -> Vec<u8> {
            resp::simple(frame)
                .or_else(|| resp::elements(frame).and_then(|e| e.first().and_then(|s| resp::simple(s))))
                .unwrap_or(b"SERVER_ERROR unexpected reply")
                .to_vec()
        };
        match fmt {
            Fmt::Store | Fmt::Status => {
                out.put_slice(&status(r));
                out.put_slice(b"\r\n");
            }
            Fmt::Ok => out.put_slice(b"OK\r\n"),
            Fmt::Arith => {
                let e = resp::elements(r).unwrap_or_default();
                match e.get(1).and_then(|v| resp::bulk(v)) {
                    Some(v) => out.put_slice(v),
                    None => out.put_slice(&status(r)),
                }
                out.put_slice(b"\r\n");
            }
            Fmt::Meta(m) => self.format_meta(m, r, out),
        }
    }

    fn format_meta(&self, m: &MetaReply, r: &[u8], out: &mut BytesMut) {
        // Flags returned in the order asked, those of `which` only; a base64 key (`b`) is
        // returned as given and marked ` b` right after it, as memcached does.
        let ret = |out: &mut BytesMut, cas: i64, flags: i64, size: usize, ttl: i64, which: &[u8]| {
            for f in &m.flags {
                if !which.contains(f) || *f == b'b' {
                    continue;
                }
                out.put_u8(b' ');
                out.put_u8(*f);
                match f {
                    b'c' => out.put_slice(cas.to_string().as_bytes()),
                    b'f' => out.put_slice(flags.to_string().as_bytes()),
                    b's' => out.put_slice(size.to_string().as_bytes()),
                    b't' => out.put_slice(ttl_secs(ttl).to_string().as_bytes()),
                    b'k' => {
                        out.put_slice(&m.key);
                        if m.has(b'b') {
                            out.put_slice(b" b");
                        }
                    }
                    b'O' => out.put_slice(&m.opaque),
                    _ => {}
                }
            }
        };
        match m.cmd {
            b'g' | b'e' => {
                let hit = resp::elements(r).and_then(|e| e.first().copied()).and_then(item);
                match hit {
                    None if m.quiet => {}
                    None => {
                        out.put_slice(b"EN");
                        ret(out, 0, 0, 0, -1, b"Ok");
                        out.put_slice(b"\r\n");
                    }
                    Some((value, flags, cas, ttl)) if m.cmd == b'e' => {
                        self.rx.shared.stats.mc_hits.fetch_add(1, Ordering::Relaxed);
                        let _ = flags;
                        let line = format!(" exp={} cas={cas} size={}\r\n", ttl_secs(ttl), value.len());
                        out.put_slice(b"ME ");
                        out.put_slice(&m.key);
                        out.put_slice(line.as_bytes());
                    }
                    Some((value, flags, cas, ttl)) => {
                        self.rx.shared.stats.mc_hits.fetch_add(1, Ordering::Relaxed);
                        if m.has(b'v') {
                            out.put_slice(format!("VA {}", value.len()).as_bytes());
                        } else {
                            out.put_slice(b"HD");
                        }
                        ret(out, cas, flags, value.len(), ttl, b"bcfkOst");
                        out.put_slice(b"\r\n");
                        if m.has(b'v') {
                            out.put_slice(value);
                            out.put_slice(b"\r\n");
                        }
                    }
                }
            }
            b's' | b'd' => {
                let (st, cas) = match resp::elements(r) {
                    Some(e) => (e.first().and_then(|s| resp::simple(s)).unwrap_or_default(), e.get(1).and_then(|c| resp::integer(c)).unwrap_or(0)),
                    None => (resp::simple(r).unwrap_or_default(), 0),
                };
                let code: &[u8] = match st {
                    b"STORED" | b"DELETED" => b"HD",
                    b"NOT_STORED" => b"NS",
                    b"EXISTS" => b"EX",
                    _ => b"NF",
                };
                // Quiet mode hides success only (memcached 1.6).
                if m.quiet && code == b"HD" {
                    return;
                }
                out.put_slice(code);
                ret(out, cas, 0, 0, -1, b"bckO");
                out.put_slice(b"\r\n");
            }
            _ => {
                let e = resp::elements(r).unwrap_or_default();
                let st = e.first().and_then(|s| resp::simple(s)).unwrap_or_default();
                let value = e.get(1).and_then(|v| resp::bulk(v));
                let cas = e.get(2).and_then(|c| resp::integer(c)).unwrap_or(0);
                let code: &[u8] = match (st, value) {
                    (b"OK", Some(_)) if m.has(b'v') => b"VA",
                    (b"OK", _) => b"HD",
                    (b"EXISTS", _) => b"EX",
                    _ => b"NF",
                };
                if m.quiet && (code == b"HD" || code == b"VA") {
                    return;
                }
                out.put_slice(code);
                if code == b"VA" {
                    out.put_slice(format!(" {}", value.map(|v| v.len()).unwrap_or(0)).as_bytes());
                }
                ret(out, cas, 0, 0, -1, b"bckO");
                out.put_slice(b"\r\n");
                if let (b"VA", Some(v)) = (code, value) {
                    out.put_slice(v);
                    out.put_slice(b"\r\n");
                }
            }
        }
    }
}
