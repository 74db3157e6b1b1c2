//! Terrace engine: one data node of the appliance. It speaks RESP itself, so a Redis client
//! can use an engine directly; the proxy routes to several of them.
//!
//! Request flow: `server` (listener, reactors, connections) → `protocol` (framing) →
//! `command` (dispatch, locking, handlers per family) → `keyspace` (shards, entries, expiry,
//! eviction). `acl` holds users and permissions; `pubsub` channels and
//! subscribers; `scripting` the Lua sandbox for EVAL; `alloc` accounts memory for INFO and maxmemory.

pub mod acl;
pub mod alloc;
pub mod clients;
pub mod clock;
pub mod command;
pub mod compress;
pub mod config;
pub mod files;
pub mod keyspace;
pub mod latency;
pub mod limits;
pub mod lock_order;
pub mod mapped;
pub mod migration;
pub mod monitor;
pub mod notify;
pub mod probe;
pub mod pubsub;
pub mod rdb;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod snapshot;
pub mod stats;
pub mod storage;
pub mod tier;
pub mod tracking;
pub mod wal;

pub use config::{EngineConfig, EngineSettings};
pub use server::run;
/// The RESP wire protocol, from the crate shared with the proxy.
pub use terrace_commands::resp as protocol;
/// The cost model, from its own crate (the console computes with it too).
pub use terrace_cost as cost;
