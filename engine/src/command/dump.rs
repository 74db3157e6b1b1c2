//! DUMP and RESTORE: a value as Redis's payload (an RDB object, the RDB version and a CRC64;
//! the codec is `rdb`), and back into the keyspace with RESTORE's options.

use super::args::{err, int, is, CmdError};
use super::{CmdResult, Ctx};
use crate::keyspace::{access, Entry, Meta, ValueRef};
use crate::rdb::{dump_value, parse_payload, Restored};

pub fn dump(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (ks, db) = (ctx.data.ks, ctx.data.db);
    match ctx.data.read(argv[1]) {
        Some(e) if e.is_encoded() => {
            let v = super::decoded(ks, db, e)?.unwrap_or_default();
            ctx.out.bulk(&dump_value(ValueRef::Str(&v)))
        }
        Some(e) => ctx.out.bulk(&dump_value(e.value())),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn restore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let ttl = int(argv[2])?;
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, None, None);
    let mut i = 4;
    while i < argv.len() {
        if is(argv[i], "REPLACE") {
            replace = true;
        } else if is(argv[i], "ABSTTL") {
            absttl = true;
        } else if is(argv[i], "IDLETIME") && i + 1 < argv.len() && freq.is_none() {
            let v = int(argv[i + 1])?;
            if v < 0 {
                return Err(err("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            i += 1;
        } else if is(argv[i], "FREQ") && i + 1 < argv.len() && idle.is_none() {
            let v = int(argv[i + 1])?;
            if !(0..=255).contains(&v) {
                return Err(err("ERR Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(v);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if ttl < 0 {
        return Err(err("ERR Invalid TTL value, must be >= 0"));
    }
    if !replace && ctx.data.exists(key) {
        return Err(err("BUSYKEY Target key name already exists."));
    }
    let value = parse_payload(argv[3])?;
    let now = ctx.data.now;
    let expire = match (ttl, absttl) {
        (0, _) => None,
        (t, true) => Some(t),
        (t, false) => Some(now.saturating_add(t)),
    };
    ctx.data.delete(key);
    if matches!(expire, Some(t) if t < now) {
        ctx.out.ok();
        return Ok(());
    }
    let stamp = match (idle, freq) {
        (Some(secs), _) => access::lru_clock(now - secs * 1000),
        (_, Some(f)) => (access::lfu_new(now) & !0xFF) | f as u32,
        _ => access::new_stamp(ctx.data.lfu, now),
    };
    let meta = Meta { expire, flags: 0, version: ctx.data.ks.next_version(), access: stamp };
    let e = match value {
        // Through the tenant's codec and tier placement, as SET does.
        Restored::Str(v) => ctx.data.ks.new_str_entry(ctx.data.db, key, &v, &meta),
        Restored::Coll(c) => Entry::new_coll(key, c, &meta),
    };
    install(ctx, key, e);
    ctx.out.ok();
    Ok(())
}

/// Puts a restored entry in place; a list or sorted set wakes the clients blocked on it.
fn install(ctx: &mut Ctx, key: &[u8], e: Entry) {
    let list_like = matches!(e.kind(), crate::keyspace::Kind::List | crate::keyspace::Kind::ZSet);
    ctx.data.insert(e);
    if list_like {
        ctx.data.signal(key);
    }
}

/// TERRACE.IMPORT key record — a key as another engine stored it (the storage tier's record:
/// expiry, Memcached flags, RDB object), replacing whatever the key held: a slot
/// migration's copy. Logged and replicated as any write, so the target's replicas and log
/// have it too. An expired record deletes the key.
pub fn import(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let stored = crate::storage::record::decode(argv[2]).map_err(|e| err(format!("ERR {e}")))?;
    ctx.data.delete(key);
    let now = ctx.data.now;
    if !crate::keyspace::is_expired(stored.expire, now) {
        let e = stored.into_entry(ctx.data.ks, ctx.data.db, key, access::new_stamp(ctx.data.lfu, now));
        install(ctx, key, e);
    }
    ctx.out.ok();
    Ok(())
}
