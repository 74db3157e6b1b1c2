//! The files `terrace record` writes and `terrace replay` / `terrace cost-eval` read, in a
//! directory: `meta.json` (tenant, sampling rate, seconds, counts, the tenant's workload
//! statistics at the end), `trace.tsv` (one command a line: µs since the start, database,
//! value size, arguments in hex with `#n` for an elided argument of n bytes) and `data.tsv`
//! (one sampled key a line: database, key, milliseconds to live or -1, DUMP payload in hex).

use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub tenant: String,
    /// The engine recorded (the first, with several).
    pub source: String,
    /// Every engine recorded (through a proxy: all behind it).
    #[serde(default)]
    pub engines: Vec<String>,
    pub rate: f64,
    pub seconds: f64,
    pub recorded: u64,
    pub dropped: u64,
    pub sampled_keys: u64,
    /// `TERRACE.WORKLOAD` of the tenant when the recording ended.
    pub workload: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Bytes(Vec<u8>),
    /// A long argument (a value) recorded as its length.
    Elided(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub micros: u64,
    pub db: u8,
    pub value_size: u32,
    pub args: Vec<Arg>,
}

impl Op {
    pub fn name(&self) -> &[u8] {
        match self.args.first() {
            Some(Arg::Bytes(b)) => b,
            _ => b"",
        }
    }

    /// The first key argument (the argument after the name).
    pub fn key(&self) -> Option<&[u8]> {
        match self.args.get(1) {
            Some(Arg::Bytes(b)) => Some(b),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub db: u8,
    pub key: Vec<u8>,
    pub pttl: i64,
    pub dump: Vec<u8>,
}

pub fn unhex(s: &str) -> anyhow::Result<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        bail!("odd-length hex {s:?}");
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).with_context(|| format!("bad hex {s:?}"))).collect()
}

pub fn parse_op(line: &str) -> anyhow::Result<Op> {
    let mut f = line.split('\t');
    let mut next = |what: &str| f.next().with_context(|| format!("no {what} in {line:?}"));
    let micros = next("time")?.parse()?;
    let db = next("database")?.parse()?;
    let value_size = next("value size")?.parse()?;
    let args = next("arguments")?
        .split(',')
        .map(|a| match a.strip_prefix('#') {
            Some(n) => Ok(Arg::Elided(n.parse()?)),
            None => Ok(Arg::Bytes(unhex(a)?)),
        })
        .collect::<anyhow::Result<Vec<Arg>>>()?;
    Ok(Op { micros, db, value_size, args })
}

pub fn parse_record(line: &str) -> anyhow::Result<Record> {
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() != 4 {
        bail!("a data line has 4 fields, not {}: {line:?}", f.len());
    }
    Ok(Record { db: f[0].parse()?, key: unhex(f[1])?, pttl: f[2].parse()?, dump: unhex(f[3])? })
}

pub fn read_meta(dir: &Path) -> anyhow::Result<Meta> {
    let p = dir.join("meta.json");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
}

fn read_lines<T>(p: &Path, parse: fn(&str) -> anyhow::Result<T>) -> anyhow::Result<Vec<T>> {
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    text.lines().enumerate().filter(|(_, l)| !l.is_empty()).map(|(i, l)| parse(l).with_context(|| format!("{} line {}", p.display(), i + 1))).collect()
}

pub fn read_trace(dir: &Path) -> anyhow::Result<Vec<Op>> {
    read_lines(&dir.join("trace.tsv"), parse_op)
}

pub fn read_data(dir: &Path) -> anyhow::Result<Vec<Record>> {
    read_lines(&dir.join("data.tsv"), parse_record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse() {
        let op = parse_op("1500\t2\t100\t534554,6b31,#100").unwrap();
        assert_eq!(op, Op { micros: 1500, db: 2, value_size: 100, args: vec![Arg::Bytes(b"SET".to_vec()), Arg::Bytes(b"k1".to_vec()), Arg::Elided(100)] });
        assert_eq!(op.key(), Some(&b"k1"[..]));
        let r = parse_record("0\t6b31\t-1\t0001ff").unwrap();
        assert_eq!(r, Record { db: 0, key: b"k1".to_vec(), pttl: -1, dump: vec![0, 1, 255] });
        assert!(parse_op("1\t2").is_err());
        assert!(parse_record("0\t6b3\t-1\t00").is_err());
    }
}
