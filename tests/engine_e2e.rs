//! End-to-end tests of `terrace engine`: the real binary on an ephemeral port, driven by the
//! `redis` crate and by raw RESP bytes.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{encode, err, info_field, q, Engine, RedisPort};
use redis::{cmd, Value};

#[test]
fn strings() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "k", "w", "NX"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "k", "w", "XX", "GET"]), Some("v".into()));
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "nokey", "w", "XX"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "nokey"]), None);
    assert_eq!(q::<String>(&mut c, &["SET", "t", "1", "EX", "100"]), "OK");
    let ttl: i64 = q(&mut c, &["TTL", "t"]);
    assert!((99..=100).contains(&ttl));
    assert_eq!(q::<String>(&mut c, &["SET", "t", "2", "KEEPTTL"]), "OK");
    assert!(q::<i64>(&mut c, &["TTL", "t"]) > 0);
    assert!(err(&mut c, &["SET", "k", "v", "EX", "0"]).contains("invalid expire time in 'set' command"));
    assert!(err(&mut c, &["SET", "k", "v", "NX", "XX"]).contains("syntax error"));
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "41"]), 42);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "n", "2"]), 40);
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "n", "0.5"]), "40.5");
    assert!(err(&mut c, &["INCR", "n"]).contains("value is not an integer or out of range"));
    q::<()>(&mut c, &["SET", "big", "9223372036854775807"]);
    assert!(err(&mut c, &["INCR", "big"]).contains("increment or decrement would overflow"));
    assert_eq!(q::<i64>(&mut c, &["APPEND", "a", "Hello"]), 5);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "a", " World"]), 11);
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "a", "0", "4"]), "Hello");
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "a", "-5", "-1"]), "World");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "a", "6", "Redis"]), 11);
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "Hello Redis");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "pad", "3", "x"]), 4);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "pad"]), b"\0\0\0x".to_vec());
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "a"]), 11);
    assert_eq!(q::<String>(&mut c, &["MSET", "m1", "a", "m2", "b"]), "OK");
    assert_eq!(q::<Vec<Option<String>>>(&mut c, &["MGET", "m1", "nope", "m2"]), vec![Some("a".into()), None, Some("b".into())]);
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "m1", "x", "m3", "y"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "m3"]), 0);
    assert_eq!(q::<String>(&mut c, &["GETDEL", "m1"]), "a");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "m1"]), 0);
    assert_eq!(q::<String>(&mut c, &["GETEX", "m2", "PX", "50000"]), "b");
    assert!(q::<i64>(&mut c, &["PTTL", "m2"]) > 40000);
    assert_eq!(q::<String>(&mut c, &["GETEX", "m2", "PERSIST"]), "b");
    assert_eq!(q::<i64>(&mut c, &["TTL", "m2"]), -1);
    q::<()>(&mut c, &["MSET", "l1", "ohmytext", "l2", "mynewtext"]);
    assert_eq!(q::<String>(&mut c, &["LCS", "l1", "l2"]), "mytext");
    assert_eq!(q::<i64>(&mut c, &["LCS", "l1", "l2", "LEN"]), 6);
    // TierBase extensions.
    q::<()>(&mut c, &["SET", "cas", "old"]);
    assert_eq!(q::<i64>(&mut c, &["CAS", "cas", "nope", "new"]), 0);
    assert_eq!(q::<i64>(&mut c, &["CAS", "cas", "old", "new", "EX", "100"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "cas"]), "new");
    assert!(q::<i64>(&mut c, &["TTL", "cas"]) > 0);
    assert_eq!(q::<i64>(&mut c, &["CAD", "cas", "old"]), 0);
    assert_eq!(q::<i64>(&mut c, &["CAD", "cas", "new"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "cas"]), 0);
    q::<()>(&mut c, &["LPUSH", "list", "x"]);
    assert!(err(&mut c, &["GET", "list"]).contains("Operation against a key holding the wrong kind of value"));
    assert!(err(&mut c, &["CAS", "list", "a", "b"]).contains("wrong kind of value"));
}

#[test]
fn keys_and_expiry() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    q::<()>(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(q::<i64>(&mut c, &["DEL", "a", "b", "zz"]), 2);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "c"]), 1);
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "NX"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "LT"]), 1);
    assert!(err(&mut c, &["EXPIRE", "k", "5", "NX", "XX"]).contains("NX and XX, GT or LT options at the same time are not compatible"));
    let t: i64 = q(&mut c, &["EXPIRETIME", "k"]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((now + 48..=now + 51).contains(&t), "{t} vs {now}");
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "missing"]), -2);
    // Millisecond expiry is honoured, lazily and actively.
    q::<()>(&mut c, &["SET", "short", "v", "PX", "100"]);
    for i in 0..50 {
        q::<()>(&mut c, &["SET", &format!("vol{i}"), "v", "PX", "100"]);
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "short"]), 1);
    thread::sleep(Duration::from_millis(150));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "short"]), None);
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1, "active expiry reclaims volatile keys");
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(info.contains("expired_keys:51"), "{info}");
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    // Rename, copy, move.
    q::<()>(&mut c, &["SET", "src", "v", "EX", "100"]);
    assert_eq!(q::<String>(&mut c, &["RENAME", "src", "dst"]), "OK");
    assert!(q::<i64>(&mut c, &["TTL", "dst"]) > 0);
    assert!(err(&mut c, &["RENAME", "src", "x"]).contains("no such key"));
    q::<()>(&mut c, &["SET", "other", "o"]);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "dst", "other"]), 0);
    q::<()>(&mut c, &["RPUSH", "list", "a", "b"]);
    assert_eq!(q::<i64>(&mut c, &["COPY", "list", "list2"]), 1);
    q::<()>(&mut c, &["RPUSH", "list2", "c"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "list"]), 2, "COPY is deep");
    assert_eq!(q::<i64>(&mut c, &["COPY", "list", "other"]), 0);
    assert_eq!(q::<i64>(&mut c, &["COPY", "list", "other", "REPLACE"]), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "other"]), "list");
    assert_eq!(q::<i64>(&mut c, &["MOVE", "other", "3"]), 1);
    assert_eq!(q::<i64>(&mut c, &["COPY", "list", "list", "DB", "5"]), 1);
    q::<()>(&mut c, &["SELECT", "3"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "other"]), 2);
    q::<()>(&mut c, &["SELECT", "5"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "list"]), 2);
    assert!(err(&mut c, &["SELECT", "16"]).contains("DB index is out of range"));
    q::<()>(&mut c, &["SELECT", "0"]);
    // KEYS, SCAN (complete iteration, TYPE filter), RANDOMKEY, DBSIZE, OBJECT.
    q::<()>(&mut c, &["FLUSHDB"]);
    for i in 0..1000 {
        q::<()>(&mut c, &["SET", &format!("key:{i}"), "v"]);
    }
    q::<()>(&mut c, &["SADD", "aset", "m"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "key:99?"]).len(), 10);
    let mut cursor = "0".to_string();
    let mut seen = std::collections::HashSet::new();
    loop {
        let (next, keys): (String, Vec<String>) = q(&mut c, &["SCAN", &cursor, "MATCH", "key:*", "COUNT", "50"]);
        seen.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 1000);
    let (_, sets): (String, Vec<String>) = q(&mut c, &["SCAN", "0", "TYPE", "set", "COUNT", "100000"]);
    assert_eq!(sets, vec!["aset".to_string()]);
    assert!(q::<String>(&mut c, &["RANDOMKEY"]).len() > 3);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1001);
    q::<()>(&mut c, &["SET", "int", "12345"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "int"]), "int");
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "key:1"]), "embstr");
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "REFCOUNT", "int"]), 1);
    assert!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", "int"]) <= 1);
    assert!(q::<i64>(&mut c, &["TOUCH", "int", "nope"]) == 1);
    assert!(err(&mut c, &["OBJECT", "FREQ", "int"]).contains("An LFU maxmemory policy is not selected"));
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    assert!(q::<i64>(&mut c, &["OBJECT", "FREQ", "int"]) >= 0);
    assert!(q::<i64>(&mut c, &["MEMORY", "USAGE", "key:1"]) > 0);
}

#[test]
fn lists_including_blocking() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]), 3);
    assert_eq!(q::<i64>(&mut c, &["LPUSH", "l", "z"]), 4);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]), vec!["z", "a", "b", "c"]);
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "nolist", "a"]), 0);
    assert_eq!(q::<String>(&mut c, &["LINDEX", "l", "-1"]), "c");
    assert_eq!(q::<String>(&mut c, &["LSET", "l", "0", "y"]), "OK");
    assert!(err(&mut c, &["LSET", "l", "10", "y"]).contains("index out of range"));
    assert!(err(&mut c, &["LSET", "nolist", "0", "y"]).contains("no such key"));
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "BEFORE", "b", "x"]), 5);
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "AFTER", "nope", "x"]), -1);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "l", "b"]), 3);
    q::<()>(&mut c, &["RPUSH", "r", "a", "b", "a", "c", "a"]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["LPOS", "r", "a", "COUNT", "0"]), vec![0, 2, 4]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["LPOS", "r", "a", "RANK", "-1", "COUNT", "2"]), vec![4, 2]);
    assert_eq!(q::<i64>(&mut c, &["LREM", "r", "-2", "a"]), 2);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "r", "0", "-1"]), vec!["a", "b", "c"]);
    assert_eq!(q::<String>(&mut c, &["LTRIM", "r", "1", "-1"]), "OK");
    assert_eq!(q::<Vec<String>>(&mut c, &["LPOP", "r", "5"]), vec!["b", "c"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "r"]), 0, "empty lists are deleted");
    assert_eq!(q::<Value>(&mut c, &["LPOP", "r", "1"]), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["LMOVE", "l", "m", "LEFT", "RIGHT"]), "y");
    assert_eq!(q::<String>(&mut c, &["RPOPLPUSH", "l", "m"]), "c");
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "m", "0", "-1"]), vec!["c", "y"]);
    let (k, v): (String, Vec<String>) = q(&mut c, &["LMPOP", "2", "none", "m", "RIGHT", "COUNT", "5"]);
    assert_eq!((k.as_str(), v), ("m", vec!["y".to_string(), "c".to_string()]));
    assert!(err(&mut c, &["LMPOP", "0", "m", "LEFT"]).contains("numkeys should be greater than 0"));

    // BLPOP times out with a nil reply.
    let start = Instant::now();
    assert_eq!(q::<Value>(&mut c, &["BLPOP", "empty", "0.2"]), Value::Nil);
    assert!(start.elapsed() >= Duration::from_millis(180));
    assert!(err(&mut c, &["BLPOP", "empty", "-1"]).contains("timeout is negative"));
    assert!(err(&mut c, &["BLPOP", "empty", "abc"]).contains("timeout is not a float or out of range"));

    // A push from another client wakes the oldest blocked client first.
    let url = e.url();
    let waiter = |url: String| {
        thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let r: (String, String) = cmd("BLPOP").arg("q1").arg("q2").arg("5").query(&mut c).unwrap();
            r
        })
    };
    let first = waiter(url.clone());
    thread::sleep(Duration::from_millis(200));
    let second = waiter(url.clone());
    thread::sleep(Duration::from_millis(200));
    q::<()>(&mut c, &["RPUSH", "q2", "one"]);
    assert_eq!(first.join().unwrap(), ("q2".to_string(), "one".to_string()));
    q::<()>(&mut c, &["RPUSH", "q1", "two"]);
    assert_eq!(second.join().unwrap(), ("q1".to_string(), "two".to_string()));

    // BLMOVE moves atomically once data arrives; BRPOPLPUSH times out with a nil bulk.
    let u = url.clone();
    let mover = thread::spawn(move || {
        let mut c = redis::Client::open(u).unwrap().get_connection().unwrap();
        let v: String = cmd("BLMOVE").arg("src").arg("dst").arg("LEFT").arg("LEFT").arg("5").query(&mut c).unwrap();
        v
    });
    thread::sleep(Duration::from_millis(200));
    q::<()>(&mut c, &["RPUSH", "src", "moved"]);
    assert_eq!(mover.join().unwrap(), "moved");
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "dst", "0", "-1"]), vec!["moved"]);
    assert_eq!(q::<Value>(&mut c, &["BRPOPLPUSH", "nothing", "dst", "0.1"]), Value::Nil);
    // Blocking pops inside MULTI don't block.
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["BLPOP", "empty", "0"]);
    let r: Vec<Value> = q(&mut c, &["EXEC"]);
    assert_eq!(r, vec![Value::Nil]);
}

#[test]
fn hashes_sets_sorted_sets() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"]), 2);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f1", "v9"]), 0);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "f1"]), "v9");
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "f1", "x"]), 0);
    assert_eq!(q::<Vec<Option<String>>>(&mut c, &["HMGET", "h", "f1", "no"]), vec![Some("v9".into()), None]);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "5"]), 5);
    assert_eq!(q::<String>(&mut c, &["HINCRBYFLOAT", "h", "n", "1.5"]), "6.5");
    assert!(err(&mut c, &["HINCRBY", "h", "f1", "1"]).contains("hash value is not an integer"));
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 3);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "f2"]), 2);
    let mut all: Vec<(String, String)> = q(&mut c, &["HGETALL", "h"]);
    all.sort();
    assert_eq!(all[0], ("f1".into(), "v9".into()));
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "f1", "f2", "n"]), 3);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    for i in 0..300 {
        q::<()>(&mut c, &["HSET", "big", &format!("f{i}"), "v"]);
    }
    let mut cursor = "0".to_string();
    let mut fields = std::collections::HashSet::new();
    loop {
        let (next, kv): (String, Vec<String>) = q(&mut c, &["HSCAN", "big", &cursor, "COUNT", "20"]);
        for pair in kv.chunks(2) {
            fields.insert(pair[0].clone());
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(fields.len(), 300);
    assert_eq!(q::<Vec<String>>(&mut c, &["HRANDFIELD", "big", "5"]).len(), 5);
    assert_eq!(q::<Vec<String>>(&mut c, &["HRANDFIELD", "big", "-500"]).len(), 500);

    assert_eq!(q::<i64>(&mut c, &["SADD", "s1", "a", "b", "c", "a"]), 3);
    q::<()>(&mut c, &["SADD", "s2", "b", "c", "d"]);
    let mut inter: Vec<String> = q(&mut c, &["SINTER", "s1", "s2"]);
    inter.sort();
    assert_eq!(inter, vec!["b", "c"]);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "u", "s1", "s2"]), 4);
    assert_eq!(q::<Vec<String>>(&mut c, &["SDIFF", "s1", "s2"]), vec!["a"]);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "s1", "s2", "LIMIT", "1"]), 1);
    assert_eq!(q::<Vec<i64>>(&mut c, &["SMISMEMBER", "s1", "a", "z"]), vec![1, 0]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "s1", "s2", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s2"]), 4);
    assert_eq!(q::<Vec<String>>(&mut c, &["SPOP", "u", "10"]).len(), 4);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "u"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "empty", "s1", "nothing"]), 0);

    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]), 3);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "CH", "GT", "0", "a", "5", "b"]), 1);
    assert_eq!(q::<String>(&mut c, &["ZADD", "z", "INCR", "1", "a"]), "2");
    assert!(err(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"]).contains("XX and NX options at the same time are not compatible"));
    assert!(err(&mut c, &["ZADD", "z", "x", "a"]).contains("value is not a valid float"));
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1"]), vec!["a", "c", "b"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "(2", "+inf", "BYSCORE"]), vec!["c", "b"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "0", "2"]), vec!["b", "c"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZREVRANGEBYSCORE", "z", "3", "2", "WITHSCORES"]), vec!["c", "3", "a", "2"]);
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREVRANK", "z", "b"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "2", "3"]), 2);
    assert!(err(&mut c, &["ZCOUNT", "z", "x", "3"]).contains("min or max is not a float"));
    assert_eq!(q::<String>(&mut c, &["ZINCRBY", "z", "0.5", "c"]), "3.5");
    assert_eq!(q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", "z", "c", "zz"]), vec![Some("3.5".into()), None]);
    q::<()>(&mut c, &["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGEBYLEX", "lex", "[b", "(d"]), vec!["b", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "lex", "-", "+"]), 4);
    assert!(err(&mut c, &["ZRANGEBYLEX", "lex", "b", "d"]).contains("min or max not valid string range item"));
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "lex", "[a", "[b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "zu", "2", "z", "lex", "WEIGHTS", "2", "1"]), 4);
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "zu", "b"]), "10");
    assert_eq!(q::<i64>(&mut c, &["ZINTERSTORE", "zi", "2", "z", "zu", "AGGREGATE", "MAX"]), 3);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZDIFF", "2", "zu", "z"]), vec!["d"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZPOPMIN", "z"]), vec!["a", "2"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZPOPMAX", "z", "1"]), vec!["b", "5"]);
    let (k, items): (String, Vec<(String, f64)>) = q(&mut c, &["ZMPOP", "1", "zu", "MIN", "COUNT", "2"]);
    assert_eq!(k, "zu");
    assert_eq!(items.len(), 2);
    let r: (String, String, String) = q(&mut c, &["BZPOPMIN", "none", "z", "1"]);
    assert_eq!(r, ("z".into(), "c".into(), "3.5".into()));
    assert_eq!(q::<Value>(&mut c, &["BZPOPMAX", "none", "0.1"]), Value::Nil);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "zu", "-5"]).len(), 5);
}

#[test]
fn transactions_and_watch() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    let mut other = e.client();
    let r: (String, i64) = redis::pipe().atomic().cmd("SET").arg("a").arg("1").cmd("INCR").arg("a").query(&mut c).unwrap();
    assert_eq!(r, ("OK".to_string(), 2));
    let mut raw = e.raw();
    raw.send(b"MULTI\r\nSET t 1\r\nINCR t\r\nLPUSH t x\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n:2\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    raw.send(b"MULTI\r\nSET t 1\r\nNOSUCHCMD\r\nEXEC\r\n");
    raw.expect(
        b"+OK\r\n+QUEUED\r\n-ERR unknown command 'NOSUCHCMD', with args beginning with: \r\n-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    raw.send(b"MULTI\r\nGET t\r\nGET t x\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n-ERR wrong number of arguments for 'get' command\r\n-EXECABORT Transaction discarded because of previous errors.\r\n");
    raw.send(b"EXEC\r\nDISCARD\r\nMULTI\r\nMULTI\r\nWATCH x\r\nDISCARD\r\n");
    raw.expect(b"-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n+OK\r\n-ERR MULTI calls can not be nested\r\n-ERR WATCH inside MULTI is not allowed\r\n+OK\r\n");

    // WATCH: a write by another client aborts EXEC (nil reply).
    raw.send(b"WATCH w\r\n");
    raw.expect(b"+OK\r\n");
    q::<()>(&mut other, &["SET", "w", "changed"]);
    raw.send(b"MULTI\r\nSET w mine\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n*-1\r\n");
    assert_eq!(q::<String>(&mut other, &["GET", "w"]), "changed");
    // An untouched watch lets EXEC through.
    raw.send(b"WATCH w\r\nMULTI\r\nSET w mine\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n");
    // Deleting, flushing or expiring the key breaks the watch too.
    for breaker in [&["DEL", "w"][..], &["FLUSHDB"][..]] {
        q::<()>(&mut other, &["SET", "w", "x"]);
        raw.send(b"WATCH w\r\n");
        raw.expect(b"+OK\r\n");
        q::<()>(&mut other, breaker);
        raw.send(b"MULTI\r\nPING\r\nEXEC\r\n");
        raw.expect(b"+OK\r\n+QUEUED\r\n*-1\r\n");
    }
    q::<()>(&mut other, &["SET", "w", "x", "PX", "100"]);
    raw.send(b"WATCH w\r\n");
    raw.expect(b"+OK\r\n");
    thread::sleep(Duration::from_millis(200));
    raw.send(b"MULTI\r\nPING\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n*-1\r\n");
    // UNWATCH clears it.
    raw.send(b"WATCH w\r\nUNWATCH\r\n");
    raw.expect(b"+OK\r\n+OK\r\n");
    q::<()>(&mut other, &["SET", "w", "y"]);
    raw.send(b"MULTI\r\nPING\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n");
}

#[test]
fn server_commands() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["PING", "hi"]), "hi");
    assert_eq!(q::<String>(&mut c, &["ECHO", "x"]), "x");
    let info: String = q(&mut c, &["INFO"]);
    for field in [
        "redis_version:7.0",
        "terrace_version:",
        "used_memory:",
        "used_memory_rss:",
        "maxmemory_policy:noeviction",
        "connected_clients:",
        "keyspace_hits:",
        "cluster_enabled:0",
    ] {
        assert!(info.contains(field), "INFO lacks {field}");
    }
    let used: u64 = info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap();
    assert!(used > 0, "the counting allocator is installed");
    q::<()>(&mut c, &["SET", "x", "1"]);
    q::<()>(&mut c, &["GET", "x"]);
    let stats: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_get:calls=1"), "{stats}");
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    let stats: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(!stats.contains("cmdstat_get"), "{stats}");
    let cfg: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory*"]);
    assert!(cfg.contains(&"maxmemory-policy".to_string()));
    assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", "maxmemory", "100mb"]), "OK");
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "maxmemory"]), vec!["maxmemory", "104857600"]);
    assert!(err(&mut c, &["CONFIG", "SET", "nosuch", "1"]).contains("Unknown option or number of arguments for CONFIG SET - 'nosuch'"));
    let (secs, micros): (String, String) = q(&mut c, &["TIME"]);
    assert!(secs.parse::<u64>().unwrap() > 1_700_000_000 && micros.parse::<u64>().unwrap() < 1_000_000);
    // SWAPDB, FLUSHALL.
    q::<()>(&mut c, &["SET", "in0", "v"]);
    q::<()>(&mut c, &["SWAPDB", "0", "1"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "in0"]), 0);
    q::<()>(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "in0"]), 1);
    q::<()>(&mut c, &["FLUSHALL", "ASYNC"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    // CLIENT.
    let id: i64 = q(&mut c, &["CLIENT", "ID"]);
    q::<()>(&mut c, &["CLIENT", "SETNAME", "tester"]);
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]), "tester");
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert!(list.contains(&format!("id={id} ")) && list.contains("name=tester"), "{list}");
    assert!(err(&mut c, &["CLIENT", "SETNAME", "a b"]).contains("Client names cannot contain spaces"));
    let mut victim = e.raw();
    assert_eq!(victim.cmd(&["PING"]), "+PONG\r\n");
    let vid: i64 = victim.cmd(&["CLIENT", "ID"]).trim().trim_start_matches(':').parse().unwrap();
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "KILL", "ID", &vid.to_string()]), 1);
    assert!(victim.is_closed());
    // COMMAND introspection.
    let n: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    assert!(n > 150);
    let info: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "get", "nosuch"]);
    assert_eq!(info.len(), 2);
    assert_eq!(info[1], Value::Nil);
    assert_eq!(q::<Vec<String>>(&mut c, &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]), vec!["a", "b"]);
    let docs: Value = q(&mut c, &["COMMAND", "DOCS", "set"]);
    assert!(format!("{docs:?}").contains("summary"));
    assert!(err(&mut c, &["NOSUCH", "a"]).contains("unknown command 'NOSUCH', with args beginning with: 'a'"));
    assert!(err(&mut c, &["GET"]).contains("wrong number of arguments for 'get' command"));
    // RESET.
    let mut raw = e.raw();
    assert_eq!(raw.cmd(&["SELECT", "2"]), "+OK\r\n");
    assert_eq!(raw.cmd(&["RESET"]), "+RESET\r\n");
    assert!(raw.cmd(&["CLIENT", "INFO"]).contains("db=0"));
    assert!(raw.cmd(&["DEBUG", "SLEEP", "0"]).starts_with("-ERR DEBUG command not allowed."), "DEBUG is off by default");
}

#[test]
fn enable_debug_command_decides_who_may_run_debug() {
    let off = Engine::start(&[]);
    let mut c = off.client();
    assert!(err(&mut c, &["DEBUG", "SLEEP", "0"]).contains("If the enable-debug-command option is set to \"local\", you can run it from a local connection"));
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "enable-debug-command"]), vec!["enable-debug-command", "no"]);
    assert!(err(&mut c, &["CONFIG", "SET", "enable-debug-command", "yes"]).contains("can't set immutable config"));
    // Queued in MULTI, it aborts the transaction as Redis's other refusals do.
    let _: () = q(&mut c, &["MULTI"]);
    assert!(err(&mut c, &["DEBUG", "SLEEP", "0"]).contains("DEBUG command not allowed"));
    let exec = err(&mut c, &["EXEC"]);
    assert!(exec.contains("EXECABORT") || exec.contains("ExecAbort"), "{exec}");
    // This test connects over loopback: "local" lets it run.
    let local = Engine::start(&["--enable-debug-command", "local"]);
    let mut c = local.client();
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SLEEP", "0"]), "OK");
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "enable-debug-command"]), vec!["enable-debug-command", "local"]);
}

#[test]
fn resp3_reply_types() {
    let e = Engine::start(&[]);
    let mut raw = e.raw();
    let hello = raw.cmd(&["HELLO", "3"]);
    assert!(hello.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"), "{hello}");
    assert!(hello.contains("$5\r\nproto\r\n:3\r\n"));
    raw.cmd(&["HSET", "h", "f", "v"]);
    assert_eq!(raw.cmd(&["HGETALL", "h"]), "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    raw.cmd(&["SADD", "s", "m"]);
    assert_eq!(raw.cmd(&["SMEMBERS", "s"]), "~1\r\n$1\r\nm\r\n");
    raw.cmd(&["ZADD", "z", "1.5", "m"]);
    assert_eq!(raw.cmd(&["ZSCORE", "z", "m"]), ",1.5\r\n");
    assert_eq!(raw.cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]), "*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n");
    assert_eq!(raw.cmd(&["GET", "nope"]), "_\r\n");
    assert_eq!(raw.cmd(&["CONFIG", "GET", "maxmemory"]), "%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n");
    assert!(raw.cmd(&["INFO", "server"]).starts_with("="));
    assert_eq!(raw.cmd(&["HELLO", "4"]), "-NOPROTO unsupported protocol version\r\n");
    assert!(raw.cmd(&["HELLO", "2"]).starts_with("*14\r\n"));
    assert_eq!(raw.cmd(&["GET", "nope"]), "$-1\r\n");
    // The redis crate speaks RESP3 too.
    let mut c = redis::Client::open(format!("{}?protocol=resp3", e.url())).unwrap().get_connection().unwrap();
    let v: Value = q(&mut c, &["HGETALL", "h"]);
    assert!(matches!(v, Value::Map(_)), "{v:?}");
}

#[test]
fn pipelining_partial_frames_and_inline() {
    let e = Engine::start(&[]);
    let mut raw = e.raw();
    // 1000 pipelined commands in one write.
    let mut batch = Vec::new();
    for i in 0..1000 {
        batch.extend(encode(&["INCR", "ctr"]));
        let _ = i;
    }
    raw.send(&batch);
    let mut expected = Vec::new();
    for i in 1..=1000 {
        expected.extend(format!(":{i}\r\n").into_bytes());
    }
    raw.expect(&expected);
    // A frame delivered one byte at a time.
    let frame = encode(&["SET", "slow", "value with\r\nnewline"]);
    for b in &frame {
        raw.send(&[*b]);
        thread::sleep(Duration::from_millis(1));
    }
    raw.expect(b"+OK\r\n");
    assert_eq!(raw.cmd(&["GET", "slow"]), "$19\r\nvalue with\r\nnewline\r\n");
    // Inline commands, as telnet sends them, with quoting.
    raw.send(b"SET inl \"hello world\"\r\nGET inl\nPING\r\n\r\n");
    raw.expect(b"+OK\r\n$11\r\nhello world\r\n+PONG\r\n");
}

#[test]
fn malformed_input_gets_protocol_errors_and_close() {
    let e = Engine::start(&[]);
    let cases: [(&[u8], &str); 5] = [
        (b"*2\r\n$3\r\nGET\r\n+x\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"),
        (b"*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n$-3\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$600000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (b"SET a \"unbalanced\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"),
    ];
    for (input, reply) in cases {
        let mut raw = e.raw();
        raw.send(input);
        assert_eq!(raw.read_available(), reply);
        assert!(raw.is_closed(), "connection closed after {reply}");
    }
    let mut raw = e.raw();
    raw.send(&vec![b'x'; 70 * 1024]);
    assert_eq!(raw.read_available(), "-ERR Protocol error: too big inline request\r\n");
    // The server is still fine.
    let mut c = e.client();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn flushall_and_memory_purge_return_memory_to_the_system() {
    // The allocator keeps freed pages for reuse; a cache that dropped its data must not stay
    // at its peak resident size (Redis's jemalloc gives them back too).
    let e = Engine::start(&[]);
    let mut c = e.client();
    let rss = |c: &mut redis::Connection| info_field(c, "memory", "used_memory_rss");
    let base = rss(&mut c);
    let value = "v".repeat(2000);
    let fill = |c: &mut redis::Connection| {
        for chunk in 0..50 {
            let mut p = redis::pipe();
            for i in 0..1000 {
                p.cmd("SET").arg(format!("k{chunk}:{i}")).arg(&value).ignore();
            }
            p.query::<()>(c).unwrap();
        }
    };
    fill(&mut c);
    let full = rss(&mut c);
    assert!(full > base + 80_000_000, "100 MB of values: RSS {base} -> {full}");
    assert_eq!(q::<String>(&mut c, &["FLUSHALL"]), "OK");
    let flushed = rss(&mut c);
    assert!(flushed < base + 30_000_000, "RSS {full} at the peak, still {flushed} after FLUSHALL (base {base})");
    // Deleted one by one, the memory comes back on MEMORY PURGE.
    fill(&mut c);
    for chunk in 0..50 {
        let mut p = redis::pipe();
        for i in 0..1000 {
            p.cmd("DEL").arg(format!("k{chunk}:{i}")).ignore();
        }
        p.query::<()>(&mut c).unwrap();
    }
    assert_eq!(q::<String>(&mut c, &["MEMORY", "PURGE"]), "OK");
    let purged = rss(&mut c);
    assert!(purged < base + 30_000_000, "RSS still {purged} after DEL and MEMORY PURGE (base {base})");
}

#[test]
fn eviction_under_maxmemory() {
    let e = Engine::start(&["--maxmemory", "8mb", "--maxmemory-policy", "allkeys-lru"]);
    let mut c = e.client();
    let value = "v".repeat(1000);
    for i in 0..20_000 {
        let mut p = redis::pipe();
        p.cmd("SET").arg(format!("k{i}")).arg(&value).ignore();
        p.query::<()>(&mut c).unwrap();
    }
    let info: String = q(&mut c, &["INFO"]);
    let field = |name: &str| -> u64 { info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap().trim().parse().unwrap() };
    assert!(field("evicted_keys") > 5_000, "{info}");
    assert!(field("used_memory") <= 8 * 1024 * 1024 + 64 * 1024, "used {}", field("used_memory"));
    let n: u64 = q(&mut c, &["DBSIZE"]);
    assert!(n > 1000 && n < 20_000, "dbsize {n}");
    // Recently written keys survive LRU eviction.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k19999"]), 1);
    // noeviction refuses writes with Redis's OOM error, reads still work.
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let mut raw = e.raw();
    let mut saw_oom = false;
    for i in 0..2000 {
        let r = raw.cmd(&["SET", &format!("more{i}"), &value]);
        if r.starts_with("-OOM") {
            assert_eq!(r, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
            saw_oom = true;
            break;
        }
    }
    assert!(saw_oom);
    assert_eq!(raw.cmd(&["EXISTS", "k19999"]), ":1\r\n");
    // volatile-ttl evicts only keys with a TTL: nothing to evict here.
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]);
    assert!(raw.cmd(&["SET", "x", &value]).starts_with("-OOM"));
}

/// Lowering `maxmemory` evicts at once, as in Redis — also inside EXEC, which holds every
/// shard (eviction waits for the transaction's locks to go), and CONFIG SET inside EXEC that
/// turns keyspace notifications off does not wait on them either (it hung the engine).
#[test]
fn config_set_inside_exec_never_waits_on_the_transactions_own_locks() {
    let e = Engine::start(&["--maxmemory-policy", "allkeys-random"]);
    let mut c = e.client();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let fill = |c: &mut redis::Connection| {
        let mut p = redis::pipe();
        for i in 0..3000 {
            p.cmd("SET").arg(format!("k{i}")).arg("v".repeat(500)).ignore();
        }
        p.query::<()>(c).unwrap();
    };
    fill(&mut c);
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), 0, "CONFIG SET maxmemory evicts before it answers");
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    fill(&mut c);
    let (set, size): (String, u64) = redis::pipe().atomic().cmd("CONFIG").arg("SET").arg("maxmemory").arg("1").cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(set, "OK");
    assert_eq!(size, 3000, "inside the transaction nothing is evicted yet");
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), 0, "once EXEC has released its locks, eviction ran");
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    for flags in ["KEA", ""] {
        let (set,): (String,) = redis::pipe().atomic().cmd("CONFIG").arg("SET").arg("notify-keyspace-events").arg(flags).query(&mut c).unwrap();
        assert_eq!(set, "OK");
    }
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn a_thousand_concurrent_clients() {
    let e = Engine::start(&[]);
    let mut conns: Vec<common::Raw> = (0..1000).map(|_| e.raw()).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(&encode(&["SET", &format!("c{i}"), &i.to_string()]));
    }
    for c in conns.iter_mut() {
        c.expect(b"+OK\r\n");
    }
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(&encode(&["GET", &format!("c{i}")]));
        let v = i.to_string();
        c.expect(format!("${}\r\n{}\r\n", v.len(), v).as_bytes());
    }
    let mut admin = e.client();
    let info: String = q(&mut admin, &["INFO", "clients"]);
    assert!(info.contains("connected_clients:1001"), "{info}");
}

#[test]
fn multiple_reactor_threads_share_the_keyspace() {
    let e = Engine::start(&["--threads", "2"]);
    let url = e.url();
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let url = url.clone();
            thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..500 {
                    let _: i64 = cmd("INCR").arg("shared").query(&mut c).unwrap();
                    let _: i64 = cmd("RPUSH").arg("list").arg(t).query(&mut c).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut c = e.client();
    assert_eq!(q::<i64>(&mut c, &["GET", "shared"]), 2000);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "list"]), 2000);
}

#[test]
fn configuration_sources_and_errors() {
    // Flag > env > file.
    let dir = std::env::temp_dir().join(format!("terrace-e2e-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("terrace.toml");
    std::fs::write(&file, "[engine]\nmaxmemory = \"10mb\"\nmaxmemory_policy = \"allkeys-random\"\n").unwrap();
    let e = Engine::start_with_env(&["--config", file.to_str().unwrap()], &[("TERRACE_MAXMEMORY_POLICY", "volatile-lru")]);
    let mut c = e.client();
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "maxmemory"]), vec!["maxmemory", "10485760"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "maxmemory-policy"]), vec!["maxmemory-policy", "volatile-lru"]);
    drop(e);
    // Bad values exit non-zero with a message naming the key.
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_terrace")).args(["engine", "--port", "0", "--maxmemory-policy", "sometimes"]).output().unwrap();
    assert!(!bad.status.success());
    let msg = String::from_utf8_lossy(&bad.stderr);
    assert!(msg.contains("maxmemory_policy") && msg.contains("sometimes"), "{msg}");
    std::fs::write(&file, "[engine]\nmaxmemroy = 1\n").unwrap();
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_terrace")).args(["engine", "--port", "0", "--config", file.to_str().unwrap()]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("maxmemroy"));
}

/// `requirepass_file`: clients must AUTH with the secret in it; a file others may read is
/// refused at start, naming the key.
#[test]
fn requirepass_file_makes_clients_authenticate() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::temp_dir("requirepass");
    let secret = dir.join("engine.secret");
    std::fs::write(&secret, "s3cret-from-a-file\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_terrace")).args(["engine", "--port", "0", "--requirepass-file"]).arg(&secret).output().unwrap();
    assert!(!bad.status.success());
    let msg = String::from_utf8_lossy(&bad.stderr);
    assert!(msg.contains("requirepass_file") && msg.contains("chmod 600"), "{msg}");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = Engine::start(&["--requirepass-file", secret.to_str().unwrap()]);
    let mut raw = e.raw();
    raw.send(&encode(&["GET", "k"]));
    raw.expect(b"-NOAUTH Authentication required.\r\n");
    raw.send(&encode(&["AUTH", "wrong"]));
    raw.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    raw.send(&encode(&["AUTH", "s3cret-from-a-file"]));
    raw.send(&encode(&["GET", "k"]));
    raw.expect(b"+OK\r\n$-1\r\n");
    drop(e);
    // While a script holds the reactor, the clients waiting on it are answered at the socket:
    // one that has not authenticated gets NOAUTH there too (it could stop the server).
    let e = Engine::start(&["--threads", "1", "--requirepass-file", secret.to_str().unwrap()]);
    let mut admin = e.raw();
    admin.send(&encode(&["AUTH", "s3cret-from-a-file"]));
    admin.send(&encode(&["CONFIG", "SET", "busy-reply-threshold", "100"]));
    admin.expect(b"+OK\r\n+OK\r\n");
    let mut stranger = e.raw();
    stranger.send(&encode(&["PING"]));
    stranger.expect(b"-NOAUTH Authentication required.\r\n");
    let mut runner = e.raw();
    runner.send(&encode(&["AUTH", "s3cret-from-a-file"]));
    runner.expect(b"+OK\r\n");
    runner.send(&encode(&["EVAL", "while true do end", "0"]));
    std::thread::sleep(Duration::from_millis(500));
    stranger.send(&encode(&["SHUTDOWN", "NOSAVE"]));
    stranger.expect(b"-NOAUTH Authentication required.\r\n");
    admin.send(&encode(&["SCRIPT", "KILL"]));
    admin.expect(b"+OK\r\n");
    assert!(runner.read_available().contains("killed"));
    admin.send(&encode(&["PING"]));
    admin.expect(b"+PONG\r\n");
}

#[test]
fn sigterm_and_shutdown_stop_cleanly() {
    let mut e = Engine::start(&[]);
    let pid = e.child.id() as i32;
    send_signal(pid, 15);
    let status = wait_exit(&mut e.child);
    assert!(status.success(), "{status:?}");
    let mut e = Engine::start(&[]);
    let mut raw = e.raw();
    raw.send(&encode(&["SHUTDOWN", "NOSAVE"]));
    assert!(raw.is_closed());
    assert!(wait_exit(&mut e.child).success());
}

fn send_signal(pid: i32, sig: i32) {
    std::process::Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().unwrap();
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "process did not exit");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn pipelined_commands_are_counted_before_a_later_command_and_before_their_replies() {
    // A connection adds up a run of the same command and publishes it in one go: INFO later
    // in the same pipeline, and any connection once the replies are out, must see it all.
    let e = Engine::start(&[]);
    let mut raw = e.raw();
    raw.send(b"SET a 1\r\nGET a\r\nGET a\r\nGET nope\r\nGET a\r\nINFO stats\r\nINFO commandstats\r\n");
    let r = raw.read_available();
    assert!(r.contains("keyspace_hits:3\r\n") && r.contains("keyspace_misses:1\r\n"), "{r}");
    assert!(r.contains("cmdstat_get:calls=4,") && r.contains("cmdstat_set:calls=1,"), "{r}");
    // The first INFO ran before the second: it is counted in the second's reply.
    assert!(r.contains("cmdstat_info:calls=1,"), "{r}");
    raw.send(b"GET a\r\nGET a\r\n");
    raw.expect(b"$1\r\n1\r\n$1\r\n1\r\n");
    let mut other = e.client();
    let stats: String = q(&mut other, &["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_get:calls=6,"), "{stats}");
    let stats: String = q(&mut other, &["INFO", "stats"]);
    assert!(stats.contains("keyspace_hits:5\r\n"), "{stats}");
    // Commands without replies (CLIENT REPLY OFF) are counted all the same.
    raw.send(b"CLIENT REPLY OFF\r\nGET nope\r\nGET nope\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let stats: String = q(&mut other, &["INFO", "stats"]);
        if stats.contains("keyspace_misses:3\r\n") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the unreplied GETs were never counted: {stats}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn statistics_inside_transactions_and_memory_stats() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    q::<()>(&mut c, &["SET", "k", "v"]);
    // These read every shard; inside EXEC the command already holds every lock.
    let mut raw = e.raw();
    raw.send(b"MULTI\r\nINFO keyspace\r\nMEMORY STATS\r\nDBSIZE\r\nEXEC\r\n");
    let r = raw.read_available();
    assert!(r.contains("db0:keys=1,expires=0"), "{r}");
    assert!(r.contains("keys.count") && r.ends_with(":1\r\n"), "{r}");
    // Commands that release WATCHes or touch every database, queued and run under EXEC's locks.
    raw.send(b"WATCH a b\r\nMULTI\r\nUNWATCH\r\nSWAPDB 0 1\r\nSWAPDB 0 1\r\nFLUSHALL\r\nEXEC\r\nPING\r\n");
    raw.expect(b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+PONG\r\n");
    q::<()>(&mut c, &["SET", "k", "v"]);
    let stats: Value = q(&mut c, &["MEMORY", "STATS"]);
    assert!(format!("{stats:?}").contains("db.0"));
    assert!(q::<i64>(&mut c, &["MEMORY", "USAGE", "k"]) > 0);
}

#[test]
fn bitmaps_hyperloglog_sort_dump_restore() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", "7"]), 1);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "b"]), vec![1u8]);
    q::<()>(&mut c, &["SET", "s", "foobar"]);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "s"]), 26);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "s", "1", "1"]), 6);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "s", "5", "30", "BIT"]), 17);
    q::<()>(&mut c, &["SET", "p", "\u{0}\u{ff}\u{f0}"]);
    q::<()>(&mut c, &["SET", "ones", "\u{7f}"]);
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "ones", "0"]), 0);
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", "dst", "ones"]), 1);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "dst"]), vec![0x80u8]);
    assert!(err(&mut c, &["BITOP", "NOT", "dst", "a", "b"]).contains("BITOP NOT must be called with a single source key"));
    assert_eq!(q::<Vec<i64>>(&mut c, &["BITFIELD", "bf", "SET", "i8", "0", "-100", "GET", "i8", "0", "INCRBY", "u4", "#2", "17"]), vec![0, -100, 1]);
    assert_eq!(q::<Vec<Option<i64>>>(&mut c, &["BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u4", "#2", "100"]), vec![None]);
    assert!(err(&mut c, &["BITFIELD_RO", "bf", "SET", "i8", "0", "1"]).contains("BITFIELD_RO only supports the GET subcommand"));

    assert_eq!(q::<i64>(&mut c, &["PFADD", "hll", "a", "b", "c"]), 1);
    assert_eq!(q::<i64>(&mut c, &["PFADD", "hll", "a"]), 0);
    q::<()>(&mut c, &["PFADD", "hll2", "c", "d"]);
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "hll", "hll2"]), 4);
    assert_eq!(q::<String>(&mut c, &["PFMERGE", "hll3", "hll", "hll2"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "hll3"]), 4);
    assert!(err(&mut c, &["PFCOUNT", "s"]).contains("Key is not a valid HyperLogLog string value"));

    q::<()>(&mut c, &["RPUSH", "ids", "3", "1", "2"]);
    q::<()>(&mut c, &["MSET", "w_1", "30", "w_2", "10", "w_3", "20", "name_1", "one", "name_2", "two", "name_3", "three"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["SORT", "ids"]), vec!["1", "2", "3"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["SORT", "ids", "BY", "w_*", "GET", "name_*", "GET", "#"]), vec!["two", "2", "three", "3", "one", "1"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["SORT", "ids", "DESC", "LIMIT", "0", "2"]), vec!["3", "2"]);
    assert_eq!(q::<i64>(&mut c, &["SORT", "ids", "ALPHA", "STORE", "sorted"]), 3);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "sorted", "0", "-1"]), vec!["1", "2", "3"]);
    q::<()>(&mut c, &["RPUSH", "words", "b", "a"]);
    assert!(err(&mut c, &["SORT", "words"]).contains("One or more scores can't be converted into double"));

    q::<()>(&mut c, &["ZADD", "z", "1.5", "m", "2", "n"]);
    let payload: Vec<u8> = q(&mut c, &["DUMP", "z"]);
    let mut restore = cmd("RESTORE");
    restore.arg("z2").arg(0).arg(&payload);
    assert_eq!(restore.query::<String>(&mut c).unwrap(), "OK");
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z2", "0", "-1", "WITHSCORES"]), vec!["m", "1.5", "n", "2"]);
    let busy = restore.query::<String>(&mut c).unwrap_err().to_string();
    assert!(busy.contains("Target key name already exists"), "{busy}");
    let mut corrupt = payload.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xFF;
    let bad = cmd("RESTORE").arg("z3").arg(0).arg(&corrupt).query::<String>(&mut c).unwrap_err().to_string();
    assert!(bad.contains("DUMP payload version or checksum are wrong"), "{bad}");
    let with_ttl: String = cmd("RESTORE").arg("z4").arg(5000).arg(&payload).query(&mut c).unwrap();
    assert_eq!(with_ttl, "OK");
    assert!(q::<i64>(&mut c, &["PTTL", "z4"]) > 4000);
}

#[test]
fn slowlog_and_client_controls() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    q::<()>(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    q::<()>(&mut c, &["SLOWLOG", "RESET"]);
    q::<()>(&mut c, &["GET", "slowkey"]);
    let log: Vec<Value> = q(&mut c, &["SLOWLOG", "GET"]);
    assert!(format!("{log:?}").contains("slowkey"), "{log:?}");
    assert!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]) >= 2);
    // CLIENT UNBLOCK wakes a blocked client with a timeout reply or an error.
    let url = e.url();
    let blocked = thread::spawn(move || {
        let mut b = redis::Client::open(url).unwrap().get_connection().unwrap();
        let id: i64 = cmd("CLIENT").arg("ID").query(&mut b).unwrap();
        let _ = id;
        cmd("BLPOP").arg("never").arg("0").query::<Value>(&mut b)
    });
    let mut target = None;
    for _ in 0..100 {
        let list: String = q(&mut c, &["CLIENT", "LIST"]);
        if let Some(line) = list.lines().find(|l| l.contains("flags=b")) {
            target = line.split_whitespace().next().map(|f| f.trim_start_matches("id=").to_string());
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let id = target.expect("a blocked client shows flags=b");
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id, "ERROR"]), 1);
    let r = blocked.join().unwrap();
    assert!(r.unwrap_err().to_string().contains("client unblocked via CLIENT UNBLOCK"));
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id]), 0);
    // CLIENT REPLY OFF/SKIP suppress replies.
    let mut raw = e.raw();
    raw.send(b"CLIENT REPLY OFF\r\nSET a 1\r\nCLIENT REPLY ON\r\nCLIENT REPLY SKIP\r\nGET a\r\nGET a\r\n");
    raw.expect(b"+OK\r\n$1\r\n1\r\n");
    // CLIENT PAUSE WRITE delays writes, not reads.
    q::<()>(&mut c, &["CLIENT", "PAUSE", "300", "WRITE"]);
    let start = Instant::now();
    assert_eq!(raw.cmd(&["GET", "a"]), "$1\r\n1\r\n");
    assert!(start.elapsed() < Duration::from_millis(250));
    assert_eq!(raw.cmd(&["SET", "a", "2"]), "+OK\r\n");
    assert!(start.elapsed() >= Duration::from_millis(250), "write waited for the pause");
    q::<()>(&mut c, &["CLIENT", "PAUSE", "300"]);
    assert_eq!(q::<String>(&mut c, &["CLIENT", "UNPAUSE"]), "OK");
    assert_eq!(raw.cmd(&["SET", "a", "3"]), "+OK\r\n");
}

#[test]
fn geo_commands() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    assert_eq!(q::<i64>(&mut c, &["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"]), 2);
    // Same score as Redis stores.
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "Sicily", "Palermo"]), "3479099956230698");
    assert_eq!(q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania"]), "166274.1516");
    assert_eq!(q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", "km"]), "166.2742");
    assert_eq!(q::<Vec<String>>(&mut c, &["GEOHASH", "Sicily", "Palermo"]), vec!["sqc8b49rny0"]);
    let pos: Vec<Option<(f64, f64)>> = q(&mut c, &["GEOPOS", "Sicily", "Palermo", "nowhere"]);
    let (lon, lat) = pos[0].unwrap();
    assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
    assert!(pos[1].is_none());
    assert_eq!(q::<Vec<String>>(&mut c, &["GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"]), vec!["Catania", "Palermo"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "100", "100", "km"]), vec!["Palermo"]);
    assert_eq!(q::<i64>(&mut c, &["GEOSEARCHSTORE", "near", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "100", "km", "STOREDIST"]), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1"]), vec!["Catania"]);
    assert!(err(&mut c, &["GEOADD", "Sicily", "200", "100", "bad"]).contains("invalid longitude,latitude pair 200.000000,100.000000"));
}

#[test]
fn clients_a_push_wakes_run_before_the_pushers_next_command() {
    // Redis serves the clients a command woke — and those their commands woke in turn —
    // before it runs the next command: after RPUSH l1, the chain BRPOPLPUSH l1→l2 then
    // l2→l1 has completed when the pusher looks (Redis's 'Circular BRPOPLPUSH'). Two reactor
    // threads, so the three clients may run on different threads.
    let e = Engine::start(&["--threads", "2"]);
    let mut c = e.client();
    for round in 0..25 {
        let mut rd1 = e.raw();
        let mut rd2 = e.raw();
        rd1.send(&encode(&["BRPOPLPUSH", "l1", "l2", "0"]));
        common::eventually(5, "the first client blocks", || info_field(&mut c, "clients", "blocked_clients") == 1);
        rd2.send(&encode(&["BRPOPLPUSH", "l2", "l1", "0"]));
        common::eventually(5, "both clients block", || info_field(&mut c, "clients", "blocked_clients") == 2);
        q::<()>(&mut c, &["RPUSH", "l1", "a"]);
        assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l1", "0", "-1"]), vec!["a"], "round {round}");
        assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l2", "0", "-1"]), Vec::<String>::new(), "round {round}");
        rd1.expect(b"$1\r\na\r\n");
        rd2.expect(b"$1\r\na\r\n");
        q::<()>(&mut c, &["DEL", "l1"]);
    }
}

#[test]
fn blocked_client_keeps_its_deadline_across_spurious_wakeups() {
    let e = Engine::start(&[]);
    let url = e.url();
    let waiter = thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let start = Instant::now();
        let r: Value = cmd("BLPOP").arg("q").arg("1").query(&mut c).unwrap();
        (r, start.elapsed())
    });
    thread::sleep(Duration::from_millis(800));
    // Signals `q` but leaves it empty: the waiter wakes, finds nothing and waits again.
    let mut raw = e.raw();
    raw.send(b"MULTI\r\nRPUSH q x\r\nLPOP q\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n$1\r\nx\r\n");
    let (r, waited) = waiter.join().unwrap();
    assert_eq!(r, Value::Nil);
    // Timed out one second after BLPOP was sent, not one second after the wake-up at 0.8 s.
    assert!(waited >= Duration::from_millis(950) && waited < Duration::from_millis(1500), "{waited:?}");
}

#[test]
fn streams_groups_and_blocking_reads() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    let id1: String = q(&mut c, &["XADD", "s", "*", "f", "v1"]);
    let id2: String = q(&mut c, &["XADD", "s", "*", "f", "v2"]);
    assert!(id1 < id2 || id1.len() < id2.len(), "auto IDs grow: {id1} {id2}");
    assert_eq!(q::<i64>(&mut c, &["XLEN", "s"]), 2);
    assert!(err(&mut c, &["XADD", "s", "1-1", "f", "v"]).contains("equal or smaller than the target stream top item"));
    assert!(err(&mut c, &["LPUSH", "s", "x"]).contains("wrong kind of value"));
    // An emptied stream is kept (it still carries its last ID and groups).
    assert_eq!(q::<i64>(&mut c, &["XTRIM", "s", "MAXLEN", "0"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]), 1);
    assert!(err(&mut c, &["XADD", "s", &id2, "f", "again"]).contains("equal or smaller"));

    // XREAD BLOCK with `$` is woken by a later XADD and returns only that entry, even though
    // the command is re-run after the wake-up.
    let url = e.url();
    let reader = thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let v: Value = cmd("XREAD").arg("BLOCK").arg("5000").arg("STREAMS").arg("s").arg("$").query(&mut c).unwrap();
        v
    });
    thread::sleep(Duration::from_millis(200));
    q::<String>(&mut c, &["XADD", "s", "*", "f", "woke"]);
    let got = format!("{:?}", reader.join().unwrap());
    assert!(got.contains("woke") && !got.contains("v1"), "{got}");
    // A BLOCK that runs out answers nil after about its timeout.
    let start = Instant::now();
    assert_eq!(q::<Value>(&mut c, &["XREAD", "BLOCK", "150", "STREAMS", "s", "$"]), Value::Nil);
    assert!(start.elapsed() >= Duration::from_millis(130));

    // Consumer group: `>` delivers each entry once, the PEL tracks it, XACK clears it, and a
    // blocked XREADGROUP is woken by XADD.
    assert_eq!(q::<String>(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]), "OK");
    assert!(err(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]).contains("BUSYGROUP"));
    let first: Value = q(&mut c, &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"]);
    assert!(format!("{first:?}").contains("woke"));
    assert_eq!(q::<Value>(&mut c, &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]), Value::Nil);
    let pending: (i64, String, String, Vec<(String, String)>) = q(&mut c, &["XPENDING", "s", "g"]);
    assert_eq!(pending.0, 1);
    assert_eq!(pending.3, vec![("alice".to_string(), "1".to_string())]);
    let url = e.url();
    let group_reader = thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let v: Value = cmd("XREADGROUP").arg("GROUP").arg("g").arg("bob").arg("BLOCK").arg("5000").arg("STREAMS").arg("s").arg(">").query(&mut c).unwrap();
        v
    });
    thread::sleep(Duration::from_millis(200));
    let id4: String = q(&mut c, &["XADD", "s", "*", "f", "for-bob"]);
    assert!(format!("{:?}", group_reader.join().unwrap()).contains("for-bob"));
    let bob: Vec<(String, String, i64, i64)> = q(&mut c, &["XPENDING", "s", "g", "-", "+", "10", "bob"]);
    assert_eq!(bob.len(), 1);
    assert_eq!(bob[0].0, id4);
    assert_eq!(q::<i64>(&mut c, &["XACK", "s", "g", &id4]), 1);
    assert_eq!(q::<i64>(&mut c, &["XACK", "s", "g", &id4]), 0);
    // XCLAIM moves alice's entry to carol; XAUTOCLAIM gives it back.
    let (cursor, claimed, deleted): (String, Vec<String>, Vec<String>) = q(&mut c, &["XAUTOCLAIM", "s", "g", "carol", "0", "0", "JUSTID"]);
    assert_eq!((cursor.as_str(), deleted.len()), ("0-0", 0));
    assert_eq!(claimed.len(), 1);
    let back: Vec<String> = q(&mut c, &["XCLAIM", "s", "g", "alice", "0", &claimed[0], "JUSTID"]);
    assert_eq!(back, claimed);
    // The group's lag and read counter follow what was delivered.
    let groups: Vec<std::collections::HashMap<String, Value>> = q(&mut c, &["XINFO", "GROUPS", "s"]);
    assert_eq!(groups[0]["lag"], Value::Int(0));
    assert_eq!(groups[0]["entries-read"], Value::Int(4));
    // Inside MULTI a blocking read answers nil at once.
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(q::<Vec<Value>>(&mut c, &["EXEC"]), vec![Value::Nil]);
    // DUMP/RESTORE carries the entries, IDs and groups.
    let payload: Vec<u8> = q(&mut c, &["DUMP", "s"]);
    cmd("RESTORE").arg("s2").arg(0).arg(payload).query::<()>(&mut c).unwrap();
    assert_eq!(q::<Value>(&mut c, &["XRANGE", "s2", "-", "+"]), q::<Value>(&mut c, &["XRANGE", "s", "-", "+"]));
    assert_eq!(q::<Value>(&mut c, &["XINFO", "GROUPS", "s2"]), q::<Value>(&mut c, &["XINFO", "GROUPS", "s"]));
    assert_eq!(q::<Value>(&mut c, &["XPENDING", "s2", "g", "-", "+", "10"]).as_sequence().map(|v| v.len()), Some(1));
}

#[test]
fn acl_users_permissions_and_auth() {
    let e = Engine::start(&[]);
    let mut admin = e.client();
    assert_eq!(q::<String>(&mut admin, &["ACL", "WHOAMI"]), "default");
    assert_eq!(
        q::<String>(&mut admin, &["ACL", "SETUSER", "app", "on", ">s3cret", "~cache:*", "%R~ro:*", "+get", "+set", "+client|id", "+multi", "+exec"]),
        "OK"
    );
    assert!(err(&mut admin, &["ACL", "SETUSER", "app", "+nosuch"]).contains("Unknown command or category name in ACL"));
    let line: Vec<String> = q(&mut admin, &["ACL", "LIST"]);
    assert!(
        line.iter().any(|l| l.starts_with("user app on #") && l.ends_with("~cache:* %R~ro:* resetchannels -@all +get +set +client|id +multi +exec")),
        "{line:?}"
    );

    // A client authenticated as `app` may run what its rules allow, and nothing else.
    let mut app = e.client();
    assert!(err(&mut app, &["AUTH", "app", "wrong"]).contains("WRONGPASS"));
    assert_eq!(q::<String>(&mut app, &["AUTH", "app", "s3cret"]), "OK");
    assert_eq!(q::<String>(&mut app, &["SET", "cache:1", "v"]), "OK");
    assert_eq!(q::<String>(&mut app, &["GET", "cache:1"]), "v");
    assert!(q::<i64>(&mut app, &["CLIENT", "ID"]) > 0);
    assert!(err(&mut app, &["CLIENT", "KILL", "ID", "1"]).contains("no permissions to run the 'client|kill' command"));
    assert!(err(&mut app, &["HSET", "cache:2", "f", "v"]).contains("no permissions to run the 'hset' command"));
    assert!(err(&mut app, &["GET", "other"]).contains("no permissions to access one of the keys"));
    assert_eq!(q::<Value>(&mut app, &["GET", "ro:1"]), Value::Nil, "read permission on ro:*");
    assert!(err(&mut app, &["SET", "ro:1", "v"]).contains("no permissions to access one of the keys"), "no write on ro:*");
    // Denials inside MULTI abort the transaction.
    q::<()>(&mut app, &["MULTI"]);
    assert!(err(&mut app, &["GET", "other"]).contains("no permissions"));
    assert!(err(&mut app, &["EXEC"]).contains("discarded because of previous errors"));

    // Each denial and the failed AUTH are in the ACL log, newest first.
    let log: Vec<std::collections::HashMap<String, Value>> = q(&mut admin, &["ACL", "LOG"]);
    let reasons: Vec<String> = log.iter().map(|e| redis::from_redis_value(e["reason"].clone()).unwrap()).collect();
    assert_eq!(reasons, vec!["key", "key", "key", "command", "command", "auth"], "{log:?}");
    assert_eq!(q::<String>(&mut admin, &["ACL", "DRYRUN", "app", "get", "cache:9"]), "OK");
    assert!(q::<String>(&mut admin, &["ACL", "DRYRUN", "app", "hset", "cache:9", "f", "v"]).contains("no permissions to run the 'hset' command"));

    // Deleting the user disconnects its clients.
    assert_eq!(q::<i64>(&mut admin, &["ACL", "DELUSER", "app"]), 1);
    thread::sleep(Duration::from_millis(100));
    assert!(cmd("GET").arg("cache:1").query::<Value>(&mut app).is_err(), "the deleted user's connection is closed");

    // requirepass is the default user's password: new connections must authenticate.
    assert_eq!(q::<String>(&mut admin, &["CONFIG", "SET", "requirepass", "pw"]), "OK");
    let mut fresh = e.client();
    assert!(err(&mut fresh, &["GET", "x"]).contains("Authentication required"));
    // HELLO checks every option before AUTH acts: a bad option after the right password
    // refuses the command and leaves the connection unauthenticated.
    let mut hello = e.raw();
    assert_eq!(hello.cmd(&["HELLO", "2", "AUTH", "default", "pw", "bogus"]), "-ERR Syntax error in HELLO option 'bogus'\r\n");
    assert!(hello.cmd(&["GET", "x"]).starts_with("-NOAUTH"));
    assert!(hello.cmd(&["HELLO", "2", "AUTH", "default", "pw"]).starts_with("*14\r\n"));
    assert_eq!(hello.cmd(&["GET", "x"]), "$-1\r\n");
    assert_eq!(q::<String>(&mut fresh, &["AUTH", "pw"]), "OK");
    assert_eq!(q::<Value>(&mut fresh, &["GET", "x"]), Value::Nil);
    assert_eq!(q::<String>(&mut fresh, &["CONFIG", "SET", "requirepass", ""]), "OK");
    let mut open = e.client();
    assert!(err(&mut open, &["AUTH", "pw"]).contains("without any password configured"));
}

#[test]
fn commands_run_by_exec_and_scripts_count_as_their_own_calls() {
    let e = Engine::start(&[]);
    let mut raw = e.raw();
    assert_eq!(raw.cmd(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    for c in [&["MULTI"][..], &["SET", "n", "x"], &["INCR", "n"], &["EXEC"]] {
        raw.send(&encode(c));
    }
    raw.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n-ERR value is not an integer or out of range\r\n");
    let script = "redis.call('set', 'm', '1'); return redis.pcall('incr', 'n')";
    assert_eq!(raw.cmd(&["EVAL", script, "0"]), "-ERR value is not an integer or out of range\r\n");
    let stats = raw.cmd(&["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_set:calls=2,"), "{stats}");
    let incr = stats.lines().find(|l| l.starts_with("cmdstat_incr:")).unwrap_or_else(|| panic!("{stats}"));
    assert!(incr.starts_with("cmdstat_incr:calls=2,") && incr.contains("failed_calls=2"), "{incr}");
    assert!(stats.contains("cmdstat_exec:calls=1,") && stats.contains("cmdstat_eval:calls=1,"), "{stats}");
}

#[test]
fn publish_subscribe() {
    let e = Engine::start(&[]);
    let mut publisher = e.client();
    let mut sub = e.raw();
    sub.send(&encode(&["SUBSCRIBE", "news"]));
    sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    sub.send(&encode(&["PSUBSCRIBE", "n*"]));
    sub.expect(b"*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:2\r\n");
    // One publish reaches the channel and the pattern subscription.
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "news", "hello"]), 2);
    sub.expect(b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    sub.expect(b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "other", "x"]), 0);
    let numsub: (String, i64) = q(&mut publisher, &["PUBSUB", "NUMSUB", "news"]);
    assert_eq!(numsub.1, 1);
    assert_eq!(q::<Vec<String>>(&mut publisher, &["PUBSUB", "CHANNELS"]), vec!["news"]);
    assert!(q::<String>(&mut publisher, &["CLIENT", "LIST"]).contains("flags=P db=0 sub=1 psub=1"));
    // A subscribed RESP2 client may only (un)subscribe, ping, quit or reset.
    assert!(sub.cmd(&["GET", "k"]).contains("only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET"));
    assert_eq!(sub.cmd(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    // Many messages in a burst all arrive, in order.
    for i in 0..200 {
        q::<i64>(&mut publisher, &["PUBLISH", "news", &i.to_string()]);
    }
    let mut got = String::new();
    while got.matches("message").count() < 400 {
        got.push_str(&sub.read_available());
    }
    let firsts: Vec<usize> = got.match_indices("$4\r\nnews\r\n$1\r\n0\r\n").map(|(i, _)| i).collect();
    assert_eq!(firsts.len(), 2, "message 0 once per subscription");
    assert!(got.find("\r\n$3\r\n199\r\n").unwrap() > got.find("\r\n$2\r\n99\r\n").unwrap());
    // Disconnecting drops the subscriptions.
    drop(sub);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "news", "gone"]), 0);
    assert_eq!(q::<i64>(&mut publisher, &["PUBSUB", "NUMPAT"]), 0);

    // RESP3: pushes, and other commands keep working; a client's own message comes before
    // its PUBLISH reply.
    let mut r3 = e.raw();
    r3.cmd(&["HELLO", "3"]);
    assert_eq!(r3.cmd(&["SUBSCRIBE", "me"]), ">3\r\n$9\r\nsubscribe\r\n$2\r\nme\r\n:1\r\n");
    assert_eq!(r3.cmd(&["PUBLISH", "me", "hi"]), ">3\r\n$7\r\nmessage\r\n$2\r\nme\r\n$2\r\nhi\r\n:1\r\n");
    assert_eq!(r3.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(r3.cmd(&["UNSUBSCRIBE"]), ">3\r\n$11\r\nunsubscribe\r\n$2\r\nme\r\n:0\r\n");

    // ACL channel rules apply to PUBLISH and SUBSCRIBE (PSUBSCRIBE needs the exact pattern).
    q::<()>(&mut publisher, &["ACL", "SETUSER", "pub", "on", "nopass", "+@pubsub", "&news.*"]);
    let mut limited = e.raw();
    limited.cmd(&["AUTH", "pub", "x"]);
    assert_eq!(limited.cmd(&["PUBLISH", "news.eu", "x"]), ":0\r\n");
    assert!(limited.cmd(&["PUBLISH", "sports", "x"]).starts_with("-NOPERM this user has no permissions to access one of the channels"));
    assert!(limited.cmd(&["PSUBSCRIBE", "news.e*"]).starts_with("-NOPERM"));
    assert!(limited.cmd(&["PSUBSCRIBE", "news.*"]).contains("psubscribe"));
}

#[test]
fn monitor_and_scripting() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    let mut mon = e.raw();
    assert_eq!(mon.cmd(&["MONITOR"]), "+OK\r\n");
    q::<()>(&mut c, &["SET", "a b", "x\ny"]);
    q::<()>(&mut c, &["AUTH", "default", "secret"]);
    let v: i64 = q(&mut c, &["EVAL", "return redis.call('incr', KEYS[1])", "1", "counter"]);
    assert_eq!(v, 1);
    let lines = mon.read_available();
    let set = lines.lines().find(|l| l.contains("\"SET\"")).unwrap_or_else(|| panic!("{lines}"));
    assert!(set.starts_with('+') && set.ends_with(r#"] "SET" "a b" "x\ny""#), "{set}");
    assert!(lines.contains(r#""AUTH" "(redacted)" "(redacted)""#), "{lines}");
    let eval_at = lines.find("\"EVAL\"").expect("EVAL shown");
    let lua_at = lines.find(r#"[0 lua] "incr" "counter""#).expect("script command shown");
    assert!(eval_at < lua_at);

    // Scripts: atomic read-modify-write, errors with the script line, EVALSHA after SCRIPT LOAD
    // from another connection, read-only scripts, and SCRIPT KILL of a busy loop.
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", "local v = redis.call('get', KEYS[1]) or '0'\nreturn redis.call('set', KEYS[1], v .. ARGV[1])"]);
    let mut other = e.client();
    assert_eq!(q::<String>(&mut other, &["EVALSHA", &sha, "1", "s", "x"]), "OK");
    assert_eq!(q::<String>(&mut other, &["EVALSHA", &sha.to_uppercase(), "1", "s", "y"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "0xy");
    let e1 = err(&mut c, &["EVAL", "local x = 1\nreturn redis.call('lpush', 's', 'v')", "0"]);
    assert!(e1.contains("wrong kind of value") && e1.contains("on @user_script:2."), "{e1}");
    assert!(err(&mut c, &["EVAL_RO", "return redis.call('del', 's')", "0"]).contains("Write commands are not allowed from read-only scripts"));
    assert!(err(&mut c, &["EVALSHA", "0000000000000000000000000000000000000000", "0"]).contains("No matching script"));
    // The busy threshold is Redis's lua-time-limit (busy-reply-threshold), 5 s by default.
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "busy-reply-threshold"]), vec!["busy-reply-threshold", "5000"]);
    q::<()>(&mut c, &["CONFIG", "SET", "lua-time-limit", "300"]);
    let url = e.url();
    let busy = thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        cmd("EVAL").arg("while true do end").arg(0).query::<Value>(&mut c)
    });
    // With one reactor thread, the busy script holds it: once the script is past the busy
    // threshold (300 ms here), a new connection is served by the control thread and can kill it.
    thread::sleep(Duration::from_millis(1000));
    let mut operator = e.client();
    assert!(err(&mut operator, &["GET", "s"]).contains("busy running a script"));
    assert_eq!(q::<String>(&mut operator, &["SCRIPT", "KILL"]), "OK");
    let killed = busy.join().unwrap();
    assert!(format!("{killed:?}").contains("Script killed by user"), "{killed:?}");
    assert!(err(&mut operator, &["SCRIPT", "KILL"]).contains("No scripts in execution"));
    // The server is usable afterwards, and the monitor saw the killed script's EVAL.
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "0xy");
    assert!(mon.read_available().contains("while true do end"));
}

/// Clients connected before a script turns busy share its reactor (one reactor here), yet
/// are answered as Redis answers them while busy: BUSY for commands (marking a transaction
/// being queued as failed), MULTI taken, SCRIPT KILL obeyed, FUNCTION KILL refused for an
/// EVAL — and once the script is killed they go on with their transaction state intact.
#[test]
fn clients_behind_a_busy_script_on_its_reactor_are_answered() {
    let e = Engine::start(&["--threads", "1"]);
    let mut setup = e.client();
    q::<()>(&mut setup, &["CONFIG", "SET", "busy-reply-threshold", "50"]);
    q::<()>(&mut setup, &["SET", "xx", "1"]);
    let mut waiting = e.raw();
    assert_eq!(waiting.cmd(&["PING"]), "+PONG\r\n");
    let mut runner = e.raw();
    runner.send(&common::encode(&["EVAL", "while true do end", "0"]));
    thread::sleep(Duration::from_millis(300));
    let busy = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    assert_eq!(waiting.cmd(&["PING"]), busy);
    assert_eq!(waiting.cmd(&["MULTI"]), "+OK\r\n");
    assert_eq!(waiting.cmd(&["INCR", "xx"]), busy);
    assert!(waiting.cmd(&["FUNCTION", "KILL"]).starts_with("-BUSY Redis is busy running a script. You can only call SCRIPT KILL"));
    assert_eq!(waiting.cmd(&["SCRIPT", "KILL"]), "+OK\r\n");
    let killed = runner.read_available();
    assert!(killed.contains("Script killed by user"), "{killed}");
    // The transaction began while busy, and a command of it failed: EXEC aborts it.
    assert_eq!(waiting.cmd(&["INCR", "xx"]), "+QUEUED\r\n");
    assert!(waiting.cmd(&["EXEC"]).starts_with("-EXECABORT"));
    assert_eq!(waiting.cmd(&["GET", "xx"]), "$1\r\n1\r\n");
    assert_eq!(waiting.cmd(&["PING"]), "+PONG\r\n");
}

/// CONFIG SET port moves the listener at run time (a port in use is refused, and nothing of
/// that CONFIG SET applies); connected clients stay.
#[test]
fn config_set_port_rebinds_the_listener() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    let refused = err(&mut c, &["CONFIG", "SET", "maxmemory", "10000001", "port", &taken_port]);
    assert!(refused.contains("CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port"), "{refused}");
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "maxmemory"]), vec!["maxmemory", "0"]);
    let free = common::free_port();
    q::<()>(&mut c, &["CONFIG", "SET", "port", &free.to_string()]);
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "port"]), vec!["port".to_string(), free.to_string()]);
    let mut moved = redis::Client::open(format!("redis://127.0.0.1:{free}")).unwrap().get_connection().unwrap();
    assert_eq!(q::<String>(&mut moved, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn client_side_caching_invalidations() {
    let e = Engine::start(&[]);
    let mut writer = e.client();
    q::<()>(&mut writer, &["SET", "user:1", "a"]);

    // Default mode, RESP3: keys the client read are invalidated when anyone changes them.
    let mut cache = e.raw();
    cache.cmd(&["HELLO", "3"]);
    assert_eq!(cache.cmd(&["CLIENT", "TRACKING", "ON"]), "+OK\r\n");
    assert_eq!(cache.cmd(&["GET", "user:1"]), "$1\r\na\r\n");
    q::<()>(&mut writer, &["SET", "user:1", "b"]);
    cache.expect(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\nuser:1\r\n");
    // Once invalidated, the key is forgotten until read again.
    q::<()>(&mut writer, &["SET", "user:1", "c"]);
    assert_eq!(cache.cmd(&["PING"]), "+PONG\r\n");
    // Expiry and deletion invalidate too; its own writes as well (no NOLOOP).
    cache.cmd(&["GET", "user:1"]);
    q::<()>(&mut writer, &["PEXPIRE", "user:1", "1"]);
    cache.expect(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\nuser:1\r\n");
    cache.cmd(&["GET", "own"]);
    // As in Redis 7, a client's own invalidation follows its command's reply.
    assert_eq!(cache.cmd(&["SET", "own", "1"]), "+OK\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nown\r\n");
    // FLUSHALL invalidates everything at once (a null key list).
    q::<()>(&mut writer, &["FLUSHALL"]);
    cache.expect(b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    // A key no command touches again is invalidated when the cron's active expiry removes it.
    q::<()>(&mut writer, &["SET", "exp:1", "v", "PX", "100"]);
    cache.send(&common::encode(&["GET", "exp:1"]));
    cache.expect(b"$1\r\nv\r\n");
    cache.expect(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nexp:1\r\n");

    // RESP2 with REDIRECT: invalidations arrive on the __redis__:invalidate channel of the
    // redirect target.
    let mut sink = e.raw();
    let sink_id: i64 = sink.cmd(&["CLIENT", "ID"]).trim_start_matches(':').trim().parse().unwrap();
    sink.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut reader = e.client();
    let id = sink_id.to_string();
    assert_eq!(q::<String>(&mut reader, &["CLIENT", "TRACKING", "ON", "REDIRECT", &id]), "OK");
    assert_eq!(q::<i64>(&mut reader, &["CLIENT", "GETREDIR"]), sink_id);
    q::<Value>(&mut reader, &["GET", "k2"]);
    q::<()>(&mut writer, &["SET", "k2", "v"]);
    sink.expect(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$2\r\nk2\r\n");

    // BCAST with a prefix and NOLOOP: every change under the prefix, except one's own.
    let mut bcast = e.raw();
    bcast.cmd(&["HELLO", "3"]);
    assert_eq!(bcast.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "obj:", "NOLOOP"]), "+OK\r\n");
    q::<()>(&mut writer, &["SET", "obj:7", "x"]);
    q::<()>(&mut writer, &["SET", "other", "x"]);
    bcast.expect(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nobj:7\r\n");
    assert_eq!(bcast.cmd(&["SET", "obj:8", "mine"]), "+OK\r\n");
    let info = bcast.cmd(&["CLIENT", "TRACKINGINFO"]);
    assert!(info.contains("bcast") && info.contains("noloop") && info.contains("obj:"), "{info}");
}

#[test]
fn snapshots_survive_a_restart() {
    let mut e = Engine::start(&[]);
    let mut c = e.client();
    q::<()>(&mut c, &["SET", "s", "v"]);
    q::<()>(&mut c, &["RPUSH", "l", "a", "b"]);
    q::<()>(&mut c, &["HSET", "h", "f", "1"]);
    q::<()>(&mut c, &["SADD", "set", "x"]);
    q::<()>(&mut c, &["ZADD", "z", "1.5", "m"]);
    q::<()>(&mut c, &["SET", "ttl", "v", "EX", "100"]);
    q::<()>(&mut c, &["SET", "gone", "v", "PX", "1"]);
    q::<()>(&mut c, &["SELECT", "3"]);
    q::<()>(&mut c, &["SET", "in3", "three"]);
    let before: i64 = q(&mut c, &["LASTSAVE"]);
    assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    assert!(q::<i64>(&mut c, &["LASTSAVE"]) >= before);
    assert!(e.data_dir.join("dump.rdb").exists());
    // The file is Redis's format: redis-check-rdb-compatible header and version.
    let bytes = std::fs::read(e.data_dir.join("dump.rdb")).unwrap();
    assert_eq!(&bytes[..9], b"REDIS0010");

    e.restart(&[]);
    let mut c = e.client();
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "v");
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]), vec!["a", "b"]);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "f"]), "1");
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "set", "x"]), 1);
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "m"]), "1.5");
    let ttl: i64 = q(&mut c, &["TTL", "ttl"]);
    assert!((90..=100).contains(&ttl), "{ttl}");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "gone"]), 0);
    q::<()>(&mut c, &["SELECT", "3"]);
    assert_eq!(q::<String>(&mut c, &["GET", "in3"]), "three");

    // BGSAVE runs in the background; a second one while it runs is refused or scheduled.
    q::<()>(&mut c, &["SET", "after", "bg"]);
    let r: String = q(&mut c, &["BGSAVE"]);
    assert!(r == "Background saving started", "{r}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while q::<String>(&mut c, &["INFO", "persistence"]).contains("rdb_bgsave_in_progress:1") {
        assert!(Instant::now() < deadline, "BGSAVE never finished");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(q::<String>(&mut c, &["INFO", "persistence"]).contains("rdb_last_bgsave_status:ok"));
    // Streams, with their consumer groups and pending entries, survive too.
    for i in 0..250 {
        q::<String>(&mut c, &["XADD", "events", &format!("{}-0", i + 1), "n", &i.to_string(), "kind", "a"]);
    }
    q::<String>(&mut c, &["XADD", "events", "251-0", "other", "fields"]);
    assert_eq!(q::<i64>(&mut c, &["XDEL", "events", "3-0"]), 1);
    q::<()>(&mut c, &["XGROUP", "CREATE", "events", "g", "0"]);
    q::<Value>(&mut c, &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "events", ">"]);
    let before = (q::<Value>(&mut c, &["XRANGE", "events", "-", "+"]), q::<Value>(&mut c, &["XINFO", "GROUPS", "events"]));
    // FUNCTION libraries are part of the snapshot too.
    let lib = "#!lua name=counters\nredis.register_function('bump', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)";
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib]), "counters");
    assert_eq!(q::<i64>(&mut c, &["FCALL", "bump", "1", "hits", "5"]), 5);
    assert!(err(&mut c, &["FCALL_RO", "bump", "1", "hits", "5"]).contains("write flag"));
    assert!(err(&mut c, &["FUNCTION", "LOAD", lib]).contains("already exists"));
    assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    e.restart(&[]);
    let mut c = e.client();
    q::<()>(&mut c, &["SELECT", "3"]);
    assert_eq!(q::<String>(&mut c, &["GET", "after"]), "bg");
    assert_eq!((q::<Value>(&mut c, &["XRANGE", "events", "-", "+"]), q::<Value>(&mut c, &["XINFO", "GROUPS", "events"])), before);
    let pending: (i64, String, String, Vec<(String, String)>) = q(&mut c, &["XPENDING", "events", "g"]);
    assert_eq!((pending.0, pending.3), (2, vec![("alice".to_string(), "2".to_string())]));
    assert_eq!(q::<i64>(&mut c, &["FCALL", "bump", "1", "hits", "1"]), 6);

    // A corrupt file stops the engine with an error naming it, rather than starting empty.
    std::fs::write(e.data_dir.join("dump.rdb"), b"REDIS0010garbage-garbage").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_terrace")).args(["engine", "--port", "0", "--data-dir"]).arg(&e.data_dir).output().unwrap();
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("dump.rdb") && msg.contains("not a valid RDB file"), "{msg}");
}

#[test]
fn a_blocked_pop_stays_blocked_when_its_key_changes_type() {
    let e = Engine::start(&[]);
    let mut blocked = e.raw();
    blocked.send(&encode(&["BLPOP", "list", "0"]));
    let mut c = e.client();
    common::eventually(5, "the client blocks", || info_field(&mut c, "clients", "blocked_clients") == 1);
    // LPUSH wakes it, but by EXEC's end the key is a string: Redis keeps it blocked.
    let _: () = redis::pipe().atomic().cmd("LPUSH").arg("list").arg("a").cmd("DEL").arg("list").cmd("SET").arg("list").arg("foo").query(&mut c).unwrap();
    let _: () = q(&mut c, &["DEL", "list"]);
    let _: () = q(&mut c, &["LPUSH", "list", "b"]);
    blocked.expect(b"*2\r\n$4\r\nlist\r\n$1\r\nb\r\n");
}

#[test]
fn a_woken_blmove_with_a_wrong_destination_gets_wrongtype() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    let _: () = q(&mut c, &["SET", "target", "nolist"]);
    let mut blocked = e.raw();
    blocked.send(&encode(&["BRPOPLPUSH", "blist", "target", "0"]));
    common::eventually(5, "the client blocks", || info_field(&mut c, "clients", "blocked_clients") == 1);
    let _: () = q(&mut c, &["RPUSH", "blist", "foo"]);
    blocked.expect(b"-WRONGTYPE");
}

#[test]
fn config_knows_every_redis_parameter_and_checks_values_as_redis() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    let all: Vec<String> = q(&mut c, &["CONFIG", "GET", "*"]);
    assert_eq!(all.len() / 2, 192, "the names redis-server 7.0.15's CONFIG GET * lists");
    // A parameter and its old alias share one value.
    let _: () = q(&mut c, &["CONFIG", "SET", "hash-max-ziplist-value", "32"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "hash-max-listpack-value"]), vec!["hash-max-listpack-value", "32"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "list-compress-depth", "1", "lua-time-limit", "100"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "lua-time-limit"]), vec!["lua-time-limit", "100"]);
    let refused = |c: &mut redis::Connection, args: &[&str]| err(c, args);
    assert!(refused(&mut c, &["CONFIG", "SET", "list-compress-depth", "-1"]).contains("argument must be between 0 and 2147483647 inclusive"));
    assert!(refused(&mut c, &["CONFIG", "SET", "activerehashing", "maybe"]).contains("argument must be 'yes' or 'no'"));
    assert!(refused(&mut c, &["CONFIG", "SET", "daemonize", "yes"]).contains("can't set immutable config"));
    assert!(refused(&mut c, &["CONFIG", "SET", "dir", "/"]).contains("can't set protected config"));
    assert!(refused(&mut c, &["CONFIG", "SET", "maxmemory-samples", "0"]).contains("argument must be between 1 and 2147483647 inclusive"));
    // All or nothing: the first value is not applied when the second is refused.
    assert!(refused(&mut c, &["CONFIG", "SET", "hz", "20", "save", "1 2 3"]).contains("Invalid save parameters"));
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "hz"]), vec!["hz", "10"]);
    assert!(refused(&mut c, &["CONFIG", "SET", "hz", "20", "HZ", "30"]).contains("duplicate parameter"));
    // client-output-buffer-limit changes only the classes given.
    let _: () = q(&mut c, &["CONFIG", "SET", "client-output-buffer-limit", "pubsub 64mb 16mb 30"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "client-output-buffer-limit"])[1],
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 67108864 16777216 30"
    );
}

#[test]
fn object_encoding_follows_the_configured_size_limits() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    let enc = |c: &mut redis::Connection, key: &str| q::<String>(c, &["OBJECT", "ENCODING", key]);
    let _: () = q(&mut c, &["HSET", "h", "f1", "v", "f2", "v"]);
    let _: () = q(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    let _: () = q(&mut c, &["SADD", "s", "1", "2", "3"]);
    assert_eq!((enc(&mut c, "h"), enc(&mut c, "z"), enc(&mut c, "s")), ("listpack".into(), "listpack".into(), "intset".into()));
    // Past the entry limits (the old ziplist names set the same parameters).
    let _: () = q(&mut c, &["CONFIG", "SET", "hash-max-ziplist-entries", "1", "zset-max-listpack-entries", "1", "set-max-intset-entries", "2"]);
    assert_eq!((enc(&mut c, "h"), enc(&mut c, "z"), enc(&mut c, "s")), ("hashtable".into(), "skiplist".into(), "hashtable".into()));
    let _: () = q(&mut c, &["CONFIG", "SET", "hash-max-listpack-entries", "128", "zset-max-listpack-entries", "128", "set-max-intset-entries", "512"]);
    // A value past the length limit, a set member that is not an integer.
    let _: () = q(&mut c, &["HSET", "h", "f3", &"x".repeat(65)]);
    let _: () = q(&mut c, &["ZADD", "z", "3", &"m".repeat(65)]);
    let _: () = q(&mut c, &["SADD", "s", "word"]);
    assert_eq!((enc(&mut c, "h"), enc(&mut c, "z"), enc(&mut c, "s")), ("hashtable".into(), "skiplist".into(), "hashtable".into()));
    let _: () = q(&mut c, &["SET", "n", "12345"]);
    let _: () = q(&mut c, &["SET", "short", "hello"]);
    let _: () = q(&mut c, &["SET", "long", &"y".repeat(45)]);
    assert_eq!((enc(&mut c, "n"), enc(&mut c, "short"), enc(&mut c, "long")), ("int".into(), "embstr".into(), "raw".into()));
}

/// Reads one pub/sub push from a raw RESP2 connection: its elements as text.
fn read_push(r: &mut common::Raw) -> Vec<String> {
    let mut line = Vec::new();
    let mut read_line = |r: &mut common::Raw| {
        line.clear();
        while !line.ends_with(b"\r\n") {
            line.extend(r.read_n(1));
        }
        String::from_utf8_lossy(&line[..line.len() - 2]).into_owned()
    };
    let n: usize = read_line(r)[1..].parse().unwrap();
    (0..n)
        .map(|_| {
            let head = read_line(r);
            if let Some(int) = head.strip_prefix(':') {
                return int.to_string();
            }
            let len: usize = head[1..].parse().unwrap();
            let s = String::from_utf8_lossy(&r.read_n(len + 2)[..len]).into_owned();
            s
        })
        .collect()
}

#[test]
fn keyspace_notifications_are_published_as_redis_names_them() {
    let e = Engine::start(&[]);
    let mut c = e.client();
    q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "notify-keyspace-events"])[1], "AKE");
    let mut sub = e.raw();
    sub.send(&common::encode(&["PSUBSCRIBE", "__key*__:*"]));
    assert_eq!(read_push(&mut sub), ["psubscribe", "__key*__:*", "1"]);
    let mut expect = |events: &[(&str, &str)]| {
        for (event, key) in events {
            assert_eq!(read_push(&mut sub), ["pmessage", "__key*__:*", &format!("__keyspace@0__:{key}"), event]);
            assert_eq!(read_push(&mut sub), ["pmessage", "__key*__:*", &format!("__keyevent@0__:{event}"), key]);
        }
    };
    q::<()>(&mut c, &["SET", "s", "v", "EX", "100"]);
    expect(&[("set", "s"), ("expire", "s")]);
    q::<i64>(&mut c, &["SADD", "set", "a"]);
    q::<i64>(&mut c, &["SADD", "set", "a"]); // no change: no event
    q::<i64>(&mut c, &["RPUSH", "l", "x"]);
    expect(&[("sadd", "set"), ("rpush", "l")]);
    q::<String>(&mut c, &["LPOP", "l"]);
    expect(&[("lpop", "l"), ("del", "l")]);
    q::<()>(&mut c, &["RENAME", "s", "t"]);
    expect(&[("rename_from", "s"), ("rename_to", "t")]);
    q::<i64>(&mut c, &["PEXPIRE", "t", "1"]);
    expect(&[("expire", "t")]);
    // Found expired by the background sweep.
    expect(&[("expired", "t")]);
    q::<i64>(&mut c, &["HINCRBY", "h", "f", "2"]);
    q::<i64>(&mut c, &["DEL", "h", "missing"]);
    expect(&[("hincrby", "h"), ("del", "h")]);
    // Key misses are their own class (`m`, not in `A`): a read of a missing key with it on.
    q::<()>(&mut c, &["GET", "nokey"]);
    q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEAm"]);
    q::<()>(&mut c, &["GET", "nokey"]);
    expect(&[("keymiss", "nokey")]);
    // Off again: nothing more.
    q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    q::<()>(&mut c, &["SET", "quiet", "1"]);
    assert_eq!(sub.read_available(), "");
}
