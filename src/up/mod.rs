//! `terrace up`: the whole appliance on embedded defaults — engines as supervised child
//! processes (restarted with backoff if one dies), the proxy in this process in front of
//! them, and the console on its own thread (it pushes tenants to the proxy as the proxy's
//! admin, with a password made up for this run). SIGINT/SIGTERM stop the proxy and the
//! console, then the engines.
//!
//! With `--replicas N`, each engine gets N replicas (more engines, supervised alike) that the
//! console keeps following their primary and fails over to; a restarted engine then comes
//! back fenced until the console gives it a role.
//!
//! With `--consoles N` (3, 5, 7), N etcd members and N console processes instead of the
//! console thread (`consoles`): one is elected coordinator, the others take over when it
//! is lost, and the proxy takes its topology from etcd. The engines a console adds are
//! started by this process all the same, asked on its launcher's socket.
//!
//! The engines only answer clients that know their password (`-NOAUTH` otherwise), so
//! nothing on the host bypasses the proxy's tenancy, quotas and command filters. Each engine
//! has its own, derived from the appliance's engine key in `DATA_DIR/engine.secret` (mode
//! 0600, made on the first start, kept across restarts) and the engine's address
//! (`terrace_commands::credentials`), written for it in `DATA_DIR/passwords/engine-PORT`; the
//! proxy and the console hold the key and derive each engine's, so an address registered as
//! an engine is never sent another engine's password.

mod consoles;

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct UpArgs {
    /// Port for Redis clients (the proxy).
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Port for Memcached clients (the proxy).
    #[arg(long, default_value_t = 11211)]
    memcache_port: u16,
    /// Address the proxy listens on (engines listen on 127.0.0.1).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Data directory; engine N keeps its files in DIR/engine-N.
    #[arg(long, default_value = "data")]
    data_dir: PathBuf,
    /// Number of engines (primaries of the slot map).
    #[arg(long, default_value_t = 2)]
    engines: u16,
    /// Replicas per engine, started and supervised alike (ports after the engines'); the
    /// console keeps them following their primary and fails over to them.
    #[arg(long, default_value_t = 0)]
    replicas: u16,
    /// Port of the first engine; the others follow.
    #[arg(long, default_value_t = 7001)]
    engine_port: u16,
    /// Port of the web console and REST API (it listens on 127.0.0.1).
    #[arg(long, default_value_t = 8080)]
    console_port: u16,
    /// The engines' save points, as Redis's `save` (its defaults): a snapshot when at least
    /// CHANGES writes are SECONDS old, and one when the appliance stops; "" keeps nothing
    /// across a restart.
    #[arg(long, default_value = "3600 1 300 100 60 10000")]
    save: String,
    /// Prometheus metrics (/metrics): the proxy (and console) process on this port, engine N
    /// on this port + N (engines added from the console by their place after the first
    /// engine's port); 0 turns them off.
    #[arg(long, default_value_t = 9121)]
    metrics_port: u16,
    /// Consoles: 1 runs in this process on its SQLite database; 3, 5 or 7 run as processes
    /// of their own on --console-port and the ports after it, electing their coordinator
    /// and sharing their state on as many etcd members, started too (Debian's etcd-server).
    #[arg(long, default_value_t = 1)]
    consoles: u16,
    /// With --consoles above 1: etcd member i listens for clients on this port + 2i and for
    /// its peers on the next.
    #[arg(long, default_value_t = 2379)]
    etcd_port: u16,
}

/// One supervised engine process.
struct Supervised {
    name: String,
    /// What a restart runs: with replicas, the engine comes back fenced (`--wait-for-role`)
    /// until the console has failed it over or re-pointed it — back empty, it must not serve
    /// its slots (nor have its replicas follow it) in the meantime.
    restart: Launch,
    child: Mutex<Option<Child>>,
}

/// What starting a supervised process runs: its arguments (the program first), more
/// environment, and where its standard error goes (None: this process's).
#[derive(Debug, Clone, Default)]
struct Launch {
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: Option<PathBuf>,
}

impl From<Vec<String>> for Launch {
    fn from(args: Vec<String>) -> Launch {
        Launch { args, ..Launch::default() }
    }
}

/// Starts an engine process. Every one is forked by the same thread, which lives as long as
/// this process: PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not
/// the process (prctl(2)), and engines were started from threads that end — the console's
/// blocking pool (idle threads end after 10 s: every engine added from the console got
/// SIGTERM ten seconds after it started) and a supervisor's, which ends with its engine.
fn spawn(launch: &Launch) -> std::io::Result<Child> {
    type Request = (Launch, std::sync::mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<Request>>> = std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        // (Never joined: it waits for requests until the process exits.)
        std::thread::Builder::new()
            .name("terrace-spawner".into())
            .spawn(move || {
                for (launch, reply) in rx {
                    let _ = reply.send(fork_process(&launch));
                }
            })
            .expect("start the engines' spawner thread");
        Mutex::new(tx)
    });
    let (reply, answer) = std::sync::mpsc::channel();
    let gone = || std::io::Error::other("the engines' spawner thread is gone");
    spawner.lock().unwrap_or_else(|e| e.into_inner()).send((launch.clone(), reply)).map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

/// Forks and runs `launch` (on the spawner thread: see `spawn`).
fn fork_process(launch: &Launch) -> std::io::Result<Child> {
    let (program, args) = launch.args.split_first().ok_or_else(|| std::io::Error::other("nothing to run"))?;
    let mut c = Command::new(program);
    // Our stdout carries the proxy's ready line alone; engines log to stderr.
    c.args(args).envs(launch.env.iter().map(|(k, v)| (k, v))).stdout(std::process::Stdio::null());
    if let Some(log) = &launch.log {
        c.stderr(std::fs::OpenOptions::new().create(true).append(true).open(log)?);
    }
    // Engines die with the appliance even if it is killed without a chance to stop them.
    #[cfg(target_os = "linux")]
    // SAFETY: pre_exec's closure only calls prctl, which is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    c.spawn()
}

/// How `terrace up` runs an engine: on 127.0.0.1, with its own password and the one it
/// gives its primary when it starts as a replica (the console gives it its primary's with
/// each REPLICAOF after that), and save points (`--save`: snapshots while it runs and when
/// it stops).
fn engine_command(exe: &std::path::Path, port: u16, dir: &std::path::Path, passwords: &EnginePasswords, save: &str, metrics: Option<u16>) -> Vec<String> {
    let mut command = vec![
        exe.display().to_string(),
        "engine".into(),
        "--save".into(),
        save.into(),
        "--port".into(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--data-dir".into(),
        dir.display().to_string(),
        "--requirepass-file".into(),
        passwords.own.display().to_string(),
        "--masterauth-file".into(),
        passwords.primary.display().to_string(),
    ];
    if let Some(p) = metrics {
        command.extend(["--metrics-port".into(), p.to_string()]);
    }
    command
}

/// The metrics port of the process `offset` places after the proxy's (None: metrics off,
/// or past the last port).
fn metrics_port(base: u16, offset: u16) -> Option<u16> {
    (base != 0).then(|| base.checked_add(offset)).flatten()
}

/// The file in the data directory listing the engines added from the console (their ports).
const ADDED_FILE: &str = "added-engines";

/// Engines added from the console: started and supervised like the first ones, listed (by
/// port) in `DATA_DIR/added-engines` so the next `terrace up` starts them too (the console's
/// slot map still has them), each in `DATA_DIR/engine-added-PORT`.
struct Added {
    exe: PathBuf,
    data_dir: PathBuf,
    /// The engine key (`engine.secret`) each one's password is derived from.
    key: String,
    save: String,
    /// The first engine's port and the metrics base port (0: no metrics).
    ports: (u16, u16),
    /// The first port to try for the next one.
    next_port: Mutex<u16>,
    engines: Arc<Mutex<Vec<Arc<Supervised>>>>,
    stopping: Arc<AtomicBool>,
}

impl Added {
    fn list_path(&self) -> PathBuf {
        self.data_dir.join(ADDED_FILE)
    }

    fn listed(&self) -> Vec<u16> {
        std::fs::read_to_string(self.list_path()).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
    }

    fn save(&self, ports: &[u16]) -> std::io::Result<()> {
        let text: String = ports.iter().map(|p| format!("{p}\n")).collect();
        terrace_engine::files::replace_durably(&self.data_dir, ADDED_FILE, text.as_bytes())
    }

    /// Starts (and supervises) the engine on `port`; answers its address once it accepts
    /// connections.
    fn run(&self, port: u16) -> anyhow::Result<String> {
        let dir = self.data_dir.join(format!("engine-added-{port}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let own = engine_password_file(&self.data_dir, &self.key, port)?;
        let passwords = EnginePasswords { primary: own.clone(), own };
        let command = engine_command(&self.exe, port, &dir, &passwords, &self.save, metrics_port(self.ports.1, port - self.ports.0 + 1));
        let e = supervised(format!("added engine (port {port})"), command.into(), &self.stopping)?;
        self.engines.lock().unwrap().push(e);
        let addr = format!("127.0.0.1:{port}");
        wait_listening(&addr, "engine")?;
        Ok(addr)
    }
}

impl terrace_console::Launcher for Added {
    fn start(&self) -> Result<String, String> {
        let mut next = self.next_port.lock().unwrap();
        let port = (*next..=u16::MAX).find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok()).ok_or("no free port for another engine")?;
        *next = port.saturating_add(1);
        let mut ports = self.listed();
        ports.push(port);
        self.save(&ports).map_err(|e| format!("cannot record the engine in {}: {e}", self.list_path().display()))?;
        self.run(port).map_err(|e| e.to_string())
    }

    fn stop(&self, address: &str) -> bool {
        let Some(port) = address.strip_prefix("127.0.0.1:").and_then(|p| p.parse::<u16>().ok()) else { return false };
        let mut ports = self.listed();
        if !ports.contains(&port) {
            return false;
        }
        ports.retain(|p| *p != port);
        let _ = self.save(&ports);
        let name = format!("added engine (port {port})");
        let mut engines = self.engines.lock().unwrap();
        if let Some(i) = engines.iter().position(|e| e.name == name) {
            let e = engines.remove(i);
            stop_engine(&e);
        }
        true
    }
}

/// Stops a supervised engine for good (its supervisor sees no child and ends).
fn stop_engine(e: &Supervised) {
    if let Some(mut child) = e.child.lock().unwrap().take() {
        // SAFETY: kill(2) on the pid of a child this process started and has not reaped.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let _ = child.wait();
    }
}

/// The engines' password file in `data_dir`, made (mode 0600, 32 random bytes in hex) if
/// missing.
fn engine_secret(data_dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(data_dir).with_context(|| format!("cannot create {}", data_dir.display()))?;
    let path = data_dir.join("engine.secret");
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path) {
        Ok(mut f) => {
            writeln!(f, "{}", terrace_console::auth::random_hex(32)).and_then(|_| f.sync_all()).with_context(|| format!("cannot write {}", path.display()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", path.display())),
    }
    Ok(path)
}

/// An engine's password files: its own (`requirepass_file`) and its primary's
/// (`masterauth_file`; a primary's own).
struct EnginePasswords {
    own: PathBuf,
    primary: PathBuf,
}

/// Writes the password of the engine on 127.0.0.1:`port` under `key` in
/// `DATA_DIR/passwords/engine-PORT` (mode 0600, in a directory of mode 0700).
fn engine_password_file(data_dir: &std::path::Path, key: &str, port: u16) -> anyhow::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = data_dir.join("passwords");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(format!("engine-{port}"));
    let password = terrace_commands::credentials::engine_password(key, &format!("127.0.0.1:{port}"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(f, "{password}").and_then(|_| f.sync_all()).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

pub fn run(args: UpArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.engines >= 1, "--engines must be at least 1");
    let exe = std::env::current_exe().context("cannot find the terrace executable")?;
    let secret = engine_secret(&args.data_dir)?;
    let key = terrace_commands::settings::read_secret_file("engine.secret", &secret)?;
    let stopping = Arc::new(AtomicBool::new(false));
    anyhow::ensure!(args.replicas <= 4, "--replicas must be at most 4");
    let mut engines = Vec::new();
    let mut addrs = Vec::new();
    let mut replica_addrs = Vec::new();
    // The primaries first, then each round of replicas (replica j of engine i on port
    // engine_port + engines * (j + 1) + i).
    let mut primary_files: Vec<PathBuf> = Vec::new();
    for i in 0..args.engines * (1 + args.replicas) {
        let port = args.engine_port.checked_add(i).context("--engine-port leaves no room for every engine")?;
        let dir = args.data_dir.join(format!("engine-{}", i + 1));
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let replica = i >= args.engines;
        let own = engine_password_file(&args.data_dir, &key, port)?;
        // (The primaries come first: a replica's is written already.)
        let primary = if replica { primary_files[usize::from(i % args.engines)].clone() } else { own.clone() };
        if !replica {
            primary_files.push(own.clone());
        }
        let command = engine_command(&exe, port, &dir, &EnginePasswords { own, primary }, &args.save, metrics_port(args.metrics_port, i + 1));
        let mut restart = command.clone();
        if args.replicas > 0 {
            restart.push("--wait-for-role".into());
        }
        let child = spawn(&command.into()).with_context(|| format!("cannot start engine {}", i + 1))?;
        engines.push(Arc::new(Supervised { name: format!("engine {} (port {port})", i + 1), restart: restart.into(), child: Mutex::new(Some(child)) }));
        if replica {
            replica_addrs.push(format!("127.0.0.1:{port}"));
        } else {
            addrs.push(format!("127.0.0.1:{port}"));
        }
    }
    for e in &engines {
        let (e, stopping) = (e.clone(), stopping.clone());
        std::thread::spawn(move || supervise(&e, &stopping));
    }
    // Engines the console added in earlier runs come back on their ports.
    let added = Arc::new(Added {
        exe: exe.clone(),
        data_dir: args.data_dir.clone(),
        key: key.clone(),
        save: args.save.clone(),
        ports: (args.engine_port, args.metrics_port),
        next_port: Mutex::new(args.engine_port.saturating_add(args.engines * (1 + args.replicas))),
        engines: Arc::new(Mutex::new(Vec::new())),
        stopping: stopping.clone(),
    });
    for port in added.listed() {
        added.run(port)?;
    }
    // Clients get the proxy once the engines answer (an engine loading a large snapshot
    // takes a while); the proxy would reconnect anyway, but its first clients would see errors.
    for addr in addrs.iter().chain(&replica_addrs) {
        wait_listening(addr, "engine")?;
    }
    eprintln!(
        "terrace up: proxy on {}:{} (Redis clients) and {}:{} (Memcached clients), engines on {}{}",
        args.bind,
        if args.port == 0 { "(ephemeral)".to_string() } else { args.port.to_string() },
        args.bind,
        args.memcache_port,
        addrs.join(", "),
        if replica_addrs.is_empty() { String::new() } else { format!(", replicas on {}", replica_addrs.join(", ")) }
    );
    if args.metrics_port != 0 {
        eprintln!("terrace up: Prometheus metrics on http://127.0.0.1:{}/metrics (the proxy), engine N on port {} + N", args.metrics_port, args.metrics_port);
    }
    if args.save.trim().is_empty() {
        eprintln!("terrace up: no save points (--save \"\"): the engines keep nothing across a restart");
    } else {
        eprintln!(
            "terrace up: what survives a restart: everything on a clean stop (the engines save a snapshot as they stop); after a crash, the last snapshot (save points \"{}\": at least CHANGES writes SECONDS old)",
            args.save
        );
    }
    let admin_password = terrace_console::auth::random_hex(24);
    // The console needs the proxy's port: an ephemeral one (port 0) is picked here.
    let proxy_port = match args.port {
        0 => std::net::TcpListener::bind((args.bind.as_str(), 0)).and_then(|l| l.local_addr()).context("cannot find a free port for the proxy")?.port(),
        p => p,
    };
    let proxy_addr = format!("{}:{proxy_port}", if args.bind == "0.0.0.0" { "127.0.0.1" } else { &args.bind });
    let mut control_plane = None;
    if args.consoles > 1 {
        // The consoles are processes of their own: the engines they add are started (and
        // supervised, and stopped) by this one, through its launcher's socket.
        let launcher_socket = args.data_dir.join("launcher.sock");
        terrace_console::launch_socket::serve(&launcher_socket, added.clone())
            .with_context(|| format!("cannot serve the engines' launcher at {} (a Unix socket's path holds at most 107 bytes)", launcher_socket.display()))?;
        let plan = consoles::Plan {
            exe: &exe,
            data_dir: &args.data_dir,
            consoles: args.consoles,
            console_port: args.console_port,
            etcd_port: args.etcd_port,
            engines: &addrs,
            replicas: &replica_addrs,
            proxy: &proxy_addr,
            proxy_admin_password: &admin_password,
            engine_secret: &secret,
            launcher_socket: &launcher_socket,
        };
        let running = consoles::start(&plan, &stopping)?;
        eprintln!(
            "terrace up: consoles on {} (they elect one coordinator: GET /api/v1/topology names it), etcd on {}",
            running.consoles.iter().map(|a| format!("http://{a}")).collect::<Vec<_>>().join(", "),
            running.etcd.join(", ")
        );
        control_plane = Some(running);
    } else {
        start_console(&args, &addrs, replica_addrs, proxy_addr, &admin_password, &secret, added.clone())?;
    }
    let settings = terrace_proxy::ProxySettings {
        port: Some(proxy_port),
        memcache_port: Some(args.memcache_port),
        bind: Some(args.bind.clone()),
        engines: Some(addrs),
        admin_password: Some(admin_password),
        engine_key_file: Some(secret),
        // Its console's slot map (engines added, slots moved) is the one to route with,
        // not an even split of the first engines.
        await_console: Some(true),
        // (Several consoles: the coordinator publishes it in etcd.)
        etcd: control_plane.as_ref().map(|c| c.etcd.clone()),
        metrics_port: metrics_port(args.metrics_port, 0),
        ..Default::default()
    }
    // (The proxy's other settings, `default_max_memory` say, from TERRACE_PROXY_*.)
    .or(terrace_proxy::ProxySettings::from_env()?);
    crate::release_freed_memory_every_second();
    let result = settings.resolve().map_err(anyhow::Error::from).and_then(|c| Ok(terrace_proxy::run(c)?));
    stopping.store(true, Ordering::SeqCst);
    let control = control_plane.map(|c| c.processes).unwrap_or_default();
    for e in control.iter().chain(engines.iter()).chain(added.engines.lock().unwrap().iter()) {
        stop_engine(e);
    }
    result
}

/// The console in this process, on its SQLite database, with the launcher of added engines.
fn start_console(
    args: &UpArgs,
    addrs: &[String],
    replica_addrs: Vec<String>,
    proxy_addr: String,
    admin_password: &str,
    secret: &std::path::Path,
    added: Arc<Added>,
) -> anyhow::Result<()> {
    let console = terrace_console::ConsoleSettings {
        port: Some(args.console_port),
        db: Some(args.data_dir.join("console.db")),
        engines: Some(addrs.to_vec()),
        replicas: Some(replica_addrs),
        proxies: Some(vec![proxy_addr]),
        proxy_admin_password: Some(admin_password.to_string()),
        engine_key_file: Some(secret.to_path_buf()),
        ..Default::default()
    }
    .or(terrace_console::ConsoleSettings::from_env()?)
    .resolve()?;
    let console = terrace_console::ConsoleConfig { launcher: terrace_console::Launch(Some(added)), own_proxies: true, ..console };
    std::thread::Builder::new().name("terrace-console".into()).spawn(move || {
        let announce = |s: &terrace_console::Started| eprint!("{}", s.announce());
        if let Err(e) = terrace_console::run(console, announce) {
            tracing::error!(error = %e, "the console stopped");
        }
    })?;
    Ok(())
}

/// Starts `launch` as the process `name` and supervises it (restarted the same way).
fn supervised(name: String, launch: Launch, stopping: &Arc<AtomicBool>) -> anyhow::Result<Arc<Supervised>> {
    let child = spawn(&launch).with_context(|| format!("cannot start {name}"))?;
    let process = Arc::new(Supervised { name, restart: launch, child: Mutex::new(Some(child)) });
    let (p, stopping) = (process.clone(), stopping.clone());
    std::thread::spawn(move || supervise(&p, &stopping));
    Ok(process)
}

/// Waits up to 60 s until something listens on `addr` (`what` names it in the error).
fn wait_listening(addr: &str, what: &str) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(addr).is_err() {
        anyhow::ensure!(std::time::Instant::now() < deadline, "{what} {addr} did not start within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Restarts the engine whenever it exits while the appliance runs (backoff 0.1 s → 5 s).
fn supervise(e: &Supervised, stopping: &AtomicBool) {
    let mut backoff = Duration::from_millis(100);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let mut guard = e.child.lock().unwrap();
        let Some(child) = guard.as_mut() else { return };
        match child.try_wait() {
            Ok(None) => continue,
            Ok(Some(status)) => {
                tracing::warn!(engine = %e.name, %status, "engine exited; restarting");
            }
            Err(err) => tracing::warn!(engine = %e.name, %err, "cannot check the engine; restarting"),
        }
        drop(guard);
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_secs(5));
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        match spawn(&e.restart) {
            Ok(c) => *e.child.lock().unwrap() = Some(c),
            Err(err) => tracing::error!(engine = %e.name, %err, "cannot restart the engine"),
        }
    }
}
