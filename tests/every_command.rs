//! Every command the engine lists (`COMMAND`, and every subcommand of `COMMAND LIST`), run
//! with plausible arguments at top level, queued inside MULTI/EXEC and called from EVAL: the
//! engine answers each request (or blocks where the command may block), keeps answering
//! other clients, and its log shows no panic. The arguments are generated from each
//! command's arity and key positions over keys of every type, plus a list of hand-written
//! requests for commands whose syntax generated arguments rarely reach.

mod common;

use std::time::Duration;

use common::requests::{changes_connection_mode, describe_all, generate, skipped, Client, NoReply, HAND_WRITTEN};
use common::Engine;

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
    // The reproducer, as a user typed it.
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
