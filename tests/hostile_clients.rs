//! Clients that try to hang or stop a node: each gets Redis's answer and the engine keeps
//! serving, and SIGTERM ends the engine whatever a client is running.
//!
//! A hang shows up as a read timeout (the clients here wait at most 30 s for a reply), not as
//! a test that never ends.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{encode, err, info_field, q, Engine, RedisPort};

/// A pattern a naive recursive glob matcher (one level per star) needs exponential time for
/// against `subject()`: Redis's suite's "Regression for pattern matching long nested loops",
/// CVE-2022-36021.
fn nested_pattern() -> String {
    format!("{}b", "a*".repeat(47))
}

fn subject() -> String {
    "a".repeat(100)
}

fn client(e: &Engine) -> redis::Connection {
    let c = e.client();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c
}

/// Every SCAN-family page's items for a MATCH pattern, following the cursor to its end.
fn scan_all(c: &mut redis::Connection, head: &[&str], pattern: &str) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut items = Vec::new();
    loop {
        let mut args: Vec<&str> = head.to_vec();
        args.extend([cursor.as_str(), "MATCH", pattern, "COUNT", "1000"]);
        let (next, page): (String, Vec<String>) = q(c, &args);
        items.extend(page);
        if next == "0" {
            return items;
        }
        cursor = next;
    }
}

#[test]
fn glob_patterns_answer_every_user_without_blowing_up() {
    let e = Engine::start(&[]);
    let mut c = client(&e);
    let (pattern, subject) = (nested_pattern(), subject());
    let none: Vec<String> = Vec::new();

    // KEYS and SCAN MATCH.
    q::<()>(&mut c, &["SET", &subject, "1"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", &pattern]), none);
    assert_eq!(scan_all(&mut c, &["SCAN"], &pattern), none);
    let matching = format!("{}a", "a*".repeat(47));
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", &matching]), vec![subject.clone()], "the same nesting that matches");
    // The suite's "very long nested loops": 50,000 stars, which Redis gives up on.
    let long_key = "a".repeat(50_000);
    q::<()>(&mut c, &["SET", &long_key, "1"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", &"*?".repeat(50_000)]), none);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", &"*?".repeat(1000)]), vec![long_key.clone()], "up to 1,000 nested stars match");

    // HSCAN, SSCAN, ZSCAN MATCH.
    q::<()>(&mut c, &["HSET", "h", &subject, "1"]);
    q::<()>(&mut c, &["SADD", "s", &subject]);
    q::<()>(&mut c, &["ZADD", "z", "1", &subject]);
    for head in [["HSCAN", "h"], ["SSCAN", "s"], ["ZSCAN", "z"]] {
        assert_eq!(scan_all(&mut c, &head, &pattern), none, "{}", head[0]);
        assert!(!scan_all(&mut c, &head, &matching).is_empty(), "{}", head[0]);
    }

    // PSUBSCRIBE (PUBLISH matches channels against it) and PUBSUB CHANNELS.
    let mut subscriber = e.raw();
    subscriber.send(&encode(&["PSUBSCRIBE", &pattern]));
    assert!(subscriber.read_available().contains("psubscribe"));
    let mut listener = e.raw();
    listener.send(&encode(&["SUBSCRIBE", &subject]));
    assert!(listener.read_available().contains("subscribe"));
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", &subject, "m"]), 1, "only the plain subscriber");
    assert_eq!(q::<Vec<String>>(&mut c, &["PUBSUB", "CHANNELS", &pattern]), none);
    assert_eq!(q::<Vec<String>>(&mut c, &["PUBSUB", "CHANNELS", &matching]), vec![subject.clone()]);

    // CONFIG GET and COMMAND LIST FILTERBY PATTERN (names are short; the answers must be right).
    let long_name_pattern = format!("{}x", "m*".repeat(40));
    assert!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", &long_name_pattern]).is_empty());
    assert!(q::<Vec<String>>(&mut c, &["COMMAND", "LIST", "FILTERBY", "PATTERN", &pattern]).is_empty());
    assert_eq!(q::<Vec<String>>(&mut c, &["COMMAND", "LIST", "FILTERBY", "PATTERN", "g?t"]), vec!["get".to_string()]);

    // ACL key and channel patterns.
    q::<()>(&mut c, &["ACL", "SETUSER", "nested", "on", ">pw", &format!("~{pattern}"), &format!("&{pattern}"), "+@all"]);
    let mut user = client(&e);
    q::<()>(&mut user, &["AUTH", "nested", "pw"]);
    let denied = err(&mut user, &["GET", &subject]);
    assert!(denied.contains("no permissions to access one of the keys"), "a key outside the user's pattern: {denied}");
    let denied = err(&mut user, &["PUBLISH", &subject, "m"]);
    assert!(denied.contains("no permissions to access one of the channels"), "a channel outside the user's pattern: {denied}");

    // The engine still answers everyone.
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn sigterm_ends_the_engine_while_a_command_runs() {
    let mut e = Engine::start(&["--threads", "1", "--enable-debug-command", "yes"]);
    let mut sleeper = e.raw();
    sleeper.send(&encode(&["DEBUG", "SLEEP", "30"]));
    // The reactor is inside the command once another client's PING gets no answer.
    let mut other = e.raw();
    other.send(&encode(&["PING"]));
    assert_eq!(other.read_available(), "", "the reactor should be asleep in DEBUG SLEEP");
    let start = Instant::now();
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe { libc::kill(e.child.id() as i32, libc::SIGTERM) };
    while e.child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(5), "the engine was still running 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The reply a client has waiting, in bytes, as CLIENT LIST shows it (`omem`), by name.
fn client_field(c: &mut redis::Connection, name: &str, field: &str) -> Option<String> {
    let list: String = q(c, &["CLIENT", "LIST"]);
    let line = list.lines().find(|l| l.contains(&format!(" name={name} ")))?;
    line.split(' ').find_map(|kv| kv.strip_prefix(&format!("{field}="))).map(str::to_string)
}

/// A negative count's picks are work the client chooses: past `MAX_REPEATED_PICKS` (a
/// million) they are refused up front (issue 47, finding 7: -2147483648 ran 7 s, holding
/// the reactor's other clients); within it, a reply past the client's output limit closes
/// the client, not the engine.
#[test]
fn huge_random_counts_are_refused_and_big_replies_close_the_client_not_the_engine() {
    let e = Engine::start(&["--threads", "1"]);
    let mut c = client(&e);
    let long = |m: &str| format!("{m}{}", "-".repeat(60));
    for m in ["a", "b", "c"] {
        q::<i64>(&mut c, &["SADD", "s", &long(m)]);
        q::<i64>(&mut c, &["HSET", "h", &long(m), &long("value")]);
        q::<i64>(&mut c, &["ZADD", "z", "1", &long(m)]);
    }
    // Ordinary counts still answer in full.
    assert_eq!(q::<Vec<String>>(&mut c, &["SRANDMEMBER", "s", "-5"]).len(), 5);
    assert_eq!(q::<Vec<String>>(&mut c, &["HRANDFIELD", "h", "-4", "WITHVALUES"]).len(), 8);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "z", "2"]).len(), 2);
    for cmd in [&["SRANDMEMBER", "s", "-2147483648"][..], &["HRANDFIELD", "h", "-1000001", "WITHVALUES"], &["ZRANDMEMBER", "z", "-1000001", "WITHSCORES"]] {
        let e = err(&mut c, cmd);
        assert!(e.contains("value is out of range") && e.contains("at most 1000000"), "{cmd:?}: {e}");
    }
    // Positive counts are bounded by the collection.
    assert_eq!(q::<Vec<String>>(&mut c, &["SRANDMEMBER", "s", "2147483648"]).len(), 3);
    q::<()>(&mut c, &["CONFIG", "SET", "client-output-buffer-limit", "normal 8mb 0 0"]);
    let before = e.rss();
    for cmd in [&["SRANDMEMBER", "s", "-1000000"][..], &["HRANDFIELD", "h", "-1000000", "WITHVALUES"], &["ZRANDMEMBER", "z", "-1000000", "WITHSCORES"]] {
        let mut hostile = e.raw();
        hostile.send(&encode(cmd));
        assert!(hostile.is_closed(), "{cmd:?}: the client should be closed at its output limit");
        // The engine answers others at once, and did not keep the reply.
        assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    }
    assert_eq!(info_field(&mut c, "stats", "client_output_buffer_limit_disconnections"), 3);
    let grown = e.rss().saturating_sub(before);
    assert!(grown < 64 << 20, "the engine grew by {grown} bytes for replies it did not send");
}

#[test]
fn a_subscriber_that_never_reads_is_closed_at_the_pubsub_limit() {
    // Redis's default pub/sub limit (32 MB hard): the subscriber goes, the engine stays small.
    let e = Engine::start(&["--threads", "1"]);
    let mut publisher = client(&e);
    let mut sub = e.raw();
    sub.send(&encode(&["SUBSCRIBE", "news"]));
    sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    let before = e.rss();
    let message = "x".repeat(64 * 1024);
    let mut sent = 0;
    loop {
        let receivers: i64 = q(&mut publisher, &["PUBLISH", "news", &message]);
        if receivers == 0 {
            break;
        }
        sent += message.len();
        assert!(sent < 512 << 20, "the subscriber was still there after {sent} bytes published");
    }
    assert!(sent >= 32 << 20, "closed after only {sent} bytes: before its 32 MB limit");
    assert_eq!(info_field(&mut publisher, "stats", "client_output_buffer_limit_disconnections"), 1);
    let grown = e.rss().saturating_sub(before);
    assert!(grown < 160 << 20, "the engine grew by {grown} bytes for a subscriber that never read");
    // A smaller limit set at run time applies to the next subscriber.
    q::<()>(&mut publisher, &["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 0"]);
    let mut slow = e.raw();
    slow.send(&encode(&["SUBSCRIBE", "news"]));
    slow.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    let mut sent = 0;
    while q::<i64>(&mut publisher, &["PUBLISH", "news", &message]) == 1 {
        sent += message.len();
        assert!(sent < 64 << 20, "the subscriber outlived its 1 MB limit by far ({sent} bytes published)");
    }
    assert_eq!(info_field(&mut publisher, "stats", "client_output_buffer_limit_disconnections"), 2);
}

#[test]
fn a_monitor_that_never_reads_is_closed_at_the_normal_limit() {
    let e = Engine::start(&["--threads", "1"]);
    let mut c = client(&e);
    q::<()>(&mut c, &["CONFIG", "SET", "client-output-buffer-limit", "normal 2mb 0 0"]);
    let mut monitor = e.raw();
    monitor.send(&encode(&["CLIENT", "SETNAME", "watcher"]));
    monitor.expect(b"+OK\r\n");
    monitor.send(&encode(&["MONITOR"]));
    monitor.expect(b"+OK\r\n");
    let value = "v".repeat(32 * 1024);
    let mut sent = 0;
    while client_field(&mut c, "watcher", "flags").is_some() {
        q::<()>(&mut c, &["SET", "k", &value]);
        sent += value.len();
        assert!(sent < 256 << 20, "the MONITOR client was still there after {sent} bytes of commands");
    }
    assert!(info_field(&mut c, "stats", "client_output_buffer_limit_disconnections") >= 1);
    assert!(monitor.closes_after_output());
}

#[test]
fn client_list_shows_output_waiting_for_a_slow_reader() {
    let e = Engine::start(&["--threads", "1"]);
    let mut c = client(&e);
    let mut sub = e.raw();
    sub.send(&encode(&["CLIENT", "SETNAME", "slow"]));
    sub.expect(b"+OK\r\n");
    sub.send(&encode(&["SUBSCRIBE", "news"]));
    sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    let message = "x".repeat(64 * 1024);
    // Past what the sockets' buffers hold, output waits in the engine: CLIENT LIST says how much.
    for _ in 0..256 {
        q::<i64>(&mut c, &["PUBLISH", "news", &message]);
    }
    let omem: u64 = client_field(&mut c, "slow", "omem").unwrap().parse().unwrap();
    assert!(omem > 0, "omem should count the output a slow subscriber has waiting");
}

#[test]
fn maxclients_refuses_with_redis_error_and_counts() {
    let e = Engine::start(&["--threads", "1"]);
    let mut c = client(&e);
    q::<()>(&mut c, &["CONFIG", "SET", "maxclients", "3"]);
    let mut kept = vec![e.raw(), e.raw()];
    let mut refused = e.raw();
    assert_eq!(refused.read_available(), "-ERR max number of clients reached\r\n");
    assert!(refused.is_closed());
    assert_eq!(info_field(&mut c, "stats", "rejected_connections"), 1);
    // A slot frees when a client leaves.
    kept.pop();
    common::eventually(5, "a freed client slot", || {
        let mut again = e.raw();
        again.cmd(&["PING"]) == "+PONG\r\n"
    });
    assert!(err(&mut c, &["CONFIG", "SET", "maxclients", "4000000000"]).contains("not able to handle the specified number of clients"));
}

#[test]
fn out_of_descriptors_lowers_maxclients_and_never_spins() {
    // With 64 descriptors, 32 are for clients (Redis keeps 32 for itself too).
    let e = Engine::start_with_fd_limit(64, &["--threads", "1"]);
    let mut c = client(&e);
    let maxclients: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxclients"]);
    assert_eq!(maxclients[1], "32");
    let mut clients = Vec::new();
    let mut refused = 0;
    for _ in 0..60 {
        let mut r = e.raw();
        if r.cmd(&["PING"]) == "+PONG\r\n" {
            clients.push(r);
        } else {
            refused += 1;
        }
    }
    assert_eq!(clients.len(), 31, "maxclients counts the first client too");
    assert_eq!(refused, 29);
    // Idle with every client slot taken and connections still arriving: no busy loop.
    let mut waiting: Vec<std::net::TcpStream> = (0..20).map(|_| std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap()).collect();
    let cpu = e.cpu_time();
    std::thread::sleep(Duration::from_secs(2));
    let used = e.cpu_time() - cpu;
    assert!(used < Duration::from_millis(1000), "the engine used {used:?} of CPU in 2 s while idle at its client limit");
    waiting.clear();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn query_buffer_and_bulk_length_limits_take_config_values() {
    let e = Engine::start(&["--threads", "1"]);
    let mut c = client(&e);
    q::<()>(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    let mut big = e.raw();
    big.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n");
    assert_eq!(big.read_available(), "-ERR Protocol error: invalid bulk length\r\n");
    assert!(big.is_closed());
    q::<()>(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "512mb", "client-query-buffer-limit", "1mb"]);
    // A request whose argument never ends grows the query buffer past the limit.
    let mut endless = e.raw();
    endless.send(b"*2\r\n$3\r\nGET\r\n$8000000\r\n");
    let chunk = vec![b'a'; 64 * 1024];
    let mut closed = false;
    for _ in 0..64 {
        if endless.s.write_all(&chunk).is_err() {
            closed = true;
            break;
        }
    }
    assert!(closed || endless.is_closed(), "a query buffer past client-query-buffer-limit should close the client");
    assert_eq!(info_field(&mut c, "stats", "client_query_buffer_limit_disconnections"), 1);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

/// Pipelines `n` GETs of `key` on a raw connection that then never reads.
fn pipeline_without_reading(port: u16, key: &str, n: usize) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let batch: Vec<u8> = (0..n).flat_map(|_| encode(&["GET", key])).collect();
    // The proxy may stop reading once it holds enough for this client: that is the point.
    let _ = s.write_all(&batch);
    s
}

#[test]
fn the_proxy_bounds_what_it_holds_for_clients_that_do_not_read() {
    let engine = Engine::start(&["--threads", "1"]);
    let proxy = common::Proxy::start(&[&engine], &[], &[]);
    let mut c = proxy.client();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let value = "v".repeat(1 << 20);
    q::<()>(&mut c, &["SET", "big", &value]);
    let before = common::rss_of(&proxy.child);
    let hostile: Vec<_> = (0..4).map(|_| pipeline_without_reading(proxy.port, "big", 3000)).collect();
    // Others are still served while those replies pile up (a read timeout fails the test).
    for _ in 0..50 {
        assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = common::rss_of(&proxy.child).saturating_sub(before);
    assert!(held < 1200 << 20, "the proxy grew by {} MB for 4 clients that do not read", held >> 20);
    drop(hostile);
    // What they held is given back once they are gone.
    common::eventually(10, "the proxy's memory back near where it was", || common::rss_of(&proxy.child) < before + (96 << 20));
    assert_eq!(q::<String>(&mut c, &["GET", "big"]).len(), 1 << 20);
}

#[test]
fn the_proxy_closes_a_client_over_its_output_limit() {
    let engine = Engine::start(&["--threads", "1"]);
    let dir = common::temp_dir("proxy-limits");
    let config = dir.join("terrace.toml");
    std::fs::write(&config, "[proxy]\nclient_output_limit = \"8mb\"\npubsub_output_limit = \"1mb\"\n").unwrap();
    let proxy = common::Proxy::start(&[&engine], &["--config", config.to_str().unwrap()], &[]);
    let mut c = proxy.client();
    q::<()>(&mut c, &["SET", "big", &"v".repeat(1 << 20)]);
    let mut hostile = common::Raw { s: pipeline_without_reading(proxy.port, "big", 100) };
    // Not a byte is read before the proxy has closed it: a reader keeping pace would keep the
    // proxy's held replies under the limit (a CI run read all 100 MB that way and failed).
    common::eventually(10, "a client over client_output_limit closed", || {
        let info: String = q(&mut c, &["INFO", "stats"]);
        info.contains("client_output_buffer_limit_disconnections:1")
    });
    assert!(hostile.closes_after_output(), "a client over client_output_limit should be closed");
    // A subscriber that never reads, at the pub/sub limit.
    let mut sub = proxy.raw();
    sub.send(&encode(&["SUBSCRIBE", "news"]));
    sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    let message = "m".repeat(64 * 1024);
    let mut sent = 0;
    while q::<i64>(&mut c, &["PUBLISH", "news", &message]) == 1 {
        sent += message.len();
        assert!(sent < 256 << 20, "the proxy's subscriber was still there after {sent} bytes published");
    }
    common::eventually(5, "two clients closed for their output", || {
        let info: String = q(&mut c, &["INFO", "stats"]);
        info.contains("client_output_buffer_limit_disconnections:2")
    });
}

#[test]
fn script_and_function_kill_through_the_proxy_reach_the_busy_engine() {
    let (e1, e2) = (Engine::start(&["--threads", "1"]), Engine::start(&["--threads", "1"]));
    let proxy = common::Proxy::start(&[&e1, &e2], &[], &[]);
    let mut c = proxy.client();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // (An engine setting: the operator's, set on the engines.)
    for e in [&e1, &e2] {
        q::<()>(&mut e.client(), &["CONFIG", "SET", "busy-reply-threshold", "100"]);
    }
    q::<String>(&mut c, &["FUNCTION", "LOAD", "#!lua name=spinning\nredis.register_function('spin', function() while true do end end)"]);
    for (run, kill) in [(&["EVAL", "while true do end", "0"][..], &["SCRIPT", "KILL"][..]), (&["FCALL", "spin", "0"], &["FUNCTION", "KILL"])] {
        let mut busy = proxy.raw();
        busy.send(&encode(run));
        std::thread::sleep(Duration::from_millis(500));
        // Every engine connection the proxy had is stuck behind the script on that engine.
        assert_eq!(q::<String>(&mut c, kill), "OK", "{kill:?} through the proxy");
        let killed = busy.read_available();
        assert!(killed.starts_with("-") && killed.contains("killed"), "{run:?} after {kill:?}: {killed:?}");
        assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    }
    // With nothing running, the engines say so.
    let idle = err(&mut c, &["SCRIPT", "KILL"]);
    assert!(idle.contains("No scripts in execution right now"), "{idle}");
}

/// A connection to the proxy from a given local address (all of 127/8 is this machine).
fn connect_from(source: &str, port: u16) -> common::Raw {
    // SAFETY: plain socket calls on a descriptor this function owns until it is handed to
    // TcpStream, with properly sized sockaddr_in values.
    let fd = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let addr = |ip: &str, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(ip.parse::<std::net::Ipv4Addr>().unwrap()).to_be() },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        let local = addr(source, 0);
        assert_eq!(libc::bind(fd, &local as *const _ as *const libc::sockaddr, len), 0);
        let remote = addr("127.0.0.1", port);
        assert_eq!(libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len), 0);
        fd
    };
    // SAFETY: `fd` is a connected socket nothing else owns.
    let s = unsafe { <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    common::Raw { s }
}

#[test]
fn the_proxy_limits_failed_auth_per_address_and_user() {
    let engine = Engine::start(&["--threads", "1"]);
    let proxy = common::Proxy::start(&[&engine], &[], &[("TERRACE_PROXY_PASSWORD", "s3cret"), ("TERRACE_PROXY_ADMIN_PASSWORD", common::PROXY_ADMIN_PASSWORD)]);
    let mut guesser = connect_from("127.0.0.1", proxy.port);
    for guess in ["a", "b", "c", "d", "e"] {
        assert_eq!(guesser.cmd(&["AUTH", guess]), "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    }
    // Now even the right password is refused from that address, without being checked.
    let refused = guesser.cmd(&["AUTH", "s3cret"]);
    assert!(refused.starts_with("-ERR too many failed authentication attempts as this user from 127.0.0.1; try again in "), "{refused:?}");
    let mut fresh = connect_from("127.0.0.1", proxy.port);
    assert!(fresh.cmd(&["HELLO", "3", "AUTH", "default", "s3cret"]).starts_with("-ERR too many failed"));
    // Another address is not affected.
    let mut other = connect_from("127.0.0.2", proxy.port);
    assert_eq!(other.cmd(&["AUTH", "s3cret"]), "+OK\r\n");
    assert_eq!(other.cmd(&["PING"]), "+PONG\r\n");
    // Failures under a made-up user name lock out that name alone (issue 46, finding 9: they
    // locked out every tenant of the address).
    let mut mallory = connect_from("127.0.0.3", proxy.port);
    for _ in 0..5 {
        assert!(mallory.cmd(&["AUTH", "nobody", "x"]).starts_with("-WRONGPASS"));
    }
    assert!(mallory.cmd(&["AUTH", "nobody", "x"]).starts_with("-ERR too many failed"));
    assert_eq!(mallory.cmd(&["AUTH", "s3cret"]), "+OK\r\n", "the default tenant from the same address");
    // The operator (the console's link) is never locked out from its address, whoever
    // failed as admin there; every attempt is checked.
    let mut operator = connect_from("127.0.0.1", proxy.port);
    for _ in 0..8 {
        assert!(operator.cmd(&["AUTH", "admin", "wrong"]).starts_with("-WRONGPASS"));
    }
    assert_eq!(operator.cmd(&["AUTH", "admin", common::PROXY_ADMIN_PASSWORD]), "+OK\r\n");
}
