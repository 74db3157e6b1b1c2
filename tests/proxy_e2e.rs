//! End-to-end tests of `terrace proxy`: two real engines behind the real proxy, driven by the
//! `redis` crate and raw RESP bytes.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{encode, err, eventually, q, temp_dir, Engine, Proxy, RedisPort};
use redis::Value;

/// CRC16/XMODEM as Redis Cluster uses it, computed independently of the proxy's code.
fn slot(key: &str) -> u16 {
    let k = key.as_bytes();
    let k = match k.iter().position(|&b| b == b'{') {
        Some(o) => match k[o + 1..].iter().position(|&b| b == b'}') {
            Some(l) if l > 0 => &k[o + 1..o + 1 + l],
            _ => k,
        },
        None => k,
    };
    let mut crc: u16 = 0;
    for &b in k {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % 16384
}

/// Engine index of a key with the default (even) slot map over two engines.
fn owner(key: &str) -> usize {
    (slot(key) as usize) / 8192
}

struct Rig {
    engines: Vec<Engine>,
    proxy: Proxy,
}

fn rig(extra: &[&str]) -> Rig {
    // DEBUG SLEEP stalls an engine in `a_stuck_engine_times_out_instead_of_hanging`.
    let debug = ["--enable-debug-command", "yes"];
    let engines = vec![Engine::start(&debug), Engine::start(&debug)];
    // The admin user may run what acts on every tenant (CONFIG RESETSTAT).
    let proxy = Proxy::start(&[&engines[0], &engines[1]], extra, &[("TERRACE_PROXY_ADMIN_PASSWORD", "adminpw")]);
    Rig { engines, proxy }
}

#[test]
fn keys_live_on_the_engine_owning_their_slot() {
    let r = rig(&[]);
    let mut c = r.proxy.client();
    let mut direct = [r.engines[0].client(), r.engines[1].client()];
    let mut seen = [0, 0];
    for i in 0..200 {
        let k = format!("key:{i}");
        let _: () = q(&mut c, &["SET", &k, &format!("v{i}")]);
        let o = owner(&k);
        seen[o] += 1;
        let here: Option<String> = q(&mut direct[o], &["GET", &k]);
        let there: Option<String> = q(&mut direct[1 - o], &["GET", &k]);
        assert_eq!(here, Some(format!("v{i}")), "{k} should be on engine {o}");
        assert_eq!(there, None);
        let back: String = q(&mut c, &["GET", &k]);
        assert_eq!(back, format!("v{i}"));
    }
    assert!(seen[0] > 50 && seen[1] > 50, "keys spread over both engines: {seen:?}");
    // Hash tags keep related keys together.
    let _: () = q(&mut c, &["SET", "{user:1}.name", "ann"]);
    let _: () = q(&mut c, &["SET", "{user:1}.mail", "a@x"]);
    let o = owner("user:1");
    let n: i64 = q(&mut direct[o], &["EXISTS", "{user:1}.name", "{user:1}.mail"]);
    assert_eq!(n, 2);
}

#[test]
fn multi_key_commands_are_split_and_merged_in_order() {
    let r = rig(&[]);
    let mut c = r.proxy.client();
    let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
    let mut mset = vec!["MSET".to_string()];
    for k in &keys {
        mset.push(k.clone());
        mset.push(format!("val-{k}"));
    }
    let args: Vec<&str> = mset.iter().map(|s| s.as_str()).collect();
    let _: () = q(&mut c, &args);
    assert!(keys.iter().any(|k| owner(k) == 0) && keys.iter().any(|k| owner(k) == 1));

    let mut mget = vec!["MGET", "missing-1"];
    mget.extend(keys.iter().rev().map(|s| s.as_str()));
    mget.push("missing-2");
    let got: Vec<Option<String>> = q(&mut c, &mget);
    assert_eq!(got.len(), 52);
    assert_eq!(got[0], None);
    assert_eq!(got[51], None);
    for (i, k) in keys.iter().rev().enumerate() {
        assert_eq!(got[i + 1].as_deref(), Some(format!("val-{k}").as_str()));
    }
    // Counts add up across engines; duplicates count twice as in Redis.
    let n: i64 = q(&mut c, &["EXISTS", "k1", "k2", "k3", "k1", "nope"]);
    assert_eq!(n, 4);
    let n: i64 = q(&mut c, &["TOUCH", "k1", "k2", "nope"]);
    assert_eq!(n, 2);
    let n: i64 = q(&mut c, &["DEL", "k1", "k2", "k3", "nope"]);
    assert_eq!(n, 3);
    let n: i64 = q(&mut c, &["UNLINK", "k4", "k5"]);
    assert_eq!(n, 2);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 45);
    assert!(err(&mut c, &["MSET", "a", "1", "b"]).contains("wrong number of arguments for 'mset' command"));
    // MGET answers nil for keys of other types, as Redis does.
    let _: () = q(&mut c, &["LPUSH", "list", "x"]);
    let v: Vec<Option<String>> = q(&mut c, &["MGET", "list", "k11"]);
    assert_eq!(v, vec![None, Some("val-k11".to_string())]);
}

#[test]
fn commands_whose_keys_span_engines_get_crossslot() {
    let r = rig(&[]);
    let mut c = r.proxy.client();
    // foo is on engine 1, bar on engine 0.
    assert_eq!((owner("foo"), owner("bar")), (1, 0));
    let _: () = q(&mut c, &["SET", "foo", "1"]);
    for args in [
        vec!["RENAME", "foo", "bar"],
        vec!["SUNIONSTORE", "foo", "bar"],
        vec!["SMOVE", "foo", "bar", "x"],
        vec!["LMOVE", "foo", "bar", "LEFT", "LEFT"],
        vec!["MSETNX", "foo", "1", "bar", "2"],
        vec!["ZUNION", "2", "foo", "bar"],
        vec!["BLPOP", "foo", "bar", "1"],
    ] {
        let e = err(&mut c, &args);
        // The redis crate shows the CROSSSLOT code as "CrossSlot".
        assert!(e.to_uppercase().contains("CROSSSLOT") && e.contains("Keys in request don't hash to the same slot"), "{args:?}: {e}");
    }
    // Same engine (hash tags): allowed.
    let _: () = q(&mut c, &["SET", "{t}a", "1"]);
    let _: () = q(&mut c, &["RENAME", "{t}a", "{t}b"]);
    let v: String = q(&mut c, &["GET", "{t}b"]);
    assert_eq!(v, "1");
    let _: () = q(&mut c, &["SADD", "{s}1", "a", "b"]);
    let _: () = q(&mut c, &["SADD", "{s}2", "b", "c"]);
    let n: i64 = q(&mut c, &["SUNIONSTORE", "{s}3", "{s}1", "{s}2"]);
    assert_eq!(n, 3);
}

/// 2,000 SET/GET pairs with PINGs and cross-engine MGETs, sent in awkward pieces; replies must
/// come back complete and in order.
fn pipeline_round_trip(proxy: &Proxy) {
    let mut raw = proxy.raw();
    let mut req = Vec::new();
    let mut expected = Vec::new();
    for i in 0..2000 {
        let k = format!("p{i}");
        req.extend(encode(&["SET", &k, &i.to_string()]));
        expected.extend_from_slice(b"+OK\r\n");
        req.extend(encode(&["GET", &k]));
        let v = i.to_string();
        expected.extend(format!("${}\r\n{v}\r\n", v.len()).into_bytes());
        if i % 100 == 0 {
            req.extend(encode(&["PING"]));
            expected.extend_from_slice(b"+PONG\r\n");
            req.extend(encode(&["MGET", "p0", &k]));
            expected.extend(format!("*2\r\n$1\r\n0\r\n${}\r\n{v}\r\n", v.len()).into_bytes());
        }
    }
    for chunk in req.chunks(777) {
        raw.send(chunk);
    }
    raw.expect(&expected);
}

#[test]
fn pipelined_replies_come_back_in_request_order() {
    let r = rig(&[]);
    pipeline_round_trip(&r.proxy);
}

#[test]
fn bounded_in_flight_requests_still_flow_in_order() {
    // One request in flight per engine connection: every other one waits for room.
    let cfg = temp_dir("inflight").join("terrace.toml");
    std::fs::write(&cfg, "[proxy]\nmax_inflight = 1\n").unwrap();
    let r = rig(&["--config", cfg.to_str().unwrap()]);
    pipeline_round_trip(&r.proxy);
}

#[test]
fn fan_out_commands_cover_every_engine() {
    let r = rig(&[]);
    let mut c = r.proxy.client();
    for i in 0..300 {
        let _: () = q(&mut c, &["SET", &format!("f:{i}"), "x"]);
    }
    let _: () = q(&mut c, &["SET", "other", "x"]);
    let mut keys: Vec<String> = q(&mut c, &["KEYS", "f:*"]);
    keys.sort();
    assert_eq!(keys.len(), 300);
    // SCAN walks both engines with one cursor and returns each key once.
    let mut cursor = "0".to_string();
    let mut scanned = Vec::new();
    loop {
        let (next, batch): (String, Vec<String>) = q(&mut c, &["SCAN", &cursor, "MATCH", "f:*", "COUNT", "50"]);
        scanned.extend(batch);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    scanned.sort();
    assert_eq!(scanned, keys);
    assert!(err(&mut c, &["SCAN", "notanumber"]).contains("invalid cursor"));
    let k: String = q(&mut c, &["RANDOMKEY"]);
    assert!(k.starts_with("f:") || k == "other");
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=301,"), "{info}");
    let info: String = q(&mut c, &["INFO"]);
    assert!(info.contains("terrace_role:proxy") && info.contains("status=up"), "{info}");
    let _: () = q(&mut c, &["FLUSHALL"]);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 0);
    let k: Option<String> = q(&mut c, &["RANDOMKEY"]);
    assert_eq!(k, None);
    // Scripts are loaded on every engine, so EVALSHA works whatever the key.
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", "return redis.call('GET', KEYS[1])"]);
    let _: () = q(&mut c, &["SET", "foo", "on-1"]);
    let _: () = q(&mut c, &["SET", "bar", "on-0"]);
    let a: String = q(&mut c, &["EVALSHA", &sha, "1", "foo"]);
    let b: String = q(&mut c, &["EVALSHA", &sha, "1", "bar"]);
    assert_eq!((a.as_str(), b.as_str()), ("on-1", "on-0"));
}

#[test]
fn transactions_pin_one_engine() {
    let r = rig(&[]);
    let mut c = r.proxy.client();
    let mut raw = r.proxy.raw();
    // Keyless commands before the first key are queued by the proxy and sent with it.
    raw.send(&encode(&["MULTI"]));
    raw.send(&encode(&["PING"]));
    raw.send(&encode(&["SET", "{a}1", "x"]));
    raw.send(&encode(&["INCR", "{a}2"]));
    raw.send(&encode(&["EXEC"]));
    raw.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+PONG\r\n+OK\r\n:1\r\n");
    // Keys on two engines: CROSSSLOT, and EXEC aborts.
    raw.send(&encode(&["MULTI"]));
    raw.send(&encode(&["SET", "foo", "1"]));
    raw.send(&encode(&["SET", "bar", "1"]));
    raw.send(&encode(&["EXEC"]));
    raw.expect(b"+OK\r\n+QUEUED\r\n-CROSSSLOT Keys in request don't hash to the same slot\r\n-EXECABORT Transaction discarded because of previous errors.\r\n");
    let v: Option<String> = q(&mut c, &["GET", "foo"]);
    assert_eq!(v, None, "an aborted transaction wrote nothing");
    // WATCH: a change by another client makes EXEC fail.
    raw.send(&encode(&["WATCH", "foo"]));
    raw.expect(b"+OK\r\n");
    let _: () = q(&mut c, &["SET", "foo", "changed"]);
    raw.send(&encode(&["MULTI"]));
    raw.send(&encode(&["SET", "foo", "mine"]));
    raw.send(&encode(&["EXEC"]));
    raw.expect(b"+OK\r\n+QUEUED\r\n*-1\r\n");
    let v: String = q(&mut c, &["GET", "foo"]);
    assert_eq!(v, "changed");
    // Unchanged WATCHed key: EXEC runs.
    raw.send(&encode(&["WATCH", "foo"]));
    raw.send(&encode(&["MULTI"]));
    raw.send(&encode(&["APPEND", "foo", "!"]));
    raw.send(&encode(&["EXEC"]));
    raw.expect(b"+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n:8\r\n");
    // Errors without a transaction, DISCARD, empty transaction.
    raw.send(&encode(&["EXEC"]));
    raw.expect(b"-ERR EXEC without MULTI\r\n");
    raw.send(&encode(&["MULTI"]));
    raw.send(&encode(&["SET", "{a}1", "y"]));
    raw.send(&encode(&["DISCARD"]));
    raw.send(&encode(&["MULTI"]));
    raw.send(&encode(&["EXEC"]));
    raw.expect(b"+OK\r\n+QUEUED\r\n+OK\r\n+OK\r\n*0\r\n");
    let v: String = q(&mut c, &["GET", "{a}1"]);
    assert_eq!(v, "x");
    // Ordinary commands still work on the same connection afterwards.
    raw.send(&encode(&["GET", "bar"]));
    raw.expect(b"$-1\r\n");
}

#[test]
fn blocking_pops_do_not_hold_up_other_clients() {
    let r = rig(&[]);
    let url = r.proxy.url();
    let waiter = thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let got: (String, String) = q(&mut c, &["BLPOP", "queue", "0"]);
        got
    });
    thread::sleep(Duration::from_millis(200));
    // Meanwhile the shared connections keep serving everyone, on both engines.
    let mut c = r.proxy.client();
    for i in 0..100 {
        let _: () = q(&mut c, &["SET", &format!("b{i}"), "1"]);
    }
    let n: i64 = q(&mut c, &["RPUSH", "queue", "job"]);
    assert_eq!(n, 1);
    assert_eq!(waiter.join().unwrap(), ("queue".to_string(), "job".to_string()));
    // A timeout answers nil, and the connection goes on in order.
    let mut raw = r.proxy.raw();
    let t = Instant::now();
    raw.send(&encode(&["BLPOP", "empty", "0.2"]));
    raw.send(&encode(&["SET", "after", "1"]));
    raw.expect(b"*-1\r\n+OK\r\n");
    assert!(t.elapsed() >= Duration::from_millis(150));
}

#[test]
fn pubsub_through_the_proxy() {
    let r = rig(&[]);
    let mut sub = r.proxy.raw();
    sub.send(&encode(&["SUBSCRIBE", "news", "alerts"]));
    sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$6\r\nalerts\r\n:2\r\n");
    let mut c = r.proxy.client();
    let n: i64 = q(&mut c, &["PUBLISH", "news", "hello"]);
    assert_eq!(n, 1);
    sub.expect(b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    sub.send(&encode(&["PING"]));
    sub.expect(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

#[test]
fn connection_state_select_hello_auth() {
    let engines = [Engine::start(&[]), Engine::start(&[])];
    let proxy = Proxy::start(&[&engines[0], &engines[1]], &[], &[("TERRACE_PROXY_PASSWORD", "s3cret")]);
    let mut raw = proxy.raw();
    raw.send(&encode(&["GET", "x"]));
    raw.expect(b"-NOAUTH Authentication required.\r\n");
    raw.send(&encode(&["AUTH", "wrong"]));
    raw.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    raw.send(&encode(&["AUTH", "s3cret"]));
    raw.expect(b"+OK\r\n");
    // SELECT: databases are separate through the proxy too.
    raw.send(&encode(&["SELECT", "3"]));
    raw.send(&encode(&["SET", "foo", "db3"]));
    raw.send(&encode(&["SELECT", "0"]));
    raw.send(&encode(&["GET", "foo"]));
    raw.send(&encode(&["SELECT", "16"]));
    raw.expect(b"+OK\r\n+OK\r\n+OK\r\n$-1\r\n-ERR DB index is out of range\r\n");
    // HELLO 3 switches to RESP3 (maps, nulls), also for replies from engines.
    raw.send(&encode(&["HELLO", "3"]));
    let hello = raw.read_available();
    assert!(hello.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"), "{hello}");
    raw.send(&encode(&["HSET", "h", "f", "v"]));
    raw.send(&encode(&["HGETALL", "h"]));
    raw.send(&encode(&["GET", "nope"]));
    raw.expect(b":1\r\n%1\r\n$1\r\nf\r\n$1\r\nv\r\n_\r\n");
    raw.send(&encode(&["CLIENT", "SETNAME", "me"]));
    raw.send(&encode(&["CLIENT", "GETNAME"]));
    raw.send(&encode(&["CLIENT", "KILL", "ID", "1"]));
    raw.expect(b"+OK\r\n$2\r\nme\r\n-ERR this CLIENT subcommand is not supported through the Terrace proxy\r\n");
    let mut c = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/3", proxy.port)).unwrap().get_connection().unwrap();
    let v: String = q(&mut c, &["GET", "foo"]);
    assert_eq!(v, "db3");
}

#[test]
fn malformed_requests_get_protocol_errors() {
    let r = rig(&[]);
    let mut raw = r.proxy.raw();
    raw.send(b"*1\r\n$4\r\nPING\r\nPING\r\n");
    raw.expect(b"+PONG\r\n+PONG\r\n");
    raw.send(&encode(&["NOSUCHCMD", "a"]));
    raw.expect(b"-ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' \r\n");
    raw.send(&encode(&["GET"]));
    raw.expect(b"-ERR wrong number of arguments for 'get' command\r\n");
    raw.send(b"*2\r\n$3\r\nGET\r\n$x\r\n");
    raw.expect(b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(raw.is_closed());
}

#[test]
fn a_dead_engine_fails_fast_and_comes_back() {
    let dir = temp_dir("proxy-restart");
    let port = common::free_port();
    let e0 = Engine::start(&[]);
    let mut e1 = Engine::start_on(port, &dir);
    let proxy = Proxy::start(&[&e0, &e1], &["--timeout-ms", "500"], &[]);
    let mut c = proxy.client();
    let _: () = q(&mut c, &["SET", "foo", "1"]); // engine 1
    let _: () = q(&mut c, &["SET", "bar", "0"]); // engine 0
    let _ = e1.child.kill();
    let _ = e1.child.wait();
    let t = Instant::now();
    let e = err(&mut c, &["GET", "foo"]);
    assert!(e.contains("unavailable"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "the error came quickly");
    // The other engine's keys keep working meanwhile.
    let v: String = q(&mut c, &["GET", "bar"]);
    assert_eq!(v, "0");
    let e = err(&mut c, &["MGET", "foo", "bar"]);
    assert!(e.contains("unavailable"), "{e}");
    // Back on the same port: the proxy reconnects by itself.
    e1 = Engine::start_on(port, &dir);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match redis::cmd("SET").arg("foo").arg("2").query::<()>(&mut c) {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                assert!(e.to_string().contains("unavailable"), "{e}");
                thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("engine not reachable again: {e}"),
        }
    }
    let v: String = q(&mut c, &["GET", "foo"]);
    assert_eq!(v, "2");
    drop(e1);
}

#[test]
fn a_stuck_engine_times_out_instead_of_hanging() {
    let r = rig(&["--timeout-ms", "300"]);
    let mut direct = r.engines[1].client();
    let mut c = r.proxy.client();
    let _: () = q(&mut c, &["SET", "bar", "0"]);
    // DEBUG SLEEP stalls engine 1 (one reactor thread) for 2 s.
    let stall = thread::spawn(move || {
        let _: Value = q(&mut direct, &["DEBUG", "SLEEP", "2"]);
    });
    thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let sent = redis::cmd("GET").arg("foo").query::<Value>(&mut c).unwrap_err();
    let e = sent.to_string();
    assert!(e.contains("no reply within 300 ms"), "{e}");
    assert!(t.elapsed() < Duration::from_millis(1500), "took {:?}", t.elapsed());
    // It was sent and may still run: not TRYAGAIN, which promises it did not (a client
    // retrying on it would apply a write twice) — issue 46, finding 10.
    assert_ne!(sent.code(), Some("TRYAGAIN"), "{e}");
    assert!(e.contains("it may or may not have run"), "{e}");
    let v: String = q(&mut c, &["GET", "bar"]);
    assert_eq!(v, "0");
    stall.join().unwrap();
}

#[test]
fn many_clients_through_the_proxy() {
    let r = rig(&[]);
    let url = r.proxy.url();
    let handles: Vec<_> = (0..20)
        .map(|t| {
            let url = url.clone();
            thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for i in 0..200 {
                    let k = format!("c{t}:{i}");
                    let _: () = q(&mut c, &["SET", &k, &i.to_string()]);
                    let n: i64 = q(&mut c, &["INCR", &k]);
                    assert_eq!(n, i + 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut c = r.proxy.client();
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 4000);
}

#[test]
fn terrace_up_runs_two_engines_behind_the_proxy() {
    let dir = temp_dir("up");
    let first = common::free_ports(common::UP_PORTS);
    let console_port = common::free_port();
    let metrics = common::free_ports(3);
    let (mut child, port) = common::start_up(&dir, first, console_port, &["--metrics-port", &metrics.to_string()]);
    // Every process serves Prometheus metrics: the proxy on the base port, the engines after.
    for (p, what) in
        [(metrics, "terrace_proxy_connected_clients"), (metrics + 1, "terrace_engine_used_memory_bytes"), (metrics + 2, "terrace_engine_used_memory_bytes")]
    {
        common::eventually(10, &format!("metrics on port {p}"), || std::net::TcpStream::connect(("127.0.0.1", p)).is_ok());
        let text = http_get(&format!("http://127.0.0.1:{p}/metrics"));
        assert!(text.contains(what), "metrics on {p}: {text}");
    }
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    let _: () = q(&mut c, &["MSET", "foo", "1", "bar", "0"]);
    // The Grafana dashboard in packaging/ charts only metrics these endpoints serve (the near
    // cache's exist when it is on: `near_cache_ttl_ms`).
    let _: Option<String> = q(&mut c, &["GET", "foo"]);
    let served: String = [metrics, metrics + 1, metrics + 2].iter().map(|p| http_get(&format!("http://127.0.0.1:{p}/metrics"))).collect();
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/grafana/terrace-dashboard.json")).unwrap()).unwrap();
    let mut charted = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap().iter().filter(|p| p["type"] != "row") {
        assert!(panel["title"].is_string() && panel["gridPos"]["w"].as_u64().is_some(), "{panel}");
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("terrace_") {
                let name: String = rest[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                rest = &rest[at + name.len()..];
                charted.insert(name);
            }
        }
    }
    assert!(charted.len() >= 15, "{charted:?}");
    for name in charted.iter().filter(|n| !n.contains("near_cache")) {
        assert!(served.contains(&format!("\n{name}")) || served.contains(&format!("# TYPE {name} ")), "the dashboard charts {name}, which no endpoint serves");
    }
    for name in
        ["terrace_engine_tenant_commands_total{tenant=\"default\",class=\"string\"}", "terrace_proxy_request_duration_seconds_bucket{tenant=\"default\""]
    {
        assert!(served.contains(name), "{name} in {served}");
    }
    // The engines answer only who knows their password: a secret the appliance keeps in
    // its data directory, readable by its owner alone.
    let secret_file = dir.join("engine.secret");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&secret_file).unwrap().permissions().mode() & 0o777, 0o600);
    let secret = std::fs::read_to_string(&secret_file).unwrap().trim().to_string();
    assert_eq!(secret.len(), 64);
    let mut stranger = common::Raw::connect(first);
    stranger.send(&encode(&["GET", "bar"]));
    stranger.expect(b"-NOAUTH Authentication required.\r\n");
    // foo lives on the second engine, bar on the first.
    // Each engine's password is its own, derived from that key and its address: neither
    // the key nor one engine's password opens another engine.
    let (a0, a1) = (format!("127.0.0.1:{first}"), format!("127.0.0.1:{}", first + 1));
    for wrong in [secret.clone(), common::up_engine_password(&dir, &a1)] {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{first}/")).unwrap().get_connection().unwrap();
        assert!(common::err(&mut c, &["AUTH", &wrong]).contains("WRONGPASS"));
    }
    let password_file = dir.join("passwords").join(format!("engine-{first}"));
    assert_eq!(std::fs::metadata(&password_file).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read_to_string(&password_file).unwrap().trim(), common::up_engine_password(&dir, &a0));
    let mut e0 = common::up_engine(&dir, &a0).unwrap();
    let mut e1 = common::up_engine(&dir, &a1).unwrap();
    assert_eq!(q::<Option<String>>(&mut e0, &["GET", "bar"]).as_deref(), Some("0"));
    assert_eq!(q::<Option<String>>(&mut e1, &["GET", "foo"]).as_deref(), Some("1"));
    // The console runs too, with its database in the data directory.
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", console_port)).is_err() {
        assert!(Instant::now() < deadline, "the console did not start");
        thread::sleep(Duration::from_millis(50));
    }
    assert!(http_get(&format!("http://127.0.0.1:{console_port}/login")).contains("id=\"login-form\""));
    assert!(dir.join("console.db").exists());
    // A killed engine is restarted by the supervisor.
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<Value>(&mut e1); // the connection closes
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis::cmd("SET").arg("foo").arg("2").query::<()>(&mut c).is_err() {
        assert!(Instant::now() < deadline, "engine not restarted");
        thread::sleep(Duration::from_millis(50));
    }
    // SIGINT stops the proxy and both engines.
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert!(child.wait().unwrap().success());
    thread::sleep(Duration::from_millis(200));
    assert!(std::net::TcpStream::connect(("127.0.0.1", first)).is_err(), "engine 1 stopped");
    assert!(std::net::TcpStream::connect(("127.0.0.1", first + 1)).is_err(), "engine 2 stopped");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What survives a clean restart of `terrace up`: everything — the engines save as they
/// stop (their save points) — and the newest state, not a snapshot SAVE made earlier.
#[test]
fn terrace_up_keeps_every_key_across_a_clean_restart() {
    let dir = temp_dir("up-restart");
    let first = common::free_ports(common::UP_PORTS);
    let console_port = common::free_port();
    let (mut child, port) = common::start_up(&dir, first, console_port, &[]);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    for i in 0..500 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), "old"]);
    }
    // A SAVE on each engine, then newer writes.
    for p in [first, first + 1] {
        let mut e = common::up_engine(&dir, &format!("127.0.0.1:{p}")).unwrap();
        let _: () = q(&mut e, &["SAVE"]);
    }
    for i in 0..500 {
        if i % 5 == 0 {
            let _: i64 = q(&mut c, &["DEL", &format!("k{i}")]);
        } else {
            let _: () = q(&mut c, &["SET", &format!("k{i}"), "new"]);
        }
    }
    let _: () = q(&mut c, &["SET", "ttl", "x", "EX", "3600"]);
    drop(c);
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    assert!(child.wait().unwrap().success());
    let (mut child, port) = common::start_up(&dir, first, console_port, &[]);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    for i in 0..500 {
        let got: Option<String> = q(&mut c, &["GET", &format!("k{i}")]);
        let want = if i % 5 == 0 { None } else { Some("new".to_string()) };
        assert_eq!(got, want, "k{i} after the restart");
    }
    let ttl: i64 = q(&mut c, &["TTL", "ttl"]);
    assert!(ttl > 3000, "the TTL survives too ({ttl})");
    // SAFETY: as above.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// GET over a plain socket (the test needs nothing more than HTTP/1.0).
fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn metrics_count_and_time_every_command() {
    let r = rig(&["--metrics-port", "0"]);
    let url = r.proxy.metrics_url.clone().unwrap();
    let mut c = r.proxy.client();
    for i in 0..10 {
        let _: () = q(&mut c, &["SET", &format!("m{i}"), "v"]);
    }
    let _: Option<String> = q(&mut c, &["GET", "m1"]);
    let _ = err(&mut c, &["INCR", "m1"]);
    let mut mc = r.proxy.memcache();
    mc.send(b"get m1 m2\r\n");
    mc.expect(b"VALUE m1 0 1\r\nv\r\nVALUE m2 0 1\r\nv\r\nEND\r\n");
    let page = http_get(&url);
    assert!(page.starts_with("HTTP/1.0 200") || page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("terrace_proxy_commands_total{tenant=\"default\",protocol=\"redis\",command=\"set\"} 10\n"), "{page}");
    assert!(page.contains("terrace_proxy_command_errors_total{tenant=\"default\",protocol=\"redis\",command=\"incr\"} 1\n"), "{page}");
    assert!(page.contains("terrace_proxy_commands_total{tenant=\"default\",protocol=\"memcache\",command=\"get\"} 1\n"), "{page}");
    assert!(page.contains("terrace_proxy_command_latency_seconds_count{tenant=\"default\",protocol=\"redis\",command=\"set\"} 10\n"));
    assert!(page.contains("terrace_proxy_command_latency_seconds{tenant=\"default\",protocol=\"redis\",command=\"get\",quantile=\"0.99\"}"));
    assert!(page.contains("terrace_proxy_engine_up{engine=\"127.0.0.1:"), "{page}");
    // The same numbers in INFO, and CONFIG RESETSTAT clears them.
    let info: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(info.contains("cmdstat_set:calls=10,") && info.contains("cmdstat_incr:calls=1,") && info.contains("failed_calls=1"), "{info}");
    let lat: String = q(&mut c, &["INFO", "latencystats"]);
    assert!(lat.contains("latency_percentiles_usec_set:p50="), "{lat}");
    let before: String = q(&mut c, &["INFO", "stats"]);
    // Resetting the statistics every tenant shares is the operator's.
    assert!(err(&mut c, &["CONFIG", "RESETSTAT"]).to_ascii_uppercase().contains("NOPERM"));
    let mut admin = redis::Client::open(format!("redis://admin:adminpw@127.0.0.1:{}/", r.proxy.port)).unwrap().get_connection().unwrap();
    let _: () = q(&mut admin, &["CONFIG", "RESETSTAT"]);
    let info: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(!info.contains("cmdstat_set"), "{info}");
    let after: String = q(&mut c, &["INFO", "stats"]);
    let processed = |s: &str| -> u64 { s.split("total_commands_processed:").nth(1).unwrap().split('\r').next().unwrap().parse().unwrap() };
    assert!(processed(&after) < processed(&before), "{before} / {after}");
}

#[test]
fn reload_moves_slots_without_dropping_clients() {
    let (e0, e1) = (Engine::start(&[]), Engine::start(&[]));
    let dir = temp_dir("reload");
    let cfg = dir.join("terrace.toml");
    let one = format!("[proxy]\nengines = [\"127.0.0.1:{}\"]\n", e0.port);
    std::fs::write(&cfg, &one).unwrap();
    let proxy = Proxy::start_for("", &["--config", cfg.to_str().unwrap()], &[("TERRACE_PROXY_ADMIN_PASSWORD", "adminpw")]);
    // TERRACE.RELOAD is the operator's.
    assert!(err(&mut proxy.client(), &["TERRACE.RELOAD"]).to_ascii_uppercase().contains("NOPERM"));
    let mut c = redis::Client::open(format!("redis://admin:adminpw@127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    let _: () = q(&mut c, &["SET", "foo", "before"]);
    assert_eq!(q::<Option<String>>(&mut e0.client(), &["GET", "foo"]).as_deref(), Some("before"));
    // Two engines now; foo's slot (12182) moves to the second.
    let two = format!("[proxy]\nengines = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]\n", e0.port, e1.port);
    std::fs::write(&cfg, &two).unwrap();
    let _: () = q(&mut c, &["TERRACE.RELOAD"]);
    let _: () = q(&mut c, &["SET", "foo", "after"]);
    assert_eq!(q::<Option<String>>(&mut e1.client(), &["GET", "foo"]).as_deref(), Some("after"));
    let _: () = q(&mut c, &["SET", "bar", "zero"]);
    assert_eq!(q::<Option<String>>(&mut e0.client(), &["GET", "bar"]).as_deref(), Some("zero"));
    // A bad file is refused with the key named, and routing stays as it was.
    std::fs::write(&cfg, "[proxy]\nengines = [\"nohost\"]\n").unwrap();
    let e = err(&mut c, &["TERRACE.RELOAD"]);
    assert!(e.contains("reload failed") && e.contains("`engines`"), "{e}");
    assert_eq!(q::<String>(&mut c, &["GET", "foo"]), "after");
    // SIGHUP does the same: back to one engine — this time with the slots' data, as an
    // operator without a console moves them: engine 1 copies them to engine 0 (which drops
    // its stale "before" first), the proxy holds them while engine 1 hands over, and the
    // reload that gives them back to engine 0 releases them.
    let mut e1c = e1.client();
    let status = |con: &mut redis::Connection| -> String {
        let s: String = q(con, &["TERRACE.MIGRATE", "STATUS"]);
        serde_json::from_str::<serde_json::Value>(&s).unwrap()["phase"].as_str().unwrap().to_string()
    };
    let _: () = q(&mut e1c, &["TERRACE.MIGRATE", "START", "back", &format!("127.0.0.1:{}", e0.port), "8192-16383"]);
    eventually(10, "engine 1 ready to hand over", || status(&mut e1c) == "ready");
    let _: () = q(&mut c, &["TERRACE.TOPOLOGY", "HOLD", "8192-16383"]);
    let _: () = q(&mut e1c, &["TERRACE.MIGRATE", "SEAL"]);
    eventually(10, "engine 1 handed over", || status(&mut e1c) == "handed-over");
    std::fs::write(&cfg, &one).unwrap();
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe {
        libc::kill(proxy.child.id() as i32, libc::SIGHUP);
    }
    // (Held until the reload moves the slot: the read waits, then reads engine 0.)
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "foo"]).as_deref(), Some("after"), "the slot came back with its current value");
    let _: () = q(&mut e1c, &["TERRACE.MIGRATE", "FINISH"]);
    eventually(10, "engine 1 deleted what it moved", || status(&mut e1c) == "done");
    let n: i64 = q(&mut e1c, &["DBSIZE"]);
    assert_eq!(n, 0);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 2, "one engine again: foo and bar on engine 0");
}

#[test]
fn near_cache_serves_hot_keys_within_its_ttl() {
    let r = rig(&["--near-cache-ttl-ms", "500"]);
    let mut c = r.proxy.client();
    let mut direct = r.engines[owner("hot")].client();
    let _: () = q(&mut c, &["SET", "hot", "v1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "hot"]), "v1"); // miss: cached now
                                                            // Changed behind the proxy's back: the cached reply is served until the TTL passes.
    let _: () = q(&mut direct, &["SET", "hot", "v2"]);
    assert_eq!(q::<String>(&mut c, &["GET", "hot"]), "v1");
    thread::sleep(Duration::from_millis(700));
    assert_eq!(q::<String>(&mut c, &["GET", "hot"]), "v2");
    // A write through the proxy is seen at once, from any client and either protocol.
    let mut other = r.proxy.client();
    let _: () = q(&mut other, &["SET", "hot", "v3"]);
    assert_eq!(q::<String>(&mut c, &["GET", "hot"]), "v3");
    let _: i64 = q(&mut other, &["APPEND", "hot", "!"]);
    assert_eq!(q::<String>(&mut c, &["GET", "hot"]), "v3!");
    let mut mc = r.proxy.memcache();
    mc.send(b"set hot 0 0 2\r\nv4\r\n");
    mc.expect(b"STORED\r\n");
    assert_eq!(q::<String>(&mut c, &["GET", "hot"]), "v4");
    let _: () = q(&mut other, &["FLUSHALL"]);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "hot"]), None);
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(info.contains("near_cache_hits:") && !info.contains("near_cache_hits:0\r"), "{info}");
}

#[test]
fn tenants_are_isolated_and_limited() {
    let engines = [Engine::start(&[]), Engine::start(&[])];
    let mc_port = common::free_port();
    let cfg = temp_dir("tenants").join("terrace.toml");
    std::fs::write(
        &cfg,
        format!(
            "[proxy]\npassword = \"rootpw\"\n\
             [[proxy.tenants]]\nname = \"shop\"\npassword = \"shoppw\"\nmemcache_port = {mc_port}\n\
             [[proxy.tenants]]\nname = \"blog\"\npassword = \"blogpw\"\nmax_qps = 20\n"
        ),
    )
    .unwrap();
    let proxy = Proxy::start(&[&engines[0], &engines[1]], &["--config", cfg.to_str().unwrap()], &[]);
    let url = |user: &str, pw: &str| format!("redis://{user}:{pw}@127.0.0.1:{}/", proxy.port);
    let mut raw = proxy.raw();
    raw.send(&encode(&["SET", "k", "v"]));
    raw.expect(b"-NOAUTH Authentication required.\r\n");
    raw.send(&encode(&["AUTH", "shop", "wrong"]));
    raw.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    raw.send(&encode(&["AUTH", "nosuchtenant", "x"]));
    raw.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    let mut root = redis::Client::open(url("default", "rootpw")).unwrap().get_connection().unwrap();
    let mut shop = redis::Client::open(url("shop", "shoppw")).unwrap().get_connection().unwrap();
    // The same key names in two tenants are two keys.
    for i in 0..20 {
        let _: () = q(&mut root, &["SET", &format!("k{i}"), "root"]);
        let _: () = q(&mut shop, &["SET", &format!("k{i}"), "shop"]);
    }
    let _: () = q(&mut shop, &["SET", "only-shop", "1"]);
    assert_eq!(q::<String>(&mut root, &["GET", "k3"]), "root");
    assert_eq!(q::<String>(&mut shop, &["GET", "k3"]), "shop");
    assert_eq!(q::<i64>(&mut root, &["DBSIZE"]), 20);
    assert_eq!(q::<i64>(&mut shop, &["DBSIZE"]), 21);
    let mut keys: Vec<String> = q(&mut root, &["KEYS", "*"]);
    keys.sort();
    assert!(!keys.contains(&"only-shop".to_string()));
    let (_, scanned): (String, Vec<String>) = q(&mut root, &["SCAN", "0", "COUNT", "1000"]);
    assert!(!scanned.contains(&"only-shop".to_string()));
    let info: String = q(&mut shop, &["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=21,"), "{info}");
    // FLUSHALL in one tenant leaves the other's keys alone.
    let _: () = q(&mut root, &["FLUSHALL"]);
    assert_eq!(q::<i64>(&mut root, &["DBSIZE"]), 0);
    assert_eq!(q::<i64>(&mut shop, &["DBSIZE"]), 21);
    // Raw engines: the default namespace (a plain client of the engine) sees none of shop's keys.
    let mut direct = engines[owner("only-shop")].client();
    assert_eq!(q::<Option<String>>(&mut direct, &["GET", "only-shop"]), None);
    // The tenant's own Memcached port reaches the tenant's keyspace.
    let mut mc = common::Raw::connect(mc_port);
    mc.send(b"get k3 only-shop\r\n");
    mc.expect(b"VALUE k3 0 4\r\nshop\r\nVALUE only-shop 0 1\r\n1\r\nEND\r\n");
    // max_qps: blog may send 20 requests per second; a burst past that is refused.
    let mut blog = redis::Client::open(url("blog", "blogpw")).unwrap().get_connection().unwrap();
    let mut refused = 0;
    for _ in 0..60 {
        if let Err(e) = redis::cmd("PING").query::<String>(&mut blog) {
            assert!(e.to_string().contains("max_qps exceeded for tenant 'blog'"), "{e}");
            refused += 1;
        }
    }
    assert!(refused >= 30, "only {refused} of 60 refused");
    thread::sleep(Duration::from_millis(300));
    assert_eq!(q::<String>(&mut blog, &["PING"]), "PONG", "the budget refills");
    // Other tenants are not limited by blog's budget.
    assert_eq!(q::<String>(&mut shop, &["PING"]), "PONG");
    // INFO and metrics label requests with their tenant.
    let mut raw = proxy.raw();
    raw.send(&encode(&["AUTH", "shop", "shoppw"]));
    raw.send(&encode(&["SELECT", "2"]));
    raw.send(&encode(&["SET", "in-db2", "x"]));
    raw.expect(b"+OK\r\n+OK\r\n+OK\r\n");
    let info: String = q(&mut shop, &["INFO", "keyspace"]);
    assert!(info.contains("db2:keys=1,"), "{info}");
}

#[test]
fn a_tenant_over_its_memory_limit_gets_oom_alone() {
    let engines = [Engine::start(&[]), Engine::start(&[])];
    let cfg = temp_dir("tenant-mem").join("terrace.toml");
    std::fs::write(
        &cfg,
        "[[proxy.tenants]]\nname = \"small\"\npassword = \"pw\"\nmax_memory = \"64kb\"\n\
         [[proxy.tenants]]\nname = \"big\"\npassword = \"pw\"\n",
    )
    .unwrap();
    let proxy = Proxy::start(&[&engines[0], &engines[1]], &["--config", cfg.to_str().unwrap()], &[]);
    let connect = |user: &str| redis::Client::open(format!("redis://{user}:pw@127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    let (mut small, mut big) = (connect("small"), connect("big"));
    let value = "x".repeat(1000);
    let mut stored = 0;
    let oom = loop {
        match redis::cmd("SET").arg(format!("k{stored}")).arg(&value).query::<()>(&mut small) {
            Ok(()) => stored += 1,
            Err(e) => break e.to_string(),
        }
        assert!(stored < 1000, "no limit reached");
    };
    assert!(oom.contains("command not allowed when used memory > 'maxmemory'"), "{oom}");
    // 64 KB over two engines: each stops its share at 32 KB of data.
    assert!((25..=70).contains(&stored), "stored {stored} KB before OOM");
    // Another tenant, and the default one, are not limited by it.
    for i in 0..200 {
        let _: () = q(&mut big, &["SET", &format!("k{i}"), &value]);
    }
    // Reads and deletes still work; freed room takes writes again.
    assert_eq!(q::<String>(&mut small, &["GET", "k0"]).len(), 1000);
    let _: () = q(&mut small, &["FLUSHALL"]);
    let _: () = q(&mut small, &["SET", "again", &value]);
    let info: String = q(&mut engines[0].client(), &["INFO", "memory"]);
    // (The default tenant's own quota: default_max_memory, 1 GB, over two engines.)
    assert!(info.contains(&format!("terrace_namespace_maxmemory:{}", 512 << 20)), "the default namespace has its own limit: {info}");
}

/// `terrace up --replicas 1`: four engines, the second pair following the first; a primary
/// that dies is restarted fenced and replaced by its replica, and no read of its slots ever
/// sees the empty restarted engine.
#[test]
fn terrace_up_with_replicas_fails_over_a_primary_that_died() {
    let dir = temp_dir("up-replicas");
    let first = common::free_ports(common::UP_PORTS);
    let (mut child, port) = common::start_up(&dir, first, common::free_port(), &["--replicas", "1"]);
    let engine = |p: u16| common::up_engine(&dir, &format!("127.0.0.1:{p}")).unwrap();
    let role = |p: u16| -> (String, String) {
        let text: String = q(&mut engine(p), &["INFO", "replication"]);
        let field = |f: &str| text.lines().find_map(|l| l.strip_prefix(f).and_then(|r| r.strip_prefix(':'))).unwrap_or("").trim().to_string();
        (field("role"), format!("{}:{}", field("master_port"), field("master_link_status")))
    };
    common::eventually(30, "each replica follows its primary", || {
        role(first + 2) == ("slave".into(), format!("{first}:up")) && role(first + 3) == ("slave".into(), format!("{}:up", first + 1))
    });
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    let _: () = q(&mut c, &["MSET", "foo", "1", "bar", "0"]);
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "5000"]), 1, "bar's engine's replica has it");
    assert_eq!(q::<Option<String>>(&mut engine(first), &["GET", "bar"]).as_deref(), Some("0"), "bar lives on the first engine");

    // The first engine dies; the supervisor restarts it at once, fenced, and the console
    // fails it over to its replica. No read of bar ever answers from the empty engine.
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<Value>(&mut engine(first));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match redis::cmd("GET").arg("bar").query::<Option<String>>(&mut c) {
            Ok(v) => {
                assert_eq!(v.as_deref(), Some("0"), "a read answered by the restarted, empty engine");
                if role(first + 2).0 == "master" {
                    break;
                }
            }
            // (The proxy's own answers while the engine is gone: TRYAGAIN for a read not
            // sent, "unavailable after the request was sent" for one in flight at the
            // shutdown.)
            Err(e) => {
                let text = e.to_string().to_lowercase();
                assert!(
                    text.contains("tryagain") || text.contains("unavailable after the request was sent") || e.is_connection_dropped() || e.is_io_error(),
                    "{e}"
                )
            }
        }
        assert!(Instant::now() < deadline, "no failover");
        thread::sleep(Duration::from_millis(20));
    }
    common::eventually(20, "writes to bar's slots work again", || redis::cmd("SET").arg("bar").arg("2").query::<()>(&mut c).is_ok());
    common::eventually(30, "the restarted engine rejoins as a replica", || role(first) == ("slave".into(), format!("{}:up", first + 2)));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "bar"]).as_deref(), Some("2"));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "foo"]).as_deref(), Some("1"));
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn info_reports_the_instantaneous_ops_rate() {
    let r = rig(&[]);
    let mut c = r.proxy.client();
    let rate = |c: &mut redis::Connection| -> u64 {
        let info: String = q(c, &["INFO", "stats"]);
        info.split("instantaneous_ops_per_sec:").nth(1).unwrap().split('\r').next().unwrap().parse().unwrap()
    };
    // Busy: thousands of commands a second, as Redis counts them (the mean of 100 ms samples).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        for _ in 0..200 {
            let _: String = q(&mut c, &["PING"]);
        }
        if rate(&mut c) > 500 {
            break;
        }
        assert!(Instant::now() < deadline, "the rate never rose: {}", rate(&mut c));
    }
    // Idle for longer than the 1.6 s window: back to (about) nothing.
    thread::sleep(Duration::from_millis(2500));
    assert!(rate(&mut c) < 10, "{}", rate(&mut c));
}
