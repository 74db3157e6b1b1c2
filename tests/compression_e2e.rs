//! End-to-end tests of value compression: real engines, real clients, values from the
//! GeoNames and airports samples in `tests/data`.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{q, temp_dir, Engine, RedisPort};
use serde_json::Value;

fn records(file: &str) -> Vec<String> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")).lines().map(str::to_string).collect()
}

fn stats(c: &mut redis::Connection, tenant: &str) -> Value {
    let text: String = q(c, &["TERRACE.COMPRESSION", "STATS", tenant]);
    serde_json::from_str(&text).unwrap()
}

fn config(c: &mut redis::Connection, tenant: &str, kv: &[&str]) {
    let mut args = vec!["TERRACE.COMPRESSION", "CONFIG", tenant];
    args.extend_from_slice(kv);
    let _: String = q(c, &args);
}

/// Writes `recs` as `prefix:i` in one pipeline.
fn write_all(c: &mut redis::Connection, prefix: &str, recs: &[String]) {
    let mut p = redis::pipe();
    for (i, r) in recs.iter().enumerate() {
        p.cmd("SET").arg(format!("{prefix}:{i}")).arg(r).ignore();
    }
    p.query::<()>(c).unwrap();
}

fn check_all(c: &mut redis::Connection, prefix: &str, recs: &[String]) {
    let keys: Vec<String> = (0..recs.len()).map(|i| format!("{prefix}:{i}")).collect();
    let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(c).unwrap();
    for (i, (g, r)) in got.iter().zip(recs).enumerate() {
        assert_eq!(g.as_deref(), Some(r.as_str()), "{prefix}:{i}");
    }
    let one: String = q(c, &["GET", &keys[recs.len() / 2]]);
    assert_eq!(one, recs[recs.len() / 2]);
}

/// Waits for two more full cycles of the background pass, so the census describes the data
/// as it is now; returns the STATS then.
fn settled(c: &mut redis::Connection, tenant: &str) -> Value {
    let start = stats(c, tenant)["census_cycles"].as_u64().unwrap();
    wait_stats(c, tenant, "two census cycles", |s| s["census_cycles"].as_u64().unwrap() >= start + 2)
}

/// Waits until `cond` holds on the tenant's STATS (the background pass runs every 100 ms).
fn wait_stats(c: &mut redis::Connection, tenant: &str, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let s = stats(c, tenant);
        if cond(&s) {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}: {s:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `terrace ARGS`, which must exit with an error; returns what it printed on stderr.
fn fails_to_start(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_terrace")).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).output().unwrap();
    assert!(!out.status.success(), "terrace {args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn namespace_bytes(c: &mut redis::Connection) -> u64 {
    let info: String = q(c, &["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("terrace_namespace_data_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory names the namespace's bytes")
}

#[test]
fn every_codec_round_trips_through_a_real_engine_and_saves_memory() {
    let cities = records("cities-sample.jsonl");
    let raw: usize = cities.iter().map(|r| r.len()).sum();
    let plain_bytes = {
        let e = Engine::start(&[]);
        let mut c = e.client();
        write_all(&mut c, "city", &cities);
        check_all(&mut c, "city", &cities);
        namespace_bytes(&mut c)
    };
    for codec in ["zstd", "zstd-dict", "pattern", "auto"] {
        let e = Engine::start(&["--compression", codec]);
        let mut c = e.client();
        config(&mut c, "default", &["compression_train_after", "64"]);
        write_all(&mut c, "city", &cities);
        let _: String = q(&mut c, &["TERRACE.RETRAIN", "default", "SYNC"]);
        // Written again now that a generation exists: compressed on write (eager).
        write_all(&mut c, "city", &cities);
        let s = settled(&mut c, "default");
        assert_eq!(s["compressed_values"].as_u64().unwrap() + s["plain_values"].as_u64().unwrap(), cities.len() as u64, "{s:#}");
        check_all(&mut c, "city", &cities);
        let stored = s["compressed_bytes"].as_u64().unwrap() + s["plain_bytes"].as_u64().unwrap();
        let ratio = stored as f64 / raw as f64;
        let used = namespace_bytes(&mut c);
        // `auto` picks by measured ratio and speed: under load (a busy CI machine) plain zstd
        // can win on speed; then it is held to zstd's expectations.
        let chosen = s["codec"].as_str().unwrap_or_default().to_string();
        if codec == "auto" {
            assert!(["zstd", "zstd-dict", "pattern"].contains(&chosen.as_str()), "auto chose {chosen:?}: {s:#}");
        } else {
            assert_eq!(chosen, codec, "{s:#}");
        }
        if chosen == "zstd" {
            assert!(ratio < 1.0, "{codec}: {ratio}");
        } else {
            assert_eq!(s["plain_values"], 0, "{codec}: every record shrinks: {s:#}");
            assert!(ratio < 0.45, "{codec}: ratio {ratio}");
            assert!((used as f64) < 0.6 * plain_bytes as f64, "{codec}: {used} bytes vs {plain_bytes} uncompressed");
            let enc: String = q(&mut c, &["OBJECT", "ENCODING", "city:7"]);
            assert_eq!(enc, "compressed");
        }
        assert_eq!(s["decode_errors"], 0);
        let info: String = q(&mut c, &["INFO", "compression"]);
        assert!(info.contains("tenant_default:codec=") && info.contains("compression_tenants:1"), "{info}");
    }
}

#[test]
fn commands_see_decoded_values() {
    let cities = records("cities-sample.jsonl");
    let e = Engine::start(&["--compression", "pattern"]);
    let mut c = e.client();
    config(&mut c, "default", &["compression_train_after", "64"]);
    write_all(&mut c, "city", &cities);
    let _: String = q(&mut c, &["TERRACE.RETRAIN", "default", "SYNC"]);
    write_all(&mut c, "city", &cities);
    let r0 = &cities[0];
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "city:0"]), "compressed");
    assert_eq!(q::<usize>(&mut c, &["STRLEN", "city:0"]), r0.len());
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "city:0", "0", "12"]), r0[..13]);
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "city:1", &cities[2], "GET"]).as_deref(), Some(cities[1].as_str()));
    assert_eq!(q::<String>(&mut c, &["GETSET", "city:1", &cities[1]]), cities[2]);
    assert_eq!(q::<usize>(&mut c, &["APPEND", "city:3", "!"]), cities[3].len() + 1);
    assert_eq!(q::<String>(&mut c, &["GET", "city:3"]), format!("{}!", cities[3]));
    assert_eq!(q::<usize>(&mut c, &["SETRANGE", "city:4", "0", "["]), cities[4].len());
    assert_eq!(q::<String>(&mut c, &["GET", "city:4"]), format!("[{}", &cities[4][1..]));
    assert_eq!(q::<i64>(&mut c, &["COPY", "city:5", "copy"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "copy"]), cities[5]);
    let _: () = q(&mut c, &["RENAME", "copy", "moved"]);
    assert_eq!(q::<String>(&mut c, &["GET", "moved"]), cities[5]);
    let dump: Vec<u8> = q(&mut c, &["DUMP", "city:6"]);
    let _: () = redis::cmd("RESTORE").arg("restored").arg(0).arg(dump).query(&mut c).unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", "restored"]), cities[6]);
    let lcs: String = q(&mut c, &["LCS", "city:8", "city:8"]);
    assert_eq!(lcs, cities[8]);
    let bits: i64 = q(&mut c, &["BITCOUNT", "city:9"]);
    assert_eq!(bits, cities[9].bytes().map(|b| b.count_ones() as i64).sum::<i64>());
    let item: Vec<Value2> = redis::cmd("MC.GET").arg("city:10").query::<Vec<Vec<redis::Value>>>(&mut c).unwrap().into_iter().flatten().map(Value2).collect();
    assert!(matches!(&item[0].0, redis::Value::BulkString(b) if b == cities[10].as_bytes()), "{item:?}");
    assert_eq!(q::<Option<String>>(&mut c, &["GETDEL", "city:11"]).as_deref(), Some(cities[11].as_str()));
    // INCR reads the decoded text: not an integer (rather than a wrong type).
    let e = common::err(&mut c, &["INCR", "city:12"]);
    assert!(e.contains("not an integer"), "{e}");
}

#[derive(Debug)]
struct Value2(redis::Value);

#[test]
fn restart_keeps_values_readable_and_dictionaries_loaded() {
    let (cities, airports) = (records("cities-sample.jsonl"), records("airports-sample.jsonl"));
    let dir = temp_dir("compress-restart");
    let mut e = Engine::start_in(&dir, &["--compression", "pattern"], &[]);
    let mut c = e.client();
    config(&mut c, "default", &["compression_train_after", "64"]);
    write_all(&mut c, "city", &cities);
    let _: String = q(&mut c, &["TERRACE.RETRAIN", "default", "SYNC"]);
    write_all(&mut c, "city", &cities);
    // A second generation, trained on other data; the first one's values stay readable.
    write_all(&mut c, "airport", &airports);
    let before = stats(&mut c, "default")["generation"].as_u64().unwrap();
    let _: String = q(&mut c, &["TERRACE.RETRAIN", "default", "SYNC"]);
    let s = stats(&mut c, "default");
    let generation = s["generation"].as_u64().unwrap();
    assert_eq!(generation, before + 1, "{s:#}");
    check_all(&mut c, "city", &cities);
    check_all(&mut c, "airport", &airports);
    let _: () = q(&mut c, &["SAVE"]);
    assert!(dir.join(format!("compression/default/gen-{generation}.dict")).exists());
    drop(c);
    e.restart(&["--compression", "pattern"]);
    let mut c = e.client();
    check_all(&mut c, "city", &cities);
    check_all(&mut c, "airport", &airports);
    let s = stats(&mut c, "default");
    assert_eq!(s["generation"], generation, "the newest dictionary is current again: {s:#}");
    assert_eq!(s["retrains"], 0, "no training was needed: {s:#}");
    // Settings saved per tenant came back too.
    assert_eq!(s["settings"]["compression_train_after"], 64);
    // Snapshot values come back plain; the pass compresses them with the loaded dictionary.
    wait_stats(&mut c, "default", "recompression after restart", |s| s["compressed_values"].as_u64() == Some((cities.len() + airports.len()) as u64));
    check_all(&mut c, "city", &cities);
}

#[test]
fn drift_in_the_data_triggers_retraining() {
    let (cities, airports) = (records("cities-sample.jsonl"), records("airports-sample.jsonl"));
    let e = Engine::start(&["--compression", "pattern"]);
    let mut c = e.client();
    config(&mut c, "default", &["compression_train_after", "100", "compression_sample_size", "256"]);
    write_all(&mut c, "city", &cities);
    let s = wait_stats(&mut c, "default", "the first training", |s| s["generation"].as_u64().is_some());
    let first = s["generation"].as_u64().unwrap();
    write_all(&mut c, "city", &cities);
    // Another kind of record: no template matches, the ratio worsens, the monitor retrains.
    for round in 0..3 {
        write_all(&mut c, &format!("airport{round}"), &airports);
    }
    let s = wait_stats(&mut c, "default", "a retraining", |s| s["generation"].as_u64().unwrap_or(0) > first);
    let reason = s["generations"].as_array().unwrap().iter().find(|g| g["current"] == true).unwrap()["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("drifted") || reason.contains("template"), "{reason}");
    write_all(&mut c, "airport9", &airports);
    check_all(&mut c, "airport9", &airports);
    check_all(&mut c, "city", &cities);
}

#[test]
fn a_corrupt_dictionary_stops_the_engine_with_a_clear_error() {
    let cities = records("cities-sample.jsonl");
    let dir = temp_dir("compress-corrupt");
    let e = Engine::start_in(&dir, &["--compression", "zstd-dict"], &[]);
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "shop"]);
    config(&mut c, "shop", &["compression", "zstd-dict", "compression_train_after", "64"]);
    write_all(&mut c, "city", &cities);
    let _: String = q(&mut c, &["TERRACE.RETRAIN", "shop", "SYNC"]);
    let _: () = q(&mut c, &["SAVE"]);
    drop(c);
    let mut e = e;
    let _ = e.child.kill();
    let _ = e.child.wait();
    let file = dir.join("compression/shop/gen-1.dict");
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let msg = fails_to_start(&["engine", "--port", "0", "--data-dir", dir.to_str().unwrap()]);
    assert!(msg.contains("tenant 'shop'") && msg.contains("gen-1.dict") && msg.contains("checksum"), "{msg}");
    // A dictionary file that is gone is as clear an error.
    std::fs::remove_file(&file).unwrap();
    let msg = fails_to_start(&["engine", "--port", "0", "--data-dir", dir.to_str().unwrap()]);
    assert!(msg.contains("tenant 'shop'") && msg.contains("gen-1.dict") && msg.contains("missing"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lazy_mode_compresses_only_cold_values() {
    let cities = records("cities-sample.jsonl");
    let e = Engine::start(&["--compression", "pattern", "--compression-mode", "lazy"]);
    let mut c = e.client();
    config(&mut c, "default", &["compression_train_after", "64", "compression_cold_seconds", "3600"]);
    write_all(&mut c, "city", &cities);
    let _: String = q(&mut c, &["TERRACE.RETRAIN", "default", "SYNC"]);
    write_all(&mut c, "city", &cities);
    let s = settled(&mut c, "default");
    assert_eq!(s["plain_values"], cities.len() as u64, "{s:#}");
    assert_eq!(s["compressed_values"], 0, "hot values stay raw: {s:#}");
    assert_ne!(q::<String>(&mut c, &["OBJECT", "ENCODING", "city:1"]), "compressed");
    config(&mut c, "default", &["compression_cold_seconds", "0"]);
    wait_stats(&mut c, "default", "cold values compressed", |s| s["compressed_values"].as_u64() == Some(cities.len() as u64));
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "city:1"]), "compressed");
    // A read makes a value hot again: it is stored plain until it turns cold once more.
    config(&mut c, "default", &["compression_cold_seconds", "3600"]);
    assert_eq!(q::<String>(&mut c, &["GET", "city:1"]), cities[1]);
    assert_ne!(q::<String>(&mut c, &["OBJECT", "ENCODING", "city:1"]), "compressed");
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "city:2"]), "compressed");
    check_all(&mut c, "city", &cities);
    let s = settled(&mut c, "default");
    assert_eq!(s["plain_values"], cities.len() as u64, "every value read is plain again: {s:#}");
}

#[test]
fn tenants_choose_their_codec_and_bad_settings_are_refused() {
    let airports = records("airports-sample.jsonl");
    let e = Engine::start(&[]);
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "shop", "COMPRESSION", "zstd-dict", "COMPRESSION-MIN-SIZE", "16"]);
    config(&mut c, "shop", &["compression_train_after", "64"]);
    write_all(&mut c, "a", &airports);
    let s = wait_stats(&mut c, "shop", "training", |s| s["generation"].as_u64().is_some() && s["compressed_values"].as_u64() > Some(0));
    assert_eq!(s["codec"], "zstd-dict");
    check_all(&mut c, "a", &airports);
    // The default tenant was not touched.
    assert_eq!(stats(&mut c, "default")["settings"]["compression"], "none");
    let advice: String = q(&mut c, &["TERRACE.COMPRESSION", "ADVISE", "shop"]);
    let advice: Value = serde_json::from_str(&advice).unwrap();
    assert_eq!(advice["candidates"].as_array().unwrap().len(), 3, "{advice:#}");
    assert!(advice["reason"].as_str().unwrap().len() > 10);
    let e1 = common::err(&mut c, &["TERRACE.COMPRESSION", "CONFIG", "shop", "compression", "lz4"]);
    assert!(e1.contains("'lz4'"), "{e1}");
    let e2 = common::err(&mut c, &["TERRACE.COMPRESSION", "STATS", "nobody"]);
    assert!(e2.contains("no such tenant 'nobody'"), "{e2}");
    let e3 = common::err(&mut c, &["TERRACE.RETRAIN", "default"]);
    assert!(e3.contains("compression is off"), "{e3}");
    let e4 = common::err(&mut c, &["TERRACE.NAMESPACE", "shop", "COMPRESSION-MODE", "sometimes"]);
    assert!(e4.contains("eager or lazy"), "{e4}");
}

#[test]
fn proxy_tenants_carry_their_compression_settings_to_the_engines() {
    let airports = records("airports-sample.jsonl");
    let engines = [Engine::start(&[]), Engine::start(&[])];
    let cfg = temp_dir("compress-proxy").join("terrace.toml");
    std::fs::write(&cfg, "[[proxy.tenants]]\nname = \"shop\"\npassword = \"pw\"\ncompression = \"pattern\"\ncompression_min_size = 16\n").unwrap();
    let proxy = common::Proxy::start(&[&engines[0], &engines[1]], &["--config", cfg.to_str().unwrap()], &[]);
    let mut shop = redis::Client::open(format!("redis://shop:pw@127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    write_all(&mut shop, "a", &airports);
    check_all(&mut shop, "a", &airports);
    for e in &engines {
        let mut c = e.client();
        let s = stats(&mut c, "shop");
        assert_eq!(s["settings"]["compression"], "pattern", "{s:#}");
        assert_eq!(s["settings"]["compression_min_size"], 16);
        assert!(s["writes"].as_u64().unwrap() > 0, "each engine holds part of the tenant's keys: {s:#}");
        assert_eq!(stats(&mut c, "default")["settings"]["compression"], "none");
    }
    let bad = temp_dir("compress-proxy-bad").join("terrace.toml");
    std::fs::write(&bad, "[[proxy.tenants]]\nname = \"shop\"\ncompression = \"lz4\"\n").unwrap();
    let msg = fails_to_start(&["proxy", "--port", "0", "--memcache-port", "0", "--engines", "127.0.0.1:1", "--config", bad.to_str().unwrap()]);
    assert!(msg.contains("compression of tenant 'shop'") && msg.contains("'lz4'"), "{msg}");
}

#[test]
fn counters_stored_compressed_still_count() {
    let e = Engine::start(&["--compression", "pattern"]);
    let mut c = e.client();
    config(&mut c, "default", &["compression_train_after", "64", "compression_min_size", "1"]);
    let numbers: Vec<String> = (0..300u64).map(|i| format!("{}", 10_000_000_000_000_000 + i * 7_919_113_571)).collect();
    write_all(&mut c, "n", &numbers);
    let _: String = q(&mut c, &["TERRACE.RETRAIN", "default", "SYNC"]);
    let _: () = q(&mut c, &["SET", "counter", "12345678901234567"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "counter"]), "compressed", "the digits shrink under the trained stage");
    assert_eq!(q::<i64>(&mut c, &["INCR", "counter"]), 12345678901234568);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "counter", "-8"]), 12345678901234560);
    assert_eq!(q::<String>(&mut c, &["GET", "counter"]), "12345678901234560");
}

/// Retraining settles: after one retrain on stable data, the drift monitor (every second)
/// does not retrain again while the same kind of records keeps being written — for the
/// dictionary and the pattern codec. (A monitor comparing the live ratio with one measured
/// on the training data itself retrained about once a second, forever.)
#[test]
fn a_retrain_on_stable_data_settles() {
    let (cities, airports) = (records("cities-sample.jsonl"), records("airports-sample.jsonl"));
    let e = Engine::start(&[]);
    let mut c = e.client();
    for (tenant, codec) in [("dict", "zstd-dict"), ("pattern", "pattern")] {
        let _: () = q(&mut c, &["TERRACE.NAMESPACE", tenant]);
        // (A sample smaller than the data: most live values are ones the codec never saw.)
        config(&mut c, tenant, &["compression", codec, "compression_train_after", "64", "compression_sample_size", "128"]);
        write_all(&mut c, "city", &cities);
        write_all(&mut c, "airport", &airports);
        let _: String = q(&mut c, &["TERRACE.RETRAIN", tenant, "SYNC"]);
    }
    let before: Vec<(u64, u64)> = ["dict", "pattern"]
        .iter()
        .map(|t| {
            let s = stats(&mut c, t);
            (s["generation"].as_u64().unwrap(), s["retrains"].as_u64().unwrap())
        })
        .collect();
    // Twelve seconds of the monitor (TERRACE_SETTLE_SECONDS for a longer soak: the issue's
    // ten minutes were run with 600, see the note), with the same records written
    // again meanwhile.
    let seconds = std::env::var("TERRACE_SETTLE_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(12);
    let start = Instant::now();
    let mut round = 0;
    while start.elapsed() < Duration::from_secs(seconds) {
        for tenant in ["dict", "pattern"] {
            let _: () = q(&mut c, &["TERRACE.NAMESPACE", tenant]);
            write_all(&mut c, &format!("city{}", round % 3), &cities);
        }
        round += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    for (tenant, (generation, retrains)) in ["dict", "pattern"].iter().zip(before) {
        let s = stats(&mut c, tenant);
        assert_eq!((s["generation"].as_u64().unwrap(), s["retrains"].as_u64().unwrap()), (generation, retrains), "{tenant} retrained on stable data: {s:#}");
        assert!(s["live_values"].as_u64().unwrap() > 500, "{tenant}: the monitor had values to look at: {s:#}");
    }
}
