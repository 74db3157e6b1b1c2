//! Clients that try to hang or stop a node: each gets Redis's answer and the engine keeps
//! serving, and SIGTERM ends the engine whatever a client is running.
//!
//! A hang shows up as a read timeout (the clients here wait at most 30 s for a reply), not as
//! a test that never ends.

mod common;

use std::time::{Duration, Instant};

use common::{encode, err, q, Engine, RedisPort};

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
    sleeper.send(&encode(&["DEBUG", "SLEEP", "3600"]));
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
