//! Connection and server commands: PING, HELLO, AUTH, SELECT, FLUSH*, INFO, CLIENT, COMMAND,
//! MEMORY, DEBUG, TIME, SHUTDOWN…

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::args::{err, int, is, CmdError};
use super::table::{CommandSpec, COMMANDS};
use super::{txn, CmdResult, Ctx};
use crate::keyspace::NUM_DBS;
use crate::server::state::{now_us, ClientInfo, Server};

use terrace_commands::connection::{client_name, write_hello, Auth, Hello, HELLO_NOAUTH};
/// The Redis version we report, so clients' feature gates see a 7.0 server.
pub use terrace_commands::{REDIS_VERSION, TERRACE_VERSION};

pub fn ping(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() <= 2 && !ctx.resp3() && ctx.conn.subs.any() {
        super::pubsub::subscribed_ping(&mut ctx.out, argv);
        return Ok(());
    }
    match argv.len() {
        1 => ctx.out.simple("PONG"),
        2 => ctx.out.bulk(argv[1]),
        _ => return Err(CmdError::WrongArgs("ping")),
    }
    Ok(())
}

pub fn echo(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ctx.out.bulk(argv[1]);
    Ok(())
}

pub fn quit(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    ctx.out.ok();
    ctx.close = true;
    Ok(())
}

/// Authenticates the connection as `user` (AUTH, HELLO AUTH); a failure is logged in the
/// ACL log and answered with WRONGPASS.
pub fn authenticate(ctx: &mut Ctx, user: Option<&[u8]>, pass: &[u8]) -> Result<(), CmdError> {
    let acl = &ctx.srv.acl;
    let name = match user {
        Some(u) => String::from_utf8_lossy(u).into_owned(),
        None => {
            if acl.default_user().nopass {
                return Err(err(
                    "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ));
            }
            "default".to_string()
        }
    };
    match acl.authenticate(&name, pass) {
        Some(u) => {
            *ctx.conn.info.user.lock() = u.name.clone();
            ctx.conn.user = u;
            ctx.conn.acl_gen = acl.generation();
            ctx.conn.set_authenticated(true);
            Ok(())
        }
        None => {
            acl.log("auth", "toplevel", "AUTH".into(), name, client_line(ctx.srv, &ctx.conn.info));
            Err(err("WRONGPASS invalid username-password pair or user is disabled."))
        }
    }
}

pub fn auth(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let a = Auth::parse(argv).map_err(connection_error)?;
    authenticate(ctx, a.user, a.password)?;
    ctx.out.ok();
    Ok(())
}

fn connection_error(e: terrace_commands::connection::ConnectionError) -> CmdError {
    err(e.to_string())
}

pub fn hello(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let hello = Hello::parse(argv).map_err(connection_error)?;
    if let Some(a) = &hello.auth {
        authenticate(ctx, a.user, a.password)?;
    }
    if !ctx.conn.authenticated() && ctx.srv.acl.auth_required() {
        return Err(err(HELLO_NOAUTH));
    }
    if let Some(n) = hello.name {
        *ctx.conn.info.name.lock() = Some(n);
    }
    let proto = hello.protocol.unwrap_or(if ctx.conn.resp3 { 3 } else { 2 });
    ctx.conn.resp3 = proto == 3;
    ctx.out.resp3 = proto == 3;
    ctx.conn.info.resp.store(proto, Ordering::Relaxed);
    write_hello(&mut ctx.out, proto, ctx.conn.info.id);
    Ok(())
}

pub fn select(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let db = int(argv[1])?;
    if db < 0 || db >= NUM_DBS as i64 {
        return Err(err("ERR DB index is out of range"));
    }
    ctx.conn.db = ctx.conn.ns_base + db as usize;
    ctx.data.db = ctx.conn.db;
    ctx.conn.info.db.store(db as usize, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// TERRACE.NAMESPACE name [MAXMEMORY bytes] [OWN-MAXMEMORY bytes] [COMPRESSION codec]
/// [COMPRESSION-MODE mode] [COMPRESSION-MIN-SIZE bytes] [STORAGE-MODE mode] [TIER-POLICY
/// policy] [WAL engine|off] — moves the connection into a tenant's namespace (its own 16
/// databases), allocating it on first use, and sets the namespace's data limit (0: none;
/// writes past it get OOM, for this namespace only — a storage-backed one evicts its own keys
/// instead; OWN-MAXMEMORY is the limit the tenant chose itself, which only lowers the
/// operator's), its compression settings, storage mode, use of the PMem tier (`engine`:
/// the engine's `tier_policy`; `dram-only`; or a policy of its own) and whether its commands
/// are logged. The proxy sends it on every connection of a tenant, the console to every engine.
/// `default` is the namespace plain Redis clients use.
pub fn namespace(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if !argv.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    // A connection's channels are its namespace's: it leaves them before it moves.
    if ctx.conn.subs.any() {
        return Err(err("ERR TERRACE.NAMESPACE is not allowed while subscribed (UNSUBSCRIBE, PUNSUBSCRIBE and SUNSUBSCRIBE first)"));
    }
    // EXEC locks its namespace's shards only, so watched keys must be in it.
    if !ctx.conn.watched.is_empty() {
        return Err(err("ERR TERRACE.NAMESPACE is not allowed while keys are watched (UNWATCH first)"));
    }
    let mut limits = Vec::new();
    let mut storage_mode = None;
    let mut tier_policy = None;
    let mut wal_off = None;
    let mut compression: Vec<(&str, String)> = Vec::new();
    for kv in argv[2..].chunks(2) {
        let value = String::from_utf8_lossy(kv[1]).into_owned();
        if is(kv[0], "MAXMEMORY") || is(kv[0], "OWN-MAXMEMORY") {
            let bytes = crate::config::parse_size(&value).ok_or_else(|| err("ERR MAXMEMORY must be a size (examples: 0, 100mb, 1gb)"))?;
            limits.push((bytes, is(kv[0], "OWN-MAXMEMORY")));
        } else if is(kv[0], "COMPRESSION") {
            compression.push(("compression", value));
        } else if is(kv[0], "COMPRESSION-MODE") {
            compression.push(("compression_mode", value));
        } else if is(kv[0], "COMPRESSION-MIN-SIZE") {
            compression.push(("compression_min_size", value));
        } else if is(kv[0], "STORAGE-MODE") {
            let mode: crate::storage::tier::Mode = value.parse().map_err(|why| err(format!("ERR STORAGE-MODE: {why}")))?;
            if ctx.srv.storage_tier().is_none() && mode != crate::storage::tier::Mode::Cache {
                return Err(err("ERR this engine has no storage tier (start it with `storage = lsm` or `postgres`)"));
            }
            storage_mode = Some(mode);
        } else if is(kv[0], "TIER-POLICY") {
            let p: crate::tier::TenantPolicy = value.parse().map_err(|why| err(format!("ERR TIER-POLICY: {why}")))?;
            if ctx.data.ks.tier().is_none() && p != crate::tier::TenantPolicy::Engine {
                return Err(err("ERR this engine has no PMem tier (start it with `pmem_path`)"));
            }
            tier_policy = Some(p);
        } else if is(kv[0], "WAL") {
            wal_off = Some(match value.to_ascii_lowercase().as_str() {
                "engine" | "on" => false,
                "off" => true,
                _ => return Err(err("ERR WAL must be engine or off")),
            });
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let name = std::str::from_utf8(argv[1])
        .ok()
        .filter(|n| crate::server::namespaces::valid_name(n))
        .ok_or_else(|| err("ERR namespace names are 1-64 characters of letters, digits, '_' and '-'"))?;
    let index = {
        let mut names = ctx.srv.namespaces.lock();
        let key = if name == "default" { "" } else { name };
        let free = crate::server::namespaces::first_free(&names);
        match names.iter().position(|n| n == key) {
            Some(i) => i,
            None if ctx.conn.replay_now.is_some() && ctx.srv.wal().is_some() => {
                // The WAL's record of a namespace dropped since: the list, recorded before
                // every use, is already the newest; the records after this one carry their
                // own namespace numbers.
                ctx.out.ok();
                return Ok(());
            }
            None if (free + 1) * NUM_DBS <= ctx.data.ks.dbs() => {
                // Namespace numbers are given in order of first use, a dropped one's number
                // to the next new tenant; the list is recorded durably (under the names lock)
                // before the number is used, so that replayed records and stored keys land in
                // the same tenants after a restart.
                let mut next = names.clone();
                match next.get_mut(free) {
                    Some(place) => *place = key.to_string(),
                    None => next.push(key.to_string()),
                }
                if ctx.conn.replay_now.is_none() && (ctx.srv.wal().is_some() || ctx.srv.storage_tier().is_some()) {
                    crate::server::namespaces::save(&ctx.srv.config.data_dir, &next).map_err(|e| err(format!("ERR cannot record the new namespace: {e}")))?;
                }
                *names = next;
                ctx.srv.attach_tenant(free, key);
                if let (Some(wal), None) = (ctx.srv.wal(), ctx.conn.replay_now) {
                    wal.append_recorded(ctx.data.now, free * NUM_DBS, free * NUM_DBS, &[b"TERRACE.NAMESPACE", name.as_bytes()]);
                }
                free
            }
            None => return Err(err(format!("ERR this engine holds at most {} namespaces (config `namespaces`)", ctx.data.ks.dbs() / NUM_DBS))),
        }
    };
    if (index + 1) * NUM_DBS > ctx.data.ks.dbs() {
        // Named in a snapshot taken with a larger `namespaces` setting.
        return Err(err(format!("ERR namespace '{name}' is beyond this engine's `namespaces` setting")));
    }
    for (bytes, own) in limits {
        ctx.data.ks.set_namespace_limit(index, bytes, own);
    }
    if let (Some(mode), Some(tier)) = (storage_mode, ctx.srv.storage_tier()) {
        tier.set_mode(index, mode);
    }
    if let (Some(p), Some(tier)) = (tier_policy, ctx.data.ks.tier()) {
        tier.set_tenant_policy(index, p);
    }
    if let (Some(off), Some(flag)) = (wal_off, ctx.srv.wal_off.get(index)) {
        flag.store(off, Ordering::Relaxed);
    }
    if !compression.is_empty() {
        let t = ctx.data.ks.compression(index);
        let mut s = t.settings();
        for (k, v) in &compression {
            s.set(k, v).map_err(|e| err(format!("ERR {e}")))?;
        }
        t.configure(s);
    }
    let logical = ctx.conn.db - ctx.conn.ns_base;
    ctx.conn.ns_base = index * NUM_DBS;
    ctx.conn.info.namespace.store(index, Ordering::Relaxed);
    ctx.conn.db = ctx.conn.ns_base + logical;
    ctx.data.db = ctx.conn.db;
    ctx.out.ok();
    Ok(())
}

/// TERRACE.NAMESPACES — the names of the tenants' namespaces this engine holds, in the order
/// of their numbers (the console drops those it no longer has a tenant for).
pub fn namespaces(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let names: Vec<String> = ctx.srv.namespaces.lock().iter().skip(1).filter(|n| crate::server::namespaces::is_live(n)).cloned().collect();
    ctx.out.array_len(names.len());
    for n in &names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

/// TERRACE.DROPNAMESPACE name — deletes a tenant's namespace (the console's tenant delete):
/// its 16 databases are emptied, its rows deleted from this engine's storage, its clients
/// disconnected, every setting and counter of it put back to the engine's defaults, and its
/// number left for the next new tenant. Answers 1, or 0 if there was no such namespace.
/// Logged in the WAL with the namespace's number (a replay drops what was logged before it,
/// whatever tenant took the number after), and sent to replicas by name.
pub fn drop_namespace(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    use crate::server::namespaces;
    let name = std::str::from_utf8(argv[1])
        .ok()
        .filter(|n| namespaces::valid_name(n))
        .ok_or_else(|| err("ERR namespace names are 1-64 characters of letters, digits, '_' and '-'"))?;
    if name == "default" {
        return Err(err("ERR the default namespace cannot be dropped (FLUSHALL empties it)"));
    }
    let replaying = ctx.conn.replay_now.is_some();
    let index = if replaying {
        // The record's namespace number; the list is already the newest (see above).
        ctx.conn.ns_base / NUM_DBS
    } else {
        match ctx.srv.tenant_namespace(name) {
            Some(i) => i,
            None => {
                ctx.out.int(0);
                return Ok(());
            }
        }
    };
    if index == 0 || (index + 1) * NUM_DBS > ctx.data.ks.dbs() {
        ctx.out.int(0);
        return Ok(());
    }
    if !replaying && ctx.conn.ns_base == index * NUM_DBS {
        return Err(err("ERR cannot drop the namespace this connection is in (TERRACE.NAMESPACE default first)"));
    }
    for db in index * NUM_DBS..(index + 1) * NUM_DBS {
        flush_db(ctx, db);
    }
    if !replaying {
        ctx.srv
            .wipe_stored_tenant(index, name)
            .map_err(|e| err(format!("ERR the tenant's keys are gone from memory but not from storage: {e} (drop it again)")))?;
    }
    ctx.srv.reset_namespace(index);
    if !replaying {
        let mut names = ctx.srv.namespaces.lock();
        if names.get(index).map(String::as_str) != Some(name) {
            return Err(err(format!("ERR namespace '{name}' changed while it was dropped")));
        }
        let mut next = names.clone();
        next[index] = namespaces::DROPPED.to_string();
        if ctx.srv.wal().is_some() || ctx.srv.storage_tier().is_some() {
            namespaces::save(&ctx.srv.config.data_dir, &next).map_err(|e| err(format!("ERR cannot record the dropped namespace: {e}")))?;
        }
        *names = next;
        // Logged under the names lock: a tenant created next takes this number, and its
        // records must follow the drop's in the log.
        if let Some(wal) = ctx.srv.wal() {
            wal.append_recorded(ctx.data.now, index * NUM_DBS, index * NUM_DBS, argv);
        }
        // Replicated after it (the stream names namespaces under its own lock, which ranks
        // below the names': `lock_order`). Replicas drop by name, so a tenant created in
        // between, by name too, is no matter; this namespace's writes wait for our locks.
        drop(names);
        let ns_db = index * NUM_DBS;
        ctx.srv.replicate(|stream, carry| {
            // (Terrace's stream only: a Redis replica holds no tenant.)
            if carry(ns_db) != crate::replication::Carry::Nothing {
                stream.command(0, argv);
            }
        });
        let killed = ctx.srv.kill_clients_in(index);
        tracing::info!(tenant = name, namespace = index, clients = killed, "dropped a namespace");
        ctx.srv.snapshot.changes.fetch_add(1, Ordering::Relaxed);
    }
    crate::alloc::purge();
    if ctx.srv.tracking.any() {
        ctx.srv.tracking.invalidate_all(&ctx.srv.clients);
    }
    ctx.out.int(1);
    Ok(())
}

pub fn swapdb(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let a = int(argv[1]).map_err(|_| err("ERR invalid first DB index"))?;
    let b = int(argv[2]).map_err(|_| err("ERR invalid second DB index"))?;
    if a < 0 || b < 0 || a >= NUM_DBS as i64 || b >= NUM_DBS as i64 {
        return Err(err("ERR DB index is out of range"));
    }
    let (a, b) = (a + ctx.conn.ns_base as i64, b + ctx.conn.ns_base as i64);
    if a != b {
        let ks = ctx.data.ks;
        let ids_a: Vec<u32> = ks.db_shard_ids(a as usize).collect();
        let ids_b: Vec<u32> = ks.db_shard_ids(b as usize).collect();
        for (ia, ib) in ids_a.into_iter().zip(ids_b) {
            let (sa, sb) = ctx.data.guards.pair(ia, ib);
            sa.swap_data(sb);
        }
        // Clients blocked on either database may now find their keys (or, in XREADGROUP,
        // find them gone).
        for db in [a as usize, b as usize] {
            ctx.data.fx.ready.extend(ctx.srv.blocking.deletion_keys(db..db + 1));
        }
        if ctx.srv.blocking.any_waiting() {
            for db in [a as usize, b as usize] {
                let ids: Vec<u32> = ks.db_shard_ids(db).collect();
                for id in ids {
                    let keys: Vec<Vec<u8>> = ctx.data.guards.shard(id).iter().map(|e| e.key().to_vec()).collect();
                    ctx.data.fx.ready.extend(keys.into_iter().map(|k| (db, k)));
                }
            }
        }
    }
    ctx.out.ok();
    Ok(())
}

fn flush_mode(argv: &[&[u8]]) -> Result<(), CmdError> {
    match argv.get(1) {
        None => Ok(()),
        Some(a) if argv.len() == 2 && (is(a, "ASYNC") || is(a, "SYNC")) => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

fn flush_db(ctx: &mut Ctx, db: usize) {
    // A client blocked in XREADGROUP hears its stream is gone.
    ctx.data.fx.ready.extend(ctx.srv.blocking.deletion_keys(db..db + 1));
    if !ctx.data.ks.db_opened(db) {
        return; // (never used: empty, and not held)
    }
    let ids: Vec<u32> = ctx.data.ks.db_shard_ids(db).collect();
    for id in ids {
        let table = ctx.data.guards.shard(id).clear();
        drop(table);
    }
}

pub fn flushdb(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    flush_mode(argv)?;
    flush_db(ctx, ctx.data.db);
    crate::alloc::purge();
    if ctx.srv.tracking.any() {
        ctx.srv.tracking.invalidate_all(&ctx.srv.clients);
    }
    ctx.out.ok();
    Ok(())
}

pub fn flushall(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    flush_mode(argv)?;
    // Every database of the connection's namespace; other tenants' stay.
    for db in ctx.conn.ns_base..ctx.conn.ns_base + NUM_DBS {
        flush_db(ctx, db);
    }
    crate::alloc::purge();
    if ctx.srv.tracking.any() {
        ctx.srv.tracking.invalidate_all(&ctx.srv.clients);
    }
    ctx.out.ok();
    Ok(())
}

pub fn time(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let us = now_us();
    ctx.out.array_len(2);
    ctx.out.bulk_int(us / 1_000_000);
    ctx.out.bulk_int(us % 1_000_000);
    Ok(())
}

pub fn lastsave(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    ctx.out.int(ctx.srv.snapshot.last_save.load(Ordering::Relaxed));
    Ok(())
}

/// SAVE: writes `dump.rdb` now, from the shards this command holds (all of them).
pub fn save(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.srv.snapshot.in_progress.load(Ordering::Acquire) {
        return Err(err("ERR Background save already in progress"));
    }
    crate::snapshot::save_with_guards(ctx.srv, &mut ctx.data.guards).map_err(|e| err(format!("ERR {e}")))?;
    ctx.out.ok();
    Ok(())
}

/// BGSAVE [SCHEDULE]: writes `dump.rdb` from a background thread.
pub fn bgsave(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let schedule = match argv.get(1) {
        None => false,
        Some(a) if argv.len() == 2 && is(a, "SCHEDULE") => true,
        _ => return Err(CmdError::Syntax),
    };
    if crate::snapshot::start_background(ctx.srv) {
        ctx.out.simple("Background saving started");
    } else if schedule {
        ctx.srv.snapshot.scheduled.store(true, Ordering::Release);
        ctx.out.simple("Background saving scheduled");
    } else {
        return Err(err("ERR Background save already in progress"));
    }
    Ok(())
}

pub fn role(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let repl = &ctx.srv.replication;
    match (repl.master(), repl.link()) {
        (Some(master), Some(link)) => {
            ctx.out.array_len(5);
            ctx.out.bulk(b"slave");
            ctx.out.bulk(master.host.as_bytes());
            ctx.out.int(master.port as i64);
            let state: &[u8] = match link.state {
                crate::replication::LinkState::Connecting => b"connecting",
                crate::replication::LinkState::Sync => b"sync",
                crate::replication::LinkState::Connected => b"connected",
            };
            ctx.out.bulk(state);
            ctx.out.int(link.offset);
        }
        _ => {
            let replicas = repl.replicas();
            ctx.out.array_len(3);
            ctx.out.bulk(b"master");
            ctx.out.int(repl.offset() as i64);
            ctx.out.array_len(replicas.len());
            for r in &replicas {
                ctx.out.array_len(3);
                ctx.out.bulk(r.ip.as_bytes());
                ctx.out.bulk(r.port.to_string().as_bytes());
                ctx.out.bulk(r.acked.to_string().as_bytes());
            }
        }
    }
    Ok(())
}

pub fn reset(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    txn::end_multi(ctx.conn);
    txn::unwatch_all(ctx);
    // Database 0 of the connection's namespace (it stays in its tenant's keyspace).
    ctx.conn.db = ctx.conn.ns_base;
    ctx.data.db = ctx.conn.db;
    ctx.conn.info.db.store(0, Ordering::Relaxed);
    ctx.conn.resp3 = false;
    ctx.out.resp3 = false;
    ctx.conn.info.resp.store(2, Ordering::Relaxed);
    *ctx.conn.info.name.lock() = None;
    ctx.conn.info.no_evict.store(false, Ordering::Relaxed);
    super::pubsub::unsubscribe_all(ctx.srv, ctx.conn);
    ctx.srv.monitors.remove(ctx.conn.info.id);
    ctx.srv.tracking.disable(ctx.conn.info.id);
    ctx.conn.tracking = None;
    ctx.conn.caching = None;
    ctx.conn.monitor = false;
    ctx.conn.info.monitor.store(false, Ordering::Relaxed);
    ctx.conn.user = ctx.srv.acl.default_user();
    ctx.conn.acl_gen = ctx.srv.acl.generation();
    *ctx.conn.info.user.lock() = "default".to_string();
    ctx.conn.set_authenticated(!ctx.srv.acl.auth_required());
    ctx.out.simple("RESET");
    Ok(())
}

/// CLUSTER, READONLY, READWRITE, ASKING: an engine is a standalone server (the proxy spreads
/// keys over engines), so these answer as a Redis with cluster support disabled — except
/// COUNTKEYSINSLOT and GETKEYSINSLOT, which the proxies' cluster view forwards to the
/// engine owning the slot.
pub fn cluster(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[0], "CLUSTER") {
        if terrace_commands::subcommands::sub_arity_ok("cluster", argv[1], argv.len()) != Some(true) {
            return Err(super::args::subcommand_error("cluster", argv));
        }
        match String::from_utf8_lossy(argv[1]).to_ascii_lowercase().as_str() {
            "countkeysinslot" => return keys_in_slot(ctx, argv[2], None),
            "getkeysinslot" => {
                let count = std::str::from_utf8(argv[3]).ok().and_then(|s| s.parse::<i64>().ok()).filter(|n| *n >= 0);
                let Some(count) = count else { return Err(err("ERR Invalid slot or number of keys")) };
                return keys_in_slot(ctx, argv[2], Some(count as usize));
            }
            _ => {}
        }
    }
    Err(err("ERR This instance has cluster support disabled"))
}

/// How long CLUSTER COUNTKEYSINSLOT waits for each shard another command holds.
const SLOT_VISIT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The keys of the current database in a Redis Cluster hash slot: how many (`limit` None) or
/// up to `limit` of their names. The engine keeps no per-slot index (its shards are split by
/// its own hash), so this reads every key of the database, one shard at a time.
fn keys_in_slot(ctx: &mut Ctx, slot: &[u8], limit: Option<usize>) -> CmdResult {
    let slot = std::str::from_utf8(slot).ok().and_then(|s| s.parse::<i64>().ok()).filter(|s| (0..terrace_commands::slots::SLOTS as i64).contains(s));
    let Some(slot) = slot else {
        return Err(err(if limit.is_some() { "ERR Invalid slot or number of keys" } else { "ERR Invalid or out of range slot" }));
    };
    let slot = slot as u16;
    let now = ctx.data.now;
    let mut count = 0usize;
    let mut names: Vec<Vec<u8>> = Vec::new();
    let ids: Vec<u32> = ctx.data.ks.db_shard_ids(ctx.data.db).collect();
    for id in ids {
        let want = limit.map(|l| l.saturating_sub(names.len()));
        if want == Some(0) {
            break;
        }
        let visited = ctx.data.visit(id, SLOT_VISIT_WAIT, |shard| {
            let mut n = 0;
            let mut found = Vec::new();
            for e in shard.iter() {
                if crate::keyspace::is_expired(e.expire(), now) || terrace_commands::slots::key_slot(e.key()) != slot {
                    continue;
                }
                n += 1;
                if want.is_some_and(|w| found.len() < w) {
                    found.push(e.key().to_vec());
                }
            }
            (n, found)
        });
        match visited {
            Ok(Some((n, found))) => {
                count += n;
                names.extend(found);
            }
            Ok(None) => return Err(err("ERR a shard stayed busy; try again")),
            Err(_) => return Err(err("ERR internal error: the command's shards were not declared")),
        }
    }
    match limit {
        None => ctx.out.int(count as i64),
        Some(_) => {
            ctx.out.array_len(names.len());
            for k in &names {
                ctx.out.bulk(k);
            }
        }
    }
    Ok(())
}

/// CLIENT GETREDIR: -1 when not tracking, 0 without a redirect, else the target's id.
fn redirect_of(ctx: &Ctx) -> i64 {
    match &ctx.conn.tracking {
        None => -1,
        Some(t) => t.redirect.map(|r| r as i64).unwrap_or(0),
    }
}

fn tracking_info(ctx: &mut Ctx) {
    let mut flags: Vec<&str> = Vec::new();
    let redirect = redirect_of(ctx);
    match &ctx.conn.tracking {
        None => flags.push("off"),
        Some(t) => {
            flags.push("on");
            for (on, name) in [(t.bcast, "bcast"), (t.optin, "optin"), (t.optout, "optout")] {
                if on {
                    flags.push(name);
                }
            }
            match ctx.conn.caching {
                Some(true) => flags.push("caching-yes"),
                Some(false) => flags.push("caching-no"),
                None => {}
            }
            if t.noloop {
                flags.push("noloop");
            }
            if t.redirect.is_some_and(|r| !ctx.srv.clients.lock().contains_key(&r)) {
                flags.push("broken_redirect");
            }
        }
    }
    let prefixes: Vec<Vec<u8>> = ctx.conn.tracking.as_ref().map(|t| t.prefixes.clone()).unwrap_or_default();
    ctx.out.map_len(3);
    ctx.out.bulk(b"flags");
    ctx.out.set_len(flags.len());
    for f in flags {
        ctx.out.bulk(f.as_bytes());
    }
    ctx.out.bulk(b"redirect");
    ctx.out.int(redirect);
    ctx.out.bulk(b"prefixes");
    ctx.out.array_len(prefixes.len());
    for p in prefixes {
        ctx.out.bulk(&p);
    }
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP].
fn client_tracking(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let on = super::args::on_off(argv[2])?;
    let mut opts = crate::tracking::Options::default();
    let mut i = 3;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        if is(argv[i], "REDIRECT") && more > 0 {
            i += 1;
            let id = int(argv[i])?;
            opts.redirect = Some(id as u64);
        } else if is(argv[i], "BCAST") {
            opts.bcast = true;
        } else if is(argv[i], "OPTIN") {
            opts.optin = true;
        } else if is(argv[i], "OPTOUT") {
            opts.optout = true;
        } else if is(argv[i], "NOLOOP") {
            opts.noloop = true;
        } else if is(argv[i], "PREFIX") && more > 0 {
            i += 1;
            opts.prefixes.push(argv[i].to_vec());
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if !on {
        ctx.srv.tracking.disable(ctx.conn.info.id);
        ctx.conn.tracking = None;
        ctx.conn.caching = None;
        ctx.out.ok();
        return Ok(());
    }
    if !opts.prefixes.is_empty() && !opts.bcast {
        return Err(err("ERR PREFIX option requires BCAST mode to be enabled"));
    }
    if let Some(old) = &ctx.conn.tracking {
        if old.bcast != opts.bcast {
            return Err(err(
                "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        // Only naming the other mode is refused; naming neither drops the old one (Redis).
        if (opts.optin && old.optout) || (opts.optout && old.optin) {
            return Err(err(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        // Prefixes accumulate across calls, as in Redis; a new one may not overlap an old one.
        for p in &opts.prefixes {
            if let Some(o) = old.prefixes.iter().find(|o| *o != p && (o.starts_with(p) || p.starts_with(o))) {
                return Err(err(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(o)
                )));
            }
        }
        let mut all = old.prefixes.clone();
        all.append(&mut opts.prefixes);
        opts.prefixes = all;
        opts.prefixes.dedup();
    }
    if opts.optin && opts.optout {
        return Err(err("ERR You can't specify both OPTIN mode and OPTOUT mode"));
    }
    if opts.bcast && (opts.optin || opts.optout) {
        return Err(err("ERR OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if let Some((a, b)) = crate::tracking::prefixes_overlap(&opts.prefixes) {
        return Err(err(format!(
            "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        )));
    }
    let target = match opts.redirect {
        Some(id) => match ctx.srv.clients.lock().get(&id).cloned() {
            Some(t) => Some(t),
            None => return Err(err("ERR The client ID you want redirect to does not exist")),
        },
        None => None,
    };
    ctx.srv.tracking.enable(&ctx.conn.info, opts.clone(), target.as_ref());
    ctx.conn.tracking = Some(opts);
    ctx.out.ok();
    Ok(())
}

/// MONITOR: from now on the connection receives every command the server runs.
pub fn monitor(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.in_exec {
        return Err(err("ERR MONITOR isn't allowed for DENY BLOCKING client"));
    }
    if !ctx.conn.monitor {
        ctx.conn.monitor = true;
        ctx.conn.info.monitor.store(true, Ordering::Relaxed);
        ctx.srv.monitors.add(&ctx.conn.info);
    }
    ctx.out.ok();
    Ok(())
}

/// MODULE: an engine runs no Redis modules (its extensions are built in), so the list is
/// empty and loading is refused.
pub fn module(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
    match (sub.as_str(), argv.len()) {
        ("list", 2) => ctx.out.array_len(0),
        ("help", 2) => ctx.out.help(&[
            "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
            "HELP",
            "    Prints this help.",
        ]),
        ("load" | "loadex", n) if n >= 3 => return Err(err("ERR MODULE command not allowed: Terrace engines do not load Redis modules")),
        ("unload", 3) => return Err(err("ERR Error unloading module: no such module with that name")),
        _ => return Err(super::args::subcommand_error("module", argv)),
    }
    Ok(())
}

/// REPLICAOF / SLAVEOF host port: follow that master (`server::follower` runs the link;
/// the keyspace is replaced by the master's at the sync); NO ONE: be a master again, keeping
/// the data.
pub fn replicaof(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[1], "NO") && is(argv[2], "ONE") {
        ctx.srv.replication.follow(None);
        if ctx.srv.replication.feeding() {
            // Promoted: the stream it mirrored goes on as its own, with the keys it expires.
            ctx.srv.keyspace.start_feeding();
        }
        ctx.out.ok();
        return Ok(());
    }
    let Some(port) = int(argv[2]).ok().filter(|p| (1..=65535).contains(p)) else {
        return Err(err("ERR Invalid master port"));
    };
    let host = String::from_utf8_lossy(argv[1]).into_owned();
    let master = crate::replication::Master { host, port: port as u16 };
    // A replica takes no client's write; whoever promotes it later gives it its term and
    // lease first (the coordinator), or runs it without one (an operator's REPLICAOF NO ONE):
    // a lease left from its time as a primary must not hold its writes back then.
    ctx.srv.replication.set_lease(None);
    if ctx.srv.replication.follow(Some(master)) {
        ctx.out.ok();
    } else {
        ctx.out.simple("OK Already connected to specified master");
    }
    Ok(())
}

/// WAIT numreplicas timeout: blocks until that many replicas acknowledged the client's
/// writes so far (its `repl_offsets`), or the timeout (0: none) passes; answers how many did.
pub fn wait(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let target = ctx.conn.repl_offsets;
    wait_for(ctx, argv, target)
}

/// `TERRACE.PROVE nonce`: proof that this engine holds the password it was started with
/// (`requirepass_file`, under `terrace up` its own, derived from its address), without
/// giving it: the console checks it before it authenticates (`terrace_commands::credentials`).
pub fn terrace_prove(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    use terrace_commands::credentials::{proof, NONCE_LENGTHS};
    let nonce = argv[1];
    if !NONCE_LENGTHS.contains(&nonce.len()) {
        return Err(err(format!("ERR the nonce must be {} to {} bytes", NONCE_LENGTHS.start(), NONCE_LENGTHS.end())));
    }
    let Some(password) = ctx.srv.config.requirepass.as_deref() else {
        return Err(err("ERR this engine was started without a password (requirepass_file): it has nothing to prove"));
    };
    ctx.out.bulk(proof(password, nonce).as_bytes());
    Ok(())
}

/// TERRACE.EPOCH [group epoch [LEASE until]]: the primary term this engine writes in —
/// without arguments, [group, epoch] (nil before the coordinator gave one). Given one (the
/// coordinator does before it promotes a replica, and to every primary that lacks its
/// range's), the storage tier's fence for `group` is raised to `epoch` first, so a former
/// primary of the range can no longer write; an epoch older than storage's or this
/// engine's is refused. `LEASE until` (unix ms on the coordinator's clock; 0 revokes it):
/// clients' writes are taken until then and none after, nor is a write acknowledged after
/// it — the coordinator renews it while it sees this engine, and promotes a replica only
/// once the lease it last gave has run out, so a primary that was paused or cut off never
/// takes or acknowledges a write its successor will not have.
pub fn terrace_epoch(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() == 1 {
        match ctx.srv.term.lock().clone() {
            Some(t) => {
                ctx.out.array_len(2);
                ctx.out.bulk(t.group.as_bytes());
                ctx.out.int(t.epoch as i64);
            }
            None => ctx.out.null_array(),
        }
        return Ok(());
    }
    let lease = match argv.len() {
        3 => None,
        5 if argv[3].eq_ignore_ascii_case(b"lease") => Some(
            std::str::from_utf8(argv[4])
                .ok()
                .and_then(|u| u.parse::<i64>().ok())
                .filter(|u| *u >= 0)
                .ok_or_else(|| err("ERR the lease must end at a unix time in ms"))?,
        ),
        5 => return Err(CmdError::Syntax),
        _ => return Err(err("ERR wrong number of arguments for 'terrace.epoch' command")),
    };
    let group = std::str::from_utf8(argv[1]).ok().filter(|g| !g.is_empty()).ok_or_else(|| err("ERR the group must be a non-empty UTF-8 name"))?;
    let epoch = std::str::from_utf8(argv[2]).ok().and_then(|e| e.parse::<u64>().ok()).ok_or_else(|| err("ERR the epoch must be a non-negative integer"))?;
    let term = crate::storage::Term { group: group.to_string(), epoch };
    if let Some(now) = ctx.srv.term.lock().clone() {
        if now == term {
            // A renewal — unless the lease was revoked (LEASE 0, as the coordinator replaces
            // this primary): that is final for the term, so a renewal sent before the
            // revocation and arriving after it cannot revive it.
            if ctx.srv.replication.lease() == Some(0) && lease != Some(0) {
                return Err(err("ERR this term's lease was revoked: only a new term can be given"));
            }
            ctx.srv.replication.set_lease(lease);
            ctx.out.ok();
            return Ok(());
        }
        if now.group == term.group && now.epoch > term.epoch {
            return Err(err(format!("ERR epoch {epoch} is older than this engine's ({})", now.epoch)));
        }
    }
    if let Some(tier) = ctx.srv.storage_tier() {
        // On a thread of its own: a reactor cannot wait on another runtime in place.
        let storage = &tier.storage;
        let raised = std::thread::scope(|s| s.spawn(|| storage.block_on(storage.begin_term(term.clone()))).join());
        match raised {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(err(format!("ERR {e}"))),
            Err(_) => return Err(err("ERR raising the storage fence failed")),
        }
    }
    tracing::info!(group = %term.group, epoch = term.epoch, lease = ?lease, "primary term taken");
    *ctx.srv.term.lock() = Some(term);
    ctx.srv.replication.set_lease(lease);
    ctx.out.ok();
    Ok(())
}

/// TERRACE.WAIT numreplicas timeout: as WAIT, for every write the engine took so far — the
/// proxy's WAIT, whose client wrote through connections other clients share.
pub fn terrace_wait(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let target = ctx.srv.replication.written_offsets();
    wait_for(ctx, argv, target)
}

fn wait_for(ctx: &mut Ctx, argv: &[&[u8]], target: crate::replication::Offsets) -> CmdResult {
    let numreplicas = int(argv[1])?;
    let timeout = int(argv[2]).map_err(|_| err("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(err("ERR timeout is negative"));
    }
    let repl = &ctx.srv.replication;
    if repl.is_replica() {
        return Err(err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let acked = repl.acked_at_least(target);
    if acked as i64 >= numreplicas || ctx.in_exec || ctx.conn.multi.is_some() {
        ctx.out.int(acked as i64);
        return Ok(());
    }
    repl.wait_for_acks(ctx.conn.block_notify.clone());
    let t = (timeout > 0).then(|| std::time::Duration::from_millis(timeout as u64));
    super::list::block_or_timeout(ctx, Vec::new(), t, super::TimeoutReply::Replicas(target));
    Ok(())
}

/// REPLCONF: what a replica says of itself before PSYNC (listening-port, ip-address, capa,
/// rdb-only…), each answered OK. ACK and GETACK belong to a replication link: a client's are
/// ignored without a reply, as Redis does.
pub fn replconf(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    for pair in argv[1..].chunks(2) {
        let (option, value) = (pair[0], pair[1]);
        if is(option, "ACK") || is(option, "GETACK") {
            return Ok(());
        }
        if is(option, "listening-port") {
            ctx.conn.replica_hello.port =
                int(value).ok().and_then(|p| u16::try_from(p).ok()).ok_or_else(|| err("ERR value is not an integer or out of range"))?;
        } else if is(option, "capa") {
            ctx.conn.replica_hello.eof |= is(value, "eof");
            ctx.conn.replica_hello.terrace |= is(value, "terrace");
        } else if !(is(option, "ip-address") || is(option, "rdb-only") || is(option, "rdb-filter-only")) {
            return Err(err(format!("ERR Unrecognized REPLCONF option: {}", String::from_utf8_lossy(option))));
        }
    }
    if argv[1..].chunks(2).any(|p| is(p[0], "capa") && is(p[1], "terrace")) {
        // An engine replica learns that it gets the stream of every namespace.
        ctx.out.simple("OK terrace");
    } else {
        ctx.out.ok();
    }
    Ok(())
}

/// PSYNC replid offset / SYNC: this connection becomes the link of a replica; the connection
/// hands its socket to `server::replicas`, which answers (+CONTINUE or +FULLRESYNC and the
/// snapshot) and streams the writes from then on.
pub fn psync(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.srv.replication.is_replica() {
        return Err(err("ERR this engine is a replica: attach replicas to its master (chained replication is not supported)"));
    }
    let mut request = ctx.conn.replica_hello.clone();
    if is(argv[0], "SYNC") {
        request.replid = "?".into();
        request.offset = -1;
        request.old_sync = true;
    } else {
        request.replid = String::from_utf8_lossy(argv[1]).into_owned();
        request.offset = int(argv[2])?;
    }
    ctx.conn.psync = Some(request);
    ctx.close = true;
    Ok(())
}

pub fn shutdown(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    for a in &argv[1..] {
        if !(is(a, "NOSAVE") || is(a, "SAVE") || is(a, "NOW") || is(a, "FORCE")) {
            if is(a, "ABORT") {
                return Err(err("ERR No shutdown in progress."));
            }
            return Err(CmdError::Syntax);
        }
    }
    tracing::info!("SHUTDOWN requested by client {}", ctx.conn.info.id);
    let asked = |word: &str| argv[1..].iter().any(|a| is(a, word));
    let save = if asked("NOSAVE") {
        crate::server::state::ShutdownSave::No
    } else if asked("SAVE") {
        crate::server::state::ShutdownSave::Yes
    } else {
        crate::server::state::ShutdownSave::IfSavePoints
    };
    ctx.srv.shutdown_save.store(save as u8, Ordering::Relaxed);
    ctx.srv.request_shutdown();
    ctx.close = true;
    Ok(())
}

/// One CLIENT LIST line.
pub fn client_line(srv: &Server, c: &ClientInfo) -> String {
    let name = c.name.lock().clone().unwrap_or_default();
    let age = c.created.elapsed().as_secs();
    let since_start = srv.started.elapsed().as_millis() as u64;
    let idle = since_start.saturating_sub(c.last_active_ms.load(Ordering::Relaxed)) / 1000;
    let last = c.last_cmd.load(Ordering::Relaxed);
    let cmd = if last == usize::MAX { "NULL".into() } else { terrace_commands::stat_index::name(last) };
    let mut flags = String::new();
    if c.in_multi.load(Ordering::Relaxed) {
        flags.push('x');
    }
    if c.blocked.load(Ordering::Relaxed) {
        flags.push('b');
    }
    if c.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if c.monitor.load(Ordering::Relaxed) {
        flags.push('O');
    }
    let (sub, psub, ssub) = (c.sub.load(Ordering::Relaxed), c.psub.load(Ordering::Relaxed), c.ssub.load(Ordering::Relaxed));
    if sub + psub + ssub > 0 {
        flags.push('P');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let (qbuf, omem) = (c.qbuf.load(Ordering::Relaxed), c.output_pending());
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user={} redir=-1 resp={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd.max(0),
        name,
        age,
        idle,
        flags,
        c.db.load(Ordering::Relaxed),
        sub,
        psub,
        ssub,
        if c.in_multi.load(Ordering::Relaxed) { 0 } else { -1 },
        qbuf,
        omem,
        qbuf + omem + 16384,
        cmd,
        c.user.lock(),
        c.resp.load(Ordering::Relaxed)
    )
}

/// The connected clients by id. A killed one is gone, as in Redis, even while its
/// connection's task has yet to run and leave the registry.
fn clients_sorted(srv: &Server) -> Vec<Arc<ClientInfo>> {
    let mut v: Vec<Arc<ClientInfo>> = srv.clients.lock().values().filter(|c| !c.killed.load(Ordering::Relaxed)).cloned().collect();
    v.sort_by_key(|c| c.id);
    v
}

pub fn client(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_uppercase();
    let wrong = || super::args::subcommand_error("client", argv);
    match (sub.as_str(), argv.len()) {
        ("ID", 2) => ctx.out.int(ctx.conn.info.id as i64),
        ("GETNAME", 2) => match ctx.conn.info.name.lock().clone() {
            Some(n) => ctx.out.bulk(n.as_bytes()),
            None => ctx.out.null(),
        },
        ("SETNAME", 3) => {
            let n = client_name(argv[2]).map_err(connection_error)?;
            *ctx.conn.info.name.lock() = if n.is_empty() { None } else { Some(n) };
            ctx.out.ok();
        }
        ("SETINFO", 4) => {
            if !(is(argv[2], "LIB-NAME") || is(argv[2], "LIB-VER")) {
                return Err(err(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(argv[2]))));
            }
            ctx.out.ok();
        }
        ("INFO", 2) => {
            let line = client_line(ctx.srv, &ctx.conn.info) + "\n";
            ctx.out.verbatim(&line);
        }
        ("LIST", _) => {
            let mut filter_ids: Option<Vec<u64>> = None;
            let mut i = 2;
            while i < argv.len() {
                if is(argv[i], "TYPE") && i + 1 < argv.len() {
                    i += 2;
                } else if is(argv[i], "ID") && i + 1 < argv.len() {
                    let ids = argv[i + 1..]
                        .iter()
                        .map(|a| int(a).ok().filter(|v| *v > 0).map(|v| v as u64).ok_or_else(|| err("ERR Invalid client ID")))
                        .collect::<Result<Vec<_>, _>>()?;
                    filter_ids = Some(ids);
                    i = argv.len();
                } else {
                    return Err(CmdError::Syntax);
                }
            }
            let mut s = String::new();
            for c in clients_sorted(ctx.srv) {
                if filter_ids.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
                    s.push_str(&client_line(ctx.srv, &c));
                    s.push('\n');
                }
            }
            ctx.out.verbatim(&s);
        }
        ("KILL", 3) => {
            let addr = String::from_utf8_lossy(argv[2]).into_owned();
            let found = clients_sorted(ctx.srv).into_iter().find(|c| c.addr == addr);
            match found {
                Some(c) if ctx.srv.kill_client(c.id) => {
                    if c.id == ctx.conn.info.id {
                        ctx.close = true;
                    }
                    ctx.out.ok();
                }
                _ => return Err(err("ERR No such client")),
            }
        }
        ("KILL", 2) => return Err(CmdError::WrongArgs("client|kill")),
        // Filters come in pairs: one left alone is a syntax error (as Redis words it).
        ("KILL", n) if n >= 5 && n % 2 == 1 => return Err(CmdError::Syntax),
        ("KILL", n) if n >= 4 && n % 2 == 0 => {
            let (mut id, mut addr, mut laddr, mut skipme, mut user, mut maxage) = (None, None, None, true, None, None);
            for pair in argv[2..].chunks(2) {
                let v = String::from_utf8_lossy(pair[1]).into_owned();
                if is(pair[0], "ID") {
                    id = Some(int(pair[1]).ok().filter(|v| *v > 0).ok_or_else(|| err("ERR client-id should be greater than 0"))? as u64);
                } else if is(pair[0], "ADDR") {
                    addr = Some(v);
                } else if is(pair[0], "LADDR") {
                    laddr = Some(v);
                } else if is(pair[0], "SKIPME") {
                    skipme = match v.to_ascii_lowercase().as_str() {
                        "yes" => true,
                        "no" => false,
                        _ => return Err(CmdError::Syntax),
                    };
                } else if is(pair[0], "USER") {
                    if ctx.srv.acl.user(&v).is_none() {
                        return Err(err(format!("ERR No such user '{v}'")));
                    }
                    user = Some(v);
                } else if is(pair[0], "MAXAGE") {
                    maxage = Some(int(pair[1])?);
                } else if is(pair[0], "TYPE") {
                    // Every client here is a normal one (no replicas, no masters).
                    if !["normal", "master", "replica", "slave", "pubsub"].contains(&v.to_ascii_lowercase().as_str()) {
                        return Err(err(format!("ERR Unknown client type '{v}'")));
                    }
                    if !v.eq_ignore_ascii_case("normal") {
                        id = Some(0);
                    }
                } else {
                    return Err(CmdError::Syntax);
                }
            }
            let me = ctx.conn.info.id;
            let mut killed = 0;
            for c in clients_sorted(ctx.srv) {
                if id.is_none_or(|i| i == c.id)
                    && addr.as_ref().is_none_or(|a| *a == c.addr)
                    && laddr.as_ref().is_none_or(|a| *a == c.laddr)
                    && user.as_ref().is_none_or(|u| *u == *c.user.lock())
                    && maxage.is_none_or(|m| c.created.elapsed().as_secs() as i64 >= m)
                    && !(skipme && c.id == me)
                {
                    if c.id == me {
                        // Our own connection closes after this reply is written.
                        ctx.close = true;
                        killed += 1;
                    } else if ctx.srv.kill_client(c.id) {
                        killed += 1;
                    }
                }
            }
            ctx.out.int(killed);
        }
        ("UNBLOCK", 3 | 4) => {
            let id = int(argv[2])?;
            let how = match argv.get(3) {
                None => 1,
                Some(a) if is(a, "TIMEOUT") => 1,
                Some(a) if is(a, "ERROR") => 2,
                Some(_) => return Err(err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
            };
            let target = ctx.srv.clients.lock().get(&(id as u64)).cloned();
            match target {
                Some(c) if c.blocked.load(Ordering::SeqCst) => {
                    c.unblock.store(how, Ordering::SeqCst);
                    c.wake.notify_one();
                    ctx.out.int(1);
                }
                _ => ctx.out.int(0),
            }
        }
        ("REPLY", 3) => {
            if is(argv[2], "ON") {
                ctx.conn.reply_off = false;
                ctx.conn.reply_skip = 0;
                ctx.out.ok();
            } else if is(argv[2], "OFF") {
                ctx.conn.reply_off = true;
            } else if is(argv[2], "SKIP") {
                ctx.conn.reply_skip = 2;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        ("PAUSE", 3 | 4) => {
            let ms = int(argv[2]).map_err(|_| err("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(err("ERR timeout is negative"));
            }
            let all = match argv.get(3) {
                None => true,
                Some(a) if is(a, "ALL") => true,
                Some(a) if is(a, "WRITE") => false,
                Some(_) => return Err(CmdError::Syntax),
            };
            let until = crate::server::state::now_ms().saturating_add(ms);
            ctx.srv.pause_all.store(all, Ordering::Relaxed);
            ctx.srv.pause_until_ms.fetch_max(until, Ordering::Relaxed);
            ctx.out.ok();
        }
        ("UNPAUSE", 2) => {
            ctx.srv.pause_until_ms.store(0, Ordering::Relaxed);
            ctx.out.ok();
        }
        ("GETREDIR", 2) => ctx.out.int(redirect_of(ctx)),
        ("TRACKINGINFO", 2) => tracking_info(ctx),
        ("TRACKING", n) if n >= 3 => client_tracking(ctx, argv)?,
        ("CACHING", 3) => {
            let (optin, optout) = ctx.conn.tracking.as_ref().map(|t| (t.optin, t.optout)).unwrap_or((false, false));
            if !optin && !optout {
                return Err(err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
            }
            if is(argv[2], "YES") {
                if !optin {
                    return Err(err("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."));
                }
                ctx.conn.caching = Some(true);
            } else if is(argv[2], "NO") {
                if !optout {
                    return Err(err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."));
                }
                ctx.conn.caching = Some(false);
            } else {
                return Err(CmdError::Syntax);
            }
            ctx.out.ok();
        }
        ("NO-EVICT", 3) => {
            let on = super::args::on_off(argv[2])?;
            ctx.conn.info.no_evict.store(on, Ordering::Relaxed);
            ctx.out.ok();
        }
        ("HELP", 2) => {
            let lines = [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GETNAME",
                "ID",
                "INFO",
                "KILL <ip:port> | KILL <option> <value> [...]",
                "LIST [TYPE <type>] [ID <id> ...]",
                "NO-EVICT (ON|OFF)",
                "PAUSE <timeout> [WRITE|ALL]",
                "REPLY (ON|OFF|SKIP)",
                "SETNAME <name>",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "UNPAUSE",
                "GETREDIR",
                "TRACKINGINFO",
                "SETINFO <LIB-NAME|LIB-VER> <value>",
                "HELP",
            ];
            ctx.out.help(&lines);
        }
        _ => return Err(wrong()),
    }
    Ok(())
}

/// The ACL categories Redis would list for a command.
fn acl_categories(c: &CommandSpec) -> Vec<String> {
    crate::acl::categories_of(c).into_iter().map(|cat| format!("@{cat}")).collect()
}

fn write_command_info(ctx: &mut Ctx, c: &CommandSpec) {
    ctx.out.array_len(10);
    ctx.out.bulk(c.name.as_bytes());
    ctx.out.int(c.arity as i64);
    ctx.out.set_len(c.flag_names.len());
    for f in &c.flag_names {
        ctx.out.simple(f);
    }
    ctx.out.int(c.first as i64);
    ctx.out.int(c.last as i64);
    ctx.out.int(c.step as i64);
    let cats = acl_categories(c);
    ctx.out.set_len(cats.len());
    for cat in &cats {
        ctx.out.simple(cat);
    }
    ctx.out.set_len(0);
    // Key specs: one range spec when the command has keys.
    if c.first > 0 {
        ctx.out.array_len(1);
        ctx.out.map_len(3);
        ctx.out.bulk(b"flags");
        let flags = super::keyspecs::key_flags(c.name, 0);
        ctx.out.set_len(flags.len());
        for f in flags {
            ctx.out.simple(f);
        }
        ctx.out.bulk(b"begin_search");
        ctx.out.map_len(2);
        ctx.out.bulk(b"type");
        ctx.out.bulk(b"index");
        ctx.out.bulk(b"spec");
        ctx.out.map_len(1);
        ctx.out.bulk(b"index");
        ctx.out.int(c.first as i64);
        ctx.out.bulk(b"find_keys");
        ctx.out.map_len(2);
        ctx.out.bulk(b"type");
        ctx.out.bulk(b"range");
        ctx.out.bulk(b"spec");
        ctx.out.map_len(3);
        ctx.out.bulk(b"lastkey");
        ctx.out.int(if c.last < 0 { c.last as i64 } else { (c.last - c.first) as i64 });
        ctx.out.bulk(b"keystep");
        ctx.out.int(c.step as i64);
        ctx.out.bulk(b"limit");
        ctx.out.int(0);
    } else {
        ctx.out.array_len(0);
    }
    ctx.out.array_len(0);
}

fn write_command_docs(ctx: &mut Ctx, c: &CommandSpec) {
    ctx.out.bulk(c.name.as_bytes());
    ctx.out.map_len(3);
    ctx.out.bulk(b"summary");
    ctx.out.bulk(c.summary.as_bytes());
    ctx.out.bulk(b"since");
    ctx.out.bulk(b"1.0.0");
    ctx.out.bulk(b"group");
    ctx.out.bulk(c.group.as_bytes());
}

pub fn command(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() == 1 {
        ctx.out.array_len(COMMANDS.len());
        for c in COMMANDS.iter() {
            write_command_info(ctx, c);
        }
        return Ok(());
    }
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_uppercase();
    match sub.as_str() {
        "COUNT" if argv.len() == 2 => ctx.out.int(COMMANDS.len() as i64),
        "LIST" => {
            // Every command and every subcommand (as "container|sub"), as Redis lists them.
            let all: Vec<(String, &CommandSpec)> = COMMANDS
                .iter()
                .flat_map(|c| {
                    let subs = super::args::SUBCOMMANDS.iter().find(|(n, _)| *n == c.name).map(|(_, s)| *s).unwrap_or(&[]);
                    std::iter::once((c.name.to_string(), c)).chain(subs.iter().map(move |(s, _)| (format!("{}|{s}", c.name), c)))
                })
                .collect();
            let names: Vec<String> = match argv.len() {
                2 => all.into_iter().map(|(n, _)| n).collect(),
                5 if is(argv[2], "FILTERBY") => {
                    let v = String::from_utf8_lossy(argv[4]).to_ascii_lowercase();
                    if is(argv[3], "MODULE") {
                        Vec::new()
                    } else if is(argv[3], "ACLCAT") {
                        let cat = format!("@{}", v.trim_start_matches('@'));
                        all.into_iter().filter(|(_, c)| acl_categories(c).contains(&cat)).map(|(n, _)| n).collect()
                    } else if is(argv[3], "PATTERN") {
                        all.into_iter().filter(|(n, _)| super::args::glob_match(v.as_bytes(), n.as_bytes(), true)).map(|(n, _)| n).collect()
                    } else {
                        return Err(CmdError::Syntax);
                    }
                }
                _ => return Err(CmdError::Syntax),
            };
            ctx.out.array_len(names.len());
            for n in names {
                ctx.out.bulk(n.as_bytes());
            }
        }
        "INFO" => {
            let names: Vec<&[u8]> = if argv.len() == 2 { COMMANDS.iter().map(|c| c.name.as_bytes()).collect() } else { argv[2..].to_vec() };
            ctx.out.array_len(names.len());
            for n in names {
                match super::lookup(n) {
                    Some(c) => write_command_info(ctx, c),
                    None => ctx.out.null_array(),
                }
            }
        }
        "DOCS" => {
            let specs: Vec<&CommandSpec> =
                if argv.len() == 2 { COMMANDS.iter().collect() } else { argv[2..].iter().filter_map(|n| super::lookup(n)).collect() };
            ctx.out.map_len(specs.len());
            for c in specs {
                write_command_docs(ctx, c);
            }
        }
        "GETKEYS" | "GETKEYSANDFLAGS" if argv.len() >= 4 => {
            let with_flags = sub == "GETKEYSANDFLAGS";
            let cmd = &argv[2..];
            let Some(spec) = super::lookup(cmd[0]) else {
                return Err(err("ERR Invalid command specified"));
            };
            let has_keys = !matches!(spec.keys_from, super::table::KeysFrom::Range) || spec.first > 0;
            if !has_keys {
                return Err(err("ERR The command has no key arguments"));
            }
            if !super::arity_ok(spec, cmd.len()) {
                return Err(err("ERR Invalid number of arguments specified for command"));
            }
            let pos = super::table::key_positions(spec, cmd);
            if pos.is_empty() {
                // EVAL … 0 names no key, and may not (Redis's no_mandatory_keys).
                if spec.flags.has(super::table::Flags::NO_MANDATORY_KEYS) {
                    ctx.out.array_len(0);
                    return Ok(());
                }
                return Err(err("ERR Invalid arguments specified for command"));
            }
            ctx.out.array_len(pos.len());
            for (n, p) in pos.into_iter().enumerate() {
                if with_flags {
                    let flags = super::keyspecs::key_flags_for(spec.name, n, cmd);
                    ctx.out.array_len(2);
                    ctx.out.bulk(cmd[p]);
                    ctx.out.set_len(flags.len());
                    for f in flags {
                        ctx.out.simple(f);
                    }
                } else {
                    ctx.out.bulk(cmd[p]);
                }
            }
        }
        "HELP" => {
            let lines = [
                "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "(no subcommand)",
                "COUNT",
                "DOCS [<command-name> ...]",
                "GETKEYS <full-command>",
                "GETKEYSANDFLAGS <full-command>",
                "INFO [<command-name> ...]",
                "LIST",
                "HELP",
            ];
            ctx.out.help(&lines);
        }
        _ => return Err(super::args::subcommand_error("command", argv)),
    }
    Ok(())
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

fn human(n: u64) -> String {
    let f = n as f64;
    if f >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}G", f / (1024.0 * 1024.0 * 1024.0))
    } else if f >= 1024.0 * 1024.0 {
        format!("{:.2}M", f / (1024.0 * 1024.0))
    } else if f >= 1024.0 {
        format!("{:.2}K", f / 1024.0)
    } else {
        format!("{n}B")
    }
}

/// Builds the INFO text for the requested sections.
/// INFO's text; `ns_base` picks the namespace whose databases the keyspace section lists.
pub fn info_text(srv: &Server, totals: &crate::keyspace::Totals, sections: &[String], ns_base: usize) -> String {
    let want = |name: &str| info_wants(sections, name);
    let mut s = String::new();
    let uptime = srv.started.elapsed().as_secs();
    if want("server") {
        let _ = write!(
            s,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nterrace_version:{TERRACE_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:10\r\nexecutable:{}\r\nconfig_file:\r\nio_threads_active:0\r\nterrace_threads:{:?}\r\n\r\n",
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            srv.run_id,
            srv.port.load(Ordering::Relaxed),
            now_us(),
            uptime,
            uptime / 86400,
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            srv.config.threads,
        );
    }
    if want("clients") {
        let _ = write!(
            s,
            "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:0\r\n\r\n",
            srv.clients.lock().len(),
            srv.limits.maxclients.load(Ordering::Relaxed),
            srv.blocking.blocked_clients(),
            srv.tracking.counts().clients
        );
    }
    if want("memory") {
        let used = crate::alloc::used_memory();
        let rss = rss_bytes();
        let max = srv.runtime.maxmemory.load(Ordering::Relaxed);
        let _ = write!(
            s,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{used}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_allocator:{}\r\nterrace_namespace_data_bytes:{}\r\nterrace_namespace_maxmemory:{}\r\n\r\n",
            human(used),
            human(rss),
            human(max),
            srv.policy().name(),
            if used > 0 { rss as f64 / used as f64 } else { 0.0 },
            crate::alloc::ALLOCATOR,
            srv.keyspace.namespace_used(ns_base / NUM_DBS),
            srv.keyspace.namespace_limit(ns_base / NUM_DBS),
        );
    }
    if want("persistence") {
        let snap = &srv.snapshot;
        let _ = write!(
            s,
            "# Persistence\r\nloading:{}\r\nasync_loading:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_saves:{}\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\n\r\n",
            u8::from(srv.replication.loading()),
            snap.changes.load(Ordering::Relaxed),
            snap.in_progress.load(Ordering::Relaxed) as u8,
            snap.last_save.load(Ordering::Relaxed),
            if snap.last_ok.load(Ordering::Relaxed) { "ok" } else { "err" },
            snap.saves.load(Ordering::Relaxed)
        );
    }
    if want("stats") {
        let st = &srv.stats;
        let tracked = srv.tracking.counts();
        let (expired, evicted) = (totals.expired, totals.evicted);
        let _ = write!(
            s,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\ntotal_error_replies:{}\r\nclient_query_buffer_limit_disconnections:{}\r\nclient_output_buffer_limit_disconnections:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\n\r\n",
            st.connections_received.load(Ordering::Relaxed),
            st.commands_processed.load(Ordering::Relaxed),
            st.instantaneous_ops.load(Ordering::Relaxed),
            st.net_input_bytes.load(Ordering::Relaxed),
            st.net_output_bytes.load(Ordering::Relaxed),
            st.rejected_connections.load(Ordering::Relaxed),
            srv.replication.syncs.full.load(Ordering::Relaxed),
            srv.replication.syncs.partial_ok.load(Ordering::Relaxed),
            srv.replication.syncs.partial_err.load(Ordering::Relaxed),
            expired,
            evicted,
            st.keyspace_hits.load(Ordering::Relaxed),
            st.keyspace_misses.load(Ordering::Relaxed),
            st.total_error_replies.load(Ordering::Relaxed),
            srv.limits.query_disconnections.load(Ordering::Relaxed),
            srv.limits.output_disconnections.load(Ordering::Relaxed),
            tracked.keys,
            tracked.items,
            tracked.prefixes,
        );
    }
    if want("replication") {
        replication_info(srv, &mut s);
    }
    if want("cpu") {
        // SAFETY: an all-zero rusage is a valid value (integers and timevals).
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage fills the rusage it is given.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        let _ = write!(s, "# CPU\r\nused_cpu_sys:{:.6}\r\nused_cpu_user:{:.6}\r\n\r\n", t(ru.ru_stime), t(ru.ru_utime));
    }
    if want("modules") {
        s.push_str("# Modules\r\n\r\n");
    }
    if want("errorstats") {
        s.push_str("# Errorstats\r\n");
        for (code, count) in srv.stats.errors.lock().iter() {
            let _ = write!(s, "errorstat_{code}:count={count}\r\n");
        }
        s.push_str("\r\n");
    }
    if want("cluster") {
        s.push_str("# Cluster\r\ncluster_enabled:0\r\n\r\n");
    }
    if want("commandstats") {
        s.push_str("# Commandstats\r\n");
        for (slot, st) in srv.stats.per_command.iter().enumerate() {
            let calls = st.calls.load(Ordering::Relaxed);
            let rejected = st.rejected.load(Ordering::Relaxed);
            if calls == 0 && rejected == 0 {
                continue;
            }
            let usec = st.usec.load(Ordering::Relaxed);
            let _ = write!(
                s,
                "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}\r\n",
                terrace_commands::stat_index::name(slot),
                calls,
                usec,
                if calls > 0 { usec as f64 / calls as f64 } else { 0.0 },
                rejected,
                st.failed.load(Ordering::Relaxed)
            );
        }
        s.push_str("\r\n");
    }
    if want("compression") {
        s.push_str("# Compression\r\n");
        let names = srv.namespaces.lock().clone();
        let mut lines = String::new();
        let mut active = 0;
        for (i, name) in names.iter().enumerate() {
            let t = srv.keyspace.compression(i);
            if t.enabled() || t.current().is_some() {
                active += 1;
                let _ = write!(lines, "tenant_{}:{}\r\n", if name.is_empty() { "default" } else { name }, t.info_line());
            }
        }
        let _ = write!(s, "compression_tenants:{active}\r\n{lines}\r\n");
    }
    if want("wal") || want("persistence") {
        if let Some(wal) = srv.wal() {
            s.push_str(&wal.info());
        }
    }
    if want("storage") {
        if let Some(t) = srv.storage_tier() {
            s.push_str(&t.info());
        }
    }
    if want("threads") {
        s.push_str(&srv.reactors.info());
    }
    if want("tiers") {
        if let Some(t) = srv.keyspace.tier() {
            s.push_str(&t.info(totals.keys.iter().map(|&k| k as u64).sum()));
        }
    }
    if want("keyspace") {
        s.push_str("# Keyspace\r\n");
        let base = ns_base;
        for db in 0..NUM_DBS {
            let keys = totals.keys.get(base + db).copied().unwrap_or(0);
            let expires = totals.expires.get(base + db).copied().unwrap_or(0);
            if keys > 0 {
                let _ = write!(s, "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n");
            }
        }
        s.push_str("\r\n");
    }
    while s.ends_with("\r\n\r\n") {
        s.truncate(s.len() - 2);
    }
    s
}

/// Whether INFO asked for `sections` shows section `name`.
fn info_wants(sections: &[String], name: &str) -> bool {
    let all = sections.iter().any(|s| s == "all" || s == "everything");
    let default = sections.is_empty() || sections.iter().any(|s| s == "default");
    all || sections.iter().any(|s| s == name) || (default && name != "commandstats")
}

pub fn info(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sections: Vec<String> = argv[1..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    // Only the sections that count keys visit the shards: `INFO server replication` (the
    // coordinator's health check) waits for no shard a snapshot or a script holds.
    let totals = if ["stats", "tiers", "keyspace"].iter().any(|name| info_wants(&sections, name)) { ctx.data.totals()? } else { Default::default() };
    let text = info_text(ctx.srv, &totals, &sections, ctx.conn.ns_base);
    ctx.out.verbatim(&text);
    Ok(())
}

/// `TERRACE.THREADS ACTIVE n`: sets how many reactors serve (elastic mode) and moves
/// connections accordingly; the controller goes on deciding from there. `TERRACE.THREADS`
/// alone: the `threads` INFO section.
pub fn threads(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let reactors = &ctx.srv.reactors;
    match argv.get(1) {
        None => {
            ctx.out.bulk(reactors.info().as_bytes());
            Ok(())
        }
        Some(sub) if sub.eq_ignore_ascii_case(b"active") && argv.len() == 3 => {
            if !reactors.elastic {
                return Err(err("ERR the engine runs a fixed number of threads (--threads elastic[:max] to change it at run time)"));
            }
            let n = int(argv[2])
                .ok()
                .filter(|&n| n >= 1 && n as usize <= reactors.count())
                .ok_or_else(|| err(format!("ERR the active reactor count must be from 1 to {}", reactors.count())))?;
            let moved = reactors.set_active(ctx.srv, n as usize);
            ctx.out.int(moved as i64);
            Ok(())
        }
        Some(_) => Err(CmdError::Syntax),
    }
}

/// INFO's replication section, with Redis's fields.
fn replication_info(srv: &Server, s: &mut String) {
    use crate::replication::Flavor;
    let repl = &srv.replication;
    s.push_str("# Replication\r\n");
    // The stream shown: Redis's, unless only engines replicate from this one (or it mirrors
    // an engine master's).
    let shown = match repl.mirrored() {
        Some(f) => f,
        None if repl.backlog(Flavor::Redis).is_none() && repl.backlog(Flavor::Terrace).is_some() => Flavor::Terrace,
        None => Flavor::Redis,
    };
    let (replid, offset) = match (repl.master(), repl.link()) {
        (Some(master), Some(link)) => {
            let up = link.state == crate::replication::LinkState::Connected;
            let offset = link.offset.max(0);
            let _ = write!(
                s,
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\n\
                 master_sync_in_progress:{}\r\nslave_read_repl_offset:{offset}\r\nslave_repl_offset:{offset}\r\nslave_priority:100\r\n\
                 slave_read_only:1\r\nreplica_announced:1\r\n",
                master.host,
                master.port,
                if up { "up" } else { "down" },
                if up { link.last_io.elapsed().as_secs() as i64 } else { -1 },
                u8::from(link.state == crate::replication::LinkState::Sync),
            );
            if !up {
                let _ = write!(s, "master_link_down_since_seconds:{}\r\n", link.last_io.elapsed().as_secs());
            }
            (if link.master_replid.len() == 40 { link.master_replid } else { repl.replid_of(shown) }, offset)
        }
        _ => {
            s.push_str("role:master\r\n");
            (repl.replid_of(shown), repl.offset_of(shown) as i64)
        }
    };
    let replicas = repl.replicas();
    let _ = write!(s, "connected_slaves:{}\r\n", replicas.len());
    for (i, r) in replicas.iter().enumerate() {
        let lag = r.acked_at.elapsed().as_secs();
        let _ = write!(s, "slave{i}:ip={},port={},state={},offset={},lag={lag}\r\n", r.ip, r.port, r.state.name(), r.acked);
    }
    let stream = repl.backlog(shown);
    let (first, histlen) = stream.map_or((0, 0), |b| b.span());
    let (replid2, second) = repl.replid2_of(shown).map_or(("0".repeat(40), -1), |(id, upto)| (id, upto as i64));
    if let Some(t) = srv.term.lock().as_ref() {
        let _ = write!(s, "terrace_term_group:{}\r\nterrace_term_epoch:{}\r\n", t.group, t.epoch);
    }
    if let Some(until) = repl.lease() {
        // How long the term lease has left (negative: it ran out that long ago).
        let _ = write!(s, "terrace_term_lease_ms:{}\r\n", until.saturating_sub(crate::clock::now_ms()));
    }
    if repl.fenced() {
        // Restarted with `wait_for_role`: the coordinator decides (fail over, or NO ONE).
        s.push_str("terrace_waiting_for_role:1\r\n");
    }
    let _ = write!(
        s,
        "master_failover_state:no-failover\r\nmaster_replid:{replid}\r\nmaster_replid2:{replid2}\r\n\
         master_repl_offset:{offset}\r\nsecond_repl_offset:{second}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\n\
         repl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{histlen}\r\n\r\n",
        u8::from(stream.is_some()),
        repl.backlog_size.load(Ordering::Relaxed),
    );
}
