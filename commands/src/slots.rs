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

#[cfg(test)]
mod tests {
    use super::*;

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
}
