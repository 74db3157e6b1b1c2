//! The proxies as a Redis Cluster to cluster-mode clients: two real engines behind two real
//! proxies that list each other (`--cluster-nodes`), driven by raw RESP, by redis-py's
//! `RedisCluster` (from the virtualenv tests/run.sh prepares), by `redis-cli -c` and by
//! `redis-benchmark --cluster`.

mod common;

use std::path::Path;
use std::process::Command;

use common::{err, free_port, q, temp_dir, Engine, Proxy, Raw, RedisPort};

struct Rig {
    _engines: Vec<Engine>,
    proxies: Vec<Proxy>,
}

/// Two engines, two proxies on ports chosen first (each lists both); tenant alice.
fn rig() -> Rig {
    let engines = vec![Engine::start(&[]), Engine::start(&[])];
    let ports = [free_port(), free_port()];
    let nodes = format!("127.0.0.1:{},127.0.0.1:{}", ports[0], ports[1]);
    let cfg = temp_dir("proxy-cluster").join("terrace.toml");
    std::fs::write(&cfg, "[proxy]\nadmin_password = \"adminpw\"\n[[proxy.tenants]]\nname = \"alice\"\npassword = \"alicepw\"\n").unwrap();
    let proxies = ports
        .iter()
        .map(|p| {
            let port = p.to_string();
            let args = ["--port", &port, "--cluster-nodes", &nodes, "--config", cfg.to_str().unwrap()];
            Proxy::start(&[&engines[0], &engines[1]], &args, &[])
        })
        .collect();
    Rig { _engines: engines, proxies }
}

fn lines(reply: &str) -> Vec<String> {
    reply.lines().map(str::to_string).collect()
}

#[test]
fn each_proxy_is_a_node_with_half_of_the_slots_and_knows_itself() {
    let r = rig();
    let (p0, p1) = (r.proxies[0].port, r.proxies[1].port);
    let mut ids = Vec::new();
    for (i, proxy) in r.proxies.iter().enumerate() {
        let mut c = Raw::connect(proxy.port);
        let slots = c.cmd(&["CLUSTER", "SLOTS"]);
        let want = format!("*2\r\n*3\r\n:0\r\n:8191\r\n*4\r\n$9\r\n127.0.0.1\r\n:{p0}\r\n$40\r\n");
        assert!(slots.starts_with(&want), "{slots:?}");
        assert!(slots.contains(&format!(":8192\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:{p1}\r\n")), "{slots:?}");
        let myid = c.cmd(&["CLUSTER", "MYID"]);
        let myid = lines(&myid)[1].clone();
        assert_eq!(myid.len(), 40);
        let nodes = c.cmd(&["CLUSTER", "NODES"]);
        let mine: Vec<String> = lines(&nodes).into_iter().filter(|l| l.contains("myself")).collect();
        assert_eq!(mine.len(), 1, "{nodes}");
        assert!(mine[0].starts_with(&format!("{myid} 127.0.0.1:{}@0 myself,master - ", proxy.port)), "{nodes}");
        assert!(mine[0].ends_with(if i == 0 { " connected 0-8191" } else { " connected 8192-16383" }), "{nodes}");
        let info = c.cmd(&["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok\r\n") && info.contains("cluster_known_nodes:2\r\n"), "{info}");
        assert_eq!(c.cmd(&["CLUSTER", "KEYSLOT", "foo{hash_tag}"]), ":2515\r\n");
        for cmd in ["READONLY", "READWRITE", "ASKING"] {
            assert_eq!(c.cmd(&[cmd]), "+OK\r\n", "{cmd}");
        }
        assert_eq!(c.cmd(&["CLUSTER", "NOPE"]), "-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.\r\n");
        assert!(c.cmd(&["CLUSTER", "KEYSLOT"]).starts_with("-ERR wrong number of arguments for 'cluster|keyslot' command"));
        ids.push(myid);
    }
    assert_ne!(ids[0], ids[1]);
    // Keys in a slot: counted and listed by the engine owning it, per tenant and database.
    let mut c = r.proxies[0].client();
    for i in 0..30 {
        q::<()>(&mut c, &["SET", &format!("{{user7}}:{i}"), "v"]);
    }
    q::<()>(&mut c, &["SET", "elsewhere", "v"]);
    let slot: i64 = q(&mut c, &["CLUSTER", "KEYSLOT", "{user7}"]);
    assert_eq!(q::<i64>(&mut c, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]), 30);
    let mut some: Vec<String> = q(&mut c, &["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "10"]);
    assert_eq!(some.len(), 10);
    some.sort();
    some.dedup();
    assert!(some.len() == 10 && some.iter().all(|k| k.starts_with("{user7}:")), "{some:?}");
    assert_eq!(q::<Vec<String>>(&mut c, &["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "100"]).len(), 30);
    assert_eq!(err(&mut c, &["CLUSTER", "COUNTKEYSINSLOT", "16384"]), "ResponseError: Invalid or out of range slot");
    assert_eq!(err(&mut c, &["CLUSTER", "GETKEYSINSLOT", "1", "-1"]), "ResponseError: Invalid slot or number of keys");
    q::<()>(&mut c, &["AUTH", "alice", "alicepw"]);
    assert_eq!(q::<i64>(&mut c, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]), 0, "another tenant's keys are not counted");
    // Both proxies describe the same cluster.
    let mut a = Raw::connect(p0);
    let mut b = Raw::connect(p1);
    assert_eq!(a.cmd(&["CLUSTER", "SLOTS"]), b.cmd(&["CLUSTER", "SLOTS"]));
}

#[test]
fn the_console_list_replaces_the_configured_one_and_a_lone_proxy_is_the_whole_cluster() {
    let engine = Engine::start(&[]);
    let proxy = Proxy::start(&[&engine], &[], &[("TERRACE_PROXY_ADMIN_PASSWORD", "adminpw")]);
    let mut c = proxy.client();
    // Alone: one node, every slot, at the address the client reached.
    let slots = Raw::connect(proxy.port).cmd(&["CLUSTER", "SLOTS"]);
    assert!(slots.starts_with(&format!("*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:{}\r\n", proxy.port)), "{slots:?}");
    q::<()>(&mut c, &["AUTH", "admin", "adminpw"]);
    let doc = format!(r#"{{"engines":["127.0.0.1:{}"],"proxies":["127.0.0.1:{}","10.9.9.9:6379","10.9.9.10:6379"]}}"#, engine.port, proxy.port);
    q::<String>(&mut c, &["TERRACE.TOPOLOGY", "SET", &doc]);
    let nodes = Raw::connect(proxy.port).cmd(&["CLUSTER", "NODES"]);
    assert_eq!(lines(&nodes).iter().filter(|l| l.contains(" master ") || l.contains("myself,master")).count(), 3, "{nodes}");
    assert!(nodes.contains(&format!("127.0.0.1:{}@0 myself,master - 0 0 1 connected 0-5461", proxy.port)), "{nodes}");
    assert!(nodes.contains("10.9.9.10:6379@0 master - 0 0 3 connected 10923-16383"), "{nodes}");
    let e = err(&mut c, &["TERRACE.TOPOLOGY", "SET", r#"{"engines":["127.0.0.1:1"],"proxies":["nope"]}"#]);
    assert!(e.contains("cluster_nodes") && e.contains("'nope' is not host:port"), "{e}");
}

/// redis-py's RedisCluster: it reads CLUSTER SLOTS, spreads keys over both proxies, runs a
/// pipeline and a hash-tagged MGET; as a tenant (AUTH first) and as the default tenant.
#[test]
fn redis_py_cluster_client_works_through_the_proxies() {
    let r = rig();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/redis-py/venv/bin/python");
    assert!(python.exists(), "redis-py is missing: run tests/run.sh (or tests/compat/setup-redis-py.sh) first");
    let script = r#"
import sys
from redis.cluster import RedisCluster
port = int(sys.argv[1])
for user, password in [(None, None), ("alice", "alicepw")]:
    rc = RedisCluster(host="127.0.0.1", port=port, username=user, password=password, socket_timeout=10)
    nodes = sorted(n.port for n in rc.get_primaries())
    assert len(nodes) == 2, nodes
    for i in range(300):
        rc.set(f"k:{i}", f"{user}:{i}")
    for i in range(300):
        assert rc.get(f"k:{i}") == f"{user}:{i}".encode(), i
    pipe = rc.pipeline()
    for i in range(100):
        pipe.incr(f"counter:{i}")
        pipe.get(f"k:{i}")
    out = pipe.execute()
    assert out[0::2] == [1] * 100, out[:4]
    assert out[1::2] == [f"{user}:{i}".encode() for i in range(100)]
    rc.mset({"{tag}a": "1", "{tag}b": "2"})
    assert rc.mget("{tag}a", "{tag}b") == [b"1", b"2"]
    assert rc.keyslot("foo{hash_tag}") == 2515
    assert rc.cluster_keyslot("foo{hash_tag}") == 2515
    rc.close()
print("ok")
"#;
    let out = Command::new(&python).args(["-c", script, &r.proxies[0].port.to_string()]).output().expect("run python");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.trim_end().ends_with("ok"), "{text}");
    // What the cluster client wrote is what a plain client of either proxy reads, per tenant.
    for proxy in &r.proxies {
        let mut c = proxy.client();
        assert_eq!(q::<String>(&mut c, &["GET", "k:7"]), "None:7");
        assert_eq!(q::<i64>(&mut c, &["GET", "counter:3"]), 1);
        q::<()>(&mut c, &["AUTH", "alice", "alicepw"]);
        assert_eq!(q::<String>(&mut c, &["GET", "k:7"]), "alice:7");
    }
}

#[test]
fn redis_cli_and_redis_benchmark_in_cluster_mode() {
    let r = rig();
    let port = r.proxies[1].port.to_string();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli").args(["-c", "-p", &port]).args(args).output().expect("redis-cli (Debian's redis-tools) must be installed");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    for i in 0..50 {
        assert_eq!(cli(&["SET", &format!("cli:{i}"), &i.to_string()]), "OK");
    }
    for i in 0..50 {
        assert_eq!(cli(&["GET", &format!("cli:{i}")]), i.to_string());
    }
    let out = Command::new("redis-benchmark")
        .args(["--cluster", "-p", &port, "-t", "set,get", "-n", "2000", "-c", "4", "-q"])
        .output()
        .expect("redis-benchmark (Debian's redis-tools) must be installed");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Cluster has 2 master nodes"), "{text}");
    assert!(text.contains("SET: ") && text.contains("GET: "), "{text}");
    let mut c = r.proxies[0].client();
    assert!(q::<i64>(&mut c, &["DBSIZE"]) >= 50);
}
