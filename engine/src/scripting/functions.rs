//! Redis 7 functions: libraries of Lua code (`#!lua name=<lib>`) that register named
//! functions with `redis.register_function`, called with FCALL. The libraries' code is
//! shared by all threads; each thread's VM loads them when the set of libraries changes.
//! Libraries belong to a namespace (a tenant's): FUNCTION LOAD, LIST, FLUSH and FCALL see
//! the caller's namespace's alone, so tenants sharing an engine never call, list or remove
//! each other's functions.

#[cfg(feature = "lua")]
use std::cell::RefCell;
use std::collections::BTreeMap;
#[cfg(feature = "lua")]
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(feature = "lua")]
use mlua::{Function, Lua, Table, Value};
use parking_lot::Mutex;

/// Flags a function may declare.
pub const FLAGS: &[&str] = &["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

/// A library as stored: its code and what it registers.
#[derive(Clone, Debug)]
pub struct Library {
    pub code: String,
    /// Function name → flags.
    pub functions: BTreeMap<String, Vec<String>>,
}

/// A namespace's libraries by name.
pub type Libraries = BTreeMap<String, Library>;

#[derive(Default)]
pub struct Registry {
    /// Per namespace.
    libs: Mutex<BTreeMap<usize, Libraries>>,
    generation: AtomicU64,
}

/// A function as a thread's VM holds it.
#[cfg(feature = "lua")]
#[derive(Clone)]
pub struct Loaded {
    pub f: Function,
    pub flags: Vec<String>,
}

fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Splits `#!lua name=<lib>` off the code; returns the library name and the body (which
/// keeps the shebang's line break, so line numbers match the submitted code).
pub fn parse_header(code: &str) -> Result<(String, &str), String> {
    let Some(rest) = code.strip_prefix("#!") else {
        return Err("ERR Missing library metadata".into());
    };
    let (line, body) = match rest.find('\n') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    // The engine is what follows `#!` up to the first space (`#! name=x` names none).
    let (engine, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let parts = rest.split_whitespace();
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for p in parts {
        match p.strip_prefix("name=") {
            // (Redis splits the line as a shell would: `name="foo"` names foo.)
            Some(_) if name.is_some() => return Err("ERR Invalid metadata value, name argument was given multiple times".into()),
            Some(n) => name = Some(n.strip_prefix('"').and_then(|q| q.strip_suffix('"')).unwrap_or(n).to_string()),
            None => return Err(format!("ERR Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    if !valid_name(&name) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok((name, body))
}

/// How long a library's code may run while it loads (Redis's, fixed).
#[cfg(feature = "lua")]
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

#[cfg(feature = "lua")]
thread_local! {
    /// When the library loading on this thread must have finished (the VM's hook checks it).
    static LOAD_DEADLINE: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
}

/// Whether a library loading on this thread has run past its time.
#[cfg(feature = "lua")]
pub fn load_overran() -> bool {
    LOAD_DEADLINE.with(|d| d.get().is_some_and(|at| std::time::Instant::now() > at))
}

#[cfg(feature = "lua")]
/// Runs a library's body in `lua` with `redis.register_function` available; returns what it
/// registered. `redis` is the VM's shared `redis` table. The body may run for
/// `LOAD_TIMEOUT` at most ("FUNCTION LOAD timeout").
pub fn load(lua: &Lua, redis: &Table, body: &str) -> Result<BTreeMap<String, Loaded>, String> {
    LOAD_DEADLINE.with(|d| d.set(Some(std::time::Instant::now() + LOAD_TIMEOUT)));
    let loaded = load_within(lua, redis, body);
    LOAD_DEADLINE.with(|d| d.set(None));
    loaded
}

#[cfg(feature = "lua")]
fn load_within(lua: &Lua, redis: &Table, body: &str) -> Result<BTreeMap<String, Loaded>, String> {
    let registered: RefCell<BTreeMap<String, Loaded>> = RefCell::new(BTreeMap::new());
    let chunk = {
        let env = lua.create_table().map_err(|e| format!("ERR {e}"))?;
        let meta = lua.create_table().map_err(|e| format!("ERR {e}"))?;
        meta.raw_set("__index", lua.globals()).map_err(|e| format!("ERR {e}"))?;
        // A library's globals are read-only too, at load and when its functions run (Redis 7).
        let refuse: Function =
            lua.load("return function() error('Attempt to modify a readonly table', 2) end").set_name("=readonly").eval().map_err(|e| format!("ERR {e}"))?;
        meta.raw_set("__newindex", refuse).map_err(|e| format!("ERR {e}"))?;
        env.set_metatable(Some(meta)).map_err(|e| format!("ERR {e}"))?;
        lua.load(body).set_name("@user_function").set_environment(env).into_function().map_err(|e| {
            let msg = match &e {
                mlua::Error::SyntaxError { message, .. } => message.clone(),
                other => other.to_string(),
            };
            format!("ERR Error compiling function: {msg}")
        })?
    };
    let run = lua.scope(|scope| {
        let register = scope.create_function(|_, args: mlua::MultiValue| {
            let fail = |m: &str| mlua::Error::RuntimeError(m.to_string());
            let (name, callback, flags) = match args.len() {
                1 => {
                    let Some(Value::Table(t)) = args.front() else {
                        return Err(fail(
                            "ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
                        ));
                    };
                    let name: Option<String> = t.raw_get("function_name").ok();
                    let cb: Option<Function> = t.raw_get("callback").ok();
                    let flags: Option<Table> = t.raw_get("flags").ok();
                    let name = name.ok_or_else(|| fail("ERR redis.register_function must get a function name argument"))?;
                    let cb = cb.ok_or_else(|| fail("ERR redis.register_function must get a callback argument"))?;
                    let mut fl = Vec::new();
                    if let Some(ft) = flags {
                        for v in ft.sequence_values::<String>() {
                            let v = v.map_err(|_| fail("ERR unknown flag given"))?;
                            if !FLAGS.contains(&v.as_str()) {
                                return Err(fail("ERR unknown flag given"));
                            }
                            fl.push(v);
                        }
                    }
                    (name, cb, fl)
                }
                2 => {
                    let mut it = args.into_iter();
                    let name = match it.next() {
                        Some(Value::String(s)) => s.to_str().map(|s| s.to_string()).map_err(|_| fail("ERR wrong function name"))?,
                        _ => return Err(fail("ERR first argument to redis.register_function must be a string")),
                    };
                    let cb = match it.next() {
                        Some(Value::Function(f)) => f,
                        _ => return Err(fail("ERR second argument to redis.register_function must be a function")),
                    };
                    (name, cb, Vec::new())
                }
                _ => return Err(fail("ERR wrong number of arguments to redis.register_function")),
            };
            if !valid_name(&name) {
                // (Redis 7.0 words a bad function name as a bad library name.)
                return Err(fail("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
            }
            let mut reg = registered.borrow_mut();
            if reg.contains_key(&name) {
                return Err(fail("ERR Function already exists in the library"));
            }
            reg.insert(name, Loaded { f: callback, flags });
            Ok(())
        })?;
        redis.raw_set("register_function", register)?;
        let r = chunk.call::<()>(());
        redis.raw_set("register_function", Value::Nil)?;
        Ok(r)
    });
    match run {
        Ok(Ok(())) => {}
        Ok(Err(e)) | Err(e) => {
            let (msg, _) = super::libs::root_error(&e);
            let msg = if msg.starts_with("ERR ") { msg } else { format!("ERR {msg}") };
            return Err(format!("ERR Error registering functions: {msg}"));
        }
    }
    let registered = registered.into_inner();
    if registered.is_empty() {
        return Err("ERR No functions registered".into());
    }
    Ok(registered)
}

impl Registry {
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// A function's declared flags, if namespace `ns` has it.
    pub fn flags_of(&self, ns: usize, function: &str) -> Option<Vec<String>> {
        let libs = self.libs.lock();
        libs.get(&ns)?.values().find_map(|l| l.functions.iter().find(|(f, _)| f.eq_ignore_ascii_case(function)).map(|(_, flags)| flags.clone()))
    }

    /// Namespace `ns`'s libraries.
    pub fn libraries(&self, ns: usize) -> Libraries {
        self.libs.lock().get(&ns).cloned().unwrap_or_default()
    }

    /// Every namespace's libraries.
    pub fn all(&self) -> BTreeMap<usize, Libraries> {
        self.libs.lock().clone()
    }

    /// Adds (or with `replace`, replaces) a validated library of namespace `ns`.
    pub fn add(&self, ns: usize, name: &str, lib: Library, replace: bool) -> Result<(), String> {
        let mut all = self.libs.lock();
        let libs = all.entry(ns).or_default();
        if libs.contains_key(name) && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        for (other, l) in libs.iter() {
            if other != name {
                if let Some(f) = lib.functions.keys().find(|f| l.functions.keys().any(|g| g.eq_ignore_ascii_case(f))) {
                    return Err(format!("ERR Function {f} already exists"));
                }
            }
        }
        libs.insert(name.to_string(), lib);
        drop(all);
        self.bump();
        Ok(())
    }

    pub fn delete(&self, ns: usize, name: &str) -> bool {
        let removed = self.libs.lock().get_mut(&ns).is_some_and(|libs| libs.remove(name).is_some());
        if removed {
            self.bump();
        }
        removed
    }

    /// FUNCTION FLUSH: namespace `ns`'s libraries go; other namespaces' stay.
    pub fn flush(&self, ns: usize) {
        self.libs.lock().remove(&ns);
        self.bump();
    }

    /// Namespace `ns`'s libraries and functions.
    pub fn counts(&self, ns: usize) -> (usize, usize) {
        let all = self.libs.lock();
        all.get(&ns).map_or((0, 0), |libs| (libs.len(), libs.values().map(|l| l.functions.len()).sum()))
    }
}

/// A thread's loaded functions by (namespace, name), rebuilt when the registry's generation
/// moves.
#[cfg(feature = "lua")]
#[derive(Default)]
pub struct ThreadFunctions {
    pub generation: u64,
    pub functions: HashMap<(usize, String), Loaded>,
}
