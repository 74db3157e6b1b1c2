//! Terrace protocol proxy: Redis clients (RESP2/RESP3) through one front door, routed by key
//! slot to engines over pipelined, pooled connections.
//!
//! Request flow: `server` (listener, reactor threads) → `frontend::redis` (one task per
//! client: parse, route, order replies) → `route` (what to do with each command; `slots`:
//! key → engine) → `backend` (connections to engines) → `merge` (replies of split and
//! fanned-out commands) → back to the client in request order. `resp` scans reply frames;
//! `metrics` counts and times every command (Prometheus text, INFO); `near_cache` keeps hot
//! GET replies for a short TTL when configured.

// Public: what the binary (`config`, `run`) and the fuzz targets (the parsers, routing,
// merging, slots) use; the rest is the crate's own.
mod backend;
mod blocking;
pub mod config;
mod etcd_watch;
pub mod frontend;
pub mod hold;
pub mod merge;
mod metrics;
mod near_cache;
mod ops_meter;
pub mod resp;
pub mod route;
mod server;
pub mod slots;
mod tenants;

pub use config::{ProxyConfig, ProxySettings};
pub use server::run;
