//! Keyspace notifications as Redis 7.0 defines them: the event classes `notify-keyspace-events`
//! selects (its flag letters, read and written back as Redis does), and the event each write
//! command reports for each of its keys (`event_for`), with the class it belongs to.

/// Event classes and the two kinds of channel, as bits (Redis's `NOTIFY_*` values).
pub mod class {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const KEYEVENT: u32 = 1 << 1;
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
    pub const KEY_MISS: u32 = 1 << 11;
    pub const MODULE: u32 = 1 << 13;
    pub const NEW: u32 = 1 << 14;
    /// `A`: every class but key misses and new keys.
    pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// The letters in the order Redis writes them back (after `A` or its classes).
const LETTERS: [(char, u32); 10] = [
    ('g', class::GENERIC),
    ('$', class::STRING),
    ('l', class::LIST),
    ('s', class::SET),
    ('h', class::HASH),
    ('z', class::ZSET),
    ('x', class::EXPIRED),
    ('e', class::EVICTED),
    ('t', class::STREAM),
    ('d', class::MODULE),
];

/// The classes a `notify-keyspace-events` value selects; None for a letter Redis does not know.
pub fn parse_flags(value: &str) -> Option<u32> {
    let mut flags = 0;
    for c in value.chars() {
        flags |= match c {
            'A' => class::ALL,
            'K' => class::KEYSPACE,
            'E' => class::KEYEVENT,
            'm' => class::KEY_MISS,
            'n' => class::NEW,
            c => LETTERS.iter().find(|(l, _)| *l == c)?.1,
        };
    }
    Some(flags)
}

/// The value as CONFIG GET shows it (Redis's `keyspaceEventsFlagsToString`): `A` or the class
/// letters, then `n`, `K`, `E`, `m`.
pub fn format_flags(flags: u32) -> String {
    let mut s = String::new();
    if flags & class::ALL == class::ALL {
        s.push('A');
    } else {
        s.extend(LETTERS.iter().filter(|(_, bit)| flags & bit != 0).map(|(l, _)| *l));
    }
    for (letter, bit) in [('n', class::NEW), ('K', class::KEYSPACE), ('E', class::KEYEVENT), ('m', class::KEY_MISS)] {
        if flags & bit != 0 {
            s.push(letter);
        }
    }
    s
}

/// The event a write command reports for the key at key position `nth` (0: its first key),
/// given its lowercase name and arguments, with the event's class; None for commands that
/// report none (reads, FLUSHALL, stream consumer bookkeeping…).
pub fn event_for(name: &str, argv: &[&[u8]], nth: usize) -> Option<(u32, &'static str)> {
    use class::*;
    let arg = |i: usize| argv.get(i).map(|a| a.to_ascii_uppercase()).unwrap_or_default();
    let has = |word: &[u8]| argv.iter().skip(1).any(|a| a.eq_ignore_ascii_case(word));
    let side = |word: Vec<u8>, left: &'static str, right: &'static str| if word == b"LEFT" { left } else { right };
    let event = match name {
        // Generic.
        "del" | "unlink" | "getdel" => (GENERIC, "del"),
        "expire" | "pexpire" | "expireat" | "pexpireat" => (GENERIC, "expire"),
        "persist" => (GENERIC, "persist"),
        "rename" | "renamenx" => (GENERIC, if nth == 0 { "rename_from" } else { "rename_to" }),
        "move" => (GENERIC, if nth == 0 { "move_from" } else { "move_to" }),
        "copy" if nth == 1 => (GENERIC, "copy_to"),
        "restore" => (GENERIC, "restore"),
        "sort" | "sort_ro" => (GENERIC, "sortstore"),
        "getex" if has(b"PERSIST") => (GENERIC, "persist"),
        "getex" => (GENERIC, "expire"),
        // Strings.
        "set" | "setnx" | "setex" | "psetex" | "getset" | "mset" | "msetnx" | "bitop" => (STRING, "set"),
        "setrange" => (STRING, "setrange"),
        "append" => (STRING, "append"),
        "incr" | "decr" | "incrby" | "decrby" => (STRING, "incrby"),
        "incrbyfloat" => (STRING, "incrbyfloat"),
        "setbit" | "bitfield" => (STRING, "setbit"),
        "pfadd" | "pfmerge" => (STRING, "pfadd"),
        // Lists.
        "lpush" | "lpushx" => (LIST, "lpush"),
        "rpush" | "rpushx" => (LIST, "rpush"),
        "linsert" => (LIST, "linsert"),
        "lset" => (LIST, "lset"),
        "ltrim" => (LIST, "ltrim"),
        "lrem" => (LIST, "lrem"),
        "lpop" | "blpop" => (LIST, "lpop"),
        "rpop" | "brpop" => (LIST, "rpop"),
        // LMPOP numkeys key… LEFT|RIGHT; BLMPOP timeout numkeys key… LEFT|RIGHT.
        "lmpop" => (LIST, side(arg(2 + numkeys(argv, 1)?), "lpop", "rpop")),
        "blmpop" => (LIST, side(arg(3 + numkeys(argv, 2)?), "lpop", "rpop")),
        "rpoplpush" | "brpoplpush" => (LIST, if nth == 0 { "rpop" } else { "lpush" }),
        "lmove" | "blmove" if nth == 0 => (LIST, side(arg(3), "lpop", "rpop")),
        "lmove" | "blmove" => (LIST, side(arg(4), "lpush", "rpush")),
        // Sets.
        "sadd" => (SET, "sadd"),
        "srem" => (SET, "srem"),
        "spop" => (SET, "spop"),
        "smove" => (SET, if nth == 0 { "srem" } else { "sadd" }),
        "sinterstore" => (SET, "sinterstore"),
        "sunionstore" => (SET, "sunionstore"),
        "sdiffstore" => (SET, "sdiffstore"),
        // Hashes.
        "hset" | "hmset" | "hsetnx" => (HASH, "hset"),
        "hdel" => (HASH, "hdel"),
        "hincrby" => (HASH, "hincrby"),
        "hincrbyfloat" => (HASH, "hincrbyfloat"),
        // Sorted sets (GEOADD stores through ZADD).
        "zadd" if has(b"INCR") => (ZSET, "zincr"),
        "zadd" | "geoadd" => (ZSET, "zadd"),
        "zincrby" => (ZSET, "zincr"),
        "zrem" => (ZSET, "zrem"),
        "zremrangebyscore" => (ZSET, "zrembyscore"),
        "zremrangebyrank" => (ZSET, "zrembyrank"),
        "zremrangebylex" => (ZSET, "zrembylex"),
        "zpopmin" | "bzpopmin" => (ZSET, "zpopmin"),
        "zpopmax" | "bzpopmax" => (ZSET, "zpopmax"),
        "zmpop" | "bzmpop" => (ZSET, if has(b"MIN") { "zpopmin" } else { "zpopmax" }),
        "zunionstore" => (ZSET, "zunionstore"),
        "zinterstore" => (ZSET, "zinterstore"),
        "zdiffstore" => (ZSET, "zdiffstore"),
        "zrangestore" => (ZSET, "zrangestore"),
        "georadius" | "georadiusbymember" => (ZSET, "georadiusstore"),
        "geosearchstore" => (ZSET, "geosearchstore"),
        // Streams.
        "xadd" => (STREAM, "xadd"),
        "xtrim" => (STREAM, "xtrim"),
        "xdel" => (STREAM, "xdel"),
        "xsetid" => (STREAM, "xsetid"),
        // XGROUP and the commands that create consumers on the way (XREADGROUP, XCLAIM,
        // XAUTOCLAIM) name their events themselves: whether a group or consumer was made or
        // removed is not in the key's change.
        _ => return None,
    };
    Some(event)
}

/// The key count at `argv[at]` (LMPOP's numkeys).
fn numkeys(argv: &[&[u8]], at: usize) -> Option<usize> {
    std::str::from_utf8(argv.get(at)?).ok()?.parse().ok()
}

/// Whether an event already says the key is gone (no `del` needs to follow it).
pub fn removes(event: &str) -> bool {
    matches!(event, "del" | "rename_from" | "move_from" | "expired" | "evicted")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_and_write_back_as_redis() {
        for (given, shown) in [("gKE", "gKE"), ("$lshzxeKE", "$lshzxeKE"), ("KA", "AK"), ("EA", "AE"), ("", ""), ("Kx", "xK"), ("En", "nE")] {
            assert_eq!(format_flags(parse_flags(given).unwrap()), shown, "{given}");
        }
        assert_eq!(parse_flags("KQ"), None);
    }

    #[test]
    fn events_by_command_and_key_position() {
        let argv = |s: &str| s.split(' ').map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
        let ev = |s: &str, nth| {
            let a = argv(s);
            let refs: Vec<&[u8]> = a.iter().map(|v| &v[..]).collect();
            event_for(&s.split(' ').next().unwrap().to_lowercase(), &refs, nth).map(|(_, e)| e)
        };
        assert_eq!(ev("hmset h a 1", 0), Some("hset"));
        assert_eq!(ev("decr n", 0), Some("incrby"));
        assert_eq!(ev("lmove a b RIGHT LEFT", 0), Some("rpop"));
        assert_eq!(ev("lmove a b RIGHT LEFT", 1), Some("lpush"));
        assert_eq!(ev("lmpop 2 a b LEFT", 0), Some("lpop"));
        assert_eq!(ev("blmpop 0 1 a RIGHT COUNT 2", 0), Some("rpop"));
        assert_eq!(ev("rename a b", 1), Some("rename_to"));
        assert_eq!(ev("zadd z INCR 1 m", 0), Some("zincr"));
        assert_eq!(ev("get k", 0), None);
    }
}
