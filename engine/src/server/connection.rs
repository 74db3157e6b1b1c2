//! One client connection: read, parse pipelined requests, execute, write replies; park while
//! blocked in BLPOP & co.; notice CLIENT KILL and shutdown.
//!
//! The connection's state (`Conn`) is separate from the socket: elastic threading moves a
//! connection to another reactor between two reads (`elastic`), with its unparsed input.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use super::dispatch::{Carried, Dispatch, Handoff};
use super::fair::Turn;
use super::socket::Socket;
use super::state::{ClientInfo, Server};
use crate::command::{self, BlockRequest, Conn, Outcome, TimeoutReply};
use crate::keyspace::LockCap;
use crate::protocol::{Limits, ReplyWriter, RequestParser};

/// Replies are flushed when this much is pending, to bound memory for huge pipelines.
const FLUSH_AT: usize = 256 * 1024;
/// A connection's buffers are given back past this size once empty (output written, input
/// all parsed).
const KEEP_BUFFER: usize = 1 << 20;
/// How often a connection waiting to write checks its client's soft output limit.
const SOFT_LIMIT_RECHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// Serves a connection on reactor `reactor` (usize::MAX: off the reactors), new or moved in
/// with its state (`carried`), until it closes or moves on.
pub async fn serve(
    srv: Arc<Server>,
    locks: LockCap,
    dispatch: Arc<Dispatch>,
    mut stream: Socket,
    info: Arc<ClientInfo>,
    carried: Option<Box<Carried>>,
    reactor: usize,
) {
    stream.set_nodelay();
    let (mut conn, mut inbuf) = match carried {
        Some(c) => (c.conn, c.inbuf),
        None => {
            let mut conn = Conn::new(info.clone(), &srv);
            // Published in `flush`, before replies go out, and when the connection ends.
            conn.tally = crate::command::tally::Tally::batched();
            (conn, BytesMut::with_capacity(16 * 1024))
        }
    };
    let here = srv.reactors.stats.get(reactor);
    if let Some(st) = here {
        st.connections.fetch_add(1, Ordering::Relaxed);
    }
    info.reactor.store(reactor, Ordering::Relaxed);
    // (With one reactor in all there is nowhere to move: no per-read cost.)
    let elastic = srv.reactors.elastic && srv.reactors.count() > 1 && here.is_some();
    let mut out = BytesMut::with_capacity(16 * 1024);
    let mut parser = RequestParser::new(Limits::default());
    let mut prefetcher = super::prefetch::Prefetcher::default();
    // The connection runs requests only while it holds its tenant's turn on this reactor.
    let mut turn = Turn::new(srv.config.tenant_slice, namespace(&conn));
    'conn: loop {
        if info.killed.load(Ordering::Relaxed) {
            break;
        }
        if elastic {
            // A safe point: replies flushed, nothing blocked. Move if asked to.
            let to = info.move_to.swap(usize::MAX, Ordering::Relaxed);
            if to != usize::MAX && to != reactor && to < srv.reactors.active.load(Ordering::Relaxed) {
                match hand_over(&srv, &dispatch, stream, &info, conn, inbuf, to) {
                    Move::Done => {
                        if let Some(st) = here {
                            st.connections.fetch_sub(1, Ordering::Relaxed);
                        }
                        return;
                    }
                    Move::Back(s, c, i) => (stream, conn, inbuf) = (s, *c, i),
                    Move::Lost(c) => {
                        conn = *c;
                        break 'conn;
                    }
                }
            }
        }
        if inbuf.capacity() - inbuf.len() < 4096 {
            inbuf.reserve(16 * 1024);
        }
        // CLIENT KILL and shutdown shut the socket down, which ends this read. A subscribed
        // client also wakes for published messages; any connection for a move (elastic).
        let pushes = conn.receives_pushes();
        // Waiting with nothing pending: while a busy script holds this reactor, the control
        // thread may answer this client's requests (`super::busy`).
        info.idle_reading.store(out.is_empty() && inbuf.is_empty(), Ordering::Release);
        let ready = if pushes || elastic {
            tokio::select! {
                biased;
                r = stream.readable() => Some(r),
                _ = info.mailbox_notify.notified(), if pushes => None,
                _ = info.move_requested(), if elastic => None,
            }
        } else {
            Some(stream.readable().await)
        };
        let read = match ready {
            None => None,
            Some(Err(e)) => Some(Err(e)),
            Some(Ok(())) => {
                // The tenant's turn before the socket's bytes: waiting for it, the connection
                // stays idle with its request unread, so `busy` can answer it should the
                // turn's holder run a script that turns busy on this reactor.
                turn.take(namespace(&conn)).await;
                info.idle_reading.store(false, Ordering::Release);
                match stream.try_read_buf(&mut inbuf) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        turn.give_back();
                        continue;
                    }
                    r => Some(r),
                }
            }
        };

        info.idle_reading.store(false, Ordering::Release);
        if info.deferred_pending.load(Ordering::Acquire) {
            apply_deferred(&srv, &locks, &info, &mut conn);
        }
        let n = match read {
            None => {
                crate::pubsub::drain_mailbox(&info, &mut out);
                if !flush(&srv, &mut conn, &mut stream, &mut out).await {
                    break;
                }
                continue;
            }
            Some(Ok(0) | Err(_)) => break,
            Some(Ok(n)) => n,
        };
        super::spin::note_read();
        // While its requests run, the client's query buffer holds them (CLIENT LIST's qbuf,
        // as Redis shows it to a client listing itself).
        info.qbuf.store(inbuf.len(), Ordering::Relaxed);
        srv.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
        info.last_active_ms.store(srv.started.elapsed().as_millis() as u64, Ordering::Relaxed);
        parser.set_max_bulk_len(srv.limits.max_bulk_len.load(Ordering::Relaxed));
        turn.take(namespace(&conn)).await;
        prefetcher.restart();
        loop {
            prefetcher.next(&srv, &locks, conn.db, &inbuf);
            let req = match parser.parse(&inbuf) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    let text = format!("ERR {e}");
                    srv.stats.note_error(&text);
                    ReplyWriter::new(&mut out, conn.resp3).error(&text);
                    turn.give_back();
                    let _ = flush(&srv, &mut conn, &mut stream, &mut out).await;
                    break 'conn;
                }
            };
            if req.args.is_empty() {
                inbuf.advance(req.consumed);
                parser.reset();
                continue;
            }
            // With a storage tier, keys the cache lacks are read through first; if one is
            // evicted, or written again and not yet confirmed, before the command gets its
            // locks, both steps run again.
            let mut attempts = 0;
            let outcome = loop {
                let read = if srv.storage_tier().is_some() {
                    let buf: &[u8] = &inbuf;
                    let argv: Vec<&[u8]> = (0..req.args.len()).map(|i| req.arg(buf, i)).collect();
                    turn.give_back();
                    let read = command::read_through(&srv, &locks, &conn, &argv).await;
                    turn.take(namespace(&conn)).await;
                    match read {
                        Ok(read) => Some(read),
                        Err(why) => {
                            ReplyWriter::new(&mut out, conn.resp3).error(&why);
                            break Ok(Outcome::Done);
                        }
                    }
                } else {
                    None
                };
                let outcome = {
                    let buf: &[u8] = &inbuf;
                    let mut stack: [&[u8]; 16] = [&[]; 16];
                    let heap: Vec<&[u8]>;
                    let argv: &[&[u8]] = if req.args.len() <= 16 {
                        for (i, slot) in stack.iter_mut().enumerate().take(req.args.len()) {
                            *slot = req.arg(buf, i);
                        }
                        &stack[..req.args.len()]
                    } else {
                        heap = (0..req.args.len()).map(|i| req.arg(buf, i)).collect();
                        &heap
                    };
                    let request = command::Request { argv, read_through: read.as_ref(), waited: None };
                    match command::execute_request(&srv, &locks, &mut conn, &request, &mut out) {
                        o @ (Outcome::Block(_) | Outcome::Paused(_)) => Err((o, argv.iter().map(|a| a.to_vec()).collect::<Vec<_>>())),
                        other => Ok(other),
                    }
                };
                if matches!(outcome, Ok(Outcome::NamespaceHeld)) {
                    // Run again (read through again) once the holder is done.
                    turn.give_back();
                    wait_for_namespace(&srv, &info, namespace(&conn)).await;
                    turn.take(namespace(&conn)).await;
                    continue;
                }
                if !matches!(outcome, Ok(Outcome::ReadAgain)) {
                    break outcome;
                }
                attempts += 1;
                if attempts == 20 {
                    ReplyWriter::new(&mut out, conn.resp3)
                        .error("ERR a key kept changing (evicted, or written again) while it was read from storage; try again");
                    break Ok(Outcome::Done);
                }
            };
            inbuf.advance(req.consumed);
            parser.reset();
            match outcome {
                Ok(Outcome::Close) => {
                    turn.give_back();
                    if !info.killed.load(Ordering::Relaxed) {
                        let _ = flush(&srv, &mut conn, &mut stream, &mut out).await;
                    }
                    if let Some(psync) = conn.psync.take() {
                        // The socket goes on as the replica's link, with what the replica
                        // sent after PSYNC (its first ACKs, possibly).
                        let leftover = inbuf.split();
                        leave(&srv, &locks, &mut conn, here);
                        super::replicas::attach(srv.clone(), locks.clone(), stream, info, psync, leftover);
                        return;
                    }
                    break 'conn;
                }
                Ok(_) => {}
                Err((outcome, argv)) => {
                    turn.give_back();
                    if !flush(&srv, &mut conn, &mut stream, &mut out).await {
                        if let Outcome::Block(b) = &outcome {
                            srv.blocking.unregister(info.id, b.db, &b.keys);
                        }
                        break 'conn;
                    }
                    if !wait_and_retry(&srv, &locks, &mut conn, &mut stream, &mut inbuf, &mut out, (outcome, argv)).await {
                        break 'conn;
                    }
                }
            }
            if std::mem::take(&mut conn.woke_blocked) {
                wait_for_woken(&srv).await;
            }
            if out.len() >= FLUSH_AT {
                turn.give_back();
                if !flush(&srv, &mut conn, &mut stream, &mut out).await {
                    break 'conn;
                }
            }
            turn.after_request(namespace(&conn)).await;
        }
        turn.give_back();
        info.qbuf.store(inbuf.len(), Ordering::Relaxed);
        if inbuf.is_empty() && inbuf.capacity() > KEEP_BUFFER {
            inbuf = BytesMut::with_capacity(16 * 1024);
        }
        if inbuf.len() > srv.limits.query_buffer.load(Ordering::Relaxed) {
            tracing::warn!(client = info.id, addr = %info.addr, qbuf = inbuf.len(), "closing client that reached max query buffer length");
            srv.limits.query_disconnections.fetch_add(1, Ordering::Relaxed);
            break;
        }
        if conn.receives_pushes() || std::mem::take(&mut conn.pushes_waiting) {
            crate::pubsub::drain_mailbox(&info, &mut out);
        }
        if !out.is_empty() && here.is_some_and(|st| st.connections.load(Ordering::Relaxed) > 1) && turn.may_batch_replies(namespace(&conn)) {
            // Replies are written after every other connection this reactor found readable
            // has run its commands, as Redis writes them before it sleeps: a client reading
            // many connections is woken once per burst instead of once per reply. (Not
            // behind another tenant's commands: `Turn::may_batch_replies`.)
            behind_ready_tasks().await;
        }
        if !flush(&srv, &mut conn, &mut stream, &mut out).await {
            break;
        }
    }
    leave(&srv, &locks, &mut conn, here);
}

/// What a connection leaves behind when it ends: its counters published, its watches,
/// subscriptions, MONITOR and tracking gone, its entry in CLIENT LIST removed.
fn leave(srv: &Server, locks: &LockCap, conn: &mut Conn, here: Option<&super::elastic::ReactorStats>) {
    let id = conn.info.id;
    conn.tally.publish(srv);
    if let Some(st) = here {
        st.connections.fetch_sub(1, Ordering::Relaxed);
    }
    srv.blocking.served(id);
    command::pipeline::release_watches(srv, locks, conn);
    command::pubsub::unsubscribe_all(srv, conn);
    srv.monitors.remove(id);
    srv.tracking.disable(id);
    srv.clients.lock().remove(&id);
}

/// The namespace (tenant) the connection's requests run in.
fn namespace(conn: &Conn) -> usize {
    conn.ns_base / crate::keyspace::NUM_DBS
}

/// After this long holding a whole namespace, its holder is waited for in 1 ms sleeps rather
/// than by yielding to the reactor's other connections.
const LONG_HOLD: std::time::Duration = std::time::Duration::from_millis(1);

/// Waits, off the reactor's thread, until no command holds namespace `ns` whole (a script,
/// an EXEC), its script turns busy (admission then answers BUSY), or the client is killed.
/// Waiting in the shard locks instead would stop every other tenant's connection on this
/// reactor for as long as the script runs.
async fn wait_for_namespace(srv: &Server, info: &ClientInfo, ns: usize) {
    poll_until(|| match srv.keyspace.namespace_held_for(ns) {
        None => Poll::Done,
        Some(_) if srv.scripts.busy(ns) || info.killed.load(Ordering::Relaxed) => Poll::Done,
        Some(held) => Poll::again_after(held),
    })
    .await
}

/// How long a command that woke blocked clients waits for them to run again before it
/// replies anyway (one whose reactor a busy script holds would otherwise hold it up).
const WOKEN_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Waits until the blocked clients woken by this connection's last command — and those
/// their commands woke in turn — have run again (`BlockRegistry::woken_pending`), so its
/// client's next command sees what they did, as on Redis. They may run on this reactor:
/// the wait yields to it.
async fn wait_for_woken(srv: &Server) {
    let start = Instant::now();
    poll_until(|| {
        let waited = start.elapsed();
        if !srv.blocking.woken_pending() || waited >= WOKEN_WAIT {
            Poll::Done
        } else {
            Poll::again_after(waited)
        }
    })
    .await
}

/// What a wait's condition says each time it is checked.
enum Poll {
    Done,
    /// Check again after the reactor's other ready tasks have run.
    Yield,
    /// Check again in 1 ms.
    Sleep,
}

impl Poll {
    /// Yields while what is waited for has lasted less than `LONG_HOLD`, then sleeps.
    fn again_after(lasted: std::time::Duration) -> Poll {
        if lasted < LONG_HOLD {
            Poll::Yield
        } else {
            Poll::Sleep
        }
    }
}

/// Checks `condition` until it says `Done`, off the reactor's thread between checks.
async fn poll_until(mut condition: impl FnMut() -> Poll) {
    loop {
        match condition() {
            Poll::Done => return,
            Poll::Yield => tokio::task::yield_now().await,
            Poll::Sleep => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
        }
    }
}

/// Applies what requests answered while a busy script held this reactor did to the
/// connection's transaction (`super::busy`).
fn apply_deferred(srv: &Server, locks: &LockCap, info: &ClientInfo, conn: &mut Conn) {
    for step in info.take_deferred() {
        match step {
            crate::clients::Deferred::Multi => {
                conn.multi = Some(Vec::new());
                conn.multi_error = false;
                conn.multi_writes = false;
                conn.multi_denyoom = false;
                conn.multi_charge = None;
            }
            crate::clients::Deferred::AbortMulti => conn.multi_error |= conn.multi.is_some(),
            crate::clients::Deferred::EndMulti => {
                command::txn::end_multi(conn);
                command::pipeline::release_watches(srv, locks, conn);
            }
        }
    }
}

/// Lets the tasks already queued on this reactor run first, then continues. Unlike
/// `tokio::task::yield_now`, which holds the wake-up until the I/O driver has been polled
/// again (so connections that became readable meanwhile run first, and replies wait a whole
/// round), this goes to the back of the run queue as it stands.
async fn behind_ready_tasks() {
    let mut queued = false;
    std::future::poll_fn(|cx| {
        if queued {
            return std::task::Poll::Ready(());
        }
        queued = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// How a move went.
enum Move {
    /// The target reactor has the connection.
    Done,
    /// It could not take it (shutting down): the connection stays here.
    Back(Socket, Box<Conn>, BytesMut),
    /// The socket could not be taken off this reactor: the connection ends.
    Lost(Box<Conn>),
}

/// Gives the connection to reactor `to`: its socket, state and unparsed input.
fn hand_over(srv: &Server, dispatch: &Dispatch, stream: Socket, info: &Arc<ClientInfo>, conn: Conn, inbuf: BytesMut, to: usize) -> Move {
    let std_stream = match stream.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(client = info.id, "cannot move a connection: {e}");
            return Move::Lost(Box::new(conn));
        }
    };
    match dispatch.send(to, Handoff::Moved(std_stream, info.clone(), Box::new(Carried { conn, inbuf }))) {
        Ok(()) => {
            srv.reactors.migrations.fetch_add(1, Ordering::Relaxed);
            Move::Done
        }
        Err(Handoff::Moved(s, _, carried)) => match Socket::from_std(s) {
            Ok(stream) => Move::Back(stream, Box::new(carried.conn), carried.inbuf),
            Err(_) => Move::Lost(Box::new(carried.conn)),
        },
        Err(Handoff::New(..)) => unreachable!("a move is sent as a move"),
    }
}

/// Write-through commands' replies wait for their storage batches (one wait covers a whole
/// pipeline: its writes share batches); a reply whose batch storage refused becomes an error,
/// and its keys leave the cache.
async fn settle_storage(srv: &Server, conn: &mut Conn, out: &mut BytesMut) {
    if conn.storage_waits.is_empty() {
        return;
    }
    let waits = std::mem::take(&mut conn.storage_waits);
    let Some(tier) = srv.storage_tier() else { return };
    let mut failed = Vec::new();
    for w in waits {
        // (The writer took a refused batch's keys out of the cache already.)
        if let Err(why) = tier.wait(w.seq).await {
            failed.push((w, why));
        }
    }
    // From the last to the first, so earlier offsets stay valid.
    for (w, why) in failed.into_iter().rev() {
        if w.reply_end > out.len() || w.reply_at > w.reply_end {
            continue;
        }
        let tail = out.split_off(w.reply_end);
        out.truncate(w.reply_at);
        ReplyWriter::new(out, conn.resp3).error(&format!("ERR storage write failed ({why}): the write was not applied"));
        out.extend_from_slice(&tail);
    }
}

/// Writes the pending replies — once the WAL holds the writes they acknowledge, in the
/// modes that wait (one wait covers a whole pipeline: group commit). False when the
/// connection must close, including when the WAL failed: replies to writes that are not in
/// the log are never sent.
async fn flush(srv: &Server, conn: &mut Conn, stream: &mut Socket, out: &mut BytesMut) -> bool {
    conn.tally.publish(srv);
    settle_storage(srv, conn, out).await;
    // The batch's writes go to the replicas while its replies wait for the WAL, if they do.
    srv.replication.publish();
    if conn.wal_pending > 0 {
        let seq = std::mem::take(&mut conn.wal_pending);
        if let Some(wal) = srv.wal() {
            // pmem: this connection writes the ring itself (with whatever else is pending);
            // always: the writer thread's fsync is awaited.
            let durable = if wal.mode == crate::wal::Mode::Pmem { wal.commit(seq) } else { wal.wait_durable(seq).await };
            if !durable {
                return false;
            }
        }
    }
    if std::mem::take(&mut conn.acks_writes) && srv.replication.lease_lapsed() {
        // The writes ran under the term, but its lease ran out before their replies could
        // leave (the engine was paused, say): a replica may have been promoted without
        // them, so they are never acknowledged — the client sees its connection close.
        tracing::warn!(client = conn.info.id, "replies acknowledging writes withheld: the term lease ran out; closing the connection");
        return false;
    }
    if out.is_empty() {
        return true;
    }
    srv.stats.net_output_bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
    let ok = write_out(&conn.info, stream, out).await;
    out.clear();
    if out.capacity() > KEEP_BUFFER {
        // One huge reply does not keep its buffer for the connection's life.
        *out = BytesMut::with_capacity(16 * 1024);
    }
    ok
}

/// Writes `out` to the client. What the socket does not take at once is the client's pending
/// output, under its class's `client-output-buffer-limit` while it waits (with the mailbox
/// filling behind it): past the hard limit, or the soft one for too long, or when the client
/// is killed meanwhile, the connection closes instead. False when it must close.
async fn write_out(info: &ClientInfo, stream: &mut Socket, out: &[u8]) -> bool {
    let mut written = match stream.try_write(out) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(_) => return false,
    };
    if written == out.len() {
        return true;
    }
    let ok = loop {
        info.out_pending.store(out.len() - written, Ordering::Relaxed);
        if info.killed.load(Ordering::Relaxed) || !info.within_output_limit(info.output_pending()) {
            break false;
        }
        tokio::select! {
            ready = stream.writable() => {
                if ready.is_err() {
                    break false;
                }
                match stream.try_write(&out[written..]) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break false,
                }
                if written == out.len() {
                    break true;
                }
            }
            _ = info.kill_notify.notified() => {}
            // The soft limit is a matter of time: look again while waiting.
            _ = tokio::time::sleep(SOFT_LIMIT_RECHECK) => {}
        }
    };
    info.out_pending.store(0, Ordering::Relaxed);
    ok
}

/// Waits out a CLIENT PAUSE or a blocking command (`waiting`: its outcome and arguments),
/// re-running the command until it completes. Returns false when the connection must close.
async fn wait_and_retry(
    srv: &Arc<Server>,
    locks: &LockCap,
    conn: &mut Conn,
    stream: &mut Socket,
    inbuf: &mut BytesMut,
    out: &mut BytesMut,
    waiting: (Outcome, Vec<Vec<u8>>),
) -> bool {
    let (mut outcome, mut argv) = waiting;
    // A blocking command keeps the deadline of its first attempt across wake-ups.
    let mut deadline: Option<Option<Instant>> = None;
    // What a woken command waited for.
    let mut waited: Option<BlockRequest> = None;
    // Held back by CLIENT PAUSE: counted as blocked while it waits.
    let mut postponed = None;
    loop {
        // A blocked command was dispatched (and shown to MONITOR) already; a paused one was not.
        let was_blocked = matches!(outcome, Outcome::Block(_));
        if !matches!(outcome, Outcome::Paused(_)) {
            postponed = None;
        }
        match outcome {
            Outcome::Paused(until) => {
                postponed.get_or_insert_with(|| srv.blocking.postpone());
                let wait = (until - super::state::now_ms()).clamp(1, 50);
                tokio::time::sleep(std::time::Duration::from_millis(wait as u64)).await;
                if conn.info.killed.load(Ordering::Relaxed) {
                    return false;
                }
            }
            Outcome::Block(mut block) => {
                if let Some(rewritten) = block.retry_argv.take() {
                    argv = rewritten;
                }
                let until = *deadline.get_or_insert(block.deadline.map(Instant::from_std));
                match wait_blocked(srv, conn, stream, inbuf, out, &block, until).await {
                    Woken::Retry => waited = Some(block),
                    Woken::Finished(keep_open) => return keep_open,
                }
            }
            Outcome::NamespaceHeld => {
                wait_for_namespace(srv, &conn.info, conn.ns_base / crate::keyspace::NUM_DBS).await;
                if conn.info.killed.load(Ordering::Relaxed) {
                    return false;
                }
            }
            Outcome::Close => return false,
            // (Only a request read through from storage is read again.)
            Outcome::Done | Outcome::ReadAgain => return flush(srv, conn, stream, out).await,
        }
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let woken_from = waited.take().filter(|_| was_blocked);
        outcome = command::execute_request(srv, locks, conn, &command::Request { argv: &args, read_through: None, waited: woken_from.as_ref() }, out);
        if let Some(block) = &woken_from {
            if !matches!(outcome, Outcome::Block(_)) {
                // Served (or failed): what is left is the next waiter's. (Blocked again:
                // there was nothing for it, and the turn ends.)
                pass_the_turn(srv, block);
            }
            srv.blocking.served(conn.info.id);
        }
    }
}

/// How a blocked client's wait ended.
enum Woken {
    /// A key it waits on may have data: run the command again.
    Retry,
    /// Answered (timeout, CLIENT UNBLOCK) or gone; false when the connection must close.
    Finished(bool),
}

fn write_timeout_reply(srv: &Server, out: &mut BytesMut, resp3: bool, kind: TimeoutReply) {
    let mut w = ReplyWriter::new(out, resp3);
    match kind {
        TimeoutReply::NullArray => w.null_array(),
        TimeoutReply::NullBulk => w.null(),
        TimeoutReply::Replicas(offsets) => w.int(srv.replication.acked_at_least(offsets) as i64),
    }
}

/// Waits until a key the client is blocked on is signalled, the deadline passes, CLIENT
/// UNBLOCK or CLIENT KILL arrives, or the client goes away. The client's registration for
/// its keys is removed whatever ends the wait.
async fn wait_blocked(
    srv: &Arc<Server>,
    conn: &mut Conn,
    stream: &mut Socket,
    inbuf: &mut BytesMut,
    out: &mut BytesMut,
    block: &BlockRequest,
    deadline: Option<Instant>,
) -> Woken {
    let info = conn.info.clone();
    info.blocked.store(true, Ordering::Relaxed);
    let sleep = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep);
    let woken = loop {
        tokio::select! {
            _ = conn.block_notify.notified() => break Woken::Retry,
            _ = &mut sleep => {
                write_timeout_reply(srv, out, conn.resp3, block.timeout_reply);
                break Woken::Finished(flush(srv, conn, stream, out).await);
            }
            _ = info.wake.notified() => {
                if info.killed.load(Ordering::Relaxed) {
                    break Woken::Finished(false);
                }
                match info.unblock.swap(0, Ordering::SeqCst) {
                    0 => {}
                    2 => {
                        ReplyWriter::new(out, conn.resp3).error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
                        break Woken::Finished(flush(srv, conn, stream, out).await);
                    }
                    _ => {
                        write_timeout_reply(srv, out, conn.resp3, block.timeout_reply);
                        break Woken::Finished(flush(srv, conn, stream, out).await);
                    }
                }
            }
            r = stream.read_buf(inbuf) => {
                // Requests that arrive while blocked wait in the buffer; EOF ends the wait.
                if matches!(r, Ok(0) | Err(_)) {
                    break Woken::Finished(false);
                }
            }
        }
    };
    srv.blocking.unregister(info.id, block.db, &block.keys);
    info.blocked.store(false, Ordering::Relaxed);
    if matches!(woken, Woken::Finished(_)) {
        // It may have been the one a signal picked: the next waiter gets its turn.
        pass_the_turn(srv, block);
        srv.blocking.served(info.id);
    }
    woken
}

/// A key signals only its oldest waiter (`BlockRegistry::signal`); one that was served or
/// stopped waiting hands the turn on to the next, so blocked clients are served one at a
/// time in the order they blocked, as Redis serves them.
fn pass_the_turn(srv: &Server, block: &BlockRequest) {
    for key in &block.keys {
        srv.blocking.signal(block.db, key);
    }
}
