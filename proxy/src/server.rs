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
    // (`error`, not `source`: the message carries it, so a chain printed with `{:#}` does
    // not repeat it.)
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: String, error: std::io::Error },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// Which front end a connection is for (a Memcached port belongs to a tenant).
#[derive(Debug, Clone)]
enum Protocol {
    Redis,
    Memcache(Arc<str>),
}

/// An accepted connection for a reactor: the stream, its client id, its front end, and
/// whether it came in on a TLS port.
type Handoff = (std::net::TcpStream, u64, Protocol, bool);

/// How long a TLS client may take over its handshake before it is closed.
const HANDSHAKE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Binds a listening port, non-blocking, for the control thread's runtime.
fn bind(addr: &str) -> Result<std::net::TcpListener, ProxyError> {
    let err = |error| ProxyError::Bind { addr: addr.to_string(), error };
    let l = std::net::TcpListener::bind(addr).map_err(err)?;
    l.set_nonblocking(true).map_err(err)?;
    Ok(l)
}

/// The next connection of a listener that may not be there (a TLS port not configured).
async fn accept_on(l: &Option<TcpListener>) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
    match l {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, ProxyError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ProxyError::Runtime)
}

/// Runs the proxy until SIGINT or SIGTERM.
pub fn run(config: ProxyConfig) -> Result<(), ProxyError> {
    let at = |port: u16| format!("{}:{port}", config.bind);
    let local_of = |l: &std::net::TcpListener, port: u16| l.local_addr().map_err(|error| ProxyError::Bind { addr: at(port), error });
    let std_listener = bind(&at(config.port))?;
    let local = local_of(&std_listener, config.port)?;
    let mc_listener = bind(&at(config.memcache_port))?;
    let mc_local = local_of(&mc_listener, config.memcache_port)?;
    let tls_listener = config.tls_port.map(|port| bind(&at(port))).transpose()?;
    let mc_tls_listener = config.memcache_tls_port.map(|port| bind(&at(port))).transpose()?;
    // Tenants' own Memcached ports.
    let mut tenant_listeners = Vec::new();
    for t in config.tenants.iter() {
        if let Some(port) = t.memcache_port {
            tenant_listeners.push((Arc::<str>::from(t.name.as_str()), bind(&at(port))?));
        }
    }
    let metrics_listener = config.metrics_port.map(|port| bind(&at(port))).transpose()?;
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
        let tls_listener = tls_listener.map(|l| TcpListener::from_std(l).expect("listener from std"));
        let mc_tls_listener = mc_tls_listener.map(|l| TcpListener::from_std(l).expect("listener from std"));
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
        if let Some(addr) = tls_listener.as_ref().and_then(|l| l.local_addr().ok()) {
            ready += &format!("terrace proxy tls on {addr}\n");
        }
        if let Some(addr) = mc_tls_listener.as_ref().and_then(|l| l.local_addr().ok()) {
            ready += &format!("terrace proxy memcache tls on {addr}\n");
        }
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
            use axum::http::{header, HeaderMap, StatusCode};
            use axum::response::IntoResponse;
            // (With `metrics_token_file`, only for requests carrying its bearer token: the
            // text names tenants and their traffic.)
            let app = axum::Router::new().route(
                "/metrics",
                axum::routing::get(move |headers: HeaderMap| {
                    let sh = sh.clone();
                    async move {
                        let sent = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
                        if !terrace_commands::settings::bearer_allows(sent, sh.config.metrics_token.as_deref()) {
                            return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "a bearer token is needed (metrics_token_file)\n")
                                .into_response();
                        }
                        ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], render_metrics(&sh)).into_response()
                    }
                }),
            );
            tokio::spawn(async move {
                if let Err(e) = axum::serve(l, app).await {
                    tracing::error!(error = %e, "metrics endpoint stopped");
                }
            });
        }
        if !sh.config.etcd.is_empty() {
            tokio::spawn(crate::etcd_watch::run(sh.clone()));
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
        // (false: accepting failed, out of descriptors say — the loop pauses before the next
        // accept instead of spinning on the error.)
        let mut hand_off = |sh: &Shared, accepted: std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)>, protocol: Protocol, tls: bool| -> bool {
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a client");
                    return false;
                }
            };
            sh.stats.connections_received.fetch_add(1, Ordering::Relaxed);
            if sh.stats.connected_clients.load(Ordering::Relaxed) >= sh.maxclients as i64 {
                refuse_client(sh, stream, &protocol, tls);
                return true;
            }
            let id = sh.next_client_id.fetch_add(1, Ordering::Relaxed);
            sh.stats.connected_clients.fetch_add(1, Ordering::Relaxed);
            let tenant = match &protocol {
                Protocol::Redis => Arc::from(crate::tenants::DEFAULT),
                Protocol::Memcache(name) => name.clone(),
            };
            sh.clients.lock().insert(id, frontend::ClientEntry { addr: peer.to_string(), name: None, tenant });
            if let Ok(std_stream) = stream.into_std() {
                let _ = senders[next % threads].send((std_stream, id, protocol, tls));
                next = next.wrapping_add(1);
            }
            true
        };
        loop {
            let accepted = tokio::select! {
                r = listener.accept() => hand_off(&sh, r, Protocol::Redis, false),
                r = mc_listener.accept() => hand_off(&sh, r, Protocol::Memcache(Arc::from(crate::tenants::DEFAULT)), false),
                r = accept_on(&tls_listener) => hand_off(&sh, r, Protocol::Redis, true),
                r = accept_on(&mc_tls_listener) => hand_off(&sh, r, Protocol::Memcache(Arc::from(crate::tenants::DEFAULT)), true),
                Some((r, tenant)) = tenant_rx.recv() => hand_off(&sh, r, Protocol::Memcache(tenant), false),
                _ = sh.topology_changed.notified() => { ports.sync(&sh, &tenant_tx); true }
                _ = recv(&mut sighup) => {
                    match sh.reload() {
                        Ok(()) => tracing::info!("SIGHUP: configuration reloaded"),
                        Err(e) => tracing::error!(error = %e, "SIGHUP: configuration not reloaded"),
                    }
                    true
                }
                _ = recv(&mut sigint) => { tracing::info!("SIGINT received, shutting down"); break; }
                _ = recv(&mut sigterm) => { tracing::info!("SIGTERM received, shutting down"); break; }
            };
            if !accepted {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    });
    // The reactors' connections close with the process.
    drop(handles);
    tracing::info!("proxy stopped");
    Ok(())
}

/// How long the accept loop pauses after accepting failed (out of descriptors: the error
/// repeats at once until a descriptor is freed, and the loop would spin).
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// Answers a client past `maxclients` with its protocol's error (Redis's, memcached's; a TLS
/// client is closed) and closes it.
fn refuse_client(sh: &Shared, stream: tokio::net::TcpStream, protocol: &Protocol, tls: bool) {
    sh.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
    let message: &[u8] = match protocol {
        Protocol::Redis => b"-ERR max number of clients reached\r\n",
        Protocol::Memcache(_) => b"SERVER_ERROR Too many open connections\r\n",
    };
    if !tls {
        // (A fresh socket's send buffer takes the line at once; nothing else waits on it.)
        let _ = stream.try_write(message);
    }
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
        while let Some((std_stream, id, protocol, tls)) = rx.recv().await {
            let Ok(stream) = tokio::net::TcpStream::from_std(std_stream) else {
                forget_client(&reactor.shared, id);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let client = match protocol {
                Protocol::Redis => Client::Redis { peer: stream.peer_addr().ok(), local: stream.local_addr().ok() },
                // A tenant removed by a reload since the connection was accepted: refuse it.
                Protocol::Memcache(name) => match reactor.topology().tenant(name.as_bytes()) {
                    Some(tenant) => Client::Memcache(tenant),
                    None => {
                        forget_client(&reactor.shared, id);
                        continue;
                    }
                },
            };
            let reactor = reactor.clone();
            if !tls {
                tokio::task::spawn_local(client.serve(reactor, stream, id));
                continue;
            }
            let acceptor = reactor.shared.config.tls.as_ref().expect("a TLS port has its configuration").acceptor();
            tokio::task::spawn_local(async move {
                match tokio::time::timeout(HANDSHAKE_LIMIT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => client.serve(reactor, stream, id).await,
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        forget_client(&reactor.shared, id);
                    }
                    Err(_) => {
                        tracing::debug!("TLS handshake not done in {HANDSHAKE_LIMIT:?}");
                        forget_client(&reactor.shared, id);
                    }
                }
            });
        }
    });
}

/// A connection the reactor serves: a Redis client (with its TCP ends), or a Memcached
/// client of a tenant.
enum Client {
    Redis { peer: Option<std::net::SocketAddr>, local: Option<std::net::SocketAddr> },
    Memcache(Arc<crate::tenants::Tenant>),
}

impl Client {
    async fn serve<S: frontend::ClientStream>(self, reactor: std::rc::Rc<Reactor>, stream: S, id: u64) {
        match self {
            Client::Redis { peer, local } => frontend::redis::serve(reactor, stream, id, peer, local).await,
            Client::Memcache(tenant) => frontend::memcache::serve(reactor, stream, id, tenant).await,
        }
    }
}

/// A client that will not be served after all (gone before, a failed TLS handshake): out of
/// CLIENT LIST and the count.
fn forget_client(shared: &Shared, id: u64) {
    shared.clients.lock().remove(&id);
    shared.stats.connected_clients.fetch_sub(1, Ordering::Relaxed);
}
