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
    /// Every shard of every database of the connection's namespace (its tenant's 16
    /// databases): EXEC, scripts and functions, FLUSHALL, SWAPDB, MOVE, COPY … DB. Another
    /// tenant's commands do not wait for them.
    Namespace,
    /// Every shard of every database, every tenant's (SAVE).
    All,
    /// No locks up front: the handler visits shards one at a time through `Data::visit`,
    /// `Data::totals` or `Data::census` (INFO's key counts, a tenant's census, UNWATCH).
    /// Inside EXEC or a script, which hold every shard, it reads through those locks.
    Visit,
}

/// How a proxy in front of several engines serves a command: the proxy's routing kind, one
/// more column of the table (`ROUTES` lists every command whose kind is not `Keyed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To the engine owning its keys (any engine when it has none).
    Keyed,
    /// Answered by the proxy from the connection's own state.
    Connection(Connection),
    /// Its keys split per engine, the parts' replies put back together.
    Split(Split),
    /// The request as it is to every engine, the replies combined.
    FanOut(Combine),
    /// SCAN: engine after engine, the cursor saying which.
    Scan,
    /// INFO: the proxy's own sections, key counts from every engine.
    Info,
    /// On a connection of the client's own, without the reply timeout.
    Blocking,
    Transaction(Transaction),
    /// SUBSCRIBE & co.: the client's connection becomes a relay to one engine.
    Subscribe,
    /// Decided by its subcommand or arguments (CLIENT, CONFIG, SCRIPT, FUNCTION, XREAD BLOCK).
    ByArguments,
    /// Not served through a proxy: run it on an engine.
    EngineOnly,
    /// WAIT: each engine the client wrote to since its last WAIT waits for its replicas, on
    /// a connection of the client's own; the smallest count answers.
    Wait,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    Ping,
    Echo,
    Quit,
    Hello,
    Auth,
    Select,
    Client,
    Reset,
    /// CLUSTER: the proxies' cluster view (`proxy::frontend::cluster`).
    Cluster,
    /// READONLY, READWRITE, ASKING: accepted (every proxy serves every slot, from primaries).
    ClusterMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// MGET: per-engine MGETs, values put back in request order.
    Mget,
    /// MSET: per-engine MSETs of key/value pairs.
    Mset,
    /// DEL, UNLINK, EXISTS, TOUCH: per-engine counts added up.
    Sum,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Integer replies added up.
    Sum,
    /// The first error, else the first reply.
    AllOk,
    /// The first success, else the first error.
    AnyOk,
    /// Arrays concatenated.
    Concat,
    /// The first non-null reply.
    FirstNonNull,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transaction {
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
}

/// Every command whose `Route` is not `Keyed`.
const ROUTES: &[(CommandId, Route)] = {
    use Route::*;
    &[
        (CommandId::Ping, Connection(self::Connection::Ping)),
        (CommandId::Echo, Connection(self::Connection::Echo)),
        (CommandId::Quit, Connection(self::Connection::Quit)),
        (CommandId::Hello, Connection(self::Connection::Hello)),
        (CommandId::Auth, Connection(self::Connection::Auth)),
        (CommandId::Select, Connection(self::Connection::Select)),
        (CommandId::Reset, Connection(self::Connection::Reset)),
        (CommandId::Cluster, Connection(self::Connection::Cluster)),
        (CommandId::Readonly, Connection(self::Connection::ClusterMode)),
        (CommandId::Readwrite, Connection(self::Connection::ClusterMode)),
        (CommandId::Asking, Connection(self::Connection::ClusterMode)),
        (CommandId::Client, ByArguments),
        (CommandId::Config, ByArguments),
        (CommandId::Script, ByArguments),
        (CommandId::Function, ByArguments),
        (CommandId::Xread, ByArguments),
        (CommandId::Xreadgroup, ByArguments),
        (CommandId::Mget, Split(self::Split::Mget)),
        (CommandId::Mset, Split(self::Split::Mset)),
        (CommandId::Del, Split(self::Split::Sum)),
        (CommandId::Unlink, Split(self::Split::Sum)),
        (CommandId::Exists, Split(self::Split::Sum)),
        (CommandId::Touch, Split(self::Split::Sum)),
        (CommandId::Keys, FanOut(Combine::Concat)),
        (CommandId::Dbsize, FanOut(Combine::Sum)),
        (CommandId::Randomkey, FanOut(Combine::FirstNonNull)),
        (CommandId::Flushdb, FanOut(Combine::AllOk)),
        (CommandId::Flushall, FanOut(Combine::AllOk)),
        (CommandId::Swapdb, FanOut(Combine::AllOk)),
        (CommandId::Save, FanOut(Combine::AllOk)),
        (CommandId::Bgsave, FanOut(Combine::AllOk)),
        (CommandId::Scan, Scan),
        (CommandId::Info, Info),
        (CommandId::Wait, Wait),
        (CommandId::TerraceWait, Wait),
        (CommandId::Blpop, Blocking),
        (CommandId::Brpop, Blocking),
        (CommandId::Brpoplpush, Blocking),
        (CommandId::Blmove, Blocking),
        (CommandId::Blmpop, Blocking),
        (CommandId::Bzpopmin, Blocking),
        (CommandId::Bzpopmax, Blocking),
        (CommandId::Bzmpop, Blocking),
        (CommandId::Multi, Transaction(self::Transaction::Multi)),
        (CommandId::Exec, Transaction(self::Transaction::Exec)),
        (CommandId::Discard, Transaction(self::Transaction::Discard)),
        (CommandId::Watch, Transaction(self::Transaction::Watch)),
        (CommandId::Unwatch, Transaction(self::Transaction::Unwatch)),
        (CommandId::Subscribe, Subscribe),
        (CommandId::Psubscribe, Subscribe),
        (CommandId::Ssubscribe, Subscribe),
        (CommandId::Monitor, EngineOnly),
        (CommandId::Shutdown, EngineOnly),
        (CommandId::Debug, EngineOnly),
        (CommandId::Replicaof, EngineOnly),
        (CommandId::Slaveof, EngineOnly),
        (CommandId::Psync, EngineOnly),
        (CommandId::Sync, EngineOnly),
        (CommandId::Replconf, EngineOnly),
        (CommandId::Module, EngineOnly),
    ]
};

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
    /// Which command it is (its index in `COMMANDS`, what the engine's handler table is
    /// indexed by).
    pub id: CommandId,
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
    /// How a proxy routes it.
    pub route: Route,
    pub denyoom: bool,
    pub write: bool,
    pub no_auth: bool,
    pub no_multi: bool,
    /// Runs immediately even inside MULTI.
    pub txn_control: bool,
    /// Shown to MONITOR clients (admin and skip_monitor commands are not, except EVAL &
    /// co., whose own line precedes the script's commands).
    pub monitored: bool,
    /// A container command (CLIENT, CONFIG…): its calls are counted per subcommand.
    pub subcommands: bool,
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
        monitored: !flags.has(Flags::ADMIN) && (!flags.has(Flags::SKIP_MONITOR) || name.starts_with("eval") || name.starts_with("fcall")),
        subcommands: crate::SUBCOMMANDS.iter().any(|(c, _)| *c == name),
        flags,
        flag_names,
        first: keys.0,
        last: keys.1,
        step: keys.2,
        group,
        class: crate::class::class_of(group),
        summary,
        // Set by `command_table!` right after (`with_id`).
        id: CommandId::ALL[0],
        lock: if keys.0 > 0 { Lock::Keys } else { Lock::None },
        keys_from: KeysFrom::Range,
        route: Route::Keyed,
    }
}

impl CommandSpec {
    fn with_id(mut self, id: CommandId) -> Self {
        self.id = id;
        self
    }

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

/// Builds the table and its `CommandId` enum from one list of `Variant => spec` entries, so
/// the ids and the specs cannot drift apart.
macro_rules! command_table {
    ($($id:ident => $spec:expr,)*) => {
        /// A command of the table, by name: `COMMANDS[id.index()]` is its spec. Code that
        /// treats a command specially matches its id, never its name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum CommandId {
            $($id,)*
        }

        impl CommandId {
            /// Every id, in the table's order.
            pub const ALL: &'static [CommandId] = &[$(CommandId::$id,)*];

            /// Its position in `COMMANDS`.
            #[inline]
            pub fn index(self) -> usize {
                self as usize
            }

            /// Its spec.
            #[inline]
            pub fn spec(self) -> &'static CommandSpec {
                &COMMANDS[self.index()]
            }
        }

        fn table() -> Vec<CommandSpec> {
            use Lock::*;
            vec![$($spec.with_id(CommandId::$id),)*]
        }
    };
}

const K1: (i32, i32, i32) = (1, 1, 1);
const K12: (i32, i32, i32) = (1, 2, 1);
const KALL: (i32, i32, i32) = (1, -1, 1);
const NOKEY: (i32, i32, i32) = (0, 0, 0);

command_table! {
        // strings
        Get => c("get", 2, "readonly fast", K1, "string", "Returns the string value of a key."),
        Set => c("set", -3, "write denyoom", K1, "string", "Sets the string value of a key, ignoring its type."),
        Setnx => c("setnx", 3, "write denyoom fast", K1, "string", "Set the string value of a key only when the key doesn't exist."),
        Setex => c("setex", 4, "write denyoom", K1, "string", "Sets the string value and expiration time of a key."),
        Psetex => c("psetex", 4, "write denyoom", K1, "string", "Sets both string value and expiration time in milliseconds of a key."),
        Mget => c("mget", -2, "readonly fast", KALL, "string", "Atomically returns the string values of one or more keys."),
        Mset => c("mset", -3, "write denyoom", (1, -1, 2), "string", "Atomically creates or modifies the string values of one or more keys."),
        Msetnx => c("msetnx", -3, "write denyoom", (1, -1, 2), "string", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
        Getset => c("getset", 3, "write denyoom fast", K1, "string", "Returns the previous string value of a key after setting it to a new value."),
        Getdel => c("getdel", 2, "write fast", K1, "string", "Returns the string value of a key after deleting the key."),
        Getex => c("getex", -2, "write fast", K1, "string", "Returns the string value of a key after setting its expiration time."),
        Append => c("append", 3, "write denyoom fast", K1, "string", "Appends a string to the value of a key."),
        Strlen => c("strlen", 2, "readonly fast", K1, "string", "Returns the length of a string value."),
        Incr => c("incr", 2, "write denyoom fast", K1, "string", "Increments the integer value of a key by one."),
        Decr => c("decr", 2, "write denyoom fast", K1, "string", "Decrements the integer value of a key by one."),
        Incrby => c("incrby", 3, "write denyoom fast", K1, "string", "Increments the integer value of a key by a number."),
        Decrby => c("decrby", 3, "write denyoom fast", K1, "string", "Decrements a number from the integer value of a key."),
        Incrbyfloat => c("incrbyfloat", 3, "write denyoom fast", K1, "string", "Increment the floating point value of a key by a number."),
        Getrange => c("getrange", 4, "readonly", K1, "string", "Returns a substring of the string stored at a key."),
        Substr => c("substr", 4, "readonly", K1, "string", "Returns a substring from a string value."),
        Setrange => c("setrange", 4, "write denyoom", K1, "string", "Overwrites a part of a string value with another by an offset."),
        Lcs => c("lcs", -3, "readonly", K12, "string", "Finds the longest common substring."),
        Cas => c("cas", -4, "write denyoom fast", K1, "string", "TierBase: sets a key to a new value if it holds the expected value."),
        Cad => c("cad", 3, "write fast", K1, "string", "TierBase: deletes a key if it holds the expected value."),
        TerraceNamespace => c("terrace.namespace", -2, "fast no_multi noscript allow_busy", NOKEY, "connection", "Terrace: moves the connection into a tenant's namespace."),
        TerraceSlowlog => c("terrace.slowlog", -1, "admin noscript", NOKEY, "server", "Terrace: the slow log as JSON, each entry with its tenant."),
        TerraceNamespaces => c("terrace.namespaces", 1, "admin noscript", NOKEY, "server", "Terrace: the tenants' namespaces this engine holds (not the default one)."),
        TerraceDropnamespace => c(
            "terrace.dropnamespace",
            2,
            "write admin noscript no_multi",
            NOKEY,
            "server",
            "Terrace: deletes a tenant's namespace (its keys, stored rows, clients and settings); its number goes to the next new tenant.",
        )
        .lock(All),
        TerraceRetrain => c("terrace.retrain", -2, "admin noscript", NOKEY, "server", "Terrace: trains a new compression dictionary generation for a tenant."),
        TerraceEpoch => c(
            "terrace.epoch",
            -1,
            "admin noscript",
            NOKEY,
            "server",
            "Terrace: the primary term this engine writes storage in (the coordinator's); given one, raises its fence in storage.",
        ),
        TerraceProve => c(
            "terrace.prove",
            2,
            "noscript loading stale fast no_auth allow_busy",
            NOKEY,
            "connection",
            "Terrace: proves this engine holds the password it was started with (an HMAC of the nonce), before the console authenticates to it.",
        ),
        TerraceImport => c(
            "terrace.import",
            3,
            "write denyoom admin noscript",
            K1,
            "keyspace",
            "Terrace: installs a key as another engine stored it (a slot migration's copy: value, TTL, flags).",
        ),
        TerraceMigrate => c(
            "terrace.migrate",
            -2,
            "admin noscript",
            NOKEY,
            "server",
            "Terrace: moves slots' keys to another engine (START, STATUS, SEAL, FINISH, ABORT, PURGE).",
        ),
        TerraceThreads => c("terrace.threads", -1, "admin noscript", NOKEY, "server", "Terrace: the reactors (elastic threading) and how many serve."),
        TerraceWait => c(
            "terrace.wait",
            3,
            "noscript",
            NOKEY,
            "generic",
            "Terrace: as WAIT, for every write the engine took so far (on any connection: the proxy's WAIT).",
        ),
        TerraceStats => c("terrace.stats", 1, "admin noscript", NOKEY, "server", "Terrace: the engine's keys, memory and tier placement as JSON.").lock(Visit),
        TerraceWorkload => c(
            "terrace.workload",
            2,
            "admin noscript",
            NOKEY,
            "server",
            "Terrace: a tenant's workload statistics (rates, mix, bytes, access intervals, miss-ratio curve) as JSON.",
        )
        .lock(Visit),
        TerraceRecord => c("terrace.record", -2, "admin noscript", NOKEY, "server", "Terrace: records a sampled trace of a tenant's commands and a sample of its data.")
            .lock(Visit),
        TerraceCosteval => c("terrace.costeval", -3, "admin noscript", NOKEY, "server", "Terrace: keeps or answers a tenant's latest terrace cost-eval result."),
        TerraceAdvise => c(
            "terrace.advise",
            -2,
            "admin noscript",
            NOKEY,
            "server",
            "Terrace: the cost advisor's recommendation for a tenant as JSON (TOTAL: the tenant's workload over every engine; PREVIOUS: the last recommendation, for hysteresis).",
        ).lock(Visit),
        TerraceCompression => c("terrace.compression", -2, "admin noscript", NOKEY, "server", "Terrace: compression statistics, advice and settings of a tenant."),
        // Memcached semantics for the proxy's Memcached front end.
        McGet => c("mc.get", -2, "readonly fast", (1, -1, 1), "string", "Terrace: Memcached get (value, flags, CAS unique, TTL) of keys."),
        McGat => c("mc.gat", -3, "write fast", (2, -1, 1), "string", "Terrace: Memcached get-and-touch."),
        McStore => c("mc.store", 7, "write denyoom", (2, 2, 1), "string", "Terrace: Memcached set/add/replace/append/prepend, with an optional CAS compare."),
        McArith => c("mc.arith", 8, "write denyoom fast", K1, "string", "Terrace: Memcached incr/decr."),
        McDelete => c("mc.delete", 3, "write fast", K1, "string", "Terrace: Memcached delete, with an optional CAS compare."),
        McTouch => c("mc.touch", 3, "write fast", K1, "string", "Terrace: Memcached touch."),
        // bitmaps
        Setbit => c("setbit", 4, "write denyoom", K1, "bitmap", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist."),
        Getbit => c("getbit", 3, "readonly fast", K1, "bitmap", "Returns a bit value by offset."),
        Bitcount => c("bitcount", -2, "readonly", K1, "bitmap", "Counts the number of set bits (population counting) in a string."),
        Bitpos => c("bitpos", -3, "readonly", K1, "bitmap", "Finds the first set (1) or clear (0) bit in a string."),
        Bitop => c("bitop", -4, "write denyoom", (2, -1, 1), "bitmap", "Performs bitwise operations on multiple strings, and stores the result."),
        Bitfield => c("bitfield", -2, "write denyoom", K1, "bitmap", "Performs arbitrary bitfield integer operations on strings."),
        BitfieldRo => c("bitfield_ro", -2, "readonly fast", K1, "bitmap", "Performs arbitrary read-only bitfield integer operations on strings."),
        // HyperLogLog
        Pfadd => c("pfadd", -2, "write denyoom fast", K1, "hyperloglog", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist."),
        Pfcount => c("pfcount", -2, "readonly may_replicate", KALL, "hyperloglog", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s)."),
        Pfmerge => c("pfmerge", -2, "write denyoom", KALL, "hyperloglog", "Merges one or more HyperLogLog values into a single key."),
        Pfdebug => c("pfdebug", 3, "write denyoom admin", (2, 2, 1), "hyperloglog", "Internal commands for debugging HyperLogLog values."),
        Pfselftest => c("pfselftest", 1, "admin", NOKEY, "hyperloglog", "An internal command for testing HyperLogLog values."),
        // keys
        Del => c("del", -2, "write", KALL, "keyspace", "Deletes one or more keys."),
        Unlink => c("unlink", -2, "write fast", KALL, "keyspace", "Asynchronously deletes one or more keys."),
        Exists => c("exists", -2, "readonly fast", KALL, "keyspace", "Determines whether one or more keys exist."),
        Touch => c(
            "touch",
            -2,
            "readonly fast",
            KALL,
            "keyspace",
            "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
        ),
        Expire => c("expire", -3, "write fast", K1, "keyspace", "Sets the expiration time of a key in seconds."),
        Pexpire => c("pexpire", -3, "write fast", K1, "keyspace", "Sets the expiration time of a key in milliseconds."),
        Expireat => c("expireat", -3, "write fast", K1, "keyspace", "Sets the expiration time of a key to a Unix timestamp."),
        Pexpireat => c("pexpireat", -3, "write fast", K1, "keyspace", "Sets the expiration time of a key to a Unix milliseconds timestamp."),
        Expiretime => c("expiretime", 2, "readonly fast", K1, "keyspace", "Returns the expiration time of a key as a Unix timestamp."),
        Pexpiretime => c("pexpiretime", 2, "readonly fast", K1, "keyspace", "Returns the expiration time of a key as a Unix milliseconds timestamp."),
        Ttl => c("ttl", 2, "readonly fast", K1, "keyspace", "Returns the expiration time in seconds of a key."),
        Pttl => c("pttl", 2, "readonly fast", K1, "keyspace", "Returns the expiration time in milliseconds of a key."),
        Persist => c("persist", 2, "write fast", K1, "keyspace", "Removes the expiration time of a key."),
        Type => c("type", 2, "readonly fast", K1, "keyspace", "Determines the type of value stored at a key."),
        Rename => c("rename", 3, "write", K12, "keyspace", "Renames a key and overwrites the destination."),
        Renamenx => c("renamenx", 3, "write fast", K12, "keyspace", "Renames a key only when the target key name doesn't exist."),
        Copy => c("copy", -3, "write denyoom", K12, "keyspace", "Copies the value of a key to a new key.").lock(Namespace),
        Move => c("move", 3, "write fast", K1, "keyspace", "Moves a key to another database.").lock(Namespace),
        Keys => c("keys", 2, "readonly", NOKEY, "keyspace", "Returns all key names that match a pattern.").lock(Db),
        Scan => c("scan", -2, "readonly", NOKEY, "keyspace", "Iterates over the key names in the database.").lock(Db),
        Randomkey => c("randomkey", 1, "readonly", NOKEY, "keyspace", "Returns a random key name from the database.").lock(Db),
        Dbsize => c("dbsize", 1, "readonly fast", NOKEY, "keyspace", "Returns the number of keys in the database.").lock(Db),
        Sort => c("sort", -2, "write denyoom movablekeys", K1, "generic", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.")
            .lock(Db)
            .first_and_store(),
        SortRo => c("sort_ro", -2, "readonly movablekeys", K1, "generic", "Returns the sorted elements of a list, a set, or a sorted set.").lock(Db),
        Dump => c("dump", 2, "readonly", K1, "keyspace", "Returns a serialized representation of the value stored at a key."),
        Restore => c("restore", -4, "write denyoom", K1, "keyspace", "Creates a key from the serialized representation of a value."),
        Object => c("object", -2, "readonly", (2, 2, 1), "keyspace", "Inspects the internals of Redis objects."),
        // lists
        Lpush => c("lpush", -3, "write denyoom fast", K1, "list", "Prepends one or more elements to a list."),
        Rpush => c("rpush", -3, "write denyoom fast", K1, "list", "Appends one or more elements to a list."),
        Lpushx => c("lpushx", -3, "write denyoom fast", K1, "list", "Prepends one or more elements to a list only when the list exists."),
        Rpushx => c("rpushx", -3, "write denyoom fast", K1, "list", "Appends an element to a list only when the list exists."),
        Lpop => c("lpop", -2, "write fast", K1, "list", "Returns the first elements in a list after removing it."),
        Rpop => c("rpop", -2, "write fast", K1, "list", "Returns and removes the last elements of a list."),
        Llen => c("llen", 2, "readonly fast", K1, "list", "Returns the length of a list."),
        Lrange => c("lrange", 4, "readonly", K1, "list", "Returns a range of elements from a list."),
        Lindex => c("lindex", 3, "readonly", K1, "list", "Returns an element from a list by its index."),
        Lset => c("lset", 4, "write denyoom", K1, "list", "Sets the value of an element in a list by its index."),
        Lrem => c("lrem", 4, "write", K1, "list", "Removes elements from a list."),
        Ltrim => c("ltrim", 4, "write", K1, "list", "Removes elements from both ends a list."),
        Linsert => c("linsert", 5, "write denyoom", K1, "list", "Inserts an element before or after another element in a list."),
        Lpos => c("lpos", -3, "readonly", K1, "list", "Returns the index of matching elements in a list."),
        Lmove => c("lmove", 5, "write denyoom", K12, "list", "Returns an element after popping it from one list and pushing it to another."),
        Rpoplpush => c("rpoplpush", 3, "write denyoom", K12, "list", "Returns the last element of a list after removing and pushing it to another list."),
        Lmpop => c("lmpop", -4, "write", NOKEY, "list", "Returns multiple elements from a list after removing them.").numkeys_at(1),
        Blpop => c("blpop", -3, "write blocking noscript", (1, -2, 1), "list", "Removes and returns the first element in a list, or blocks until one is available."),
        Brpop => c("brpop", -3, "write blocking noscript", (1, -2, 1), "list", "Removes and returns the last element in a list, or blocks until one is available."),
        Blmove => c(
            "blmove",
            6,
            "write denyoom blocking noscript",
            K12,
            "list",
            "Pops an element from a list, pushes it to another list and returns it; blocks until an element is available.",
        ),
        Brpoplpush => c(
            "brpoplpush",
            4,
            "write denyoom blocking noscript",
            K12,
            "list",
            "Pops an element from a list, pushes it to another list and returns it; blocks until one is available.",
        ),
        Blmpop => c("blmpop", -5, "write blocking", NOKEY, "list", "Pops the first element from one of multiple lists; blocks until one is available.").numkeys_at(2),
        // hashes
        Hset => c("hset", -4, "write denyoom fast", K1, "hash", "Creates or modifies the value of a field in a hash."),
        Hsetnx => c("hsetnx", 4, "write denyoom fast", K1, "hash", "Sets the value of a field in a hash only when the field doesn't exist."),
        Hget => c("hget", 3, "readonly fast", K1, "hash", "Returns the value of a field in a hash."),
        Hmset => c("hmset", -4, "write denyoom fast", K1, "hash", "Sets the values of multiple fields."),
        Hmget => c("hmget", -3, "readonly fast", K1, "hash", "Returns the values of all fields in a hash."),
        Hdel => c("hdel", -3, "write fast", K1, "hash", "Deletes one or more fields and their values from a hash."),
        Hexists => c("hexists", 3, "readonly fast", K1, "hash", "Determines whether a field exists in a hash."),
        Hlen => c("hlen", 2, "readonly fast", K1, "hash", "Returns the number of fields in a hash."),
        Hkeys => c("hkeys", 2, "readonly", K1, "hash", "Returns all fields in a hash."),
        Hvals => c("hvals", 2, "readonly", K1, "hash", "Returns all values in a hash."),
        Hgetall => c("hgetall", 2, "readonly", K1, "hash", "Returns all fields and values in a hash."),
        Hincrby => c("hincrby", 4, "write denyoom fast", K1, "hash", "Increments the integer value of a field in a hash by a number."),
        Hincrbyfloat => c("hincrbyfloat", 4, "write denyoom fast", K1, "hash", "Increments the floating point value of a field by a number."),
        Hstrlen => c("hstrlen", 3, "readonly fast", K1, "hash", "Returns the length of the value of a field."),
        Hscan => c("hscan", -3, "readonly", K1, "hash", "Iterates over fields and values of a hash."),
        Hrandfield => c("hrandfield", -2, "readonly", K1, "hash", "Returns one or more random fields from a hash."),
        // sets
        Sadd => c("sadd", -3, "write denyoom fast", K1, "set", "Adds one or more members to a set."),
        Srem => c("srem", -3, "write fast", K1, "set", "Removes one or more members from a set."),
        Smembers => c("smembers", 2, "readonly", K1, "set", "Returns all members of a set."),
        Sismember => c("sismember", 3, "readonly fast", K1, "set", "Determines whether a member belongs to a set."),
        Smismember => c("smismember", -3, "readonly fast", K1, "set", "Determines whether multiple members belong to a set."),
        Scard => c("scard", 2, "readonly fast", K1, "set", "Returns the number of members in a set."),
        Spop => c("spop", -2, "write fast", K1, "set", "Returns one or more random members from a set after removing them."),
        Srandmember => c("srandmember", -2, "readonly", K1, "set", "Get one or multiple random members from a set."),
        Smove => c("smove", 4, "write fast", K12, "set", "Moves a member from one set to another."),
        Sinter => c("sinter", -2, "readonly", KALL, "set", "Returns the intersect of multiple sets."),
        Sintercard => c("sintercard", -3, "readonly", NOKEY, "set", "Returns the number of members of the intersect of multiple sets.").numkeys_at(1),
        Sinterstore => c("sinterstore", -3, "write denyoom", KALL, "set", "Stores the intersect of multiple sets in a key."),
        Sunion => c("sunion", -2, "readonly", KALL, "set", "Returns the union of multiple sets."),
        Sunionstore => c("sunionstore", -3, "write denyoom", KALL, "set", "Stores the union of multiple sets in a key."),
        Sdiff => c("sdiff", -2, "readonly", KALL, "set", "Returns the difference of multiple sets."),
        Sdiffstore => c("sdiffstore", -3, "write denyoom", KALL, "set", "Stores the difference of multiple sets in a key."),
        Sscan => c("sscan", -3, "readonly", K1, "set", "Iterates over members of a set."),
        // sorted sets
        Zadd => c("zadd", -4, "write denyoom fast", K1, "sortedset", "Adds one or more members to a sorted set, or updates their scores."),
        Zincrby => c("zincrby", 4, "write denyoom fast", K1, "sortedset", "Increments the score of a member in a sorted set."),
        Zrem => c("zrem", -3, "write fast", K1, "sortedset", "Removes one or more members from a sorted set."),
        Zcard => c("zcard", 2, "readonly fast", K1, "sortedset", "Returns the number of members in a sorted set."),
        Zcount => c("zcount", 4, "readonly fast", K1, "sortedset", "Returns the count of members in a sorted set that have scores within a range."),
        Zlexcount => c("zlexcount", 4, "readonly fast", K1, "sortedset", "Returns the number of members in a sorted set within a lexicographical range."),
        Zscore => c("zscore", 3, "readonly fast", K1, "sortedset", "Returns the score of a member in a sorted set."),
        Zmscore => c("zmscore", -3, "readonly fast", K1, "sortedset", "Returns the score of one or more members in a sorted set."),
        Zrank => c("zrank", 3, "readonly fast", K1, "sortedset", "Returns the index of a member in a sorted set ordered by ascending scores."),
        Zrevrank => c("zrevrank", 3, "readonly fast", K1, "sortedset", "Returns the index of a member in a sorted set ordered by descending scores."),
        Zrange => c("zrange", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a range of indexes."),
        Zrangestore => c("zrangestore", -5, "write denyoom", K12, "sortedset", "Stores a range of members from sorted set in a key."),
        Zrangebyscore => c("zrangebyscore", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a range of scores."),
        Zrevrangebyscore => c("zrevrangebyscore", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a range of scores in reverse order."),
        Zrangebylex => c("zrangebylex", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a lexicographical range."),
        Zrevrangebylex => c("zrevrangebylex", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a lexicographical range in reverse order."),
        Zrevrange => c("zrevrange", -4, "readonly", K1, "sortedset", "Returns members in a sorted set within a range of indexes in reverse order."),
        Zremrangebyrank => c("zremrangebyrank", 4, "write", K1, "sortedset", "Removes members in a sorted set within a range of indexes."),
        Zremrangebyscore => c("zremrangebyscore", 4, "write", K1, "sortedset", "Removes members in a sorted set within a range of scores."),
        Zremrangebylex => c("zremrangebylex", 4, "write", K1, "sortedset", "Removes members in a sorted set within a lexicographical range."),
        Zpopmin => c("zpopmin", -2, "write fast", K1, "sortedset", "Returns the lowest-scoring members from a sorted set after removing them."),
        Zpopmax => c("zpopmax", -2, "write fast", K1, "sortedset", "Returns the highest-scoring members from a sorted set after removing them."),
        Bzpopmin => c(
            "bzpopmin",
            -3,
            "write fast blocking noscript",
            (1, -2, 1),
            "sortedset",
            "Removes and returns the member with the lowest score from one or more sorted sets, or blocks.",
        ),
        Bzpopmax => c(
            "bzpopmax",
            -3,
            "write fast blocking noscript",
            (1, -2, 1),
            "sortedset",
            "Removes and returns the member with the highest score from one or more sorted sets, or blocks.",
        ),
        Zmpop => c("zmpop", -4, "write", NOKEY, "sortedset", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them.")
            .numkeys_at(1),
        Bzmpop => c("bzmpop", -5, "write blocking", NOKEY, "sortedset", "Removes and returns a member by score from one or more sorted sets, or blocks.").numkeys_at(2),
        Zrandmember => c("zrandmember", -2, "readonly", K1, "sortedset", "Returns one or more random members from a sorted set."),
        Zscan => c("zscan", -3, "readonly", K1, "sortedset", "Iterates over members and scores of a sorted set."),
        Zunion => c("zunion", -3, "readonly", NOKEY, "sortedset", "Returns the union of multiple sorted sets.").numkeys_at(1),
        Zinter => c("zinter", -3, "readonly", NOKEY, "sortedset", "Returns the intersect of multiple sorted sets.").numkeys_at(1),
        Zdiff => c("zdiff", -3, "readonly", NOKEY, "sortedset", "Returns the difference between multiple sorted sets.").numkeys_at(1),
        Zunionstore => c("zunionstore", -4, "write denyoom", (1, 1, 1), "sortedset", "Stores the union of multiple sorted sets in a key.").dest_numkeys(),
        Zinterstore => c("zinterstore", -4, "write denyoom", (1, 1, 1), "sortedset", "Stores the intersect of multiple sorted sets in a key.").dest_numkeys(),
        Zdiffstore => c("zdiffstore", -4, "write denyoom", (1, 1, 1), "sortedset", "Stores the difference of multiple sorted sets in a key.").dest_numkeys(),
        Zintercard => c("zintercard", -3, "readonly", NOKEY, "sortedset", "Returns the number of members of the intersect of multiple sorted sets.").numkeys_at(1),
        // geo (sorted sets with geohash scores)
        Geoadd => c("geoadd", -5, "write denyoom", K1, "geo", "Adds one or more members to a geospatial index."),
        Geohash => c("geohash", -2, "readonly", K1, "geo", "Returns members from a geospatial index as geohash strings."),
        Geopos => c("geopos", -2, "readonly", K1, "geo", "Returns the longitude and latitude of members from a geospatial index."),
        Geodist => c("geodist", -4, "readonly", K1, "geo", "Returns the distance between two members of a geospatial index."),
        Georadius => c(
            "georadius",
            -6,
            "write denyoom movablekeys",
            K1,
            "geo",
            "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.",
        )
        .lock(Db)
        .first_and_store(),
        GeoradiusRo => c("georadius_ro", -6, "readonly", K1, "geo", "Returns members from a geospatial index that are within a distance from a coordinate."),
        Georadiusbymember => c(
            "georadiusbymember",
            -5,
            "write denyoom movablekeys",
            K1,
            "geo",
            "Queries a geospatial index for members within a distance from a member, optionally stores the result.",
        )
        .lock(Db)
        .first_and_store(),
        GeoradiusbymemberRo => c("georadiusbymember_ro", -5, "readonly", K1, "geo", "Returns members from a geospatial index that are within a distance from a member."),
        Geosearch => c("geosearch", -7, "readonly", K1, "geo", "Queries a geospatial index for members inside an area of a box or a circle."),
        Geosearchstore => c(
            "geosearchstore",
            -8,
            "write denyoom",
            K12,
            "geo",
            "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.",
        ),
        // streams
        Xadd => c("xadd", -5, "write denyoom fast", K1, "stream", "Appends a new message to a stream. Creates the key if it doesn't exist."),
        Xrange => c("xrange", -4, "readonly", K1, "stream", "Returns the messages from a stream within a range of IDs."),
        Xrevrange => c("xrevrange", -4, "readonly", K1, "stream", "Returns the messages from a stream within a range of IDs in reverse order."),
        Xlen => c("xlen", 2, "readonly fast", K1, "stream", "Return the number of messages in a stream."),
        Xdel => c("xdel", -3, "write fast", K1, "stream", "Returns the number of messages after removing them from a stream."),
        Xtrim => c("xtrim", -4, "write", K1, "stream", "Deletes messages from the beginning of a stream."),
        Xsetid => c("xsetid", -3, "write denyoom fast", K1, "stream", "An internal command for replicating stream values."),
        Xread => c(
            "xread",
            -4,
            "readonly blocking",
            NOKEY,
            "stream",
            "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.",
        )
        .after_streams(),
        Xreadgroup => c(
            "xreadgroup",
            -7,
            "write blocking",
            NOKEY,
            "stream",
            "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.",
        )
        .after_streams(),
        Xinfo => c("xinfo", -2, "readonly", (2, 2, 1), "stream", "A container for stream introspection commands."),
        Xgroup => c("xgroup", -2, "write denyoom", (2, 2, 1), "stream", "A container for consumer groups commands."),
        Xack => c(
            "xack",
            -4,
            "write fast",
            K1,
            "stream",
            "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.",
        ),
        Xpending => c("xpending", -3, "readonly", K1, "stream", "Returns the information and entries from a stream consumer group's pending entries list."),
        Xclaim => c(
            "xclaim",
            -6,
            "write fast",
            K1,
            "stream",
            "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.",
        ),
        Xautoclaim => c(
            "xautoclaim",
            -6,
            "write fast",
            K1,
            "stream",
            "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.",
        ),
        // pub/sub
        Subscribe => c("subscribe", -2, "pubsub noscript loading stale", NOKEY, "pubsub", "Listens for messages published to channels."),
        Unsubscribe => c("unsubscribe", -1, "pubsub noscript loading stale", NOKEY, "pubsub", "Stops listening to messages posted to channels."),
        Psubscribe => c("psubscribe", -2, "pubsub noscript loading stale", NOKEY, "pubsub", "Listens for messages published to channels that match one or more patterns."),
        Punsubscribe => c(
            "punsubscribe",
            -1,
            "pubsub noscript loading stale",
            NOKEY,
            "pubsub",
            "Stops listening to messages published to channels that match one or more patterns.",
        ),
        Ssubscribe => c("ssubscribe", -2, "pubsub noscript loading stale", NOKEY, "pubsub", "Listens for messages published to shard channels."),
        Sunsubscribe => c("sunsubscribe", -1, "pubsub noscript loading stale", NOKEY, "pubsub", "Stops listening to messages posted to shard channels."),
        Publish => c("publish", 3, "pubsub loading stale fast may_replicate", NOKEY, "pubsub", "Posts a message to a channel."),
        Spublish => c("spublish", 3, "pubsub loading stale fast may_replicate", NOKEY, "pubsub", "Post a message to a shard channel"),
        Pubsub => c("pubsub", -2, "", NOKEY, "pubsub", "A container for Pub/Sub commands."),
        // scripting
        Eval => c("eval", -3, "noscript skip_monitor may_replicate no_mandatory_keys stale", NOKEY, "scripting", "Executes a server-side Lua script.")
            .numkeys_at(2)
            .lock(Namespace),
        Evalsha => c(
            "evalsha",
            -3,
            "noscript skip_monitor may_replicate no_mandatory_keys stale",
            NOKEY,
            "scripting",
            "Executes a server-side Lua script by SHA1 digest.",
        )
        .numkeys_at(2)
        .lock(Namespace),
        EvalRo => c("eval_ro", -3, "readonly noscript skip_monitor no_mandatory_keys stale", NOKEY, "scripting", "Executes a read-only server-side Lua script.")
            .numkeys_at(2)
            .lock(Namespace),
        EvalshaRo => c(
            "evalsha_ro",
            -3,
            "readonly noscript skip_monitor no_mandatory_keys stale",
            NOKEY,
            "scripting",
            "Executes a read-only server-side Lua script by SHA1 digest.",
        )
        .numkeys_at(2)
        .lock(Namespace),
        Fcall => c("fcall", -3, "noscript skip_monitor may_replicate no_mandatory_keys stale", NOKEY, "scripting", "Invokes a function.")
            .numkeys_at(2)
            .lock(Namespace),
        FcallRo => c("fcall_ro", -3, "readonly noscript skip_monitor no_mandatory_keys stale", NOKEY, "scripting", "Invokes a read-only function.")
            .numkeys_at(2)
            .lock(Namespace),
        Function => c("function", -2, "noscript", NOKEY, "scripting", "A container for function commands."),
        Script => c("script", -2, "noscript", NOKEY, "scripting", "A container for Lua scripts management commands."),
        // transactions
        Multi => c("multi", 1, "noscript loading stale fast allow_busy", NOKEY, "transaction", "Starts a transaction."),
        Exec => c("exec", 1, "noscript loading stale skip_slowlog", NOKEY, "transaction", "Executes all commands in a transaction.").lock(Namespace),
        Discard => c("discard", 1, "noscript loading stale fast allow_busy", NOKEY, "transaction", "Discards a transaction.").lock(Visit),
        Watch => c("watch", -2, "noscript loading stale fast allow_busy", KALL, "transaction", "Monitors changes to keys to determine the execution of a transaction."),
        Unwatch => c("unwatch", 1, "noscript loading stale fast allow_busy", NOKEY, "transaction", "Forgets about watched keys of a transaction.").lock(Visit),
        // connection and server
        Ping => c("ping", -1, "fast", NOKEY, "connection", "Returns the server's liveliness response."),
        Echo => c("echo", 2, "fast loading stale", NOKEY, "connection", "Returns the given string."),
        Quit => c("quit", -1, "noscript loading stale fast no_auth allow_busy", NOKEY, "connection", "Closes the connection."),
        Auth => c("auth", -2, "noscript loading stale fast no_auth allow_busy", NOKEY, "connection", "Authenticates the connection."),
        Hello => c("hello", -1, "noscript loading stale fast no_auth allow_busy", NOKEY, "connection", "Handshakes with the Redis server."),
        Reset => c("reset", 1, "noscript loading stale fast no_auth allow_busy", NOKEY, "connection", "Resets the connection.").lock(Visit),
        Select => c("select", 2, "loading stale fast", NOKEY, "connection", "Changes the selected database."),
        Acl => c("acl", -2, "admin noscript loading stale", NOKEY, "server", "A container for Access List Control commands."),
        Client => c("client", -2, "admin noscript loading stale", NOKEY, "connection", "A container for client connection commands."),
        Swapdb => c("swapdb", 3, "write fast", NOKEY, "server", "Swaps two Redis databases.").lock(Namespace),
        Flushdb => c("flushdb", -1, "write", NOKEY, "server", "Remove all keys from the current database.").lock(Db),
        Flushall => c("flushall", -1, "write", NOKEY, "server", "Removes all keys from all databases.").lock(Namespace),
        Info => c("info", -1, "loading stale", NOKEY, "server", "Returns information and statistics about the server.").lock(Visit),
        Config => c("config", -2, "admin noscript loading stale", NOKEY, "server", "A container for server configuration commands."),
        Time => c("time", 1, "loading stale fast", NOKEY, "server", "Returns the server time."),
        Save => c("save", 1, "admin noscript no_async_loading no_multi", NOKEY, "server", "Synchronously saves the database(s) to disk.").lock(All),
        Bgsave => c("bgsave", -1, "admin noscript no_async_loading", NOKEY, "server", "Asynchronously saves the database(s) to disk."),
        Lastsave => c("lastsave", 1, "loading stale fast", NOKEY, "server", "Returns the Unix timestamp of the last successful save to disk."),
        Role => c("role", 1, "noscript loading stale fast", NOKEY, "server", "Returns the replication role."),
        Command => c("command", -1, "loading stale", NOKEY, "server", "Returns detailed information about all commands."),
        Memory => c("memory", -2, "readonly", (2, 2, 1), "server", "A container for memory diagnostics commands.").lock(Visit),
        Debug => c("debug", -2, "admin noscript loading stale", (2, 2, 1), "server", "A container for debugging commands."),
        Slowlog => c("slowlog", -2, "admin loading stale", NOKEY, "server", "A container for slow log commands."),
        Latency => c("latency", -2, "admin noscript loading stale", NOKEY, "server", "A container for latency diagnostics commands."),
        Lolwut => c("lolwut", -1, "readonly fast", NOKEY, "server", "Displays computer art and the Redis version"),
        Wait => c(
            "wait",
            3,
            "noscript",
            NOKEY,
            "generic",
            "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
        ),
        Cluster => c("cluster", -2, "", NOKEY, "cluster", "A container for Redis Cluster commands.").lock(Visit),
        Readonly => c("readonly", 1, "loading stale fast", NOKEY, "cluster", "Enables read-only queries for a connection to a Redis Cluster replica node."),
        Readwrite => c("readwrite", 1, "loading stale fast", NOKEY, "cluster", "Enables read-write queries for a connection to a Reids Cluster replica node."),
        Asking => c("asking", 1, "fast", NOKEY, "cluster", "Signals that a cluster client is following an -ASK redirect."),
        Module => c("module", -2, "admin noscript", NOKEY, "server", "A container for module commands."),
        Replicaof => c("replicaof", 3, "admin noscript stale no_async_loading", NOKEY, "server", "Configures a server as replica of another, or promotes it to a master."),
        Slaveof => c(
            "slaveof",
            3,
            "admin noscript stale no_async_loading",
            NOKEY,
            "server",
            "Sets a Redis server as a replica of another, or promotes it to being a master.",
        ),
        Psync => c("psync", -3, "admin noscript no_async_loading no_multi", NOKEY, "server", "An internal command used in replication."),
        Sync => c("sync", 1, "admin noscript no_async_loading no_multi", NOKEY, "server", "An internal command used in replication."),
        Replconf => c("replconf", -1, "admin noscript loading stale allow_busy", NOKEY, "server", "An internal command for configuring the replication stream."),
        Monitor => c("monitor", 1, "admin noscript loading stale", NOKEY, "server", "Listens for all requests received by the server in real-time."),
        Shutdown => c(
            "shutdown",
            -1,
            "admin noscript loading stale no_multi allow_busy",
            NOKEY,
            "server",
            "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        ),
}

/// Every command's spec, indexed by `CommandId` (the table's order).
pub static COMMANDS: LazyLock<Vec<CommandSpec>> = LazyLock::new(|| {
    table()
        .into_iter()
        .map(|spec| {
            let route = ROUTES.iter().find(|(id, _)| *id == spec.id).map_or(Route::Keyed, |(_, r)| *r);
            CommandSpec { route, ..spec }
        })
        .collect()
});

/// Lowercase name → index into COMMANDS. Looked up once per command: foldhash, not std's
/// SipHash (which showed in the profile of pipelined GET and SET).
pub static INDEX: LazyLock<HashMap<&'static str, usize, foldhash::fast::RandomState>> =
    LazyLock::new(|| COMMANDS.iter().map(|c| (c.name, c.id.index())).collect());

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
            // The key, then the destination of the last STORE (or STOREDIST): SORT and
            // GEORADIUS use the last one given. SORT's LIMIT, GET and BY arguments are
            // skipped; GEORADIUS's options start after its position and radius.
            let sort = spec.name.starts_with("sort");
            let mut store = None;
            let mut i = if sort { 2 } else { 5 };
            while i < argv.len() {
                let a = argv[i];
                let skip = if !sort {
                    0
                } else if a.eq_ignore_ascii_case(b"LIMIT") {
                    2
                } else if a.eq_ignore_ascii_case(b"GET") || a.eq_ignore_ascii_case(b"BY") {
                    1
                } else {
                    0
                };
                if skip == 0 && i + 1 < argv.len() && (a.eq_ignore_ascii_case(b"STORE") || (!sort && a.eq_ignore_ascii_case(b"STOREDIST"))) {
                    store = Some(i + 1);
                    if !sort {
                        i += 1;
                    }
                }
                i += 1 + skip;
            }
            std::iter::once(1).chain(store).collect()
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
    fn ids_are_the_names_and_the_order_of_the_table() {
        assert_eq!(CommandId::ALL.len(), COMMANDS.len());
        for (i, spec) in COMMANDS.iter().enumerate() {
            assert_eq!(spec.id.index(), i);
            let folded: String = spec.name.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
            assert_eq!(format!("{:?}", spec.id).to_lowercase(), folded);
        }
        assert_eq!(CommandId::Get.spec().name, "get");
        assert_eq!(CommandId::TerraceStats.spec().name, "terrace.stats");
    }

    #[test]
    fn routes_are_in_the_table() {
        for (id, route) in ROUTES {
            assert_eq!(id.spec().route, *route);
        }
        // Commands that block take a connection of their own: none is left keyed by mistake.
        for spec in COMMANDS.iter().filter(|c| c.flags.has(Flags::BLOCKING)) {
            assert!(matches!(spec.route, Route::Blocking | Route::ByArguments), "{}", spec.name);
        }
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
