//! Replication end to end, both ways with a real redis-server 7.0: a `terrace engine` as
//! its replica (REPLICAOF, the full sync, the command stream, acknowledgements WAIT counts,
//! READONLY, ROLE and INFO replication, a dropped link followed again, REPLICAOF NO ONE),
//! and a redis-server as the replica of a Terrace engine (full sync, the stream with
//! absolute expiries and the keys the master expires, WAIT, partial resynchronization,
//! min-replicas-to-write); and an engine replicating an engine.

mod common;

use std::collections::BTreeMap;

use common::{q, Engine, RedisPort};
use redis::Value;

/// Every key of databases 0..16 with its type, a canonical form of its value, and whether
/// it has a time to live.
fn dataset(c: &mut redis::Connection) -> BTreeMap<(usize, String), (String, String, bool)> {
    let mut all = BTreeMap::new();
    for db in 0..16 {
        q::<()>(c, &["SELECT", &db.to_string()]);
        let keys: Vec<String> = q(c, &["KEYS", "*"]);
        for k in keys {
            let kind: String = q(c, &["TYPE", &k]);
            let value = match kind.as_str() {
                "string" => q::<String>(c, &["GET", &k]),
                "list" => q::<Vec<String>>(c, &["LRANGE", &k, "0", "-1"]).join(","),
                "hash" => {
                    let mut m: Vec<(String, String)> = q::<BTreeMap<String, String>>(c, &["HGETALL", &k]).into_iter().collect();
                    m.sort();
                    format!("{m:?}")
                }
                "set" => {
                    let mut m: Vec<String> = q(c, &["SMEMBERS", &k]);
                    m.sort();
                    m.join(",")
                }
                "zset" => q::<Vec<String>>(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"]).join(","),
                "stream" => format!("{:?}", q::<Value>(c, &["XRANGE", &k, "-", "+"])),
                other => panic!("key {k} of type {other}"),
            };
            let ttl: i64 = q(c, &["PTTL", &k]);
            all.insert((db, k), (kind, value, ttl > 0));
        }
    }
    q::<()>(c, &["SELECT", "0"]);
    all
}

fn info_stat(c: &mut redis::Connection, field: &str) -> i64 {
    let text: String = q(c, &["INFO", "stats"]);
    text.lines().find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':'))).unwrap_or_else(|| panic!("no {field} in {text}")).trim().parse().unwrap()
}

fn replication_field(c: &mut redis::Connection, field: &str) -> String {
    let text: String = q(c, &["INFO", "replication"]);
    text.lines().find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':'))).unwrap_or_else(|| panic!("no {field} in {text}")).trim().to_string()
}

/// Writes a mix of every type to the master: `round` makes each call's keys and values
/// differ, so that later rounds overwrite, grow and delete what earlier ones wrote.
fn mixed_writes(c: &mut redis::Connection, round: usize, n: usize) {
    let mut p = redis::pipe();
    for i in 0..n {
        let k = i % 500;
        match i % 12 {
            0 => p.cmd("SET").arg(format!("s:{k}")).arg(format!("v{round}:{i}")),
            1 => p.cmd("INCRBY").arg(format!("n:{k}")).arg(i),
            2 => p.cmd("RPUSH").arg(format!("l:{}", k % 50)).arg(format!("e{round}:{i}")),
            3 => p.cmd("HSET").arg(format!("h:{}", k % 50)).arg(format!("f{}", i % 30)).arg(round),
            4 => p.cmd("SADD").arg(format!("set:{}", k % 50)).arg(i % 200),
            5 => p.cmd("ZADD").arg(format!("z:{}", k % 50)).arg(i as f64 / 7.0).arg(format!("m{}", i % 100)),
            6 => p.cmd("EXPIRE").arg(format!("s:{k}")).arg(3600),
            7 => p.cmd("DEL").arg(format!("s:{}", (k + 7) % 500)),
            8 => p.cmd("SPOP").arg(format!("set:{}", k % 50)),
            9 => p.cmd("LMOVE").arg(format!("l:{}", k % 50)).arg(format!("l:{}", (k + 1) % 50)).arg("LEFT").arg("RIGHT"),
            10 => p.cmd("XADD").arg(format!("x:{}", k % 10)).arg("*").arg("f").arg(i),
            _ => p.cmd("SETEX").arg(format!("t:{k}")).arg(3600).arg(i),
        };
    }
    p.query::<()>(c).unwrap();
    // A transaction, a script's writes, and another database.
    q::<()>(c, &["MULTI"]);
    q::<()>(c, &["INCR", "txn"]);
    q::<()>(c, &["LPUSH", "txn:list", &round.to_string()]);
    q::<Value>(c, &["EXEC"]);
    q::<Value>(c, &["EVAL", "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])", "2", "lua:s", "lua:n", &round.to_string()]);
    q::<()>(c, &["SELECT", "3"]);
    for i in 0..200 {
        q::<()>(c, &["SET", &format!("db3:{i}"), &format!("{round}")]);
    }
    q::<()>(c, &["SELECT", "0"]);
}

#[test]
fn a_terrace_engine_replicates_a_redis_server() {
    let master = common::start_redis();
    let mut m = master.client();
    // The first sync diskless (Redis 7's default: `$EOF:<mark>`), without its 5 s wait.
    q::<()>(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    mixed_writes(&mut m, 0, 40_000);
    let engine = Engine::start(&[]);
    let mut r = engine.client();
    q::<()>(&mut r, &["SET", "replica-only", "gone at the sync"]);
    assert_eq!(q::<Vec<Value>>(&mut r, &["ROLE"])[0], Value::BulkString(b"master".to_vec()));

    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]), "OK");
    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]), "OK Already connected to specified master");
    common::eventually(20, "the replica's link is up", || replication_field(&mut r, "master_link_status") == "up");
    assert_eq!(replication_field(&mut r, "role"), "slave");
    // The master's snapshot replaced the replica's own data.
    assert_eq!(dataset(&mut r), dataset(&mut m));

    // The command stream: more of every type, a transaction, a script, SPOP, relative
    // expiries; WAIT counts the replica once it has acknowledged them.
    // (100,000 writes in all by the end of these rounds.)
    for round in 1..4 {
        mixed_writes(&mut m, round, 20_000);
        assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1, "round {round}: the replica acknowledged the stream");
        assert_eq!(dataset(&mut r), dataset(&mut m), "round {round}");
    }
    assert_eq!(replication_field(&mut m, "connected_slaves"), "1");
    let master_offset: i64 = replication_field(&mut m, "master_repl_offset").parse().unwrap();
    // (At least: the master's PING every 10 s moves both on.)
    common::eventually(5, "the replica's offset reaches the master's", || {
        replication_field(&mut r, "slave_repl_offset").parse::<i64>().unwrap() >= master_offset
    });
    assert_eq!(replication_field(&mut r, "master_replid"), replication_field(&mut m, "master_replid"));
    let role: Vec<Value> = q(&mut r, &["ROLE"]);
    assert_eq!(role[0], Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[2], Value::Int(master.port as i64));
    assert_eq!(role[3], Value::BulkString(b"connected".to_vec()));
    assert!(matches!(role[4], Value::Int(o) if o >= master_offset), "{role:?}");

    // Its clients may read, not write (nor queue a write, nor write from a script).
    assert_eq!(q::<String>(&mut r, &["GET", "lua:s"]), "3");
    let e = redis::cmd("SET").arg("k").arg("v").query::<()>(&mut r).unwrap_err();
    assert!(e.to_string().contains("You can't write against a read only replica"), "{e}");
    let e = redis::cmd("EVAL").arg("return redis.call('DEL', 'lua:s')").arg(0).query::<()>(&mut r).unwrap_err();
    assert!(e.to_string().contains("read only replica"), "{e}");

    // A dropped link continues where it stopped (+CONTINUE from the master's backlog; the
    // stream was in another database when it broke).
    q::<()>(&mut m, &["SELECT", "5"]);
    q::<()>(&mut m, &["SET", "in-db-5", "1"]);
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1);
    let syncs: i64 = info_stat(&mut m, "sync_full");
    q::<i64>(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
    q::<()>(&mut m, &["INCR", "in-db-5"]);
    q::<()>(&mut m, &["SELECT", "0"]);
    mixed_writes(&mut m, 4, 3000);
    common::eventually(20, "the link is back", || {
        replication_field(&mut r, "master_link_status") == "up" && replication_field(&mut m, "connected_slaves") == "1"
    });
    assert_eq!(info_stat(&mut m, "sync_partial_ok"), 1, "a partial resynchronization");
    assert_eq!(info_stat(&mut m, "sync_full"), syncs, "no new full sync");
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1);
    assert_eq!(dataset(&mut r), dataset(&mut m), "after the partial resynchronization");

    // Following the master anew is a full sync, now from a snapshot on disk (`$<length>`).
    q::<()>(&mut m, &["CONFIG", "SET", "repl-diskless-sync", "no"]);
    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]), "OK");
    common::eventually(20, "the link is back", || replication_field(&mut r, "master_link_status") == "up");
    assert_eq!(info_stat(&mut m, "sync_full"), syncs + 1, "one more full sync");
    mixed_writes(&mut m, 5, 3000);
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1);
    assert_eq!(dataset(&mut r), dataset(&mut m), "after the new full sync");

    // REPLICAOF NO ONE: a master again, with the data it had.
    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(replication_field(&mut r, "role"), "master");
    q::<()>(&mut r, &["SET", "mine", "now"]);
    assert_eq!(q::<String>(&mut r, &["GET", "mine"]), "now");
    q::<()>(&mut m, &["SET", "s:0", "after NO ONE"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_ne!(q::<Option<String>>(&mut r, &["GET", "s:0"]).as_deref(), Some("after NO ONE"), "no longer follows");
}

#[test]
fn replicaof_refuses_a_bad_port_and_reports_a_master_it_cannot_reach() {
    let engine = Engine::start(&[]);
    let mut r = engine.client();
    for port in ["0", "65536", "x"] {
        let e = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(port).query::<()>(&mut r).unwrap_err();
        assert!(e.to_string().contains("Invalid master port"), "{e}");
    }
    let nobody = common::free_port();
    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "127.0.0.1", &nobody.to_string()]), "OK");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(replication_field(&mut r, "master_link_status"), "down");
    let role: Vec<Value> = q(&mut r, &["ROLE"]);
    assert_eq!(role[3], Value::BulkString(b"connecting".to_vec()));
    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "NO", "ONE"]), "OK");
    q::<()>(&mut r, &["SET", "k", "v"]);
}

fn dbsize(c: &mut redis::Connection) -> i64 {
    q(c, &["DBSIZE"])
}

#[test]
fn a_redis_server_replicates_a_terrace_engine() {
    let engine = Engine::start(&[]);
    let mut m = engine.client();
    mixed_writes(&mut m, 0, 40_000);
    assert_eq!(q::<i64>(&mut m, &["WAIT", "0", "0"]), 0);
    let replica = common::start_redis_with(&["--replicaof", "127.0.0.1", &engine.port.to_string()]);
    let mut r = replica.client();
    common::eventually(20, "the replica's link is up", || replication_field(&mut r, "master_link_status") == "up");
    assert_eq!(info_stat(&mut m, "sync_full"), 1);
    assert_eq!(dataset(&mut r), dataset(&mut m), "after the full sync");

    // The stream: every type, a transaction, a script's writes, SPOP, XADD *, relative
    // expiries (sent as absolute times), another database.
    // (100,000 writes in all by the end of these rounds.)
    for round in 1..4 {
        mixed_writes(&mut m, round, 20_000);
        assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1, "round {round}: the replica acknowledged");
        assert_eq!(dataset(&mut r), dataset(&mut m), "round {round}");
    }
    let (master_ttl, replica_ttl): (i64, i64) = (q(&mut m, &["PEXPIRETIME", "t:1"]), q(&mut r, &["PEXPIRETIME", "t:1"]));
    assert_eq!(master_ttl, replica_ttl, "the same expiry time, not the same relative one");
    assert_eq!(replication_field(&mut m, "connected_slaves"), "1");
    assert!(replication_field(&mut m, "slave0").contains(&format!("port={},state=online", replica.port)));
    let role: Vec<Value> = q(&mut m, &["ROLE"]);
    assert_eq!(role[0], Value::BulkString(b"master".to_vec()));
    assert!(matches!(&role[2], Value::Array(replicas) if replicas.len() == 1), "{role:?}");

    // Keys the master expires (its sweep, and a read finding one) reach the replica as DELs:
    // a Redis replica does not expire keys on its own, and counts them until told.
    for i in 0..100 {
        q::<()>(&mut m, &["SET", &format!("brief:{i}"), "x", "PX", "30"]);
    }
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert_eq!(q::<Option<String>>(&mut m, &["GET", "brief:0"]), None);
    common::eventually(10, "the master's sweep expires the rest", || q::<Vec<String>>(&mut m, &["KEYS", "brief:*"]).is_empty());
    q::<()>(&mut m, &["SET", "after-expiry", "1"]);
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1);
    assert_eq!(dbsize(&mut r), dbsize(&mut m), "expired keys deleted on the replica");

    // A dropped link resumes from the backlog (+CONTINUE), not with a new full sync.
    q::<i64>(&mut r, &["CLIENT", "KILL", "TYPE", "master"]);
    mixed_writes(&mut m, 4, 2000);
    common::eventually(20, "the link is back", || replication_field(&mut r, "master_link_status") == "up");
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1);
    assert_eq!(info_stat(&mut m, "sync_partial_ok"), 1, "a partial resynchronization");
    assert_eq!(info_stat(&mut m, "sync_full"), 1, "no second full sync");
    assert_eq!(dataset(&mut r), dataset(&mut m), "after the partial resynchronization");

    // min-replicas-to-write: writes refused while fewer good replicas are attached.
    q::<()>(&mut m, &["CONFIG", "SET", "min-replicas-to-write", "2"]);
    let e = redis::cmd("SET").arg("k").arg("v").query::<()>(&mut m).unwrap_err();
    assert!(e.to_string().contains("Not enough good replicas to write"), "{e}");
    redis::cmd("GET").arg("s:1").query::<Option<String>>(&mut m).expect("reads still run");
    q::<()>(&mut m, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    q::<()>(&mut m, &["SET", "k", "v"]);

    // The replica goes: WAIT counts nobody, after its timeout.
    q::<()>(&mut m, &["CONFIG", "SET", "min-replicas-to-write", "0"]);
    drop(replica);
    common::eventually(10, "the master notices", || replication_field(&mut m, "connected_slaves") == "0");
    q::<()>(&mut m, &["SET", "k", "w"]);
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "200"]), 0);
}

#[test]
fn a_terrace_engine_replicates_a_terrace_engine() {
    let master = Engine::start(&[]);
    let mut m = master.client();
    let mut alice = master.client();
    q::<()>(&mut alice, &["TERRACE.NAMESPACE", "alice"]);
    mixed_writes(&mut m, 0, 3000);
    mixed_writes(&mut alice, 0, 2000);
    let replica = Engine::start(&[]);
    let mut r = replica.client();
    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]), "OK");
    common::eventually(20, "the replica's link is up", || replication_field(&mut r, "master_link_status") == "up");
    let mut r_alice = replica.client();
    q::<()>(&mut r_alice, &["TERRACE.NAMESPACE", "alice"]);
    assert_eq!(dataset(&mut r), dataset(&mut m), "after the full sync");
    assert_eq!(dataset(&mut r_alice), dataset(&mut alice), "a tenant's data after the full sync");
    // The stream carries every namespace: a tenant's writes (its transactions and scripts
    // too), then a tenant that appears after the sync.
    let mut bob = master.client();
    q::<()>(&mut bob, &["TERRACE.NAMESPACE", "bob"]);
    for round in 1..3 {
        mixed_writes(&mut m, round, 3000);
        mixed_writes(&mut alice, round, 2000);
        mixed_writes(&mut bob, round, 1000);
        assert_eq!(q::<i64>(&mut alice, &["WAIT", "1", "10000"]), 1, "round {round}");
        assert_eq!(dataset(&mut r), dataset(&mut m), "round {round}");
        assert_eq!(dataset(&mut r_alice), dataset(&mut alice), "round {round}: alice");
    }
    let mut r_bob = replica.client();
    q::<()>(&mut r_bob, &["TERRACE.NAMESPACE", "bob"]);
    assert_eq!(dataset(&mut r_bob), dataset(&mut bob), "bob, whose namespace the stream made");
    // A redis-server replica of the same engine gets the default namespace's data only.
    let redis = common::start_redis_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut rr = redis.client();
    common::eventually(20, "the redis replica's link is up", || replication_field(&mut rr, "master_link_status") == "up");
    mixed_writes(&mut alice, 3, 500);
    mixed_writes(&mut m, 3, 500);
    assert_eq!(q::<i64>(&mut m, &["WAIT", "2", "10000"]), 2, "both replicas, each by its own stream");
    assert_eq!(dataset(&mut rr), dataset(&mut m));
    assert_eq!(dataset(&mut r_alice), dataset(&mut alice));
    assert_ne!(replication_field(&mut r, "master_replid"), replication_field(&mut rr, "master_replid"), "two streams, two IDs");
    // A tenant deleted on the master is deleted on its replica (a Redis replica, holding no
    // tenant, is told nothing).
    drop(r_bob);
    assert_eq!(q::<i64>(&mut m, &["TERRACE.DROPNAMESPACE", "bob"]), 1);
    mixed_writes(&mut m, 4, 100);
    assert_eq!(q::<i64>(&mut m, &["WAIT", "2", "10000"]), 2);
    assert_eq!(q::<Vec<String>>(&mut r, &["TERRACE.NAMESPACES"]), ["alice"], "the replica dropped bob");
    assert_eq!(dataset(&mut rr), dataset(&mut m));
    assert_eq!(replication_field(&mut rr, "master_link_status"), "up");
}

#[test]
fn wait_through_the_proxy_counts_the_replicas_of_every_engine_written_to() {
    let (e0, e1) = (Engine::start(&[]), Engine::start(&[]));
    let replica = Engine::start(&[]);
    let mut r = replica.client();
    q::<()>(&mut r, &["REPLICAOF", "127.0.0.1", &e0.port.to_string()]);
    common::eventually(20, "the replica's link is up", || replication_field(&mut r, "master_link_status") == "up");
    let proxy = common::Proxy::start(&[&e0, &e1], &[], &[]);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    // A key of each engine (written through the proxy, found on the engine).
    let mut on = [None, None];
    let mut direct = e0.client();
    for i in 0.. {
        let key = format!("key:{i}");
        q::<()>(&mut c, &["SET", &key, "1"]);
        let engine = if q::<i64>(&mut direct, &["EXISTS", &key]) == 1 { 0 } else { 1 };
        on[engine].get_or_insert(key);
        if on.iter().all(Option::is_some) {
            break;
        }
    }
    let [k0, k1] = on.map(Option::unwrap);
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "300"]), 0, "engine 1 was written to and has no replica");
    q::<()>(&mut c, &["SET", &k0, "2"]);
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "5000"]), 1, "only engine 0 written since: its replica has it");
    assert_eq!(q::<String>(&mut r, &["GET", &k0]), "2");
    q::<()>(&mut c, &["INCR", &k0]);
    q::<()>(&mut c, &["INCR", &k1]);
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "300"]), 0, "the smallest count of the engines written to");
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "5000"]), 1, "nothing written since: engine 0 answers for its replicas");
    // A WAIT holds the client's own connection, not the ones other clients share.
    let mut other = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    q::<()>(&mut c, &["SET", &k1, "x"]);
    let started = std::time::Instant::now();
    let waiter = std::thread::spawn(move || q::<i64>(&mut c, &["WAIT", "1", "1500"]));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(q::<String>(&mut other, &["GET", &k1]), "x");
    assert!(started.elapsed() < std::time::Duration::from_millis(1000), "another client's GET did not wait for the WAIT");
    assert_eq!(waiter.join().unwrap(), 0);
}

#[test]
fn a_promoted_replica_continues_the_stream_for_the_other_replica_and_the_old_master() {
    let a = Engine::start(&[]);
    let mut ma = a.client();
    mixed_writes(&mut ma, 0, 3000);
    let (b, c) = (Engine::start(&[]), Engine::start(&[]));
    let (mut mb, mut mc) = (b.client(), c.client());
    for r in [&mut mb, &mut mc] {
        q::<()>(r, &["REPLICAOF", "127.0.0.1", &a.port.to_string()]);
        common::eventually(20, "the replica's link is up", || replication_field(r, "master_link_status") == "up");
    }
    mixed_writes(&mut ma, 1, 3000);
    q::<()>(&mut ma, &["SELECT", "4"]);
    q::<()>(&mut ma, &["SET", "in-db-4", "a"]);
    q::<()>(&mut ma, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut ma, &["WAIT", "2", "10000"]), 2);
    let a_id = replication_field(&mut ma, "master_replid");
    let a_offset: u64 = replication_field(&mut ma, "master_repl_offset").parse().unwrap();
    // (WAIT's own REPLCONF GETACK is in A's stream after the writes it waited for: the
    // replicas have it once their offsets reach A's.)
    for r in [&mut mb, &mut mc] {
        common::eventually(20, "the replica has all of A's stream", || replication_field(r, "slave_repl_offset") == a_offset.to_string());
    }

    // B is promoted: it keeps A's ID as its previous one, up to where it had followed A.
    assert_eq!(q::<String>(&mut mb, &["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(replication_field(&mut mb, "master_replid2"), a_id);
    assert_eq!(replication_field(&mut mb, "second_repl_offset"), (a_offset + 1).to_string());
    assert_ne!(replication_field(&mut mb, "master_replid"), a_id);
    // C follows B with a partial resynchronization (PSYNC2), and so does A, turned replica
    // without having written more.
    q::<()>(&mut mc, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    common::eventually(20, "C follows B", || replication_field(&mut mc, "master_link_status") == "up");
    q::<()>(&mut ma, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    common::eventually(20, "A follows B", || replication_field(&mut ma, "master_link_status") == "up");
    assert_eq!(info_stat(&mut mb, "sync_partial_ok"), 2, "both continued");
    assert_eq!(info_stat(&mut mb, "sync_full"), 0, "no full sync");
    // B's writes reach both, in the databases they were made in.
    mixed_writes(&mut mb, 2, 3000);
    q::<()>(&mut mb, &["SELECT", "4"]);
    q::<()>(&mut mb, &["INCR", "counter-4"]);
    q::<()>(&mut mb, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut mb, &["WAIT", "2", "10000"]), 2);
    assert_eq!(dataset(&mut mc), dataset(&mut mb));
    assert_eq!(dataset(&mut ma), dataset(&mut mb));
}

#[test]
fn a_replica_gives_its_master_the_masterauth_password() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::temp_dir("masterauth");
    let secret = dir.join("engine.secret");
    std::fs::write(&secret, "replication-secret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let secret = secret.to_str().unwrap();
    let master = Engine::start(&["--requirepass-file", secret]);
    let mut m = master.client();
    q::<()>(&mut m, &["AUTH", "replication-secret"]);
    q::<()>(&mut m, &["SET", "k", "v"]);
    // Without the password the link stays down, saying why.
    let plain = Engine::start(&[]);
    let mut p = plain.client();
    q::<()>(&mut p, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert_eq!(replication_field(&mut p, "master_link_status"), "down");
    // With it (CONFIG SET masterauth), the link comes up; from the file at start, too.
    q::<()>(&mut p, &["CONFIG", "SET", "masterauth", "replication-secret"]);
    common::eventually(20, "the link is up with the password", || replication_field(&mut p, "master_link_status") == "up");
    assert_eq!(q::<String>(&mut p, &["GET", "k"]), "v");
    let filed = Engine::start(&["--masterauth-file", secret, "--requirepass-file", secret]);
    let mut f = filed.client();
    q::<()>(&mut f, &["AUTH", "replication-secret"]);
    q::<()>(&mut f, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    common::eventually(20, "the link is up with the file's password", || replication_field(&mut f, "master_link_status") == "up");
    assert_eq!(q::<String>(&mut f, &["GET", "k"]), "v");
}

fn info_number(c: &mut redis::Connection, section: &str, field: &str) -> f64 {
    let text: String = q(c, &["INFO", section]);
    text.lines().find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':'))).unwrap_or_else(|| panic!("no {field}")).trim().parse().unwrap()
}

/// An engine with a PMem tier and a compressing tenant, and a replica configured alike (as
/// the console pushes tenants' settings to every engine): the same logical data, and about
/// the same memory (the replica encodes and places values by its own settings).
#[test]
fn a_replica_of_a_tiered_compressing_engine_holds_the_same_data_in_about_the_same_memory() {
    let tiered = |tag: &str| {
        let dir = common::temp_dir(tag);
        let arena = dir.join("pmem.arena");
        let args = ["--pmem-path", arena.to_str().unwrap(), "--pmem-size", "64mb", "--dram-max", "2mb", "--tier-policy", "dram-first"];
        Engine::start_in(&dir, &args, &[])
    };
    let (master, replica) = (tiered("tiered-master"), tiered("tiered-replica"));
    let (mut m, mut r) = (master.client(), replica.client());
    let (mut alice, mut r_alice) = (master.client(), replica.client());
    for c in [&mut alice, &mut r_alice] {
        q::<()>(c, &["TERRACE.NAMESPACE", "alice", "COMPRESSION", "zstd", "COMPRESSION-MIN-SIZE", "16"]);
    }
    let value = |i: usize| format!("{{\"id\":{i},\"city\":\"Springfield\",\"country\":\"US\",\"population\":{},\"tags\":[\"a\",\"b\"]}}", i * 7);
    for (c, prefix) in [(&mut m, "d"), (&mut alice, "a")] {
        let mut p = redis::pipe();
        for i in 0..20_000 {
            p.cmd("SET").arg(format!("{prefix}:{i}")).arg(value(i)).ignore();
        }
        p.query::<()>(c).unwrap();
    }
    q::<()>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    common::eventually(30, "the replica's link is up", || replication_field(&mut r, "master_link_status") == "up");
    // More after the sync, through the stream.
    for i in 20_000..25_000 {
        q::<()>(&mut alice, &["SET", &format!("a:{i}"), &value(i)]);
    }
    assert_eq!(q::<i64>(&mut alice, &["WAIT", "1", "10000"]), 1);
    assert_eq!(dataset(&mut r), dataset(&mut m), "the default namespace");
    assert_eq!(dataset(&mut r_alice), dataset(&mut alice), "the compressing tenant");
    assert!(info_number(&mut m, "tiers", "pmem_keys") > 0.0 && info_number(&mut r, "tiers", "pmem_keys") > 0.0, "values in PMem on both");
    for (section, field) in [("memory", "used_memory"), ("tiers", "pmem_value_bytes")] {
        let (a, b) = (info_number(&mut m, section, field), info_number(&mut r, section, field));
        assert!((b / a - 1.0).abs() <= 0.10, "{field}: the replica's {b} vs the primary's {a}");
    }
}

/// A replica killed while its full sync is loading, started again on its data directory and
/// pointed at the master again, converges.
#[test]
fn a_replica_restarted_mid_sync_converges() {
    let master = Engine::start(&[]);
    let mut m = master.client();
    let mut p = redis::pipe();
    for i in 0..300_000 {
        p.cmd("SET").arg(format!("key:{i}")).arg(format!("value of key {i} with some padding to be loaded")).ignore();
    }
    p.query::<()>(&mut m).unwrap();
    let mut replica = Engine::start(&[]);
    let mut r = replica.client();
    q::<()>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    // Killed while it loads the master's snapshot (INFO persistence `loading:1`), when its
    // clients get -LOADING rather than a keyspace half replaced.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while info_number(&mut r, "persistence", "loading") != 1.0 {
        assert!(std::time::Instant::now() < deadline, "the load did not start");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let e = redis::cmd("GET").arg("key:1").query::<Option<String>>(&mut r).unwrap_err();
    assert!(e.to_string().contains("Redis is loading the dataset in memory"), "{e}");
    replica.restart(&[]);
    let mut r = replica.client();
    q::<()>(&mut m, &["SET", "after", "the restart"]);
    q::<()>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    common::eventually(30, "the restarted replica's link is up", || replication_field(&mut r, "master_link_status") == "up");
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1);
    assert_eq!(q::<i64>(&mut r, &["DBSIZE"]), 300_001);
    assert_eq!(q::<String>(&mut r, &["GET", "after"]), "the restart");
    assert_eq!(q::<String>(&mut r, &["GET", "key:299999"]), "value of key 299999 with some padding to be loaded");
}

/// A full sync made while writes go on is one instant of the stream: the image is started
/// with every shard held and then read shard by shard, each before its first change, while
/// writers keep writing (counters, lists moved and popped, transactions, scripts). A change
/// that were both in the image and in the stream after it would be applied twice by the
/// replicas (a Terrace engine and a redis-server), one in neither lost.
#[test]
fn a_full_sync_under_writes_is_one_instant_of_the_stream() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let master = Engine::start(&[]);
    let mut m = master.client();
    let mut p = redis::pipe();
    for i in 0..30_000 {
        p.cmd("SET").arg(format!("bulk:{i}")).arg(format!("a value of some length, number {i}")).ignore();
    }
    p.query::<()>(&mut m).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut w = master.client();
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                mixed_writes(&mut w, round, 600);
            }
            round
        });
        let replica = Engine::start(&[]);
        let mut r = replica.client();
        q::<()>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        let redis = common::start_redis_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
        let mut rr = redis.client();
        common::eventually(30, "both links are up", || {
            replication_field(&mut r, "master_link_status") == "up" && replication_field(&mut rr, "master_link_status") == "up"
        });
        stop.store(true, Ordering::Relaxed);
        let rounds = writer.join().expect("the writer ends");
        assert!(rounds > 1, "the writer wrote during the syncs ({rounds} rounds)");
        assert_eq!(q::<i64>(&mut m, &["WAIT", "2", "10000"]), 2);
        let want = dataset(&mut m);
        for (name, got) in [("the Terrace replica", dataset(&mut r)), ("the redis-server replica", dataset(&mut rr))] {
            let differ: Vec<_> = want.iter().filter(|&(k, v)| got.get(k) != Some(v)).map(|(k, v)| (k, v, got.get(k))).take(5).collect();
            assert!(
                differ.is_empty() && got.len() == want.len(),
                "{name}: {} keys, the master {}; (key, master's, replica's): {differ:?}",
                got.len(),
                want.len()
            );
        }
    });
}

/// A full sync as a Redis replica that reads the diskless form asks for it (`REPLCONF capa
/// eof`): `$EOF:<40-byte mark>`, the RDB image, the mark, as Redis 7 sends it by default
/// (`repl-diskless-sync yes`); with it off, or to a replica without that capability,
/// `$<length>` and the image (an engine replica always gets that form).
#[test]
fn a_full_sync_is_diskless_for_a_replica_that_reads_that_form() {
    use std::io::{BufRead, BufReader, Read, Write};
    let e = Engine::start(&[]);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut e.client()).unwrap();
    let sync = |capa_eof: bool| -> (String, Vec<u8>) {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        if capa_eof {
            s.write_all(b"*5\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n").unwrap();
            r.read_line(&mut line).unwrap();
            assert_eq!(line, "+OK\r\n");
        }
        s.write_all(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n").unwrap();
        line.clear();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("+FULLRESYNC "), "{line}");
        line.clear();
        r.read_line(&mut line).unwrap();
        let header = line.trim_end().to_string();
        let body = match header.strip_prefix("$EOF:") {
            Some(mark) => {
                assert_eq!(mark.len(), 40);
                let mut body = Vec::new();
                let mut byte = [0u8; 1];
                while !body.ends_with(mark.as_bytes()) {
                    r.read_exact(&mut byte).unwrap();
                    body.push(byte[0]);
                }
                body.truncate(body.len() - 40);
                body
            }
            None => {
                let n: usize = header[1..].parse().unwrap();
                let mut body = vec![0u8; n];
                r.read_exact(&mut body).unwrap();
                body
            }
        };
        (header, body)
    };
    let (header, diskless) = sync(true);
    assert!(header.starts_with("$EOF:"), "{header}");
    let has_k = |image: &[u8]| image.windows(4).any(|w| w == b"\x01k\x01v");
    assert!(diskless.starts_with(b"REDIS") && has_k(&diskless), "the image, without the mark");
    let (header, plain) = sync(false);
    assert!(header.starts_with('$') && !header.starts_with("$EOF:"), "{header}");
    assert!(plain.starts_with(b"REDIS") && has_k(&plain));
    let _: () = redis::cmd("CONFIG").arg("SET").arg("repl-diskless-sync").arg("no").query(&mut e.client()).unwrap();
    let (header, _) = sync(true);
    assert!(!header.starts_with("$EOF:"), "disk-backed form when repl-diskless-sync is off: {header}");
}

/// A master may send the command stream right behind a diskless snapshot's end mark, in the
/// same packet: the replica finds the mark there, loads the snapshot and applies what
/// follows. (A stand-in master on a socket, speaking the protocol byte by byte.)
#[test]
fn a_replica_finds_the_end_mark_with_the_stream_right_behind_it() {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let e = Engine::start(&[]);
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(port).query(&mut e.client()).unwrap();
    let (socket, _) = listener.accept().unwrap();
    socket.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut w = socket.try_clone().unwrap();
    let mut r = BufReader::new(socket);
    let mut command = || -> Vec<String> {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let n: usize = line.trim_end().strip_prefix('*').unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
        (0..n)
            .map(|_| {
                line.clear();
                r.read_line(&mut line).unwrap();
                let len: usize = line.trim_end()[1..].parse().unwrap();
                let mut arg = vec![0u8; len + 2];
                r.read_exact(&mut arg).unwrap();
                String::from_utf8_lossy(&arg[..len]).into_owned()
            })
            .collect()
    };
    loop {
        let argv = command();
        match argv[0].to_ascii_uppercase().as_str() {
            "PING" => w.write_all(b"+PONG\r\n").unwrap(),
            "REPLCONF" => w.write_all(b"+OK\r\n").unwrap(),
            "PSYNC" => break,
            other => panic!("unexpected {other}"),
        }
    }
    let mark = "0123456789abcdef0123456789abcdef01234567";
    let mut packet = format!("+FULLRESYNC {} 0\r\n$EOF:{mark}\r\n", "f".repeat(40)).into_bytes();
    packet.extend_from_slice(b"REDIS0009\xff\0\0\0\0\0\0\0\0"); // an empty image (no checksum)
    packet.extend_from_slice(mark.as_bytes());
    packet.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
    w.write_all(&packet).unwrap();
    common::eventually(10, "the write behind the mark is applied", || {
        redis::cmd("GET").arg("k").query::<Option<String>>(&mut e.client()).ok().flatten().as_deref() == Some("v")
    });
}

/// Issue 46, finding 8: deleting a tenant on a replicated engine hung every engine — the drop
/// held the namespace list while the stream, switching from another tenant's namespace to
/// the default one, named it under the same (non-reentrant) lock. The stream's last write is
/// a tenant's here, as it is on a busy appliance.
#[test]
fn a_tenant_is_dropped_on_a_replicated_engine_whatever_namespace_the_stream_is_in() {
    let master = Engine::start(&[]);
    let replica = Engine::start(&[]);
    let mut r = replica.client();
    assert_eq!(q::<String>(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]), "OK");
    common::eventually(20, "the replica's link is up", || replication_field(&mut r, "master_link_status") == "up");
    let mut m = master.client();
    m.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    for tenant in ["alice", "bob"] {
        let mut c = master.client();
        q::<()>(&mut c, &["TERRACE.NAMESPACE", tenant]);
        mixed_writes(&mut c, 0, 200);
    }
    // The last write before the drop is in a tenant's namespace.
    let mut alice = master.client();
    q::<()>(&mut alice, &["TERRACE.NAMESPACE", "alice"]);
    q::<()>(&mut alice, &["SET", "last", "alice's"]);
    assert_eq!(q::<i64>(&mut m, &["TERRACE.DROPNAMESPACE", "bob"]), 1, "the drop answers");
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1, "the replica follows");
    r.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    assert_eq!(q::<Vec<String>>(&mut r, &["TERRACE.NAMESPACES"]), ["alice"], "the replica dropped bob");
    // Both still serve every namespace, and the stream goes on.
    q::<()>(&mut alice, &["SET", "after", "1"]);
    q::<()>(&mut m, &["SET", "after", "1"]);
    assert_eq!(q::<i64>(&mut m, &["WAIT", "1", "10000"]), 1);
    let mut r_alice = replica.client();
    q::<()>(&mut r_alice, &["TERRACE.NAMESPACE", "alice"]);
    assert_eq!(dataset(&mut r_alice), dataset(&mut alice));
    assert_eq!(dataset(&mut r), dataset(&mut m));
}

/// Issue 46, finding 2: after a failover, a client's existing connection sent WAIT, MULTI/EXEC
/// and blocking calls on over its own engine link to the old primary (now a replica): "WAIT
/// cannot be used with replica instances", READONLY. They follow the engine's new address.
#[test]
fn a_clients_own_engine_links_follow_a_failover() {
    let (e0, e1) = (Engine::start(&[]), Engine::start(&[]));
    let standby = Engine::start(&[]);
    let mut s = standby.client();
    q::<()>(&mut s, &["REPLICAOF", "127.0.0.1", &e0.port.to_string()]);
    common::eventually(20, "the standby's link is up", || replication_field(&mut s, "master_link_status") == "up");
    let proxy = common::Proxy::start(&[&e0, &e1], &[], &[("TERRACE_PROXY_ADMIN_PASSWORD", common::PROXY_ADMIN_PASSWORD)]);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    let mut direct = e0.client();
    let key = (0..).map(|i| format!("key:{i}")).find(|k| {
        q::<()>(&mut c, &["SET", k, "1"]);
        q::<i64>(&mut direct, &["EXISTS", k]) == 1
    });
    let key = key.unwrap();
    // The client's own links to engine 0: WAIT's, a transaction's, a blocking call's.
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "5000"]), 1);
    let (n,): (i64,) = redis::pipe().atomic().cmd("INCR").arg(&key).query(&mut c).unwrap();
    assert_eq!(n, 2);
    assert_eq!(q::<Option<Vec<String>>>(&mut c, &["BLPOP", &format!("{{{key}}}:list"), "0.05"]), None);
    // A planned failover: the standby promoted, the old primary following it, the proxy
    // told (as the console does).
    q::<()>(&mut s, &["REPLICAOF", "NO", "ONE"]);
    q::<()>(&mut direct, &["REPLICAOF", "127.0.0.1", &standby.port.to_string()]);
    common::eventually(20, "the old primary follows the new one", || replication_field(&mut direct, "master_link_status") == "up");
    let mut admin = redis::Client::open(format!("redis://admin:{}@127.0.0.1:{}/", common::PROXY_ADMIN_PASSWORD, proxy.port)).unwrap().get_connection().unwrap();
    let doc = serde_json::json!({ "engines": [format!("127.0.0.1:{}", standby.port), format!("127.0.0.1:{}", e1.port)] }).to_string();
    let _: String = q(&mut admin, &["TERRACE.TOPOLOGY", "SET", &doc]);
    // The same client connection: every call reaches the new primary.
    q::<()>(&mut c, &["SET", &key, "10"]);
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "5000"]), 1, "WAIT on the new primary, whose replica the old one is");
    let (n,): (i64,) = redis::pipe().atomic().cmd("INCR").arg(&key).query(&mut c).unwrap();
    assert_eq!(n, 11, "the transaction ran on the new primary");
    q::<()>(&mut c, &["RPUSH", &format!("{{{key}}}:list"), "x"]);
    assert_eq!(q::<Option<Vec<String>>>(&mut c, &["BLPOP", &format!("{{{key}}}:list"), "1"]), Some(vec![format!("{{{key}}}:list"), "x".to_string()]));
    assert_eq!(q::<String>(&mut s, &["GET", &key]), "11");
}
