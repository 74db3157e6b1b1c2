//! Redis Cluster's key → slot function, shared by the proxy (routing, CLUSTER KEYSLOT) and
//! the engine (CLUSTER COUNTKEYSINSLOT / GETKEYSINSLOT): CRC16 (XMODEM) of the key or of its
//! `{hash tag}`, modulo 16384.

pub const SLOTS: usize = 16384;

/// CRC16-CCITT (XMODEM: poly 0x1021, init 0), the checksum Redis Cluster hashes keys with.
/// Table-driven; 20 lines do not justify a dependency.
pub fn crc16(data: &[u8]) -> u16 {
    static TABLE: std::sync::LazyLock<[u16; 256]> = std::sync::LazyLock::new(|| {
        let mut t = [0u16; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut crc = (i as u16) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            }
            *slot = crc;
        }
        t
    });
    let t = &*TABLE;
    data.iter().fold(0u16, |crc, &b| (crc << 8) ^ t[((crc >> 8) as u8 ^ b) as usize])
}

/// The part of a key that is hashed: the text between the first `{` and the next `}` when it
/// is not empty, else the whole key (Redis Cluster's hash tags).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

/// What follows `TRYAGAIN slot N ` in an engine's refusal of a key of a slot it handed over.
const HANDED_OVER: &str = "is being handed over to another engine; try again";

/// The error an engine answers for a key of slot `slot` once it has handed the slot over
/// (without the leading `-`): `TRYAGAIN`, which Redis clients retry. The proxy tells it
/// apart from other errors with `handed_over_slot`.
pub fn handed_over_error(slot: u16) -> String {
    format!("TRYAGAIN slot {slot} {HANDED_OVER}")
}

/// The slot an engine's reply says it handed over (`handed_over_error` as a RESP error).
pub fn handed_over_slot(reply: &[u8]) -> Option<u16> {
    let rest = reply.strip_prefix(b"-TRYAGAIN slot ")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let tail = rest[digits..].strip_prefix(b" ")?.strip_prefix(HANDED_OVER.as_bytes())?;
    if tail != b"\r\n" {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok().filter(|&s| (s as usize) < SLOTS)
}

/// A set of slots (a bitmap of 16384 bits), written and read as ranges: `0-99 200 300-310`.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotSet {
    bits: Box<[u64; SLOTS / 64]>,
}

impl Default for SlotSet {
    fn default() -> Self {
        SlotSet { bits: Box::new([0; SLOTS / 64]) }
    }
}

impl std::fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlotSet({self})")
    }
}

/// A slot range that does not read as `first-last` or a slot, or lies outside 0-16383.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a slot range (first-last or one slot, within 0-16383)")]
pub struct BadSlotRange(pub String);

impl SlotSet {
    pub fn insert(&mut self, slot: u16) {
        self.bits[slot as usize / 64] |= 1 << (slot % 64);
    }

    pub fn insert_range(&mut self, first: u16, last: u16) {
        for s in first..=last {
            self.insert(s);
        }
    }

    pub fn contains(&self, slot: u16) -> bool {
        self.bits[slot as usize / 64] & (1 << (slot % 64)) != 0
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.contains(key_slot(key))
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The slots in order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..SLOTS as u16).filter(|&s| self.contains(s))
    }

    /// Maximal runs of slots, as (first, last).
    pub fn ranges(&self) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for s in self.iter() {
            match out.last_mut() {
                Some(r) if r.1 + 1 == s => r.1 = s,
                _ => out.push((s, s)),
            }
        }
        out
    }

    /// The ranges as command arguments, `first-last` each.
    pub fn range_args(&self) -> Vec<String> {
        self.ranges().iter().map(|(a, b)| format!("{a}-{b}")).collect()
    }

    /// Reads one range: `first-last` or a single slot.
    pub fn parse_range(text: &str) -> Result<(u16, u16), BadSlotRange> {
        let bad = || BadSlotRange(text.to_string());
        let slot = |t: &str| t.trim().parse::<u16>().ok().filter(|&s| (s as usize) < SLOTS).ok_or_else(bad);
        let (first, last) = match text.split_once('-') {
            Some((a, b)) => (slot(a)?, slot(b)?),
            None => (slot(text)?, slot(text)?),
        };
        if first > last {
            return Err(bad());
        }
        Ok((first, last))
    }

    /// Ranges separated by spaces or commas.
    pub fn parse(text: &str) -> Result<SlotSet, BadSlotRange> {
        let mut set = SlotSet::default();
        for part in text.split(|c: char| c == ',' || c.is_whitespace()).filter(|p| !p.is_empty()) {
            let (a, b) = Self::parse_range(part)?;
            set.insert_range(a, b);
        }
        Ok(set)
    }
}

impl std::fmt::Display for SlotSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.ranges().into_iter().map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
        f.write_str(&parts.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handed_over_errors_are_recognised() {
        let reply = format!("-{}\r\n", handed_over_error(1234));
        assert_eq!(handed_over_slot(reply.as_bytes()), Some(1234));
        assert_eq!(handed_over_slot(b"-TRYAGAIN engine 127.0.0.1:1 unavailable: gone\r\n"), None);
        assert_eq!(handed_over_slot(b"-TRYAGAIN slot 99999 is being handed over to another engine; try again\r\n"), None);
        assert_eq!(handed_over_slot(b"-TRYAGAIN slot 12 is being handed over to another engine; try again!\r\n"), None);
        assert_eq!(handed_over_slot(b"+OK\r\n"), None);
    }

    #[test]
    fn crc16_matches_redis_cluster() {
        // Reference values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"somekey"), 11058);
    }

    #[test]
    fn hash_tags_follow_the_cluster_rules() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"nobraces"), b"nobraces");
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
    }

    #[test]
    fn slot_sets_read_and_write_ranges() {
        let set = SlotSet::parse("0-2, 5 16383").unwrap();
        assert_eq!(set.ranges(), vec![(0, 2), (5, 5), (16383, 16383)]);
        assert_eq!(set.to_string(), "0-2 5 16383");
        assert_eq!(set.range_args(), vec!["0-2", "5-5", "16383-16383"]);
        assert_eq!(set.len(), 5);
        assert!(set.contains(1) && !set.contains(3));
        assert!(SlotSet::parse("3-1").is_err());
        assert!(SlotSet::parse("16384").is_err());
        assert!(SlotSet::parse("a-b").is_err());
        assert!(SlotSet::parse("").unwrap().is_empty());
    }
}
