//! The binary protocol's requests run on the engines: each typed request (`binary`) becomes
//! the `MC.*` command the text protocol uses for the same operation, and the engine's reply
//! becomes a response packet — with the statuses memcached gives (an ADD that finds the key
//! answers "exists", a REPLACE that does not "not found"), quiet opcodes silent on success
//! and on a get's miss, and every error answered.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};

use super::binary::{self, status, Op, Parsed, Request, StoreMode};
use super::{bulk_args, item, BinKind, BinReply, Client, Pending, MEMCACHED_VERSION};
use crate::backend::{send, Owner};
use crate::frontend::connection::Handled;
use crate::resp;

/// memcached's "temporary failure" status: the tenant is over its request limit.
const ETMPFAIL: u16 = 0x0086;
/// memcached's "internal error" status: an engine answered an error of its own.
const EINTERNAL: u16 = 0x0084;

impl Client {
    /// Takes one binary request from the start of `input`.
    pub(super) async fn binary_request(&mut self, input: &[u8]) -> Option<Handled> {
        match binary::parse(input, self.rx.shared.config.item_size_max) {
            Parsed::Incomplete => None,
            // Not a packet: memcached hangs up without a word.
            Parsed::BadMagic => {
                self.closing = true;
                Some(Handled { consumed: 0, command: None })
            }
            Parsed::ProtocolError { opcode, opaque } => {
                let mut out = BytesMut::new();
                binary::error(&mut out, opcode, status::EINVAL, opaque);
                self.ready(out.freeze());
                self.closing = true;
                Some(Handled { consumed: 0, command: None })
            }
            Parsed::Request { consumed, swallow, request } => {
                self.swallow = swallow;
                let name = op_name(&request.op);
                self.run_binary(request).await;
                Some(Handled { consumed, command: Some(name) })
            }
        }
    }

    fn packet(&mut self, opcode: u8, status: u16, opaque: u32, value: &[u8]) {
        let mut out = BytesMut::new();
        binary::response(&mut out, opcode, status, opaque, 0, &[], &[], value);
        self.ready(out.freeze());
    }

    fn binary_error(&mut self, opcode: u8, status: u16, opaque: u32) {
        let mut out = BytesMut::new();
        binary::error(&mut out, opcode, status, opaque);
        self.ready(out.freeze());
    }

    fn invalidate_near_cache(&self, op: &Op<'_>) {
        let Some(cache) = &self.rx.shared.near_cache else { return };
        match op {
            Op::Store { key, .. } | Op::Delete { key } | Op::Arith { key, .. } | Op::Touch { key, .. } | Op::TooLarge { key, unlink: true } => {
                cache.invalidate(self.tenant.cache_id * 16, key)
            }
            Op::Flush { .. } | Op::Get { touch: Some(_), .. } => cache.clear(),
            _ => {}
        }
    }

    async fn run_binary(&mut self, req: Request<'_>) {
        let Request { opcode, opaque, cas, quiet, op } = req;
        if !self.tenant.admit() {
            let msg = self.tenant.over_limit_message();
            return self.packet(opcode, ETMPFAIL, opaque, msg.as_bytes());
        }
        self.invalidate_near_cache(&op);
        let reply = |key: &[u8], kind| BinReply { opcode, opaque, quiet, key: key.to_vec(), kind };
        let rx = self.rx.clone();
        let stats = &rx.shared.stats;
        match op {
            Op::Get { key, with_key, touch } => {
                stats.mc_get.fetch_add(1, Ordering::Relaxed);
                let slot = match touch {
                    Some(t) => self.send_for_key(key, &[b"MC.GAT", t.to_string().as_bytes(), key]).await,
                    None => self.send_for_key(key, &[b"MC.GET", key]).await,
                };
                self.push(Pending::Binary(vec![slot], reply(key, BinKind::Get { with_key, with_value: true })));
            }
            Op::Touch { key, exptime } => {
                // Answered with the item's flags and CAS, as memcached does: MC.GAT has them.
                let slot = self.send_for_key(key, &[b"MC.GAT", exptime.to_string().as_bytes(), key]).await;
                self.push(Pending::Binary(vec![slot], reply(key, BinKind::Get { with_key: false, with_value: false })));
            }
            Op::Store { mode, key, value, flags, exptime } => {
                stats.mc_set.fetch_add(1, Ordering::Relaxed);
                let (f, t, c) = (flags.to_string(), exptime.to_string(), cas.to_string());
                let args: [&[u8]; 7] = [b"MC.STORE", mode.engine_name(cas).as_bytes(), key, value, f.as_bytes(), t.as_bytes(), c.as_bytes()];
                let slot = self.send_for_key(key, &args).await;
                self.push(Pending::Binary(vec![slot], reply(key, BinKind::Store(mode))));
            }
            Op::Delete { key } => {
                let slot = self.send_for_key(key, &[b"MC.DELETE", key, cas.to_string().as_bytes()]).await;
                self.push(Pending::Binary(vec![slot], reply(key, BinKind::Delete)));
            }
            Op::Arith { key, incr, delta, initial, exptime } => {
                // An expiration of all ones: a missing key is not created.
                let vivify: &[u8] = if exptime == u32::MAX { b"0" } else { b"1" };
                let mode: &[u8] = if incr { b"incr" } else { b"decr" };
                let (d, c, i, t) = (delta.to_string(), cas.to_string(), initial.to_string(), exptime.to_string());
                let slot = self.send_for_key(key, &[b"MC.ARITH", key, mode, d.as_bytes(), c.as_bytes(), vivify, i.as_bytes(), t.as_bytes()]).await;
                self.push(Pending::Binary(vec![slot], reply(key, BinKind::Arith)));
            }
            Op::Flush { delay } => {
                if delay > 0 {
                    let (rx, ns) = (self.rx.clone(), self.tenant.namespace.clone());
                    tokio::task::spawn_local(async move {
                        tokio::time::sleep(std::time::Duration::from_secs(u64::from(delay))).await;
                        let owner: Rc<Owner> = Rc::default();
                        for e in 0..rx.engines() {
                            let _ = send(&rx.backend(e, &ns, 0, false), &bulk_args(&[b"FLUSHDB"]), &owner, false).await;
                        }
                    });
                    if !quiet {
                        self.packet(opcode, status::OK, opaque, &[]);
                    }
                    return;
                }
                let mut parts = Vec::new();
                for e in 0..self.rx.engines() {
                    let b = self.rx.backend(e, &self.tenant.namespace, 0, false);
                    parts.push(send(&b, &bulk_args(&[b"FLUSHDB"]), &self.owner, false).await);
                }
                self.push(Pending::Binary(parts, reply(&[], BinKind::Flush)));
            }
            Op::Stat { group } => {
                let mut out = BytesMut::new();
                match group {
                    b"" => {
                        for line in self.stats().lines() {
                            let mut words = line.splitn(3, ' ');
                            if let (Some("STAT"), Some(k), Some(v)) = (words.next(), words.next(), words.next()) {
                                binary::response(&mut out, opcode, status::OK, opaque, 0, &[], k.as_bytes(), v.as_bytes());
                            }
                        }
                    }
                    // Groups with nothing to list here (Terrace has no slab classes).
                    b"reset" | b"settings" | b"items" | b"slabs" | b"sizes" | b"conns" => {}
                    _ => {
                        binary::error(&mut out, opcode, status::KEY_ENOENT, opaque);
                        return self.ready(out.freeze());
                    }
                }
                // The end of the list: an empty packet.
                binary::response(&mut out, opcode, status::OK, opaque, 0, &[], &[], &[]);
                self.ready(out.freeze());
            }
            Op::Noop => self.packet(opcode, status::OK, opaque, &[]),
            Op::Version => self.packet(opcode, status::OK, opaque, MEMCACHED_VERSION.as_bytes()),
            Op::Quit => {
                if !quiet {
                    self.packet(opcode, status::OK, opaque, &[]);
                }
                self.closing = true;
            }
            Op::TooLarge { key, unlink } => {
                if unlink {
                    let slot = self.send_for_key(key, &[b"MC.DELETE", key, b"0"]).await;
                    self.push(Pending::Hidden(vec![slot]));
                }
                self.binary_error(opcode, status::E2BIG, opaque);
            }
            Op::Unknown => self.binary_error(opcode, status::UNKNOWN_COMMAND, opaque),
        }
    }

    /// Writes the response packet for an engine reply.
    pub(super) fn format_binary(&self, reply: &BinReply, replies: &[Bytes], out: &mut BytesMut) {
        let BinReply { opcode, opaque, quiet, ref key, ref kind } = *reply;
        if let Some(e) = replies.iter().find(|r| resp::is_error(r)) {
            let text = resp::error_text(e).unwrap_or(b"unexpected reply");
            let status = if text.starts_with(b"CLIENT_ERROR cannot increment") {
                status::DELTA_BADVAL
            } else if text.starts_with(b"OOM") {
                status::ENOMEM
            } else {
                EINTERNAL
            };
            if status == EINTERNAL {
                binary::response(out, opcode, status, opaque, 0, &[], &[], text);
            } else {
                binary::error(out, opcode, status, opaque);
            }
            return;
        }
        let r = &replies[0][..];
        let simple = |frame: &[u8]| resp::simple(frame).map(<[u8]>::to_vec).unwrap_or_default();
        let answer = |out: &mut BytesMut, st: u16, cas: u64, value: &[u8]| {
            if st != status::OK {
                binary::error(out, opcode, st, opaque);
            } else if !quiet {
                binary::response(out, opcode, st, opaque, cas, &[], &[], value);
            }
        };
        match kind {
            BinKind::Get { with_key, with_value } => {
                let hit = resp::elements(r).and_then(|e| e.first().copied()).and_then(item);
                match hit {
                    Some((value, flags, cas, _)) => {
                        self.rx.shared.stats.mc_hits.fetch_add(1, Ordering::Relaxed);
                        let shown_key: &[u8] = if *with_key { key } else { &[] };
                        let shown_value: &[u8] = if *with_value { value } else { &[] };
                        binary::response(out, opcode, status::OK, opaque, cas as u64, &(flags as u32).to_be_bytes(), shown_key, shown_value);
                    }
                    None if quiet => {}
                    // GETK's miss names the key, without a message.
                    None if *with_key => binary::response(out, opcode, status::KEY_ENOENT, opaque, 0, &[], key, &[]),
                    None => binary::error(out, opcode, status::KEY_ENOENT, opaque),
                }
            }
            BinKind::Store(mode) => {
                let e = resp::elements(r).unwrap_or_default();
                let st = e.first().map(|s| simple(s)).unwrap_or_default();
                let cas = e.get(1).and_then(|c| resp::integer(c)).unwrap_or(0) as u64;
                let code = match &st[..] {
                    b"STORED" => status::OK,
                    b"EXISTS" => status::KEY_EEXISTS,
                    b"NOT_FOUND" => status::KEY_ENOENT,
                    // A failed ADD found the key; a failed REPLACE did not.
                    _ => match mode {
                        StoreMode::Add => status::KEY_EEXISTS,
                        StoreMode::Replace => status::KEY_ENOENT,
                        _ => status::NOT_STORED,
                    },
                };
                answer(out, code, cas, &[]);
            }
            BinKind::Delete => {
                let code = match &simple(r)[..] {
                    b"DELETED" => status::OK,
                    b"EXISTS" => status::KEY_EEXISTS,
                    _ => status::KEY_ENOENT,
                };
                answer(out, code, 0, &[]);
            }
            BinKind::Arith => {
                let e = resp::elements(r).unwrap_or_default();
                let st = e.first().map(|s| simple(s)).unwrap_or_default();
                let value = e.get(1).and_then(|v| resp::bulk(v)).and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok());
                let cas = e.get(2).and_then(|c| resp::integer(c)).unwrap_or(0) as u64;
                match (&st[..], value) {
                    (b"OK", Some(v)) => answer(out, status::OK, cas, &v.to_be_bytes()),
                    (b"EXISTS", _) => answer(out, status::KEY_EEXISTS, 0, &[]),
                    _ => answer(out, status::KEY_ENOENT, 0, &[]),
                }
            }
            BinKind::Flush => answer(out, status::OK, 0, &[]),
        }
    }
}

/// A request's name for the metrics.
fn op_name(op: &Op<'_>) -> &'static str {
    match op {
        Op::Get { touch: Some(_), .. } => "gat",
        Op::Get { .. } => "get",
        Op::Store { mode: StoreMode::Set, .. } | Op::TooLarge { .. } => "set",
        Op::Store { mode: StoreMode::Add, .. } => "add",
        Op::Store { mode: StoreMode::Replace, .. } => "replace",
        Op::Store { mode: StoreMode::Append, .. } => "append",
        Op::Store { mode: StoreMode::Prepend, .. } => "prepend",
        Op::Delete { .. } => "delete",
        Op::Arith { incr: true, .. } => "incr",
        Op::Arith { incr: false, .. } => "decr",
        Op::Touch { .. } => "touch",
        Op::Flush { .. } => "flush_all",
        Op::Stat { .. } => "stats",
        Op::Noop => "noop",
        Op::Version => "version",
        Op::Quit => "quit",
        Op::Unknown => "unknown",
    }
}
