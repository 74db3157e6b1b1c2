//! Proxy configuration: the `[proxy]` table of `terrace.toml`, `TERRACE_PROXY_*` environment
//! variables and flags, merged as flag > env > file > default. Errors name the offending key.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::slots::SlotMap;

pub use terrace_commands::settings::ConfigError;

fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.into(), reason: reason.into() }
}

/// One `[[proxy.slots]]` entry: `engine` (index into `engines`) owns `range` ("first-last").
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlotRange {
    pub engine: usize,
    pub range: String,
}

/// One `[[proxy.tenants]]` entry.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSettings {
    pub name: String,
    pub password: Option<String>,
    /// The SHA-256 of the password, 64 hex digits, instead of the password (what the console
    /// pushes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_sha256: Option<String>,
    /// The password's argon2id hash, a PHC string (`$argon2id$…`; what the console pushes
    /// for a password set since it keeps them so).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub password_hash: Option<String>,
    /// A Memcached port of the tenant's own (Memcached has no AUTH in its text protocol).
    pub memcache_port: Option<u16>,
    /// Requests per second allowed through this proxy (token bucket).
    pub max_qps: Option<u64>,
    /// The tenant's data limit over all engines (each engine enforces its even share).
    pub max_memory: Option<toml::Value>,
    /// Value compression in the engines: none | zstd | zstd-dict | pattern | auto.
    pub compression: Option<String>,
    /// eager (compress on write) | lazy (once cold).
    pub compression_mode: Option<String>,
    /// Values shorter than this are stored raw.
    pub compression_min_size: Option<u64>,
    /// How the engines' storage tier serves this tenant: cache | write-through | write-back.
    pub storage_mode: Option<String>,
    /// Its use of the engines' PMem tier: engine | dram-only | dram-first | pmem-first |
    /// bidirectional.
    pub tier_policy: Option<String>,
    /// engine (logged when the engines run a WAL) | off.
    pub wal: Option<String>,
    /// Its reads go to a replica of the engine owning the key when there is one (they may
    /// miss the latest writes: README, "Replication and failover").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_reads: Option<bool>,
}

/// Settings as given by one source; `None` means "not given here".
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxySettings {
    pub port: Option<u16>,
    /// Port for Memcached clients.
    pub memcache_port: Option<u16>,
    /// HTTP port serving Prometheus metrics at /metrics; none = off.
    pub metrics_port: Option<u16>,
    /// A file (mode 0600) holding the bearer token GET /metrics must carry; none = open.
    pub metrics_token_file: Option<std::path::PathBuf>,
    /// Largest Memcached item (key, value and overhead), like memcached's `-I`.
    pub item_size_max: Option<toml::Value>,
    pub bind: Option<String>,
    /// Engine addresses, `host:port`.
    pub engines: Option<Vec<String>>,
    pub threads: Option<usize>,
    /// Password of the default tenant (`AUTH password`); none = no authentication.
    pub password: Option<String>,
    /// The default tenant's data limit over all engines, as a tenant's `max_memory` (bytes
    /// or a size, "1gb"; 0 = none; default 1gb): what clients without a tenant's password
    /// may hold.
    pub default_max_memory: Option<toml::Value>,
    /// Password of the `admin` user (`AUTH admin <password>`), who may replace engines, slots
    /// and tenants live (`TERRACE.TOPOLOGY`, what the console does); none = no admin.
    pub admin_password: Option<String>,
    /// A file (mode 0600) holding one password every engine takes (their
    /// `requirepass_file`): every engine connection authenticates with it first. Safe only
    /// with `tls_engines`: an address in the topology is sent it.
    pub engine_password_file: Option<std::path::PathBuf>,
    /// A file (mode 0600) holding the appliance's engine key: each engine connection
    /// authenticates with that engine's own password, derived from the key and its address
    /// (`terrace engine-password`). `terrace up` makes one.
    pub engine_key_file: Option<std::path::PathBuf>,
    /// How long a request may wait for an engine's reply.
    pub timeout_ms: Option<u64>,
    pub connect_timeout_ms: Option<u64>,
    /// Requests in flight per backend connection before clients wait.
    pub max_inflight: Option<usize>,
    /// Replies a client may leave unread before it is closed (Redis's
    /// `client-output-buffer-limit` hard limit, normal class): bytes or a size ("256mb").
    pub client_output_limit: Option<toml::Value>,
    /// The same for pub/sub and MONITOR clients (Redis's default: 32mb).
    pub pubsub_output_limit: Option<toml::Value>,
    /// Reply bytes all clients together may hold unwritten (Redis 7's `maxmemory-clients`;
    /// default 1gb): past it, a client holding more than 1 MB of them is closed when more
    /// arrive for it.
    pub client_memory_limit: Option<toml::Value>,
    /// Clients connected at once (Redis's `maxclients`, default 10000; lowered to what the
    /// open-file limit allows): one more is refused with Redis's or memcached's error.
    pub maxclients: Option<usize>,
    /// Hot-key near cache: how long a GET reply may be served from the proxy (0 = off).
    pub near_cache_ttl_ms: Option<u64>,
    /// Hot-key near cache: most entries kept.
    pub near_cache_entries: Option<u64>,
    /// Slot ownership; default: slots split evenly over the engines in order.
    pub slots: Option<Vec<SlotRange>>,
    /// Each engine's replicas, `host:port`, in the order of `engines` (for tenants with
    /// `replica_reads`); the console pushes them.
    pub replicas: Option<Vec<Vec<String>>>,
    /// Every proxy, `host:port`, as cluster-mode clients are shown them (CLUSTER SLOTS: each
    /// an even share of the slots); default: this proxy alone. The console pushes its own
    /// `proxies` list.
    pub cluster_nodes: Option<Vec<String>>,
    /// A console manages this proxy: every slot waits (requests are held, not answered from
    /// a stale map) until the console's first topology arrives.
    pub await_console: Option<bool>,
    /// etcd endpoints (`host:port`): the topology is taken from etcd — watched, the last one
    /// kept while etcd cannot be reached — not from the console's pushes.
    pub etcd: Option<Vec<String>>,
    /// How long a request waits for a held slot (a move's pause, `await_console`) before it
    /// is answered `TRYAGAIN` (default 40 s).
    pub held_slot_limit_ms: Option<u64>,
    pub tenants: Option<Vec<TenantSettings>>,
    /// A port for Redis clients over TLS, beside the plain one (Redis's `tls-port`).
    pub tls_port: Option<u16>,
    /// A port for Memcached clients over TLS (as memcached 1.6's `-Z`), beside the plain one.
    pub memcache_tls_port: Option<u16>,
    /// The certificate chain the TLS ports show, PEM (Redis's `tls-cert-file`).
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// Its private key, PEM (`tls-key-file`).
    pub tls_key_file: Option<std::path::PathBuf>,
    /// The CA client certificates are verified against (`tls-ca-cert-file`).
    pub tls_ca_cert_file: Option<std::path::PathBuf>,
    /// no (default) | optional | yes: whether TLS clients must show a certificate of the CA
    /// (`tls-auth-clients`).
    pub tls_auth_clients: Option<String>,
    /// The links to the engines over TLS (their `tls_port`s are the engine addresses),
    /// engines verified against `tls_ca_cert_file`.
    pub tls_engines: Option<bool>,
    /// The certificate shown to engines that ask for one (`tls-client-cert-file`; default:
    /// `tls_cert_file`).
    pub tls_client_cert_file: Option<std::path::PathBuf>,
    /// Its key (`tls-client-key-file`; default: `tls_key_file`).
    pub tls_client_key_file: Option<std::path::PathBuf>,
}

impl ProxySettings {
    /// These settings but for TLS (what a reload of the topology resolves: the TLS
    /// configurations in force re-read their own files).
    pub fn without_tls(self) -> ProxySettings {
        ProxySettings {
            tls_port: None,
            memcache_tls_port: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_ca_cert_file: None,
            tls_auth_clients: None,
            tls_engines: None,
            tls_client_cert_file: None,
            tls_client_key_file: None,
            ..self
        }
    }

    /// Fields of `self` win over `other`'s.
    pub fn or(self, other: ProxySettings) -> ProxySettings {
        ProxySettings {
            port: self.port.or(other.port),
            memcache_port: self.memcache_port.or(other.memcache_port),
            metrics_port: self.metrics_port.or(other.metrics_port),
            metrics_token_file: self.metrics_token_file.or(other.metrics_token_file),
            item_size_max: self.item_size_max.or(other.item_size_max),
            bind: self.bind.or(other.bind),
            engines: self.engines.or(other.engines),
            threads: self.threads.or(other.threads),
            password: self.password.or(other.password),
            default_max_memory: self.default_max_memory.or(other.default_max_memory),
            admin_password: self.admin_password.or(other.admin_password),
            engine_password_file: self.engine_password_file.or(other.engine_password_file),
            engine_key_file: self.engine_key_file.or(other.engine_key_file),
            timeout_ms: self.timeout_ms.or(other.timeout_ms),
            connect_timeout_ms: self.connect_timeout_ms.or(other.connect_timeout_ms),
            max_inflight: self.max_inflight.or(other.max_inflight),
            client_output_limit: self.client_output_limit.or(other.client_output_limit),
            pubsub_output_limit: self.pubsub_output_limit.or(other.pubsub_output_limit),
            client_memory_limit: self.client_memory_limit.or(other.client_memory_limit),
            maxclients: self.maxclients.or(other.maxclients),
            slots: self.slots.or(other.slots),
            cluster_nodes: self.cluster_nodes.or(other.cluster_nodes),
            await_console: self.await_console.or(other.await_console),
            etcd: self.etcd.or(other.etcd),
            held_slot_limit_ms: self.held_slot_limit_ms.or(other.held_slot_limit_ms),
            replicas: self.replicas.or(other.replicas),
            tenants: self.tenants.or(other.tenants),
            near_cache_ttl_ms: self.near_cache_ttl_ms.or(other.near_cache_ttl_ms),
            near_cache_entries: self.near_cache_entries.or(other.near_cache_entries),
            tls_port: self.tls_port.or(other.tls_port),
            memcache_tls_port: self.memcache_tls_port.or(other.memcache_tls_port),
            tls_cert_file: self.tls_cert_file.or(other.tls_cert_file),
            tls_key_file: self.tls_key_file.or(other.tls_key_file),
            tls_ca_cert_file: self.tls_ca_cert_file.or(other.tls_ca_cert_file),
            tls_auth_clients: self.tls_auth_clients.or(other.tls_auth_clients),
            tls_engines: self.tls_engines.or(other.tls_engines),
            tls_client_cert_file: self.tls_client_cert_file.or(other.tls_client_cert_file),
            tls_client_key_file: self.tls_client_key_file.or(other.tls_client_key_file),
        }
    }

    /// Reads TERRACE_PROXY_PORT, TERRACE_PROXY_MEMCACHE_PORT, TERRACE_PROXY_METRICS_PORT, TERRACE_PROXY_BIND, TERRACE_PROXY_ENGINES (comma-separated),
    /// TERRACE_PROXY_THREADS, TERRACE_PROXY_PASSWORD, TERRACE_PROXY_ADMIN_PASSWORD,
    /// TERRACE_PROXY_ENGINE_PASSWORD_FILE, TERRACE_PROXY_TIMEOUT_MS, TERRACE_PROXY_CLUSTER_NODES
    /// (comma-separated), TERRACE_PROXY_TLS_PORT, TERRACE_PROXY_MEMCACHE_TLS_PORT,
    /// TERRACE_PROXY_TLS_CERT_FILE, TERRACE_PROXY_TLS_KEY_FILE, TERRACE_PROXY_TLS_CA_CERT_FILE,
    /// TERRACE_PROXY_TLS_AUTH_CLIENTS.
    pub fn from_env() -> Result<ProxySettings, ConfigError> {
        let var = terrace_commands::settings::env_var;
        fn num<T: std::str::FromStr>(key: &str, v: Option<String>) -> Result<Option<T>, ConfigError> {
            v.map(|s| s.parse().map_err(|_| invalid(key, format!("'{s}' is not a number")))).transpose()
        }
        Ok(ProxySettings {
            port: num("TERRACE_PROXY_PORT", var("TERRACE_PROXY_PORT"))?,
            memcache_port: num("TERRACE_PROXY_MEMCACHE_PORT", var("TERRACE_PROXY_MEMCACHE_PORT"))?,
            metrics_port: num("TERRACE_PROXY_METRICS_PORT", var("TERRACE_PROXY_METRICS_PORT"))?,
            metrics_token_file: var("TERRACE_PROXY_METRICS_TOKEN_FILE").map(std::path::PathBuf::from),
            bind: var("TERRACE_PROXY_BIND"),
            engines: var("TERRACE_PROXY_ENGINES").map(|s| split_list(&s)),
            threads: num("TERRACE_PROXY_THREADS", var("TERRACE_PROXY_THREADS"))?,
            maxclients: num("TERRACE_PROXY_MAXCLIENTS", var("TERRACE_PROXY_MAXCLIENTS"))?,
            client_memory_limit: var("TERRACE_PROXY_CLIENT_MEMORY_LIMIT").map(toml::Value::String),
            password: var("TERRACE_PROXY_PASSWORD"),
            default_max_memory: var("TERRACE_PROXY_DEFAULT_MAX_MEMORY").map(toml::Value::String),
            admin_password: var("TERRACE_PROXY_ADMIN_PASSWORD"),
            engine_password_file: var("TERRACE_PROXY_ENGINE_PASSWORD_FILE").map(std::path::PathBuf::from),
            engine_key_file: var("TERRACE_PROXY_ENGINE_KEY_FILE").map(std::path::PathBuf::from),
            timeout_ms: num("TERRACE_PROXY_TIMEOUT_MS", var("TERRACE_PROXY_TIMEOUT_MS"))?,
            held_slot_limit_ms: num("TERRACE_PROXY_HELD_SLOT_LIMIT_MS", var("TERRACE_PROXY_HELD_SLOT_LIMIT_MS"))?,
            cluster_nodes: var("TERRACE_PROXY_CLUSTER_NODES").map(|s| split_list(&s)),
            tls_port: num("TERRACE_PROXY_TLS_PORT", var("TERRACE_PROXY_TLS_PORT"))?,
            memcache_tls_port: num("TERRACE_PROXY_MEMCACHE_TLS_PORT", var("TERRACE_PROXY_MEMCACHE_TLS_PORT"))?,
            tls_cert_file: var("TERRACE_PROXY_TLS_CERT_FILE").map(std::path::PathBuf::from),
            tls_key_file: var("TERRACE_PROXY_TLS_KEY_FILE").map(std::path::PathBuf::from),
            tls_ca_cert_file: var("TERRACE_PROXY_TLS_CA_CERT_FILE").map(std::path::PathBuf::from),
            tls_auth_clients: var("TERRACE_PROXY_TLS_AUTH_CLIENTS"),
            tls_engines: terrace_commands::settings::env_flag("TERRACE_PROXY_TLS_ENGINES")?,
            tls_client_cert_file: var("TERRACE_PROXY_TLS_CLIENT_CERT_FILE").map(std::path::PathBuf::from),
            tls_client_key_file: var("TERRACE_PROXY_TLS_CLIENT_KEY_FILE").map(std::path::PathBuf::from),
            await_console: terrace_commands::settings::env_flag("TERRACE_PROXY_AWAIT_CONSOLE")?,
            etcd: var("TERRACE_PROXY_ETCD").map(|s| split_list(&s)),
            ..Default::default()
        })
    }

    /// Reads the `[proxy]` table of a TOML file.
    pub fn from_file(path: &Path) -> Result<ProxySettings, ConfigError> {
        terrace_commands::settings::read_table(path, "proxy")
    }

    /// Validates and fills defaults.
    pub fn resolve(self) -> Result<ProxyConfig, ConfigError> {
        let engines = self.engines.unwrap_or_else(|| vec!["127.0.0.1:7001".into(), "127.0.0.1:7002".into()]);
        if engines.is_empty() {
            return Err(invalid("engines", "at least one engine address is needed"));
        }
        if engines.len() > 1024 {
            return Err(invalid("engines", "at most 1024 engines"));
        }
        let host_port = |key: &str, list: &[String]| {
            for e in list {
                let ok = e.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
                if !ok {
                    return Err(invalid(key, format!("'{e}' is not host:port")));
                }
            }
            Ok(())
        };
        host_port("engines", &engines)?;
        let cluster_nodes = self.cluster_nodes.unwrap_or_default();
        host_port("cluster_nodes", &cluster_nodes)?;
        let replicas = self.replicas.unwrap_or_default();
        if replicas.len() > engines.len() {
            return Err(invalid("replicas", format!("{} lists for {} engines", replicas.len(), engines.len())));
        }
        for r in &replicas {
            host_port("replicas", r)?;
        }
        if cluster_nodes.len() > crate::slots::SLOTS {
            return Err(invalid("cluster_nodes", "more proxies than slots"));
        }
        let slot_map = match &self.slots {
            None => SlotMap::even(engines.len()),
            Some(ranges) => {
                let mut parsed = Vec::new();
                for r in ranges {
                    let (a, b) = r.range.split_once('-').unwrap_or((&r.range, &r.range));
                    let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) else {
                        return Err(invalid("slots", format!("'{}' is not a slot range like 0-8191", r.range)));
                    };
                    parsed.push((r.engine, a..=b));
                }
                SlotMap::from_ranges(engines.len(), &parsed).map_err(|e| invalid("slots", e.to_string()))?
            }
        };
        let threads = self.threads.unwrap_or(1);
        if !(1..=256).contains(&threads) {
            return Err(invalid("threads", format!("{threads} is not a thread count from 1 to 256")));
        }
        let timeout_ms = self.timeout_ms.unwrap_or(2000);
        if timeout_ms == 0 {
            return Err(invalid("timeout_ms", "must be above 0"));
        }
        let held_slot_limit_ms = self.held_slot_limit_ms.unwrap_or(40_000);
        if held_slot_limit_ms == 0 {
            return Err(invalid("held_slot_limit_ms", "must be above 0"));
        }
        let max_inflight = self.max_inflight.unwrap_or(4096);
        if max_inflight == 0 {
            return Err(invalid("max_inflight", "must be above 0"));
        }
        let client_output_limit = output_limit("client_output_limit", self.client_output_limit, 256 << 20)?;
        let pubsub_output_limit = output_limit("pubsub_output_limit", self.pubsub_output_limit, 32 << 20)?;
        let client_memory_limit = output_limit("client_memory_limit", self.client_memory_limit, 1 << 30)?;
        let maxclients = self.maxclients.unwrap_or(10_000);
        if maxclients == 0 {
            return Err(invalid("maxclients", "must be above 0"));
        }
        let item_size_max = match self.item_size_max {
            None => 1024 * 1024,
            Some(toml::Value::Integer(n)) if n > 0 => n as usize,
            Some(toml::Value::String(s)) => terrace_commands::settings::parse_size(&s)
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid("item_size_max", format!("'{s}' is not a size (examples: 1mb, 512kb)")))?
                as usize,
            Some(v) => return Err(invalid("item_size_max", format!("{v} is not a size"))),
        };
        if !(1024..=1024 * 1024 * 1024).contains(&item_size_max) {
            return Err(invalid("item_size_max", "must be between 1kb and 1gb"));
        }
        let default_max_memory = match &self.default_max_memory {
            None => DEFAULT_TENANT_MAX_MEMORY,
            Some(v) => size_value(v).ok_or_else(|| invalid("default_max_memory", format!("{v} is not a size (examples: 0, 100mb, 1gb)")))?,
        };
        let tenants = self.tenants.unwrap_or_default();
        for (i, t) in tenants.iter().enumerate() {
            if !terrace_commands::settings::valid_name(&t.name) || t.name == crate::tenants::DEFAULT || t.name == crate::tenants::ADMIN {
                return Err(invalid("tenants", format!("'{}' is not a tenant name (1-64 letters, digits, '_' and '-'; not 'default' or 'admin')", t.name)));
            }
            if let Some(h) = &t.password_sha256 {
                if t.password.is_some() {
                    return Err(invalid("tenants", format!("tenant '{}' has both password and password_sha256", t.name)));
                }
                if crate::tenants::Password::from_sha256_hex(h).is_none() {
                    return Err(invalid("tenants", format!("password_sha256 of tenant '{}' is not 64 hex digits", t.name)));
                }
            }
            if let Some(h) = &t.password_hash {
                if t.password.is_some() || t.password_sha256.is_some() {
                    return Err(invalid("tenants", format!("tenant '{}' has more than one of password, password_sha256 and password_hash", t.name)));
                }
                if !terrace_commands::passwords::is_phc(h) {
                    return Err(invalid("tenants", format!("password_hash of tenant '{}' is not an argon2 PHC string ($argon2id$…)", t.name)));
                }
            }
            if tenants[..i].iter().any(|o| o.name == t.name) {
                return Err(invalid("tenants", format!("tenant '{}' is listed twice", t.name)));
            }
            if let Some(p) = t.memcache_port {
                if tenants[..i].iter().any(|o| o.memcache_port == Some(p)) || Some(p) == self.memcache_port {
                    return Err(invalid("tenants", format!("memcache_port {p} of tenant '{}' is already in use", t.name)));
                }
            }
            if let Some(v) = &t.max_memory {
                if size_value(v).is_none() {
                    return Err(invalid("tenants", format!("max_memory of tenant '{}': {v} is not a size (examples: 100mb, 1gb)", t.name)));
                }
            }
            if let Some(c) = &t.compression {
                if !["none", "zstd", "zstd-dict", "pattern", "auto"].contains(&c.as_str()) {
                    return Err(invalid("tenants", format!("compression of tenant '{}': '{c}' is not none, zstd, zstd-dict, pattern or auto", t.name)));
                }
            }
            if let Some(m) = &t.compression_mode {
                if !["eager", "lazy"].contains(&m.as_str()) {
                    return Err(invalid("tenants", format!("compression_mode of tenant '{}': '{m}' is not eager or lazy", t.name)));
                }
            }
            if let Some(m) = &t.storage_mode {
                if !["cache", "write-through", "write-back"].contains(&m.as_str()) {
                    return Err(invalid("tenants", format!("storage_mode of tenant '{}': '{m}' is not cache, write-through or write-back", t.name)));
                }
            }
            if let Some(p) = &t.tier_policy {
                if !terrace_commands::settings::TIER_POLICIES.contains(&p.to_ascii_lowercase().as_str()) {
                    return Err(invalid(
                        "tenants",
                        format!("tier_policy of tenant '{}': '{p}' is not engine, dram-only, dram-first, pmem-first or bidirectional", t.name),
                    ));
                }
            }
            if let Some(w) = &t.wal {
                if !["engine", "off"].contains(&w.as_str()) {
                    return Err(invalid("tenants", format!("wal of tenant '{}': '{w}' is not engine or off", t.name)));
                }
            }
            if t.max_qps == Some(0) {
                return Err(invalid("tenants", format!("max_qps of tenant '{}' must be above 0", t.name)));
            }
        }
        let tls_files =
            terrace_tls::TlsFiles::from_settings(self.tls_cert_file, self.tls_key_file, self.tls_ca_cert_file.clone(), self.tls_auth_clients.as_deref())?;
        let engine_tls = match self.tls_engines {
            Some(true) => Some(terrace_tls::LinkTls::from_settings(
                self.tls_ca_cert_file,
                (self.tls_client_cert_file, self.tls_client_key_file),
                tls_files.as_ref(),
                "tls_engines",
            )?),
            _ => None,
        };
        for (key, port) in [("tls_port", self.tls_port), ("memcache_tls_port", self.memcache_tls_port)] {
            if port.is_some() && tls_files.is_none() {
                return Err(invalid(key, "a TLS port needs tls_cert_file and tls_key_file"));
            }
        }
        let tls = match tls_files {
            Some(files) if self.tls_port.is_some() || self.memcache_tls_port.is_some() => Some(Arc::new(terrace_tls::ServerTls::new(files)?)),
            _ => None,
        };
        let metrics_token = terrace_commands::settings::read_secret_file_if_set("metrics_token_file", self.metrics_token_file.as_deref())?;
        let engine_auth = terrace_commands::credentials::EngineAuth::from_files(self.engine_password_file.as_deref(), self.engine_key_file.as_deref())?;
        Ok(ProxyConfig {
            tenants,
            engine_auth,
            port: self.port.unwrap_or(6379),
            memcache_port: self.memcache_port.unwrap_or(11211),
            metrics_port: self.metrics_port,
            metrics_token,
            item_size_max,
            bind: self.bind.unwrap_or_else(|| "127.0.0.1".into()),
            engines,
            threads,
            password: self.password,
            default_max_memory,
            admin_password: self.admin_password.filter(|p| !p.is_empty()),
            timeout: Duration::from_millis(timeout_ms),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms.unwrap_or(timeout_ms.min(1000))),
            max_inflight,
            client_output_limit,
            pubsub_output_limit,
            client_memory_limit,
            maxclients,
            slot_map,
            cluster_nodes,
            await_console: self.await_console.unwrap_or(false),
            etcd: self.etcd.unwrap_or_default(),
            held_slot_limit: Duration::from_millis(held_slot_limit_ms),
            replicas,
            reload_from: None,
            near_cache_ttl: Duration::from_millis(self.near_cache_ttl_ms.unwrap_or(0)),
            near_cache_entries: self.near_cache_entries.unwrap_or(10_000),
            tls_port: self.tls_port,
            memcache_tls_port: self.memcache_tls_port,
            tls,
            engine_tls,
        })
    }
}

/// The default tenant's data limit unless configured: 1 GB over all engines.
pub const DEFAULT_TENANT_MAX_MEMORY: u64 = 1 << 30;

/// An output limit: a size of at least 1mb, or `default` when not given.
fn output_limit(key: &str, value: Option<toml::Value>, default: usize) -> Result<usize, ConfigError> {
    let Some(v) = value else { return Ok(default) };
    match size_value(&v) {
        Some(n) if n >= 1 << 20 => Ok(n as usize),
        _ => Err(invalid(key, format!("{v} is not a size of at least 1mb (examples: 256mb, 1gb)"))),
    }
}

/// A size given as a number of bytes or as text ("100mb").
pub fn size_value(v: &toml::Value) -> Option<u64> {
    match v {
        toml::Value::Integer(n) if *n >= 0 => Some(*n as u64),
        toml::Value::String(s) => terrace_commands::settings::parse_size(s),
        _ => None,
    }
}

/// `a, b,c` → ["a", "b", "c"].
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

/// The resolved proxy configuration.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub port: u16,
    pub memcache_port: u16,
    pub metrics_port: Option<u16>,
    /// The bearer token GET /metrics needs (`metrics_token_file`).
    pub metrics_token: Option<String>,
    pub item_size_max: usize,
    pub bind: String,
    pub engines: Vec<String>,
    pub threads: usize,
    pub password: Option<String>,
    /// The default tenant's data limit over all engines (0: none).
    pub default_max_memory: u64,
    pub admin_password: Option<String>,
    /// What every engine connection authenticates with first (`engine_key_file`,
    /// `engine_password_file`).
    pub engine_auth: terrace_commands::credentials::EngineAuth,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub max_inflight: usize,
    /// Unread reply bytes past which a client is closed (normal; pub/sub and MONITOR).
    pub client_output_limit: usize,
    pub pubsub_output_limit: usize,
    /// Reply bytes all clients may hold unwritten (`client_memory_limit`).
    pub client_memory_limit: usize,
    /// Clients at once, as configured (`maxclients`; the open-file limit may lower it).
    pub maxclients: usize,
    pub slot_map: SlotMap,
    /// The proxies of the cluster view (empty: this one alone).
    pub cluster_nodes: Vec<String>,
    /// Hold every slot until the console's first topology (`await_console`).
    pub await_console: bool,
    /// etcd endpoints the topology is watched at (empty: the console pushes it).
    pub etcd: Vec<String>,
    /// How long a request waits for a held slot before it is answered `TRYAGAIN`.
    pub held_slot_limit: Duration,
    /// Each engine's replicas (by engine index; shorter than `engines` when the last have none).
    pub replicas: Vec<Vec<String>>,
    /// Where a reload re-reads the configuration: the file, and the settings (flags,
    /// environment) that win over it.
    pub reload_from: Option<(std::path::PathBuf, ProxySettings)>,
    pub tenants: Vec<TenantSettings>,
    /// Zero: no near cache.
    pub near_cache_ttl: Duration,
    pub near_cache_entries: u64,
    pub tls_port: Option<u16>,
    pub memcache_tls_port: Option<u16>,
    /// What the TLS ports accept with (none without a TLS port); re-read on reload.
    pub tls: Option<Arc<terrace_tls::ServerTls>>,
    /// The client side of the links to the engines when they are over TLS (`tls_engines`).
    pub engine_tls: Option<terrace_tls::LinkTls>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let c = ProxySettings::default().resolve().unwrap();
        assert_eq!(c.port, 6379);
        assert_eq!(c.engines.len(), 2);
        let bad = ProxySettings { engines: Some(vec!["nohost".into()]), ..Default::default() };
        assert_eq!(bad.resolve().unwrap_err().to_string(), "invalid value for `engines`: 'nohost' is not host:port");
        let bad = ProxySettings { cluster_nodes: Some(vec!["127.0.0.1".into()]), ..Default::default() };
        assert_eq!(bad.resolve().unwrap_err().to_string(), "invalid value for `cluster_nodes`: '127.0.0.1' is not host:port");
        let bad = ProxySettings { slots: Some(vec![SlotRange { engine: 0, range: "0-100".into() }]), ..Default::default() };
        assert_eq!(bad.resolve().unwrap_err().to_string(), "invalid value for `slots`: slot 101 is not assigned to any engine");
        assert_eq!(c.default_max_memory, 1 << 30, "the default tenant has a quota unless configured");
        let none = ProxySettings { default_max_memory: Some(toml::Value::Integer(0)), ..Default::default() };
        assert_eq!(none.resolve().unwrap().default_max_memory, 0);
        let bad = ProxySettings { default_max_memory: Some(toml::Value::String("lots".into())), ..Default::default() };
        assert!(bad.resolve().unwrap_err().to_string().starts_with("invalid value for `default_max_memory`"));
    }

    #[test]
    fn tenants_are_checked() {
        let t = |name: &str, port: Option<u16>| TenantSettings { name: name.into(), memcache_port: port, ..Default::default() };
        let with = |ts: Vec<TenantSettings>| ProxySettings { tenants: Some(ts), ..Default::default() }.resolve();
        assert!(with(vec![t("shop", Some(11300)), t("blog", None)]).is_ok());
        let e = with(vec![t("shop", None), t("shop", None)]).unwrap_err().to_string();
        assert_eq!(e, "invalid value for `tenants`: tenant 'shop' is listed twice");
        let e = with(vec![t("a", Some(1)), t("b", Some(1))]).unwrap_err().to_string();
        assert!(e.contains("memcache_port 1 of tenant 'b'"), "{e}");
        assert!(with(vec![t("default", None)]).is_err());
        assert!(with(vec![t("admin", None)]).is_err());
        let hashed = |h: &str| TenantSettings { password_sha256: Some(h.into()), ..t("h", None) };
        assert!(with(vec![hashed(&"ab".repeat(32))]).is_ok());
        let e = with(vec![hashed("abc")]).unwrap_err().to_string();
        assert!(e.contains("password_sha256 of tenant 'h' is not 64 hex digits"), "{e}");
        let argon = |h: &str| TenantSettings { password_hash: Some(h.into()), ..t("a", None) };
        assert!(with(vec![argon(&terrace_commands::passwords::hash(b"pw"))]).is_ok());
        let e = with(vec![argon("$argon2id$nonsense")]).unwrap_err().to_string();
        assert!(e.contains("password_hash of tenant 'a' is not an argon2 PHC string"), "{e}");
        assert!(with(vec![t("bad name", None)]).is_err());
    }

    #[test]
    fn file_flags_and_env_merge() {
        let dir = std::env::temp_dir().join(format!("terrace-proxy-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("terrace.toml");
        std::fs::write(&path, "[engine]\nport = 7001\n[proxy]\nport = 7000\nengines = [\"10.0.0.1:7001\"]\n[[proxy.slots]]\nengine = 0\nrange = \"0-16383\"\n")
            .unwrap();
        let file = ProxySettings::from_file(&path).unwrap();
        let flags = ProxySettings { port: Some(7100), ..Default::default() };
        let c = flags.or(file).resolve().unwrap();
        assert_eq!(c.port, 7100);
        assert_eq!(c.engines, vec!["10.0.0.1:7001".to_string()]);
        std::fs::write(&path, "[proxy]\nprot = 1\n").unwrap();
        let err = ProxySettings::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("unknown field `prot`"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
