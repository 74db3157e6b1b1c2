//! What the engine, the proxy and the console share about Redis commands, so the proxy and
//! the console need not build the engine for it: the RESP wire protocol (`resp`: the
//! incremental request parser with Redis's framing limits and errors, and the RESP2/RESP3
//! reply writer) and the versions a server reports. The lowest layer: it depends on no other
//! crate of the workspace.

pub mod resp;

/// The Redis version Terrace answers as (INFO, HELLO, LOLWUT): the one its behaviour follows.
pub const REDIS_VERSION: &str = "7.0.15";
/// Terrace's own version.
pub const TERRACE_VERSION: &str = env!("CARGO_PKG_VERSION");
