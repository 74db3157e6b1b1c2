//! The fault suite's checker: the workload's log against what the cluster holds once it has
//! settled. Pure: no I/O, so its rules are unit-tested on logs made by hand.
//!
//! The rules. A write a replica confirmed (WAIT 1) is never lost. A plain acknowledged write
//! may be lost only when the scenario kills, pauses or cuts off a primary (replication is
//! asynchronous, as Redis's) and only if it was acknowledged before the fault began, plus
//! `GRACE` for the reply on its way: one acknowledged later came from a primary that had lost
//! its term, or from its successor, and must survive. A transaction is whole or absent. A
//! write the cluster refused (an error that says it did not run) is never found. A counter's
//! value is handed out once and never goes back, but for a plain increment lost as above. A
//! read of a confirmed key sees its value. Keys written and confirmed before the load (a
//! move scenario's) all hold their values; a slot move the scenario queued ends done.

use std::collections::HashMap;

use super::workload::{pair_of, Kind, Log, Op, Outcome};

/// How long after the fault's start a reply sent just before it may still arrive.
pub const GRACE: f64 = 0.5;

/// What the scenario did and when.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    /// Seconds since the run's start.
    pub at: f64,
    /// Whether a primary was killed, paused or cut off (its plain writes may be lost).
    pub primary_lost: bool,
}

impl Fault {
    /// Whether `op`, if a plain write, may be lost: acknowledged by a primary the fault
    /// took away, before the fault (or its reply on its way then).
    fn may_lose(&self, op: &Op) -> bool {
        self.primary_lost && op.end <= self.at + GRACE
    }
}

/// The figures of one run, and its violations.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Verdict {
    pub acknowledged: u64,
    pub confirmed: u64,
    pub refused: u64,
    pub unknown: u64,
    /// Plain writes acknowledged before the fault and lost with the primary (allowed).
    pub lost_async: u64,
    // Violations.
    pub lost_confirmed: u64,
    pub lost_after_fault: u64,
    pub torn_transactions: u64,
    pub refused_but_applied: u64,
    pub counter_values_repeated: u64,
    pub counters_gone_back: u64,
    pub bad_reads: u64,
    /// Slot moves that ended failed (a failover of either side must not fail a move).
    pub moves_failed: u64,
    pub reads: u64,
    /// The longest time with no write acknowledged, from a second before the fault on.
    pub longest_outage_s: f64,
    /// From the fault's start to the first acknowledgement of a write sent after it.
    pub writable_after_s: f64,
    /// Examples of violations, for the report.
    pub examples: Vec<String>,
}

impl Verdict {
    pub fn violations(&self) -> u64 {
        self.lost_confirmed
            + self.lost_after_fault
            + self.torn_transactions
            + self.refused_but_applied
            + self.counter_values_repeated
            + self.counters_gone_back
            + self.bad_reads
            + self.moves_failed
    }

    /// Violations other than lost writes: torn transactions, refused writes applied,
    /// counters, reads.
    pub fn other_violations(&self) -> u64 {
        self.violations() - self.lost_confirmed - self.lost_after_fault
    }

    fn example(&mut self, what: String) {
        if self.examples.len() < 10 {
            self.examples.push(what);
        }
    }
}

/// Judges `log` against `state` (each logged key's value at the end; counters too).
pub fn check(log: &Log, state: &HashMap<String, Option<String>>, fault: Fault) -> Verdict {
    let mut v = Verdict { reads: log.reads, ..Verdict::default() };
    let held = |key: &str| state.get(key).cloned().flatten();
    for op in &log.ops {
        match &op.outcome {
            Outcome::Acked { waited } => {
                v.acknowledged += 1;
                v.confirmed += u64::from(*waited);
            }
            Outcome::Refused(_) => v.refused += 1,
            Outcome::Unknown(_) => v.unknown += 1,
        }
        if op.kind == Kind::Counter {
            continue;
        }
        let first = held(&op.key);
        let found = first.as_deref() == Some(op.value.as_str());
        if op.kind == Kind::Multi {
            let second = held(&pair_of(&op.key));
            if (second.as_deref() == Some(op.value.as_str())) != found {
                v.torn_transactions += 1;
                v.example(format!("transaction {} half applied ({first:?}, {second:?})", op.key));
            }
        }
        match &op.outcome {
            Outcome::Acked { .. } if found => {}
            Outcome::Acked { waited: true } => {
                v.lost_confirmed += 1;
                v.example(format!("{} sent at {:.3}s, confirmed by a replica at {:.3}s, lost", op.key, op.start, op.end));
            }
            Outcome::Acked { .. } if fault.may_lose(op) => v.lost_async += 1,
            Outcome::Acked { .. } => {
                v.lost_after_fault += 1;
                v.example(format!("{} sent at {:.3}s, acknowledged at {:.3}s (fault at {:.3}s), lost", op.key, op.start, op.end, fault.at));
            }
            Outcome::Refused(why) if found => {
                v.refused_but_applied += 1;
                v.example(format!("{} refused ({why}) yet applied", op.key));
            }
            _ => {}
        }
    }
    check_counters(log, state, fault, &mut v);
    v.bad_reads = log.bad_reads.len() as u64;
    for r in log.bad_reads.iter().take(3) {
        v.example(format!("read of {} at {:.3}s saw {:?}, not {:?}", r.key, r.at, r.got, r.expected));
    }
    v.longest_outage_s = longest_outage(log, fault.at - 1.0);
    v.writable_after_s =
        log.ops.iter().filter(|o| o.start > fault.at && matches!(o.outcome, Outcome::Acked { .. })).map(|o| o.end - fault.at).fold(f64::INFINITY, f64::min);
    v
}

fn check_counters(log: &Log, state: &HashMap<String, Option<String>>, fault: Fault, v: &mut Verdict) {
    let mut handed: HashMap<(&str, i64), &Op> = HashMap::new();
    let mut must_hold: HashMap<&str, i64> = HashMap::new();
    for op in log.ops.iter().filter(|o| o.kind == Kind::Counter) {
        let Outcome::Acked { waited } = op.outcome else { continue };
        let Ok(value) = op.value.parse::<i64>() else { continue };
        if waited || !fault.may_lose(op) {
            let top = must_hold.entry(&op.key).or_insert(value);
            *top = (*top).max(value);
        }
        // (The log is in order of acknowledgement: `earlier` was answered first.)
        if let Some(earlier) = handed.insert((&op.key, value), op) {
            let lost_plainly = matches!(earlier.outcome, Outcome::Acked { waited: false }) && fault.may_lose(earlier);
            if !lost_plainly {
                v.counter_values_repeated += 1;
                v.example(format!("{} = {value} handed out at {:.3}s and again at {:.3}s", op.key, earlier.end, op.end));
            }
        }
    }
    for (key, top) in must_hold {
        let now = state.get(key).cloned().flatten().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
        if now < top {
            v.counters_gone_back += 1;
            v.example(format!("{key} is {now}, below {top} acknowledged"));
        }
    }
}

/// The longest gap between two acknowledgements (or from `from` to the first) after `from`.
fn longest_outage(log: &Log, from: f64) -> f64 {
    let mut last = from;
    let mut longest: f64 = 0.0;
    for op in log.ops.iter().filter(|o| matches!(o.outcome, Outcome::Acked { .. }) && o.end >= from) {
        longest = longest.max(op.end - last);
        last = op.end;
    }
    longest
}

/// Keys written and confirmed by a replica before the load (`expected`: key → value): each
/// missing or different one is a confirmed write lost.
pub fn check_preloaded(v: &mut Verdict, expected: &[(String, String)], state: &HashMap<String, Option<String>>) {
    for (key, value) in expected {
        let held = state.get(key).cloned().flatten();
        if held.as_deref() != Some(value.as_str()) {
            v.lost_confirmed += 1;
            v.example(format!("{key}, written and confirmed before the load, is {:?}", held.map(|h| h.chars().take(20).collect::<String>())));
        }
    }
}

/// A slot move the scenario queued ended in `state` (`done` unless it failed: `why`).
pub fn check_move(v: &mut Verdict, state: &str, why: &str) {
    if state != "done" {
        v.moves_failed += 1;
        v.example(format!("the slot move ended {state}: {why}"));
    }
}

/// Every key the log names (transactions' second keys too): what to read at the end.
pub fn keys_to_read(log: &Log) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for op in &log.ops {
        let mut add = |k: String| {
            if seen.insert(k.clone()) {
                keys.push(k);
            }
        };
        if op.kind == Kind::Multi {
            add(pair_of(&op.key));
        }
        add(op.key.clone());
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: Kind, key: &str, value: &str, end: f64, outcome: Outcome) -> Op {
        Op { kind, key: key.into(), value: value.into(), start: end - 0.001, end, outcome }
    }

    fn acked(waited: bool) -> Outcome {
        Outcome::Acked { waited }
    }

    fn state(pairs: &[(&str, &str)]) -> HashMap<String, Option<String>> {
        pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
    }

    const KILL: Fault = Fault { at: 10.0, primary_lost: true };
    const NO_KILL: Fault = Fault { at: 10.0, primary_lost: false };

    #[test]
    fn preloaded_keys_must_all_hold_and_a_move_must_end_done() {
        let expected = vec![("p:1".to_string(), "a".to_string()), ("p:2".to_string(), "b".to_string())];
        let mut v = Verdict::default();
        check_preloaded(&mut v, &expected, &state(&[("p:1", "a"), ("p:2", "b")]));
        check_move(&mut v, "done", "");
        assert_eq!(v.violations(), 0);
        check_preloaded(&mut v, &expected, &state(&[("p:1", "a"), ("p:2", "stale")]));
        check_move(&mut v, "failed", "the source group 1 is no longer in the slot map");
        assert_eq!((v.lost_confirmed, v.moves_failed, v.violations(), v.other_violations()), (1, 1, 2, 1));
    }

    #[test]
    fn a_confirmed_write_lost_is_a_violation_whenever_it_was_written() {
        let log = Log { ops: vec![op(Kind::SetWait, "w:1", "v1", 9.0, acked(true))], ..Log::default() };
        let v = check(&log, &HashMap::new(), KILL);
        assert_eq!((v.lost_confirmed, v.violations()), (1, 1));
        assert_eq!(check(&log, &state(&[("w:1", "v1")]), KILL).violations(), 0);
    }

    #[test]
    fn a_plain_write_may_be_lost_only_with_a_primary_and_only_before_the_fault() {
        let before = Log { ops: vec![op(Kind::Set, "s:1", "v1", 10.2, acked(false))], ..Log::default() };
        let v = check(&before, &HashMap::new(), KILL);
        assert_eq!((v.lost_async, v.violations()), (1, 0));
        assert_eq!(check(&before, &HashMap::new(), NO_KILL).lost_after_fault, 1, "nothing may be lost when no primary is");
        let after = Log { ops: vec![op(Kind::Set, "s:1", "v1", 10.0 + GRACE + 0.1, acked(false))], ..Log::default() };
        assert_eq!(check(&after, &HashMap::new(), KILL).lost_after_fault, 1);
        // A different value under the key is not the write.
        assert_eq!(check(&after, &state(&[("s:1", "v2")]), KILL).lost_after_fault, 1);
    }

    #[test]
    fn transactions_are_whole_and_refusals_are_never_applied() {
        let log = Log {
            ops: vec![
                op(Kind::Multi, "{m:1:1}a", "v1", 1.0, acked(false)),
                op(Kind::Multi, "{m:1:2}a", "v2", 2.0, Outcome::Unknown("timeout".into())),
                op(Kind::Set, "s:1", "v1", 3.0, Outcome::Refused("TRYAGAIN".into())),
            ],
            ..Log::default()
        };
        let whole = state(&[("{m:1:1}a", "v1"), ("{m:1:1}b", "v1"), ("{m:1:2}a", "v2"), ("{m:1:2}b", "v2")]);
        assert_eq!(check(&log, &whole, NO_KILL).violations(), 0);
        let torn = state(&[("{m:1:1}a", "v1"), ("{m:1:1}b", "v1"), ("{m:1:2}a", "v2")]);
        assert_eq!(check(&log, &torn, NO_KILL).torn_transactions, 1, "an unknown outcome is still all or nothing");
        let mut applied = whole.clone();
        applied.insert("s:1".into(), Some("v1".into()));
        assert_eq!(check(&log, &applied, NO_KILL).refused_but_applied, 1);
        assert_eq!(keys_to_read(&log), ["{m:1:1}b", "{m:1:1}a", "{m:1:2}b", "{m:1:2}a", "s:1"]);
    }

    #[test]
    fn counters_hand_out_each_value_once_and_never_go_back() {
        let incr = |v: &str, end: f64, waited: bool| op(Kind::Counter, "counter:0", v, end, acked(waited));
        let log = Log { ops: vec![incr("1", 1.0, true), incr("2", 2.0, true), incr("2", 3.0, true)], ..Log::default() };
        assert_eq!(check(&log, &state(&[("counter:0", "2")]), KILL).counter_values_repeated, 1);
        let log = Log { ops: vec![incr("1", 1.0, true), incr("2", 2.0, true)], ..Log::default() };
        assert_eq!(check(&log, &state(&[("counter:0", "1")]), KILL).counters_gone_back, 1);
        // A plain increment acknowledged as the primary died may be lost, and its value
        // handed out again by the successor.
        let log = Log { ops: vec![incr("1", 9.9, true), incr("2", 10.1, false), incr("2", 12.0, true)], ..Log::default() };
        assert_eq!(check(&log, &state(&[("counter:0", "2")]), KILL).violations(), 0);
        assert_eq!(check(&log, &state(&[("counter:0", "2")]), NO_KILL).counter_values_repeated, 1);
    }

    #[test]
    fn bad_reads_and_outages_are_reported() {
        let mut log = Log { ops: vec![op(Kind::Set, "s:1", "v1", 9.5, acked(false)), op(Kind::Set, "s:2", "v2", 13.5, acked(false))], ..Log::default() };
        log.bad_reads.push(super::super::workload::BadRead { key: "w:1".into(), expected: "v1".into(), got: None, at: 11.0 });
        let v = check(&log, &state(&[("s:1", "v1"), ("s:2", "v2")]), KILL);
        assert_eq!(v.bad_reads, 1);
        assert!((v.longest_outage_s - 4.0).abs() < 1e-9, "{}", v.longest_outage_s);
        assert!((v.writable_after_s - 3.5).abs() < 1e-9, "{}", v.writable_after_s);
    }
}
