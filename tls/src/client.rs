//! The client side, for links between Terrace's processes (proxy → engine, replica →
//! primary, console → engines, the storage tier): peers verified against a CA, and a client
//! certificate shown when the peer asks for one.

use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

use crate::files::{read_certificates, read_private_key};
use crate::TlsError;

/// A client configuration trusting the CA of `ca` (`tls_ca_cert_file`), showing the
/// certificate and key of `identity` (`tls_client_cert_file`, `tls_client_key_file`;
/// Redis falls back to `tls_cert_file`) when given.
pub fn client_config(ca: &std::path::Path, identity: Option<(&std::path::Path, &std::path::Path)>) -> Result<ClientConfig, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certificates("tls_ca_cert_file", ca)? {
        roots.add(cert).map_err(|e| TlsError::File {
            key: "tls_ca_cert_file",
            path: ca.display().to_string(),
            reason: format!("not a CA certificate ({e})"),
        })?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions()?.with_root_certificates(roots);
    Ok(match identity {
        Some((cert, key)) => builder.with_client_auth_cert(read_certificates("tls_client_cert_file", cert)?, read_private_key("tls_client_key_file", key)?)?,
        None => builder.with_no_client_auth(),
    })
}
