//! End-to-end tests of the proxy's Memcached front end: two real engines behind the real
//! proxy, driven by raw text/meta lines, by Debian's `memccapable` and by pymemcache's own
//! integration tests; the same lines sent to a real memcached where the answer must match.

mod common;

use std::path::Path;
use std::process::Command;
use std::thread;

use common::{q, Engine, Memcached, Proxy, Raw, RedisPort};

struct Rig {
    _engines: Vec<Engine>,
    proxy: Proxy,
}

fn rig(extra: &[&str]) -> Rig {
    let engines = vec![Engine::start(&[]), Engine::start(&[])];
    let proxy = Proxy::start(&[&engines[0], &engines[1]], extra, &[]);
    Rig { _engines: engines, proxy }
}

/// Sends `req` and returns everything answered (until a short quiet period).
fn talk(raw: &mut Raw, req: &str) -> String {
    raw.send(req.as_bytes());
    raw.read_available()
}

/// Masks CAS uniques (`VALUE k f n <cas>`, meta `c<cas>`): each server counts its own.
fn mask_cas(s: &str) -> String {
    s.lines()
        .map(|l| {
            let mut words: Vec<String> = l.split(' ').map(str::to_string).collect();
            if words[0] == "VALUE" && words.len() == 5 {
                words[4] = "<cas>".into();
            }
            if matches!(words[0].as_str(), "VA" | "HD" | "ME") {
                for w in words.iter_mut().skip(1) {
                    if w.starts_with('c') || w.starts_with("cas=") {
                        *w = "<cas>".into();
                    }
                }
            }
            words.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn text_protocol_matches_memcached() {
    let r = rig(&[]);
    let mc = Memcached::start();
    let script = concat!(
        "set a 5 0 2\r\n10\r\ndecr a 1\r\nget a\r\nincr a 100\r\nget a\r\n",
        "set b 0 0 3\r\nabc\r\nincr b 1\r\nincr nope 1\r\nincr a abc\r\n",
        "set e 0 0 20\r\n18446744073709551615\r\nincr e 2\r\ndecr e 100\r\n",
        "get a b nope e\r\ngets a\r\ncas a 0 0 1 999\r\nx\r\ncas nope 0 0 1 1\r\nx\r\n",
        "add a 0 0 1\r\nx\r\nadd new 3 0 1\r\ny\r\nreplace nope2 0 0 1\r\nx\r\nreplace new 4 0 1\r\nz\r\n",
        "append new 9 0 2\r\n++\r\nprepend new 9 0 2\r\n--\r\nappend nope3 0 0 1\r\nx\r\nget new\r\n",
        "touch a 10\r\ntouch nope 10\r\ngat 0 a\r\ngats 0 nope\r\n",
        "bogus\r\n\r\nset k 0 0 z\r\nset toolong 0 0 1\r\nabc\r\n",
        "delete a 0\r\ndelete a 5\r\ndelete a\r\ndelete a\r\n",
        "set n 0 0 1 noreply\r\n1\r\nincr n 5 noreply\r\nget n\r\n",
        "set neg 0 -1 1\r\nx\r\nget neg\r\n",
        "version\r\nverbosity 1\r\nverbosity 1 noreply\r\nflush_all\r\nget b e\r\n",
        "mn\r\nms m 2 T0 F5\r\nhi\r\nmg m s v f t k\r\nmg nope v\r\nmg nope v q\r\nma m\r\nms c 1\r\n7\r\nma c\r\nma c v MD D3\r\n",
        "ma nope\r\nma viv N0 J10 v\r\nmd m q\r\nmd m\r\nmd m q\r\nms y 1 MA\r\nz\r\nms y 1 ME\r\nz\r\nms y 1 ME\r\nw\r\nmg y v O123 k\r\n",
        "ma nope q\r\nset x 0 0 1\r\n1\r\nma x q\r\nma x q v\r\nms z 1 q\r\n1\r\nms z 1 q ME\r\n2\r\nmd z q C1\r\nmg nope q k\r\nmn\r\n",
    );
    let theirs = mask_cas(&talk(&mut mc.raw(), script));
    let ours = mask_cas(&talk(&mut r.proxy.memcache(), script));
    assert!(theirs.contains("VALUE a 5 2") && theirs.ends_with("MN"), "memcached answered: {theirs}");
    assert_eq!(ours, theirs);
}

/// What the parser now checks itself (meta flags, base64 keys, client numbers at their
/// bounds) answers as memcached does, and nothing past a bound wraps around.
#[test]
fn typed_requests_answer_bad_input_as_memcached() {
    let r = rig(&[]);
    let mc = Memcached::start();
    let script = concat!(
        "ms a2V5 2 b\r\nhi\r\nmg a2V5 b v\r\nmg key v\r\nmg !!! b v\r\nmd a2V5 b q\r\nmg key v\r\n",
        "ms a2V5 2 b O5 k\r\nhi\r\nmg a2V5 b k O1 v f\r\nmg a2V5 O1 k b s\r\nmd a2V5 b O1 k\r\nmg a2V5 b k O2 v\r\nmg nope O9 k v\r\n",
        "mg n v v\r\nmg n T1 T2\r\nmd n q q\r\nma n D1 D2\r\nma n M\r\nms n 1 M\r\nx\r\nms n 1 MZ\r\nx\r\nma !!! b\r\nmd n X\r\nms n 1 X\r\nx\r\n",
        "ms n 1\r\n5\r\nma n D18446744073709551610 v\r\nma n D18446744073709551616\r\nma n D-1\r\nma n MX\r\n",
        "md n C-1\r\nmg n Tsoon v\r\nms f 1 F4294967296\r\nx\r\nms f 1 F4294967295\r\nx\r\nmg f f v\r\n",
        "cache_memlimit 7\r\ncache_memlimit 1000000001\r\ncache_memlimit 18446744073709551616\r\ncache_memlimit -8\r\n",
        "cache_memlimit 64 noreply\r\ncache_memlimit 64\r\nmn\r\n",
    );
    let theirs = mask_cas(&talk(&mut mc.raw(), script));
    let ours = mask_cas(&talk(&mut r.proxy.memcache(), script));
    assert!(theirs.contains("MEMLIMIT_TOO_SMALL") && theirs.ends_with("MN"), "memcached answered: {theirs}");
    assert_eq!(ours, theirs);
}

#[test]
fn cas_race_has_one_winner() {
    let r = rig(&[]);
    let mut a = r.proxy.memcache();
    let mut b = r.proxy.memcache();
    assert_eq!(talk(&mut a, "set k 0 0 1\r\n0\r\n"), "STORED\r\n");
    let gets = talk(&mut a, "gets k\r\n");
    let unique: u64 = gets.lines().next().unwrap().split(' ').nth(4).unwrap().parse().unwrap();
    let other = talk(&mut b, "gets k\r\n");
    assert_eq!(gets, other, "both see the same CAS unique");
    assert_eq!(talk(&mut b, &format!("cas k 0 0 1 {unique}\r\nb\r\n")), "STORED\r\n");
    assert_eq!(talk(&mut a, &format!("cas k 0 0 1 {unique}\r\na\r\n")), "EXISTS\r\n");
    assert_eq!(talk(&mut a, "get k\r\n"), "VALUE k 0 1\r\nb\r\nEND\r\n");
    // Many clients racing on one counter with gets/cas: every increment lands exactly once.
    let port = r.proxy.memcache_port;
    let workers: Vec<_> = (0..4)
        .map(|_| {
            thread::spawn(move || {
                let mut c = Raw::connect(port);
                let mut done = 0;
                while done < 25 {
                    let g = talk(&mut c, "gets ctr\r\n");
                    let mut lines = g.lines();
                    let head: Vec<&str> = lines.next().unwrap().split(' ').collect();
                    let (value, unique) = if head[0] == "VALUE" {
                        (lines.next().unwrap().parse::<u64>().unwrap(), head[4].to_string())
                    } else {
                        let _ = talk(&mut c, "add ctr 0 0 1\r\n0\r\n");
                        continue;
                    };
                    let next = (value + 1).to_string();
                    let reply = talk(&mut c, &format!("cas ctr 0 0 {} {unique}\r\n{next}\r\n", next.len()));
                    if reply == "STORED\r\n" {
                        done += 1;
                    } else {
                        assert_eq!(reply, "EXISTS\r\n");
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(talk(&mut a, "get ctr\r\n"), "VALUE ctr 0 3\r\n100\r\nEND\r\n");
}

#[test]
fn limits_and_bad_lines() {
    let r = rig(&["--config", &write_config("[proxy]\nitem_size_max = \"2kb\"\n")]);
    let mut c = r.proxy.memcache();
    let key250 = "k".repeat(250);
    assert_eq!(talk(&mut c, &format!("set {key250} 0 0 1\r\nx\r\n")), "STORED\r\n");
    assert_eq!(talk(&mut c, &format!("get {key250}x\r\n")), "CLIENT_ERROR bad command line format\r\n");
    // Too large: answered at once, the data block swallowed, the connection goes on.
    let big = "x".repeat(3000);
    assert_eq!(talk(&mut c, &format!("set big 0 0 3000\r\n{big}\r\nget big\r\n")), "SERVER_ERROR object too large for cache\r\nEND\r\n");
    assert_eq!(talk(&mut c, "set f 4294967295 0 1\r\nx\r\nget f\r\n"), "STORED\r\nVALUE f 4294967295 1\r\nx\r\nEND\r\n");
    // As memcached reads flags: any 64-bit number, kept to 32 bits.
    assert_eq!(talk(&mut c, "set f 4294967296 0 1\r\nx\r\nget f\r\n"), "STORED\r\nVALUE f 0 1\r\nx\r\nEND\r\n");
    assert_eq!(talk(&mut c, "mg f zz\r\n"), "CLIENT_ERROR invalid flag\r\n");
    // A get line past the limit closes the connection with an error; 2 KB of anything else
    // without a newline, without one (as memcached).
    c.send(format!("get {}", "k".repeat(70 * 1024)).as_bytes());
    assert_eq!(c.read_available(), "CLIENT_ERROR line too long\r\n");
    assert!(c.is_closed());
    let mut c = r.proxy.memcache();
    c.send(&vec![b'g'; 4096]);
    assert_eq!(c.read_available(), "");
    assert!(c.is_closed());
}

fn write_config(text: &str) -> String {
    let dir = common::temp_dir("mc-config");
    let p = dir.join("terrace.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn one_keyspace_two_protocols() {
    let r = rig(&[]);
    let mut mc = r.proxy.memcache();
    let mut redis = r.proxy.client();
    assert_eq!(talk(&mut mc, "set shared 42 0 5\r\nhello\r\n"), "STORED\r\n");
    assert_eq!(q::<String>(&mut redis, &["GET", "shared"]), "hello");
    let _: () = q(&mut redis, &["SET", "from-redis", "world", "EX", "100"]);
    assert_eq!(talk(&mut mc, "get from-redis\r\n"), "VALUE from-redis 0 5\r\nworld\r\nEND\r\n");
    let ttl = talk(&mut mc, "mg from-redis t\r\n");
    let secs: i64 = ttl.trim().strip_prefix("HD t").unwrap().parse().unwrap();
    assert!((95..=100).contains(&secs), "{ttl}");
    // Expiry set through Memcached is a TTL to Redis.
    assert_eq!(talk(&mut mc, "touch shared 50\r\n"), "TOUCHED\r\n");
    let t: i64 = q(&mut redis, &["TTL", "shared"]);
    assert!((45..=50).contains(&t));
    // Redis types other than strings look missing to Memcached.
    let _: () = q(&mut redis, &["RPUSH", "list", "a"]);
    assert_eq!(talk(&mut mc, "get list\r\nappend list 0 0 1\r\nx\r\n"), "END\r\nNOT_STORED\r\n");
    // incr through Memcached, INCR through Redis: one counter.
    assert_eq!(talk(&mut mc, "set ctr 0 0 1\r\n5\r\nincr ctr 10\r\n"), "STORED\r\n15\r\n");
    assert_eq!(q::<i64>(&mut redis, &["INCR", "ctr"]), 16);
    assert_eq!(talk(&mut mc, "incr ctr 1\r\n"), "17\r\n");
    // Keys spread over both engines; flush_all clears both.
    for i in 0..50 {
        assert_eq!(talk(&mut mc, &format!("set k{i} 0 0 1\r\nv\r\n")), "STORED\r\n");
    }
    let n: i64 = q(&mut redis, &["DBSIZE"]);
    assert_eq!(n, 54);
    let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
    let got = talk(&mut mc, &format!("get {}\r\n", keys.join(" ")));
    assert_eq!(got.matches("VALUE ").count(), 50);
    assert!(got.starts_with("VALUE k0 0 1\r\nv\r\nVALUE k1 0 1\r\n"), "in request order: {got}");
    assert_eq!(talk(&mut mc, "flush_all\r\n"), "OK\r\n");
    assert_eq!(q::<i64>(&mut redis, &["DBSIZE"]), 0);
}

#[test]
fn a_dead_engine_is_a_server_error() {
    let mut engines = vec![Engine::start(&[]), Engine::start(&[])];
    let proxy = Proxy::start(&[&engines[0], &engines[1]], &[], &[]);
    let mut mc = proxy.memcache();
    let _ = engines[1].child.kill();
    let _ = engines[1].child.wait();
    // "foo" lives on the second engine, "bar" on the first.
    let reply = talk(&mut mc, "set foo 0 0 1\r\nx\r\n");
    assert!(reply.starts_with("SERVER_ERROR engine 127.0.0.1:") && reply.contains("unavailable"), "{reply}");
    assert_eq!(talk(&mut mc, "set bar 0 0 1\r\nx\r\n"), "STORED\r\n");
    engines.truncate(1);
}

#[test]
fn memccapable_ascii_suite_passes() {
    let r = rig(&[]);
    let out = Command::new("memccapable")
        .args(["-a", "-h", "127.0.0.1", "-p", &r.proxy.memcache_port.to_string()])
        .output()
        .expect("run memccapable (apt-get install libmemcached-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    let passed = text.lines().filter(|l| l.ends_with("[pass]")).count();
    assert!(out.status.success() && text.contains("All tests passed"), "{text}");
    assert!(passed >= 27, "only {passed} ascii tests ran: {text}");
    assert!(!text.contains("[fail]"), "{text}");
}

/// memccapable's binary protocol tests, on the proxy and on memcached: the same tests pass.
#[test]
fn memccapable_binary_suite_passes_as_on_memcached() {
    let run = |port: u16| {
        let out = Command::new("memccapable")
            .args(["-b", "-t", "10", "-h", "127.0.0.1", "-p", &port.to_string()])
            .output()
            .expect("run memccapable (apt-get install libmemcached-tools)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let passed: Vec<String> = text.lines().filter(|l| l.ends_with("[pass]")).map(|l| l.split_whitespace().next().unwrap_or_default().to_string()).collect();
        (passed, text)
    };
    let mc = Memcached::start();
    let (theirs, their_text) = run(mc.port);
    let r = rig(&[]);
    let (ours, our_text) = run(r.proxy.memcache_port);
    assert!(theirs.len() >= 20, "only {} binary tests passed on memcached: {their_text}", theirs.len());
    assert_eq!(ours, theirs, "memcached:\n{their_text}\nterrace:\n{our_text}");
}

/// Runs pymemcache's integration tests (prepared by tests/compat/setup-pymemcache.sh) against
/// `port`; returns (passed, failed, skipped).
fn pymemcache_suite(port: u16) -> (usize, usize, usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pymemcache");
    assert!(dir.join("test/test_integration.py").exists(), "pymemcache's tests are missing: run tests/run.sh first");
    let out = Command::new(dir.join("venv/bin/python"))
        .current_dir(&dir)
        .args(["-m", "pytest", "test/test_integration.py", "-m", "integration", "--server", "127.0.0.1", "--port", &port.to_string()])
        .args(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--timeout", "60"])
        .output()
        .expect("run pytest");
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text.lines().last().unwrap_or_default().to_string();
    let count = |what: &str| {
        summary
            .split(", ")
            .filter_map(|p| p.trim().trim_start_matches('=').trim().split_once(' '))
            .find(|(_, w)| w.starts_with(what))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or(0)
    };
    (count("passed"), count("failed"), count("skipped"))
}

#[test]
fn pymemcache_integration_tests_pass_as_on_memcached() {
    let mc = Memcached::start();
    let theirs = pymemcache_suite(mc.port);
    let r = rig(&[]);
    let ours = pymemcache_suite(r.proxy.memcache_port);
    eprintln!("pymemcache integration: memcached {theirs:?}, terrace proxy {ours:?} (passed, failed, skipped)");
    assert!(theirs.0 >= 90, "the suite ran against memcached: {theirs:?}");
    assert_eq!(ours, theirs);
}
