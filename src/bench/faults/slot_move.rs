//! A move scenario's parts: keys written and confirmed before the load (what the move
//! carries, about 2 MB), and the slot move queued through the console's API and followed
//! until it ends.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::super::console_web::Web;
use super::super::resp_client::Reply;
use super::workload::Target;

/// Keys written before the load: enough bytes that a move at the cluster's `--move-rate`
/// copies for seconds.
const PRELOAD_KEYS: usize = 8000;
const PRELOAD_VALUE: usize = 256;

/// Writes the preloaded keys through `target`, pipelined, and waits until a replica of
/// every engine has them; answers them (key, value).
pub fn preload(target: &Target) -> anyhow::Result<Vec<(String, String)>> {
    let mut c = target.connect()?;
    let keys: Vec<(String, String)> = (0..PRELOAD_KEYS).map(|i| (format!("faults:preload:{i}"), format!("{i:0>width$}", width = PRELOAD_VALUE))).collect();
    for chunk in keys.chunks(500) {
        for (k, v) in chunk {
            c.push(&[b"SET", k.as_bytes(), v.as_bytes()]);
        }
        for ((k, _), reply) in chunk.iter().zip(c.flush_replies()?) {
            if !matches!(reply, Reply::Status(_)) {
                bail!("preloading {k}: {reply:?}");
            }
        }
    }
    match c.request(&[b"WAIT", b"1", b"10000"])? {
        Reply::Int(n) if n >= 1 => Ok(keys),
        other => bail!("WAIT after the preload: {other:?}"),
    }
}

/// A slot move queued through the console's API.
pub struct Move {
    web: Web,
    id: i64,
}

impl Move {
    /// Logs in to the console at `console` and queues a move of `slots` from `source` to
    /// `target` (engine addresses).
    pub fn queue(console: &str, password: &str, source: &str, target: &str, slots: &str) -> anyhow::Result<Move> {
        let web = Web::login(console, password)?;
        let body = serde_json::json!({ "source": source, "target": target, "slots": slots }).to_string();
        let (status, answer) = web.call("POST", "/api/v1/moves", &body)?;
        if status != 201 {
            bail!("queueing the move: {status} {answer}");
        }
        let id = serde_json::from_str::<serde_json::Value>(&answer)?["id"].as_i64().with_context(|| format!("the move's id in {answer}"))?;
        Ok(Move { web, id })
    }

    /// The move's row and the progress of the one under way (`GET /api/v1/moves`).
    fn status(&self) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
        let (status, answer) = self.web.call("GET", "/api/v1/moves", "")?;
        if status != 200 {
            bail!("listing the moves: {status} {answer}");
        }
        let all: serde_json::Value = serde_json::from_str(&answer)?;
        let mine = all["moves"].as_array().and_then(|m| m.iter().find(|m| m["id"] == self.id)).cloned().context("the move is not listed")?;
        Ok((mine, all["progress"].clone()))
    }

    /// Waits until the source has copied at least `keys` keys of this move.
    pub fn wait_copying(&self, keys: u64, within: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            let (mine, progress) = self.status()?;
            if progress["id"] == self.id && progress["phase"] == "copying" && progress["keys_copied"].as_u64().unwrap_or(0) >= keys {
                return Ok(());
            }
            if start.elapsed() > within {
                bail!("the move did not copy {keys} keys within {within:?}: {mine} {progress}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the move ended: its state (`done`, `failed`…) and its last error.
    pub fn wait_ended(&self, within: Duration) -> anyhow::Result<(String, String)> {
        let start = Instant::now();
        loop {
            let (mine, _) = self.status()?;
            let state = mine["state"].as_str().unwrap_or("").to_string();
            if matches!(state.as_str(), "done" | "failed" | "cancelled") || start.elapsed() > within {
                return Ok((state, mine["error"].as_str().unwrap_or("").to_string()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
