//! FUNCTION (LOAD, LIST, DELETE, FLUSH, DUMP, RESTORE, STATS, KILL) and FCALL / FCALL_RO:
//! Redis 7's named Lua functions. Libraries live in `scripting::functions`; calls run through
//! the same machinery as EVAL (`script::run_lua`).

use super::args::{err, glob_match, is, subcommand_error, CmdError};
use super::script::{keys_and_args, namespace, run_lua, RunMode};
use super::{CmdResult, Ctx};
use crate::rdb::{crc64, put_str, Reader, RDB_VERSION};
use crate::scripting;

use crate::snapshot::OP_FUNCTION2;

pub fn fcall(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    fcall_generic(ctx, argv, false)
}
pub fn fcall_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    fcall_generic(ctx, argv, true)
}

fn fcall_generic(ctx: &mut Ctx, argv: &[&[u8]], ro_command: bool) -> CmdResult {
    // FCALL words a numkeys that is no number its own way (EVAL says "not an integer").
    if crate::protocol::parse_i64(argv[2]).is_none() {
        return Err(err("ERR Bad number of keys provided"));
    }
    let (keys, args) = keys_and_args(argv)?;
    let name = String::from_utf8_lossy(argv[1]).into_owned();
    let cache = ctx.srv.scripts.clone();
    let ns = namespace(ctx);
    let Some(f) = scripting::with_vm(&cache, |vm| vm.library_function(ns, &name)) else {
        return Err(err("ERR Function not found"));
    };
    let no_writes = f.flags.iter().any(|fl| fl == "no-writes");
    if ro_command && !no_writes {
        return Err(err("ERR Can not execute a script with write flag using *_ro command."));
    }
    // A function always declares its flags: never compatibility mode.
    run_lua(ctx, RunMode { readonly: ro_command || no_writes, deny_oom: false }, &name, true, keys, args, |_| Ok(f.f.clone()))
}

fn check(ctx: &Ctx, code: &str) -> Result<(String, scripting::functions::Library), CmdError> {
    scripting::with_vm(&ctx.srv.scripts, |vm| vm.check_library(code)).map_err(CmdError::Msg)
}

/// Parses a FUNCTION DUMP payload into the libraries' code.
fn parse_dump(p: &[u8]) -> Result<Vec<String>, CmdError> {
    let bad = || err("ERR payload version or checksum are wrong");
    if p.len() < 10 {
        return Err(bad());
    }
    let (body, footer) = p.split_at(p.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    if version > RDB_VERSION || crc64(&p[..p.len() - 8]) != crc {
        return Err(bad());
    }
    let mut r = Reader::new(body);
    let mut codes = Vec::new();
    while r.pos < body.len() {
        if r.byte()? != OP_FUNCTION2 {
            return Err(err("ERR given type is not a function"));
        }
        codes.push(String::from_utf8_lossy(&r.string()?).into_owned());
    }
    Ok(codes)
}

pub fn function(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
    let registry = &ctx.srv.scripts.functions;
    let ns = namespace(ctx);
    match (sub.as_str(), argv.len()) {
        ("load", n) if n >= 3 => {
            let mut replace = false;
            for option in &argv[2..n - 1] {
                if !is(option, "REPLACE") {
                    return Err(err(format!("ERR Unknown option given: {}", String::from_utf8_lossy(option))));
                }
                replace = true;
            }
            let code = String::from_utf8_lossy(argv[argv.len() - 1]).into_owned();
            let (name, lib) = check(ctx, &code)?;
            registry.add(ns, &name, lib, replace).map_err(CmdError::Msg)?;
            ctx.out.bulk(name.as_bytes());
        }
        ("delete", 3) => {
            if !registry.delete(ns, &String::from_utf8_lossy(argv[2])) {
                return Err(err("ERR Library not found"));
            }
            ctx.out.ok();
        }
        ("flush", 2 | 3) => {
            if let Some(m) = argv.get(2) {
                if !(is(m, "SYNC") || is(m, "ASYNC")) {
                    return Err(err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"));
                }
            }
            registry.flush(ns);
            ctx.out.ok();
        }
        ("list", n) if n >= 2 => {
            let (mut pattern, mut withcode) = (None, false);
            let mut i = 2;
            while i < argv.len() {
                if is(argv[i], "WITHCODE") && !withcode {
                    withcode = true;
                } else if is(argv[i], "LIBRARYNAME") && i + 1 < argv.len() && pattern.is_none() {
                    pattern = Some(argv[i + 1]);
                    i += 1;
                } else {
                    return Err(err(format!("ERR Unknown argument {}", String::from_utf8_lossy(argv[i]))));
                }
                i += 1;
            }
            let libs: Vec<_> = registry.libraries(ns).into_iter().filter(|(n, _)| pattern.is_none_or(|p| glob_match(p, n.as_bytes(), false))).collect();
            ctx.out.array_len(libs.len());
            for (name, lib) in libs {
                ctx.out.map_len(if withcode { 4 } else { 3 });
                ctx.out.bulk(b"library_name");
                ctx.out.bulk(name.as_bytes());
                ctx.out.bulk(b"engine");
                ctx.out.bulk(b"LUA");
                ctx.out.bulk(b"functions");
                ctx.out.array_len(lib.functions.len());
                for (fname, flags) in &lib.functions {
                    ctx.out.map_len(3);
                    ctx.out.bulk(b"name");
                    ctx.out.bulk(fname.as_bytes());
                    ctx.out.bulk(b"description");
                    ctx.out.null();
                    ctx.out.bulk(b"flags");
                    ctx.out.set_len(flags.len());
                    for f in flags {
                        ctx.out.bulk(f.as_bytes());
                    }
                }
                if withcode {
                    ctx.out.bulk(b"library_code");
                    ctx.out.bulk(lib.code.as_bytes());
                }
            }
        }
        ("dump", 2) => {
            let mut out = Vec::new();
            for lib in registry.libraries(ns).values() {
                out.push(OP_FUNCTION2);
                put_str(&mut out, lib.code.as_bytes());
            }
            out.extend_from_slice(&RDB_VERSION.to_le_bytes());
            let crc = crc64(&out);
            out.extend_from_slice(&crc.to_le_bytes());
            ctx.out.bulk(&out);
        }
        ("restore", 3 | 4) => {
            let policy = match argv.get(3) {
                None => "APPEND".to_string(),
                Some(p) if is(p, "APPEND") || is(p, "REPLACE") || is(p, "FLUSH") => String::from_utf8_lossy(p).to_ascii_uppercase(),
                Some(_) => return Err(err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")),
            };
            let codes = parse_dump(argv[2])?;
            let mut checked = Vec::with_capacity(codes.len());
            for code in &codes {
                checked.push(check(ctx, code)?);
            }
            if policy != "REPLACE" && policy != "FLUSH" {
                let existing = registry.libraries(ns);
                if let Some((name, _)) = checked.iter().find(|(n, _)| existing.contains_key(n)) {
                    return Err(err(format!("ERR Library {name} already exists")));
                }
            }
            if policy == "FLUSH" {
                registry.flush(ns);
            }
            for (name, lib) in checked {
                registry.add(ns, &name, lib, policy != "APPEND").map_err(CmdError::Msg)?;
            }
            ctx.out.ok();
        }
        ("stats", 2) => ctx.srv.scripts.write_stats(ns, &mut ctx.out),
        ("kill", 2) => {
            super::script::kill_running(ctx, true)?;
            ctx.out.ok();
        }
        ("help", 2) => ctx.out.help(&[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries.",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload.",
            "STATS",
            "    Return information about the current function running.",
            "KILL",
            "    Kill the current running function.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => return Err(subcommand_error("function", argv)),
    }
    Ok(())
}
