//! Every command the engine lists (`COMMAND`, and every subcommand of `COMMAND LIST`), run
//! with plausible arguments at top level, queued inside MULTI/EXEC and called from EVAL: the
//! engine answers each request (or blocks where the command may block), keeps answering
//! other clients, and its log shows no panic. The arguments are generated from each
//! command's arity and key positions over keys of every type, plus a list of hand-written
//! requests for commands whose syntax generated arguments rarely reach.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::Engine;

/// Why a request got no reply.
#[derive(Debug)]
enum NoReply {
    /// Nothing arrived within the wait.
    Timeout,
    /// The server closed the connection.
    Closed,
}

struct Client {
    port: u16,
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Client {
    fn connect(port: u16) -> Client {
        let w = TcpStream::connect(("127.0.0.1", port)).expect("connect to the engine");
        w.set_nodelay(true).unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        Client { port, w, r }
    }

    fn reconnect(&mut self) {
        *self = Client::connect(self.port);
    }

    fn send(&mut self, argv: &[Vec<u8>]) {
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
    fn read(&mut self, wait: Duration) -> Result<(), NoReply> {
        self.w.set_read_timeout(Some(wait)).unwrap();
        read_reply(&mut self.r)
    }
}

fn read_line(r: &mut BufReader<TcpStream>) -> Result<String, NoReply> {
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
fn read_reply(r: &mut BufReader<TcpStream>) -> Result<(), NoReply> {
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
struct Described {
    /// "get", or "config|get" for a subcommand.
    name: String,
    arity: i64,
    blocking: bool,
    first: i64,
    last: i64,
    step: i64,
}

/// Keys of every type (made by `populate`) and one that does not exist.
const KEYS: &[&str] = &["str", "list", "hash", "set", "zset", "stream", "hll", "missing", "{str}x"];
/// Arguments that are not keys: numbers, scores, IDs, options, patterns.
const ARGS: &[&str] = &["1", "0", "-1", "2", "10", "a", "*", "NX", "+inf", "-", "+", "1-1", "$", ">", "(1", "[a", "0.5", "XX", "COUNT", "abc"];

/// Requests whose syntax the generator rarely reaches (run in every context too).
const HAND_WRITTEN: &[&[&str]] = &[
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
fn changes_connection_mode(name: &str) -> bool {
    matches!(name, "subscribe" | "psubscribe" | "ssubscribe" | "monitor" | "hello" | "select" | "client|tracking" | "client|reply")
}

/// Commands left out, each with why.
fn skipped(name: &str, argv: &[Vec<u8>]) -> bool {
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
        _ => false,
    }
}

fn describe_all(c: &mut Client) -> Vec<Described> {
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
fn generate(d: &Described) -> Vec<Vec<Vec<u8>>> {
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

/// Keys of every type, in database 0.
fn populate(c: &mut Client) {
    c.reconnect();
    for cmd in [
        &["FLUSHALL"][..],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["CLIENT", "UNPAUSE"],
        &["SET", "str", "hello"],
        &["SET", "{str}x", "help"],
        &["RPUSH", "list", "a", "b", "c", "1"],
        &["HSET", "hash", "f", "v", "a", "1"],
        &["SADD", "set", "a", "b", "1"],
        &["ZADD", "zset", "1", "a", "2", "b"],
        &["XADD", "stream", "1-1", "f", "v"],
        &["PFADD", "hll", "a"],
    ] {
        c.send(&cmd.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>());
        c.read(Duration::from_secs(10)).expect("setup command answered");
    }
}

/// How a request is run.
#[derive(Clone, Copy, Debug)]
enum Context {
    TopLevel,
    Exec,
    Eval,
}

struct Run {
    engine: Engine,
    log: std::path::PathBuf,
    log_len: u64,
    client: Client,
    failures: Vec<String>,
}

impl Run {
    /// Sends one request in a context and reads what it gets; a new panic in the log, or no
    /// answer where one is due, is a failure.
    fn one(&mut self, ctx: Context, name: &str, argv: &[Vec<u8>], blocking: bool) {
        let shown = || format!("{ctx:?}: {}", argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" "));
        // Blocking commands may wait at top level, and CLIENT REPLY OFF/SKIP silences the
        // reply; everything else answers promptly.
        let may_stay_silent = (blocking && matches!(ctx, Context::TopLevel)) || name.starts_with("client|reply");
        let wait = if may_stay_silent { Duration::from_millis(100) } else { Duration::from_secs(5) };
        let result = match ctx {
            Context::TopLevel => {
                self.client.send(argv);
                self.client.read(wait)
            }
            Context::Exec => {
                self.client.send(&[b"MULTI".to_vec()]);
                self.client.send(argv);
                self.client.send(&[b"EXEC".to_vec()]);
                self.client.read(wait).and_then(|_| self.client.read(wait)).and_then(|_| self.client.read(wait))
            }
            Context::Eval => {
                let mut eval = vec![b"EVAL".to_vec(), b"return redis.pcall(unpack(ARGV))".to_vec(), b"0".to_vec()];
                eval.extend(argv.iter().cloned());
                self.client.send(&eval);
                self.client.read(wait)
            }
        };
        // Commands that end the connection on purpose, or kill clients (maybe this one).
        let may_close = matches!(name, "quit" | "reset") || name.starts_with("client|kill");
        match result {
            Ok(_) if !changes_connection_mode(name) => {}
            Ok(_) => self.client.reconnect(),
            Err(NoReply::Timeout) if may_stay_silent => self.client.reconnect(),
            Err(NoReply::Closed) if may_close || may_stay_silent => self.client.reconnect(),
            Err(why) => {
                self.failures.push(format!("{} got no reply ({why:?})", shown()));
                self.client.reconnect();
            }
        }
        let len = std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
        if len != self.log_len {
            let log = std::fs::read(&self.log).unwrap();
            let new = String::from_utf8_lossy(&log[self.log_len as usize..]).into_owned();
            self.log_len = len;
            if new.contains("panicked") {
                self.failures.push(format!("{} panicked: {}", shown(), new.lines().find(|l| l.contains("panicked")).unwrap_or_default()));
            }
        }
    }

    /// A fresh connection answers PING: the engine is alive and not wedged.
    fn alive(&mut self, after: &str) {
        let mut probe = Client::connect(self.engine.port);
        probe.send(&[b"PING".to_vec()]);
        if probe.read(Duration::from_secs(10)).is_err() {
            panic!("the engine stopped answering after {after}; failures so far: {:#?}", self.failures);
        }
    }
}

#[test]
fn every_command_at_top_level_in_exec_and_in_eval_answers_without_panic() {
    let log = common::temp_dir("every-command").join("engine.log");
    let engine = Engine::start_logged(&["--wal", "always", "--enable-debug-command", "yes"], &log);
    let client = Client::connect(engine.port);
    let mut run = Run { engine, log, log_len: 0, client, failures: Vec::new() };
    let commands = describe_all(&mut run.client);
    assert!(commands.len() > 300, "COMMAND and COMMAND LIST describe {} commands", commands.len());
    let mut requests = 0;
    for ctx in [Context::TopLevel, Context::Exec, Context::Eval] {
        for d in &commands {
            let mut cases = generate(d);
            for hand in HAND_WRITTEN.iter().filter(|h| d.name == h[0] || d.name.split('|').collect::<Vec<_>>() == h[..2.min(h.len())]) {
                cases.push(hand.iter().map(|a| a.as_bytes().to_vec()).collect());
            }
            populate(&mut run.client);
            for argv in cases.iter().filter(|a| !skipped(&d.name, a)) {
                run.one(ctx, &d.name, argv, d.blocking);
                requests += 1;
            }
            run.alive(&d.name);
        }
    }
    // The issue's reproducer, as a user typed it.
    run.client.reconnect();
    run.client.send(&encode_args(&["MULTI"]));
    run.client.send(&encode_args(&["SET", "a", "1"]));
    run.client.send(&encode_args(&["TERRACE.WORKLOAD", "default"]));
    run.client.send(&encode_args(&["EXEC"]));
    for _ in 0..4 {
        if let Err(why) = run.client.read(Duration::from_secs(5)) {
            run.failures.push(format!("MULTI / SET / TERRACE.WORKLOAD / EXEC: no reply ({why:?})"));
            break;
        }
    }
    assert!(requests > 10_000, "only {requests} requests were generated");
    assert!(run.failures.is_empty(), "{} of {requests} requests failed:\n{}", run.failures.len(), run.failures.join("\n"));
}

fn encode_args(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}
