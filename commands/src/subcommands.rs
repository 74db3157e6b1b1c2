//! Container commands' subcommands with their arity, as in Redis 7.0's command table.

/// Subcommands of container commands with their arity (as in Redis 7.0's command table).
pub const SUBCOMMANDS: &[(&str, &[(&str, i32)])] = &[
    (
        "client",
        &[
            ("id", 2),
            ("getname", 2),
            ("setname", 3),
            ("setinfo", 4),
            ("info", 2),
            ("list", -2),
            ("kill", -3),
            ("unblock", -3),
            ("reply", 3),
            ("pause", -3),
            ("unpause", 2),
            ("getredir", 2),
            ("trackinginfo", 2),
            ("tracking", -3),
            ("caching", 3),
            ("no-evict", 3),
            ("help", 2),
        ],
    ),
    ("object", &[("encoding", 3), ("freq", 3), ("idletime", 3), ("refcount", 3), ("help", 2)]),
    ("config", &[("get", -3), ("set", -4), ("resetstat", 2), ("rewrite", 2), ("help", 2)]),
    ("command", &[("count", 2), ("list", -2), ("info", -2), ("docs", -2), ("getkeys", -4), ("getkeysandflags", -4), ("help", 2)]),
    ("slowlog", &[("get", -2), ("len", 2), ("reset", 2), ("help", 2)]),
    ("latency", &[("latest", 2), ("history", 3), ("reset", -2), ("doctor", 2), ("histogram", -2), ("help", 2)]),
    (
        "acl",
        &[
            ("cat", -2),
            ("deluser", -3),
            ("dryrun", -4),
            ("genpass", -2),
            ("getuser", 3),
            ("list", 2),
            ("load", 2),
            ("log", -2),
            ("save", 2),
            ("setuser", -3),
            ("users", 2),
            ("whoami", 2),
            ("help", 2),
        ],
    ),
    (
        "cluster",
        &[
            ("addslots", -3),
            ("addslotsrange", -4),
            ("bumpepoch", 2),
            ("count-failure-reports", 3),
            ("countkeysinslot", 3),
            ("delslots", -3),
            ("delslotsrange", -4),
            ("failover", -2),
            ("flushslots", 2),
            ("forget", 3),
            ("getkeysinslot", 4),
            ("help", 2),
            ("info", 2),
            ("keyslot", 3),
            ("links", 2),
            ("meet", -4),
            ("myid", 2),
            ("nodes", 2),
            ("replicas", 3),
            ("replicate", 3),
            ("reset", -2),
            ("saveconfig", 2),
            ("set-config-epoch", 3),
            ("setslot", -4),
            ("shards", 2),
            ("slaves", 3),
            ("slots", 2),
        ],
    ),
    ("module", &[("help", 2), ("list", 2), ("load", -3), ("loadex", -3), ("unload", 3)]),
    ("pubsub", &[("channels", -2), ("numpat", 2), ("numsub", -2), ("shardchannels", -2), ("shardnumsub", -2), ("help", 2)]),
    ("function", &[("delete", 3), ("dump", 2), ("flush", -2), ("help", 2), ("kill", 2), ("list", -2), ("load", -3), ("restore", -3), ("stats", 2)]),
    ("script", &[("debug", 3), ("exists", -3), ("flush", -2), ("help", 2), ("kill", 2), ("load", 3)]),
    ("xgroup", &[("create", -5), ("setid", -5), ("destroy", 4), ("createconsumer", 5), ("delconsumer", 5), ("help", 2)]),
    ("xinfo", &[("consumers", 4), ("groups", 3), ("stream", -3), ("help", 2)]),
    ("memory", &[("usage", -3), ("stats", 2), ("malloc-stats", 2), ("doctor", 2), ("purge", 2), ("help", 2)]),
];

/// Every container's subcommands numbered in one sequence (for per-subcommand statistics).
static FLAT: std::sync::LazyLock<Vec<(&'static str, &'static str)>> =
    std::sync::LazyLock::new(|| SUBCOMMANDS.iter().flat_map(|(c, subs)| subs.iter().map(move |(s, _)| (*c, *s))).collect());

/// How many subcommands there are in all.
pub fn sub_count() -> usize {
    FLAT.len()
}

/// The number of `container`'s subcommand `sub` (any case) in the sequence, if it has one.
pub fn sub_index(container: &str, sub: &[u8]) -> Option<usize> {
    FLAT.iter().position(|(c, s)| *c == container && s.as_bytes().eq_ignore_ascii_case(sub))
}

/// Whether `argc` arguments (the container's name and the subcommand's included) fit the
/// arity of `container`'s subcommand `sub`; None for an unknown subcommand.
pub fn sub_arity_ok(container: &str, sub: &[u8], argc: usize) -> Option<bool> {
    let subs = SUBCOMMANDS.iter().find(|(c, _)| *c == container)?.1;
    let &(_, arity) = subs.iter().find(|(s, _)| s.as_bytes().eq_ignore_ascii_case(sub))?;
    Some(crate::arity_fits(arity, argc))
}

/// The container and subcommand numbered `i`.
pub fn sub_name(i: usize) -> Option<(&'static str, &'static str)> {
    FLAT.get(i).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_are_numbered_both_ways() {
        let i = sub_index("client", b"LIST").unwrap();
        assert_eq!(sub_name(i), Some(("client", "list")));
        assert_eq!(sub_index("client", b"nope"), None);
        assert_eq!(sub_index("get", b"x"), None);
        assert!(sub_count() > 100);
    }
}
