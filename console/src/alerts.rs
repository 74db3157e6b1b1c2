//! Alerts: thresholds that flag a node or a tenant on the Overview, from the nodes' last check
//! and the tenants' last history sample. Raising and clearing one are events (and so reach
//! the webhook). The thresholds:
//! - a proxy or engine that does not answer;
//! - an engine at `MEMORY_SHARE` of its `maxmemory`, a tenant at that share of its quota;
//! - a tenant whose writes were refused for memory (OOM) in the last sample;
//! - a replica more than `LAG_BYTES` behind its primary.

use std::collections::{BTreeMap, HashMap};

use crate::db::TenantSample;
use crate::failover::Member;
use crate::reconcile::NodeStatus;

pub const MEMORY_SHARE: f64 = 0.9;
pub const LAG_BYTES: i64 = 64 * 1024 * 1024;

/// What is wrong, and with which node or tenant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Alert {
    /// "engine 127.0.0.1:7001", "tenant shop".
    pub subject: String,
    /// What kind: down, memory, lag, quota, oom (one of each per subject).
    pub kind: &'static str,
    pub message: String,
}

/// The alerts now.
pub fn current(proxies: &[NodeStatus], engines: &[NodeStatus], members: &[Member], tenants: &HashMap<String, TenantSample>) -> Vec<Alert> {
    let mut out = Vec::new();
    for n in proxies.iter().chain(engines) {
        let subject = format!("{} {}", n.kind, n.address);
        if !n.up {
            out.push(Alert { message: format!("{subject} does not answer"), kind: "down", subject });
            continue;
        }
        if let (Some(used), Some(max)) = (n.used_memory, n.maxmemory.filter(|m| *m > 0)) {
            if used as f64 >= MEMORY_SHARE * max as f64 {
                out.push(Alert { message: format!("{subject} uses {:.0}% of its maxmemory", used as f64 * 100.0 / max as f64), kind: "memory", subject });
            }
        }
    }
    for m in members.iter().filter(|m| m.role == "replica") {
        if let Some(lag) = m.lag.filter(|l| *l > LAG_BYTES) {
            let subject = format!("engine {}", m.address);
            out.push(Alert { message: format!("{subject}, a replica, is {} MiB behind its primary", lag / (1024 * 1024)), kind: "lag", subject });
        }
    }
    for (tenant, s) in tenants {
        let subject = format!("tenant {tenant}");
        if let (Some(used), Some(quota)) = (s.used_bytes, s.quota_bytes.filter(|q| *q > 0.0)) {
            if used >= MEMORY_SHARE * quota {
                out.push(Alert {
                    message: format!("{subject} uses {:.0}% of its memory quota", used * 100.0 / quota),
                    kind: "quota",
                    subject: subject.clone(),
                });
            }
        }
        if let Some(oom) = s.oom_per_sec.filter(|r| *r > 0.0) {
            out.push(Alert { message: format!("{subject} had writes refused for memory (OOM), {oom:.1}/s"), kind: "oom", subject });
        }
    }
    out.sort();
    out
}

/// The alerts raised and cleared since `before` (one per subject and kind: a level that
/// moves is not a new alert).
pub fn changes(before: &[Alert], now: &[Alert]) -> (Vec<Alert>, Vec<Alert>) {
    let key = |a: &Alert| (a.subject.clone(), a.kind);
    let was: BTreeMap<_, _> = before.iter().map(|a| (key(a), a)).collect();
    let is: BTreeMap<_, _> = now.iter().map(|a| (key(a), a)).collect();
    let raised = is.iter().filter(|(k, _)| !was.contains_key(*k)).map(|(_, a)| (*a).clone()).collect();
    let cleared = was.iter().filter(|(k, _)| !is.contains_key(*k)).map(|(_, a)| (*a).clone()).collect();
    (raised, cleared)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(kind: &'static str, up: bool, used: u64, max: u64) -> NodeStatus {
        NodeStatus { address: "127.0.0.1:1".into(), kind, up, used_memory: Some(used), maxmemory: Some(max), ..Default::default() }
    }

    #[test]
    fn thresholds_flag_nodes_and_tenants() {
        let mut tenants = HashMap::new();
        tenants.insert("shop".to_string(), TenantSample { used_bytes: Some(95.0), quota_bytes: Some(100.0), oom_per_sec: Some(0.5), ..Default::default() });
        tenants.insert("calm".to_string(), TenantSample { used_bytes: Some(10.0), quota_bytes: Some(100.0), oom_per_sec: Some(0.0), ..Default::default() });
        let a = current(&[node("proxy", false, 0, 0)], &[node("engine", true, 95, 100), node("engine", true, 10, 100)], &[], &tenants);
        let messages: Vec<&str> = a.iter().map(|a| a.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "engine 127.0.0.1:1 uses 95% of its maxmemory",
                "proxy 127.0.0.1:1 does not answer",
                "tenant shop had writes refused for memory (OOM), 0.5/s",
                "tenant shop uses 95% of its memory quota",
            ]
        );
        // The same alert at another level is not raised again; a gone one is cleared.
        let later = current(&[node("proxy", true, 0, 0)], &[node("engine", true, 97, 100)], &[], &HashMap::new());
        let (raised, cleared) = changes(&a, &later);
        assert!(raised.is_empty(), "{raised:?}");
        assert_eq!(cleared.len(), 3, "{cleared:?}");
    }
}
