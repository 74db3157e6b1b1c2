//! INFO through the proxy: the proxy's own sections, and the engines' keyspaces summed.

use std::sync::atomic::Ordering;

use super::Reactor;
use crate::resp;

const SECTIONS: &[&str] = &["server", "clients", "stats", "proxy", "cluster", "keyspace"];
/// Only with `all`/`everything` or by name, as in Redis.
const EXTRA: &[&str] = &["commandstats", "latencystats"];

/// Which sections `INFO [section ...]` asks for.
pub fn wanted(args: &[&[u8]]) -> Vec<&'static str> {
    if args.is_empty() {
        return SECTIONS.to_vec();
    }
    let mut out = Vec::new();
    for a in args {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        match a.as_str() {
            "default" => return SECTIONS.to_vec(),
            "all" | "everything" => return SECTIONS.iter().chain(EXTRA).copied().collect(),
            s => {
                if let Some(found) = SECTIONS.iter().chain(EXTRA).find(|x| **x == s) {
                    if !out.contains(found) {
                        out.push(*found);
                    }
                }
            }
        }
    }
    out
}

#[derive(Default, Clone, Copy)]
struct DbTotals {
    keys: u64,
    expires: u64,
    ttl_weighted: u128,
}

/// Sums the `dbN:keys=…,expires=…,avg_ttl=…` lines of the engines' INFO keyspace replies.
fn sum_keyspaces(parts: &[&[u8]]) -> Vec<(usize, DbTotals)> {
    let mut dbs: std::collections::BTreeMap<usize, DbTotals> = Default::default();
    for p in parts {
        let Some(text) = resp::bulk(p) else { continue };
        for line in String::from_utf8_lossy(text).lines() {
            let Some((db, fields)) = line.split_once(':') else { continue };
            let Some(n) = db.strip_prefix("db").and_then(|n| n.parse::<usize>().ok()) else { continue };
            let t = dbs.entry(n).or_default();
            let mut keys = 0;
            let mut ttl = 0;
            for f in fields.split(',') {
                match f.split_once('=') {
                    Some(("keys", v)) => keys = v.parse().unwrap_or(0),
                    Some(("expires", v)) => t.expires += v.parse::<u64>().unwrap_or(0),
                    Some(("avg_ttl", v)) => ttl = v.parse::<u64>().unwrap_or(0),
                    _ => {}
                }
            }
            t.keys += keys;
            t.ttl_weighted += ttl as u128 * keys as u128;
        }
    }
    dbs.into_iter().collect()
}

/// The INFO text for `sections`, with the keyspace from the engines' replies.
pub fn render(rx: &Reactor, sections: &[&str], engine_replies: &[&[u8]]) -> String {
    let sh = &rx.shared;
    let mut s = String::new();
    let stats =
        if sections.iter().any(|s| EXTRA.contains(s)) { crate::metrics::info_sections(&sh.metrics.snapshot(), "default", "redis") } else { Default::default() };
    for sec in sections {
        match *sec {
            "server" => {
                let up = sh.started.elapsed().as_secs();
                s += &format!(
                    "# Server\r\nredis_version:{}\r\nterrace_version:{}\r\nterrace_role:proxy\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{up}\r\nuptime_in_days:{}\r\nproxy_threads:{}\r\n\r\n",
                    terrace_commands::REDIS_VERSION,
                    terrace_commands::TERRACE_VERSION,
                    std::env::consts::OS,
                    std::env::consts::ARCH,
                    std::process::id(),
                    sh.port.load(Ordering::Relaxed),
                    up / 86400,
                    sh.config.threads,
                );
            }
            "clients" => {
                s += &format!(
                    "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nclients_reply_bytes:{}\r\n\r\n",
                    sh.stats.connected_clients.load(Ordering::Relaxed),
                    sh.maxclients,
                    sh.client_bytes.load(Ordering::Relaxed)
                );
            }
            "stats" => {
                s += &format!(
                    "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\nrejected_connections:{}\r\nclient_output_buffer_limit_disconnections:{}\r\n",
                    sh.stats.connections_received.load(Ordering::Relaxed),
                    sh.stats.commands.load(Ordering::Relaxed),
                    sh.stats.ops.lock().per_sec(),
                    sh.stats.rejected_connections.load(Ordering::Relaxed),
                    sh.stats.output_limit_disconnections.load(Ordering::Relaxed)
                );
                if let Some(c) = &sh.near_cache {
                    s += &format!(
                        "near_cache_hits:{}\r\nnear_cache_misses:{}\r\nnear_cache_ttl_ms:{}\r\n",
                        c.hits.load(Ordering::Relaxed),
                        c.misses.load(Ordering::Relaxed),
                        sh.config.near_cache_ttl.as_millis()
                    );
                }
                s += "\r\n";
            }
            "proxy" => {
                s += &format!("# Proxy\r\nengines:{}\r\n", rx.engines());
                let topo = rx.topology();
                let ranges = topo.slot_map.ranges();
                for (i, addr) in topo.engines.iter().enumerate() {
                    let slots: Vec<String> = ranges.iter().filter(|r| r.0 == i).map(|r| format!("{}-{}", r.1, r.2)).collect();
                    let status = if rx.engine_up(i) { "up" } else { "down" };
                    s += &format!("engine{i}:addr={addr},slots={},status={status}\r\n", slots.join(" "));
                }
                s += "\r\n";
            }
            "commandstats" => s += &format!("{}\r\n", stats.0),
            "latencystats" => s += &format!("{}\r\n", stats.1),
            // Clients check this to tell a cluster node from a standalone server.
            "cluster" => s += "# Cluster\r\ncluster_enabled:0\r\n\r\n",
            "keyspace" => {
                s += "# Keyspace\r\n";
                for (db, t) in sum_keyspaces(engine_replies) {
                    let avg = if t.keys > 0 { t.ttl_weighted / t.keys as u128 } else { 0 };
                    s += &format!("db{db}:keys={},expires={},avg_ttl={avg}\r\n", t.keys, t.expires);
                }
                s += "\r\n";
            }
            _ => {}
        }
    }
    while s.ends_with("\r\n\r\n") {
        s.truncate(s.len() - 2);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspaces_add_up() {
        let bulk = |text: &str| {
            let mut b = bytes::BytesMut::new();
            resp::put_bulk(&mut b, text.as_bytes());
            b.to_vec()
        };
        let a = bulk("# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=100\r\ndb2:keys=1,expires=0,avg_ttl=0\r\n");
        let b = bulk("# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n");
        let (a, b) = (&a[..], &b[..]);
        let t = sum_keyspaces(&[a, b]);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].0, t[0].1.keys, t[0].1.expires), (0, 4, 1));
        assert_eq!(t[0].1.ttl_weighted / 4, 75);
    }

    #[test]
    fn sections() {
        assert_eq!(wanted(&[]).len(), 6);
        assert_eq!(wanted(&[b"KEYSPACE", b"clients"]), vec!["keyspace", "clients"]);
        assert!(wanted(&[b"memory"]).is_empty());
        assert_eq!(wanted(&[b"all"]).len(), 8);
    }
}
