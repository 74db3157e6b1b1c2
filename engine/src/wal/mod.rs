//! The write-ahead log: every write command, logged in execution order, replayed at start.
//!
//! - `frame`: batch framing (count, sequence number, checksum) and records.
//! - `segments`: the segment files, reading them back (torn tails cut, holes refused).
//! - `ring`: the PMem ring for `wal = pmem`.
//!
//! Commands append their records while they still hold their shard locks, so the log's order
//! agrees with execution order wherever it matters (same keys). A single writer thread takes
//! whatever has accumulated and writes it as one batch: group commit across connections.
//! Modes (`wal`): `file` writes at once and fsyncs every second (AOF everysec); `always`
//! fsyncs before the writes are acknowledged; `pmem` flushes the batch into the ring before
//! acknowledging and syncs the file every second. A failed write or fsync poisons the log:
//! the engine refuses writes from then on and says why, and replies waiting for that batch
//! are never sent (their connections close) — nothing unlogged is acknowledged.

pub mod frame;
pub mod ring;
pub mod segments;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use ring::Ring;
use segments::{Segment, Sink};

/// How often the file is synced in `file` and `pmem` modes.
const SYNC_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Off,
    File,
    Always,
    Pmem,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s.to_ascii_lowercase().as_str() {
            "off" => Ok(Mode::Off),
            "file" => Ok(Mode::File),
            "always" => Ok(Mode::Always),
            "pmem" => Ok(Mode::Pmem),
            _ => Err(format!("'{s}' is not one of off, file, always, pmem")),
        }
    }
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::File => "file",
            Mode::Always => "always",
            Mode::Pmem => "pmem",
        }
    }
    /// Whether a write is acknowledged only once its batch is durable.
    pub fn waits(self) -> bool {
        matches!(self, Mode::Always | Mode::Pmem)
    }
}

#[derive(Debug, Clone)]
pub struct WalConfig {
    pub mode: Mode,
    /// Segment files live here (`DATA_DIR/wal`).
    pub dir: PathBuf,
    /// The ring file for `pmem` (`wal_ring_path`, default `DATA_DIR/wal/ring`).
    pub ring_path: PathBuf,
    pub ring_size: u64,
    /// Size at which a segment is closed and a new one begun, so that segments holding only
    /// obsolete records (write-back data storage has taken) can be deleted (`wal_segment_size`).
    pub segment_size: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error(transparent)]
    Log(#[from] segments::LogError),
    #[error(transparent)]
    Ring(#[from] ring::RingError),
}

/// Records waiting for the writer.
/// A checkpoint: where the log begins a new segment and which old ones go.
#[derive(Clone, Copy)]
struct Checkpoint {
    /// The new segment's base: the sequence number of the record before its first.
    base: u64,
    /// The last sequence number the snapshot covers: segments holding only records up to it go.
    covered: u64,
    /// Where in the pending payload the new segment's records start, and how many precede.
    at: usize,
    before: u32,
}

struct Pending {
    payload: Vec<u8>,
    count: u32,
    /// Sequence number of the first pending record.
    first: u64,
    rotate: Option<Checkpoint>,
}

#[derive(Default)]
pub struct Counters {
    pub bytes: AtomicU64,
    pub batches: AtomicU64,
    pub records: AtomicU64,
    pub syncs: AtomicU64,
    pub sync_micros: AtomicU64,
    pub sync_max_micros: AtomicU64,
}

pub struct Wal {
    pub mode: Mode,
    pending: Mutex<Pending>,
    wake: Condvar,
    durable: tokio::sync::watch::Sender<u64>,
    /// The same news for threads outside the runtime (`wait_durable_blocking`).
    durable_lock: Mutex<()>,
    durable_changed: Condvar,
    poisoned: AtomicBool,
    why: Mutex<Option<String>>,
    stop: AtomicBool,
    pub counters: Counters,
    /// Where recovery started from (the snapshot's sequence number) and how much it replayed.
    pub recovered: AtomicU64,
    /// `pmem` mode: the ring and the segment, written by whichever connection commits first
    /// (leader-based group commit, no thread hop on the acknowledgement path).
    inline: Option<Mutex<Writer>>,
    /// Write-back: through which sequence number every write-back record is in storage (set
    /// at start when there is a storage tier).
    flushed_through: std::sync::OnceLock<FlushedThrough>,
    /// The first record since the last checkpoint that only a snapshot makes obsolete (a
    /// command, not a write-back after-image); u64::MAX: none.
    first_unflushable: AtomicU64,
    /// Everything through this sequence number is obsolete and its segments are gone.
    pub pruned_through: AtomicU64,
    segment_size: u64,
    /// `pmem` mode: how the ring's batches are made durable.
    ring_persistence: Option<crate::mapped::Persistence>,
}

/// Through which sequence number write-back records are in storage.
pub type FlushedThrough = Box<dyn Fn() -> u64 + Send + Sync>;

/// The file recording how far the log was pruned (a restart must not take the missing
/// segments for lost records).
pub fn pruned_path(dir: &std::path::Path) -> PathBuf {
    dir.join("pruned")
}

/// How far the log in `dir` was pruned (0: never).
pub fn read_pruned(dir: &std::path::Path) -> u64 {
    std::fs::read_to_string(pruned_path(dir)).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// What the writer owns.
struct Writer {
    dir: PathBuf,
    segment: Box<dyn Sink>,
    ring: Option<Ring>,
    last_sync: Instant,
    /// Sequence number the next batch starts at.
    next: u64,
    /// Another handle on the segment's file, for syncing it without the writer's lock
    /// (`pmem` mode's syncer).
    sync_handle: Option<std::fs::File>,
    /// `pmem` mode: the ring position up to which the segment file has the batches, and the
    /// sequence number of the batch there.
    copied: usize,
    copied_next: u64,
    /// `pmem` mode's commits: the empty buffer that replaces the pending one, and the
    /// framing buffer.
    spare: Vec<u8>,
    framed: Vec<u8>,
}

impl Wal {
    /// A log whose next record gets sequence number `next` (after recovery).
    fn new(mode: Mode, next: u64, segment_size: u64) -> Wal {
        Wal {
            mode,
            pending: Mutex::new(Pending { payload: Vec::with_capacity(64 << 10), count: 0, first: next, rotate: None }),
            wake: Condvar::new(),
            durable: tokio::sync::watch::Sender::new(next - 1),
            durable_lock: Mutex::new(()),
            durable_changed: Condvar::new(),
            poisoned: AtomicBool::new(false),
            why: Mutex::new(None),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            recovered: AtomicU64::new(0),
            inline: None,
            flushed_through: std::sync::OnceLock::new(),
            first_unflushable: AtomicU64::new(u64::MAX),
            pruned_through: AtomicU64::new(0),
            segment_size,
            ring_persistence: None,
        }
    }

    /// Lets write-back records become obsolete once storage has them: `f` says through which
    /// sequence number that is.
    pub fn set_flushed_through(&self, f: FlushedThrough) {
        let _ = self.flushed_through.set(f);
    }

    /// Appends write-back after-images: records that storage, once it has them, makes
    /// obsolete without a snapshot.
    pub fn append_after_images(&self, records: &[u8], count: u32) -> u64 {
        self.append_records(records, count, false)
    }

    /// Appends encoded records (`frame::put_record`); returns the last one's sequence number.
    pub fn append(&self, records: &[u8], count: u32) -> u64 {
        self.append_records(records, count, true)
    }

    fn append_records(&self, records: &[u8], count: u32, needs_snapshot: bool) -> u64 {
        let mut p = self.pending.lock();
        if needs_snapshot && count > 0 {
            self.first_unflushable.fetch_min(p.first + p.count as u64, Ordering::Relaxed);
        }
        p.payload.extend_from_slice(records);
        p.count += count;
        let last = p.first + p.count as u64 - 1;
        drop(p);
        if self.inline.is_none() {
            // (In pmem mode the committing connection writes; the syncer polls.)
            self.wake.notify_one();
        }
        last
    }

    /// Takes everything pending: (payload, count, first sequence number, checkpoint).
    fn take(&self, spare: &mut Vec<u8>) -> (Vec<u8>, u32, u64, Option<Checkpoint>) {
        let mut p = self.pending.lock();
        let payload = std::mem::replace(&mut p.payload, std::mem::take(spare));
        let (count, first) = (p.count, p.first);
        p.first += count as u64;
        p.count = 0;
        (payload, count, first, p.rotate.take())
    }

    /// `pmem` mode: makes everything up to `seq` durable in the ring now, on this thread,
    /// together with whatever else is pending; false if the log is poisoned.
    pub fn commit(&self, seq: u64) -> bool {
        let Some(inline) = &self.inline else { return !self.poisoned.load(Ordering::SeqCst) };
        if self.durable_seq() >= seq {
            return !self.poisoned.load(Ordering::SeqCst);
        }
        let mut w = inline.lock();
        if self.poisoned.load(Ordering::SeqCst) {
            return false;
        }
        if self.durable_seq() >= seq {
            return true;
        }
        // The buffers go round (pending → written → spare → pending): no allocation per commit.
        let mut spare = std::mem::take(&mut w.spare);
        let (payload, count, first, rotate) = self.take(&mut spare);
        let mut framed = std::mem::take(&mut w.framed);
        let result = write_all(self, &mut w, &mut framed, &payload, count, first, rotate);
        (w.spare, w.framed) = (recycled(payload), recycled(framed));
        if let Err(e) = result {
            self.poison(format!("WAL write failed: {e}"));
            return false;
        }
        true
    }

    /// Appends one record that a file outside the log also holds (a namespace's creation):
    /// pruning may drop it without a snapshot.
    pub fn append_recorded(&self, now: i64, db: usize, ns_base: usize, argv: &[&[u8]]) -> u64 {
        let mut buf = Vec::with_capacity(64);
        frame::put_record(&mut buf, now, db, ns_base, argv);
        self.append_records(&buf, 1, false)
    }

    /// Appends one record.
    pub fn append_one(&self, now: i64, db: usize, ns_base: usize, argv: &[&[u8]]) -> u64 {
        let mut buf = Vec::with_capacity(64);
        frame::put_record(&mut buf, now, db, ns_base, argv);
        self.append(&buf, 1)
    }

    /// The last sequence number handed out (a snapshot taken under every lock covers it).
    pub fn last_assigned(&self) -> u64 {
        let p = self.pending.lock();
        p.first + p.count as u64 - 1
    }

    /// After a snapshot covering everything up to `seq` is durable: later records go to a
    /// new segment and the segments holding only older ones are deleted. A snapshot of an
    /// instant that is already behind the log (BGSAVE's, written while writes went on) starts
    /// the new segment after the records written since, and the segment holding those stays.
    pub fn checkpoint(&self, seq: u64) {
        let mut p = self.pending.lock();
        if self.first_unflushable.load(Ordering::Relaxed) <= seq {
            self.first_unflushable.store(u64::MAX, Ordering::Relaxed);
        }
        let before = (seq + 1).saturating_sub(p.first).min(p.count as u64) as u32;
        // Records are variable-length: find where record `before` starts.
        let mut at = 0usize;
        for _ in 0..before {
            at = skip_record(&p.payload, at);
        }
        p.rotate = Some(Checkpoint { base: seq.max(p.first - 1), covered: seq, at, before });
        drop(p);
        self.wake.notify_one();
        if self.inline.is_some() {
            self.commit(seq);
        }
    }

    pub fn poisoned(&self) -> Option<String> {
        if self.poisoned.load(Ordering::Relaxed) {
            self.why.lock().clone()
        } else {
            None
        }
    }

    fn poison(&self, why: String) {
        tracing::error!("{why}; the engine refuses writes from now on");
        *self.why.lock() = Some(why);
        self.poisoned.store(true, Ordering::SeqCst);
        self.durable.send_modify(|_| {}); // wake the waiters: they will see the poison
        self.durable_news();
    }

    /// Waits until `seq` is durable; false if the log was poisoned first.
    pub async fn wait_durable(&self, seq: u64) -> bool {
        let mut rx = self.durable.subscribe();
        let ok = rx.wait_for(|&d| d >= seq || self.poisoned.load(Ordering::SeqCst)).await.map(|d| *d >= seq).unwrap_or(false);
        ok && !self.poisoned.load(Ordering::SeqCst)
    }

    /// [`Wal::wait_durable`] for a thread outside the runtime (the replica's stream, which
    /// acknowledges an offset only once its writes are durable here): blocks until `seq` is
    /// durable, committing it itself in `pmem` mode; false if the log was poisoned first.
    pub fn wait_durable_blocking(&self, seq: u64) -> bool {
        if self.inline.is_some() {
            return self.commit(seq);
        }
        let mut guard = self.durable_lock.lock();
        while self.durable_seq() < seq && !self.poisoned.load(Ordering::SeqCst) {
            if self.stop.load(Ordering::SeqCst) {
                return false; // (the writer is gone: it never will be)
            }
            self.durable_changed.wait_for(&mut guard, Duration::from_millis(100));
        }
        !self.poisoned.load(Ordering::SeqCst)
    }

    /// Wakes `wait_durable_blocking`'s waiters (under their lock: none misses it between its
    /// check and its wait).
    fn durable_news(&self) {
        let _guard = self.durable_lock.lock();
        self.durable_changed.notify_all();
    }

    pub fn durable_seq(&self) -> u64 {
        *self.durable.borrow()
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// The `# WAL` section of INFO.
    pub fn info(&self) -> String {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let syncs = l(&c.syncs);
        format!(
            "# WAL\r\nwal_mode:{}\r\nwal_last_seq:{}\r\nwal_durable_seq:{}\r\nwal_bytes:{}\r\nwal_batches:{}\r\nwal_records:{}\r\nwal_syncs:{}\r\nwal_sync_avg_us:{}\r\nwal_sync_max_us:{}\r\nwal_recovered_records:{}\r\nwal_pruned_through:{}\r\nwal_ring_persistence:{}\r\nwal_poisoned:{}\r\n\r\n",
            self.mode.name(),
            self.last_assigned(),
            self.durable_seq(),
            l(&c.bytes),
            l(&c.batches),
            l(&c.records),
            syncs,
            l(&c.sync_micros).checked_div(syncs).unwrap_or(0),
            l(&c.sync_max_micros),
            l(&self.recovered),
            l(&self.pruned_through),
            self.ring_persistence.map_or("none", |p| p.name()),
            self.poisoned().unwrap_or_default(),
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        serde_json::json!({
            "mode": self.mode.name(),
            "last_seq": self.last_assigned(),
            "durable_seq": self.durable_seq(),
            "bytes": l(&c.bytes),
            "batches": l(&c.batches),
            "records": l(&c.records),
            "syncs": l(&c.syncs),
            "sync_micros_total": l(&c.sync_micros),
            "sync_max_micros": l(&c.sync_max_micros),
            "pruned_through": l(&self.pruned_through),
            "ring_persistence": self.ring_persistence.map(|p| p.name()),
            "poisoned": self.poisoned(),
        })
    }
}

/// Where the record starting at `pos` ends.
fn skip_record(b: &[u8], mut pos: usize) -> usize {
    let varint = |pos: &mut usize| {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let byte = b[*pos];
            *pos += 1;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    };
    pos += 8;
    varint(&mut pos);
    varint(&mut pos);
    for _ in 0..varint(&mut pos) {
        let n = varint(&mut pos) as usize;
        pos += n;
    }
    pos
}

/// What recovery hands to the server: records to replay, and the running log.
pub struct Opened {
    pub wal: Arc<Wal>,
    pub replay: Vec<(u64, frame::Record)>,
    /// The first segment's base, if the log had any (a snapshot must cover it).
    pub first_base: Option<u64>,
    pub torn: Option<String>,
    thread: Option<Writer>,
}

/// Reads the log (segments, then the ring's batches the file missed), keeping records after
/// `after` (the snapshot's sequence number), and prepares the writer.
pub fn open(config: &WalConfig, after: u64) -> Result<Opened, WalError> {
    let mut scan = segments::scan(&config.dir, after)?;
    let mut torn = None;
    if let Some((path, offset, dropped)) = scan.torn.take() {
        torn = Some(format!("{}: {dropped} bytes of a torn or corrupt batch at byte {offset} dropped", path.display()));
        segments::truncate(&path, offset)?;
    }
    let mut last = scan.last_seq.max(after);
    let base = scan.first_base.map(|_| list_last_base(&config.dir)).transpose()?.flatten().unwrap_or(after);
    let mut segment = Segment::open(&config.dir, base)?;
    let mut ring = None;
    if config.mode == Mode::Pmem {
        let mut r = Ring::open(&config.ring_path, config.ring_size)?;
        let (recs, frames) = r.recover(last);
        // Batches the file did not get (or did not sync) go to it now.
        let mut fresh = 0;
        for f in &frames {
            let b = frame::read(f).ok().flatten().expect("recovered frames parse");
            if b.seq + b.count as u64 - 1 > last {
                segment.append(f).map_err(|source| segments::LogError::Io { path: segment.path.clone(), source })?;
                fresh += 1;
            }
        }
        for (seq, rec) in recs {
            if seq > last {
                last = seq;
                scan.records.push((seq, rec));
            }
        }
        segment.sync().map_err(|source| segments::LogError::Io { path: segment.path.clone(), source })?;
        r.reset(last + 1).map_err(|source| ring::RingError::Io { path: r.path().to_owned(), source })?;
        if fresh > 0 {
            tracing::info!(batches = fresh, "WAL: batches only the PMem ring had were copied to the log file");
        }
        ring = Some(r);
    }
    let sync_handle = segment.file.try_clone().map_err(|source| segments::LogError::Io { path: segment.path.clone(), source })?;
    let mut wal = Wal::new(config.mode, last + 1, config.segment_size);
    wal.pruned_through = AtomicU64::new(read_pruned(&config.dir));
    wal.ring_persistence = ring.as_ref().map(Ring::persistence);
    let copied = ring.as_ref().map(|r| r.head()).unwrap_or(0);
    let writer = Writer {
        dir: config.dir.clone(),
        segment: Box::new(segment),
        ring,
        last_sync: Instant::now(),
        next: last + 1,
        sync_handle: Some(sync_handle),
        copied,
        copied_next: last + 1,
        spare: Vec::with_capacity(64 << 10),
        framed: Vec::with_capacity(64 << 10),
    };
    let thread = if config.mode == Mode::Pmem {
        wal.inline = Some(Mutex::new(writer));
        None
    } else {
        Some(writer)
    };
    Ok(Opened { wal: Arc::new(wal), replay: scan.records, first_base: scan.first_base, torn, thread })
}

fn list_last_base(dir: &std::path::Path) -> Result<Option<u64>, segments::LogError> {
    Ok(segments::list(dir)?.last().copied())
}

impl Opened {
    /// Starts the writer thread (in `pmem` mode: the syncer); returns its handle (joined at
    /// shutdown after `Wal::stop`).
    pub fn start(&mut self) -> std::thread::JoinHandle<()> {
        let wal = self.wal.clone();
        let body: Box<dyn FnOnce() + Send> = match self.thread.take() {
            Some(writer) => Box::new(move || run(wal, writer)),
            None => Box::new(move || run_syncer(wal)),
        };
        std::thread::Builder::new().name("terrace-wal".into()).spawn(body).expect("spawn the WAL thread")
    }
}

/// `pmem` mode's background work: commit what no connection waits for (evictions' DELs),
/// and once a second sync the segment file and move the ring's tail past what it now holds.
fn run_syncer(wal: Arc<Wal>) {
    let inline = wal.inline.as_ref().expect("pmem mode");
    let mut last_sync = Instant::now();
    while !wal.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(2));
        let last = wal.last_assigned();
        if last > wal.durable_seq() {
            wal.commit(last);
        }
        if wal.poisoned.load(Ordering::SeqCst) {
            continue;
        }
        // Bulk copy of the ring's new batches to the file (no sync yet).
        let copied = {
            let mut w = inline.lock();
            copy_ring_to_file(&mut w).map(|_| (w.copied, w.copied_next))
        };
        let (pos, next) = match copied {
            Ok(c) => c,
            Err(e) => {
                wal.poison(format!("WAL write failed: {e}"));
                continue;
            }
        };
        if last_sync.elapsed() < SYNC_EVERY {
            continue;
        }
        last_sync = Instant::now();
        // The sync covers what was copied above.
        let (handle, head, next) = {
            let w = inline.lock();
            let Some(h) = w.sync_handle.as_ref().and_then(|h| h.try_clone().ok()) else { continue };
            (h, w.ring.as_ref().map(|_| pos), next)
        };
        let t = Instant::now();
        if let Err(e) = handle.sync_data() {
            wal.poison(format!("WAL fsync failed: {e}"));
            return;
        }
        note_sync(&wal, t);
        if let (Some(pos), Some(r)) = (head, inline.lock().ring.as_mut()) {
            if let Err(e) = r.drain_to(pos, next) {
                wal.poison(format!("WAL ring write failed: {e}"));
                return;
            }
        }
        if let Err(e) = prune(&wal, &mut inline.lock()) {
            tracing::warn!("WAL: pruning obsolete segments failed: {e}");
        }
    }
    let last = wal.last_assigned();
    if last > wal.durable_seq() {
        wal.commit(last);
    }
    let mut w = inline.lock();
    if copy_ring_to_file(&mut w).and_then(|_| w.segment.sync()).is_ok() {
        let next = w.copied_next;
        if let Some(r) = w.ring.as_mut() {
            let _ = r.drained(next);
        }
    }
}

/// `pmem` mode: appends the ring's batches the segment file doesn't have yet to it.
fn copy_ring_to_file(w: &mut Writer) -> std::io::Result<()> {
    let Some(ring) = w.ring.as_ref() else { return Ok(()) };
    let head = ring.head();
    if head == w.copied {
        return Ok(());
    }
    for part in ring.unsynced(w.copied) {
        w.segment.append(part)?;
    }
    w.copied = head;
    w.copied_next = w.next;
    Ok(())
}

fn note_sync(wal: &Wal, t: Instant) {
    let us = t.elapsed().as_micros() as u64;
    wal.counters.syncs.fetch_add(1, Ordering::Relaxed);
    wal.counters.sync_micros.fetch_add(us, Ordering::Relaxed);
    wal.counters.sync_max_micros.fetch_max(us, Ordering::Relaxed);
}

fn run(wal: Arc<Wal>, mut w: Writer) {
    let mut spare = Vec::with_capacity(64 << 10);
    let mut framed = Vec::with_capacity(64 << 10);
    let mut last_prune = Instant::now();
    loop {
        {
            let mut p = wal.pending.lock();
            while p.count == 0 && p.rotate.is_none() && !wal.stop.load(Ordering::SeqCst) {
                // Once a second: the sync (file mode), and pruning (every mode).
                let timer = if wal.mode == Mode::Always { last_prune } else { w.last_sync };
                let due = SYNC_EVERY.saturating_sub(timer.elapsed());
                if due.is_zero() {
                    break;
                }
                wal.wake.wait_for(&mut p, due.max(Duration::from_millis(10)));
            }
            if p.count == 0 && p.rotate.is_none() && wal.stop.load(Ordering::SeqCst) {
                drop(p);
                let _ = w.segment.sync();
                return;
            }
        }
        let (payload, count, first, rotate) = wal.take(&mut spare);
        if wal.poisoned.load(Ordering::SeqCst) {
            spare = recycled(payload);
            continue;
        }
        let result = write_all(&wal, &mut w, &mut framed, &payload, count, first, rotate);
        let result = result.and_then(|_| {
            if wal.mode != Mode::Always && w.last_sync.elapsed() >= SYNC_EVERY {
                sync(&wal, &mut w)?;
                if let Some(r) = &mut w.ring {
                    r.drained(w.next)?;
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            wal.poison(format!("WAL write failed: {e}"));
        } else if last_prune.elapsed() >= SYNC_EVERY {
            last_prune = Instant::now();
            if let Err(e) = prune(&wal, &mut w) {
                tracing::warn!("WAL: pruning obsolete segments failed: {e}");
            }
        }
        spare = recycled(payload);
    }
}

/// A written batch's buffer, emptied for the next one; a huge batch's buffer is not kept.
fn recycled(mut buf: Vec<u8>) -> Vec<u8> {
    if buf.capacity() > 1 << 20 {
        return Vec::with_capacity(64 << 10);
    }
    buf.clear();
    buf
}

/// Writes taken records, rotating the segment at a checkpoint among them.
fn write_all(wal: &Wal, w: &mut Writer, framed: &mut Vec<u8>, payload: &[u8], count: u32, first: u64, rotate: Option<Checkpoint>) -> std::io::Result<()> {
    match rotate {
        Some(Checkpoint { base, covered, at, before }) => {
            write_batch(wal, w, framed, &payload[..at], before, first)?;
            rotate_segment(w, base, covered)?;
            write_batch(wal, w, framed, &payload[at..], count - before, first + before as u64)
        }
        None => write_batch(wal, w, framed, payload, count, first),
    }
}

fn sync(wal: &Wal, w: &mut Writer) -> std::io::Result<()> {
    let t = Instant::now();
    w.segment.sync()?;
    let us = t.elapsed().as_micros() as u64;
    wal.counters.syncs.fetch_add(1, Ordering::Relaxed);
    wal.counters.sync_micros.fetch_add(us, Ordering::Relaxed);
    wal.counters.sync_max_micros.fetch_max(us, Ordering::Relaxed);
    w.last_sync = Instant::now();
    Ok(())
}

fn write_batch(wal: &Wal, w: &mut Writer, framed: &mut Vec<u8>, payload: &[u8], count: u32, first: u64) -> std::io::Result<()> {
    if count == 0 {
        return Ok(());
    }
    framed.clear();
    frame::frame(framed, first, count, payload);
    let last = first + count as u64 - 1;
    match wal.mode {
        Mode::Pmem => {
            let ring = w.ring.as_mut().expect("pmem mode has a ring");
            if !ring.fits(framed.len()) {
                // Make room: everything in the ring goes to the file's disk first.
                copy_ring_to_file(w)?;
                sync(wal, w)?;
                let ring = w.ring.as_mut().expect("ring");
                ring.drained(first)?;
                if !ring.fits(framed.len()) {
                    // Larger than the whole ring: the file alone, synced.
                    w.segment.append(framed)?;
                    sync(wal, w)?;
                    let ring = w.ring.as_mut().expect("ring");
                    ring.drained(last + 1)?;
                    w.copied = ring.head();
                    w.copied_next = last + 1;
                    return published(wal, w, framed.len(), count, last);
                }
                w.copied = w.ring.as_ref().expect("ring").head();
                w.copied_next = first;
            }
            w.ring.as_mut().expect("ring").append(framed)?;
        }
        Mode::Always => {
            w.segment.append(framed)?;
            sync(wal, w)?;
        }
        Mode::File | Mode::Off => w.segment.append(framed)?,
    }
    published(wal, w, framed.len(), count, last)
}

fn published(wal: &Wal, w: &mut Writer, bytes: usize, count: u32, last: u64) -> std::io::Result<()> {
    w.next = last + 1;
    wal.counters.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    wal.counters.batches.fetch_add(1, Ordering::Relaxed);
    wal.counters.records.fetch_add(count as u64, Ordering::Relaxed);
    wal.durable.send_replace(last);
    wal.durable_news();
    Ok(())
}

/// Starts segment `base` (the records after it) and deletes the segments whose every record
/// a snapshot covering up to `covered` holds.
fn rotate_segment(w: &mut Writer, base: u64, covered: u64) -> std::io::Result<()> {
    begin_segment(w, base)?;
    if let Ok(bases) = segments::list(&w.dir) {
        // Segment i holds (base i, base i+1].
        for pair in bases.windows(2).filter(|p| p[1] <= covered) {
            let _ = std::fs::remove_file(segments::segment_path(&w.dir, pair[0]));
        }
    }
    Ok(())
}

/// Closes the current segment (synced, the ring's batches in it) and begins one after `seq`.
fn begin_segment(w: &mut Writer, seq: u64) -> std::io::Result<()> {
    copy_ring_to_file(w)?;
    w.segment.sync()?;
    let seg = Segment::open(&w.dir, seq).map_err(|e| std::io::Error::other(e.to_string()))?;
    w.sync_handle = Some(seg.file.try_clone()?);
    w.segment = Box::new(seg);
    if let Some(r) = &mut w.ring {
        r.drained(w.next)?;
        w.copied = r.head();
        w.copied_next = w.next;
    }
    Ok(())
}

/// Deletes the segments whose every record is obsolete: covered by a snapshot or, for
/// write-back after-images, in storage (and durable here); begins a new segment when the
/// current one is past `segment_size`, so whole segments become obsolete.
fn prune(wal: &Wal, w: &mut Writer) -> std::io::Result<()> {
    let Some(flushed) = wal.flushed_through.get() else { return Ok(()) };
    let written = w.next - 1;
    let limit = flushed().min(wal.first_unflushable.load(Ordering::Relaxed).saturating_sub(1)).min(wal.durable_seq()).min(written);
    let bases = segments::list(&w.dir).map_err(|e| std::io::Error::other(e.to_string()))?;
    let Some(&current) = bases.last() else { return Ok(()) };
    let size = std::fs::metadata(segments::segment_path(&w.dir, current)).map(|m| m.len()).unwrap_or(0);
    if size >= wal.segment_size && written > current {
        begin_segment(w, written)?;
        if let Some(r) = &mut w.ring {
            r.drained(w.next)?;
            w.copied = r.head();
            w.copied_next = w.next;
        }
    }
    // Segment i holds (base i, base i+1]: it can go when base i+1 <= limit.
    let bases = segments::list(&w.dir).map_err(|e| std::io::Error::other(e.to_string()))?;
    let gone: Vec<(u64, u64)> = bases.windows(2).map(|p| (p[0], p[1])).filter(|&(_, end)| end <= limit).collect();
    let Some(&(_, through)) = gone.last() else { return Ok(()) };
    // Say so durably first: a restart must not take the missing records for lost ones.
    let tmp = w.dir.join("pruned.tmp");
    std::fs::write(&tmp, through.to_string())?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, pruned_path(&w.dir))?;
    std::fs::File::open(&w.dir)?.sync_all()?;
    for (base, _) in gone {
        std::fs::remove_file(segments::segment_path(&w.dir, base))?;
    }
    wal.pruned_through.store(through, Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Failing;
    impl Sink for Failing {
        fn append(&mut self, _: &[u8]) -> std::io::Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Err(std::io::Error::other("EIO (injected)"))
        }
    }

    #[test]
    fn a_failed_fsync_poisons_and_never_acknowledges() {
        let wal = Arc::new(Wal::new(Mode::Always, 1, 64 << 20));
        let writer = Writer {
            dir: std::env::temp_dir(),
            segment: Box::new(Failing),
            ring: None,
            last_sync: Instant::now(),
            next: 1,
            sync_handle: None,
            copied: 0,
            copied_next: 1,
            spare: Vec::new(),
            framed: Vec::new(),
        };
        let w2 = wal.clone();
        let t = std::thread::spawn(move || run(w2, writer));
        let seq = wal.append_one(1, 0, 0, &[b"SET", b"k", b"v"]);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        assert!(!rt.block_on(wal.wait_durable(seq)), "a write whose fsync failed is not durable");
        assert!(!wal.wait_durable_blocking(seq), "nor for a thread outside the runtime");
        assert!(wal.poisoned().unwrap().contains("EIO"));
        assert_eq!(wal.durable_seq(), 0);
        wal.stop();
        t.join().unwrap();
    }

    /// BGSAVE's checkpoint comes after the log went on past the image's instant: the records
    /// written since stay (a new segment must not start at the instant with later records in
    /// it: the log then did not open, "sequence numbers jump"), and only segments the image
    /// covers go.
    #[test]
    fn a_checkpoint_behind_the_head_keeps_the_records_after_it() {
        let dir = std::env::temp_dir().join(format!("terrace-wal-behind-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = WalConfig { mode: Mode::Always, dir: dir.clone(), ring_path: dir.join("ring"), ring_size: 1 << 20, segment_size: 64 << 20 };
        let set = |wal: &Wal, i: u64| wal.append_one(0, 0, 0, &[b"SET", format!("k{i}").as_bytes(), b"v"]);
        let mut opened = open(&config, 0).unwrap();
        let writer = opened.start();
        let wal = opened.wal.clone();
        for i in 1..=10 {
            set(&wal, i);
        }
        assert!(wal.wait_durable_blocking(10));
        // The image's instant was record 6; 7..10 were written before it was durable.
        wal.checkpoint(6);
        for i in 11..=12 {
            set(&wal, i);
        }
        assert!(wal.wait_durable_blocking(12));
        wal.stop();
        writer.join().unwrap();
        let again = open(&config, 6).unwrap();
        let seqs: Vec<u64> = again.replay.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, (7..=12).collect::<Vec<u64>>(), "every record after the image, once");
        assert!(again.first_base.is_some_and(|b| b <= 6), "the segment holding 7..10 stayed: {:?}", again.first_base);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn records_are_skipped_exactly() {
        let mut b = Vec::new();
        frame::put_record(&mut b, 5, 300, 16, &[b"SET", &[7u8; 200], b""]);
        let first = b.len();
        frame::put_record(&mut b, 6, 0, 0, &[b"DEL", b"x"]);
        assert_eq!(skip_record(&b, 0), first);
        assert_eq!(skip_record(&b, first), b.len());
    }
}
