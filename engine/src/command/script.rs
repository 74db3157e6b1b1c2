//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT. The Lua side is in `crate::scripting`;
//! here a script's `redis.call` runs command handlers on the EVAL's locks (every shard of its
//! namespace, like EXEC) and converts their replies.

use std::cell::RefCell;
use std::sync::atomic::Ordering;

use mlua::{Function, Lua, MultiValue, Value};

use super::args::{err, int, is, subcommand_error, CmdError};
use super::pipeline::{nested, Nested, Origin};
use super::{CmdResult, Ctx};
use crate::scripting::{self, lua_to_reply, reply_to_lua, ScriptError};

pub fn eval(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, argv, false, false)
}
pub fn evalsha(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, argv, true, false)
}
pub fn eval_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, argv, false, true)
}
pub fn evalsha_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, argv, true, true)
}

fn error_table(lua: &Lua, msg: &str) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", msg)?;
    Ok(Value::Table(t))
}

/// What `redis.call(...)` does: the command through the pipeline (admitted as a script's
/// call, run on the script's locks), its reply converted to Lua.
fn script_call(lua: &Lua, ctx: &mut Ctx, args: MultiValue, mode: RunMode) -> mlua::Result<(bool, Value)> {
    let fail = |msg: &str| -> mlua::Result<(bool, Value)> { Ok((false, error_table(lua, msg)?)) };
    let argv = match scripting::call_args(&args) {
        Ok(a) => a,
        Err(msg) => return fail(msg),
    };
    let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    let saved_resp3 = ctx.out.resp3;
    ctx.out.resp3 = scripting::resp_version(lua) == 3;
    let start_len = ctx.out.buf.len();
    // Compatibility mode refuses commands that may grow memory while out of memory, until
    // the script has written (then it must not stop halfway).
    let slot = ctx.srv.scripts.running.slot(namespace(ctx));
    let deny_oom = mode.deny_oom && !slot.wrote.load(Ordering::Relaxed);
    let ran = nested(ctx, Origin::Script { readonly: mode.readonly, deny_oom }, &argv);
    let reply = ctx.out.buf.split_off(start_len);
    ctx.out.resp3 = saved_resp3;
    match ran {
        Nested::Refused(error) => fail(&error),
        Nested::Ran(spec) => {
            if spec.write {
                ctx.srv.scripts.running.slot(namespace(ctx)).wrote.store(true, Ordering::Relaxed);
            }
            let (v, _) = reply_to_lua(lua, &reply)?;
            if let Some(e) = scripting::table_field(&v, "err") {
                let msg = e.to_string().unwrap_or_default();
                return fail(&msg);
            }
            Ok((true, v))
        }
    }
}

/// How a script's commands are admitted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunMode {
    /// EVAL_RO, EVALSHA_RO, FCALL_RO, or a script that declared `no-writes`.
    pub readonly: bool,
    /// A script without a shebang (Redis's compatibility mode): commands that may grow
    /// memory are refused while the server is out of memory.
    pub deny_oom: bool,
}

/// A script's KEYS and ARGV.
pub(crate) type KeysAndArgs<'a, 'b> = (&'b [&'a [u8]], &'b [&'a [u8]]);

/// `name numkeys key... arg...` of EVAL and FCALL.
pub(crate) fn keys_and_args<'a, 'b>(argv: &'b [&'a [u8]]) -> Result<KeysAndArgs<'a, 'b>, CmdError> {
    let numkeys = int(argv[2])?;
    if numkeys < 0 {
        return Err(err("ERR Number of keys can't be negative"));
    }
    if numkeys as usize > argv.len() - 3 {
        return Err(err("ERR Number of keys can't be greater than number of args"));
    }
    Ok((&argv[3..3 + numkeys as usize], &argv[3 + numkeys as usize..]))
}

/// The namespace whose scripts and functions the caller sees (its tenant's).
pub(crate) fn namespace(ctx: &Ctx) -> usize {
    ctx.conn.ns_base / crate::keyspace::NUM_DBS
}

fn eval_generic(ctx: &mut Ctx, argv: &[&[u8]], by_sha: bool, readonly: bool) -> CmdResult {
    let (keys, args) = keys_and_args(argv)?;
    let cache = ctx.srv.scripts.clone();
    let (sha, body) = if by_sha {
        let sha = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
        match cache.get(namespace(ctx), &sha) {
            Some(b) => (sha, b),
            None => return Err(err("NOSCRIPT No matching script. Please use EVAL.")),
        }
    } else {
        (scripting::sha1_hex(argv[1]), std::sync::Arc::from(argv[1]))
    };
    let declared = scripting::shebang::parse(&body).map_err(|e| err(format!("ERR {e}")))?.map(|(d, _)| d);
    if readonly && declared.is_some_and(|d| !d.no_writes) {
        return Err(err("ERR Can not execute a script with write flag using *_ro command."));
    }
    let mode = RunMode { readonly: readonly || declared.is_some_and(|d| d.no_writes), deny_oom: declared.is_none() };
    let source = if by_sha { None } else { Some(body.clone()) };
    let ns = namespace(ctx);
    run_lua(ctx, mode, &sha, false, keys, args, |vm| {
        let f = vm.function(&sha, &body)?;
        if let Some(b) = &source {
            cache.insert(ns, b);
        }
        Ok(f)
    })
}

/// Runs a script or a library function (`as_function`) as its caller's command: with
/// `redis.call`/`pcall` bound to this command's context, atomically (the EVAL/FCALL holds
/// every shard of its namespace), SCRIPT KILL-able, and its value written as the reply.
pub(crate) fn run_lua(
    ctx: &mut Ctx,
    mode: RunMode,
    name: &str,
    as_function: bool,
    keys: &[&[u8]],
    args: &[&[u8]],
    get: impl FnOnce(&mut scripting::Vm) -> Result<Function, ScriptError>,
) -> CmdResult {
    let cache = ctx.srv.scripts.clone();
    let (db, in_exec, in_script) = (ctx.conn.db, ctx.in_exec, ctx.in_script);
    ctx.in_exec = true;
    ctx.in_script = true;
    let numkeys = keys.len().to_string();
    let command = [ctx.spec.name.as_bytes(), name.as_bytes(), numkeys.as_bytes()].into_iter().chain(keys.iter().copied()).chain(args.iter().copied());
    let runner = scripting::running::Runner {
        client: ctx.conn.info.id,
        reactor: ctx.conn.info.reactor.load(Ordering::Relaxed),
        function: as_function,
        name,
        command: command.map(<[u8]>::to_vec).collect(),
    };
    let running = cache.running.start(namespace(ctx), runner);
    let outcome = scripting::with_vm(&cache, |vm| -> Result<(Value, bool), ScriptError> {
        let f: Function = get(vm)?;
        let ctx_cell = RefCell::new(&mut *ctx);
        let run = vm.lua.scope(|scope| {
            // redis.call raises the command's error (with the calling line); redis.pcall
            // returns it as an error table. Both are Rust functions, so a `return
            // redis.call(...)` tail call keeps the script's frame for the line number.
            let call = scope.create_function(|lua, a: MultiValue| {
                let mut c = ctx_cell.borrow_mut();
                match script_call(lua, &mut c, a, mode)? {
                    (true, v) => Ok(v),
                    (false, e) => {
                        let err = scripting::table_field(&e, "err").and_then(|v| v.to_string().ok()).unwrap_or_default();
                        Err(mlua::Error::external(scripting::CallError { err, line: scripting::script_line(lua) }))
                    }
                }
            })?;
            let pcall = scope.create_function(|lua, a: MultiValue| {
                let mut c = ctx_cell.borrow_mut();
                script_call(lua, &mut c, a, mode).map(|(_, v)| v)
            })?;
            // redis.acl_check_cmd: whether the caller's user may run a command (as given).
            let acl_check = scope.create_function(|lua, a: MultiValue| {
                let argv = scripting::call_args(&a).map_err(|m| mlua::Error::RuntimeError(m.into()))?;
                let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                let Some(spec) = argv.first().and_then(|name| super::lookup(name)).filter(|s| super::arity_ok(s, argv.len())) else {
                    let err = "ERR Invalid command passed to redis.acl_check_cmd()".to_string();
                    return Err(mlua::Error::external(scripting::CallError { err, line: scripting::script_line(lua) }));
                };
                let c = ctx_cell.borrow();
                Ok(c.conn.user.check(spec.id.index(), &argv).is_ok())
            })?;
            vm.redis.raw_set("call", call)?;
            vm.redis.raw_set("pcall", pcall)?;
            vm.redis.raw_set("acl_check_cmd", acl_check)?;
            let r = vm.run_as(&f, keys, args, name, as_function);
            vm.redis.raw_set("call", Value::Nil)?;
            vm.redis.raw_set("pcall", Value::Nil)?;
            vm.redis.raw_set("acl_check_cmd", Value::Nil)?;
            Ok(r)
        });
        let result = run.map_err(|e| ScriptError::Reply(format!("ERR {e}")))??;
        Ok((result, scripting::resp_version(&vm.lua) == 3))
    });
    drop(running);
    ctx.in_exec = in_exec;
    ctx.in_script = in_script;
    // SELECT inside a script does not change the caller's database.
    ctx.conn.db = db;
    ctx.data.db = db;
    ctx.conn.info.db.store(db - ctx.conn.ns_base, Ordering::Relaxed);
    match outcome {
        Ok((v, resp3)) => {
            lua_to_reply(&mut ctx.out, &v, resp3, 0);
            Ok(())
        }
        Err(ScriptError::Compile(msg)) | Err(ScriptError::Reply(msg)) => Err(CmdError::Msg(msg)),
    }
}

/// SCRIPT KILL (`function` false) / FUNCTION KILL: asks the caller's namespace's running
/// script to stop (another tenant's is not the caller's to stop, nor to see).
pub(crate) fn kill_running(ctx: &Ctx, function: bool) -> Result<(), CmdError> {
    ctx.srv.scripts.running.kill(namespace(ctx), function).map_err(err)
}

pub fn script(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(argv[1]).to_ascii_lowercase();
    let cache = ctx.srv.scripts.clone();
    match (sub.as_str(), argv.len()) {
        ("load", 3) => {
            scripting::with_vm(&cache, |vm| scripting::compile(&vm.lua, argv[2]).map(|_| ())).map_err(|e| match e {
                ScriptError::Compile(m) | ScriptError::Reply(m) => CmdError::Msg(m),
            })?;
            let sha = cache.insert(namespace(ctx), argv[2]);
            ctx.out.bulk(sha.as_bytes());
        }
        ("exists", n) if n >= 3 => {
            ctx.out.array_len(n - 2);
            for sha in &argv[2..] {
                let known = cache.contains(namespace(ctx), &String::from_utf8_lossy(sha).to_ascii_lowercase());
                ctx.out.int(known as i64);
            }
        }
        ("flush", 2 | 3) => {
            if let Some(mode) = argv.get(2) {
                if !(is(mode, "SYNC") || is(mode, "ASYNC")) {
                    return Err(err("ERR SCRIPT FLUSH only support SYNC|ASYNC option"));
                }
            }
            cache.flush(namespace(ctx));
            ctx.out.ok();
        }
        ("kill", 2) => {
            kill_running(ctx, false)?;
            ctx.out.ok();
        }
        ("debug", 3) => return Err(err("ERR SCRIPT DEBUG (the Lua debugger) is not supported by Terrace")),
        ("help", 2) => ctx.out.help(&[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => return Err(subcommand_error("script", argv)),
    }
    Ok(())
}
