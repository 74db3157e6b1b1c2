//! `TERRACE.MIGRATE`: the coordinator's handle on a slot migration this engine runs
//! (`crate::migration` holds its state, `server::migrate` does the work).
//!
//! ```text
//! TERRACE.MIGRATE START id host:port range [range ...] [RATE bytes-per-second] [PACE percent]
//!                       [AUTH password]       (the target's; without it, masterauth)
//! TERRACE.MIGRATE PURGE id range [range ...]     (deletes the slots' keys here)
//! TERRACE.MIGRATE STATUS | SEAL | FINISH | ABORT
//! ```

use super::args::{err, is, CmdError};
use super::{CmdResult, Ctx};
use crate::migration::Job;
use terrace_commands::slots::SlotSet;

/// The share of the time a migration works, in percent, unless START says (PACE).
const DEFAULT_PACE: u8 = 50;

pub fn migrate(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let m = &ctx.srv.migration;
    let refused = |e: crate::migration::Refused| err(e.to_string());
    let sub = argv[1];
    if is(sub, "STATUS") && argv.len() == 2 {
        let json = m.to_json().to_string();
        ctx.out.bulk(json.as_bytes());
        return Ok(());
    }
    if argv.len() == 2 {
        if is(sub, "SEAL") {
            m.seal().map_err(refused)?;
        } else if is(sub, "FINISH") {
            m.finish().map_err(refused)?;
        } else if is(sub, "ABORT") {
            m.abort().map_err(refused)?;
        } else {
            return Err(usage());
        }
        ctx.out.ok();
        return Ok(());
    }
    let (target, rest) = if is(sub, "START") && argv.len() >= 5 {
        let target = std::str::from_utf8(argv[3]).ok().filter(|t| terrace_commands::settings::is_host_port(t));
        let target = target.ok_or_else(|| err("ERR the target must be host:port"))?;
        (Some(target.to_string()), &argv[4..])
    } else if is(sub, "PURGE") && argv.len() >= 4 {
        (None, &argv[3..])
    } else {
        return Err(usage());
    };
    let id = String::from_utf8_lossy(argv[2]).into_owned();
    let mut slots = SlotSet::default();
    let (mut rate, mut pace, mut auth) = (0, DEFAULT_PACE, None);
    let mut i = 0;
    while i < rest.len() {
        if is(rest[i], "RATE") && target.is_some() {
            rate = rest.get(i + 1).and_then(|r| std::str::from_utf8(r).ok()?.parse::<u64>().ok()).ok_or(CmdError::Syntax)?;
            i += 2;
            continue;
        }
        if is(rest[i], "AUTH") && target.is_some() {
            let password = rest.get(i + 1).ok_or(CmdError::Syntax)?;
            auth = Some(String::from_utf8(password.to_vec()).map_err(|_| err("ERR the target's password must be UTF-8"))?);
            i += 2;
            continue;
        }
        if is(rest[i], "PACE") {
            pace = rest
                .get(i + 1)
                .and_then(|r| std::str::from_utf8(r).ok()?.parse::<u8>().ok())
                .filter(|p| (1..=100).contains(p))
                .ok_or_else(|| err("ERR PACE must be a percentage from 1 to 100"))?;
            i += 2;
            continue;
        }
        let text = std::str::from_utf8(rest[i]).map_err(|_| CmdError::Syntax)?;
        let (first, last) = SlotSet::parse_range(text).map_err(|e| err(format!("ERR {e}")))?;
        slots.insert_range(first, last);
        i += 1;
    }
    if slots.is_empty() {
        return Err(err("ERR no slots given"));
    }
    m.start(Job { id, target, slots, rate, pace, auth }, ctx.data.now).map_err(refused)?;
    ctx.out.ok();
    Ok(())
}

fn usage() -> CmdError {
    err("ERR unknown TERRACE.MIGRATE subcommand or wrong number of arguments (START id host:port ranges [RATE n] [PACE percent] [AUTH password], PURGE id ranges, STATUS, SEAL, FINISH, ABORT)")
}
