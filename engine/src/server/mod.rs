//! The engine's network server: a control thread and `threads` reactor threads (each a
//! single-threaded tokio runtime) sharing the keyspace.
//!
//! The control thread (the caller's) owns the listener, the cron and signal handling, and
//! hands accepted connections to the reactors round-robin. It never runs commands on shard
//! locks, so a long Lua script can't stop it: while a script is busy (past the busy
//! threshold) new connections go to a reactor no busy script holds, or, when every reactor is
//! held, are served by the control thread itself — which is how an operator reaches SCRIPT
//! KILL or SHUTDOWN NOSAVE, as with Redis.

pub mod busy;
pub mod connection;
pub mod cron;
pub mod dispatch;
pub mod elastic;
pub mod fair;
pub mod follower;
#[cfg(feature = "metrics-http")]
pub mod metrics;
pub mod migrate;
mod namespace_drop;
pub mod namespaces;
pub mod prefetch;
pub mod replicas;
pub mod socket;
pub mod spin;
pub mod state;
pub mod tls;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::config::EngineConfig;
use crate::keyspace::LockCap;
use state::{ClientInfo, Server};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    // (`error`, not `source`: the message carries it, so a chain printed with `{:#}` does
    // not repeat it.)
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: String, error: std::io::Error },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot load the snapshot")]
    Load(#[from] crate::snapshot::SnapshotError),
    #[error("cannot load compression dictionaries: {0}")]
    Dictionaries(#[from] crate::compress::store::StoreError),
    #[error("cannot open the PMem tier: {0}")]
    Tier(#[from] crate::tier::arena::ArenaError),
    #[error("cannot start the PMem tier: {0}")]
    TierStart(String),
    #[error("cannot open the WAL: {0}")]
    Wal(#[from] crate::wal::WalError),
    #[error("cannot recover from the WAL: {0}")]
    Recovery(String),
    #[error("cannot open the storage tier (`storage`): {0}")]
    Storage(#[from] crate::storage::StorageError),
    #[error("`{key}`: this engine was built without {what} (cargo feature `{feature}`)")]
    NotBuiltIn { key: &'static str, what: &'static str, feature: &'static str },
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
}

use dispatch::{Dispatch, Handoff};

/// Opens the storage tier's adapter, if this build has it (cargo features `lsm`, `postgres`).
fn open_storage(backend: &crate::config::StorageBackend) -> Result<crate::storage::Storage, ServerError> {
    match backend {
        #[cfg(feature = "lsm")]
        crate::config::StorageBackend::Lsm(dir) => {
            Ok(crate::storage::Storage::new(std::sync::Arc::new(crate::storage::lsm::LsmAdapter(crate::storage::lsm::Lsm::open(dir)?)))
                .map_err(|e| crate::storage::StorageError::Backend(e.to_string()))?)
        }
        #[cfg(feature = "postgres")]
        crate::config::StorageBackend::Postgres(url) => Ok(crate::storage::postgres::connect(url)?),
        #[allow(unreachable_patterns)] // reached when a feature is off
        other => Err(ServerError::NotBuiltIn { key: "storage", what: "this storage adapter", feature: other.feature() }),
    }
}

/// How long shutdown waits for the reactors to finish their current command; SIGTERM or
/// SHUTDOWN ends the process within about this long whatever a client is running.
const REACTOR_STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Joins the threads that end within `wait`; returns how many did not.
fn join_within(handles: Vec<std::thread::JoinHandle<()>>, wait: std::time::Duration) -> usize {
    let deadline = std::time::Instant::now() + wait;
    while handles.iter().any(|h| !h.is_finished()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (done, stuck): (Vec<_>, Vec<_>) = handles.into_iter().partition(|h| h.is_finished());
    for h in done {
        let _ = h.join();
    }
    stuck.len()
}

fn runtime() -> Result<tokio::runtime::Runtime, ServerError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServerError::Runtime)
}

/// Lowers `maxclients` to what the open-file limit allows, as Redis does at start: a client
/// refused with "max number of clients reached" is better than an accept that cannot get
/// a descriptor.
fn fit_maxclients(srv: &Server) {
    let Some(room) = crate::limits::client_fds() else { return };
    let wanted = srv.limits.maxclients.load(std::sync::atomic::Ordering::Relaxed);
    if wanted > room {
        tracing::warn!(wanted, room, "the open-file limit allows {room} clients: maxclients lowered (raise `ulimit -n` for more)");
        crate::command::config::set_maxclients_at_start(srv, room);
    }
}

/// Runs the engine until SIGINT, SIGTERM or SHUTDOWN.
pub fn run(config: EngineConfig) -> Result<(), ServerError> {
    terrace_commands::fds::raise_limit();
    // Calibrates the TSC clock commands are timed with (up to 200 ms, once) before any
    // client can wait on it.
    let _ = quanta::Instant::now();
    // The plain port unless `tls_only`; the TLS port beside it when set.
    let std_listener = match config.tls.only {
        true => None,
        false => Some(listen(&format!("{}:{}", config.bind, config.port))?),
    };
    let tls_listener = match config.tls.port {
        Some(port) => Some(listen(&format!("{}:{port}", config.bind))?),
        None => None,
    };
    let tls_local = tls_listener.as_ref().map(|(_, a)| *a);
    let (std_listener, local) = match std_listener {
        Some((l, a)) => (Some(l), a),
        None => (None, tls_local.expect("tls_only comes with a tls_port")),
    };
    let threads = config.threads.reactors();
    let dict_root = config.data_dir.join("compression");
    let dictionaries = crate::compress::tenant::load_dir(&dict_root, &config.compression)?;
    let tier = match &config.tier {
        Some(tc) => Some(Arc::new(crate::tier::Tier::new(crate::tier::arena::Arena::open(&tc.pmem_path, tc.pmem_size)?, tc.clone(), config.namespaces))),
        None => None,
    };
    // The WAL is read before anything else so that recovery knows what the log holds; its
    // records are replayed once the snapshot (or the PMem tier's warm index) is in.
    let wal_config = config.wal.clone();
    let wal_on = wal_config.mode != crate::wal::Mode::Off;
    let srv_tier = tier.clone();
    // The lock capability goes to the pipeline (through the reactors and the control
    // thread's connections) and to background workers, never into `Server`.
    let (srv, locks) = Server::new(config, srv_tier, None);
    fit_maxclients(&srv);
    *srv.replication.masterauth.lock() = srv.config.masterauth.clone();
    if srv.config.wait_for_role {
        srv.replication.fence();
        tracing::warn!("waiting for a role: clients get -TRYAGAIN until a REPLICAOF (from the coordinator) says whom to follow, or NO ONE");
    }
    if let Some(password) = &srv.config.requirepass {
        crate::command::config::set_requirepass_at_start(&srv, password)
            .map_err(|reason| crate::config::ConfigError::Invalid { key: "requirepass_file".into(), reason })?;
    }
    srv.port.store(local.port() as u64, Ordering::Relaxed);
    *srv.saved_tenants.lock() = dictionaries;
    let warm = match &tier {
        Some(t) => start_tier(&srv, &locks, t)?,
        None => None,
    };
    let has_log = wal_on && !crate::wal::segments::list(&wal_config.dir).map_err(crate::wal::WalError::from)?.is_empty();
    // With a log, a snapshot without a WAL position can't be combined with it.
    let rdb_keys = warm.is_none();
    let loaded = crate::snapshot::load(&srv, &locks, rdb_keys)?;
    // Namespaces created after that snapshot (the WAL's records of them may be pruned).
    if let Some(recorded) =
        namespaces::load(&srv.config.data_dir).map_err(|e| ServerError::Recovery(format!("{}: {e}", namespaces::path(&srv.config.data_dir).display())))?
    {
        let mut names = srv.namespaces.lock();
        // A tenant keeps its number for life: one the snapshot names at another place than
        // the file does means the two are not of one engine. One the file no longer names
        // was dropped since the snapshot (its place reused, or left dropped).
        let moved = names.iter().enumerate().any(|(i, n)| namespaces::is_live(n) && recorded.iter().position(|r| r == n).is_some_and(|j| j != i));
        if recorded.len() >= names.len() && !moved {
            let dropped_since: Vec<usize> = (1..names.len()).filter(|&i| names[i] != recorded[i]).collect();
            *names = recorded;
            drop(names);
            for ns in dropped_since {
                srv.keyspace.clear_namespace(&locks, ns);
            }
        } else if !names.starts_with(&recorded) {
            return Err(ServerError::Recovery(format!(
                "{} lists namespaces {recorded:?} but the snapshot has {:?}: move one of them aside",
                namespaces::path(&srv.config.data_dir).display(),
                *names
            )));
        }
    }
    if has_log && warm.is_none() && loaded.exists && loaded.wal_seq.is_none() && loaded.keys > 0 {
        return Err(ServerError::Recovery(format!(
            "{} has no WAL position but {} holds a log: move one of them aside",
            crate::snapshot::rdb_path(&srv.config.data_dir).display(),
            wal_config.dir.display()
        )));
    }
    let flusher_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let census_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The storage tier: opened before the WAL is replayed (write-back records mark keys dirty)
    // and before clients connect; its writer batches write-through, its flusher write-back.
    let storage_writer = match &srv.config.storage {
        Some(sc) => {
            let storage = open_storage(&sc.backend)?;
            let tier = crate::storage::tier::StorageTier::new(storage, sc.mode, srv.config.namespaces, sc.write_back.clone());
            let (weak, invalidating) = (Arc::downgrade(&srv), locks.clone());
            tier.set_invalidator(Box::new(move |keys| {
                if let Some(srv) = weak.upgrade() {
                    crate::command::invalidate(&srv, &invalidating, keys);
                }
            }));
            srv.attach_storage(tier.clone());
            let t = tier.clone();
            let writer = std::thread::Builder::new().name("terrace-storage-writer".into()).spawn(move || t.run_writer()).expect("spawn the storage writer");
            let (t, weak, stop, flushing) = (tier.clone(), Arc::downgrade(&srv), flusher_stop.clone(), locks.clone());
            let flusher = std::thread::Builder::new()
                .name("terrace-storage-flusher".into())
                .spawn(move || crate::storage::flusher::run(weak, flushing, t, &stop))
                .expect("spawn the write-back flusher");
            let (t, weak, stop) = (tier.clone(), Arc::downgrade(&srv), census_stop.clone());
            let census = std::thread::Builder::new()
                .name("terrace-storage-census".into())
                .spawn(move || t.census.run(|| weak.upgrade().map(|s| s.namespaces.lock().clone()), t.clone(), &stop))
                .expect("spawn the storage census");
            Some((tier, writer, flusher, census))
        }
        None => None,
    };
    let covered = warm.or(loaded.wal_seq).unwrap_or(0);
    let (srv, wal_thread) = if wal_on {
        let mut opened = crate::wal::open(&wal_config, covered)?;
        if let Some(base) = opened.first_base {
            // Segments before `base` may have been pruned (only obsolete records in them).
            if base > covered && crate::wal::read_pruned(&wal_config.dir) < base {
                return Err(ServerError::Recovery(format!(
                    "the log in {} starts after position {base} but the snapshot covers only {covered}: records are missing",
                    wal_config.dir.display()
                )));
            }
        }
        if let Some(torn) = &opened.torn {
            tracing::warn!("WAL: {torn}");
        }
        if let Some(tier) = srv.storage_tier() {
            // Write-back records stop holding the log once storage has them.
            let tier = Arc::downgrade(tier);
            opened.wal.set_flushed_through(Box::new(move || tier.upgrade().map_or(0, |t| t.dirty.oldest_since().map_or(u64::MAX, |s| s.saturating_sub(1)))));
        }
        let srv = Server::with_wal(srv, opened.wal.clone());
        let replayed = replay(&srv, &locks, std::mem::take(&mut opened.replay));
        opened.wal.recovered.store(replayed as u64, Ordering::Relaxed);
        if replayed > 0 {
            tracing::info!(records = replayed, after = covered, "replayed the WAL");
        }
        if !has_log && loaded.keys > 0 && loaded.wal_seq.is_none() {
            // The snapshot came from before the WAL was on: make it the log's starting point.
            let mut guards = srv.keyspace.lock_all(&locks);
            crate::snapshot::save_with_guards(&srv, &mut guards)?;
        }
        (srv, Some((opened.wal.clone(), opened.start())))
    } else {
        (srv, None)
    };
    let loaded = loaded.keys;
    let names = srv.namespaces.lock().clone();
    for (index, name) in names.iter().enumerate() {
        if namespaces::is_live(name) {
            srv.attach_tenant(index, name);
        } else {
            // Dropped, but the process stopped between recording that and logging it: what
            // the snapshot or the log put back here is the dropped tenant's.
            srv.keyspace.clear_namespace(&locks, index);
        }
    }
    if loaded > 0 {
        tracing::info!(keys = loaded, file = %crate::snapshot::rdb_path(&srv.config.data_dir).display(), "loaded the snapshot");
    }

    // The device probe (cached per machine): in the background, so start-up does not wait.
    {
        let weak = Arc::downgrade(&srv);
        let pmem_dir = srv
            .config
            .tier
            .as_ref()
            .and_then(|t| t.pmem_path.parent().map(|p| if p.as_os_str().is_empty() { std::path::PathBuf::from(".") } else { p.to_path_buf() }));
        let storage_dir = match srv.config.storage.as_ref().map(|s| &s.backend) {
            Some(crate::config::StorageBackend::Lsm(dir)) => dir.clone(),
            _ => srv.config.data_dir.clone(),
        };
        let _ = std::thread::Builder::new().name("terrace-probe".into()).spawn(move || {
            let _ = std::fs::create_dir_all(&storage_dir);
            let profile = crate::probe::cached_or_probe(pmem_dir.as_deref(), &storage_dir);
            if let Some(srv) = weak.upgrade() {
                let _ = srv.device.set(profile);
            }
        });
    }

    // The background demoter.
    let tier_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let demoter = tier.clone().map(|t| {
        let (srv, stop, demoting) = (srv.clone(), tier_stop.clone(), locks.clone());
        std::thread::Builder::new()
            .name("terrace-tier".into())
            .spawn(move || crate::tier::demote::run_background(&srv.keyspace, &demoting, &t, &stop))
            .expect("spawn the tier thread")
    });

    // Reactors on their own threads (with elastic threads, all but the first park until the
    // controller gives them connections).
    let dispatch = Arc::new(Dispatch::default());
    let mut senders = Vec::new();
    let mut handles = Vec::new();
    for i in 0..threads {
        let (tx, rx) = mpsc::unbounded_channel::<Handoff>();
        senders.push(tx);
        let (srv, dispatch, serving) = (srv.clone(), dispatch.clone(), locks.clone());
        let rt = runtime()?;
        handles.push(
            std::thread::Builder::new()
                .name(format!("terrace-reactor-{i}"))
                // Scripts recurse on this stack (Lua calls, reply conversions): room for the
                // depths they are allowed, in debug builds too.
                .stack_size(REACTOR_STACK)
                .spawn(move || reactor(rt, srv, serving, dispatch, rx, i))
                .expect("spawn reactor thread"),
        );
    }
    dispatch.attach(senders);
    let elastic_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // (With fixed threads it only samples, for INFO and /metrics.)
    let controller = {
        let (weak, stop) = (Arc::downgrade(&srv), elastic_stop.clone());
        let srv = srv.clone();
        std::thread::Builder::new()
            .name("terrace-elastic".into())
            .spawn(move || srv.reactors.run_controller(weak, &stop))
            .expect("spawn the elastic controller")
    };

    #[cfg(not(feature = "metrics-http"))]
    if srv.config.metrics_port.is_some() {
        return Err(ServerError::NotBuiltIn { key: "metrics_port", what: "the metrics endpoint", feature: "metrics-http" });
    }
    let metrics_listener = match srv.config.metrics_port {
        Some(port) => {
            let addr = format!("{}:{port}", srv.config.bind);
            let l = std::net::TcpListener::bind(&addr).map_err(|error| ServerError::Bind { addr: addr.clone(), error })?;
            l.set_nonblocking(true).map_err(|error| ServerError::Bind { addr, error })?;
            Some(l)
        }
        None => None,
    };
    let _saver = crate::snapshot::spawn_saver(&srv, locks.clone()).map_err(ServerError::Runtime)?;
    let _follower = follower::spawn(&srv, locks.clone()).map_err(ServerError::Runtime)?;
    migrate::load_sealed(&srv).map_err(|e| ServerError::Recovery(format!("the sealed slots: {e}")))?;
    let _migrator = migrate::spawn(&srv, locks.clone()).map_err(ServerError::Runtime)?;
    let rt = runtime()?;
    let local_set = tokio::task::LocalSet::new();
    let (srv0, locks0) = (srv.clone(), locks.clone());
    local_set.block_on(&rt, async move {
        let mut listener = std_listener.map(|l| TcpListener::from_std(l).expect("listener from std"));
        let tls_listener = tls_listener.map(|(l, _)| TcpListener::from_std(l).expect("listener from std"));
        // TLS clients whose handshake is done, from their relays.
        let (handshaken_tx, mut handshaken_rx) = mpsc::unbounded_channel::<tls::Handshaken>();
        let mut local = local;
        let metrics_listener = metrics_listener.map(|l| TcpListener::from_std(l).expect("listener from std"));
        // Handlers first: a signal arriving right after "ready" must still stop us cleanly.
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigterm = signal(SignalKind::terminate()).ok();
        let mut sigint = signal(SignalKind::interrupt()).ok();
        // SIGHUP re-reads the TLS port's certificate (and is otherwise ignored, as Redis does).
        let mut sighup = signal(SignalKind::hangup()).ok();
        tracing::info!(%local, threads, "Ready to accept connections");
        {
            // For whoever started us (tests read it); a closed stdout must not stop the engine.
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let mut ready = format!("terrace engine ready on {local}\n");
            if let Some(addr) = tls_local {
                ready += &format!("terrace engine tls on {addr}\n");
            }
            if let Some(addr) = metrics_listener.as_ref().and_then(|l| l.local_addr().ok()) {
                ready += &format!("terrace engine metrics on http://{addr}/metrics\n");
            }
            let _ = out.write_all(ready.as_bytes()).and_then(|_| out.flush());
        }
        #[cfg(feature = "metrics-http")]
        if let Some(l) = metrics_listener {
            tokio::task::spawn_local(metrics::serve(srv0.clone(), l));
        }
        tokio::task::spawn_local(cron::run(srv0.clone(), locks0.clone()));
        {
            let srv = srv0.clone();
            tokio::task::spawn_local(async move {
                loop {
                    tokio::time::sleep(busy::CHECK_EVERY).await;
                    busy::serve_waiting_clients(&srv);
                }
            });
        }
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        loop {
            tokio::select! {
                r = accept_on(&listener) => {
                    let Some((stream, peer)) = accepted(&srv0, r).await else { continue };
                    if at_maxclients(&srv0) {
                        refuse_client(&srv0, stream);
                        continue;
                    }
                    let info = register_client(&srv0, peer, local, std::os::fd::AsRawFd::as_raw_fd(&stream));
                    place(&srv0, &locks0, &dispatch, socket::Socket::Tcp(stream), info);
                }
                r = accept_on(&tls_listener) => {
                    let Some((stream, peer)) = accepted(&srv0, r).await else { continue };
                    if at_maxclients(&srv0) {
                        // (No error line: the client speaks TLS and has no session yet.)
                        srv0.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if let Some(server_tls) = &srv0.config.tls.server {
                        tls::terminate(server_tls, stream, peer, handshaken_tx.clone());
                    }
                }
                Some(done) = handshaken_rx.recv() => {
                    let socket = match socket::Socket::from_std(done.socket) {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::warn!(peer = %done.peer, "cannot serve a TLS client: {e}");
                            continue;
                        }
                    };
                    let info = register_client(&srv0, done.peer, tls_local.unwrap_or(local), std::os::fd::AsRawFd::as_raw_fd(&socket));
                    place(&srv0, &locks0, &dispatch, socket, info);
                }
                _ = recv(&mut sighup) => tls::reload(&srv0.config.tls),
                _ = recv(&mut sigint) => {
                    tracing::info!("SIGINT received, shutting down");
                    break;
                }
                _ = recv(&mut sigterm) => {
                    tracing::info!("SIGTERM received, shutting down");
                    break;
                }
                _ = srv0.shutdown_notify.notified() => break,
                // CONFIG SET port: accept on the new port from now on (clients connected
                // through the old one stay).
                _ = srv0.listener_changed.notified() => {
                    let Some(next) = srv0.new_listener.lock().take() else { continue };
                    match TcpListener::from_std(next) {
                        Ok(l) => {
                            local = l.local_addr().unwrap_or(local);
                            listener = Some(l);
                            tracing::info!(%local, "listening on a new port (CONFIG SET port)");
                        }
                        Err(e) => tracing::warn!("the new listener could not be used ({e}); still accepting on {local}"),
                    }
                }
            }
            if srv0.shutdown.load(Ordering::Relaxed) {
                break;
            }
        }
        srv0.request_shutdown();
        dispatch.detach();
        // Let connection tasks see the kill flag and close their sockets.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    });
    elastic_stop.store(true, Ordering::Relaxed);
    let _ = controller.join();
    let stuck = join_within(handles, REACTOR_STOP_WAIT);
    if stuck > 0 {
        // A reactor is still inside one command (its clients are closed; it may hold shard
        // locks, so nothing below that reads the keyspace could finish). Every write a client
        // was told about is in the WAL already: make that durable and leave.
        tracing::error!(
            stuck,
            "a reactor is still running a command {REACTOR_STOP_WAIT:?} after shutdown began; stopping without it \
             (no write-back flush and no warm-restart index: the next start replays the WAL)"
        );
        if let Some((wal, thread)) = wal_thread {
            wal.stop();
            let _ = thread.join();
        }
        std::process::exit(1);
    }
    tier_stop.store(true, Ordering::Relaxed);
    if let Some(h) = demoter {
        let _ = h.join();
    }
    let mut dirty_left = false;
    if let Some((tier, writer, flusher, census)) = storage_writer {
        census_stop.store(true, Ordering::SeqCst);
        tier.census.wake();
        let _ = census.join();
        // Write-back's dirty keys go to storage before the writer and the WAL stop.
        flusher_stop.store(true, Ordering::SeqCst);
        tier.flush_wake.notify_one();
        let _ = flusher.join();
        dirty_left = tier.dirty.size().0 > 0;
        tier.stop();
        let _ = writer.join();
    }
    save_on_shutdown(&srv, &locks);
    if let Some((wal, thread)) = wal_thread {
        wal.stop();
        let _ = thread.join();
    }
    if let (Some(_), true) = (&tier, dirty_left) {
        // The warm index would bring dirty keys back clean: start cold, from the WAL.
        tracing::error!("write-back keys are still dirty: no warm-restart index (the next start replays the WAL)");
    } else if let Some(t) = &tier {
        let names = srv.namespaces.lock().clone();
        let wal_seq = srv.wal().map(|w| w.last_assigned()).unwrap_or(0);
        match crate::tier::warm::save(&srv.keyspace, &locks, &t.arena, &names, wal_seq) {
            Ok(keys) => tracing::info!(keys, file = %crate::tier::warm::index_path(t.arena.path()).display(), "wrote the warm-restart index"),
            Err(e) => tracing::error!("{e}; the next start will be cold"),
        }
    }
    tracing::info!("engine stopped");
    Ok(())
}

/// As Redis stops: a snapshot of what the engine holds when it has save points (or SHUTDOWN
/// SAVE asked for one; not with NOSAVE), so a clean restart loads the newest state — never
/// an older snapshot. Every reactor has stopped: nothing changes meanwhile.
fn save_on_shutdown(srv: &Arc<Server>, locks: &LockCap) {
    let has_points = srv.param("save").as_deref().and_then(crate::snapshot::save_points).is_some();
    let save = match state::ShutdownSave::of(srv) {
        state::ShutdownSave::Yes => true,
        state::ShutdownSave::No => false,
        state::ShutdownSave::IfSavePoints => has_points,
    };
    if !save || srv.replication.loading() {
        return;
    }
    let mut guards = srv.keyspace.lock_all(locks);
    match crate::snapshot::save_with_guards(srv, &mut guards) {
        Ok(()) => tracing::info!(file = %crate::snapshot::rdb_path(&srv.config.data_dir).display(), "saved the keyspace before stopping"),
        Err(e) => tracing::error!("saving the keyspace before stopping failed: {e} (the previous snapshot stays)"),
    }
}

/// Maps the PMem tier's arena back with the previous run's keys if it closed cleanly (a warm
/// restart: returns true), else starts it cold. Either way the index file is consumed: from
/// here on a crash must start cold.
/// Runs the WAL's records through the command dispatcher as they ran (same database, same
/// time, not logged again); returns how many ran.
fn replay(srv: &Arc<Server>, locks: &LockCap, records: Vec<(u64, crate::wal::frame::Record)>) -> usize {
    let info = Arc::new(ClientInfo::new(0, -1, "wal".into(), "wal".into(), 0, srv.limits.clone()));
    let mut conn = crate::command::Conn::new(info, srv);
    conn.set_authenticated(true);
    let mut out = bytes::BytesMut::new();
    let n = records.len();
    for (seq, r) in records {
        conn.db = r.db;
        conn.ns_base = r.ns_base;
        conn.replay_now = Some(r.now);
        if r.argv[0] == crate::storage::WB_RECORD {
            let argv: Vec<&[u8]> = r.argv.iter().map(Vec::as_slice).collect();
            if let Err(why) = crate::command::pipeline::storage::replay_write_back(srv, locks, r.db, &argv, r.now, true) {
                tracing::warn!(seq, "a replayed write-back record failed: {why}");
            }
            continue;
        }
        let argv: Vec<&[u8]> = r.argv.iter().map(Vec::as_slice).collect();
        out.clear();
        let _ = crate::command::execute(srv, locks, &mut conn, &argv, &mut out);
        if out.first() == Some(&b'-') {
            tracing::warn!(seq, reply = %String::from_utf8_lossy(&out).trim_end(), command = %String::from_utf8_lossy(&r.argv[0]), "a replayed WAL record failed");
        }
    }
    n
}

/// Returns the WAL position the warm index covers when the tier restarted warm.
fn start_tier(srv: &Server, locks: &LockCap, tier: &crate::tier::Tier) -> Result<Option<u64>, ServerError> {
    let arena = &tier.arena;
    let index = crate::tier::warm::index_path(arena.path());
    let started = std::time::Instant::now();
    let warm = crate::tier::warm::load(&srv.keyspace, locks, arena);
    let io = |e: std::io::Error| ServerError::TierStart(format!("`pmem_path` {}: {e}", arena.path().display()));
    let is_warm = match warm {
        Some(loaded) => {
            if loaded.namespaces.len() > 1 {
                *srv.namespaces.lock() = loaded.namespaces.clone();
            }
            arena.mark_in_use().map_err(io)?;
            tracing::info!(keys = loaded.keys, damaged = loaded.damaged, ms = started.elapsed().as_millis() as u64, file = %arena.path().display(), "warm restart: PMem tier mapped with its index");
            Some(loaded.wal_seq)
        }
        None => {
            // Whatever a partial read put in the keyspace goes before the arena is reset.
            srv.keyspace.clear_all(locks);
            arena.start_cold().map_err(io)?;
            None
        }
    };
    match std::fs::remove_file(&index) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ServerError::TierStart(format!("cannot remove the used index {}: {e}", index.display()))),
    }
    Ok(is_warm)
}

fn reactor(rt: tokio::runtime::Runtime, srv: Arc<Server>, locks: LockCap, dispatch: Arc<Dispatch>, mut rx: mpsc::UnboundedReceiver<Handoff>, index: usize) {
    srv.reactors.started(index);
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        if !srv.config.idle_spin.is_zero() {
            tokio::task::spawn_local(spin::run(srv.clone(), index, srv.config.idle_spin));
        }
        while let Some(handoff) = rx.recv().await {
            let (std_stream, info, carried) = match handoff {
                Handoff::New(s, info) => (s, info, None),
                Handoff::Moved(s, info, carried) => (s, info, Some(carried)),
            };
            match socket::Socket::from_std(std_stream) {
                Ok(stream) => {
                    tokio::task::spawn_local(connection::serve(srv.clone(), locks.clone(), dispatch.clone(), stream, info, carried, index));
                }
                Err(e) => {
                    tracing::warn!(client = info.id, "cannot take over a connection: {e}");
                    srv.clients.lock().remove(&info.id);
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    });
}

/// Each reactor thread's stack.
const REACTOR_STACK: usize = 16 << 20;

/// How long the acceptor waits after a failed accept before it tries again.
const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// Logs a failed accept, at most once a second.
fn accept_failed(srv: &Server, e: &std::io::Error) {
    static LAST_LOG_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = srv.started.elapsed().as_millis() as u64 + 1000;
    if now.saturating_sub(LAST_LOG_MS.load(Ordering::Relaxed)) >= 1000 {
        LAST_LOG_MS.store(now, Ordering::Relaxed);
        tracing::warn!(error = %e, "Accepting client connection failed (retrying in {ACCEPT_RETRY:?})");
    }
}

/// Binds a listening socket, non-blocking, and says where it listens.
fn listen(addr: &str) -> Result<(std::net::TcpListener, SocketAddr), ServerError> {
    let bind = |error| ServerError::Bind { addr: addr.to_string(), error };
    let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
    listener.set_nonblocking(true).map_err(bind)?;
    let local = listener.local_addr().map_err(bind)?;
    Ok((listener, local))
}

/// The next connection on `listener`; never, when there is none (the port is off).
async fn accept_on(listener: &Option<TcpListener>) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// The connection an accept gave; on a failed accept — out of descriptors (EMFILE/ENFILE)
/// or memory: the connection stays queued and accept would fail again at once — None after
/// a pause, rather than a spin (the next try may find a descriptor closed).
async fn accepted(srv: &Server, r: std::io::Result<(tokio::net::TcpStream, SocketAddr)>) -> Option<(tokio::net::TcpStream, SocketAddr)> {
    match r {
        Ok(accepted) => Some(accepted),
        Err(e) => {
            accept_failed(srv, &e);
            tokio::time::sleep(ACCEPT_RETRY).await;
            None
        }
    }
}

/// Gives a new, registered client to a reactor — not one a script has held for a while
/// (`busy::occupied_reactors`); when they all are, it is served here, on the control thread.
fn place(srv: &Arc<Server>, locks: &LockCap, dispatch: &Arc<dispatch::Dispatch>, stream: socket::Socket, info: Arc<ClientInfo>) {
    let mut target = srv.reactors.assign();
    let held = busy::occupied_reactors(srv);
    if !held.is_empty() {
        let active = srv.reactors.active.load(Ordering::Relaxed).max(1);
        match (0..active).map(|i| (target + i) % active).find(|r| !held.contains(r)) {
            Some(free) => target = free,
            None => {
                info.reactor.store(usize::MAX, Ordering::Relaxed);
                tokio::task::spawn_local(connection::serve(srv.clone(), locks.clone(), dispatch.clone(), stream, info, None, usize::MAX));
                return;
            }
        }
    }
    info.reactor.store(target, Ordering::Relaxed);
    if let Ok(std_stream) = stream.into_std() {
        let _ = dispatch.send(target, Handoff::New(std_stream, info));
    }
}

/// Whether the registered clients fill `maxclients` (a new one is turned away).
fn at_maxclients(srv: &Server) -> bool {
    srv.clients.lock().len() >= srv.limits.maxclients.load(Ordering::Relaxed)
}

/// Turns a connection away at `maxclients` with Redis's error, without registering it.
fn refuse_client(srv: &Server, stream: tokio::net::TcpStream) {
    srv.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
    // Best effort, as Redis: a new socket's send buffer takes the line at once.
    let _ = stream.try_write(b"-ERR max number of clients reached\r\n");
}

fn register_client(srv: &Arc<Server>, peer: SocketAddr, local: SocketAddr, fd: i32) -> Arc<ClientInfo> {
    srv.stats.connections_received.fetch_add(1, Ordering::Relaxed);
    let id = srv.next_client_id.fetch_add(1, Ordering::Relaxed);
    let since_start = srv.started.elapsed().as_millis() as u64;
    let info = Arc::new(ClientInfo::new(id, fd, peer.to_string(), local.to_string(), since_start, srv.limits.clone()));
    srv.clients.lock().insert(id, info.clone());
    info
}
