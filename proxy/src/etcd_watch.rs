//! The topology from etcd (the `etcd` setting): read at start, then watched; each document
//! put at `TOPOLOGY_KEY` is put in force as a console's `TERRACE.TOPOLOGY SET` would be,
//! in revision order, none older than the one in force. While etcd cannot be reached the
//! proxy keeps the topology it has and tries again every second. Besides the watch, the key
//! is read every `RECHECK`: a watch whose connection died silently (a partition) misses
//! nothing for longer than that.

use std::sync::Arc;
use std::time::Duration;

use terrace_etcd::{Client, EtcdError, Event, KeyValue, Watch, TOPOLOGY_KEY};

use crate::frontend::Shared;

const RECHECK: Duration = Duration::from_secs(5);
const RETRY: Duration = Duration::from_secs(1);

/// Follows the topology in etcd for as long as the proxy runs.
pub async fn run(shared: Arc<Shared>) {
    let client = match Client::new(&shared.config.etcd, Duration::from_secs(2)) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "etcd: the topology cannot be watched");
            return;
        }
    };
    // The revision of the document in force (0: none from etcd yet).
    let mut applied = 0;
    loop {
        if let Err(e) = follow(&shared, &client, &mut applied).await {
            tracing::warn!(error = %e, applied, "etcd: watching the topology (the one in force stays)");
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Reads the key, then applies its changes as they come, until etcd fails it.
async fn follow(shared: &Shared, client: &Client, applied: &mut i64) -> Result<(), EtcdError> {
    let (kv, revision) = client.get(TOPOLOGY_KEY.as_bytes()).await?;
    if let Some(kv) = kv {
        apply(shared, &kv, applied);
    }
    let mut watch = Watch::open(client, TOPOLOGY_KEY.as_bytes(), false, revision + 1).await?;
    loop {
        tokio::select! {
            events = watch.next() => {
                for event in events? {
                    if let Event::Put(kv) = event {
                        apply(shared, &kv, applied);
                    }
                }
            }
            _ = tokio::time::sleep(RECHECK) => {
                if let (Some(kv), _) = client.get(TOPOLOGY_KEY.as_bytes()).await? {
                    apply(shared, &kv, applied);
                }
            }
        }
    }
}

/// Puts the document in force if it is newer than the one in force.
fn apply(shared: &Shared, kv: &KeyValue, applied: &mut i64) {
    if kv.mod_revision <= *applied {
        return;
    }
    *applied = kv.mod_revision;
    match shared.install_document(&kv.value) {
        Ok(digest) => tracing::info!(revision = kv.mod_revision, %digest, "etcd: topology in force"),
        Err(e) => tracing::error!(revision = kv.mod_revision, error = %e, "etcd: the topology there is invalid; the one in force stays"),
    }
}
