//! Moving slots between engines online: the engines' `TERRACE.MIGRATE` (copy, catch-up,
//! seal, hand-over, lazy deletion), the proxies' holds, and the console's migrations under
//! load, checked by a model of every acknowledged write.

mod common;

use common::*;
use terrace_commands::slots::key_slot;

fn status(con: &mut redis::Connection) -> serde_json::Value {
    let s: String = q(con, &["TERRACE.MIGRATE", "STATUS"]);
    serde_json::from_str(&s).unwrap()
}

fn wait_phase(con: &mut redis::Connection, phase: &str) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    eventually(60, &format!("migration phase {phase}"), || {
        last = status(con);
        assert_ne!(last["phase"], "failed", "{last}");
        last["phase"] == phase
    });
    last
}

fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap().get_connection().unwrap()
}

#[test]
fn an_engine_moves_its_slots_keys_to_another_with_ttls_types_and_tenants() {
    let (a, b) = (Engine::start(&[]), Engine::start(&[]));
    let (mut ca, mut cb) = (connect(a.port), connect(b.port));
    let moving = |k: &str| key_slot(k.as_bytes()) < 8192;
    for i in 0..3000 {
        let _: () = q(&mut ca, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    let _: () = q(&mut ca, &["SET", "ttl{b}", "x", "PX", "600000"]);
    let _: () = q(&mut ca, &["HSET", "h{b}", "f", "1", "g", "2"]);
    let _: () = q(&mut ca, &["RPUSH", "l{b}", "1", "2", "3"]);
    let _: () = q(&mut ca, &["SELECT", "3"]);
    let _: () = q(&mut ca, &["SET", "db3{b}", "three"]);
    let _: () = q(&mut ca, &["SELECT", "0"]);
    assert!(moving("ttl{b}") && moving("h{b}"), "the test's hash tag must be in the moving half");
    // A tenant's namespace moves too (the target knows it by name).
    let mut tenant = connect(a.port);
    let _: () = q(&mut tenant, &["TERRACE.NAMESPACE", "alice"]);
    let _: () = q(&mut tenant, &["SET", "k1{b}", "alice's"]);
    // The target holds a stale key in the slots (an older owner's): it must not survive.
    let _: () = q(&mut cb, &["SET", "stale{b}", "old"]);
    let _: String = q(&mut ca, &["TERRACE.MIGRATE", "START", "job-1", &format!("127.0.0.1:{}", b.port), "0-8191"]);
    wait_phase(&mut ca, "ready");
    // Writes during the migration are caught up: a change, a deletion, a new key.
    let _: () = q(&mut ca, &["SET", "k1", "changed"]);
    let k_gone = (0..3000).map(|i| format!("k{i}")).find(|k| moving(k) && k != "k1").unwrap();
    let _: () = q(&mut ca, &["DEL", &k_gone]);
    let _: () = q(&mut ca, &["SET", "new{b}", "late"]);
    let _: String = q(&mut ca, &["TERRACE.MIGRATE", "SEAL"]);
    let st = wait_phase(&mut ca, "handed-over");
    assert!(st["keys_copied"].as_u64().unwrap() > 1000, "{st}");
    // Sealed: the source refuses the slots' keys (cluster clients retry TRYAGAIN), serves the rest.
    let e = err(&mut ca, &["GET", "h{b}"]);
    assert!(e.contains("slot 3300 is being handed over"), "{e}");
    let other = (0..3000).map(|i| format!("k{i}")).find(|k| !moving(k)).unwrap();
    let v: Option<String> = q(&mut ca, &["GET", &other]);
    assert!(v.is_some());
    let _: String = q(&mut ca, &["TERRACE.MIGRATE", "FINISH"]);
    wait_phase(&mut ca, "done");
    // The target has every moved key, as it was last written; the source none of them.
    for i in 0..3000 {
        let k = format!("k{i}");
        let (on_a, on_b): (Option<String>, Option<String>) = (q(&mut ca, &["GET", &k]), q(&mut cb, &["GET", &k]));
        let expected = if k == "k1" { "changed".to_string() } else { format!("v{i}") };
        if !moving(&k) {
            assert_eq!((on_a.as_deref(), on_b.as_deref()), (Some(expected.as_str()), None), "{k}");
        } else if k == k_gone {
            assert_eq!((on_a, on_b), (None, None), "{k}");
        } else {
            assert_eq!((on_a, on_b.as_deref()), (None, Some(expected.as_str())), "{k}");
        }
    }
    let pttl: i64 = q(&mut cb, &["PTTL", "ttl{b}"]);
    assert!(pttl > 500_000 && pttl <= 600_000, "{pttl}");
    let h: Vec<String> = q(&mut cb, &["HMGET", "h{b}", "f", "g"]);
    assert_eq!(h, vec!["1", "2"]);
    let l: Vec<String> = q(&mut cb, &["LRANGE", "l{b}", "0", "-1"]);
    assert_eq!(l, vec!["1", "2", "3"]);
    let v: Option<String> = q(&mut cb, &["GET", "new{b}"]);
    assert_eq!(v.as_deref(), Some("late"));
    let v: Option<String> = q(&mut cb, &["GET", "stale{b}"]);
    assert_eq!(v, None, "the target's stale key was purged");
    let _: () = q(&mut cb, &["SELECT", "3"]);
    let v: Option<String> = q(&mut cb, &["GET", "db3{b}"]);
    assert_eq!(v.as_deref(), Some("three"));
    let mut tb = connect(b.port);
    let _: () = q(&mut tb, &["TERRACE.NAMESPACE", "alice"]);
    let v: Option<String> = q(&mut tb, &["GET", "k1{b}"]);
    assert_eq!(v.as_deref(), Some("alice's"));
    let v: Option<String> = q(&mut tenant, &["GET", "k1{b}"]);
    assert_eq!(v, None);
    // Unsealed once done: the slots are the source's to receive again.
    let _: () = q(&mut ca, &["SET", "h{b}", "back"]);
}

#[test]
fn an_aborted_migration_leaves_the_slots_with_the_source() {
    let (a, b) = (Engine::start(&[]), Engine::start(&[]));
    let mut ca = connect(a.port);
    for i in 0..500 {
        let _: () = q(&mut ca, &["SET", &format!("k{i}"), "v"]);
    }
    let _: String = q(&mut ca, &["TERRACE.MIGRATE", "START", "j", &format!("127.0.0.1:{}", b.port), "0-16383"]);
    let e = err(&mut ca, &["TERRACE.MIGRATE", "START", "j2", &format!("127.0.0.1:{}", b.port), "0-5"]);
    assert!(e.contains("under way"), "{e}");
    wait_phase(&mut ca, "ready");
    let _: String = q(&mut ca, &["TERRACE.MIGRATE", "SEAL"]);
    wait_phase(&mut ca, "handed-over");
    let _: String = q(&mut ca, &["TERRACE.MIGRATE", "ABORT"]);
    wait_phase(&mut ca, "aborted");
    let n: i64 = q(&mut ca, &["DBSIZE"]);
    assert_eq!(n, 500);
    let _: () = q(&mut ca, &["SET", "k1", "w"]);
    // Bad requests are refused with a reason.
    assert!(err(&mut ca, &["TERRACE.MIGRATE", "START", "j", "nowhere", "1-2"]).contains("host:port"));
    assert!(err(&mut ca, &["TERRACE.MIGRATE", "START", "j", "127.0.0.1:1", "9-2"]).contains("not a slot range"));
    assert!(err(&mut ca, &["TERRACE.MIGRATE", "FINISH"]).contains("phase"));
    // An unreachable target fails the job, and the slots stay.
    let _: String = q(&mut ca, &["TERRACE.MIGRATE", "START", "j3", &format!("127.0.0.1:{}", free_port()), "0-100"]);
    eventually(10, "the job fails", || status(&mut ca)["phase"] == "failed");
    let _: () = q(&mut ca, &["SET", "k2", "w"]);
}
