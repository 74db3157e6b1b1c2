//! Collection values (list, hash, set, sorted set) and the byte-keyed map they are built on.
//!
//! `BytesMap` is a thin wrapper over hashbrown's `HashTable` because the commands need what
//! `HashMap` does not offer: uniform random members in O(1) expected time (SPOP, SRANDMEMBER,
//! HRANDFIELD, ZRANDMEMBER) and cursor iteration by bucket index (HSCAN, SSCAN, ZSCAN).

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::LazyLock;

use hashbrown::HashTable;

use super::ranked::RankedSet;
use super::stream::Stream;

pub type Bytes = Box<[u8]>;

static HASHER: LazyLock<foldhash::fast::RandomState> = LazyLock::new(foldhash::fast::RandomState::default);

#[inline]
pub fn hash_bytes(b: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    HASHER.hash_one(b)
}

/// A hash table keyed by byte strings.
#[derive(Clone, Default)]
pub struct BytesMap<V> {
    table: HashTable<(Bytes, V)>,
}

impl<V> BytesMap<V> {
    pub fn new() -> Self {
        BytesMap { table: HashTable::new() }
    }
    pub fn len(&self) -> usize {
        self.table.len()
    }
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
    pub fn get(&self, k: &[u8]) -> Option<&V> {
        self.table.find(hash_bytes(k), |(ek, _)| &**ek == k).map(|(_, v)| v)
    }
    pub fn get_mut(&mut self, k: &[u8]) -> Option<&mut V> {
        self.table.find_mut(hash_bytes(k), |(ek, _)| &**ek == k).map(|(_, v)| v)
    }
    pub fn contains(&self, k: &[u8]) -> bool {
        self.get(k).is_some()
    }
    /// Inserts or replaces; returns the previous value.
    pub fn insert(&mut self, k: &[u8], v: V) -> Option<V> {
        let h = hash_bytes(k);
        match self.table.entry(h, |(ek, _)| &**ek == k, |(ek, _)| hash_bytes(ek)) {
            hashbrown::hash_table::Entry::Occupied(mut o) => Some(std::mem::replace(&mut o.get_mut().1, v)),
            hashbrown::hash_table::Entry::Vacant(vac) => {
                vac.insert((k.into(), v));
                None
            }
        }
    }
    pub fn remove(&mut self, k: &[u8]) -> Option<V> {
        match self.table.find_entry(hash_bytes(k), |(ek, _)| &**ek == k) {
            Ok(o) => Some(o.remove().0 .1),
            Err(_) => None,
        }
    }
    /// Removes and returns the pair at a bucket index.
    pub fn remove_bucket(&mut self, idx: usize) -> Option<(Bytes, V)> {
        self.table.get_bucket_entry(idx).ok().map(|o| o.remove().0)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &V)> {
        self.table.iter().map(|(k, v)| (k, v))
    }
    pub fn num_buckets(&self) -> usize {
        self.table.num_buckets()
    }
    pub fn bucket(&self, idx: usize) -> Option<(&Bytes, &V)> {
        self.table.get_bucket(idx).map(|(k, v)| (k, v))
    }
    /// A uniformly random occupied bucket index, or None when empty.
    pub fn random_bucket(&self) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        let n = self.table.num_buckets();
        loop {
            let i = fastrand::usize(..n);
            if self.table.get_bucket(i).is_some() {
                return Some(i);
            }
        }
    }
    pub fn heap_size(&self) -> usize {
        self.table.allocation_size() + self.table.iter().map(|(k, _)| k.len()).sum::<usize>()
    }
}

/// A sorted-set element ordered by (score, member), as Redis orders them.
#[derive(Clone, Debug)]
pub struct ScoredMember {
    pub score: f64,
    pub member: Bytes,
}

impl PartialEq for ScoredMember {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for ScoredMember {}
impl PartialOrd for ScoredMember {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for ScoredMember {
    fn cmp(&self, o: &Self) -> Ordering {
        self.cmp_to(o.score, &o.member)
    }
}

impl ScoredMember {
    /// This element compared with `(score, member)`, in the set's order, without building one.
    pub fn cmp_to(&self, score: f64, member: &[u8]) -> Ordering {
        self.score.total_cmp(&score).then_with(|| (*self.member).cmp(member))
    }
}

/// A sorted set: member → score, plus the (score, member) order with ranks (O(log n) rank,
/// select and range counts, as Redis's skiplist gives them).
#[derive(Clone, Default)]
pub struct ZSet {
    pub dict: BytesMap<f64>,
    pub tree: RankedSet<ScoredMember>,
}

impl ZSet {
    pub fn len(&self) -> usize {
        self.dict.len()
    }
    pub fn is_empty(&self) -> bool {
        self.dict.is_empty()
    }
    pub fn score(&self, m: &[u8]) -> Option<f64> {
        self.dict.get(m).copied()
    }
    /// Inserts or updates; returns the previous score.
    pub fn insert(&mut self, m: &[u8], score: f64) -> Option<f64> {
        let score = if score == 0.0 { 0.0 } else { score }; // fold -0 into 0
        let old = self.dict.insert(m, score);
        let element = match old {
            Some(o) if o.total_cmp(&score) == Ordering::Equal => return old,
            // Rescored: the element moves, keeping its member's allocation.
            Some(o) => match self.tree.remove_by(|e| e.cmp_to(o, m)) {
                Some(e) => ScoredMember { score, member: e.member },
                None => ScoredMember { score, member: m.into() },
            },
            None => ScoredMember { score, member: m.into() },
        };
        self.tree.insert(element);
        old
    }
    pub fn remove(&mut self, m: &[u8]) -> Option<f64> {
        let old = self.dict.remove(m)?;
        self.tree.remove_by(|e| e.cmp_to(old, m));
        Some(old)
    }
    /// 0-based rank in ascending order.
    pub fn rank(&self, m: &[u8]) -> Option<usize> {
        let s = self.score(m)?;
        Some(self.tree.rank_by(|e| e.cmp_to(s, m) == Ordering::Less))
    }
    pub fn heap_size(&self) -> usize {
        self.dict.heap_size() + self.tree.heap_bytes() + self.tree.iter().map(|e| e.member.len()).sum::<usize>()
    }
}

/// What an entry's value is.
pub enum ValueRef<'a> {
    Str(&'a [u8]),
    /// A compressed string: header and payload.
    Encoded(&'a [u8]),
    Coll(&'a Collection),
    /// A collection frozen in the PMem tier (an RDB-encoded object); lookups through the
    /// shard thaw it first, so only whole-keyspace walks (SCAN, SAVE) see this.
    Frozen(Kind, &'a [u8]),
}

/// A collection value owned by an entry.
/// The sizes up to which Redis keeps a collection compact (`hash-max-listpack-entries` and
/// `-value`, `zset-max-listpack-*`, `set-max-intset-entries`).
#[derive(Debug, Clone, Copy)]
pub struct EncodingLimits {
    pub hash_entries: usize,
    pub hash_value: usize,
    pub zset_entries: usize,
    pub zset_value: usize,
    pub set_intset_entries: usize,
}

impl Default for EncodingLimits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        EncodingLimits { hash_entries: 128, hash_value: 64, zset_entries: 128, zset_value: 64, set_intset_entries: 512 }
    }
}

pub enum Collection {
    List(VecDeque<Bytes>),
    Hash(BytesMap<Bytes>),
    Set(BytesMap<()>),
    ZSet(ZSet),
    Stream(Box<Stream>),
}

impl Collection {
    pub fn kind(&self) -> Kind {
        match self {
            Collection::List(_) => Kind::List,
            Collection::Hash(_) => Kind::Hash,
            Collection::Set(_) => Kind::Set,
            Collection::ZSet(_) => Kind::ZSet,
            Collection::Stream(_) => Kind::Stream,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Collection::List(l) => l.len(),
            Collection::Hash(h) => h.len(),
            Collection::Set(s) => s.len(),
            Collection::ZSet(z) => z.len(),
            Collection::Stream(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn deep_clone(&self) -> Collection {
        match self {
            Collection::List(l) => Collection::List(l.clone()),
            Collection::Hash(h) => Collection::Hash(h.clone()),
            Collection::Set(s) => Collection::Set(s.clone()),
            Collection::ZSet(z) => Collection::ZSet(z.clone()),
            Collection::Stream(s) => Collection::Stream(s.clone()),
        }
    }
    pub fn heap_size(&self) -> usize {
        std::mem::size_of::<Collection>()
            + match self {
                Collection::List(l) => l.capacity() * 16 + l.iter().map(|e| e.len()).sum::<usize>(),
                Collection::Hash(h) => h.heap_size() + h.iter().map(|(_, v)| v.len()).sum::<usize>(),
                Collection::Set(s) => s.heap_size(),
                Collection::ZSet(z) => z.heap_size(),
                Collection::Stream(s) => s.heap_size(),
            }
    }
    /// The encoding name OBJECT ENCODING reports (Redis 7.0 names by size class).
    /// The encoding Redis 7.0 would report for this collection (OBJECT ENCODING), by the
    /// size limits it converts at. Redis converts one way (a hash that grew past the limits
    /// stays a hashtable when it shrinks); this looks at the collection as it is now.
    pub fn encoding(&self, limits: &EncodingLimits) -> &'static str {
        match self {
            Collection::List(_) => "quicklist",
            Collection::Hash(h) => {
                let max = limits.hash_value;
                if h.len() <= limits.hash_entries && h.iter().all(|(k, v)| k.len() <= max && v.len() <= max) {
                    "listpack"
                } else {
                    "hashtable"
                }
            }
            Collection::Set(s) => {
                if s.len() <= limits.set_intset_entries && s.iter().all(|(k, _)| crate::protocol::parse_i64(k).is_some()) {
                    "intset"
                } else {
                    "hashtable"
                }
            }
            Collection::ZSet(z) => {
                if z.len() <= limits.zset_entries && z.dict.iter().all(|(m, _)| m.len() <= limits.zset_value) {
                    "listpack"
                } else {
                    "skiplist"
                }
            }
            Collection::Stream(_) => "stream",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_map_basic_and_random() {
        let mut m = BytesMap::new();
        for i in 0..100 {
            assert!(m.insert(format!("k{i}").as_bytes(), i).is_none());
        }
        assert_eq!(m.insert(b"k5", 500), Some(5));
        assert_eq!(m.get(b"k5"), Some(&500));
        assert_eq!(m.remove(b"k5"), Some(500));
        assert_eq!(m.len(), 99);
        let b = m.random_bucket().unwrap();
        let (k, _) = m.bucket(b).unwrap();
        let k = k.clone();
        assert!(m.remove_bucket(b).is_some());
        assert!(!m.contains(&k));
    }

    #[test]
    fn zset_order_rank_and_update() {
        let mut z = ZSet::default();
        z.insert(b"b", 2.0);
        z.insert(b"a", 2.0);
        z.insert(b"c", 1.0);
        assert_eq!(z.rank(b"c"), Some(0));
        assert_eq!(z.rank(b"a"), Some(1));
        assert_eq!(z.insert(b"c", 3.0), Some(1.0));
        assert_eq!(z.rank(b"c"), Some(2));
        let order: Vec<_> = z.tree.iter().map(|e| e.member.to_vec()).collect();
        assert_eq!(order, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(z.remove(b"a"), Some(2.0));
        assert_eq!(z.tree.len(), 2);
    }
}

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Str = 0,
    List = 1,
    Hash = 2,
    Set = 3,
    ZSet = 4,
    Stream = 5,
}

impl Kind {
    pub(crate) fn from_bits(b: u8) -> Kind {
        match b & 7 {
            0 => Kind::Str,
            1 => Kind::List,
            2 => Kind::Hash,
            3 => Kind::Set,
            4 => Kind::ZSet,
            5 => Kind::Stream,
            _ => Kind::Str,
        }
    }
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Str => "string",
            Kind::List => "list",
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }
}
