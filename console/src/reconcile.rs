//! The reconcile loop: the console's database is the truth for tenants and the slot map; this
//! loop makes every proxy and engine agree with it, and re-pushes within one interval when one
//! of them restarts. A proxy is checked by the digest of the document it was given
//! (`TERRACE.TOPOLOGY GET`); an engine by its `run_id` (a restarted engine has a new one) and
//! the digest of the tenants it was given, and is sent only the tenants whose settings it
//! has not taken yet, many to a round trip. Each pass also reads the nodes' health for the
//! Overview (the history samples on a loop of its own: `history`).

use std::collections::HashMap;

use serde::Serialize;

use crate::db;
use crate::nodes::{Node, NodeError};
use crate::tenants::{sha256_hex, Tenant};
use crate::Console;
use terrace_commands::credentials::EngineAuth;

/// What the console last saw of one proxy or engine.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeStatus {
    pub address: String,
    pub kind: &'static str,
    pub up: bool,
    /// Whether it holds the console's current topology and tenants.
    pub in_sync: bool,
    /// The last failure talking to it or applying to it.
    pub error: Option<String>,
    /// What it refused of the console's state (an engine without a storage tier refusing a
    /// storage mode, a proxy refusing a port): not a node being down, a setting that cannot be.
    #[serde(skip)]
    pub refused: Vec<String>,
    pub checked_at: i64,
    pub pushed_at: Option<i64>,
    pub run_id: Option<String>,
    pub used_memory: Option<u64>,
    /// An engine's `maxmemory` (0: none).
    pub maxmemory: Option<u64>,
    pub pmem_bytes: Option<u64>,
    pub ops_per_sec: Option<u64>,
    pub hits: Option<u64>,
    pub misses: Option<u64>,
    pub clients: Option<u64>,
    /// What of its data survives a restart (`durability`).
    pub durability: Option<String>,
}

/// What of an engine's data survives a restart, in a line for the Overview: from its WAL mode
/// (INFO's `wal_mode`, None: no WAL), its save points (`CONFIG GET save`), and the snapshots
/// it wrote since it started (INFO persistence's `rdb_saves`, `rdb_last_save_time` and
/// `rdb_changes_since_last_save`), at `now` (Unix seconds).
pub fn durability(wal_mode: Option<&str>, save_points: &str, saved: Option<(i64, u64)>, now: i64) -> String {
    let snapshot = match saved {
        Some((at, changes)) => format!("last snapshot {} ago, {changes} changes since", ago(now - at)),
        None => "no snapshot since it started".to_string(),
    };
    match wal_mode.filter(|m| *m != "off") {
        Some(m @ ("always" | "pmem")) => format!("every acknowledged write, even after a crash (WAL {m}); {snapshot}"),
        Some(m) => format!("every acknowledged write after an engine crash; after a power loss, all but the last second's (WAL {m}); {snapshot}"),
        None if !save_points.trim().is_empty() => {
            format!("the newest state after a clean stop; after a crash, the last snapshot (save points \"{}\"); {snapshot}", save_points.trim())
        }
        None if saved.is_some() => format!("the last snapshot only (no save points, no WAL); {snapshot}"),
        None => "nothing newer than a snapshot from before it started, if any (no WAL, no save points)".to_string(),
    }
}

fn ago(seconds: i64) -> String {
    match seconds.max(0) {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}

impl NodeStatus {
    pub fn hit_ratio(&self) -> Option<f64> {
        let (h, m) = (self.hits?, self.misses?);
        (h + m > 0).then(|| h as f64 / (h + m) as f64)
    }
}

/// What an engine took: in its run `run_id`, every tenant's settings (TERRACE.NAMESPACE's
/// arguments) — all of the desired state `digest` when nothing was refused (None then).
#[derive(Debug, Clone, Default)]
struct Pushed {
    run_id: String,
    digest: Option<String>,
    tenants: HashMap<String, Vec<String>>,
}

/// How many TERRACE.NAMESPACE commands go in one round trip.
const PUSH_BATCH: usize = 256;

#[derive(Default)]
pub struct State {
    pub proxies: Vec<NodeStatus>,
    pub engines: Vec<NodeStatus>,
    /// The replication topology as the coordinator last saw it.
    pub members: Vec<crate::failover::Member>,
    /// Per engine address: what it last took.
    pushed: HashMap<String, Pushed>,
}

/// What the console wants every node to hold, and its digest.
pub struct Desired {
    pub engines: Vec<String>,
    pub tenants: Vec<Tenant>,
    /// Deleted tenants: a primary engine still holding one's namespace drops it.
    pub dropped: Vec<String>,
    pub document: String,
    pub digest: String,
}

/// `members`: the replication topology as the coordinator last saw it — a replica is given
/// to the proxies (for tenants' `replica_reads`) only while it is up and linked to its
/// primary, so a replica still syncing, or an old primary that came back empty and is not
/// following yet, never serves reads.
pub async fn desired(db: &db::Db, members: &[crate::failover::Member]) -> Result<Desired, db::DbError> {
    let (engines, ranges) = db::topology(db).await?;
    let mut replicas: Vec<Vec<String>> = vec![Vec::new(); engines.len()];
    for m in members {
        if m.role == "replica" && m.up && m.linked && m.engine < engines.len() {
            replicas[m.engine].push(m.address.clone());
        }
    }
    while replicas.last().is_some_and(Vec::is_empty) {
        replicas.pop();
    }
    let tenants = db::tenants(db).await?;
    // The proxies, as cluster-mode clients are shown them (the addresses the console reaches
    // them at: give it addresses clients can reach too).
    let proxies = db::proxies(db).await?;
    let document = serde_json::json!({
        "engines": engines,
        "proxies": proxies,
        "replicas": replicas,
        "slots": ranges.iter().map(|(f, l, e)| serde_json::json!({"engine": e, "range": format!("{f}-{l}")})).collect::<Vec<_>>(),
        "tenants": tenants.iter().map(Tenant::proxy_entry).collect::<Vec<_>>(),
    })
    .to_string();
    let digest = sha256_hex(document.as_bytes());
    let dropped = db::dropped_tenants(db).await?;
    Ok(Desired { engines, tenants, dropped, document, digest })
}

/// What a pass met: every problem, and among them what nodes refused.
#[derive(Debug, Default)]
pub struct Outcome {
    pub errors: Vec<String>,
    pub refused: Vec<String>,
}

/// One pass over every node (empty errors: everything holds the console's state).
pub async fn pass(console: &Console) -> Outcome {
    // (A console that does not coordinate changes nothing: the coordinator does.)
    if !console.coordination.leading() {
        return Outcome { errors: vec!["this console does not coordinate now".into()], refused: Vec::new() };
    }
    // The proxies' part holds `pass_lock`, as `push_proxies` does, so that no map read
    // before a change is pushed after it. The engines' part (tenants' settings), which
    // waits out every engine that does not answer, holds a lock of its own: a failover's
    // push of the new map does not wait behind a paused primary's timeouts.
    let (want, mut errors, mut refused, proxy_status) = {
        let _one_at_a_time = console.pass_lock.lock().await;
        let members = console.state.lock().members.clone();
        let want = match desired(&console.db, &members).await {
            Ok(d) => d,
            Err(e) => return Outcome { errors: vec![e.to_string()], refused: Vec::new() },
        };
        let proxies = db::proxies(&console.db).await.unwrap_or_default();
        let (mut errors, mut refused, mut proxy_status) = (Vec::new(), Vec::new(), Vec::new());
        if console.coordination.on_etcd_mode() {
            if let Err(e) = console.coordination.publish(&console.db, &want.document).await {
                errors.push(format!("etcd: {e}"));
            }
        }
        for addr in &proxies {
            let s = check_proxy(console, addr, &want).await;
            errors.extend(s.error.iter().map(|e| format!("proxy {addr}: {e}")));
            refused.extend(s.refused.iter().map(|e| format!("proxy {addr}: {e}")));
            proxy_status.push(s);
        }
        (want, errors, refused, proxy_status)
    };
    let _one_at_a_time = console.engines_pass_lock.lock().await;
    let mut engine_status = Vec::new();
    // Replicas get the tenants' settings too: promoted, they serve with them.
    let replicas: Vec<String> = db::replicas(&console.db).await.unwrap_or_default().into_iter().map(|(a, _)| a).collect();
    for addr in want.engines.iter().chain(&replicas) {
        let last = console.state.lock().pushed.get(addr).cloned();
        let before = last.as_ref().map(|l| l.run_id.clone());
        let (s, pushed) = check_engine(addr, &console.config.engine_auth, &want, last).await;
        if let (Some(was), Some(now)) = (before, s.run_id.as_ref()) {
            if !was.is_empty() && was != *now {
                let _ = db::add_event(&console.db, "restart", &format!("engine {addr} restarted (run ID {was} → {now})")).await;
            }
        }
        errors.extend(s.error.iter().map(|e| format!("engine {addr}: {e}")));
        refused.extend(s.refused.iter().map(|e| format!("engine {addr}: {e}")));
        if let Some(p) = pushed {
            console.state.lock().pushed.insert(addr.clone(), p);
        }
        engine_status.push(s);
    }
    {
        let mut st = console.state.lock();
        st.proxies = proxy_status;
        st.engines = engine_status;
    }
    Outcome { errors, refused }
}

/// With etcd: publishes the shared state and the proxies' topology now (a change an API
/// call made is in etcd before the call answers). Err: not published.
pub async fn publish_now(console: &Console) -> Result<(), String> {
    let _one_at_a_time = console.pass_lock.lock().await;
    let members = console.state.lock().members.clone();
    let want = desired(&console.db, &members).await.map_err(|e| e.to_string())?;
    console.coordination.publish(&console.db, &want.document).await
}

/// Pushes the topology to every proxy at once, nothing else (a slot move's switch: its
/// pause lasts until the proxies have the new map). Answers what failed; the reconcile loop
/// tries those again within one interval.
pub async fn push_proxies(console: &Console) -> Vec<String> {
    if console.coordination.on_etcd_mode() {
        // (The proxies watch it there.)
        return publish_now(console).await.err().map(|e| format!("etcd: {e}")).into_iter().collect();
    }
    let _one_at_a_time = console.pass_lock.lock().await;
    let members = console.state.lock().members.clone();
    let want = match desired(&console.db, &members).await {
        Ok(d) => d,
        Err(e) => return vec![e.to_string()],
    };
    // (All at once: during a move, the held requests of each proxy wait for its push.)
    let proxies = db::proxies(&console.db).await.unwrap_or_default();
    let want = &want;
    let pushes = proxies.iter().map(|addr| async move {
        let pushed = async {
            let mut n = Node::proxy(addr, console.config.proxy_admin_password.as_deref()).await?;
            n.run::<String>(&["TERRACE.TOPOLOGY", "SET", &want.document]).await
        };
        pushed.await.err().map(|e| format!("proxy {addr}: {e}"))
    });
    futures_util::future::join_all(pushes).await.into_iter().flatten().collect()
}

async fn check_proxy(console: &Console, addr: &str, want: &Desired) -> NodeStatus {
    let mut s = NodeStatus { address: addr.into(), kind: "proxy", checked_at: db::now(), ..Default::default() };
    let result: Result<(), NodeError> = async {
        let mut n = Node::proxy(addr, console.config.proxy_admin_password.as_deref()).await?;
        s.up = true;
        let info = n.info("all").await?;
        s.ops_per_sec = info.get("instantaneous_ops_per_sec").and_then(|v| v.parse().ok());
        s.clients = info.get("connected_clients").and_then(|v| v.parse().ok());
        s.run_id = info.get("run_id").cloned();
        let current = n.json(&["TERRACE.TOPOLOGY", "GET"]).await?;
        if current["digest"].as_str() != Some(want.digest.as_str()) {
            if console.coordination.on_etcd_mode() {
                // It takes the topology from etcd: not in sync until its watch brings it.
                return Ok(());
            }
            if let Err(e) = n.run::<String>(&["TERRACE.TOPOLOGY", "SET", &want.document]).await {
                s.refused.push(e.to_string());
                return Err(e);
            }
            s.pushed_at = Some(db::now());
            tracing::info!(proxy = addr, digest = %want.digest, "pushed the topology");
        }
        s.in_sync = true;
        Ok(())
    }
    .await;
    if let Err(e) = result {
        s.error = Some(e.to_string());
    }
    s
}

/// Checks one engine and pushes the tenants' settings when it restarted or they changed.
/// Answers its status and, when it pushed, what it pushed for.
async fn check_engine(addr: &str, auth: &EngineAuth, want: &Desired, last: Option<Pushed>) -> (NodeStatus, Option<Pushed>) {
    let mut s = NodeStatus { address: addr.into(), kind: "engine", checked_at: db::now(), ..Default::default() };
    let mut pushed = None;
    let result: Result<(), NodeError> = async {
        let mut n = Node::engine(addr, auth).await?;
        s.up = true;
        let info = n.info("all").await?;
        let num = |k: &str| info.get(k).and_then(|v| v.parse::<u64>().ok());
        s.run_id = info.get("run_id").cloned();
        s.used_memory = num("used_memory");
        s.maxmemory = num("maxmemory");
        s.pmem_bytes = num("pmem_allocated_bytes");
        s.ops_per_sec = num("instantaneous_ops_per_sec");
        s.hits = num("keyspace_hits");
        s.misses = num("keyspace_misses");
        s.clients = num("connected_clients");
        let save: Vec<String> = n.run(&["CONFIG", "GET", "save"]).await.unwrap_or_default();
        s.durability = Some(durability(
            info.get("wal_mode").map(String::as_str),
            save.get(1).map_or("", String::as_str),
            num("rdb_saves").filter(|n| *n > 0).and(num("rdb_last_save_time")).map(|t| (t as i64, num("rdb_changes_since_last_save").unwrap_or(0))),
            db::now(),
        ));
        let run_id = s.run_id.clone().unwrap_or_default();
        // What this run of the engine took before (nothing, if it restarted); a tenant no
        // longer wanted is forgotten (made again, it is pushed again).
        let mut took = last.filter(|l| l.run_id == run_id).unwrap_or_default();
        if took.digest.as_deref() == Some(want.digest.as_str()) {
            s.in_sync = true;
            return Ok(());
        }
        took.run_id = run_id;
        took.tenants.retain(|name, _| want.tenants.iter().any(|t| t.name == *name));
        // Only the tenants whose settings changed, many to a round trip: with a thousand
        // tenants, one round trip for each of them on every change made a tenant's creation
        // take half a second.
        let changed: Vec<(&str, Vec<String>)> = want
            .tenants
            .iter()
            .map(|t| (t.name.as_str(), t.namespace_args(want.engines.len())))
            .filter(|(name, args)| took.tenants.get(*name) != Some(args))
            .collect();
        let mut refused = Vec::new();
        for batch in changed.chunks(PUSH_BATCH) {
            let commands: Vec<Vec<Vec<u8>>> = batch
                .iter()
                .map(|(_, args)| std::iter::once(b"TERRACE.NAMESPACE".to_vec()).chain(args.iter().map(|a| a.as_bytes().to_vec())).collect())
                .collect();
            for ((name, args), reply) in batch.iter().zip(n.pipeline_each::<()>(&commands).await?) {
                match reply {
                    Ok(()) => {
                        took.tenants.insert(name.to_string(), args.clone());
                    }
                    Err(e) => refused.push(format!("tenant '{name}': {e}")),
                }
            }
        }
        // A tenant deleted while this engine was down (or a replica, since promoted) still
        // has its namespace here: dropped now (a replica follows its primary's drop).
        let mut not_dropped = Vec::new();
        if info.get("role").map(String::as_str) == Some("master") && !want.dropped.is_empty() {
            let held: Vec<String> = n.run(&["TERRACE.NAMESPACES"]).await?;
            for gone in held.iter().filter(|h| want.dropped.contains(h)) {
                match n.run::<i64>(&["TERRACE.DROPNAMESPACE", gone]).await {
                    Ok(_) => tracing::info!(engine = addr, tenant = %gone, "dropped a deleted tenant's namespace"),
                    Err(e) => not_dropped.push(format!("deleted tenant '{gone}': namespace not dropped: {e}")),
                }
            }
        }
        // Only a state the engine took is remembered as pushed: a refused one must be tried
        // (and refused) again by the next pass, which may be the one a request waits on.
        // (A namespace not dropped is no refusal of the tenants pushed, but is tried again.)
        took.digest = (refused.is_empty() && not_dropped.is_empty()).then(|| want.digest.clone());
        pushed = Some(took);
        s.pushed_at = Some(db::now());
        s.in_sync = refused.is_empty() && not_dropped.is_empty();
        if !s.in_sync {
            s.error = Some(refused.iter().chain(&not_dropped).cloned().collect::<Vec<_>>().join("; "));
        }
        s.refused = refused;
        tracing::info!(engine = addr, tenants = want.tenants.len(), changed = changed.len(), "pushed the tenants' settings");
        Ok(())
    }
    .await;
    if let Err(e) = result {
        s.error = Some(e.to_string());
    }
    (s, pushed)
}

/// Sums each tenant's keys, bytes and QPS over the engines into a usage sample.
/// Runs passes every `interval`, and at once when woken (a tenant changed).
pub async fn run(console: std::sync::Arc<Console>) {
    loop {
        let outcome = pass(&console).await;
        for e in outcome.errors {
            tracing::debug!(error = %e, "reconcile");
        }
        tokio::select! {
            _ = tokio::time::sleep(console.config.reconcile) => {}
            _ = console.wake.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::durability;

    #[test]
    fn durability_says_what_survives_a_restart() {
        let now = 10_000;
        assert_eq!(durability(None, "", None, now), "nothing newer than a snapshot from before it started, if any (no WAL, no save points)");
        let s = durability(None, "3600 1 300 100", Some((now - 90, 7)), now);
        assert!(s.starts_with("the newest state after a clean stop; after a crash, the last snapshot"), "{s}");
        assert!(s.ends_with("last snapshot 90 s ago, 7 changes since"), "{s}");
        assert!(
            durability(Some("always"), "", None, now).starts_with("every acknowledged write, even after a crash (WAL always); no snapshot since it started")
        );
        assert!(durability(Some("file"), "", Some((now - 7200, 0)), now)
            .contains("after a power loss, all but the last second's (WAL file); last snapshot 2 h ago"));
        assert!(durability(Some("off"), "", Some((now - 60, 0)), now).starts_with("the last snapshot only"));
    }
}
