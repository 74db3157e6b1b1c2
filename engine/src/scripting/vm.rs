//! One thread's Lua VM: the sandbox every script runs in (`new_vm`), the functions it
//! compiled, and the FUNCTION libraries it loaded.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use super::libs::{self, CallError};
use super::{functions, ScriptCache};

/// One thread's Lua state and the functions it compiled.
pub struct Vm {
    pub lua: Lua,
    /// The cache (and SCRIPT KILL flag) this VM serves.
    cache: Arc<ScriptCache>,
    compiled: HashMap<String, Function>,
    generation: u64,
    /// The `redis` table (call/pcall are installed per run).
    pub redis: Table,
    /// Where the globals live behind the read-only globals table (KEYS and ARGV go here).
    globals: Table,
    /// Runs the user function under Redis's error handler.
    runner: Function,
    /// The FUNCTION libraries this thread has loaded.
    fns: functions::ThreadFunctions,
}

thread_local! {
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

/// Why a script could not run or failed.
#[derive(Debug)]
pub enum ScriptError {
    /// The body does not compile.
    Compile(String),
    /// The error reply to send (already formatted with its code).
    Reply(String),
}

/// Sets up the sandbox every script runs in.
fn new_vm(cache: &Arc<ScriptCache>) -> mlua::Result<Vm> {
    let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
    let g = lua.globals();
    for name in ["print", "dofile", "loadfile", "newproxy", "getfenv", "setfenv", "require", "module", "package"] {
        g.raw_set(name, Value::Nil)?;
    }
    let redis = libs::redis_table(&lua)?;
    g.raw_set("redis", redis.clone())?;
    g.raw_set("bit", libs::bit_table(&lua)?)?;
    g.raw_set("cjson", super::cjson::table(&lua)?)?;
    g.raw_set("cmsgpack", libs::cmsgpack_table(&lua)?)?;
    g.raw_set("struct", libs::struct_table(&lua)?)?;
    libs::rand48_random(&lua)?;
    // SCRIPT KILL: checked every 100k instructions.
    let kill = cache.clone();
    lua.set_hook(HookTriggers::new().every_nth_instruction(100_000), move |lua, _| {
        if functions::load_overran() {
            return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
        }
        if kill.running.stop_requested_here() {
            let line = libs::script_line(lua);
            return Err(mlua::Error::external(CallError { err: "ERR Script killed by user with SCRIPT KILL...".into(), line }));
        }
        Ok(VmState::Continue)
    })?;
    let handler = lua.create_function(libs::error_handler)?;
    let runner = lua
        .load(
            r#"
            local handler = ...
            local xpcall = xpcall
            return function(f, ...)
                if select('#', ...) == 0 then return xpcall(f, handler) end
                local args = {...}
                return xpcall(function() return f(args[1], args[2]) end, handler)
            end
            "#,
        )
        .set_name("=runner")
        .call::<Function>(handler)?;
    // Globals and library tables are read-only, and reading an undefined global is an error
    // (as in Redis): `sandbox.lua`, which hands back the table the globals now live in. (The
    // runner above keeps the real xpcall; scripts get pcall/xpcall that let SCRIPT KILL's
    // error through, told by `killed`.)
    let killed_cache = cache.clone();
    let killed = lua.create_function(move |_, ()| Ok(killed_cache.running.stop_requested_here()))?;
    let globals: Table = lua.load(include_str!("sandbox.lua")).set_name("=sandbox").call(killed)?;
    // (Compiling and loading libraries are bounded as runs are.)
    lua.set_memory_limit(lua.used_memory() + cache.run_memory_limit.load(Ordering::Relaxed) as usize)?;
    Ok(Vm { lua, cache: cache.clone(), compiled: HashMap::new(), generation: 0, redis, globals, runner, fns: Default::default() })
}

/// Runs `f` with this thread's VM (created on first use), after dropping compiled functions
/// if SCRIPT FLUSH ran since.
pub fn with_vm<R>(cache: &Arc<ScriptCache>, f: impl FnOnce(&mut Vm) -> R) -> R {
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|vm| !Arc::ptr_eq(&vm.cache, cache)) {
            *slot = Some(new_vm(cache).expect("the Lua sandbox sets up"));
        }
        let vm = slot.as_mut().expect("just created");
        let generation = cache.generation.load(Ordering::Acquire);
        if vm.generation != generation {
            vm.compiled.clear();
            vm.generation = generation;
        }
        f(vm)
    })
}

impl Vm {
    /// A FUNCTION of namespace `ns` by name, (re)loading the libraries if they changed since
    /// this thread last looked.
    pub fn library_function(&mut self, ns: usize, name: &str) -> Option<functions::Loaded> {
        let registry = &self.cache.functions;
        let generation = registry.generation();
        if self.fns.generation != generation {
            self.fns.functions.clear();
            for (space, libs) in registry.all() {
                for (lib, l) in libs {
                    let body = functions::parse_header(&l.code).map(|(_, b)| b.to_string()).unwrap_or_default();
                    match functions::load(&self.lua, &self.redis, &body) {
                        Ok(fs) => self.fns.functions.extend(fs.into_iter().map(|(f, loaded)| ((space, f), loaded))),
                        Err(e) => tracing::warn!(library = %lib, "library failed to load on this thread: {e}"),
                    }
                }
            }
            self.fns.generation = generation;
        }
        // Function names are case-insensitive, as in Redis 7.
        let key = (ns, name.to_string());
        let found =
            self.fns.functions.get(&key).or_else(|| self.fns.functions.iter().find(|((s, k), _)| *s == ns && k.eq_ignore_ascii_case(name)).map(|(_, f)| f));
        found.cloned()
    }

    /// Validates a library's code by loading it here; returns its name and what it registers.
    pub fn check_library(&self, code: &str) -> Result<(String, functions::Library), String> {
        let (name, body) = functions::parse_header(code)?;
        let loaded = functions::load(&self.lua, &self.redis, body)?;
        let functions = loaded.into_iter().map(|(n, l)| (n, l.flags)).collect();
        Ok((name, functions::Library { code: code.to_string(), functions }))
    }

    /// The compiled function for a body (compiling it on first use).
    pub fn function(&mut self, sha: &str, body: &[u8]) -> Result<Function, ScriptError> {
        if let Some(f) = self.compiled.get(sha) {
            return Ok(f.clone());
        }
        let f = compile(&self.lua, body)?;
        self.compiled.insert(sha.to_string(), f.clone());
        Ok(f)
    }

    /// Runs a script (`as_function` false: KEYS/ARGV globals, chunk `@user_script`) or a
    /// library function (true: called with `keys, args`, chunk `@user_function`).
    pub fn run_as(&self, f: &Function, keys: &[&[u8]], args: &[&[u8]], name: &str, as_function: bool) -> Result<Value, ScriptError> {
        let lua = &self.lua;
        let g = &self.globals;
        let to_table = |items: &[&[u8]]| -> mlua::Result<Table> {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, a) in items.iter().enumerate() {
                t.raw_seti(i + 1, lua.create_string(a)?)?;
            }
            Ok(t)
        };
        let setup = || -> mlua::Result<(Table, Table)> {
            let (k, a) = (to_table(keys)?, to_table(args)?);
            if !as_function {
                g.raw_set("KEYS", k.clone())?;
                g.raw_set("ARGV", a.clone())?;
            }
            libs::reset_run_state(lua)?;
            Ok((k, a))
        };
        let (k, a) = setup().map_err(|e| ScriptError::Reply(format!("ERR {e}")))?;
        // The run's heap is bounded (from here: its arguments are the request's) and its
        // garbage collected when it grew much, so no script keeps memory after it ends.
        let base = lua.used_memory();
        let limit = self.cache.run_memory_limit.load(Ordering::Relaxed) as usize;
        let _ = lua.set_memory_limit(base.saturating_add(limit));
        let out = if as_function { self.runner.call::<MultiValue>((f.clone(), k, a)) } else { self.runner.call::<MultiValue>(f.clone()) };
        if lua.used_memory() > base.saturating_add(super::COLLECT_AFTER_GROWTH) {
            let _ = lua.gc_collect();
        }
        let mut vals = match out {
            Ok(v) => v.into_iter(),
            Err(e) => return Err(ScriptError::Reply(format!("ERR {e} script: {name}"))),
        };
        let ok = matches!(vals.next(), Some(Value::Boolean(true)));
        let v = vals.next().unwrap_or(Value::Nil);
        if ok {
            return Ok(v);
        }
        let chunk = if as_function { "@user_function" } else { "@user_script" };
        Err(ScriptError::Reply(libs::error_reply_text(&v, name, chunk)))
    }
}

/// Compiles a script body as Redis does (chunk name `@user_script`), after its shebang line
/// if it has one (checked here, so SCRIPT LOAD refuses a bad one too).
pub fn compile(lua: &Lua, body: &[u8]) -> Result<Function, ScriptError> {
    let code = match super::shebang::parse(body) {
        Ok(Some((_, shebang_len))) => &body[shebang_len..],
        Ok(None) => body,
        Err(e) => return Err(ScriptError::Compile(format!("ERR {e}"))),
    };
    // Never a precompiled chunk (Redis refuses bytecode: a crafted one corrupts the VM).
    if code.first() == Some(&0x1b) {
        return Err(ScriptError::Compile("ERR Error compiling script (new function): user_script: bytecode is not allowed".into()));
    }
    lua.load(code).set_name("@user_script").into_function().map_err(|e| {
        let msg = match &e {
            mlua::Error::SyntaxError { message, .. } => message.clone(),
            other => other.to_string(),
        };
        ScriptError::Compile(format!("ERR Error compiling script (new function): {msg}"))
    })
}

/// Convenience: whether a Lua value is a table carrying `field`.
pub fn table_field(v: &Value, field: &str) -> Option<Value> {
    match v {
        Value::Table(t) => t.raw_get::<Value>(field).ok().filter(|v| !v.is_nil()),
        _ => None,
    }
}
