//! A tenant as the console keeps it: what an operator may set, how it is checked, and what it
//! becomes for the proxy (a `[[proxy.tenants]]` entry with the password's argon2id hash) and for each
//! engine (`TERRACE.NAMESPACE` options).

use serde::{Deserialize, Serialize};
use sha2::Digest;

pub const COMPRESSIONS: [&str; 5] = ["none", "zstd", "zstd-dict", "pattern", "auto"];
pub const COMPRESSION_MODES: [&str; 2] = ["eager", "lazy"];
pub const STORAGE_MODES: [&str; 3] = ["cache", "write-through", "write-back"];
pub const TIER_POLICIES: [&str; 5] = ["engine", "dram-only", "dram-first", "pmem-first", "bidirectional"];
pub const WAL_MODES: [&str; 2] = ["engine", "off"];

/// A stored tenant. The password is kept only as its argon2id hash (what the proxies check
/// AUTH against), or, for a tenant whose password was set before, as its SHA-256 in hex.
#[derive(Debug, Clone, Serialize)]
pub struct Tenant {
    pub name: String,
    #[serde(skip)]
    pub password_hash: Option<String>,
    pub has_password: bool,
    pub max_qps: Option<u64>,
    pub max_memory: Option<u64>,
    pub compression: String,
    pub compression_mode: String,
    pub storage_mode: String,
    /// Its use of the engines' PMem tier: `engine` (the engine's `tier_policy`), `dram-only`,
    /// or a policy of its own.
    pub tier_policy: String,
    /// `engine` (its commands are logged when the engine has a WAL) or `off`.
    pub wal: String,
    pub memcache_port: Option<u16>,
    /// Its reads go to replicas of the engine owning the key (they may be behind).
    pub replica_reads: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a create or an update carries (JSON for the API, a form for the pages). Absent
/// fields keep their value on update and take the default on create; a password is needed
/// on create and cannot be removed (`TenantError::PasswordMissing`); `max_memory` takes sizes
/// ("100mb").
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantInput {
    pub name: Option<String>,
    pub password: Option<String>,
    pub max_qps: Option<Limit>,
    pub max_memory: Option<Limit>,
    pub compression: Option<String>,
    pub compression_mode: Option<String>,
    pub storage_mode: Option<String>,
    pub tier_policy: Option<String>,
    pub wal: Option<String>,
    pub memcache_port: Option<Limit>,
    pub replica_reads: Option<bool>,
}

impl TenantInput {
    /// Whether this changes the password and nothing else.
    pub fn password_alone(&self) -> bool {
        let TenantInput { name, password, max_qps, max_memory, compression, compression_mode, storage_mode, tier_policy, wal, memcache_port, replica_reads } =
            self;
        password.is_some()
            && name.is_none()
            && max_qps.is_none()
            && max_memory.is_none()
            && compression.is_none()
            && compression_mode.is_none()
            && storage_mode.is_none()
            && tier_policy.is_none()
            && wal.is_none()
            && memcache_port.is_none()
            && replica_reads.is_none()
    }
}

/// A number, a size as text, or null/empty for "none".
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Limit {
    Number(u64),
    Text(String),
    None(()),
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TenantError {
    #[error("name: '{0}' is not a tenant name (1-64 letters, digits, '_' and '-'; not 'default' or 'admin')")]
    Name(String),
    #[error("name is required")]
    NameMissing,
    #[error("{field}: '{value}' is not one of {allowed}")]
    Choice { field: &'static str, value: String, allowed: String },
    #[error("{field}: '{value}' is not {what}")]
    Number { field: &'static str, value: String, what: &'static str },
    /// Without one, the proxy would take any password for the tenant (Redis's `nopass`).
    #[error("password: a tenant needs a password (its clients authenticate with it; it cannot be removed, only changed)")]
    PasswordMissing,
}

/// A namespace name (`terrace_commands::settings::valid_name`) that is not one of the
/// proxy's reserved users.
pub fn valid_name(name: &str) -> bool {
    terrace_commands::settings::valid_name(name) && name != "default" && name != "admin"
}

fn choice(field: &'static str, value: &str, allowed: &[&str]) -> Result<String, TenantError> {
    if allowed.contains(&value) {
        Ok(value.to_string())
    } else {
        Err(TenantError::Choice { field, value: value.into(), allowed: allowed.join(", ") })
    }
}

impl Limit {
    /// None: no limit.
    fn value(&self, field: &'static str, sizes: bool) -> Result<Option<u64>, TenantError> {
        let bad =
            |v: &str| TenantError::Number { field, value: v.to_string(), what: if sizes { "a size (examples: 100mb, 1gb)" } else { "a positive number" } };
        match self {
            Limit::None(()) => Ok(None),
            Limit::Number(0) => Ok(None),
            Limit::Number(n) => Ok(Some(*n)),
            Limit::Text(t) if t.trim().is_empty() => Ok(None),
            Limit::Text(t) if sizes => terrace_commands::settings::parse_size(t).map(|n| (n > 0).then_some(n)).ok_or_else(|| bad(t)),
            Limit::Text(t) => t.trim().parse::<u64>().map(|n| (n > 0).then_some(n)).map_err(|_| bad(t)),
        }
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    terrace_commands::passwords::hex(&sha2::Sha256::digest(data))
}

impl TenantInput {
    /// The tenant this input makes of `base` (None: a new tenant), validated.
    pub fn apply(&self, base: Option<&Tenant>, now: i64) -> Result<Tenant, TenantError> {
        let name = match (base, &self.name) {
            (Some(b), _) => b.name.clone(),
            (None, None) => return Err(TenantError::NameMissing),
            (None, Some(n)) if !valid_name(n.trim()) => return Err(TenantError::Name(n.clone())),
            (None, Some(n)) => n.trim().to_string(),
        };
        let mut t = base.cloned().unwrap_or(Tenant {
            name,
            password_hash: None,
            has_password: false,
            max_qps: None,
            max_memory: None,
            compression: "none".into(),
            compression_mode: "eager".into(),
            storage_mode: "cache".into(),
            tier_policy: "engine".into(),
            wal: "engine".into(),
            memcache_port: None,
            replica_reads: false,
            created_at: now,
            updated_at: now,
        });
        // (Checked after the other fields, so a form with several faults shows theirs first.)
        // (Hashed once every other field is found good: argon2 is slow on purpose.)
        let (new_password, kept) = match &self.password {
            Some(p) if !p.is_empty() => (Some(p.as_str()), None),
            Some(_) => (None, None),
            None => (None, t.password_hash.take()),
        };
        if let Some(v) = &self.max_qps {
            t.max_qps = v.value("max_qps", false)?;
        }
        if let Some(v) = &self.max_memory {
            t.max_memory = v.value("max_memory", true)?;
        }
        if let Some(v) = &self.memcache_port {
            t.memcache_port = match v.value("memcache_port", false)? {
                None => None,
                Some(p) if p <= 65535 => Some(p as u16),
                Some(p) => return Err(TenantError::Number { field: "memcache_port", value: p.to_string(), what: "a port (1-65535)" }),
            };
        }
        if let Some(v) = &self.compression {
            t.compression = choice("compression", v, &COMPRESSIONS)?;
        }
        if let Some(v) = &self.compression_mode {
            t.compression_mode = choice("compression_mode", v, &COMPRESSION_MODES)?;
        }
        if let Some(v) = &self.storage_mode {
            t.storage_mode = choice("storage_mode", v, &STORAGE_MODES)?;
        }
        if let Some(v) = &self.tier_policy {
            t.tier_policy = choice("tier_policy", v, &TIER_POLICIES)?;
        }
        if let Some(v) = &self.wal {
            t.wal = choice("wal", v, &WAL_MODES)?;
        }
        if let Some(v) = self.replica_reads {
            t.replica_reads = v;
        }
        t.updated_at = now;
        if new_password.is_none() && kept.is_none() {
            return Err(TenantError::PasswordMissing);
        }
        t.password_hash = Some(match new_password {
            Some(p) => terrace_commands::passwords::hash(p.as_bytes()),
            None => kept.unwrap_or_default(),
        });
        t.has_password = true;
        Ok(t)
    }
}

impl Tenant {
    /// The proxy's view (`[[proxy.tenants]]`, JSON): the password's argon2id hash, or the
    /// SHA-256 a tenant made before kept.
    pub fn proxy_entry(&self) -> serde_json::Value {
        let hash = self.password_hash.as_deref();
        let (argon2, sha256) = match hash {
            Some(h) if h.starts_with('$') => (Some(h), None),
            other => (None, other),
        };
        serde_json::json!({
            "name": self.name,
            "password_hash": argon2,
            "password_sha256": sha256,
            "memcache_port": self.memcache_port,
            "max_qps": self.max_qps,
            "max_memory": self.max_memory,
            "compression": self.compression,
            "compression_mode": self.compression_mode,
            "storage_mode": self.storage_mode,
            "tier_policy": self.tier_policy,
            "wal": self.wal,
            "replica_reads": self.replica_reads,
        })
    }

    /// `TERRACE.NAMESPACE` arguments for one of `engines` engines (each holds an even share of
    /// the data limit).
    pub fn namespace_args(&self, engines: usize) -> Vec<String> {
        let share = self.max_memory.map(|m| m.div_ceil(engines.max(1) as u64)).unwrap_or(0);
        vec![
            self.name.clone(),
            "MAXMEMORY".into(),
            share.to_string(),
            "COMPRESSION".into(),
            self.compression.clone(),
            "COMPRESSION-MODE".into(),
            self.compression_mode.clone(),
            "STORAGE-MODE".into(),
            self.storage_mode.clone(),
            "TIER-POLICY".into(),
            self.tier_policy.clone(),
            "WAL".into(),
            self.wal.clone(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(json: &str) -> TenantInput {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn create_validates_and_defaults() {
        let t = input(r#"{"name":"shop","password":"pw","max_memory":"100mb","max_qps":500}"#).apply(None, 7).unwrap();
        assert_eq!((t.name.as_str(), t.compression.as_str(), t.storage_mode.as_str()), ("shop", "none", "cache"));
        assert_eq!(t.max_memory, Some(100 << 20));
        let kept = t.password_hash.as_deref().unwrap();
        assert!(kept.starts_with("$argon2id$") && terrace_commands::passwords::verify(b"pw", kept), "{kept}");
        assert_eq!(t.proxy_entry()["password_hash"], kept);
        assert!(t.has_password);
        assert_eq!(input("{}").apply(None, 0).unwrap_err(), TenantError::NameMissing);
        // A tenant without a password would accept any.
        assert_eq!(input(r#"{"name":"shop"}"#).apply(None, 0).unwrap_err(), TenantError::PasswordMissing);
        assert_eq!(input(r#"{"name":"shop","password":""}"#).apply(None, 0).unwrap_err(), TenantError::PasswordMissing);
        assert!(matches!(input(r#"{"name":"admin"}"#).apply(None, 0), Err(TenantError::Name(_))));
        assert!(matches!(input(r#"{"name":"a b"}"#).apply(None, 0), Err(TenantError::Name(_))));
        for dots in [".", "..", "a.b"] {
            let json = format!(r#"{{"name":"{dots}"}}"#);
            assert!(matches!(input(&json).apply(None, 0), Err(TenantError::Name(_))), "{dots}");
        }
        let e = input(r#"{"name":"x","compression":"gzip"}"#).apply(None, 0).unwrap_err();
        assert_eq!(e.to_string(), "compression: 'gzip' is not one of none, zstd, zstd-dict, pattern, auto");
        let e = input(r#"{"name":"x","max_memory":"lots"}"#).apply(None, 0).unwrap_err();
        assert_eq!(e.to_string(), "max_memory: 'lots' is not a size (examples: 100mb, 1gb)");
        let e = input(r#"{"name":"x","memcache_port":70000}"#).apply(None, 0).unwrap_err();
        assert!(e.to_string().starts_with("memcache_port"), "{e}");
        assert!(serde_json::from_str::<TenantInput>(r#"{"nmae":"x"}"#).is_err());
    }

    #[test]
    fn update_keeps_what_it_does_not_name() {
        let t = input(r#"{"name":"shop","password":"pw","compression":"zstd"}"#).apply(None, 1).unwrap();
        let u = input(r#"{"storage_mode":"write-back","max_qps":null}"#).apply(Some(&t), 2).unwrap();
        assert_eq!((u.compression.as_str(), u.storage_mode.as_str(), u.has_password), ("zstd", "write-back", true));
        assert_eq!((u.created_at, u.updated_at), (1, 2));
        assert_eq!(input(r#"{"password":""}"#).apply(Some(&u), 3).unwrap_err(), TenantError::PasswordMissing);
        let changed = input(r#"{"password":"new"}"#).apply(Some(&u), 3).unwrap();
        assert!(terrace_commands::passwords::verify(b"new", changed.password_hash.as_deref().unwrap()));
        assert_eq!(u.password_hash, t.password_hash, "an update without a password keeps the hash");
        // A tenant made before argon2 keeps its SHA-256, given to the proxies as such.
        let legacy = Tenant { password_hash: Some(sha256_hex(b"old")), ..u.clone() };
        assert_eq!(legacy.proxy_entry()["password_sha256"], sha256_hex(b"old"));
        assert!(legacy.proxy_entry()["password_hash"].is_null());
        assert_eq!(u.namespace_args(3)[..3], ["shop".to_string(), "MAXMEMORY".into(), "0".into()]);
        let m = input(r#"{"max_memory":"3mb"}"#).apply(Some(&u), 4).unwrap();
        assert_eq!(m.namespace_args(2)[2], (3u64 << 20).div_ceil(2).to_string());
    }
}
