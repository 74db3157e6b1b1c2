//! What one command did to keys, as its shards noted it (written or removed, added,
//! expired): the keys a blocked XREADGROUP must hear were deleted or retyped, and keyspace
//! notifications' events, named as Redis names them for this command
//! (`terrace_commands::notify::event_for`), in Redis's order — expirations found on the way,
//! new keys, then each key the command changed in the order of its arguments, with `del`
//! after a key the command emptied and `expire` after a SET that gave one a time to live.

use terrace_commands::notify::{class, event_for, removes};

use crate::command::table::{key_positions, CommandSpec};
use crate::command::Ctx;
use crate::keyspace::Happened;

/// Takes what the command's shards noted: keys now missing or not streams become ready for
/// clients blocked in XREADGROUP (which then fail, as in Redis), and, with notifications on,
/// the events go to the command's effects for publishing.
pub(crate) fn after_command(ctx: &mut Ctx, spec: &CommandSpec, argv: &[&[u8]], succeeded: bool) {
    let mut noted = Vec::new();
    let per_db = ctx.srv.keyspace.shards_per_db();
    ctx.data.guards.take_events(per_db, &mut noted);
    if noted.is_empty() {
        return;
    }
    if ctx.srv.blocking.deletions_watched() {
        let now = ctx.data.now;
        for (db, what, key) in &noted {
            let gone = ctx.data.shard_in(*db, key).peek(key, now).is_none_or(|e| e.kind() != crate::keyspace::Kind::Stream);
            if *what != Happened::Created && gone && !ctx.data.fx.ready.iter().any(|(d, k)| d == db && k == key) {
                ctx.data.fx.ready.push((*db, key.clone()));
            }
        }
    }
    if succeeded && ctx.srv.keyspace.notifying() {
        name_events(ctx, spec, argv, &noted);
    }
}

/// Names the events of a command that succeeded and adds them to its effects.
fn name_events(ctx: &mut Ctx, spec: &CommandSpec, argv: &[&[u8]], noted: &[(usize, Happened, Vec<u8>)]) {
    let mut out = Vec::new();
    for (db, what, key) in noted {
        match what {
            Happened::Expired => out.push((*db, class::EXPIRED, "expired", key.clone())),
            Happened::Created => out.push((*db, class::NEW, "new", key.clone())),
            Happened::Changed => {}
        }
    }
    // Each changed key once, by its place among the command's keys (others after them).
    let positions: Vec<&[u8]> = key_positions(spec, argv).into_iter().map(|i| argv[i]).collect();
    let mut changed: Vec<(usize, &Vec<u8>)> = Vec::new();
    for (db, what, key) in noted {
        if *what == Happened::Changed && !changed.iter().any(|(d, k)| d == db && *k == key) {
            changed.push((*db, key));
        }
    }
    let (here, now) = (ctx.data.db, ctx.data.now);
    let place = |db: usize, key: &[u8]| {
        // A key in another database is the second of MOVE or COPY … DB.
        let nth = positions.iter().position(|k| *k == key).unwrap_or(positions.len());
        if db != here {
            nth.max(1)
        } else {
            nth
        }
    };
    changed.sort_by_key(|(db, key)| place(*db, key));
    for (db, key) in changed {
        let Some((event_class, event)) = event_for(spec.name, argv, place(db, key)) else { continue };
        let entry = ctx.data.shard_in(db, key).peek(key, now).map(|e| e.expire().is_some());
        match entry {
            // EXPIRE with a time already past deletes the key: Redis reports that alone.
            None if event == "expire" => out.push((db, class::GENERIC, "del", key.clone())),
            None => {
                out.push((db, event_class, event, key.clone()));
                if !removes(event) {
                    out.push((db, class::GENERIC, "del", key.clone()));
                }
            }
            Some(volatile) => {
                out.push((db, event_class, event, key.clone()));
                if volatile && matches!(spec.name, "set" | "setex" | "psetex") {
                    out.push((db, class::GENERIC, "expire", key.clone()));
                }
            }
        }
    }
    ctx.data.fx.notifications.append(&mut out);
}
