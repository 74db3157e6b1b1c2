//! A tenant's reads from replicas (`replica_reads`) through the real proxy: one real engine,
//! a real engine replicating it, and which of the two served each read counted by their own
//! INFO commandstats.

mod common;

use std::time::Duration;

use redis::ConnectionLike;

use common::{eventually, q, temp_dir, Engine, Proxy, RedisPort};

fn gets_served(engine: &Engine) -> u64 {
    let info: String = q(&mut engine.client(), &["INFO", "commandstats"]);
    info.lines().find_map(|l| l.strip_prefix("cmdstat_get:calls=")).and_then(|rest| rest.split(',').next()).and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn connect(proxy: &Proxy, user: &str, password: &str) -> redis::Connection {
    let c = redis::Client::open(format!("redis://{user}:{password}@127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

#[test]
fn a_tenant_with_replica_reads_reads_from_the_replica_and_falls_back_to_the_primary() {
    let primary = Engine::start(&[]);
    let mut replica = Engine::start(&[]);
    q::<()>(&mut replica.client(), &["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
    let cfg = temp_dir("replica-reads").join("terrace.toml");
    std::fs::write(
        &cfg,
        format!(
            "[proxy]\nreplicas = [[\"127.0.0.1:{}\"]]\n\
             [[proxy.tenants]]\nname = \"alice\"\npassword = \"alicepw\"\nreplica_reads = true\n\
             [[proxy.tenants]]\nname = \"bob\"\npassword = \"bobpw\"\n",
            replica.port
        ),
    )
    .unwrap();
    let proxy = Proxy::start(&[&primary], &["--config", cfg.to_str().unwrap()], &[]);
    let mut alice = connect(&proxy, "alice", "alicepw");
    let mut bob = connect(&proxy, "bob", "bobpw");
    for (c, who) in [(&mut alice, "alice"), (&mut bob, "bob")] {
        for i in 0..20 {
            q::<()>(c, &["SET", &format!("k:{i}"), &format!("{who}:{i}")]);
        }
        assert_eq!(q::<i64>(c, &["WAIT", "1", "5000"]), 1, "the replica has {who}'s writes");
    }
    // Alice's reads go to the replica (once the proxy's connection to it is up), with her
    // own values; writes still go to the primary.
    eventually(10, "alice's GETs served by the replica", || {
        let before = gets_served(&replica);
        let v: String = q(&mut alice, &["GET", "k:3"]);
        assert_eq!(v, "alice:3");
        gets_served(&replica) > before
    });
    let (on_primary, on_replica) = (gets_served(&primary), gets_served(&replica));
    for i in 0..20 {
        assert_eq!(q::<String>(&mut alice, &["GET", &format!("k:{i}")]), format!("alice:{i}"));
    }
    assert_eq!(gets_served(&replica) - on_replica, 20);
    assert_eq!(gets_served(&primary), on_primary, "none of alice's reads went to the primary");
    q::<()>(&mut alice, &["SET", "written", "1"]);
    // Bob's reads stay on the primary.
    let (on_primary, on_replica) = (gets_served(&primary), gets_served(&replica));
    for i in 0..20 {
        assert_eq!(q::<String>(&mut bob, &["GET", &format!("k:{i}")]), format!("bob:{i}"));
    }
    assert_eq!(gets_served(&primary) - on_primary, 20);
    assert_eq!(gets_served(&replica), on_replica);
    // The replica gone, alice's reads are served by the primary.
    replica.stop();
    eventually(10, "alice's reads back on the primary", || {
        let before = gets_served(&primary);
        matches!(alice.req_command(redis::cmd("GET").arg("k:5")), Ok(redis::Value::BulkString(v)) if v == b"alice:5") && gets_served(&primary) > before
    });
}
