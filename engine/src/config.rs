//! Engine configuration: the `[engine]` table of `terrace.toml`, environment overrides and
//! flags, merged as flag > env > file > default. Errors name the offending key.

use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;

use crate::keyspace::eviction::Policy;

pub use terrace_commands::settings::{parse_size, read_table, ConfigError};

/// Threading mode of the engine's reactors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// This many reactors, all serving.
    Fixed(usize),
    /// Up to this many: one serves while load is light, more during bursts.
    Elastic(usize),
}

impl Threads {
    /// Reactor threads started.
    pub fn reactors(self) -> usize {
        match self {
            Threads::Fixed(n) | Threads::Elastic(n) => n,
        }
    }

    /// The default: elastic up to the cores this process may run on.
    pub fn default_elastic() -> Threads {
        Threads::Elastic(std::thread::available_parallelism().map_or(1, |n| n.get()).min(256))
    }

    /// `single`, `N`, `elastic` or `elastic:N` (the `threads` setting).
    pub fn parse(s: &str) -> Option<Threads> {
        let count = |n: &str| n.parse::<usize>().ok().filter(|n| (1..=256).contains(n));
        match s {
            "single" => Some(Threads::Fixed(1)),
            "elastic" => Some(Threads::default_elastic()),
            _ => match s.strip_prefix("elastic:") {
                Some(n) => count(n).map(Threads::Elastic),
                None => count(s).map(Threads::Fixed),
            },
        }
    }
}

/// Settings as given by one source; `None` means "not given here".
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSettings {
    pub port: Option<u16>,
    pub bind: Option<String>,
    /// HTTP port for Prometheus metrics at /metrics (none: off).
    pub metrics_port: Option<u16>,
    pub maxmemory: Option<toml::Value>,
    pub maxmemory_policy: Option<String>,
    /// Redis's save points: "SECONDS CHANGES …" (a snapshot when that many changes are that
    /// old; one also on a clean shutdown); "" (the default): none.
    pub save: Option<String>,
    pub threads: Option<toml::Value>,
    /// Elastic threading: busy percent to scale up above, to fold back below, the sampling
    /// interval and how long it must stay quiet.
    pub elastic_up: Option<u32>,
    pub elastic_down: Option<u32>,
    pub elastic_sample_ms: Option<u64>,
    pub elastic_down_ms: Option<u64>,
    /// How long a reactor keeps polling after a read before it sleeps, µs (0: never spins).
    pub idle_spin_us: Option<u64>,
    /// How long one tenant's connection runs requests before the other tenants on its
    /// reactor get their turn, µs (0: no fairness between tenants).
    pub tenant_slice_us: Option<u64>,
    /// Requests of a pipeline whose keys are prefetched together (0: no prefetching).
    pub prefetch_batch: Option<usize>,
    pub data_dir: Option<PathBuf>,
    pub shard_bits: Option<u32>,
    /// Tenant namespaces an engine can hold (each with its own 16 databases, made when first
    /// used): 1,024 by default, at most `MAX_NAMESPACES`.
    pub namespaces: Option<usize>,
    /// Value compression, the default of every tenant: none | zstd | zstd-dict | pattern | auto.
    pub compression: Option<String>,
    /// eager (on write) | lazy (once cold).
    pub compression_mode: Option<String>,
    pub compression_min_size: Option<usize>,
    pub compression_cold_seconds: Option<u64>,
    pub compression_sample_size: Option<usize>,
    pub retrain_ratio_drift: Option<f64>,
    pub retrain_unmatched: Option<f64>,
    /// The PMem tier's file (none: every value stays in DRAM).
    pub pmem_path: Option<PathBuf>,
    pub pmem_size: Option<toml::Value>,
    /// Budget for value bytes in DRAM when the PMem tier is on.
    pub dram_max: Option<toml::Value>,
    /// dram-first | pmem-first | bidirectional.
    pub tier_policy: Option<String>,
    pub promote_hits: Option<u8>,
    /// The write-ahead log: off | file | always | pmem.
    pub wal: Option<String>,
    /// The PMem ring of `wal = pmem` (default DATA_DIR/wal/ring).
    pub wal_ring_path: Option<PathBuf>,
    pub wal_ring_size: Option<toml::Value>,
    /// Where a WAL segment is closed and a new one begun (so obsolete ones can go).
    pub wal_segment_size: Option<toml::Value>,
    /// The storage tier's adapter: none | lsm | postgres.
    pub storage: Option<String>,
    /// postgres://… for `storage = postgres`.
    pub storage_url: Option<String>,
    /// cache | write-through | write-back.
    pub storage_mode: Option<String>,
    /// Write-back: dirty bytes above which writes wait (then fail).
    pub dirty_max: Option<toml::Value>,
    pub dirty_timeout_ms: Option<u64>,
    pub flush_interval_ms: Option<u64>,
    pub flush_batch: Option<usize>,
    /// Who may run DEBUG: no | yes | local (clients connected over loopback), as Redis 7's
    /// `enable-debug-command`.
    pub enable_debug_command: Option<String>,
    /// A file (mode 0600) holding the password every client must give (`AUTH <password>`,
    /// the default user's, as Redis's `requirepass`). `terrace up` makes one for its engines.
    pub requirepass_file: Option<PathBuf>,
    /// A file (mode 0600) holding the bearer token GET /metrics must carry
    /// (`Authorization: Bearer <token>`); none: the endpoint is open.
    pub metrics_token_file: Option<PathBuf>,
    /// A file (mode 0600) holding the password this engine gives its master when it is a
    /// replica (Redis's `masterauth`). `terrace up` gives its replicas the engines' one.
    pub masterauth_file: Option<PathBuf>,
    /// Start fenced: answer nothing but INFO, ROLE, REPLICAOF and their like until a
    /// REPLICAOF gives the engine a role (NO ONE at once; a master once the first sync
    /// from it is done). `terrace up` restarts a replicated engine so: back
    /// empty, it must not serve as a primary before the coordinator has failed it over.
    pub wait_for_role: Option<bool>,
    /// A port for clients over TLS, beside `port` (Redis's `tls-port`).
    pub tls_port: Option<u16>,
    /// Listen on the TLS port alone, no plain port (Redis: `port 0` with a `tls-port`).
    pub tls_only: Option<bool>,
    /// The certificate chain the TLS port shows, PEM (`tls-cert-file`).
    pub tls_cert_file: Option<PathBuf>,
    /// Its private key, PEM (`tls-key-file`).
    pub tls_key_file: Option<PathBuf>,
    /// The CA peers are verified against: clients with `tls_auth_clients`, the master and
    /// other engines on TLS links (`tls-ca-cert-file`).
    pub tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must show a certificate: no | optional | yes (`tls-auth-clients`).
    pub tls_auth_clients: Option<String>,
    /// The certificate this engine shows on its TLS links (`tls-client-cert-file`; default:
    /// `tls_cert_file`).
    pub tls_client_cert_file: Option<PathBuf>,
    /// Its key (`tls-client-key-file`; default: `tls_key_file`).
    pub tls_client_key_file: Option<PathBuf>,
    /// A replica's link to its master over TLS (`tls-replication`).
    pub tls_replication: Option<bool>,
    /// Slot moves' links to other engines over TLS (`tls-cluster`).
    pub tls_cluster: Option<bool>,
}

/// A number from environment variable `key`, if set.
fn number<T: FromStr>(v: Option<String>, key: &str) -> Result<Option<T>, ConfigError> {
    match v {
        None => Ok(None),
        Some(n) => n.parse().map(Some).map_err(|_| ConfigError::Invalid { key: key.into(), reason: format!("'{n}' is not a whole number") }),
    }
}

/// A size given as an integer or a Redis-style string (`100mb`), for `key`.
fn size_of(key: &str, v: toml::Value) -> Result<u64, ConfigError> {
    match v {
        toml::Value::Integer(n) if n >= 0 => Ok(n as u64),
        toml::Value::String(s) => {
            parse_size(&s).ok_or_else(|| ConfigError::Invalid { key: key.into(), reason: format!("'{s}' is not a size (examples: 0, 100mb, 1gb)") })
        }
        v => Err(ConfigError::Invalid { key: key.into(), reason: format!("{v} is not a size") }),
    }
}

impl EngineSettings {
    /// Fields of `self` win over `other`'s.
    pub fn or(self, other: EngineSettings) -> EngineSettings {
        EngineSettings {
            port: self.port.or(other.port),
            bind: self.bind.or(other.bind),
            metrics_port: self.metrics_port.or(other.metrics_port),
            maxmemory: self.maxmemory.or(other.maxmemory),
            maxmemory_policy: self.maxmemory_policy.or(other.maxmemory_policy),
            save: self.save.or(other.save),
            threads: self.threads.or(other.threads),
            elastic_up: self.elastic_up.or(other.elastic_up),
            elastic_down: self.elastic_down.or(other.elastic_down),
            elastic_sample_ms: self.elastic_sample_ms.or(other.elastic_sample_ms),
            elastic_down_ms: self.elastic_down_ms.or(other.elastic_down_ms),
            idle_spin_us: self.idle_spin_us.or(other.idle_spin_us),
            tenant_slice_us: self.tenant_slice_us.or(other.tenant_slice_us),
            prefetch_batch: self.prefetch_batch.or(other.prefetch_batch),
            data_dir: self.data_dir.or(other.data_dir),
            shard_bits: self.shard_bits.or(other.shard_bits),
            namespaces: self.namespaces.or(other.namespaces),
            compression: self.compression.or(other.compression),
            compression_mode: self.compression_mode.or(other.compression_mode),
            compression_min_size: self.compression_min_size.or(other.compression_min_size),
            compression_cold_seconds: self.compression_cold_seconds.or(other.compression_cold_seconds),
            compression_sample_size: self.compression_sample_size.or(other.compression_sample_size),
            retrain_ratio_drift: self.retrain_ratio_drift.or(other.retrain_ratio_drift),
            retrain_unmatched: self.retrain_unmatched.or(other.retrain_unmatched),
            pmem_path: self.pmem_path.or(other.pmem_path),
            pmem_size: self.pmem_size.or(other.pmem_size),
            dram_max: self.dram_max.or(other.dram_max),
            tier_policy: self.tier_policy.or(other.tier_policy),
            promote_hits: self.promote_hits.or(other.promote_hits),
            wal: self.wal.or(other.wal),
            wal_ring_path: self.wal_ring_path.or(other.wal_ring_path),
            wal_ring_size: self.wal_ring_size.or(other.wal_ring_size),
            wal_segment_size: self.wal_segment_size.or(other.wal_segment_size),
            storage: self.storage.or(other.storage),
            storage_url: self.storage_url.or(other.storage_url),
            storage_mode: self.storage_mode.or(other.storage_mode),
            dirty_max: self.dirty_max.or(other.dirty_max),
            dirty_timeout_ms: self.dirty_timeout_ms.or(other.dirty_timeout_ms),
            flush_interval_ms: self.flush_interval_ms.or(other.flush_interval_ms),
            flush_batch: self.flush_batch.or(other.flush_batch),
            enable_debug_command: self.enable_debug_command.or(other.enable_debug_command),
            requirepass_file: self.requirepass_file.or(other.requirepass_file),
            metrics_token_file: self.metrics_token_file.or(other.metrics_token_file),
            masterauth_file: self.masterauth_file.or(other.masterauth_file),
            wait_for_role: self.wait_for_role.or(other.wait_for_role),
            tls_port: self.tls_port.or(other.tls_port),
            tls_only: self.tls_only.or(other.tls_only),
            tls_cert_file: self.tls_cert_file.or(other.tls_cert_file),
            tls_key_file: self.tls_key_file.or(other.tls_key_file),
            tls_ca_cert_file: self.tls_ca_cert_file.or(other.tls_ca_cert_file),
            tls_auth_clients: self.tls_auth_clients.or(other.tls_auth_clients),
            tls_client_cert_file: self.tls_client_cert_file.or(other.tls_client_cert_file),
            tls_client_key_file: self.tls_client_key_file.or(other.tls_client_key_file),
            tls_replication: self.tls_replication.or(other.tls_replication),
            tls_cluster: self.tls_cluster.or(other.tls_cluster),
        }
    }

    /// Reads `TERRACE_*` variables (TERRACE_PORT, TERRACE_BIND, TERRACE_MAXMEMORY,
    /// TERRACE_MAXMEMORY_POLICY, TERRACE_THREADS, TERRACE_DATA_DIR, TERRACE_SHARD_BITS,
    /// TERRACE_NAMESPACES, TERRACE_COMPRESSION, TERRACE_COMPRESSION_MODE,
    /// TERRACE_COMPRESSION_MIN_SIZE, TERRACE_PMEM_PATH, TERRACE_PMEM_SIZE, TERRACE_DRAM_MAX,
    /// TERRACE_TIER_POLICY, TERRACE_PROMOTE_HITS, TERRACE_WAL, TERRACE_WAL_RING_PATH,
    /// TERRACE_WAL_RING_SIZE, TERRACE_STORAGE, TERRACE_STORAGE_URL, TERRACE_STORAGE_MODE).
    pub fn from_env() -> Result<EngineSettings, ConfigError> {
        let var = terrace_commands::settings::env_var;
        let port = match var("TERRACE_PORT") {
            Some(p) => Some(p.parse().map_err(|_| ConfigError::Invalid { key: "TERRACE_PORT".into(), reason: format!("'{p}' is not a port number") })?),
            None => None,
        };
        let shard_bits = match var("TERRACE_SHARD_BITS") {
            Some(p) => Some(p.parse().map_err(|_| ConfigError::Invalid { key: "TERRACE_SHARD_BITS".into(), reason: format!("'{p}' is not a number") })?),
            None => None,
        };
        Ok(EngineSettings {
            port,
            bind: var("TERRACE_BIND"),
            maxmemory: var("TERRACE_MAXMEMORY").map(toml::Value::String),
            maxmemory_policy: var("TERRACE_MAXMEMORY_POLICY"),
            save: var("TERRACE_SAVE"),
            threads: var("TERRACE_THREADS").map(toml::Value::String),
            metrics_port: number(var("TERRACE_METRICS_PORT"), "TERRACE_METRICS_PORT")?,
            elastic_up: number(var("TERRACE_ELASTIC_UP"), "TERRACE_ELASTIC_UP")?,
            elastic_down: number(var("TERRACE_ELASTIC_DOWN"), "TERRACE_ELASTIC_DOWN")?,
            elastic_sample_ms: number(var("TERRACE_ELASTIC_SAMPLE_MS"), "TERRACE_ELASTIC_SAMPLE_MS")?,
            elastic_down_ms: number(var("TERRACE_ELASTIC_DOWN_MS"), "TERRACE_ELASTIC_DOWN_MS")?,
            idle_spin_us: number(var("TERRACE_IDLE_SPIN_US"), "TERRACE_IDLE_SPIN_US")?,
            tenant_slice_us: number(var("TERRACE_TENANT_SLICE_US"), "TERRACE_TENANT_SLICE_US")?,
            prefetch_batch: number(var("TERRACE_PREFETCH_BATCH"), "TERRACE_PREFETCH_BATCH")?,
            data_dir: var("TERRACE_DATA_DIR").map(PathBuf::from),
            shard_bits,
            namespaces: match var("TERRACE_NAMESPACES") {
                Some(n) => Some(n.parse().map_err(|_| ConfigError::Invalid { key: "TERRACE_NAMESPACES".into(), reason: format!("'{n}' is not a number") })?),
                None => None,
            },
            compression: var("TERRACE_COMPRESSION"),
            compression_mode: var("TERRACE_COMPRESSION_MODE"),
            compression_min_size: match var("TERRACE_COMPRESSION_MIN_SIZE") {
                Some(n) => Some(
                    n.parse().map_err(|_| ConfigError::Invalid { key: "TERRACE_COMPRESSION_MIN_SIZE".into(), reason: format!("'{n}' is not a byte count") })?,
                ),
                None => None,
            },
            pmem_path: var("TERRACE_PMEM_PATH").map(PathBuf::from),
            pmem_size: var("TERRACE_PMEM_SIZE").map(toml::Value::String),
            dram_max: var("TERRACE_DRAM_MAX").map(toml::Value::String),
            tier_policy: var("TERRACE_TIER_POLICY"),
            wal: var("TERRACE_WAL"),
            wal_ring_path: var("TERRACE_WAL_RING_PATH").map(PathBuf::from),
            wal_ring_size: var("TERRACE_WAL_RING_SIZE").map(toml::Value::String),
            wal_segment_size: var("TERRACE_WAL_SEGMENT_SIZE").map(toml::Value::String),
            storage: var("TERRACE_STORAGE"),
            storage_url: var("TERRACE_STORAGE_URL"),
            storage_mode: var("TERRACE_STORAGE_MODE"),
            dirty_max: var("TERRACE_DIRTY_MAX").map(toml::Value::String),
            dirty_timeout_ms: number(var("TERRACE_DIRTY_TIMEOUT_MS"), "TERRACE_DIRTY_TIMEOUT_MS")?,
            flush_interval_ms: number(var("TERRACE_FLUSH_INTERVAL_MS"), "TERRACE_FLUSH_INTERVAL_MS")?,
            flush_batch: number(var("TERRACE_FLUSH_BATCH"), "TERRACE_FLUSH_BATCH")?,
            enable_debug_command: var("TERRACE_ENABLE_DEBUG_COMMAND"),
            requirepass_file: var("TERRACE_REQUIREPASS_FILE").map(PathBuf::from),
            metrics_token_file: var("TERRACE_METRICS_TOKEN_FILE").map(PathBuf::from),
            masterauth_file: var("TERRACE_MASTERAUTH_FILE").map(PathBuf::from),
            wait_for_role: None,
            tls_port: number(var("TERRACE_TLS_PORT"), "TERRACE_TLS_PORT")?,
            tls_only: terrace_commands::settings::env_flag("TERRACE_TLS_ONLY")?,
            tls_cert_file: var("TERRACE_TLS_CERT_FILE").map(PathBuf::from),
            tls_key_file: var("TERRACE_TLS_KEY_FILE").map(PathBuf::from),
            tls_ca_cert_file: var("TERRACE_TLS_CA_CERT_FILE").map(PathBuf::from),
            tls_auth_clients: var("TERRACE_TLS_AUTH_CLIENTS"),
            tls_client_cert_file: var("TERRACE_TLS_CLIENT_CERT_FILE").map(PathBuf::from),
            tls_client_key_file: var("TERRACE_TLS_CLIENT_KEY_FILE").map(PathBuf::from),
            tls_replication: terrace_commands::settings::env_flag("TERRACE_TLS_REPLICATION")?,
            tls_cluster: terrace_commands::settings::env_flag("TERRACE_TLS_CLUSTER")?,
            promote_hits: match var("TERRACE_PROMOTE_HITS") {
                Some(n) => Some(
                    n.parse()
                        .map_err(|_| ConfigError::Invalid { key: "TERRACE_PROMOTE_HITS".into(), reason: format!("'{n}' is not a count from 1 to 255") })?,
                ),
                None => None,
            },
            ..Default::default()
        })
    }

    /// Reads the `[engine]` table of a TOML file.
    pub fn from_file(path: &std::path::Path) -> Result<EngineSettings, ConfigError> {
        read_table(path, "engine")
    }

    /// Validates and fills defaults.
    pub fn resolve(self) -> Result<EngineConfig, ConfigError> {
        let tls = self.resolve_tls()?;
        let d = EngineConfig::default();
        let maxmemory = match self.maxmemory {
            None => d.maxmemory,
            Some(v) => size_of("maxmemory", v)?,
        };
        let tier = resolve_tier(self.pmem_path, self.pmem_size, self.dram_max, self.tier_policy, self.promote_hits)?;
        let data_dir = self.data_dir.unwrap_or(d.data_dir);
        let wal_mode = match self.wal {
            Some(m) => m.parse().map_err(|reason| ConfigError::Invalid { key: "wal".into(), reason })?,
            None => crate::wal::Mode::Off,
        };
        let wal_ring_size = match self.wal_ring_size {
            Some(v) => size_of("wal_ring_size", v)?,
            None => 64 << 20,
        };
        if wal_ring_size < 1 << 20 {
            return Err(ConfigError::Invalid { key: "wal_ring_size".into(), reason: format!("{wal_ring_size} is below the minimum of 1mb") });
        }
        let wal_segment_size = match self.wal_segment_size {
            Some(v) => size_of("wal_segment_size", v)?,
            None => 64 << 20,
        };
        if wal_segment_size < 64 << 10 {
            return Err(ConfigError::Invalid { key: "wal_segment_size".into(), reason: format!("{wal_segment_size} is below the minimum of 64kb") });
        }
        if wal_mode != crate::wal::Mode::Pmem && self.wal_ring_path.is_some() {
            return Err(ConfigError::Invalid { key: "wal_ring_path".into(), reason: "only `wal = \"pmem\"` uses a ring".into() });
        }
        let write_back = resolve_write_back(self.dirty_max, self.dirty_timeout_ms, self.flush_interval_ms, self.flush_batch)?;
        let storage = resolve_storage(self.storage, self.storage_url, self.storage_mode, &data_dir, write_back)?;
        let wal = crate::wal::WalConfig {
            mode: wal_mode,
            dir: data_dir.join("wal"),
            ring_path: self.wal_ring_path.unwrap_or_else(|| data_dir.join("wal").join("ring")),
            ring_size: wal_ring_size,
            segment_size: wal_segment_size,
        };
        let save = match self.save {
            None => d.save,
            Some(v) => {
                let param = terrace_commands::params::find("save").expect("save is a parameter");
                terrace_commands::params::validate(param, &v).map_err(|_| ConfigError::Invalid {
                    key: "save".into(),
                    reason: format!("'{v}' is not pairs of seconds and changes (\"3600 1 300 100\") or \"\""),
                })?
            }
        };
        let maxmemory_policy = match self.maxmemory_policy {
            None => d.maxmemory_policy,
            Some(p) => Policy::from_str(&p).map_err(|_| ConfigError::Invalid {
                key: "maxmemory_policy".into(),
                reason: format!(
                    "'{p}' is not one of noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu, volatile-random, volatile-ttl"
                ),
            })?,
        };
        let threads = match self.threads {
            None => d.threads,
            Some(v) => {
                let s = match &v {
                    toml::Value::Integer(n) => n.to_string(),
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                match Threads::parse(&s) {
                    Some(t) => t,
                    None => {
                        return Err(ConfigError::Invalid {
                            key: "threads".into(),
                            reason: format!("'{s}' is not 'single', a thread count from 1 to 256, 'elastic' or 'elastic:N'"),
                        })
                    }
                }
            }
        };
        let elastic = resolve_elastic(threads, self.elastic_up, self.elastic_down, self.elastic_sample_ms, self.elastic_down_ms)?;
        let idle_spin = micros(self.idle_spin_us, d.idle_spin, MAX_IDLE_SPIN_US, "idle_spin_us", "0 turns spinning off")?;
        let tenant_slice = micros(self.tenant_slice_us, d.tenant_slice, MAX_TENANT_SLICE_US, "tenant_slice_us", "0 turns fairness between tenants off")?;
        let prefetch_batch = self.prefetch_batch.unwrap_or(d.prefetch_batch);
        if prefetch_batch > MAX_PREFETCH_BATCH {
            return Err(ConfigError::Invalid {
                key: "prefetch_batch".into(),
                reason: format!("{prefetch_batch} is above {MAX_PREFETCH_BATCH} (requests; 0 turns prefetching off)"),
            });
        }
        let shard_bits = self.shard_bits.unwrap_or(d.shard_bits);
        if shard_bits > 8 {
            return Err(ConfigError::Invalid { key: "shard_bits".into(), reason: format!("{shard_bits} is above 8") });
        }
        let namespaces = self.namespaces.unwrap_or(d.namespaces);
        if !(1..=MAX_NAMESPACES).contains(&namespaces) {
            return Err(ConfigError::Invalid { key: "namespaces".into(), reason: format!("{namespaces} is not between 1 and {MAX_NAMESPACES}") });
        }
        let mut compression = d.compression.clone();
        let fields: [(&str, Option<String>); 7] = [
            ("compression", self.compression),
            ("compression_mode", self.compression_mode),
            ("compression_min_size", self.compression_min_size.map(|v| v.to_string())),
            ("compression_cold_seconds", self.compression_cold_seconds.map(|v| v.to_string())),
            ("compression_sample_size", self.compression_sample_size.map(|v| v.to_string())),
            ("retrain_ratio_drift", self.retrain_ratio_drift.map(|v| v.to_string())),
            ("retrain_unmatched", self.retrain_unmatched.map(|v| v.to_string())),
        ];
        for (key, value) in fields {
            if let Some(v) = value {
                compression.set(key, &v).map_err(|reason| ConfigError::Invalid { key: key.into(), reason })?;
            }
        }
        let debug_command = match self.enable_debug_command {
            None => d.debug_command,
            Some(v) => v.parse().map_err(|reason| ConfigError::Invalid { key: "enable_debug_command".into(), reason })?,
        };
        let requirepass = terrace_commands::settings::read_secret_file_if_set("requirepass_file", self.requirepass_file.as_deref())?;
        let metrics_token = terrace_commands::settings::read_secret_file_if_set("metrics_token_file", self.metrics_token_file.as_deref())?;
        let masterauth = terrace_commands::settings::read_secret_file_if_set("masterauth_file", self.masterauth_file.as_deref())?;
        Ok(EngineConfig {
            tls,
            save,
            debug_command,
            requirepass,
            metrics_token,
            masterauth,
            wait_for_role: self.wait_for_role.unwrap_or(false),
            tier,
            compression,
            namespaces,
            port: self.port.unwrap_or(d.port),
            bind: self.bind.unwrap_or(d.bind),
            metrics_port: self.metrics_port,
            maxmemory,
            maxmemory_policy,
            threads,
            elastic,
            idle_spin,
            tenant_slice,
            prefetch_batch,
            data_dir,
            shard_bits,
            wal,
            storage,
        })
    }
}

impl EngineSettings {
    /// The TLS port's and links' settings, checked, their files read.
    fn resolve_tls(&self) -> Result<TlsConfig, ConfigError> {
        let invalid = |key: &str, reason: &str| ConfigError::Invalid { key: key.into(), reason: reason.into() };
        let files = terrace_tls::TlsFiles::from_settings(
            self.tls_cert_file.clone(),
            self.tls_key_file.clone(),
            self.tls_ca_cert_file.clone(),
            self.tls_auth_clients.as_deref(),
        )?;
        let only = self.tls_only.unwrap_or(false);
        if self.tls_port.is_some() && files.is_none() {
            return Err(invalid("tls_port", "a TLS port needs tls_cert_file and tls_key_file"));
        }
        if only && self.tls_port.is_none() {
            return Err(invalid("tls_only", "without a plain port the engine needs a tls_port"));
        }
        let server = match (&files, self.tls_port) {
            (Some(f), Some(_)) => Some(std::sync::Arc::new(terrace_tls::ServerTls::new(f.clone())?)),
            _ => None,
        };
        let (replication, cluster) = (self.tls_replication.unwrap_or(false), self.tls_cluster.unwrap_or(false));
        let link = if replication || cluster {
            let needed_by = if replication { "tls_replication" } else { "tls_cluster" };
            let client = (self.tls_client_cert_file.clone(), self.tls_client_key_file.clone());
            Some(terrace_tls::LinkTls::from_settings(self.tls_ca_cert_file.clone(), client, files.as_ref(), needed_by)?)
        } else {
            None
        };
        Ok(TlsConfig { port: self.tls_port, only, server, link, replication, cluster })
    }
}

/// The engine's TLS: its port and its outgoing links (`server::tls`).
#[derive(Debug, Clone, Default)]
pub struct TlsConfig {
    /// `tls_port` (0: any free port).
    pub port: Option<u16>,
    /// No plain port (`tls_only`).
    pub only: bool,
    /// The TLS port's certificate, reloadable (SIGHUP).
    pub server: Option<std::sync::Arc<terrace_tls::ServerTls>>,
    /// The client side of the TLS links, when any link is on TLS.
    pub link: Option<terrace_tls::LinkTls>,
    /// A replica's link to its master over TLS (`tls_replication`).
    pub replication: bool,
    /// Slot moves' links over TLS (`tls_cluster`).
    pub cluster: bool,
}

/// The resolved engine configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub port: u16,
    pub bind: String,
    pub metrics_port: Option<u16>,
    pub maxmemory: u64,
    pub maxmemory_policy: Policy,
    /// Save points, as CONFIG GET save shows them ("" for none).
    pub save: String,
    pub threads: Threads,
    pub elastic: ElasticConfig,
    /// How long a reactor polls after a read before it sleeps (zero: it never spins).
    pub idle_spin: std::time::Duration,
    /// How long a tenant's connection runs before the reactor's other tenants get their turn
    /// (`server::fair`; zero: first come, first served).
    pub tenant_slice: std::time::Duration,
    /// Requests of a pipeline whose keys are prefetched together (`keyspace::prefetch`; 0: off).
    pub prefetch_batch: usize,
    /// Who may run DEBUG.
    pub debug_command: DebugCommand,
    /// The password clients must give (`requirepass_file`); None: none, as Redis by default.
    pub requirepass: Option<String>,
    /// The bearer token GET /metrics needs (`metrics_token_file`); None: none.
    pub metrics_token: Option<String>,
    /// The password given to a master (`masterauth_file`).
    pub masterauth: Option<String>,
    /// Start fenced until REPLICAOF (`wait_for_role`).
    pub wait_for_role: bool,
    pub data_dir: PathBuf,
    /// log2 of shards per database.
    pub shard_bits: u32,
    /// Namespaces (the default one included), each NUM_DBS databases.
    pub namespaces: usize,
    /// Every tenant's compression settings until set per tenant.
    pub compression: crate::compress::tenant::Settings,
    /// The PMem tier, if `pmem_path` is set.
    pub tier: Option<crate::tier::TierConfig>,
    /// The write-ahead log.
    pub wal: crate::wal::WalConfig,
    /// The storage tier behind the cache, if any.
    pub storage: Option<StorageConfig>,
    /// The TLS port and links.
    pub tls: TlsConfig,
}

/// Which storage adapter, and how tenants use it.
#[derive(Debug, Clone)]
pub enum StorageBackend {
    /// fjall in this directory.
    Lsm(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl StorageBackend {
    /// The cargo feature that builds this adapter in.
    pub fn feature(&self) -> &'static str {
        match self {
            StorageBackend::Lsm(_) => "lsm",
            StorageBackend::Postgres(_) => "postgres",
        }
    }
}

#[derive(Debug, Clone)]
pub struct StorageConfig {
    pub backend: StorageBackend,
    pub mode: crate::storage::tier::Mode,
    pub write_back: crate::storage::tier::WriteBackConfig,
}

/// Write-back's knobs, defaulted; zero is refused where it would stall or spin.
/// The elastic controller's knobs, checked (`up` above `down`, percents, a sample interval).
fn resolve_elastic(threads: Threads, up: Option<u32>, down: Option<u32>, sample_ms: Option<u64>, down_ms: Option<u64>) -> Result<ElasticConfig, ConfigError> {
    let mut cfg = ElasticConfig { max: threads.reactors(), ..Default::default() };
    let invalid = |key: &str, reason: String| ConfigError::Invalid { key: key.into(), reason };
    if let Some(p) = up {
        if !(1..=100).contains(&p) {
            return Err(invalid("elastic_up", format!("{p} is not a percent from 1 to 100")));
        }
        cfg.up_busy = p as f64 / 100.0;
    }
    if let Some(p) = down {
        if p >= 100 {
            return Err(invalid("elastic_down", format!("{p} is not a percent below 100")));
        }
        cfg.down_busy = p as f64 / 100.0;
    }
    if cfg.down_busy >= cfg.up_busy {
        return Err(invalid("elastic_down", format!("{}% must be below elastic_up ({}%)", (cfg.down_busy * 100.0) as u32, (cfg.up_busy * 100.0) as u32)));
    }
    if let Some(ms) = sample_ms {
        if !(10..=10_000).contains(&ms) {
            return Err(invalid("elastic_sample_ms", format!("{ms} is not from 10 to 10000")));
        }
        cfg.sample = std::time::Duration::from_millis(ms);
    }
    if let Some(ms) = down_ms {
        cfg.down_after = std::time::Duration::from_millis(ms);
    }
    Ok(cfg)
}

fn resolve_write_back(
    dirty_max: Option<toml::Value>,
    timeout_ms: Option<u64>,
    interval_ms: Option<u64>,
    batch: Option<usize>,
) -> Result<crate::storage::tier::WriteBackConfig, ConfigError> {
    let mut wb = crate::storage::tier::WriteBackConfig::default();
    let invalid = |key: &str, reason: &str| ConfigError::Invalid { key: key.into(), reason: reason.into() };
    if let Some(v) = dirty_max {
        wb.dirty_max = size_of("dirty_max", v)?;
        if wb.dirty_max == 0 {
            return Err(invalid("dirty_max", "0 would refuse every write-back write: give a size such as 64mb"));
        }
    }
    if let Some(ms) = timeout_ms {
        wb.dirty_timeout = std::time::Duration::from_millis(ms);
    }
    if let Some(ms) = interval_ms {
        if ms == 0 {
            return Err(invalid("flush_interval_ms", "must be at least 1"));
        }
        wb.flush_interval = std::time::Duration::from_millis(ms);
    }
    if let Some(n) = batch {
        if n == 0 {
            return Err(invalid("flush_batch", "must be at least 1"));
        }
        wb.flush_batch = n;
    }
    Ok(wb)
}

fn resolve_storage(
    kind: Option<String>,
    url: Option<String>,
    mode: Option<String>,
    data_dir: &std::path::Path,
    write_back: crate::storage::tier::WriteBackConfig,
) -> Result<Option<StorageConfig>, ConfigError> {
    let invalid = |key: &str, reason: String| ConfigError::Invalid { key: key.into(), reason };
    let mode = match mode {
        Some(m) => m.parse().map_err(|r| invalid("storage_mode", r))?,
        None => crate::storage::tier::Mode::WriteThrough,
    };
    let backend = match kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("none") => {
            if url.is_some() {
                return Err(invalid("storage_url", "set `storage = \"postgres\"` too".into()));
            }
            return Ok(None);
        }
        Some("lsm") => StorageBackend::Lsm(data_dir.join("storage")),
        Some("postgres") => {
            let url = url.ok_or_else(|| invalid("storage_url", "`storage = \"postgres\"` needs a postgres:// URL".into()))?;
            check_postgres_tls(&url).map_err(|r| invalid("storage_url", r))?;
            StorageBackend::Postgres(url)
        }
        Some(other) => return Err(invalid("storage", format!("'{other}' is not one of none, lsm, postgres"))),
    };
    Ok(Some(StorageConfig { backend, mode, write_back }))
}

/// A PostgreSQL URL's TLS parameters, as libpq names them: `sslmode` one of libpq's, and the
/// files `sslrootcert` (the CA the server's certificate is verified against), `sslcert` and
/// `sslkey` (a client certificate) readable. Checked here so a typo stops the start with the
/// setting's name rather than the first connection's error.
fn check_postgres_tls(url: &str) -> Result<(), String> {
    const MODES: [&str; 6] = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];
    let Some((_, query)) = url.split_once('?') else { return Ok(()) };
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "sslmode" if !MODES.contains(&value) => return Err(format!("sslmode '{value}' is not one of {}", MODES.join(", "))),
            "sslrootcert" | "sslcert" | "sslkey" => {
                std::fs::File::open(value).map_err(|e| format!("{name} {value}: {e}"))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The PMem tier's settings: all absent, or `pmem_path` with the others defaulted
/// (`pmem_size` 1gb, `dram_max` a quarter of it, dram-first, `promote_hits` 2).
fn resolve_tier(
    path: Option<PathBuf>,
    size: Option<toml::Value>,
    dram_max: Option<toml::Value>,
    policy: Option<String>,
    promote_hits: Option<u8>,
) -> Result<Option<crate::tier::TierConfig>, ConfigError> {
    let Some(pmem_path) = path else {
        let given =
            [("pmem_size", size.is_some()), ("dram_max", dram_max.is_some()), ("tier_policy", policy.is_some()), ("promote_hits", promote_hits.is_some())];
        if let Some((key, _)) = given.iter().find(|(_, set)| *set) {
            return Err(ConfigError::Invalid { key: (*key).into(), reason: "the PMem tier is off: set `pmem_path` too".into() });
        }
        return Ok(None);
    };
    if pmem_path.as_os_str().is_empty() {
        return Err(ConfigError::Invalid { key: "pmem_path".into(), reason: "is empty".into() });
    }
    let pmem_size = match size {
        Some(v) => size_of("pmem_size", v)?,
        None => 1 << 30,
    };
    if pmem_size < crate::tier::arena::MIN_SIZE {
        return Err(ConfigError::Invalid { key: "pmem_size".into(), reason: format!("{pmem_size} is below the minimum of 1mb") });
    }
    let dram_max = match dram_max {
        Some(v) => size_of("dram_max", v)?,
        None => pmem_size / 4,
    };
    let policy = match policy {
        Some(p) => p.parse().map_err(|reason| ConfigError::Invalid { key: "tier_policy".into(), reason })?,
        None => crate::tier::Policy::DramFirst,
    };
    let promote_hits = promote_hits.unwrap_or(2);
    if promote_hits == 0 {
        return Err(ConfigError::Invalid { key: "promote_hits".into(), reason: "must be at least 1".into() });
    }
    Ok(Some(crate::tier::TierConfig { pmem_path, pmem_size, dram_max, policy, promote_hits }))
}

/// Who may run DEBUG (Redis 7's `enable-debug-command`; off by default, as there: DEBUG
/// can stall a reactor or read values' internals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebugCommand {
    No,
    Yes,
    /// Clients connected from a loopback address.
    Local,
}

impl DebugCommand {
    /// The value as CONFIG GET shows it.
    pub fn name(self) -> &'static str {
        match self {
            DebugCommand::No => "no",
            DebugCommand::Yes => "yes",
            DebugCommand::Local => "local",
        }
    }
}

impl FromStr for DebugCommand {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "no" => Ok(DebugCommand::No),
            "yes" => Ok(DebugCommand::Yes),
            "local" => Ok(DebugCommand::Local),
            _ => Err(format!("'{s}' is not one of no, yes, local")),
        }
    }
}

/// A duration setting given in microseconds (`key`): `default` when unset, refused past `max`.
fn micros(value: Option<u64>, default: std::time::Duration, max: u64, key: &str, zero: &str) -> Result<std::time::Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(us) if us <= max => Ok(std::time::Duration::from_micros(us)),
        Some(us) => Err(ConfigError::Invalid { key: key.into(), reason: format!("{us} is above {max} (microseconds; {zero})") }),
    }
}

/// `idle_spin_us`'s default: the value Linux's ip-sysctl documentation recommends for socket
/// busy polling (`net.core.busy_read`) with several sockets.
pub const DEFAULT_IDLE_SPIN_US: u64 = 50;
/// Past this, spinning would just be burning a core.
const MAX_IDLE_SPIN_US: u64 = 10_000;
/// `tenant_slice_us`'s default: a tenant's GET waits at most this long for each other busy
/// tenant on its reactor, plus the command running then (measured: BENCHMARKS.md, "CPU
/// fairness between tenants"; 100 µs kept B's p99 within 2× of alone, 200 µs doubled it). A
/// yield costs about a microsecond, paid only while several tenants share the reactor.
pub const DEFAULT_TENANT_SLICE_US: u64 = 100;
/// Past this, one tenant could hold a reactor for a visible pause.
const MAX_TENANT_SLICE_US: u64 = 100_000;
/// `prefetch_batch`'s default: enough keys for the CPU to overlap their cache misses (the
/// fill buffers hold 10–16), few enough to stay cached until their commands run (Redis 8's
/// `prefetch-batch-max-size` defaults to 16 and allows 128). Measured: BENCHMARKS.md,
/// "Prefetching a batch's keys".
pub const DEFAULT_PREFETCH_BATCH: usize = 32;
/// Past this, the first keys would leave the cache before their commands run.
const MAX_PREFETCH_BATCH: usize = 128;
/// The most tenant namespaces an engine may be configured for (`namespaces`): each costs
/// little until used (its databases' shards are made on first use), but per-namespace
/// tables and the shard id space grow with it.
pub const MAX_NAMESPACES: usize = 10_000;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            port: 7001,
            bind: "127.0.0.1".into(),
            metrics_port: None,
            maxmemory: 0,
            maxmemory_policy: Policy::NoEviction,
            threads: Threads::default_elastic(),
            elastic: Default::default(),
            idle_spin: std::time::Duration::from_micros(DEFAULT_IDLE_SPIN_US),
            tenant_slice: std::time::Duration::from_micros(DEFAULT_TENANT_SLICE_US),
            prefetch_batch: DEFAULT_PREFETCH_BATCH,
            debug_command: DebugCommand::No,
            requirepass: None,
            metrics_token: None,
            masterauth: None,
            wait_for_role: false,
            save: String::new(),
            data_dir: PathBuf::from("data"),
            shard_bits: 4,
            namespaces: 1024,
            compression: Default::default(),
            tier: None,
            wal: crate::wal::WalConfig {
                mode: crate::wal::Mode::Off,
                dir: PathBuf::from("data/wal"),
                ring_path: PathBuf::from("data/wal/ring"),
                ring_size: 64 << 20,
                segment_size: 64 << 20,
            },
            storage: None,
            tls: TlsConfig::default(),
        }
    }
}

/// Parameters CONFIG GET answers from elsewhere than the text store (atomics, the startup
/// configuration).
pub const PARAMS_KEPT_ELSEWHERE: [&str; 6] = ["maxmemory", "maxmemory-policy", "maxmemory-samples", "port", "bind", "enable-debug-command"];

/// The run-time parameters at start: Redis's defaults, with what the configuration sets.
pub fn start_params(config: &EngineConfig) -> Vec<(String, String)> {
    let mut v = default_params();
    if let Some((_, save)) = v.iter_mut().find(|(k, _)| k == "save") {
        save.clone_from(&config.save);
    }
    v
}

/// The CONFIG GET/SET parameters kept as text: every Redis 7.0 parameter
/// (`terrace_commands::params`) under its name and its alias, with Redis's default or the
/// engine's own where it differs.
pub fn default_params() -> Vec<(String, String)> {
    let ours = |name: &str| match name {
        "dir" => Some("."),
        "protected-mode" => Some("no"),
        _ => None,
    };
    let mut v = Vec::new();
    for p in terrace_commands::params::PARAMS.iter().filter(|p| !PARAMS_KEPT_ELSEWHERE.contains(&p.name)) {
        let value = ours(p.name).unwrap_or(p.default).to_string();
        v.extend(p.alias.map(|a| (a.to_string(), value.clone())));
        v.push((p.name.to_string(), value));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1gb"), Some(1 << 30));
        assert_eq!(parse_size("100MB"), Some(100 << 20));
        assert_eq!(parse_size("5k"), Some(5000));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("1tb"), None);
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn a_postgres_urls_tls_parameters_are_checked() {
        let pg = |url: &str| EngineSettings { storage: Some("postgres".into()), storage_url: Some(url.into()), ..Default::default() }.resolve();
        assert!(pg("postgres://u@db/x").is_ok());
        assert!(pg("postgres://u@db/x?sslmode=verify-full&application_name=t").is_ok());
        let e = pg("postgres://u@db/x?sslmode=verify_full").unwrap_err().to_string();
        assert_eq!(e, "invalid value for `storage_url`: sslmode 'verify_full' is not one of disable, allow, prefer, require, verify-ca, verify-full");
        let e = pg("postgres://u@db/x?sslmode=verify-ca&sslrootcert=/nonexistent/ca.crt").unwrap_err().to_string();
        assert!(e.starts_with("invalid value for `storage_url`: sslrootcert /nonexistent/ca.crt: "), "{e}");
    }

    #[test]
    fn precedence_and_errors_name_the_key() {
        let flag = EngineSettings { port: Some(1), ..Default::default() };
        let file = EngineSettings { port: Some(2), bind: Some("0.0.0.0".into()), ..Default::default() };
        let c = flag.or(file).resolve().unwrap();
        assert_eq!((c.port, c.bind.as_str()), (1, "0.0.0.0"));
        let bad = EngineSettings { maxmemory_policy: Some("lru".into()), ..Default::default() };
        let e = bad.resolve().unwrap_err().to_string();
        assert!(e.contains("maxmemory_policy"), "{e}");
        let bad = EngineSettings { maxmemory: Some(toml::Value::String("lots".into())), ..Default::default() };
        assert!(bad.resolve().unwrap_err().to_string().contains("`maxmemory`"));
    }

    #[test]
    fn tenant_slice_defaults_turns_off_at_zero_and_refuses_a_long_one() {
        let slice = |us: Option<u64>| EngineSettings { tenant_slice_us: us, ..Default::default() }.resolve().map(|c| c.tenant_slice);
        assert_eq!(slice(None).unwrap(), std::time::Duration::from_micros(DEFAULT_TENANT_SLICE_US));
        assert_eq!(slice(Some(0)).unwrap(), std::time::Duration::ZERO);
        let e = slice(Some(1_000_000)).unwrap_err().to_string();
        assert!(e.contains("`tenant_slice_us`"), "{e}");
    }

    #[test]
    fn prefetch_batch_defaults_turns_off_at_zero_and_has_a_ceiling() {
        let batch = |n: Option<usize>| EngineSettings { prefetch_batch: n, ..Default::default() }.resolve().map(|c| c.prefetch_batch);
        assert_eq!(batch(None).unwrap(), DEFAULT_PREFETCH_BATCH);
        assert_eq!(batch(Some(0)).unwrap(), 0);
        assert_eq!(batch(Some(MAX_PREFETCH_BATCH)).unwrap(), MAX_PREFETCH_BATCH);
        let e = batch(Some(MAX_PREFETCH_BATCH + 1)).unwrap_err().to_string();
        assert!(e.contains("`prefetch_batch`"), "{e}");
    }

    #[test]
    fn idle_spin_defaults_turns_off_at_zero_and_refuses_a_busy_loop() {
        let spin = |us: Option<u64>| EngineSettings { idle_spin_us: us, ..Default::default() }.resolve().map(|c| c.idle_spin);
        assert_eq!(spin(None).unwrap(), std::time::Duration::from_micros(DEFAULT_IDLE_SPIN_US));
        assert!(spin(Some(0)).unwrap().is_zero());
        assert_eq!(spin(Some(200)).unwrap(), std::time::Duration::from_micros(200));
        let e = spin(Some(MAX_IDLE_SPIN_US + 1)).unwrap_err().to_string();
        assert!(e.contains("`idle_spin_us`"), "{e}");
    }

    #[test]
    fn tier_settings_default_and_name_bad_keys() {
        let on = EngineSettings { pmem_path: Some("/dev/shm/x".into()), pmem_size: Some(toml::Value::String("64mb".into())), ..Default::default() };
        let t = on.resolve().unwrap().tier.unwrap();
        assert_eq!((t.pmem_size, t.dram_max, t.policy, t.promote_hits), (64 << 20, 16 << 20, crate::tier::Policy::DramFirst, 2));
        let cases: [(EngineSettings, &str); 4] = [
            (EngineSettings { dram_max: Some(toml::Value::Integer(5)), ..Default::default() }, "`dram_max`"),
            (EngineSettings { pmem_path: Some("p".into()), tier_policy: Some("lru".into()), ..Default::default() }, "`tier_policy`"),
            (EngineSettings { pmem_path: Some("p".into()), pmem_size: Some(toml::Value::String("1kb".into())), ..Default::default() }, "`pmem_size`"),
            (EngineSettings { pmem_path: Some("p".into()), promote_hits: Some(0), ..Default::default() }, "`promote_hits`"),
        ];
        for (settings, key) in cases {
            let e = settings.resolve().unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        }
    }

    #[test]
    fn file_unknown_key_is_named() {
        let dir = std::env::temp_dir().join(format!("terrace-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.toml");
        std::fs::write(&p, "[engine]\nport = 7005\nmaxmemroy = \"1gb\"\n").unwrap();
        let e = EngineSettings::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("maxmemroy"), "{e}");
        std::fs::write(&p, "[engine]\nport = 7005\nmaxmemory = \"1gb\"\n[proxy]\nport = 1\n").unwrap();
        let s = EngineSettings::from_file(&p).unwrap().resolve().unwrap();
        assert_eq!((s.port, s.maxmemory), (7005, 1 << 30));
    }
}

/// The elastic-threading controller's knobs (`server::elastic`).
#[derive(Debug, Clone, PartialEq)]
pub struct ElasticConfig {
    /// Reactors allowed (the CPU allotment).
    pub max: usize,
    /// Busy share above which every active reactor must stay (`up_samples` samples in a row)
    /// for another to be woken (`elastic_up`, percent).
    pub up_busy: f64,
    pub up_samples: u32,
    /// Busy share below which every active reactor must stay for `down_after` for one to be
    /// folded back (`elastic_down`, percent; `elastic_down_ms`).
    pub down_busy: f64,
    pub down_after: std::time::Duration,
    /// How often reactors are sampled (`elastic_sample_ms`).
    pub sample: std::time::Duration,
}

impl Default for ElasticConfig {
    fn default() -> Self {
        ElasticConfig {
            max: 1,
            up_busy: 0.8,
            up_samples: 2,
            down_busy: 0.3,
            down_after: std::time::Duration::from_secs(2),
            sample: std::time::Duration::from_millis(100),
        }
    }
}
