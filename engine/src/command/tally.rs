//! A connection's command counters, published to the server's shared statistics in batches.
//!
//! Every command bumps its commandstats (calls, microseconds, failures), the commands-processed
//! total and the keyspace hits/misses: four or five locked read-modify-writes, on cache lines
//! every reactor thread shares. A connection that runs the same command many times in a row
//! (a pipeline) adds them up here and publishes once: when a different command is about to
//! run (so INFO or CONFIG RESETSTAT in the same pipeline sees everything before it, as in
//! Redis) and before its replies are written (so a client that read a reply, and anyone it
//! tells, sees the command counted). Only data commands are batched: server and connection commands
//! (INFO, CONFIG RESETSTAT, PING…) are published as they finish, since one may read or reset
//! the counters the next adds to. Connections not driven by a client's socket (script calls,
//! WAL replay) publish every command at once.

use std::sync::atomic::Ordering;

use crate::server::state::{latency_bucket, Server, LATENCY_BUCKETS};

#[derive(Default)]
pub struct Tally {
    /// Whether the owner publishes (`publish`) before replies go out; otherwise each command
    /// is published as it finishes.
    batched: bool,
    /// The command index these counts are for (valid while `calls > 0`).
    idx: usize,
    /// The namespace they were made in (its tenant's hits and misses).
    ns: usize,
    calls: u64,
    usec: u64,
    failed: u64,
    hits: u64,
    misses: u64,
    /// Calls by duration bucket (LATENCY HISTOGRAM).
    latency: [u32; LATENCY_BUCKETS],
}

impl Tally {
    /// A tally its owner publishes before writing replies and when it ends.
    pub fn batched() -> Tally {
        Tally { batched: true, ..Tally::default() }
    }

    /// Publishes what is pending if it is for a command other than `idx` (about to run in
    /// namespace `ns`), or for another namespace.
    #[inline]
    pub fn before(&mut self, srv: &Server, idx: usize, ns: usize) {
        if self.calls > 0 && (self.idx != idx || self.ns != ns) {
            self.publish(srv);
        }
        self.ns = ns;
    }

    /// Counts one finished run (of `nanos`) in statistics slot `idx`; published at once
    /// unless `batchable`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn add(&mut self, srv: &Server, idx: usize, batchable: bool, nanos: u64, failed: bool, hits: u64, misses: u64) {
        self.before(srv, idx, self.ns);
        self.idx = idx;
        self.calls += 1;
        self.usec += nanos / 1000;
        self.latency[latency_bucket(nanos)] += 1;
        self.failed += failed as u64;
        self.hits += hits;
        self.misses += misses;
        if !self.batched || !batchable {
            self.publish(srv);
        }
    }

    /// Adds the pending counts to the server's statistics.
    pub fn publish(&mut self, srv: &Server) {
        if self.calls == 0 {
            return;
        }
        let st = &srv.stats;
        let cmd = &st.per_command[self.idx];
        st.commands_processed.fetch_add(self.calls, Ordering::Relaxed);
        cmd.calls.fetch_add(self.calls, Ordering::Relaxed);
        cmd.usec.fetch_add(self.usec, Ordering::Relaxed);
        for (bucket, &n) in cmd.latency.iter().zip(&self.latency) {
            if n > 0 {
                bucket.fetch_add(u64::from(n), Ordering::Relaxed);
            }
        }
        if self.failed > 0 {
            cmd.failed.fetch_add(self.failed, Ordering::Relaxed);
            st.total_error_replies.fetch_add(self.failed, Ordering::Relaxed);
        }
        if self.hits > 0 {
            st.keyspace_hits.fetch_add(self.hits, Ordering::Relaxed);
        }
        if self.misses > 0 {
            st.keyspace_misses.fetch_add(self.misses, Ordering::Relaxed);
        }
        if self.hits + self.misses > 0 {
            if let Some(t) = srv.tenant_stats.get(self.ns) {
                t.count_lookups(self.hits, self.misses);
            }
        }
        *self = Tally { batched: self.batched, ns: self.ns, ..Tally::default() };
    }
}
