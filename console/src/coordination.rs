//! Who coordinates — runs failovers, term leases, slot moves and the reconcile loop's
//! changes. Alone (no `etcd` setting) this console does, its database the store.
//!
//! With etcd, the consoles sharing it elect one (`terrace_etcd::Election` on
//! `COORDINATOR_KEY`, leases of `ELECTION_TTL`). The coordinator publishes the shared state
//! (`shared_state`: users, tokens, tenants, topology, moves…) at `STATE_KEY` and the
//! proxies' topology at `terrace_etcd::TOPOLOGY_KEY` together, in one transaction that
//! compares its term: a decision and its publication are one write, and a deposed console
//! writes nothing. The others stand by: they mirror the published state into their own
//! database (serving reads from it, forwarding changes: `web::forward`), and the one
//! elected next reads the state once its term has begun — when no one else can write it any
//! more — and coordinates only after it applied it. Each console keeps its own sessions,
//! events and history.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use terrace_etcd::{Client, Compare, Election, Op, TOPOLOGY_KEY};

use crate::db::Db;

pub const COORDINATOR_KEY: &str = "/terrace/coordinator";
pub const STATE_KEY: &str = "/terrace/state";
/// The secret a standby shows the coordinator when it forwards a change (`web::forward`):
/// made once, by the first console that needs it, and read by the others.
pub const PEER_KEY: &str = "/terrace/peer-key";
/// The coordinator's lease: another console takes over within this (and a poll) of its
/// loss — plus etcd's own election when the coordinator's host took etcd's leader with it
/// (a new etcd leader extends every lease by its length). 3 s made a cut-off coordinator's
/// writes stall 6.1 s in the fault suite; with 2 s, 1.8–4.1 s. A coordinator that cannot
/// renew steps down after 1.8 s.
const ELECTION_TTL: Duration = Duration::from_secs(2);
/// How often a standby mirrors the published state, and a new coordinator checks it has.
const MIRROR_EVERY: Duration = Duration::from_millis(250);

pub struct Coordination {
    /// This console's address, as `coordinator` names it.
    me: String,
    etcd: Option<OnEtcd>,
}

struct OnEtcd {
    client: Arc<Client>,
    election: Election,
    shared: Arc<Mutex<Shared>>,
    peer_key: tokio::sync::OnceCell<String>,
}

#[derive(Default)]
struct Shared {
    /// The term whose state this console has applied (it coordinates only in that term).
    synced_term: Option<i64>,
    /// The revision of the state a standby applied last.
    mirrored: i64,
    /// What this console last published: the state's and the topology's texts.
    published: Option<(String, String)>,
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Coordination {
    /// This console coordinates alone.
    pub fn alone(me: String) -> Coordination {
        Coordination { me, etcd: None }
    }

    /// The consoles on etcd at `endpoints` elect a coordinator (`start` begins mirroring).
    pub fn on_etcd(me: String, endpoints: &[String]) -> Result<Coordination, terrace_etcd::EtcdError> {
        let client = Arc::new(Client::new(endpoints, Duration::from_secs(2))?);
        let election = Election::start(client.clone(), COORDINATOR_KEY, &me, ELECTION_TTL);
        let shared = Arc::new(Mutex::new(Shared::default()));
        Ok(Coordination { me, etcd: Some(OnEtcd { client, election, shared, peer_key: Default::default() }) })
    }

    /// Starts mirroring (with etcd): call once, with the console it belongs to.
    pub fn start(console: &Arc<crate::Console>) {
        if console.coordination.etcd.is_some() {
            tokio::spawn(mirror(console.clone()));
        }
    }

    /// Whether this console coordinates now.
    pub fn leading(&self) -> bool {
        match &self.etcd {
            None => true,
            Some(e) => e.election.leading().is_some_and(|l| lock(&e.shared).synced_term == Some(l.term)),
        }
    }

    /// Whether the coordinator is elected on etcd (and publishes there).
    pub fn on_etcd_mode(&self) -> bool {
        self.etcd.is_some()
    }

    /// The coordinating console's address, as far as this one knows (None: none now).
    pub fn coordinator(&self) -> Option<String> {
        match &self.etcd {
            None => Some(self.me.clone()),
            Some(e) => e.election.leader(),
        }
    }

    /// This console's address, as the others name it.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// The secret the consoles on this etcd share (None: alone, no peers). Whoever can read
    /// etcd can read it — and could as well rewrite the state there: the same trust.
    pub async fn peer_key(&self) -> Result<Option<String>, String> {
        let Some(e) = &self.etcd else { return Ok(None) };
        let key = e
            .peer_key
            .get_or_try_init(|| async {
                let made = crate::auth::random_hex(32);
                let absent = Compare::CreateRevision(PEER_KEY.as_bytes().to_vec(), 0);
                let put = Op::Put { key: PEER_KEY.as_bytes().to_vec(), value: made.as_bytes().to_vec(), lease: 0 };
                let get = Op::Get { key: PEER_KEY.as_bytes().to_vec() };
                let outcome = e.client.txn(&[absent], &[put], &[get]).await.map_err(|err| format!("etcd: {err}"))?;
                if outcome.succeeded {
                    return Ok(made);
                }
                let kv = outcome.gets.first().and_then(|kvs| kvs.first()).ok_or("etcd: the consoles' peer key vanished")?;
                Ok::<_, String>(String::from_utf8_lossy(&kv.value).into_owned())
            })
            .await?;
        Ok(Some(key.clone()))
    }

    /// Applies the newest published state now (a standby, after the coordinator made a
    /// change it forwarded: its next read shows it).
    pub async fn mirror_now(&self, console: &crate::Console) {
        if let Some(e) = &self.etcd {
            if e.election.leading().is_none() {
                catch_up(console, e, None).await;
            }
        }
    }

    /// Why this console does not coordinate, if it does not.
    pub fn standby_reason(&self) -> Option<String> {
        (!self.leading()).then(|| "this console stands by: it mirrors the coordinator's state from etcd and takes over if elected".to_string())
    }

    /// Publishes the shared state and the proxies' topology `document` (when either
    /// changed) in one transaction that holds only while this console's term does. Err:
    /// not published (not the coordinator, deposed, or etcd unreachable).
    pub async fn publish(&self, db: &Db, document: &str) -> Result<(), String> {
        let Some(e) = &self.etcd else { return Err("no etcd".into()) };
        if !self.leading() {
            return Err("this console does not coordinate".into());
        }
        let state = crate::shared_state::take(db).await.map_err(|err| err.to_string())?;
        let fence = {
            let shared = lock(&e.shared);
            if shared.published.as_ref().is_some_and(|(s, d)| *s == state && d == document) {
                return Ok(());
            }
            e.election.fence().ok_or("this console's term ended")?
        };
        let puts = [
            Op::Put { key: STATE_KEY.as_bytes().to_vec(), value: state.as_bytes().to_vec(), lease: 0 },
            Op::Put { key: TOPOLOGY_KEY.as_bytes().to_vec(), value: document.as_bytes().to_vec(), lease: 0 },
        ];
        let outcome = e.client.txn(&[fence], &puts, &[]).await.map_err(|err| err.to_string())?;
        if !outcome.succeeded {
            return Err("this console's term ended: nothing was published".into());
        }
        tracing::debug!(revision = outcome.revision, "etcd: state and topology published");
        lock(&e.shared).published = Some((state, document.to_string()));
        Ok(())
    }
}

/// A standby applies each state the coordinator publishes; a console just elected applies
/// the state as its term begins, and only then coordinates.
async fn mirror(console: Arc<crate::Console>) {
    let Some(e) = &console.coordination.etcd else { return };
    loop {
        let elected = e.election.leading().map(|l| l.term);
        let behind = elected.is_some_and(|term| lock(&e.shared).synced_term != Some(term));
        if elected.is_none() || behind {
            catch_up(&console, e, elected).await;
        }
        tokio::time::sleep(MIRROR_EVERY).await;
    }
}

/// Applies the published state — a standby's when it is newer than the one it applied, a
/// console elected in term `elected` whatever it is — and marks that term's state applied.
async fn catch_up(console: &crate::Console, e: &OnEtcd, elected: Option<i64>) {
    let kv = match e.client.get(STATE_KEY.as_bytes()).await {
        Ok((kv, _)) => kv,
        Err(err) => return tracing::debug!(error = %err, "etcd: cannot read the published state"),
    };
    let fresh = kv.filter(|kv| elected.is_some() || kv.mod_revision != lock(&e.shared).mirrored);
    if let Some(kv) = &fresh {
        if let Err(err) = crate::shared_state::apply(&console.db, &String::from_utf8_lossy(&kv.value)).await {
            return tracing::error!(error = %err, "etcd: the published state could not be applied");
        }
    }
    let mut shared = lock(&e.shared);
    if let Some(kv) = &fresh {
        shared.mirrored = kv.mod_revision;
    }
    if let Some(term) = elected {
        // (Its own state stands when none was ever published: the first coordinator's.)
        shared.synced_term = Some(term);
        shared.published = None;
        tracing::info!(term, revision = shared.mirrored, "coordinating from the published state");
        console.wake.notify_one();
    }
}
