//! The fault suite's workload: writers of four kinds and a reader, each on a connection of its
//! own to the proxy, every operation logged with what it was answered and when. Keys are
//! written once with a value of their own, so a value found later names the write it came
//! from; counters are shared by the counter writers, so two clients handed the same number
//! is visible.
//!
//! An answer is one of: acknowledged (and, for SET+WAIT and INCR+WAIT, whether a replica had
//! it); refused (an error that says the write was not run: TRYAGAIN, LOADING, READONLY, …);
//! unknown (a timeout, a dropped connection, or the proxy's "may or may not have run").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::super::resp_client::{Client, Reply};

/// The writers' kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SET of a new key.
    Set,
    /// SET of a new key, then WAIT 1.
    SetWait,
    /// MULTI, SET of two new keys (one slot) with one value, EXEC.
    Multi,
    /// INCR of a shared counter, then WAIT 1.
    Counter,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Acked { waited: bool },
    Refused(String),
    Unknown(String),
}

/// One logged operation. Times are seconds since the run's start.
#[derive(Debug, Clone)]
pub struct Op {
    pub kind: Kind,
    /// The key (a transaction's first key; its second is `pair_of(key)`); the counter.
    pub key: String,
    /// The value written; for a counter, the value INCR answered (empty if none).
    pub value: String,
    pub start: f64,
    /// When the write was answered (before a WAIT after it), or failed.
    pub end: f64,
    pub outcome: Outcome,
}

/// A read that saw something no acknowledged write explains.
#[derive(Debug, Clone)]
pub struct BadRead {
    pub key: String,
    pub expected: String,
    pub got: Option<String>,
    pub at: f64,
}

/// Everything the workload saw.
#[derive(Debug, Default)]
pub struct Log {
    pub ops: Vec<Op>,
    pub reads: u64,
    pub bad_reads: Vec<BadRead>,
}

/// The second key of the transaction whose first key is `key` (same hash tag).
pub fn pair_of(key: &str) -> String {
    format!("{}b", key.strip_suffix('a').unwrap_or(key))
}

/// Where the workload sends its requests: one address (Terrace's proxy), or the master a
/// set of Sentinels names, asked again on every new connection (as Sentinel clients do).
#[derive(Clone)]
pub enum Target {
    Fixed(String),
    Sentinels { sentinels: Vec<String>, master: String },
}

impl Target {
    pub fn connect(&self) -> anyhow::Result<Client> {
        match self {
            Target::Fixed(addr) => Client::connect_with_timeout(addr, TIMEOUT),
            Target::Sentinels { sentinels, master } => {
                for s in sentinels {
                    let Ok(mut c) = Client::connect_with_timeout(s, Duration::from_millis(500)) else { continue };
                    if let Ok(Reply::Array(Some(addr))) = c.request(&[b"SENTINEL", b"get-master-addr-by-name", master.as_bytes()]) {
                        if let [Reply::Bulk(Some(host)), Reply::Bulk(Some(port))] = &addr[..] {
                            let addr = format!("{}:{}", String::from_utf8_lossy(host), String::from_utf8_lossy(port));
                            return Client::connect_with_timeout(&addr, TIMEOUT);
                        }
                    }
                }
                anyhow::bail!("no Sentinel names a master")
            }
        }
    }
}

/// Counters the counter writers share.
pub const COUNTERS: usize = 2;

pub struct Running {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Vec<Op>>>,
    reader: std::thread::JoinHandle<(u64, Vec<BadRead>)>,
}

const TIMEOUT: Duration = Duration::from_millis(2500);

/// Starts `per_kind` writers of each kind and one reader against `target`.
pub fn start(target: &Target, per_kind: usize, epoch: Instant) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    // Keys a replica acknowledged, for the reader.
    let confirmed: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let mut threads = Vec::new();
    for kind in [Kind::Set, Kind::SetWait, Kind::Multi, Kind::Counter] {
        for i in 0..per_kind {
            let (stop, confirmed, target) = (stop.clone(), confirmed.clone(), target.clone());
            let writer = threads.len();
            threads.push(std::thread::spawn(move || write_loop(kind, writer, i, &target, &stop, &confirmed, epoch)));
        }
    }
    let reader = {
        let (stop, target) = (stop.clone(), target.clone());
        std::thread::spawn(move || read_loop(&target, &stop, &confirmed, epoch))
    };
    Running { stop, threads, reader }
}

impl Running {
    pub fn stop(self) -> Log {
        self.stop.store(true, Ordering::Relaxed);
        let mut log = Log::default();
        for t in self.threads {
            log.ops.extend(t.join().unwrap_or_default());
        }
        let (reads, bad) = self.reader.join().unwrap_or_default();
        log.reads = reads;
        log.bad_reads = bad;
        log.ops.sort_by(|a, b| a.end.total_cmp(&b.end));
        log
    }
}

/// What a failed request says about whether it ran.
fn failed(e: anyhow::Error) -> Outcome {
    Outcome::Unknown(e.to_string())
}

fn refused_or_unknown(text: String) -> Outcome {
    // The proxy's answer for a request an engine may have run before it stopped answering.
    if text.contains("may or may not") {
        Outcome::Unknown(text)
    } else {
        Outcome::Refused(text)
    }
}

/// WAIT 1 after a write: whether a replica has it. A WAIT that failed on the connection
/// (a timeout: its reply may still come) leaves the connection unusable: `broken`.
fn waited(c: &mut Client, broken: &mut bool) -> bool {
    match c.request(&[b"WAIT", b"1", b"1000"]) {
        Ok(Reply::Int(n)) => n >= 1,
        Ok(_) => false,
        Err(_) => {
            *broken = true;
            false
        }
    }
}

fn write_loop(
    kind: Kind,
    writer: usize,
    index: usize,
    target: &Target,
    stop: &AtomicBool,
    confirmed: &Mutex<Vec<(String, String)>>,
    epoch: Instant,
) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut conn: Option<Client> = None;
    let mut n = 0u64;
    let mut broken = false;
    // When the write itself was answered (before its WAIT).
    let mut replied = None;
    while !stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match target.connect() {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            },
        };
        n += 1;
        let start = epoch.elapsed().as_secs_f64();
        let (key, mut value) = match kind {
            Kind::Set => (format!("s:{writer}:{n}"), format!("v{n}")),
            Kind::SetWait => (format!("w:{writer}:{n}"), format!("v{n}")),
            Kind::Multi => (format!("{{m:{writer}:{n}}}a"), format!("v{n}")),
            Kind::Counter => (format!("counter:{}", (index + n as usize) % COUNTERS), String::new()),
        };
        let outcome = match kind {
            Kind::Set | Kind::SetWait => match c.request(&[b"SET", key.as_bytes(), value.as_bytes()]) {
                Ok(Reply::Status(_)) => {
                    replied = Some(epoch.elapsed().as_secs_f64());
                    Outcome::Acked { waited: kind == Kind::SetWait && waited(c, &mut broken) }
                }
                Ok(Reply::Error(e)) => refused_or_unknown(e),
                Ok(other) => Outcome::Unknown(format!("{other:?}")),
                Err(e) => failed(e),
            },
            Kind::Multi => transaction(c, &key, &value),
            Kind::Counter => match c.request(&[b"INCR", key.as_bytes()]) {
                Ok(Reply::Int(v)) => {
                    replied = Some(epoch.elapsed().as_secs_f64());
                    value = v.to_string();
                    Outcome::Acked { waited: waited(c, &mut broken) }
                }
                Ok(Reply::Error(e)) => refused_or_unknown(e),
                Ok(other) => Outcome::Unknown(format!("{other:?}")),
                Err(e) => failed(e),
            },
        };
        let end = replied.take().unwrap_or_else(|| epoch.elapsed().as_secs_f64());
        if broken {
            conn = None;
            broken = false;
        }
        match &outcome {
            Outcome::Acked { waited: true } if kind == Kind::SetWait => confirmed.lock().unwrap_or_else(|p| p.into_inner()).push((key.clone(), value.clone())),
            Outcome::Acked { .. } => {}
            // A connection in an unknown state (a transaction left open, a reply still to
            // come) is not reused.
            Outcome::Unknown(_) => conn = None,
            Outcome::Refused(_) if kind == Kind::Multi => conn = None,
            Outcome::Refused(_) => std::thread::sleep(Duration::from_millis(20)),
        }
        ops.push(Op { kind, key, value, start, end, outcome });
    }
    ops
}

fn transaction(c: &mut Client, key: &str, value: &str) -> Outcome {
    let pair = pair_of(key);
    for args in [&[&b"MULTI"[..]][..], &[b"SET", key.as_bytes(), value.as_bytes()], &[b"SET", pair.as_bytes(), value.as_bytes()]] {
        match c.request(args) {
            Ok(Reply::Status(_)) => {}
            // Nothing ran: EXEC was not sent.
            Ok(Reply::Error(e)) => return Outcome::Refused(e),
            Ok(other) => return Outcome::Refused(format!("{other:?}")),
            Err(e) => return Outcome::Refused(e.to_string()),
        }
    }
    match c.request(&[b"EXEC"]) {
        Ok(Reply::Array(Some(items))) if items.iter().all(|i| matches!(i, Reply::Status(_))) => Outcome::Acked { waited: false },
        Ok(Reply::Array(Some(items))) => Outcome::Unknown(format!("EXEC answered {items:?}")),
        Ok(Reply::Array(None)) => Outcome::Refused("EXEC aborted".into()),
        Ok(Reply::Error(e)) => refused_or_unknown(e),
        Ok(other) => Outcome::Unknown(format!("{other:?}")),
        Err(e) => failed(e),
    }
}

fn read_loop(target: &Target, stop: &AtomicBool, confirmed: &Mutex<Vec<(String, String)>>, epoch: Instant) -> (u64, Vec<BadRead>) {
    let mut conn: Option<Client> = None;
    let (mut reads, mut bad) = (0, Vec::new());
    let mut rng = fastrand::Rng::with_seed(46);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(2));
        let picked = {
            let c = confirmed.lock().unwrap_or_else(|p| p.into_inner());
            (!c.is_empty()).then(|| c[rng.usize(..c.len())].clone())
        };
        let Some((key, expected)) = picked else { continue };
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match target.connect() {
                Ok(c) => conn.insert(c),
                Err(_) => continue,
            },
        };
        match c.request(&[b"GET", key.as_bytes()]) {
            Ok(Reply::Bulk(got)) => {
                reads += 1;
                let got = got.map(|g| String::from_utf8_lossy(&g).into_owned());
                if got.as_deref() != Some(expected.as_str()) {
                    bad.push(BadRead { key, expected, got, at: epoch.elapsed().as_secs_f64() });
                }
            }
            // Unavailable: not a read.
            Ok(_) => {}
            Err(_) => conn = None,
        }
    }
    (reads, bad)
}
