//! CONFIG GET / SET / RESETSTAT: the parameters a Redis client may read or change at run time.

use std::str::FromStr;
use std::sync::atomic::Ordering;

use super::args::{err, glob_match};
use super::{CmdResult, Ctx};
use terrace_commands::params::{self, Param};

use crate::keyspace::eviction::Policy;
use crate::server::state::Server;

fn all_params(srv: &Server) -> Vec<(String, String)> {
    let mut v = vec![
        ("maxmemory".to_string(), srv.runtime.maxmemory.load(Ordering::Relaxed).to_string()),
        ("maxmemory-policy".to_string(), srv.policy().name().to_string()),
        ("maxmemory-samples".to_string(), srv.runtime.maxmemory_samples.load(Ordering::Relaxed).to_string()),
        ("port".to_string(), srv.port.load(Ordering::Relaxed).to_string()),
        ("bind".to_string(), srv.config.bind.clone()),
        ("enable-debug-command".to_string(), srv.config.debug_command.name().to_string()),
    ];
    v.extend(srv.runtime.params.lock().iter().cloned());
    v
}

/// The collection size limits OBJECT ENCODING reports by, as CONFIG sets them.
pub fn encoding_limits(srv: &Server) -> crate::keyspace::value::EncodingLimits {
    let params = srv.runtime.params.lock();
    let get = |name: &str, default: usize| params.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.parse().ok()).unwrap_or(default);
    let d = crate::keyspace::value::EncodingLimits::default();
    crate::keyspace::value::EncodingLimits {
        hash_entries: get("hash-max-listpack-entries", d.hash_entries),
        hash_value: get("hash-max-listpack-value", d.hash_value),
        zset_entries: get("zset-max-listpack-entries", d.zset_entries),
        zset_value: get("zset-max-listpack-value", d.zset_value),
        set_intset_entries: get("set-max-intset-entries", d.set_intset_entries),
    }
}

/// Stores a parameter's value under its name and its alias. A client-output-buffer-limit
/// value changes only the classes it names.
fn store(srv: &Server, param: &Param, value: String) {
    let mut params = srv.runtime.params.lock();
    for (_, v) in params.iter_mut().filter(|(k, _)| k == param.name || Some(k.as_str()) == param.alias) {
        *v = if param.name == "client-output-buffer-limit" { merge_buffer_limits(v, &value) } else { value.clone() };
    }
}

/// `old` with the classes `new` sets replaced (both `CLASS HARD SOFT SECONDS …`).
fn merge_buffer_limits(old: &str, new: &str) -> String {
    let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let (mut classes, given) = (words(old), words(new));
    for set in given.chunks(4) {
        match classes.chunks_mut(4).find(|c| c[0] == set[0]) {
            Some(c) => c.clone_from_slice(set),
            None => classes.extend_from_slice(set),
        }
    }
    classes.join(" ")
}

/// The parameter CONFIG SET names and its value as CONFIG GET will show it, or why Redis
/// refuses it ("unknown" for a parameter Redis 7.0 does not have).
fn checked(name: &str, value: &str) -> Result<(&'static Param, String), String> {
    if name == "bind" {
        // The engine listens on the address it started with (its port may change).
        return Err("can't set immutable config".into());
    }
    let param = params::find(name).ok_or("unknown")?;
    let value = params::validate(param, value)?;
    if param.name == "maxclients" {
        let room = crate::limits::client_fds().unwrap_or(usize::MAX);
        if value.parse::<usize>().unwrap_or(0) > room {
            return Err(format!("The operating system is not able to handle the specified number of clients, try with {room}"));
        }
    }
    Ok((param, value))
}

/// Applies a value `checked` accepts: the parameters with an effect take it, and it is
/// stored for CONFIG GET (those CONFIG GET reads elsewhere are not in the text store).
/// `ns` is the namespace of the connection setting it: `notify-keyspace-events` is that
/// namespace's own (its events go to its own subscribers); every other parameter is the
/// engine's.
fn set_param(srv: &Server, fx: &mut crate::command::pipeline::Effects, ns: usize, name: &str, value: &str) -> Result<(), String> {
    let (param, value) = checked(name, value)?;
    match param.name {
        "maxmemory" => {
            srv.runtime.maxmemory.store(value.parse().unwrap_or(0), Ordering::Relaxed);
            // As Redis: a lower limit evicts at once, not at the next write — once the
            // command's locks are released (inside EXEC they are every shard's).
            fx.make_room = true;
        }
        "maxmemory-policy" => {
            let p = Policy::from_str(&value).map_err(|_| "unknown maxmemory-policy")?;
            *srv.runtime.policy.lock() = p;
            srv.keyspace.lfu.store(p.is_lfu(), Ordering::Relaxed);
        }
        "maxmemory-samples" => srv.runtime.maxmemory_samples.store(value.parse::<usize>().unwrap_or(5), Ordering::Relaxed),
        "tracking-table-max-keys" => srv.tracking.set_max_keys(value.parse().unwrap_or(1_000_000)),
        "hll-sparse-max-bytes" => srv.runtime.hll_sparse_max_bytes.store(value.parse::<usize>().unwrap_or(3000), Ordering::Relaxed),
        "requirepass" => {
            // As in Redis, requirepass is the default user's password.
            let rules = if value.is_empty() { vec!["nopass".to_string()] } else { vec!["resetpass".to_string(), format!(">{value}")] };
            srv.acl.set_user("default", &rules)?;
        }
        "slowlog-log-slower-than" => srv.slowlog.threshold_us.store(value.parse().unwrap_or(10_000), Ordering::Relaxed),
        "slowlog-max-len" => srv.slowlog.max_len.store(value.parse().unwrap_or(128), Ordering::Relaxed),
        "latency-monitor-threshold" => srv.latency.set_threshold(value.parse().unwrap_or(0)),
        "notify-keyspace-events" => {
            let flags = terrace_commands::notify::parse_flags(&value).unwrap_or(0);
            srv.notifications.set(ns, flags, &srv.keyspace);
            if ns != 0 {
                // (The text store is the default namespace's; CONFIG GET reads a tenant's.)
                return Ok(());
            }
        }
        "masterauth" => *srv.replication.masterauth.lock() = Some(value.clone()).filter(|v| !v.is_empty()),
        "repl-backlog-size" => srv.replication.set_backlog_size(value.parse().unwrap_or(1 << 20)),
        "min-replicas-to-write" => srv.replication.min_replicas.store(value.parse().unwrap_or(0), Ordering::Relaxed),
        "min-replicas-max-lag" => srv.replication.min_replicas_max_lag.store(value.parse().unwrap_or(10), Ordering::Relaxed),
        "busy-reply-threshold" => srv.scripts.busy_threshold_ms.store(value.parse().unwrap_or(crate::scripting::BUSY_THRESHOLD_MS), Ordering::Relaxed),
        _ => srv.limits.apply(param.name, &value),
    }
    store(srv, param, value);
    Ok(())
}

/// Binds the engine's address on a new port for CONFIG SET port; the control thread accepts
/// on it once the whole CONFIG SET is applied. Port 0 is refused: Redis reads it as "no TCP
/// listener", which would leave this engine unreachable.
fn listen_on(srv: &Server, port: &str) -> Result<(std::net::TcpListener, u16), String> {
    let port: u16 = port.parse().map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    if port == 0 {
        return Err("Unable to listen on this port: port 0 would leave the engine without a TCP listener".into());
    }
    let unable = |e: std::io::Error| format!("Unable to listen on this port: {e}");
    let listener = std::net::TcpListener::bind((srv.config.bind.as_str(), port)).map_err(unable)?;
    listener.set_nonblocking(true).map_err(unable)?;
    Ok((listener, port))
}

/// Lowers maxclients at start to what the open-file limit allows (CONFIG GET shows it).
pub fn set_maxclients_at_start(srv: &Server, n: usize) {
    srv.limits.apply("maxclients", &n.to_string());
    if let Some(p) = params::find("maxclients") {
        store(srv, p, n.to_string());
    }
}

/// `requirepass_file` at start: the default user's password, as CONFIG SET requirepass
/// gives it (clients connecting from now on must AUTH).
pub fn set_requirepass_at_start(srv: &Server, password: &str) -> Result<(), String> {
    let mut unused = crate::command::pipeline::Effects::default();
    set_param(srv, &mut unused, 0, "requirepass", password)
}

pub fn config(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_uppercase();
    match sub.as_str() {
        "GET" if argv.len() >= 3 => {
            let mut params = all_params(ctx.srv);
            let ns = ctx.conn.ns_base / crate::keyspace::NUM_DBS;
            if ns != 0 {
                // A tenant's own notification classes.
                let own = terrace_commands::notify::format_flags(ctx.srv.notifications.flags(ns));
                for (_, v) in params.iter_mut().filter(|(k, _)| k == "notify-keyspace-events") {
                    *v = own.clone();
                }
            }
            let mut hits: Vec<(String, String)> = Vec::new();
            for pat in &argv[2..] {
                let pat = pat.to_ascii_lowercase();
                for (k, v) in &params {
                    if glob_match(&pat, k.as_bytes(), true) && !hits.iter().any(|(h, _)| h == k) {
                        hits.push((k.clone(), v.clone()));
                    }
                }
            }
            ctx.out.map_len(hits.len());
            for (k, v) in hits {
                ctx.out.bulk(k.as_bytes());
                ctx.out.bulk(v.as_bytes());
            }
        }
        "SET" if argv.len() >= 4 && argv.len().is_multiple_of(2) => {
            let pairs: Vec<(String, String)> =
                argv[2..].chunks(2).map(|p| (String::from_utf8_lossy(p[0]).to_ascii_lowercase(), String::from_utf8_lossy(p[1]).into_owned())).collect();
            let refuse = |k: &str, reason: String| {
                if reason == "unknown" {
                    err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{k}'"))
                } else {
                    err(format!("ERR CONFIG SET failed (possibly related to argument '{k}') - {reason}"))
                }
            };
            // Setting `bind` to the address the engine listens on is a no-op (CONFIG SET of
            // every value CONFIG GET shows must work); another address is refused.
            let pairs: Vec<(String, String)> = pairs.into_iter().filter(|(k, v)| !(k == "bind" && v.trim() == ctx.srv.config.bind)).collect();
            if pairs.is_empty() {
                ctx.out.ok();
                return Ok(());
            }
            // All or nothing, as Redis 7: every value is checked before any is applied (a new
            // port is bound while checking, so one already in use fails it all).
            let mut seen = Vec::new();
            let mut new_listener = None;
            for (k, v) in &pairs {
                let canonical = params::find(k).map_or(k.as_str(), |p| p.name);
                if seen.contains(&canonical) {
                    return Err(refuse(k, "duplicate parameter".into()));
                }
                seen.push(canonical);
                let (param, value) = checked(k, v).map_err(|reason| refuse(k, reason))?;
                // (The port it listens on already: nothing to rebind, as in Redis.)
                if param.name == "port" && value != ctx.srv.port.load(Ordering::Relaxed).to_string() {
                    new_listener = Some(listen_on(ctx.srv, &value).map_err(|reason| refuse(k, reason))?);
                }
            }
            for (k, v) in &pairs {
                let ns = ctx.conn.ns_base / crate::keyspace::NUM_DBS;
                set_param(ctx.srv, &mut ctx.data.fx, ns, k, v).map_err(|reason| refuse(k, reason))?;
            }
            if let Some((listener, port)) = new_listener {
                *ctx.srv.new_listener.lock() = Some(listener);
                ctx.srv.listener_changed.notify_one();
                ctx.srv.port.store(port as u64, Ordering::Relaxed);
            }
            ctx.out.ok();
        }
        "RESETSTAT" if argv.len() == 2 => {
            let st = &ctx.srv.stats;
            for c in &st.per_command {
                c.calls.store(0, Ordering::Relaxed);
                c.usec.store(0, Ordering::Relaxed);
                c.rejected.store(0, Ordering::Relaxed);
                c.failed.store(0, Ordering::Relaxed);
                for b in &c.latency {
                    b.store(0, Ordering::Relaxed);
                }
            }
            for a in [
                &st.keyspace_hits,
                &st.keyspace_misses,
                &st.total_error_replies,
                &st.commands_processed,
                &st.connections_received,
                &st.net_input_bytes,
                &st.net_output_bytes,
                &st.rejected_connections,
                &ctx.srv.limits.query_disconnections,
                &ctx.srv.limits.output_disconnections,
            ] {
                a.store(0, Ordering::Relaxed);
            }
            ctx.srv.stats.errors.lock().clear();
            ctx.out.ok();
        }
        "REWRITE" if argv.len() == 2 => return Err(err("ERR The server is running without a config file")),
        "HELP" => {
            let lines = ["CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GET <pattern>", "SET <directive> <value>", "RESETSTAT", "HELP"];
            ctx.out.help(&lines);
        }
        _ => return Err(super::args::subcommand_error("config", argv)),
    }
    Ok(())
}
