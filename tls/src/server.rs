//! The server side: a TLS port's acceptor, made from its files and made again from them on
//! reload. A reload swaps the configuration new connections get; connections already made
//! keep the session they negotiated, so no client is dropped. A reload that fails (a file
//! half-written, a key that does not match) keeps the configuration in use.

use std::sync::Arc;

use parking_lot::RwLock;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::files::{AuthClients, TlsFiles};
use crate::TlsError;

/// A TLS port's configuration, reloadable.
pub struct ServerTls {
    files: TlsFiles,
    config: RwLock<Arc<ServerConfig>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("files", &self.files).finish_non_exhaustive()
    }
}

impl ServerTls {
    pub fn new(files: TlsFiles) -> Result<ServerTls, TlsError> {
        let config = RwLock::new(Arc::new(server_config(&files)?));
        Ok(ServerTls { files, config })
    }

    /// What a new connection is accepted with.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config())
    }

    /// The configuration in force (for servers that take a rustls configuration).
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.read().clone()
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Reads the files again (renewed certificates): new connections get them.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.files)?;
        *self.config.write() = Arc::new(config);
        Ok(())
    }
}

fn server_config(files: &TlsFiles) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let builder = match files.auth_clients {
        AuthClients::No => builder.with_no_client_auth(),
        mode => {
            let mut roots = RootCertStore::empty();
            for ca in files.ca_certificates()? {
                roots.add(ca).map_err(|e| TlsError::File {
                    key: "tls_ca_cert_file",
                    path: files.ca.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                    reason: format!("not a CA certificate ({e})"),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if mode == AuthClients::Optional { verifier.allow_unauthenticated() } else { verifier };
            builder.with_client_cert_verifier(verifier.build()?)
        }
    };
    let mut config = builder.with_single_cert(files.certificates()?, files.private_key()?).map_err(|e| TlsError::File {
        key: "tls_key_file",
        path: files.key.display().to_string(),
        reason: format!("does not go with the certificate of tls_cert_file ({e})"),
    })?;
    // Session tickets: a reconnecting client resumes without a full handshake.
    config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()?;
    config.send_tls13_tickets = 2;
    Ok(config)
}
