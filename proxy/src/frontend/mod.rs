//! Client-facing side of the proxy: the per-thread reactor context shared by the connections
//! it serves, and the protocol front ends (`redis`: RESP2/RESP3; `memcache`: text and meta).

pub mod info;
pub mod memcache;
pub mod redis;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::Arc;

use crate::backend::{Backend, BackendLimits, BackendSpec};
use crate::config::ProxyConfig;

/// Counters of the whole proxy (every thread).
#[derive(Debug, Default)]
pub struct Stats {
    pub connections_received: AtomicU64,
    pub connected_clients: AtomicI64,
    pub commands: AtomicU64,
    /// Memcached: keys asked by get-type commands, hits among them, storage commands.
    pub mc_get: AtomicU64,
    pub mc_hits: AtomicU64,
    pub mc_set: AtomicU64,
}

/// State shared by every reactor thread.
pub struct Shared {
    pub config: ProxyConfig,
    pub started: std::time::Instant,
    pub next_client_id: AtomicU64,
    pub stats: Stats,
    pub port: AtomicU64,
    /// CLIENT LIST: id → (address, name).
    pub clients: parking_lot::Mutex<HashMap<u64, (String, Option<Vec<u8>>)>>,
    pub metrics: crate::metrics::Registry,
    /// Per engine: is the first reactor's database-0 connection up (for /metrics).
    pub engine_up: Vec<Arc<std::sync::atomic::AtomicBool>>,
}

impl Shared {
    pub fn new(config: ProxyConfig) -> Arc<Shared> {
        Arc::new(Shared {
            started: std::time::Instant::now(),
            next_client_id: AtomicU64::new(1),
            stats: Stats::default(),
            port: AtomicU64::new(0),
            clients: parking_lot::Mutex::new(HashMap::new()),
            metrics: Default::default(),
            engine_up: (0..config.engines.len()).map(|_| Default::default()).collect(),
            config,
        })
    }
}

/// When a request arrived, and what it was (for the metrics).
pub struct Timing {
    pub command: &'static str,
    pub started: tokio::time::Instant,
}

/// One reactor thread's context: its pooled backend connections and metrics recorder.
pub struct Reactor {
    pub shared: Arc<Shared>,
    pub limits: Rc<BackendLimits>,
    pools: RefCell<HashMap<(usize, u32, bool), Rc<Backend>>>,
    recorder: Arc<crate::metrics::Recorder>,
    /// The tenant label of every request (one tenant until tenants land).
    tenant: Arc<str>,
}

impl Reactor {
    /// Must be called inside the thread's `LocalSet`: it opens the database-0 connections.
    pub fn new(shared: Arc<Shared>) -> Rc<Reactor> {
        let limits = Rc::new(BackendLimits {
            connect_timeout: shared.config.connect_timeout,
            timeout: shared.config.timeout,
            max_inflight: shared.config.max_inflight,
        });
        let recorder = shared.metrics.recorder();
        let r = Rc::new(Reactor { shared, limits, pools: RefCell::new(HashMap::new()), recorder, tenant: Arc::from("default") });
        for e in 0..r.engines() {
            r.backend(e, 0, false);
        }
        r
    }

    pub fn engines(&self) -> usize {
        self.shared.config.engines.len()
    }

    fn spec(&self, engine: usize, db: u32, resp3: bool, dedicated: bool) -> BackendSpec {
        let up_flag = (!dedicated && db == 0 && !resp3).then(|| self.shared.engine_up[engine].clone());
        BackendSpec { engine, addr: self.shared.config.engines[engine].clone(), db, resp3, dedicated, up_flag }
    }

    /// The shared, pipelined connection to `engine` for clients on `db` speaking RESP2/3.
    pub fn backend(&self, engine: usize, db: u32, resp3: bool) -> Rc<Backend> {
        self.pools
            .borrow_mut()
            .entry((engine, db, resp3))
            .or_insert_with(|| Backend::start(self.spec(engine, db, resp3, false), self.limits.clone()))
            .clone()
    }

    /// A new connection for one client alone.
    pub fn dedicated(&self, engine: usize, db: u32, resp3: bool) -> Rc<Backend> {
        Backend::start(self.spec(engine, db, resp3, true), self.limits.clone())
    }

    /// Records one answered request.
    pub fn record(&self, protocol: &'static str, t: Timing, error: bool) {
        let key = crate::metrics::Key { tenant: self.tenant.clone(), protocol, command: t.command };
        self.recorder.record(&key, t.started.elapsed(), error);
    }

    /// Whether this thread's connection to `engine` is up.
    pub fn engine_up(&self, engine: usize) -> bool {
        self.backend(engine, 0, false).is_up()
    }
}
