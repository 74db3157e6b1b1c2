//! `terrace bench faults`: the fault suite. Each scenario builds a fresh cluster whose parts
//! are hosts of their own (network namespaces, `netns`): the console, the proxy, a primary
//! engine and its replica. A logged workload (`workload`) runs through the proxy from this
//! process; the scenario injects its fault (kill -9, SIGSTOP, a partition, the console's
//! death), ends it, waits for the cluster to settle, reads every key the workload wrote, and
//! the checker (`check`) judges the log against it: no write a replica confirmed lost, no
//! write lost that was acknowledged after the fault began, transactions whole, refusals not
//! applied, counters handed out once. A table of what was acknowledged, lost and unavailable
//! per scenario and round; `--json` prints one object per run for the CI test
//! (`tests/faults.rs`). Exits with an error when any of Terrace's runs found a violation.
//!
//! The coordinator scenarios run three consoles, each beside an etcd member on its host,
//! which elect their coordinator there: the coordinating console is killed, or its host
//! (console and etcd member) cut off; another must take over, and nothing acknowledged is
//! lost.
//!
//! The move scenarios run two groups (`e0`/`r0` and `e1`/`r1`, half the slots each) with
//! keys written and confirmed before the load, and kill the source's or the target's
//! primary in the middle of a slot move's copy: the move must end done, on the groups'
//! new primaries, with every preloaded key.
//!
//! `--against-sentinel` runs the scenarios that exist there (a primary killed, paused, cut
//! off) on redis-server with three redis-sentinel too (`sentinel`), alternating with
//! Terrace's runs, every process pinned to core 0 with `--pin`: the same workload and
//! checker judge both.

mod check;
mod cluster;
mod netns;
mod procs;
mod sentinel;
mod slot_move;
mod workload;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Args;

use check::{Fault, Verdict};
use cluster::Cluster;
use procs::Procs;
use sentinel::Sentinels;
use workload::Target;

/// What a scenario needs of the system under test.
trait System {
    /// Where the workload sends its requests.
    fn target(&self) -> Target;
    fn procs(&mut self) -> &mut Procs;
    /// Starts a killed process again as its supervisor would.
    fn restart(&mut self, host: &'static str) -> anyhow::Result<()>;
    /// The data nodes' addresses, group by group (the primary's and the replica's at the
    /// start).
    fn groups(&self) -> Vec<[String; 2]>;
    /// The console's address, where there is one.
    fn console(&self) -> Option<String> {
        None
    }
    /// The host of the console that coordinates now (several consoles on etcd).
    fn coordinator(&self) -> anyhow::Result<&'static str> {
        bail!("this system has no elected coordinator")
    }

    /// Waits until each group is one primary and one replica following it, and takes
    /// confirmed writes.
    fn settled(&self, within: Duration) -> anyhow::Result<()> {
        let (groups, target) = (self.groups(), self.target());
        procs::wait_until(within, || procs::groups_settled(&groups, &target))
    }

    /// Each key's value, read as clients read it.
    fn read_all(&self, keys: &[String]) -> anyhow::Result<HashMap<String, Option<String>>> {
        procs::read_all(&self.target(), keys)
    }
}

#[derive(Args)]
pub struct FaultsArgs {
    /// Scenarios to run, comma-separated [default: all]: kill-primary, pause-primary,
    /// partition-primary, partition-proxy, partition-console, kill-console, kill-both-wal,
    /// move-kill-source, move-kill-target, kill-coordinator, partition-coordinator.
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<String>,
    /// Runs of each scenario.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Writers of each kind (SET, SET+WAIT, MULTI/EXEC, INCR+WAIT).
    #[arg(long, default_value_t = 2)]
    writers: usize,
    /// Seconds the fault lasts (a pause, a partition; a dead console stays dead this long).
    #[arg(long, default_value_t = 4.0)]
    fault_seconds: f64,
    /// One JSON object per run on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Run the primary's scenarios on redis-server + three redis-sentinel too, alternating.
    #[arg(long)]
    against_sentinel: bool,
    /// Pin every server process to this core (`taskset -c`).
    #[arg(long)]
    pin: Option<String>,
    #[arg(long, default_value = "redis-server")]
    redis_server: String,
    #[arg(long, default_value = "redis-sentinel")]
    redis_sentinel: String,
    /// Where the nodes keep their files and logs (kept when a run finds a violation).
    #[arg(long, default_value = "/tmp/terrace-bench-faults")]
    dir: std::path::PathBuf,
}

/// The scenarios, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// kill -9 of the primary, restarted fenced (as `terrace up` does) 300 ms later, no WAL.
    KillPrimary,
    /// SIGSTOP of the primary for the fault's length, then SIGCONT.
    PausePrimary,
    /// The primary cut off from every other host.
    PartitionPrimary,
    /// The proxy cut off: its clients and its engines both lose it.
    PartitionProxy,
    /// The console cut off: no coordinator, no lease renewed.
    PartitionConsole,
    /// kill -9 of the console, restarted after the fault's length on its database.
    KillConsole,
    /// `--wal always` on both engines, both killed at once and restarted fenced.
    KillBothWal,
    /// Two groups; the source group's primary killed (restarted fenced) mid-move.
    MoveKillSource,
    /// Two groups; the target group's primary killed (restarted fenced) mid-move.
    MoveKillTarget,
    /// Three consoles on etcd; the coordinating one killed, restarted after the fault.
    KillCoordinator,
    /// Three consoles on etcd; the coordinating one's host (console and etcd member) cut off.
    PartitionCoordinator,
}

const ALL: [Scenario; 11] = [
    Scenario::KillPrimary,
    Scenario::PausePrimary,
    Scenario::PartitionPrimary,
    Scenario::PartitionProxy,
    Scenario::PartitionConsole,
    Scenario::KillConsole,
    Scenario::KillBothWal,
    Scenario::MoveKillSource,
    Scenario::MoveKillTarget,
    Scenario::KillCoordinator,
    Scenario::PartitionCoordinator,
];

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::KillPrimary => "kill-primary",
            Scenario::PausePrimary => "pause-primary",
            Scenario::PartitionPrimary => "partition-primary",
            Scenario::PartitionProxy => "partition-proxy",
            Scenario::PartitionConsole => "partition-console",
            Scenario::KillConsole => "kill-console",
            Scenario::KillBothWal => "kill-both-wal",
            Scenario::MoveKillSource => "move-kill-source",
            Scenario::MoveKillTarget => "move-kill-target",
            Scenario::KillCoordinator => "kill-coordinator",
            Scenario::PartitionCoordinator => "partition-coordinator",
        }
    }

    /// The consoles it runs (3: on etcd).
    fn consoles(self) -> usize {
        if matches!(self, Scenario::KillCoordinator | Scenario::PartitionCoordinator) {
            3
        } else {
            1
        }
    }

    /// The engine groups it runs on.
    fn groups(self) -> usize {
        if self.moves() {
            2
        } else {
            1
        }
    }

    fn moves(self) -> bool {
        matches!(self, Scenario::MoveKillSource | Scenario::MoveKillTarget)
    }

    /// Whether redis-server with Sentinel has it too (one primary lost, no WAL, no move).
    fn on_sentinel(self) -> bool {
        self.loses_a_primary() && self != Scenario::KillBothWal && !self.moves()
    }

    /// Whether the fault takes a primary away (its unreplicated plain writes may go).
    fn loses_a_primary(self) -> bool {
        matches!(
            self,
            Scenario::KillPrimary
                | Scenario::PausePrimary
                | Scenario::PartitionPrimary
                | Scenario::KillBothWal
                | Scenario::MoveKillSource
                | Scenario::MoveKillTarget
        )
    }
}

/// One run's result.
#[derive(serde::Serialize)]
struct Run {
    system: &'static str,
    scenario: &'static str,
    round: usize,
    /// Seconds from the fault's start until the cluster was settled again.
    settled_after_s: f64,
    #[serde(flatten)]
    verdict: Verdict,
}

pub fn run(args: FaultsArgs) -> anyhow::Result<()> {
    let scenarios: Vec<Scenario> = if args.scenarios.is_empty() {
        ALL.to_vec()
    } else {
        args.scenarios
            .iter()
            .map(|s| ALL.iter().copied().find(|a| a.name() == s).ok_or_else(|| anyhow::anyhow!("unknown scenario {s:?}; known: {}", names())))
            .collect::<anyhow::Result<_>>()?
    };
    let mut runs = Vec::new();
    if !args.json {
        println!("| system | scenario | round | acknowledged | confirmed (WAIT) | lost, async (allowed) | lost confirmed | lost, acked after the fault | other violations | refused | unknown | writable after s | longest outage s | settled after s |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    }
    for round in 1..=args.rounds {
        for (&scenario, system) in scenarios.iter().flat_map(|s| {
            let sentinel = args.against_sentinel && s.on_sentinel();
            std::iter::once((s, "terrace")).chain(sentinel.then_some((s, "redis-sentinel")))
        }) {
            let dir = args.dir.join(format!("{system}-{}-{round}", scenario.name()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            let run = if system == "terrace" {
                let mut cluster = Cluster::start(&dir, scenario == Scenario::KillBothWal, args.pin.clone(), scenario.groups(), scenario.consoles())?;
                run_one(&mut cluster, system, scenario, round, &args, &dir)?
            } else {
                let mut sentinels = Sentinels::start(&dir, args.pin.clone(), &args.redis_server, &args.redis_sentinel)?;
                run_one(&mut sentinels, system, scenario, round, &args, &dir)?
            };
            if args.json {
                println!("{}", serde_json::to_string(&run)?);
            } else {
                let v = &run.verdict;
                println!(
                    "| {system} | {} | {round} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                    run.scenario,
                    v.acknowledged,
                    v.confirmed,
                    v.lost_async,
                    v.lost_confirmed,
                    v.lost_after_fault,
                    v.other_violations(),
                    v.refused,
                    v.unknown,
                    v.writable_after_s,
                    v.longest_outage_s,
                    run.settled_after_s
                );
                for e in v.examples.iter().take(3) {
                    println!("|   {e} |");
                }
            }
            if run.verdict.violations() == 0 && std::env::var_os("TERRACE_FAULTS_KEEP").is_none() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            runs.push(run);
        }
    }
    if !args.json && args.rounds > 1 {
        summarize(&runs);
    }
    let bad: Vec<String> =
        runs.iter().filter(|r| r.system == "terrace" && r.verdict.violations() > 0).map(|r| format!("{} round {}", r.scenario, r.round)).collect();
    if !bad.is_empty() {
        bail!("violations in {} (logs kept under {})", bad.join(", "), args.dir.display());
    }
    Ok(())
}

/// Per system and scenario: sums over the rounds, and the medians of the times.
fn summarize(runs: &[Run]) {
    println!();
    println!("| system | scenario | runs | acknowledged | confirmed | lost confirmed | lost, acked after the fault | other violations | writable after, median s | longest outage, median s | settled after, median s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for r in runs {
        if seen.contains(&(r.system, r.scenario)) {
            continue;
        }
        seen.push((r.system, r.scenario));
        let mine: Vec<&Run> = runs.iter().filter(|o| (o.system, o.scenario) == (r.system, r.scenario)).collect();
        let sum = |f: &dyn Fn(&Verdict) -> u64| mine.iter().map(|o| f(&o.verdict)).sum::<u64>();
        let writable: Vec<f64> = mine.iter().map(|o| o.verdict.writable_after_s).collect();
        let settled: Vec<f64> = mine.iter().map(|o| o.settled_after_s).collect();
        let outage: Vec<f64> = mine.iter().map(|o| o.verdict.longest_outage_s).collect();
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
            r.system,
            r.scenario,
            mine.len(),
            sum(&|v| v.acknowledged),
            sum(&|v| v.confirmed),
            sum(&|v| v.lost_confirmed),
            sum(&|v| v.lost_after_fault),
            sum(&|v| v.other_violations()),
            super::median(&writable),
            super::median(&outage),
            super::median(&settled)
        );
    }
}

fn names() -> String {
    ALL.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
}

fn run_one(cluster: &mut dyn System, system: &'static str, scenario: Scenario, round: usize, args: &FaultsArgs, dir: &std::path::Path) -> anyhow::Result<Run> {
    cluster.settled(Duration::from_secs(60))?;
    let preloaded = if scenario.moves() { slot_move::preload(&cluster.target())? } else { Vec::new() };
    let epoch = Instant::now();
    let load = workload::start(&cluster.target(), args.writers, epoch);
    std::thread::sleep(Duration::from_millis(1500));
    let length = Duration::from_secs_f64(args.fault_seconds);
    // When the fault took effect (set just after the kill, signal or link change).
    let began = || epoch.elapsed().as_secs_f64();
    let at;
    let mut queued_move = None;
    match scenario {
        Scenario::KillPrimary => {
            cluster.procs().kill("e0")?;
            at = began();
            std::thread::sleep(Duration::from_millis(300));
            cluster.restart("e0")?;
        }
        Scenario::KillBothWal => {
            cluster.procs().kill("e0")?;
            cluster.procs().kill("r0")?;
            at = began();
            std::thread::sleep(Duration::from_millis(300));
            cluster.restart("e0")?;
            cluster.restart("r0")?;
        }
        Scenario::PausePrimary => {
            cluster.procs().signal("e0", libc::SIGSTOP)?;
            at = began();
            std::thread::sleep(length);
            cluster.procs().signal("e0", libc::SIGCONT)?;
        }
        Scenario::PartitionPrimary | Scenario::PartitionProxy | Scenario::PartitionConsole => {
            let host = match scenario {
                Scenario::PartitionPrimary => "e0",
                Scenario::PartitionProxy => "proxy",
                _ => "console",
            };
            cluster.procs().partition(host)?;
            at = began();
            std::thread::sleep(length);
            cluster.procs().heal(host)?;
        }
        Scenario::KillConsole => {
            cluster.procs().kill("console")?;
            at = began();
            std::thread::sleep(length);
            cluster.restart("console")?;
        }
        Scenario::KillCoordinator => {
            let host = cluster.coordinator()?;
            cluster.procs().kill(host)?;
            at = began();
            std::thread::sleep(length);
            cluster.restart(host)?;
        }
        Scenario::PartitionCoordinator => {
            let host = cluster.coordinator()?;
            cluster.procs().partition(host)?;
            at = began();
            std::thread::sleep(length);
            cluster.procs().heal(host)?;
        }
        Scenario::MoveKillSource | Scenario::MoveKillTarget => {
            // The first group's slots (the first half) to the second group.
            let console = cluster.console().ok_or_else(|| anyhow::anyhow!("a move scenario needs a console"))?;
            let groups = cluster.groups();
            let (source, target) = (&groups[0][0], &groups[1][0]);
            let moving = slot_move::Move::queue(&console, cluster::CONSOLE_ADMIN_PASSWORD, source, target, "0-8191")?;
            moving.wait_copying(1000, Duration::from_secs(60))?;
            let host = if scenario == Scenario::MoveKillSource { "e0" } else { "e1" };
            cluster.procs().kill(host)?;
            at = began();
            std::thread::sleep(Duration::from_millis(300));
            cluster.restart(host)?;
            queued_move = Some(moving);
        }
    }
    // (A move ends before the cluster counts as settled: it is part of the recovery.)
    let ended = queued_move.as_ref().map(|m| m.wait_ended(Duration::from_secs(120))).transpose();
    let settled = cluster.settled(Duration::from_secs(60));
    let settled_after_s = epoch.elapsed().as_secs_f64() - at;
    // A second of load on the settled cluster, then the reading.
    std::thread::sleep(Duration::from_secs(1));
    let log = load.stop();
    settled?;
    let ended = ended?;
    let mut keys = check::keys_to_read(&log);
    keys.extend(preloaded.iter().map(|(k, _)| k.clone()));
    let state: HashMap<String, Option<String>> = cluster.read_all(&keys)?;
    let mut verdict = check::check(&log, &state, Fault { at, primary_lost: scenario.loses_a_primary() });
    check::check_preloaded(&mut verdict, &preloaded, &state);
    if let Some((state, why)) = ended {
        check::check_move(&mut verdict, &state, &why);
    }
    // The log beside the nodes' (kept when the run found a violation).
    let lines: Vec<String> = log.ops.iter().map(|o| format!("{:.3} {:.3} {:?} {} {} {:?}", o.start, o.end, o.kind, o.key, o.value, o.outcome)).collect();
    std::fs::write(dir.join("ops.log"), lines.join("\n") + &format!("\nfault at {at:.3}\n"))?;
    Ok(Run { system, scenario: scenario.name(), round, settled_after_s, verdict })
}
