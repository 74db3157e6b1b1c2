//! The Redis Cluster view the proxies give cluster-mode clients (redis-py's RedisCluster,
//! `redis-cli -c`, Lettuce, go-redis): CLUSTER SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT,
//! REPLICAS (none); COUNTKEYSINSLOT and GETKEYSINSLOT go to the engine owning the slot.
//!
//! The proxies present themselves as the cluster's nodes, each a primary of an even share of
//! the 16384 slots, so a client spreads its connections over them and never sees an engine.
//! Any proxy serves every slot (it routes to engines itself), so a client holding an old view
//! is never redirected: no MOVED or ASK, even while slots move between engines. The nodes are
//! the proxies the console lists (`proxies`, pushed with the topology) or `cluster_nodes` in
//! the proxy's configuration; with neither, this proxy alone, at the address the client
//! connected to. A node's id is derived from its address, so every proxy names it alike.

use std::net::SocketAddr;

use sha2::Digest;
use terrace_commands::resp::ReplyWriter;

use crate::slots::{key_slot, SlotMap, SLOTS};

/// One proxy as the cluster's node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub host: String,
    pub port: u16,
    /// 40 hex digits, as Redis's node ids.
    pub id: String,
    /// The proxy the client is talking to.
    pub myself: bool,
    pub first: usize,
    pub last: usize,
}

/// The nodes: `configured` proxies (`host:port`), each an even share of the slots in order,
/// "myself" the one at `local` (the address the client reached); with none configured, this
/// proxy alone at `local`.
pub fn nodes(configured: &[String], local: SocketAddr) -> Vec<Node> {
    let mut addrs: Vec<(String, u16)> = configured.iter().filter_map(|a| split_addr(a)).collect();
    if addrs.is_empty() {
        addrs.push((local.ip().to_string(), local.port()));
    }
    let shares = SlotMap::even(addrs.len()).ranges();
    addrs
        .into_iter()
        .zip(shares)
        .map(|((host, port), (_, first, last))| {
            let myself = port == local.port() && host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip == local.ip());
            Node { id: node_id(&host, port), host, port, myself, first, last }
        })
        .collect()
}

fn split_addr(a: &str) -> Option<(String, u16)> {
    let (host, port) = a.rsplit_once(':')?;
    Some((host.trim_start_matches('[').trim_end_matches(']').to_string(), port.parse().ok()?))
}

/// A node's id: SHA-256 of its address, 40 hex digits (stable across proxies and restarts).
pub fn node_id(host: &str, port: u16) -> String {
    let digest = sha2::Sha256::digest(format!("terrace-proxy {host}:{port}").as_bytes());
    digest.iter().take(20).map(|b| format!("{b:02x}")).collect()
}

/// CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT with their arguments: the engine owning the slot
/// answers them (the proxy knows no keys).
pub fn asks_engine(argv: &[&[u8]]) -> bool {
    let sub = argv[1];
    (sub.eq_ignore_ascii_case(b"countkeysinslot") && argv.len() == 3) || (sub.eq_ignore_ascii_case(b"getkeysinslot") && argv.len() == 4)
}

/// What a CLUSTER subcommand is answered with.
pub enum Answer {
    /// Written into the reply.
    Done,
    /// An error text.
    Error(String),
}

/// Answers CLUSTER `argv[1]` (arity already checked) for the node view `nodes`.
pub fn answer(argv: &[&[u8]], nodes: &[Node], w: &mut ReplyWriter) -> Answer {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
    if terrace_commands::subcommands::sub_arity_ok("cluster", argv[1], argv.len()) == Some(false) {
        return Answer::Error(format!("ERR wrong number of arguments for 'cluster|{sub}' command"));
    }
    let me = nodes.iter().find(|n| n.myself);
    match sub.as_str() {
        "info" => w.verbatim(&info(nodes, me)),
        "myid" => match me {
            Some(n) => w.bulk_str(&n.id),
            None => return Answer::Error("ERR this proxy is not among the cluster's nodes (cluster_nodes)".into()),
        },
        "slots" => slots(nodes, w),
        "shards" => shards(nodes, w),
        "nodes" => w.verbatim(&nodes_text(nodes)),
        "keyslot" => w.int(i64::from(key_slot(argv[2]))),
        "replicas" | "slaves" => {
            let id = String::from_utf8_lossy(argv[2]);
            if !nodes.iter().any(|n| n.id == id) {
                return Answer::Error(format!("ERR Unknown node {id}"));
            }
            w.array_len(0)
        }
        "help" => w.help(&[
            "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "MYID",
            "    Return the node id.",
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
            "HELP",
            "    Print this help.",
        ]),
        _ => return Answer::Error(format!("ERR unknown subcommand '{}'. Try CLUSTER HELP.", String::from_utf8_lossy(argv[1]))),
    }
    Answer::Done
}

fn info(nodes: &[Node], me: Option<&Node>) -> String {
    let epoch = nodes.len();
    let my_epoch = me.and_then(|m| nodes.iter().position(|n| n == m)).map_or(0, |i| i + 1);
    format!(
        "cluster_state:ok\r\ncluster_slots_assigned:{SLOTS}\r\ncluster_slots_ok:{SLOTS}\r\ncluster_slots_pfail:0\r\n\
         cluster_slots_fail:0\r\ncluster_known_nodes:{n}\r\ncluster_size:{n}\r\ncluster_current_epoch:{epoch}\r\n\
         cluster_my_epoch:{my_epoch}\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n",
        n = nodes.len()
    )
}

/// CLUSTER SLOTS as Redis 7.0 gives it: per range, its first and last slot, then the primary
/// (address, port, id, and an empty list of further endpoints); no replicas.
fn slots(nodes: &[Node], w: &mut ReplyWriter) {
    w.array_len(nodes.len());
    for n in nodes {
        w.array_len(3);
        w.int(n.first as i64);
        w.int(n.last as i64);
        w.array_len(4);
        w.bulk_str(&n.host);
        w.int(i64::from(n.port));
        w.bulk_str(&n.id);
        w.map_len(0);
    }
}

fn shards(nodes: &[Node], w: &mut ReplyWriter) {
    w.array_len(nodes.len());
    for n in nodes {
        w.map_len(2);
        w.bulk_str("slots");
        w.array_len(2);
        w.int(n.first as i64);
        w.int(n.last as i64);
        w.bulk_str("nodes");
        w.array_len(1);
        w.map_len(7);
        w.bulk_str("id");
        w.bulk_str(&n.id);
        w.bulk_str("port");
        w.int(i64::from(n.port));
        w.bulk_str("ip");
        w.bulk_str(&n.host);
        w.bulk_str("endpoint");
        w.bulk_str(&n.host);
        w.bulk_str("role");
        w.bulk_str("master");
        w.bulk_str("replication-offset");
        w.int(0);
        w.bulk_str("health");
        w.bulk_str("online");
    }
}

/// CLUSTER NODES: one line per node — id, `ip:port@bus-port` (no bus: 0), flags, master,
/// ping sent, pong received, config epoch, link state, slots.
fn nodes_text(nodes: &[Node]) -> String {
    let mut s = String::new();
    for (i, n) in nodes.iter().enumerate() {
        let flags = if n.myself { "myself,master" } else { "master" };
        let range = if n.first == n.last { n.first.to_string() } else { format!("{}-{}", n.first, n.last) };
        s += &format!("{} {}:{}@0 {flags} - 0 0 {} connected {range}\n", n.id, n.host, n.port, i + 1);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_configured_proxies_share_the_slots_evenly_and_the_client_sees_itself() {
        let configured = vec!["127.0.0.1:7000".to_string(), "127.0.0.1:7001".to_string()];
        let n = nodes(&configured, addr("127.0.0.1:7001"));
        assert_eq!(n.len(), 2);
        assert_eq!((n[0].first, n[0].last, n[0].myself), (0, 8191, false));
        assert_eq!((n[1].first, n[1].last, n[1].myself), (8192, 16383, true));
        assert_eq!(n[0].id.len(), 40);
        assert_ne!(n[0].id, n[1].id);
        assert_eq!(n[0].id, nodes(&configured, addr("127.0.0.1:7000"))[0].id, "the same id from every proxy");
    }

    #[test]
    fn alone_it_is_the_whole_cluster_at_the_address_the_client_reached() {
        let n = nodes(&[], addr("10.1.2.3:6380"));
        assert_eq!(n.len(), 1);
        assert_eq!((n[0].host.as_str(), n[0].port, n[0].first, n[0].last, n[0].myself), ("10.1.2.3", 6380, 0, 16383, true));
    }

    #[test]
    fn replies_have_redis_shapes() {
        let n = nodes(&["127.0.0.1:7000".into()], addr("127.0.0.1:7000"));
        let mut b = BytesMut::new();
        assert!(matches!(answer(&[b"cluster", b"slots"], &n, &mut ReplyWriter::new(&mut b, false)), Answer::Done));
        let want = format!("*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$40\r\n{}\r\n*0\r\n", n[0].id);
        assert_eq!(String::from_utf8_lossy(&b), want);
        let mut b = BytesMut::new();
        answer(&[b"cluster", b"keyslot", b"foo{hash_tag}"], &n, &mut ReplyWriter::new(&mut b, false));
        assert_eq!(&b[..], b":2515\r\n", "the example of Redis's CLUSTER KEYSLOT page");
        let mut b = BytesMut::new();
        answer(&[b"cluster", b"nodes"], &n, &mut ReplyWriter::new(&mut b, false));
        let text = String::from_utf8_lossy(&b).to_string();
        assert!(text.contains(&format!("{} 127.0.0.1:7000@0 myself,master - 0 0 1 connected 0-16383\n", n[0].id)), "{text}");
        let mut b = BytesMut::new();
        answer(&[b"cluster", b"info"], &n, &mut ReplyWriter::new(&mut b, false));
        assert!(String::from_utf8_lossy(&b).contains("cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"));
        match answer(&[b"cluster", b"nope"], &n, &mut ReplyWriter::new(&mut BytesMut::new(), false)) {
            Answer::Error(e) => assert_eq!(e, "ERR unknown subcommand 'nope'. Try CLUSTER HELP."),
            Answer::Done => panic!("an unknown subcommand answered"),
        }
    }
}
