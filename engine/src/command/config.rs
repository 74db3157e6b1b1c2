//! CONFIG GET / SET / RESETSTAT: the parameters a Redis client may read or change at run time.

use std::str::FromStr;
use std::sync::atomic::Ordering;

use super::args::{err, glob_match};
use super::{CmdResult, Ctx};
use crate::config::parse_size;
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

/// Stores a text parameter; false when there is no such parameter.
fn set_text(srv: &Server, name: &str, value: &str) -> bool {
    let mut params = srv.runtime.params.lock();
    match params.iter_mut().find(|(k, _)| k == name) {
        Some((_, v)) => {
            *v = value.to_string();
            true
        }
        None => false,
    }
}

fn set_param(srv: &Server, name: &str, value: &str) -> Result<(), String> {
    match name {
        "maxmemory" => {
            let n = parse_size(value).ok_or("argument must be a memory value")?;
            srv.runtime.maxmemory.store(n, Ordering::Relaxed);
        }
        "maxmemory-policy" => {
            let p = Policy::from_str(value).map_err(|_| "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction")?;
            *srv.runtime.policy.lock() = p;
            srv.keyspace.lfu.store(p.is_lfu(), Ordering::Relaxed);
        }
        "maxmemory-samples" => {
            let n: usize = value.parse().map_err(|_| "argument couldn't be parsed into an integer")?;
            if !(1..=64).contains(&n) {
                return Err("argument must be between 1 and 64 inclusive".into());
            }
            srv.runtime.maxmemory_samples.store(n, Ordering::Relaxed);
        }
        "port" | "bind" | "databases" | "enable-debug-command" => return Err("can't set immutable config".into()),
        "requirepass" => {
            // As in Redis, requirepass is the default user's password.
            let rules = if value.is_empty() { vec!["nopass".to_string()] } else { vec!["resetpass".to_string(), format!(">{value}")] };
            srv.acl.set_user("default", &rules)?;
            set_text(srv, name, value);
        }
        "slowlog-log-slower-than" | "slowlog-max-len" => {
            let n: i64 = value.parse().map_err(|_| "argument couldn't be parsed into an integer")?;
            if name == "slowlog-max-len" {
                if n < 0 {
                    return Err("argument must be between 0 and 9223372036854775807 inclusive".into());
                }
                srv.slowlog.max_len.store(n as usize, Ordering::Relaxed);
            } else {
                srv.slowlog.threshold_us.store(n, Ordering::Relaxed);
            }
            set_text(srv, name, value);
        }
        _ => {
            if !set_text(srv, name, value) {
                return Err("unknown".into());
            }
        }
    }
    Ok(())
}

pub fn config(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_uppercase();
    match sub.as_str() {
        "GET" if argv.len() >= 3 => {
            let params = all_params(ctx.srv);
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
            for (k, v) in &pairs {
                if let Err(reason) = set_param(ctx.srv, k, v) {
                    if reason == "unknown" {
                        return Err(err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{k}'")));
                    }
                    return Err(err(format!("ERR CONFIG SET failed (possibly related to argument '{k}') - {reason}")));
                }
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
            ] {
                a.store(0, Ordering::Relaxed);
            }
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
