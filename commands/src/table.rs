//! The command table: name, arity, flags, key positions, lock kind and statistics class of
//! every command Terrace knows — what COMMAND reports, what the engine locks by and binds its
//! handlers to (by `CommandSpec::id`), and what the proxy routes by.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::resp::parse_i64;

/// Which shards a command locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Touches no keys.
    None,
    /// The shards of its key arguments in the current database.
    Keys,
    /// Every shard of the current database.
    Db,
    /// Every shard of every database.
    All,
    /// No locks up front: the handler visits shards one at a time through `Data::visit`,
    /// `Data::totals` or `Data::census` (INFO's key counts, a tenant's census, UNWATCH).
    /// Inside EXEC or a script, which hold every shard, it reads through those locks.
    Visit,
}

/// Key positions that (first, last, step) can't express.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysFrom {
    Range,
    /// `numkeys` at this index, keys after it (ZUNION, LMPOP…).
    NumKeysAt(usize),
    /// A destination at 1, then `numkeys` at 2 (ZUNIONSTORE…).
    DestThenNumKeys,
    /// The first half of the arguments after STREAMS (XREAD, XREADGROUP).
    AfterStreams,
    /// The key at 1, and the arguments after STORE / STOREDIST (SORT, GEORADIUS…).
    FirstAndStore,
}

/// A command's flags, as a bitset: what the engine and the proxy branch on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags(u32);

/// Every flag the table uses, with Redis's name; a flag's bit is its position here.
const FLAG_NAMES: [&str; 19] = [
    "write",
    "readonly",
    "denyoom",
    "admin",
    "pubsub",
    "noscript",
    "blocking",
    "loading",
    "stale",
    "skip_monitor",
    "skip_slowlog",
    "fast",
    "no_auth",
    "may_replicate",
    "no_mandatory_keys",
    "no_async_loading",
    "no_multi",
    "movablekeys",
    "allow_busy",
];

impl Flags {
    pub const WRITE: Flags = Flags(1 << 0);
    pub const READONLY: Flags = Flags(1 << 1);
    pub const DENYOOM: Flags = Flags(1 << 2);
    pub const ADMIN: Flags = Flags(1 << 3);
    pub const PUBSUB: Flags = Flags(1 << 4);
    pub const NOSCRIPT: Flags = Flags(1 << 5);
    pub const BLOCKING: Flags = Flags(1 << 6);
    pub const LOADING: Flags = Flags(1 << 7);
    pub const STALE: Flags = Flags(1 << 8);
    pub const SKIP_MONITOR: Flags = Flags(1 << 9);
    pub const SKIP_SLOWLOG: Flags = Flags(1 << 10);
    pub const FAST: Flags = Flags(1 << 11);
    pub const NO_AUTH: Flags = Flags(1 << 12);
    pub const MAY_REPLICATE: Flags = Flags(1 << 13);
    pub const NO_MANDATORY_KEYS: Flags = Flags(1 << 14);
    pub const NO_ASYNC_LOADING: Flags = Flags(1 << 15);
    pub const NO_MULTI: Flags = Flags(1 << 16);
    pub const MOVABLEKEYS: Flags = Flags(1 << 17);
    pub const ALLOW_BUSY: Flags = Flags(1 << 18);

    /// The flag Redis calls `name`.
    pub fn named(name: &str) -> Option<Flags> {
        FLAG_NAMES.iter().position(|n| *n == name).map(|bit| Flags(1 << bit))
    }

    #[inline]
    pub fn has(self, f: Flags) -> bool {
        self.0 & f.0 == f.0
    }

    fn with(self, f: Flags) -> Flags {
        Flags(self.0 | f.0)
    }
}

pub struct CommandSpec {
    /// Its index in `COMMANDS` (what the engine's handler table is indexed by).
    pub id: usize,
    pub name: &'static str,
    pub arity: i32,
    pub flags: Flags,
    /// The flags' names in the order COMMAND lists them for this command.
    pub flag_names: Vec<&'static str>,
    pub first: i32,
    pub last: i32,
    pub step: i32,
    pub group: &'static str,
    /// `group` folded into a statistics class (`stats::tenant::CLASSES`).
    pub class: u8,
    pub summary: &'static str,
    pub lock: Lock,
    pub keys_from: KeysFrom,
    pub denyoom: bool,
    pub write: bool,
    pub no_auth: bool,
    pub no_multi: bool,
    /// Runs immediately even inside MULTI.
    pub txn_control: bool,
    /// Shown to MONITOR clients (admin and skip_monitor commands are not, except EVAL &
    /// co., whose own line precedes the script's commands).
    pub monitored: bool,
}

fn c(name: &'static str, arity: i32, flags: &'static str, keys: (i32, i32, i32), group: &'static str, summary: &'static str) -> CommandSpec {
    let flag_names: Vec<&'static str> = flags.split_whitespace().collect();
    // The table is a constant: a misspelt flag fails every test that reads it.
    let flags = flag_names.iter().fold(Flags::default(), |f, n| f.with(Flags::named(n).unwrap_or_else(|| panic!("{name}: unknown flag {n}"))));
    CommandSpec {
        name,
        arity,
        denyoom: flags.has(Flags::DENYOOM),
        write: flags.has(Flags::WRITE),
        no_auth: flags.has(Flags::NO_AUTH),
        no_multi: flags.has(Flags::NO_MULTI),
        txn_control: matches!(name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset"),
        monitored: !flags.has(Flags::ADMIN) && (!flags.has(Flags::SKIP_MONITOR) || name.starts_with("eval")),
        flags,
        flag_names,
        first: keys.0,
        last: keys.1,
        step: keys.2,
        group,
        class: crate::class::class_of(group),
        summary,
        id: 0,
        lock: if keys.0 > 0 { Lock::Keys } else { Lock::None },
        keys_from: KeysFrom::Range,
    }
}

impl CommandSpec {
    fn movable_keys(&mut self) {
        self.flags = self.flags.with(Flags::MOVABLEKEYS);
        self.flag_names.push("movablekeys");
    }

    fn lock(mut self, l: Lock) -> Self {
        self.lock = l;
        self
    }
    fn numkeys_at(mut self, i: usize) -> Self {
        self.keys_from = KeysFrom::NumKeysAt(i);
        self.movable_keys();
        self.lock = Lock::Keys;
        self
    }
    fn after_streams(mut self) -> Self {
        self.keys_from = KeysFrom::AfterStreams;
        self.movable_keys();
        self.lock = Lock::Keys;
        self
    }
    fn first_and_store(mut self) -> Self {
        self.keys_from = KeysFrom::FirstAndStore;
        self
    }
    fn dest_numkeys(mut self) -> Self {
        self.keys_from = KeysFrom::DestThenNumKeys;
        self.movable_keys();
        self.lock = Lock::Keys;
        self
    }
}

const K1: (i32, i32, i32) = (1, 1, 1);
const K12: (i32, i32, i32) = (1, 2, 1);
const KALL: (i32, i32, i32) = (1, -1, 1);
const NOKEY: (i32, i32, i32) = (0, 0, 0);

pub static COMMANDS: LazyLock<Vec<CommandSpec>> = LazyLock::new(|| {
    use Lock::*;
    vec![
        // strings
        c("get", 2, "readonly fast", K1, "string", "Returns the string value of a key."),
        c("set", -3, "write denyoom", K1, "string", "Sets the string value of a key, ignoring its type."),
        c("setnx", 3, "write denyoom fast", K1, "string", "Set the string value of a key only when the key doesn't exist."),
        c("setex", 4, "write denyoom", K1, "string", "Sets the string value and expiration time of a key."),
        c("psetex", 4, "write denyoom", K1, "string", "Sets both string value and expiration time in milliseconds of a key."),
        c("mget", -2, "readonly fast", KALL, "string", "Atomically returns the string values of one or more keys."),
        c("mset", -3, "write denyoom", (1, -1, 2), "string", "Atomically creates or modifies the string values of one or more keys."),
        c("msetnx", -3, "write denyoom", (1, -1, 2), "string", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
        c("getset", 3, "write denyoom fast", K1, "string", "Returns the previous string value of a key after setting it to a new value."),
        c("getdel", 2, "write fast", K1, "string", "Returns the string value of a key after deleting the key."),
        c("getex", -2, "write fast", K1, "string", "Returns the string value of a key after setting its expiration time."),
        c("append", 3, "write denyoom fast", K1, "string", "Appends a string to the value of a key."),
        c("strlen", 2, "readonly fast", K1, "string", "Returns the length of a string value."),
        c("incr", 2, "write denyoom fast", K1, "string", "Increments the integer value of a key by one."),
        c("decr", 2, "write denyoom fast", K1, "string", "Decrements the integer value of a key by one."),
        c("incrby", 3, "write denyoom fast", K1, "string", "Increments the integer value of a key by a number."),
        c("decrby", 3, "write denyoom fast", K1, "string", "Decrements a number from the integer value of a key."),
        c("incrbyfloat", 3, "write denyoom fast", K1, "string", "Increment the floating point value of a key by a number."),
        c("getrange", 4, "readonly", K1, "string", "Returns a substring of the string stored at a key."),
        c("substr", 4, "readonly", K1, "string", "Returns a substring from a string value."),
        c("setrange", 4, "write denyoom", K1, "string", "Overwrites a part of a string value with another by an offset."),
        c("lcs", -3, "readonly", K12, "string", "Finds the longest common substring."),
        c("cas", -4, "write denyoom fast", K1, "string", "TierBase: sets a key to a new value if it holds the expected value."),
        c("cad", 3, "write fast", K1, "string", "TierBase: deletes a key if it holds the expected value."),
        c("terrace.namespace", -2, "fast no_multi noscript", NOKEY, "connection", "Terrace: moves the connection into a tenant's namespace."),
        c("terrace.retrain", -2, "admin noscript", NOKEY, "server", "Terrace: trains a new compression dictionary generation for a tenant."),
        c("terrace.threads", -1, "admin noscript", NOKEY, "server", "Terrace: the reactors (elastic threading) and how many serve."),
        c("terrace.stats", 1, "admin noscript", NOKEY, "server", "Terrace: the engine's keys, memory and tier placement as JSON.").lock(Visit),
        c(
            "terrace.workload",
            2,
            "admin noscript",
            NOKEY,
            "server",
            "Terrace: a tenant's workload statistics (rates, mix, bytes, access intervals, miss-ratio curve) as JSON.",
        )
        .lock(Visit),
        c("terrace.record", -2, "admin noscript", NOKEY, "server", "Terrace: records a sampled trace of a tenant's commands and a sample of its data.")
            .lock(Visit),
        c("terrace.costeval", -3, "admin noscript", NOKEY, "server", "Terrace: keeps or answers a tenant's latest terrace cost-eval result."),
        c("terrace.advise", 2, "admin noscript", NOKEY, "server", "Terrace: the cost advisor's recommendation for a tenant as JSON.").lock(Visit),
        c("terrace.compression", -2, "admin noscript", NOKEY, "server", "Terrace: compression statistics, advice and settings of a tenant."),
        // Memcached semantics for the proxy's Memcached front end.
        c("mc.get", -2, "readonly fast", (1, -1, 1), "string", "Terrace: Memcached get (value, flags, CAS unique, TTL) of keys."),
        c("mc.gat", -3, "write fast", (2, -1, 1), "string", "Terrace: Memcached get-and-touch."),
        c("mc.store", 7, "write denyoom", (2, 2, 1), "string", "Terrace: Memcached set/add/replace/append/prepend, with an optional CAS compare."),
        c("mc.arith", 8, "write denyoom fast", K1, "string", "Terrace: Memcached incr/decr."),
        c("mc.delete", 3, "write fast", K1, "string", "Terrace: Memcached delete, with an optional CAS compare."),
        c("mc.touch", 3, "write fast", K1, "string", "Terrace: Memcached touch."),
        // bitmaps
        c("setbit", 4, "write denyoom", K1, "bitmap", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist."),
        c("getbit", 3, "readonly fast", K1, "bitmap", "Returns a bit value by offset."),
        c("bitcount", -2, "readonly", K1, "bitmap", "Counts the number of set bits (population counting) in a string."),
        c("bitpos", -3, "readonly", K1, "bitmap", "Finds the first set (1) or clear (0) bit in a string."),
        c("bitop", -4, "write denyoom", (2, -1, 1), "bitmap", "Performs bitwise operations on multiple strings, and stores the result."),
        c("bitfield", -2, "write denyoom", K1, "bitmap", "Performs arbitrary bitfield integer operations on strings."),
        c("bitfield_ro", -2, "readonly fast", K1, "bitmap", "Performs arbitrary read-only bitfield integer operations on strings."),
        // HyperLogLog
        c("pfadd", -2, "write denyoom fast", K1, "hyperloglog", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist."),
        c("pfcount", -2, "readonly", KALL, "hyperloglog", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s)."),
        c("pfmerge", -2, "write denyoom", KALL, "hyperloglog", "Merges one or more HyperLogLog values into a single key."),
        // keys
        c("del", -2, "write", KALL, "keyspace", "Deletes one or more keys."),
        c("unlink", -2, "write fast", KALL, "keyspace", "Asynchronously deletes one or more keys."),
        c("exists", -2, "readonly fast", KALL, "keyspace", "Determines whether one or more keys exist."),
        c(
            "touch",
            -2,
            "readonly fast",
            KALL,
            "keyspace",
            "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
        ),
        c("expire", -3, "write fast", K1, "keyspace", "Sets the expiration time of a key in seconds."),
        c("pexpire", -3, "write fast", K1, "keyspace", "Sets the expiration time of a key in milliseconds."),
        c("expireat", -3, "write fast", K1, "keyspace", "Sets the expiration time of a key to a Unix timestamp."),
        c("pexpireat", -3, "write fast", K1, "keyspace", "Sets the expiration time of a key to a Unix milliseconds timestamp."),
        c("expiretime", 2, "readonly fast", K1, "keyspace", "Returns the expiration time of a key as a Unix timestamp."),
        c("pexpiretime", 2, "readonly fast", K1, "keyspace", "Returns the expiration time of a key as a Unix milliseconds timestamp."),
        c("ttl", 2, "readonly fast", K1, "keyspace", "Returns the expiration time in seconds of a key."),
        c("pttl", 2, "readonly fast", K1, "keyspace", "Returns the expiration time in milliseconds of a key."),
        c("persist", 2, "write fast", K1, "keyspace", "Removes the expiration time of a key."),
        c("type", 2, "readonly fast", K1, "keyspace", "Determines the type of value stored at a key."),
        c("rename", 3, "write", K12, "keyspace", "Renames a key and overwrites the destination."),
        c("renamenx", 3, "write fast", K12, "keyspace", "Renames a key only when the target key name doesn't exist."),
        c("copy", -3, "write denyoom", K12, "keyspace", "Copies the value of a key to a new key.").lock(All),
        c("move", 3, "write fast", K1, "keyspace", "Moves a key to another database.").lock(All),
        c("keys", 2, "readonly", NOKEY, "keyspace", "Returns all key names that match a pattern.").lock(Db),
        c("scan", -2, "readonly", NOKEY, "keyspace", "Iterates over the key names in the database.").lock(Db),
        c("randomkey", 1, "readonly", NOKEY, "keyspace", "Returns a random key name from the database.").lock(Db),
        c("dbsize", 1, "readonly fast", NOKEY, "keyspace", "Returns the number of keys in the database.").lock(Db),
        c("sort", -2, "write denyoom movablekeys", K1, "generic", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.")
            .lock(Db)
            .first_and_store(),
        c("sort_ro", -2, "readonly movablekeys", K1, "generic", "Returns the sorted elements of a list, a set, or a sorted set.").lock(Db),
        c("dump", 2, "readonly", K1, "keyspace", "Returns a serialized representation of the value stored at a key."),
        c("restore", -4, "write denyoom", K1, "keyspace", "Creates a key from the serialized representation of a value."),
        c("object", -2, "readonly", (2, 2, 1), "keyspace", "Inspects the internals of Redis objects."),
        // lists
        c("lpush", -3, "write denyoom fast", K1, "list", "Prepends one or more elements to a list."),
        c("rpush", -3, "write denyoom fast", K1, "list", "Appends one or more elements to a list."),
        c("lpushx", -3, "write denyoom fast", K1, "list", "Prepends one or more elements to a list only when the list exists."),
        c("rpushx", -3, "write denyoom fast", K1, "list", "Appends an element to a list only when the list exists."),
        c("lpop", -2, "write fast", K1, "list", "Returns the first elements in a list after removing it."),
        c("rpop", -2, "write fast", K1, "list", "Returns and removes the last elements of a list."),
        c("llen", 2, "readonly fast", K1, "list", "Returns the length of a list."),
        c("lrange", 4, "readonly", K1, "list", "Returns a range of elements from a list."),
        c("lindex", 3, "readonly", K1, "list", "Returns an element from a list by its index."),
        c("lset", 4, "write denyoom", K1, "list", "Sets the value of an element in a list by its index."),
        c("lrem", 4, "write", K1, "list", "Removes elements from a list."),
        c("ltrim", 4, "write", K1, "list", "Removes elements from both ends a list."),
        c("linsert", 5, "write denyoom", K1, "list", "Inserts an element before or after another element in a list."),
        c("lpos", -3, "readonly", K1, "list", "Returns the index of matching elements in a list."),
        c("lmove", 5, "write denyoom", K12, "list", "Returns an element after popping it from one list and pushing it to another."),
        c("rpoplpush", 3, "write denyoom", K12, "list", "Returns the last element of a list after removing and pushing it to another list."),
        c("lmpop", -4, "write", NOKEY, "list", "Returns multiple elements from a list after removing them.").numkeys_at(1),
        c("blpop", -3, "write blocking noscript", (1, -2, 1), "list", "Removes and returns the first element in a list, or blocks until one is available."),
        c("brpop", -3, "write blocking noscript", (1, -2, 1), "list", "Removes and returns the last element in a list, or blocks until one is available."),
        c(
            "blmove",
            6,
            "write denyoom blocking noscript",
            K12,
            "list",
            "Pops an element from a list, pushes it to another list and returns it; blocks until an element is available.",
        ),
        c(
            "brpoplpush",
            4,
            "write denyoom blocking noscript",
            K12,
            "list",
            "Pops an element from a list, pushes it to another list and returns it; blocks until one is available.",
        ),
        c("blmpop", -5, "write blocking", NOKEY, "list", "Pops the first element from one of multiple lists; blocks until one is available.").numkeys_at(2),
        // hashes
        c("hset", -4, "write denyoom fast", K1, "hash", "Creates or modifies the value of a field in a hash."),
        c("hsetnx", 4, "write denyoom fast", K1, "hash", "Sets the value of a field in a hash only when the field doesn't exist."),
        c("hget", 3, "readonly fast", K1, "hash", "Returns the value of a field in a hash."),
        c("hmset", -4, "write denyoom fast", K1, "hash", "Sets the values of multiple fields."),
        c("hmget", -3, "readonly fast", K1, "hash", "Returns the values of all fields in a hash."),
        c("hdel", -3, "write fast", K1, "hash", "Deletes one or more fields and their values from a hash."),
        c("hexists", 3, "readonly fast", K1, "hash", "Determines whether a field exists in a hash."),
        c("hlen", 2, "readonly fast", K1, "hash", "Returns the number of fields in a hash."),
        c("hkeys", 2, "readonly", K1, "hash", "Returns all fields in a hash."),
        c("hvals", 2, "readonly", K1, "hash", "Returns all values in a hash."),
        c("hgetall", 2, "readonly", K1, "hash", "Returns all fields and values in a hash."),
        c("hincrby", 4, "write denyoom fast", K1, "hash", "Increments the integer value of a field in a hash by a number."),
        c("hincrbyfloat", 4, "write denyoom fast", K1, "hash", "Increments the floating point value of a field by a number."),
        c("hstrlen", 3, "readonly fast", K1, "hash", "Returns the length of the value of a field."),
        c("hscan", -3, "readonly", K1, "hash", "Iterates over fields and values of a hash."),
        c("hrandfield", -2, "readonly", K1, "hash", "Returns one or more random fields from a hash."),
        // sets
        c("sadd", -3, "write denyoom fast", K1, "set", "Adds one or more members to a set."),
        c("srem", -3, "write fast", K1, "set", "Removes one or more members from a set."),
        c("smembers", 2, "readonly", K1, "set", "Returns all members of a set."),
        c("sismember", 3, "readonly fast", K1, "set", "Determines whether a member belongs to a set."),
        c("smismember", -3, "readonly fast", K1, "set", "Determines whether multiple members belong to a set."),
        c("scard", 2, "readonly fast", K1, "set", "Returns the number of members in a set."),
        c("spop", -2, "write fast", K1, "set", "Returns one or more random members from a set after removing them."),
        c("srandmember", -2, "readonly", K1, "set", "Get one or multiple random members from a set."),
        c("smove", 4, "write fast", K12, "set", "Moves a member from one set to another."),
        c("sinter", -2, "readonly", KALL, "set", "Returns the intersect of multiple sets."),
        c("sintercard", -3, "readonly", NOKEY, "set", "Returns the number of members of the intersect of multiple sets.").numkeys_at(1),
        c("sinterstore", -3, "write denyoom", KALL, "set", "Stores the intersect of multiple sets in a key."),
        c("sunion", -2, "readonly", KALL, "set", "Returns the union of multiple sets."),
        c("sunionstore", -3, "write denyoom", KALL, "set", "Stores the union of multiple sets in a key."),
        c("sdiff", -2, "readonly", KALL, "set", "Returns the difference of multiple sets."),
        c("sdiffstore", -3, "write denyoom", KALL, "set", "Stores the difference of multiple sets in a key."),
        c("sscan", -3, "readonly", K1, "set", "Iterates over members of a set."),
        // sorted sets
        c("zadd", -4, "write denyoom fast", K1, "sortedset", "Adds one or more members to a sorted set, or updates their scores."),
        c("zincrby", 4, "write denyoom fast", K1, "sortedset", "Increments the score of a member in a sorted set."),
        c("zrem", -3, "write fast", K1, "sortedset", "Removes one or more members from a sorted set."),
        c("zcard", 2, "readonly fast", K1, "sortedset", "Returns the number of members in a sorted set."),
        c("zcount", 4, "readonly fast", K1, "sortedset", "Returns the count of members in a sorted set that have scores within a range."),
        c("zlexcount", 4, "readonly fast", K1, "sortedset", "Returns the number of members in a sorted set within a lexicographical range."),
        c("zscore", 3, "readonly fast", K1, "sortedset", "Returns the score of a member in a sorted set."),
        c("zmscore", -3, "readonly fast", K1, "sortedset", "Returns the score of one or more members in a sorted set."),
        c("zrank", 3, "readonly fast", K1, "sortedset", "Returns the index of a member in a sorted set ordered by ascending scores."),
        c("zrevrank", 3, "readonly fast", K1, "sortedset", "Returns the index of a member in a sorted set ordered by descending scores."),
        c("zrange", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a range of indexes."),
        c("zrangestore", -5, "write denyoom", K12, "sortedset", "Stores a range of members from sorted set in a key."),
        c("zrangebyscore", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a range of scores."),
        c("zrevrangebyscore", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a range of scores in reverse order."),
        c("zrangebylex", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a lexicographical range."),
        c("zrevrangebylex", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a lexicographical range in reverse order."),
        c("zrevrange", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a range of indexes in reverse order."),
        c("zremrangebyrank", 4, "write", K1, "sortedset", "Removes members in a sorted set within a range of indexes."),
        c("zremrangebyscore", 4, "write", K1, "sortedset", "Removes members in a sorted set within a range of scores."),
        c("zremrangebylex", 4, "write", K1, "sortedset", "Removes members in a sorted set within a lexicographical range."),
        c("zpopmin", -2, "write fast", K1, "sortedset", "Returns the lowest-scoring members from a sorted set after removing them."),
        c("zpopmax", -2, "write fast", K1, "sortedset", "Returns the highest-scoring members from a sorted set after removing them."),
        c(
            "bzpopmin",
            -3,
            "write fast blocking noscript",
            (1, -2, 1),
            "sortedset",
            "Removes and returns the member with the lowest score from one or more sorted sets, or blocks.",
        ),
        c(
            "bzpopmax",
            -3,
            "write fast blocking noscript",
            (1, -2, 1),
            "sortedset",
            "Removes and returns the member with the highest score from one or more sorted sets, or blocks.",
        ),
        c("zmpop", -4, "write", NOKEY, "sortedset", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them.")
            .numkeys_at(1),
        c("bzmpop", -5, "write blocking", NOKEY, "sortedset", "Removes and returns a member by score from one or more sorted sets, or blocks.").numkeys_at(2),
        c("zrandmember", -2, "readonly", K1, "sortedset", "Returns one or more random members from a sorted set."),
        c("zscan", -3, "readonly", K1, "sortedset", "Iterates over members and scores of a sorted set."),
        c("zunion", -3, "readonly", NOKEY, "sortedset", "Returns the union of multiple sorted sets.").numkeys_at(1),
        c("zinter", -3, "readonly", NOKEY, "sortedset", "Returns the intersect of multiple sorted sets.").numkeys_at(1),
        c("zdiff", -3, "readonly", NOKEY, "sortedset", "Returns the difference between multiple sorted sets.").numkeys_at(1),
        c("zunionstore", -4, "write denyoom", (1, 1, 1), "sortedset", "Stores the union of multiple sorted sets in a key.").dest_numkeys(),
        c("zinterstore", -4, "write denyoom", (1, 1, 1), "sortedset", "Stores the intersect of multiple sorted sets in a key.").dest_numkeys(),
        c("zdiffstore", -4, "write denyoom", (1, 1, 1), "sortedset", "Stores the difference of multiple sorted sets in a key.").dest_numkeys(),
        c("zintercard", -3, "readonly", NOKEY, "sortedset", "Returns the number of members of the intersect of multiple sorted sets.").numkeys_at(1),
        // geo (sorted sets with geohash scores)
        c("geoadd", -5, "write denyoom", K1, "geo", "Adds one or more members to a geospatial index."),
        c("geohash", -2, "readonly", K1, "geo", "Returns members from a geospatial index as geohash strings."),
        c("geopos", -2, "readonly", K1, "geo", "Returns the longitude and latitude of members from a geospatial index."),
        c("geodist", -4, "readonly", K1, "geo", "Returns the distance between two members of a geospatial index."),
        c(
            "georadius",
            -6,
            "write denyoom movablekeys",
            K1,
            "geo",
            "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.",
        )
        .lock(Db)
        .first_and_store(),
        c("georadius_ro", -6, "readonly", K1, "geo", "Returns members from a geospatial index that are within a distance from a coordinate."),
        c(
            "georadiusbymember",
            -5,
            "write denyoom movablekeys",
            K1,
            "geo",
            "Queries a geospatial index for members within a distance from a member, optionally stores the result.",
        )
        .lock(Db)
        .first_and_store(),
        c("georadiusbymember_ro", -5, "readonly", K1, "geo", "Returns members from a geospatial index that are within a distance from a member."),
        c("geosearch", -7, "readonly", K1, "geo", "Queries a geospatial index for members inside an area of a box or a circle."),
        c(
            "geosearchstore",
            -8,
            "write denyoom",
            K12,
            "geo",
            "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.",
        ),
        // streams
        c("xadd", -5, "write denyoom fast", K1, "stream", "Appends a new message to a stream. Creates the key if it doesn't exist."),
        c("xrange", -4, "readonly", K1, "stream", "Returns the messages from a stream within a range of IDs."),
        c("xrevrange", -4, "readonly", K1, "stream", "Returns the messages from a stream within a range of IDs in reverse order."),
        c("xlen", 2, "readonly fast", K1, "stream", "Return the number of messages in a stream."),
        c("xdel", -3, "write fast", K1, "stream", "Returns the number of messages after removing them from a stream."),
        c("xtrim", -4, "write", K1, "stream", "Deletes messages from the beginning of a stream."),
        c("xsetid", -3, "write denyoom fast", K1, "stream", "An internal command for replicating stream values."),
        c(
            "xread",
            -4,
            "readonly blocking",
            NOKEY,
            "stream",
            "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.",
        )
        .after_streams(),
        c(
            "xreadgroup",
            -7,
            "write blocking",
            NOKEY,
            "stream",
            "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.",
        )
        .after_streams(),
        c("xinfo", -2, "readonly", (2, 2, 1), "stream", "A container for stream introspection commands."),
        c("xgroup", -2, "write denyoom", (2, 2, 1), "stream", "A container for consumer groups commands."),
        c(
            "xack",
            -4,
            "write fast",
            K1,
            "stream",
            "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.",
        ),
        c("xpending", -3, "readonly", K1, "stream", "Returns the information and entries from a stream consumer group's pending entries list."),
        c(
            "xclaim",
            -6,
            "write fast",
            K1,
            "stream",
            "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.",
        ),
        c(
            "xautoclaim",
            -6,
            "write fast",
            K1,
            "stream",
            "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.",
        ),
        // pub/sub
        c("subscribe", -2, "pubsub noscript loading stale", NOKEY, "pubsub", "Listens for messages published to channels."),
        c("unsubscribe", -1, "pubsub noscript loading stale", NOKEY, "pubsub", "Stops listening to messages posted to channels."),
        c("psubscribe", -2, "pubsub noscript loading stale", NOKEY, "pubsub", "Listens for messages published to channels that match one or more patterns."),
        c(
            "punsubscribe",
            -1,
            "pubsub noscript loading stale",
            NOKEY,
            "pubsub",
            "Stops listening to messages published to channels that match one or more patterns.",
        ),
        c("ssubscribe", -2, "pubsub noscript loading stale", NOKEY, "pubsub", "Listens for messages published to shard channels."),
        c("sunsubscribe", -1, "pubsub noscript loading stale", NOKEY, "pubsub", "Stops listening to messages posted to shard channels."),
        c("publish", 3, "pubsub loading stale fast", NOKEY, "pubsub", "Posts a message to a channel."),
        c("spublish", 3, "pubsub loading stale fast", NOKEY, "pubsub", "Post a message to a shard channel"),
        c("pubsub", -2, "", NOKEY, "pubsub", "A container for Pub/Sub commands."),
        // scripting
        c("eval", -3, "noscript skip_monitor may_replicate no_mandatory_keys stale denyoom", NOKEY, "scripting", "Executes a server-side Lua script.")
            .numkeys_at(2)
            .lock(All),
        c(
            "evalsha",
            -3,
            "noscript skip_monitor may_replicate no_mandatory_keys stale denyoom",
            NOKEY,
            "scripting",
            "Executes a server-side Lua script by SHA1 digest.",
        )
        .numkeys_at(2)
        .lock(All),
        c("eval_ro", -3, "readonly noscript skip_monitor no_mandatory_keys stale", NOKEY, "scripting", "Executes a read-only server-side Lua script.")
            .numkeys_at(2)
            .lock(All),
        c(
            "evalsha_ro",
            -3,
            "readonly noscript skip_monitor no_mandatory_keys stale",
            NOKEY,
            "scripting",
            "Executes a read-only server-side Lua script by SHA1 digest.",
        )
        .numkeys_at(2)
        .lock(All),
        c("fcall", -3, "noscript skip_monitor may_replicate no_mandatory_keys stale denyoom", NOKEY, "scripting", "Invokes a function.")
            .numkeys_at(2)
            .lock(All),
        c("fcall_ro", -3, "readonly noscript skip_monitor no_mandatory_keys stale", NOKEY, "scripting", "Invokes a read-only function.")
            .numkeys_at(2)
            .lock(All),
        c("function", -2, "noscript", NOKEY, "scripting", "A container for function commands."),
        c("script", -2, "noscript", NOKEY, "scripting", "A container for Lua scripts management commands."),
        // transactions
        c("multi", 1, "noscript loading stale fast allow_busy", NOKEY, "transaction", "Starts a transaction."),
        c("exec", 1, "noscript loading stale skip_slowlog", NOKEY, "transaction", "Executes all commands in a transaction.").lock(All),
        c("discard", 1, "noscript loading stale fast allow_busy", NOKEY, "transaction", "Discards a transaction.").lock(Visit),
        c("watch", -2, "noscript loading stale fast allow_busy", KALL, "transaction", "Monitors changes to keys to determine the execution of a transaction."),
        c("unwatch", 1, "noscript loading stale fast allow_busy", NOKEY, "transaction", "Forgets about watched keys of a transaction.").lock(Visit),
        // connection and server
        c("ping", -1, "fast", NOKEY, "connection", "Returns the server's liveliness response."),
        c("echo", 2, "fast loading stale", NOKEY, "connection", "Returns the given string."),
        c("quit", -1, "noscript loading stale fast no_auth allow_busy", NOKEY, "connection", "Closes the connection."),
        c("auth", -2, "noscript loading stale fast no_auth allow_busy", NOKEY, "connection", "Authenticates the connection."),
        c("hello", -1, "noscript loading stale fast no_auth allow_busy", NOKEY, "connection", "Handshakes with the Redis server."),
        c("reset", 1, "noscript loading stale fast no_auth allow_busy", NOKEY, "connection", "Resets the connection."),
        c("select", 2, "loading stale fast", NOKEY, "connection", "Changes the selected database."),
        c("acl", -2, "admin noscript loading stale", NOKEY, "server", "A container for Access List Control commands."),
        c("client", -2, "admin noscript loading stale", NOKEY, "connection", "A container for client connection commands."),
        c("swapdb", 3, "write fast", NOKEY, "server", "Swaps two Redis databases.").lock(All),
        c("flushdb", -1, "write", NOKEY, "server", "Remove all keys from the current database.").lock(Db),
        c("flushall", -1, "write", NOKEY, "server", "Removes all keys from all databases.").lock(All),
        c("info", -1, "loading stale", NOKEY, "server", "Returns information and statistics about the server.").lock(Visit),
        c("config", -2, "admin noscript loading stale", NOKEY, "server", "A container for server configuration commands."),
        c("time", 1, "loading stale fast", NOKEY, "server", "Returns the server time."),
        c("save", 1, "admin noscript no_async_loading no_multi", NOKEY, "server", "Synchronously saves the database(s) to disk.").lock(All),
        c("bgsave", -1, "admin noscript no_async_loading", NOKEY, "server", "Asynchronously saves the database(s) to disk."),
        c("lastsave", 1, "loading stale fast", NOKEY, "server", "Returns the Unix timestamp of the last successful save to disk."),
        c("role", 1, "noscript loading stale fast", NOKEY, "server", "Returns the replication role."),
        c("command", -1, "loading stale", NOKEY, "server", "Returns detailed information about all commands."),
        c("memory", -2, "readonly", (2, 2, 1), "server", "A container for memory diagnostics commands."),
        c("debug", -2, "admin noscript loading stale", (2, 2, 1), "server", "A container for debugging commands."),
        c("slowlog", -2, "admin loading stale", NOKEY, "server", "A container for slow log commands."),
        c("latency", -2, "admin noscript loading stale", NOKEY, "server", "A container for latency diagnostics commands."),
        c("lolwut", -1, "readonly fast", NOKEY, "server", "Displays computer art and the Redis version"),
        c(
            "wait",
            3,
            "noscript",
            NOKEY,
            "generic",
            "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
        ),
        c("cluster", -2, "", NOKEY, "cluster", "A container for Redis Cluster commands."),
        c("readonly", 1, "loading stale fast", NOKEY, "cluster", "Enables read-only queries for a connection to a Redis Cluster replica node."),
        c("readwrite", 1, "loading stale fast", NOKEY, "cluster", "Enables read-write queries for a connection to a Reids Cluster replica node."),
        c("asking", 1, "fast", NOKEY, "cluster", "Signals that a cluster client is following an -ASK redirect."),
        c("module", -2, "admin noscript", NOKEY, "server", "A container for module commands."),
        c("replicaof", 3, "admin noscript stale no_async_loading", NOKEY, "server", "Configures a server as replica of another, or promotes it to a master."),
        c(
            "slaveof",
            3,
            "admin noscript stale no_async_loading",
            NOKEY,
            "server",
            "Sets a Redis server as a replica of another, or promotes it to being a master.",
        ),
        c("monitor", 1, "admin noscript loading stale", NOKEY, "server", "Listens for all requests received by the server in real-time."),
        c(
            "shutdown",
            -1,
            "admin noscript loading stale no_multi allow_busy",
            NOKEY,
            "server",
            "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        ),
    ]
    .into_iter()
    .enumerate()
    .map(|(id, spec)| CommandSpec { id, ..spec })
    .collect()
});

/// Lowercase name → index into COMMANDS. Looked up once per command: foldhash, not std's
/// SipHash (which showed in the profile of pipelined GET and SET).
pub static INDEX: LazyLock<HashMap<&'static str, usize, foldhash::fast::RandomState>> =
    LazyLock::new(|| COMMANDS.iter().enumerate().map(|(i, c)| (c.name, i)).collect());

/// The name Redis shows for a call in errors and logs: `container|sub` for a known
/// subcommand of a container command, else the command's name.
pub fn full_name(spec: &CommandSpec, argv: &[&[u8]]) -> String {
    let sub = argv.get(1).map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    let known =
        crate::SUBCOMMANDS.iter().find(|(c, _)| *c == spec.name).is_some_and(|(_, subs)| sub.as_ref().is_some_and(|s| subs.iter().any(|(n, _)| n == s)));
    match sub {
        Some(s) if known => format!("{}|{s}", spec.name),
        _ => spec.name.to_string(),
    }
}

/// Positions of the key arguments of a call (validated against the argument count).
/// Calls `f` with each key of `argv` (no allocation for the common fixed positions).
#[inline]
pub fn for_each_key(spec: &CommandSpec, argv: &[&[u8]], mut f: impl FnMut(&[u8])) {
    match spec.keys_from {
        KeysFrom::Range => {
            if spec.first <= 0 {
                return;
            }
            let argc = argv.len() as i32;
            let last = if spec.last < 0 { argc + spec.last } else { spec.last.min(argc - 1) };
            let mut i = spec.first;
            while i <= last && i < argc {
                f(argv[i as usize]);
                i += spec.step.max(1);
            }
        }
        _ => key_positions(spec, argv).into_iter().for_each(|i| f(argv[i])),
    }
}

pub fn key_positions(spec: &CommandSpec, argv: &[&[u8]]) -> Vec<usize> {
    let argc = argv.len() as i32;
    let numkeys = |at: usize| -> usize { argv.get(at).and_then(|a| parse_i64(a)).filter(|n| *n > 0).map(|n| n as usize).unwrap_or(0) };
    match spec.keys_from {
        KeysFrom::NumKeysAt(at) => {
            let n = numkeys(at);
            (at + 1..(at + 1 + n).min(argv.len())).collect()
        }
        KeysFrom::DestThenNumKeys => {
            let n = numkeys(2);
            std::iter::once(1).chain(3..(3 + n).min(argv.len())).collect()
        }
        KeysFrom::AfterStreams => crate::keys::stream_read_keys(argv),
        KeysFrom::FirstAndStore => {
            let mut v = vec![1];
            let mut i = 2;
            while i + 1 < argv.len() {
                if argv[i].eq_ignore_ascii_case(b"STORE") || argv[i].eq_ignore_ascii_case(b"STOREDIST") {
                    v.push(i + 1);
                    i += 1;
                }
                i += 1;
            }
            v
        }
        KeysFrom::Range => {
            if spec.first <= 0 {
                return Vec::new();
            }
            let last = if spec.last < 0 { argc + spec.last } else { spec.last.min(argc - 1) };
            let mut v = Vec::new();
            let mut i = spec.first;
            while i <= last && i < argc {
                v.push(i as usize);
                i += spec.step.max(1);
            }
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_names_and_bits_agree() {
        let consts = [
            Flags::WRITE,
            Flags::READONLY,
            Flags::DENYOOM,
            Flags::ADMIN,
            Flags::PUBSUB,
            Flags::NOSCRIPT,
            Flags::BLOCKING,
            Flags::LOADING,
            Flags::STALE,
            Flags::SKIP_MONITOR,
            Flags::SKIP_SLOWLOG,
            Flags::FAST,
            Flags::NO_AUTH,
            Flags::MAY_REPLICATE,
            Flags::NO_MANDATORY_KEYS,
            Flags::NO_ASYNC_LOADING,
            Flags::NO_MULTI,
            Flags::MOVABLEKEYS,
            Flags::ALLOW_BUSY,
        ];
        for (name, flag) in FLAG_NAMES.iter().zip(consts) {
            assert_eq!(Flags::named(name), Some(flag), "{name}");
        }
        assert_eq!(Flags::named("nosuch"), None);
        // Every command's bitset says what its names say.
        for c in COMMANDS.iter() {
            for n in &c.flag_names {
                assert!(c.flags.has(Flags::named(n).unwrap()), "{} {n}", c.name);
            }
            assert_eq!(c.write, c.flags.has(Flags::WRITE));
        }
        let zunion = &COMMANDS[INDEX["zunion"]];
        assert!(zunion.flags.has(Flags::MOVABLEKEYS) && zunion.flag_names.contains(&"movablekeys"));
    }

    #[test]
    fn names_are_unique_and_lowercase() {
        let mut seen = std::collections::HashSet::new();
        for c in COMMANDS.iter() {
            assert_eq!(c.name, c.name.to_lowercase());
            assert!(seen.insert(c.name), "duplicate {}", c.name);
        }
    }

    #[test]
    fn key_positions_cover_forms() {
        let spec = &COMMANDS[INDEX["mset"]];
        assert_eq!(key_positions(spec, &[b"mset", b"a", b"1", b"b", b"2"]), vec![1, 3]);
        let spec = &COMMANDS[INDEX["blpop"]];
        assert_eq!(key_positions(spec, &[b"blpop", b"a", b"b", b"0"]), vec![1, 2]);
        let spec = &COMMANDS[INDEX["zunionstore"]];
        assert_eq!(key_positions(spec, &[b"zunionstore", b"d", b"2", b"a", b"b", b"WEIGHTS"]), vec![1, 3, 4]);
        let spec = &COMMANDS[INDEX["blmpop"]];
        assert_eq!(key_positions(spec, &[b"blmpop", b"0", b"9", b"a", b"LEFT"]), vec![3, 4]);
    }
}
