//! The ACL command: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, GENPASS, LOG, DRYRUN.
//! Users and permission checks live in `crate::acl`.

use super::args::{err, int, is, subcommand_error, CmdError};
use super::table::COMMANDS;
use super::{arity_ok, lookup, CmdResult, Ctx};
use crate::acl::{categories_of, merge_selector_args, SelectorInfo, CATEGORIES};

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

pub fn acl(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
    if terrace_commands::subcommands::sub_arity_ok("acl", argv[1], argv.len()) != Some(true) {
        return Err(subcommand_error("acl", argv));
    }
    let acl = &ctx.srv.acl;
    match sub.as_str() {
        "help" => ctx.out.help(HELP),
        "whoami" => ctx.out.bulk(ctx.conn.user.name.as_bytes()),
        "users" => {
            let names = acl.usernames();
            ctx.out.array_len(names.len());
            for n in names {
                ctx.out.bulk(n.as_bytes());
            }
        }
        "list" => {
            let lines = acl.list();
            ctx.out.array_len(lines.len());
            for l in lines {
                ctx.out.bulk(l.as_bytes());
            }
        }
        "setuser" => {
            let name = String::from_utf8_lossy(argv[2]).into_owned();
            if name.contains(' ') || name.contains('\0') {
                return Err(err("ERR Usernames can't contain spaces or null characters"));
            }
            let rules = merge_selector_args(&argv[3..]).map_err(err)?;
            acl.set_user(&name, &rules).map_err(err)?;
            ctx.out.ok();
        }
        "deluser" => {
            let names: Vec<String> = argv[2..].iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            let n = acl.delete_users(&names).map_err(err)?;
            ctx.srv.kill_clients_of(&names);
            if names.contains(&ctx.conn.user.name) {
                ctx.close = true;
            }
            ctx.out.int(n as i64);
        }
        "getuser" => getuser(ctx, argv[2]),
        "cat" => {
            if argv.len() == 2 {
                ctx.out.array_len(CATEGORIES.len());
                for c in CATEGORIES {
                    ctx.out.bulk(c.as_bytes());
                }
            } else {
                let cat = String::from_utf8_lossy(argv[2]).to_ascii_lowercase();
                if !CATEGORIES.contains(&cat.as_str()) {
                    return Err(err(format!("ERR Unknown category '{}'", String::from_utf8_lossy(argv[2]))));
                }
                let names: Vec<&str> = COMMANDS.iter().filter(|c| categories_of(c).contains(&cat.as_str())).map(|c| c.name).collect();
                ctx.out.array_len(names.len());
                for n in names {
                    ctx.out.bulk(n.as_bytes());
                }
            }
        }
        "genpass" => {
            let bits = match argv.get(2) {
                None => 256,
                Some(a) => int(a).ok().filter(|b| (1..=4096).contains(b)).ok_or_else(|| {
                    err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
                })?,
            };
            let chars = (bits as usize).div_ceil(4);
            let mut raw = vec![0u8; chars.div_ceil(2)];
            getrandom::fill(&mut raw).map_err(|e| err(format!("ERR cannot read random bytes: {e}")))?;
            let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
            ctx.out.bulk(&hex.as_bytes()[..chars]);
        }
        "log" => {
            let mut count = usize::MAX;
            if let Some(a) = argv.get(2) {
                if is(a, "RESET") {
                    acl.log_reset();
                    ctx.out.ok();
                    return Ok(());
                }
                count = int(a).ok().filter(|n| *n >= 0).ok_or(CmdError::NotInteger)? as usize;
            }
            let entries = acl.log_entries(count);
            ctx.out.array_len(entries.len());
            let now = std::time::Instant::now();
            for e in entries {
                ctx.out.map_len(7);
                ctx.out.bulk(b"count");
                ctx.out.int(e.count as i64);
                ctx.out.bulk(b"reason");
                ctx.out.bulk(e.reason.as_bytes());
                ctx.out.bulk(b"context");
                ctx.out.bulk(e.context.as_bytes());
                ctx.out.bulk(b"object");
                ctx.out.bulk(e.object.as_bytes());
                ctx.out.bulk(b"username");
                ctx.out.bulk(e.username.as_bytes());
                ctx.out.bulk(b"age-seconds");
                ctx.out.double(now.duration_since(e.created).as_secs_f64());
                ctx.out.bulk(b"client-info");
                ctx.out.bulk(e.client_info.as_bytes());
            }
        }
        "dryrun" => {
            let name = String::from_utf8_lossy(argv[2]);
            let Some(user) = acl.user(&name) else {
                return Err(err(format!("ERR User '{name}' not found")));
            };
            let Some(spec) = lookup(argv[3]) else {
                return Err(err(format!("ERR Command '{}' not found", String::from_utf8_lossy(argv[3]))));
            };
            let cmd = &argv[3..];
            if !arity_ok(spec, cmd.len()) {
                return Err(CmdError::WrongArgs(spec.name));
            }
            match user.check(spec.id.index(), cmd) {
                Ok(()) => ctx.out.ok(),
                Err(d) => ctx.out.bulk(d.dryrun_text().as_bytes()),
            }
        }
        "load" | "save" => return Err(err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")),
        _ => return Err(subcommand_error("acl", argv)),
    }
    Ok(())
}

fn selector_fields(ctx: &mut Ctx, s: &SelectorInfo) {
    ctx.out.bulk(b"commands");
    ctx.out.bulk(s.commands.as_bytes());
    ctx.out.bulk(b"keys");
    ctx.out.bulk(s.keys.as_bytes());
    ctx.out.bulk(b"channels");
    ctx.out.bulk(s.channels.as_bytes());
}

fn getuser(ctx: &mut Ctx, name: &[u8]) {
    let Some(u) = ctx.srv.acl.user(&String::from_utf8_lossy(name)) else {
        ctx.out.null();
        return;
    };
    let info = u.info();
    ctx.out.map_len(6);
    ctx.out.bulk(b"flags");
    ctx.out.array_len(info.flags.len());
    for f in &info.flags {
        ctx.out.bulk(f.as_bytes());
    }
    ctx.out.bulk(b"passwords");
    ctx.out.array_len(info.passwords.len());
    for p in &info.passwords {
        ctx.out.bulk(p.as_bytes());
    }
    selector_fields(ctx, &info.root);
    ctx.out.bulk(b"selectors");
    ctx.out.array_len(info.selectors.len());
    for s in &info.selectors {
        ctx.out.map_len(3);
        selector_fields(ctx, s);
    }
}
