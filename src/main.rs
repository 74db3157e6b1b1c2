//! The `terrace` command line: parses arguments and dispatches to the crates' `run` functions.

mod bench;
mod cost;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use terrace_engine::EngineSettings;
use terrace_proxy::ProxySettings;

#[global_allocator]
static ALLOC: terrace_engine::alloc::CountingAlloc = terrace_engine::alloc::CountingAlloc;

/// Returns memory the process freed to the operating system once a second (the engine's cron
/// does the same for an engine): mimalloc purges freed arena memory only on later allocator
/// calls, so a proxy that goes quiet after dropping a client's big replies would keep them
/// resident.
fn release_freed_memory_every_second() {
    let _ = std::thread::Builder::new().name("terrace-purge".into()).spawn(|| loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        terrace_engine::alloc::release_freed();
    });
}

#[derive(Parser)]
#[command(name = "terrace", version, about = "Redis- and Memcached-compatible caching appliance with cost-driven tiering")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the size of the largest variant costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the whole appliance on embedded defaults: two engines and the proxy.
    Up(up::UpArgs),
    /// Run one engine (data node).
    Engine(EngineArgs),
    /// Run the protocol proxy in front of engines.
    Proxy(ProxyArgs),
    /// Run the web console and REST API (tenants, topology, cost advisor).
    Console(ConsoleArgs),
    /// Benchmarks (compression codecs, …).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Record a sampled trace of a tenant's commands and a sample of its data from an engine.
    Record(cost::record::RecordArgs),
    /// Replay a recorded trace against an engine (optionally loading its data sample first).
    Replay(cost::replay::ReplayArgs),
    /// Measure candidate configurations on a recorded trace and cost them with the model.
    CostEval(cost::eval::CostEvalArgs),
    /// Make a test CA and a server and a client certificate for local TLS (not for
    /// production: use your own CA there).
    TlsGen(TlsGenArgs),
    /// Print the password of the engine at an address, derived from the appliance's engine
    /// key: the `requirepass_file` to give an engine the console and proxies know by that
    /// address (their `engine_key_file`; `terrace up`'s is DATA_DIR/engine.secret).
    EnginePassword(EnginePasswordArgs),
    /// Write the man pages (terrace.1 and one per subcommand) into a directory.
    #[command(hide = true)]
    Man { dir: PathBuf },
}

/// terrace.1 and terrace-SUBCOMMAND.1, from the clap definitions `--help` prints.
fn write_man_pages(dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    use clap::CommandFactory;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let cli = Cli::command();
    let mut pages = vec![cli.clone()];
    pages.extend(cli.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.clone().name(format!("terrace-{}", c.get_name()))));
    for page in pages {
        let path = dir.join(format!("{}.1", page.get_name()));
        let mut out = Vec::new();
        clap_mangen::Man::new(page).render(&mut out)?;
        std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[derive(Args)]
struct TlsGenArgs {
    /// Directory to write ca.crt, ca.key, server.crt, server.key, client.crt and client.key in
    dir: PathBuf,
    /// A name of the server certificate, DNS name or IP address (repeatable) [default: localhost, 127.0.0.1]
    #[arg(long = "host")]
    hosts: Vec<String>,
}

impl TlsGenArgs {
    fn run(self) -> anyhow::Result<()> {
        let hosts = if self.hosts.is_empty() { vec!["localhost".to_string(), "127.0.0.1".to_string()] } else { self.hosts };
        let made = terrace_tls::generate(&self.dir, &hosts, "Terrace test CA")?;
        println!("CA:     {} (key {})", made.ca_cert.display(), made.ca_key.display());
        println!("server: {} (key {}) for {}", made.server_cert.display(), made.server_key.display(), hosts.join(", "));
        println!("client: {} (key {})", made.client_cert.display(), made.client_key.display());
        Ok(())
    }
}

#[derive(Args)]
struct EnginePasswordArgs {
    /// The engine key file (mode 0600)
    #[arg(long)]
    key_file: PathBuf,
    /// The engine's address, exactly as the console and the proxies list it (host:port)
    address: String,
}

impl EnginePasswordArgs {
    fn run(self) -> anyhow::Result<()> {
        let key = terrace_commands::settings::read_secret_file("key_file", &self.key_file)?;
        anyhow::ensure!(terrace_commands::settings::is_host_port(&self.address), "the address must be host:port, as the console lists the engine");
        println!("{}", terrace_commands::credentials::engine_password(&key, &self.address));
        Ok(())
    }
}

#[derive(Args)]
struct ConsoleArgs {
    /// HTTP port [env: TERRACE_CONSOLE_PORT] [default: 8080]
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on [env: TERRACE_CONSOLE_BIND] [default: 127.0.0.1]
    #[arg(long)]
    bind: Option<String>,
    /// SQLite database file [env: TERRACE_CONSOLE_DB] [default: data/console.db]
    #[arg(long)]
    db: Option<PathBuf>,
    /// Engines of a new slot map, comma-separated host:port [env: TERRACE_CONSOLE_ENGINES] [default: 127.0.0.1:7001,127.0.0.1:7002]
    #[arg(long)]
    engines: Option<String>,
    /// Proxies to push to, comma-separated host:port [env: TERRACE_CONSOLE_PROXIES] [default: 127.0.0.1:6379]
    #[arg(long)]
    proxies: Option<String>,
    /// Milliseconds between reconcile passes [default: 2000]
    #[arg(long)]
    reconcile_ms: Option<u64>,
    /// Milliseconds between the history's samples of every node and tenant [default: 10000]
    #[arg(long)]
    sample_ms: Option<u64>,
    /// POST every event (changes, failovers, restarts, alerts) as JSON to this http:// URL
    /// [env: TERRACE_CONSOLE_WEBHOOK_URL]
    #[arg(long, env = "TERRACE_CONSOLE_WEBHOOK_URL")]
    webhook_url: Option<String>,
    /// Replicas of a new slot map, comma-separated host:port; the i-th follows engine i
    /// modulo the engines [env: TERRACE_CONSOLE_REPLICAS]
    #[arg(long)]
    replicas: Option<String>,
    /// Milliseconds between the coordinator's checks of primaries and replicas [default: 500]
    #[arg(long)]
    health_ms: Option<u64>,
    /// Milliseconds a primary may be unreachable before its best replica replaces it [default: 2000]
    #[arg(long)]
    failover_after_ms: Option<u64>,
    /// Milliseconds a replicated primary's term lease lasts; it takes writes only while the
    /// coordinator renews it [default: three quarters of failover_after_ms]
    #[arg(long)]
    lease_ms: Option<u64>,
    /// Bytes a second a slot move copies at most, a size (0: no limit) [env: TERRACE_CONSOLE_MOVE_RATE] [default: 0]
    #[arg(long)]
    move_rate: Option<String>,
    /// Percent of the time a slot move's copying and deleting may work on the engines [default: 50]
    #[arg(long)]
    move_pace: Option<u8>,
    /// Serve HTTPS with this certificate chain, PEM (with --tls-key-file) [env: TERRACE_CONSOLE_TLS_CERT_FILE]
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// The HTTPS certificate's private key, PEM [env: TERRACE_CONSOLE_TLS_KEY_FILE]
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// CA that engines, proxies (--tls-nodes) and an https:// webhook are verified against, PEM [env: TERRACE_CONSOLE_TLS_CA_CERT_FILE]
    #[arg(long)]
    tls_ca_cert_file: Option<PathBuf>,
    /// Certificate shown to nodes that ask for one, PEM [env: TERRACE_CONSOLE_TLS_CLIENT_CERT_FILE] [default: --tls-cert-file]
    #[arg(long)]
    tls_client_cert_file: Option<PathBuf>,
    /// Its private key, PEM [env: TERRACE_CONSOLE_TLS_CLIENT_KEY_FILE] [default: --tls-key-file]
    #[arg(long)]
    tls_client_key_file: Option<PathBuf>,
    /// Reach engines and proxies over TLS (their addresses are their TLS ports) [env: TERRACE_CONSOLE_TLS_NODES] [default: false]
    #[arg(long)]
    tls_nodes: bool,
    /// etcd endpoints, comma-separated host:port: the coordinator is elected there and publishes the proxies' topology there [env: TERRACE_CONSOLE_ETCD] [default: none: this console coordinates alone]
    #[arg(long)]
    etcd: Option<String>,
    /// The address operators and other consoles reach this console at, host:port, as the topology's "coordinator" names it [env: TERRACE_CONSOLE_ADVERTISE] [default: the address it listens on]
    #[arg(long)]
    advertise: Option<String>,
    /// The Unix socket of the appliance that starts the engines added without an address (`terrace up --consoles N` gives its own) [env: TERRACE_CONSOLE_LAUNCHER_SOCKET] [default: none: engines are added by address]
    #[arg(long)]
    launcher_socket: Option<PathBuf>,
    /// TOML configuration file; its [console] table is read.
    #[arg(long, env = "TERRACE_CONFIG")]
    config: Option<PathBuf>,
}

impl ConsoleArgs {
    fn config(self) -> anyhow::Result<terrace_console::ConsoleConfig> {
        let list = |s: String| terrace_proxy::config::split_list(&s);
        let flags = terrace_console::ConsoleSettings {
            port: self.port,
            bind: self.bind,
            db: self.db,
            engines: self.engines.map(list),
            proxies: self.proxies.map(list),
            reconcile_ms: self.reconcile_ms,
            sample_ms: self.sample_ms,
            webhook_url: self.webhook_url,
            replicas: self.replicas.map(list),
            health_ms: self.health_ms,
            failover_after_ms: self.failover_after_ms,
            lease_ms: self.lease_ms,
            move_rate: self.move_rate,
            move_pace: self.move_pace,
            tls_cert_file: self.tls_cert_file,
            tls_key_file: self.tls_key_file,
            tls_ca_cert_file: self.tls_ca_cert_file,
            tls_client_cert_file: self.tls_client_cert_file,
            tls_client_key_file: self.tls_client_key_file,
            tls_nodes: self.tls_nodes.then_some(true),
            etcd: self.etcd.map(list),
            advertise: self.advertise,
            launcher_socket: self.launcher_socket,
            ..Default::default()
        };
        let file = match &self.config {
            Some(p) => terrace_console::ConsoleSettings::from_file(p)?,
            None => Default::default(),
        };
        Ok(flags.or(terrace_console::ConsoleSettings::from_env()?).or(file).resolve()?)
    }
}

/// Prints the console's lines (URL, first-start password) in one write.
fn announce(started: &terrace_console::Started) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(started.announce().as_bytes()).and_then(|_| out.flush());
}

#[derive(Args)]
struct ProxyArgs {
    /// Port for Redis clients [env: TERRACE_PROXY_PORT] [default: 6379]
    #[arg(long)]
    port: Option<u16>,
    /// Port for Memcached clients [env: TERRACE_PROXY_MEMCACHE_PORT] [default: 11211]
    #[arg(long)]
    memcache_port: Option<u16>,
    /// HTTP port for Prometheus metrics at /metrics [env: TERRACE_PROXY_METRICS_PORT] [default: off]
    #[arg(long)]
    metrics_port: Option<u16>,
    /// A file (mode 0600) holding the bearer token GET /metrics must carry [env: TERRACE_PROXY_METRICS_TOKEN_FILE] [default: none]
    #[arg(long)]
    metrics_token_file: Option<std::path::PathBuf>,
    /// Hot-key near cache TTL in milliseconds; 0 = off [default: 0]
    #[arg(long)]
    near_cache_ttl_ms: Option<u64>,
    /// Address to listen on [env: TERRACE_PROXY_BIND] [default: 127.0.0.1]
    #[arg(long)]
    bind: Option<String>,
    /// Engines, comma-separated host:port [env: TERRACE_PROXY_ENGINES] [default: 127.0.0.1:7001,127.0.0.1:7002]
    #[arg(long)]
    engines: Option<String>,
    /// TOML configuration file; its [proxy] table is read.
    #[arg(long, env = "TERRACE_CONFIG")]
    config: Option<PathBuf>,
    /// Reactor threads [env: TERRACE_PROXY_THREADS] [default: 1]
    #[arg(long)]
    threads: Option<usize>,
    /// Milliseconds a request may wait for an engine [env: TERRACE_PROXY_TIMEOUT_MS] [default: 2000]
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Every proxy, comma-separated host:port, as cluster-mode clients are shown them (CLUSTER SLOTS) [env: TERRACE_PROXY_CLUSTER_NODES] [default: this proxy alone]
    #[arg(long)]
    cluster_nodes: Option<String>,
    /// A console manages this proxy: hold every request until its first topology arrives [env: TERRACE_PROXY_AWAIT_CONSOLE] [default: false]
    #[arg(long)]
    await_console: bool,
    /// etcd endpoints, comma-separated host:port: take the topology from etcd (watched; the last one kept while etcd is unreachable), not from the console's pushes [env: TERRACE_PROXY_ETCD] [default: none]
    #[arg(long)]
    etcd: Option<String>,
    /// Port for Redis clients over TLS, beside --port [env: TERRACE_PROXY_TLS_PORT] [default: off]
    #[arg(long)]
    tls_port: Option<u16>,
    /// Port for Memcached clients over TLS, beside --memcache-port [env: TERRACE_PROXY_MEMCACHE_TLS_PORT] [default: off]
    #[arg(long)]
    memcache_tls_port: Option<u16>,
    /// Certificate chain of the TLS ports, PEM [env: TERRACE_PROXY_TLS_CERT_FILE]
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// Private key of the TLS ports, PEM [env: TERRACE_PROXY_TLS_KEY_FILE]
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// CA that client certificates are verified against, PEM [env: TERRACE_PROXY_TLS_CA_CERT_FILE]
    #[arg(long)]
    tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must show a certificate: no, optional or yes [env: TERRACE_PROXY_TLS_AUTH_CLIENTS] [default: no]
    #[arg(long)]
    tls_auth_clients: Option<String>,
    /// Connect to the engines over TLS (the engine addresses are their TLS ports), verified against --tls-ca-cert-file [env: TERRACE_PROXY_TLS_ENGINES] [default: false]
    #[arg(long)]
    tls_engines: bool,
    /// Certificate shown to engines that ask for one, PEM [env: TERRACE_PROXY_TLS_CLIENT_CERT_FILE] [default: --tls-cert-file]
    #[arg(long)]
    tls_client_cert_file: Option<PathBuf>,
    /// Its private key, PEM [env: TERRACE_PROXY_TLS_CLIENT_KEY_FILE] [default: --tls-key-file]
    #[arg(long)]
    tls_client_key_file: Option<PathBuf>,
}

impl ProxyArgs {
    /// The resolved configuration; a reload re-reads the file under the same flags and
    /// environment.
    fn config(self) -> anyhow::Result<terrace_proxy::ProxyConfig> {
        let flags = ProxySettings {
            port: self.port,
            memcache_port: self.memcache_port,
            metrics_port: self.metrics_port,
            metrics_token_file: self.metrics_token_file,
            near_cache_ttl_ms: self.near_cache_ttl_ms,
            bind: self.bind,
            engines: self.engines.map(|e| terrace_proxy::config::split_list(&e)),
            threads: self.threads,
            timeout_ms: self.timeout_ms,
            cluster_nodes: self.cluster_nodes.map(|e| terrace_proxy::config::split_list(&e)),
            await_console: self.await_console.then_some(true),
            etcd: self.etcd.map(|e| terrace_proxy::config::split_list(&e)),
            tls_port: self.tls_port,
            memcache_tls_port: self.memcache_tls_port,
            tls_cert_file: self.tls_cert_file,
            tls_key_file: self.tls_key_file,
            tls_ca_cert_file: self.tls_ca_cert_file,
            tls_auth_clients: self.tls_auth_clients,
            tls_engines: self.tls_engines.then_some(true),
            tls_client_cert_file: self.tls_client_cert_file,
            tls_client_key_file: self.tls_client_key_file,
            ..Default::default()
        };
        let overrides = flags.or(ProxySettings::from_env()?);
        let file = match &self.config {
            Some(p) => ProxySettings::from_file(p)?,
            None => ProxySettings::default(),
        };
        let mut config = overrides.clone().or(file).resolve()?;
        config.reload_from = self.config.map(|p| (p, overrides));
        Ok(config)
    }
}

#[derive(Args)]
struct EngineArgs {
    /// TCP port [env: TERRACE_PORT] [default: 7001]
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on [env: TERRACE_BIND] [default: 127.0.0.1]
    #[arg(long)]
    bind: Option<String>,
    /// TOML configuration file; its [engine] table is read.
    #[arg(long, env = "TERRACE_CONFIG")]
    config: Option<PathBuf>,
    /// Memory limit, e.g. 1gb; 0 = none [env: TERRACE_MAXMEMORY]
    #[arg(long)]
    maxmemory: Option<String>,
    /// Eviction policy when maxmemory is reached [env: TERRACE_MAXMEMORY_POLICY]
    #[arg(long)]
    maxmemory_policy: Option<String>,
    /// Save points, as Redis's `save`: "SECONDS CHANGES …" — a snapshot (dump.rdb) when at
    /// least CHANGES writes are SECONDS old, and one on a clean shutdown; "" for none
    /// [env: TERRACE_SAVE] [default: none]
    #[arg(long)]
    save: Option<String>,
    /// HTTP port for Prometheus metrics at /metrics [env: TERRACE_METRICS_PORT] [default: off]
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Reactor threads: `single`, a count, or `elastic[:max]` (one while quiet, up to max in bursts) [env: TERRACE_THREADS] [default: elastic:<cores available>]
    #[arg(long)]
    threads: Option<String>,
    /// Elastic threads: busy percent of every active reactor to wake another [env: TERRACE_ELASTIC_UP] [default: 80]
    #[arg(long)]
    elastic_up: Option<u32>,
    /// Elastic threads: busy percent below which a reactor is folded back [env: TERRACE_ELASTIC_DOWN] [default: 30]
    #[arg(long)]
    elastic_down: Option<u32>,
    /// Elastic threads: sampling interval, ms [env: TERRACE_ELASTIC_SAMPLE_MS] [default: 100]
    #[arg(long)]
    elastic_sample_ms: Option<u64>,
    /// Elastic threads: how long load must stay below elastic_down to fold back, ms [env: TERRACE_ELASTIC_DOWN_MS] [default: 2000]
    #[arg(long)]
    elastic_down_ms: Option<u64>,
    /// How long a reactor keeps polling its sockets after a read before it sleeps, µs; 0 never spins [env: TERRACE_IDLE_SPIN_US] [default: 50]
    #[arg(long)]
    idle_spin_us: Option<u64>,
    /// How long one tenant's connection runs requests before the other tenants on its reactor get their turn, µs; 0 turns fairness off [env: TERRACE_TENANT_SLICE_US] [default: 100]
    #[arg(long)]
    tenant_slice_us: Option<u64>,
    /// Requests of a pipeline whose keys are pulled into the CPU cache together before they run; 0 turns it off [env: TERRACE_PREFETCH_BATCH] [default: 32]
    #[arg(long)]
    prefetch_batch: Option<usize>,
    /// Data directory [env: TERRACE_DATA_DIR] [default: data]
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Default value compression: none, zstd, zstd-dict, pattern or auto [env: TERRACE_COMPRESSION] [default: none]
    #[arg(long)]
    compression: Option<String>,
    /// eager (compress on write) or lazy (once cold) [env: TERRACE_COMPRESSION_MODE] [default: eager]
    #[arg(long)]
    compression_mode: Option<String>,
    /// PMem tier file (a DAX file on PMem/CXL, or any file) [env: TERRACE_PMEM_PATH] [default: none]
    #[arg(long)]
    pmem_path: Option<PathBuf>,
    /// PMem tier size, e.g. 8gb [env: TERRACE_PMEM_SIZE] [default: 1gb]
    #[arg(long)]
    pmem_size: Option<String>,
    /// Budget for value bytes in DRAM with a PMem tier [env: TERRACE_DRAM_MAX] [default: pmem_size/4]
    #[arg(long)]
    dram_max: Option<String>,
    /// dram-first, pmem-first or bidirectional [env: TERRACE_TIER_POLICY] [default: dram-first]
    #[arg(long)]
    tier_policy: Option<String>,
    /// Reads of a PMem value before it is promoted [env: TERRACE_PROMOTE_HITS] [default: 2]
    #[arg(long)]
    promote_hits: Option<u8>,
    /// Write-ahead log: off, file (fsync every second), always (fsync before replying) or pmem (a flushed ring) [env: TERRACE_WAL] [default: off]
    #[arg(long)]
    wal: Option<String>,
    /// The PMem ring file of `--wal pmem` [env: TERRACE_WAL_RING_PATH] [default: DATA_DIR/wal/ring]
    #[arg(long)]
    wal_ring_path: Option<PathBuf>,
    /// Size of the PMem ring [env: TERRACE_WAL_RING_SIZE] [default: 64mb]
    #[arg(long)]
    wal_ring_size: Option<String>,
    /// Size at which a WAL segment is closed, so segments only write-back data storage has taken can be deleted [env: TERRACE_WAL_SEGMENT_SIZE] [default: 64mb]
    #[arg(long)]
    wal_segment_size: Option<String>,
    /// Storage tier behind the cache: none, lsm (embedded) or postgres [env: TERRACE_STORAGE] [default: none]
    #[arg(long)]
    storage: Option<String>,
    /// postgres://user@host:port/db for --storage postgres [env: TERRACE_STORAGE_URL]
    #[arg(long)]
    storage_url: Option<String>,
    /// cache, write-through or write-back [env: TERRACE_STORAGE_MODE] [default: write-through]
    #[arg(long)]
    storage_mode: Option<String>,
    /// Write-back: dirty bytes above which writes wait for the flusher [env: TERRACE_DIRTY_MAX] [default: 64mb]
    #[arg(long)]
    dirty_max: Option<String>,
    /// Write-back: how long a write waits for room before it fails, ms [env: TERRACE_DIRTY_TIMEOUT_MS] [default: 5000]
    #[arg(long)]
    dirty_timeout_ms: Option<u64>,
    /// Write-back: the flusher's interval, ms [env: TERRACE_FLUSH_INTERVAL_MS] [default: 100]
    #[arg(long)]
    flush_interval_ms: Option<u64>,
    /// Write-back: keys per flush batch (a full batch flushes at once) [env: TERRACE_FLUSH_BATCH] [default: 1024]
    #[arg(long)]
    flush_batch: Option<usize>,
    /// Who may run DEBUG: no, yes or local (clients on a loopback address) [env: TERRACE_ENABLE_DEBUG_COMMAND] [default: no]
    #[arg(long)]
    enable_debug_command: Option<String>,
    /// A file (mode 0600) holding the password clients must AUTH with, as Redis's requirepass [env: TERRACE_REQUIREPASS_FILE] [default: none]
    #[arg(long)]
    requirepass_file: Option<std::path::PathBuf>,
    /// A file (mode 0600) holding the bearer token GET /metrics must carry [env: TERRACE_METRICS_TOKEN_FILE] [default: none]
    #[arg(long)]
    metrics_token_file: Option<std::path::PathBuf>,
    /// A file (mode 0600) holding the password given to a master when replicating, as Redis's masterauth [env: TERRACE_MASTERAUTH_FILE] [default: none]
    #[arg(long)]
    masterauth_file: Option<std::path::PathBuf>,
    /// Start fenced: refuse clients (-TRYAGAIN) until a REPLICAOF gives this engine a role (what `terrace up` restarts a replicated engine with)
    #[arg(long)]
    wait_for_role: bool,
    /// Port for clients over TLS, beside --port [env: TERRACE_TLS_PORT] [default: off]
    #[arg(long)]
    tls_port: Option<u16>,
    /// Listen on --tls-port alone, no plain port [env: TERRACE_TLS_ONLY] [default: false]
    #[arg(long)]
    tls_only: bool,
    /// Certificate chain of the TLS port, PEM [env: TERRACE_TLS_CERT_FILE]
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// Private key of the TLS port, PEM [env: TERRACE_TLS_KEY_FILE]
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// CA that TLS peers are verified against (clients, a master, other engines), PEM [env: TERRACE_TLS_CA_CERT_FILE]
    #[arg(long)]
    tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must show a certificate: no, optional or yes [env: TERRACE_TLS_AUTH_CLIENTS] [default: no]
    #[arg(long)]
    tls_auth_clients: Option<String>,
    /// Certificate shown on this engine's TLS links, PEM [env: TERRACE_TLS_CLIENT_CERT_FILE] [default: --tls-cert-file]
    #[arg(long)]
    tls_client_cert_file: Option<PathBuf>,
    /// Its private key, PEM [env: TERRACE_TLS_CLIENT_KEY_FILE] [default: --tls-key-file]
    #[arg(long)]
    tls_client_key_file: Option<PathBuf>,
    /// A replica's link to its master over TLS [env: TERRACE_TLS_REPLICATION] [default: false]
    #[arg(long)]
    tls_replication: bool,
    /// Slot moves' links to other engines over TLS [env: TERRACE_TLS_CLUSTER] [default: false]
    #[arg(long)]
    tls_cluster: bool,
}

impl EngineArgs {
    fn settings(self) -> anyhow::Result<EngineSettings> {
        let flags = EngineSettings {
            port: self.port,
            bind: self.bind,
            maxmemory: self.maxmemory.map(toml::Value::String),
            maxmemory_policy: self.maxmemory_policy,
            save: self.save,
            threads: self.threads.map(toml::Value::String),
            metrics_port: self.metrics_port,
            elastic_up: self.elastic_up,
            elastic_down: self.elastic_down,
            elastic_sample_ms: self.elastic_sample_ms,
            elastic_down_ms: self.elastic_down_ms,
            idle_spin_us: self.idle_spin_us,
            tenant_slice_us: self.tenant_slice_us,
            prefetch_batch: self.prefetch_batch,
            data_dir: self.data_dir,
            compression: self.compression,
            compression_mode: self.compression_mode,
            pmem_path: self.pmem_path,
            pmem_size: self.pmem_size.map(toml::Value::String),
            dram_max: self.dram_max.map(toml::Value::String),
            tier_policy: self.tier_policy,
            promote_hits: self.promote_hits,
            wal: self.wal,
            wal_ring_path: self.wal_ring_path,
            wal_ring_size: self.wal_ring_size.map(toml::Value::String),
            wal_segment_size: self.wal_segment_size.map(toml::Value::String),
            storage: self.storage,
            storage_url: self.storage_url,
            storage_mode: self.storage_mode,
            dirty_max: self.dirty_max.map(toml::Value::String),
            dirty_timeout_ms: self.dirty_timeout_ms,
            flush_interval_ms: self.flush_interval_ms,
            flush_batch: self.flush_batch,
            enable_debug_command: self.enable_debug_command,
            requirepass_file: self.requirepass_file,
            metrics_token_file: self.metrics_token_file,
            masterauth_file: self.masterauth_file,
            wait_for_role: self.wait_for_role.then_some(true),
            tls_port: self.tls_port,
            tls_only: self.tls_only.then_some(true),
            tls_cert_file: self.tls_cert_file,
            tls_key_file: self.tls_key_file,
            tls_ca_cert_file: self.tls_ca_cert_file,
            tls_auth_clients: self.tls_auth_clients,
            tls_client_cert_file: self.tls_client_cert_file,
            tls_client_key_file: self.tls_client_key_file,
            tls_replication: self.tls_replication.then_some(true),
            tls_cluster: self.tls_cluster.then_some(true),
            ..Default::default()
        };
        let env = EngineSettings::from_env()?;
        let file = match &self.config {
            Some(p) => EngineSettings::from_file(p)?,
            None => EngineSettings::default(),
        };
        Ok(flags.or(env).or(file))
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TERRACE_LOG").unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        Command::Engine(args) => args.settings().and_then(|s| Ok(s.resolve()?)).and_then(|c| Ok(terrace_engine::run(c)?)),
        Command::Proxy(args) => {
            release_freed_memory_every_second();
            args.config().and_then(|c| Ok(terrace_proxy::run(c)?))
        }
        Command::Console(args) => args.config().and_then(|c| Ok(terrace_console::run(c, announce)?)),
        Command::Up(args) => up::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Record(args) => cost::record::run(args),
        Command::Replay(args) => cost::replay::run(args),
        Command::CostEval(args) => cost::eval::run(args),
        Command::TlsGen(args) => args.run(),
        Command::EnginePassword(args) => args.run(),
        Command::Man { dir } => write_man_pages(&dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("terrace: {e:#}");
            ExitCode::FAILURE
        }
    }
}
