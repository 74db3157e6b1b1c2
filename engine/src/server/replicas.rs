//! Serves the replicas attached to this engine: a connection whose client sent PSYNC (or
//! SYNC) hands its socket here, and a thread per replica answers it as a Redis master does —
//! `+CONTINUE` when the backlog still holds what the replica lacks (same replication ID),
//! else `+FULLRESYNC <replid> <offset>` and the snapshot — then sends the command stream
//! from the backlog while a second thread reads the replica's `REPLCONF ACK`s for WAIT.
//!
//! A redis-server replica gets Redis's stream (the default namespace's data); a Terrace
//! replica (`REPLCONF capa terrace`) the stream of every namespace. The snapshot is made
//! while every shard is held, so it is one instant of the stream: the writes after it are
//! exactly those after its offset. Writes wait while it is made (in memory; it is sent
//! after the locks are released).

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::socket::{Socket, StdSocket};
use super::state::{ClientInfo, Server};
use crate::keyspace::LockCap;
use crate::protocol::{Limits, RequestParser};
use crate::replication::backlog::Read as BacklogRead;
use crate::replication::{Flavor, Psync, Replica, ReplicaState};

/// How much of the stream one write sends at most.
const CHUNK: usize = 1 << 20;
/// How long a replica may stay silent (no ACK) before it is dropped (Redis's `repl-timeout`).
const REPL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
enum ServeError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("its snapshot could not be made: {0}")]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    #[error("it fell behind the stream by more than the replica output limit")]
    Behind,
    #[error("it closed the link")]
    Closed,
    #[error("this engine became a replica itself")]
    NowAReplica,
    #[error("it sent no acknowledgement for {0:?}")]
    Silent(Duration),
}

/// Takes over a connection whose client asked to be a replica (`psync`), with the bytes it
/// sent after PSYNC (`leftover`: its first ACKs, possibly).
pub fn attach(srv: Arc<Server>, locks: LockCap, stream: Socket, info: Arc<ClientInfo>, psync: Psync, leftover: BytesMut) {
    let stream = match stream.into_std().and_then(|s| s.set_nonblocking(false).map(|()| s)) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(replica = %info.addr, "cannot take over the replica's connection: {e}");
            return;
        }
    };
    let name = format!("terrace-replica-{}", info.id);
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let id = info.id;
        let ip = info.addr.rsplit_once(':').map_or(info.addr.as_str(), |(ip, _)| ip).to_string();
        let port = if psync.port != 0 { psync.port } else { info.addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(0) };
        let flavor = if psync.terrace { Flavor::Terrace } else { Flavor::Redis };
        srv.replication.attach_replica(Replica { id, ip, port, state: ReplicaState::WaitBgsave, flavor, acked: 0, acked_at: Instant::now(), acks: 0 });
        tracing::info!(replica = %info.addr, replid = %psync.replid, offset = psync.offset, "replica asks for synchronization");
        match serve(&srv, &locks, stream, id, flavor, &psync, leftover) {
            Ok(()) => tracing::info!(replica = %info.addr, "replica link closed"),
            Err(e) => tracing::warn!(replica = %info.addr, "replica dropped: {e}"),
        }
        srv.replication.detach_replica(id);
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start a replica's thread: {e}");
    }
}

fn serve(srv: &Arc<Server>, locks: &LockCap, mut stream: StdSocket, id: u64, flavor: Flavor, psync: &Psync, leftover: BytesMut) -> Result<(), ServeError> {
    let repl = &srv.replication;
    let replid = repl.replid_of(flavor);
    stream.set_nodelay()?;
    let mut diskless = false;
    let continues = psync.offset > 0
        && repl.continues(flavor, &psync.replid, psync.offset as u64 - 1)
        && repl.feed(flavor).is_some_and(|b| b.attach(id, psync.offset as u64 - 1));
    if continues {
        repl.syncs.partial_ok.fetch_add(1, Ordering::Relaxed);
        stream.write_all(format!("+CONTINUE {replid}\r\n").as_bytes())?;
        tracing::info!(replica = id, from = psync.offset, "partial resynchronization accepted");
        repl.update_replica(id, |r| {
            r.state = ReplicaState::Online;
            r.acked = psync.offset as u64 - 1;
        });
    } else {
        if psync.replid != "?" {
            repl.syncs.partial_err.fetch_add(1, Ordering::Relaxed);
        }
        repl.syncs.full.fetch_add(1, Ordering::Relaxed);
        let (image, offset) = snapshot_at_an_offset(srv, locks, id, flavor)?;
        if !psync.old_sync {
            stream.write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())?;
        }
        repl.update_replica(id, |r| r.state = ReplicaState::SendBulk);
        diskless = send_image(srv, &mut stream, psync, &image)?;
        drop(image);
        tracing::info!(replica = id, offset, "snapshot sent; streaming");
        repl.update_replica(id, |r| {
            r.state = ReplicaState::Online;
            r.acked = offset;
            r.acked_at = Instant::now();
        });
    }
    let closed = Arc::new(AtomicBool::new(false));
    let reader = {
        let (srv, closed, stream) = (srv.clone(), closed.clone(), stream.try_clone()?);
        std::thread::Builder::new().name(format!("terrace-replica-{id}-acks")).spawn(move || {
            read_acks(&srv, stream, id, leftover);
            closed.store(true, Ordering::SeqCst);
        })?
    };
    let result = if diskless { first_ack(srv, id, &closed) } else { Ok(()) }.and_then(|()| stream_to(srv, &mut stream, id, flavor, &closed));
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = reader.join();
    result
}

/// Sends a full sync's image: diskless (`$EOF:<mark>`, the image, the mark) to a Redis
/// replica that reads that form when `repl-diskless-sync` is on (Redis 7's default), else as
/// `$<length>` as a disk-backed master sends it — and always to an engine, which then takes
/// the image in one allocation (the image is in memory either way). Returns whether it was
/// diskless.
fn send_image(srv: &Server, stream: &mut StdSocket, psync: &Psync, image: &[u8]) -> std::io::Result<bool> {
    if psync.eof && !psync.terrace && srv.param("repl-diskless-sync").is_none_or(|v| v == "yes") {
        let mark = crate::replication::random_replid();
        stream.write_all(format!("$EOF:{mark}\r\n").as_bytes())?;
        stream.write_all(image)?;
        stream.write_all(mark.as_bytes())?;
        Ok(true)
    } else {
        stream.write_all(format!("${}\r\n", image.len()).as_bytes())?;
        stream.write_all(image)?;
        Ok(false)
    }
}

/// After a diskless image, the stream waits for the replica's first acknowledgement, as a
/// Redis master's does: a replica looks for the end mark in the last bytes it read, and the
/// stream right behind the mark would hide it.
fn first_ack(srv: &Server, id: u64, closed: &AtomicBool) -> Result<(), ServeError> {
    let since = Instant::now();
    while srv.replication.acks_of(id).unwrap_or(0) == 0 {
        if closed.load(Ordering::SeqCst) {
            return Err(ServeError::Closed);
        }
        if since.elapsed() > REPL_TIMEOUT {
            return Err(ServeError::Silent(REPL_TIMEOUT));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// The image a replica of stream `flavor` starts from (the default namespace's, or every
/// namespace's with what this engine's own storage holds after it), of the instant every
/// shard is held (only to start it: `snapshot::ImageOfAnInstant`), and the stream offset
/// of that instant; the replica reads the stream from that offset on.
fn snapshot_at_an_offset(srv: &Server, locks: &LockCap, id: u64, flavor: Flavor) -> Result<(Vec<u8>, u64), ServeError> {
    let mut guards = srv.keyspace.lock_all(locks);
    let started = Instant::now();
    srv.keyspace.start_feeding();
    let backlog = srv.replication.start_feeding(flavor);
    let image = crate::snapshot::replication_image(srv, &mut guards, flavor == Flavor::Terrace);
    let offset = backlog.offset();
    // The replica does not know which database the stream is in.
    backlog.forget_selected();
    if flavor == Flavor::Terrace {
        mark_dirty_keys(srv, &mut guards);
    }
    assert!(backlog.attach(id, offset), "the backlog's own end is in it");
    drop(guards);
    let held = started.elapsed();
    let mut image = image.finish(locks)?;
    if flavor == Flavor::Terrace {
        crate::snapshot::add_own_storage(srv, &mut image)?;
    }
    tracing::info!(
        replica = id,
        bytes = image.len(),
        ms = started.elapsed().as_millis() as u64,
        held_us = held.as_micros() as u64,
        "snapshot made for a replica (every shard held for held_us)"
    );
    Ok((image, offset))
}

/// Puts the after-image of every dirty key of the storage-backed tenants in the stream (the
/// shards held): the new replica starts with them marked dirty, so that it flushes what
/// this engine had not — to storage of its own at once, to shared storage once promoted.
/// (Replicas already following get them again: the same values, already dirty there.)
fn mark_dirty_keys(srv: &Server, guards: &mut crate::keyspace::Guards) {
    let Some(tier) = srv.storage_tier() else { return };
    let now = crate::clock::now_ms();
    for (db, key) in tier.dirty.keys() {
        let record = match crate::command::pipeline::storage::after_image(srv, guards, db, &key, now) {
            Ok(record) => record,
            Err(why) => {
                tracing::error!(key = %String::from_utf8_lossy(&key), "not sent to the replica: {why}");
                continue;
            }
        };
        srv.replicate(|stream, carry| {
            if carry(db) == crate::replication::Carry::AfterImages {
                stream.after_image(db, &key, record.as_deref());
            }
        });
    }
}

/// Sends the stream from the backlog until the link or the engine ends.
fn stream_to(srv: &Server, stream: &mut StdSocket, id: u64, flavor: Flavor, closed: &AtomicBool) -> Result<(), ServeError> {
    let backlog = srv.replication.backlog(flavor).expect("a replica reads a backlog");
    loop {
        if closed.load(Ordering::SeqCst) {
            return Err(ServeError::Closed);
        }
        if srv.shutdown.load(Ordering::Relaxed) {
            return Ok(());
        }
        if srv.replication.is_replica() {
            // This engine now follows a master itself (REPLICAOF): what it loads from there
            // is not in this stream, so its replicas must sync again (they are refused while
            // it is a replica).
            return Err(ServeError::NowAReplica);
        }
        if srv.replication.silent_for(id).is_some_and(|s| s > REPL_TIMEOUT) {
            return Err(ServeError::Silent(REPL_TIMEOUT));
        }
        match backlog.read(id, CHUNK, Duration::from_millis(100)) {
            BacklogRead::Bytes(bytes) => stream.write_all(&bytes)?,
            BacklogRead::Nothing => {}
            BacklogRead::Gone => return Err(ServeError::Behind),
        }
    }
}

/// Reads what the replica sends: `REPLCONF ACK <offset>` (anything else is ignored, as a
/// Redis master ignores it), until it closes the link.
fn read_acks(srv: &Server, mut stream: StdSocket, id: u64, mut buf: BytesMut) {
    let mut parser = RequestParser::new(Limits::default());
    let mut chunk = [0u8; 4096];
    loop {
        loop {
            let req = match parser.parse(&buf) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(replica = id, "malformed data from a replica: {e}");
                    return;
                }
            };
            let arg = |i: usize| (i < req.args.len()).then(|| req.arg(&buf, i));
            if let (Some(cmd), Some(sub), Some(offset)) = (arg(0), arg(1), arg(2)) {
                if cmd.eq_ignore_ascii_case(b"REPLCONF") && sub.eq_ignore_ascii_case(b"ACK") {
                    if let Some(offset) = std::str::from_utf8(offset).ok().and_then(|o| o.parse::<u64>().ok()) {
                        srv.replication.acknowledged(id, offset);
                    }
                }
            }
            let consumed = req.consumed;
            bytes::Buf::advance(&mut buf, consumed);
            parser.reset();
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
