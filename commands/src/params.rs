//! Redis 7.0's configuration parameters as CONFIG GET and CONFIG SET know them: each one's
//! name (and its old alias), the kind of value it takes, Redis's default and whether it may
//! change at run time; `validate` checks a CONFIG SET value with Redis's words for each
//! refusal and returns the value as CONFIG GET shows it. What a parameter does is the
//! engine's business (engine/src/command/config.rs); COMPATIBILITY.md lists the ones it
//! accepts without effect.

use crate::settings::parse_size;

/// May CONFIG SET change it?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Mutable,
    /// Set at start only ("can't set immutable config").
    Immutable,
    /// Only with `enable-protected-configs` ("can't set protected config"), which is off.
    Protected,
}

/// The values a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// yes or no.
    Bool,
    /// A whole number in a range.
    Int { min: i128, max: i128 },
    /// Bytes with an optional unit (`100mb`, `1gb`), in a range; `percent`: or `N%` (of
    /// maxmemory), kept as -N.
    Memory { min: i128, max: i128, percent: bool },
    /// An octal number (file permissions).
    Octal { min: i128, max: i128 },
    /// One of the names.
    Enum(&'static [&'static str]),
    /// Some of the names, space-separated.
    Flags(&'static [&'static str]),
    /// Any text.
    Text,
    /// A value with a syntax of its own (`special`).
    Special,
}

/// One parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    /// The name it had before Redis 7 (`hash-max-ziplist-entries`…), answered by CONFIG GET
    /// beside the name and accepted by CONFIG SET.
    pub alias: Option<&'static str>,
    pub kind: Kind,
    /// Redis 7.0's default as CONFIG GET shows it (`dir` and `bind` are the server's own).
    pub default: &'static str,
    pub access: Access,
}

/// Finds a parameter by its name or alias (any case).
pub fn find(name: &str) -> Option<&'static Param> {
    let name = name.to_ascii_lowercase();
    PARAMS.iter().find(|p| p.name == name || p.alias == Some(name.as_str()))
}

/// Checks `value` for `param` as Redis's CONFIG SET does; Ok is the value as CONFIG GET will
/// show it, Err the reason Redis gives (after "CONFIG SET failed (possibly related to
/// argument '…') - ").
pub fn validate(param: &Param, value: &str) -> Result<String, String> {
    match param.access {
        Access::Immutable => return Err("can't set immutable config".into()),
        Access::Protected => return Err("can't set protected config".into()),
        Access::Mutable => {}
    }
    match param.kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int { min, max } => {
            let n: i128 = strict_integer(value).ok_or("argument couldn't be parsed into an integer")?;
            in_range(n, min, max)
        }
        Kind::Memory { min, max, percent } => {
            if let Some(p) = value.strip_suffix('%').filter(|_| percent) {
                let n: i128 = strict_integer(p).filter(|n| *n >= 0).ok_or("argument must be a memory or percent value")?;
                return in_range(-n, min, max).map(|_| value.to_string());
            }
            let why = if percent { "argument must be a memory or percent value" } else { "argument must be a memory value" };
            let n = parse_size(value).ok_or(why)? as i128;
            in_range(n, min, max)
        }
        Kind::Octal { min, max } => {
            let n = i128::from_str_radix(value, 8).map_err(|_| "argument couldn't be parsed into an integer")?;
            in_range(n, min, max).map(|_| value.to_string())
        }
        Kind::Enum(names) => {
            let v = value.to_ascii_lowercase();
            if names.contains(&v.as_str()) {
                Ok(v)
            } else {
                Err(format!("argument(s) must be one of the following: {}", names.join(", ")))
            }
        }
        Kind::Flags(names) => {
            let words: Vec<String> = value.split_whitespace().map(str::to_ascii_lowercase).collect();
            if words.is_empty() || words.iter().any(|w| !names.contains(&w.as_str())) {
                return Err(format!("argument(s) must be one of the following: {}", names.join(", ")));
            }
            Ok(words.join(" "))
        }
        Kind::Text => Ok(value.to_string()),
        Kind::Special => special(param.name, value),
    }
}

/// A decimal integer with nothing around it (Redis's `string2ll`).
fn strict_integer(s: &str) -> Option<i128> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    s.parse().ok()
}

fn in_range(n: i128, min: i128, max: i128) -> Result<String, String> {
    if n < min || n > max {
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(n.to_string())
}

/// The parameters with a syntax of their own.
fn special(name: &str, value: &str) -> Result<String, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    match name {
        // Pairs of seconds and changes.
        "save" => {
            if !words.len().is_multiple_of(2) || words.iter().any(|w| strict_integer(w).is_none_or(|n| n < 0)) {
                return Err("Invalid save parameters".into());
            }
            Ok(words.join(" "))
        }
        // CLASS HARD SOFT SECONDS, repeated; the classes not given keep their limits (the
        // engine merges them).
        "client-output-buffer-limit" => {
            if words.is_empty() || !words.len().is_multiple_of(4) {
                return Err("Wrong number of arguments in buffer limit configuration.".into());
            }
            let mut out = Vec::new();
            for chunk in words.chunks(4) {
                let class = match chunk[0].to_ascii_lowercase().as_str() {
                    "normal" => "normal",
                    "replica" | "slave" => "slave",
                    "pubsub" => "pubsub",
                    _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
                };
                let hard = parse_size(chunk[1]);
                let soft = parse_size(chunk[2]);
                let secs = strict_integer(chunk[3]).filter(|n| *n >= 0);
                let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs) else {
                    return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into());
                };
                out.push(format!("{class} {hard} {soft} {secs}"));
            }
            Ok(out.join(" "))
        }
        "notify-keyspace-events" => match crate::notify::parse_flags(value) {
            Some(flags) => Ok(crate::notify::format_flags(flags)),
            None => Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        },
        "oom-score-adj-values" => {
            let ok = words.len() == 3 && words.iter().all(|w| strict_integer(w).is_some_and(|n| (-2000..=2000).contains(&n)));
            if !ok {
                return Err("Invalid oom-score-adj-values".into());
            }
            Ok(words.join(" "))
        }
        "latency-tracking-info-percentiles" => {
            let ok = words.iter().all(|w| w.parse::<f64>().is_ok_and(|p| (0.0..=100.0).contains(&p)));
            if !ok {
                return Err("latency-tracking-info-percentiles: Invalid percentile".into());
            }
            Ok(words.join(" "))
        }
        "bind" => {
            if words.is_empty() || words.len() > 16 {
                return Err("Too many bind addresses specified.".into());
            }
            Ok(words.join(" "))
        }
        _ => Ok(value.to_string()),
    }
}

/// Redis 7.0.15's parameters as `CONFIG GET *` lists them (its DEBUG-only ones left out),
/// sorted by name.
pub const PARAMS: &[Param] = &[
    Param { name: "acl-pubsub-default", alias: None, kind: Kind::Enum(&["allchannels", "resetchannels"]), default: "resetchannels", access: Access::Mutable },
    Param { name: "aclfile", alias: None, kind: Kind::Text, default: "", access: Access::Immutable },
    Param { name: "acllog-max-len", alias: None, kind: Kind::Int { min: 0, max: 9223372036854775807 }, default: "128", access: Access::Mutable },
    Param { name: "active-defrag-cycle-max", alias: None, kind: Kind::Int { min: 1, max: 99 }, default: "25", access: Access::Mutable },
    Param { name: "active-defrag-cycle-min", alias: None, kind: Kind::Int { min: 1, max: 99 }, default: "1", access: Access::Mutable },
    Param {
        name: "active-defrag-ignore-bytes",
        alias: None,
        kind: Kind::Memory { min: 1, max: 9223372036854775807, percent: false },
        default: "104857600",
        access: Access::Mutable,
    },
    Param {
        name: "active-defrag-max-scan-fields",
        alias: None,
        kind: Kind::Int { min: 1, max: 9223372036854775807 },
        default: "1000",
        access: Access::Mutable,
    },
    Param { name: "active-defrag-threshold-lower", alias: None, kind: Kind::Int { min: 0, max: 1000 }, default: "10", access: Access::Mutable },
    Param { name: "active-defrag-threshold-upper", alias: None, kind: Kind::Int { min: 0, max: 1000 }, default: "100", access: Access::Mutable },
    Param { name: "active-expire-effort", alias: None, kind: Kind::Int { min: 1, max: 10 }, default: "1", access: Access::Mutable },
    Param { name: "activedefrag", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "activerehashing", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "always-show-logo", alias: None, kind: Kind::Bool, default: "no", access: Access::Immutable },
    Param { name: "aof-disable-auto-gc", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "aof-load-truncated", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "aof-rewrite-incremental-fsync", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "aof-timestamp-enabled", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "aof-use-rdb-preamble", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "aof_rewrite_cpulist", alias: None, kind: Kind::Text, default: "", access: Access::Immutable },
    Param { name: "appenddirname", alias: None, kind: Kind::Text, default: "appendonlydir", access: Access::Immutable },
    Param { name: "appendfilename", alias: None, kind: Kind::Text, default: "appendonly.aof", access: Access::Immutable },
    Param { name: "appendfsync", alias: None, kind: Kind::Enum(&["everysec", "always", "no"]), default: "everysec", access: Access::Mutable },
    Param { name: "appendonly", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param {
        name: "auto-aof-rewrite-min-size",
        alias: None,
        kind: Kind::Memory { min: 0, max: 9223372036854775807, percent: false },
        default: "67108864",
        access: Access::Mutable,
    },
    Param { name: "auto-aof-rewrite-percentage", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "100", access: Access::Mutable },
    Param { name: "bgsave_cpulist", alias: None, kind: Kind::Text, default: "", access: Access::Immutable },
    Param { name: "bind", alias: None, kind: Kind::Special, default: "* -::*", access: Access::Mutable },
    Param { name: "bind-source-addr", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "bio_cpulist", alias: None, kind: Kind::Text, default: "", access: Access::Immutable },
    Param {
        name: "busy-reply-threshold",
        alias: Some("lua-time-limit"),
        kind: Kind::Int { min: 0, max: 9223372036854775807 },
        default: "5000",
        access: Access::Mutable,
    },
    Param {
        name: "client-output-buffer-limit",
        alias: None,
        kind: Kind::Special,
        default: "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        access: Access::Mutable,
    },
    Param {
        name: "client-query-buffer-limit",
        alias: None,
        kind: Kind::Memory { min: 1048576, max: 9223372036854775807, percent: false },
        default: "1073741824",
        access: Access::Mutable,
    },
    Param { name: "cluster-allow-pubsubshard-when-down", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "cluster-allow-reads-when-down", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "cluster-allow-replica-migration", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "cluster-announce-bus-port", alias: None, kind: Kind::Int { min: 0, max: 65535 }, default: "0", access: Access::Mutable },
    Param { name: "cluster-announce-hostname", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "cluster-announce-ip", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "cluster-announce-port", alias: None, kind: Kind::Int { min: 0, max: 65535 }, default: "0", access: Access::Mutable },
    Param { name: "cluster-announce-tls-port", alias: None, kind: Kind::Int { min: 0, max: 65535 }, default: "0", access: Access::Mutable },
    Param { name: "cluster-config-file", alias: None, kind: Kind::Text, default: "nodes.conf", access: Access::Immutable },
    Param { name: "cluster-enabled", alias: None, kind: Kind::Bool, default: "no", access: Access::Immutable },
    Param {
        name: "cluster-link-sendbuf-limit",
        alias: None,
        kind: Kind::Memory { min: 0, max: 18446744073709551615, percent: false },
        default: "0",
        access: Access::Mutable,
    },
    Param { name: "cluster-migration-barrier", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "1", access: Access::Mutable },
    Param { name: "cluster-node-timeout", alias: None, kind: Kind::Int { min: 0, max: 9223372036854775807 }, default: "15000", access: Access::Mutable },
    Param { name: "cluster-port", alias: None, kind: Kind::Int { min: 0, max: 65535 }, default: "0", access: Access::Immutable },
    Param {
        name: "cluster-preferred-endpoint-type",
        alias: None,
        kind: Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        default: "ip",
        access: Access::Mutable,
    },
    Param { name: "cluster-replica-no-failover", alias: Some("cluster-slave-no-failover"), kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param {
        name: "cluster-replica-validity-factor",
        alias: Some("cluster-slave-validity-factor"),
        kind: Kind::Int { min: 0, max: 2147483647 },
        default: "10",
        access: Access::Mutable,
    },
    Param { name: "cluster-require-full-coverage", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "crash-log-enabled", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "crash-memcheck-enabled", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "daemonize", alias: None, kind: Kind::Bool, default: "no", access: Access::Immutable },
    Param { name: "databases", alias: None, kind: Kind::Int { min: 1, max: 2147483647 }, default: "16", access: Access::Immutable },
    Param { name: "dbfilename", alias: None, kind: Kind::Text, default: "dump.rdb", access: Access::Protected },
    Param { name: "dir", alias: None, kind: Kind::Special, default: "/tmp", access: Access::Protected },
    Param { name: "disable-thp", alias: None, kind: Kind::Bool, default: "yes", access: Access::Immutable },
    Param { name: "dynamic-hz", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "enable-debug-command", alias: None, kind: Kind::Enum(&["no", "yes", "local"]), default: "no", access: Access::Immutable },
    Param { name: "enable-module-command", alias: None, kind: Kind::Enum(&["no", "yes", "local"]), default: "no", access: Access::Immutable },
    Param { name: "enable-protected-configs", alias: None, kind: Kind::Enum(&["no", "yes", "local"]), default: "no", access: Access::Immutable },
    Param {
        name: "hash-max-listpack-entries",
        alias: Some("hash-max-ziplist-entries"),
        kind: Kind::Int { min: 0, max: 9223372036854775807 },
        default: "512",
        access: Access::Mutable,
    },
    Param {
        name: "hash-max-listpack-value",
        alias: Some("hash-max-ziplist-value"),
        kind: Kind::Memory { min: 0, max: 9223372036854775807, percent: false },
        default: "64",
        access: Access::Mutable,
    },
    Param {
        name: "hll-sparse-max-bytes",
        alias: None,
        kind: Kind::Memory { min: 0, max: 9223372036854775807, percent: false },
        default: "3000",
        access: Access::Mutable,
    },
    Param { name: "hz", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "10", access: Access::Mutable },
    Param { name: "ignore-warnings", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "io-threads", alias: None, kind: Kind::Int { min: 1, max: 128 }, default: "1", access: Access::Immutable },
    Param { name: "io-threads-do-reads", alias: None, kind: Kind::Bool, default: "no", access: Access::Immutable },
    Param { name: "jemalloc-bg-thread", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "latency-monitor-threshold", alias: None, kind: Kind::Int { min: 0, max: 9223372036854775807 }, default: "0", access: Access::Mutable },
    Param { name: "latency-tracking", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "latency-tracking-info-percentiles", alias: None, kind: Kind::Special, default: "50 99 99.9", access: Access::Mutable },
    Param { name: "lazyfree-lazy-eviction", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "lazyfree-lazy-expire", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "lazyfree-lazy-server-del", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "lazyfree-lazy-user-del", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "lazyfree-lazy-user-flush", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "lfu-decay-time", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "1", access: Access::Mutable },
    Param { name: "lfu-log-factor", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "10", access: Access::Mutable },
    Param { name: "list-compress-depth", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "0", access: Access::Mutable },
    Param {
        name: "list-max-listpack-size",
        alias: Some("list-max-ziplist-size"),
        kind: Kind::Int { min: -2147483648, max: 2147483647 },
        default: "-2",
        access: Access::Mutable,
    },
    Param { name: "logfile", alias: None, kind: Kind::Text, default: "", access: Access::Immutable },
    Param { name: "loglevel", alias: None, kind: Kind::Enum(&["debug", "verbose", "notice", "warning"]), default: "notice", access: Access::Mutable },
    Param { name: "masterauth", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "masteruser", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "maxclients", alias: None, kind: Kind::Int { min: 1, max: 4294967295 }, default: "10000", access: Access::Mutable },
    Param { name: "maxmemory", alias: None, kind: Kind::Memory { min: 0, max: 18446744073709551615, percent: false }, default: "0", access: Access::Mutable },
    Param {
        name: "maxmemory-clients",
        alias: None,
        kind: Kind::Memory { min: -100, max: 9223372036854775807, percent: true },
        default: "0",
        access: Access::Mutable,
    },
    Param { name: "maxmemory-eviction-tenacity", alias: None, kind: Kind::Int { min: 0, max: 100 }, default: "10", access: Access::Mutable },
    Param {
        name: "maxmemory-policy",
        alias: None,
        kind: Kind::Enum(&["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"]),
        default: "noeviction",
        access: Access::Mutable,
    },
    Param { name: "maxmemory-samples", alias: None, kind: Kind::Int { min: 1, max: 2147483647 }, default: "5", access: Access::Mutable },
    Param {
        name: "min-replicas-max-lag",
        alias: Some("min-slaves-max-lag"),
        kind: Kind::Int { min: 0, max: 2147483647 },
        default: "10",
        access: Access::Mutable,
    },
    Param {
        name: "min-replicas-to-write",
        alias: Some("min-slaves-to-write"),
        kind: Kind::Int { min: 0, max: 2147483647 },
        default: "0",
        access: Access::Mutable,
    },
    Param { name: "no-appendfsync-on-rewrite", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "notify-keyspace-events", alias: None, kind: Kind::Special, default: "", access: Access::Mutable },
    Param { name: "oom-score-adj", alias: None, kind: Kind::Enum(&["no", "yes", "relative", "absolute"]), default: "no", access: Access::Mutable },
    Param { name: "oom-score-adj-values", alias: None, kind: Kind::Special, default: "0 200 800", access: Access::Mutable },
    Param { name: "pidfile", alias: None, kind: Kind::Text, default: "", access: Access::Immutable },
    Param { name: "port", alias: None, kind: Kind::Int { min: 0, max: 65535 }, default: "16390", access: Access::Mutable },
    Param { name: "proc-title-template", alias: None, kind: Kind::Text, default: "{title} {listen-addr} {server-mode}", access: Access::Mutable },
    Param {
        name: "propagation-error-behavior",
        alias: None,
        kind: Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        default: "ignore",
        access: Access::Mutable,
    },
    Param { name: "protected-mode", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param {
        name: "proto-max-bulk-len",
        alias: None,
        kind: Kind::Memory { min: 1048576, max: 9223372036854775807, percent: false },
        default: "536870912",
        access: Access::Mutable,
    },
    Param { name: "rdb-del-sync-files", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "rdb-save-incremental-fsync", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "rdbchecksum", alias: None, kind: Kind::Bool, default: "yes", access: Access::Immutable },
    Param { name: "rdbcompression", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param {
        name: "repl-backlog-size",
        alias: None,
        kind: Kind::Memory { min: 1, max: 9223372036854775807, percent: false },
        default: "1048576",
        access: Access::Mutable,
    },
    Param { name: "repl-backlog-ttl", alias: None, kind: Kind::Int { min: 0, max: 9223372036854775807 }, default: "3600", access: Access::Mutable },
    Param { name: "repl-disable-tcp-nodelay", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "repl-diskless-load", alias: None, kind: Kind::Enum(&["disabled", "on-empty-db", "swapdb"]), default: "disabled", access: Access::Mutable },
    Param { name: "repl-diskless-sync", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "repl-diskless-sync-delay", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "5", access: Access::Mutable },
    Param { name: "repl-diskless-sync-max-replicas", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "0", access: Access::Mutable },
    Param {
        name: "repl-ping-replica-period",
        alias: Some("repl-ping-slave-period"),
        kind: Kind::Int { min: 1, max: 2147483647 },
        default: "10",
        access: Access::Mutable,
    },
    Param { name: "repl-timeout", alias: None, kind: Kind::Int { min: 1, max: 2147483647 }, default: "60", access: Access::Mutable },
    Param { name: "replica-announce-ip", alias: Some("slave-announce-ip"), kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "replica-announce-port", alias: Some("slave-announce-port"), kind: Kind::Int { min: 0, max: 65535 }, default: "0", access: Access::Mutable },
    Param { name: "replica-announced", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "replica-ignore-disk-write-errors", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "replica-ignore-maxmemory", alias: Some("slave-ignore-maxmemory"), kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "replica-lazy-flush", alias: Some("slave-lazy-flush"), kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "replica-priority", alias: Some("slave-priority"), kind: Kind::Int { min: 0, max: 2147483647 }, default: "100", access: Access::Mutable },
    Param { name: "replica-read-only", alias: Some("slave-read-only"), kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "replica-serve-stale-data", alias: Some("slave-serve-stale-data"), kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "replicaof", alias: Some("slaveof"), kind: Kind::Special, default: "", access: Access::Immutable },
    Param { name: "requirepass", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "sanitize-dump-payload", alias: None, kind: Kind::Enum(&["no", "yes", "clients"]), default: "no", access: Access::Mutable },
    Param { name: "save", alias: None, kind: Kind::Special, default: "", access: Access::Mutable },
    Param { name: "server_cpulist", alias: None, kind: Kind::Text, default: "", access: Access::Immutable },
    Param { name: "set-max-intset-entries", alias: None, kind: Kind::Int { min: 0, max: 9223372036854775807 }, default: "512", access: Access::Mutable },
    Param { name: "set-proc-title", alias: None, kind: Kind::Bool, default: "yes", access: Access::Immutable },
    Param {
        name: "shutdown-on-sigint",
        alias: None,
        kind: Kind::Flags(&["default", "save", "nosave", "now", "force"]),
        default: "default",
        access: Access::Mutable,
    },
    Param {
        name: "shutdown-on-sigterm",
        alias: None,
        kind: Kind::Flags(&["default", "save", "nosave", "now", "force"]),
        default: "default",
        access: Access::Mutable,
    },
    Param { name: "shutdown-timeout", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "10", access: Access::Mutable },
    Param { name: "slowlog-log-slower-than", alias: None, kind: Kind::Int { min: -1, max: 9223372036854775807 }, default: "10000", access: Access::Mutable },
    Param { name: "slowlog-max-len", alias: None, kind: Kind::Int { min: 0, max: 9223372036854775807 }, default: "128", access: Access::Mutable },
    Param { name: "socket-mark-id", alias: None, kind: Kind::Int { min: 0, max: 4294967295 }, default: "0", access: Access::Immutable },
    Param { name: "stop-writes-on-bgsave-error", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param {
        name: "stream-node-max-bytes",
        alias: None,
        kind: Kind::Memory { min: 0, max: 9223372036854775807, percent: false },
        default: "4096",
        access: Access::Mutable,
    },
    Param { name: "stream-node-max-entries", alias: None, kind: Kind::Int { min: 0, max: 9223372036854775807 }, default: "100", access: Access::Mutable },
    Param { name: "supervised", alias: None, kind: Kind::Enum(&["upstart", "systemd", "auto", "no"]), default: "no", access: Access::Immutable },
    Param { name: "syslog-enabled", alias: None, kind: Kind::Bool, default: "no", access: Access::Immutable },
    Param {
        name: "syslog-facility",
        alias: None,
        kind: Kind::Enum(&["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]),
        default: "local0",
        access: Access::Immutable,
    },
    Param { name: "syslog-ident", alias: None, kind: Kind::Text, default: "redis", access: Access::Immutable },
    Param { name: "tcp-backlog", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "511", access: Access::Immutable },
    Param { name: "tcp-keepalive", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "300", access: Access::Mutable },
    Param { name: "timeout", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "0", access: Access::Mutable },
    Param { name: "tls-auth-clients", alias: None, kind: Kind::Enum(&["no", "yes", "optional"]), default: "yes", access: Access::Mutable },
    Param { name: "tls-ca-cert-dir", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-ca-cert-file", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-cert-file", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-ciphers", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-ciphersuites", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-client-cert-file", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-client-key-file", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-client-key-file-pass", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-cluster", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "tls-dh-params-file", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-key-file", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-key-file-pass", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-port", alias: None, kind: Kind::Int { min: 0, max: 65535 }, default: "0", access: Access::Mutable },
    Param { name: "tls-prefer-server-ciphers", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "tls-protocols", alias: None, kind: Kind::Text, default: "", access: Access::Mutable },
    Param { name: "tls-replication", alias: None, kind: Kind::Bool, default: "no", access: Access::Mutable },
    Param { name: "tls-session-cache-size", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "20480", access: Access::Mutable },
    Param { name: "tls-session-cache-timeout", alias: None, kind: Kind::Int { min: 0, max: 2147483647 }, default: "300", access: Access::Mutable },
    Param { name: "tls-session-caching", alias: None, kind: Kind::Bool, default: "yes", access: Access::Mutable },
    Param { name: "tracking-table-max-keys", alias: None, kind: Kind::Int { min: 0, max: 9223372036854775807 }, default: "1000000", access: Access::Mutable },
    Param { name: "unixsocket", alias: None, kind: Kind::Text, default: "", access: Access::Immutable },
    Param { name: "unixsocketperm", alias: None, kind: Kind::Octal { min: 0, max: 511 }, default: "0", access: Access::Immutable },
    Param {
        name: "zset-max-listpack-entries",
        alias: Some("zset-max-ziplist-entries"),
        kind: Kind::Int { min: 0, max: 9223372036854775807 },
        default: "128",
        access: Access::Mutable,
    },
    Param {
        name: "zset-max-listpack-value",
        alias: Some("zset-max-ziplist-value"),
        kind: Kind::Memory { min: 0, max: 9223372036854775807, percent: false },
        default: "64",
        access: Access::Mutable,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sorted_and_defaults_are_valid() {
        for w in PARAMS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        for p in PARAMS {
            if p.access == Access::Mutable && !matches!(p.kind, Kind::Special | Kind::Flags(_)) && !p.default.is_empty() {
                assert!(validate(p, p.default).is_ok(), "{}'s default {:?}: {:?}", p.name, p.default, validate(p, p.default));
            }
        }
        assert_eq!(PARAMS.len() + PARAMS.iter().filter(|p| p.alias.is_some()).count(), 192, "CONFIG GET * of redis-server 7.0.15 lists 192 names");
    }

    #[test]
    fn values_are_checked_with_redis_words() {
        let p = |n| find(n).unwrap();
        assert_eq!(validate(p("hash-max-ziplist-value"), "32"), Ok("32".into()));
        assert_eq!(p("HASH-MAX-ZIPLIST-VALUE").name, "hash-max-listpack-value");
        assert_eq!(validate(p("list-compress-depth"), "-1").unwrap_err(), "argument must be between 0 and 2147483647 inclusive");
        assert_eq!(validate(p("lua-time-limit"), "1x").unwrap_err(), "argument couldn't be parsed into an integer");
        assert_eq!(validate(p("activerehashing"), "maybe").unwrap_err(), "argument must be 'yes' or 'no'");
        assert_eq!(validate(p("activerehashing"), "YES"), Ok("yes".into()));
        assert_eq!(validate(p("client-query-buffer-limit"), "2mb"), Ok((2 << 20).to_string()));
        assert_eq!(validate(p("client-query-buffer-limit"), "1kb").unwrap_err(), "argument must be between 1048576 and 9223372036854775807 inclusive");
        assert_eq!(validate(p("maxmemory-clients"), "10%"), Ok("10%".into()));
        assert!(validate(p("loglevel"), "loud").unwrap_err().starts_with("argument(s) must be one of the following: debug, verbose, notice, warning"));
        assert_eq!(validate(p("daemonize"), "yes").unwrap_err(), "can't set immutable config");
        assert_eq!(validate(p("dir"), "/").unwrap_err(), "can't set protected config");
        assert_eq!(validate(p("save"), "3600 1 300"), Err("Invalid save parameters".into()));
        assert_eq!(validate(p("save"), "3600 1 300 100"), Ok("3600 1 300 100".into()));
        assert_eq!(validate(p("client-output-buffer-limit"), "pubsub 32mb 8mb 60"), Ok("pubsub 33554432 8388608 60".into()));
        assert!(validate(p("client-output-buffer-limit"), "nobody 1 1 1").unwrap_err().starts_with("Invalid client class"));
        assert_eq!(validate(p("notify-keyspace-events"), "KEA"), Ok("AKE".into()));
        assert!(validate(p("notify-keyspace-events"), "KEQ").unwrap_err().starts_with("Invalid event class character"));
        assert_eq!(validate(p("shutdown-on-sigterm"), "nosave now"), Ok("nosave now".into()));
        assert!(find("no-such-option").is_none());
    }
}
