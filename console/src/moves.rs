//! Growing and shrinking online: plans that spread the slots evenly over the engines (a
//! rebalance, or a drain that empties one), and the driver that carries out the queued
//! moves one at a time, each step an event.
//!
//! One move of a slot set from a source engine to a target:
//! 1. `TERRACE.MIGRATE START` on the source: it purges the target's copy of the slots,
//!    copies their keys, and catches up on the writes made meanwhile, until it is `ready`.
//! 2. Every proxy holds the slots (`TERRACE.TOPOLOGY HOLD`): their requests wait in the
//!    proxy, and each proxy answers once nothing it sent for them is still on its way.
//! 3. `TERRACE.MIGRATE SEAL`: the source refuses the slots, sends the last changes and
//!    flushes their write-back keys; `handed-over`.
//! 4. The slot map is changed in the database (with the move's state, in one transaction)
//!    and pushed to every proxy: the map that moves the slots releases them there, and the
//!    held requests go to the target. The pause lasts from 2 to here.
//! 5. `TERRACE.MIGRATE FINISH`: the source deletes the slots' keys in the background.
//!
//! A failure before 4 (or a source that lost its job: it restarted) undoes the attempt —
//! ABORT on the source (the slots are its own again), RELEASE on the proxies — and the move
//! is tried again, up to `ATTEMPTS` times. After 4 the target owns the slots: a console
//! restarted there goes on from 5.
//!
//! A move names groups (a primary and its replicas), not addresses: each attempt, and each
//! step of 5, works with the group's primary of the moment. An attempt cut by a failover of
//! either side is undone on the engine it ran on and tried again on the new primary without
//! counting against `ATTEMPTS` (up to `RUNS` in all); after 4, the promoted replica of the
//! source group (which has the slots' keys by replication, not the job) purges them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use terrace_commands::slots::{SlotSet, SLOTS};

use crate::db::{self, SlotMove};
use crate::nodes::Node;
use crate::Console;

/// Tries of one move before it is marked failed.
const ATTEMPTS: i64 = 3;
/// Attempts of one move in all, those cut by a failover included (a group failing over
/// again and again fails its move too).
const RUNS: i64 = 12;
/// How long the source may take to become ready or hand over before the attempt is undone.
const READY_WAIT: Duration = Duration::from_secs(600);
const HANDOVER_WAIT: Duration = Duration::from_secs(10);
/// The copy rate assumed for an estimate before any move was measured.
const ASSUMED_BYTES_PER_SEC: f64 = 50e6;
/// A plan moves at most this many slots in one move. Each move reads the source's whole
/// table (and the target's, to purge it), so fewer, larger moves cost the engines less;
/// the pause does not grow with the slots (the seal sends only the last changes).
const MOVE_SLOTS: usize = 4096;
/// The setting that pauses the queue.
const PAUSED: &str = "moves_paused";

/// A move a plan proposes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlannedMove {
    pub source: String,
    pub target: String,
    pub slots: String,
    pub slot_count: usize,
    pub estimated_keys: i64,
    pub estimated_bytes: i64,
}

impl PlannedMove {
    /// A move of `slots` out of the `owned` slots of `source`, whose keys and bytes are
    /// `totals`: estimated as their share of them.
    fn estimated(source: &str, target: &str, slots: &SlotSet, owned: usize, totals: (i64, i64)) -> PlannedMove {
        let part = slots.len() as f64 / owned.max(1) as f64;
        PlannedMove {
            source: source.into(),
            target: target.into(),
            slot_count: slots.len(),
            slots: slots.to_string(),
            estimated_keys: (totals.0 as f64 * part) as i64,
            estimated_bytes: (totals.1 as f64 * part) as i64,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Plan {
    pub moves: Vec<PlannedMove>,
    pub estimated_seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error(transparent)]
    Db(#[from] db::DbError),
    #[error("{0}")]
    Invalid(String),
}

/// Who owns each slot, from the database.
async fn owners(console: &Console) -> Result<(Vec<String>, Vec<usize>), db::DbError> {
    let (engines, ranges) = db::topology(&console.db).await?;
    let mut owner = vec![0usize; SLOTS];
    for (f, l, e) in ranges {
        for s in f..=l {
            owner[s as usize] = e;
        }
    }
    Ok((engines, owner))
}

/// Moves that give every engine but `excluded` an even share of the slots, taking them
/// from the engines over their share (`excluded` gives all of its own).
pub fn even_moves(engines: usize, owner: &[usize], excluded: Option<usize>) -> Vec<(usize, usize, SlotSet)> {
    let keep: Vec<usize> = (0..engines).filter(|e| Some(*e) != excluded).collect();
    if keep.is_empty() {
        return Vec::new();
    }
    let mut share = vec![0usize; engines];
    for (i, e) in keep.iter().enumerate() {
        share[*e] = SLOTS / keep.len() + usize::from(i < SLOTS % keep.len());
    }
    let mut count = vec![0usize; engines];
    for &o in owner {
        count[o] += 1;
    }
    // Slots to give, from the top of each giver's slots down.
    let mut pool: Vec<(usize, u16)> = Vec::new();
    for e in 0..engines {
        let surplus = count[e].saturating_sub(share[e]);
        pool.extend(owner.iter().enumerate().rev().filter(|(_, &o)| o == e).take(surplus).map(|(s, _)| (e, s as u16)));
    }
    let mut moves: std::collections::BTreeMap<(usize, usize), SlotSet> = Default::default();
    let mut pool = pool.into_iter();
    for &e in &keep {
        for _ in count[e]..share[e] {
            let Some((from, slot)) = pool.next() else { break };
            moves.entry((from, e)).or_default().insert(slot);
        }
    }
    // In pieces of at most `MOVE_SLOTS`: each holds its slots on the proxies for a shorter
    // while, and a crash repeats less.
    let mut out = Vec::new();
    for ((from, to), slots) in moves {
        let all: Vec<u16> = slots.iter().collect();
        for piece in all.chunks(MOVE_SLOTS) {
            let mut set = SlotSet::default();
            piece.iter().for_each(|&s| set.insert(s));
            out.push((from, to, set));
        }
    }
    out
}

/// A plan: `drain` empties that engine onto the others; otherwise every engine gets an
/// even share. Keys and bytes per move are estimated from each source's totals and its share
/// of the slots; the time from the moves measured so far.
pub async fn plan(console: &Console, drain: Option<&str>) -> Result<Plan, MoveError> {
    let (engines, owner) = owners(console).await?;
    let excluded = match drain {
        Some(a) => Some(engines.iter().position(|e| e == a).ok_or_else(|| MoveError::Invalid(format!("no engine {a} in the slot map")))?),
        None => None,
    };
    if excluded.is_some() && engines.len() < 2 {
        return Err(MoveError::Invalid("the last engine cannot be drained".into()));
    }
    let mut totals = std::collections::HashMap::new();
    let mut moves = Vec::new();
    for (from, to, slots) in even_moves(engines.len(), &owner, excluded) {
        let owned = owner.iter().filter(|&&o| o == from).count();
        let source_totals = match totals.get(&from) {
            Some(t) => *t,
            None => {
                let t = engine_totals(console, &engines[from]).await;
                totals.insert(from, t);
                t
            }
        };
        moves.push(PlannedMove::estimated(&engines[from], &engines[to], &slots, owned, source_totals));
    }
    let rate = measured_rate(console).await.unwrap_or(ASSUMED_BYTES_PER_SEC);
    let estimated_seconds = moves.iter().map(|m| m.estimated_bytes as f64).sum::<f64>() / rate;
    Ok(Plan { moves, estimated_seconds })
}

/// An engine's keys (every tenant) and data bytes, 0 when it does not answer.
async fn engine_totals(console: &Console, addr: &str) -> (i64, i64) {
    let Ok(mut n) = Node::engine(addr, &console.config.engine_auth).await else { return (0, 0) };
    let keys = n.json(&["TERRACE.STATS"]).await.ok().and_then(|s| s["keys"].as_i64()).unwrap_or(0);
    let bytes = n.info("memory").await.ok().and_then(|i| i.get("used_memory_dataset").or(i.get("used_memory")).and_then(|v| v.parse().ok())).unwrap_or(0);
    (keys, bytes)
}

/// Bytes a second of the finished moves (None before any).
async fn measured_rate(console: &Console) -> Option<f64> {
    let done: Vec<SlotMove> = db::moves(&console.db, 20).await.ok()?.into_iter().filter(|m| m.state == "done" && m.bytes > 0).collect();
    let bytes: i64 = done.iter().map(|m| m.bytes).sum();
    let secs: i64 = done.iter().map(|m| (m.updated_at - m.created_at).max(1)).sum();
    (bytes > 0).then(|| bytes as f64 / secs as f64)
}

/// Queues a plan's moves (answers their ids) and wakes the driver.
pub async fn apply(console: &Console, plan: &Plan) -> Result<Vec<i64>, MoveError> {
    let rows: Vec<_> = plan
        .moves
        .iter()
        .map(|m| db::NewMove {
            source: m.source.clone(),
            target: m.target.clone(),
            slots: m.slots.clone(),
            estimated_keys: m.estimated_keys,
            estimated_bytes: m.estimated_bytes,
        })
        .collect();
    let ids = db::queue_moves(&console.db, &rows).await?.map_err(MoveError::Invalid)?;
    for (id, m) in ids.iter().zip(&plan.moves) {
        db::add_event(&console.db, "move", &format!("move {id} queued: slots {} from {} to {}", m.slots, m.source, m.target)).await?;
    }
    console.moves_wake.notify_one();
    Ok(ids)
}

/// Queues one move of `slots` (ranges) from `source` to `target`, checked against the map.
pub async fn queue_one(console: &Console, source: &str, target: &str, slots: &str) -> Result<i64, MoveError> {
    let set = SlotSet::parse(slots).map_err(|e| MoveError::Invalid(format!("slots: {e}")))?;
    if set.is_empty() {
        return Err(MoveError::Invalid("slots: none given".into()));
    }
    let (engines, owner) = owners(console).await?;
    let index = |a: &str| engines.iter().position(|e| e == a).ok_or_else(|| MoveError::Invalid(format!("no engine {a} in the slot map")));
    let (from, to) = (index(source)?, index(target)?);
    if from == to {
        return Err(MoveError::Invalid("source and target are the same engine".into()));
    }
    if let Some(s) = set.iter().find(|&s| owner[s as usize] != from) {
        return Err(MoveError::Invalid(format!("slot {s} is not {source}'s")));
    }
    let owned = owner.iter().filter(|&&o| o == from).count();
    let plan = Plan { moves: vec![PlannedMove::estimated(source, target, &set, owned, engine_totals(console, source).await)], estimated_seconds: 0.0 };
    Ok(apply(console, &plan).await?[0])
}

pub async fn paused(console: &Console) -> bool {
    db::setting(&console.db, PAUSED).await.ok().flatten().as_deref() == Some("1")
}

/// Pauses (no new move starts; the one under way finishes its step and waits) or resumes.
pub async fn set_paused(console: &Console, on: bool) -> Result<(), db::DbError> {
    db::set_setting(&console.db, PAUSED, if on { "1" } else { "0" }).await?;
    db::add_event(&console.db, "move", if on { "slot moves paused" } else { "slot moves resumed" }).await?;
    console.moves_wake.notify_one();
    Ok(())
}

/// The engines' live progress of the move under way (for the page and the API).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Progress {
    pub id: i64,
    pub phase: String,
    pub keys_copied: u64,
    pub bytes_copied: u64,
    pub keys_total: u64,
    pub keys_caught_up: u64,
    pub keys_deleted: u64,
}

/// The move under way and how far its source got (None: none is under way).
pub async fn progress(console: &Console) -> Option<Progress> {
    let m = db::next_move(&console.db).await.ok()??;
    if m.state == "queued" {
        return None;
    }
    let mut src = Node::engine(&m.source, &console.config.engine_auth).await.ok()?;
    let st = src.json(&["TERRACE.MIGRATE", "STATUS"]).await.ok()?;
    let n = |k: &str| st[k].as_u64().unwrap_or(0);
    Some(Progress {
        id: m.id,
        phase: st["phase"].as_str().unwrap_or("unknown").to_string(),
        keys_copied: n("keys_copied"),
        bytes_copied: n("bytes_copied"),
        keys_total: n("keys_total"),
        keys_caught_up: n("keys_caught_up"),
        keys_deleted: n("keys_deleted"),
    })
}

/// Runs the queued moves, one at a time, for as long as the console runs.
pub async fn run(console: Arc<Console>) {
    loop {
        let next = if paused(&console).await || !console.coordination.leading() { None } else { db::next_move(&console.db).await.unwrap_or(None) };
        match next {
            Some(m) => drive(&console, m).await,
            None => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = console.moves_wake.notified() => {}
                }
            }
        }
    }
}

/// Where a test can make the console die mid-move, as if killed: the process exits at the
/// point `TERRACE_CONSOLE_CRASH_AT` names (`held`: the proxies hold the slots; `handed-over`:
/// the source has sealed them too, the map is not switched). What a restarted console does
/// from there is the recovery under test (`tests/slot_migration.rs`).
fn crash_point(name: &str) {
    static AT: std::sync::LazyLock<Option<String>> = std::sync::LazyLock::new(|| std::env::var("TERRACE_CONSOLE_CRASH_AT").ok());
    if AT.as_deref() == Some(name) {
        tracing::error!(point = name, "TERRACE_CONSOLE_CRASH_AT: exiting mid-move");
        std::process::exit(70);
    }
}

/// What went wrong in an attempt.
#[derive(Debug)]
struct Undo(String);

impl<E: std::fmt::Display> From<E> for Undo {
    fn from(e: E) -> Self {
        Undo(e.to_string())
    }
}

async fn event(console: &Console, message: String) {
    tracing::info!("{message}");
    let _ = db::add_event(&console.db, "move", &message).await;
}

/// Carries one move as far as it goes (to done, failed, or queued for another attempt).
async fn drive(console: &Console, mut m: SlotMove) {
    // The engine's name for this attempt (the same after a console restart).
    let job = format!("move-{}-{}", m.id, m.runs);
    if matches!(m.state.as_str(), "switched" | "deleting") {
        finish(console, &mut m, &job).await;
        return;
    }
    if m.state == "queued" {
        // This attempt's engines: the groups' primaries now (an undo aborts on these).
        match primaries(console, &m).await {
            Ok((source, target)) => (m.source, m.target) = (source, target),
            Err(Undo(why)) => {
                m.state = "failed".into();
                m.error = Some(why.clone());
                let _ = db::update_move(&console.db, &m).await;
                event(console, format!("move {}: failed ({why})", m.id)).await;
                return;
            }
        }
        let _ = db::update_move(&console.db, &m).await;
        event(console, format!("move {}: slots {} from {} to {} (attempt {})", m.id, m.slots, m.source, m.target, m.runs + 1)).await;
    }
    match attempt(console, &mut m, &job).await {
        Ok(()) => finish(console, &mut m, &job).await,
        Err(Undo(why)) => {
            undo(console, &m, &job).await;
            // Cut by a failover of either side: tried again on the new primary, uncounted.
            let failed_over = failed_over(console, &m).await;
            m.runs += 1;
            if !failed_over {
                m.attempts += 1;
            }
            m.error = Some(why.clone());
            m.state = if m.attempts >= ATTEMPTS || m.runs >= RUNS { "failed".into() } else { "queued".into() };
            let _ = db::update_move(&console.db, &m).await;
            let next = match (m.state.as_str(), failed_over) {
                ("failed", _) => "failed",
                (_, true) => "a group failed over: tried again on its new primary",
                _ => "will be tried again",
            };
            event(console, format!("move {}: undone ({why}); the slots stay with {}'s group; {next}", m.id, m.source)).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Whether an undone attempt was cut by a failover of either side: its groups' primaries
/// changed since it began. While one of its engines does not serve as a primary (down, or
/// restarted and waiting for its role), this waits as long as a failover takes for the
/// coordinator to promote a replica (a group without one fails over never, and the
/// attempt counts after that wait).
async fn failed_over(console: &Console, m: &SlotMove) -> bool {
    let deadline = Instant::now() + console.config.failover_after + console.config.health * 4 + Duration::from_secs(1);
    let auth = &console.config.engine_auth;
    loop {
        match primaries(console, m).await {
            Ok(now) if now != (m.source.clone(), m.target.clone()) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
        // (A primary restarted fenced, waiting for its role, answers but is about to be
        // replaced: it does not serve.)
        let serves = crate::failover::serves_as_primary;
        if Instant::now() >= deadline || (serves(&m.source, auth).await && serves(&m.target, auth).await) {
            return false;
        }
        tokio::time::sleep(console.config.health).await;
    }
}

/// The primaries of a move's source and target groups now.
async fn primaries(console: &Console, m: &SlotMove) -> Result<(String, String), Undo> {
    let primary = |group: Option<i64>, side: &'static str| async move {
        let Some(group) = group else { return Err(Undo(format!("its {side} group is unknown (queued before groups had ids; its engine left the topology)"))) };
        match db::group_primary(&console.db, group).await? {
            Some(address) => Ok(address),
            None => Err(Undo(format!("the {side} group {group} is no longer in the slot map"))),
        }
    };
    Ok((primary(m.source_group, "source").await?, primary(m.target_group, "target").await?))
}

/// Steps 1 to 4. Ok: the slot map gives the slots to the target.
async fn attempt(console: &Console, m: &mut SlotMove, job: &str) -> Result<(), Undo> {
    let slots = SlotSet::parse(&m.slots)?;
    let (engines, owner) = owners(console).await?;
    // (The attempt's engines must still be their groups' primaries: a failover since undoes it.)
    let place = |address: &str, side: &str| {
        engines.iter().position(|e| e == address).ok_or_else(|| Undo(format!("the {side} {address} is no longer its group's primary")))
    };
    let (source, _) = (place(&m.source, "source")?, place(&m.target, "target")?);
    if let Some(s) = slots.iter().find(|&s| owner[s as usize] != source) {
        return Err(Undo(format!("slot {s} is no longer {}'s", m.source)));
    }
    let auth = &console.config.engine_auth;
    let mut src = Node::engine(&m.source, auth).await?;
    let status = src.json(&["TERRACE.MIGRATE", "STATUS"]).await?;
    if status["id"].as_str() != Some(job) || status["phase"] == "failed" || status["phase"] == "aborted" {
        let mut args = vec!["TERRACE.MIGRATE", "START", job, &m.target];
        let ranges = slots.range_args();
        args.extend(ranges.iter().map(String::as_str));
        let (rate, pace) = (console.config.move_rate.to_string(), console.config.move_pace.to_string());
        if console.config.move_rate > 0 {
            args.extend(["RATE", rate.as_str()]);
        }
        args.extend(["PACE", pace.as_str()]);
        // (The target's own password: the source proved itself before it is told it.)
        let target_password = auth.password_for(&m.target);
        if let Some(p) = &target_password {
            args.extend(["AUTH", p]);
        }
        src.run::<()>(&args).await?;
    }
    m.state = "copying".into();
    db::update_move(&console.db, m).await?;
    // 1: copied and caught up.
    let started = Instant::now();
    loop {
        let st = status_of(&mut src, job).await?;
        m.keys = st["keys_copied"].as_i64().unwrap_or(0);
        m.bytes = st["bytes_copied"].as_i64().unwrap_or(0);
        if st["phase"] == "ready" {
            break;
        }
        if st["phase"] == "sealed" || st["phase"] == "handed-over" {
            // A console restarted between the hold and the switch: the proxies' holds and
            // the seal are undone, and the move starts over.
            return Err(Undo("the console stopped during the hand-over".into()));
        }
        if started.elapsed() > READY_WAIT {
            return Err(Undo(format!("the source was not ready within {READY_WAIT:?}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    db::update_move(&console.db, m).await?;
    // 2: every proxy holds the slots.
    m.state = "holding".into();
    db::update_move(&console.db, m).await?;
    let held = Instant::now();
    let proxies = db::proxies(&console.db).await?;
    let ranges = slots.range_args();
    // (All at once, so the pause is the slowest proxy's, not their sum; a proxy that cannot
    // hold undoes the attempt.)
    let mut args = vec!["TERRACE.TOPOLOGY", "HOLD"];
    args.extend(ranges.iter().map(String::as_str));
    let holds = proxies.iter().map(|p| async {
        let mut n = Node::proxy(p, console.config.proxy_admin_password.as_deref()).await?;
        n.run::<()>(&args).await
    });
    futures_util::future::try_join_all(holds).await?;
    crash_point("held");
    // 3: sealed and handed over.
    src.run::<()>(&["TERRACE.MIGRATE", "SEAL"]).await?;
    loop {
        let st = status_of(&mut src, job).await?;
        if st["phase"] == "handed-over" {
            break;
        }
        if held.elapsed() > HANDOVER_WAIT {
            return Err(Undo(format!("the source did not hand over within {HANDOVER_WAIT:?}")));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    crash_point("handed-over");
    // 4: the map moves the slots; pushed to every proxy at once (the next reconcile pass
    // would too, within one interval).
    let target_group = m.target_group.ok_or_else(|| Undo("its target group is unknown".into()))?;
    db::switch_slots(&console.db, &slots.ranges(), target_group, m.id).await?;
    m.state = "switched".into();
    let errors = crate::reconcile::push_proxies(console).await;
    m.pause_ms = Some(held.elapsed().as_millis() as i64);
    console.wake.notify_one();
    db::update_move(&console.db, m).await?;
    if !errors.is_empty() {
        tracing::warn!(?errors, "pushing the moved slots (the reconcile loop tries again)");
    }
    event(console, format!("move {}: slots {} handed over to {} (proxies held them {} ms)", m.id, m.slots, m.target, m.pause_ms.unwrap_or(0))).await;
    Ok(())
}

/// The source's status, failing when its job is not `job` any more (it restarted) or failed.
async fn status_of(src: &mut Node, job: &str) -> Result<serde_json::Value, Undo> {
    let st = src.json(&["TERRACE.MIGRATE", "STATUS"]).await?;
    if st["id"].as_str() != Some(job) {
        return Err(Undo(format!("the source no longer runs the move (it restarted?): {}", st["phase"])));
    }
    if st["phase"] == "failed" {
        return Err(Undo(format!("the source failed: {}", st["error"].as_str().unwrap_or("?"))));
    }
    Ok(st)
}

/// Undoes an attempt before the switch: the source keeps the slots, the proxies let go.
async fn undo(console: &Console, m: &SlotMove, job: &str) {
    if let Ok(mut src) = Node::engine(&m.source, &console.config.engine_auth).await {
        if let Ok(st) = src.json(&["TERRACE.MIGRATE", "STATUS"]).await {
            if st["id"].as_str() == Some(job) {
                let _ = src.run::<()>(&["TERRACE.MIGRATE", "ABORT"]).await;
                // The source unseals the slots when its job notices the abort; the proxies
                // let go only then — released before, a held request met the still sealed
                // source and its client got the handed-over TRYAGAIN (slot_migration failed
                // once in CI on it).
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                while tokio::time::Instant::now() < deadline {
                    match src.json(&["TERRACE.MIGRATE", "STATUS"]).await {
                        Ok(st) if st["id"].as_str() == Some(job) && !matches!(st["phase"].as_str(), Some("aborted" | "failed" | "done")) => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        _ => break,
                    }
                }
            }
        }
    }
    let ranges = SlotSet::parse(&m.slots).map(|s| s.range_args()).unwrap_or_default();
    for p in db::proxies(&console.db).await.unwrap_or_default() {
        if let Ok(mut n) = Node::proxy(&p, console.config.proxy_admin_password.as_deref()).await {
            let mut args = vec!["TERRACE.TOPOLOGY", "RELEASE"];
            args.extend(ranges.iter().map(String::as_str));
            let _ = n.run::<()>(&args).await;
        }
    }
}

/// Step 5: the source deletes the slots' keys. A source that lost the job (it restarted)
/// is told to purge them instead.
async fn finish(console: &Console, m: &mut SlotMove, job: &str) {
    m.state = "deleting".into();
    let _ = db::update_move(&console.db, m).await;
    let auth = &console.config.engine_auth;
    loop {
        // (The source group's primary of the moment: one promoted since the switch has the
        // slots' keys by replication, not the job, and purges them.)
        if let Ok((source, _)) = primaries(console, m).await {
            m.source = source;
        }
        let result: Result<bool, Undo> = async {
            let mut src = Node::engine(&m.source, auth).await?;
            let st = src.json(&["TERRACE.MIGRATE", "STATUS"]).await?;
            let purge = format!("{job}-leftovers");
            match (st["id"].as_str(), st["phase"].as_str()) {
                (Some(id), Some("handed-over")) if id == job => src.run::<()>(&["TERRACE.MIGRATE", "FINISH"]).await?,
                (Some(id), Some("done")) if id == job || id == purge => return Ok(true),
                (Some(id), Some("deleting")) if id == job || id == purge => {}
                _ => {
                    let mut args = vec!["TERRACE.MIGRATE".to_string(), "PURGE".into(), purge];
                    args.extend(SlotSet::parse(&m.slots)?.range_args());
                    src.run::<()>(&args.iter().map(String::as_str).collect::<Vec<_>>()).await?;
                }
            }
            Ok(false)
        }
        .await;
        match result {
            Ok(true) => break,
            Ok(false) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(Undo(why)) => {
                tracing::debug!(move_id = m.id, "finishing: {why}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    m.state = "done".into();
    m.error = None;
    let _ = db::update_move(&console.db, m).await;
    event(console, format!("move {}: done; {} keys ({} bytes) moved to {}", m.id, m.keys, m.bytes, m.target)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_moves_fill_the_new_engine_from_the_others() {
        // Two engines with half each, a third added empty.
        let owner: Vec<usize> = (0..SLOTS).map(|s| s * 2 / SLOTS).collect();
        let moves = even_moves(3, &owner, None);
        let given: usize = moves.iter().map(|(_, _, s)| s.len()).sum();
        assert_eq!(given, 5461);
        assert!(moves.iter().all(|(_, _, s)| s.len() <= MOVE_SLOTS) && moves.len() == 2, "in pieces: {}", moves.len());
        assert!(moves.iter().all(|(_, to, _)| *to == 2));
        let mut after = owner.clone();
        for (_, to, s) in &moves {
            for slot in s.iter() {
                after[slot as usize] = *to;
            }
        }
        let counts: Vec<usize> = (0..3).map(|e| after.iter().filter(|&&o| o == e).count()).collect();
        assert_eq!(counts, vec![5462, 5461, 5461]);
        // Balanced already: nothing to move.
        assert!(even_moves(3, &after, None).is_empty());
        // Draining engine 0 gives all its slots to the others.
        let drained = even_moves(3, &after, Some(0));
        assert_eq!(drained.iter().map(|(_, _, s)| s.len()).sum::<usize>(), 5462);
        assert!(drained.iter().all(|(from, to, _)| *from == 0 && *to != 0));
    }
}
