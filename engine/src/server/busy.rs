//! Answering the clients a busy script keeps waiting. A script runs on its reactor's thread
//! until it returns, so the other connections of that reactor cannot be served meanwhile —
//! not even their SCRIPT KILL. Redis, single-threaded, processes events from inside the
//! script's hook once it runs past `busy-reply-threshold`; here the control thread does it
//! for that reactor's idle connections, at the socket: it reads their complete requests and
//! answers them as Redis does while busy — SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE,
//! MULTI and DISCARD run, EXEC aborts the transaction, every other command gets `BUSY` (and
//! marks a transaction being queued as failed). What MULTI, DISCARD and EXEC did to the
//! connection's transaction is handed to its task as `Deferred` steps, applied before it
//! reads its next request.
//!
//! A connection is touched only while its task waits for input with nothing pending
//! (`ClientInfo::idle_reading`) on the busy reactor, and only while the script still runs
//! (checked under its slot's `busy_gate`, which the script's end takes before the reactor
//! runs anything else), so the task and this never read the same socket at once.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;

use super::state::Server;
use crate::clients::{ClientInfo, Deferred};
use crate::protocol::{Limits, ReplyWriter, RequestParser};
use crate::scripting::running::Slot;

/// How often the control thread looks for a busy script.
pub const CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// The longest request read here (a busy client sends short commands; a longer one waits).
const PEEK_MAX: usize = 64 * 1024;

/// A reactor a script has run on for this long gets no new client. One that waited for the
/// script's end (up to the busy threshold, 5 s, before `busy` answers it) would look dead:
/// the coordinator's health check and lease renewals come on new connections, and a
/// tenant's long script got its healthy primary failed over (issue 46).
pub const AVOID_AFTER_MS: i64 = 50;

/// The reactors a script has run on for longer than `AVOID_AFTER_MS` (busy ones among them).
pub fn occupied_reactors(srv: &Server) -> Vec<usize> {
    srv.scripts
        .running
        .slots()
        .filter(|(_, slot)| slot.is_running() && slot.running_ms() > AVOID_AFTER_MS)
        .map(|(_, slot)| slot.reactor.load(Ordering::Relaxed))
        .collect()
}

/// Serves, once, the waiting clients of every reactor a busy script holds.
pub fn serve_waiting_clients(srv: &Server) {
    if !srv.scripts.any_busy() {
        return;
    }
    for (ns, slot) in srv.scripts.running.slots() {
        if srv.scripts.busy(ns) {
            serve_reactor_of(srv, slot);
        }
    }
}

/// Serves the waiting clients of the reactor the script of `slot` holds.
fn serve_reactor_of(srv: &Server, slot: &Slot) {
    let (runner, reactor) = (slot.client.load(Ordering::Relaxed), slot.reactor.load(Ordering::Relaxed));
    let waiting: Vec<Arc<ClientInfo>> = srv
        .clients
        .lock()
        .values()
        .filter(|c| c.id != runner && c.reactor.load(Ordering::Relaxed) == reactor && c.idle_reading.load(Ordering::Acquire))
        .cloned()
        .collect();
    for client in waiting {
        // One request at a time, each under the gate: the script may end between two.
        loop {
            let _gate = slot.busy_gate.lock();
            if !slot.is_running() || !client.idle_reading.load(Ordering::Acquire) {
                return;
            }
            if !answer_one(srv, slot, &client) {
                break;
            }
        }
    }
}

/// Reads one complete request from the client's socket, if there is one, and answers it.
fn answer_one(srv: &Server, slot: &Slot, client: &ClientInfo) -> bool {
    let mut buf = vec![0u8; PEEK_MAX];
    // SAFETY: `client.fd` is the open socket of a connection whose task waits for input on
    // the reactor the running script holds: the task cannot close it before the script ends,
    // and the caller checked, under the gate the script's end takes, that it still runs.
    // MSG_PEEK leaves the bytes where they are; `buf` is writable for its whole length.
    let n = unsafe { libc::recv(client.fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    if n <= 0 {
        return false;
    }
    let peeked = &buf[..n as usize];
    let mut parser = RequestParser::new(Limits::default());
    let req = match parser.parse(peeked) {
        Ok(Some(req)) => req,
        // Incomplete, or a protocol error: the connection's own task deals with it later.
        _ => return false,
    };
    let argv: Vec<&[u8]> = (0..req.args.len()).map(|i| req.arg(peeked, i)).collect();
    let mut out = BytesMut::new();
    let resp3 = client.resp.load(Ordering::Relaxed) == 3;
    let close = answer(srv, slot, client, &argv, &mut ReplyWriter::new(&mut out, resp3));
    if !out.is_empty() && send_all(client.fd, &out) == 0 {
        return false;
    }
    // SAFETY: as above; this consumes exactly the request just answered (it is still the
    // first thing in the socket: nothing else reads it while the script runs).
    let taken = unsafe { libc::recv(client.fd, buf.as_mut_ptr().cast(), req.consumed, libc::MSG_DONTWAIT) };
    if close {
        // Closed when its task runs again (after the script).
        client.request_kill();
    }
    taken == req.consumed as isize
}

/// The reply to a request that arrived while the script of `slot` is busy on the client's
/// reactor; true if the connection must close after it. SCRIPT KILL, FUNCTION KILL and
/// FUNCTION STATS concern the client's own namespace's script (a client of another tenant
/// sharing the reactor gets NOTBUSY, and BUSY for the rest until the script ends).
fn answer(srv: &Server, slot: &Slot, client: &ClientInfo, argv: &[&[u8]], w: &mut ReplyWriter) -> bool {
    let is = |i: usize, s: &str| argv.get(i).is_some_and(|a| a.eq_ignore_ascii_case(s.as_bytes()));
    let in_multi = client.in_multi.load(Ordering::Relaxed);
    let busy = crate::command::pipeline::busy_error(slot.function.load(Ordering::Relaxed));
    if argv.is_empty() {
        return false;
    }
    // Authentication comes before BUSY, as in Redis: a client that has not authenticated
    // may not stop the script or the server (it may retry AUTH once the script ends).
    if !client.authenticated.load(Ordering::Relaxed) {
        w.error("NOAUTH Authentication required.");
        return false;
    }
    if (is(0, "script") || is(0, "function")) && is(1, "kill") && argv.len() == 2 {
        match srv.scripts.running.kill(client.namespace.load(Ordering::Relaxed), is(0, "function")) {
            Ok(()) => w.ok(),
            Err(e) => w.error(e),
        }
    } else if is(0, "function") && is(1, "stats") && argv.len() == 2 {
        srv.scripts.write_stats(client.namespace.load(Ordering::Relaxed), w);
    } else if is(0, "shutdown") && argv[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave")) {
        srv.request_shutdown();
        return true;
    } else if is(0, "multi") && argv.len() == 1 {
        if in_multi {
            w.error("ERR MULTI calls can not be nested");
        } else {
            client.defer(Deferred::Multi);
            w.ok();
        }
    } else if is(0, "discard") && argv.len() == 1 {
        if in_multi {
            client.defer(Deferred::EndMulti);
            w.ok();
        } else {
            w.error("ERR DISCARD without MULTI");
        }
    } else if is(0, "exec") {
        // Redis rejects EXEC while busy and discards the transaction.
        client.defer(Deferred::EndMulti);
        w.error(&format!("EXECABORT Transaction discarded because of: {busy}"));
    } else if is(0, "quit") {
        w.ok();
        return true;
    } else {
        if in_multi {
            client.defer(Deferred::AbortMulti);
        }
        w.error(busy);
    }
    false
}

/// Writes `bytes` to the socket (a short reply: a few tries if the socket is full once it
/// took part of it); how much it took — 0 means the request is left for the task.
fn send_all(fd: i32, bytes: &[u8]) -> usize {
    let mut sent = 0;
    for _ in 0..100 {
        // SAFETY: `fd` is a socket kept open as `answer_one` explains; `bytes[sent..]` is a
        // valid readable slice.
        let n = unsafe { libc::send(fd, bytes[sent..].as_ptr().cast(), bytes.len() - sent, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n > 0 {
            sent += n as usize;
            if sent == bytes.len() {
                break;
            }
        } else if sent == 0 {
            break;
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    sent
}
