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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
}

impl StoreMode {
    pub fn name(self) -> &'static str {
        match self {
            StoreMode::Set => "set",
            StoreMode::Add => "add",
            StoreMode::Replace => "replace",
            StoreMode::Append => "append",
            StoreMode::Prepend => "prepend",
        }
    }
}

/// A meta command's flag: its letter and token (`T30` → ('T', "30")).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaFlag<'a> {
    pub flag: u8,
    pub token: &'a [u8],
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
    /// cache_memlimit <megabytes> [noreply].
    CacheMemlimit {
        megabytes: u64,
        noreply: bool,
    },
    Quit,
    MetaGet {
        key: &'a [u8],
        flags: Vec<MetaFlag<'a>>,
    },
    MetaSet {
        key: &'a [u8],
        data: &'a [u8],
        flags: Vec<MetaFlag<'a>>,
    },
    MetaDelete {
        key: &'a [u8],
        flags: Vec<MetaFlag<'a>>,
    },
    MetaArith {
        key: &'a [u8],
        flags: Vec<MetaFlag<'a>>,
    },
    MetaNoop,
    MetaDebug {
        key: &'a [u8],
    },
}

impl Command<'_> {
    /// The command's name, as metrics count it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Get { cas: false, touch: None, .. } => "get",
            Command::Get { cas: true, touch: None, .. } => "gets",
            Command::Get { cas: false, .. } => "gat",
            Command::Get { cas: true, .. } => "gats",
            Command::Store { mode, cas, .. } if *cas != 0 && *mode == StoreMode::Set => "cas",
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

/// Parses one request at the start of `buf`; `None` when more bytes are needed.
/// `item_max` is the largest data block accepted.
pub fn parse(buf: &[u8], item_max: usize) -> Result<Option<Parsed<'_>>, LineTooLong> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
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
                    Some((t, keys)) => (num::<i64>(t), keys),
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
            let (key, flags, exptime, len) = (args[0], num::<u32>(args[1]), num::<i64>(args[2]), num::<i64>(args[3]));
            let cas = if is_cas { num::<u64>(args[4]) } else { Some(0) };
            let (Some(flags), Some(exptime), Some(len), Some(cas)) = (flags, exptime, len, cas) else {
                return done(Err(BAD_FORMAT));
            };
            if !key_ok(key) || len < 0 || (args.len() == want + 1 && !noreply) {
                return done(Err(BAD_FORMAT));
            }
            let (data, total) = match data_block(buf, after_line, len as usize, key.len(), item_max) {
                Block::Ready { data, end } => (data, end),
                Block::Incomplete => return Ok(None),
                Block::Refused(p) => return Ok(Some(p)),
            };
            let mode = match name {
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
            match num::<u64>(args[1]) {
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
            match num::<i64>(args[1]) {
                Some(exptime) if key_ok(args[0]) => done(Ok(Command::Touch { key: args[0], exptime, noreply })),
                Some(_) => done(Err(BAD_FORMAT)),
                None => done(Err("CLIENT_ERROR invalid exptime argument")),
            }
        }
        b"flush_all" => {
            let rest = if noreply { &args[..args.len() - 1] } else { args };
            match rest {
                [] => done(Ok(Command::FlushAll { delay: 0, noreply })),
                [d] => match num::<i64>(d) {
                    Some(delay) => done(Ok(Command::FlushAll { delay, noreply })),
                    None => done(Err(BAD_FORMAT)),
                },
                _ => done(Err("ERROR")),
            }
        }
        b"version" => done(Ok(Command::Version)),
        b"verbosity" => match args.len() {
            1 | 2 => done(Ok(Command::Verbosity { noreply })),
            _ => done(Err("ERROR")),
        },
        b"stats" => done(Ok(Command::Stats { args: args.to_vec() })),
        b"cache_memlimit" => match (args.first().and_then(|a| num::<u64>(a)), args.len()) {
            (Some(megabytes), 1) => done(Ok(Command::CacheMemlimit { megabytes, noreply: false })),
            (Some(megabytes), 2) if noreply => done(Ok(Command::CacheMemlimit { megabytes, noreply })),
            _ => done(Err(BAD_FORMAT)),
        },
        b"quit" => done(Ok(Command::Quit)),
        b"mn" => done(Ok(Command::MetaNoop)),
        b"mg" | b"md" | b"ma" | b"me" => {
            let Some((&key, rest)) = args.split_first() else { return done(Err(BAD_FORMAT)) };
            if key.len() > MAX_KEY * 2 || key.is_empty() {
                return done(Err(BAD_FORMAT));
            }
            let flags = rest.iter().map(|t| MetaFlag { flag: t[0], token: &t[1..] }).collect();
            done(Ok(match name {
                b"mg" => Command::MetaGet { key, flags },
                b"md" => Command::MetaDelete { key, flags },
                b"ma" => Command::MetaArith { key, flags },
                _ => Command::MetaDebug { key },
            }))
        }
        b"ms" => {
            let (Some(&key), Some(len)) = (args.first(), args.get(1).and_then(|l| num::<usize>(l))) else {
                return done(Err(BAD_FORMAT));
            };
            if key.len() > MAX_KEY * 2 || key.is_empty() {
                return done(Err(BAD_FORMAT));
            }
            let (data, total) = match data_block(buf, after_line, len, key.len(), item_max) {
                Block::Ready { data, end } => (data, end),
                Block::Incomplete => return Ok(None),
                Block::Refused(p) => return Ok(Some(p)),
            };
            let flags = args[2..].iter().map(|t| MetaFlag { flag: t[0], token: &t[1..] }).collect();
            Ok(Some(Parsed { consumed: total, command: Ok(Command::MetaSet { key, data, flags }), swallow: 0 }))
        }
        _ => done(Err("ERROR")),
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
        assert_eq!(parse(&vec![b'a'; MAX_LINE + 1], 1 << 20), Err(LineTooLong));
    }

    #[test]
    fn oversized_items_are_swallowed() {
        // Answered at once; the block is discarded as it arrives, never buffered whole.
        let p = parse(b"set k 0 0 2000\r\nxx", 1000).unwrap().unwrap();
        assert_eq!(p.command, Err(TOO_LARGE));
        assert_eq!((p.consumed, p.swallow), (16, 2002));
    }

    #[test]
    fn absurd_lengths_are_refused_not_overflowed() {
        let p = one(b"ms k 18446744073709551615\r\n");
        assert_eq!((p.command, p.swallow), (Err(TOO_LARGE), usize::MAX));
        let p = one(b"set k 0 0 9223372036854775807\r\n");
        assert_eq!(p.command, Err(TOO_LARGE));
    }

    #[test]
    fn meta_commands() {
        let p = one(b"mg key v c f T30\r\n");
        let Ok(Command::MetaGet { key, flags }) = p.command else { panic!() };
        assert_eq!(key, b"key");
        assert_eq!(flags[3], MetaFlag { flag: b'T', token: b"30" });
        let p = one(b"ms key 2 F5 MA\r\nhi\r\n");
        let Ok(Command::MetaSet { data, flags, .. }) = p.command else { panic!() };
        assert_eq!(data, b"hi");
        assert_eq!(flags.len(), 2);
        assert_eq!(one(b"mn\r\n").command, Ok(Command::MetaNoop));
        assert_eq!(one(b"ms key\r\n").command, Err(BAD_FORMAT));
    }
}
