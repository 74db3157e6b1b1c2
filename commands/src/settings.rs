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

/// The environment variable `key`, when set and not empty (an empty one counts as unset).
pub fn env_var(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// The yes/no environment variable `key`, when set: 1, true or yes; 0, false or no.
pub fn env_flag(key: &str) -> Result<Option<bool>, ConfigError> {
    match env_var(key).as_deref() {
        None => Ok(None),
        Some("1" | "true" | "yes") => Ok(Some(true)),
        Some("0" | "false" | "no") => Ok(Some(false)),
        Some(other) => Err(ConfigError::Invalid { key: key.into(), reason: format!("'{other}' is not true or false") }),
    }
}

/// Reads a secret (the engines' password) from a file only its owner may read — mode 0600 or
/// stricter, as ssh wants of a private key; its first line, trimmed. `key` names the setting
/// in errors.
pub fn read_secret_file(key: &str, path: &std::path::Path) -> Result<String, ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let invalid = |reason: String| ConfigError::Invalid { key: key.to_string(), reason };
    let meta = std::fs::metadata(path).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(invalid(format!("{} may be read by others (mode {mode:o}): `chmod 600` it", path.display())));
    }
    let text = std::fs::read_to_string(path).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    let secret = text.lines().next().unwrap_or("").trim().to_string();
    if secret.is_empty() {
        return Err(invalid(format!("{} is empty", path.display())));
    }
    Ok(secret)
}

/// Whether `address` is `host:port` (a host, and a port that is a u16): how engines, proxies
/// and slot-move targets are named in settings, commands and the API.
pub fn is_host_port(address: &str) -> bool {
    address.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
}

/// `read_secret_file` of a setting that may be absent (None: not set).
pub fn read_secret_file_if_set(key: &str, path: Option<&std::path::Path>) -> Result<Option<String>, ConfigError> {
    path.map(|p| read_secret_file(key, p)).transpose()
}

/// Whether a request's `Authorization` header value carries `token` as a bearer token
/// (compared in constant time); with no token configured, every request does.
pub fn bearer_allows(authorization: Option<&[u8]>, token: Option<&str>) -> bool {
    let Some(token) = token else { return true };
    let Some(sent) = authorization.and_then(|v| v.strip_prefix(b"Bearer ")) else { return false };
    crate::passwords::constant_time_eq(sent.trim_ascii(), token.as_bytes())
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
/// `bytes` as the shortest size `parse_size` reads back exactly ("64mb", "1gb", "1000").
pub fn format_size(bytes: u64) -> String {
    for (unit, mul) in [("gb", 1u64 << 30), ("mb", 1 << 20), ("kb", 1 << 10)] {
        if bytes >= mul && bytes.is_multiple_of(mul) {
            return format!("{}{unit}", bytes / mul);
        }
    }
    bytes.to_string()
}

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

/// Whether `name` may name a namespace: 1-64 ASCII letters, digits, '_' and '-' (the engine,
/// the proxy's tenants and the console check the same). Names become folder names (a tenant's
/// dictionaries, its cost-eval result), so nothing a name can say — `.`, `..`, a separator —
/// leaves the folder it is put in.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
}

/// An engine's entry for a dropped namespace in its list of names (not a valid name, so no
/// tenant is ever looked up as it).
pub const DROPPED_NAMESPACE: &str = "(dropped)";

/// The names a tenant's `tier_policy` may take (the engine parses them into its policies).
pub const TIER_POLICIES: [&str; 5] = ["engine", "dram-only", "dram-first", "pmem-first", "bidirectional"];

#[cfg(test)]
mod name_tests {
    #[test]
    fn tenant_names_are_letters_digits_dash_and_underscore() {
        for good in ["shop", "team-a_2", "A", &"x".repeat(64)] {
            assert!(super::valid_name(good), "{good}");
        }
        for bad in [".", "..", "a.b", "a/b", "", "a b", "é", &"x".repeat(65)] {
            assert!(!super::valid_name(bad), "{bad:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_format_back_to_what_they_parse() {
        for (bytes, text) in [(67_108_864u64, "64mb"), (1 << 30, "1gb"), (1536, "1536"), (2048, "2kb"), (0, "0"), (1000, "1000")] {
            assert_eq!(super::format_size(bytes), text);
            assert_eq!(super::parse_size(text), Some(bytes));
        }
    }

    #[test]
    fn a_bearer_token_is_needed_only_when_one_is_set() {
        use super::bearer_allows;
        assert!(bearer_allows(None, None));
        assert!(bearer_allows(Some(b"Bearer anything"), None));
        assert!(bearer_allows(Some(b"Bearer s3cret"), Some("s3cret")));
        assert!(bearer_allows(Some(b"Bearer s3cret "), Some("s3cret")));
        for refused in [None, Some(&b"s3cret"[..]), Some(b"Bearer s3cre"), Some(b"Bearer s3cretx"), Some(b"Basic s3cret"), Some(b"Bearer ")] {
            assert!(!bearer_allows(refused, Some("s3cret")), "{refused:?}");
        }
    }
}
