//! Memcached's binary protocol (deprecated since memcached 1.6, still served by 1.6.18): a
//! connection whose first byte is the request magic 0x80 speaks it for good. Each packet is
//! a 24-byte header (magic, opcode, key length, extras length, data type, vbucket, body
//! length, opaque, CAS) and a body (extras, key, value), answered by a packet with the
//! response magic 0x81, a status and the request's opaque.
//!
//! This module parses requests into typed ones, with the checks memcached makes (which
//! lengths each opcode takes — a wrong one is a protocol error that closes the connection —
//! the key size, a value too large to store), and writes response packets. The front end
//! (`super`) runs them on the engines with the same `MC.*` commands as the text protocol.

use bytes::{BufMut, BytesMut};

pub const REQUEST_MAGIC: u8 = 0x80;
const RESPONSE_MAGIC: u8 = 0x81;
const HEADER: usize = 24;
/// memcached's KEY_MAX_LENGTH.
const KEY_MAX: usize = 250;

/// Response statuses.
pub mod status {
    pub const OK: u16 = 0x0000;
    pub const KEY_ENOENT: u16 = 0x0001;
    pub const KEY_EEXISTS: u16 = 0x0002;
    pub const E2BIG: u16 = 0x0003;
    pub const EINVAL: u16 = 0x0004;
    pub const NOT_STORED: u16 = 0x0005;
    pub const DELTA_BADVAL: u16 = 0x0006;
    pub const UNKNOWN_COMMAND: u16 = 0x0081;
    pub const ENOMEM: u16 = 0x0082;
}

/// The body memcached sends with an error status.
pub fn message(status: u16) -> &'static str {
    match status {
        status::KEY_ENOENT => "Not found",
        status::KEY_EEXISTS => "Data exists for key.",
        status::E2BIG => "Too large.",
        status::EINVAL => "Invalid arguments",
        status::NOT_STORED => "Not stored.",
        status::DELTA_BADVAL => "Non-numeric server-side value for incr or decr",
        status::ENOMEM => "Out of memory",
        _ => "Unknown command",
    }
}

/// How a stored item is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
}

impl StoreMode {
    /// The mode's name for `MC.STORE` (a set with a CAS compares it).
    pub fn engine_name(self, cas: u64) -> &'static str {
        match self {
            StoreMode::Set if cas != 0 => "cas",
            StoreMode::Set => "set",
            StoreMode::Add => "add",
            StoreMode::Replace => "replace",
            StoreMode::Append => "append",
            StoreMode::Prepend => "prepend",
        }
    }
}

/// A request, typed.
#[derive(Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// GET, GETQ, GETK, GETKQ (`with_key`), and GAT… with `touch`.
    Get {
        key: &'a [u8],
        with_key: bool,
        touch: Option<u32>,
    },
    Store {
        mode: StoreMode,
        key: &'a [u8],
        value: &'a [u8],
        flags: u32,
        exptime: u32,
    },
    Delete {
        key: &'a [u8],
    },
    Arith {
        key: &'a [u8],
        incr: bool,
        delta: u64,
        initial: u64,
        exptime: u32,
    },
    Touch {
        key: &'a [u8],
        exptime: u32,
    },
    Flush {
        delay: u32,
    },
    Stat {
        group: &'a [u8],
    },
    Noop,
    Version,
    Quit,
    /// A value over the item size limit: refused, and an old item under the key unlinked
    /// (as memcached does, so no stale value stays readable).
    TooLarge {
        key: &'a [u8],
        unlink: bool,
    },
    Unknown,
}

/// One request packet.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub opcode: u8,
    pub opaque: u32,
    pub cas: u64,
    /// A quiet opcode: success is not answered (nor a get's miss).
    pub quiet: bool,
    pub op: Op<'a>,
}

/// What the start of the input holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// More bytes are needed.
    Incomplete,
    /// Not a request packet: memcached closes the connection.
    BadMagic,
    /// A request, the bytes it took, and how many more of its body to discard (an
    /// unknown command's or a value too large).
    Request { consumed: usize, swallow: usize, request: Request<'a> },
    /// Lengths the opcode does not take (or a key too long): answered EINVAL, then the
    /// connection closes, as memcached handles a protocol error.
    ProtocolError { opcode: u8, opaque: u32 },
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

/// The opcode a quiet one stands for, and whether it was quiet.
fn unquiet(opcode: u8) -> (u8, bool) {
    match opcode {
        0x09 => (0x00, true), // GETQ
        0x0d => (0x0c, true), // GETKQ
        0x11 => (0x01, true), // SETQ
        0x12 => (0x02, true), // ADDQ
        0x13 => (0x03, true), // REPLACEQ
        0x14 => (0x04, true), // DELETEQ
        0x15 => (0x05, true), // INCREMENTQ
        0x16 => (0x06, true), // DECREMENTQ
        0x17 => (0x07, true), // QUITQ
        0x18 => (0x08, true), // FLUSHQ
        0x19 => (0x0e, true), // APPENDQ
        0x1a => (0x0f, true), // PREPENDQ
        0x1e => (0x1d, true), // GATQ
        0x24 => (0x23, true), // GATKQ
        other => (other, false),
    }
}

/// Parses the request packet at the start of `buf`; `item_max` is the largest value stored.
pub fn parse(buf: &[u8], item_max: usize) -> Parsed<'_> {
    // (memcached looks at the magic once a whole header is in.)
    if buf.len() < HEADER {
        return Parsed::Incomplete;
    }
    if buf[0] != REQUEST_MAGIC {
        return Parsed::BadMagic;
    }
    let opcode = buf[1];
    let key_len = be16(&buf[2..]) as usize;
    let ext_len = buf[4] as usize;
    let body_len = be32(&buf[8..]) as usize;
    let opaque = be32(&buf[12..]);
    let cas = be64(&buf[16..]);
    let protocol_error = Parsed::ProtocolError { opcode, opaque };
    if key_len > KEY_MAX {
        return protocol_error;
    }
    let (base, quiet) = unquiet(opcode);
    let request = |op| Request { opcode, opaque, cas, quiet, op };
    let whole = |op| {
        let end = HEADER + body_len;
        if buf.len() < end {
            return Parsed::Incomplete;
        }
        Parsed::Request { consumed: end, swallow: 0, request: request(op) }
    };
    // The body's parts once the whole of extras and key is in.
    let fixed = HEADER + ext_len + key_len;
    let parts: Option<(&[u8], &[u8])> = (buf.len() >= fixed).then(|| (&buf[HEADER..HEADER + ext_len], &buf[HEADER + ext_len..fixed]));
    match base {
        // GET, GETK
        0x00 | 0x0c if ext_len == 0 && key_len > 0 && body_len == key_len => match parts {
            Some((_, k)) => whole(Op::Get { key: k, with_key: base == 0x0c, touch: None }),
            None => Parsed::Incomplete,
        },
        // GAT, GATK, TOUCH
        0x1d | 0x23 | 0x1c if ext_len == 4 && key_len > 0 && body_len == key_len + 4 => match parts {
            Some((e, k)) if base == 0x1c => whole(Op::Touch { key: k, exptime: be32(e) }),
            Some((e, k)) => whole(Op::Get { key: k, with_key: base == 0x23, touch: Some(be32(e)) }),
            None => Parsed::Incomplete,
        },
        // SET, ADD, REPLACE; APPEND, PREPEND
        0x01..=0x03 | 0x0e | 0x0f => {
            let extras_ok = if base >= 0x0e { ext_len == 0 } else { ext_len == 8 };
            if !extras_ok || key_len == 0 || body_len < key_len + ext_len {
                return protocol_error;
            }
            let Some((e, k)) = parts else { return Parsed::Incomplete };
            let value_len = body_len - key_len - ext_len;
            if value_len > item_max {
                // Refused before its value is read, which is then discarded.
                return Parsed::Request { consumed: fixed, swallow: value_len, request: request(Op::TooLarge { key: k, unlink: base == 0x01 }) };
            }
            let (flags, exptime) = if ext_len == 8 { (be32(e), be32(&e[4..])) } else { (0, 0) };
            let mode = match base {
                0x01 => StoreMode::Set,
                0x02 => StoreMode::Add,
                0x03 => StoreMode::Replace,
                0x0e => StoreMode::Append,
                _ => StoreMode::Prepend,
            };
            if buf.len() < fixed + value_len {
                return Parsed::Incomplete;
            }
            whole(Op::Store { mode, key: k, value: &buf[fixed..fixed + value_len], flags, exptime })
        }
        // DELETE
        0x04 if ext_len == 0 && key_len > 0 && body_len == key_len => match parts {
            Some((_, k)) => whole(Op::Delete { key: k }),
            None => Parsed::Incomplete,
        },
        // INCREMENT, DECREMENT
        0x05 | 0x06 if ext_len == 20 && key_len > 0 && body_len == key_len + 20 => match parts {
            Some((e, k)) => whole(Op::Arith { key: k, incr: base == 0x05, delta: be64(e), initial: be64(&e[8..]), exptime: be32(&e[16..]) }),
            None => Parsed::Incomplete,
        },
        // QUIT, NOOP, VERSION
        0x07 | 0x0a | 0x0b if ext_len == 0 && key_len == 0 && body_len == 0 => whole(match base {
            0x07 => Op::Quit,
            0x0a => Op::Noop,
            _ => Op::Version,
        }),
        // FLUSH
        0x08 if key_len == 0 && body_len == ext_len && (ext_len == 0 || ext_len == 4) => match parts {
            Some((e, _)) => whole(Op::Flush { delay: if ext_len == 4 { be32(e) } else { 0 } }),
            None => Parsed::Incomplete,
        },
        // STAT
        0x10 if ext_len == 0 && body_len == key_len => match parts {
            Some((_, k)) => whole(Op::Stat { group: k }),
            None => Parsed::Incomplete,
        },
        0x00..=0x10 | 0x1c | 0x1d | 0x23 => protocol_error,
        // Anything else (SASL included: no authentication is configured; and VERBOSITY, which
        // memcached 1.6 answers so too) is unknown; its body is discarded.
        _ => Parsed::Request { consumed: HEADER, swallow: body_len, request: request(Op::Unknown) },
    }
}

/// Appends one response packet.
#[allow(clippy::too_many_arguments)]
pub fn response(out: &mut BytesMut, opcode: u8, status: u16, opaque: u32, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) {
    out.reserve(HEADER + extras.len() + key.len() + value.len());
    out.put_u8(RESPONSE_MAGIC);
    out.put_u8(opcode);
    out.put_u16(key.len() as u16);
    out.put_u8(extras.len() as u8);
    out.put_u8(0);
    out.put_u16(status);
    out.put_u32((extras.len() + key.len() + value.len()) as u32);
    out.put_u32(opaque);
    out.put_u64(cas);
    out.put_slice(extras);
    out.put_slice(key);
    out.put_slice(value);
}

/// Appends an error response: the status and memcached's message for it.
pub fn error(out: &mut BytesMut, opcode: u8, status: u16, opaque: u32) {
    response(out, opcode, status, opaque, 0, &[], &[], message(status).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(opcode: u8, extras: &[u8], key: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
        let mut v = vec![REQUEST_MAGIC, opcode];
        v.extend_from_slice(&(key.len() as u16).to_be_bytes());
        v.push(extras.len() as u8);
        v.extend_from_slice(&[0, 0, 0]);
        v.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
        v.extend_from_slice(&opaque.to_be_bytes());
        v.extend_from_slice(&cas.to_be_bytes());
        v.extend_from_slice(extras);
        v.extend_from_slice(key);
        v.extend_from_slice(value);
        v
    }

    #[test]
    fn requests_parse_to_typed_ops() {
        let get = packet(0x0d, &[], b"k", &[], 7, 0);
        let Parsed::Request { consumed, swallow, request } = parse(&get, 1024) else { panic!() };
        assert_eq!((consumed, swallow), (get.len(), 0));
        assert_eq!(request, Request { opcode: 0x0d, opaque: 7, cas: 0, quiet: true, op: Op::Get { key: b"k", with_key: true, touch: None } });
        let mut extras = 5u32.to_be_bytes().to_vec();
        extras.extend_from_slice(&100u32.to_be_bytes());
        let set = packet(0x01, &extras, b"key", b"value", 1, 9);
        let Parsed::Request { request, .. } = parse(&set, 1024) else { panic!() };
        assert_eq!(request.op, Op::Store { mode: StoreMode::Set, key: b"key", value: b"value", flags: 5, exptime: 100 });
        assert_eq!(request.cas, 9);
        let mut arith = 3u64.to_be_bytes().to_vec();
        arith.extend_from_slice(&10u64.to_be_bytes());
        arith.extend_from_slice(&u32::MAX.to_be_bytes());
        let decr = packet(0x06, &arith, b"n", &[], 0, 0);
        let Parsed::Request { request, .. } = parse(&decr, 1024) else { panic!() };
        assert_eq!(request.op, Op::Arith { key: b"n", incr: false, delta: 3, initial: 10, exptime: u32::MAX });
    }

    #[test]
    fn partial_packets_wait_and_bad_ones_are_told() {
        let set = packet(0x01, &[0; 8], b"key", b"value", 1, 0);
        for cut in [1, 23, 24, 30, set.len() - 1] {
            assert_eq!(parse(&set[..cut], 1024), Parsed::Incomplete, "cut at {cut}");
        }
        assert_eq!(parse(b"get k\r\n", 1024), Parsed::Incomplete);
        assert_eq!(parse(&[b'g'; 24], 1024), Parsed::BadMagic);
        // GET with extras, a key of 251 bytes: protocol errors.
        assert_eq!(parse(&packet(0x00, &[0; 4], b"k", &[], 3, 0), 1024), Parsed::ProtocolError { opcode: 0, opaque: 3 });
        assert_eq!(parse(&packet(0x00, &[], &[b'k'; 251], &[], 3, 0), 1024), Parsed::ProtocolError { opcode: 0, opaque: 3 });
        // Unknown opcodes and values too large: their bodies are discarded.
        let unknown = packet(0x40, &[], b"", b"abc", 0, 0);
        let Parsed::Request { consumed, swallow, request } = parse(&unknown, 1024) else { panic!() };
        assert_eq!((consumed, swallow, request.op), (24, 3, Op::Unknown));
        let big = packet(0x01, &[0; 8], b"k", &[b'x'; 2000], 0, 0);
        let Parsed::Request { consumed, swallow, request } = parse(&big[..40], 1024) else { panic!() };
        assert_eq!((consumed, swallow, request.op), (33, 2000, Op::TooLarge { key: b"k", unlink: true }));
    }

    #[test]
    fn responses_have_memcached_layout() {
        let mut out = BytesMut::new();
        error(&mut out, 0x00, status::KEY_ENOENT, 0xdeadbeef);
        assert_eq!(&out[..8], &[0x81, 0x00, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&out[8..12], &9u32.to_be_bytes());
        assert_eq!(&out[12..16], &0xdeadbeefu32.to_be_bytes());
        assert_eq!(&out[24..], b"Not found");
    }
}
