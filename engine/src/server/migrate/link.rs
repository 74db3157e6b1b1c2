//! The migration's connection to the target engine: a blocking socket, requests written in
//! batches, their replies read back in order. Hand-written as the follower's link is: a
//! thread of its own drives it, and it needs four reply types of RESP and nothing else.

use std::io::{Read, Write};
use std::time::Duration;

use bytes::{Buf, BytesMut};

use crate::config::TlsConfig;
use crate::server::socket::StdSocket;

/// How long the target may take to answer.
const REPLY_WAIT: Duration = Duration::from_secs(30);
/// How long a batch is sent again while the target answers OOM.
const OOM_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("the target engine {addr}: {source}")]
    Io { addr: String, source: std::io::Error },
    #[error("the target engine {addr} answered {reply} to {command}")]
    Refused { addr: String, command: String, reply: String },
    #[error("the target engine {addr} sent a reply this link does not read")]
    Garbled { addr: String },
}

/// One reply.
#[derive(Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
}

pub struct Link {
    addr: String,
    stream: StdSocket,
    out: BytesMut,
    input: BytesMut,
    /// Requests written whose replies were not read yet, named for errors.
    waiting: std::collections::VecDeque<String>,
    /// The namespace and database the connection is in (None: not chosen yet).
    place: Option<(String, usize)>,
}

impl Link {
    /// Connects and authenticates with `password` (the engines' one) when given.
    pub fn open(tls: &TlsConfig, addr: &str, password: Option<&str>) -> Result<Link, LinkError> {
        let io = |source| LinkError::Io { addr: addr.to_string(), source };
        let (host, port) =
            addr.rsplit_once(':').and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?))).ok_or_else(|| io(std::io::Error::other("not host:port")))?;
        // (Over TLS with `tls_cluster`.)
        let stream = crate::server::tls::connect(
            tls,
            crate::server::tls::Link::Cluster,
            host.trim_start_matches('[').trim_end_matches(']'),
            port,
            Duration::from_secs(5),
        )
        .map_err(io)?;
        stream.set_read_timeout(Some(REPLY_WAIT)).map_err(io)?;
        let mut link = Link { addr: addr.to_string(), stream, out: BytesMut::new(), input: BytesMut::new(), waiting: Default::default(), place: None };
        if let Some(p) = password {
            link.call(&[b"AUTH", p.as_bytes()])?;
        }
        Ok(link)
    }

    /// Queues a request (written at the next `flush`).
    pub fn send(&mut self, argv: &[&[u8]]) {
        terrace_commands::resp::encode_request(&mut self.out, argv);
        self.waiting.push_back(String::from_utf8_lossy(argv[0]).into_owned());
    }

    /// Writes what is queued and reads every reply, failing on an error reply — except
    /// the target's OOM (write-back keys not flushed yet fill its memory), on which the
    /// whole batch is sent again a little later (what it holds is idempotent: imports of
    /// distinct keys, deletions), for up to `OOM_WAIT`.
    pub fn flush(&mut self) -> Result<(), LinkError> {
        // The batch stays in `out` (and its names in `waiting`) until every reply is read,
        // so it can be sent again as it is; it is dropped either way once this is done.
        let outcome = self.send_batch();
        self.out.clear();
        self.waiting.clear();
        outcome
    }

    fn send_batch(&mut self) -> Result<(), LinkError> {
        let deadline = std::time::Instant::now() + OOM_WAIT;
        loop {
            self.stream.write_all(&self.out).map_err(|source| LinkError::Io { addr: self.addr.clone(), source })?;
            let (mut full, mut refused) = (None, None);
            for i in 0..self.waiting.len() {
                match self.read_reply()? {
                    Reply::Error(e) if e.starts_with("OOM") => full = Some((i, e)),
                    Reply::Error(e) => refused = refused.or(Some((i, e))),
                    _ => {}
                }
            }
            let out_of_time = std::time::Instant::now() >= deadline;
            let failed = match (refused, full) {
                (Some(r), _) => r,
                (None, Some(f)) if out_of_time => f,
                (None, None) => return Ok(()),
                (None, Some(_)) => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            };
            return Err(LinkError::Refused { addr: self.addr.clone(), command: self.waiting[failed.0].clone(), reply: failed.1 });
        }
    }

    fn write(&mut self) -> Result<(), LinkError> {
        if !self.out.is_empty() {
            let addr = self.addr.clone();
            self.stream.write_all(&self.out).map_err(|source| LinkError::Io { addr, source })?;
            self.out.clear();
        }
        Ok(())
    }

    fn expect_ok(&mut self) -> Result<Reply, LinkError> {
        let command = self.waiting.pop_front().unwrap_or_default();
        match self.read_reply()? {
            Reply::Error(e) => Err(LinkError::Refused { addr: self.addr.clone(), command, reply: e }),
            r => Ok(r),
        }
    }

    /// Sends one request (after whatever is queued) and returns its reply.
    pub fn call(&mut self, argv: &[&[u8]]) -> Result<Reply, LinkError> {
        self.send(argv);
        self.write()?;
        while self.waiting.len() > 1 {
            self.expect_ok()?;
        }
        self.expect_ok()
    }

    /// Moves the connection into a namespace's database (`""` is the default namespace),
    /// queued before the next request; nothing if it is there already.
    pub fn place(&mut self, namespace: &str, db: usize) {
        if self.place.as_ref().is_some_and(|(n, d)| n == namespace && *d == db) {
            return;
        }
        if self.place.as_ref().is_none_or(|(n, _)| n != namespace) {
            let name = if namespace.is_empty() { "default" } else { namespace };
            self.send(&[b"TERRACE.NAMESPACE", name.as_bytes()]);
        }
        self.send(&[b"SELECT", db.to_string().as_bytes()]);
        self.place = Some((namespace.to_string(), db));
    }

    fn read_reply(&mut self) -> Result<Reply, LinkError> {
        loop {
            if let Some((reply, used)) = parse(&self.input).map_err(|()| LinkError::Garbled { addr: self.addr.clone() })? {
                self.input.advance(used);
                return Ok(reply);
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk).map_err(|source| LinkError::Io { addr: self.addr.clone(), source })?;
            if n == 0 {
                let source = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed the connection");
                return Err(LinkError::Io { addr: self.addr.clone(), source });
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
    }
}

/// One reply from the start of `b`, and the bytes it took; None while incomplete.
fn parse(b: &[u8]) -> Result<Option<(Reply, usize)>, ()> {
    let Some(end) = b.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
    let line = std::str::from_utf8(&b[1..end]).map_err(|_| ())?;
    let after = end + 2;
    Ok(Some(match b.first() {
        Some(b'+') => (Reply::Simple(line.to_string()), after),
        Some(b'-') => (Reply::Error(line.to_string()), after),
        Some(b':') => (Reply::Int(line.parse().map_err(|_| ())?), after),
        Some(b'$') => {
            let len: i64 = line.parse().map_err(|_| ())?;
            if len < 0 {
                (Reply::Bulk(None), after)
            } else {
                let len = len as usize;
                if b.len() < after + len + 2 {
                    return Ok(None);
                }
                (Reply::Bulk(Some(b[after..after + len].to_vec())), after + len + 2)
            }
        }
        _ => return Err(()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_whole_or_not_at_all() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Some((Reply::Simple("OK".into()), 5)));
        assert_eq!(parse(b"-ERR no\r\n+OK").unwrap(), Some((Reply::Error("ERR no".into()), 9)));
        assert_eq!(parse(b":12\r\n").unwrap(), Some((Reply::Int(12), 5)));
        assert_eq!(parse(b"$3\r\nab").unwrap(), None);
        assert_eq!(parse(b"$3\r\nabc\r\n").unwrap(), Some((Reply::Bulk(Some(b"abc".to_vec())), 9)));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Some((Reply::Bulk(None), 5)));
        assert_eq!(parse(b"+O").unwrap(), None);
        assert!(parse(b"*1\r\n").is_err());
    }
}
