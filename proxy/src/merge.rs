//! Combining the replies of a command that was split over several engines (MGET, MSET, DEL…)
//! or sent to all of them (KEYS, DBSIZE, FLUSHALL…) into the one reply the client expects.

use bytes::{BufMut, BytesMut};

use crate::resp;

#[derive(Debug, Clone)]
pub enum Merge {
    /// Integer replies added up (DEL, EXISTS, UNLINK, TOUCH, DBSIZE).
    Sum,
    /// The first error, else the first part's reply (MSET, FLUSHALL, SCRIPT LOAD, CONFIG SET).
    AllOk,
    /// The first success, else the first error (SCRIPT KILL: only the busy engine succeeds).
    AnyOk,
    /// Arrays of per-engine sub-requests put back in request order: `positions[i]` is
    /// (part, index in that part's array) of the i-th key (MGET).
    Positional(Vec<(u16, u32)>),
    /// Arrays concatenated (KEYS).
    Concat,
    /// The smallest integer (WAIT: the replicas every engine's writes reached).
    Min,
    /// The first non-null reply (RANDOMKEY; parts are asked in a random rotation).
    FirstNonNull,
    /// SCAN replies from engines `engine`, `engine + 1`, … of `engines`: their keys up to the
    /// first engine not finished, whose cursor (encoding the engine) is returned.
    Scan { engine: usize, engines: usize },
}

fn first_error<'a>(parts: &[&'a [u8]]) -> Option<&'a [u8]> {
    parts.iter().copied().find(|p| resp::is_error(p))
}

fn unexpected(out: &mut BytesMut, what: &str) {
    out.put_slice(format!("-ERR unexpected reply from an engine to a {what}\r\n").as_bytes());
}

/// Writes the merged reply of `parts` (complete frames, one per engine request) to `out`.
pub fn merge(kind: &Merge, parts: &[&[u8]], out: &mut BytesMut) {
    if let Some(e) = first_error(parts) {
        if !matches!(kind, Merge::AnyOk) {
            out.put_slice(e);
            return;
        }
    }
    match kind {
        Merge::Sum => {
            let mut sum = 0i64;
            for p in parts {
                match resp::integer(p) {
                    Some(n) => sum = sum.saturating_add(n),
                    None => return unexpected(out, "counting command"),
                }
            }
            out.put_u8(b':');
            let mut b = itoa::Buffer::new();
            out.put_slice(b.format(sum).as_bytes());
            out.put_slice(b"\r\n");
        }
        Merge::Min => match parts.iter().map(|p| resp::integer(p)).collect::<Option<Vec<i64>>>() {
            Some(counts) => {
                out.put_u8(b':');
                let mut b = itoa::Buffer::new();
                out.put_slice(b.format(counts.into_iter().min().unwrap_or(0)).as_bytes());
                out.put_slice(b"\r\n");
            }
            None => unexpected(out, "WAIT"),
        },
        Merge::AllOk => out.put_slice(parts[0]),
        Merge::AnyOk => out.put_slice(parts.iter().find(|p| !resp::is_error(p)).unwrap_or(&parts[0])),
        Merge::Positional(positions) => {
            let arrays: Option<Vec<Vec<&[u8]>>> = parts.iter().map(|p| resp::elements(p)).collect();
            let Some(arrays) = arrays else { return unexpected(out, "multi-key read") };
            let mut body = BytesMut::new();
            for &(part, idx) in positions {
                match arrays.get(part as usize).and_then(|a| a.get(idx as usize)) {
                    Some(e) => body.put_slice(e),
                    None => return unexpected(out, "multi-key read"),
                }
            }
            resp::put_header(out, b'*', positions.len());
            out.put_slice(&body);
        }
        Merge::Concat => {
            let arrays: Option<Vec<Vec<&[u8]>>> = parts.iter().map(|p| resp::elements(p)).collect();
            let Some(arrays) = arrays else { return unexpected(out, "key listing") };
            let kind = parts.first().and_then(|p| p.first()).copied().unwrap_or(b'*');
            resp::put_header(out, kind, arrays.iter().map(|a| a.len()).sum());
            for e in arrays.iter().flatten() {
                out.put_slice(e);
            }
        }
        Merge::FirstNonNull => {
            let found = parts.iter().find(|p| resp::bulk(p).is_some());
            out.put_slice(found.unwrap_or(&parts[0]));
        }
        Merge::Scan { engine, engines } => {
            // parts[i] answered SCAN on engine `engine + i` (its own cursor for the first, 0
            // for the rest): keys are taken up to the first engine not finished.
            let mut keys: Vec<&[u8]> = Vec::new();
            let mut next: u128 = 0;
            for (i, p) in parts.iter().enumerate() {
                let Some(el) = resp::elements(p).filter(|e| e.len() == 2) else {
                    return unexpected(out, "SCAN");
                };
                let cursor = resp::bulk(el[0]).and_then(|c| std::str::from_utf8(c).ok()?.parse::<u64>().ok());
                let (Some(cursor), Some(batch)) = (cursor, resp::elements(el[1])) else {
                    return unexpected(out, "SCAN");
                };
                keys.extend(batch);
                if cursor != 0 {
                    next = cursor as u128 * *engines as u128 + (*engine + i) as u128;
                    break;
                }
            }
            resp::put_header(out, b'*', 2);
            resp::put_bulk(out, next.to_string().as_bytes());
            resp::put_header(out, b'*', keys.len());
            for k in keys {
                out.put_slice(k);
            }
        }
    }
}

/// Splits a proxy SCAN cursor into (engine, the engine's own cursor).
pub fn decode_scan_cursor(cursor: u128, engines: usize) -> (usize, u128) {
    ((cursor % engines as u128) as usize, cursor / engines as u128)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: Merge, parts: &[&[u8]]) -> String {
        let mut out = BytesMut::new();
        merge(&kind, parts, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn sums_and_errors() {
        assert_eq!(run(Merge::Sum, &[b":2\r\n", b":3\r\n"]), ":5\r\n");
        assert_eq!(run(Merge::Sum, &[b":2\r\n", b"-ERR down\r\n"]), "-ERR down\r\n");
        assert_eq!(run(Merge::AllOk, &[b"+OK\r\n", b"+OK\r\n"]), "+OK\r\n");
        assert_eq!(run(Merge::AnyOk, &[b"-NOTBUSY x\r\n", b"+OK\r\n"]), "+OK\r\n");
        assert_eq!(run(Merge::AnyOk, &[b"-NOTBUSY x\r\n", b"-NOTBUSY y\r\n"]), "-NOTBUSY x\r\n");
        assert_eq!(run(Merge::Min, &[b":2\r\n", b":1\r\n", b":3\r\n"]), ":1\r\n");
        assert_eq!(run(Merge::Min, &[b":2\r\n", b"-ERR x\r\n"]), "-ERR x\r\n");
    }

    #[test]
    fn positional_restores_request_order() {
        // MGET a b c with a, c on engine 0 (part 0) and b on engine 1 (part 1).
        let p0: &[u8] = b"*2\r\n$2\r\nva\r\n$-1\r\n";
        let p1: &[u8] = b"*1\r\n$2\r\nvb\r\n";
        let got = run(Merge::Positional(vec![(0, 0), (1, 0), (0, 1)]), &[p0, p1]);
        assert_eq!(got, "*3\r\n$2\r\nva\r\n$2\r\nvb\r\n$-1\r\n");
    }

    #[test]
    fn concat_and_random() {
        assert_eq!(run(Merge::Concat, &[b"*1\r\n$1\r\na\r\n", b"*0\r\n", b"*1\r\n$1\r\nb\r\n"]), "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
        assert_eq!(run(Merge::FirstNonNull, &[b"$-1\r\n", b"$1\r\nk\r\n"]), "$1\r\nk\r\n");
        assert_eq!(run(Merge::FirstNonNull, &[b"$-1\r\n", b"$-1\r\n"]), "$-1\r\n");
    }

    #[test]
    fn scan_cursors_walk_every_engine() {
        let r = |engine, replies: &[&[u8]]| run(Merge::Scan { engine, engines: 3 }, replies);
        // Engine 0 not finished: its cursor, encoded, and only its keys.
        assert_eq!(r(0, &[b"*2\r\n$2\r\n17\r\n*0\r\n", b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nx\r\n"]), "*2\r\n$2\r\n51\r\n*0\r\n");
        assert_eq!(decode_scan_cursor(51, 3), (0, 17));
        // Engine 0 finished: engine 1's first batch joins, and its cursor is next.
        let got = r(0, &[b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nk\r\n", b"*2\r\n$1\r\n5\r\n*1\r\n$1\r\nm\r\n", b"*2\r\n$1\r\n0\r\n*0\r\n"]);
        assert_eq!(got, "*2\r\n$2\r\n16\r\n*2\r\n$1\r\nk\r\n$1\r\nm\r\n");
        assert_eq!(decode_scan_cursor(16, 3), (1, 5));
        // All finished: cursor 0.
        assert_eq!(r(2, &[b"*2\r\n$1\r\n0\r\n*0\r\n"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    }
}
