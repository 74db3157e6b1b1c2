//! Dropping a tenant's namespace (`TERRACE.DROPNAMESPACE`): what the engine keeps per
//! namespace, put back to a new tenant's state, and the tenant's rows deleted from this
//! engine's storage. The command (`command::server::drop_namespace`) empties the databases
//! under its locks and leaves a tombstone in the names list; the next new tenant reuses the
//! number (`namespaces::first_free`).

use std::sync::atomic::Ordering;

use super::state::Server;
use crate::keyspace::NUM_DBS;

impl Server {
    /// Puts every per-namespace setting and counter of `ns` back to an engine default: its
    /// data limit, storage mode, PMem tier policy, WAL flag, compression (settings,
    /// dictionaries, samples), scripts and functions, keyspace notifications and statistics.
    pub fn reset_namespace(&self, ns: usize) {
        self.keyspace.set_namespace_limit(ns, 0, false);
        self.keyspace.set_namespace_limit(ns, 0, true);
        if let Some(tier) = self.storage_tier() {
            tier.set_mode(ns, tier.mode);
        }
        if let Some(tier) = self.keyspace.tier() {
            tier.set_tenant_policy(ns, crate::tier::TenantPolicy::Engine);
        }
        if let Some(flag) = self.wal_off.get(ns) {
            flag.store(false, Ordering::Relaxed);
        }
        self.keyspace.compression(ns).reset(self.config.compression.clone());
        self.scripts.flush(ns);
        self.scripts.functions.flush(ns);
        self.notifications.set(ns, 0, &self.keyspace);
        if let Some(stats) = self.tenant_stats.get(ns) {
            stats.reset();
        }
    }

    /// Closes every client connection in namespace `ns`; answers how many.
    pub fn kill_clients_in(&self, ns: usize) -> usize {
        let clients = self.clients.lock();
        let mut killed = 0;
        for c in clients.values().filter(|c| c.namespace.load(Ordering::Relaxed) == ns) {
            c.kill_locked();
            killed += 1;
        }
        killed
    }

    /// Deletes tenant `name` (namespace `ns`) from this engine's storage tier, if it keeps
    /// data there and this engine writes storage (a replica of a shared one does not): its
    /// dirty keys are forgotten, the writes already queued land first, then every stored row
    /// goes. Blocks the caller until storage confirmed (an administrative command, like
    /// FLUSHALL SYNC); runs the storage calls from a thread of its own, outside any runtime.
    pub fn wipe_stored_tenant(&self, ns: usize, name: &str) -> Result<(), crate::storage::StorageError> {
        let Some(tier) = self.storage_tier() else { return Ok(()) };
        tier.dirty.forget_dbs(ns * NUM_DBS..(ns + 1) * NUM_DBS);
        if !tier.backs(ns) || !crate::storage::flusher::Source::writes_storage(self) {
            return Ok(());
        }
        let queued = tier.last_queued();
        std::thread::scope(|s| {
            s.spawn(|| {
                let storage = &tier.storage;
                storage.block_on(tier.wait(queued)).map_err(crate::storage::StorageError::Backend)?;
                crate::snapshot::wipe_own_storage(tier, name)
            })
            .join()
            .unwrap_or_else(|_| Err(crate::storage::StorageError::Backend("the storage wipe panicked".into())))
        })
    }
}
