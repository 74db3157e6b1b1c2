//! Requests for every command an engine lists (`COMMAND`, and every subcommand of `COMMAND
//! LIST`), generated from each command's arity and key positions over keys of every type,
//! plus hand-written ones for syntax generated arguments rarely reach; and a raw RESP client
//! that only needs to know a reply came. Shared by `every_command.rs` (every context on an
//! engine) and `tenant_isolation.rs` (every command as a hostile tenant through the proxy).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Why a request got no reply.
#[derive(Debug)]
pub enum NoReply {
    /// Nothing arrived within the wait.
    Timeout,
    /// The server closed the connection.
    Closed,
}

pub struct Client {
    pub port: u16,
    pub w: TcpStream,
    pub r: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let w = TcpStream::connect(("127.0.0.1", port)).expect("connect to the engine");
        w.set_nodelay(true).unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        Client { port, w, r }
    }

    pub fn reconnect(&mut self) {
        *self = Client::connect(self.port);
    }

    pub fn send(&mut self, argv: &[Vec<u8>]) {
        let mut v = format!("*{}\r\n", argv.len()).into_bytes();
        for a in argv {
            v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            v.extend_from_slice(a);
            v.extend_from_slice(b"\r\n");
        }
        // A server that closed the connection shows up in the read.
        let _ = self.w.write_all(&v);
    }

    /// Reads one whole reply (its content is not needed, only that it came).
    pub fn read(&mut self, wait: Duration) -> Result<(), NoReply> {
        self.w.set_read_timeout(Some(wait)).unwrap();
        read_reply(&mut self.r)
    }
}

pub fn read_line(r: &mut BufReader<TcpStream>) -> Result<String, NoReply> {
    let mut line = Vec::new();
    match r.read_until(b'\n', &mut line) {
        Ok(0) => Err(NoReply::Closed),
        Ok(_) if line.ends_with(b"\r\n") => {
            line.truncate(line.len() - 2);
            Ok(String::from_utf8_lossy(&line).into_owned())
        }
        Ok(_) => Err(NoReply::Closed),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Err(NoReply::Timeout),
        Err(_) => Err(NoReply::Closed),
    }
}

/// Reads one reply as far as framing needs (RESP2 and RESP3).
pub fn read_reply(r: &mut BufReader<TcpStream>) -> Result<(), NoReply> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(1);
    let n = || rest.parse::<i64>().unwrap_or_else(|_| panic!("bad length in reply line {line:?}"));
    match kind {
        "+" | "-" | ":" | "_" | "," | "#" | "(" => {}
        "$" | "!" | "=" => {
            if n() >= 0 {
                let mut body = vec![0u8; n() as usize + 2];
                r.read_exact(&mut body).map_err(|_| NoReply::Closed)?;
            }
        }
        "*" | "~" | ">" | "%" | "|" => {
            let items = if matches!(kind, "%" | "|") { 2 * n().max(0) } else { n().max(0) };
            for _ in 0..items {
                read_reply(r)?;
            }
        }
        _ => panic!("unexpected reply line {line:?}"),
    }
    Ok(())
}

/// A command as COMMAND describes it.
pub struct Described {
    /// "get", or "config|get" for a subcommand.
    pub name: String,
    pub arity: i64,
    pub blocking: bool,
    pub first: i64,
    pub last: i64,
    pub step: i64,
}

/// Keys of every type (made by `populate`) and one that does not exist.
pub const KEYS: &[&str] = &["str", "list", "hash", "set", "zset", "stream", "hll", "missing", "{str}x"];
/// Arguments that are not keys: numbers, scores, IDs, options, patterns.
pub const ARGS: &[&str] = &["1", "0", "-1", "2", "10", "a", "*", "NX", "+inf", "-", "+", "1-1", "$", ">", "(1", "[a", "0.5", "XX", "COUNT", "abc"];

/// Requests whose syntax the generator rarely reaches (run in every context too).
pub const HAND_WRITTEN: &[&[&str]] = &[
    &["terrace.workload", "default"],
    &["terrace.advise", "default"],
    &["terrace.record", "sample", "default", "10"],
    &["terrace.stats"],
    &["unwatch"],
    &["set", "str", "v", "EX", "10", "GET"],
    &["set", "str", "v", "PX", "100", "NX"],
    &["getex", "str", "PERSIST"],
    &["zadd", "zset", "GT", "CH", "1", "m", "2", "n"],
    &["zrange", "zset", "(1", "+inf", "BYSCORE", "LIMIT", "0", "10", "WITHSCORES"],
    &["zrangestore", "zset2", "zset", "0", "-1"],
    &["zunionstore", "{zset}z", "2", "zset", "zset", "WEIGHTS", "1", "2", "AGGREGATE", "MAX"],
    &["sort", "list", "BY", "nosort", "LIMIT", "0", "2", "ALPHA", "STORE", "list2"],
    &["xadd", "stream", "MAXLEN", "~", "10", "*", "f", "v"],
    &["xgroup", "create", "stream", "g", "$", "MKSTREAM"],
    &["xreadgroup", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "stream", ">"],
    &["xautoclaim", "stream", "g", "c", "0", "0-0", "COUNT", "10"],
    &["xinfo", "stream", "stream", "FULL"],
    &["bitfield", "str", "SET", "u8", "0", "255", "GET", "i4", "0", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT"],
    &["bitpos", "str", "1", "0", "-1", "BIT"],
    &["geoadd", "geo", "13.36", "38.11", "palermo", "15.08", "37.50", "catania"],
    &["geosearch", "geo", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC", "WITHCOORD"],
    &["georadius", "geo", "15", "37", "200", "km", "STORE", "geo2"],
    &["lpos", "list", "a", "RANK", "-1", "MAXLEN", "0"],
    &["lmpop", "2", "list", "missing", "LEFT", "COUNT", "2"],
    &["zmpop", "1", "zset", "MIN", "COUNT", "5"],
    &["srandmember", "set", "-5"],
    &["hrandfield", "hash", "-5", "WITHVALUES"],
    &["zrandmember", "zset", "-5", "WITHSCORES"],
    &["object", "encoding", "list"],
    &["memory", "usage", "hash", "SAMPLES", "0"],
    &["copy", "str", "str2", "DB", "1", "REPLACE"],
    &["move", "str", "2"],
    &["restore", "r", "0", "garbage"],
    &["scan", "0", "MATCH", "*", "COUNT", "10", "TYPE", "string"],
    &["hscan", "hash", "0", "MATCH", "f*"],
    &["lcs", "str", "{str}x", "IDX", "MINMATCHLEN", "1", "WITHMATCHLEN"],
    &["client", "tracking", "on", "BCAST", "PREFIX", "a"],
    &["client", "no-evict", "on"],
    &["client", "setname", "every-command"],
    &["config", "set", "maxmemory-policy", "allkeys-lru"],
    // Eviction at once (inside EXEC: once its locks are released), and notifications off
    // again (both waited on a transaction's own locks once).
    &["config", "set", "maxmemory-policy", "allkeys-random", "maxmemory", "1"],
    &["config", "set", "notify-keyspace-events", "KEA"],
    &["config", "set", "notify-keyspace-events", ""],
    &["config", "get", "*"],
    &["function", "load", "#!lua name=lib\nredis.register_function('f', function(keys, args) return 1 end)"],
    &["fcall", "f", "0"],
    &["script", "load", "return 1"],
    &["pfmerge", "hll", "hll", "hll"],
    &["pfadd", "hll", "a", "b", "c"],
    &["swapdb", "0", "1"],
    &["select", "0"],
    &["mc.store", "set", "mck", "v", "0", "0"],
    &["latency", "histogram"],
    &["acl", "log"],
];

/// Commands after which the connection may receive more than one reply per request, or
/// replies in another protocol: the next request gets a fresh connection.
pub fn changes_connection_mode(name: &str) -> bool {
    matches!(name, "subscribe" | "psubscribe" | "ssubscribe" | "monitor" | "hello" | "select" | "client|tracking" | "client|reply")
}

/// Commands left out, each with why.
pub fn skipped(name: &str, argv: &[Vec<u8>]) -> bool {
    let arg = |i: usize| argv.get(i).map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).unwrap_or_default();
    match name {
        // Ends the process, on purpose.
        "shutdown" => true,
        // DEBUG's crash, sleep and reload subcommands stop or restart the server on purpose.
        "debug" | "debug|segfault" | "debug|panic" | "debug|sleep" | "debug|reload" | "debug|restart" | "debug|crash-and-recover" => {
            matches!(arg(1).as_str(), "segfault" | "panic" | "sleep" | "reload" | "restart" | "crash-and-recover" | "oom" | "assert")
        }
        // Would lock the test's clients out (they use the default user without a password).
        "acl|setuser" | "acl|deluser" | "acl|load" | "auth" | "hello" => argv.iter().any(|a| a.eq_ignore_ascii_case(b"default") || a.starts_with(b">")),
        "config|set" => matches!(arg(2).as_str(), "requirepass" | "port" | "bind" | "dir"),
        // Would make the server a replica of whatever the arguments name, refusing every
        // later write (replication has tests of its own: tests/replication_e2e.rs).
        "replicaof" | "slaveof" => !(arg(1) == "no" && arg(2) == "one"),
        // Turn the connection into a replica's link (tests/replication_e2e.rs).
        "psync" | "sync" => true,
        _ => false,
    }
}

pub fn describe_all(c: &mut Client) -> Vec<Described> {
    c.send(&[b"COMMAND".to_vec()]);
    let mut top = Vec::new();
    let raw = raw_command_reply(c);
    for (name, arity, flags, first, last, step) in raw {
        top.push(Described { blocking: flags.iter().any(|f| f == "blocking"), name, arity, first, last, step });
    }
    c.send(&[b"COMMAND".to_vec(), b"LIST".to_vec()]);
    let names = bulk_strings(c);
    for n in names.into_iter().filter(|n| n.contains('|')) {
        let parent = n.split('|').next().unwrap();
        let p = top.iter().find(|d| d.name == parent).expect("a subcommand's container is listed");
        let (blocking, first, last, step) = (p.blocking, p.first, p.last, p.step);
        top.push(Described { name: n, arity: -2, blocking, first, last, step });
    }
    top
}

/// COMMAND's reply, read field by field: (name, arity, flags, first, last, step).
fn raw_command_reply(c: &mut Client) -> Vec<(String, i64, Vec<String>, i64, i64, i64)> {
    let r = &mut c.r;
    c.w.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let n: usize = read_line(r).unwrap()[1..].parse().unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let fields: usize = read_line(r).unwrap()[1..].parse().unwrap();
        assert_eq!(fields, 10, "COMMAND entries have 10 fields");
        let _ = read_line(r).unwrap();
        let name = read_line(r).unwrap();
        let int = |r: &mut BufReader<TcpStream>| read_line(r).unwrap()[1..].parse::<i64>().unwrap();
        let arity = int(r);
        let nflags: usize = read_line(r).unwrap()[1..].parse().unwrap();
        let flags = (0..nflags).map(|_| read_line(r).unwrap()[1..].to_string()).collect();
        let (first, last, step) = (int(r), int(r), int(r));
        for _ in 0..4 {
            read_reply(r).unwrap();
        }
        out.push((name, arity, flags, first, last, step));
    }
    out
}

fn bulk_strings(c: &mut Client) -> Vec<String> {
    let r = &mut c.r;
    let n: usize = read_line(r).unwrap()[1..].parse().unwrap();
    (0..n)
        .map(|_| {
            let _ = read_line(r).unwrap();
            read_line(r).unwrap()
        })
        .collect()
}

/// Generated requests for one command: every length from its arity up to three more
/// arguments (subcommands: one to four after the name), keys at its key positions.
pub fn generate(d: &Described) -> Vec<Vec<Vec<u8>>> {
    let words: Vec<&str> = d.name.split('|').collect();
    let min = if d.arity < 0 { (-d.arity) as usize } else { d.arity as usize };
    let lengths: Vec<usize> = if d.name.contains('|') {
        (3..=6).collect()
    } else if d.arity < 0 {
        (min..min + 4).collect()
    } else {
        vec![min]
    };
    let is_key = |i: usize| {
        if d.first <= 0 || (i as i64) < d.first {
            return false;
        }
        let last = if d.last < 0 { i64::MAX } else { d.last };
        (i as i64) <= last && (i as i64 - d.first) % d.step.max(1) == 0
    };
    let mut out = Vec::new();
    for len in lengths {
        for variant in 0..24 {
            let mut argv: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
            for i in argv.len()..len {
                let word = if is_key(i) { KEYS[(variant + i) % KEYS.len()] } else { ARGS[(variant * 7 + i * 3) % ARGS.len()] };
                argv.push(word.as_bytes().to_vec());
            }
            if !out.contains(&argv) {
                out.push(argv);
            }
        }
    }
    out
}
