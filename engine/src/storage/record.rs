//! A key's value as the storage tier keeps it: everything needed to rebuild the entry, in a
//! format independent of the engine's memory layout and of compression dictionaries.
//!
//! ```text
//! format 1u8 | expiry unix ms i64 (i64::MIN: none) | Memcached flags u32 | RDB object
//! ```
//!
//! The RDB object (type byte, then the value, as in DUMP) serves all five types: a collection
//! is stored whole, so a write to one element rewrites the key's value (the trade-off of one
//! value per key: simple, atomic per key, at the price of write amplification for large
//! collections).

use super::StorageError;
use crate::keyspace::{Entry, Keyspace, ValueRef};
use crate::rdb::{decode_value, encode_object, Reader, Restored};

const FORMAT: u8 = 1;

/// A stored value read back.
pub struct Stored {
    pub expire: Option<i64>,
    pub flags: u32,
    pub value: Restored,
}

impl Stored {
    /// The entry this stored value becomes under `key` in database `db` (strings through
    /// the tenant's codec and tier placement, as SET does), with a new version.
    pub fn into_entry(self, ks: &Keyspace, db: usize, key: &[u8], access: u32) -> Entry {
        let meta = crate::keyspace::Meta { expire: self.expire, flags: self.flags, version: ks.next_version(), access };
        match self.value {
            Restored::Str(v) => ks.new_str_entry(db, key, &v, &meta),
            Restored::Coll(c) => Entry::new_coll(key, c, &meta),
        }
    }
}

/// Appends the stored form of entry `e` of database `db` (compressed strings decoded).
pub fn encode(ks: &Keyspace, db: usize, e: &Entry, out: &mut Vec<u8>) -> Result<(), StorageError> {
    out.push(FORMAT);
    out.extend_from_slice(&e.expire().unwrap_or(i64::MIN).to_le_bytes());
    out.extend_from_slice(&e.flags().to_le_bytes());
    match e.value() {
        ValueRef::Encoded(_) => {
            let plain = ks.string(db, e).map_err(|why| StorageError::Backend(format!("key '{}' does not decode: {why}", String::from_utf8_lossy(e.key()))))?;
            encode_object(ValueRef::Str(&plain.unwrap_or_default()), None, out);
        }
        v => encode_object(v, None, out),
    }
    Ok(())
}

/// Reads a stored value back.
pub fn decode(b: &[u8]) -> Result<Stored, StorageError> {
    let bad = |why: &str| StorageError::Backend(format!("a stored value is damaged: {why}"));
    if b.len() < 1 + 8 + 4 + 1 || b[0] != FORMAT {
        return Err(bad("unknown format"));
    }
    let expire = i64::from_le_bytes(b[1..9].try_into().unwrap());
    let flags = u32::from_le_bytes(b[9..13].try_into().unwrap());
    let mut r = Reader::new(&b[13..]);
    let t = r.byte().map_err(|_| bad("no type"))?;
    let value = decode_value(&mut r, t).map_err(|e| bad(&e.to_string()))?;
    Ok(Stored { expire: (expire != i64::MIN).then_some(expire), flags, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Collection, Meta};

    #[test]
    fn entries_round_trip_with_their_metadata() {
        let (ks, _) = Keyspace::new(0, 1, &Default::default(), None, None);
        let meta = Meta { expire: Some(1_900_000_000_000), flags: 77, version: 1, access: 0 };
        let s = Entry::new_str(b"k", b"hello", &meta);
        let mut out = Vec::new();
        encode(&ks, 0, &s, &mut out).unwrap();
        let back = decode(&out).unwrap();
        assert_eq!((back.expire, back.flags), (Some(1_900_000_000_000), 77));
        assert!(matches!(back.value, Restored::Str(ref v) if v == b"hello"));
        let mut list = Collection::List(Default::default());
        if let Collection::List(l) = &mut list {
            l.push_back(b"a".to_vec().into_boxed_slice());
        }
        let l = Entry::new_coll(b"l", list, &Meta { expire: None, flags: 0, version: 1, access: 0 });
        out.clear();
        encode(&ks, 0, &l, &mut out).unwrap();
        let back = decode(&out).unwrap();
        assert_eq!(back.expire, None);
        assert!(matches!(back.value, Restored::Coll(Collection::List(ref l)) if &*l[0] == b"a"));
        assert!(decode(&out[..5]).is_err());
        assert!(decode(b"\x02garbage-garbage").is_err());
    }
}
