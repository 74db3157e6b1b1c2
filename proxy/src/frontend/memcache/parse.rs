//! The Memcached text protocol's requests, classic (get, set, incr…) and meta (mg, ms, md,
//! ma, mn, me), parsed from a connection's buffer as memcached 1.6 reads them
//! (doc/protocol.txt): lines end in `\r\n` (a bare `\n` is accepted), storage commands carry a
//! data block of the announced length plus `\r\n`.
//!
//! Errors are the reply line Memcached would send; the connection goes on after them except
//! for an overlong line, which closes it.

/// Longest request line: memcached's key limit allows ~250-byte keys, and a multi-key get
/// fits many of them.
pub const MAX_LINE: usize = 64 * 1024;
pub const MAX_KEY: usize = 250;

pub const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";
pub const BAD_CHUNK: &str = "CLIENT_ERROR bad data chunk";
pub const TOO_LARGE: &str = "SERVER_ERROR object too large for cache";
pub const BAD_TOKEN: &str = "CLIENT_ERROR bad token in command line format";
const INVALID_FLAG: &str = "CLIENT_ERROR invalid flag";
const DUPLICATE_FLAG: &str = "CLIENT_ERROR duplicate flag";
const BAD_BASE64: &str = "CLIENT_ERROR error decoding key";

use std::borrow::Cow;

use base64::Engine as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    /// Set if the item's CAS unique is the one given (any value, 0 included: no item has 0).
    Cas,
    Add,
    Replace,
    Append,
    Prepend,
}

impl StoreMode {
    pub fn name(self) -> &'static str {
        match self {
            StoreMode::Set => "set",
            StoreMode::Cas => "cas",
            StoreMode::Add => "add",
            StoreMode::Replace => "replace",
            StoreMode::Append => "append",
            StoreMode::Prepend => "prepend",
        }
    }
}

/// A meta command's key: as the client wrote it (what the `k` flag returns) and the key it
/// names (decoded when the `b` flag says it is base64).
#[derive(Debug, PartialEq)]
pub struct MetaKey<'a> {
    pub given: &'a [u8],
    pub raw: Cow<'a, [u8]>,
}

/// What every meta command carries beside its own arguments: the key, the flags asked for in
/// their order (the reply returns those it has a value for, in that order), the opaque token
/// (`O`) and quiet mode (`q`).
#[derive(Debug, PartialEq)]
pub struct Meta<'a> {
    pub key: MetaKey<'a>,
    pub flags: Vec<u8>,
    pub opaque: &'a [u8],
    pub quiet: bool,
}

#[derive(Debug, PartialEq)]
pub enum Command<'a> {
    /// get/gets/gat/gats.
    Get {
        keys: Vec<&'a [u8]>,
        cas: bool,
        touch: Option<i64>,
    },
    Store {
        mode: StoreMode,
        key: &'a [u8],
        flags: u32,
        exptime: i64,
        data: &'a [u8],
        cas: u64,
        noreply: bool,
    },
    Arith {
        key: &'a [u8],
        incr: bool,
        delta: u64,
        noreply: bool,
    },
    Delete {
        key: &'a [u8],
        noreply: bool,
    },
    Touch {
        key: &'a [u8],
        exptime: i64,
        noreply: bool,
    },
    FlushAll {
        delay: i64,
        noreply: bool,
    },
    Version,
    Verbosity {
        noreply: bool,
    },
    Stats {
        args: Vec<&'a [u8]>,
    },
    /// cache_memlimit <megabytes> [noreply], in 8..=1,000,000,000 as memcached takes it.
    CacheMemlimit {
        megabytes: u32,
        noreply: bool,
    },
    Quit,
    /// mg: `touch` is the new exptime (`T`), if given.
    MetaGet {
        meta: Meta<'a>,
        touch: Option<i64>,
    },
    /// ms: mode (`M`), client flags (`F`), exptime (`T`), compare-and-swap unique (`C`, 0 for
    /// none).
    MetaSet {
        meta: Meta<'a>,
        data: &'a [u8],
        mode: StoreMode,
        client_flags: u32,
        exptime: i64,
        cas: u64,
    },
    MetaDelete {
        meta: Meta<'a>,
        cas: u64,
    },
    /// ma: increment or decrement by `delta` (`D`, default 1); on a miss, created with
    /// `initial` (`J`) when `autovivify` (`N`, its exptime) is given.
    MetaArith {
        meta: Meta<'a>,
        incr: bool,
        delta: u64,
        cas: u64,
        autovivify: Option<i64>,
        initial: u64,
    },
    MetaNoop,
    MetaDebug {
        meta: Meta<'a>,
    },
    /// shutdown: refused, as memcached without `-A` refuses it.
    Shutdown,
    /// A storage command whose item is too large: answered `SERVER_ERROR object too large
    /// for cache` (its data block swallowed); a `set` also removes the key's old item, so no
    /// stale value stays readable.
    TooLarge {
        unlink: Option<&'a [u8]>,
        noreply: bool,
    },
    /// Input memcached answers by closing the connection: an HTTP request line, or 2 KB
    /// without a newline that cannot be the start of a multi-key get.
    HangUp,
}

impl Command<'_> {
    /// The command's name, as metrics count it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Get { cas: false, touch: None, .. } => "get",
            Command::Get { cas: true, touch: None, .. } => "gets",
            Command::Get { cas: false, .. } => "gat",
            Command::Get { cas: true, .. } => "gats",
            Command::Store { mode, .. } => mode.name(),
            Command::Arith { incr: true, .. } => "incr",
            Command::Arith { incr: false, .. } => "decr",
            Command::Delete { .. } => "delete",
            Command::Touch { .. } => "touch",
            Command::FlushAll { .. } => "flush_all",
            Command::Version => "version",
            Command::Verbosity { .. } => "verbosity",
            Command::Stats { .. } => "stats",
            Command::CacheMemlimit { .. } => "cache_memlimit",
            Command::Quit => "quit",
            Command::Shutdown => "shutdown",
            Command::TooLarge { .. } => "set",
            Command::HangUp => "hang-up",
            Command::MetaGet { .. } => "mg",
            Command::MetaSet { .. } => "ms",
            Command::MetaDelete { .. } => "md",
            Command::MetaArith { .. } => "ma",
            Command::MetaNoop => "mn",
            Command::MetaDebug { .. } => "me",
        }
    }
}

/// One request taken from the buffer: `consumed` bytes, and the command or the error line
/// to answer with.
#[derive(Debug, PartialEq)]
pub struct Parsed<'a> {
    pub consumed: usize,
    pub command: Result<Command<'a>, &'static str>,
    /// Bytes after `consumed` to discard as they arrive (the data block of an item too large
    /// to store).
    pub swallow: usize,
}

/// The line is longer than `MAX_LINE`: answer `CLIENT_ERROR line too long` and close.
#[derive(Debug, PartialEq)]
pub struct LineTooLong;

fn key_ok(k: &[u8]) -> bool {
    !k.is_empty() && k.len() <= MAX_KEY && k.iter().all(|&b| b > 32 && b != 127)
}

fn num<T: std::str::FromStr>(t: &[u8]) -> Option<T> {
    std::str::from_utf8(t).ok()?.parse().ok()
}

/// A whole token as C's `strtol` family reads one: an optional sign, then decimal digits and
/// nothing else. (The sign, and the digits.)
fn c_number(t: &[u8]) -> Option<(bool, &str)> {
    let (negative, digits) = match t.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some((negative, std::str::from_utf8(digits).ok()?))
}

/// A whole token read as C's `strtoul`/`strtoull` read it into a 64-bit value, as memcached's
/// `safe_strtoul`/`safe_strtoull` take it: no overflow; a minus sign refused only when the
/// result would read as negative (so "-0" is 0).
fn c_unsigned(t: &[u8]) -> Option<u64> {
    let (negative, digits) = c_number(t)?;
    let magnitude: u64 = digits.parse().ok()?;
    let value = if negative { magnitude.wrapping_neg() } else { magnitude };
    if negative && (value as i64) < 0 {
        return None;
    }
    Some(value)
}

/// A whole token read as memcached's `safe_strtol` reads it: C's `strtol` into a 64-bit long
/// (no overflow), then kept to 32 bits as that function stores it (so 4294967296 is 0).
fn c_int32(t: &[u8]) -> Option<i32> {
    let (negative, digits) = c_number(t)?;
    let magnitude: i128 = digits.parse().ok()?;
    let value = i64::try_from(if negative { -magnitude } else { magnitude }).ok()?;
    Some(value as i32)
}

/// memcached reads no further than this without a newline unless the line starts a
/// multi-key get (`try_read_command_ascii`): anything else is closed.
const LINE_WITHOUT_NEWLINE: usize = 2048;

/// Whether a line still without its newline may go on: only a get or gets (after at most
/// 100 spaces) may be longer than `LINE_WITHOUT_NEWLINE`.
fn may_grow(buf: &[u8]) -> bool {
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

/// A storage command's data block.
enum Block<'a> {
    /// The data, and where the request ends.
    Ready {
        data: &'a [u8],
        end: usize,
    },
    Incomplete,
    /// Answered without the data: too large (swallowed as it arrives) or not ending in CRLF.
    Refused(Parsed<'a>),
}

fn data_block(buf: &[u8], after_line: usize, len: usize, key_len: usize, item_max: usize) -> Block<'_> {
    // Memcached counts the item's header (~48 bytes) and key against the limit.
    if len.saturating_add(key_len + 48) > item_max {
        return Block::Refused(Parsed { consumed: after_line, command: Err(TOO_LARGE), swallow: len.saturating_add(2) });
    }
    let end = after_line + len + 2;
    if buf.len() < end {
        return Block::Incomplete;
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Block::Refused(Parsed { consumed: end, command: Err(BAD_CHUNK), swallow: 0 });
    }
    Block::Ready { data: &buf[after_line..end - 2], end }
}

/// An error memcached does not send: the request said `noreply`, which silences every line
/// it would answer once it has read its arguments (`set_noreply_maybe`), errors included.
pub const SILENT: &str = "";

/// The commands that read `noreply` before checking their arguments.
const NOREPLY_SILENCES_ERRORS: &[&[u8]] =
    &[b"set", b"add", b"replace", b"append", b"prepend", b"cas", b"incr", b"decr", b"delete", b"touch", b"flush_all", b"verbosity", b"cache_memlimit"];

/// Parses one request at the start of `buf`; `None` when more bytes are needed.
/// `item_max` is the largest data block accepted.
pub fn parse(buf: &[u8], item_max: usize) -> Result<Option<Parsed<'_>>, LineTooLong> {
    let mut parsed = parse_request(buf, item_max)?;
    if let Some(p) = parsed.as_mut().filter(|p| matches!(p.command, Err(line) if line != "ERROR")) {
        let line = &buf[..p.consumed.min(buf.len())];
        let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
        let mut tokens = line.split(|&b| b == b' ' || b == b'\r').filter(|t| !t.is_empty());
        let name = tokens.next().unwrap_or_default();
        if NOREPLY_SILENCES_ERRORS.contains(&name) && tokens.next_back() == Some(&b"noreply"[..]) {
            p.command = Err(SILENT);
        }
    }
    Ok(parsed)
}

fn parse_request(buf: &[u8], item_max: usize) -> Result<Option<Parsed<'_>>, LineTooLong> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > LINE_WITHOUT_NEWLINE && !may_grow(buf) {
            return Ok(Some(Parsed { consumed: buf.len(), command: Ok(Command::HangUp), swallow: 0 }));
        }
        return if buf.len() > MAX_LINE { Err(LineTooLong) } else { Ok(None) };
    };
    if nl > MAX_LINE {
        return Err(LineTooLong);
    }
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' { nl - 1 } else { nl };
    let line = &buf[..line_end];
    let after_line = nl + 1;
    let tokens: Vec<&[u8]> = line.split(|&b| b == b' ').filter(|t| !t.is_empty()).collect();
    let done = |command| Ok(Some(Parsed { consumed: after_line, command, swallow: 0 }));
    let Some((&name, args)) = tokens.split_first() else { return done(Err("ERROR")) };
    let noreply = args.last() == Some(&&b"noreply"[..]);
    match name {
        b"get" | b"gets" | b"gat" | b"gats" => {
            let touch = name.starts_with(b"gat");
            let (exptime, keys) = if touch {
                match args.split_first() {
                    Some((t, keys)) => (c_int32(t).map(i64::from), keys),
                    None => return done(Err("ERROR")),
                }
            } else {
                (Some(0), args)
            };
            let Some(exptime) = exptime else { return done(Err("CLIENT_ERROR invalid exptime argument")) };
            if keys.is_empty() {
                return done(Err("ERROR"));
            }
            if !keys.iter().all(|k| key_ok(k)) {
                return done(Err(BAD_FORMAT));
            }
            done(Ok(Command::Get { keys: keys.to_vec(), cas: name.ends_with(b"s"), touch: touch.then_some(exptime) }))
        }
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            let is_cas = name == b"cas";
            let want = if is_cas { 5 } else { 4 };
            if args.len() != want && args.len() != want + 1 {
                return done(Err("ERROR"));
            }
            // As memcached reads them: flags any 64-bit number kept to 32 bits, exptime and
            // length C longs kept to 32 bits.
            let (key, flags, exptime, len) = (args[0], c_unsigned(args[1]).map(|f| f as u32), c_int32(args[2]).map(i64::from), c_int32(args[3]));
            let cas = if is_cas { c_unsigned(args[4]) } else { Some(0) };
            let (Some(flags), Some(exptime), Some(len), Some(cas)) = (flags, exptime, len, cas) else {
                return done(Err(BAD_FORMAT));
            };
            if !key_ok(key) || len < 0 || (args.len() == want + 1 && !noreply) {
                return done(Err(BAD_FORMAT));
            }
            let (data, total) = match data_block(buf, after_line, len as usize, key.len(), item_max) {
                Block::Ready { data, end } => (data, end),
                Block::Incomplete => return Ok(None),
                Block::Refused(p) if p.command == Err(TOO_LARGE) => {
                    let unlink = (name == b"set").then_some(key);
                    return Ok(Some(Parsed { command: Ok(Command::TooLarge { unlink, noreply }), ..p }));
                }
                Block::Refused(p) => return Ok(Some(p)),
            };
            let mode = match name {
                b"cas" => StoreMode::Cas,
                b"add" => StoreMode::Add,
                b"replace" => StoreMode::Replace,
                b"append" => StoreMode::Append,
                b"prepend" => StoreMode::Prepend,
                _ => StoreMode::Set,
            };
            Ok(Some(Parsed { consumed: total, command: Ok(Command::Store { mode, key, flags, exptime, data, cas, noreply }), swallow: 0 }))
        }
        b"incr" | b"decr" => {
            if args.len() != 2 && !(args.len() == 3 && noreply) {
                return done(Err("ERROR"));
            }
            if !key_ok(args[0]) {
                return done(Err(BAD_FORMAT));
            }
            match c_unsigned(args[1]) {
                Some(delta) => done(Ok(Command::Arith { key: args[0], incr: name == b"incr", delta, noreply })),
                None => done(Err("CLIENT_ERROR invalid numeric delta argument")),
            }
        }
        b"delete" => {
            let rest = if noreply { &args[..args.len() - 1] } else { args };
            match rest {
                [key] if key_ok(key) => done(Ok(Command::Delete { key, noreply })),
                [key, b"0"] if key_ok(key) => done(Ok(Command::Delete { key, noreply })),
                [_, _] => done(Err("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]")),
                _ => done(Err("ERROR")),
            }
        }
        b"touch" => {
            if args.len() != 2 && !(args.len() == 3 && noreply) {
                return done(Err("ERROR"));
            }
            match c_int32(args[1]).map(i64::from) {
                Some(exptime) if key_ok(args[0]) => done(Ok(Command::Touch { key: args[0], exptime, noreply })),
                Some(_) => done(Err(BAD_FORMAT)),
                None => done(Err("CLIENT_ERROR invalid exptime argument")),
            }
        }
        b"flush_all" => {
            let rest = if noreply { &args[..args.len() - 1] } else { args };
            match rest {
                [] => done(Ok(Command::FlushAll { delay: 0, noreply })),
                [d] => match c_int32(d) {
                    Some(delay) => done(Ok(Command::FlushAll { delay: delay.into(), noreply })),
                    None => done(Err("CLIENT_ERROR invalid exptime argument")),
                },
                _ => done(Err("ERROR")),
            }
        }
        b"version" => done(Ok(Command::Version)),
        b"verbosity" => match args.len() {
            1 | 2 if c_unsigned(args[0]).is_some_and(|level| level <= u64::from(u32::MAX)) => done(Ok(Command::Verbosity { noreply })),
            1 | 2 => done(Err(BAD_FORMAT)),
            _ => done(Err("ERROR")),
        },
        b"stats" => done(Ok(Command::Stats { args: args.to_vec() })),
        b"cache_memlimit" => {
            if args.len() != 1 && !(args.len() == 2 && noreply) {
                return done(Err("ERROR"));
            }
            match num::<u32>(args[0]) {
                None => done(Err("ERROR")),
                Some(mb) if mb < 8 => done(Err("MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m")),
                Some(mb) if mb > 1_000_000_000 => done(Err("MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes")),
                Some(megabytes) => done(Ok(Command::CacheMemlimit { megabytes, noreply })),
            }
        }
        b"quit" => done(Ok(Command::Quit)),
        b"shutdown" => done(Ok(Command::Shutdown)),
        b"mn" => done(Ok(Command::MetaNoop)),
        b"mg" | b"md" | b"ma" | b"me" => {
            // (memcached's me reads its key before counting tokens.)
            let missing = if name == b"me" { BAD_FORMAT } else { "ERROR" };
            let Some((&key, tokens)) = args.split_first() else { return done(Err(missing)) };
            done(meta_command(name, key, tokens))
        }
        b"ms" if args.is_empty() => done(Err("ERROR")),
        b"ms" => {
            let (Some(&key), Some(len)) = (args.first(), args.get(1).and_then(|l| num::<usize>(l))) else {
                return done(Err(BAD_FORMAT));
            };
            if key.len() > MAX_KEY * 2 {
                return done(Err(BAD_FORMAT));
            }
            let (data, total) = match data_block(buf, after_line, len, key.len(), item_max) {
                Block::Ready { data, end } => (data, end),
                Block::Incomplete => return Ok(None),
                Block::Refused(p) => return Ok(Some(p)),
            };
            // The block is read even when the flags are refused: the next request follows it.
            let command = meta_set(key, &args[2..], data);
            Ok(Some(Parsed { consumed: total, command, swallow: 0 }))
        }
        // memcached hangs up on what looks like an HTTP request line.
        _ if tokens.last().is_some_and(|t| t.starts_with(b"HTTP/")) => done(Ok(Command::HangUp)),
        _ => done(Err("ERROR")),
    }
}

/// The token of the first `flag` among a meta command's flags.
fn token<'a>(tokens: &[&'a [u8]], flag: u8) -> Option<&'a [u8]> {
    tokens.iter().find(|t| t[0] == flag).map(|t| &t[1..])
}

/// What a meta command accepts and how memcached 1.6 words its refusals: mg and ms name the
/// fault, md and ma answer one line for every refused flag, key or number.
struct Rules {
    allowed: &'static [u8],
    invalid: &'static str,
    duplicate: &'static str,
    bad_base64: &'static str,
    bad_number: &'static str,
}

const ONE_FOR_ALL: &str = "CLIENT_ERROR invalid or duplicate flag";
const MG: Rules = Rules { allowed: b"bcfkOqstvT", invalid: INVALID_FLAG, duplicate: DUPLICATE_FLAG, bad_base64: BAD_BASE64, bad_number: BAD_TOKEN };
const MS: Rules = Rules { allowed: b"bcCFIkOqTMS", invalid: INVALID_FLAG, duplicate: DUPLICATE_FLAG, bad_base64: BAD_BASE64, bad_number: BAD_TOKEN };
const MD: Rules = Rules { allowed: b"bCkOq", invalid: ONE_FOR_ALL, duplicate: ONE_FOR_ALL, bad_base64: ONE_FOR_ALL, bad_number: ONE_FOR_ALL };
const MA: Rules = Rules { allowed: b"bCNJDMOqcvk", invalid: ONE_FOR_ALL, duplicate: ONE_FOR_ALL, bad_base64: ONE_FOR_ALL, bad_number: ONE_FOR_ALL };
/// me takes `b` alone and ignores anything else.
const ME: Rules = Rules { allowed: b"b", invalid: INVALID_FLAG, duplicate: DUPLICATE_FLAG, bad_base64: BAD_BASE64, bad_number: BAD_TOKEN };

impl Rules {
    /// The number a flag carries (`default` when the flag is absent).
    fn number<T: std::str::FromStr>(&self, tokens: &[&[u8]], flag: u8, default: T) -> Result<T, &'static str> {
        match token(tokens, flag) {
            None => Ok(default),
            Some(t) => num(t).ok_or(self.bad_number),
        }
    }

    /// The number a flag carries, if the flag is given.
    fn optional<T: std::str::FromStr>(&self, tokens: &[&[u8]], flag: u8) -> Result<Option<T>, &'static str> {
        token(tokens, flag).map(|t| num(t).ok_or(self.bad_number)).transpose()
    }

    /// The part every meta command shares: its flags allowed and each given once, the key
    /// decoded when `b` is among them, then checked as a classic key is.
    fn meta<'a>(&self, key: &'a [u8], tokens: &[&'a [u8]]) -> Result<Meta<'a>, &'static str> {
        if key.is_empty() || key.len() > MAX_KEY * 2 {
            return Err(BAD_FORMAT);
        }
        let mut seen = [false; 128];
        for t in tokens {
            let f = t[0];
            if !self.allowed.contains(&f) {
                return Err(self.invalid);
            }
            if std::mem::replace(&mut seen[usize::from(f)], true) {
                return Err(self.duplicate);
            }
        }
        let flags: Vec<u8> = tokens.iter().map(|t| t[0]).collect();
        let base64 = flags.contains(&b'b');
        let raw = if base64 { Cow::Owned(base64::engine::general_purpose::STANDARD.decode(key).map_err(|_| self.bad_base64)?) } else { Cow::Borrowed(key) };
        let printable = base64 || raw.iter().all(|&b| b > 32 && b != 127);
        if raw.is_empty() || raw.len() > MAX_KEY || !printable {
            return Err(BAD_FORMAT);
        }
        let quiet = flags.contains(&b'q');
        Ok(Meta { key: MetaKey { given: key, raw }, flags, opaque: token(tokens, b'O').unwrap_or_default(), quiet })
    }
}

/// ms: flags, mode, client flags, exptime and CAS unique.
fn meta_set<'a>(key: &'a [u8], tokens: &[&'a [u8]], data: &'a [u8]) -> Result<Command<'a>, &'static str> {
    let meta = MS.meta(key, tokens)?;
    let mode = match token(tokens, b'M') {
        None => StoreMode::Set,
        Some([m]) => match m.to_ascii_uppercase() {
            b'S' => StoreMode::Set,
            b'E' => StoreMode::Add,
            b'R' => StoreMode::Replace,
            b'A' => StoreMode::Append,
            b'P' => StoreMode::Prepend,
            _ => return Err("CLIENT_ERROR invalid mode for ms M token"),
        },
        Some(_) => return Err("CLIENT_ERROR incorrect length for M token"),
    };
    // Client flags are read as memcached reads them: any 64-bit number, kept to 32 bits.
    let client_flags = match token(tokens, b'F') {
        None => 0,
        Some(t) => num::<u64>(t).ok_or(BAD_FORMAT)? as u32,
    };
    let (exptime, cas) = (MS.number(tokens, b'T', 0)?, MS.optional(tokens, b'C')?);
    // With a CAS unique, set and replace compare it (0 included), as memcached's ms does.
    let mode = match (mode, cas) {
        (StoreMode::Set | StoreMode::Replace, Some(_)) => StoreMode::Cas,
        (mode, _) => mode,
    };
    Ok(Command::MetaSet { meta, data, mode, client_flags, exptime, cas: cas.unwrap_or(0) })
}

/// mg, md, ma and me: their flags checked and their numbers read.
fn meta_command<'a>(name: &[u8], key: &'a [u8], tokens: &[&'a [u8]]) -> Result<Command<'a>, &'static str> {
    match name {
        b"mg" => {
            let meta = MG.meta(key, tokens)?;
            Ok(Command::MetaGet { meta, touch: MG.optional(tokens, b'T')? })
        }
        b"md" => {
            let meta = MD.meta(key, tokens)?;
            Ok(Command::MetaDelete { meta, cas: MD.number(tokens, b'C', 0)? })
        }
        b"ma" => {
            let meta = MA.meta(key, tokens)?;
            let incr = match token(tokens, b'M') {
                None => true,
                Some([b'I' | b'i' | b'+']) => true,
                Some([b'D' | b'd' | b'-']) => false,
                Some([]) => return Err(ONE_FOR_ALL),
                Some(_) => return Err("CLIENT_ERROR invalid mode for ma M token"),
            };
            let (delta, cas, initial) = (MA.number(tokens, b'D', 1)?, MA.number(tokens, b'C', 0)?, MA.number(tokens, b'J', 0)?);
            Ok(Command::MetaArith { meta, incr, delta, cas, autovivify: MA.optional(tokens, b'N')?, initial })
        }
        _ => {
            let base64: Vec<&[u8]> = tokens.iter().copied().filter(|t| t[0] == b'b').take(1).collect();
            Ok(Command::MetaDebug { meta: ME.meta(key, &base64)? })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(buf: &[u8]) -> Parsed<'_> {
        parse(buf, 1024 * 1024).unwrap().expect("complete")
    }

    #[test]
    fn retrieval_and_storage() {
        let p = one(b"gets a b\r\n");
        assert_eq!(p.command, Ok(Command::Get { keys: vec![b"a", b"b"], cas: true, touch: None }));
        let p = one(b"gat 10 k\r\n");
        assert_eq!(p.command, Ok(Command::Get { keys: vec![b"k"], cas: false, touch: Some(10) }));
        let p = one(b"set k 5 0 2\r\nhi\r\nget k\r\n");
        assert_eq!(p.consumed, 17);
        assert_eq!(p.command, Ok(Command::Store { mode: StoreMode::Set, key: b"k", flags: 5, exptime: 0, data: b"hi", cas: 0, noreply: false }));
        let p = one(b"cas k 0 0 1 77 noreply\r\nx\r\n");
        assert!(matches!(p.command, Ok(Command::Store { cas: 77, noreply: true, .. })));
        assert_eq!(parse(b"set k 0 0 5\r\nab", 1 << 20), Ok(None));
        assert_eq!(parse(b"get k", 1 << 20), Ok(None));
        // A bare \n ends a line too.
        assert_eq!(one(b"version\n").command, Ok(Command::Version));
    }

    #[test]
    fn errors_are_memcached_lines() {
        assert_eq!(one(b"bogus\r\n").command, Err("ERROR"));
        assert_eq!(one(b"\r\n").command, Err("ERROR"));
        assert_eq!(one(b"set k 0 0 z\r\n").command, Err(BAD_FORMAT));
        assert_eq!(one(b"set k 0 0 1\r\nabc\r\n").command, Err(BAD_CHUNK));
        assert_eq!(one(b"set k 0 0 1\r\nabc\r\n").consumed, 16);
        let long_key = format!("get {}\r\n", "k".repeat(251));
        assert_eq!(one(long_key.as_bytes()).command, Err(BAD_FORMAT));
        assert_eq!(one(b"get a\x01b\r\n").command, Err(BAD_FORMAT));
        assert_eq!(one(b"incr k x\r\n").command, Err("CLIENT_ERROR invalid numeric delta argument"));
        assert_eq!(one(b"delete k 5\r\n").command, Err("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"));
        let long_get = [&b"get "[..], &vec![b'a'; MAX_LINE]].concat();
        assert_eq!(parse(&long_get, 1 << 20), Err(LineTooLong));
        // 2 KB without a newline that cannot be a multi-key get: memcached hangs up.
        assert_eq!(one(&[b'a'; 2049]).command, Ok(Command::HangUp));
        assert_eq!(parse(&long_get[..3000], 1 << 20), Ok(None), "a get may go on");
        assert_eq!(one(b"GET / HTTP/1.0\r\n").command, Ok(Command::HangUp));
        // noreply silences the errors of the commands that read it first.
        assert_eq!(one(b"incr k x noreply\r\n").command, Err(SILENT));
        assert_eq!(one(b"verbosity x\r\n").command, Err(BAD_FORMAT));
        assert_eq!(one(b"flush_all x\r\n").command, Err("CLIENT_ERROR invalid exptime argument"));
    }

    #[test]
    fn numbers_read_as_memcached_reads_them() {
        // Flags: any 64-bit number, kept to 32 bits; a minus sign only when it makes 0.
        assert!(matches!(one(b"set k 4294967297 0 1\r\na\r\n").command, Ok(Command::Store { flags: 1, .. })));
        assert!(matches!(one(b"set k -0 0 1\r\na\r\n").command, Ok(Command::Store { flags: 0, .. })));
        assert_eq!(one(b"set k -1 0 1\r\na\r\n").command, Err(BAD_FORMAT));
        // Lengths and exptimes: C longs kept to 32 bits (4294967296 is 0, LONG_MAX is -1).
        assert_eq!(one(b"set k 0 0 4294967296\r\nabc\r\n").command, Err(BAD_CHUNK));
        assert!(matches!(one(b"set k 0 4294967297 1\r\na\r\n").command, Ok(Command::Store { exptime: 1, .. })));
        assert_eq!(one(b"set k 0 0 9223372036854775808\r\n").command, Err(BAD_FORMAT), "past a long");
        // cas 0 is a compare that never matches, not a plain set.
        assert!(matches!(one(b"cas k 0 0 1 0\r\na\r\n").command, Ok(Command::Store { mode: StoreMode::Cas, cas: 0, .. })));
    }

    #[test]
    fn oversized_items_are_swallowed() {
        // Answered at once; the block is discarded as it arrives, never buffered whole.
        let p = parse(b"set k 0 0 2000\r\nxx", 1000).unwrap().unwrap();
        assert_eq!(p.command, Ok(Command::TooLarge { unlink: Some(b"k"), noreply: false }));
        assert_eq!((p.consumed, p.swallow), (16, 2002));
    }

    #[test]
    fn absurd_lengths_are_refused_not_overflowed() {
        let p = one(b"ms k 18446744073709551615\r\n");
        assert_eq!((p.command, p.swallow), (Err(TOO_LARGE), usize::MAX));
        // LONG_MAX kept to 32 bits is -1, refused as memcached refuses it.
        let p = one(b"set k 0 0 9223372036854775807\r\n");
        assert_eq!(p.command, Err(BAD_FORMAT));
        let p = one(b"set k 0 0 2147483647\r\n");
        assert_eq!(p.command, Ok(Command::TooLarge { unlink: Some(b"k"), noreply: false }));
    }

    #[test]
    fn meta_commands() {
        let p = one(b"mg key v c f T30 Oab q\r\n");
        let Ok(Command::MetaGet { meta, touch }) = p.command else { panic!("{:?}", p.command) };
        assert_eq!((meta.key.given, &meta.key.raw[..]), (&b"key"[..], &b"key"[..]));
        assert_eq!(meta.flags, b"vcfTOq");
        assert_eq!((touch, meta.opaque, meta.quiet), (Some(30), &b"ab"[..], true));
        let p = one(b"ms key 2 F5 MA\r\nhi\r\n");
        let Ok(Command::MetaSet { data, mode, client_flags, exptime, cas, .. }) = p.command else { panic!() };
        assert_eq!((data, mode, client_flags, exptime, cas), (&b"hi"[..], StoreMode::Append, 5, 0, 0));
        assert_eq!(one(b"mn\r\n").command, Ok(Command::MetaNoop));
        assert_eq!(one(b"ms key\r\n").command, Err(BAD_FORMAT));
        let p = one(b"ma k MD D18446744073709551615 N30 J7\r\n");
        let Ok(Command::MetaArith { incr, delta, autovivify, initial, cas, .. }) = p.command else { panic!() };
        assert_eq!((incr, delta, autovivify, initial, cas), (false, u64::MAX, Some(30), 7, 0));
    }

    #[test]
    fn meta_keys_in_base64_are_decoded() {
        let p = one(b"md a2V5 b k\r\n");
        let Ok(Command::MetaDelete { meta, .. }) = p.command else { panic!() };
        assert_eq!((meta.key.given, &meta.key.raw[..]), (&b"a2V5"[..], &b"key"[..]));
        // Decoded, a key may hold any byte, but not more than 250 of them.
        let p = one(b"mg AAEC b v\r\n");
        let Ok(Command::MetaGet { meta, .. }) = p.command else { panic!() };
        assert_eq!(&meta.key.raw[..], &[0, 1, 2]);
        assert_eq!(one(b"mg !!! b\r\n").command, Err(BAD_BASE64));
        assert_eq!(one(b"mg a\x01b v\r\n").command, Err(BAD_FORMAT));
    }

    #[test]
    fn meta_flags_and_numbers_are_refused_in_memcacheds_words() {
        // mg and ms name the fault.
        assert_eq!(one(b"mg k v X\r\n").command, Err(INVALID_FLAG));
        assert_eq!(one(b"mg k v v\r\n").command, Err(DUPLICATE_FLAG));
        assert_eq!(one(b"mg k Tsoon\r\n").command, Err(BAD_TOKEN));
        assert_eq!(one(b"mg k T99999999999999999999\r\n").command, Err(BAD_TOKEN));
        assert_eq!(one(b"ms k 1 C-1\r\nx\r\n").command, Err(BAD_TOKEN));
        assert_eq!(one(b"ms k 1 MZ\r\nx\r\n").command, Err("CLIENT_ERROR invalid mode for ms M token"));
        assert_eq!(one(b"ms k 1 M\r\nx\r\n").command, Err("CLIENT_ERROR incorrect length for M token"));
        // md and ma answer one line for any refused flag, key or number.
        for line in [&b"md k C-1\r\n"[..], b"md k X\r\n", b"md k q q\r\n", b"md !!! b\r\n", b"ma k D-5\r\n", b"ma k Jx\r\n", b"ma k M\r\n"] {
            assert_eq!(one(line).command, Err(ONE_FOR_ALL), "{}", String::from_utf8_lossy(line));
        }
        assert_eq!(one(b"ma k MX\r\n").command, Err("CLIENT_ERROR invalid mode for ma M token"));
        // Client flags: any 64-bit number, kept to 32 bits, as memcached reads them.
        assert!(matches!(one(b"ms k 1 F4294967296\r\nx\r\n").command, Ok(Command::MetaSet { client_flags: 0, .. })));
        let p = one(b"ms k 1 F18446744073709551616\r\nx\r\nmn\r\n");
        assert_eq!(p.command, Err(BAD_FORMAT));
        // The refused request's data block is consumed: the next request starts after it.
        assert_eq!(p.consumed, 33);
        // me ignores flags other than b.
        assert!(matches!(one(b"me k zz\r\n").command, Ok(Command::MetaDebug { .. })));
    }

    #[test]
    fn cache_memlimit_is_in_megabytes_within_memcached_bounds() {
        assert_eq!(one(b"cache_memlimit 64\r\n").command, Ok(Command::CacheMemlimit { megabytes: 64, noreply: false }));
        assert_eq!(one(b"cache_memlimit 64 noreply\r\n").command, Ok(Command::CacheMemlimit { megabytes: 64, noreply: true }));
        assert_eq!(one(b"cache_memlimit 7\r\n").command, Err("MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m"));
        assert_eq!(one(b"cache_memlimit 1000000001\r\n").command, Err("MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes"));
        // Numbers that do not fit, or are not numbers, are refused, never wrapped.
        assert_eq!(one(b"cache_memlimit 18446744073709551615\r\n").command, Err("ERROR"));
        assert_eq!(one(b"cache_memlimit -8\r\n").command, Err("ERROR"));
        assert_eq!(one(b"cache_memlimit 64 extra\r\n").command, Err("ERROR"));
    }
}
