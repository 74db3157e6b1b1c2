//! A connected client as the rest of the engine sees it (`ClientInfo`): its identity and
//! address, what CLIENT LIST shows, its mailbox for pub/sub messages and MONITOR lines, and
//! the flags other threads set to kill, unblock or move it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::limits::{Check, Class, ClientLimits};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Every connected client by id (`Server::clients`), a ranked lock (`lock_order`).
pub type Registry = crate::lock_order::Ranked<std::collections::HashMap<u64, Arc<ClientInfo>>>;

/// An empty registry.
pub fn registry() -> Registry {
    crate::lock_order::Ranked::new(crate::lock_order::Rank::Clients, std::collections::HashMap::new())
}

/// What the registry knows of a connected client (CLIENT LIST, CLIENT KILL).
pub struct ClientInfo {
    pub id: u64,
    /// The connection's socket, for CLIENT KILL and shutdown.
    pub fd: i32,
    pub addr: String,
    pub laddr: String,
    pub created: Instant,
    pub name: Mutex<Option<String>>,
    /// The ACL user the connection is authenticated as.
    pub user: Mutex<String>,
    /// Whether it has authenticated (or needs not): `server::busy`, which answers it at the
    /// socket while a script holds its reactor, refuses it otherwise.
    pub authenticated: AtomicBool,
    /// The SELECTed database (0-15, within its namespace).
    pub db: AtomicUsize,
    /// The connection's namespace (TERRACE.NAMESPACE; 0: the default one).
    pub namespace: AtomicUsize,
    /// Index of the last command run (usize::MAX: none yet).
    pub last_cmd: AtomicUsize,
    /// Milliseconds since the server started, at the client's last request.
    pub last_active_ms: AtomicU64,
    pub resp: AtomicU8,
    pub no_evict: AtomicBool,
    pub in_multi: AtomicBool,
    pub blocked: AtomicBool,
    pub killed: AtomicBool,
    /// CLIENT UNBLOCK request: 0 none, 1 reply as a timeout, 2 reply with an error.
    pub unblock: AtomicU8,
    /// Woken to make the connection notice `killed` or `unblock`.
    pub wake: Notify,
    /// Pub/sub messages waiting to be written, and the signal that some arrived.
    pub mailbox: Mutex<bytes::BytesMut>,
    pub mailbox_notify: Notify,
    /// Woken once when the client is killed (a connection stuck writing to a client that
    /// does not read waits on it too).
    pub kill_notify: Notify,
    /// The server's client limits.
    pub limits: Arc<ClientLimits>,
    /// Replies being written to the socket now (output not in the mailbox), and when the
    /// client's pending output went over its soft limit (unix ms; 0: it is not over).
    pub out_pending: AtomicUsize,
    pub soft_since: AtomicU64,
    /// Bytes of unparsed input (CLIENT LIST qbuf).
    pub qbuf: AtomicUsize,
    /// Subscriptions: channels, patterns, shard channels (CLIENT LIST).
    pub sub: AtomicUsize,
    pub psub: AtomicUsize,
    pub ssub: AtomicUsize,
    /// In MONITOR mode (CLIENT LIST flag O).
    pub monitor: AtomicBool,
    /// Another client redirects its tracking invalidations here.
    pub push_target: AtomicBool,
    /// The reactor serving the connection, and the one it is asked to move to (usize::MAX:
    /// none), with the waker of an idle connection's task (a plain slot, not a `Notify`: it
    /// is polled on every read, and must cost next to nothing).
    pub reactor: AtomicUsize,
    pub move_to: AtomicUsize,
    relocate: Mutex<Option<std::task::Waker>>,
    /// The connection's task waits for input with nothing pending (a busy script's reactor
    /// cannot run it: `server::busy` may answer its requests meanwhile).
    pub idle_reading: AtomicBool,
    /// What requests answered by `server::busy` did to the transaction, for the task to
    /// apply before its next request.
    deferred: Mutex<Vec<Deferred>>,
    pub deferred_pending: AtomicBool,
}

/// A change to a connection's transaction state made while its task could not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deferred {
    /// MULTI began.
    Multi,
    /// A command was refused while queuing: EXEC will abort.
    AbortMulti,
    /// EXEC or DISCARD ended the transaction (and its WATCHes).
    EndMulti,
}

impl ClientInfo {
    /// Asks the connection to move to reactor `to` at its next safe point.
    pub fn request_move(&self, to: usize) {
        self.move_to.store(to, Ordering::Release);
        if let Some(w) = self.relocate.lock().take() {
            w.wake();
        }
    }

    /// Resolves once a move is asked for.
    pub fn move_requested(&self) -> impl std::future::Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.move_to.load(Ordering::Acquire) != usize::MAX {
                return std::task::Poll::Ready(());
            }
            {
                let mut slot = self.relocate.lock();
                if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *slot = Some(cx.waker().clone());
                }
            }
            if self.move_to.load(Ordering::Acquire) != usize::MAX {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
    }

    /// The class whose output limits apply: pub/sub once subscribed, else normal.
    pub fn class(&self) -> Class {
        if self.sub.load(Ordering::Relaxed) + self.psub.load(Ordering::Relaxed) + self.ssub.load(Ordering::Relaxed) > 0 {
            Class::Pubsub
        } else {
            Class::Normal
        }
    }

    /// Output waiting for this client: the mailbox and what is being written now.
    pub fn output_pending(&self) -> usize {
        self.mailbox.lock().len() + self.out_pending.load(Ordering::Relaxed)
    }

    /// Checks `pending` bytes of output against the client's limits; over them, closes the
    /// client (with a log line and a count, as Redis does) and returns false.
    pub fn within_output_limit(&self, pending: usize) -> bool {
        match self.limits.check(self.class(), pending, &self.soft_since, crate::clock::now_ms() as u64) {
            Check::Within => true,
            Check::Over(which) => {
                if !self.killed.load(Ordering::Relaxed) {
                    tracing::warn!(
                        client = self.id,
                        addr = %self.addr,
                        class = self.class().name(),
                        pending,
                        "closing client for overcoming of its output buffer {which} limit"
                    );
                    self.limits.output_disconnections.fetch_add(1, Ordering::Relaxed);
                }
                self.mailbox.lock().clear();
                self.request_kill();
                false
            }
        }
    }

    pub fn new(id: u64, fd: i32, addr: String, laddr: String, last_active_ms: u64, limits: Arc<ClientLimits>) -> ClientInfo {
        ClientInfo {
            id,
            fd,
            addr,
            laddr,
            created: Instant::now(),
            name: Mutex::new(None),
            user: Mutex::new("default".to_string()),
            db: AtomicUsize::new(0),
            namespace: AtomicUsize::new(0),
            authenticated: AtomicBool::new(false),
            last_cmd: AtomicUsize::new(usize::MAX),
            last_active_ms: AtomicU64::new(last_active_ms),
            resp: AtomicU8::new(2),
            no_evict: AtomicBool::new(false),
            in_multi: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            unblock: AtomicU8::new(0),
            wake: Notify::new(),
            mailbox: Mutex::new(bytes::BytesMut::new()),
            mailbox_notify: Notify::new(),
            kill_notify: Notify::new(),
            limits,
            out_pending: AtomicUsize::new(0),
            soft_since: AtomicU64::new(0),
            qbuf: AtomicUsize::new(0),
            sub: AtomicUsize::new(0),
            psub: AtomicUsize::new(0),
            ssub: AtomicUsize::new(0),
            reactor: AtomicUsize::new(0),
            move_to: AtomicUsize::new(usize::MAX),
            relocate: Mutex::new(None),
            monitor: AtomicBool::new(false),
            push_target: AtomicBool::new(false),
            idle_reading: AtomicBool::new(false),
            deferred: Mutex::new(Vec::new()),
            deferred_pending: AtomicBool::new(false),
        }
    }

    /// Records a change to the transaction state for the task (`server::busy`), keeping
    /// `in_multi` as it will be.
    pub fn defer(&self, step: Deferred) {
        match step {
            Deferred::Multi => self.in_multi.store(true, Ordering::Relaxed),
            Deferred::EndMulti => self.in_multi.store(false, Ordering::Relaxed),
            Deferred::AbortMulti => {}
        }
        self.deferred.lock().push(step);
        self.deferred_pending.store(true, Ordering::Release);
    }

    /// The deferred steps, in order (empty when none).
    pub fn take_deferred(&self) -> Vec<Deferred> {
        if !self.deferred_pending.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.deferred.lock())
    }

    /// Asks the connection to close at its next wake-up (without the registry lock, so
    /// without shutting the socket down: the connection is woken through its mailbox).
    pub fn request_kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        self.mailbox_notify.notify_one();
        self.kill_notify.notify_one();
    }

    /// Marks the client killed, wakes it if it is parked (blocked, paused) and shuts its
    /// socket down so a pending read returns. Only called with the client registry locked:
    /// a connection leaves the registry before its socket closes, so `fd` is still its own.
    pub(crate) fn kill_locked(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        self.kill_notify.notify_one();
        // SAFETY: shutdown(2) on a descriptor this connection still owns (see above).
        unsafe {
            libc::shutdown(self.fd, libc::SHUT_RDWR);
        }
    }
}
