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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Reactor, Timing};

/// Redis's client-query-buffer-limit, for both front ends.
const QUERY_BUFFER_LIMIT: usize = 1024 * 1024 * 1024;

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
    /// Woken when an engine answers one of this client's requests.
    fn notify(&self) -> &Notify;
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

/// Serves one client until it leaves or is closed; `id` is its CLIENT LIST entry.
pub async fn serve<F: Frontend>(mut frontend: F, mut stream: TcpStream, id: u64) {
    let _ = stream.set_nodelay(true);
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut out = BytesMut::with_capacity(16 * 1024);
    loop {
        while frontend.state() == State::Reading {
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
        if !flush(&mut stream, &mut out).await || finished {
            break;
        }
        if was_blocked && state == State::Reading && !input.is_empty() {
            continue;
        }
        if !wait(&mut stream, &mut input, frontend.notify(), state != State::Closing).await {
            break;
        }
    }
    frontend.close();
    let shared = &frontend.reactor().shared;
    shared.clients.lock().remove(&id);
    shared.stats.connected_clients.fetch_sub(1, Ordering::Relaxed);
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

/// Writes the replies in `out`; false if the client is gone.
async fn flush(stream: &mut TcpStream, out: &mut BytesMut) -> bool {
    if out.is_empty() {
        return true;
    }
    let ok = stream.write_all(out).await.is_ok();
    out.clear();
    ok
}

/// Waits for request bytes (when `reading`) or for a reply to be ready (`notify`); false when
/// the client is gone or its unparsed input passed the query buffer limit.
async fn wait(stream: &mut TcpStream, input: &mut BytesMut, notify: &Notify, reading: bool) -> bool {
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
