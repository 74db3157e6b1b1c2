//! A link to another Terrace process over TLS (proxy → engine, replica → primary, engine →
//! engine for slot moves, console → nodes): the client configuration made once from the
//! process's settings, and connecting with it, the peer verified against the CA and the
//! address's host name (or IP address).

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::{TlsError, TlsFiles};

/// The client side of a process's TLS links; clones share it, and a reload (renewed
/// files) reaches every clone: new links use the new files, links made keep their session.
#[derive(Clone)]
pub struct LinkTls {
    ca: PathBuf,
    identity: Option<(PathBuf, PathBuf)>,
    connector: Arc<RwLock<TlsConnector>>,
}

impl std::fmt::Debug for LinkTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkTls")
    }
}

impl LinkTls {
    /// From `tls_ca_cert_file` (required: the peers are verified against it) and the
    /// certificate shown when a peer asks for one: `tls_client_cert_file` and
    /// `tls_client_key_file`, else — as Redis falls back — `tls_cert_file` and `tls_key_file`.
    pub fn from_settings(
        ca: Option<PathBuf>,
        client: (Option<PathBuf>, Option<PathBuf>),
        server: Option<&TlsFiles>,
        needed_by: &'static str,
    ) -> Result<LinkTls, TlsError> {
        let Some(ca) = ca else {
            return Err(TlsError::Setting { key: "tls_ca_cert_file", reason: format!("{needed_by} needs the CA the peers are verified against") });
        };
        let identity = match client {
            (Some(cert), Some(key)) => Some((cert, key)),
            (Some(_), None) => return Err(TlsError::Setting { key: "tls_client_key_file", reason: "tls_client_cert_file is set and its key is not".into() }),
            (None, Some(_)) => {
                return Err(TlsError::Setting { key: "tls_client_cert_file", reason: "tls_client_key_file is set and the certificate is not".into() })
            }
            (None, None) => server.map(|f| (f.cert.clone(), f.key.clone())),
        };
        let connector = Arc::new(RwLock::new(connector(&ca, &identity)?));
        Ok(LinkTls { ca, identity, connector })
    }

    /// Reads the files again (renewed certificates); on an error the ones in use stay.
    pub fn reload(&self) -> Result<(), TlsError> {
        *self.connector.write() = connector(&self.ca, &self.identity)?;
        Ok(())
    }

    /// The CA file and the client certificate and key files (for clients that read files,
    /// as the `redis` crate).
    pub fn files(&self) -> (&std::path::Path, Option<(&std::path::Path, &std::path::Path)>) {
        (&self.ca, self.identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path())))
    }

    /// The handshake over `tcp` with the peer at `host` (the host part of the address the
    /// link was given: a DNS name or an IP address, which its certificate must name).
    pub async fn connect(&self, tcp: TcpStream, host: &str) -> std::io::Result<TlsStream<TcpStream>> {
        let name = server_name(host)?;
        let connector = self.connector.read().clone();
        connector.connect(name, tcp).await
    }
}

fn connector(ca: &std::path::Path, identity: &Option<(PathBuf, PathBuf)>) -> Result<TlsConnector, TlsError> {
    let config = crate::client_config(ca, identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path())))?;
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The name a peer's certificate must carry, from the host part of `host:port`.
pub fn server_name(host: &str) -> std::io::Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("'{host}' is not a host name for TLS ({e})")))
}

/// The host part of `host:port` (an IPv6 address in brackets kept whole).
pub fn host_of(addr: &str) -> &str {
    match addr.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address_is_what_the_certificate_must_name() {
        assert_eq!(host_of("localhost:7001"), "localhost");
        assert_eq!(host_of("127.0.0.1:7001"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7001"), "[::1]");
        assert!(matches!(server_name(host_of("[::1]:7001")).unwrap(), ServerName::IpAddress(_)));
        assert!(matches!(server_name("engine-1.example").unwrap(), ServerName::DnsName(_)));
        assert!(server_name("not a host").is_err());
    }

    #[test]
    fn a_link_needs_a_ca_and_whole_client_identities() {
        let e = LinkTls::from_settings(None, (None, None), None, "tls_replication").unwrap_err().to_string();
        assert_eq!(e, "invalid value for `tls_ca_cert_file`: tls_replication needs the CA the peers are verified against");
        let e = LinkTls::from_settings(Some("ca".into()), (Some("c".into()), None), None, "x").unwrap_err().to_string();
        assert!(e.contains("`tls_client_key_file`"), "{e}");
    }
}
