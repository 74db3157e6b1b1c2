//! Incremental parser for client requests: RESP multibulk arrays and inline commands.
//!
//! Written by hand rather than with `redis-protocol`: a server must parse only the request
//! subset (arrays of bulk strings, or inline text), resume a half-received frame without
//! rescanning it, hand out arguments as ranges into the read buffer (no per-argument
//! allocation), and enforce Redis's framing limits with Redis's exact error texts — none of
//! which a general frame decoder does.

use std::ops::Range;

/// Framing limits, as Redis's `proto-max-bulk-len`, inline limit and multibulk limit.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bulk_len: usize,
    pub max_inline_len: usize,
    pub max_args: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk_len: 512 * 1024 * 1024, max_inline_len: 64 * 1024, max_args: 1024 * 1024 * 1024 }
    }
}

/// A protocol violation. The connection is closed after the error is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    #[error("Protocol error: expected '$', got '{0}'")]
    ExpectedDollar(char),
    #[error("Protocol error: too big inline request")]
    TooBigInline,
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCount,
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
}

/// One parsed request: argument ranges into the buffer it was parsed from.
/// `consumed` bytes of the buffer belong to it. Inline requests own their (unescaped) bytes.
#[derive(Debug, Default)]
pub struct Request {
    pub args: Vec<Range<usize>>,
    pub inline: Option<Vec<u8>>,
    pub consumed: usize,
}

impl Request {
    pub fn arg<'a>(&'a self, buf: &'a [u8], i: usize) -> &'a [u8] {
        match &self.inline {
            Some(owned) => &owned[self.args[i].clone()],
            None => &buf[self.args[i].clone()],
        }
    }
}

/// Parser state kept between reads so that a large frame is scanned only once.
#[derive(Debug, Default)]
pub struct RequestParser {
    limits: Limits,
    /// Position of the next unparsed byte of the current multibulk (relative to buffer start).
    pos: usize,
    /// Arguments still expected for the current multibulk, once its header was read.
    remaining: Option<usize>,
    args: Vec<Range<usize>>,
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    // memchr for '\r' then check '\n'; lines in RESP are short.
    let mut i = from;
    while i + 1 < buf.len() {
        match buf[i..].iter().position(|&b| b == b'\r') {
            Some(off) => {
                let at = i + off;
                if at + 1 < buf.len() && buf[at + 1] == b'\n' {
                    return Some(at);
                }
                if at + 1 >= buf.len() {
                    return None;
                }
                i = at + 1;
            }
            None => return None,
        }
    }
    None
}

/// Parses a decimal i64 as Redis's `string2ll` does (no sign on zero, no leading '+', no spaces).
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    if digits.is_empty() || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 || digits == b"0" {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

impl RequestParser {
    /// Changes the largest bulk argument accepted (CONFIG SET proto-max-bulk-len), for the
    /// next request.
    pub fn set_max_bulk_len(&mut self, max: usize) {
        self.limits.max_bulk_len = max;
    }

    pub fn new(limits: Limits) -> Self {
        RequestParser { limits, ..Default::default() }
    }

    /// Forget any partial frame (after the caller consumed or discarded the buffer).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.remaining = None;
        self.args.clear();
    }

    /// Try to parse one request from the start of `buf`. Returns `Ok(None)` when more bytes
    /// are needed; the parser remembers how far it got. Empty requests (`*0`, blank inline
    /// lines) are returned with no arguments so the caller can consume them.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
        if self.remaining.is_none() {
            if buf.is_empty() {
                return Ok(None);
            }
            if buf[0] != b'*' {
                return self.parse_inline(buf);
            }
            let Some(end) = find_crlf(buf, 1) else {
                if buf.len() > self.limits.max_inline_len {
                    return Err(ProtocolError::TooBigMbulkCount);
                }
                return Ok(None);
            };
            let n = parse_i64(&buf[1..end]).ok_or(ProtocolError::InvalidMultibulkLength)?;
            if n > i32::MAX as i64 || n > self.limits.max_args as i64 {
                return Err(ProtocolError::InvalidMultibulkLength);
            }
            if n <= 0 {
                return Ok(Some(Request { args: Vec::new(), inline: None, consumed: end + 2 }));
            }
            self.pos = end + 2;
            self.remaining = Some(n as usize);
            self.args.clear();
            self.args.reserve((n as usize).min(1024));
        }
        while let Some(left) = self.remaining {
            if left == 0 {
                break;
            }
            if self.pos >= buf.len() {
                return Ok(None);
            }
            if buf[self.pos] != b'$' {
                return Err(ProtocolError::ExpectedDollar(buf[self.pos] as char));
            }
            let Some(end) = find_crlf(buf, self.pos + 1) else {
                if buf.len() - self.pos > self.limits.max_inline_len {
                    return Err(ProtocolError::TooBigBulkCount);
                }
                return Ok(None);
            };
            let len = parse_i64(&buf[self.pos + 1..end]).ok_or(ProtocolError::InvalidBulkLength)?;
            if len < 0 || len as u64 > self.limits.max_bulk_len as u64 {
                return Err(ProtocolError::InvalidBulkLength);
            }
            let start = end + 2;
            let stop = start + len as usize;
            if buf.len() < stop + 2 {
                return Ok(None);
            }
            // Redis does not check the trailing CRLF's content, it just skips two bytes.
            self.args.push(start..stop);
            self.pos = stop + 2;
            self.remaining = Some(left - 1);
        }
        let req = Request { args: std::mem::take(&mut self.args), inline: None, consumed: self.pos };
        self.reset();
        Ok(Some(req))
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
        let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
            if buf.len() > self.limits.max_inline_len {
                return Err(ProtocolError::TooBigInline);
            }
            return Ok(None);
        };
        let mut line = &buf[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        let parts = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
        let mut owned = Vec::with_capacity(line.len());
        let mut args = Vec::with_capacity(parts.len());
        for p in parts {
            let s = owned.len();
            owned.extend_from_slice(&p);
            args.push(s..owned.len());
        }
        Ok(Some(Request { args, inline: Some(owned), consumed: nl + 1 }))
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline command line into arguments with the quoting rules of Redis's
/// `sdssplitargs`: double quotes with `\n \r \t \b \a \\ \" \xHH` escapes, single quotes
/// with `\'`, and a closing quote must be followed by a space or the end of the line.
/// Returns `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex_val(line[i + 2]), hex_val(line[i + 3])) {
                        cur.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    let e = match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    };
                    cur.push(e);
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    cur.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else {
                if i >= n {
                    break;
                }
                let c = line[i];
                if c.is_ascii_whitespace() {
                    break;
                }
                if c == b'"' {
                    in_dq = true;
                } else if c == b'\'' {
                    in_sq = true;
                } else {
                    cur.push(c);
                }
                i += 1;
            }
        }
        out.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(buf: &[u8], r: &Request) -> Vec<Vec<u8>> {
        (0..r.args.len()).map(|i| r.arg(buf, i).to_vec()).collect()
    }

    #[test]
    fn parses_multibulk_and_pipelines() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        let mut p = RequestParser::default();
        let r = p.parse(buf).unwrap().unwrap();
        assert_eq!(args(buf, &r), vec![b"GET".to_vec(), b"k".to_vec()]);
        let rest = &buf[r.consumed..];
        let r2 = p.parse(rest).unwrap().unwrap();
        assert_eq!(args(rest, &r2), vec![b"PING".to_vec()]);
        assert_eq!(r2.consumed, rest.len());
    }

    #[test]
    fn resumes_partial_frames_at_every_split() {
        let buf = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n";
        for cut in 0..buf.len() {
            let mut p = RequestParser::default();
            assert!(p.parse(&buf[..cut]).unwrap().is_none(), "cut {cut}");
            let r = p.parse(buf).unwrap().unwrap();
            assert_eq!(args(buf, &r)[2], b"va\r\nl".to_vec());
            assert_eq!(r.consumed, buf.len());
        }
    }

    #[test]
    fn protocol_errors_use_redis_texts() {
        let mut p = RequestParser::default();
        assert_eq!(p.parse(b"*x\r\n").unwrap_err().to_string(), "Protocol error: invalid multibulk length");
        let mut p = RequestParser::default();
        assert_eq!(p.parse(b"*1\r\n+foo\r\n").unwrap_err().to_string(), "Protocol error: expected '$', got '+'");
        let mut p = RequestParser::default();
        assert_eq!(p.parse(b"*1\r\n$-5\r\n").unwrap_err().to_string(), "Protocol error: invalid bulk length");
        let mut p = RequestParser::new(Limits { max_bulk_len: 10, ..Limits::default() });
        assert_eq!(p.parse(b"*1\r\n$11\r\n").unwrap_err(), ProtocolError::InvalidBulkLength);
        let mut p = RequestParser::default();
        let big = vec![b'a'; 70 * 1024];
        assert_eq!(p.parse(&big).unwrap_err(), ProtocolError::TooBigInline);
        let mut p = RequestParser::default();
        assert_eq!(p.parse(b"set \"a\"b c\r\n").unwrap_err(), ProtocolError::UnbalancedQuotes);
    }

    #[test]
    fn inline_commands_with_quotes() {
        let buf = b"SET  \"a b\\x41\\n\" 'it\\'s'\r\n";
        let mut p = RequestParser::default();
        let r = p.parse(buf).unwrap().unwrap();
        assert_eq!(args(buf, &r), vec![b"SET".to_vec(), b"a bA\n".to_vec(), b"it's".to_vec()]);
        let mut p = RequestParser::default();
        let r = p.parse(b"\r\n").unwrap().unwrap();
        assert!(r.args.is_empty());
        assert_eq!(r.consumed, 2);
    }

    #[test]
    fn empty_multibulk_is_skipped() {
        let mut p = RequestParser::default();
        let r = p.parse(b"*0\r\n").unwrap().unwrap();
        assert!(r.args.is_empty());
        assert_eq!(r.consumed, 4);
    }

    #[test]
    fn integers_parse_like_string2ll() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"007"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"0"), Some(0));
    }
}
