//! Handing connections to reactor threads: each reactor takes them from a channel of its own,
//! new ones from the listener and moving ones (elastic threading) from another reactor, with
//! their state. The senders live here, in the server layer, because a moving connection
//! carries the command layer's `Conn`; the node's `Reactors` keep only counters.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc::UnboundedSender;

use super::socket::StdSocket;
use super::state::ClientInfo;

/// What a reactor receives: a new connection, or one moving in with its state.
pub enum Handoff {
    New(StdSocket, Arc<ClientInfo>),
    Moved(StdSocket, Arc<ClientInfo>, Box<Carried>),
}

/// A moving connection's state: everything but the socket.
pub struct Carried {
    pub conn: crate::command::Conn,
    /// Bytes read but not yet executed (a pipeline's rest, a partial request).
    pub inbuf: bytes::BytesMut,
}

/// Every reactor's channel, by reactor index.
#[derive(Default)]
pub struct Dispatch {
    senders: Mutex<Vec<UnboundedSender<Handoff>>>,
}

impl Dispatch {
    pub fn attach(&self, senders: Vec<UnboundedSender<Handoff>>) {
        *self.senders.lock() = senders;
    }

    /// Closes every reactor's channel (shutdown).
    pub fn detach(&self) {
        self.senders.lock().clear();
    }

    /// Hands a connection to reactor `i`; gives it back if that reactor is gone (shutdown).
    pub fn send(&self, i: usize, h: Handoff) -> Result<(), Handoff> {
        match self.senders.lock().get(i) {
            Some(tx) => tx.send(h).map_err(|e| e.0),
            None => Err(h),
        }
    }
}
