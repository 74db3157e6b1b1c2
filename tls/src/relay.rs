//! Carrying bytes between a TLS connection and a plaintext socket, both ways: where a
//! process ends TLS in front of code that reads a plain socket (the engine's connection
//! loop, which moves sockets between threads and reads them by descriptor, cannot own a
//! TLS session) and where a blocking thread's link goes out over TLS.
//!
//! Either side closing ends the relay: the plaintext side's end (the engine closed the
//! connection, CLIENT KILL) closes the TLS connection with close_notify at once; the TLS
//! side's end (the client closed) is passed on as end-of-file, and the relay ends when the
//! plaintext side then closes.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Bytes read at once: a TLS record holds at most 16 KiB, so a full buffer makes four.
const CHUNK: usize = 64 * 1024;

/// Relays until both ways have ended (or either fails).
pub async fn relay<T, P>(tls: T, plain: P)
where
    T: AsyncRead + AsyncWrite + Unpin,
    P: AsyncRead + AsyncWrite + Unpin,
{
    let (mut tls_in, mut tls_out) = tokio::io::split(tls);
    let (mut plain_in, mut plain_out) = tokio::io::split(plain);
    let inward = async {
        let _ = pump(&mut tls_in, &mut plain_out).await;
        let _ = plain_out.shutdown().await;
        // The plaintext side closes in turn; `outward` ends then.
        std::future::pending::<()>().await
    };
    let outward = async {
        let _ = pump(&mut plain_in, &mut tls_out).await;
        let _ = tls_out.shutdown().await;
    };
    tokio::select! {
        () = outward => {}
        () = inward => {}
    }
}

/// Copies until end-of-file, flushing after each read (a TLS writer sends a record per
/// flush at the latest).
async fn pump<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(from: &mut R, to: &mut W) -> std::io::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
        to.flush().await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_go_both_ways_and_a_close_on_either_side_ends_it() {
        // Stand-ins for the two connections: in-memory duplex pipes.
        let (outside, relay_tls) = tokio::io::duplex(1024);
        let (relay_plain, mut inside) = tokio::io::duplex(1024);
        let relayed = tokio::spawn(relay(relay_tls, relay_plain));
        let (mut out_r, mut out_w) = tokio::io::split(outside);
        out_w.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        inside.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        // A large answer, larger than both pipes and a chunk.
        let big = vec![7u8; 3 * CHUNK + 5];
        let (mut in_r, mut in_w) = tokio::io::split(inside);
        let writer = tokio::spawn(async move {
            in_w.write_all(&big).await.unwrap();
            in_w
        });
        let mut seen = vec![0u8; 3 * CHUNK + 5];
        out_r.read_exact(&mut seen).await.unwrap();
        assert!(seen.iter().all(|b| *b == 7));
        // The outside closes: the inside reads end-of-file; its closing ends the relay.
        out_w.shutdown().await.unwrap();
        let mut rest = Vec::new();
        in_r.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        writer.await.unwrap().shutdown().await.unwrap();
        relayed.await.unwrap();
        let mut tail = Vec::new();
        out_r.read_to_end(&mut tail).await.unwrap();
        assert!(tail.is_empty());
    }

    #[tokio::test]
    async fn the_plaintext_side_closing_ends_the_relay_while_the_client_stays() {
        // CLIENT KILL on the engine's end: the client, idle, sees the connection end.
        let (mut outside, relay_tls) = tokio::io::duplex(1024);
        let (relay_plain, inside) = tokio::io::duplex(1024);
        let relayed = tokio::spawn(relay(relay_tls, relay_plain));
        drop(inside);
        relayed.await.unwrap();
        let mut tail = Vec::new();
        outside.read_to_end(&mut tail).await.unwrap();
        assert!(tail.is_empty());
    }
}
