//! Fencing across a failover, with the storage tier on PostgreSQL (Debian's package, started
//! by the test): a write-back primary is paused (SIGSTOP), not killed, while the console
//! promotes its replica under a new primary term; once it runs again, storage refuses what
//! it flushes, it stops taking writes, and storage keeps the new primary's values.

mod common;

use common::{eventually, free_port, q, Console, Engine, Postgres, Proxy, RedisPort};
use terrace_engine::storage::{postgres, tier::storage_key};

fn info(e: &Engine, field: &str) -> Option<String> {
    let text: String = redis::cmd("INFO").arg("replication").query(&mut e.client()).ok()?;
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
}

fn signal(e: &Engine, sig: i32) {
    // SAFETY: kill(2) on the pid of a child this test started and still owns.
    assert_eq!(unsafe { libc::kill(e.child.id() as i32, sig) }, 0);
}

/// The value storage holds for key `key` of the default tenant's database 0, if any.
fn stored(storage: &terrace_engine::storage::Storage, key: &str) -> Option<Vec<u8>> {
    storage.block_on(storage.get("default".into(), vec![storage_key(0, key.as_bytes())])).unwrap().pop().unwrap()
}

fn holds(record: &Option<Vec<u8>>, value: &str) -> bool {
    record.as_ref().is_some_and(|r| r.windows(value.len()).any(|w| w == value.as_bytes()))
}

#[test]
fn a_paused_primary_cannot_flush_once_its_replica_took_over() {
    let pg = Postgres::start();
    let url = pg.url();
    let storage = postgres::connect(&url).unwrap();
    // The primary flushes only when two keys are dirty (its interval is ten minutes), so what
    // it holds unflushed is up to the test; the replica flushes every 50 ms once promoted.
    let flags = |interval: &str| -> Vec<String> {
        ["--storage", "postgres", "--storage-url", &url, "--storage-mode", "write-back", "--flush-interval-ms", interval, "--flush-batch", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let start = |flags: Vec<String>| Engine::start(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    let primary = start(flags("600000"));
    let replica = start(flags("50"));
    let proxy = Proxy::start_admin_on(free_port(), &[&primary]);
    let replicas = format!("127.0.0.1:{}", replica.port);
    let console = Console::start_with(&[&primary], &[&proxy], &["--replicas", &replicas, "--health-ms", "200", "--failover-after-ms", "1000"]);
    eventually(20, "the replica follows the primary", || info(&replica, "master_link_status").as_deref() == Some("up"));
    eventually(20, "the console gives the primary its term", || info(&primary, "terrace_term_epoch").as_deref() == Some("1"));
    assert_eq!(info(&primary, "terrace_term_group").as_deref(), Some("range-0"));

    let mut p = primary.client();
    let _: () = redis::cmd("SET").arg("a").arg("first").query(&mut p).unwrap();
    let _: () = redis::cmd("SET").arg("b").arg("first").query(&mut p).unwrap();
    eventually(10, "a full batch is flushed", || holds(&stored(&storage, "a"), "first") && holds(&stored(&storage, "b"), "first"));
    // Dirty in the primary's cache only when it is paused.
    let _: () = redis::cmd("SET").arg("a").arg("stale").query(&mut p).unwrap();
    signal(&primary, libc::SIGSTOP);

    eventually(20, "the replica is promoted under the next term", || {
        info(&replica, "role").as_deref() == Some("master") && info(&replica, "terrace_term_epoch").as_deref() == Some("2")
    });
    let mut r = replica.client();
    let _: () = redis::cmd("SET").arg("a").arg("new").query(&mut r).unwrap();
    eventually(10, "the new primary flushes", || holds(&stored(&storage, "a"), "new"));
    // Nobody tells the old primary what happened: what it does next is its own doing.
    drop(console);
    signal(&primary, libc::SIGCONT);

    // Its term lease ran out while it was paused (the console promoted the replica only
    // after that): it takes no write (issue 46 — before leases it acknowledged this one).
    let refused = redis::cmd("SET").arg("c").arg("late").query::<()>(&mut p).unwrap_err();
    assert!(refused.to_string().contains("term lease ran out"), "{refused}");
    // Storage's fence is the second line: an old primary that still believed in its lease
    // (a clock far off, say — modelled by renewing it by hand) is refused by storage itself.
    let far = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 600_000).to_string();
    let _: () = redis::cmd("TERRACE.EPOCH").arg("range-0").arg(1).arg("LEASE").arg(&far).query(&mut p).unwrap();
    // Its next write fills a batch: the flush carries epoch 1, which storage refuses.
    let acked: redis::RedisResult<()> = redis::cmd("SET").arg("c").arg("late").query(&mut p);
    assert!(acked.is_ok(), "acknowledged from its cache before it learns it was replaced: {acked:?}");
    eventually(10, "the old primary stops taking writes", || {
        let e = redis::cmd("SET").arg("d").arg("x").query::<()>(&mut p).err().map(|e| e.to_string()).unwrap_or_default();
        e.contains("primary term ended")
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(holds(&stored(&storage, "a"), "new"), "storage keeps the new primary's value: {:?}", stored(&storage, "a"));
    assert_eq!(stored(&storage, "c"), None, "nothing the old primary wrote after the failover reached storage");
    assert!(holds(&stored(&storage, "b"), "first"));
    // Reads still answer (from its cache; it is not the slots' primary in the proxy's map).
    let v: Option<String> = redis::cmd("GET").arg("b").query(&mut p).unwrap();
    assert_eq!(v.as_deref(), Some("first"));
}

/// A field of the engine's INFO (any section).
fn info_all(e: &Engine, field: &str) -> Option<String> {
    let text: String = redis::cmd("INFO").arg("everything").query(&mut e.client()).ok()?;
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
}

fn dirty(e: &Engine) -> i64 {
    info_all(e, "dirty_keys").and_then(|v| v.parse().ok()).unwrap_or(-1)
}

fn follow(replica: &Engine, primary: &Engine) {
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary.port).query(&mut replica.client()).unwrap();
    eventually(20, "the replica follows", || info(replica, "master_link_status").as_deref() == Some("up"));
}

/// A write-back tenant on shared storage, replicated: the replica holds the primary's cache
/// (the writes' after-images, not the commands that read through storage), marks the keys
/// dirty there and forgets them once the primary flushed them; a replica attached while keys
/// are dirty gets them dirty with its full sync. With storage down, the primary acknowledges
/// writes it cannot flush, and dies: the replica, promoted under a new term, flushes every
/// one of them.
#[test]
fn a_promoted_replica_flushes_what_its_write_back_primary_had_not() {
    let pg = Postgres::start();
    let url = pg.url();
    let storage = postgres::connect(&url).unwrap();
    let start = || Engine::start(&["--storage", "postgres", "--storage-url", &url, "--storage-mode", "write-back", "--flush-interval-ms", "50"]);
    let (mut primary, replica) = (start(), start());
    follow(&replica, &primary);
    let mut p = primary.client();
    for i in 0..50 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(format!("v{i}")).query(&mut p).unwrap();
    }
    let _: () = redis::cmd("HSET").arg("h").arg("f1").arg("a").arg("f2").arg("b").query(&mut p).unwrap();
    for _ in 0..3 {
        let _: i64 = redis::cmd("INCR").arg("n").query(&mut p).unwrap();
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut p).unwrap();
    assert_eq!(acked, 1);
    eventually(10, "the primary flushes and the replica hears of it", || {
        dirty(&primary) == 0 && dirty(&replica) == 0 && holds(&stored(&storage, "k49"), "v49")
    });
    let mut r = replica.client();
    let (k1, f2, n): (String, String, i64) = (q(&mut r, &["GET", "k1"]), q(&mut r, &["HGET", "h", "f2"]), q(&mut r, &["GET", "n"]));
    assert_eq!((k1.as_str(), f2.as_str(), n), ("v1", "b", 3), "the replica holds the primary's cache");

    // Storage down: the primary acknowledges from its cache what it cannot flush. (An engine
    // does not start on a storage tier it cannot reach: the late replica starts first.)
    let late = start();
    pg.stop();
    for i in 0..50 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(format!("w{i}")).query(&mut p).unwrap();
    }
    let _: i64 = redis::cmd("DEL").arg("k1").query(&mut p).unwrap();
    let _: i64 = redis::cmd("INCR").arg("n").query(&mut p).unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut p).unwrap();
    assert_eq!(acked, 1);
    let held = dirty(&primary);
    assert_eq!(held, 51, "k0..k49 (k1 a deletion) and n");
    eventually(10, "the replica has them dirty too", || dirty(&replica) == held);
    follow(&late, &primary);
    eventually(10, "a replica synced now has them dirty", || dirty(&late) == held);
    let (lk, ln): (String, i64) = (q(&mut late.client(), &["GET", "k7"]), q(&mut late.client(), &["GET", "n"]));
    assert_eq!((lk.as_str(), ln), ("w7", 4));

    // The primary dies; storage comes back; the replica takes a new term and is promoted.
    primary.child.kill().unwrap();
    primary.child.wait().unwrap();
    pg.resume();
    eventually(20, "the replica takes the new term (storage reachable again)", || {
        redis::cmd("TERRACE.EPOCH").arg("range-0").arg(2).query::<()>(&mut r).is_ok()
    });
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut r).unwrap();
    eventually(20, "the promoted replica flushes what the primary had not", || {
        dirty(&replica) == 0 && (0..50).filter(|i| *i != 1).all(|i| holds(&stored(&storage, &format!("k{i}")), &format!("w{i}")))
    });
    assert_eq!(stored(&storage, "k1"), None, "the deletion was flushed too");
    assert!(holds(&stored(&storage, "n"), "4"), "{:?}", stored(&storage, "n"));
}

fn get(e: &Engine, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(&mut e.client()).unwrap()
}

/// The embedded LSM is each engine's own, so a replica keeps a copy of its master's: a full
/// sync carries what the master's storage holds (keys no longer in its cache too) into the
/// replica's storage, and the stream's writes after it reach the replica's storage as well.
/// A primary paused across a failover writes only its own storage — which its full sync as
/// the new primary's replica then replaces: its late writes never come back.
#[test]
fn a_replica_keeps_its_own_copy_of_an_lsm_tier_and_a_demoted_primary_loses_its_late_writes() {
    let flags = ["--storage", "lsm", "--storage-mode", "write-back", "--flush-interval-ms", "50"];
    let mut primary = Engine::start(&flags);
    for i in 0..300 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(format!("v{i}")).query(&mut primary.client()).unwrap();
    }
    eventually(10, "the primary flushes", || dirty(&primary) == 0);
    // Restarted, its cache is empty: the keys are in its storage only.
    primary.restart_clean(&flags);
    let _: () = redis::cmd("SET").arg("k0").arg("new").query(&mut primary.client()).unwrap();
    let mut replica = Engine::start(&flags);
    follow(&replica, &primary);
    assert_eq!(get(&replica, "k5").as_deref(), Some("v5"), "a key only the master's storage held");
    assert_eq!(get(&replica, "k299").as_deref(), Some("v299"));
    assert_eq!(get(&replica, "k0").as_deref(), Some("new"));
    let _: () = redis::cmd("SET").arg("k1").arg("later").query(&mut primary.client()).unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut primary.client()).unwrap();
    assert_eq!(acked, 1);

    // The primary is paused; its replica is promoted and written to.
    let mut p = primary.client();
    signal(&primary, libc::SIGSTOP);
    let _: () = redis::cmd("TERRACE.EPOCH").arg("range-0").arg(2).query(&mut replica.client()).unwrap();
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut replica.client()).unwrap();
    let _: () = redis::cmd("SET").arg("k2").arg("from-the-new-primary").query(&mut replica.client()).unwrap();
    signal(&primary, libc::SIGCONT);
    // Back, it still takes a write, into its own storage.
    let _: () = redis::cmd("SET").arg("k2").arg("stale").query(&mut p).unwrap();
    let _: () = redis::cmd("SET").arg("only-late").arg("stale").query(&mut p).unwrap();
    eventually(10, "the old primary flushes its late writes", || dirty(&primary) == 0);

    // It rejoins as the new primary's replica: its storage is the new primary's again.
    follow(&primary, &replica);
    assert_eq!(get(&primary, "k2").as_deref(), Some("from-the-new-primary"));
    eventually(10, "the new primary flushes", || dirty(&replica) == 0);
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut primary.client()).unwrap();
    eventually(10, "the old primary flushes what it was sent", || dirty(&primary) == 0);
    // Both restarted (caches empty): each storage holds the new primary's values.
    replica.restart_clean(&flags);
    primary.restart_clean(&flags);
    for e in [&replica, &primary] {
        assert_eq!(get(e, "k2").as_deref(), Some("from-the-new-primary"), "port {}", e.port);
        assert_eq!(get(e, "k1").as_deref(), Some("later"), "port {}", e.port);
        assert_eq!(get(e, "k0").as_deref(), Some("new"), "port {}", e.port);
        assert_eq!(get(e, "k7").as_deref(), Some("v7"), "port {}", e.port);
        assert_eq!(get(e, "only-late"), None, "port {}: a write of the old primary's after the failover", e.port);
    }
}
