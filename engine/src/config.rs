//! Engine configuration: the `[engine]` table of `terrace.toml`, environment overrides and
//! flags, merged as flag > env > file > default. Errors name the offending key.

use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;

use crate::keyspace::eviction::Policy;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid value for `{key}`: {reason}")]
    Invalid { key: String, reason: String },
}

/// Reads one table (`[engine]`, `[proxy]`…) of a TOML file as `T` (missing: `T::default()`);
/// the other tables belong to other readers.
pub fn read_table<T: serde::de::DeserializeOwned + Default>(path: &std::path::Path, table: &str) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
    let parse_error = |message: String| ConfigError::Parse { path: path.display().to_string(), message };
    let mut doc: toml::Table = toml::from_str(&text).map_err(|e| parse_error(e.to_string()))?;
    match doc.remove(table) {
        None => Ok(T::default()),
        Some(v) => v.try_into().map_err(|e: toml::de::Error| parse_error(format!("in [{table}]: {}", e.message()))),
    }
}

/// Threading mode of the engine's reactors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    Fixed(usize),
}

/// Settings as given by one source; `None` means "not given here".
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSettings {
    pub port: Option<u16>,
    pub bind: Option<String>,
    pub maxmemory: Option<toml::Value>,
    pub maxmemory_policy: Option<String>,
    pub threads: Option<toml::Value>,
    pub data_dir: Option<PathBuf>,
    pub shard_bits: Option<u32>,
    /// Tenant namespaces an engine can hold (each with its own 16 databases).
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
}

impl EngineSettings {
    /// Fields of `self` win over `other`'s.
    pub fn or(self, other: EngineSettings) -> EngineSettings {
        EngineSettings {
            port: self.port.or(other.port),
            bind: self.bind.or(other.bind),
            maxmemory: self.maxmemory.or(other.maxmemory),
            maxmemory_policy: self.maxmemory_policy.or(other.maxmemory_policy),
            threads: self.threads.or(other.threads),
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
        }
    }

    /// Reads `TERRACE_*` variables (TERRACE_PORT, TERRACE_BIND, TERRACE_MAXMEMORY,
    /// TERRACE_MAXMEMORY_POLICY, TERRACE_THREADS, TERRACE_DATA_DIR, TERRACE_SHARD_BITS,
    /// TERRACE_NAMESPACES, TERRACE_COMPRESSION, TERRACE_COMPRESSION_MODE,
    /// TERRACE_COMPRESSION_MIN_SIZE).
    pub fn from_env() -> Result<EngineSettings, ConfigError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let port = match var("TERRACE_PORT") {
            Some(p) => Some(p.parse().map_err(|_| ConfigError::Invalid {
                key: "TERRACE_PORT".into(),
                reason: format!("'{p}' is not a port number"),
            })?),
            None => None,
        };
        let shard_bits = match var("TERRACE_SHARD_BITS") {
            Some(p) => Some(p.parse().map_err(|_| ConfigError::Invalid {
                key: "TERRACE_SHARD_BITS".into(),
                reason: format!("'{p}' is not a number"),
            })?),
            None => None,
        };
        Ok(EngineSettings {
            port,
            bind: var("TERRACE_BIND"),
            maxmemory: var("TERRACE_MAXMEMORY").map(toml::Value::String),
            maxmemory_policy: var("TERRACE_MAXMEMORY_POLICY"),
            threads: var("TERRACE_THREADS").map(toml::Value::String),
            data_dir: var("TERRACE_DATA_DIR").map(PathBuf::from),
            shard_bits,
            namespaces: match var("TERRACE_NAMESPACES") {
                Some(n) => Some(n.parse().map_err(|_| ConfigError::Invalid {
                    key: "TERRACE_NAMESPACES".into(),
                    reason: format!("'{n}' is not a number"),
                })?),
                None => None,
            },
            compression: var("TERRACE_COMPRESSION"),
            compression_mode: var("TERRACE_COMPRESSION_MODE"),
            compression_min_size: match var("TERRACE_COMPRESSION_MIN_SIZE") {
                Some(n) => Some(n.parse().map_err(|_| ConfigError::Invalid {
                    key: "TERRACE_COMPRESSION_MIN_SIZE".into(),
                    reason: format!("'{n}' is not a byte count"),
                })?),
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
        let d = EngineConfig::default();
        let maxmemory = match self.maxmemory {
            None => d.maxmemory,
            Some(toml::Value::Integer(n)) if n >= 0 => n as u64,
            Some(toml::Value::String(s)) => parse_size(&s).ok_or_else(|| ConfigError::Invalid {
                key: "maxmemory".into(),
                reason: format!("'{s}' is not a size (examples: 0, 100mb, 1gb)"),
            })?,
            Some(v) => {
                return Err(ConfigError::Invalid { key: "maxmemory".into(), reason: format!("{v} is not a size") })
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
                let n = if s == "single" { Some(1) } else { s.parse::<usize>().ok() };
                match n {
                    Some(n) if (1..=256).contains(&n) => Threads::Fixed(n),
                    _ => {
                        return Err(ConfigError::Invalid {
                            key: "threads".into(),
                            reason: format!("'{s}' is not 'single' or a thread count from 1 to 256"),
                        })
                    }
                }
            }
        };
        let shard_bits = self.shard_bits.unwrap_or(d.shard_bits);
        if shard_bits > 8 {
            return Err(ConfigError::Invalid { key: "shard_bits".into(), reason: format!("{shard_bits} is above 8") });
        }
        let namespaces = self.namespaces.unwrap_or(d.namespaces);
        if !(1..=1024).contains(&namespaces) {
            return Err(ConfigError::Invalid { key: "namespaces".into(), reason: format!("{namespaces} is not between 1 and 1024") });
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
        Ok(EngineConfig {
            compression,
            namespaces,
            port: self.port.unwrap_or(d.port),
            bind: self.bind.unwrap_or(d.bind),
            maxmemory,
            maxmemory_policy,
            threads,
            data_dir: self.data_dir.unwrap_or(d.data_dir),
            shard_bits,
        })
    }
}

/// The resolved engine configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub port: u16,
    pub bind: String,
    pub maxmemory: u64,
    pub maxmemory_policy: Policy,
    pub threads: Threads,
    pub data_dir: PathBuf,
    /// log2 of shards per database.
    pub shard_bits: u32,
    /// Namespaces (the default one included), each NUM_DBS databases.
    pub namespaces: usize,
    /// Every tenant's compression settings until set per tenant.
    pub compression: crate::compress::tenant::Settings,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            port: 7001,
            bind: "127.0.0.1".into(),
            maxmemory: 0,
            maxmemory_policy: Policy::NoEviction,
            threads: Threads::Fixed(1),
            data_dir: PathBuf::from("data"),
            shard_bits: 4,
            namespaces: 16,
            compression: Default::default(),
        }
    }
}

/// Parses Redis-style sizes: `1024`, `100kb`, `1mb`, `2gb`, `1k`, `1m`, `1g` (k/m/g are
/// powers of 1000, kb/mb/gb of 1024, as in redis.conf).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
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
