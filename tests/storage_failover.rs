//! Fencing across a failover, with the storage tier on PostgreSQL (Debian's package, started
//! by the test): a write-back primary is paused (SIGSTOP), not killed, while the console
//! promotes its replica under a new primary term; once it runs again, storage refuses what
//! it flushes, it stops taking writes, and storage keeps the new primary's values.

mod common;

use common::{eventually, free_port, Console, Engine, Postgres, Proxy, RedisPort};
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
