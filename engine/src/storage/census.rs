//! The storage census: how many keys and bytes each storage-backed tenant holds in storage (the
//! cost model's bytes in the storage tier). The adapters keep no per-tenant totals and a
//! write does not know the size it replaces, so a background thread walks each tenant with
//! `scan` and counts — spending at most about 1% of its time: after a walk that took d, the
//! next waits max(60 s, 100·d). `TERRACE.WORKLOAD` shows the last count and its age; asking
//! before there is one wakes the thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::tier::StorageTier;

/// Keys fetched per scan call.
const PAGE: usize = 1024;
const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// One tenant's count.
#[derive(Debug, Clone, Copy)]
pub struct Count {
    pub keys: u64,
    /// Stored keys and values (storage's own overhead not included).
    pub bytes: u64,
    pub at: Instant,
}

#[derive(Default)]
pub struct Census {
    counts: Mutex<HashMap<String, Count>>,
    wake: Condvar,
    woken: Mutex<bool>,
}

impl Census {
    pub fn get(&self, tenant: &str) -> Option<Count> {
        self.counts.lock().get(tenant).copied()
    }

    /// Asks for a walk now (a tenant without a count yet).
    pub fn wake(&self) {
        *self.woken.lock() = true;
        self.wake.notify_one();
    }

    /// Counts one tenant by walking it.
    pub fn count(&self, tier: &StorageTier, tenant: &str) -> Result<Count, super::StorageError> {
        let (mut keys, mut bytes) = (0u64, 0u64);
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = tier.storage.block_on(tier.storage.scan(tenant.to_string(), after.clone(), PAGE))?;
            keys += page.len() as u64;
            bytes += page.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum::<u64>();
            match page.last() {
                Some((k, _)) if page.len() == PAGE => after = Some(k.clone()),
                _ => break,
            }
        }
        let c = Count { keys, bytes, at: Instant::now() };
        self.counts.lock().insert(tenant.to_string(), c);
        Ok(c)
    }

    /// The census thread: walks every storage-backed tenant, then sleeps (or until woken).
    /// `tenants` names the tenants by namespace ("" for the default one); None once the
    /// server is gone.
    pub fn run(&self, tenants: impl Fn() -> Option<Vec<String>>, tier: Arc<StorageTier>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let Some(names) = tenants() else { return };
            let tenants: Vec<String> = names
                .iter()
                .enumerate()
                .filter(|(i, n)| tier.backs(*i) && *n != terrace_commands::settings::DROPPED_NAMESPACE)
                .map(|(_, n)| if n.is_empty() { "default".to_string() } else { n.clone() })
                .collect();
            for t in &tenants {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                if let Err(e) = self.count(&tier, t) {
                    tracing::warn!(tenant = %t, error = %e, "storage census failed");
                }
            }
            let wait = MIN_INTERVAL.max(started.elapsed() * 100);
            let mut woken = self.woken.lock();
            let deadline = Instant::now() + wait;
            while !*woken && !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                self.wake.wait_for(&mut woken, Duration::from_millis(200));
            }
            *woken = false;
        }
    }
}
