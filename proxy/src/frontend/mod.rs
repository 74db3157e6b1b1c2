//! Client-facing side of the proxy: the per-thread reactor context shared by the connections
//! it serves, and the protocol front ends (`redis`: RESP2/RESP3; `memcache`: text and meta).

pub mod info;
pub mod memcache;
pub mod redis;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::backend::{Backend, BackendLimits, BackendSpec};
use crate::config::ProxyConfig;
use crate::slots::SlotMap;

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

/// The engines and who owns which slot: replaced as a whole when the configuration is
/// reloaded.
pub struct Topology {
    pub engines: Vec<String>,
    pub slot_map: SlotMap,
    /// Per engine: is a database-0 connection up (for /metrics and INFO).
    pub engine_up: Vec<Arc<AtomicBool>>,
}

impl Topology {
    pub fn new(engines: Vec<String>, slot_map: SlotMap) -> Arc<Topology> {
        let engine_up = engines.iter().map(|_| Arc::new(AtomicBool::new(false))).collect();
        Arc::new(Topology { engines, slot_map, engine_up })
    }
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
    pub near_cache: Option<crate::near_cache::NearCache>,
    topology: parking_lot::RwLock<Arc<Topology>>,
    /// Bumped on every reload; reactors compare it with the topology they hold.
    generation: AtomicU64,
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
            topology: parking_lot::RwLock::new(Topology::new(config.engines.clone(), config.slot_map.clone())),
            generation: AtomicU64::new(0),
            near_cache: (!config.near_cache_ttl.is_zero())
                .then(|| crate::near_cache::NearCache::new(config.near_cache_ttl, config.near_cache_entries)),
            config,
        })
    }

    pub fn topology(&self) -> Arc<Topology> {
        self.topology.read().clone()
    }

    /// Re-reads the configuration file and applies its engines and slot map (other settings
    /// need a restart). Clients stay connected; an invalid file changes nothing.
    pub fn reload(&self) -> Result<(), String> {
        let Some((path, overrides)) = &self.config.reload_from else {
            return Ok(());
        };
        let file = crate::config::ProxySettings::from_file(path).map_err(|e| e.to_string())?;
        let fresh = overrides.clone().or(file).resolve().map_err(|e| e.to_string())?;
        let current = self.topology();
        if current.engines == fresh.engines && current.slot_map == fresh.slot_map {
            return Ok(());
        }
        *self.topology.write() = Topology::new(fresh.engines.clone(), fresh.slot_map);
        self.generation.fetch_add(1, Ordering::Release);
        tracing::info!(engines = ?fresh.engines, "reloaded the slot map");
        Ok(())
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
    /// Shared connections per (engine address, database, RESP3).
    pools: RefCell<HashMap<(String, u32, bool), Rc<Backend>>>,
    /// The topology this thread routes with, and its generation.
    topo: RefCell<(u64, Arc<Topology>)>,
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
        let topo = RefCell::new((shared.generation.load(Ordering::Acquire), shared.topology()));
        let r = Rc::new(Reactor { shared, limits, pools: RefCell::new(HashMap::new()), topo, recorder, tenant: Arc::from("default") });
        for e in 0..r.engines() {
            r.backend(e, 0, false);
        }
        r
    }

    /// The current topology (picking up a reload: connections to engines no longer listed
    /// are closed).
    pub fn topology(&self) -> Arc<Topology> {
        let g = self.shared.generation.load(Ordering::Acquire);
        let mut t = self.topo.borrow_mut();
        if t.0 != g {
            *t = (g, self.shared.topology());
            let engines = &t.1.engines;
            self.pools.borrow_mut().retain(|(addr, _, _), b| {
                let keep = engines.iter().position(|e| e == addr) == Some(b.spec.engine);
                if !keep {
                    b.shutdown();
                }
                keep
            });
        }
        t.1.clone()
    }

    pub fn engines(&self) -> usize {
        self.topology().engines.len()
    }

    fn spec(&self, engine: usize, db: u32, resp3: bool, dedicated: bool) -> BackendSpec {
        let topo = self.topology();
        let up_flag = (!dedicated && db == 0 && !resp3).then(|| topo.engine_up[engine].clone());
        BackendSpec { engine, addr: topo.engines[engine].clone(), db, resp3, dedicated, up_flag }
    }

    /// The shared, pipelined connection to `engine` for clients on `db` speaking RESP2/3.
    pub fn backend(&self, engine: usize, db: u32, resp3: bool) -> Rc<Backend> {
        let addr = self.topology().engines[engine].clone();
        if let Some(b) = self.pools.borrow().get(&(addr.clone(), db, resp3)) {
            return b.clone();
        }
        let b = Backend::start(self.spec(engine, db, resp3, false), self.limits.clone());
        self.pools.borrow_mut().insert((addr, db, resp3), b.clone());
        b
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
