//! Data moves from redis-server 7.0 to Terrace: DUMP payloads in Redis's compact encodings
//! (listpack, quicklist, intset) RESTORE here, and a dump.rdb written by redis-server loads
//! at start — small and large collections of every type, with expiries.

mod common;

use common::{start_redis, Engine, RedisPort};
use redis::{cmd, Connection, Value};

/// Creates the same keys on a server: every type, small (compact encodings) and large.
fn populate(c: &mut Connection) {
    let big: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    cmd("SET").arg("str").arg("hello").query::<()>(c).unwrap();
    cmd("SET").arg("num").arg("12345").query::<()>(c).unwrap();
    cmd("RPUSH").arg("list:small").arg(&["a", "-7", "300000", "x"]).query::<()>(c).unwrap();
    cmd("RPUSH").arg("list:big").arg(&big).query::<()>(c).unwrap();
    cmd("SADD").arg("set:ints").arg(&["1", "-20", "70000", "5000000000"]).query::<()>(c).unwrap();
    cmd("SADD").arg("set:strs").arg(&["a", "b"]).query::<()>(c).unwrap();
    cmd("SADD").arg("set:big").arg(&big).query::<()>(c).unwrap();
    cmd("HSET").arg("hash:small").arg(&["f1", "v1", "f2", "2"]).query::<()>(c).unwrap();
    let pairs: Vec<String> = big.iter().flat_map(|m| [m.clone(), format!("v{m}")]).collect();
    cmd("HSET").arg("hash:big").arg(&pairs).query::<()>(c).unwrap();
    cmd("ZADD").arg("zset:small").arg(&["1.5", "a", "-3", "b", "100", "c"]).query::<()>(c).unwrap();
    let scored: Vec<String> = big.iter().enumerate().flat_map(|(i, m)| [format!("{}.25", i), m.clone()]).collect();
    cmd("ZADD").arg("zset:big").arg(&scored).query::<()>(c).unwrap();
    cmd("SET").arg("ttl").arg("v").arg("EX").arg("1000").query::<()>(c).unwrap();
    for i in 1..=150 {
        cmd("XADD").arg("stream").arg(format!("{i}-1")).arg("n").arg(i).arg("k").arg("v").query::<String>(c).unwrap();
    }
    cmd("XADD").arg("stream").arg("151-0").arg("different").arg("fields").query::<String>(c).unwrap();
    cmd("XDEL").arg("stream").arg("2-1").query::<i64>(c).unwrap();
    cmd("XGROUP").arg("CREATE").arg("stream").arg("g").arg("0").query::<()>(c).unwrap();
    cmd("XREADGROUP").arg("GROUP").arg("g").arg("alice").arg("COUNT").arg(3).arg("STREAMS").arg("stream").arg(">").query::<Value>(c).unwrap();
}

fn contents(c: &mut Connection) -> Vec<(String, Value)> {
    let q = |c: &mut Connection, args: &[&str]| -> Value {
        let mut k = cmd(args[0]);
        for a in &args[1..] {
            k.arg(*a);
        }
        k.query(c).unwrap()
    };
    let mut out = Vec::new();
    for key in ["str", "num"] {
        out.push((key.into(), q(c, &["GET", key])));
    }
    for key in ["list:small", "list:big"] {
        out.push((key.into(), q(c, &["LRANGE", key, "0", "-1"])));
    }
    for key in ["set:ints", "set:strs", "set:big"] {
        let mut m: Vec<String> = cmd("SMEMBERS").arg(key).query(c).unwrap();
        m.sort();
        out.push((key.into(), Value::Array(m.into_iter().map(|s| Value::BulkString(s.into_bytes())).collect())));
    }
    for key in ["hash:small", "hash:big"] {
        let mut m: Vec<(String, String)> = cmd("HGETALL").arg(key).query(c).unwrap();
        m.sort();
        out.push((key.into(), Value::Array(m.into_iter().map(|(f, v)| Value::BulkString(format!("{f}={v}").into_bytes())).collect())));
    }
    for key in ["zset:small", "zset:big"] {
        out.push((key.into(), q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])));
    }
    out.push(("stream".into(), q(c, &["XRANGE", "stream", "-", "+"])));
    out.push(("stream groups".into(), q(c, &["XINFO", "GROUPS", "stream"])));
    let pending: Vec<(String, String, i64, i64)> = cmd("XPENDING").arg("stream").arg("g").arg("-").arg("+").arg(10).query(c).unwrap();
    out.push((
        "stream pending".into(),
        Value::Array(pending.into_iter().map(|(id, who, _, n)| Value::BulkString(format!("{id} {who} {n}").into_bytes())).collect()),
    ));
    let info: Vec<Value> = cmd("XINFO").arg("STREAM").arg("stream").query(c).unwrap();
    // length, last-generated-id, max-deleted-entry-id, entries-added, recorded-first-entry-id
    let keep = ["length", "last-generated-id", "max-deleted-entry-id", "entries-added", "recorded-first-entry-id"];
    let picked: Vec<Value> = info
        .chunks(2)
        .filter(|kv| matches!(&kv[0], Value::BulkString(k) if keep.contains(&std::str::from_utf8(k).unwrap())))
        .flat_map(|kv| kv.to_vec())
        .collect();
    out.push(("stream info".into(), Value::Array(picked)));
    let ttl: i64 = cmd("TTL").arg("ttl").query(c).unwrap();
    out.push(("ttl".into(), Value::Boolean((900..=1000).contains(&ttl))));
    out
}

#[test]
fn redis_dumps_restore_into_terrace() {
    let redis = start_redis();
    let mut r = redis.client();
    populate(&mut r);
    let engine = Engine::start(&[]);
    let mut t = engine.client();
    let keys: Vec<String> = cmd("KEYS").arg("*").query(&mut r).unwrap();
    for key in &keys {
        let payload: Vec<u8> = cmd("DUMP").arg(key).query(&mut r).unwrap();
        let ttl: i64 = cmd("PTTL").arg(key).query(&mut r).unwrap();
        let ttl = if ttl < 0 { 0 } else { ttl };
        cmd("RESTORE").arg(key).arg(ttl).arg(payload).query::<()>(&mut t).unwrap_or_else(|e| panic!("RESTORE {key}: {e}"));
    }
    assert_eq!(contents(&mut t), contents(&mut r));

    // And back: Terrace's DUMPs (streams included) RESTORE into redis-server.
    let redis2 = start_redis();
    let mut r2 = redis2.client();
    for key in &keys {
        let payload: Vec<u8> = cmd("DUMP").arg(key).query(&mut t).unwrap();
        let ttl: i64 = cmd("PTTL").arg(key).query(&mut t).unwrap();
        cmd("RESTORE").arg(key).arg(ttl.max(0)).arg(payload).query::<()>(&mut r2).unwrap_or_else(|e| panic!("redis RESTORE {key}: {e}"));
    }
    assert_eq!(contents(&mut r2), contents(&mut t));
}

#[test]
fn redis_rdb_file_loads_at_start() {
    let redis = start_redis();
    let mut r = redis.client();
    populate(&mut r);
    cmd("SELECT").arg(2).query::<()>(&mut r).unwrap();
    cmd("SET").arg("in2").arg("two").query::<()>(&mut r).unwrap();
    cmd("SELECT").arg(0).query::<()>(&mut r).unwrap();
    let lib = "#!lua name=greet\nredis.register_function('hello', function(keys, args) return 'hi ' .. args[1] end)";
    cmd("FUNCTION").arg("LOAD").arg(lib).query::<String>(&mut r).unwrap();
    cmd("SAVE").query::<()>(&mut r).unwrap();
    let engine = Engine::start_in(&redis.dir, &[], &[]);
    let mut t = engine.client();
    assert_eq!(contents(&mut t), contents(&mut r));
    cmd("SELECT").arg(2).query::<()>(&mut t).unwrap();
    assert_eq!(cmd("GET").arg("in2").query::<String>(&mut t).unwrap(), "two");
    // FUNCTION libraries come along.
    assert_eq!(cmd("FCALL").arg("hello").arg(0).arg("you").query::<String>(&mut t).unwrap(), "hi you");
    // And a dump.rdb written by Terrace loads into redis-server, functions included.
    cmd("SAVE").query::<()>(&mut t).unwrap();
    let mut r2 = start_redis_in(&engine.data_dir);
    assert_eq!(cmd("FCALL").arg("hello").arg(0).arg("again").query::<String>(&mut r2.1).unwrap(), "hi again");
    cmd("SELECT").arg(0).query::<()>(&mut t).unwrap();
    assert_eq!(contents(&mut r2.1), contents(&mut t));
}

/// A redis-server started on an existing data directory (loads its dump.rdb).
fn start_redis_in(dir: &std::path::Path) -> (std::process::Child, Connection) {
    let port = common::free_port();
    let mut cmd = std::process::Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--dir"]).arg(dir);
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    common::die_with_parent(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let connection = loop {
        if let Ok(c) = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection() {
            break c;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("redis-server did not start");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (child, connection)
}
