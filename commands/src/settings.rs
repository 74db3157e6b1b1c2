//! What every process's configuration shares: reading its own table of `terrace.toml`, sizes
//! with units, errors that name the key, and the rule for tenant (namespace) names that the
//! engine, the proxy and the console all check.

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

/// Whether `name` may name a namespace: 1-64 letters, digits, '_', '-' and '.' (the engine,
/// the proxy's tenants and the console check the same).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

/// The names a tenant's `tier_policy` may take (the engine parses them into its policies).
pub const TIER_POLICIES: [&str; 5] = ["engine", "dram-only", "dram-first", "pmem-first", "bidirectional"];
