//! Redis's compact encodings inside RDB objects — listpack (7.0+), ziplist (before 7.0) and
//! intset — decoded into their elements, so DUMP payloads and RDB files written by
//! redis-server can be RESTOREd and loaded. (Terrace writes the plain encodings; these are
//! read-only.)
//!
//! Written by hand: the formats are small, documented in Redis's listpack.c, ziplist.c and
//! intset.c, and no maintained crate decodes them.

/// Why a blob could not be decoded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed {0}")]
pub struct Malformed(pub &'static str);

fn get<'a>(b: &'a [u8], range: std::ops::Range<usize>, what: &'static str) -> Result<&'a [u8], Malformed> {
    b.get(range).ok_or(Malformed(what))
}

fn int_bytes(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// The elements of a listpack, integers as their decimal strings.
pub fn listpack(b: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    const W: &str = "listpack";
    let total = u32::from_le_bytes(get(b, 0..4, W)?.try_into().expect("4")) as usize;
    if total != b.len() {
        return Err(Malformed(W));
    }
    let mut out = Vec::new();
    let mut p = 6;
    loop {
        let e = *b.get(p).ok_or(Malformed(W))?;
        if e == 0xFF {
            break;
        }
        let (value, len) = if e & 0x80 == 0 {
            (int_bytes((e & 0x7F) as i64), 1)
        } else if e & 0xC0 == 0x80 {
            let n = (e & 0x3F) as usize;
            (get(b, p + 1..p + 1 + n, W)?.to_vec(), 1 + n)
        } else if e & 0xE0 == 0xC0 {
            let raw = (((e & 0x1F) as u16) << 8) | *b.get(p + 1).ok_or(Malformed(W))? as u16;
            // 13-bit two's complement.
            let v = if raw >= 1 << 12 { raw as i64 - (1 << 13) } else { raw as i64 };
            (int_bytes(v), 2)
        } else if e & 0xF0 == 0xE0 {
            let n = (((e & 0x0F) as usize) << 8) | *b.get(p + 1).ok_or(Malformed(W))? as usize;
            (get(b, p + 2..p + 2 + n, W)?.to_vec(), 2 + n)
        } else {
            match e {
                0xF0 => {
                    let n = u32::from_le_bytes(get(b, p + 1..p + 5, W)?.try_into().expect("4")) as usize;
                    (get(b, p + 5..p + 5 + n, W)?.to_vec(), 5 + n)
                }
                0xF1 => (int_bytes(i16::from_le_bytes(get(b, p + 1..p + 3, W)?.try_into().expect("2")) as i64), 3),
                0xF2 => {
                    let s = get(b, p + 1..p + 4, W)?;
                    let v = ((s[0] as u32) | (s[1] as u32) << 8 | (s[2] as u32) << 16) << 8;
                    (int_bytes((v as i32 >> 8) as i64), 4)
                }
                0xF3 => (int_bytes(i32::from_le_bytes(get(b, p + 1..p + 5, W)?.try_into().expect("4")) as i64), 5),
                0xF4 => (int_bytes(i64::from_le_bytes(get(b, p + 1..p + 9, W)?.try_into().expect("8"))), 9),
                _ => return Err(Malformed(W)),
            }
        };
        // Skip the back-length: 7 bits per byte.
        let backlen = match len {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        p += len + backlen;
        out.push(value);
    }
    Ok(out)
}

/// The elements of a ziplist (RDB files before Redis 7.0).
pub fn ziplist(b: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    const W: &str = "ziplist";
    let total = u32::from_le_bytes(get(b, 0..4, W)?.try_into().expect("4")) as usize;
    if total != b.len() {
        return Err(Malformed(W));
    }
    let mut out = Vec::new();
    let mut p = 10;
    loop {
        let first = *b.get(p).ok_or(Malformed(W))?;
        if first == 0xFF {
            break;
        }
        p += if first < 0xFE { 1 } else { 5 }; // previous entry's length
        let e = *b.get(p).ok_or(Malformed(W))?;
        let (value, len) = match e >> 6 {
            0 => {
                let n = (e & 0x3F) as usize;
                (get(b, p + 1..p + 1 + n, W)?.to_vec(), 1 + n)
            }
            1 => {
                let n = (((e & 0x3F) as usize) << 8) | *b.get(p + 1).ok_or(Malformed(W))? as usize;
                (get(b, p + 2..p + 2 + n, W)?.to_vec(), 2 + n)
            }
            2 => {
                let n = u32::from_be_bytes(get(b, p + 1..p + 5, W)?.try_into().expect("4")) as usize;
                (get(b, p + 5..p + 5 + n, W)?.to_vec(), 5 + n)
            }
            _ => match e {
                0xC0 => (int_bytes(i16::from_le_bytes(get(b, p + 1..p + 3, W)?.try_into().expect("2")) as i64), 3),
                0xD0 => (int_bytes(i32::from_le_bytes(get(b, p + 1..p + 5, W)?.try_into().expect("4")) as i64), 5),
                0xE0 => (int_bytes(i64::from_le_bytes(get(b, p + 1..p + 9, W)?.try_into().expect("8"))), 9),
                0xF0 => {
                    let s = get(b, p + 1..p + 4, W)?;
                    let v = ((s[0] as u32) | (s[1] as u32) << 8 | (s[2] as u32) << 16) << 8;
                    (int_bytes((v as i32 >> 8) as i64), 4)
                }
                0xFE => (int_bytes(*b.get(p + 1).ok_or(Malformed(W))? as i8 as i64), 2),
                0xF1..=0xFD => (int_bytes((e & 0x0F) as i64 - 1), 1),
                _ => return Err(Malformed(W)),
            },
        };
        p += len;
        out.push(value);
    }
    Ok(out)
}

/// The members of an intset.
pub fn intset(b: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    const W: &str = "intset";
    let width = u32::from_le_bytes(get(b, 0..4, W)?.try_into().expect("4")) as usize;
    let n = u32::from_le_bytes(get(b, 4..8, W)?.try_into().expect("4")) as usize;
    if !matches!(width, 2 | 4 | 8) || b.len() != 8 + width * n {
        return Err(Malformed(W));
    }
    Ok(b[8..]
        .chunks(width)
        .map(|c| {
            int_bytes(match width {
                2 => i16::from_le_bytes(c.try_into().expect("2")) as i64,
                4 => i32::from_le_bytes(c.try_into().expect("4")) as i64,
                _ => i64::from_le_bytes(c.try_into().expect("8")),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a listpack from pre-encoded entries (encoding+data), adding back-lengths.
    fn lp(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        for e in entries {
            body.extend_from_slice(e);
            body.push(e.len() as u8);
        }
        let mut out = ((body.len() + 7) as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(0xFF);
        out
    }

    #[test]
    fn listpack_strings_and_integers() {
        let blob = lp(&[&[0x85, b'h', b'e', b'l', b'l', b'o'], &[0x07], &[0xDF, 0xFF], &[0xF1, 0x10, 0x27], &[0xF3, 0xFF, 0xFF, 0xFF, 0x7F]]);
        let got = listpack(&blob).unwrap();
        let want: Vec<Vec<u8>> = vec![b"hello".to_vec(), b"7".to_vec(), b"-1".to_vec(), b"10000".to_vec(), b"2147483647".to_vec()];
        assert_eq!(got, want);
        let mut bad = blob.clone();
        bad.truncate(bad.len() - 2);
        assert!(listpack(&bad).is_err());
    }

    #[test]
    fn ziplist_and_intset() {
        // zlbytes, zltail, zllen; entries: "ab", int8 -3, immediate 5; end.
        let entries: Vec<u8> = vec![0, 0x02, b'a', b'b', 4, 0xFE, 0xFD, 3, 0xF6];
        let mut zl = ((10 + entries.len() + 1) as u32).to_le_bytes().to_vec();
        zl.extend_from_slice(&0u32.to_le_bytes());
        zl.extend_from_slice(&3u16.to_le_bytes());
        zl.extend_from_slice(&entries);
        zl.push(0xFF);
        assert_eq!(ziplist(&zl).unwrap(), vec![b"ab".to_vec(), b"-3".to_vec(), b"5".to_vec()]);
        let mut is = 2u32.to_le_bytes().to_vec();
        is.extend_from_slice(&2u32.to_le_bytes());
        is.extend_from_slice(&(-5i16).to_le_bytes());
        is.extend_from_slice(&300i16.to_le_bytes());
        assert_eq!(intset(&is).unwrap(), vec![b"-5".to_vec(), b"300".to_vec()]);
    }
}
