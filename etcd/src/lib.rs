//! The control plane's store when several consoles share it: etcd (Debian's `etcd-server`).
//!
//! - `client`: the v3 API — ranges, puts, deletes, transactions whose compares check
//!   revisions (a decision and its publication are one write), leases — with the cluster's
//!   endpoints tried in turn.
//! - `watch`: a key's or a prefix's changes as they happen, from a revision on.
//! - `election`: one leader among candidates, on a key held with a lease; the leader's term
//!   is the key's create revision, which its writes compare, so a deposed leader's writes
//!   fail.
//! - `testing`: an etcd member of its own, for tests.
//!
//! Written by hand over etcd's JSON gateway (`/v3/…`, documented since etcd 3.4) rather
//! than with a gRPC client crate: `etcd-client` generates its code with `protoc` at build
//! time, which a machine running `cargo run -- up` does not have, and the crates that ship
//! generated code bring a second tonic/axum/tower stack. The gateway needs only the HTTP
//! client the console already has, and the handful of calls the control plane makes.

mod client;
mod election;
pub mod testing;
mod watch;

/// Where the coordinating console publishes the proxies' topology (the document of
/// `TERRACE.TOPOLOGY SET`); proxies with the `etcd` setting watch it.
pub const TOPOLOGY_KEY: &str = "/terrace/topology";

pub use client::{Client, Compare, KeyValue, Op, TxnOutcome};
pub use election::{Election, Leadership};
pub use watch::{Event, Watch};

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("no etcd endpoint given")]
    NoEndpoints,
    #[error("etcd endpoint '{0}' is not host:port or an http:// URL")]
    BadEndpoint(String),
    #[error("etcd at {endpoint}: {source}")]
    Http { endpoint: String, source: reqwest::Error },
    #[error("etcd at {endpoint} answered {status}: {body}")]
    Status { endpoint: String, status: u16, body: String },
    #[error("etcd's answer could not be read: {0}")]
    Decode(String),
    #[error("the watch from revision {wanted} was compacted away (the oldest left is {compacted}): read again")]
    Compacted { wanted: i64, compacted: i64 },
    #[error("the watch ended: {0}")]
    WatchEnded(String),
}
