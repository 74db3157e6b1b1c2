//! Console configuration: the `[console]` table of `terrace.toml`, `TERRACE_CONSOLE_*`
//! environment variables and flags, merged as flag > env > file > default. Errors name the key.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
pub use terrace_commands::settings::ConfigError;

fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.into(), reason: reason.into() }
}

/// Settings as given by one source; `None` means "not given here".
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSettings {
    pub port: Option<u16>,
    pub bind: Option<String>,
    /// The SQLite database file.
    pub db: Option<PathBuf>,
    /// Engines (`host:port`) the slot map starts with when the database has none.
    pub engines: Option<Vec<String>>,
    /// Proxies (`host:port`) the console pushes the topology to.
    pub proxies: Option<Vec<String>>,
    /// The proxies' `admin_password`.
    pub proxy_admin_password: Option<String>,
    /// A file (mode 0600) holding one password every engine takes (their `requirepass_file`):
    /// safe only with `tls_nodes`, since any address registered as an engine is sent it.
    pub engine_password_file: Option<PathBuf>,
    /// A file (mode 0600) holding the appliance's engine key: each engine's password is
    /// derived from it and its address (`terrace engine-password`), and an engine proves it
    /// holds its own before the console authenticates to it. `terrace up` uses this.
    pub engine_key_file: Option<PathBuf>,
    /// The console admin's password on first start (otherwise one is generated and printed).
    pub admin_password: Option<String>,
    /// How often the reconcile loop checks proxies and engines.
    pub reconcile_ms: Option<u64>,
    /// How often the history samples every node and tenant.
    pub sample_ms: Option<u64>,
    /// Where every event is POSTed as JSON (http://…; none by default).
    pub webhook_url: Option<String>,
    /// Replicas of a new slot map (`host:port`): the i-th follows engine i modulo the
    /// number of engines.
    pub replicas: Option<Vec<String>>,
    /// How often the coordinator checks every primary and replica.
    pub health_ms: Option<u64>,
    /// How long a primary may be unreachable before its best replica replaces it.
    pub failover_after_ms: Option<u64>,
    /// How long a replicated primary's term lease lasts (renewed every `health_ms`; at
    /// least twice that, and at most `failover_after_ms` less 250 ms of clock skew;
    /// default three quarters of `failover_after_ms`).
    pub lease_ms: Option<u64>,
    /// At most this many bytes a second copied by a slot move (a size: `50mb`; 0: as fast
    /// as the engines go).
    pub move_rate: Option<String>,
    /// The share of the time, in percent, a slot move's copying and deleting may take on the
    /// engines (the rest is their clients').
    pub move_pace: Option<u8>,
    /// With `tls_key_file`: the console's port serves HTTPS with this certificate chain (PEM).
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    /// The CA the console verifies TLS peers against: engines and proxies (`tls_nodes`), and
    /// an https:// webhook's receiver (beside the system's CAs).
    pub tls_ca_cert_file: Option<PathBuf>,
    /// The certificate the console shows nodes that ask for one (default: `tls_cert_file`).
    pub tls_client_cert_file: Option<PathBuf>,
    pub tls_client_key_file: Option<PathBuf>,
    /// The console's links to engines and proxies over TLS (their addresses are their TLS
    /// ports).
    pub tls_nodes: Option<bool>,
    /// etcd endpoints (`host:port`): the coordinator is elected there and publishes the
    /// proxies' topology there (proxies with their own `etcd` setting watch it).
    pub etcd: Option<Vec<String>>,
    /// The address operators and the other consoles reach this one at (`host:port`; default
    /// `bind:port`): what `coordinator` names.
    pub advertise: Option<String>,
    /// The Unix socket of the appliance that starts engines added without an address
    /// (`terrace up --consoles N` gives its consoles its own; `launch_socket`).
    pub launcher_socket: Option<PathBuf>,
}

impl ConsoleSettings {
    pub fn or(self, other: ConsoleSettings) -> ConsoleSettings {
        ConsoleSettings {
            port: self.port.or(other.port),
            bind: self.bind.or(other.bind),
            db: self.db.or(other.db),
            engines: self.engines.or(other.engines),
            proxies: self.proxies.or(other.proxies),
            proxy_admin_password: self.proxy_admin_password.or(other.proxy_admin_password),
            engine_password_file: self.engine_password_file.or(other.engine_password_file),
            engine_key_file: self.engine_key_file.or(other.engine_key_file),
            admin_password: self.admin_password.or(other.admin_password),
            reconcile_ms: self.reconcile_ms.or(other.reconcile_ms),
            sample_ms: self.sample_ms.or(other.sample_ms),
            webhook_url: self.webhook_url.or(other.webhook_url),
            replicas: self.replicas.or(other.replicas),
            health_ms: self.health_ms.or(other.health_ms),
            failover_after_ms: self.failover_after_ms.or(other.failover_after_ms),
            lease_ms: self.lease_ms.or(other.lease_ms),
            move_rate: self.move_rate.or(other.move_rate),
            move_pace: self.move_pace.or(other.move_pace),
            tls_cert_file: self.tls_cert_file.or(other.tls_cert_file),
            tls_key_file: self.tls_key_file.or(other.tls_key_file),
            tls_ca_cert_file: self.tls_ca_cert_file.or(other.tls_ca_cert_file),
            tls_client_cert_file: self.tls_client_cert_file.or(other.tls_client_cert_file),
            tls_client_key_file: self.tls_client_key_file.or(other.tls_client_key_file),
            tls_nodes: self.tls_nodes.or(other.tls_nodes),
            etcd: self.etcd.or(other.etcd),
            advertise: self.advertise.or(other.advertise),
            launcher_socket: self.launcher_socket.or(other.launcher_socket),
        }
    }

    /// TERRACE_CONSOLE_PORT, TERRACE_CONSOLE_BIND, TERRACE_CONSOLE_DB, TERRACE_CONSOLE_ENGINES
    /// and TERRACE_CONSOLE_PROXIES (comma-separated), TERRACE_PROXY_ADMIN_PASSWORD,
    /// TERRACE_ADMIN_PASSWORD, TERRACE_CONSOLE_TLS_CERT_FILE, TERRACE_CONSOLE_TLS_KEY_FILE.
    pub fn from_env() -> Result<ConsoleSettings, ConfigError> {
        let var = terrace_commands::settings::env_var;
        let list = |s: String| s.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect();
        Ok(ConsoleSettings {
            port: var("TERRACE_CONSOLE_PORT").map(|p| p.parse().map_err(|_| invalid("TERRACE_CONSOLE_PORT", format!("'{p}' is not a port")))).transpose()?,
            bind: var("TERRACE_CONSOLE_BIND"),
            db: var("TERRACE_CONSOLE_DB").map(PathBuf::from),
            engines: var("TERRACE_CONSOLE_ENGINES").map(list),
            proxies: var("TERRACE_CONSOLE_PROXIES").map(list),
            proxy_admin_password: var("TERRACE_PROXY_ADMIN_PASSWORD"),
            engine_password_file: var("TERRACE_CONSOLE_ENGINE_PASSWORD_FILE").map(PathBuf::from),
            engine_key_file: var("TERRACE_CONSOLE_ENGINE_KEY_FILE").map(PathBuf::from),
            admin_password: var("TERRACE_ADMIN_PASSWORD"),
            reconcile_ms: None,
            sample_ms: None,
            webhook_url: None,
            replicas: var("TERRACE_CONSOLE_REPLICAS").map(list),
            health_ms: None,
            failover_after_ms: None,
            lease_ms: None,
            move_rate: var("TERRACE_CONSOLE_MOVE_RATE"),
            move_pace: None,
            tls_cert_file: var("TERRACE_CONSOLE_TLS_CERT_FILE").map(PathBuf::from),
            tls_key_file: var("TERRACE_CONSOLE_TLS_KEY_FILE").map(PathBuf::from),
            tls_ca_cert_file: var("TERRACE_CONSOLE_TLS_CA_CERT_FILE").map(PathBuf::from),
            tls_client_cert_file: var("TERRACE_CONSOLE_TLS_CLIENT_CERT_FILE").map(PathBuf::from),
            tls_client_key_file: var("TERRACE_CONSOLE_TLS_CLIENT_KEY_FILE").map(PathBuf::from),
            tls_nodes: terrace_commands::settings::env_flag("TERRACE_CONSOLE_TLS_NODES")?,
            etcd: var("TERRACE_CONSOLE_ETCD").map(list),
            advertise: var("TERRACE_CONSOLE_ADVERTISE"),
            launcher_socket: var("TERRACE_CONSOLE_LAUNCHER_SOCKET").map(PathBuf::from),
        })
    }

    pub fn from_file(path: &std::path::Path) -> Result<ConsoleSettings, ConfigError> {
        terrace_commands::settings::read_table(path, "console")
    }

    pub fn resolve(self) -> Result<ConsoleConfig, ConfigError> {
        let check = |key: &str, list: &[String]| -> Result<(), ConfigError> {
            for a in list {
                if !terrace_commands::settings::is_host_port(a) {
                    return Err(invalid(key, format!("'{a}' is not host:port")));
                }
            }
            Ok(())
        };
        let engines = self.engines.unwrap_or_else(|| vec!["127.0.0.1:7001".into(), "127.0.0.1:7002".into()]);
        check("engines", &engines)?;
        if engines.is_empty() || engines.len() > 1024 {
            return Err(invalid("engines", "between 1 and 1024 engines"));
        }
        let etcd = self.etcd.unwrap_or_default();
        check("etcd", &etcd)?;
        if let Some(a) = &self.advertise {
            check("advertise", std::slice::from_ref(a))?;
        }
        let proxies = self.proxies.unwrap_or_else(|| vec!["127.0.0.1:6379".into()]);
        check("proxies", &proxies)?;
        let replicas = self.replicas.unwrap_or_default();
        check("replicas", &replicas)?;
        if let Some(a) = replicas.iter().find(|r| engines.contains(r)) {
            return Err(invalid("replicas", format!("'{a}' is also an engine")));
        }
        let health_ms = self.health_ms.unwrap_or(500);
        if !(50..=60_000).contains(&health_ms) {
            return Err(invalid("health_ms", "between 50 and 60000"));
        }
        let failover_after_ms = self.failover_after_ms.unwrap_or(2000);
        if !(100..=600_000).contains(&failover_after_ms) || failover_after_ms < health_ms {
            return Err(invalid("failover_after_ms", "between 100 and 600000, and at least health_ms"));
        }
        let skew = crate::lease::LEASE_SKEW.as_millis() as u64;
        let lease_ms = self.lease_ms.unwrap_or((failover_after_ms * 3 / 4).min(failover_after_ms.saturating_sub(skew)));
        if lease_ms < 2 * health_ms || lease_ms + skew > failover_after_ms {
            return Err(invalid(
                "lease_ms",
                format!("at least twice health_ms ({health_ms}) and at most failover_after_ms ({failover_after_ms}) less {skew} ms (a replica is promoted only once its primary's lease has surely run out)"),
            ));
        }
        let reconcile_ms = self.reconcile_ms.unwrap_or(2000);
        if !(100..=600_000).contains(&reconcile_ms) {
            return Err(invalid("reconcile_ms", "between 100 and 600000"));
        }
        let webhook_url = match self.webhook_url.filter(|u| !u.is_empty()) {
            Some(u) if (u.starts_with("http://") || u.starts_with("https://")) && reqwest_url_ok(&u) => Some(u),
            Some(u) => return Err(invalid("webhook_url", format!("'{u}' is not an http:// or https:// URL"))),
            None => None,
        };
        let sample_ms = self.sample_ms.unwrap_or(10_000);
        if !(500..=3_600_000).contains(&sample_ms) {
            return Err(invalid("sample_ms", "between 500 and 3600000"));
        }
        if let Some(p) = &self.admin_password {
            if p.len() < 8 {
                return Err(invalid("admin_password", "at least 8 characters"));
            }
        }
        let move_rate = match &self.move_rate {
            Some(r) => {
                terrace_commands::settings::parse_size(r).ok_or_else(|| invalid("move_rate", format!("'{r}' is not a size (examples: 0, 512kb, 50mb)")))?
            }
            None => 0,
        };
        let move_pace = self.move_pace.unwrap_or(50);
        if !(1..=100).contains(&move_pace) {
            return Err(invalid("move_pace", "a percentage from 1 to 100"));
        }
        let engine_auth = terrace_commands::credentials::EngineAuth::from_files(self.engine_password_file.as_deref(), self.engine_key_file.as_deref())?;
        let files = terrace_tls::TlsFiles::from_settings(self.tls_cert_file, self.tls_key_file, None, None)?;
        let node_tls = match self.tls_nodes {
            Some(true) => Some(terrace_tls::LinkTls::from_settings(
                self.tls_ca_cert_file.clone(),
                (self.tls_client_cert_file, self.tls_client_key_file),
                files.as_ref(),
                "tls_nodes",
            )?),
            _ => None,
        };
        // Read now, so a bad file stops the start naming its key.
        let https_ca = match &self.tls_ca_cert_file {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| invalid("tls_ca_cert_file", format!("{}: {e}", path.display())))?;
                reqwest::Certificate::from_pem_bundle(&pem)
                    .map_err(|e| invalid("tls_ca_cert_file", format!("{}: not PEM certificates ({e})", path.display())))?
            }
            None => Vec::new(),
        };
        let tls = files.map(terrace_tls::ServerTls::new).transpose()?.map(std::sync::Arc::new);
        Ok(ConsoleConfig {
            tls,
            node_tls,
            https_ca,
            engine_auth,
            port: self.port.unwrap_or(8080),
            bind: self.bind.unwrap_or_else(|| "127.0.0.1".into()),
            db: self.db.unwrap_or_else(|| PathBuf::from("data/console.db")),
            engines,
            proxies,
            proxy_admin_password: self.proxy_admin_password.filter(|p| !p.is_empty()),
            admin_password: self.admin_password,
            reconcile: Duration::from_millis(reconcile_ms),
            sample: Duration::from_millis(sample_ms),
            webhook_url,
            replicas,
            health: Duration::from_millis(health_ms),
            failover_after: Duration::from_millis(failover_after_ms),
            lease: Duration::from_millis(lease_ms),
            move_rate,
            move_pace,
            launcher: Launch(self.launcher_socket.map(|p| std::sync::Arc::new(crate::launch_socket::SocketLauncher::new(p)) as std::sync::Arc<dyn Launcher>)),
            own_proxies: false,
            etcd,
            advertise: self.advertise,
        })
    }
}

/// Starts and stops engines for the console (`terrace up` gives one: engines added from the
/// console are its children, supervised like the first ones).
pub trait Launcher: Send + Sync {
    /// Starts a new engine; answers its address once it answers.
    fn start(&self) -> Result<String, String>;
    /// Stops an engine this launcher started (false: not one of its own).
    fn stop(&self, address: &str) -> bool;
}

/// A console's launcher, if it has one.
#[derive(Clone, Default)]
pub struct Launch(pub Option<std::sync::Arc<dyn Launcher>>);

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Launch(some)" } else { "Launch(none)" })
    }
}

#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// HTTPS on the console's port (`tls_cert_file`, `tls_key_file`); re-read on SIGHUP.
    pub tls: Option<std::sync::Arc<terrace_tls::ServerTls>>,
    /// The links to engines and proxies over TLS (`tls_nodes`).
    pub node_tls: Option<terrace_tls::LinkTls>,
    /// CAs an https:// webhook's receiver or another console may also be signed by
    /// (`tls_ca_cert_file`).
    pub https_ca: Vec<reqwest::Certificate>,
    pub port: u16,
    pub bind: String,
    pub db: PathBuf,
    pub engines: Vec<String>,
    pub proxies: Vec<String>,
    pub proxy_admin_password: Option<String>,
    /// How the console authenticates to engines (`engine_key_file`, `engine_password_file`).
    pub engine_auth: terrace_commands::credentials::EngineAuth,
    pub admin_password: Option<String>,
    pub reconcile: Duration,
    /// How often the history samples every node and tenant (`sample_ms`, 10 s).
    pub sample: Duration,
    /// Where every event is POSTed (`webhook_url`).
    pub webhook_url: Option<String>,
    pub replicas: Vec<String>,
    pub health: Duration,
    pub failover_after: Duration,
    /// A replicated primary's term lease (`lease_ms`).
    pub lease: Duration,
    /// Bytes a second a slot move copies at most (0: no limit).
    pub move_rate: u64,
    /// The share of the time a slot move works on the engines, in percent.
    pub move_pace: u8,
    /// Who starts engines added without an address (`terrace up`).
    pub launcher: Launch,
    /// The proxies are `proxies` at every start, not only the first (`terrace up`).
    pub own_proxies: bool,
    /// etcd endpoints (empty: this console coordinates alone, its database the store).
    pub etcd: Vec<String>,
    /// What `coordinator` names this console as (None: the address it listens on).
    pub advertise: Option<String>,
}

/// Whether `u` parses as a URL with a host.
fn reqwest_url_ok(u: &str) -> bool {
    reqwest::Url::parse(u).is_ok_and(|url| url.host().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_errors_name_the_key() {
        let c = ConsoleSettings::default().resolve().unwrap();
        assert_eq!((c.port, c.bind.as_str()), (8080, "127.0.0.1"));
        assert_eq!(c.db, PathBuf::from("data/console.db"));
        let e = ConsoleSettings { proxies: Some(vec!["nope".into()]), ..Default::default() }.resolve().unwrap_err();
        assert_eq!(e.to_string(), "invalid value for `proxies`: 'nope' is not host:port");
        let e = ConsoleSettings { admin_password: Some("short".into()), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("`admin_password`"), "{e}");
        let e = ConsoleSettings { reconcile_ms: Some(5), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("`reconcile_ms`"), "{e}");
        assert_eq!((c.health, c.failover_after, c.lease), (Duration::from_millis(500), Duration::from_millis(2000), Duration::from_millis(1500)));
        let e = ConsoleSettings { replicas: Some(vec!["127.0.0.1:7001".into()]), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("`replicas`: '127.0.0.1:7001' is also an engine"), "{e}");
        let e = ConsoleSettings { move_rate: Some("fast".into()), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("`move_rate`: 'fast' is not a size"), "{e}");
        let c = ConsoleSettings { move_rate: Some("2mb".into()), ..Default::default() }.resolve().unwrap();
        assert_eq!((c.move_rate, c.move_pace), (2 << 20, 50));
        let e = ConsoleSettings { move_pace: Some(0), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("`move_pace`"), "{e}");
        let e = ConsoleSettings { failover_after_ms: Some(50), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("`failover_after_ms`"), "{e}");
        let e = ConsoleSettings { lease_ms: Some(1900), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("`lease_ms`") && e.to_string().contains("surely run out"), "{e}");
        let e = ConsoleSettings { health_ms: Some(100), failover_after_ms: Some(300), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("`lease_ms`"), "{e}");
    }

    #[test]
    fn the_packaged_example_is_valid() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/terrace.toml");
        let c = ConsoleSettings::from_file(&path).unwrap().resolve().unwrap();
        assert_eq!(c.db, PathBuf::from("/var/lib/terrace/console.db"));
        assert_eq!(c.proxies, vec!["127.0.0.1:6379".to_string()]);
    }
}
