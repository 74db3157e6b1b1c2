//! What running a command produced besides its reply, gathered while it holds its locks and
//! committed by the pipeline: the WAL records of its writes (or, for a storage-backed
//! tenant, the keys whose after-images go to storage), the keys that became ready for
//! blocked clients, the changed keys tracking clients hear of, and its keyspace hits and
//! misses. EXEC and scripts gather the effects of
//! every command they run into the one `Effects` of the outer command.

/// A command's effects, in the order it made them.
#[derive(Default)]
pub struct Effects {
    /// Keys that became poppable: (database, key). Blocked clients are woken after the
    /// locks are released.
    pub ready: Vec<(usize, Vec<u8>)>,
    pub hits: u64,
    pub misses: u64,
    /// Of `hits`, reads served by a value in PMem.
    pub pmem_hits: u64,
    /// WAL records of the writes (`wal::frame::put_record`), appended while the locks are
    /// still held, so the log's order is the execution order.
    pub wal_buf: Vec<u8>,
    pub wal_count: u32,
    /// Keys written in a storage-backed tenant: (database, key).
    pub touched: Vec<(usize, Vec<u8>)>,
    /// Keys changed while some client tracks keys: invalidations to deliver.
    pub invalidated: Vec<Vec<u8>>,
    /// Keyspace notifications to publish once the locks are released.
    pub notifications: Vec<crate::notify::Event>,
    /// Memory must be brought under `maxmemory` once the locks are released (CONFIG SET
    /// maxmemory lowered it: Redis evicts at once, not at the next write).
    pub make_room: bool,
}

impl Effects {
    /// Adds a WAL record for a write made in database `db` at time `now`.
    pub fn log(&mut self, now: i64, db: usize, ns_base: usize, argv: &[&[u8]]) {
        crate::wal::frame::put_record(&mut self.wal_buf, now, db, ns_base, argv);
        self.wal_count += 1;
    }
}
