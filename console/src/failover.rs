//! The coordinator: keeps every engine's replicas following it and replaces a primary that
//! fails. Every `health_ms` it checks each primary of the slot map (INFO over a connection
//! with short timeouts) and each replica (`ROLE`-like fields of INFO replication). A primary
//! unreachable for `failover_after_ms`, one that answers with a new `run_id` (it
//! restarted, possibly without its data, faster than that), or one that restarted fenced and
//! waits for its role (`terrace_waiting_for_role`: also when no coordinator saw it go, the
//! console having been down) is replaced by its replica with
//! the highest replication offset. The old primary's lease is revoked (or outlived) first;
//! then the decision — the group's next term and the replica in the slot map, the old
//! primary listed as its replica — is recorded in one transaction and published (in etcd,
//! or pushed to every proxy) before it is carried out (the term given to the replica, then
//! `REPLICAOF NO ONE`): a coordinator that stops between the two leaves a published map
//! whose primary follows its group's old primary, and the next check carries it out. The
//! other replicas, and the old primary when it answers again, are re-pointed at the new
//! primary once it serves. Every step is an event in the database (`events`), which the
//! console shows.
//!
//! Primary terms: each slot-map engine has an epoch in the database. Every primary is given
//! its range's term (`TERRACE.EPOCH range-<idx> <epoch>`) when it lacks it; a failover takes
//! the next epoch with its decision and gives it to the replica before `REPLICAOF NO ONE`, which raises
//! the range's fence in the storage tier: a former primary, even one that was only paused,
//! can no longer write storage (its writes are refused, and it stops taking them).
//!
//! While the console is down nothing fails over; the data path does not depend on it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db;
use crate::nodes::Node;
use crate::Console;
use terrace_commands::credentials::EngineAuth;

/// How long one check of a node may take (connect and reply each).
const PROBE: Duration = Duration::from_millis(400);

/// What the coordinator last saw of a primary.
struct Seen {
    address: String,
    last_ok: Instant,
    run_id: Option<String>,
}

/// One engine of the topology as the coordinator last saw it (the Topology page and API).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Member {
    pub address: String,
    /// The slot map's engine it serves or follows.
    pub engine: usize,
    /// `primary` or `replica`.
    pub role: &'static str,
    pub up: bool,
    /// Its replication offset (-1: unknown).
    pub offset: i64,
    /// A replica: its link to the primary is up.
    pub linked: bool,
    /// A replica: bytes behind its primary (None: unknown).
    pub lag: Option<i64>,
}

/// What a node answered.
struct Probe {
    run_id: String,
    /// `role:slave`: (master host, master port, link up).
    following: Option<(String, u16, bool)>,
    /// The replication offset it reached (a replica's `slave_repl_offset`, a master's own).
    offset: i64,
    /// The primary term it holds (`terrace_term_group`, `terrace_term_epoch`).
    term: Option<(String, u64)>,
    /// It restarted fenced and waits for the coordinator to give it a role
    /// (`terrace_waiting_for_role`): it serves nothing until then.
    waiting: bool,
    /// It holds a term lease (`terrace_term_lease_ms`).
    leased: bool,
    /// It answered, but only that it is occupied (BUSY, LOADING): alive, nothing else known.
    busy: bool,
}

impl Probe {
    fn busy() -> Probe {
        Probe { run_id: String::new(), following: None, offset: -1, term: None, waiting: false, leased: false, busy: true }
    }
}

/// Whether the engine at `address` serves as a primary now, by the health check: it
/// answers (not only BUSY or LOADING), follows no master, and does not wait for its role.
pub(crate) async fn serves_as_primary(address: &str, auth: &EngineAuth) -> bool {
    probe(address, auth).await.is_some_and(|p| !p.busy && p.following.is_none() && !p.waiting)
}

/// Gives engine `address` the term `term`, with a lease until `lease` (unix ms; 0 revokes
/// it) or none.
pub(crate) async fn give_term(address: &str, auth: &EngineAuth, term: &db::Term, lease: Option<i64>) -> Result<(), String> {
    let mut n = Node::engine_bounded(address, auth, PROBE).await.map_err(|e| e.to_string())?;
    let epoch = term.epoch.to_string();
    let until = lease.map(|l| l.to_string());
    let mut args = vec!["TERRACE.EPOCH", &term.group, &epoch];
    if let Some(until) = &until {
        args.extend(["LEASE", until.as_str()]);
    }
    n.run::<String>(&args).await.map(|_| ()).map_err(|e| e.to_string())
}

/// What a node answers the health check: the server and replication sections alone, which
/// visit no shard (a snapshot holding every shard, a tenant's script holding its own, must
/// not make a live primary look dead). A node that answers BUSY or LOADING is alive.
async fn probe(address: &str, auth: &EngineAuth) -> Option<Probe> {
    let mut n = Node::engine_bounded(address, auth, PROBE).await.ok()?;
    let info = match n.run::<String>(&["INFO", "server", "replication"]).await {
        Ok(text) => crate::nodes::parse_info(&text),
        Err(e) if e.answered_busy() => return Some(Probe::busy()),
        Err(_) => return None,
    };
    let following = (info.get("role").map(String::as_str) == Some("slave")).then(|| {
        let host = info.get("master_host").cloned().unwrap_or_default();
        let port = info.get("master_port").and_then(|p| p.parse().ok()).unwrap_or(0);
        (host, port, info.get("master_link_status").map(String::as_str) == Some("up"))
    });
    let offset = if following.is_some() { info.get("slave_repl_offset") } else { info.get("master_repl_offset") };
    let term = info.get("terrace_term_group").cloned().zip(info.get("terrace_term_epoch").and_then(|e| e.parse().ok()));
    let waiting = info.get("terrace_waiting_for_role").is_some_and(|w| w == "1");
    let leased = info.contains_key("terrace_term_lease_ms");
    Some(Probe {
        run_id: info.get("run_id").cloned().unwrap_or_default(),
        following,
        offset: offset.and_then(|o| o.parse().ok()).unwrap_or(-1),
        term,
        waiting,
        leased,
        busy: false,
    })
}

/// Records an event (and logs it).
pub(crate) async fn event(console: &Console, kind: &str, message: String) {
    tracing::warn!(kind, "{message}");
    if let Err(e) = db::add_event(&console.db, kind, &message).await {
        tracing::error!(error = %e, "cannot record an event");
    }
}

/// Checks the slot map's engines and replicas every `health_ms`, failing over as needed.
pub async fn run(console: Arc<Console>) {
    let mut seen: HashMap<usize, Seen> = HashMap::new();
    loop {
        if !console.coordination.leading() {
            // (What it saw as a standby is stale once it coordinates.)
            seen.clear();
        } else if let Err(e) = tick(&console, &mut seen).await {
            tracing::warn!(error = %e, "coordinator");
        }
        tokio::time::sleep(console.config.health).await;
    }
}

async fn tick(console: &Console, seen: &mut HashMap<usize, Seen>) -> Result<(), db::DbError> {
    let _one_at_a_time = console.coordinating.lock().await;
    let (mut engines, _) = db::topology(&console.db).await?;
    let mut replicas = db::replicas(&console.db).await?;
    let mut failed_over = false;
    if replicas.is_empty() {
        console.state.lock().members = Vec::new();
        return Ok(());
    }
    let mut members = Vec::new();
    let auth = &console.config.engine_auth;
    let terms = db::terms(&console.db).await?;
    for (idx, address) in engines.iter().enumerate() {
        let mine: Vec<String> = replicas.iter().filter(|(_, e)| *e == idx).map(|(a, _)| a.clone()).collect();
        let entry = seen.entry(idx).or_insert_with(|| Seen { address: address.clone(), last_ok: Instant::now(), run_id: None });
        if entry.address != *address {
            *entry = Seen { address: address.clone(), last_ok: Instant::now(), run_id: None };
        }
        let probed = probe(address, auth).await;
        members.push(Member {
            address: address.clone(),
            engine: idx,
            role: "primary",
            up: probed.is_some(),
            offset: probed.as_ref().map_or(-1, |p| p.offset),
            linked: false,
            lag: None,
        });
        let why = match probed {
            Some(p) if p.busy => {
                // Alive, and occupied: not failed.
                entry.last_ok = Instant::now();
                continue;
            }
            Some(p) if p.following.is_none() && p.waiting => {
                // It restarted while no coordinator watched (this console was down, or is
                // new): the restart this console did not see is a restart all the same.
                entry.last_ok = Instant::now();
                entry.run_id = Some(p.run_id);
                "restarted and waits for its role".to_string()
            }
            Some(p) if p.following.is_none() => {
                entry.last_ok = Instant::now();
                // (A replicated primary gets its term with its lease, from the lease loop;
                // one without replicas gets no lease, or loses the one it had.)
                if let Some(term) = terms.get(idx).filter(|t| mine.is_empty() && (p.term.as_ref() != Some(&(t.group.clone(), t.epoch)) || p.leased)) {
                    match give_term(address, auth, term, None).await {
                        Ok(()) => tracing::info!(engine = idx, %address, epoch = term.epoch, "primary given its term"),
                        Err(e) => tracing::warn!(engine = idx, %address, epoch = term.epoch, error = %e, "cannot give a primary its term"),
                    }
                }
                let restarted = entry.run_id.as_ref().is_some_and(|r| *r != p.run_id);
                entry.run_id = Some(p.run_id);
                if !restarted {
                    continue;
                }
                "restarted (a new run_id: its data may be gone)".to_string()
            }
            Some(p) => {
                entry.last_ok = Instant::now();
                // The map's primary follows one of its group's replicas: a failover decided
                // and published whose coordinator stopped (or whose replica did not answer)
                // before carrying it out. It is carried out now.
                let unfinished = p.following.as_ref().is_some_and(|(host, port, _)| mine.iter().any(|r| *r == format!("{host}:{port}")));
                if let Some(term) = terms.get(idx).filter(|_| unfinished) {
                    match carry_out(console, address, term).await {
                        Ok(()) => {
                            event(
                                console,
                                "failover",
                                format!("engine {idx}: {address}, its primary by a failover decided earlier (epoch {}), promoted now", term.epoch),
                            )
                            .await;
                            failed_over = true;
                        }
                        Err(e) => tracing::warn!(engine = idx, %address, error = %e, "cannot carry out a decided failover"),
                    }
                }
                // (Otherwise a primary that follows someone is an operator's REPLICAOF: not failed.)
                continue;
            }
            None if entry.last_ok.elapsed() >= console.config.failover_after => format!("unreachable for {} ms", entry.last_ok.elapsed().as_millis()),
            None => continue,
        };
        let restarted = why.starts_with("restarted");
        if !mine.is_empty() && failover(console, idx, address, &mine, &why).await? {
            if !console.coordination.leading() {
                return Ok(());
            }
            failed_over = true;
            seen.remove(&idx);
        } else if restarted {
            // Nothing to fail over to: the restarted primary serves again (if it came back
            // fenced, waiting for its role) with what it has.
            if let Ok(mut n) = Node::engine_bounded(address, auth, PROBE).await {
                if n.run::<String>(&["REPLICAOF", "NO", "ONE"]).await.is_ok() {
                    event(
                        console,
                        "primary",
                        format!("engine {idx} ({address}) restarted with no replica to take over: it serves again, with the data it has"),
                    )
                    .await;
                }
            }
        }
    }
    // Replicas follow their primary (after a failover: the new one; the old primary, when
    // it answers again, too).
    if failed_over {
        (engines, _) = db::topology(&console.db).await?;
        replicas = db::replicas(&console.db).await?;
    }
    for (address, idx) in replicas {
        let Some(primary) = engines.get(idx) else { continue };
        let probed = probe(&address, auth).await;
        let primary_offset = members.iter().find(|m| m.engine == idx && m.role == "primary" && m.offset >= 0).map(|m| m.offset);
        members.push(Member {
            address: address.clone(),
            engine: idx,
            role: "replica",
            up: probed.is_some(),
            offset: probed.as_ref().map_or(-1, |p| p.offset),
            linked: probed.as_ref().is_some_and(|p| p.following.as_ref().is_some_and(|f| f.2)),
            lag: probed.as_ref().filter(|p| p.offset >= 0).and_then(|p| primary_offset.map(|o| (o - p.offset).max(0))),
        });
        // (A replica that answered only BUSY is left as it is.)
        let Some(p) = probed.filter(|p| !p.busy) else { continue };
        let Some((host, port)) = primary.rsplit_once(':').and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?))) else { continue };
        if p.following.as_ref().is_some_and(|(h, pt, _)| *h == host && *pt == port) {
            continue;
        }
        // (Not at a decided primary that does not serve yet: the old primary would follow
        // its own follower.)
        if !serves_as_primary(primary, auth).await {
            continue;
        }
        let Ok(mut n) = Node::engine_bounded(&address, auth, PROBE).await else { continue };
        // (The primary's own password: with per-engine passwords, not the replica's.)
        if let Some(p) = auth.password_for(primary) {
            if let Err(e) = n.run::<()>(&["CONFIG", "SET", "masterauth", &p]).await {
                tracing::warn!(replica = %address, error = %e, "cannot give a replica its primary's password");
                continue;
            }
        }
        match n.run::<String>(&["REPLICAOF", &host, &port.to_string()]).await {
            Ok(_) => event(console, "replica", format!("{address} now follows {primary} (engine {idx})")).await,
            Err(e) => tracing::warn!(replica = %address, error = %e, "cannot point a replica at its primary"),
        }
    }
    console.state.lock().members = members;
    Ok(())
}

/// An operator's failover (API, page): waits for the coordinator's round in progress, if
/// any, so the two never act on each other's half-done state.
pub async fn planned_failover(console: &Console, idx: usize, old: &str, replicas: &[String]) -> Result<bool, db::DbError> {
    let _one_at_a_time = console.coordinating.lock().await;
    failover(console, idx, old, replicas, "failed over by the operator").await
}

/// Replaces primary `idx` (at `old`) by the reachable replica with the highest offset:
/// true once that is decided and published (the map changed; a replica that did not take
/// over at once is promoted at the next check), false when none could be chosen (tried
/// again at the next check).
pub async fn failover(console: &Console, idx: usize, old: &str, replicas: &[String], why: &str) -> Result<bool, db::DbError> {
    let auth = &console.config.engine_auth;
    let mut best: Option<(String, i64)> = None;
    for r in replicas {
        // (Not one that restarted and waits for its role: it takes no term before a
        // REPLICAOF, and holds only what its own log kept.)
        if let Some(p) = probe(r, auth).await.filter(|p| !p.busy && !p.waiting) {
            if best.as_ref().is_none_or(|(_, o)| p.offset > *o) {
                best = Some((r.clone(), p.offset));
            }
        }
    }
    let Some((new, offset)) = best else {
        event(console, "failover-blocked", format!("engine {idx} ({old}) {why}: no replica answers, nothing to promote")).await;
        return Ok(false);
    };
    // The old primary's term ends first: no more renewals of its lease, and the replica is
    // promoted only once that lease has surely run out — at once if the old primary
    // answers its revocation, else when the last lease given to it ends.
    let held = console.leases.freeze(old);
    let current = db::terms(&console.db).await?.get(idx).cloned();
    let revoked = match &current {
        Some(term) => give_term(old, auth, term, Some(0)).await.is_ok(),
        None => false,
    };
    if !revoked {
        crate::lease::Leases::outlive(held).await;
    }
    // The decision — the next term, and `new` in the map — is recorded and published before
    // it is carried out: proxies route to `new` from then on (it answers READONLY until it
    // is promoted, a moment later), and a coordinator that stops in between leaves a
    // published map whose primary still follows its group's old primary, which the next
    // coordinator's check promotes (`tick`). Nothing routes to a promoted replica that the
    // published map does not name.
    let term = db::decide_failover(&console.db, idx, old, &new).await?;
    let epoch = term.epoch;
    // (The proxies get the map now — with etcd: it is published there — and not at the
    // next reconcile pass, which may be waiting out the old primary's timeouts.)
    for e in crate::reconcile::push_proxies(console).await {
        tracing::warn!(error = %e, "publishing a failover's decision");
    }
    // (Renewals go to the map's primaries alone; should it be promoted again, it gets a
    // new term.)
    console.leases.thaw(old);
    if !console.coordination.leading() {
        // Another console coordinates now; its state, mirrored here, replaces this decision
        // unless it was published, and then that console carries it out.
        return Ok(true);
    }
    if let Err(e) = carry_out(console, &new, &term).await {
        // (Tried again at the next check, as a decided failover.)
        event(console, "failover-blocked", format!("engine {idx} ({old}) {why}: {new} is its primary (epoch {epoch}) but did not take over yet: {e}")).await;
        console.wake.notify_one();
        return Ok(true);
    }
    event(console, "failover", format!("engine {idx}: {old} {why}; {new} promoted (replication offset {offset}, epoch {epoch}); {old} becomes its replica"))
        .await;
    console.wake.notify_one();
    Ok(true)
}

/// Carries out a failover decided for `new` with `term`: the term first (the fence in
/// storage is raised before the replica takes writes, and its lease lets it take them at
/// once), then `REPLICAOF NO ONE`.
async fn carry_out(console: &Console, new: &str, term: &db::Term) -> Result<(), String> {
    let auth = &console.config.engine_auth;
    give_term(new, auth, term, Some(console.leases.grant_new(new))).await.map_err(|e| format!("could not take epoch {}: {e}", term.epoch))?;
    let mut n = Node::engine_bounded(new, auth, PROBE).await.map_err(|e| e.to_string())?;
    n.run::<String>(&["REPLICAOF", "NO", "ONE"]).await.map(drop).map_err(|e| format!("refused REPLICAOF NO ONE: {e}"))
}
