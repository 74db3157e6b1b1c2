//! Command errors (with Redis's exact texts) and argument parsing helpers.

use crate::protocol::parse_i64;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CmdError {
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    #[error("ERR value is not a valid float")]
    NotFloat,
    #[error("ERR syntax error")]
    Syntax,
    #[error("ERR index out of range")]
    IndexOutOfRange,
    #[error("ERR no such key")]
    NoSuchKey,
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArgs(&'static str),
    #[error("ERR value is out of range, must be positive")]
    NotPositive,
    #[error("ERR timeout is not a float or out of range")]
    BadTimeout,
    #[error("ERR timeout is negative")]
    NegativeTimeout,
    #[error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")]
    TooBig,
    #[error("ERR min or max is not a float")]
    MinMaxNotFloat,
    #[error("ERR min or max not valid string range item")]
    MinMaxNotLex,
    /// Any other error; the text carries its code prefix.
    #[error("{0}")]
    Msg(String),
}

impl From<crate::keyspace::Undeclared> for CmdError {
    fn from(e: crate::keyspace::Undeclared) -> Self {
        CmdError::Msg(e.to_string())
    }
}

pub fn err(msg: impl Into<String>) -> CmdError {
    CmdError::Msg(msg.into())
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
#[inline]
pub fn is(arg: &[u8], kw: &str) -> bool {
    arg.eq_ignore_ascii_case(kw.as_bytes())
}

pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// ON or OFF (CLIENT TRACKING, CLIENT NO-EVICT); anything else is a syntax error.
pub fn on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if is(arg, "ON") {
        Ok(true)
    } else if is(arg, "OFF") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// A non-negative count ("value is out of range, must be positive").
pub fn count(arg: &[u8]) -> Result<usize, CmdError> {
    let n = int(arg).map_err(|_| CmdError::NotPositive)?;
    if n < 0 {
        return Err(CmdError::NotPositive);
    }
    Ok(n as usize)
}

/// Subcommands of container commands with their arity (as in Redis 7.0's command table).
pub const SUBCOMMANDS: &[(&str, &[(&str, i32)])] = &[
    (
        "client",
        &[
            ("id", 2),
            ("getname", 2),
            ("setname", 3),
            ("setinfo", 4),
            ("info", 2),
            ("list", -2),
            ("kill", -3),
            ("unblock", -3),
            ("reply", 3),
            ("pause", -3),
            ("unpause", 2),
            ("getredir", 2),
            ("trackinginfo", 2),
            ("tracking", -3),
            ("caching", 3),
            ("no-evict", 3),
            ("help", 2),
        ],
    ),
    ("object", &[("encoding", 3), ("freq", 3), ("idletime", 3), ("refcount", 3), ("help", 2)]),
    ("config", &[("get", -3), ("set", -4), ("resetstat", 2), ("rewrite", 2), ("help", 2)]),
    ("command", &[("count", 2), ("list", -2), ("info", -2), ("docs", -2), ("getkeys", -4), ("getkeysandflags", -4), ("help", 2)]),
    ("slowlog", &[("get", -2), ("len", 2), ("reset", 2), ("help", 2)]),
    ("latency", &[("latest", 2), ("history", 3), ("reset", -2), ("doctor", 2), ("help", 2)]),
    (
        "acl",
        &[
            ("cat", -2),
            ("deluser", -3),
            ("dryrun", -4),
            ("genpass", -2),
            ("getuser", 3),
            ("list", 2),
            ("load", 2),
            ("log", -2),
            ("save", 2),
            ("setuser", -3),
            ("users", 2),
            ("whoami", 2),
            ("help", 2),
        ],
    ),
    (
        "cluster",
        &[
            ("addslots", -3),
            ("addslotsrange", -4),
            ("bumpepoch", 2),
            ("count-failure-reports", 3),
            ("countkeysinslot", 3),
            ("delslots", -3),
            ("delslotsrange", -4),
            ("failover", -2),
            ("flushslots", 2),
            ("forget", 3),
            ("getkeysinslot", 4),
            ("help", 2),
            ("info", 2),
            ("keyslot", 3),
            ("links", 2),
            ("meet", -4),
            ("myid", 2),
            ("nodes", 2),
            ("replicas", 3),
            ("replicate", 3),
            ("reset", -2),
            ("saveconfig", 2),
            ("set-config-epoch", 3),
            ("setslot", -4),
            ("shards", 2),
            ("slaves", 3),
            ("slots", 2),
        ],
    ),
    ("module", &[("help", 2), ("list", 2), ("load", -3), ("loadex", -3), ("unload", 3)]),
    ("pubsub", &[("channels", -2), ("numpat", 2), ("numsub", -2), ("shardchannels", -2), ("shardnumsub", -2), ("help", 2)]),
    ("function", &[("delete", 3), ("dump", 2), ("flush", -2), ("help", 2), ("kill", 2), ("list", -2), ("load", -3), ("restore", -3), ("stats", 2)]),
    ("script", &[("debug", 3), ("exists", -3), ("flush", -2), ("help", 2), ("kill", 2), ("load", 3)]),
    ("xgroup", &[("create", -5), ("setid", -5), ("destroy", 4), ("createconsumer", 5), ("delconsumer", 5), ("help", 2)]),
    ("xinfo", &[("consumers", 4), ("groups", 3), ("stream", -3), ("help", 2)]),
    ("memory", &[("usage", -3), ("stats", 2), ("malloc-stats", 2), ("doctor", 2), ("purge", 2), ("help", 2)]),
];

/// The error for a container command's bad subcommand, worded as Redis 7.0 words it: unknown
/// subcommand; known one with an argument count its arity rejects; or known one whose
/// arguments the handler rejects.
pub fn subcommand_error(cmd: &str, argv: &[&[u8]]) -> CmdError {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
    let shown = String::from_utf8_lossy(&argv[1][..argv[1].len().min(128)]).into_owned();
    let table = SUBCOMMANDS.iter().find(|(c, _)| *c == cmd).map(|(_, s)| *s).unwrap_or(&[]);
    match table.iter().find(|(name, _)| *name == sub) {
        None => err(format!("ERR unknown subcommand '{shown}'. Try {} HELP.", cmd.to_ascii_uppercase())),
        Some((_, arity)) => {
            let n = argv.len() as i32;
            let ok = if *arity >= 0 { n == *arity } else { n >= -arity };
            if ok {
                err(format!("ERR unknown subcommand or wrong number of arguments for '{shown}'. Try {} HELP.", cmd.to_ascii_uppercase()))
            } else {
                err(format!("ERR wrong number of arguments for '{cmd}|{sub}' command"))
            }
        }
    }
}

/// Parses the `numkeys` argument of LMPOP, ZMPOP, SINTERCARD & co. (`args[0]`, keys after it).
pub fn numkeys(args: &[&[u8]]) -> Result<usize, CmdError> {
    let nk = int(args[0]).map_err(|_| err("ERR numkeys should be greater than 0"))?;
    if nk <= 0 {
        return Err(err("ERR numkeys should be greater than 0"));
    }
    let nk = nk as usize;
    if nk > args.len() - 1 {
        return Err(err("ERR Number of keys can't be greater than number of args"));
    }
    Ok(nk)
}

/// Parses a double as Redis's `string2d`/`strtold` do: decimal or exponent forms, `inf`,
/// `+inf`, `-inf`; no NaN, no surrounding spaces.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            if lower.contains("inf") || lower.contains("nan") {
                return None;
            }
            s.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    parse_f64(arg).ok_or(CmdError::NotFloat)
}

/// A blocking command's timeout in seconds (decimals allowed), as a duration.
pub fn timeout(arg: &[u8]) -> Result<Option<std::time::Duration>, CmdError> {
    let t = parse_f64(arg).ok_or(CmdError::BadTimeout)?;
    if t < 0.0 {
        return Err(CmdError::NegativeTimeout);
    }
    if !t.is_finite() || t > 1e12 {
        return Err(CmdError::BadTimeout);
    }
    if t == 0.0 {
        return Ok(None);
    }
    Ok(Some(std::time::Duration::from_secs_f64(t)))
}

/// Resolves a Redis index range (negative from the end) into [start, end] inclusive,
/// or None when empty.
pub fn range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as usize, e as usize))
}

/// Glob-style pattern matching as Redis's `stringmatchlen` (`* ? [abc] [^a] [a-z] \x`).
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    fn eq(a: u8, b: u8, nocase: bool) -> bool {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    }
    fn m(p: &[u8], s: &[u8], nocase: bool, depth: usize) -> bool {
        if depth > 1000 {
            return false;
        }
        let (mut pi, mut si) = (0, 0);
        while pi < p.len() {
            match p[pi] {
                b'*' => {
                    while pi + 1 < p.len() && p[pi + 1] == b'*' {
                        pi += 1;
                    }
                    if pi + 1 == p.len() {
                        return true;
                    }
                    for k in si..=s.len() {
                        if m(&p[pi + 1..], &s[k..], nocase, depth + 1) {
                            return true;
                        }
                    }
                    return false;
                }
                b'?' => {
                    if si >= s.len() {
                        return false;
                    }
                    si += 1;
                }
                b'[' => {
                    if si >= s.len() {
                        return false;
                    }
                    pi += 1;
                    let not = pi < p.len() && p[pi] == b'^';
                    if not {
                        pi += 1;
                    }
                    let mut matched = false;
                    loop {
                        if pi >= p.len() {
                            pi -= 1;
                            break;
                        }
                        if p[pi] == b'\\' && pi + 1 < p.len() {
                            pi += 1;
                            if p[pi] == s[si] {
                                matched = true;
                            }
                        } else if p[pi] == b']' {
                            break;
                        } else if pi + 2 < p.len() && p[pi + 1] == b'-' {
                            let (mut a, mut b) = (p[pi], p[pi + 2]);
                            if a > b {
                                std::mem::swap(&mut a, &mut b);
                            }
                            let c = s[si];
                            let (c, a, b) = if nocase { (c.to_ascii_lowercase(), a.to_ascii_lowercase(), b.to_ascii_lowercase()) } else { (c, a, b) };
                            if c >= a && c <= b {
                                matched = true;
                            }
                            pi += 2;
                        } else if eq(p[pi], s[si], nocase) {
                            matched = true;
                        }
                        pi += 1;
                    }
                    if not {
                        matched = !matched;
                    }
                    if !matched {
                        return false;
                    }
                    si += 1;
                }
                b'\\' if pi + 1 < p.len() => {
                    pi += 1;
                    if si >= s.len() || !eq(p[pi], s[si], nocase) {
                        return false;
                    }
                    si += 1;
                }
                c => {
                    if si >= s.len() || !eq(c, s[si], nocase) {
                        return false;
                    }
                    si += 1;
                }
            }
            pi += 1;
        }
        si == s.len()
    }
    m(pattern, s, nocase, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"user:*:name", b"user:42:name", false));
        assert!(!glob_match(b"user:*:name", b"user:42:age", false));
        assert!(glob_match(b"a\\*b", b"a*b", false));
        assert!(glob_match(b"HELLO", b"hello", true));
    }

    #[test]
    fn ranges() {
        assert_eq!(range(0, -1, 5), Some((0, 4)));
        assert_eq!(range(-100, 100, 5), Some((0, 4)));
        assert_eq!(range(3, 1, 5), None);
        assert_eq!(range(5, 10, 5), None);
        assert_eq!(range(0, -1, 0), None);
    }

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b""), None);
    }
}
