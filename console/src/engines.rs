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
    #[error("address: none given, and this console starts no engines (only `terrace up` does)")]
    NoLauncher,
    #[error("the engine could not be started: {0}")]
    Start(String),
    #[error("the engine at {0} does not answer: {1}")]
    Unreachable(String, String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Db(#[from] db::DbError),
}

fn valid(address: &str) -> bool {
    address.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
}

/// Adds the engine at `address` (None: one the launcher starts) at the end of the slot map,
/// owning no slots; answers its index and address.
pub async fn add(console: &Console, address: Option<&str>) -> Result<(usize, String), EngineError> {
    let address = match address.map(str::trim).filter(|a| !a.is_empty()) {
        Some(a) if valid(a) => a.to_string(),
        Some(_) => return Err(EngineError::Address),
        None => {
            let launcher = console.config.launcher.0.clone().ok_or(EngineError::NoLauncher)?;
            tokio::task::spawn_blocking(move || launcher.start()).await.map_err(|e| EngineError::Start(e.to_string()))?.map_err(EngineError::Start)?
        }
    };
    if let Err(why) = Node::engine(&address, console.config.engine_password.as_deref()).await {
        return Err(EngineError::Unreachable(address, why.to_string()));
    }
    let idx = db::add_engine(&console.db, &address).await?.map_err(EngineError::Conflict)?;
    db::add_event(&console.db, "engine", &format!("engine {idx} ({address}) added, with no slots yet")).await?;
    console.wake.notify_one();
    Ok((idx, address))
}

/// Removes an engine that owns no slots, has no replicas and no move under way; one the
/// launcher started is stopped.
pub async fn remove(console: &Console, address: &str) -> Result<(), EngineError> {
    db::remove_engine(&console.db, address).await?.map_err(EngineError::Conflict)?;
    let stopped = console.config.launcher.0.as_ref().is_some_and(|l| l.stop(address));
    let how = if stopped { " and stopped" } else { "" };
    db::add_event(&console.db, "engine", &format!("engine {address} removed from the slot map{how}")).await?;
    console.wake.notify_one();
    Ok(())
}
