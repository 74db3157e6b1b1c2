//! A look ahead at pipelined requests not parsed yet: each complete multibulk request's
//! command name and first argument, without allocating or copying, so that the engine can
//! prefetch the keys of a batch before it runs it (`Keyspace::prefetch`).
//!
//! Written by hand: it is a hint, so it only recognizes the well-formed multibulk form and
//! stops at anything else (an inline request, a frame not complete yet, a malformed one),
//! leaving every error to `RequestParser`. No RESP crate offers a scan that borrows only
//! the first two arguments and skips the rest.

/// One request seen ahead.
#[derive(Debug, PartialEq, Eq)]
pub struct Peeked<'a> {
    pub name: &'a [u8],
    /// The first argument after the name, if any.
    pub first: Option<&'a [u8]>,
}

/// The requests at the start of `buf`, in order, until one is not a complete multibulk.
pub fn peek_requests(buf: &[u8]) -> impl Iterator<Item = Peeked<'_>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let (peeked, len) = peek_one(&buf[at..])?;
        at += len;
        Some(peeked)
    })
}

/// The request at the start of `buf` and its length in bytes.
fn peek_one(buf: &[u8]) -> Option<(Peeked<'_>, usize)> {
    let (count, mut at) = header(buf, b'*')?;
    if count == 0 {
        return None;
    }
    let mut name: &[u8] = &[];
    let mut first = None;
    for i in 0..count {
        let (len, start) = header(&buf[at..], b'$')?;
        let start = at + start;
        let end = start.checked_add(len)?;
        if buf.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        match i {
            0 => name = &buf[start..end],
            1 => first = Some(&buf[start..end]),
            _ => {}
        }
        at = end + 2;
    }
    Some((Peeked { name, first }, at))
}

/// `<marker><decimal>\r\n` at the start of `buf`: the number and the length of the line.
fn header(buf: &[u8], marker: u8) -> Option<(usize, usize)> {
    if *buf.first()? != marker {
        return None;
    }
    let mut n: usize = 0;
    for (i, &b) in buf.iter().enumerate().skip(1).take(20) {
        match b {
            b'0'..=b'9' => n = n.checked_mul(10)?.checked_add(usize::from(b - b'0'))?,
            b'\r' if i > 1 => return (buf.get(i + 1) == Some(&b'\n')).then_some((n, i + 2)),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(buf: &[u8]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        peek_requests(buf).map(|p| (p.name.to_vec(), p.first.map(|f| f.to_vec()))).collect()
    }

    #[test]
    fn sees_each_complete_request_in_order() {
        let buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$2\r\nk2\r\n";
        assert_eq!(names(buf), vec![(b"SET".to_vec(), Some(b"k".to_vec())), (b"PING".to_vec(), None), (b"GET".to_vec(), Some(b"k2".to_vec()))]);
    }

    #[test]
    fn stops_at_an_incomplete_request() {
        let full = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
        let mut buf = full.to_vec();
        buf.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$5\r\nab");
        assert_eq!(names(&buf).len(), 1);
        for cut in 0..full.len() {
            assert!(names(&full[..cut]).is_empty(), "cut at {cut}");
        }
    }

    #[test]
    fn stops_at_inline_or_malformed_input() {
        assert!(names(b"PING\r\n").is_empty());
        assert!(names(b"*0\r\n").is_empty());
        assert!(names(b"*1\r\n$3\r\nGETXX").is_empty(), "no CRLF after the bulk");
        assert!(names(b"*1\r\n$-1\r\n").is_empty());
        assert!(names(b"*\r\n").is_empty());
        assert!(names(b"*99999999999999999999999\r\n").is_empty());
        assert!(names(b"*1\r\n$18446744073709551615\r\nx\r\n").is_empty(), "a length that overflows");
    }
}
