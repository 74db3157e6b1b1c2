//! End-to-end tests of the storage tier: real engines over the embedded LSM and a real
//! PostgreSQL, killed, restarted, squeezed by maxmemory, and cut off from storage.

mod common;

use std::process::{Command, Stdio};

use common::{err, info_field, q, temp_dir, Engine, Postgres, RedisPort};

#[test]
fn write_through_survives_a_kill_and_reads_through_every_type() {
    let dir = temp_dir("storage-wt");
    let flags = ["--storage", "lsm"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    let _: () = q(&mut c, &["SET", "s", "string value"]);
    let _: i64 = q(&mut c, &["INCRBY", "n", "41"]);
    let _: i64 = q(&mut c, &["INCR", "n"]);
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    let _: String = q(&mut c, &["LPOP", "l"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"]);
    let _: i64 = q(&mut c, &["SADD", "set", "x", "y"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "2", "two", "1", "one"]);
    let _: () = q(&mut c, &["SET", "ttl", "v", "EX", "1000"]);
    let _: () = q(&mut c, &["SET", "gone", "v"]);
    let _: i64 = q(&mut c, &["DEL", "gone"]);
    let _: () = q(&mut c, &["MSET", "m1", "1", "m2", "2"]);
    let _: () = q(&mut c, &["RENAME", "m2", "m3"]);
    // A transaction's writes go through too.
    let _: (i64, i64) = redis::pipe().atomic().cmd("INCR").arg("tx").cmd("INCR").arg("tx").query(&mut c).unwrap();
    drop(c);
    e.restart(&flags); // SIGKILL: every acknowledged write must be in storage
    let mut c = e.client();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0, "the cache starts empty");
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "string value");
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), 42);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]), vec!["b", "c"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["HMGET", "h", "f1", "f2"]), vec!["v1", "v2"]);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "set"]), 2);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1"]), vec!["one", "two"]);
    let ttl: i64 = q(&mut c, &["TTL", "ttl"]);
    assert!((990..=1000).contains(&ttl), "expiry kept: {ttl}");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "gone"]), 0, "deletions reach storage");
    assert_eq!(q::<Vec<Option<String>>>(&mut c, &["MGET", "m1", "m2", "m3"]), vec![Some("1".into()), None, Some("2".into())]);
    assert_eq!(q::<i64>(&mut c, &["GET", "tx"]), 2);
    // A read-modify-write on a key only storage has.
    let _: i64 = q(&mut c, &["APPEND", "s", "!"]);
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "string value!");
    assert!(info_field(&mut c, "storage", "storage_read_hits") >= 10);
    assert!(err(&mut c, &["FLUSHALL"]).contains("not supported for a tenant with a storage tier"));
}

/// MOVE in a storage-backed tenant: the other database's copy in storage counts, and the move
/// reaches storage (both modes, across kills).
#[test]
fn move_goes_through_storage() {
    for mode in [&["--storage-mode", "write-through"][..], &["--storage-mode", "write-back", "--wal", "always"][..]] {
        let dir = temp_dir("storage-move");
        let flags: Vec<&str> = ["--storage", "lsm"].iter().chain(mode).copied().collect();
        let mut e = Engine::start_in(&dir, &flags, &[]);
        let mut c = e.client();
        let _: () = q(&mut c, &["SET", "mv", "a"]);
        let _: () = q(&mut c, &["SELECT", "1"]);
        let _: () = q(&mut c, &["SET", "mv", "b"]);
        drop(c);
        e.restart(&flags);
        let mut c = e.client();
        assert_eq!(q::<i64>(&mut c, &["MOVE", "mv", "1"]), 0, "{mode:?}: database 1 has the key (in storage)");
        let _: () = q(&mut c, &["SELECT", "1"]);
        let _: i64 = q(&mut c, &["DEL", "mv"]);
        let _: () = q(&mut c, &["SELECT", "0"]);
        assert_eq!(q::<i64>(&mut c, &["MOVE", "mv", "1"]), 1, "{mode:?}");
        drop(c);
        e.restart(&flags);
        let mut c = e.client();
        assert_eq!(q::<Option<String>>(&mut c, &["GET", "mv"]), None, "{mode:?}: moved away");
        let _: () = q(&mut c, &["SELECT", "1"]);
        assert_eq!(q::<String>(&mut c, &["GET", "mv"]), "a", "{mode:?}: moved here");
    }
}

#[test]
fn evicted_keys_come_back_from_storage() {
    // The LSM's own memory (block cache, memtable) counts in used_memory too.
    let e = Engine::start(&["--storage", "lsm", "--maxmemory", "40mb", "--maxmemory-policy", "allkeys-lru"]);
    let mut c = e.client();
    let v = "v".repeat(1000);
    for chunk in (0..40000).collect::<Vec<_>>().chunks(200) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET").arg(format!("k{i}")).arg(format!("{i}:{v}")).ignore();
        }
        p.query::<()>(&mut c).unwrap();
    }
    let evicted = info_field(&mut c, "stats", "evicted_keys");
    assert!(evicted > 10000, "maxmemory evicted: {evicted}");
    for i in (0..40000).step_by(397) {
        assert_eq!(q::<String>(&mut c, &["GET", &format!("k{i}")]), format!("{i}:{v}"), "k{i}");
    }
}

#[test]
fn a_storage_backed_tenant_over_its_limit_evicts_its_own_keys() {
    // The tenant's data limit is its cache's size: over it, the tenant's coldest keys leave the
    // cache (storage has them) instead of writes being refused, and no other tenant loses any.
    let e = Engine::start(&["--storage", "lsm"]);
    let mut other = e.client();
    let _: () = q(&mut other, &["TERRACE.NAMESPACE", "other"]);
    for i in 0..100 {
        let _: () = q(&mut other, &["SET", &format!("o{i}"), "x"]);
    }
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "cached", "STORAGE-MODE", "write-through", "MAXMEMORY", "200kb"]);
    let v = "v".repeat(500);
    for chunk in (0..2000).collect::<Vec<_>>().chunks(100) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET").arg(format!("k{i}")).arg(format!("{i}:{v}")).ignore();
        }
        p.query::<()>(&mut c).unwrap();
    }
    let workload: serde_json::Value = serde_json::from_str(&q::<String>(&mut c, &["TERRACE.WORKLOAD", "cached"])).unwrap();
    let cached = workload["bytes"]["entries"].as_f64().unwrap();
    assert!(cached <= 200.0 * 1024.0 + 1024.0, "the cache holds at most its limit: {cached}");
    assert!(workload["keys"].as_u64().unwrap() < 1000, "{workload}");
    assert!(info_field(&mut c, "stats", "evicted_keys") > 1000);
    // Storage holds all of it: the census counts the tenant's keys and bytes there (asking
    // wakes it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let storage = loop {
        let w: serde_json::Value = serde_json::from_str(&q::<String>(&mut c, &["TERRACE.WORKLOAD", "cached"])).unwrap();
        if !w["bytes"]["storage"].is_null() {
            break w["bytes"]["storage"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "no storage census: {w}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(storage["keys"], 2000, "{storage}");
    assert!(storage["bytes"].as_u64().unwrap() > 2000 * 500, "{storage}");
    for i in (0..2000).step_by(37) {
        assert_eq!(q::<String>(&mut c, &["GET", &format!("k{i}")]), format!("{i}:{v}"), "k{i} from storage");
    }
    let _: () = q(&mut other, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut other, &["DBSIZE"]), 100, "other tenants keep every key");
    // A tenant without storage behind it is refused past its limit, as before.
    let mut plain = e.client();
    let _: () = q(&mut plain, &["TERRACE.NAMESPACE", "plain", "STORAGE-MODE", "cache", "MAXMEMORY", "20kb"]);
    let refused = (0..200).find_map(|i| redis::cmd("SET").arg(format!("p{i}")).arg(&v).query::<()>(&mut plain).err());
    assert!(refused.expect("refused once full").to_string().contains("OOM"));
}

/// A write-back tenant at its own limit whose keys are all still dirty (storage has not
/// taken them yet) waits for the flusher to make some clean, instead of answering OOM (CI
/// once loaded a 2 MB write-back tenant faster than PostgreSQL took it and got OOM).
#[test]
fn a_write_back_tenant_at_its_limit_waits_for_the_flusher_instead_of_oom() {
    // A slow flusher (every 2 s unless woken): the limit is reached with dirty keys only.
    let e = Engine::start(&["--storage", "lsm", "--flush-interval-ms", "2000"]);
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "wb", "STORAGE-MODE", "write-back", "MAXMEMORY", "300kb"]);
    let v = "v".repeat(1000);
    for i in 0..1500 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), &format!("{i}:{v}")]);
    }
    assert!(info_field(&mut c, "storage", "dirty_waits") > 0, "writes waited for the flusher");
    assert_eq!(info_field(&mut c, "storage", "dirty_refused"), 0);
    for i in (0..1500).step_by(7) {
        assert_eq!(q::<String>(&mut c, &["GET", &format!("k{i}")]), format!("{i}:{v}"), "k{i}");
    }
}

#[test]
fn postgres_outage_errors_without_stale_reads_and_recovers() {
    let pg = Postgres::start();
    let url = pg.url();
    let e = Engine::start(&["--storage", "postgres", "--storage-url", &url]);
    let mut c = e.client();
    let _: () = q(&mut c, &["SET", "k", "v1"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f", "1"]);
    pg.stop();
    let msg = err(&mut c, &["SET", "k", "v2"]);
    assert!(msg.contains("storage write failed"), "{msg}");
    // The refused value is not served: the key left the cache and storage can't be read.
    let msg = err(&mut c, &["GET", "k"]);
    assert!(msg.contains("storage read failed"), "{msg}");
    pg.resume();
    let mut back = None;
    for _ in 0..50 {
        if let Ok(v) = redis::cmd("GET").arg("k").query::<String>(&mut c) {
            back = Some(v);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(back.as_deref(), Some("v1"), "storage's value, once it is reachable again");
    let _: () = q(&mut c, &["SET", "k", "v3"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v3");
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "f", "1"]), 2);
    drop(c);
    // A second engine on the same database sees what the first wrote.
    let e2 = Engine::start(&["--storage", "postgres", "--storage-url", &url]);
    let mut c2 = e2.client();
    assert_eq!(q::<String>(&mut c2, &["GET", "k"]), "v3");
    assert_eq!(q::<String>(&mut c2, &["HGET", "h", "f"]), "2");
}

#[test]
fn bad_storage_settings_are_named() {
    let run = |flags: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_terrace"))
            .args(["engine", "--port", "0", "--data-dir"])
            .arg(temp_dir("storage-bad"))
            .args(flags)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flags:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(run(&["--storage", "disk"]).contains("`storage`"));
    assert!(run(&["--storage", "postgres"]).contains("`storage_url`"));
    assert!(run(&["--storage", "lsm", "--storage-mode", "write-around"]).contains("`storage_mode`"));
    assert!(run(&["--storage", "lsm", "--dirty-max", "0"]).contains("`dirty_max`"));
    assert!(run(&["--storage", "lsm", "--flush-batch", "0"]).contains("`flush_batch`"));
    assert!(run(&["--storage", "postgres", "--storage-url", "postgres://postgres@127.0.0.1:1/x"]).contains("storage"));
}

/// Random operations against an engine whose cache holds a fraction of the data (evictions
/// all the time) and which is killed and restarted now and then; every reply is checked
/// against an in-memory model.
#[test]
fn model_based_random_operations_across_evictions_and_restarts() {
    random_operations_against_a_model(&["--storage", "lsm", "--maxmemory", "20mb", "--maxmemory-policy", "allkeys-random"], 4000);
}

/// The same with write-back: dirty keys stay until flushed, the WAL brings them back after a
/// kill (pruned as storage takes them, so a restart replays little), and clean ones are
/// evicted and read back from storage. The LSM's own memory (memtables filling while the
/// flusher writes) counts in used_memory: the budget leaves it room.
#[test]
fn model_based_random_operations_with_write_back() {
    random_operations_against_a_model(
        &[
            "--storage",
            "lsm",
            "--storage-mode",
            "write-back",
            "--wal",
            "always",
            "--wal-segment-size",
            "64kb",
            "--flush-interval-ms",
            "20",
            "--maxmemory",
            "40mb",
            "--maxmemory-policy",
            "allkeys-random",
        ],
        10000,
    );
}

/// A write that must succeed; on failure, the engine's state in the message.
fn must<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query(c) {
        Ok(v) => v,
        Err(e) => panic!("{} {}: {e}\n{}", args[0], args[1], q::<String>(c, &["INFO", "everything"])),
    }
}

fn random_operations_against_a_model(flags: &[&str], value_size: usize) {
    use std::collections::HashMap;
    #[derive(Clone, Debug, PartialEq)]
    enum V {
        S(String),
        H(HashMap<String, String>),
        L(Vec<String>),
    }
    let dir = temp_dir("storage-model");
    let mut e = Engine::start_in(&dir, flags, &[]);
    let mut c = e.client();
    let mut model: HashMap<String, V> = HashMap::new();
    let pad = "p".repeat(value_size);
    let keys = 3000;
    // Fill past the cache's size so that evictions start at once.
    for chunk in (0..keys).collect::<Vec<_>>().chunks(250) {
        let mut p = redis::pipe();
        for i in chunk {
            let v = format!("{i}-{pad}");
            p.cmd("SET").arg(format!("k{i}")).arg(&v).ignore();
            model.insert(format!("k{i}"), V::S(v));
        }
        p.query::<()>(&mut c).unwrap();
    }
    let evicted = |c: &mut redis::Connection| info_field(c, "stats", "evicted_keys");
    let mut evictions = evicted(&mut c);
    for step in 0..4000 {
        if step % 1000 == 999 {
            evictions += evicted(&mut c);
            drop(c);
            e.restart(flags);
            c = e.client();
        }
        let key = format!("k{}", fastrand::usize(..keys));
        match (fastrand::u8(..10), model.get(&key).cloned()) {
            (0..=3, m) => match m {
                None => assert_eq!(q::<i64>(&mut c, &["EXISTS", &key]), 0, "{key}"),
                Some(V::S(v)) => assert_eq!(q::<String>(&mut c, &["GET", &key]), v, "{key}"),
                Some(V::H(h)) => assert_eq!(q::<HashMap<String, String>>(&mut c, &["HGETALL", &key]), h, "{key}"),
                Some(V::L(l)) => assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", &key, "0", "-1"]), l, "{key}"),
            },
            (4, _) => {
                let v = format!("{step}-{pad}");
                let _: () = must(&mut c, &["SET", &key, &v]);
                model.insert(key, V::S(v));
            }
            (5, Some(V::S(mut v))) => {
                let n: i64 = must(&mut c, &["APPEND", &key, "+"]);
                v.push('+');
                assert_eq!(n as usize, v.len());
                model.insert(key, V::S(v));
            }
            (6, m) => {
                let n: i64 = must(&mut c, &["DEL", &key]);
                assert_eq!(n, m.is_some() as i64, "DEL {key}");
                model.remove(&key);
            }
            (7, None | Some(V::H(_))) => {
                let (f, v) = (format!("f{}", fastrand::u8(..5)), format!("{step}"));
                let _: i64 = must(&mut c, &["HSET", &key, &f, &v]);
                let mut h = match model.remove(&key) {
                    Some(V::H(h)) => h,
                    _ => HashMap::new(),
                };
                h.insert(f, v);
                model.insert(key, V::H(h));
            }
            (8, None | Some(V::L(_))) => {
                let _: i64 = must(&mut c, &["RPUSH", &key, &format!("{step}")]);
                let mut l = match model.remove(&key) {
                    Some(V::L(l)) => l,
                    _ => Vec::new(),
                };
                l.push(format!("{step}"));
                model.insert(key, V::L(l));
            }
            _ => {}
        }
    }
    assert!(evictions > 500, "the cache is smaller than the data: {evictions} evictions");
}

#[test]
fn storage_mode_is_per_tenant() {
    let dir = temp_dir("storage-tenants");
    let flags = ["--storage", "lsm", "--storage-mode", "cache"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut durable = e.client();
    let _: () = q(&mut durable, &["TERRACE.NAMESPACE", "orders", "STORAGE-MODE", "write-through"]);
    let _: () = q(&mut durable, &["SET", "k", "kept"]);
    let mut scratch = e.client();
    let _: () = q(&mut scratch, &["TERRACE.NAMESPACE", "sessions"]);
    let _: () = q(&mut scratch, &["SET", "k", "lost with the cache"]);
    assert!(err(&mut scratch, &["TERRACE.NAMESPACE", "x", "STORAGE-MODE", "write-around"]).contains("STORAGE-MODE"));
    let _: () = q(&mut scratch, &["FLUSHDB"]); // a cache tenant may flush
    drop((durable, scratch));
    e.restart(&flags);
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "orders", "STORAGE-MODE", "write-through"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "kept");
    let mut s = e.client();
    let _: () = q(&mut s, &["TERRACE.NAMESPACE", "sessions"]);
    assert_eq!(q::<Option<String>>(&mut s, &["GET", "k"]), None);
    let plain = Engine::start(&[]);
    let mut p = plain.client();
    assert!(err(&mut p, &["TERRACE.NAMESPACE", "t", "STORAGE-MODE", "write-through"]).contains("no storage tier"));
}

/// Write-through installs a write for other clients only once storage took it: while
/// PostgreSQL holds the table locked, a reader of the key being written does not see the new
/// value before the writer's reply.
#[test]
fn a_write_is_visible_to_others_only_once_storage_took_it() {
    let pg = Postgres::start();
    let url = pg.url();
    let e = Engine::start(&["--storage", "postgres", "--storage-url", &url]);
    let mut c = e.client();
    let _: () = q(&mut c, &["SET", "k", "v1"]);
    // Hold an exclusive lock on the table for 1.5 s from another session.
    let psql = pg.psql(&["-c", "BEGIN; LOCK TABLE terrace_kv IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(1.5); COMMIT;"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let start = std::time::Instant::now();
    let port = e.port;
    let writer = std::thread::spawn(move || {
        let mut w = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let _: () = q(&mut w, &["SET", "k", "v2"]);
        start.elapsed()
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let got: String = q(&mut c, &["GET", "k"]);
    let read_at = start.elapsed();
    let written_at = writer.join().unwrap();
    let _ = psql.wait_with_output();
    // The write cannot be confirmed before the lock goes (about 1.2 s after `start`): a reader
    // that saw it must have waited as long.
    assert!(written_at >= std::time::Duration::from_millis(800), "the write waited for the lock ({written_at:?})");
    assert!(
        got == "v1" || read_at >= std::time::Duration::from_millis(800),
        "read {got:?} at {read_at:?}, before the write could be confirmed (at {written_at:?})"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v2");
}

/// Write-back against a real PostgreSQL that goes away: writes are acknowledged from the cache
/// until `dirty_max`, then wait and fail with a clear error; nothing acknowledged is lost —
/// not even across a SIGKILL during the outage (the WAL has it) — and everything reaches
/// PostgreSQL once it is back.
#[test]
fn write_back_rides_out_a_postgres_outage_and_a_kill() {
    let pg = Postgres::start();
    let url = pg.url();
    let dir = temp_dir("storage-wb-outage");
    let flags = [
        "--storage",
        "postgres",
        "--storage-url",
        &url,
        "--storage-mode",
        "write-back",
        "--wal",
        "always",
        "--dirty-max",
        "256kb",
        "--dirty-timeout-ms",
        "300",
        "--flush-interval-ms",
        "20",
    ];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    let dirty = |c: &mut redis::Connection| info_field(c, "storage", "dirty_keys");
    let wait_clean = |c: &mut redis::Connection| {
        for _ in 0..200 {
            if dirty(c) == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("still dirty: {}", q::<String>(c, &["INFO", "storage"]));
    };
    let mut acked: Vec<(String, String)> = Vec::new();
    for i in 0..100 {
        let (k, v) = (format!("k{i}"), format!("before-{i}"));
        let _: () = q(&mut c, &["SET", &k, &v]);
        acked.push((k, v));
    }
    let _: i64 = q(&mut c, &["HSET", "h", "f", "1"]);
    wait_clean(&mut c);
    assert!(info_field(&mut c, "storage", "flush_keys") >= 101);

    pg.stop();
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "f", "1"]), 2);
    // A key deleted while storage is away: dirty, so the cache's "absent" is the answer (no
    // storage read, which would fail now).
    assert_eq!(q::<i64>(&mut c, &["DEL", "k0"]), 1);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k0"]), None);
    acked.remove(0);
    let value = "o".repeat(1000);
    let mut refused = None;
    for i in 0..2000 {
        let k = format!("outage{i}");
        match redis::cmd("SET").arg(&k).arg(format!("{i}{value}")).query::<()>(&mut c) {
            Ok(()) => acked.push((k, format!("{i}{value}"))),
            Err(e) => {
                refused = Some(e.to_string());
                break;
            }
        }
    }
    let refused = refused.expect("writes are refused once dirty_max is reached");
    assert!(refused.contains("write-back backlog full") && refused.contains("dirty_max"), "{refused}");
    assert!(acked.len() > 150, "writes were acknowledged during the outage until the bound: {}", acked.len());
    let bytes = info_field(&mut c, "storage", "dirty_bytes");
    assert!(bytes <= 256 * 1024 + 4096, "dirty bytes stay bounded: {bytes}");
    let mut errors = 0;
    for _ in 0..100 {
        errors = info_field(&mut c, "storage", "flush_errors");
        if errors > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(errors > 0, "the flusher reports the outage");
    drop(c);

    // Killed during the outage: the dirty keys are in the WAL.
    let _ = e.child.kill();
    let _ = e.child.wait();
    pg.resume();
    e.restart(&flags);
    let mut c = e.client();
    wait_clean(&mut c);
    let _: () = q(&mut c, &["SET", "after", "yes"]);
    wait_clean(&mut c);
    drop(c);

    // A second engine with nothing of its own sees it all, in PostgreSQL.
    let other = Engine::start(&["--storage", "postgres", "--storage-url", &url]);
    let mut o = other.client();
    for chunk in acked.chunks(200) {
        let keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
        let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(&mut o).unwrap();
        for ((k, v), g) in chunk.iter().zip(got) {
            assert_eq!(g.as_deref(), Some(v.as_str()), "acknowledged SET {k} lost");
        }
    }
    assert_eq!(q::<String>(&mut o, &["HGET", "h", "f"]), "2");
    assert_eq!(q::<Option<String>>(&mut o, &["GET", "k0"]), None, "the deletion reached storage");
    assert_eq!(q::<String>(&mut o, &["GET", "after"]), "yes");
}

/// Dropping a storage-backed tenant's namespace deletes its rows too (write-through ones, and
/// write-back keys still dirty): the same name created again reads nothing back through
/// storage, and a restart brings none of it back. Another tenant's rows stay.
#[test]
fn a_dropped_storage_backed_tenant_leaves_nothing_in_storage() {
    let dir = temp_dir("storage-drop");
    let flags = ["--storage", "lsm", "--flush-interval-ms", "60000"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut wt = e.client();
    let _: () = q(&mut wt, &["TERRACE.NAMESPACE", "wt", "STORAGE-MODE", "write-through"]);
    let mut wb = e.client();
    let _: () = q(&mut wb, &["TERRACE.NAMESPACE", "wb", "STORAGE-MODE", "write-back"]);
    let mut keep = e.client();
    let _: () = q(&mut keep, &["TERRACE.NAMESPACE", "keep", "STORAGE-MODE", "write-through"]);
    for i in 0..300 {
        let _: () = q(&mut wt, &["SET", &format!("k{i}"), "wt's"]);
        let _: () = q(&mut wb, &["SET", &format!("k{i}"), "wb's"]);
        let _: () = q(&mut keep, &["SET", &format!("k{i}"), "keep's"]);
    }
    let mut admin = e.client();
    for tenant in ["wt", "wb"] {
        assert_eq!(q::<i64>(&mut admin, &["TERRACE.DROPNAMESPACE", tenant]), 1);
    }
    for (tenant, mode) in [("wt", "write-through"), ("wb", "write-back")] {
        let mut again = e.client();
        let _: () = q(&mut again, &["TERRACE.NAMESPACE", tenant, "STORAGE-MODE", mode]);
        assert_eq!(q::<Option<String>>(&mut again, &["GET", "k7"]), None, "{tenant}: nothing read back through storage");
    }
    assert_eq!(q::<String>(&mut keep, &["GET", "k7"]), "keep's");
    drop((wt, wb, keep, admin));
    e.restart_clean(&flags);
    for tenant in ["wt", "wb"] {
        let mut again = e.client();
        let _: () = q(&mut again, &["TERRACE.NAMESPACE", tenant, "STORAGE-MODE", "write-back"]);
        assert_eq!(q::<Option<String>>(&mut again, &["GET", "k7"]), None, "{tenant} after a restart");
    }
    let mut keep = e.client();
    let _: () = q(&mut keep, &["TERRACE.NAMESPACE", "keep", "STORAGE-MODE", "write-through"]);
    assert_eq!(q::<String>(&mut keep, &["GET", "k7"]), "keep's");
}
