//! The cost framework end to end: a tenant's workload statistics from a real engine
//! (`TERRACE.WORKLOAD`), checked against what the test sent — the mix, the keys and bytes,
//! and the miss-ratio curve against an exact LRU simulation of the same trace.

mod common;

use common::{q, Engine, RedisPort};

/// Zipf(theta) ranks over `n` keys by inverse CDF.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, theta: f64) -> Zipf {
        let w: Vec<f64> = (1..=n).map(|r| 1.0 / (r as f64).powf(theta)).collect();
        let total: f64 = w.iter().sum();
        let mut acc = 0.0;
        Zipf {
            cdf: w
                .iter()
                .map(|x| {
                    acc += x / total;
                    acc
                })
                .collect(),
        }
    }

    fn sample(&self, rng: &mut fastrand::Rng) -> usize {
        let u = rng.f64();
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1)
    }
}

/// Exact LRU miss ratio of `trace` at each size (stack distances, O(n²) worst case is fine
/// for the sizes here: a move-to-front list of the keys).
fn exact_lru(trace: &[usize], sizes: &[usize]) -> Vec<f64> {
    let mut stack: Vec<usize> = Vec::new();
    let mut misses = vec![0usize; sizes.len()];
    for &k in trace {
        let depth = stack.iter().position(|x| *x == k);
        for (i, s) in sizes.iter().enumerate() {
            if depth.is_none_or(|d| d >= *s) {
                misses[i] += 1;
            }
        }
        if let Some(d) = depth {
            stack.remove(d);
        }
        stack.insert(0, k);
    }
    misses.iter().map(|m| *m as f64 / trace.len() as f64).collect()
}

fn workload(c: &mut redis::Connection, tenant: &str) -> serde_json::Value {
    let text: String = q(c, &["TERRACE.WORKLOAD", tenant]);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn workload_statistics_match_the_traffic_sent() {
    let e = Engine::start(&["--threads", "1"]);
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "shop"]);
    const KEYS: usize = 12_000;
    let value = "v".repeat(100);
    let mut trace = Vec::new();
    let mut p = redis::pipe();
    for k in 0..KEYS {
        p.cmd("SET").arg(format!("item:{k}")).arg(&value).ignore();
        trace.push(k);
    }
    p.query::<()>(&mut c).unwrap();
    let zipf = Zipf::new(KEYS, 0.99);
    let mut rng = fastrand::Rng::with_seed(5);
    let (mut gets, mut sets) = (0u64, KEYS as u64);
    for _ in 0..20 {
        let mut p = redis::pipe();
        for _ in 0..2_000 {
            let k = zipf.sample(&mut rng);
            trace.push(k);
            if rng.f64() < 0.9 {
                p.cmd("GET").arg(format!("item:{k}")).ignore();
                gets += 1;
            } else {
                p.cmd("SET").arg(format!("item:{k}")).arg(&value).ignore();
                sets += 1;
            }
        }
        p.query::<()>(&mut c).unwrap();
    }
    let _: String = q(&mut c, &["PING"]);
    std::thread::sleep(std::time::Duration::from_millis(1300));
    let w = workload(&mut c, "shop");
    assert_eq!(w["tenant"], "shop");
    assert_eq!(w["reads"].as_u64().unwrap(), gets, "{w}");
    assert_eq!(w["writes"].as_u64().unwrap(), sets, "{w}");
    assert_eq!(w["keys"].as_u64().unwrap(), KEYS as u64);
    let avg = w["avg_record_bytes"].as_f64().unwrap();
    assert!((110.0..260.0).contains(&avg), "average record {avg}: {w}");
    assert!(w["bytes"]["dram_values"].as_u64().unwrap() >= (KEYS * 100) as u64);
    assert!(w["qps_1m"].as_f64().unwrap() > 0.0 && w["peak_1s"].as_f64().unwrap() >= w["qps_1m"].as_f64().unwrap(), "{w}");
    assert!(w["access_interval_ms"]["mean"].as_f64().is_some(), "{w}");
    // The miss-ratio curve against exact LRU on the same trace.
    let points = w["mrc"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 40);
    let sizes: Vec<usize> = points.iter().map(|p| p[1].as_f64().unwrap() as usize).collect();
    let want = exact_lru(&trace, &sizes);
    let got: Vec<f64> = points.iter().map(|p| p[2].as_f64().unwrap()).collect();
    assert!(got.windows(2).all(|w| w[1] <= w[0] + 1e-9), "a miss-ratio curve never rises: {got:?}");
    let mae = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).sum::<f64>() / want.len() as f64;
    assert!(mae <= 0.02, "mean absolute error {mae:.4} (rate {}):\n want {want:?}\n got {got:?}", w["mrc"]["sample_rate"]);
    // Statistics are the tenant's own: the default namespace saw none of it.
    let d = workload(&mut c, "default");
    assert_eq!(d["reads"].as_u64().unwrap() + d["writes"].as_u64().unwrap(), 0, "{d}");
    let e2 = common::err(&mut c, &["TERRACE.WORKLOAD", "nobody"]);
    assert!(e2.contains("no such tenant 'nobody'"), "{e2}");
}

fn terrace(args: &[&str]) -> std::process::Output {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_terrace")).args(args).output().unwrap();
    assert!(out.status.success(), "terrace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// (name, key) of each line of a recorded trace.
fn trace_ops(dir: &std::path::Path) -> Vec<(String, String)> {
    let unhex = |s: &str| (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap() as char).collect::<String>();
    std::fs::read_to_string(dir.join("trace.tsv"))
        .unwrap()
        .lines()
        .map(|l| {
            let args: Vec<&str> = l.split('\t').nth(3).unwrap().split(',').collect();
            (unhex(args[0]), unhex(args[1]))
        })
        .collect()
}

#[test]
fn a_recorded_trace_keeps_the_mix_and_the_key_popularity_and_replays() {
    let a = Engine::start(&["--threads", "1"]);
    let b = Engine::start(&["--threads", "1"]);
    let mut c = a.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "shop"]);
    const KEYS: usize = 2_000;
    let value = "city:Lisbon;country:PT;population:545000;".repeat(3);
    let mut p = redis::pipe();
    for k in 0..KEYS {
        p.cmd("SET").arg(format!("item:{k}")).arg(&value).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    let out = common::temp_dir("record");
    let trace_dir = out.join("trace");
    let recorder = {
        let (addr, dir) = (format!("127.0.0.1:{}", a.port), trace_dir.to_str().unwrap().to_string());
        std::thread::spawn(move || terrace(&["record", "--tenant", "shop", "--seconds", "3", "--rate", "0.5", "--engine", &addr, "--out", &dir]))
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    let zipf = Zipf::new(KEYS, 0.99);
    let mut rng = fastrand::Rng::with_seed(8);
    let mut sent: std::collections::HashMap<String, usize> = Default::default();
    let (mut gets, mut sets) = (0usize, 0usize);
    let mut p = redis::pipe();
    for _ in 0..20_000 {
        let key = format!("item:{}", zipf.sample(&mut rng));
        *sent.entry(key.clone()).or_default() += 1;
        if rng.f64() < 0.8 {
            p.cmd("GET").arg(&key).ignore();
            gets += 1;
        } else {
            p.cmd("SET").arg(&key).arg(&value).ignore();
            sets += 1;
        }
    }
    p.query::<()>(&mut c).unwrap();
    let stdout = String::from_utf8(recorder.join().unwrap().stdout).unwrap();
    assert!(stdout.contains("recorded"), "{stdout}");
    let ops = trace_ops(&trace_dir);
    // Every command on a sampled key is in the trace, so each key's popularity is exact.
    let mut traced: std::collections::HashMap<String, usize> = Default::default();
    for (_, k) in &ops {
        *traced.entry(k.clone()).or_default() += 1;
    }
    for (k, n) in &traced {
        assert_eq!(sent.get(k), Some(n), "{k}: sent {:?}, traced {n}", sent.get(k));
    }
    let share = traced.len() as f64 / sent.len() as f64;
    assert!((0.35..0.65).contains(&share), "rate 0.5 sampled {share:.2} of the keys used");
    let traced_gets = ops.iter().filter(|(n, _)| n == "GET").count() as f64;
    let mix = traced_gets / ops.len() as f64;
    let sent_mix = gets as f64 / (gets + sets) as f64;
    assert!((mix - sent_mix).abs() < 0.03, "GET share {mix:.3} in the trace, {sent_mix:.3} sent");
    // The data sample holds the sampled keys with their values.
    let data = std::fs::read_to_string(trace_dir.join("data.tsv")).unwrap();
    let sampled = data.lines().count() as f64;
    assert!((0.35..0.65).contains(&(sampled / KEYS as f64)), "{sampled} of {KEYS} keys in the data sample");
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(trace_dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["tenant"], "shop");
    assert_eq!(meta["workload"]["keys"].as_u64().unwrap(), KEYS as u64);
    // Replayed into another engine: the same commands arrive, with values of the recorded size.
    let out = terrace(&["replay", "--trace", trace_dir.to_str().unwrap(), "--engine", &format!("127.0.0.1:{}", b.port), "--load", "--once"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&format!("replayed {} commands", ops.len())) && text.contains("0 errors"), "{text}");
    let mut cb = b.client();
    let w = workload(&mut cb, "default");
    let replayed_gets = w["reads"].as_u64().unwrap() as f64;
    // Loading wrote the sample (RESTORE) and read it back once for values (GET).
    let loaded = sampled;
    assert_eq!(replayed_gets, traced_gets + loaded.min(20_000.0), "{w}");
    assert_eq!(w["keys"].as_f64().unwrap(), sampled);
    let some_key = &ops.iter().find(|(n, _)| n == "SET").unwrap().1;
    let v: String = q(&mut cb, &["GET", some_key]);
    assert_eq!(v.len(), value.len());
}

fn advise(c: &mut redis::Connection, tenant: &str) -> serde_json::Value {
    let text: String = q(c, &["TERRACE.ADVISE", tenant]);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn cost_eval_on_a_tiny_trace_end_to_end() {
    let cities: Vec<String> =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cities-sample.jsonl")).unwrap().lines().map(str::to_string).collect();
    let a = Engine::start(&["--threads", "1"]);
    let mut c = a.client();
    let mut p = redis::pipe();
    for (i, v) in cities.iter().enumerate() {
        p.cmd("SET").arg(format!("city:{i}")).arg(v).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    // Before any cost-eval: an estimate, said to be one.
    let before = advise(&mut c, "default");
    assert_eq!(before["advice"]["estimate"], true, "{before}");
    assert_eq!(before["advice"]["current"], "raw", "{before}");
    assert!(before["advice"]["reasons"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().starts_with("estimate")));
    // Traffic while recording.
    let port = a.port;
    let n = cities.len();
    let traffic = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let zipf = Zipf::new(n, 0.9);
        let mut rng = fastrand::Rng::with_seed(3);
        let until = std::time::Instant::now() + std::time::Duration::from_millis(2500);
        while std::time::Instant::now() < until {
            let mut p = redis::pipe();
            for _ in 0..200 {
                let k = format!("city:{}", zipf.sample(&mut rng));
                if rng.f64() < 0.9 {
                    p.cmd("GET").arg(k).ignore();
                } else {
                    p.cmd("APPEND").arg(k).arg(" ").ignore();
                }
            }
            p.query::<()>(&mut c).unwrap();
        }
    });
    let dir = common::temp_dir("cost-eval");
    let trace = dir.join("trace");
    terrace(&["record", "--tenant", "default", "--seconds", "1.5", "--engine", &format!("127.0.0.1:{port}"), "--out", trace.to_str().unwrap()]);
    traffic.join().unwrap();
    let cands = dir.join("candidates.toml");
    std::fs::write(&cands, "[measure]\nseconds = 0.3\np99_bound_us = 100000\n[[candidate]]\nname = \"raw\"\n[[candidate]]\nname = \"zstd\"\ncompression = \"zstd-dict\"\n[[candidate]]\nname = \"pmem\"\npmem = true\ndram_share = 0.2\n").unwrap();
    let out = terrace(&["cost-eval", "--trace", trace.to_str().unwrap(), "--candidates", cands.to_str().unwrap(), "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = r["candidates"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let row = |name: &str| rows.iter().find(|x| x["name"] == name).unwrap();
    for x in rows {
        let e = &x["evaluation"];
        assert!(x["capacity"]["max_perf"].as_f64().unwrap() > 1000.0, "{x}");
        assert!(x["capacity"]["max_space"].as_f64().unwrap() > 0.0, "{x}");
        let (pc, sc, cc) = (e["pc"].as_f64().unwrap(), e["sc"].as_f64().unwrap(), e["c"].as_f64().unwrap());
        assert_eq!(cc, pc.max(sc));
        assert!(!x["measured"]["runs"].as_array().unwrap().is_empty());
    }
    // Compression holds the cities in less DRAM; PMem moves most value bytes out of DRAM.
    assert!(row("zstd")["capacity"]["max_space"].as_f64().unwrap() > 1.5 * row("raw")["capacity"]["max_space"].as_f64().unwrap(), "{r}");
    assert!(row("pmem")["measured"]["pmem_per_byte"].as_f64().unwrap() > 0.3, "{r}");
    assert!(row("pmem")["measured"]["dram_per_byte"].as_f64().unwrap() < row("raw")["measured"]["dram_per_byte"].as_f64().unwrap());
    let cheapest = rows.iter().min_by(|a, b| a["evaluation"]["c"].as_f64().unwrap().total_cmp(&b["evaluation"]["c"].as_f64().unwrap())).unwrap();
    assert_eq!(r["optimum"], cheapest["name"]);
    assert_eq!(r["break_even"].as_array().unwrap().len(), 3);
    assert!(trace.join("cost-eval.json").exists());
    // Handed to the engine: the advisor now costs the measured configurations under the live load.
    let after = advise(&mut c, "default");
    assert_eq!(after["advice"]["estimate"], false, "{after}");
    let names: Vec<&str> = after["advice"]["options"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["raw", "zstd", "pmem"]);
    assert_eq!(after["advice"]["current"], "raw");
    assert!(names.contains(&after["advice"]["recommended"].as_str().unwrap()));
    let stored: String = q(&mut c, &["TERRACE.COSTEVAL", "GET", "default"]);
    assert!(stored.contains("\"optimum\""));
    // A bad candidates file is refused with the reason.
    std::fs::write(&cands, "[[candidate]]\nname = \"x\"\ncache_ratio = 2\n").unwrap();
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_terrace"))
        .args(["cost-eval", "--trace", trace.to_str().unwrap(), "--candidates", cands.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cache_ratio"), "{}", String::from_utf8_lossy(&bad.stderr));
    let e = common::err(&mut c, &["TERRACE.COSTEVAL", "SET", "default", "{\"x\":1}"]);
    assert!(e.contains("candidates"), "{e}");
}

#[test]
fn recording_through_a_proxy_takes_every_engine() {
    let e1 = Engine::start(&["--threads", "1"]);
    let e2 = Engine::start(&["--threads", "1"]);
    let proxy = common::Proxy::start(&[&e1, &e2], &[], &[]);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    const KEYS: usize = 1_000;
    for k in 0..KEYS {
        let _: () = q(&mut c, &["SET", &format!("user:{k}"), "profile"]);
    }
    let dir = common::temp_dir("record-proxy").join("trace");
    // Recording runs until told to stop (SIGINT), so a slow machine cannot end it before the
    // load does.
    let mut recorder = std::process::Command::new(env!("CARGO_BIN_EXE_terrace"))
        .args(["record", "--proxy", &format!("127.0.0.1:{}", proxy.port), "--tenant", "default", "--seconds", "120", "--out", dir.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its first line says every engine records.
    let mut stderr = std::io::BufReader::new(recorder.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert!(line.starts_with("recording tenant default on "), "{line}");
    let drain = std::thread::spawn(move || std::io::Read::read_to_end(&mut stderr, &mut Vec::new()));
    let mut sent: std::collections::HashMap<String, usize> = Default::default();
    let mut rng = fastrand::Rng::with_seed(4);
    for _ in 0..3_000 {
        let key = format!("user:{}", rng.usize(0..KEYS));
        *sent.entry(key.clone()).or_default() += 1;
        let _: Option<String> = q(&mut c, &["GET", &key]);
    }
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    assert!(recorder.wait().unwrap().success(), "SIGINT ends a recording and keeps it");
    let _ = drain.join();
    let ops = trace_ops(&dir);
    assert_eq!(ops.len(), 3_000, "every GET, from both engines");
    let mut traced: std::collections::HashMap<String, usize> = Default::default();
    for (_, k) in &ops {
        *traced.entry(k.clone()).or_default() += 1;
    }
    assert_eq!(traced, sent);
    let times: Vec<u64> = std::fs::read_to_string(dir.join("trace.tsv")).unwrap().lines().map(|l| l.split('\t').next().unwrap().parse().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "merged in time order");
    assert_eq!(std::fs::read_to_string(dir.join("data.tsv")).unwrap().lines().count(), KEYS);
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["engines"].as_array().unwrap().len(), 2);
    assert_eq!(meta["workload"]["keys"].as_u64().unwrap(), KEYS as u64);
    assert_eq!(meta["workload"]["reads"].as_f64().unwrap(), 3_000.0);
    assert_eq!(meta["workload"]["mrc"]["points"].as_array().unwrap().len(), 40);
    // Each engine held part of the keys.
    for e in [&e1, &e2] {
        let n: u64 = q(&mut e.client(), &["DBSIZE"]);
        assert!(n > 0 && n < KEYS as u64);
    }
}
