//! A minimal pipelined RESP client for the benchmarks: requests are encoded into one buffer,
//! written at once, and the replies skipped over (only errors are kept). Hand-written because
//! a benchmark client must add as little of its own cost as possible and needs no decoding.

use std::io::{Read, Write};
use std::net::TcpStream;

use anyhow::{bail, Context};

pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
    pending: usize,
    pub errors: u64,
    pub last_error: Option<String>,
}

pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(itoa::Buffer::new().format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Client {
    pub fn connect(port: u16) -> anyhow::Result<Client> {
        Self::connect_to(&format!("127.0.0.1:{port}"))
    }

    /// Connects to `addr` (host:port).
    pub fn connect_to(addr: &str) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Client { stream, buf: vec![0; 1 << 20], start: 0, end: 0, out: Vec::with_capacity(1 << 16), pending: 0, errors: 0, last_error: None })
    }

    /// Connects to `addr` with `timeout` for the connection and for every read and write
    /// after it: a request whose reply does not come in time fails (its outcome unknown).
    pub fn connect_with_timeout(addr: &str, timeout: std::time::Duration) -> anyhow::Result<Client> {
        let sock: std::net::SocketAddr = addr.parse().with_context(|| format!("address {addr}"))?;
        let stream = TcpStream::connect_timeout(&sock, timeout).with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Client { stream, buf: vec![0; 1 << 16], start: 0, end: 0, out: Vec::with_capacity(1 << 12), pending: 0, errors: 0, last_error: None })
    }

    /// Sends one request and returns its reply decoded (arrays too: EXEC's).
    pub fn request(&mut self, args: &[&[u8]]) -> anyhow::Result<Reply> {
        encode(&mut self.out, args);
        self.stream.write_all(&self.out)?;
        self.out.clear();
        self.next_reply()
    }

    /// The next reply, decoded.
    fn next_reply(&mut self) -> anyhow::Result<Reply> {
        loop {
            if let Some((reply, len)) = decode(&self.buf[self.start..self.end]) {
                self.start += len;
                return Ok(reply);
            }
            self.fill()?;
        }
    }

    /// Queues one request.
    pub fn push(&mut self, args: &[&[u8]]) {
        encode(&mut self.out, args);
        self.pending += 1;
    }

    /// Sends the queued requests and skips their replies.
    pub fn flush(&mut self) -> anyhow::Result<()> {
        self.stream.write_all(&self.out)?;
        self.out.clear();
        while self.pending > 0 {
            self.skip_reply()?;
            self.pending -= 1;
        }
        Ok(())
    }

    /// Sends the queued requests and answers their replies, decoded, in order.
    pub fn flush_replies(&mut self) -> anyhow::Result<Vec<Reply>> {
        self.stream.write_all(&self.out)?;
        self.out.clear();
        let mut replies = Vec::with_capacity(self.pending);
        while self.pending > 0 {
            replies.push(self.next_reply()?);
            self.pending -= 1;
        }
        Ok(replies)
    }

    /// Sends one request and returns its reply's text (bulk or simple), None for nil.
    pub fn call(&mut self, args: &[&[u8]]) -> anyhow::Result<Option<String>> {
        self.push(args);
        self.stream.write_all(&self.out)?;
        self.out.clear();
        self.pending -= 1;
        let (start, end) = self.reply_span()?;
        let frame = &self.buf[start..end];
        let text = match frame[0] {
            b'$' if frame.starts_with(b"$-1") => None,
            b'$' => {
                let nl = frame.iter().position(|&b| b == b'\n').unwrap_or(0);
                Some(String::from_utf8_lossy(&frame[nl + 1..frame.len() - 2]).into_owned())
            }
            b'-' => bail!("{}", String::from_utf8_lossy(&frame[1..frame.len() - 2])),
            _ => Some(String::from_utf8_lossy(&frame[1..frame.len() - 2]).into_owned()),
        };
        Ok(text)
    }

    fn fill(&mut self) -> anyhow::Result<()> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = self.stream.read(&mut self.buf[self.end..])?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        self.end += n;
        Ok(())
    }

    /// The byte range of the next complete reply (simple, error, integer or bulk), consumed.
    fn reply_span(&mut self) -> anyhow::Result<(usize, usize)> {
        loop {
            if let Some(len) = complete(&self.buf[self.start..self.end]) {
                let span = (self.start, self.start + len);
                self.start += len;
                return Ok(span);
            }
            self.fill()?;
        }
    }

    fn skip_reply(&mut self) -> anyhow::Result<()> {
        let (s, e) = self.reply_span()?;
        if self.buf[s] == b'-' {
            self.errors += 1;
            self.last_error = Some(String::from_utf8_lossy(&self.buf[s + 1..e - 2]).into_owned());
        }
        Ok(())
    }
}

/// A reply, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// The complete reply at the start of `b` and its length, if it is all there.
fn decode(b: &[u8]) -> Option<(Reply, usize)> {
    let nl = b.iter().position(|&c| c == b'\n')?;
    let line = std::str::from_utf8(b.get(1..nl.checked_sub(1)?)?).ok()?;
    let head = nl + 1;
    match b.first()? {
        b'+' => Some((Reply::Status(line.to_string()), head)),
        b'-' => Some((Reply::Error(line.to_string()), head)),
        b':' => Some((Reply::Int(line.parse().ok()?), head)),
        b'$' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((Reply::Bulk(None), head));
            }
            let total = head + n as usize + 2;
            (b.len() >= total).then(|| (Reply::Bulk(Some(b[head..total - 2].to_vec())), total))
        }
        b'*' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((Reply::Array(None), head));
            }
            let mut at = head;
            let mut items = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let (item, len) = decode(&b[at..])?;
                items.push(item);
                at += len;
            }
            Some((Reply::Array(Some(items)), at))
        }
        _ => Some((Reply::Error(format!("unexpected reply {line:?}")), head)),
    }
}

/// Length of the complete reply at the start of `b`, if it is all there.
fn complete(b: &[u8]) -> Option<usize> {
    let nl = b.iter().position(|&c| c == b'\n')?;
    match b.first()? {
        b'$' => {
            let n: i64 = std::str::from_utf8(&b[1..nl - 1]).ok()?.parse().ok()?;
            if n < 0 {
                return Some(nl + 1);
            }
            let total = nl + 1 + n as usize + 2;
            (b.len() >= total).then_some(total)
        }
        _ => Some(nl + 1),
    }
}
