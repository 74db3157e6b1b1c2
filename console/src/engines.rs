//! Adding engines to the slot map and removing them (moving slots is `moves`): checked,
//! recorded as events, pushed to the nodes by the reconcile loop. An engine added without an
//! address is started by the console's launcher (`terrace up`), which supervises it.

use crate::db;
use crate::nodes::Node;
use crate::Console;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("address: host:port")]
    Address,
    #[error("replicas: host:port addresses, or how many to start (at most 4)")]
    ReplicaAddress,
    #[error("address: none given, and this console starts no engines (only `terrace up` does)")]
    NoLauncher,
    #[error("the engine could not be started: {0}")]
    Start(String),
    #[error("the engine at {0} does not answer: {1}")]
    Unreachable(String, String),
    /// It answered, without proving it holds the password of an engine at that address:
    /// with per-engine passwords, not one of this appliance's (`nodes::NodeError::Unproven`).
    #[error("{0} is not an engine of this appliance: it does not prove it holds that address's password (give the engine there the one `terrace engine-password` prints)")]
    NotAnEngine(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Db(#[from] db::DbError),
}

use terrace_commands::settings::is_host_port as valid;

/// An added engine's replicas: running ones by address, or how many the launcher starts.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum Replicas {
    Addresses(Vec<String>),
    Count(u8),
}

impl Default for Replicas {
    fn default() -> Self {
        Replicas::Count(0)
    }
}

/// Starts an engine with the launcher.
async fn launch(console: &Console) -> Result<String, EngineError> {
    let launcher = console.config.launcher.0.clone().ok_or(EngineError::NoLauncher)?;
    tokio::task::spawn_blocking(move || launcher.start()).await.map_err(|e| EngineError::Start(e.to_string()))?.map_err(EngineError::Start)
}

/// Adds the engine at `address` (None: one the launcher starts) at the end of the slot map,
/// owning no slots, with its replicas (the coordinator points them at it); answers its
/// index and address.
pub async fn add(console: &Console, address: Option<&str>, replicas: Replicas) -> Result<(usize, String), EngineError> {
    let address = match address.map(str::trim).filter(|a| !a.is_empty()) {
        Some(a) if valid(a) => a.to_string(),
        Some(_) => return Err(EngineError::Address),
        None => launch(console).await?,
    };
    let replicas = match replicas {
        Replicas::Addresses(list) if list.iter().all(|a| valid(a)) => list,
        Replicas::Addresses(_) => return Err(EngineError::ReplicaAddress),
        Replicas::Count(n) if n > 4 => return Err(EngineError::ReplicaAddress),
        Replicas::Count(n) => {
            let mut started = Vec::new();
            for _ in 0..n {
                started.push(launch(console).await?);
            }
            started
        }
    };
    for a in std::iter::once(&address).chain(&replicas) {
        match Node::engine(a, &console.config.engine_auth).await {
            Ok(_) => {}
            Err(crate::nodes::NodeError::Unproven { .. }) => return Err(EngineError::NotAnEngine(a.clone())),
            Err(why) => return Err(EngineError::Unreachable(a.clone(), why.to_string())),
        }
    }
    let idx = db::add_engine(&console.db, &address, &replicas).await?.map_err(EngineError::Conflict)?;
    let with = if replicas.is_empty() { String::new() } else { format!(" and its replicas {}", replicas.join(", ")) };
    db::add_event(&console.db, "engine", &format!("engine {idx} ({address}){with} added, with no slots yet")).await?;
    console.wake.notify_one();
    Ok((idx, address))
}

/// Removes an engine that owns no slots and has no move under way, with its replicas; those
/// the launcher started are stopped.
pub async fn remove(console: &Console, address: &str) -> Result<(), EngineError> {
    let replicas = db::remove_engine(&console.db, address).await?.map_err(EngineError::Conflict)?;
    let mut stopped = Vec::new();
    for a in std::iter::once(address).chain(replicas.iter().map(String::as_str)) {
        if console.config.launcher.0.as_ref().is_some_and(|l| l.stop(a)) {
            stopped.push(a.to_string());
        }
    }
    let with = if replicas.is_empty() { String::new() } else { format!(" and its replicas {}", replicas.join(", ")) };
    let how = if stopped.is_empty() { String::new() } else { format!("; stopped {}", stopped.join(", ")) };
    db::add_event(&console.db, "engine", &format!("engine {address}{with} removed from the slot map{how}")).await?;
    console.wake.notify_one();
    Ok(())
}
