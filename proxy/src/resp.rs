//! RESP reply frames as the proxy sees them: where one complete RESP2/RESP3 value ends in a
//! backend's read buffer, the elements of an aggregate, integers (request encoding is the commands crate's,
//! re-exported).
//!
//! Written by hand: the proxy forwards replies as opaque byte ranges and only needs to know
//! their extent (and, for merged commands, the extent of each element). A decoding crate would
//! build a value tree for every reply just to re-encode it.

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FrameError {
    #[error("unexpected byte {0:#04x} at the start of a reply")]
    BadType(u8),
    #[error("invalid length in a reply header")]
    BadLength,
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        let off = buf.get(i..)?.iter().position(|&b| b == b'\r')?;
        let at = i + off;
        if at + 1 >= buf.len() {
            return None;
        }
        if buf[at + 1] == b'\n' {
            return Some(at);
        }
        i = at + 1;
    }
}

fn parse_len(s: &[u8]) -> Result<i64, FrameError> {
    std::str::from_utf8(s).ok().and_then(|s| s.parse::<i64>().ok()).ok_or(FrameError::BadLength)
}

/// The length of the complete value at the start of `buf`, or `None` when more bytes are needed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    FrameScanner::default().scan(buf)
}

/// Finds where complete values end in a growing buffer, resuming where the previous call
/// stopped, so a large reply arriving in many reads is scanned once.
#[derive(Debug, Default)]
pub struct FrameScanner {
    /// Start of the next unscanned element (relative to the buffer start).
    pos: usize,
    /// Values still to read for the current frame; 0 = between frames.
    remaining: u64,
}

impl FrameScanner {
    /// The length of the complete value at the start of `buf`, or `None` when more bytes are
    /// needed. After `Some`, the caller removes that many bytes before the next call.
    pub fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        if self.remaining == 0 {
            self.pos = 0;
            self.remaining = 1;
        }
        while self.remaining > 0 {
            let pos = self.pos;
            let Some(&kind) = buf.get(pos) else { return Ok(None) };
            let Some(end) = line_end(buf, pos + 1) else { return Ok(None) };
            let header = &buf[pos + 1..end];
            let mut next = end + 2;
            let remaining = self.remaining;
            let remaining = match kind {
                b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(' => remaining - 1,
                b'$' | b'!' | b'=' => {
                    let n = self.fail_on(parse_len(header))?;
                    if n >= 0 {
                        next += n as usize + 2;
                        if buf.len() < next {
                            return Ok(None);
                        }
                    } else if n != -1 {
                        return self.fail(FrameError::BadLength);
                    }
                    remaining - 1
                }
                b'*' | b'~' | b'>' => {
                    let n = self.fail_on(parse_len(header))?;
                    if n < -1 {
                        return self.fail(FrameError::BadLength);
                    }
                    remaining - 1 + n.max(0) as u64
                }
                b'%' => {
                    let n = self.fail_on(parse_len(header))?;
                    if n < 0 {
                        return self.fail(FrameError::BadLength);
                    }
                    remaining - 1 + 2 * n as u64
                }
                // An attribute map precedes the value it describes.
                b'|' => {
                    let n = self.fail_on(parse_len(header))?;
                    if n < 0 {
                        return self.fail(FrameError::BadLength);
                    }
                    remaining + 2 * n as u64
                }
                other => return self.fail(FrameError::BadType(other)),
            };
            self.pos = next;
            self.remaining = remaining;
        }
        let len = self.pos;
        self.pos = 0;
        Ok(Some(len))
    }

    fn fail<T>(&mut self, e: FrameError) -> Result<T, FrameError> {
        self.remaining = 0;
        Err(e)
    }

    fn fail_on<T>(&mut self, r: Result<T, FrameError>) -> Result<T, FrameError> {
        r.or_else(|e| self.fail(e))
    }
}

/// A complete frame's shape, read from its first line.
pub fn is_error(frame: &[u8]) -> bool {
    frame.first() == Some(&b'-') || frame.first() == Some(&b'!')
}

/// The integer of a `:n` frame.
pub fn integer(frame: &[u8]) -> Option<i64> {
    let rest = frame.strip_prefix(b":")?;
    let end = rest.iter().position(|&b| b == b'\r')?;
    parse_len(&rest[..end]).ok()
}

/// The text of a `+…` simple-string frame.
pub fn simple(frame: &[u8]) -> Option<&[u8]> {
    let rest = frame.strip_prefix(b"+")?;
    rest.strip_suffix(b"\r\n")
}

/// The text of an error frame, without its `-` and line end.
pub fn error_text(frame: &[u8]) -> Option<&[u8]> {
    frame.strip_prefix(b"-")?.strip_suffix(b"\r\n")
}

/// The payload of a `$n` (or RESP3 `=n` verbatim) bulk frame; `None` for nulls and other types.
pub fn bulk(frame: &[u8]) -> Option<&[u8]> {
    if !matches!(frame.first(), Some(b'$') | Some(b'=')) {
        return None;
    }
    let end = line_end(frame, 1)?;
    let n = parse_len(&frame[1..end]).ok()?;
    if n < 0 {
        return None;
    }
    frame.get(end + 2..end + 2 + n as usize)
}

/// The elements of a complete array/set/push frame (maps give keys and values in turn);
/// `None` when the frame is not an aggregate (or is a null array).
pub fn elements(frame: &[u8]) -> Option<Vec<&[u8]>> {
    let kind = *frame.first()?;
    if !matches!(kind, b'*' | b'~' | b'>' | b'%') {
        return None;
    }
    let end = line_end(frame, 1)?;
    let mut n = parse_len(&frame[1..end]).ok()?;
    if n < 0 {
        return None;
    }
    if kind == b'%' {
        n *= 2;
    }
    let mut pos = end + 2;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = frame_len(&frame[pos..]).ok()??;
        out.push(&frame[pos..pos + len]);
        pos += len;
    }
    Some(out)
}

pub use terrace_commands::resp::{encode_request, put_bulk, put_header};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_frames() {
        assert_eq!(frame_len(b"+OK\r\n"), Ok(Some(5)));
        assert_eq!(frame_len(b"+OK\r"), Ok(None));
        assert_eq!(frame_len(b":-12\r\n:3"), Ok(Some(6)));
        assert_eq!(frame_len(b"$3\r\nfoo\r\n+"), Ok(Some(9)));
        assert_eq!(frame_len(b"$3\r\nfoo\r"), Ok(None));
        assert_eq!(frame_len(b"$-1\r\n"), Ok(Some(5)));
        assert_eq!(frame_len(b"_\r\n"), Ok(Some(3)));
        assert_eq!(frame_len(b",1.5\r\n"), Ok(Some(6)));
        assert_eq!(frame_len(b"=7\r\ntxt:abc\r\n"), Ok(Some(13)));
        assert_eq!(frame_len(b"$3\r\na\r\n\r\n"), Ok(Some(9)), "payload may contain CRLF");
    }

    #[test]
    fn aggregate_frames() {
        let f = b"*3\r\n$1\r\na\r\n*-1\r\n*2\r\n:1\r\n$-1\r\n";
        assert_eq!(frame_len(f), Ok(Some(f.len())));
        for cut in 0..f.len() {
            assert_eq!(frame_len(&f[..cut]), Ok(None), "cut at {cut}");
        }
        let m = b"%2\r\n+a\r\n:1\r\n+b\r\n*0\r\n";
        assert_eq!(frame_len(m), Ok(Some(m.len())));
        let attr = b"|1\r\n+key\r\n+val\r\n:5\r\n";
        assert_eq!(frame_len(attr), Ok(Some(attr.len())));
        assert_eq!(frame_len(b"*0\r\n"), Ok(Some(4)));
    }

    #[test]
    fn scanner_resumes_across_reads() {
        let f = b"*3\r\n$5\r\nhello\r\n:1\r\n*1\r\n+x\r\n";
        let mut sc = FrameScanner::default();
        for cut in 1..f.len() {
            assert_eq!(sc.scan(&f[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(sc.scan(&f[..]), Ok(Some(f.len())));
        assert_eq!(sc.scan(b"+OK\r\n"), Ok(Some(5)));
    }

    #[test]
    fn malformed_frames_are_errors() {
        assert_eq!(frame_len(b"?x\r\n"), Err(FrameError::BadType(b'?')));
        assert_eq!(frame_len(b"$x\r\n"), Err(FrameError::BadLength));
        assert_eq!(frame_len(b"*-5\r\n"), Err(FrameError::BadLength));
    }

    #[test]
    fn element_access() {
        let f = b"*3\r\n$1\r\na\r\n:7\r\n$-1\r\n";
        let e = elements(f).unwrap();
        assert_eq!(e, vec![&b"$1\r\na\r\n"[..], b":7\r\n", b"$-1\r\n"]);
        assert_eq!(bulk(e[0]), Some(&b"a"[..]));
        assert_eq!(integer(e[1]), Some(7));
        assert_eq!(bulk(e[2]), None);
        assert!(elements(b"*-1\r\n").is_none());
        assert!(is_error(b"-ERR x\r\n"));
    }
}
