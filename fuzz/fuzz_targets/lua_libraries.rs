//! Fuzz target: the libraries a script gets — cjson, cmsgpack, bit, struct, redis.*, string,
//! table, math and the base functions — each called with arguments made from the input
//! (strings, numbers, and tables decoded from JSON or MessagePack), through a real EVAL on the
//! real dispatcher, its result converted back into a reply. A Lua error is an answer; a panic,
//! an abort, a hang or unbounded memory is a bug (a tenant's script must not take the engine
//! down for everyone).
//!
//! Input: byte 0 picks the function, byte 1 how each of up to three arguments is read, the
//! rest are the arguments, separated by 0xff bytes.
//!
//! Run with `-detect_leaks=0` (see resp_dispatch.rs).

#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use terrace_engine::command::{self, Conn};
use terrace_engine::keyspace::LockCap;
use terrace_engine::server::state::{ClientInfo, Server};
use terrace_engine::EngineConfig;

/// The functions called. (`string.rep` is left out: a count of a billion allocates what it
/// asks, as in Redis, and finds nothing but the fuzzer's memory limit.)
const FUNCTIONS: &[&str] = &[
    "cjson.encode",
    "cjson.decode",
    "cjson.encode_keep_buffer",
    "cjson.encode_max_depth",
    "cjson.decode_max_depth",
    "cjson.encode_number_precision",
    "cjson.encode_sparse_array",
    "cjson.encode_invalid_numbers",
    "cjson.decode_invalid_numbers",
    "cmsgpack.pack",
    "cmsgpack.unpack",
    "cmsgpack.unpack_one",
    "cmsgpack.unpack_limit",
    "bit.tobit",
    "bit.tohex",
    "bit.bnot",
    "bit.band",
    "bit.bor",
    "bit.bxor",
    "bit.lshift",
    "bit.rshift",
    "bit.arshift",
    "bit.rol",
    "bit.ror",
    "bit.bswap",
    "struct.pack",
    "struct.unpack",
    "struct.size",
    "redis.sha1hex",
    "redis.status_reply",
    "redis.error_reply",
    "redis.setresp",
    "redis.log",
    "string.format",
    "string.sub",
    "string.byte",
    "string.char",
    "string.find",
    "string.match",
    "string.gsub",
    "string.lower",
    "string.reverse",
    "table.concat",
    "table.sort",
    "unpack",
    "select",
    "tonumber",
    "tostring",
    "math.floor",
    "math.fmod",
    "math.pow",
    "math.ldexp",
    "math.frexp",
];

/// Calls the function named in ARGV[1] with ARGV[2..4], each read as ARGV[5]
/// says (a digit per argument: 0 string, 1 number, 2 JSON table, 3 MessagePack table), and
/// returns what pcall gave (converted to a reply).
const SCRIPT: &str = r#"
local lib, name = string.match(ARGV[1], "^(%w+)%.([%w_]+)$")
local f = lib and _G[lib][name] or _G[ARGV[1]]
local function arg(i)
    local a = ARGV[i + 1]
    if a == nil then return nil end
    local kind = string.byte(ARGV[5], i) or 48
    if kind == 49 then return tonumber(a) or a end
    if kind == 50 then local ok, t = pcall(cjson.decode, a); if ok then return t end end
    if kind == 51 then local ok, t = pcall(cmsgpack.unpack, a); if ok then return t end end
    return a
end
return {pcall(f, arg(1), arg(2), arg(3))}
"#;

/// The node, and the keyspace's lock capability the pipeline takes its locks with.
fn server() -> &'static (Arc<Server>, LockCap) {
    static SRV: OnceLock<(Arc<Server>, LockCap)> = OnceLock::new();
    SRV.get_or_init(|| Server::new(EngineConfig::default(), None, None))
}

fuzz_target!(|data: &[u8]| {
    let [pick, kinds, rest @ ..] = data else { return };
    let (srv, locks) = server();
    let info = Arc::new(ClientInfo::new(1, -1, "127.0.0.1:1".into(), "127.0.0.1:2".into(), 0, srv.limits.clone()));
    let mut conn = Conn::new(info, srv);
    let function = FUNCTIONS[*pick as usize % FUNCTIONS.len()];
    let kinds: Vec<u8> = (0..3).map(|i| b'0' + (kinds >> (2 * i)) % 4).collect();
    let mut args: Vec<&[u8]> = rest.split(|b| *b == 0xff).take(3).collect();
    args.resize(3, b"");
    let argv: Vec<&[u8]> = [b"EVAL".as_slice(), SCRIPT.as_bytes(), b"0", function.as_bytes(), args[0], args[1], args[2], &kinds].to_vec();
    let mut out = BytesMut::new();
    let _ = command::execute(srv, locks, &mut conn, &argv, &mut out);
    // Every EVAL gets an answer: a reply or an error, never nothing.
    assert!(!out.is_empty(), "no reply to {function} with {args:?}");
});
