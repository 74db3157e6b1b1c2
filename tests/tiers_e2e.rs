//! End-to-end tests of the PMem tier: real engines with an arena file, real clients.
//! Where a key lives is read from `DEBUG OBJECT` (`tier:dram|pmem`) and INFO `tiers`.

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};

use common::{err, info_field, q, temp_dir, Engine, RedisPort};

/// Engine flags for a tier with its file in the engine's own temporary directory.
fn tier_flags(dir: &std::path::Path, size: &str, dram_max: &str, policy: &str, promote_hits: u8) -> Vec<String> {
    let file = dir.join("pmem.arena");
    let promote_hits = promote_hits.to_string();
    // DEBUG OBJECT (allowed to the tests' loopback clients) shows which tier holds a value.
    let debug = ["--enable-debug-command", "local"];
    [
        "--pmem-path",
        file.to_str().unwrap(),
        "--pmem-size",
        size,
        "--dram-max",
        dram_max,
        "--tier-policy",
        policy,
        "--promote-hits",
        &promote_hits,
        debug[0],
        debug[1],
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn start_tiered(size: &str, dram_max: &str, policy: &str, promote_hits: u8, extra: &[&str]) -> Engine {
    let dir = temp_dir("tiers");
    let mut flags = tier_flags(&dir, size, dram_max, policy, promote_hits);
    flags.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    Engine::start_in(&dir, &args, &[])
}

fn tiers(c: &mut redis::Connection) -> HashMap<String, String> {
    let text: String = q(c, &["INFO", "tiers"]);
    text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.trim().to_string())).collect()
}

fn stat(c: &mut redis::Connection, name: &str) -> u64 {
    info_field(c, "tiers", name)
}

fn tier_of(c: &mut redis::Connection, key: &str) -> String {
    let line: String = q(c, &["DEBUG", "OBJECT", key]);
    line.rsplit("tier:").next().unwrap().trim().to_string()
}

/// What a key holds in the model.
#[derive(Debug, Clone, PartialEq)]
enum Model {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Hash(HashMap<Vec<u8>, Vec<u8>>),
}

fn value(len: usize) -> Vec<u8> {
    let seed = fastrand::u8(..);
    (0..len).map(|i| b'a' + ((i as u8).wrapping_mul(7).wrapping_add(seed) % 26)).collect()
}

fn check(c: &mut redis::Connection, key: &str, m: Option<&Model>) {
    match m {
        None => assert_eq!(q::<i64>(c, &["EXISTS", key]), 0, "{key} should be gone"),
        Some(Model::Str(v)) => {
            let got: Vec<u8> = redis::cmd("GET").arg(key).query(c).unwrap();
            assert!(got == *v, "{key}: {} bytes, expected {}", got.len(), v.len());
        }
        Some(Model::List(l)) => {
            let got: Vec<Vec<u8>> = redis::cmd("LRANGE").arg(key).arg(0).arg(-1).query(c).unwrap();
            assert_eq!(got, *l, "{key}");
        }
        Some(Model::Hash(h)) => {
            let got: HashMap<Vec<u8>, Vec<u8>> = redis::cmd("HGETALL").arg(key).query(c).unwrap();
            assert_eq!(got, *h, "{key}");
        }
    }
}

/// A random workload over strings (some larger than a slab), lists and hashes with a DRAM
/// budget far below the data, so values are demoted and promoted constantly; every read and
/// a final sweep check each key against the model.
fn churn(policy: &str) {
    let e = start_tiered("32mb", "32kb", policy, 1, &[]);
    let mut c = e.client();
    let mut model: HashMap<String, Model> = HashMap::new();
    let keys = 600;
    for step in 0..12_000 {
        let key = format!("k{}", fastrand::usize(..keys));
        let op = fastrand::u8(..100);
        let kind_ok = |m: Option<&Model>, want: fn(&Model) -> bool| m.map(want).unwrap_or(true);
        match op {
            0..=29 => {
                let len = match fastrand::u16(..400) {
                    0 => 1_100_000 + fastrand::usize(..400_000), // larger than a 1 MiB slab
                    1..=40 => 5_000 + fastrand::usize(..20_000),
                    _ => fastrand::usize(..1_200),
                };
                let v = value(len);
                let _: () = redis::cmd("SET").arg(&key).arg(&v).query(&mut c).unwrap();
                model.insert(key, Model::Str(v));
            }
            30..=64 => check(&mut c, &key, model.get(&key)),
            65..=72 if kind_ok(model.get(&key), |m| matches!(m, Model::Str(_))) => {
                let extra = value(fastrand::usize(1..300));
                let _: i64 = redis::cmd("APPEND").arg(&key).arg(&extra).query(&mut c).unwrap();
                match model.entry(key).or_insert(Model::Str(Vec::new())) {
                    Model::Str(v) => v.extend_from_slice(&extra),
                    _ => unreachable!(),
                }
            }
            73..=80 if kind_ok(model.get(&key), |m| matches!(m, Model::List(_))) => {
                let items: Vec<Vec<u8>> = (0..fastrand::usize(1..20)).map(|_| value(fastrand::usize(1..200))).collect();
                let _: i64 = redis::cmd("RPUSH").arg(&key).arg(&items).query(&mut c).unwrap();
                match model.entry(key).or_insert(Model::List(Vec::new())) {
                    Model::List(l) => l.extend(items),
                    _ => unreachable!(),
                }
            }
            81..=88 if kind_ok(model.get(&key), |m| matches!(m, Model::Hash(_))) => {
                let (f, v) = (value(fastrand::usize(1..12)), value(fastrand::usize(1..300)));
                let _: i64 = redis::cmd("HSET").arg(&key).arg(&f).arg(&v).query(&mut c).unwrap();
                match model.entry(key).or_insert(Model::Hash(HashMap::new())) {
                    Model::Hash(h) => {
                        h.insert(f, v);
                    }
                    _ => unreachable!(),
                }
            }
            89..=93 => {
                let _: i64 = q(&mut c, &["DEL", &key]);
                model.remove(&key);
            }
            94..=96 => {
                let to = format!("k{}", fastrand::usize(..keys));
                if model.contains_key(&key) && to != key {
                    let _: () = q(&mut c, &["RENAME", &key, &to]);
                    let m = model.remove(&key).unwrap();
                    model.insert(to, m);
                }
            }
            _ => {
                let to = format!("copy{}", fastrand::usize(..50));
                if model.contains_key(&key) {
                    let _: i64 = q(&mut c, &["COPY", &key, &to, "REPLACE"]);
                    let m = model[&key].clone();
                    model.insert(to, m);
                }
            }
        }
        if step % 3000 == 2999 {
            let _: () = q(&mut c, &["PING"]);
        }
    }
    for i in 0..keys {
        let key = format!("k{i}");
        check(&mut c, &key, model.get(&key));
    }
    for i in 0..50 {
        let key = format!("copy{i}");
        check(&mut c, &key, model.get(&key));
    }
    let t = tiers(&mut c);
    let num = |k: &str| t[k].parse::<u64>().unwrap();
    assert!(num("demotions") > 1000, "{policy}: demotions {t:?}");
    assert!(num("pmem_keys") > 100, "{policy}: {t:?}");
    if policy != "dram-first" {
        assert!(num("promotions") > 100, "{policy}: promotions {t:?}");
    } else {
        assert_eq!(num("promotions"), 0, "dram-first never promotes strings");
    }
    let dbsize: u64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(dbsize, model.len() as u64);
}

#[test]
fn churn_dram_first_keeps_every_value() {
    churn("dram-first");
}

#[test]
fn churn_pmem_first_keeps_every_value() {
    churn("pmem-first");
}

#[test]
fn churn_bidirectional_keeps_every_value() {
    churn("bidirectional");
}

#[test]
fn dram_first_demotes_the_coldest_and_reads_in_place() {
    let e = start_tiered("8mb", "64kb", "dram-first", 2, &[]);
    let mut c = e.client();
    let v = "x".repeat(200);
    for i in 0..100 {
        let _: () = q(&mut c, &["SET", &format!("a{i}"), &v]);
    }
    assert_eq!(tier_of(&mut c, "a0"), "dram", "new values start in DRAM");
    assert_eq!(stat(&mut c, "pmem_keys"), 0);
    // Let the first keys turn cold (the LRU clock counts seconds).
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for i in 100..600 {
        let _: () = q(&mut c, &["SET", &format!("a{i}"), &v]);
    }
    // As with maxmemory, the budget is enforced before each write: one value may overshoot.
    assert!(stat(&mut c, "dram_value_bytes") <= 64 * 1024 + v.len() as u64, "DRAM stays within dram_max");
    assert!(stat(&mut c, "pmem_keys") >= 250);
    let cold_in_pmem = (0..100).filter(|i| tier_of(&mut c, &format!("a{i}")) == "pmem").count();
    assert!(cold_in_pmem > 90, "the cold keys went first: {cold_in_pmem} of 100 in PMem");
    let cold = (0..100).map(|i| format!("a{i}")).find(|k| tier_of(&mut c, k) == "pmem").unwrap();
    let before = stat(&mut c, "pmem_hits");
    for _ in 0..5 {
        assert_eq!(q::<String>(&mut c, &["GET", &cold]), v);
    }
    assert_eq!(tier_of(&mut c, &cold), "pmem", "dram-first serves PMem values in place");
    assert_eq!(stat(&mut c, "pmem_hits"), before + 5);
    assert_eq!(stat(&mut c, "promotions"), 0);
    // Collections move as a whole and come back on access.
    let items: Vec<String> = (0..50).map(|i| format!("item-{i:04}")).collect();
    let mut rp = vec!["RPUSH", "list"];
    rp.extend(items.iter().map(String::as_str));
    let _: i64 = q(&mut c, &rp);
    let _: i64 = q(&mut c, &["ZADD", "zset", "1.5", "one-member-with-a-long-name", "2.5", "two"]);
    let _: i64 = q(&mut c, &["SADD", "set", "alpha-member", "beta-member", "gamma-member"]);
    let _: i64 = q(&mut c, &["HSET", "hash", "field-one", "value-one", "field-two", "value-two"]);
    let id: String = q(&mut c, &["XADD", "stream", "*", "sensor", "42", "reading", "some-text"]);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for i in 600..1600 {
        let _: () = q(&mut c, &["SET", &format!("a{i}"), &v]);
    }
    for key in ["list", "zset", "set", "hash", "stream"] {
        assert_eq!(tier_of(&mut c, key), "pmem", "{key} was cold and went as a whole");
    }
    let got: Vec<String> = q(&mut c, &["LRANGE", "list", "0", "-1"]);
    assert_eq!(got, items);
    assert_eq!(tier_of(&mut c, "list"), "dram", "read: thawed back into DRAM");
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "zset", "0", "-1", "WITHSCORES"]), vec!["one-member-with-a-long-name", "1.5", "two", "2.5"]);
    let mut members: Vec<String> = q(&mut c, &["SMEMBERS", "set"]);
    members.sort();
    assert_eq!(members, vec!["alpha-member", "beta-member", "gamma-member"]);
    assert_eq!(q::<String>(&mut c, &["HGET", "hash", "field-two"]), "value-two");
    let entries: Vec<(String, Vec<String>)> = q(&mut c, &["XRANGE", "stream", "-", "+"]);
    assert_eq!(entries, vec![(id, vec!["sensor".into(), "42".into(), "reading".into(), "some-text".into()])]);
}

#[test]
fn pmem_first_places_new_values_in_pmem_and_promotes_after_hits() {
    let e = start_tiered("8mb", "1mb", "pmem-first", 3, &[]);
    let mut c = e.client();
    let v = "y".repeat(300);
    let _: () = q(&mut c, &["SET", "k", &v]);
    let _: () = q(&mut c, &["SET", "tiny", "1"]);
    assert_eq!(tier_of(&mut c, "k"), "pmem");
    assert_eq!(tier_of(&mut c, "tiny"), "dram", "values under 16 bytes stay in DRAM");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), v);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), v);
    assert_eq!(tier_of(&mut c, "k"), "pmem", "two reads: not yet");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), v);
    assert_eq!(tier_of(&mut c, "k"), "dram", "the third read promoted it");
    assert_eq!(stat(&mut c, "promotions"), 1);
    // TERRACE.STATS: the same numbers as JSON, for the console and the cost model.
    let doc: serde_json::Value = serde_json::from_str(&q::<String>(&mut c, &["TERRACE.STATS"])).unwrap();
    assert_eq!(doc["keys"], 2);
    assert_eq!(doc["tiers"]["policy"], "pmem-first");
    assert_eq!(doc["tiers"]["pmem"]["keys"], 0, "k was promoted, tiny never left DRAM");
    assert_eq!(doc["tiers"]["dram"]["keys"], 2);
    assert_eq!(doc["tiers"]["dram"]["value_bytes"], 301);
    assert_eq!(doc["tiers"]["pmem"]["hits"], 3, "the promoting read was served from PMem");
    assert_eq!(doc["tiers"]["promotions"], 1);
    assert!(doc["tiers"]["pmem"]["capacity_bytes"].as_u64().unwrap() > 7 << 20);
    // Writes that edit a value in place bring it to DRAM first.
    let _: () = q(&mut c, &["SET", "n", &"1".repeat(17)]);
    assert_eq!(tier_of(&mut c, "n"), "pmem");
    let _: i64 = q(&mut c, &["APPEND", "n", "2"]);
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), format!("{}2", "1".repeat(17)));
    let _: i64 = q(&mut c, &["SETRANGE", "n", "0", "9"]);
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "n", "0", "2"]), "911");
}

#[test]
fn bidirectional_brings_demoted_values_back_when_hot() {
    let e = start_tiered("8mb", "32kb", "bidirectional", 2, &[]);
    let mut c = e.client();
    let v = "z".repeat(500);
    for i in 0..200 {
        let _: () = q(&mut c, &["SET", &format!("b{i}"), &v]);
    }
    assert_eq!(tier_of(&mut c, "b199"), "dram", "new values go to DRAM");
    let in_pmem = (0..200).find(|i| tier_of(&mut c, &format!("b{i}")) == "pmem").expect("some value was demoted");
    let key = format!("b{in_pmem}");
    // Let every other value turn colder than the one about to be read (the LRU clock counts
    // seconds), so the demoter, back over budget after the promotion, picks one of them.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(q::<String>(&mut c, &["GET", &key]), v);
    assert_eq!(q::<String>(&mut c, &["GET", &key]), v);
    assert_eq!(tier_of(&mut c, &key), "dram");
    assert!(stat(&mut c, "promotions") >= 1);
}

#[test]
fn full_arena_falls_back_to_the_eviction_policy() {
    // noeviction: once both tiers are full, writes are refused as with maxmemory.
    let e = start_tiered("1mb", "16kb", "dram-first", 2, &[]);
    let mut c = e.client();
    let v = "v".repeat(1000);
    let mut refused = None;
    for i in 0..3000 {
        let r: redis::RedisResult<()> = redis::cmd("SET").arg(format!("f{i}")).arg(&v).query(&mut c);
        if let Err(e) = r {
            refused = Some((i, e.to_string()));
            break;
        }
    }
    let (at, msg) = refused.expect("a 1 MB arena can't take 3 MB");
    assert!(msg.contains("OOM"), "{msg}");
    assert!(at > 500, "the arena filled up first ({at} writes)");
    assert!(stat(&mut c, "arena_full_events") > 0);
    assert_eq!(q::<String>(&mut c, &["GET", "f0"]), v, "nothing was lost");
    assert_eq!(q::<i64>(&mut c, &["DEL", "f0", "f1", "f2", "f3"]), 4);
    // allkeys-lru: the same workload evicts instead, DRAM stays within its budget.
    let e = start_tiered("1mb", "16kb", "dram-first", 2, &["--maxmemory-policy", "allkeys-lru"]);
    let mut c = e.client();
    for i in 0..3000 {
        let _: () = q(&mut c, &["SET", &format!("f{i}"), &v]);
    }
    let evicted = info_field(&mut c, "stats", "evicted_keys");
    assert!(evicted > 1000, "evicted {evicted}");
    assert!(stat(&mut c, "dram_value_bytes") <= 16 * 1024 + 1000);
    assert_eq!(q::<String>(&mut c, &["GET", "f2999"]), v);
}

#[test]
fn without_a_tier_nothing_changes() {
    let e = Engine::start(&["--enable-debug-command", "local"]);
    let mut c = e.client();
    let _: () = q(&mut c, &["SET", "k", &"v".repeat(100)]);
    let doc: serde_json::Value = serde_json::from_str(&q::<String>(&mut c, &["TERRACE.STATS"])).unwrap();
    assert_eq!(doc["keys"], 1);
    assert!(doc["tiers"].is_null());
    let info: String = q(&mut c, &["INFO", "tiers"]);
    assert!(!info.contains("tier_policy"), "{info}");
    assert_eq!(tier_of(&mut c, "k"), "dram");
}

fn start_fails(flags: &[&str]) -> String {
    let dir = temp_dir("tiers-bad");
    let out = Command::new(env!("CARGO_BIN_EXE_terrace"))
        .args(["engine", "--port", "0", "--data-dir"])
        .arg(&dir)
        .args(flags)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success(), "the engine started with {flags:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_pmem_files_are_clear_errors() {
    let dir = temp_dir("tiers-files");
    let file = dir.join("arena");
    std::fs::write(&file, vec![0u8; 2 << 20]).unwrap();
    let msg = start_fails(&["--pmem-path", file.to_str().unwrap(), "--pmem-size", "4mb"]);
    assert!(msg.contains("pmem_size") && msg.contains(file.to_str().unwrap()) && msg.contains("2097152"), "{msg}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 2 << 20, "a file of another size is never truncated");
    let msg = start_fails(&["--pmem-path", dir.to_str().unwrap(), "--pmem-size", "4mb"]);
    assert!(msg.contains("pmem_path") && msg.contains(dir.to_str().unwrap()), "a directory: {msg}");
    let missing = dir.join("no/such/dir/arena");
    let msg = start_fails(&["--pmem-path", missing.to_str().unwrap()]);
    assert!(msg.contains("pmem_path") && msg.contains("no/such/dir"), "{msg}");
    let msg = start_fails(&["--dram-max", "1mb"]);
    assert!(msg.contains("dram_max") && msg.contains("pmem_path"), "{msg}");
    let msg = start_fails(&["--pmem-path", file.to_str().unwrap(), "--tier-policy", "lru"]);
    assert!(msg.contains("tier_policy"), "{msg}");
}

#[test]
fn warm_restart_serves_the_same_data_and_a_crash_starts_cold() {
    let dir = temp_dir("tiers-warm");
    let flags = tier_flags(&dir, "8mb", "16kb", "dram-first", 2);
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut e = Engine::start_in(&dir, &args, &[]);
    let mut c = e.client();
    let mut strings = Vec::new();
    for i in 0..400 {
        let v = value(50 + i * 3);
        let _: () = redis::cmd("SET").arg(format!("s{i}")).arg(&v).query(&mut c).unwrap();
        strings.push(v);
    }
    let _: () = q(&mut c, &["SET", "ttl", "soon-and-long-enough-to-demote", "EX", "1000"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "1.5", "m1", "2.5", "m2"]);
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: () = q(&mut c, &["SET", "in-db3", "yes"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let pmem_keys = stat(&mut c, "pmem_keys");
    assert!(pmem_keys > 300, "most values are in PMem: {pmem_keys}");
    let version_before: String = q(&mut c, &["DEBUG", "OBJECT", "s5"]);
    drop(c);
    e.restart_clean(&args);
    let mut c = e.client();
    // (The background demoter may have moved a few more values before the shutdown.)
    assert!(stat(&mut c, "pmem_keys") >= pmem_keys, "the values are mapped back");
    for (i, v) in strings.iter().enumerate() {
        let got: Vec<u8> = redis::cmd("GET").arg(format!("s{i}")).query(&mut c).unwrap();
        assert!(got == *v, "s{i}");
    }
    let ttl: i64 = q(&mut c, &["TTL", "ttl"]);
    assert!(ttl > 990, "expiry kept: {ttl}");
    assert_eq!(q::<Vec<String>>(&mut c, &["HMGET", "h", "f1", "f2"]), vec!["v1", "v2"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]), vec!["m1", "1.5", "m2", "2.5"]);
    let _: () = q(&mut c, &["SELECT", "3"]);
    assert_eq!(q::<String>(&mut c, &["GET", "in-db3"]), "yes");
    assert!(version_before.contains("tier:pmem"));
    // The index was consumed at start: a crash now must not reuse it.
    assert!(!dir.join("pmem.arena.index").exists());
    drop(c);
    e.restart(&args); // SIGKILL, then start
    let mut c = e.client();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0, "after an unclean stop the tier starts cold");
    assert_eq!(stat(&mut c, "pmem_keys"), 0);
    assert!(err(&mut c, &["GET"]).contains("wrong number of arguments"));
}

#[test]
fn a_tenant_can_keep_out_of_the_tier_or_have_its_own_policy() {
    let e = start_tiered("8mb", "64kb", "dram-first", 2, &[]);
    let v = "z".repeat(200);
    let mut keep = e.client();
    let _: () = q(&mut keep, &["TERRACE.NAMESPACE", "latency", "TIER-POLICY", "dram-only"]);
    let mut own = e.client();
    let _: () = q(&mut own, &["TERRACE.NAMESPACE", "bulk", "TIER-POLICY", "pmem-first"]);
    let mut shared = e.client();
    let _: () = q(&mut shared, &["TERRACE.NAMESPACE", "other"]);
    for i in 0..300 {
        let _: () = q(&mut keep, &["SET", &format!("k{i}"), &v]);
        let _: () = q(&mut shared, &["SET", &format!("s{i}"), &v]);
    }
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for i in 300..900 {
        let _: () = q(&mut keep, &["SET", &format!("k{i}"), &v]);
        let _: () = q(&mut shared, &["SET", &format!("s{i}"), &v]);
    }
    // The engine's policy demoted the other tenant's cold values; the DRAM-only tenant's
    // stayed in DRAM however cold.
    assert!((0..300).filter(|i| tier_of(&mut shared, &format!("s{i}")) == "pmem").count() > 200);
    assert_eq!((0..900).filter(|i| tier_of(&mut keep, &format!("k{i}")) == "pmem").count(), 0);
    // A tenant with a policy of its own: pmem-first places its new values in PMem at once.
    let _: () = q(&mut own, &["SET", "b", &v]);
    assert_eq!(tier_of(&mut own, "b"), "pmem");
    // Written and looked at in one transaction: DRAM is over its budget here, and the
    // background demoter may move the new value at any moment after the write.
    let (fresh,): (String,) =
        redis::pipe().atomic().cmd("SET").arg("fresh").arg(&v).ignore().cmd("DEBUG").arg("OBJECT").arg("fresh").query(&mut shared).unwrap();
    assert!(fresh.ends_with("tier:dram"), "the engine's dram-first for the others: {fresh}");
    // Back to the engine's policy; a demoted value of a tenant that turns DRAM-only comes
    // back on its first read.
    let cold = (0..300).map(|i| format!("s{i}")).find(|k| tier_of(&mut shared, k) == "pmem").unwrap();
    let _: () = q(&mut shared, &["TERRACE.NAMESPACE", "other", "TIER-POLICY", "dram-only"]);
    assert_eq!(q::<String>(&mut shared, &["GET", &cold]), v);
    assert_eq!(tier_of(&mut shared, &cold), "dram");
    assert_eq!(
        err(&mut shared, &["TERRACE.NAMESPACE", "other", "TIER-POLICY", "fastest"]),
        "ResponseError: TIER-POLICY: 'fastest' is not one of engine, dram-only, dram-first, pmem-first, bidirectional"
    );
}

#[test]
fn without_a_tier_only_the_engine_policy_is_accepted() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "t", "TIER-POLICY", "engine"]);
    assert_eq!(err(&mut c, &["TERRACE.NAMESPACE", "t", "TIER-POLICY", "dram-only"]), "ResponseError: this engine has no PMem tier (start it with `pmem_path`)");
}
