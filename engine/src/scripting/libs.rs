//! The libraries a script sees beside Lua's own: `redis` (minus `call`/`pcall`, which the
//! EVAL handler installs per run), `bit` (LuaBitOp), `cmsgpack`, `struct` (`cjson` is
//! `super::cjson`), Redis's rand48
//! `math.random`, and the error handler that shapes failures into Redis's error replies.
//!
//! bit, cjson, cmsgpack and struct are C libraries in Redis; no maintained crate provides them as Lua
//! modules for mlua, so they are written here against their documented behaviour.

use std::cell::Cell;

use mlua::{Lua, MultiValue, Table, Value, Variadic};

use terrace_commands::REDIS_VERSION;

/// The `redis` table's fixed members.
pub fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "error_reply",
        lua.create_function(|lua, s: mlua::LuaString| {
            let t = lua.create_table()?;
            t.raw_set("err", s)?;
            Ok(t)
        })?,
    )?;
    t.raw_set(
        "status_reply",
        lua.create_function(|lua, s: mlua::LuaString| {
            let t = lua.create_table()?;
            t.raw_set("ok", s)?;
            Ok(t)
        })?,
    )?;
    t.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: Variadic<Value>| match args.first() {
            Some(v) if args.len() == 1 => {
                let text = lua.coerce_string(v.clone())?.ok_or_else(|| mlua::Error::RuntimeError("wrong number of arguments".into()))?;
                Ok(super::sha1_hex(&text.as_bytes()))
            }
            _ => Err(mlua::Error::RuntimeError("wrong number of arguments".into())),
        })?,
    )?;
    t.raw_set(
        "log",
        lua.create_function(|_, args: Variadic<Value>| {
            let level = args.first().and_then(|v| v.as_integer().or_else(|| v.as_number().map(|n| n as i64))).unwrap_or(0);
            let msg: Vec<String> = args.iter().skip(1).map(|v| v.to_string().unwrap_or_default()).collect();
            let msg = msg.join(" ");
            match level {
                0 | 1 => tracing::debug!(target: "script", "{msg}"),
                2 => tracing::info!(target: "script", "{msg}"),
                _ => tracing::warn!(target: "script", "{msg}"),
            }
            Ok(())
        })?,
    )?;
    for (name, v) in [("LOG_DEBUG", 0), ("LOG_VERBOSE", 1), ("LOG_NOTICE", 2), ("LOG_WARNING", 3)] {
        t.raw_set(name, v)?;
    }
    for (name, v) in [("REPL_NONE", 0), ("REPL_AOF", 1), ("REPL_SLAVE", 2), ("REPL_REPLICA", 2), ("REPL_ALL", 3)] {
        t.raw_set(name, v)?;
    }
    t.raw_set(
        "setresp",
        lua.create_function(|lua, v: Value| {
            let n = v.as_integer().or_else(|| v.as_number().map(|n| n as i64));
            match n {
                Some(2) | Some(3) => lua.set_named_registry_value("resp", n.unwrap()),
                _ => Err(mlua::Error::external(CallError { err: "ERR RESP version must be 2 or 3.".into(), line: script_line(lua) })),
            }
        })?,
    )?;
    // Replication controls: an engine replicates nothing, so these only validate.
    t.raw_set("set_repl", lua.create_function(|_, _v: Value| Ok(()))?)?;
    t.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    t.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    t.raw_set("debug", lua.create_function(|_, _v: Variadic<Value>| Ok(()))?)?;
    t.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    let num = REDIS_VERSION.split('.').filter_map(|p| p.parse::<i64>().ok()).fold(0, |acc, p| acc * 256 + p);
    t.raw_set("REDIS_VERSION_NUM", num)?;
    Ok(t)
}

/// The RESP version `redis.call` replies are converted from (redis.setresp).
pub fn resp_version(lua: &Lua) -> i64 {
    lua.named_registry_value::<Option<i64>>("resp").ok().flatten().unwrap_or(2)
}

fn to_bit(v: f64) -> i32 {
    // LuaBitOp: numbers are taken modulo 2^32 and read as signed 32-bit integers.
    let m = v.rem_euclid(4294967296.0);
    (m as u64 as u32) as i32
}

fn num(v: &Value) -> mlua::Result<f64> {
    match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Number(n) => Ok(*n),
        Value::String(s) => {
            s.to_str().ok().and_then(|s| s.trim().parse::<f64>().ok()).ok_or_else(|| mlua::Error::RuntimeError("bad argument (number expected)".into()))
        }
        _ => Err(mlua::Error::RuntimeError("bad argument (number expected)".into())),
    }
}

/// LuaBitOp's `bit` table.
pub fn bit_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    type Fold = fn(i32, i32) -> i32;
    let folds: [(&str, Fold); 3] = [("band", |a, b| a & b), ("bor", |a, b| a | b), ("bxor", |a, b| a ^ b)];
    for (name, op) in folds {
        t.raw_set(
            name,
            lua.create_function(move |_, args: Variadic<Value>| {
                let mut it = args.iter();
                let first = to_bit(num(it.next().unwrap_or(&Value::Nil))?);
                it.try_fold(first, |acc, v| Ok::<_, mlua::Error>(op(acc, to_bit(num(v)?)))).map(|v| v as f64)
            })?,
        )?;
    }
    t.raw_set("tobit", lua.create_function(|_, v: Value| Ok(to_bit(num(&v)?) as f64))?)?;
    t.raw_set("bnot", lua.create_function(|_, v: Value| Ok(!to_bit(num(&v)?) as f64))?)?;
    t.raw_set("bswap", lua.create_function(|_, v: Value| Ok(to_bit(num(&v)?).swap_bytes() as f64))?)?;
    type Shift = fn(i32, u32) -> i32;
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |a, n| ((a as u32) << n) as i32),
        ("rshift", |a, n| ((a as u32) >> n) as i32),
        ("arshift", |a, n| a >> n),
        ("rol", |a, n| (a as u32).rotate_left(n) as i32),
        ("ror", |a, n| (a as u32).rotate_right(n) as i32),
    ];
    for (name, op) in shifts {
        t.raw_set(
            name,
            lua.create_function(move |_, (a, n): (Value, Value)| {
                let n = (to_bit(num(&n)?) as u32) & 31;
                Ok(op(to_bit(num(&a)?), n) as f64)
            })?,
        )?;
    }
    t.raw_set(
        "tohex",
        lua.create_function(|_, (v, n): (Value, Option<Value>)| {
            let x = to_bit(num(&v)?) as u32;
            let n = match n {
                Some(n) => to_bit(num(&n)?),
                None => 8,
            };
            // unsigned_abs: -2147483648 has no positive i32 (LuaBitOp takes it as 8 digits).
            let (upper, width) = if n < 0 { (true, n.unsigned_abs().min(8) as usize) } else { (false, n.min(8) as usize) };
            let s = if upper { format!("{x:08X}") } else { format!("{x:08x}") };
            Ok(s[8 - width..].to_string())
        })?,
    )?;
    Ok(t)
}

/// C's `%.<prec>g`.
pub fn format_g(n: f64, prec: usize) -> String {
    let mut buf = [0u8; 64];
    let fmt = format!("%.{prec}g\0");
    // SAFETY: the buffer is large enough for any %g rendering of a double with ≤ 17 digits,
    // and snprintf never writes past the length it is given.
    let len = unsafe { libc::snprintf(buf.as_mut_ptr() as *mut libc::c_char, buf.len(), fmt.as_ptr() as *const libc::c_char, n) };
    String::from_utf8_lossy(&buf[..(len.max(0) as usize).min(buf.len() - 1)]).into_owned()
}

thread_local! {
    /// Redis's `math.random` state: a 48-bit linear congruential generator (rand48), seeded
    /// from the OS when the thread's VM starts; `math.randomseed` reseeds it.
    static RAND48: Cell<u64> = const { Cell::new(0x1234ABCD330E) };
}

fn rand48_next() -> u32 {
    RAND48.with(|s| {
        let x = s.get().wrapping_mul(0x5DEECE66D).wrapping_add(0xB) & ((1 << 48) - 1);
        s.set(x);
        (x >> 17) as u32
    })
}

/// Replaces `math.random` / `math.randomseed` with Redis's rand48-based versions.
pub fn rand48_random(lua: &Lua) -> mlua::Result<()> {
    let mut seed = [0u8; 4];
    let _ = getrandom::fill(&mut seed);
    RAND48.with(|s| s.set(((u32::from_le_bytes(seed) as u64) << 16 | 0x330E) & ((1 << 48) - 1)));
    let math: Table = lua.globals().raw_get("math")?;
    math.raw_set(
        "random",
        lua.create_function(|_, args: Variadic<f64>| {
            let r = (rand48_next() % 2147483647) as f64 / 2147483647.0;
            match args.len() {
                0 => Ok(r),
                1 => {
                    let u = args[0].floor();
                    if u < 1.0 {
                        return Err(mlua::Error::RuntimeError("bad argument #1 to 'random' (interval is empty)".into()));
                    }
                    Ok((r * u).floor() + 1.0)
                }
                2 => {
                    let (l, u) = (args[0].floor(), args[1].floor());
                    if l > u {
                        return Err(mlua::Error::RuntimeError("bad argument #2 to 'random' (interval is empty)".into()));
                    }
                    Ok((r * (u - l + 1.0)).floor() + l)
                }
                _ => Err(mlua::Error::RuntimeError("wrong number of arguments".into())),
            }
        })?,
    )?;
    math.raw_set(
        "randomseed",
        lua.create_function(|_, seed: f64| {
            RAND48.with(|s| s.set((((seed as i64 as u64) << 16) | 0x330E) & ((1 << 48) - 1)));
            Ok(())
        })?,
    )?;
    Ok(())
}

/// Per-run state: scripts start in RESP2 (redis.setresp changes it for that run).
pub fn reset_run_state(lua: &Lua) -> mlua::Result<()> {
    lua.set_named_registry_value("resp", 2)
}

/// A failed `redis.call`: the command's error reply and the script line that called it.
#[derive(Debug)]
pub struct CallError {
    pub err: String,
    pub line: Option<usize>,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.err)
    }
}

impl std::error::Error for CallError {}

/// The innermost cause of an error raised through Rust callbacks: the reply text, and the
/// script line when it was a `redis.call` failure.
pub fn root_error(e: &mlua::Error) -> (String, Option<usize>) {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_error(cause),
        mlua::Error::WithContext { cause, .. } => root_error(cause),
        mlua::Error::RuntimeError(m) => (m.clone(), None),
        mlua::Error::ExternalError(inner) => match inner.downcast_ref::<CallError>() {
            Some(c) => (c.err.clone(), c.line),
            None => (inner.to_string(), None),
        },
        other => (other.to_string(), None),
    }
}

/// The message handler scripts run under (xpcall): turns any error into a table with `err`
/// (the reply text, with its code) and the line of the script where it happened.
pub fn error_handler(lua: &Lua, e: Value) -> mlua::Result<Table> {
    let t = match e {
        Value::Table(t) if t.raw_get::<Value>("err").map(|v| !v.is_nil()).unwrap_or(false) => t,
        Value::String(s) => {
            let t = lua.create_table()?;
            let msg = String::from_utf8_lossy(&s.as_bytes()).into_owned();
            t.raw_set("err", if msg.starts_with("ERR ") { msg } else { format!("ERR {msg}") })?;
            t
        }
        Value::Error(err) => {
            let t = lua.create_table()?;
            let (msg, line) = root_error(&err);
            match line {
                // A redis.call failure: the command's own error, as it came.
                Some(l) => {
                    t.raw_set("err", msg)?;
                    t.raw_set("line", l)?;
                }
                // A library function's error: positioned as luaL_error would.
                None => {
                    let msg = match script_line(lua) {
                        Some(l) if !msg.starts_with("user_script:") && !msg.starts_with("user_function:") => format!("user_script:{l}: {msg}"),
                        _ => msg,
                    };
                    t.raw_set("err", if msg.starts_with("ERR ") { msg } else { format!("ERR {msg}") })?
                }
            }
            t
        }
        other => {
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {}", other.to_string().unwrap_or_default()))?;
            t
        }
    };
    if t.raw_get::<Value>("line")?.is_nil() {
        if let Some(l) = script_line(lua) {
            t.raw_set("line", l)?;
        }
    }
    Ok(t)
}

/// The line the user script is at: the innermost stack frame of `@user_script` (frames of
/// the sandbox's own helpers and of C functions are skipped).
pub fn script_line(lua: &Lua) -> Option<usize> {
    (0..64).find_map(|level| {
        lua.inspect_stack(level, |d| {
            let is_script = matches!(d.source().source.as_deref(), Some("@user_script" | "@user_function"));
            is_script.then(|| d.current_line()).flatten()
        })
        .flatten()
    })
}

/// The error reply for a failed script: the error text, then where it happened.
pub fn error_reply_text(v: &Value, sha: &str, chunk: &str) -> String {
    let (err, line) = match v {
        Value::Table(t) => {
            (t.raw_get::<Option<String>>("err").ok().flatten().unwrap_or_else(|| "ERR unknown error".into()), t.raw_get::<Option<i64>>("line").ok().flatten())
        }
        other => (format!("ERR {}", other.to_string().unwrap_or_default()), None),
    };
    match line {
        Some(l) => format!("{err} script: {sha}, on {chunk}:{l}."),
        None => format!("{err} script: {sha}"),
    }
}

/// Arguments of `redis.call`, checked and converted to byte strings.
pub fn call_args(args: &MultiValue) -> Result<Vec<Vec<u8>>, &'static str> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(i) => Ok(i.to_string().into_bytes()),
            Value::Number(n) => Ok(format_g(*n, 17).into_bytes()),
            _ => Err("ERR Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

fn mp_encode(out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    if depth >= 16 && matches!(v, Value::Table(_)) {
        // lua-cmsgpack encodes a table at nesting level 16 (the top one is 0) as nil.
        out.push(0xc0);
        return Ok(());
    }
    let int = |out: &mut Vec<u8>, i: i64| {
        if (0..=127).contains(&i) {
            out.push(i as u8);
        } else if (-32..0).contains(&i) {
            out.push(i as i8 as u8);
        } else if i >= 0 {
            if i <= u8::MAX as i64 {
                out.extend_from_slice(&[0xcc, i as u8]);
            } else if i <= u16::MAX as i64 {
                out.push(0xcd);
                out.extend_from_slice(&(i as u16).to_be_bytes());
            } else if i <= u32::MAX as i64 {
                out.push(0xce);
                out.extend_from_slice(&(i as u32).to_be_bytes());
            } else {
                out.push(0xcf);
                out.extend_from_slice(&(i as u64).to_be_bytes());
            }
        } else if i >= i8::MIN as i64 {
            out.extend_from_slice(&[0xd0, i as i8 as u8]);
        } else if i >= i16::MIN as i64 {
            out.push(0xd1);
            out.extend_from_slice(&(i as i16).to_be_bytes());
        } else if i >= i32::MIN as i64 {
            out.push(0xd2);
            out.extend_from_slice(&(i as i32).to_be_bytes());
        } else {
            out.push(0xd3);
            out.extend_from_slice(&i.to_be_bytes());
        }
    };
    let len_header = |out: &mut Vec<u8>, n: usize, fix: u8, fix_max: usize, c16: u8, c32: u8| {
        if n <= fix_max {
            out.push(fix | n as u8);
        } else if n <= u16::MAX as usize {
            out.push(c16);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(c32);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    };
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => int(out, *i),
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 9.2e18 => int(out, *n as i64),
        Value::Number(n) => {
            if (*n as f32) as f64 == *n {
                out.push(0xca);
                out.extend_from_slice(&(*n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            if b.len() < 32 {
                out.push(0xa0 | b.len() as u8);
            } else if b.len() <= u8::MAX as usize {
                out.extend_from_slice(&[0xd9, b.len() as u8]);
            } else if b.len() <= u16::MAX as usize {
                out.push(0xda);
                out.extend_from_slice(&(b.len() as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) => {
            // Counted, then walked again: holding every pair at once would keep a Lua
            // reference per key and value (and run out of them on a table of 100,000).
            let mut count = 0;
            for pair in t.pairs::<Value, Value>() {
                pair?;
                count += 1;
            }
            let n = t.raw_len();
            if n > 0 && n == count {
                len_header(out, n, 0x90, 15, 0xdc, 0xdd);
                for i in 1..=n {
                    mp_encode(out, &t.raw_get::<Value>(i)?, depth + 1)?;
                }
            } else {
                len_header(out, count, 0x80, 15, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    mp_encode(out, &k, depth + 1)?;
                    mp_encode(out, &v, depth + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

/// How deep decoded arrays and maps may nest: each level is a frame of this (recursive)
/// decoder on the reactor's stack, so a hostile input of 100,000 nested arrays must stop
/// here rather than overflow it.
const MP_MAX_DECODE_DEPTH: usize = 200;

fn mp_decode(lua: &Lua, b: &[u8], pos: &mut usize, depth: usize) -> mlua::Result<Value> {
    if depth > MP_MAX_DECODE_DEPTH {
        return Err(mlua::Error::RuntimeError(format!("Too many nested data structures in input (more than {MP_MAX_DECODE_DEPTH}).")));
    }
    let bad = || mlua::Error::RuntimeError("Missing bytes in input.".into());
    let take = |pos: &mut usize, n: usize| -> mlua::Result<&[u8]> {
        let s = b.get(*pos..*pos + n).ok_or_else(bad)?;
        *pos += n;
        Ok(s)
    };
    let be = |s: &[u8]| s.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64);
    let tag = take(pos, 1)?[0];
    let num = |x: f64| Ok(Value::Number(x));
    match tag {
        0x00..=0x7f => num(tag as f64),
        0xe0..=0xff => num(tag as i8 as f64),
        0xc0 => Ok(Value::Nil),
        0xc2 => Ok(Value::Boolean(false)),
        0xc3 => Ok(Value::Boolean(true)),
        0xcc => num(be(take(pos, 1)?) as f64),
        0xcd => num(be(take(pos, 2)?) as f64),
        0xce => num(be(take(pos, 4)?) as f64),
        0xcf => num(be(take(pos, 8)?) as f64),
        0xd0 => num(take(pos, 1)?[0] as i8 as f64),
        0xd1 => num(be(take(pos, 2)?) as u16 as i16 as f64),
        0xd2 => num(be(take(pos, 4)?) as u32 as i32 as f64),
        0xd3 => num(be(take(pos, 8)?) as i64 as f64),
        0xca => num(f32::from_bits(be(take(pos, 4)?) as u32) as f64),
        0xcb => num(f64::from_bits(be(take(pos, 8)?))),
        0xa0..=0xbf | 0xd9 | 0xda | 0xdb | 0xc4 | 0xc5 | 0xc6 => {
            let n = match tag {
                0xa0..=0xbf => (tag & 0x1f) as usize,
                0xd9 | 0xc4 => be(take(pos, 1)?) as usize,
                0xda | 0xc5 => be(take(pos, 2)?) as usize,
                _ => be(take(pos, 4)?) as usize,
            };
            Ok(Value::String(lua.create_string(take(pos, n)?)?))
        }
        0x90..=0x9f | 0xdc | 0xdd => {
            let n = match tag {
                0x90..=0x9f => (tag & 0x0f) as usize,
                0xdc => be(take(pos, 2)?) as usize,
                _ => be(take(pos, 4)?) as usize,
            };
            let t = lua.create_table()?;
            for i in 1..=n {
                t.raw_seti(i, mp_decode(lua, b, pos, depth + 1)?)?;
            }
            Ok(Value::Table(t))
        }
        0x80..=0x8f | 0xde | 0xdf => {
            let n = match tag {
                0x80..=0x8f => (tag & 0x0f) as usize,
                0xde => be(take(pos, 2)?) as usize,
                _ => be(take(pos, 4)?) as usize,
            };
            let t = lua.create_table()?;
            for _ in 0..n {
                let k = mp_decode(lua, b, pos, depth + 1)?;
                let v = mp_decode(lua, b, pos, depth + 1)?;
                if !k.is_nil() {
                    t.raw_set(k, v)?;
                }
            }
            Ok(Value::Table(t))
        }
        _ => Err(mlua::Error::RuntimeError("Bad data format in input.".into())),
    }
}

/// Decodes up to `limit` objects of `b` from `offset`: where decoding stopped (None at the
/// end of the input), and the objects.
fn mp_unpack(lua: &Lua, b: &[u8], limit: usize, offset: usize) -> mlua::Result<(Option<usize>, Vec<Value>)> {
    let mut pos = offset;
    let mut vals = Vec::new();
    while pos < b.len() && vals.len() < limit {
        vals.push(mp_decode(lua, b, &mut pos, 0)?);
    }
    Ok(((pos < b.len()).then_some(pos), vals))
}

/// unpack_limit's checks and reply: the next offset (-1: the end), then the objects.
fn mp_unpack_from(lua: &Lua, b: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    if offset < 0 || limit < 0 {
        return Err(mlua::Error::RuntimeError(format!("Invalid request to unpack with offset of {offset} and limit of {}.", b.len())));
    }
    if offset as usize > b.len() {
        return Err(mlua::Error::RuntimeError(format!("Start offset {offset} greater than input length {}.", b.len())));
    }
    let (next, mut vals) = mp_unpack(lua, b, limit as usize, offset as usize)?;
    vals.insert(0, Value::Integer(next.map_or(-1, |p| p as i64)));
    Ok(MultiValue::from_vec(vals))
}

/// lua-cmsgpack's `pack` and `unpack` (MessagePack).
pub fn cmsgpack_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.is_empty() {
                return Err(mlua::Error::RuntimeError("MessagePack pack needs input.".into()));
            }
            let mut out = Vec::new();
            for a in args.iter() {
                mp_encode(&mut out, a, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| -> mlua::Result<MultiValue> {
            let (_, vals) = mp_unpack(lua, &s.as_bytes(), usize::MAX, 0)?;
            Ok(MultiValue::from_vec(vals))
        })?,
    )?;
    // unpack_one(s [, offset]) and unpack_limit(s, limit [, offset]): the offset to go on
    // from (-1 at the end of the input), then the objects.
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::LuaString, Option<i64>)| mp_unpack_from(lua, &s.as_bytes(), 1, offset.unwrap_or(0)))?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, offset): (mlua::LuaString, i64, Option<i64>)| mp_unpack_from(lua, &s.as_bytes(), limit, offset.unwrap_or(0)))?,
    )?;
    Ok(t)
}

/// One item of a `struct` format: its kind and size, after the endianness/alignment state.
struct StructFmt<'a> {
    f: &'a [u8],
    pos: usize,
    little: bool,
    align: usize,
    /// The calling function, for error messages.
    func: &'static str,
}

#[derive(Clone, Copy)]
enum StructItem {
    Int { size: usize, signed: bool },
    Float,
    Double,
    Pad,
    Chars(Option<usize>),
    ZString,
}

impl<'a> StructFmt<'a> {
    fn new(f: &'a [u8], func: &'static str) -> Self {
        StructFmt { f, pos: 0, little: cfg!(target_endian = "little"), align: 1, func }
    }

    fn number(&mut self) -> Option<usize> {
        let start = self.pos;
        while self.pos < self.f.len() && self.f[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        std::str::from_utf8(&self.f[start..self.pos]).ok().and_then(|s| s.parse().ok())
    }

    /// The next item (None at the end), handling `<`, `>`, `=`, `!n` and spaces.
    fn next(&mut self) -> mlua::Result<Option<StructItem>> {
        loop {
            let Some(&c) = self.f.get(self.pos) else { return Ok(None) };
            self.pos += 1;
            let item = match c {
                b' ' => continue,
                b'<' => {
                    self.little = true;
                    continue;
                }
                b'>' => {
                    self.little = false;
                    continue;
                }
                b'=' => {
                    self.little = cfg!(target_endian = "little");
                    continue;
                }
                b'!' => {
                    let n = self.number().unwrap_or(8);
                    if !n.is_power_of_two() {
                        return Err(mlua::Error::RuntimeError(format!("alignment {n} is not a power of 2")));
                    }
                    self.align = n;
                    continue;
                }
                b'x' => StructItem::Pad,
                b'b' => StructItem::Int { size: 1, signed: true },
                b'B' => StructItem::Int { size: 1, signed: false },
                b'h' => StructItem::Int { size: 2, signed: true },
                b'H' => StructItem::Int { size: 2, signed: false },
                b'l' => StructItem::Int { size: 8, signed: true },
                b'L' => StructItem::Int { size: 8, signed: false },
                b'T' => StructItem::Int { size: 8, signed: false },
                b'i' | b'I' => {
                    let size = self.number().unwrap_or(4);
                    if !(1..=8).contains(&size) {
                        return Err(mlua::Error::RuntimeError(format!("integral size {size} is larger than limit of 8")));
                    }
                    StructItem::Int { size, signed: c == b'i' }
                }
                b'f' => StructItem::Float,
                b'd' => StructItem::Double,
                b'c' => StructItem::Chars(self.number()),
                b's' => StructItem::ZString,
                other => return Err(mlua::Error::RuntimeError(format!("bad argument #1 to '{}' (invalid format option '{}')", self.func, other as char))),
            };
            return Ok(Some(item));
        }
    }

    /// Padding before an item of natural size `size`, under `!n` alignment.
    fn pad(&self, offset: usize, size: usize) -> usize {
        let a = size.min(self.align);
        if a <= 1 {
            0
        } else {
            (a - offset % a) % a
        }
    }
}

fn int_bytes_of(v: i64, size: usize, little: bool) -> Vec<u8> {
    let le = v.to_le_bytes();
    let mut b = le[..size].to_vec();
    if !little {
        b.reverse();
    }
    b
}

/// Roberto Ierusalimschy's `struct` library (pack, unpack, size), as Redis bundles it.
pub fn struct_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, (fmt, args): (mlua::LuaString, Variadic<Value>)| {
            let fmt = fmt.as_bytes().to_vec();
            let mut f = StructFmt::new(&fmt, "pack");
            let mut out: Vec<u8> = Vec::new();
            let mut args = args.into_iter();
            let mut arg = |what: &str| args.next().ok_or_else(|| mlua::Error::RuntimeError(format!("bad argument to 'pack' ({what} expected, got no value)")));
            while let Some(item) = f.next()? {
                match item {
                    StructItem::Pad => out.push(0),
                    StructItem::Int { size, .. } => {
                        out.resize(out.len() + f.pad(out.len(), size), 0);
                        let v = num(&arg("number")?)?;
                        out.extend(int_bytes_of(v as i64, size, f.little));
                    }
                    StructItem::Float => {
                        out.resize(out.len() + f.pad(out.len(), 4), 0);
                        let v = num(&arg("number")?)? as f32;
                        out.extend(if f.little { v.to_le_bytes() } else { v.to_be_bytes() });
                    }
                    StructItem::Double => {
                        out.resize(out.len() + f.pad(out.len(), 8), 0);
                        let v = num(&arg("number")?)?;
                        out.extend(if f.little { v.to_le_bytes() } else { v.to_be_bytes() });
                    }
                    StructItem::Chars(n) => {
                        let s = match arg("string")? {
                            Value::String(s) => s.as_bytes().to_vec(),
                            other => other.to_string()?.into_bytes(),
                        };
                        // `c` is one byte, `cN` N bytes, `c0` the whole string.
                        let n = match n {
                            None => 1,
                            Some(0) => s.len(),
                            Some(k) => k,
                        };
                        if s.len() < n {
                            return Err(mlua::Error::RuntimeError("bad argument to 'pack' (string too short)".into()));
                        }
                        out.extend_from_slice(&s[..n]);
                    }
                    StructItem::ZString => {
                        let s = match arg("string")? {
                            Value::String(s) => s.as_bytes().to_vec(),
                            other => other.to_string()?.into_bytes(),
                        };
                        if s.contains(&0) {
                            return Err(mlua::Error::RuntimeError("bad argument to 'pack' (string contains zeros)".into()));
                        }
                        out.extend_from_slice(&s);
                        out.push(0);
                    }
                }
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, (fmt, data, init): (mlua::LuaString, mlua::LuaString, Option<i64>)| {
            let fmt = fmt.as_bytes().to_vec();
            let data = data.as_bytes().to_vec();
            let mut f = StructFmt::new(&fmt, "unpack");
            let mut pos = init.map(|i| (i.max(1) - 1) as usize).unwrap_or(0);
            let short = || mlua::Error::RuntimeError("bad argument to 'unpack' (data string too short)".into());
            let mut vals: Vec<Value> = Vec::new();
            while let Some(item) = f.next()? {
                match item {
                    StructItem::Pad => pos += 1,
                    StructItem::Int { size, signed } => {
                        pos += f.pad(pos, size);
                        let mut b = data.get(pos..pos + size).ok_or_else(short)?.to_vec();
                        if !f.little {
                            b.reverse();
                        }
                        let mut v: u64 = 0;
                        for (i, x) in b.iter().enumerate() {
                            v |= (*x as u64) << (8 * i);
                        }
                        let v = if signed && size < 8 && v & (1 << (8 * size - 1)) != 0 { (v | (u64::MAX << (8 * size))) as i64 } else { v as i64 };
                        vals.push(Value::Number(if signed { v as f64 } else { v as u64 as f64 }));
                        pos += size;
                    }
                    StructItem::Float => {
                        pos += f.pad(pos, 4);
                        let b: [u8; 4] = data.get(pos..pos + 4).ok_or_else(short)?.try_into().expect("4");
                        vals.push(Value::Number((if f.little { f32::from_le_bytes(b) } else { f32::from_be_bytes(b) }) as f64));
                        pos += 4;
                    }
                    StructItem::Double => {
                        pos += f.pad(pos, 8);
                        let b: [u8; 8] = data.get(pos..pos + 8).ok_or_else(short)?.try_into().expect("8");
                        vals.push(Value::Number(if f.little { f64::from_le_bytes(b) } else { f64::from_be_bytes(b) }));
                        pos += 8;
                    }
                    StructItem::Chars(n) => {
                        // `c0` takes its length from the previous number unpacked.
                        let n = match n {
                            Some(0) => match vals.pop() {
                                Some(Value::Number(x)) => x as usize,
                                _ => return Err(mlua::Error::RuntimeError("format 'c0' needs a previous size".into())),
                            },
                            Some(n) => n,
                            None => 1,
                        };
                        vals.push(Value::String(lua.create_string(data.get(pos..pos + n).ok_or_else(short)?)?));
                        pos += n;
                    }
                    StructItem::ZString => {
                        let end = data[pos.min(data.len())..]
                            .iter()
                            .position(|&b| b == 0)
                            .ok_or_else(|| mlua::Error::RuntimeError("unfinished string in data".into()))?;
                        vals.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                        pos += end + 1;
                    }
                }
            }
            vals.push(Value::Number((pos + 1) as f64));
            Ok(MultiValue::from_vec(vals))
        })?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|_, fmt: mlua::LuaString| {
            let fmt = fmt.as_bytes().to_vec();
            let mut f = StructFmt::new(&fmt, "size");
            let mut size = 0usize;
            while let Some(item) = f.next()? {
                let n = match item {
                    StructItem::Pad => 1,
                    StructItem::Int { size, .. } => size,
                    StructItem::Float => 4,
                    StructItem::Double => 8,
                    StructItem::Chars(Some(n)) if n > 0 => n,
                    StructItem::Chars(None) => 1,
                    _ => return Err(mlua::Error::RuntimeError("options 'c0' - 's' have undefined sizes".into())),
                };
                size += f.pad(size, n.min(8)) + n;
            }
            Ok(size as f64)
        })?,
    )?;
    Ok(t)
}
