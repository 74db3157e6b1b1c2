//! Scripts' `cjson` library: lua-cjson 2.1's `encode`, `decode`, `null`, `new` and its
//! settings (`encode_max_depth`, `decode_max_depth`, `encode_number_precision`,
//! `encode_sparse_array`, `encode_invalid_numbers`, `decode_invalid_numbers`,
//! `encode_keep_buffer`), each instance with settings of its own, as Redis's vendored copy.
//!
//! lua-cjson is a C library; no maintained crate provides it as a Lua module for mlua, so
//! it is written here against its documented behaviour (decoding's grammar is serde_json's).

use std::cell::Cell;
use std::rc::Rc;

use mlua::{Lua, Table, Value};

use super::libs::format_g;

/// One instance's settings, lua-cjson's defaults.
#[derive(Clone, Copy, Debug)]
struct Settings {
    encode_max_depth: i64,
    decode_max_depth: i64,
    precision: i64,
    /// encode_sparse_array: convert (to an object) instead of failing, the ratio and the
    /// length up to which holes are always filled with null.
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    invalid_numbers: InvalidNumbers,
    decode_invalid_numbers: bool,
    keep_buffer: bool,
}

/// What `encode` does with NaN and ±Inf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InvalidNumbers {
    Refuse,
    Write,
    Null,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            precision: 14,
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            invalid_numbers: InvalidNumbers::Refuse,
            decode_invalid_numbers: true,
            keep_buffer: true,
        }
    }
}

type Shared = Rc<Cell<Settings>>;
/// Where an integer or on/off setting lives in `Settings`.
type IntegerField = fn(&mut Settings) -> &mut i64;
type SwitchField = fn(&mut Settings) -> &mut bool;

fn error(msg: String) -> mlua::Error {
    mlua::Error::RuntimeError(msg)
}

/// A new `cjson` table with default settings.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let settings: Shared = Rc::new(Cell::new(Settings::default()));
    let t = lua.create_table()?;
    let s = settings.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, v: Value| {
            let mut out = Vec::new();
            Encoder { settings: s.get() }.value(&mut out, &v, 0)?;
            lua.create_string(&out)
        })?,
    )?;
    let s = settings.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, text: mlua::LuaString| {
            let bytes = text.as_bytes();
            check_decode_depth(&bytes, s.get().decode_max_depth)?;
            let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| error(format!("Expected value but found invalid token: {e}")))?;
            to_lua(lua, &v)
        })?,
    )?;
    t.raw_set("null", Value::NULL)?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    t.raw_set("new", lua.create_function(|lua, ()| table(lua))?)?;
    // The integer settings: each called with a value sets it, and answers the current one.
    let integers: [(&'static str, i64, i64, IntegerField); 3] = [
        ("encode_max_depth", 1, i32::MAX as i64, |s| &mut s.encode_max_depth),
        ("decode_max_depth", 1, i32::MAX as i64, |s| &mut s.decode_max_depth),
        ("encode_number_precision", 1, 14, |s| &mut s.precision),
    ];
    for (name, min, max, field) in integers {
        let s = settings.clone();
        t.raw_set(
            name,
            lua.create_function(move |_, value: Option<Value>| {
                let mut now = s.get();
                if let Some(v) = integer_arg(value, name, min, max)? {
                    *field(&mut now) = v;
                    s.set(now);
                }
                Ok(*field(&mut now))
            })?,
        )?;
    }
    let s = settings.clone();
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(move |_, (convert, ratio, safe): (Option<Value>, Option<Value>, Option<Value>)| {
            let mut now = s.get();
            if let Some(c) = switch_arg(convert, "encode_sparse_array", false)? {
                now.sparse_convert = c == Switch::On;
            }
            if let Some(r) = integer_arg(ratio, "encode_sparse_array", 0, i32::MAX as i64)? {
                now.sparse_ratio = r;
            }
            if let Some(v) = integer_arg(safe, "encode_sparse_array", 0, i32::MAX as i64)? {
                now.sparse_safe = v;
            }
            s.set(now);
            Ok((now.sparse_convert, now.sparse_ratio, now.sparse_safe))
        })?,
    )?;
    let s = settings.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, on: Option<Value>| {
            let mut now = s.get();
            if let Some(sw) = switch_arg(on, "encode_invalid_numbers", true)? {
                now.invalid_numbers = match sw {
                    Switch::Off => InvalidNumbers::Refuse,
                    Switch::On => InvalidNumbers::Write,
                    Switch::Null => InvalidNumbers::Null,
                };
                s.set(now);
            }
            Ok(match now.invalid_numbers {
                InvalidNumbers::Null => Value::String(lua.create_string("null")?),
                other => Value::Boolean(other == InvalidNumbers::Write),
            })
        })?,
    )?;
    // The on/off settings. (Whether the encoder keeps its buffer between calls is a
    // memory/speed trade-off in C, remembered and reported here: each encode has a buffer of
    // its own.)
    let switches: [(&'static str, SwitchField); 2] =
        [("decode_invalid_numbers", |s| &mut s.decode_invalid_numbers), ("encode_keep_buffer", |s| &mut s.keep_buffer)];
    for (name, field) in switches {
        let s = settings.clone();
        t.raw_set(
            name,
            lua.create_function(move |_, on: Option<Value>| {
                let mut now = s.get();
                if let Some(sw) = switch_arg(on, name, false)? {
                    *field(&mut now) = sw == Switch::On;
                    s.set(now);
                }
                Ok(*field(&mut now))
            })?,
        )?;
    }
    Ok(t)
}

/// An on/off setting's argument: a boolean, "on"/"off", or (where allowed) "null".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Switch {
    Off,
    On,
    Null,
}

fn switch_arg(v: Option<Value>, func: &str, null_allowed: bool) -> mlua::Result<Option<Switch>> {
    match v {
        None | Some(Value::Nil) => Ok(None),
        Some(Value::Boolean(b)) => Ok(Some(if b { Switch::On } else { Switch::Off })),
        Some(Value::String(s)) => match &*s.as_bytes() {
            b"on" => Ok(Some(Switch::On)),
            b"off" => Ok(Some(Switch::Off)),
            b"null" if null_allowed => Ok(Some(Switch::Null)),
            other => Err(error(format!("bad argument #1 to '{func}' (invalid option '{}')", String::from_utf8_lossy(other)))),
        },
        Some(other) => Err(error(format!("bad argument #1 to '{func}' (boolean or string expected, got {})", other.type_name()))),
    }
}

fn integer_arg(v: Option<Value>, func: &str, min: i64, max: i64) -> mlua::Result<Option<i64>> {
    let n = match v {
        None | Some(Value::Nil) => return Ok(None),
        Some(Value::Integer(i)) => i as f64,
        Some(Value::Number(n)) => n,
        Some(Value::String(s)) => std::str::from_utf8(&s.as_bytes()).ok().and_then(|t| t.trim().parse::<f64>().ok()).unwrap_or(f64::NAN),
        Some(_) => f64::NAN,
    };
    if n.fract() != 0.0 || n < min as f64 || n > max as f64 {
        return Err(error(format!("bad argument #1 to '{func}' (expected integer between {min} and {max})")));
    }
    Ok(Some(n as i64))
}

/// Encodes Lua values as lua-cjson does.
struct Encoder {
    settings: Settings,
}

impl Encoder {
    /// Appends `v`, found inside `depth` tables.
    fn value(&self, out: &mut Vec<u8>, v: &Value, depth: i64) -> mlua::Result<()> {
        match v {
            Value::Nil => out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
            Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Integer(i) => self.number(out, *i as f64)?,
            Value::Number(n) => self.number(out, *n)?,
            Value::String(s) => escape(out, &s.as_bytes()),
            Value::Table(t) => {
                let depth = depth + 1;
                if depth > self.settings.encode_max_depth {
                    return Err(error(format!("Cannot serialise, excessive nesting ({depth})")));
                }
                match self.array_length(t)? {
                    Some((len, items)) if len > 0 => self.array(out, t, len, items, depth)?,
                    _ => self.object(out, t, depth)?,
                }
            }
            other => return Err(error(format!("Cannot serialise {}: type not supported", other.type_name()))),
        }
        Ok(())
    }

    fn number(&self, out: &mut Vec<u8>, n: f64) -> mlua::Result<()> {
        if !n.is_finite() {
            match self.settings.invalid_numbers {
                InvalidNumbers::Refuse => return Err(error("Cannot serialise number: must not be NaN or Inf".into())),
                InvalidNumbers::Null => {
                    out.extend_from_slice(b"null");
                    return Ok(());
                }
                // NaN as "nan" on every platform (some print "-nan").
                InvalidNumbers::Write if n.is_nan() => {
                    out.extend_from_slice(b"nan");
                    return Ok(());
                }
                InvalidNumbers::Write => {}
            }
        }
        out.extend_from_slice(format_g(n, self.settings.precision as usize).as_bytes());
        Ok(())
    }

    fn number_text(&self, n: f64) -> mlua::Result<String> {
        let mut text = Vec::new();
        self.number(&mut text, n)?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    /// The array length and item count of a table whose keys are all positive integers (None:
    /// an object), or an error for an excessively sparse one when conversion is off, or for
    /// one whose text could not be a reply (a sparse-array ratio of 0 lets `{[2^40]=1}`
    /// through, as in lua-cjson, whose loop would then write nulls for hours; here it is
    /// refused before a byte is written).
    fn array_length(&self, t: &Table) -> mlua::Result<Option<(i64, i64)>> {
        let (mut max, mut items) = (0i64, 0i64);
        for pair in t.pairs::<Value, Value>() {
            let (k, _) = pair?;
            let k = match k {
                Value::Integer(i) => i as f64,
                Value::Number(n) => n,
                _ => return Ok(None),
            };
            if k < 1.0 || k.fract() != 0.0 {
                return Ok(None);
            }
            max = max.max(k as i64);
            items += 1;
        }
        let s = &self.settings;
        if s.sparse_ratio > 0 && max > items.saturating_mul(s.sparse_ratio) && max > s.sparse_safe {
            if !s.sparse_convert {
                return Err(error("Cannot serialise table: excessively sparse array".into()));
            }
            return Ok(None);
        }
        // Each element takes at least two bytes ("0," or the 5 of "null,").
        if max.saturating_sub(items).saturating_mul(5) > MAX_TEXT {
            return Err(error(format!("Cannot serialise table: an array of {max} elements, {items} of them set, would exceed {MAX_TEXT} bytes")));
        }
        Ok(Some((max, items)))
    }

    /// A table's array part, `len` long with `items` set: element by element when dense;
    /// when sparse, its set elements in order with the nulls between them written in runs
    /// (not `len` lookups).
    fn array(&self, out: &mut Vec<u8>, t: &Table, len: i64, items: i64, depth: i64) -> mlua::Result<()> {
        out.push(b'[');
        if items.saturating_mul(2) >= len {
            for i in 1..=len {
                if i > 1 {
                    out.push(b',');
                }
                self.value(out, &t.raw_get::<Value>(i)?, depth)?;
            }
        } else {
            let mut set: Vec<(i64, Value)> = Vec::with_capacity(items as usize);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let k = match k {
                    Value::Integer(i) => i,
                    Value::Number(n) => n as i64,
                    _ => continue,
                };
                set.push((k, v));
            }
            set.sort_unstable_by_key(|(k, _)| *k);
            let mut next = 1;
            for (k, v) in &set {
                while next < *k {
                    out.extend_from_slice(if next == 1 { b"null" } else { b",null" });
                    next += 1;
                }
                if *k > 1 {
                    out.push(b',');
                }
                self.value(out, v, depth)?;
                next = k + 1;
            }
        }
        out.push(b']');
        Ok(())
    }

    fn object(&self, out: &mut Vec<u8>, t: &Table, depth: i64) -> mlua::Result<()> {
        out.push(b'{');
        let mut first = true;
        for pair in t.pairs::<Value, Value>() {
            let (k, val) = pair?;
            if !first {
                out.push(b',');
            }
            first = false;
            match &k {
                Value::String(s) => escape(out, &s.as_bytes()),
                Value::Integer(i) => escape(out, self.number_text(*i as f64)?.as_bytes()),
                Value::Number(n) => escape(out, self.number_text(*n)?.as_bytes()),
                _ => return Err(error("Cannot serialise table: table key must be a number or string".into())),
            }
            out.push(b':');
            self.value(out, &val, depth)?;
        }
        out.push(b'}');
        Ok(())
    }
}

fn escape(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// Fails as lua-cjson does when objects and arrays nest deeper than `max`, naming the depth
/// reached and the (1-based) position of the bracket that went past it.
fn check_decode_depth(text: &[u8], max: i64) -> mlua::Result<()> {
    let (mut depth, mut in_string, mut escaped) = (0i64, false, false);
    for (i, &c) in text.iter().enumerate() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return Err(error(format!("Found too many nested data structures ({depth}) at character {}", i + 1)));
                }
            }
            b'}' | b']' => depth -= 1,
            _ => {}
        }
    }
    Ok(())
}

fn to_lua(lua: &Lua, v: &serde_json::Value) -> mlua::Result<Value> {
    Ok(match v {
        serde_json::Value::Null => Value::NULL,
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(lua.create_string(s)?),
        serde_json::Value::Array(a) => {
            let t = lua.create_table_with_capacity(a.len(), 0)?;
            for (i, e) in a.iter().enumerate() {
                t.raw_seti(i + 1, to_lua(lua, e)?)?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(o) => {
            let t = lua.create_table_with_capacity(0, o.len())?;
            for (k, e) in o {
                t.raw_set(k.as_str(), to_lua(lua, e)?)?;
            }
            Value::Table(t)
        }
    })
}

/// The longest JSON text `encode` writes for an array's nulls: Redis's `proto-max-bulk-len`
/// default (a longer text could not be a reply anyway).
const MAX_TEXT: i64 = 512 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use mlua::MultiValue;

    fn eval(lua: &Lua, code: &str) -> mlua::Result<MultiValue> {
        lua.load(code).eval::<MultiValue>()
    }

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().raw_set("cjson", table(&lua).unwrap()).unwrap();
        lua
    }

    fn string(lua: &Lua, code: &str) -> String {
        let v = eval(lua, code).unwrap();
        v.into_iter().next().and_then(|v| v.to_string().ok()).unwrap()
    }

    #[test]
    fn encodes_as_lua_cjson() {
        let lua = lua();
        assert_eq!(string(&lua, r#"return cjson.encode({1, 2, "a/b"})"#), r#"[1,2,"a\/b"]"#);
        assert_eq!(string(&lua, "return cjson.encode({})"), "{}");
        assert_eq!(string(&lua, "return cjson.encode({[1]='a', [3]='c'})"), r#"["a",null,"c"]"#);
        assert_eq!(string(&lua, "return cjson.encode({[2]=1})"), "[null,1]");
        assert_eq!(string(&lua, "return cjson.encode(0.1)"), "0.1");
        assert_eq!(string(&lua, "return cjson.encode(1e15)"), "1e+15");
        let e = eval(&lua, "return cjson.encode({[20]=1})").unwrap_err().to_string();
        assert!(e.contains("Cannot serialise table: excessively sparse array"), "{e}");
        assert_eq!(string(&lua, "cjson.encode_sparse_array(true) return cjson.encode({[20]=1})"), r#"{"20":1}"#);
        let e = eval(&lua, "return cjson.encode({[true]=1})").unwrap_err().to_string();
        assert!(e.contains("table key must be a number or string"), "{e}");
    }

    #[test]
    fn a_huge_sparse_array_is_refused_at_once_and_a_large_one_written_in_runs() {
        // Found by the lua_libraries fuzz target: with a sparse ratio of 0 (no check, as in
        // lua-cjson) `{[2^40]=1}` had the encoder look up every index — hours of work.
        let lua = lua();
        let started = std::time::Instant::now();
        let e = eval(&lua, "cjson.encode_sparse_array(false, 0) return cjson.encode({[2^40]=1})").unwrap_err().to_string();
        assert!(e.contains("would exceed"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(string(&lua, "return cjson.encode({[3]='c', [1]='a', [6]=true})"), r#"["a",null,"c",null,null,true]"#);
        let text = string(&lua, "return cjson.encode({[1000000]=1})");
        assert_eq!(text.len(), 1 + 999_999 * 5 + 1 + 1);
        assert!(text.starts_with("[null,null") && text.ends_with(",null,1]"));
    }

    #[test]
    fn settings_apply_and_report() {
        let lua = lua();
        assert_eq!(string(&lua, "return cjson.encode_max_depth()"), "1000");
        assert!(eval(&lua, "cjson.encode_max_depth(1) return cjson.encode({{}})").unwrap_err().to_string().contains("excessive nesting (2)"));
        assert_eq!(string(&lua, "return cjson.encode({1})"), "[1]");
        let e = eval(&lua, r#"cjson.decode_max_depth(1) return cjson.decode('{"obj": {"array": [1,2,3,4]}}')"#).unwrap_err().to_string();
        assert!(e.contains("Found too many nested data structures (2) at character 9"), "{e}");
        assert!(eval(&lua, "return cjson.encode(0/0)").unwrap_err().to_string().contains("must not be NaN or Inf"));
        assert_eq!(string(&lua, "cjson.encode_invalid_numbers(true) return cjson.encode(0/0)"), "nan");
        assert_eq!(string(&lua, "cjson.encode_invalid_numbers('null') return cjson.encode(1/0)"), "null");
        assert_eq!(string(&lua, "return cjson.encode_invalid_numbers()"), "null");
        assert_eq!(string(&lua, "cjson.encode_number_precision(3) return cjson.encode(3.14159)"), "3.14");
        assert_eq!(string(&lua, "return tostring(cjson.encode_keep_buffer(false))"), "false");
        assert!(eval(&lua, "cjson.encode_max_depth(0)").unwrap_err().to_string().contains("expected integer between 1 and"));
        // An instance of its own keeps the defaults.
        assert_eq!(string(&lua, "return cjson.new().encode(3.14159)"), "3.14159");
    }
}
