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

/// A RESTORE (or FUNCTION RESTORE) payload that does not decode answers the codec's error.
impl From<crate::rdb::RdbError> for CmdError {
    fn from(e: crate::rdb::RdbError) -> Self {
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

pub use terrace_commands::SUBCOMMANDS;

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
            if terrace_commands::arity_fits(*arity, argv.len()) {
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

pub use terrace_commands::numbers::parse_f64;

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

pub use terrace_commands::glob::glob_match;

#[cfg(test)]
mod tests {
    use super::*;

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
