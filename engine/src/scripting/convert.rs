//! Redis's conversions between replies and Lua values: a command's reply (as the handler
//! wrote it, RESP2 or — after `redis.setresp(3)` — RESP3) becomes a Lua value for
//! `redis.call`, and a script's return value becomes the client's reply.

use mlua::{Lua, Table, Value};

use crate::protocol::ReplyWriter;

/// Parses one reply from `buf` into a Lua value; returns it and the bytes consumed.
pub fn reply_to_lua(lua: &Lua, buf: &[u8]) -> mlua::Result<(Value, usize)> {
    let bad = || mlua::Error::RuntimeError("malformed reply".into());
    let eol = buf.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)?;
    let line = &buf[1..eol];
    let text = || String::from_utf8_lossy(line).into_owned();
    let int = || -> mlua::Result<i64> { std::str::from_utf8(line).ok().and_then(|s| s.parse().ok()).ok_or_else(bad) };
    let mut used = eol + 2;
    let single = |lua: &Lua, field: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(field, v)?;
        Ok(Value::Table(t))
    };
    let v = match buf.first().copied().ok_or_else(bad)? {
        b'+' => single(lua, "ok", Value::String(lua.create_string(line)?))?,
        b'-' => single(lua, "err", Value::String(lua.create_string(line)?))?,
        b':' => Value::Number(int()? as f64),
        b'$' | b'=' => {
            let n = int()?;
            if n < 0 {
                Value::Boolean(false)
            } else {
                let n = n as usize;
                let data = buf.get(used..used + n).ok_or_else(bad)?;
                used += n + 2;
                if buf[0] == b'=' {
                    // Verbatim string: "txt:" prefix carries the format.
                    let t = lua.create_table()?;
                    t.raw_set("format", lua.create_string(&data[..3.min(data.len())])?)?;
                    t.raw_set("string", lua.create_string(data.get(4..).unwrap_or(b""))?)?;
                    single(lua, "verbatim_string", Value::Table(t))?
                } else {
                    Value::String(lua.create_string(data)?)
                }
            }
        }
        b'*' | b'~' | b'>' => {
            let n = int()?;
            if n < 0 {
                Value::Boolean(false)
            } else {
                let t = lua.create_table_with_capacity(n as usize, 0)?;
                for i in 0..n as usize {
                    let (v, k) = reply_to_lua(lua, &buf[used..])?;
                    used += k;
                    if buf[0] == b'~' {
                        t.raw_set(v, true)?;
                    } else {
                        t.raw_seti(i + 1, v)?;
                    }
                }
                if buf[0] == b'~' {
                    single(lua, "set", Value::Table(t))?
                } else {
                    Value::Table(t)
                }
            }
        }
        b'%' => {
            let n = int()? as usize;
            let t = lua.create_table()?;
            for _ in 0..n {
                let (k, a) = reply_to_lua(lua, &buf[used..])?;
                used += a;
                let (v, b) = reply_to_lua(lua, &buf[used..])?;
                used += b;
                t.raw_set(k, v)?;
            }
            single(lua, "map", Value::Table(t))?
        }
        b'_' => Value::Nil,
        b'#' => Value::Boolean(line == b"t"),
        b',' => single(lua, "double", Value::Number(text().parse::<f64>().unwrap_or(f64::NAN)))?,
        b'(' => single(lua, "big_number", Value::String(lua.create_string(line)?))?,
        _ => return Err(bad()),
    };
    Ok((v, used))
}

fn field(t: &Table, name: &str) -> Option<Value> {
    t.raw_get::<Value>(name).ok().filter(|v| !v.is_nil())
}

/// How deep a script's returned tables may nest.
const MAX_REPLY_DEPTH: usize = 200;

/// Writes a script's return value as a reply. `resp3` is the script's protocol (setresp);
/// the client's own protocol is the writer's.
pub fn lua_to_reply(out: &mut ReplyWriter, v: &Value, resp3: bool, depth: usize) {
    // Each level is a frame of this (recursive) writer and of Lua's table walk on the
    // reactor's stack: a self-referencing table stops here, as Redis stops at its Lua stack.
    if depth > MAX_REPLY_DEPTH {
        out.error("ERR reached lua stack limit");
        return;
    }
    match v {
        Value::Nil => out.null(),
        Value::Boolean(true) => {
            if resp3 {
                out.boolean(true)
            } else {
                out.int(1)
            }
        }
        Value::Boolean(false) => {
            if resp3 {
                out.boolean(false)
            } else {
                out.null()
            }
        }
        Value::Integer(i) => out.int(*i),
        Value::Number(n) => out.int(*n as i64),
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Table(t) => {
            if let Some(e) = field(t, "err") {
                let msg = e.to_string().unwrap_or_default();
                out.error(&msg);
            } else if let Some(ok) = field(t, "ok") {
                out.simple(&ok.to_string().unwrap_or_default());
            } else if let (true, Some(d)) = (resp3, field(t, "double")) {
                out.double(d.as_number().or_else(|| d.as_integer().map(|i| i as f64)).unwrap_or(0.0));
            } else if let (true, Some(Value::Table(m))) = (resp3, field(t, "map")) {
                let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
                out.map_len(pairs.len());
                for (k, v) in pairs {
                    lua_to_reply(out, &k, resp3, depth + 1);
                    lua_to_reply(out, &v, resp3, depth + 1);
                }
            } else if let (true, Some(Value::Table(s))) = (resp3, field(t, "set")) {
                let members: Vec<Value> = s.pairs::<Value, Value>().filter_map(Result::ok).map(|(k, _)| k).collect();
                out.set_len(members.len());
                for m in members {
                    lua_to_reply(out, &m, resp3, depth + 1);
                }
            } else {
                // An array up to the first nil.
                let mut items = Vec::new();
                let mut i = 1;
                while let Ok(v) = t.raw_get::<Value>(i) {
                    if v.is_nil() {
                        break;
                    }
                    items.push(v);
                    i += 1;
                }
                out.array_len(items.len());
                for v in &items {
                    lua_to_reply(out, v, resp3, depth + 1);
                }
            }
        }
        // An error object caught by pcall(redis.call, ...) and returned.
        Value::Error(e) => out.error(&super::libs::root_error(e).0),
        _ => out.null(),
    }
}
