//! The PMem ring (`wal = pmem`): batches are appended to a ring buffer in a mapped file and
//! persisted before the writes are acknowledged — on a file that is memory (tmpfs standing in
//! for PMem) by writing back the batch's cache lines, without a system call; on any other file
//! by `msync` of the range (`mapped::Persistence`) — which costs far less than an fsync. A
//! background thread copies them in bulk to the segment file; once the file is synced, the
//! ring's tail moves past them.
//!
//! Layout: a 4 KiB header — magic, size, tail offset, tail sequence number, crc32 — then
//! framed batches one after the other. A batch that would cross the end starts over at the
//! beginning, after a `TWRP` marker (or, with less room left than a batch header, none).
//! Recovery reads from the tail while sequence numbers follow on; stale batches of an earlier
//! lap have lower numbers and end the read.

use std::path::{Path, PathBuf};

use memmap2::MmapRaw;

use crate::mapped::{MapError, Persistence};

use super::frame::{self, Record};

const MAGIC: &[u8; 8] = b"TWRING01";
const HEADER: usize = 4096;
const WRAP: &[u8; 4] = b"TWRP";

#[derive(Debug, thiserror::Error)]
pub enum RingError {
    #[error("WAL ring {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("WAL ring {path} has {actual} bytes, not the configured {configured} (`wal_ring_size`); drain it with the old size first")]
    WrongSize { path: PathBuf, configured: u64, actual: u64 },
}

pub struct Ring {
    map: MmapRaw,
    persistence: Persistence,
    path: PathBuf,
    size: usize,
    head: usize,
    /// The oldest batch not yet synced in the log file.
    tail: usize,
    tail_seq: u64,
}

// SAFETY: only the WAL writer thread touches the ring after recovery.
unsafe impl Send for Ring {}

impl Ring {
    pub fn open(path: &Path, size: u64) -> Result<Ring, RingError> {
        let map = crate::mapped::map_sized(path, size).map_err(|e| match e {
            MapError::Open(source) | MapError::Map(source) => RingError::Io { path: path.to_owned(), source },
            MapError::WrongSize { configured, actual } => RingError::WrongSize { path: path.to_owned(), configured, actual },
        })?;
        let persistence = Persistence::of(path);
        tracing::info!(path = %path.display(), persisted_by = persistence.name(), "WAL ring mapped");
        let mut ring = Ring { map, persistence, path: path.to_owned(), size: size as usize, head: HEADER, tail: HEADER, tail_seq: 1 };
        if let Some((tail, tail_seq)) = ring.read_header() {
            ring.tail = tail;
            ring.tail_seq = tail_seq;
        }
        Ok(ring)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the whole mapping; only this thread writes it.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.size) }
    }

    fn read_header(&self) -> Option<(usize, u64)> {
        let h = &self.bytes()[..36];
        if &h[..8] != MAGIC || crc32fast::hash(&h[..32]) != u32::from_le_bytes(h[32..36].try_into().ok()?) {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
        let (size, tail, seq) = (word(8), word(16) as usize, word(24));
        (size as usize == self.size && (HEADER..self.size).contains(&tail)).then_some((tail, seq))
    }

    fn write_header(&mut self) -> std::io::Result<()> {
        let mut h = [0u8; 36];
        h[..8].copy_from_slice(MAGIC);
        h[8..16].copy_from_slice(&(self.size as u64).to_le_bytes());
        h[16..24].copy_from_slice(&(self.tail as u64).to_le_bytes());
        h[24..32].copy_from_slice(&self.tail_seq.to_le_bytes());
        let crc = crc32fast::hash(&h[..32]);
        h[32..36].copy_from_slice(&crc.to_le_bytes());
        self.write_at(0, &h);
        self.persistence.persist(&self.map, 0, h.len())
    }

    fn write_at(&mut self, off: usize, b: &[u8]) {
        // SAFETY: callers keep `off + b.len()` within the mapping.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.map.as_mut_ptr().add(off), b.len()) };
    }

    /// Records after the tail whose sequence numbers exceed `after`, and the sequence number
    /// the next batch gets. Leaves the ring empty at the tail (recovery replays them, and
    /// they are in the log file once the caller has appended and synced them).
    pub fn recover(&mut self, after: u64) -> (Vec<(u64, Record)>, Vec<Vec<u8>>) {
        let mut out = Vec::new();
        let mut frames = Vec::new();
        let (mut pos, mut expected) = (self.tail, self.tail_seq);
        loop {
            let rest = &self.bytes()[pos..];
            if rest.len() < frame::HEADER || rest.starts_with(WRAP) {
                if pos == HEADER {
                    break;
                }
                pos = HEADER;
                continue;
            }
            match frame::read(rest) {
                Ok(Some(b)) if b.seq == expected => {
                    let Some(recs) = frame::records(b.payload, b.count) else { break };
                    frames.push(rest[..b.len].to_vec());
                    for (k, r) in recs.into_iter().enumerate() {
                        let seq = b.seq + k as u64;
                        if seq > after {
                            out.push((seq, r));
                        }
                    }
                    expected = b.seq + b.count as u64;
                    pos += b.len;
                }
                _ => break,
            }
        }
        (out, frames)
    }

    /// Marks everything up to sequence `next - 1` as safely in the log file: the ring is
    /// empty and the next batch (sequence `next`) starts at the beginning.
    pub fn reset(&mut self, next: u64) -> std::io::Result<()> {
        self.head = HEADER;
        self.tail = HEADER;
        self.tail_seq = next;
        // Clear the first header's worth so a stale batch can't look like the next one.
        self.write_at(HEADER, &[0u8; frame::HEADER]);
        self.persistence.persist(&self.map, HEADER, frame::HEADER)?;
        self.write_header()
    }

    /// Whether a framed batch of `len` bytes fits without overwriting undrained ones (with
    /// room for the zeroed header that ends the ring's contents after it).
    pub fn fits(&self, len: usize) -> bool {
        let need = len + frame::HEADER;
        if self.head >= self.tail {
            need <= self.size - self.head || need <= self.tail.saturating_sub(HEADER).saturating_sub(1)
        } else {
            need < self.tail - self.head
        }
    }

    /// Appends a framed batch and flushes it: durable when this returns Ok.
    pub fn append(&mut self, framed: &[u8]) -> std::io::Result<()> {
        debug_assert!(self.fits(framed.len()));
        if self.head + framed.len() + frame::HEADER > self.size {
            if self.size - self.head >= WRAP.len() {
                self.write_at(self.head, WRAP);
                self.persistence.persist(&self.map, self.head, WRAP.len())?;
            }
            self.head = HEADER;
        }
        self.write_at(self.head, framed);
        // A zeroed header after the batch ends recovery there, not at an older lap's batch
        // that happens to follow.
        let end = self.head + framed.len();
        self.write_at(end, &[0u8; frame::HEADER]);
        self.persistence.persist(&self.map, self.head, framed.len() + frame::HEADER)?;
        self.head = end;
        Ok(())
    }

    /// The ring's bytes from `from` up to the head, as contiguous ranges (two when they
    /// wrap): what the log file does not have yet.
    pub fn unsynced(&self, from: usize) -> Vec<&[u8]> {
        let bytes = self.bytes();
        let (mut out, mut start, mut pos) = (Vec::new(), from, from);
        while pos != self.head {
            let rest = &bytes[pos..];
            if rest.len() < frame::HEADER || rest.starts_with(WRAP) {
                if pos > start {
                    out.push(&bytes[start..pos]);
                }
                pos = HEADER;
                start = HEADER;
                continue;
            }
            match frame::read(rest) {
                Ok(Some(b)) => pos += b.len,
                _ => break,
            }
        }
        if pos > start {
            out.push(&bytes[start..pos]);
        }
        out
    }

    /// How the ring's stores are made durable.
    pub fn persistence(&self) -> Persistence {
        self.persistence
    }

    /// Where the next batch goes (with `drain_to`: what a sync of the log file covers).
    pub fn head(&self) -> usize {
        self.head
    }

    /// The log file holds (and has synced) every batch before ring position `pos`, whose
    /// next batch has sequence number `next_seq`: the tail moves up to it.
    pub fn drain_to(&mut self, pos: usize, next_seq: u64) -> std::io::Result<()> {
        if next_seq <= self.tail_seq {
            return Ok(()); // the tail only moves forward (a later drain got there first)
        }
        self.tail = pos;
        self.tail_seq = next_seq;
        self.write_header()
    }

    /// The log file holds everything appended so far.
    pub fn drained(&mut self, next_seq: u64) -> std::io::Result<()> {
        self.drain_to(self.head, next_seq)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(seq: u64, n: u32, fill: usize) -> Vec<u8> {
        let mut payload = Vec::new();
        for i in 0..n {
            let v = vec![b'a' + (i % 26) as u8; fill];
            frame::put_record(&mut payload, seq as i64, 0, 0, &[b"SET", format!("k{}", seq + i as u64).as_bytes(), &v]);
        }
        let mut out = Vec::new();
        frame::frame(&mut out, seq, n, &payload);
        out
    }

    #[test]
    fn batches_survive_wrapping_and_draining() {
        let dir = std::env::temp_dir().join(format!("terrace-ring-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ring");
        let size = 64 << 10;
        let mut r = Ring::open(&path, size).unwrap();
        r.reset(1).unwrap();
        let mut seq = 1;
        let mut last_drain = 1;
        for round in 0..200 {
            let b = framed(seq, 2, 300 + round % 7 * 100);
            if !r.fits(b.len()) {
                r.drained(seq).unwrap();
                last_drain = seq;
            }
            r.append(&b).unwrap();
            seq += 2;
        }
        drop(r);
        let mut again = Ring::open(&path, size).unwrap();
        let (recs, frames) = again.recover(0);
        assert_eq!(recs.first().map(|r| r.0), Some(last_drain), "recovery starts at the tail");
        assert_eq!(recs.last().map(|r| r.0), Some(seq - 1), "and reads through the wrap to the head");
        assert!(recs.windows(2).all(|w| w[1].0 == w[0].0 + 1));
        assert!(!frames.is_empty());
        assert!(matches!(Ring::open(&path, size * 2), Err(RingError::WrongSize { .. })));
    }
}
