//! Bitmap commands over string values: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD.

use super::args::{err, int, is, CmdError};
use super::string::{get_str, replace_value, MAX_STRING};
use super::{CmdResult, Ctx};

fn bit_offset(arg: &[u8], hash_allowed: bool, width: u64) -> Result<u64, CmdError> {
    let bad = || err("ERR bit offset is not an integer or out of range");
    let (mul, digits) = match arg.first() {
        Some(b'#') if hash_allowed => (width, &arg[1..]),
        _ => (1, arg),
    };
    let n = int(digits).map_err(|_| bad())?;
    if n < 0 {
        return Err(bad());
    }
    let off = (n as u64).checked_mul(mul).ok_or_else(bad)?;
    if off >= (MAX_STRING as u64) * 8 {
        return Err(bad());
    }
    Ok(off)
}

fn get_bit(v: &[u8], off: u64) -> u8 {
    let byte = (off / 8) as usize;
    if byte >= v.len() {
        return 0;
    }
    (v[byte] >> (7 - (off % 8))) & 1
}

pub fn setbit(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let off = bit_offset(argv[2], false, 1)?;
    let bit = match argv[3] {
        b"0" => 0u8,
        b"1" => 1u8,
        _ => return Err(err("ERR bit is not an integer or out of range")),
    };
    let mut v = get_str(&mut ctx.data, argv[1])?.map(|v| v.to_vec()).unwrap_or_default();
    let byte = (off / 8) as usize;
    if v.len() <= byte {
        v.resize(byte + 1, 0);
    }
    let shift = 7 - (off % 8) as u8;
    let old = (v[byte] >> shift) & 1;
    v[byte] = (v[byte] & !(1 << shift)) | (bit << shift);
    replace_value(ctx, argv[1], &v);
    ctx.out.int(old as i64);
    Ok(())
}

pub fn getbit(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let off = bit_offset(argv[2], false, 1)?;
    let b = get_str(&mut ctx.data, argv[1])?.map(|v| get_bit(&v, off)).unwrap_or(0);
    ctx.out.int(b as i64);
    Ok(())
}

/// Resolves a BITCOUNT/BITPOS range into inclusive bit positions, or None when empty.
fn bit_range(start: i64, end: i64, len_units: i64) -> Option<(i64, i64)> {
    // Both from the end and crossed: empty (Redis 7.0), not clamped into the first unit.
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let mut s = if start < 0 { len_units + start } else { start };
    let mut e = if end < 0 { len_units + end } else { end };
    if s < 0 {
        s = 0;
    }
    if e < 0 {
        e = 0;
    }
    if e >= len_units {
        e = len_units - 1;
    }
    if s > e || len_units == 0 {
        None
    } else {
        Some((s, e))
    }
}

fn unit_is_bit(arg: Option<&&[u8]>) -> Result<bool, CmdError> {
    match arg {
        None => Ok(false),
        Some(a) if is(a, "BYTE") => Ok(false),
        Some(a) if is(a, "BIT") => Ok(true),
        Some(_) => Err(CmdError::Syntax),
    }
}

pub fn bitcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() == 3 || argv.len() > 5 {
        return Err(CmdError::Syntax);
    }
    let range = if argv.len() >= 4 { Some((int(argv[2])?, int(argv[3])?, unit_is_bit(argv.get(4))?)) } else { None };
    let v = get_str(&mut ctx.data, argv[1])?.unwrap_or_default();
    let n: u64 = match range {
        None => v.iter().map(|b| b.count_ones() as u64).sum(),
        Some((s, e, bits)) => {
            let units = if bits { v.len() as i64 * 8 } else { v.len() as i64 };
            match bit_range(s, e, units) {
                None => 0,
                Some((s, e)) if bits => (s..=e).map(|i| get_bit(&v, i as u64) as u64).sum(),
                Some((s, e)) => v[s as usize..=e as usize].iter().map(|b| b.count_ones() as u64).sum(),
            }
        }
    };
    ctx.out.int(n as i64);
    Ok(())
}

pub fn bitpos(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let bit = match argv[2] {
        b"0" => 0u8,
        b"1" => 1u8,
        _ => return Err(err("ERR The bit argument must be 1 or 0.")),
    };
    if argv.len() > 6 {
        return Err(CmdError::Syntax);
    }
    let start = argv.get(3).map(|a| int(a)).transpose()?;
    let end = argv.get(4).map(|a| int(a)).transpose()?;
    let bits = unit_is_bit(argv.get(5))?;
    let Some(v) = get_str(&mut ctx.data, argv[1])? else {
        ctx.out.int(if bit == 1 { -1 } else { 0 });
        return Ok(());
    };
    let units = if bits { v.len() as i64 * 8 } else { v.len() as i64 };
    let Some((s, e)) = bit_range(start.unwrap_or(0), end.unwrap_or(-1), units) else {
        ctx.out.int(-1);
        return Ok(());
    };
    let (first, last) = if bits { (s as u64, e as u64) } else { (s as u64 * 8, e as u64 * 8 + 7) };
    let found = (first..=last).find(|&i| get_bit(&v, i) == bit);
    let reply = match found {
        Some(i) => i as i64,
        // Looking for a clear bit with no end given: the first bit past the string is clear.
        None if bit == 0 && end.is_none() && !bits => last as i64 + 1,
        None => -1,
    };
    ctx.out.int(reply);
    Ok(())
}

pub fn bitop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let op = String::from_utf8_lossy(argv[1]).to_ascii_uppercase();
    if !matches!(op.as_str(), "AND" | "OR" | "XOR" | "NOT") {
        return Err(CmdError::Syntax);
    }
    if op == "NOT" && argv.len() != 4 {
        return Err(err("ERR BITOP NOT must be called with a single source key."));
    }
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for k in &argv[3..] {
        inputs.push(get_str(&mut ctx.data, k)?.map(|v| v.to_vec()).unwrap_or_default());
    }
    let len = inputs.iter().map(|v| v.len()).max().unwrap_or(0);
    let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
    let out: Vec<u8> = (0..len)
        .map(|i| match op.as_str() {
            "NOT" => !byte(&inputs[0], i),
            "AND" => inputs.iter().fold(0xFF, |a, v| a & byte(v, i)),
            "OR" => inputs.iter().fold(0, |a, v| a | byte(v, i)),
            _ => inputs.iter().fold(0, |a, v| a ^ byte(v, i)),
        })
        .collect();
    let dest = argv[2];
    if out.is_empty() {
        ctx.data.delete(dest);
    } else {
        ctx.data.set_str(dest, &out, None);
    }
    ctx.out.int(out.len() as i64);
    Ok(())
}

#[derive(Clone, Copy)]
struct FieldType {
    signed: bool,
    bits: u32,
}

fn field_type(arg: &[u8]) -> Result<FieldType, CmdError> {
    let bad = || err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.");
    let signed = match arg.first() {
        Some(b'i') | Some(b'I') => true,
        Some(b'u') | Some(b'U') => false,
        _ => return Err(bad()),
    };
    let bits = std::str::from_utf8(&arg[1..]).ok().and_then(|s| s.parse::<u32>().ok()).ok_or_else(bad)?;
    if bits == 0 || (signed && bits > 64) || (!signed && bits > 63) {
        return Err(bad());
    }
    Ok(FieldType { signed, bits })
}

fn read_field(v: &[u8], off: u64, t: FieldType) -> i64 {
    let mut u: u64 = 0;
    for i in 0..t.bits as u64 {
        u = (u << 1) | get_bit(v, off + i) as u64;
    }
    if t.signed && t.bits < 64 && (u >> (t.bits - 1)) & 1 == 1 {
        (u | (!0u64 << t.bits)) as i64
    } else {
        u as i64
    }
}

fn write_field(v: &mut Vec<u8>, off: u64, t: FieldType, value: i64) {
    let need = (off + t.bits as u64).div_ceil(8) as usize;
    if v.len() < need {
        v.resize(need, 0);
    }
    let u = value as u64;
    for i in 0..t.bits as u64 {
        let bit = ((u >> (t.bits as u64 - 1 - i)) & 1) as u8;
        let pos = off + i;
        let byte = (pos / 8) as usize;
        let shift = 7 - (pos % 8) as u8;
        v[byte] = (v[byte] & !(1 << shift)) | (bit << shift);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// Applies overflow handling; None when FAIL trips.
fn fit(t: FieldType, wide: i128, ov: Overflow) -> Option<i64> {
    let (min, max): (i128, i128) = if t.signed { (-(1i128 << (t.bits - 1)), (1i128 << (t.bits - 1)) - 1) } else { (0, (1i128 << t.bits) - 1) };
    if wide >= min && wide <= max {
        return Some(wide as i64);
    }
    match ov {
        Overflow::Fail => None,
        Overflow::Sat => Some(if wide < min { min as i64 } else { max as i64 }),
        Overflow::Wrap => {
            let m = 1i128 << t.bits;
            let mut w = wide.rem_euclid(m);
            if t.signed && w > max {
                w -= m;
            }
            Some(w as i64)
        }
    }
}

enum Op {
    Get(FieldType, u64),
    Set(FieldType, u64, i64),
    Incr(FieldType, u64, i64),
    Overflow(Overflow),
}

fn bitfield_generic(ctx: &mut Ctx, argv: &[&[u8]], read_only: bool) -> CmdResult {
    let mut ops = Vec::new();
    let mut i = 2;
    while i < argv.len() {
        let a = argv[i];
        let need = |n: usize| if i + n < argv.len() { Ok(()) } else { Err(CmdError::Syntax) };
        if is(a, "GET") {
            need(2)?;
            let t = field_type(argv[i + 1])?;
            ops.push(Op::Get(t, bit_offset(argv[i + 2], true, t.bits as u64)?));
            i += 3;
        } else if is(a, "SET") || is(a, "INCRBY") {
            need(3)?;
            if read_only {
                return Err(err("ERR BITFIELD_RO only supports the GET subcommand"));
            }
            let t = field_type(argv[i + 1])?;
            let off = bit_offset(argv[i + 2], true, t.bits as u64)?;
            let v = int(argv[i + 3])?;
            ops.push(if is(a, "SET") { Op::Set(t, off, v) } else { Op::Incr(t, off, v) });
            i += 4;
        } else if is(a, "OVERFLOW") {
            need(1)?;
            if read_only {
                return Err(err("ERR BITFIELD_RO only supports the GET subcommand"));
            }
            let o = String::from_utf8_lossy(argv[i + 1]).to_ascii_uppercase();
            ops.push(Op::Overflow(match o.as_str() {
                "WRAP" => Overflow::Wrap,
                "SAT" => Overflow::Sat,
                "FAIL" => Overflow::Fail,
                _ => return Err(err("ERR Invalid OVERFLOW type specified")),
            }));
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let key = argv[1];
    let mut v = get_str(&mut ctx.data, key)?.map(|v| v.to_vec());
    let existed = v.is_some();
    let mut buf = v.take().unwrap_or_default();
    let mut ov = Overflow::Wrap;
    let mut replies: Vec<Option<i64>> = Vec::new();
    let mut wrote = false;
    for op in ops {
        match op {
            Op::Overflow(o) => ov = o,
            Op::Get(t, off) => replies.push(Some(read_field(&buf, off, t))),
            Op::Set(t, off, val) => {
                let old = read_field(&buf, off, t);
                match fit(t, val as i128, ov) {
                    Some(nv) => {
                        write_field(&mut buf, off, t, nv);
                        wrote = true;
                        replies.push(Some(old));
                    }
                    None => replies.push(None),
                }
            }
            Op::Incr(t, off, by) => {
                let old = read_field(&buf, off, t);
                match fit(t, old as i128 + by as i128, ov) {
                    Some(nv) => {
                        write_field(&mut buf, off, t, nv);
                        wrote = true;
                        replies.push(Some(nv));
                    }
                    None => replies.push(None),
                }
            }
        }
    }
    if wrote || (!existed && !buf.is_empty()) {
        replace_value(ctx, key, &buf);
    }
    ctx.out.array_len(replies.len());
    for r in replies {
        match r {
            Some(n) => ctx.out.int(n),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

pub fn bitfield(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bitfield_generic(ctx, argv, false)
}

pub fn bitfield_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bitfield_generic(ctx, argv, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_roundtrip_and_overflow() {
        let mut v = Vec::new();
        let i8t = FieldType { signed: true, bits: 8 };
        write_field(&mut v, 3, i8t, -100);
        assert_eq!(read_field(&v, 3, i8t), -100);
        let u4 = FieldType { signed: false, bits: 4 };
        assert_eq!(fit(u4, 17, Overflow::Wrap), Some(1));
        assert_eq!(fit(u4, 17, Overflow::Sat), Some(15));
        assert_eq!(fit(u4, 17, Overflow::Fail), None);
        assert_eq!(fit(i8t, 130, Overflow::Wrap), Some(-126));
        assert_eq!(fit(i8t, -200, Overflow::Sat), Some(-128));
    }

    #[test]
    fn ranges() {
        assert_eq!(bit_range(0, -1, 3), Some((0, 2)));
        assert_eq!(bit_range(-2, -1, 3), Some((1, 2)));
        assert_eq!(bit_range(2, 1, 3), None);
    }
}
