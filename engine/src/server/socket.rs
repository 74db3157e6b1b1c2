//! A client's socket as the connection loop and the replication links see it: a TCP
//! connection, or the plaintext end of a socketpair whose other end a TLS relay holds
//! (`super::tls`). Both are read and written by readiness alike, handed between reactors as
//! std sockets (elastic threading), answered by descriptor while a busy script holds their
//! reactor (`super::busy`) and shut down by descriptor (CLIENT KILL): on the pair's end a
//! shutdown ends the relay, and with it the TLS connection.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use tokio::io::{AsyncRead, ReadBuf};

/// A socket on a reactor.
pub enum Socket {
    Tcp(tokio::net::TcpStream),
    Pair(tokio::net::UnixStream),
}

/// A socket off the reactors: moving between them, or on a blocking thread.
pub enum StdSocket {
    Tcp(std::net::TcpStream),
    Pair(std::os::unix::net::UnixStream),
}

impl Socket {
    /// Onto this thread's reactor (the socket is non-blocking already).
    pub fn from_std(s: StdSocket) -> std::io::Result<Socket> {
        Ok(match s {
            StdSocket::Tcp(s) => Socket::Tcp(tokio::net::TcpStream::from_std(s)?),
            StdSocket::Pair(s) => Socket::Pair(tokio::net::UnixStream::from_std(s)?),
        })
    }

    /// Off this reactor, still non-blocking.
    pub fn into_std(self) -> std::io::Result<StdSocket> {
        Ok(match self {
            Socket::Tcp(s) => StdSocket::Tcp(s.into_std()?),
            Socket::Pair(s) => StdSocket::Pair(s.into_std()?),
        })
    }

    /// Replies go out at once (TCP; the relay's own TCP connection has it set).
    pub fn set_nodelay(&self) {
        if let Socket::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    pub async fn readable(&self) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.readable().await,
            Socket::Pair(s) => s.readable().await,
        }
    }

    pub async fn writable(&self) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.writable().await,
            Socket::Pair(s) => s.writable().await,
        }
    }

    pub fn try_read_buf(&self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.try_read_buf(buf),
            Socket::Pair(s) => s.try_read_buf(buf),
        }
    }

    pub fn try_write(&self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.try_write(bytes),
            Socket::Pair(s) => s.try_write(bytes),
        }
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Socket::Tcp(s) => s.as_raw_fd(),
            Socket::Pair(s) => s.as_raw_fd(),
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Socket::Pair(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl StdSocket {
    pub fn set_nonblocking(&self, yes: bool) -> std::io::Result<()> {
        match self {
            StdSocket::Tcp(s) => s.set_nonblocking(yes),
            StdSocket::Pair(s) => s.set_nonblocking(yes),
        }
    }

    pub fn set_nodelay(&self) -> std::io::Result<()> {
        match self {
            StdSocket::Tcp(s) => s.set_nodelay(true),
            StdSocket::Pair(_) => Ok(()),
        }
    }

    pub fn set_read_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
        match self {
            StdSocket::Tcp(s) => s.set_read_timeout(t),
            StdSocket::Pair(s) => s.set_read_timeout(t),
        }
    }

    pub fn set_write_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
        match self {
            StdSocket::Tcp(s) => s.set_write_timeout(t),
            StdSocket::Pair(s) => s.set_write_timeout(t),
        }
    }

    pub fn try_clone(&self) -> std::io::Result<StdSocket> {
        Ok(match self {
            StdSocket::Tcp(s) => StdSocket::Tcp(s.try_clone()?),
            StdSocket::Pair(s) => StdSocket::Pair(s.try_clone()?),
        })
    }

    pub fn shutdown(&self, how: std::net::Shutdown) -> std::io::Result<()> {
        match self {
            StdSocket::Tcp(s) => s.shutdown(how),
            StdSocket::Pair(s) => s.shutdown(how),
        }
    }
}

impl AsRawFd for StdSocket {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            StdSocket::Tcp(s) => s.as_raw_fd(),
            StdSocket::Pair(s) => s.as_raw_fd(),
        }
    }
}

impl Read for StdSocket {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            StdSocket::Tcp(s) => s.read(buf),
            StdSocket::Pair(s) => s.read(buf),
        }
    }
}

impl Write for StdSocket {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            StdSocket::Tcp(s) => s.write(buf),
            StdSocket::Pair(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            StdSocket::Tcp(s) => s.flush(),
            StdSocket::Pair(s) => s.flush(),
        }
    }
}
