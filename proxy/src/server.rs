//! The proxy's process: a control thread that accepts clients, handles signals and hands
//! connections to `threads` reactor threads (each a single-threaded tokio runtime with its own
//! backend connections).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::config::ProxyConfig;
use crate::frontend::{self, Reactor, Shared};

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// Which front end a connection is for (a Memcached port belongs to a tenant).
#[derive(Debug, Clone)]
enum Protocol {
    Redis,
    Memcache(Arc<str>),
}

type Handoff = (std::net::TcpStream, u64, Protocol);

fn runtime() -> Result<tokio::runtime::Runtime, ProxyError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ProxyError::Runtime)
}

/// Runs the proxy until SIGINT or SIGTERM.
pub fn run(config: ProxyConfig) -> Result<(), ProxyError> {
    let addr = format!("{}:{}", config.bind, config.port);
    let bind_err = |source| ProxyError::Bind { addr: addr.clone(), source };
    let std_listener = std::net::TcpListener::bind(&addr).map_err(bind_err)?;
    std_listener.set_nonblocking(true).map_err(bind_err)?;
    let local = std_listener.local_addr().map_err(bind_err)?;
    let mc_addr = format!("{}:{}", config.bind, config.memcache_port);
    let mc_err = |source| ProxyError::Bind { addr: mc_addr.clone(), source };
    let mc_listener = std::net::TcpListener::bind(&mc_addr).map_err(mc_err)?;
    mc_listener.set_nonblocking(true).map_err(mc_err)?;
    let mc_local = mc_listener.local_addr().map_err(mc_err)?;
    // Tenants' own Memcached ports.
    let mut tenant_listeners = Vec::new();
    for t in config.tenants.iter() {
        if let Some(port) = t.memcache_port {
            let addr = format!("{}:{port}", config.bind);
            let err = |source| ProxyError::Bind { addr: addr.clone(), source };
            let l = std::net::TcpListener::bind(&addr).map_err(err)?;
            l.set_nonblocking(true).map_err(err)?;
            tenant_listeners.push((Arc::<str>::from(t.name.as_str()), l));
        }
    }
    let metrics_listener = match config.metrics_port {
        Some(port) => {
            let addr = format!("{}:{port}", config.bind);
            let err = |source| ProxyError::Bind { addr: addr.clone(), source };
            let l = std::net::TcpListener::bind(&addr).map_err(err)?;
            l.set_nonblocking(true).map_err(err)?;
            Some(l)
        }
        None => None,
    };
    let threads = config.threads;
    let shared = Shared::new(config);
    shared.port.store(local.port() as u64, Ordering::Relaxed);

    let mut senders = Vec::new();
    let mut handles = Vec::new();
    for i in 0..threads {
        let (tx, rx) = mpsc::unbounded_channel::<Handoff>();
        senders.push(tx);
        let shared = shared.clone();
        let rt = runtime()?;
        handles.push(std::thread::Builder::new().name(format!("terrace-proxy-{i}")).spawn(move || reactor(rt, shared, rx)).expect("spawn reactor thread"));
    }

    let rt = runtime()?;
    let sh = shared.clone();
    rt.block_on(async move {
        let listener = TcpListener::from_std(std_listener).expect("listener from std");
        let mc_listener = TcpListener::from_std(mc_listener).expect("listener from std");
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigterm = signal(SignalKind::terminate()).ok();
        let mut sigint = signal(SignalKind::interrupt()).ok();
        let mut sighup = signal(SignalKind::hangup()).ok();
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tracing::info!(%local, threads, engines = ?sh.config.engines, "proxy ready");
        let metrics_listener = metrics_listener.map(|l| TcpListener::from_std(l).expect("listener from std"));
        // The addresses, for whoever started us (tests read them), in one write; a closed
        // stdout must not stop the proxy.
        let mut ready = format!("terrace proxy ready on {local}\nterrace proxy memcache on {mc_local}\n");
        if let Some(addr) = metrics_listener.as_ref().and_then(|l| l.local_addr().ok()) {
            ready += &format!("terrace proxy metrics on http://{addr}/metrics\n");
        }
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(ready.as_bytes()).and_then(|_| out.flush());
        }
        if let Some(l) = metrics_listener {
            let sh = sh.clone();
            let app = axum::Router::new().route(
                "/metrics",
                axum::routing::get(move || {
                    let sh = sh.clone();
                    async move { ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], render_metrics(&sh)) }
                }),
            );
            tokio::spawn(async move {
                if let Err(e) = axum::serve(l, app).await {
                    tracing::error!(error = %e, "metrics endpoint stopped");
                }
            });
        }
        // INFO's instantaneous_ops_per_sec: the command counter sampled every 100 ms.
        {
            let sh = sh.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(crate::ops_meter::EVERY);
                loop {
                    tick.tick().await;
                    let total = sh.stats.commands.load(Ordering::Relaxed);
                    sh.stats.ops.lock().sample(std::time::Instant::now(), total);
                }
            });
        }
        // Tenant ports accept on their own tasks and pass connections to this loop; a topology
        // change (reload, the console) opens new tenants' ports and closes removed ones.
        let (tenant_tx, mut tenant_rx) = mpsc::unbounded_channel();
        let mut ports = TenantPorts::default();
        for (name, l) in tenant_listeners {
            let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
            ports.open(port, name, TcpListener::from_std(l).expect("listener from std"), &tenant_tx);
        }
        let mut next = 0usize;
        let mut hand_off = |sh: &Shared, accepted: std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)>, protocol| {
            let Ok((stream, peer)) = accepted else { return };
            let id = sh.next_client_id.fetch_add(1, Ordering::Relaxed);
            sh.stats.connections_received.fetch_add(1, Ordering::Relaxed);
            sh.stats.connected_clients.fetch_add(1, Ordering::Relaxed);
            let tenant = match &protocol {
                Protocol::Redis => Arc::from(crate::tenants::DEFAULT),
                Protocol::Memcache(name) => name.clone(),
            };
            sh.clients.lock().insert(id, frontend::ClientEntry { addr: peer.to_string(), name: None, tenant });
            if let Ok(std_stream) = stream.into_std() {
                let _ = senders[next % threads].send((std_stream, id, protocol));
                next = next.wrapping_add(1);
            }
        };
        loop {
            tokio::select! {
                r = listener.accept() => hand_off(&sh, r, Protocol::Redis),
                r = mc_listener.accept() => hand_off(&sh, r, Protocol::Memcache(Arc::from(crate::tenants::DEFAULT))),
                Some((r, tenant)) = tenant_rx.recv() => hand_off(&sh, r, Protocol::Memcache(tenant)),
                _ = sh.topology_changed.notified() => ports.sync(&sh, &tenant_tx),
                _ = recv(&mut sighup) => match sh.reload() {
                    Ok(()) => tracing::info!("SIGHUP: configuration reloaded"),
                    Err(e) => tracing::error!(error = %e, "SIGHUP: configuration not reloaded"),
                },
                _ = recv(&mut sigint) => { tracing::info!("SIGINT received, shutting down"); break; }
                _ = recv(&mut sigterm) => { tracing::info!("SIGTERM received, shutting down"); break; }
            }
        }
    });
    // The reactors' connections close with the process.
    drop(handles);
    tracing::info!("proxy stopped");
    Ok(())
}

type TenantAccept = (std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)>, Arc<str>);

/// Tenants' own Memcached listeners, by port.
#[derive(Default)]
struct TenantPorts {
    open: std::collections::HashMap<u16, (Arc<str>, tokio::task::AbortHandle)>,
}

impl TenantPorts {
    fn open(&mut self, port: u16, name: Arc<str>, l: TcpListener, tx: &mpsc::UnboundedSender<TenantAccept>) {
        tracing::info!(tenant = %name, addr = ?l.local_addr().ok(), "tenant memcache port");
        let tx = tx.clone();
        let tenant = name.clone();
        let task = tokio::spawn(async move {
            loop {
                let accepted = l.accept().await;
                if tx.send((accepted, tenant.clone())).is_err() {
                    return;
                }
            }
        });
        self.open.insert(port, (name, task.abort_handle()));
    }

    /// Makes the open ports those of the current topology's tenants. A port that cannot be
    /// bound is logged and left closed (the rest of the topology stands).
    fn sync(&mut self, sh: &Shared, tx: &mpsc::UnboundedSender<TenantAccept>) {
        let topo = sh.topology();
        let wanted: std::collections::HashMap<u16, Arc<str>> = topo.tenants.iter().filter_map(|t| Some((t.memcache_port?, t.name.clone()))).collect();
        self.open.retain(|port, (name, task)| {
            let keep = wanted.get(port) == Some(name);
            if !keep {
                task.abort();
                tracing::info!(tenant = %name, port, "tenant memcache port closed");
            }
            keep
        });
        for (port, name) in wanted {
            if self.open.contains_key(&port) {
                continue;
            }
            let addr = format!("{}:{port}", sh.config.bind);
            let bound = std::net::TcpListener::bind(&addr).and_then(|l| {
                l.set_nonblocking(true)?;
                TcpListener::from_std(l)
            });
            match bound {
                Ok(l) => self.open(port, name, l, tx),
                Err(e) => tracing::error!(tenant = %name, %addr, error = %e, "cannot open the tenant's memcache port"),
            }
        }
    }
}

/// The /metrics page: command counters and latencies, clients, engine health.
fn render_metrics(sh: &Shared) -> String {
    let mut gauges = vec![
        ("terrace_proxy_connected_clients".to_string(), "Clients connected to the proxy.", sh.stats.connected_clients.load(Ordering::Relaxed) as f64),
        (
            "terrace_proxy_connections_received".to_string(),
            "Client connections accepted since start.",
            sh.stats.connections_received.load(Ordering::Relaxed) as f64,
        ),
    ];
    if let Some(c) = &sh.near_cache {
        gauges.push(("terrace_proxy_near_cache_hits".into(), "GETs answered from the near cache.", c.hits.load(Ordering::Relaxed) as f64));
        gauges.push(("terrace_proxy_near_cache_misses".into(), "GETs the near cache could not answer.", c.misses.load(Ordering::Relaxed) as f64));
    }
    let topo = sh.topology();
    for (addr, up) in topo.engines.iter().zip(&topo.engine_up) {
        gauges.push((
            format!("terrace_proxy_engine_up{{engine=\"{addr}\"}}"),
            "Whether the proxy is connected to the engine.",
            up.load(Ordering::Relaxed) as u8 as f64,
        ));
    }
    crate::metrics::prometheus(&sh.metrics.snapshot(), &gauges)
}

fn reactor(rt: tokio::runtime::Runtime, shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Handoff>) {
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let reactor = Reactor::new(shared);
        while let Some((std_stream, id, protocol)) = rx.recv().await {
            let Ok(stream) = tokio::net::TcpStream::from_std(std_stream) else { continue };
            match protocol {
                Protocol::Redis => tokio::task::spawn_local(frontend::redis::serve(reactor.clone(), stream, id)),
                Protocol::Memcache(name) => {
                    // A tenant removed by a reload since the connection was accepted: refuse it.
                    let Some(tenant) = reactor.topology().tenant(name.as_bytes()) else {
                        reactor.shared.clients.lock().remove(&id);
                        reactor.shared.stats.connected_clients.fetch_sub(1, Ordering::Relaxed);
                        continue;
                    };
                    tokio::task::spawn_local(frontend::memcache::serve(reactor.clone(), stream, id, tenant))
                }
            };
        }
    });
}
