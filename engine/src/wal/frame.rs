//! WAL batches and the records in them, as bytes.
//!
//! A batch is what one write of the log holds (a group commit):
//!
//! ```text
//! magic "TWB1" | payload length u32 | first sequence number u64 | record count u32
//! | crc32 of (sequence, count, payload) u32 | payload
//! ```
//!
//! and the payload is `count` records, each one write command as it ran:
//!
//! ```text
//! unix ms the command ran at i64 | physical database varint | namespace base varint
//! | argc varint | argc × (length varint, bytes)
//! ```
//!
//! Records are replayed with the time they ran at, so relative expiries and generated stream
//! IDs come out the same. A batch is all or nothing: a torn or corrupt batch ends the log
//! (everything after it is reported and ignored), and a transaction's records always share
//! one batch. Hand-written: the format is ours, and a framing crate would add nothing to
//! "length, checksum, bytes".

pub const MAGIC: &[u8; 4] = b"TWB1";
pub const HEADER: usize = 4 + 4 + 8 + 4 + 4;
/// Batches larger than this are refused when read (a corrupt length field).
pub const MAX_PAYLOAD: usize = 1 << 30;

/// One logged write command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub now: i64,
    pub db: usize,
    pub ns_base: usize,
    pub argv: Vec<Vec<u8>>,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Appends one record (a command about to be acknowledged) to a batch payload.
pub fn put_record(out: &mut Vec<u8>, now: i64, db: usize, ns_base: usize, argv: &[&[u8]]) {
    out.extend_from_slice(&now.to_le_bytes());
    put_varint(out, db as u64);
    put_varint(out, ns_base as u64);
    put_varint(out, argv.len() as u64);
    for a in argv {
        put_varint(out, a.len() as u64);
        out.extend_from_slice(a);
    }
}

/// The records of a batch payload (None if it does not parse: a bug or corruption that the
/// checksum did not catch).
pub fn records(payload: &[u8], count: u32) -> Option<Vec<Record>> {
    // (Not `count` itself: a corrupt batch whose checksum still holds may claim billions.)
    let mut out = Vec::with_capacity((count as usize).min(payload.len() / MIN_RECORD));
    for_each_record(payload, count, |now, db, ns_base, argv| {
        out.push(Record { now, db, ns_base, argv: argv.iter().map(|a| a.to_vec()).collect() });
    })?;
    Some(out)
}

/// The fewest bytes a record takes: its time, database, namespace and argument count.
const MIN_RECORD: usize = 8 + 1 + 1 + 1;

/// Calls `f(now, db, ns_base, argv)` for each record of a batch payload, borrowing from it;
/// None if it does not parse (what was read before is still given).
pub fn for_each_record<'p>(payload: &'p [u8], count: u32, mut f: impl FnMut(i64, usize, usize, &[&'p [u8]])) -> Option<()> {
    let mut pos = 0;
    let mut argv: Vec<&[u8]> = Vec::new();
    for _ in 0..count {
        let now = i64::from_le_bytes(payload.get(pos..pos + 8)?.try_into().ok()?);
        pos += 8;
        let db = get_varint(payload, &mut pos)? as usize;
        let ns_base = get_varint(payload, &mut pos)? as usize;
        let argc = get_varint(payload, &mut pos)? as usize;
        if argc == 0 || argc > payload.len() {
            return None;
        }
        argv.clear();
        for _ in 0..argc {
            let n = get_varint(payload, &mut pos)? as usize;
            argv.push(payload.get(pos..pos.checked_add(n)?)?);
            pos += n;
        }
        f(now, db, ns_base, &argv);
    }
    (pos == payload.len()).then_some(())
}

fn checksum(seq: u64, count: u32, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&count.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// Frames a batch of `count` records starting at sequence number `seq`.
pub fn frame(out: &mut Vec<u8>, seq: u64, count: u32, payload: &[u8]) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&checksum(seq, count, payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// A batch read back.
#[derive(Debug, PartialEq, Eq)]
pub struct Batch<'a> {
    pub seq: u64,
    pub count: u32,
    pub payload: &'a [u8],
    /// Bytes the framed batch takes.
    pub len: usize,
}

/// Why reading stopped before the end of the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Fewer bytes than a header or than the header's length: a write cut short.
    Torn,
    /// A header or checksum that doesn't match.
    Corrupt,
}

/// The batch at the start of `b`: Ok(None) at the clean end (no bytes, or only zeros — an
/// unwritten tail of a preallocated file or ring).
pub fn read(b: &[u8]) -> Result<Option<Batch<'_>>, Stop> {
    if b.is_empty() || b.iter().take(HEADER).all(|&x| x == 0) {
        return Ok(None);
    }
    if b.len() < HEADER {
        return Err(Stop::Torn);
    }
    if &b[..4] != MAGIC {
        return Err(Stop::Corrupt);
    }
    let len = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
    let seq = u64::from_le_bytes(b[8..16].try_into().unwrap());
    let count = u32::from_le_bytes(b[16..20].try_into().unwrap());
    let crc = u32::from_le_bytes(b[20..24].try_into().unwrap());
    if len > MAX_PAYLOAD {
        return Err(Stop::Corrupt);
    }
    let Some(payload) = b.get(HEADER..HEADER + len) else { return Err(Stop::Torn) };
    if checksum(seq, count, payload) != crc {
        return Err(Stop::Corrupt);
    }
    Ok(Some(Batch { seq, count, payload, len: HEADER + len }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_batch_claiming_more_records_than_it_holds_is_refused_without_allocating_for_them() {
        // Found by the wal_read fuzz target: a batch whose checksum holds with a count of
        // billions made `records` reserve room for them (ASan: out of memory).
        let mut payload = Vec::new();
        put_record(&mut payload, 1, 0, 0, &[b"SET", b"k", b"v"]);
        let mut framed = Vec::new();
        frame(&mut framed, 1, u32::MAX, &payload);
        let b = read(&framed).unwrap().unwrap();
        assert_eq!(b.count, u32::MAX);
        assert_eq!(records(b.payload, b.count), None);
        // The fuzzer's own input, kept as it was found.
        let found = include_bytes!("../../../fuzz/regressions/wal_read/huge-record-count");
        let mut pos = 0;
        while let Ok(Some(b)) = read(&found[pos..]) {
            let _ = records(b.payload, b.count);
            pos += b.len;
        }
    }

    use super::*;

    fn batch(seq: u64, cmds: &[&[&[u8]]]) -> Vec<u8> {
        let mut payload = Vec::new();
        for (i, c) in cmds.iter().enumerate() {
            put_record(&mut payload, 1_700_000_000_000 + i as i64, i, 16 * i, c);
        }
        let mut out = Vec::new();
        frame(&mut out, seq, cmds.len() as u32, &payload);
        out
    }

    #[test]
    fn batches_round_trip() {
        let b = batch(7, &[&[b"SET", b"k", b"v"], &[b"DEL", b""], &[b"SET", b"big", &[0xffu8; 300]]]);
        let got = read(&b).unwrap().unwrap();
        assert_eq!((got.seq, got.count, got.len), (7, 3, b.len()));
        let recs = records(got.payload, got.count).unwrap();
        assert_eq!(recs[0], Record { now: 1_700_000_000_000, db: 0, ns_base: 0, argv: vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()] });
        assert_eq!(recs[1].argv[1], b"");
        assert_eq!((recs[2].db, recs[2].ns_base, recs[2].argv[2].len()), (2, 32, 300));
        assert_eq!(read(&[0u8; 40]), Ok(None), "zeros are the unwritten tail");
        assert_eq!(read(&[]), Ok(None));
    }

    #[test]
    fn torn_and_corrupt_batches_are_told_apart() {
        let b = batch(1, &[&[b"SET", b"k", b"v"]]);
        for cut in 1..b.len() {
            let r = read(&b[..cut]);
            assert!(matches!(r, Err(Stop::Torn)), "cut at {cut}: {r:?}");
        }
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x40;
            assert!(read(&bad).is_err() || read(&bad).unwrap().is_none(), "flipped byte {i} went unnoticed");
        }
    }
}
