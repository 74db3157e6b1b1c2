//! Reply encoding straight into a connection's output buffer, in RESP2 or RESP3.
//!
//! Commands call the typed methods (`bulk`, `int`, `map_len`, `double`…); the writer picks the
//! wire form for the connection's protocol version, so command code never branches on it.

use bytes::{BufMut, BytesMut};

/// Formats a double the way Redis 7 replies with it: shortest round-trip form, `inf`/`-inf`.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d.is_nan() {
        return "nan".into();
    }
    if d == d.trunc() && d.abs() < 1e17 {
        // Integral values print without a fractional part ("3", not "3.0").
        return format!("{}", d as i64);
    }
    let mut s = format!("{}", d);
    if s.len() > 24 {
        // Very large/small magnitudes: use exponent form as %.17g would.
        s = format!("{:e}", d);
    }
    s
}

/// C's `%.17g`, as Redis 7.0 writes a double reply (ZSCORE, WITHSCORES, ZINCRBY, GEOPOS, a
/// Lua number in RESP3…) and a sorted set's score in ZSCAN: 17 significant digits, trailing
/// zeros dropped, exponent form below 1e-4 and from 1e17 (`1.7976931348623157e+308`).
/// (INCRBYFLOAT's value is `format_double`'s shortest form, as Redis's long-double one reads.)
pub fn format_double_g17(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d.is_nan() {
        return "nan".into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    fn trimmed(s: &str) -> &str {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.')
        } else {
            s
        }
    }
    // The exponent %e would show, after rounding to 17 digits, decides the form.
    let sci = format!("{d:.16e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is a number");
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trimmed(mantissa), exp.abs())
    } else {
        let fixed = format!("{d:.*}", (16 - exp) as usize);
        trimmed(&fixed).to_string()
    }
}

pub struct ReplyWriter<'a> {
    pub buf: &'a mut BytesMut,
    pub resp3: bool,
}

impl<'a> ReplyWriter<'a> {
    pub fn new(buf: &'a mut BytesMut, resp3: bool) -> Self {
        ReplyWriter { buf, resp3 }
    }

    fn line(&mut self, prefix: u8, n: i64) {
        self.buf.put_u8(prefix);
        let mut b = itoa::Buffer::new();
        self.buf.put_slice(b.format(n).as_bytes());
        self.buf.put_slice(b"\r\n");
    }

    pub fn ok(&mut self) {
        self.buf.put_slice(b"+OK\r\n");
    }
    pub fn simple(&mut self, s: &str) {
        self.buf.put_u8(b'+');
        self.buf.put_slice(s.as_bytes());
        self.buf.put_slice(b"\r\n");
    }
    /// An error line; `msg` carries its own code prefix ("ERR …", "WRONGTYPE …").
    pub fn error(&mut self, msg: &str) {
        self.buf.put_u8(b'-');
        // Error lines cannot contain newlines.
        for &b in msg.as_bytes() {
            self.buf.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
        }
        self.buf.put_slice(b"\r\n");
    }
    pub fn int(&mut self, n: i64) {
        self.line(b':', n);
    }
    pub fn bulk(&mut self, data: &[u8]) {
        self.line(b'$', data.len() as i64);
        self.buf.put_slice(data);
        self.buf.put_slice(b"\r\n");
    }
    pub fn bulk_str(&mut self, s: &str) {
        self.bulk(s.as_bytes());
    }
    pub fn bulk_int(&mut self, n: i64) {
        let mut b = itoa::Buffer::new();
        let s = b.format(n);
        self.bulk(s.as_bytes());
    }
    /// Null bulk string (`$-1` / `_`).
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.put_slice(b"_\r\n");
        } else {
            self.buf.put_slice(b"$-1\r\n");
        }
    }
    /// Null array (`*-1` / `_`), as BLPOP's timeout or EXEC's abort.
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.put_slice(b"_\r\n");
        } else {
            self.buf.put_slice(b"*-1\r\n");
        }
    }
    pub fn array_len(&mut self, n: usize) {
        self.line(b'*', n as i64);
    }
    /// An out-of-band push (`>n` in RESP3, an array in RESP2): pub/sub messages.
    pub fn push_len(&mut self, n: usize) {
        self.line(if self.resp3 { b'>' } else { b'*' }, n as i64);
    }
    /// A map of `n` pairs (`%n` in RESP3, a flat array of 2n in RESP2).
    pub fn map_len(&mut self, n: usize) {
        if self.resp3 {
            self.line(b'%', n as i64);
        } else {
            self.line(b'*', 2 * n as i64);
        }
    }
    /// A set (`~n` in RESP3, an array in RESP2).
    pub fn set_len(&mut self, n: usize) {
        if self.resp3 {
            self.line(b'~', n as i64);
        } else {
            self.line(b'*', n as i64);
        }
    }
    /// A double (`,` in RESP3, a bulk string in RESP2).
    pub fn double(&mut self, d: f64) {
        let s = format_double_g17(d);
        if self.resp3 {
            self.buf.put_u8(b',');
            self.buf.put_slice(s.as_bytes());
            self.buf.put_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }
    /// A boolean (`#t`/`#f` in RESP3, `:1`/`:0` in RESP2).
    pub fn boolean(&mut self, b: bool) {
        if self.resp3 {
            self.buf.put_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.int(b as i64);
        }
    }
    /// Verbatim text (`=` with `txt:` in RESP3, a bulk string in RESP2), as INFO replies.
    pub fn verbatim(&mut self, text: &str) {
        if self.resp3 {
            self.line(b'=', text.len() as i64 + 4);
            self.buf.put_slice(b"txt:");
            self.buf.put_slice(text.as_bytes());
            self.buf.put_slice(b"\r\n");
        } else {
            self.bulk(text.as_bytes());
        }
    }
    /// A HELP reply: an array of status lines.
    pub fn help(&mut self, lines: &[&str]) {
        self.array_len(lines.len());
        for l in lines {
            self.simple(l);
        }
    }
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.put_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp2_and_resp3_forms() {
        let mut b = BytesMut::new();
        let mut w = ReplyWriter::new(&mut b, false);
        w.map_len(1);
        w.null();
        w.double(1.5);
        w.boolean(true);
        assert_eq!(&b[..], b"*2\r\n$-1\r\n$3\r\n1.5\r\n:1\r\n");
        let mut b = BytesMut::new();
        let mut w = ReplyWriter::new(&mut b, true);
        w.map_len(1);
        w.null();
        w.double(1.5);
        w.boolean(true);
        w.verbatim("ab");
        assert_eq!(&b[..], b"%1\r\n_\r\n,1.5\r\n#t\r\n=6\r\ntxt:ab\r\n");
    }

    #[test]
    fn doubles_format_like_redis() {
        assert_eq!(format_double_g17(0.1), "0.10000000000000001");
        assert_eq!(format_double_g17(1.5), "1.5");
        assert_eq!(format_double_g17(3.0), "3");
        assert_eq!(format_double_g17(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(format_double_g17(1e-5), "1.0000000000000001e-05");
        assert_eq!(format_double_g17(0.0001), "0.0001");
        assert_eq!(format_double_g17(1e17), "1e+17");
        assert_eq!(format_double_g17(12345678901234567.0), "12345678901234568");
        assert_eq!(format_double_g17(-2.5), "-2.5");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(10.6), "10.6");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(-2.5), "-2.5");
        assert_eq!(format_double(5.0e3), "5000");
    }

    #[test]
    fn error_lines_never_break_framing() {
        let mut b = BytesMut::new();
        ReplyWriter::new(&mut b, false).error("ERR a\r\nb");
        assert_eq!(&b[..], b"-ERR a  b\r\n");
    }
}
