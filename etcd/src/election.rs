//! One leader among candidates: the first to create the election's key, attached to a lease
//! it keeps alive, leads until the lease ends (it stops renewing, or etcd stops hearing
//! from it); etcd then deletes the key and the next candidate to create it leads. A term is
//! the key's create revision — a new one each time the key is made — and a leader's writes
//! compare it (`Election::fence`), so a deposed leader can never write.
//!
//! A leader counts itself leader only until its last renewal *sent* plus nine tenths of
//! the lease: etcd restarted the lease's clock after it received that renewal, so the
//! leader stops before etcd could let another candidate in, even if the two clocks run a
//! little apart.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::client::{Client, Compare, KeyValue, Op};

/// A term this candidate holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    /// The election key's create revision: the term's number.
    pub term: i64,
    pub lease: i64,
    /// Until when it may act as the leader.
    pub until: Instant,
}

#[derive(Default)]
struct State {
    leading: Option<Leadership>,
    /// The value the key's holder wrote (its address), as last read.
    leader: Option<String>,
}

/// A candidate's place in an election, campaigning in the background for as long as it
/// lives.
pub struct Election {
    client: Arc<Client>,
    key: Vec<u8>,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Election {
    /// Starts campaigning for `key` as `me` (what the others see as the leader: an address)
    /// with leases of `ttl` (whole seconds, at least 1).
    pub fn start(client: Arc<Client>, key: &str, me: &str, ttl: Duration) -> Election {
        let ttl = Duration::from_secs(ttl.as_secs().max(1));
        let state = Arc::new(Mutex::new(State::default()));
        let campaign = Campaign { client: client.clone(), key: key.as_bytes().to_vec(), me: me.to_string(), ttl, state: state.clone() };
        let task = tokio::spawn(campaign.run());
        Election { client, key: key.as_bytes().to_vec(), state, task }
    }

    /// The term this candidate holds now, if it leads.
    pub fn leading(&self) -> Option<Leadership> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.leading.filter(|l| Instant::now() < l.until)
    }

    /// The leader as last seen (this candidate's own address when it leads).
    pub fn leader(&self) -> Option<String> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).leader.clone()
    }

    /// The compare a leader's write makes: the election key still holds its term. None
    /// when this candidate does not lead.
    pub fn fence(&self) -> Option<Compare> {
        self.leading().map(|l| Compare::CreateRevision(self.key.clone(), l.term))
    }

    /// Stops campaigning; a leader gives its term up at once (its lease revoked: the key
    /// goes, and another candidate may lead without waiting for the lease to run out).
    pub async fn resign(self) {
        self.task.abort();
        let lease = self.state.lock().unwrap_or_else(PoisonError::into_inner).leading.take().map(|l| l.lease);
        if let Some(lease) = lease {
            if let Err(e) = self.client.lease_revoke(lease).await {
                tracing::warn!(error = %e, "resigning: the lease was not revoked (it runs out)");
            }
        }
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Campaign {
    client: Arc<Client>,
    key: Vec<u8>,
    me: String,
    ttl: Duration,
    state: Arc<Mutex<State>>,
}

impl Campaign {
    /// How often a candidate that does not lead looks at the key (it takes over within the
    /// lease's length plus this).
    fn poll(&self) -> Duration {
        (self.ttl / 6).min(Duration::from_millis(500))
    }

    fn set(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
    }

    async fn run(self) {
        loop {
            let granted_at = Instant::now();
            let lease = match self.client.lease_grant(self.ttl).await {
                Ok(id) => id,
                Err(e) => {
                    tracing::warn!(error = %e, "election: no lease from etcd");
                    tokio::time::sleep(self.poll()).await;
                    continue;
                }
            };
            self.campaign(lease, granted_at).await;
        }
    }

    /// Tries to take the key with `lease` until it leads and then loses its term, or the
    /// lease ends.
    async fn campaign(&self, lease: i64, mut renewed_at: Instant) {
        loop {
            let take = Op::Put { key: self.key.clone(), value: self.me.as_bytes().to_vec(), lease };
            let read = Op::Get { key: self.key.clone() };
            match self.client.txn(&[Compare::CreateRevision(self.key.clone(), 0)], &[take, read.clone()], &[read]).await {
                Ok(outcome) => {
                    let holder: Option<KeyValue> = outcome.gets.first().and_then(|g| g.first()).cloned();
                    self.set(|s| s.leader = holder.as_ref().map(|h| String::from_utf8_lossy(&h.value).into_owned()));
                    // (Ours also when an earlier take succeeded and its answer was lost.)
                    if let Some(held) = holder.filter(|h| h.lease == lease) {
                        self.lead(lease, held.create_revision, renewed_at).await;
                        return;
                    }
                }
                Err(e) => tracing::debug!(error = %e, "election: cannot read the key"),
            }
            tokio::time::sleep(self.poll()).await;
            // The lease stays alive while it waits, ready to take the key.
            let sent = Instant::now();
            match self.client.lease_keepalive(lease).await {
                Ok(Some(_)) => renewed_at = sent,
                Ok(None) => return,
                Err(e) if sent.duration_since(renewed_at) >= self.ttl => {
                    tracing::debug!(error = %e, "election: the lease ran out unrenewed");
                    return;
                }
                Err(_) => {}
            }
        }
    }

    /// Leads term `term` while the lease is renewed and the key is still its own.
    async fn lead(&self, lease: i64, term: i64, mut renewed_at: Instant) {
        let valid = self.ttl * 9 / 10;
        self.set(|s| s.leading = Some(Leadership { term, lease, until: renewed_at + valid }));
        tracing::info!(term, leader = %self.me, "election: leading");
        loop {
            tokio::time::sleep(self.ttl / 3).await;
            let sent = Instant::now();
            let renewed = self.client.lease_keepalive(lease).await;
            // (The key lives as long as the lease; it is gone only if deleted by hand. Not
            // readable this time: the lease says it is.)
            let still_mine = match &renewed {
                Ok(Some(_)) => match self.client.get(&self.key).await {
                    Ok((kv, _)) => kv.is_some_and(|kv| kv.create_revision == term),
                    Err(_) => true,
                },
                _ => false,
            };
            match renewed {
                Ok(Some(_)) if still_mine => {
                    renewed_at = sent;
                    self.set(|s| s.leading = Some(Leadership { term, lease, until: renewed_at + valid }));
                }
                Err(e) if Instant::now() < renewed_at + valid => {
                    tracing::warn!(error = %e, "election: the lease was not renewed this time");
                }
                other => {
                    let why = match other {
                        Ok(Some(_)) => "the key is no longer this term's".to_string(),
                        Ok(None) => "the lease ended".to_string(),
                        Err(e) => format!("etcd unreachable for the lease's length ({e})"),
                    };
                    self.set(|s| s.leading = None);
                    tracing::warn!(term, "election: stepped down: {why}");
                    let _ = self.client.lease_revoke(lease).await;
                    return;
                }
            }
        }
    }
}
