//! The key browser and the slow log. Keys are listed with SCAN (never KEYS: a big keyspace
//! would stall its engine), engine after engine, in the tenant's namespace; each key's type,
//! TTL, size and encoding come in one pipelined round trip per page. A key is read and
//! deleted on the engine the slot map gives its slot. The slow log merges every engine's
//! (`TERRACE.SLOWLOG`, whose entries name their tenant), newest first.

use redis::Value as Reply;
use serde::Serialize;
use serde_json::Value;

use crate::db;
use crate::nodes::Node;
use crate::ops::{self, OpError};
use crate::Console;

/// Keys a page lists (about: SCAN's COUNT is a hint), and how many SCAN calls it makes to fill one.
pub const PAGE: usize = 50;
const SCANS_PER_PAGE: usize = 20;
/// A value's part a key's view shows: bytes of a string, elements of a collection.
const VIEW_BYTES: usize = 4096;
const VIEW_ITEMS: usize = 100;

#[derive(Debug, Clone, Serialize)]
pub struct KeyRow {
    pub key: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Milliseconds left (None: no expiry).
    pub ttl_ms: Option<i64>,
    /// MEMORY USAGE: bytes it takes.
    pub bytes: Option<i64>,
    pub encoding: String,
    pub engine: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct KeyPage {
    pub keys: Vec<KeyRow>,
    /// Where the next page starts ("0": this was the last).
    pub cursor: String,
}

/// One key with (the start of) its value.
#[derive(Debug, Clone, Serialize)]
pub struct KeyView {
    #[serde(flatten)]
    pub row: KeyRow,
    /// Its length: bytes of a string, elements of a collection.
    pub length: Option<i64>,
    /// The value's first `VIEW_BYTES` bytes or `VIEW_ITEMS` elements, as text lines.
    pub value: Vec<String>,
    pub truncated: bool,
}

/// A connection to `addr` in tenant `tenant`'s namespace.
async fn in_namespace(console: &Console, addr: &str, tenant: &str) -> Result<Node, OpError> {
    let mut n = Node::engine(addr, &console.config.engine_auth).await?;
    n.run::<()>(&["TERRACE.NAMESPACE", tenant]).await?;
    Ok(n)
}

fn text(v: &Reply) -> String {
    match v {
        Reply::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Reply::SimpleString(s) => s.clone(),
        Reply::Okay => "OK".into(),
        Reply::Int(i) => i.to_string(),
        Reply::Double(d) => d.to_string(),
        Reply::Nil => String::new(),
        Reply::Array(items) | Reply::Set(items) => items.iter().map(text).collect::<Vec<_>>().join(" "),
        other => format!("{other:?}"),
    }
}

fn int(v: &Reply) -> Option<i64> {
    match v {
        Reply::Int(i) => Some(*i),
        Reply::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn command(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// TYPE, PTTL, MEMORY USAGE and OBJECT ENCODING of `keys`, in one round trip.
async fn describe(n: &mut Node, addr: &str, keys: Vec<Vec<u8>>) -> Result<Vec<KeyRow>, OpError> {
    // (A SCAN step may find nothing: an empty pipeline is no request.)
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut commands = Vec::with_capacity(keys.len() * 4);
    for k in &keys {
        commands.push(command(&[b"TYPE", k]));
        commands.push(command(&[b"PTTL", k]));
        commands.push(command(&[b"MEMORY", b"USAGE", k]));
        commands.push(command(&[b"OBJECT", b"ENCODING", k]));
    }
    let replies = n.pipeline(&commands).await?;
    Ok(keys
        .iter()
        .zip(replies.chunks(4))
        .filter(|(_, r)| text(&r[0]) != "none") // gone since the SCAN
        .map(|(k, r)| KeyRow {
            key: String::from_utf8_lossy(k).into_owned(),
            kind: text(&r[0]),
            ttl_ms: int(&r[1]).filter(|t| *t >= 0),
            bytes: int(&r[2]),
            encoding: text(&r[3]),
            engine: addr.to_string(),
        })
        .collect())
}

/// A page of the tenant's keys matching `pattern` (a glob, as SCAN's MATCH), from `cursor`
/// ("0": the start; "i:c": engine i's SCAN cursor c).
pub async fn scan(console: &Console, tenant: &str, pattern: &str, cursor: &str) -> Result<KeyPage, OpError> {
    ops::tenant(console, tenant).await?;
    let (engines, _) = db::topology(&console.db).await?;
    let bad = || OpError::Invalid(format!("cursor: '{cursor}' is not a cursor this browser gave (start with 0)"));
    let (mut engine, mut at) = match cursor {
        "0" | "" => (0usize, "0".to_string()),
        c => {
            let (e, c) = c.split_once(':').ok_or_else(bad)?;
            (e.parse().map_err(|_| bad())?, c.parse::<u64>().map_err(|_| bad())?.to_string())
        }
    };
    let pattern = if pattern.is_empty() { "*" } else { pattern };
    let mut keys = Vec::new();
    let mut scans = 0;
    while engine < engines.len() && keys.len() < PAGE && scans < SCANS_PER_PAGE {
        let addr = &engines[engine];
        let mut n = in_namespace(console, addr, tenant).await?;
        while keys.len() < PAGE && scans < SCANS_PER_PAGE {
            scans += 1;
            // (COUNT is a hint: a page may hold a few more than `PAGE`.)
            let count = (PAGE - keys.len()).max(10).to_string();
            let (next, found): (String, Vec<Vec<u8>>) = n.run(&["SCAN", &at, "MATCH", pattern, "COUNT", &count]).await?;
            let rows = describe(&mut n, addr, found).await?;
            keys.extend(rows);
            at = next;
            if at == "0" {
                break;
            }
        }
        if at == "0" {
            engine += 1;
        } else {
            break;
        }
    }
    let cursor = if engine >= engines.len() { "0".to_string() } else { format!("{engine}:{at}") };
    Ok(KeyPage { keys, cursor })
}

/// The engine holding `key` (by its slot) and a connection to it in the tenant's namespace.
async fn owner(console: &Console, tenant: &str, key: &str) -> Result<(String, Node), OpError> {
    ops::tenant(console, tenant).await?;
    let (engines, ranges) = db::topology(&console.db).await?;
    let slot = terrace_commands::slots::key_slot(key.as_bytes());
    let idx = ranges.iter().find(|(first, last, _)| (*first..=*last).contains(&slot)).map(|r| r.2).unwrap_or(0);
    let addr = engines.get(idx).cloned().ok_or_else(|| OpError::Unavailable("the slot map names no engine".into()))?;
    let n = in_namespace(console, &addr, tenant).await?;
    Ok((addr, n))
}

/// One key and the start of its value.
pub async fn view(console: &Console, tenant: &str, key: &str) -> Result<KeyView, OpError> {
    let (addr, mut n) = owner(console, tenant, key).await?;
    let row = describe(&mut n, &addr, vec![key.as_bytes().to_vec()])
        .await?
        .pop()
        .ok_or_else(|| OpError::NotFound(format!("tenant '{tenant}' has no key '{key}'")))?;
    let k = key.as_bytes();
    let items = VIEW_ITEMS.to_string();
    let last = (VIEW_ITEMS - 1).to_string();
    let (len_cmd, value_cmd): (Vec<Vec<u8>>, Vec<Vec<u8>>) = match row.kind.as_str() {
        "string" => (command(&[b"STRLEN", k]), command(&[b"GETRANGE", k, b"0", (VIEW_BYTES - 1).to_string().as_bytes()])),
        "hash" => (command(&[b"HLEN", k]), command(&[b"HSCAN", k, b"0", b"COUNT", items.as_bytes()])),
        "list" => (command(&[b"LLEN", k]), command(&[b"LRANGE", k, b"0", last.as_bytes()])),
        "set" => (command(&[b"SCARD", k]), command(&[b"SSCAN", k, b"0", b"COUNT", items.as_bytes()])),
        "zset" => (command(&[b"ZCARD", k]), command(&[b"ZRANGE", k, b"0", last.as_bytes(), b"WITHSCORES"])),
        "stream" => (command(&[b"XLEN", k]), command(&[b"XRANGE", k, b"-", b"+", b"COUNT", b"20"])),
        _ => (command(&[b"STRLEN", k]), command(&[b"PING"])),
    };
    let replies = n.pipeline(&[len_cmd, value_cmd]).await?;
    let length = int(&replies[0]);
    let lines: Vec<String> = match (&row.kind[..], &replies[1]) {
        ("string", v) => vec![text(v)],
        ("hash" | "set", Reply::Array(scan)) if scan.len() == 2 => match &scan[1] {
            Reply::Array(items) if row.kind == "hash" => {
                items.chunks(2).map(|p| format!("{} = {}", text(&p[0]), p.get(1).map(text).unwrap_or_default())).collect()
            }
            Reply::Array(items) => items.iter().map(text).collect(),
            other => vec![text(other)],
        },
        ("zset", Reply::Array(items)) => items.chunks(2).map(|p| format!("{} ({})", text(&p[0]), p.get(1).map(text).unwrap_or_default())).collect(),
        ("stream", Reply::Array(entries)) => entries.iter().map(text).collect(),
        (_, Reply::Array(items)) => items.iter().map(text).collect(),
        (_, v) => vec![text(v)],
    };
    let shown = if row.kind == "string" { lines.first().map_or(0, |l| l.len()) as i64 } else { lines.len() as i64 };
    let truncated = length.is_some_and(|l| l > shown);
    Ok(KeyView { row, length, value: lines, truncated })
}

/// Deletes one key; answers whether it was there.
pub async fn delete(console: &Console, tenant: &str, key: &str) -> Result<bool, OpError> {
    let (_, mut n) = owner(console, tenant, key).await?;
    Ok(n.run::<i64>(&["DEL", key]).await? == 1)
}

/// Every engine's slow log merged, newest first; only `tenant`'s entries when given.
pub async fn slowlog(console: &Console, tenant: Option<&str>) -> Result<(Vec<Value>, Vec<String>), OpError> {
    let (engines, _) = db::topology(&console.db).await?;
    let replicas = db::replicas(&console.db).await?;
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    for addr in engines.iter().chain(replicas.iter().map(|(a, _)| a)) {
        let got = async {
            let mut n = Node::engine(addr, &console.config.engine_auth).await?;
            n.json(&["TERRACE.SLOWLOG", "-1"]).await
        }
        .await;
        match got {
            Ok(Value::Array(list)) => {
                for mut e in list {
                    if tenant.is_none_or(|t| e["tenant"] == t) {
                        e["engine"] = Value::String(addr.clone());
                        entries.push(e);
                    }
                }
            }
            Ok(_) => errors.push(format!("engine {addr}: not a slow log")),
            Err(e) => errors.push(format!("engine {addr}: {e}")),
        }
    }
    entries.sort_by_key(|e| std::cmp::Reverse((e["time"].as_i64().unwrap_or(0), e["id"].as_i64().unwrap_or(0))));
    Ok((entries, errors))
}
