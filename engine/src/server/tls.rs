//! TLS in the engine. The engine's connection loop reads sockets by readiness, moves them
//! between reactors (elastic threading) and answers them by descriptor while a busy script
//! holds their reactor — none of which a TLS session allows. So TLS ends in front of it:
//!
//! - `tls_port`: each connection's handshake and records are a relay's (`terrace_tls::relay`)
//!   on the relays' runtime ("terrace-tls" threads); the engine gets the plaintext end of a
//!   socketpair and serves it as any client, under the TLS peer's address. CLIENT KILL's
//!   shutdown of that end ends the relay and the TLS connection with it.
//! - Outgoing links (replica → primary with `tls_replication`, a slot move to another engine
//!   with `tls_cluster`): blocking threads drive them, so they get a plain socket too, whose
//!   other end a relay carries over TLS to the peer.

use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::socket::StdSocket;
use crate::config::TlsConfig;

/// How long a client has to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The relays' runtime, started on first use.
fn relays() -> &'static tokio::runtime::Runtime {
    static RELAYS: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RELAYS.get_or_init(|| {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("terrace-tls")
            .enable_all()
            .build()
            .expect("start the TLS relays' runtime")
    })
}

/// A TLS client whose handshake is done: the plaintext end for the engine, and the peer's
/// address.
pub struct Handshaken {
    pub socket: StdSocket,
    pub peer: std::net::SocketAddr,
}

/// Ends TLS for a connection accepted on `tls_port`: the handshake (within
/// `HANDSHAKE_TIMEOUT`; one that fails leaves nothing behind), then the plaintext end goes
/// to `ready` (the acceptor, which registers and places it as any client) and the relay
/// runs until the connection ends.
pub fn terminate(tls: &Arc<terrace_tls::ServerTls>, tcp: tokio::net::TcpStream, peer: std::net::SocketAddr, ready: UnboundedSender<Handshaken>) {
    let acceptor = tls.acceptor();
    let tcp = match tcp.into_std() {
        Ok(s) => s,
        Err(e) => return tracing::debug!(%peer, "cannot hand a TLS connection to its relay: {e}"),
    };
    relays().spawn(async move {
        let Ok(tcp) = tokio::net::TcpStream::from_std(tcp) else { return };
        let _ = tcp.set_nodelay(true);
        let session = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
            Err(_) => return tracing::debug!(%peer, "TLS handshake not finished within {HANDSHAKE_TIMEOUT:?}"),
        };
        let Some(relay_end) = pair_for(|engine_end| ready.send(Handshaken { socket: StdSocket::Pair(engine_end), peer }).is_ok()) else { return };
        terrace_tls::relay(session, relay_end).await;
    });
}

/// A socketpair: one end given to `give` (non-blocking; false: not taken), the other, on
/// the relays' runtime, returned.
fn pair_for(give: impl FnOnce(UnixStream) -> bool) -> Option<tokio::net::UnixStream> {
    let (engine_end, relay_end) = UnixStream::pair().ok()?;
    engine_end.set_nonblocking(true).ok()?;
    relay_end.set_nonblocking(true).ok()?;
    let relay_end = tokio::net::UnixStream::from_std(relay_end).ok()?;
    give(engine_end).then_some(relay_end)
}

/// SIGHUP: the TLS port's and the links' files read again; new connections and links get
/// them, those made keep their sessions. A file that fails keeps the ones in use.
pub fn reload(tls: &TlsConfig) {
    if tls.server.is_none() && tls.link.is_none() {
        return tracing::info!("SIGHUP ignored (no TLS)");
    }
    let server = tls.server.as_ref().map(|t| t.reload());
    let links = tls.link.as_ref().map(|t| t.reload());
    match server.into_iter().chain(links).collect::<Result<Vec<()>, _>>() {
        Ok(_) => tracing::info!("SIGHUP: the TLS files were read again; new connections get them"),
        Err(e) => tracing::warn!("SIGHUP: the TLS files could not be read again, the ones in use stay: {e}"),
    }
}

/// Which of the engine's outgoing links a connection is for.
#[derive(Debug, Clone, Copy)]
pub enum Link {
    /// Replica → primary (`tls_replication`).
    Replication,
    /// A slot move to another engine (`tls_cluster`).
    Cluster,
}

/// A blocking connection to `host:port` for `link`: a TCP socket, or — when the settings
/// put that link on TLS — a plain socket whose other end a relay carries over TLS to the
/// peer (verified against `tls_ca_cert_file`, named by `host`).
pub fn connect(tls: &TlsConfig, link: Link, host: &str, port: u16, timeout: Duration) -> std::io::Result<StdSocket> {
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))?.next().ok_or_else(|| std::io::Error::other(format!("no address for {host}")))?;
    let over_tls = match link {
        Link::Replication => tls.replication,
        Link::Cluster => tls.cluster,
    };
    let Some(client) = tls.link.clone().filter(|_| over_tls) else {
        let stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        return Ok(StdSocket::Tcp(stream));
    };
    let host = host.to_string();
    relays().block_on(async move {
        let tcp = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await.map_err(|_| std::io::ErrorKind::TimedOut)??;
        tcp.set_nodelay(true)?;
        let session = tokio::time::timeout(timeout, client.connect(tcp, &host)).await.map_err(|_| std::io::ErrorKind::TimedOut)??;
        let mut given = None;
        let relay_end = pair_for(|engine_end| {
            given = Some(engine_end);
            true
        })
        .ok_or_else(|| std::io::Error::other("cannot make a socketpair"))?;
        tokio::spawn(terrace_tls::relay(session, relay_end));
        let engine_end = given.expect("given");
        engine_end.set_nonblocking(false)?;
        Ok(StdSocket::Pair(engine_end))
    })
}
