//! A port's TLS settings, checked: the certificate chain and key it shows, the CA it
//! verifies peers against, and whether clients must show a certificate.

use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::TlsError;

/// `tls_auth_clients`, as Redis has it: `no` asks no certificate, `optional` verifies one
/// when given, `yes` refuses a client without one. (Redis's default is `yes`; ours is
/// `no`, so `redis-cli --tls --cacert ca.crt` connects as it would to ElastiCache.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthClients {
    #[default]
    No,
    Optional,
    Yes,
}

impl AuthClients {
    pub fn parse(value: &str) -> Result<AuthClients, TlsError> {
        match value.to_ascii_lowercase().as_str() {
            "no" | "false" => Ok(AuthClients::No),
            "optional" => Ok(AuthClients::Optional),
            "yes" | "true" => Ok(AuthClients::Yes),
            _ => Err(TlsError::Setting { key: "tls_auth_clients", reason: format!("'{value}' is not yes, no or optional") }),
        }
    }
}

/// The files of a TLS port or link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `tls_cert_file`: the certificate chain shown, PEM, leaf first.
    pub cert: PathBuf,
    /// `tls_key_file`: its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// `tls_ca_cert_file`: the CA peers' certificates are verified against.
    pub ca: Option<PathBuf>,
    pub auth_clients: AuthClients,
}

impl TlsFiles {
    /// Checks the settings as given (each may be absent): none at all is no TLS; a
    /// certificate needs its key; client authentication needs a CA.
    pub fn from_settings(cert: Option<PathBuf>, key: Option<PathBuf>, ca: Option<PathBuf>, auth_clients: Option<&str>) -> Result<Option<TlsFiles>, TlsError> {
        let auth_clients = auth_clients.map(AuthClients::parse).transpose()?.unwrap_or_default();
        let (cert, key) = match (cert, key) {
            (None, None) => return Ok(None),
            (Some(c), Some(k)) => (c, k),
            (Some(_), None) => return Err(TlsError::Setting { key: "tls_key_file", reason: "tls_cert_file is set and its key is not".into() }),
            (None, Some(_)) => return Err(TlsError::Setting { key: "tls_cert_file", reason: "tls_key_file is set and the certificate is not".into() }),
        };
        if auth_clients != AuthClients::No && ca.is_none() {
            return Err(TlsError::Setting {
                key: "tls_ca_cert_file",
                reason: "tls_auth_clients needs the CA that client certificates are verified against".into(),
            });
        }
        let files = TlsFiles { cert, key, ca, auth_clients };
        // Read once now, so a bad file stops the start with its name, not the first client.
        files.certificates()?;
        files.private_key()?;
        files.ca_certificates()?;
        Ok(Some(files))
    }

    pub fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        read_certificates("tls_cert_file", &self.cert)
    }

    pub fn private_key(&self) -> Result<PrivateKeyDer<'static>, TlsError> {
        read_private_key("tls_key_file", &self.key)
    }

    /// The CA's certificates (none when no CA is set).
    pub fn ca_certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        match &self.ca {
            Some(path) => read_certificates("tls_ca_cert_file", path),
            None => Ok(Vec::new()),
        }
    }
}

/// Every certificate of a PEM file (at least one).
pub(crate) fn read_certificates(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::File { key, path: path.display().to_string(), reason };
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|e| bad(format!("not PEM certificates ({e})")))?;
    if certs.is_empty() {
        return Err(bad("holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// The first private key of a PEM file.
pub(crate) fn read_private_key(key: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bad = |reason: String| TlsError::File { key, path: path.display().to_string(), reason };
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| bad(format!("holds no PEM private key ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_and_name_their_key() {
        assert_eq!(TlsFiles::from_settings(None, None, None, None).unwrap(), None);
        let e = TlsFiles::from_settings(Some("c".into()), None, None, None).unwrap_err().to_string();
        assert!(e.contains("`tls_key_file`"), "{e}");
        let e = TlsFiles::from_settings(None, None, None, Some("maybe")).unwrap_err().to_string();
        assert_eq!(e, "invalid value for `tls_auth_clients`: 'maybe' is not yes, no or optional");
        let e = TlsFiles::from_settings(Some("c".into()), Some("k".into()), None, Some("yes")).unwrap_err().to_string();
        assert!(e.contains("`tls_ca_cert_file`"), "{e}");
        let e = TlsFiles::from_settings(Some("/nonexistent/c.crt".into()), Some("k".into()), None, None).unwrap_err().to_string();
        assert!(e.starts_with("invalid value for `tls_cert_file`: /nonexistent/c.crt: "), "{e}");
    }

    #[test]
    fn a_file_that_is_not_pem_is_refused_with_its_name() {
        let dir = std::env::temp_dir().join(format!("terrace-tls-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = read_certificates("tls_cert_file", &junk).unwrap_err().to_string();
        assert!(e.contains("junk.pem") && e.contains("no PEM certificate"), "{e}");
        let e = read_private_key("tls_key_file", &junk).unwrap_err().to_string();
        assert!(e.contains("junk.pem") && e.contains("no PEM private key"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
