//! The replication backlog: the master's command stream as bytes, numbered by offset as
//! Redis numbers it (`master_repl_offset` is the number of bytes ever appended). Replicas
//! read from it at their own positions; it keeps what the slowest connected replica has
//! not read yet (up to a hard limit past which that replica is dropped) and, for partial
//! resynchronization after a disconnection, at least the last `repl-backlog-size` bytes.
//!
//! Written by hand: a byte ring with per-reader positions is a few dozen lines, and none of
//! the channel crates lets a late reader start from an arbitrary past offset.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Condvar;
use terrace_commands::resp::encode_request;

use crate::keyspace::NUM_DBS;
use crate::lock_order::{Rank, Ranked};

/// What a replica may fall behind by before it is dropped (Redis's default
/// `client-output-buffer-limit replica 256mb`).
pub const REPLICA_LAG_LIMIT: u64 = 256 << 20;

#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// Bytes from the position asked for.
    Bytes(Vec<u8>),
    /// Nothing new within the wait.
    Nothing,
    /// The position is no longer (or not yet) in the backlog.
    Gone,
}

struct Inner {
    buf: VecDeque<u8>,
    /// Offset of `buf[0]`: bytes before it are gone.
    start: u64,
    /// Keep at least this many bytes for partial resynchronization.
    keep: usize,
    /// Where each connected replica reads next (by replica id).
    readers: HashMap<u64, u64>,
    /// The database the stream's last command ran in (None: the next one says SELECT).
    selected: Option<usize>,
    /// Readers waiting for bytes (an append wakes them only if there are some).
    waiting: usize,
    /// Reused for each append's bytes.
    scratch: Vec<u8>,
}

impl Inner {
    fn end(&self) -> u64 {
        self.start + self.buf.len() as u64
    }

    /// Drops what no reader needs and partial resync does not keep, but never keeps more
    /// than `keep + REPLICA_LAG_LIMIT` (a reader behind that is dropped on its next read).
    fn trim(&mut self) {
        let end = self.end();
        let slowest = self.readers.values().copied().min().unwrap_or(end);
        let by_keep = end.saturating_sub(self.keep as u64);
        let by_limit = end.saturating_sub(self.keep as u64 + REPLICA_LAG_LIMIT);
        let new_start = slowest.min(by_keep).max(by_limit).max(self.start);
        let drop = (new_start - self.start) as usize;
        if drop > 0 {
            self.buf.drain(..drop);
            self.start = new_start;
        }
    }
}

/// Names a namespace by its index (the stream switches namespaces by name: a replica may
/// number them otherwise).
pub type Names<'a> = &'a dyn Fn(usize) -> Option<String>;

/// Commands being added to the stream.
pub struct Stream<'a> {
    bytes: Vec<u8>,
    /// The physical database the stream is in (None: unknown to a replica starting here).
    selected: Option<usize>,
    /// For a stream of every namespace (Terrace replicas): a change of namespace is sent as
    /// `TERRACE.NAMESPACE <name>`. None: the default namespace's databases only.
    names: Option<Names<'a>>,
}

impl Stream<'_> {
    /// Makes the stream's database `db` (SELECT, after TERRACE.NAMESPACE for another
    /// namespace). False if the stream cannot carry it.
    pub fn select(&mut self, db: usize) -> bool {
        if self.selected == Some(db) {
            return true;
        }
        let (ns, logical) = (db / NUM_DBS, db % NUM_DBS);
        if self.selected.is_none_or(|s| s / NUM_DBS != ns) {
            match (self.names, ns) {
                (None, 0) => {}
                (None, _) => return false,
                (Some(names), _) => {
                    let Some(name) = names(ns) else { return false };
                    let name = if ns == 0 { "default".to_string() } else { name };
                    encode_request(&mut self.bytes, &[b"TERRACE.NAMESPACE".as_slice(), name.as_bytes()]);
                }
            }
        }
        encode_request(&mut self.bytes, &[b"SELECT".as_slice(), logical.to_string().as_bytes()]);
        self.selected = Some(db);
        true
    }

    /// A command that runs in database `db`.
    pub fn command<A: AsRef<[u8]>>(&mut self, db: usize, argv: &[A]) {
        if self.select(db) {
            encode_request(&mut self.bytes, argv);
        }
    }

    /// A storage-backed key's after-image in database `db`: `TERRACE.WB key [record]` (no
    /// record: it is gone).
    pub fn after_image(&mut self, db: usize, key: &[u8], record: Option<&[u8]>) {
        match record {
            Some(r) => self.command(db, &[crate::storage::WB_RECORD, key, r]),
            None => self.command(db, &[crate::storage::WB_RECORD, key]),
        }
    }

    /// A command that runs in no database (MULTI, EXEC).
    pub fn word(&mut self, word: &str) {
        encode_request(&mut self.bytes, &[word]);
    }
}

pub struct Backlog {
    inner: Ranked<Inner>,
    grew: Condvar,
    /// Bytes were appended while a reader waited, and it was not woken yet: `publish` wakes
    /// it. (A commit does not wake the sender itself: with a pipeline, that would be a
    /// context switch and a small socket write per command. The connection publishes once
    /// per batch, before its replies go out, as Redis writes to its replicas once per
    /// event-loop turn.)
    unpublished: AtomicBool,
}

impl Backlog {
    /// A backlog that begins at offset `start`, keeping `keep` bytes.
    pub fn new(start: u64, keep: usize) -> Backlog {
        let inner = Inner { buf: VecDeque::new(), start, keep, readers: HashMap::new(), selected: None, waiting: 0, scratch: Vec::new() };
        Backlog { inner: Ranked::new(Rank::Backlog, inner), grew: Condvar::new(), unpublished: AtomicBool::new(false) }
    }

    /// The master replication offset: every byte ever appended.
    pub fn offset(&self) -> u64 {
        self.inner.lock().end()
    }

    /// (first byte kept, bytes kept), as INFO's `repl_backlog_first_byte_offset` and
    /// `repl_backlog_histlen` (the first byte's offset counts from 1).
    pub fn span(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        (inner.start + 1, inner.buf.len() as u64)
    }

    pub fn set_keep(&self, keep: usize) {
        let mut inner = self.inner.lock();
        inner.keep = keep;
        inner.trim();
    }

    /// Appends what `write` puts in the stream (one commit's commands), in one piece; the
    /// readers see it once it is published. Returns the offset after them.
    pub fn append(&self, names: Option<Names>, write: impl FnOnce(&mut Stream)) -> u64 {
        let mut inner = self.inner.lock();
        let mut stream = Stream { bytes: std::mem::take(&mut inner.scratch), selected: inner.selected, names };
        write(&mut stream);
        inner.selected = stream.selected;
        let mut bytes = stream.bytes;
        inner.buf.extend(bytes.iter());
        bytes.clear();
        inner.scratch = bytes;
        inner.trim();
        let end = inner.end();
        if inner.waiting > 0 {
            self.unpublished.store(true, Ordering::Release);
        }
        end
    }

    /// Wakes the readers waiting for what was appended since they last read.
    #[inline]
    pub fn publish(&self) {
        if self.unpublished.load(Ordering::Relaxed) && self.unpublished.swap(false, Ordering::AcqRel) {
            self.grew.notify_all();
        }
    }

    /// Appends bytes that run in no database (REPLCONF GETACK, PING) and publishes them.
    pub fn append_raw(&self, bytes: &[u8]) -> u64 {
        let end = self.append(None, |s| s.bytes.extend_from_slice(bytes));
        self.publish();
        end
    }

    /// Starts again at `offset`, empty (a replica's mirror after a full sync); readers go.
    pub fn reset(&self, offset: u64) {
        let mut inner = self.inner.lock();
        inner.buf.clear();
        inner.start = offset;
        inner.readers.clear();
        inner.selected = None;
    }

    /// The database the stream is in at its end (None: not known).
    pub fn selected(&self) -> Option<usize> {
        self.inner.lock().selected
    }

    /// Makes the next command say SELECT (a new replica starts from here without knowing
    /// the stream's database).
    pub fn forget_selected(&self) {
        self.inner.lock().selected = None;
    }

    /// Registers replica `id` reading from offset `at`; false if `at` is not in the
    /// backlog (partial resynchronization is not possible from there).
    pub fn attach(&self, id: u64, at: u64) -> bool {
        let mut inner = self.inner.lock();
        if at < inner.start || at > inner.end() {
            return false;
        }
        inner.readers.insert(id, at);
        true
    }

    pub fn detach(&self, id: u64) {
        let mut inner = self.inner.lock();
        inner.readers.remove(&id);
        inner.trim();
    }

    /// Up to `max` bytes for replica `id` from its position (waiting up to `wait` for some),
    /// moving its position past them.
    pub fn read(&self, id: u64, max: usize, wait: Duration) -> Read {
        let mut inner = self.inner.lock();
        let Some(&at) = inner.readers.get(&id) else { return Read::Gone };
        if at < inner.start {
            inner.readers.remove(&id);
            inner.trim();
            return Read::Gone;
        }
        if at == inner.end() {
            inner.waiting += 1;
            inner.wait_for(&self.grew, wait);
            inner.waiting -= 1;
            if inner.readers.get(&id) != Some(&at) || at < inner.start {
                inner.readers.remove(&id);
                inner.trim();
                return Read::Gone;
            }
            if at == inner.end() {
                return Read::Nothing;
            }
        }
        let from = (at - inner.start) as usize;
        let n = (inner.buf.len() - from).min(max);
        let (a, b) = inner.buf.as_slices();
        let mut out = Vec::with_capacity(n);
        if from < a.len() {
            let take = n.min(a.len() - from);
            out.extend_from_slice(&a[from..from + take]);
            out.extend_from_slice(&b[..n - take]);
        } else {
            out.extend_from_slice(&b[from - a.len()..from - a.len() + n]);
        }
        inner.readers.insert(id, at + n as u64);
        inner.trim();
        Read::Bytes(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_every_byte_and_a_select_starts_each_database() {
        let b = Backlog::new(100, 1 << 20);
        let end = b.append(None, |s| s.command(0, &["PING"]));
        let select = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n";
        assert_eq!(end, 100 + (select.len() + 14) as u64);
        assert_eq!(b.append(None, |s| s.command(0, &["X"])), end + 11, "no second SELECT for the same database");
        assert!(b.attach(1, 100));
        let Read::Bytes(bytes) = b.read(1, 1 << 20, Duration::ZERO) else { panic!("bytes") };
        assert!(bytes.starts_with(select));
        assert_eq!(b.read(1, 10, Duration::from_millis(1)), Read::Nothing);
        b.forget_selected();
        b.append(None, |s| s.command(0, &[""; 0]));
        let Read::Bytes(again) = b.read(1, 1 << 20, Duration::ZERO) else { panic!("bytes") };
        assert_eq!(again, [&select[..], b"*0\r\n"].concat(), "a SELECT after forget_selected");
    }

    #[test]
    fn a_stream_of_every_namespace_switches_them_by_name() {
        let names = |ns: usize| ["", "alice", "bob"].get(ns).map(|n| n.to_string());
        let b = Backlog::new(0, 1 << 20);
        b.append(Some(&names), |s| {
            s.command(17, &["SET", "k", "v"]);
            s.command(18, &["SET", "k", "v"]);
            s.command(0, &["SET", "k", "v"]);
            s.command(16 * 9, &["SET", "k", "v"]);
        });
        b.append(None, |s| s.command(20, &["SET", "k", "v"]));
        assert!(b.attach(1, 0));
        let Read::Bytes(bytes) = b.read(1, 1 << 20, Duration::ZERO) else { panic!("bytes") };
        let words: Vec<String> =
            String::from_utf8(bytes).unwrap().split("\r\n").filter(|w| !w.starts_with(['*', '$']) && !w.is_empty()).map(String::from).collect();
        assert_eq!(
            words.join(" "),
            "TERRACE.NAMESPACE alice SELECT 1 SET k v SELECT 2 SET k v TERRACE.NAMESPACE default SELECT 0 SET k v",
            "a namespace without a name, and a tenant's database in a default-namespace stream, are left out"
        );
    }

    #[test]
    fn it_keeps_what_a_reader_needs_and_what_partial_resync_keeps() {
        let b = Backlog::new(0, 10);
        assert!(b.attach(7, 0));
        b.append_raw(&[1; 100]);
        assert_eq!(b.span(), (1, 100), "the reader at 0 still needs everything");
        let Read::Bytes(first) = b.read(7, 60, Duration::ZERO) else { panic!("bytes") };
        assert_eq!(first.len(), 60);
        assert_eq!(b.span(), (61, 40), "trimmed to the reader's position");
        b.detach(7);
        assert_eq!(b.span(), (91, 10), "without readers it keeps `keep` bytes");
        assert!(!b.attach(8, 50), "a position no longer kept");
        assert!(b.attach(8, 95));
        assert!(!b.attach(9, 101), "a position not reached yet");
        assert_eq!(b.read(99, 1, Duration::ZERO), Read::Gone, "an unknown reader");
    }

    #[test]
    fn a_reader_behind_the_limit_is_dropped() {
        let b = Backlog::new(0, 0);
        assert!(b.attach(1, 0));
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..(REPLICA_LAG_LIMIT >> 20) + 1 {
            b.append_raw(&chunk);
        }
        assert_eq!(b.read(1, 10, Duration::ZERO), Read::Gone);
        assert_eq!(b.span().1, 0, "nothing kept once it is gone");
    }

    #[test]
    fn an_append_wakes_a_waiting_reader_only_when_published() {
        let b = std::sync::Arc::new(Backlog::new(0, 1 << 20));
        assert!(b.attach(1, 0));
        let reader = {
            let b = b.clone();
            std::thread::spawn(move || b.read(1, 100, Duration::from_secs(60)))
        };
        while b.inner.lock().waiting == 0 {
            std::thread::yield_now();
        }
        b.append(None, |s| s.command(0, &["SET", "k", "v"]));
        assert!(b.unpublished.load(Ordering::SeqCst), "appended, the reader not woken yet");
        b.publish();
        assert!(!b.unpublished.load(Ordering::SeqCst));
        assert!(matches!(reader.join().unwrap(), Read::Bytes(_)), "woken by the publish, long before its wait ends");
        b.append(None, |s| s.command(0, &["SET", "k", "v"]));
        assert!(!b.unpublished.load(Ordering::SeqCst), "no reader waits: nothing to wake");
    }

    #[test]
    fn reads_wrap_around_the_ring() {
        let b = Backlog::new(0, 4);
        b.append_raw(b"abcdef");
        assert!(b.attach(1, 2));
        b.append_raw(b"gh");
        let Read::Bytes(bytes) = b.read(1, 100, Duration::ZERO) else { panic!("bytes") };
        assert_eq!(bytes, b"cdefgh");
    }
}
