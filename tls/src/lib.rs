//! TLS for Terrace's ports and links, on rustls: what a process's TLS settings name (PEM
//! files, whether clients must show a certificate), the server side that accepts
//! connections and re-reads its files on reload without touching connections already made
//! (`ServerTls`), the client side of the links between processes (`client_config`), and
//! test certificates made on the spot (`generate`, behind `terrace tls-gen`).
//!
//! Settings are named as Redis names them (`tls-cert-file`, `tls-key-file`,
//! `tls-ca-cert-file`, `tls-auth-clients`), written with underscores in `terrace.toml`.

mod client;
mod files;
mod generate;
mod link;
mod relay;
mod server;

pub use client::client_config;
pub use files::{AuthClients, TlsFiles};
pub use generate::{generate, Generated};
pub use link::{host_of, server_name, LinkTls};
pub use relay::relay;
pub use rustls_pki_types::ServerName;
pub use server::ServerTls;
pub use tokio_rustls::{client::TlsStream as ClientTlsStream, server::TlsStream, TlsAcceptor, TlsConnector};

/// What can go wrong reading TLS files or making certificates; each names the setting or
/// file concerned.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("invalid value for `{key}`: {path}: {reason}")]
    File { key: &'static str, path: String, reason: String },
    #[error("invalid value for `{key}`: {reason}")]
    Setting { key: &'static str, reason: String },
    #[error("the TLS configuration is refused: {0}")]
    Config(#[from] rustls::Error),
    #[error("cannot make the client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    #[error("cannot make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
}

/// A process's configuration error naming the setting at fault, as its other settings' are.
impl From<TlsError> for terrace_commands::settings::ConfigError {
    fn from(e: TlsError) -> Self {
        let (key, reason) = match e {
            TlsError::File { key, path, reason } => (key, format!("{path}: {reason}")),
            TlsError::Setting { key, reason } => (key, reason),
            other => ("tls_cert_file", other.to_string()),
        };
        terrace_commands::settings::ConfigError::Invalid { key: key.into(), reason }
    }
}

/// The process's crypto provider, installed once for every rustls configuration made
/// without one (each config here names it; this is for libraries that do not).
pub fn install_default_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
