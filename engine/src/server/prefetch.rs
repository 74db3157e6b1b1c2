//! Prefetching the keys of a batch of pipelined requests before it runs
//! (`Keyspace::prefetch`): the first key of each request the buffer holds complete.

use terrace_commands::resp::peek_requests;

use super::state::Server;
use crate::keyspace::LockCap;

/// Prefetches, in database `db`, the first key of each of the (up to `batch`) requests at the
/// start of `buf`; does nothing for a single key.
pub fn prefetch_batch(srv: &Server, locks: &LockCap, db: usize, buf: &[u8], batch: usize) {
    // A run of requests on one key (LPUSH mylist …) is looked at once.
    let mut last: Option<&[u8]> = None;
    let keys = peek_requests(buf).take(batch).filter_map(move |p| {
        if p.first.is_none() || p.first == last {
            return None;
        }
        let spec = terrace_commands::lookup(p.name)?;
        if spec.first != 1 {
            return None;
        }
        last = p.first;
        p.first
    });
    srv.keyspace.prefetch(locks, db, keys);
}

/// Prefetches a batch's keys every `prefetch_batch` requests (the engine's setting): call
/// `next` before parsing each request of a buffer, `restart` when the buffer gets new bytes.
#[derive(Default)]
pub struct Prefetcher {
    /// Requests left before the keys of the following ones are prefetched.
    left: usize,
}

impl Prefetcher {
    /// Before the request at the start of `buf` runs (in database `db`).
    #[inline]
    pub fn next(&mut self, srv: &Server, locks: &LockCap, db: usize, buf: &[u8]) {
        if self.left == 0 {
            let batch = srv.config.prefetch_batch;
            if batch < 2 {
                return;
            }
            prefetch_batch(srv, locks, db, buf, batch);
            self.left = batch;
        }
        self.left -= 1;
    }

    /// The buffer got new requests: the next one prefetches again.
    pub fn restart(&mut self) {
        self.left = 0;
    }
}
