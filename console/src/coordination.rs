//! Who coordinates — runs failovers, term leases, slot moves and the reconcile loop's
//! changes. Alone (no `etcd` setting) this console does, its database the store. With etcd,
//! the consoles sharing it elect one (`terrace_etcd::Election` on `COORDINATOR_KEY`, leases
//! of `ELECTION_TTL`): it coordinates while its term holds, and publishes the proxies'
//! topology at `terrace_etcd::TOPOLOGY_KEY` in a transaction that compares its term, so a
//! deposed console's map never reaches a proxy (proxies with their own `etcd` setting watch
//! that key).
//!
//! Not built yet: consoles sharing their state. Until then the state belongs to one console
//! database: the first to coordinate records its database's id at `OWNER_KEY`, and a
//! console with another database never campaigns — it stands by, serves what it has, and
//! refuses changes — so a console with a different or stale state never takes over.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use terrace_etcd::{Client, Compare, Election, Op, TOPOLOGY_KEY};

pub const COORDINATOR_KEY: &str = "/terrace/coordinator";
pub const OWNER_KEY: &str = "/terrace/owner";
/// The coordinator's lease: another console takes over within this (and a poll) of its
/// loss.
const ELECTION_TTL: Duration = Duration::from_secs(3);
/// How often a console that stands by looks at the owner and the coordinator again.
const STANDBY_POLL: Duration = Duration::from_secs(1);

pub struct Coordination {
    /// This console's address, as `coordinator` names it.
    me: String,
    etcd: Option<OnEtcd>,
}

struct OnEtcd {
    client: Arc<Client>,
    shared: Arc<Mutex<Shared>>,
}

#[derive(Default)]
struct Shared {
    /// Campaigning (this console's database owns the state).
    election: Option<Election>,
    /// Why it stands by instead.
    standby: Option<String>,
    /// The coordinator as a standby last read it.
    seen: Option<String>,
    /// The digest of the topology this console last published.
    published: Option<String>,
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Coordination {
    /// This console coordinates alone.
    pub fn alone(me: String) -> Coordination {
        Coordination { me, etcd: None }
    }

    /// The consoles on etcd at `endpoints` elect a coordinator; `database_id` names this
    /// console's database (the owner check).
    pub fn on_etcd(me: String, endpoints: &[String], database_id: String) -> Result<Coordination, terrace_etcd::EtcdError> {
        let client = Arc::new(Client::new(endpoints, Duration::from_secs(2))?);
        let shared = Arc::new(Mutex::new(Shared::default()));
        tokio::spawn(claim(client.clone(), shared.clone(), me.clone(), database_id));
        Ok(Coordination { me, etcd: Some(OnEtcd { client, shared }) })
    }

    /// Whether this console coordinates now.
    pub fn leading(&self) -> bool {
        match &self.etcd {
            None => true,
            Some(e) => lock(&e.shared).election.as_ref().is_some_and(|el| el.leading().is_some()),
        }
    }

    /// Whether the coordinator is elected on etcd (and the proxies' topology published there).
    pub fn on_etcd_mode(&self) -> bool {
        self.etcd.is_some()
    }

    /// The coordinating console's address, as far as this one knows (None: none now).
    pub fn coordinator(&self) -> Option<String> {
        match &self.etcd {
            None => Some(self.me.clone()),
            Some(e) => {
                let shared = lock(&e.shared);
                match &shared.election {
                    Some(el) => el.leader(),
                    None => shared.seen.clone(),
                }
            }
        }
    }

    /// Why this console does not campaign, if it does not.
    pub fn standby_reason(&self) -> Option<String> {
        self.etcd.as_ref().and_then(|e| lock(&e.shared).standby.clone())
    }

    /// Publishes the proxies' topology document at `TOPOLOGY_KEY` (once per digest), in a
    /// transaction that holds only while this console's term does. Err: not published (not
    /// the coordinator, deposed, or etcd unreachable).
    pub async fn publish(&self, document: &str, digest: &str) -> Result<(), String> {
        let Some(e) = &self.etcd else { return Err("no etcd".into()) };
        let fence = {
            let shared = lock(&e.shared);
            if shared.published.as_deref() == Some(digest) {
                return Ok(());
            }
            shared.election.as_ref().and_then(Election::fence).ok_or("this console does not coordinate")?
        };
        let put = Op::Put { key: TOPOLOGY_KEY.as_bytes().to_vec(), value: document.as_bytes().to_vec(), lease: 0 };
        let outcome = e.client.txn(&[fence], &[put], &[]).await.map_err(|err| err.to_string())?;
        if !outcome.succeeded {
            return Err("this console's term ended: the topology was not published".into());
        }
        lock(&e.shared).published = Some(digest.to_string());
        tracing::info!(revision = outcome.revision, %digest, "etcd: topology published");
        Ok(())
    }
}

/// Takes the state's ownership for this console's database (or finds it is another's), then
/// campaigns; a console that does not own the state stands by and looks again.
async fn claim(client: Arc<Client>, shared: Arc<Mutex<Shared>>, me: String, database_id: String) {
    loop {
        let create = Op::Put { key: OWNER_KEY.as_bytes().to_vec(), value: database_id.as_bytes().to_vec(), lease: 0 };
        let read = Op::Get { key: OWNER_KEY.as_bytes().to_vec() };
        let owner = client
            .txn(&[Compare::CreateRevision(OWNER_KEY.as_bytes().to_vec(), 0)], &[create, read.clone()], &[read])
            .await
            .map(|o| o.gets.first().and_then(|g| g.first()).map(|kv| String::from_utf8_lossy(&kv.value).into_owned()));
        match owner {
            Ok(Some(owner)) if owner == database_id => {
                let election = Election::start(client.clone(), COORDINATOR_KEY, &me, ELECTION_TTL);
                let mut s = lock(&shared);
                s.election = Some(election);
                s.standby = None;
                return;
            }
            Ok(owner) => {
                let why = format!(
                    "the cluster's state belongs to another console database ({}); this console (database {database_id}) stands by: consoles sharing their state are not built yet",
                    owner.unwrap_or_default()
                );
                let seen = client.get(COORDINATOR_KEY.as_bytes()).await.ok().and_then(|(kv, _)| kv).map(|kv| String::from_utf8_lossy(&kv.value).into_owned());
                let mut s = lock(&shared);
                if s.standby.as_deref() != Some(why.as_str()) {
                    tracing::warn!("{why}");
                }
                s.standby = Some(why);
                s.seen = seen;
            }
            Err(e) => {
                tracing::warn!(error = %e, "etcd: cannot read the state's owner");
                lock(&shared).standby = Some(format!("etcd unreachable: {e}"));
            }
        }
        tokio::time::sleep(STANDBY_POLL).await;
    }
}
