//! The one connection loop both front ends run, and the reply queue it drains: read bytes,
//! hand complete requests to the protocol, write the replies at the front of the queue as
//! soon as engines have answered them, in request order.
//!
//! A protocol plugs in through `Frontend`, the seam pelikan draws between wire and storage
//! (Parse / Execute / Compose): `request` parses one request from the input and executes it
//! (sending it to engines, queueing what its reply waits on), `compose` writes a queued
//! reply once it is complete. Everything else — buffers, back-pressure, the query buffer
//! limit, timing each request for the metrics, closing — is here, once.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use super::{Reactor, Timing};
use crate::backend::Owner;

/// Redis's client-query-buffer-limit, for both front ends.
const QUERY_BUFFER_LIMIT: usize = 1024 * 1024 * 1024;
/// Requests a client may have waiting for their replies to be written before its next
/// requests wait (their bytes stay unread in the socket): with `PAUSE_AT`, what bounds the
/// replies the proxy holds for a client that pipelines and does not read, and how much of a
/// shared engine connection one client's pipeline can fill ahead of others.
const PIPELINE_WINDOW: usize = 128;
/// Reply bytes held for a client (arrived, not yet written) past which its next requests wait.
const PAUSE_AT: usize = 4 << 20;
/// A connection's buffers are given back past this size once empty, so one huge reply or
/// request does not keep its memory for the connection's life.
const KEEP_BUFFER: usize = 1 << 20;

/// A client holding more reply bytes than this may be closed while all clients together
/// hold more than `client_memory_limit`; one holding less is not what fills it.
const EVICTABLE: usize = 1 << 20;

/// What handling one request did with the input.
pub struct Handled {
    /// Bytes of the input the request took (0 when it closed the connection on them).
    pub consumed: usize,
    /// The command's name for the metrics; None for input that was no request (an empty
    /// line, the rest of a refused data block).
    pub command: Option<&'static str>,
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Taking requests.
    Reading,
    /// A blocking command waits for its reply: input is buffered, not parsed.
    Blocked,
    /// The last replies are written, then the connection closes (QUIT, a protocol error).
    Closing,
    /// Closes now (e.g. a pub/sub relay whose engine connection died).
    Finished,
}

/// One protocol's side of a client connection.
// The futures run on the reactor thread's LocalSet, never across threads: no Send bound.
#[allow(async_fn_in_trait)]
pub trait Frontend {
    /// What a request leaves in the reply queue until its reply can be written.
    type Pending;
    /// The protocol's name in the metrics.
    const PROTOCOL: &'static str;

    /// Parses the request at the start of `input` and executes it; None when more bytes are
    /// needed.
    async fn request(&mut self, input: &[u8]) -> Option<Handled>;
    /// Writes the reply of the entry at the front of the queue if it is complete; false (and
    /// nothing written) while it waits on an engine.
    fn compose(&mut self, entry: &mut Self::Pending, out: &mut BytesMut) -> bool;
    /// Whether a written reply is an error, for the metrics.
    fn is_error(reply: &[u8]) -> bool;
    /// Called when every queued reply is written (a pub/sub relay forwards messages then).
    fn idle(&mut self, _out: &mut BytesMut) {}

    fn replies(&mut self) -> &mut Replies<Self::Pending>;
    fn state(&self) -> State;
    fn reactor(&self) -> &Rc<Reactor>;
    /// The tenant the metrics count the client's requests under.
    fn tenant_name(&self) -> Arc<str>;
    /// Woken when an engine answers one of this client's requests; counts the reply bytes
    /// the client holds.
    fn owner(&self) -> &Owner;
    /// Whether the client is in pub/sub mode (its output limit is the pub/sub one).
    fn subscribed(&self) -> bool {
        false
    }
    /// Work a reply left for later that needs to wait (a blocking call sent again once its
    /// slot has moved); true if there was some.
    async fn resume(&mut self) -> bool {
        false
    }
    /// Releases what the client holds (its own engine connections).
    fn close(&mut self) {}
}

/// The replies to come, in request order; a request's last entry carries its timing.
pub struct Replies<P> {
    queue: VecDeque<(P, Option<Timing>)>,
}

impl<P> Default for Replies<P> {
    fn default() -> Self {
        Replies { queue: VecDeque::new() }
    }
}

impl<P> Replies<P> {
    pub fn push(&mut self, p: P) {
        self.queue.push_back((p, None));
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The entry whose reply is to be written next.
    pub fn front_mut(&mut self) -> Option<&mut P> {
        self.queue.front_mut().map(|(p, _)| p)
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    /// Times the request whose entries were pushed after the queue held `before` entries.
    fn stamp(&mut self, before: usize, timing: Timing) {
        if self.queue.len() > before {
            self.queue.back_mut().expect("pushed").1 = Some(timing);
        }
    }
}

/// A client's byte stream: a TCP connection (`set_nodelay` already set), or TLS over one.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin {}
impl<S: AsyncRead + AsyncWrite + Unpin> ClientStream for S {}

/// Serves one client until it leaves or is closed; `id` is its CLIENT LIST entry.
pub async fn serve<F: Frontend, S: ClientStream>(mut frontend: F, mut stream: S, id: u64) {
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut out = BytesMut::with_capacity(16 * 1024);
    let mut seen = frontend.reactor().topology_generation();
    loop {
        if frontend.reactor().tenant_removed(&frontend.tenant_name(), &mut seen) {
            // Its tenant was deleted (the console, a reload): as the engines close its
            // namespace's connections, the proxy closes its clients — one left connected
            // would make the namespace again on its next request.
            break;
        }
        while frontend.state() == State::Reading && has_room(&mut frontend) {
            let (before, started) = (frontend.replies().len(), Instant::now());
            let Some(handled) = frontend.request(&input).await else { break };
            if let Some(command) = handled.command {
                let timing = Timing { tenant: frontend.tenant_name(), command, started };
                frontend.replies().stamp(before, timing);
            }
            input.advance(handled.consumed);
        }
        let was_blocked = frontend.state() == State::Blocked;
        drain(&mut frontend, &mut out);
        let state = frontend.state();
        let finished = state == State::Finished || (state == State::Closing && frontend.replies().is_empty());
        let flushed = flush(&mut frontend, &mut stream, &mut out).await;
        if flushed == Flushed::Closed || finished {
            break;
        }
        if frontend.resume().await {
            continue;
        }
        if flushed == Flushed::RepliesArrived || (was_blocked && state == State::Reading && !input.is_empty()) {
            continue;
        }
        // A client over its window is not read from until its replies are written.
        let reading = state != State::Closing && has_room(&mut frontend);
        if !wait(&mut stream, &mut input, &frontend.owner().notify, reading).await {
            break;
        }
        if input.is_empty() && input.capacity() > KEEP_BUFFER {
            input = BytesMut::with_capacity(16 * 1024);
        }
    }
    frontend.close();
    let shared = &frontend.reactor().shared;
    shared.clients.lock().remove(&id);
    shared.stats.connected_clients.fetch_sub(1, Ordering::Relaxed);
}

/// Whether the client may send another request now: it has fewer than `PIPELINE_WINDOW`
/// replies to come and under `PAUSE_AT` reply bytes waiting to be written.
fn has_room<F: Frontend>(frontend: &mut F) -> bool {
    frontend.replies().len() < PIPELINE_WINDOW && frontend.owner().held() < PAUSE_AT
}

/// Moves complete replies from the front of the queue to `out`.
fn drain<F: Frontend>(frontend: &mut F, out: &mut BytesMut) {
    while let Some((mut entry, timing)) = frontend.replies().queue.pop_front() {
        let start = out.len();
        if !frontend.compose(&mut entry, out) {
            frontend.replies().queue.push_front((entry, timing));
            break;
        }
        if let Some(t) = timing {
            let error = F::is_error(&out[start..]);
            frontend.reactor().record(F::PROTOCOL, t, error);
        }
    }
    if frontend.replies().is_empty() {
        frontend.idle(out);
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Flushed {
    Written,
    /// Written, and replies arrived meanwhile (to be drained before waiting again).
    RepliesArrived,
    /// The client is gone, or was closed for the replies it would not read.
    Closed,
}

/// Writes the replies in `out`. While the client does not read, replies arriving for it are
/// held; past its output limit (`client_output_limit`, `pubsub_output_limit`) it is closed,
/// with a log line and a count, as Redis closes a client over `client-output-buffer-limit`.
async fn flush<F: Frontend, S: ClientStream>(frontend: &mut F, stream: &mut S, out: &mut BytesMut) -> Flushed {
    if out.is_empty() {
        return Flushed::Written;
    }
    let shared = frontend.reactor().shared.clone();
    let limit = if frontend.subscribed() { shared.config.pubsub_output_limit } else { shared.config.client_output_limit };
    let pending = out.len();
    let mut arrived = false;
    let written = {
        // (A TLS stream may keep records back until flushed; a TCP stream's flush is nothing.)
        let write = async {
            stream.write_all(out).await?;
            stream.flush().await
        };
        tokio::pin!(write);
        loop {
            tokio::select! {
                r = &mut write => break r.is_ok(),
                _ = frontend.owner().notify.notified() => {
                    arrived = true;
                    let held = frontend.owner().held() + pending;
                    if held > limit {
                        tracing::warn!(held, limit, "closing a client over its output limit (it does not read its replies)");
                        shared.stats.output_limit_disconnections.fetch_add(1, Ordering::Relaxed);
                        break false;
                    }
                    // All clients together past theirs: one that holds a share worth taking
                    // back goes (Redis 7's client eviction closes the largest; those are the
                    // ones replies keep arriving for).
                    let total = shared.client_bytes.load(Ordering::Relaxed);
                    if total > shared.config.client_memory_limit && held > EVICTABLE {
                        tracing::warn!(held, total, limit = shared.config.client_memory_limit, "closing a client: all clients hold more than client_memory_limit");
                        shared.stats.output_limit_disconnections.fetch_add(1, Ordering::Relaxed);
                        break false;
                    }
                }
            }
        }
    };
    out.clear();
    if out.capacity() > KEEP_BUFFER {
        *out = BytesMut::with_capacity(16 * 1024);
    }
    match (written, arrived) {
        (false, _) => Flushed::Closed,
        (true, true) => Flushed::RepliesArrived,
        (true, false) => Flushed::Written,
    }
}

/// Waits for request bytes (when `reading`) or for a reply to be ready (`notify`); false when
/// the client is gone or its unparsed input passed the query buffer limit.
async fn wait<S: ClientStream>(stream: &mut S, input: &mut BytesMut, notify: &tokio::sync::Notify, reading: bool) -> bool {
    tokio::select! {
        r = stream.read_buf(input), if reading => {
            if matches!(r, Ok(0) | Err(_)) {
                return false;
            }
            if input.len() > QUERY_BUFFER_LIMIT {
                tracing::warn!("closing a client that exceeded the query buffer limit");
                return false;
            }
            true
        }
        _ = notify.notified() => true,
    }
}
