//! The log on disk: `DATA_DIR/wal/<base>.log` segment files, each holding framed batches
//! whose sequence numbers follow `base` (the checkpoint a snapshot covers).
//!
//! A SAVE while the WAL is on records its last sequence number S in the RDB file and starts
//! segment S; older segments are deleted once the RDB is durable. Reading stops at the first
//! torn or corrupt batch of the last segment, reports it, and truncates the file there so new
//! batches follow valid ones. A bad batch anywhere else is an error: records after it exist
//! but can't be trusted, so the engine refuses to start rather than replay a hole.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::frame::{self, Record, Stop};

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("WAL {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("WAL {path}: batch at byte {offset} is {what}, and later segments exist; move the WAL aside to start without it")]
    Hole { path: PathBuf, offset: u64, what: &'static str },
    #[error("WAL {path}: sequence numbers jump from {expected} to {found}")]
    Gap { path: PathBuf, expected: u64, found: u64 },
    #[error("WAL {path}: a batch does not decode into records")]
    Records { path: PathBuf },
}

pub fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

/// Segment bases in `dir`, ascending.
pub fn list(dir: &Path) -> Result<Vec<u64>, LogError> {
    let io = |source| LogError::Io { path: dir.to_owned(), source };
    let mut bases = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries {
                let name = e.map_err(io)?.file_name();
                let name = name.to_string_lossy();
                if let Some(base) = name.strip_suffix(".log").and_then(|n| n.parse::<u64>().ok()) {
                    bases.push(base);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    bases.sort_unstable();
    Ok(bases)
}

/// What reading the log found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Records with their sequence numbers, in order.
    pub records: Vec<(u64, Record)>,
    /// The last sequence number in the log (the base of the first segment if it is empty).
    pub last_seq: u64,
    pub first_base: Option<u64>,
    /// A torn or corrupt tail cut off the last segment: (file, offset, bytes dropped).
    pub torn: Option<(PathBuf, u64, u64)>,
    pub bytes: u64,
}

/// Reads every segment of `dir`, keeping records with sequence numbers above `after`.
pub fn scan(dir: &Path, after: u64) -> Result<Scan, LogError> {
    let bases = list(dir)?;
    let mut scan = Scan { first_base: bases.first().copied(), last_seq: bases.first().copied().unwrap_or(0), ..Default::default() };
    for (i, &base) in bases.iter().enumerate() {
        let path = segment_path(dir, base);
        let bytes = std::fs::read(&path).map_err(|source| LogError::Io { path: path.clone(), source })?;
        scan.bytes += bytes.len() as u64;
        let mut expected = base + 1;
        if i > 0 && base != scan.last_seq {
            return Err(LogError::Gap { path, expected: scan.last_seq + 1, found: base + 1 });
        }
        let mut pos = 0usize;
        loop {
            match frame::read(&bytes[pos..]) {
                Ok(None) => break,
                Ok(Some(b)) => {
                    if b.seq != expected {
                        return Err(LogError::Gap { path, expected, found: b.seq });
                    }
                    let recs = frame::records(b.payload, b.count).ok_or_else(|| LogError::Records { path: path.clone() })?;
                    for (k, r) in recs.into_iter().enumerate() {
                        let seq = b.seq + k as u64;
                        if seq > after {
                            scan.records.push((seq, r));
                        }
                    }
                    expected = b.seq + b.count as u64;
                    pos += b.len;
                }
                Err(stop) => {
                    let what = match stop {
                        Stop::Torn => "cut short",
                        Stop::Corrupt => "corrupt",
                    };
                    if i + 1 != bases.len() {
                        return Err(LogError::Hole { path, offset: pos as u64, what });
                    }
                    scan.torn = Some((path.clone(), pos as u64, (bytes.len() - pos) as u64));
                    break;
                }
            }
        }
        scan.last_seq = expected - 1;
    }
    Ok(scan)
}

/// Cuts a torn tail off (so appends follow the last valid batch).
pub fn truncate(path: &Path, len: u64) -> Result<(), LogError> {
    let io = |source| LogError::Io { path: path.to_owned(), source };
    let f = OpenOptions::new().write(true).open(path).map_err(io)?;
    f.set_len(len).map_err(io)?;
    f.sync_all().map_err(io)
}

/// Where batches are appended: a file, or (in tests) anything that can fail on demand.
pub trait Sink: Send {
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    fn sync(&mut self) -> std::io::Result<()>;
}

/// An open segment.
pub struct Segment {
    pub file: File,
    pub path: PathBuf,
}

impl Segment {
    /// Opens segment `base` in `dir` for appending (created if missing), syncing the
    /// directory so a new file survives a crash.
    pub fn open(dir: &Path, base: u64) -> Result<Segment, LogError> {
        let path = segment_path(dir, base);
        let io = |source| LogError::Io { path: path.clone(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(io)?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        Ok(Segment { file, path })
    }
}

impl Sink for Segment {
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("terrace-wal-seg-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn batch(seq: u64, n: u32) -> Vec<u8> {
        let mut payload = Vec::new();
        for i in 0..n {
            let v = format!("v{}", seq + i as u64);
            frame::put_record(&mut payload, 1, 0, 0, &[b"SET", b"k", v.as_bytes()]);
        }
        let mut out = Vec::new();
        frame::frame(&mut out, seq, n, &payload);
        out
    }

    #[test]
    fn scan_keeps_order_cuts_torn_tails_and_refuses_holes() {
        let d = dir("scan");
        let mut s = Segment::open(&d, 0).unwrap();
        s.append(&batch(1, 2)).unwrap();
        s.append(&batch(3, 1)).unwrap();
        let torn = batch(4, 1);
        s.append(&torn[..torn.len() - 3]).unwrap();
        let got = scan(&d, 1).unwrap();
        assert_eq!(got.records.iter().map(|(s, _)| *s).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(got.records[1].1.argv[2], b"v3");
        assert_eq!(got.last_seq, 3);
        let (path, offset, dropped) = got.torn.clone().unwrap();
        assert_eq!(dropped, torn.len() as u64 - 3);
        truncate(&path, offset).unwrap();
        let mut s = Segment::open(&d, 0).unwrap();
        s.append(&batch(4, 1)).unwrap();
        assert_eq!(scan(&d, 0).unwrap().last_seq, 4);
        // A later segment behind a bad batch: refuse.
        let mut next = Segment::open(&d, 4).unwrap();
        next.append(&batch(5, 1)).unwrap();
        let mut bytes = std::fs::read(segment_path(&d, 0)).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        std::fs::write(segment_path(&d, 0), &bytes).unwrap();
        assert!(matches!(scan(&d, 0), Err(LogError::Hole { .. })));
    }

    #[test]
    fn a_gap_in_sequence_numbers_is_an_error() {
        let d = dir("gap");
        let mut s = Segment::open(&d, 0).unwrap();
        s.append(&batch(1, 1)).unwrap();
        s.append(&batch(3, 1)).unwrap();
        assert!(matches!(scan(&d, 0), Err(LogError::Gap { expected: 2, found: 3, .. })));
    }
}
