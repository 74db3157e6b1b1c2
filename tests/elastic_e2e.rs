//! End-to-end tests of elastic threading: connections moved between reactors while clients
//! pipeline, sit in MULTI or block in BLPOP, and the controller scaling under real load.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{info_field, q, Engine, RedisPort};

/// Flips the active reactor count between 1 and 2 until `stop`.
fn toggler(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let mut n = 1;
        while !stop.load(Ordering::Relaxed) {
            n = 3 - n;
            let _: i64 = q(&mut c, &["TERRACE.THREADS", "ACTIVE", &n.to_string()]);
            std::thread::sleep(Duration::from_millis(15));
        }
    })
}

#[test]
fn pipelined_clients_lose_nothing_across_migrations() {
    let e = Engine::start(&["--threads", "elastic:2"]);
    let stop = Arc::new(AtomicBool::new(false));
    let t = toggler(e.port, stop.clone());
    let port = e.port;
    let clients: Vec<_> = (0..6)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
                let key = format!("c{i}");
                let mut sent = 0i64;
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(2) {
                    // Each pipeline: INCRs and ECHOs interleaved, every reply checked in order.
                    let mut p = redis::pipe();
                    for j in 0..40 {
                        p.cmd("INCR").arg(&key);
                        p.cmd("ECHO").arg(format!("{i}:{}", sent + j));
                    }
                    let replies: Vec<redis::Value> = p.query(&mut c).unwrap();
                    assert_eq!(replies.len(), 80);
                    for (j, pair) in replies.chunks(2).enumerate() {
                        let n: i64 = redis::from_redis_value(pair[0].clone()).unwrap();
                        let echo: String = redis::from_redis_value(pair[1].clone()).unwrap();
                        assert_eq!(n, sent + j as i64 + 1, "client {i}: INCR replies in order, none lost or doubled");
                        assert_eq!(echo, format!("{i}:{}", sent + j as i64));
                    }
                    sent += 40;
                }
                sent
            })
        })
        .collect();
    let sent: Vec<i64> = clients.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    let mut c = e.client();
    for (i, n) in sent.iter().enumerate() {
        assert_eq!(q::<i64>(&mut c, &["GET", &format!("c{i}")]), *n);
    }
    let migrations = info_field(&mut c, "threads", "migrations");
    assert!(migrations > 50, "connections moved: {migrations}");
}

#[test]
fn multi_and_blocked_clients_survive_migrations() {
    let e = Engine::start(&["--threads", "elastic:2"]);
    let mut tx = e.client();
    let mut admin = e.client();
    // MULTI across moves: queued commands travel with the connection.
    let _: () = q(&mut tx, &["MULTI"]);
    let _: String = q(&mut tx, &["SET", "a", "1"]);
    let _: i64 = q(&mut admin, &["TERRACE.THREADS", "ACTIVE", "2"]);
    let _: String = q(&mut tx, &["INCR", "a"]);
    let _: i64 = q(&mut admin, &["TERRACE.THREADS", "ACTIVE", "1"]);
    let _: String = q(&mut tx, &["INCR", "a"]);
    let _: i64 = q(&mut admin, &["TERRACE.THREADS", "ACTIVE", "2"]);
    let r: (String, i64, i64) = q(&mut tx, &["EXEC"]);
    assert_eq!(r, ("OK".to_string(), 2, 3));
    // A client blocked in BLPOP while moves are asked for: it gets its element, then goes on.
    let port = e.port;
    let blocked = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let got: (String, String) = q(&mut c, &["BLPOP", "queue", "10"]);
        let after: String = q(&mut c, &["ECHO", "still here"]);
        (got, after)
    });
    std::thread::sleep(Duration::from_millis(200));
    for n in ["1", "2", "1", "2"] {
        let _: i64 = q(&mut admin, &["TERRACE.THREADS", "ACTIVE", n]);
        std::thread::sleep(Duration::from_millis(50));
    }
    let _: i64 = q(&mut admin, &["RPUSH", "queue", "job"]);
    let (got, after) = blocked.join().unwrap();
    assert_eq!(got, ("queue".to_string(), "job".to_string()));
    assert_eq!(after, "still here");
    // Subscribers keep receiving after a move.
    let mut sub = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("news").unwrap();
    for n in ["1", "2", "1"] {
        let _: i64 = q(&mut admin, &["TERRACE.THREADS", "ACTIVE", n]);
        std::thread::sleep(Duration::from_millis(50));
    }
    let _: i64 = q(&mut admin, &["PUBLISH", "news", "hello"]);
    pubsub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let msg: String = pubsub.get_message().unwrap().get_payload().unwrap();
    assert_eq!(msg, "hello");
    assert!(info_field(&mut admin, "threads", "migrations") >= 4);
}

#[test]
fn the_controller_scales_up_under_load_and_back_down_when_quiet() {
    // Low thresholds, so the test does not depend on how much CPU a shared machine gives.
    let metrics_port = common::free_port().to_string();
    let e =
        Engine::start(&["--threads", "elastic:2", "--elastic-up", "20", "--elastic-down", "5", "--elastic-down-ms", "500", "--metrics-port", &metrics_port]);
    let mut c = e.client();
    assert_eq!(info_field(&mut c, "threads", "reactors_active"), 1, "one reactor while quiet");
    let port = e.port;
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let mut p = redis::pipe();
                    for j in 0..100 {
                        p.cmd("SET").arg(format!("k{i}:{j}")).arg(j).ignore();
                    }
                    p.query::<()>(&mut c).unwrap();
                }
            })
        })
        .collect();
    let start = Instant::now();
    while info_field(&mut c, "threads", "scale_ups") == 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "no scale-up under load: {}", q::<String>(&mut c, &["INFO", "threads"]));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut c, "threads", "reactors_active"), 2);
    stop.store(true, Ordering::Relaxed);
    for h in load {
        h.join().unwrap();
    }
    let start = Instant::now();
    while info_field(&mut c, "threads", "reactors_active") != 1 {
        assert!(start.elapsed() < Duration::from_secs(20), "no fold-back when quiet: {}", q::<String>(&mut c, &["INFO", "threads"]));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(info_field(&mut c, "threads", "scale_downs") >= 1);
    let text: String = q(&mut c, &["TERRACE.STATS"]);
    assert!(text.contains("\"threads\""), "{text}");
    // Prometheus sees the same.
    use std::io::{Read, Write};
    let mut http = std::net::TcpStream::connect(format!("127.0.0.1:{metrics_port}")).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut page = String::new();
    http.read_to_string(&mut page).unwrap();
    assert!(page.contains("terrace_engine_reactors_active 1"), "{page}");
    assert!(page.contains("terrace_engine_scale_ups_total "), "{page}");
    assert!(page.contains("terrace_engine_reactor_busy_ratio{reactor=\"1\"}"), "{page}");
    assert!(page.contains("terrace_engine_reactor_spin_seconds_total{reactor=\"0\"}"), "{page}");
}

#[test]
fn fixed_threads_refuse_run_time_changes_and_bad_settings_are_named() {
    let e = Engine::start(&["--threads", "2"]);
    let mut c = e.client();
    assert!(common::err(&mut c, &["TERRACE.THREADS", "ACTIVE", "1"]).contains("fixed number of threads"));
    assert_eq!(info_field(&mut c, "threads", "reactors_active"), 2);
    let run = |flags: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_terrace"))
            .args(["engine", "--port", "0", "--data-dir"])
            .arg(common::temp_dir("elastic-bad"))
            .args(flags)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flags:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(run(&["--threads", "elastic:0"]).contains("`threads`"));
    assert!(run(&["--threads", "elastic:2", "--elastic-up", "20", "--elastic-down", "30"]).contains("`elastic_down`"));
    assert!(run(&["--elastic-sample-ms", "1"]).contains("`elastic_sample_ms`"));
    assert!(run(&["--idle-spin-us", "20000"]).contains("`idle_spin_us`"));
}

#[test]
fn idle_spinning_is_reported_per_reactor_and_zero_turns_it_off() {
    let e = Engine::start(&["--threads", "2", "--idle-spin-us", "0"]);
    let mut c = e.client();
    for i in 0..2000 {
        let _: () = q(&mut c, &["SET", "k", &i.to_string()]);
    }
    let threads: String = q(&mut c, &["INFO", "threads"]);
    for reactor in ["reactor0:", "reactor1:"] {
        let line = threads.lines().find(|l| l.starts_with(reactor)).unwrap_or_else(|| panic!("{threads}"));
        assert!(line.contains(",spin_ms=0,"), "{line}");
    }
    let stats: String = q(&mut c, &["TERRACE.STATS"]);
    assert!(stats.contains("\"spin_ms\":0"), "{stats}");
}
