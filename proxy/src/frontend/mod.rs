//! Client-facing side of the proxy: the per-thread reactor context shared by the connections
//! it serves, the connection loop and reply queue (`connection`), and the protocol front ends
//! plugged into it (`redis`: RESP2/RESP3; `memcache`: text and meta).

pub mod cluster;
pub(crate) mod connection;
pub(crate) use connection::ClientStream;
mod info;
pub mod memcache;
pub(crate) mod redis;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::backend::{Backend, BackendSpec, LinkSettings};
use crate::config::ProxyConfig;
use crate::slots::SlotMap;
use crate::tenants::{Password, Tenant};

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
    /// Clients closed for holding more replies than their output limit, or than their share
    /// while all clients together hold more than `client_memory_limit`.
    pub output_limit_disconnections: AtomicU64,
    /// Connections refused for `maxclients`.
    pub rejected_connections: AtomicU64,
    /// `commands` sampled every 100 ms (INFO's instantaneous_ops_per_sec).
    pub ops: parking_lot::Mutex<crate::ops_meter::OpsMeter>,
}

/// The engines and who owns which slot: replaced as a whole when the configuration is
/// reloaded.
pub struct Topology {
    pub engines: Vec<String>,
    /// Every connection target: the engines (index = engine index), then their replicas.
    pub addrs: Vec<String>,
    /// Per engine, the indices in `addrs` of its replicas.
    pub replicas_of: Vec<Vec<usize>>,
    pub slot_map: SlotMap,
    /// Per engine: is a database-0 connection up (for /metrics and INFO).
    pub engine_up: Vec<Arc<AtomicBool>>,
    /// The default tenant first, then the configured ones.
    pub tenants: Vec<Arc<Tenant>>,
    /// The proxies cluster-mode clients are shown (`cluster`); empty: this one alone.
    pub cluster_nodes: Vec<String>,
}

impl Topology {
    pub fn new(config: &ProxyConfig) -> Arc<Topology> {
        let engine_up = config.engines.iter().map(|_| Arc::new(AtomicBool::new(false))).collect();
        let mut tenants = vec![Tenant::new(crate::tenants::DEFAULT, config.password.clone().map(Password::Plain), None, None, config.default_max_memory, 0)];
        for (i, t) in config.tenants.iter().enumerate() {
            let max_memory = t.max_memory.as_ref().and_then(crate::config::size_value).unwrap_or(0);
            let mut options = Vec::new();
            if let Some(c) = &t.compression {
                options.push(("COMPRESSION", c.clone()));
            }
            if let Some(m) = &t.compression_mode {
                options.push(("COMPRESSION-MODE", m.clone()));
            }
            if let Some(n) = t.compression_min_size {
                options.push(("COMPRESSION-MIN-SIZE", n.to_string()));
            }
            if let Some(m) = &t.storage_mode {
                options.push(("STORAGE-MODE", m.clone()));
            }
            if let Some(p) = &t.tier_policy {
                options.push(("TIER-POLICY", p.clone()));
            }
            if let Some(w) = &t.wal {
                options.push(("WAL", w.clone()));
            }
            let password = match (&t.password, &t.password_hash, &t.password_sha256) {
                (Some(p), _, _) => Some(Password::Plain(p.clone())),
                (None, Some(phc), _) => Some(Password::Argon2(phc.clone())),
                (None, None, Some(h)) => Password::from_sha256_hex(h),
                (None, None, None) => None,
            };
            tenants.push(
                Tenant::new(&t.name, password, t.memcache_port, t.max_qps, max_memory, i as u32 + 1)
                    .with_namespace_options(options)
                    .with_replica_reads(t.replica_reads.unwrap_or(false)),
            );
        }
        // Replicas get connection indices after the engines'.
        let mut addrs = config.engines.clone();
        let mut replicas_of = Vec::with_capacity(config.engines.len());
        for e in 0..config.engines.len() {
            let mine = config.replicas.get(e).map(Vec::as_slice).unwrap_or_default();
            replicas_of.push((addrs.len()..addrs.len() + mine.len()).collect());
            addrs.extend(mine.iter().cloned());
        }
        Arc::new(Topology {
            addrs,
            replicas_of,
            engines: config.engines.clone(),
            slot_map: config.slot_map.clone(),
            engine_up,
            tenants,
            cluster_nodes: config.cluster_nodes.clone(),
        })
    }

    pub fn default_tenant(&self) -> Arc<Tenant> {
        self.tenants[0].clone()
    }

    pub fn tenant(&self, name: &[u8]) -> Option<Arc<Tenant>> {
        self.tenants.iter().find(|t| t.name.as_bytes() == name).cloned()
    }
}

/// Failed AUTH attempts allowed per client address and user name in `AUTH_WINDOW` (the
/// console's login has the same limit, per address).
const AUTH_FAILURES: u32 = 5;
const AUTH_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// Whose failed AUTHs count together: an address and the user name tried (its first 64
/// bytes: no tenant's name is longer).
pub type AuthKey = (std::net::IpAddr, Vec<u8>);

/// State shared by every reactor thread.
pub struct Shared {
    pub config: ProxyConfig,
    pub started: std::time::Instant,
    pub next_client_id: AtomicU64,
    pub stats: Stats,
    pub port: AtomicU64,
    /// CLIENT LIST: id → address, name, tenant.
    pub clients: parking_lot::Mutex<HashMap<u64, ClientEntry>>,
    pub metrics: crate::metrics::Registry,
    pub near_cache: Option<crate::near_cache::NearCache>,
    topology: parking_lot::RwLock<Arc<Topology>>,
    /// Bumped on every reload; reactors compare it with the topology they hold.
    generation: AtomicU64,
    /// The digest of the document last set by `TERRACE.TOPOLOGY SET`, for the console's
    /// reconcile loop; None while the configuration file's topology is in force.
    pushed: parking_lot::Mutex<Option<String>>,
    /// Woken when the topology changes (the control thread opens and closes tenants' ports).
    pub topology_changed: tokio::sync::Notify,
    /// Failed AUTH attempts per client address and user name (`AuthKey`).
    pub auth_failures: terrace_commands::auth_limit::FailureLimiter<AuthKey>,
    /// Slots whose requests wait while they change engine.
    pub holds: crate::hold::Holds,
    /// Reply bytes every client together holds unwritten (`client_memory_limit`).
    pub client_bytes: Arc<std::sync::atomic::AtomicUsize>,
    /// Clients at once: `maxclients`, lowered to what the open-file limit allows.
    pub maxclients: usize,
    /// Per tenant namespace with pooled connections: set once the tenant leaves the
    /// topology, so those connections, closed by the engine dropping the namespace, do not
    /// reconnect (their prologue would make the namespace again).
    tenant_gone: parking_lot::Mutex<HashMap<Arc<str>, Arc<AtomicBool>>>,
}

/// What `TERRACE.TOPOLOGY SET` takes: the engines, who owns which slot, the tenants.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyDocument {
    pub engines: Vec<String>,
    #[serde(default)]
    pub slots: Option<Vec<crate::config::SlotRange>>,
    #[serde(default)]
    pub tenants: Vec<crate::config::TenantSettings>,
    /// Every proxy (`host:port`): the nodes of the cluster view (the console's `proxies`).
    #[serde(default)]
    pub proxies: Option<Vec<String>>,
    /// Each engine's replicas, by engine index (for tenants' `replica_reads`).
    #[serde(default)]
    pub replicas: Option<Vec<Vec<String>>>,
}

/// `maxclients` lowered, as Redis does at start, to what the open-file limit leaves once the
/// proxy's own descriptors are kept: each reactor's pooled links to each engine (a few per
/// tenant and database in use), listeners, and what shares the process (`terrace up`'s
/// console). A client past it gets an error, not an accept that cannot get a descriptor.
fn fit_maxclients(wanted: usize, engines: usize, threads: usize) -> usize {
    terrace_commands::fds::raise_limit();
    let reserved = 256 + engines * threads * 16;
    match terrace_commands::fds::room_for_clients(reserved) {
        // (A client may hold a dedicated engine link too: MULTI, blocking commands.)
        Some(room) if room / 2 < wanted => {
            tracing::warn!(wanted, allowed = room / 2, "maxclients lowered to fit the open-file limit (ulimit -n)");
            (room / 2).max(1)
        }
        _ => wanted,
    }
}

impl Shared {
    pub fn new(config: ProxyConfig) -> Arc<Shared> {
        let holds = crate::hold::Holds::new(config.held_slot_limit);
        if config.await_console {
            holds.hold_all_until_pushed();
        }
        Arc::new(Shared {
            started: std::time::Instant::now(),
            next_client_id: AtomicU64::new(1),
            stats: Stats::default(),
            port: AtomicU64::new(0),
            clients: parking_lot::Mutex::new(HashMap::new()),
            metrics: Default::default(),
            topology: parking_lot::RwLock::new(Topology::new(&config)),
            generation: AtomicU64::new(0),
            pushed: parking_lot::Mutex::new(None),
            topology_changed: tokio::sync::Notify::new(),
            auth_failures: terrace_commands::auth_limit::FailureLimiter::new(AUTH_FAILURES, AUTH_WINDOW),
            holds,
            client_bytes: Default::default(),
            maxclients: fit_maxclients(config.maxclients, config.engines.len(), config.threads),
            tenant_gone: Default::default(),
            near_cache: (!config.near_cache_ttl.is_zero()).then(|| crate::near_cache::NearCache::new(config.near_cache_ttl, config.near_cache_entries)),
            config,
        })
    }

    pub fn topology(&self) -> Arc<Topology> {
        self.topology.read().clone()
    }

    /// Re-reads the configuration file and applies its engines, slot map and tenants (other
    /// settings, and new tenants' Memcached ports, need a restart). Clients stay connected and
    /// keep the tenant they authenticated as; an invalid file changes nothing.
    ///
    /// The TLS ports' certificate and key files are read again too (renewed certificates):
    /// new TLS clients get them, those connected keep their sessions.
    pub fn reload(&self) -> Result<(), String> {
        let server = self.config.tls.as_ref().map(|t| t.reload());
        let links = self.config.engine_tls.as_ref().map(|t| t.reload());
        let tls = match server.into_iter().chain(links).collect::<Result<Vec<()>, _>>() {
            Ok(read) if !read.is_empty() => {
                tracing::info!("TLS certificates re-read");
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        let topology = self.reload_topology();
        match (tls, topology) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
            (Err(a), Err(b)) => Err(format!("{a}; {b}")),
        }
    }

    fn reload_topology(&self) -> Result<(), String> {
        let Some((path, overrides)) = &self.config.reload_from else {
            return Ok(());
        };
        let file = crate::config::ProxySettings::from_file(path).map_err(|e| e.to_string())?;
        // (The TLS files were re-read by the configurations in force, above: not read twice,
        // and a bad renewal does not stop the topology's reload.)
        let fresh = overrides.clone().or(file).without_tls().resolve().map_err(|e| e.to_string())?;
        self.install(&fresh);
        *self.pushed.lock() = None;
        tracing::info!(engines = ?fresh.engines, tenants = fresh.tenants.len(), "reloaded engines, slots and tenants");
        Ok(())
    }

    /// Puts a new topology in force. Held slots whose engine it changes are released (the
    /// map moved them: their requests go to the new engine); the others stay held.
    fn install(&self, fresh: &ProxyConfig) {
        let before = self.topology();
        let topology = Topology::new(fresh);
        self.tenant_gone.lock().retain(|ns, gone| {
            let kept = topology.tenants.iter().any(|t| t.namespace.as_ref() == Some(ns));
            if !kept {
                gone.store(true, Ordering::SeqCst);
            }
            kept
        });
        // A deleted tenant's measurements go with it.
        if before.tenants.iter().any(|t| !topology.tenants.iter().any(|n| n.name == t.name)) {
            let names: std::collections::HashSet<Arc<str>> = topology.tenants.iter().map(|t| t.name.clone()).collect();
            self.metrics.retain_tenants(&|t| t == "default" || names.contains(t));
        }
        *self.topology.write() = topology;
        self.generation.fetch_add(1, Ordering::SeqCst);
        if let Some(c) = &self.near_cache {
            c.clear();
        }
        if self.holds.any() {
            let owner = |t: &Topology, s: u16| t.engines.get(t.slot_map.engine_of_slot(s)).cloned();
            let after = self.topology();
            let mut moved = terrace_commands::slots::SlotSet::default();
            for s in self.holds.held().iter().filter(|&s| owner(&before, s) != owner(&after, s)) {
                moved.insert(s);
            }
            if !moved.is_empty() {
                self.holds.release(Some(&moved));
            }
        }
        self.topology_changed.notify_one();
    }

    /// `TERRACE.TOPOLOGY SET`: a console's push of `install_document`. A proxy that takes
    /// its topology from etcd refuses it: one source, in one order.
    pub fn set_topology(&self, json: &[u8]) -> Result<String, String> {
        if !self.config.etcd.is_empty() {
            return Err("this proxy takes its topology from etcd (etcd setting); publish it there".into());
        }
        self.install_document(json)
    }

    /// Replaces engines, slot map and tenants with the document's (a JSON
    /// `TopologyDocument`), validated as the configuration file is; an invalid document
    /// changes nothing. Answers the digest the document is known by.
    pub fn install_document(&self, json: &[u8]) -> Result<String, String> {
        let doc: TopologyDocument = serde_json::from_slice(json).map_err(|e| format!("invalid topology document: {e}"))?;
        let settings = crate::config::ProxySettings {
            engines: Some(doc.engines),
            slots: doc.slots,
            tenants: Some(doc.tenants),
            cluster_nodes: doc.proxies.or_else(|| Some(self.config.cluster_nodes.clone())),
            replicas: doc.replicas,
            port: Some(self.config.port),
            memcache_port: Some(self.config.memcache_port),
            password: self.config.password.clone(),
            threads: Some(self.config.threads),
            ..Default::default()
        };
        let fresh = settings.resolve().map_err(|e| e.to_string())?;
        let digest = digest_of(json);
        self.install(&fresh);
        // The console's first topology: whatever waited for it routes with it now.
        self.holds.pushed();
        tracing::info!(engines = ?fresh.engines, tenants = fresh.tenants.len(), %digest, "topology set (by an admin or from etcd)");
        *self.pushed.lock() = Some(digest.clone());
        Ok(digest)
    }

    /// `TERRACE.TOPOLOGY GET`: the topology in force as JSON — engines, slot ranges, tenants
    /// (never their passwords), with the digest of the last document set (null while the
    /// configuration file's topology is in force).
    pub fn topology_json(&self) -> String {
        let topo = self.topology();
        let digest = self.pushed.lock().clone();
        let tenants: Vec<serde_json::Value> = topo
            .tenants
            .iter()
            .skip(1)
            .map(|t| {
                serde_json::json!({
                    "name": &*t.name,
                    "has_password": t.password.is_some(),
                    "memcache_port": t.memcache_port,
                    "max_qps": t.max_qps,
                    "max_memory": t.max_memory,
                    "replica_reads": t.replica_reads,
                    "namespace_options": t.namespace_options.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<std::collections::BTreeMap<_, _>>(),
                })
            })
            .collect();
        let up: Vec<bool> = topo.engine_up.iter().map(|u| u.load(Ordering::Relaxed)).collect();
        serde_json::json!({
            "digest": digest,
            "engines": topo.engines,
            "engine_up": up,
            "slots": topo.slot_map.ranges().into_iter().map(|(e, first, last)| serde_json::json!({"engine": e, "range": format!("{first}-{last}")})).collect::<Vec<_>>(),
            "tenants": tenants,
            "proxies": topo.cluster_nodes,
            "held": self.holds.held().to_string(),
            "replicas": topo.replicas_of.iter().map(|r| r.iter().map(|&i| topo.addrs[i].clone()).collect::<Vec<_>>()).collect::<Vec<_>>(),
        })
        .to_string()
    }
}

/// The digest a topology document is known by: SHA-256 of its bytes, hex.
pub fn digest_of(json: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(json).iter().map(|b| format!("{b:02x}")).collect()
}

/// When a request arrived, and what it was (for the metrics).
pub struct Timing {
    pub tenant: Arc<str>,
    pub command: &'static str,
    pub started: tokio::time::Instant,
}

/// A client, for CLIENT LIST: a tenant's clients see only their own tenant's.
pub struct ClientEntry {
    pub addr: String,
    pub name: Option<Vec<u8>>,
    pub tenant: Arc<str>,
}

/// A topology and the reload generation it was read at.
type Seen = (u64, Arc<Topology>);

/// (engine index, tenant namespace, database, RESP3).
type PoolKey = (usize, Option<Arc<str>>, u32, bool);

/// One reactor thread's context: its pooled backend connections and metrics recorder.
pub struct Reactor {
    pub shared: Arc<Shared>,
    pub links: Rc<LinkSettings>,
    /// Shared connections per (engine, tenant namespace, database, RESP3).
    pools: RefCell<HashMap<PoolKey, Rc<Backend>>>,
    /// The topology this thread routes with.
    topo: RefCell<Seen>,
    recorder: Arc<crate::metrics::Recorder>,
    /// This thread's requests in flight (`crate::hold`).
    flight: Arc<crate::hold::InFlight>,
}

impl Reactor {
    /// Must be called inside the thread's `LocalSet`: it opens the database-0 connections.
    pub fn new(shared: Arc<Shared>) -> Rc<Reactor> {
        let links = Rc::new(LinkSettings {
            connect_timeout: shared.config.connect_timeout,
            timeout: shared.config.timeout,
            max_inflight: shared.config.max_inflight,
            tls: shared.config.engine_tls.clone(),
        });
        let recorder = shared.metrics.recorder();
        let topo = RefCell::new((shared.generation.load(Ordering::Acquire), shared.topology()));
        let flight = shared.holds.register();
        let r = Rc::new(Reactor { shared, links, pools: RefCell::new(HashMap::new()), topo, recorder, flight });
        for e in 0..r.engines() {
            r.backend(e, &None, 0, false);
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
            // A connection stays if its engine keeps its place in the list and its tenant is
            // still there.
            let addrs = &t.1.addrs;
            let tenants = &t.1.tenants;
            self.pools.borrow_mut().retain(|(engine, namespace, _, _), b| {
                // (Deleted and made again: the old connections stopped for good.)
                let gone = b.spec.tenant_gone.as_ref().is_some_and(|g| g.load(Ordering::SeqCst));
                let tenant_kept = !gone && namespace.as_ref().is_none_or(|ns| tenants.iter().any(|t| t.namespace.as_ref() == Some(ns)));
                let keep = addrs.get(*engine) == Some(&b.spec.addr) && tenant_kept;
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

    /// The flag pooled connections of namespace `ns` stop reconnecting by (see `Shared`).
    fn tenant_gone_flag(&self, ns: &Arc<str>) -> Arc<AtomicBool> {
        self.shared.tenant_gone.lock().entry(ns.clone()).or_default().clone()
    }

    /// The topology's generation now (for `tenant_removed`).
    pub fn topology_generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// Whether tenant `name` left the topology (deleted, or removed by a reload) — looked up
    /// only when the topology changed since `seen`, which it updates.
    pub fn tenant_removed(&self, name: &str, seen: &mut u64) -> bool {
        let now = self.topology_generation();
        if now == *seen {
            return false;
        }
        *seen = now;
        self.topology().tenant(name.as_bytes()).is_none()
    }

    fn spec(&self, engine: usize, namespace: &Option<Arc<str>>, db: u32, resp3: bool, dedicated: bool) -> BackendSpec {
        let topo = self.topology();
        let up_flag = (!dedicated && namespace.is_none() && db == 0 && !resp3).then(|| topo.engine_up.get(engine).cloned()).flatten();
        // Each engine holds about its share of the tenant's keys, so it enforces that share.
        let tenant = match namespace {
            Some(ns) => topo.tenant(ns.as_bytes()),
            None => Some(topo.default_tenant()),
        };
        let ns_maxmemory = tenant.as_ref().map(|t| t.max_memory.div_ceil(topo.engines.len() as u64)).unwrap_or(0);
        let ns_options = tenant.map(|t| t.namespace_options.clone()).unwrap_or_default();
        let password = self.shared.config.engine_auth.password_for(&topo.addrs[engine]);
        let tenant_gone = namespace.as_ref().map(|ns| self.tenant_gone_flag(ns));
        BackendSpec {
            engine,
            tenant_gone,
            addr: topo.addrs[engine].clone(),
            password,
            namespace: namespace.clone(),
            ns_maxmemory,
            ns_options,
            db,
            resp3,
            dedicated,
            up_flag,
        }
    }

    /// The shared, pipelined connection to `engine` for clients of a tenant's namespace on
    /// `db` speaking RESP2/3.
    pub fn backend(&self, engine: usize, namespace: &Option<Arc<str>>, db: u32, resp3: bool) -> Rc<Backend> {
        let key = (engine, namespace.clone(), db, resp3);
        if let Some(b) = self.pools.borrow().get(&key) {
            return b.clone();
        }
        let b = Backend::start(self.spec(engine, namespace, db, resp3, false), self.links.clone());
        self.pools.borrow_mut().insert(key, b.clone());
        b
    }

    /// A new connection for one client alone.
    pub fn dedicated(&self, engine: usize, namespace: &Option<Arc<str>>, db: u32, resp3: bool) -> Rc<Backend> {
        Backend::start(self.spec(engine, namespace, db, resp3, true), self.links.clone())
    }

    /// A ticket for a request about to be routed (`crate::hold`).
    pub fn enter(&self) -> Rc<crate::hold::Ticket> {
        Rc::new(self.shared.holds.enter(&self.flight))
    }

    /// Waits while a slot `slots` names is held, with `owner` counted in flight
    /// throughout except while it waits (so a hold does not wait for it). A request whose
    /// slot is held waits for the map that moves it, then routes with that map; one held
    /// longer than its limit (`held_slot_limit_ms`: a coordinator gone mid-move, no console yet)
    /// gets the error to answer instead, a `TRYAGAIN` clients retry.
    pub async fn wait_for_slots(&self, owner: &crate::backend::Owner, slots: impl Fn(&mut dyn FnMut(u16))) -> Result<(), String> {
        let holds = &self.shared.holds;
        let mut since = None;
        while holds.any() {
            let mut held = None;
            slots(&mut |s| held = held.or(holds.holds(s).then_some(s)));
            let Some(slot) = held else { return Ok(()) };
            let since = *since.get_or_insert_with(tokio::time::Instant::now);
            if let Some(why) = holds.held_too_long(slot, since.elapsed()) {
                return Err(why);
            }
            let mut released = holds.subscribe();
            owner.ticket.borrow_mut().take();
            let mut again = false;
            slots(&mut |s| again |= holds.holds(s));
            if again {
                let _ = tokio::time::timeout(std::time::Duration::from_millis(100), released.changed()).await;
            }
            *owner.ticket.borrow_mut() = Some(self.enter());
        }
        Ok(())
    }

    /// Records one answered request.
    pub fn record(&self, protocol: &'static str, t: Timing, error: bool) {
        let key = crate::metrics::Key { tenant: t.tenant, protocol, command: t.command };
        self.recorder.record(&key, t.started.elapsed(), error);
    }

    /// Whether this thread's connection to `engine` is up.
    pub fn engine_up(&self, engine: usize) -> bool {
        self.backend(engine, &None, 0, false).is_up()
    }
}
