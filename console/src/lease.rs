//! Primaries' term leases: every primary that has replicas may take writes only until a
//! deadline this console gives it (`TERRACE.EPOCH group epoch LEASE until`, unix ms on this
//! console's clock), renewed every `health_ms` by a loop of its own (a slow health round
//! cannot let a healthy primary's lease run out). A replica is promoted only once the lease
//! last given to the primary it replaces has run out, plus `LEASE_SKEW` for the clocks of
//! two hosts: a primary that was paused or cut off, and comes back, finds its lease gone —
//! it neither runs nor acknowledges the writes queued for it (the engine's admission and
//! its reply path check the lease), so its successor never misses an acknowledged write.
//!
//! What a lease may still be held is known for every address this console gave one to; for
//! the others (this console just started) it is its start plus a lease, which no failover
//! for an unreachable primary can precede (`failover_after` ≥ `lease` + `LEASE_SKEW`).
//! Primaries without replicas get no lease: nothing could replace them, and a console that
//! is down must not stop their writes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::nodes::Node;
use crate::{db, Console};

/// What the clocks of the console's and an engine's hosts may differ by.
pub const LEASE_SKEW: Duration = Duration::from_millis(250);

/// The leases this console gave, by engine address.
pub struct Leases {
    /// How long a lease lasts.
    pub length: Duration,
    /// When this console started (unix ms): a lease given before is over by then + length.
    started: i64,
    given: parking_lot::Mutex<HashMap<String, Given>>,
}

#[derive(Default)]
struct Given {
    /// The latest deadline sent (recorded before it is sent: a renewal that arrives late
    /// still counts).
    until: i64,
    /// Being replaced: no more renewals.
    frozen: bool,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Leases {
    pub fn new(length: Duration) -> Leases {
        Leases { length, started: now_ms(), given: Default::default() }
    }

    /// A new deadline for `address`, recorded as given (None: it is being replaced).
    fn grant(&self, address: &str) -> Option<i64> {
        let mut given = self.given.lock();
        let g = given.entry(address.to_string()).or_default();
        if g.frozen {
            return None;
        }
        g.until = g.until.max(now_ms() + self.length.as_millis() as i64);
        Some(g.until)
    }

    /// A deadline for a primary being promoted now (it takes writes at once).
    pub fn grant_new(&self, address: &str) -> i64 {
        self.thaw(address);
        self.grant(address).unwrap_or_else(|| now_ms() + self.length.as_millis() as i64)
    }

    /// Stops renewing `address`'s lease; answers until when it may still hold one.
    pub fn freeze(&self, address: &str) -> i64 {
        let mut given = self.given.lock();
        let g = given.entry(address.to_string()).or_default();
        g.frozen = true;
        g.until.max(self.started + self.length.as_millis() as i64)
    }

    /// Renews `address` again (its replacement did not happen).
    pub fn thaw(&self, address: &str) {
        if let Some(g) = self.given.lock().get_mut(address) {
            g.frozen = false;
        }
    }

    /// Waits until a lease that may run until `until` has surely run out on the engine's
    /// clock too.
    pub async fn outlive(until: i64) {
        let left = until + LEASE_SKEW.as_millis() as i64 - now_ms();
        if left > 0 {
            tokio::time::sleep(Duration::from_millis(left as u64)).await;
        }
    }
}

/// How long one renewal may take.
const RENEWAL: Duration = Duration::from_millis(400);

/// Renews every replicated primary's lease (and gives it its range's term) every
/// `health_ms`, all at once.
pub async fn run(console: Arc<Console>) {
    loop {
        if console.coordination.leading() {
            if let Err(e) = renew_all(&console).await {
                tracing::warn!(error = %e, "lease renewal");
            }
        }
        tokio::time::sleep(console.config.health).await;
    }
}

async fn renew_all(console: &Console) -> Result<(), db::DbError> {
    let (engines, _) = db::topology(&console.db).await?;
    let replicas = db::replicas(&console.db).await?;
    let terms = db::terms(&console.db).await?;
    let auth = &console.config.engine_auth;
    let renewals = engines.iter().enumerate().filter(|(idx, _)| replicas.iter().any(|(_, e)| e == idx)).filter_map(|(idx, address)| {
        let until = console.leases.grant(address)?;
        let term = terms.get(idx)?;
        Some(async move {
            let renewed = async {
                let mut n = Node::engine_bounded(address, auth, RENEWAL).await.map_err(|e| e.to_string())?;
                n.run::<String>(&["TERRACE.EPOCH", &term.group, &term.epoch.to_string(), "LEASE", &until.to_string()]).await.map_err(|e| e.to_string())
            };
            match tokio::time::timeout(RENEWAL * 2, renewed).await.unwrap_or_else(|_| Err("timed out".into())) {
                Ok(_) => {}
                Err(e) if e.contains("revoked") => {
                    if let Err(e) = recover_revoked(console, idx, address).await {
                        tracing::warn!(engine = idx, %address, error = %e, "cannot give a revoked primary a new term");
                    }
                }
                Err(e) => tracing::debug!(engine = idx, %address, error = %e, "lease not renewed"),
            }
        })
    });
    futures_util::future::join_all(renewals).await;
    Ok(())
}

/// The map's primary for `idx` holds a revoked lease although no failover is under way: one
/// was interrupted (its console stopped between the revocation and the new term's
/// publication). It gets the next epoch and a lease — under the coordinator's lock, and only
/// if it is still the map's primary and not being replaced — and takes writes again.
async fn recover_revoked(console: &Console, idx: usize, address: &str) -> Result<(), String> {
    let _one_at_a_time = console.coordinating.lock().await;
    let (engines, _) = db::topology(&console.db).await.map_err(|e| e.to_string())?;
    if engines.get(idx).map(String::as_str) != Some(address) {
        return Ok(());
    }
    let Some(until) = console.leases.grant(address) else { return Ok(()) };
    let term = db::next_term(&console.db, idx).await.map_err(|e| e.to_string())?;
    let epoch = term.epoch;
    crate::failover::give_term(address, &console.config.engine_auth, &term, Some(until)).await?;
    crate::failover::event(console, "term", format!("engine {idx} ({address}) held a revoked lease (a failover was interrupted): given epoch {epoch}")).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frozen_lease_is_not_renewed_and_says_how_long_it_may_be_held() {
        let l = Leases::new(Duration::from_millis(1500));
        let first = l.grant("a:1").unwrap();
        assert!(first >= now_ms() + 1400);
        let held = l.freeze("a:1");
        assert!(held >= first, "a renewal given is held until its end");
        assert_eq!(l.grant("a:1"), None, "frozen: not renewed");
        l.thaw("a:1");
        assert!(l.grant("a:1").is_some());
    }

    #[test]
    fn an_address_never_leased_here_may_hold_a_lease_from_before_this_console_started() {
        let l = Leases::new(Duration::from_millis(1500));
        assert!(l.freeze("b:2") >= l.started + 1500);
    }
}
