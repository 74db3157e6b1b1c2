//! Key-spec flags of every command with keys, as Redis 7.0 declares them (its COMMAND INFO):
//! per key spec, the access kind (RO read-only, RW read-write, OW overwrite, RM remove) and
//! what happens to the key's data (access: returned to the client; insert, update, delete).
//! COMMAND GETKEYSANDFLAGS reports them and ACL key permissions follow them: `access` needs
//! read permission, insert/update/delete need write permission.
//!
//! A command's n-th key (as `table::key_positions` lists them) uses its n-th spec, the last
//! spec covering any keys beyond.

/// (command, flags of each key spec).
pub static KEY_SPECS: &[(&str, &[&[&str]])] = &[
    ("append", &[&["RW", "insert"]]),
    ("bitcount", &[&["RO", "access"]]),
    ("bitfield", &[&["RW", "access", "update", "variable_flags"]]),
    ("bitfield_ro", &[&["RO", "access"]]),
    ("bitop", &[&["OW", "update"], &["RO", "access"]]),
    ("bitpos", &[&["RO", "access"]]),
    ("blmove", &[&["RW", "access", "delete"], &["RW", "insert"]]),
    ("blmpop", &[&["RW", "access", "delete"]]),
    ("blpop", &[&["RW", "access", "delete"]]),
    ("brpop", &[&["RW", "access", "delete"]]),
    ("brpoplpush", &[&["RW", "access", "delete"], &["RW", "insert"]]),
    ("bzmpop", &[&["RW", "access", "delete"]]),
    ("bzpopmax", &[&["RW", "access", "delete"]]),
    ("bzpopmin", &[&["RW", "access", "delete"]]),
    ("cad", &[&["RW", "access", "delete"]]),
    ("cas", &[&["RW", "access", "update"]]),
    ("copy", &[&["RO", "access"], &["OW", "update"]]),
    // debug, memory, object, xgroup, xinfo: containers; Redis declares their key specs on the
    // subcommands (DEBUG OBJECT, MEMORY USAGE, OBJECT ENCODING, XGROUP CREATE, XINFO STREAM…).
    ("debug", &[&["RO"]]),
    ("decr", &[&["RW", "access", "update"]]),
    ("decrby", &[&["RW", "access", "update"]]),
    ("del", &[&["RM", "delete"]]),
    ("dump", &[&["RO", "access"]]),
    ("eval", &[&["RW", "access", "update"]]),
    ("eval_ro", &[&["RO", "access"]]),
    ("evalsha", &[&["RW", "access", "update"]]),
    ("evalsha_ro", &[&["RO", "access"]]),
    ("exists", &[&["RO"]]),
    ("expire", &[&["RW", "update"]]),
    ("expireat", &[&["RW", "update"]]),
    ("expiretime", &[&["RO", "access"]]),
    ("fcall", &[&["RW", "access", "update"]]),
    ("fcall_ro", &[&["RO", "access"]]),
    ("geoadd", &[&["RW", "update"]]),
    ("geodist", &[&["RO", "access"]]),
    ("geohash", &[&["RO", "access"]]),
    ("geopos", &[&["RO", "access"]]),
    ("georadius", &[&["RO", "access"], &["OW", "update"], &["OW", "update"]]),
    ("georadius_ro", &[&["RO", "access"]]),
    ("georadiusbymember", &[&["RO", "access"], &["OW", "update"], &["OW", "update"]]),
    ("georadiusbymember_ro", &[&["RO", "access"]]),
    ("geosearch", &[&["RO", "access"]]),
    ("geosearchstore", &[&["OW", "update"], &["RO", "access"]]),
    ("get", &[&["RO", "access"]]),
    ("getbit", &[&["RO", "access"]]),
    ("getdel", &[&["RW", "access", "delete"]]),
    ("getex", &[&["RW", "access", "update"]]),
    ("getrange", &[&["RO", "access"]]),
    ("getset", &[&["RW", "access", "update"]]),
    ("hdel", &[&["RW", "delete"]]),
    ("hexists", &[&["RO"]]),
    ("hget", &[&["RO", "access"]]),
    ("hgetall", &[&["RO", "access"]]),
    ("hincrby", &[&["RW", "access", "update"]]),
    ("hincrbyfloat", &[&["RW", "access", "update"]]),
    ("hkeys", &[&["RO", "access"]]),
    ("hlen", &[&["RO"]]),
    ("hmget", &[&["RO", "access"]]),
    ("hmset", &[&["RW", "update"]]),
    ("hrandfield", &[&["RO", "access"]]),
    ("hscan", &[&["RO", "access"]]),
    ("hset", &[&["RW", "update"]]),
    ("hsetnx", &[&["RW", "insert"]]),
    ("hstrlen", &[&["RO"]]),
    ("hvals", &[&["RO", "access"]]),
    ("incr", &[&["RW", "access", "update"]]),
    ("incrby", &[&["RW", "access", "update"]]),
    ("incrbyfloat", &[&["RW", "access", "update"]]),
    ("lcs", &[&["RO", "access"]]),
    ("lindex", &[&["RO", "access"]]),
    ("linsert", &[&["RW", "insert"]]),
    ("llen", &[&["RO"]]),
    ("lmove", &[&["RW", "access", "delete"], &["RW", "insert"]]),
    ("lmpop", &[&["RW", "access", "delete"]]),
    ("lpop", &[&["RW", "access", "delete"]]),
    ("lpos", &[&["RO", "access"]]),
    ("lpush", &[&["RW", "insert"]]),
    ("lpushx", &[&["RW", "insert"]]),
    ("lrange", &[&["RO", "access"]]),
    ("lrem", &[&["RW", "delete"]]),
    ("lset", &[&["RW", "update"]]),
    ("ltrim", &[&["RW", "delete"]]),
    ("mc.arith", &[&["RW", "access", "update"]]),
    ("mc.delete", &[&["RM", "delete"]]),
    ("mc.gat", &[&["RW", "access", "update"]]),
    ("mc.get", &[&["RO", "access"]]),
    ("mc.store", &[&["RW", "insert", "update"]]),
    ("mc.touch", &[&["RW", "update"]]),
    ("memory", &[&["RO"]]),
    ("mget", &[&["RO", "access"]]),
    ("move", &[&["RW", "access", "update"]]),
    ("mset", &[&["OW", "update"]]),
    ("msetnx", &[&["OW", "insert"]]),
    ("object", &[&["RO"]]),
    ("persist", &[&["RW", "update"]]),
    ("pexpire", &[&["RW", "update"]]),
    ("pexpireat", &[&["RW", "update"]]),
    ("pexpiretime", &[&["RO", "access"]]),
    ("pfadd", &[&["RW", "insert"]]),
    ("pfcount", &[&["RW", "access"]]),
    ("pfdebug", &[&["RW", "access"]]),
    ("pfmerge", &[&["RW", "access", "insert"], &["RO", "access"]]),
    ("psetex", &[&["OW", "update"]]),
    ("pttl", &[&["RO", "access"]]),
    ("rename", &[&["RW", "access", "delete"], &["OW", "update"]]),
    ("renamenx", &[&["RW", "access", "delete"], &["OW", "insert"]]),
    ("restore", &[&["OW", "update"]]),
    ("rpop", &[&["RW", "access", "delete"]]),
    ("rpoplpush", &[&["RW", "access", "delete"], &["RW", "insert"]]),
    ("rpush", &[&["RW", "insert"]]),
    ("rpushx", &[&["RW", "insert"]]),
    ("sadd", &[&["RW", "insert"]]),
    ("scard", &[&["RO"]]),
    ("sdiff", &[&["RO", "access"]]),
    ("sdiffstore", &[&["OW", "update"], &["RO", "access"]]),
    ("set", &[&["RW", "access", "update", "variable_flags"]]),
    ("setbit", &[&["RW", "access", "update"]]),
    ("setex", &[&["OW", "update"]]),
    ("setnx", &[&["OW", "insert"]]),
    ("setrange", &[&["RW", "update"]]),
    ("sinter", &[&["RO", "access"]]),
    ("sintercard", &[&["RO", "access"]]),
    ("sinterstore", &[&["RW", "update"], &["RO", "access"]]),
    ("sismember", &[&["RO"]]),
    ("smembers", &[&["RO", "access"]]),
    ("smismember", &[&["RO", "access"]]),
    ("smove", &[&["RW", "access", "delete"], &["RW", "insert"]]),
    // Redis's middle spec covers BY/GET patterns, which Terrace does not report as keys.
    ("sort", &[&["RO", "access"], &["OW", "update"]]),
    ("sort_ro", &[&["RO", "access"], &["RO", "access"]]),
    ("spop", &[&["RW", "access", "delete"]]),
    ("srandmember", &[&["RO", "access"]]),
    ("srem", &[&["RW", "delete"]]),
    ("sscan", &[&["RO", "access"]]),
    ("strlen", &[&["RO"]]),
    ("substr", &[&["RO", "access"]]),
    ("sunion", &[&["RO", "access"]]),
    ("sunionstore", &[&["OW", "update"], &["RO", "access"]]),
    ("terrace.import", &[&["OW", "update"]]),
    ("touch", &[&["RO"]]),
    ("ttl", &[&["RO", "access"]]),
    ("type", &[&["RO"]]),
    ("unlink", &[&["RM", "delete"]]),
    ("watch", &[&["RO"]]),
    ("xack", &[&["RW", "update"]]),
    ("xadd", &[&["RW", "update"]]),
    ("xautoclaim", &[&["RW", "delete"]]),
    ("xclaim", &[&["RW", "update"]]),
    ("xdel", &[&["RW", "delete"]]),
    ("xgroup", &[&["RW", "update"]]),
    ("xinfo", &[&["RO", "access"]]),
    ("xlen", &[&["RO"]]),
    ("xpending", &[&["RO", "access"]]),
    ("xrange", &[&["RO", "access"]]),
    ("xread", &[&["RO", "access"]]),
    ("xreadgroup", &[&["RO", "access"]]),
    ("xrevrange", &[&["RO", "access"]]),
    ("xsetid", &[&["RW", "update"]]),
    ("xtrim", &[&["RW", "delete"]]),
    ("zadd", &[&["RW", "update"]]),
    ("zcard", &[&["RO"]]),
    ("zcount", &[&["RO", "access"]]),
    ("zdiff", &[&["RO", "access"]]),
    ("zdiffstore", &[&["OW", "update"], &["RO", "access"]]),
    ("zincrby", &[&["RW", "access", "update"]]),
    ("zinter", &[&["RO", "access"]]),
    ("zintercard", &[&["RO", "access"]]),
    ("zinterstore", &[&["OW", "update"], &["RO", "access"]]),
    ("zlexcount", &[&["RO", "access"]]),
    ("zmpop", &[&["RW", "access", "delete"]]),
    ("zmscore", &[&["RO", "access"]]),
    ("zpopmax", &[&["RW", "access", "delete"]]),
    ("zpopmin", &[&["RW", "access", "delete"]]),
    ("zrandmember", &[&["RO", "access"]]),
    ("zrange", &[&["RO", "access"]]),
    ("zrangebylex", &[&["RO", "access"]]),
    ("zrangebyscore", &[&["RO", "access"]]),
    ("zrangestore", &[&["OW", "update"], &["RO", "access"]]),
    ("zrank", &[&["RO", "access"]]),
    ("zrem", &[&["RW", "delete"]]),
    ("zremrangebylex", &[&["RW", "delete"]]),
    ("zremrangebyrank", &[&["RW", "delete"]]),
    ("zremrangebyscore", &[&["RW", "delete"]]),
    ("zrevrange", &[&["RO", "access"]]),
    ("zrevrangebylex", &[&["RO", "access"]]),
    ("zrevrangebyscore", &[&["RO", "access"]]),
    ("zrevrank", &[&["RO", "access"]]),
    ("zscan", &[&["RO", "access"]]),
    ("zscore", &[&["RO", "access"]]),
    ("zunion", &[&["RO", "access"]]),
    ("zunionstore", &[&["OW", "update"], &["RO", "access"]]),
];

/// The flags of the key at `key_index` for this call: SET and BITFIELD (`variable_flags`)
/// depend on their arguments, as in Redis.
pub fn key_flags_for(command: &str, key_index: usize, argv: &[&[u8]]) -> &'static [&'static str] {
    let has = |kw: &str| argv.iter().skip(2).any(|a| a.eq_ignore_ascii_case(kw.as_bytes()));
    match command {
        "set" if !has("GET") => &["OW", "update"],
        "bitfield" if !(has("SET") || has("INCRBY")) => &["RO", "access"],
        _ => key_flags(command, key_index),
    }
}

/// The flags of the key at `key_index` (0-based among the command's keys).
pub fn key_flags(command: &str, key_index: usize) -> &'static [&'static str] {
    match KEY_SPECS.binary_search_by(|(n, _)| n.cmp(&command)) {
        Ok(i) => {
            let specs = KEY_SPECS[i].1;
            specs[key_index.min(specs.len() - 1)]
        }
        Err(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_covers_every_command_with_keys() {
        assert!(KEY_SPECS.windows(2).all(|w| w[0].0 < w[1].0));
        for c in crate::table::COMMANDS.iter() {
            if c.first > 0 || c.keys_from != crate::table::KeysFrom::Range {
                assert!(!key_flags(c.name, 0).is_empty(), "{} has keys but no key spec", c.name);
            }
        }
        assert_eq!(key_flags("lmove", 0), &["RW", "access", "delete"]);
        assert_eq!(key_flags("lmove", 1), &["RW", "insert"]);
        assert_eq!(key_flags("zunionstore", 3), &["RO", "access"]);
    }
}
