//! What the engine, the proxy and the console share about Redis commands, so the proxy and
//! the console need not build the engine for it: the command table (`table`: names, arity,
//! flags, key positions, lock kinds, statistics classes; `keyspecs`, `keys`, subcommands;
//! `lookup`), the RESP wire protocol (`resp`: the incremental request parser with Redis's
//! framing limits and errors, and the RESP2/RESP3 reply writer), the versions a server
//! reports, how a server sizes its clients by the open-file limit (`fds`), passwords kept
//! as argon2id hashes (`passwords`) and each engine's own password (`credentials`). The lowest layer: it depends on no other
//! crate of the workspace.

pub mod auth_limit;
pub mod class;
pub mod connection;
pub mod credentials;
pub mod fds;
pub mod glob;
pub mod keys;
pub mod keyspecs;
pub mod notify;
pub mod numbers;
pub mod params;
pub mod passwords;
pub mod resp;
pub mod settings;
pub mod slots;
pub mod stat_index;
pub mod subcommands;
pub mod table;
pub mod tenancy;

pub use subcommands::SUBCOMMANDS;
use table::CommandSpec;

/// The Redis version Terrace answers as (INFO, HELLO, LOLWUT): the one its behaviour follows.
pub const REDIS_VERSION: &str = "7.0.15";
/// Terrace's own version.
pub const TERRACE_VERSION: &str = env!("CARGO_PKG_VERSION");

fn lowercase_name(name: &[u8], buf: &mut [u8; 32]) -> Option<usize> {
    if name.len() > 32 {
        return None;
    }
    for (i, b) in name.iter().enumerate() {
        buf[i] = b.to_ascii_lowercase();
    }
    Some(name.len())
}

/// Finds a command's spec by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut buf = [0u8; 32];
    let n = lowercase_name(name, &mut buf)?;
    let s = std::str::from_utf8(&buf[..n]).ok()?;
    table::INDEX.get(s).map(|&i| &table::COMMANDS[i])
}

pub fn unknown_command_error(argv: &[&[u8]]) -> String {
    let mut msg = format!("ERR unknown command '{}', with args beginning with: ", String::from_utf8_lossy(argv[0]));
    for a in argv.iter().skip(1).take(20) {
        msg.push_str(&format!("'{}' ", String::from_utf8_lossy(&a[..a.len().min(128)])));
    }
    msg
}

/// Checks a command's arity (positive: exact; negative: at least).
pub fn arity_ok(spec: &CommandSpec, argc: usize) -> bool {
    arity_fits(spec.arity, argc)
}

/// Whether `argc` arguments fit `arity` as Redis writes arities (positive: exactly that many;
/// negative: at least its absolute value).
pub fn arity_fits(arity: i32, argc: usize) -> bool {
    (arity > 0 && argc == arity as usize) || (arity < 0 && argc >= arity.unsigned_abs() as usize)
}
