//! Terrace console: the control plane. It keeps tenants and the slot map in its SQLite
//! database, pushes them to proxies and engines and keeps them there (`reconcile`; with
//! etcd, elected coordinator and publishing the proxies' topology there: `coordination`), keeps
//! replicas following their primaries and fails a primary over to its best replica
//! (`failover`), moves slots between engines to grow and shrink online (`moves`), and serves the operators' pages and the REST API (`web`): tenants,
//! retraining, the cost advisor, the topology and its events.
#![recursion_limit = "512"] // serde_json::json! of the OpenAPI document (web/openapi.rs)

mod advice;
pub mod alerts;
pub mod auth;
mod browse;
mod charts;
pub mod config;
pub mod coordination;
pub mod db;
pub mod engines;
pub mod failover;
mod history;
pub mod launch_socket;
mod lease;
pub mod moves;
mod nodes;
mod ops;
pub mod reconcile;
mod shared_state;
pub mod tenants;
mod views;
mod web;
mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;

pub use config::{ConsoleConfig, ConsoleSettings, Launch, Launcher};

/// Everything the handlers and the reconcile loop share.
pub struct Console {
    pub db: db::Db,
    pub config: ConsoleConfig,
    pub state: parking_lot::Mutex<reconcile::State>,
    /// Wakes the reconcile loop (a tenant changed).
    pub wake: tokio::sync::Notify,
    /// One push to the proxies at a time: a reconcile pass's (the loop's and those run for
    /// a request) and `reconcile::push_proxies`.
    pub pass_lock: tokio::sync::Mutex<()>,
    /// One pass over the engines at a time.
    pub engines_pass_lock: tokio::sync::Mutex<()>,
    /// One coordinator action at a time: a health check's round (which re-points replicas
    /// from the roles it read) and an operator's failover must not interleave — a round
    /// that read the roles before a promotion pointed the promoted replica back at its old
    /// primary, and the two then followed each other.
    pub coordinating: tokio::sync::Mutex<()>,
    /// The history's totals at its previous sample (its rates are differences).
    pub history: parking_lot::Mutex<history::Previous>,
    /// Wakes the slot-move driver (a move was queued, the queue resumed).
    pub moves_wake: tokio::sync::Notify,
    pub limiter: terrace_commands::auth_limit::FailureLimiter,
    /// Verified against when a login names an unknown user (same time as a known one).
    pub dummy_hash: String,
    /// The term leases given to replicated primaries (`lease`).
    pub leases: lease::Leases,
    /// Whether this console coordinates (alone, or elected on etcd).
    pub coordination: coordination::Coordination,
    /// What a standby forwards changes to the coordinator with (`web::forward`).
    pub peers: reqwest::Client,
}

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error(transparent)]
    Db(#[from] db::DbError),
    // (`error`, not `source`: the message carries it, so a chain printed with `{:#}` does
    // not repeat it.)
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: String, error: std::io::Error },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("etcd: {0}")]
    Etcd(#[from] terrace_etcd::EtcdError),
}

/// What a started console tells whoever started it.
#[derive(Debug, Clone)]
pub struct Started {
    pub url: String,
    /// Generated on the first start (no TERRACE_ADMIN_PASSWORD): shown once.
    pub admin_password: Option<String>,
}

impl Started {
    /// The lines `terrace console` and `terrace up` print.
    pub fn announce(&self) -> String {
        let mut s = String::new();
        if let Some(p) = &self.admin_password {
            s += &format!("terrace console admin password (first start; shown once, change it on the Account page): {p}\n");
        }
        s + &format!("terrace console ready on {}\n", self.url)
    }
}

/// Runs the console until SIGINT/SIGTERM; `ready` is called once it listens.
pub fn run(config: ConsoleConfig, ready: impl FnOnce(&Started) + Send) -> Result<(), ConsoleError> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(ConsoleError::Runtime)?;
    rt.block_on(async move {
        let addr = format!("{}:{}", config.bind, config.port);
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|error| ConsoleError::Bind { addr: addr.clone(), error })?;
        let local = listener.local_addr().map_err(|error| ConsoleError::Bind { addr, error })?;
        let db = db::open(&config.db).await?;
        db::seed_topology(&db, &config.engines, &config.replicas, &config.proxies, config.own_proxies).await?;
        db::abandon_retrains(&db).await?;
        let admin_password = auth::ensure_admin(&db, config.admin_password.as_deref()).await?;
        let dummy_hash = tokio::task::spawn_blocking(|| auth::hash_password(&auth::random_hex(16))).await.expect("hashing does not panic");
        let config_lease = config.lease;
        let me = config.advertise.clone().unwrap_or_else(|| local.to_string());
        let coordination = if config.etcd.is_empty() { coordination::Coordination::alone(me) } else { coordination::Coordination::on_etcd(me, &config.etcd)? };
        let peers = web::forward_client(&config);
        let console = Arc::new(Console {
            db,
            config,
            state: Default::default(),
            wake: tokio::sync::Notify::new(),
            pass_lock: tokio::sync::Mutex::new(()),
            engines_pass_lock: tokio::sync::Mutex::new(()),
            coordinating: tokio::sync::Mutex::new(()),
            history: Default::default(),
            moves_wake: tokio::sync::Notify::new(),
            limiter: auth::login_limiter(),
            dummy_hash,
            leases: lease::Leases::new(config_lease),
            coordination,
            peers,
        });
        if let Some(tls) = &console.config.node_tls {
            nodes::use_tls(tls.clone());
        }
        coordination::Coordination::start(&console);
        tokio::spawn(reconcile::run(console.clone()));
        tokio::spawn(history::run(console.clone()));
        tokio::spawn(failover::run(console.clone()));
        tokio::spawn(lease::run(console.clone()));
        tokio::spawn(moves::run(console.clone()));
        if let Some(url) = console.config.webhook_url.clone() {
            tokio::spawn(webhook::run(console.clone(), url));
        }
        let tls = console.config.tls.clone();
        let app = web::router(console).into_make_service_with_connect_info::<SocketAddr>();
        let scheme = if tls.is_some() { "https" } else { "http" };
        ready(&Started { url: format!("{scheme}://{local}"), admin_password });
        let stop = async {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
                return std::future::pending().await;
            };
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        };
        let bind_error = |error| ConsoleError::Bind { addr: local.to_string(), error };
        let Some(tls) = tls else {
            return axum::serve(listener, app).with_graceful_shutdown(stop).await.map_err(bind_error);
        };
        // HTTPS: axum-server runs each connection's handshake on a task of its own (a slow
        // client holds no other up); SIGHUP re-reads the certificate for new connections.
        let rustls = axum_server::tls_rustls::RustlsConfig::from_config(tls.config());
        let handle = axum_server::Handle::new();
        tokio::spawn(reload_certificates_on_sighup(tls, rustls.clone()));
        {
            let handle = handle.clone();
            tokio::spawn(async move {
                stop.await;
                handle.graceful_shutdown(Some(std::time::Duration::from_secs(10)));
            });
        }
        let listener = listener.into_std().map_err(bind_error)?;
        axum_server::from_tcp_rustls(listener, rustls).map_err(bind_error)?.handle(handle).serve(app).await.map_err(bind_error)
    })
}

/// Re-reads the HTTPS certificate on every SIGHUP; one that cannot be used is logged and the
/// one in use stays.
async fn reload_certificates_on_sighup(tls: Arc<terrace_tls::ServerTls>, rustls: axum_server::tls_rustls::RustlsConfig) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else { return };
    while hup.recv().await.is_some() {
        match tls.reload() {
            Ok(()) => {
                rustls.reload_from_config(tls.config());
                tracing::info!("SIGHUP: the console's certificate re-read");
            }
            Err(e) => tracing::error!(error = %e, "SIGHUP: the console's certificate not re-read"),
        }
    }
}
