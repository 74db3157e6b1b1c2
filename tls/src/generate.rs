//! Test certificates made on the spot (`terrace tls-gen DIR`): a CA, a server certificate
//! for the names given (localhost and 127.0.0.1 by default) and a client certificate, all
//! signed by the CA. For trying TLS locally and for tests — production certificates come
//! from the operator's own CA.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use crate::TlsError;

/// The files `generate` wrote.
#[derive(Debug, Clone)]
pub struct Generated {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Writes `ca.crt`, `ca.key`, `server.crt`, `server.key`, `client.crt` and `client.key` in
/// `dir` (made if missing; keys readable by their owner alone). `hosts` are the server
/// certificate's names (DNS names or IP addresses); `ca_name` the CA's common name.
pub fn generate(dir: &Path, hosts: &[String], ca_name: &str) -> Result<Generated, TlsError> {
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Write { path: dir.display().to_string(), source })?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let out = Generated {
        ca_cert: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
    };
    write(&out.ca_cert, &ca_cert.pem(), false)?;
    write(&out.ca_key, &ca_key.serialize_pem(), true)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut server = CertificateParams::new(hosts.to_vec())?;
    server.distinguished_name.push(DnType::CommonName, hosts.first().map(String::as_str).unwrap_or("localhost"));
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let server_key = KeyPair::generate()?;
    write(&out.server_cert, &server.signed_by(&server_key, &issuer)?.pem(), false)?;
    write(&out.server_key, &server_key.serialize_pem(), true)?;

    let mut client = CertificateParams::new(Vec::<String>::new())?;
    client.distinguished_name.push(DnType::CommonName, "terrace client");
    client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate()?;
    write(&out.client_cert, &client.signed_by(&client_key, &issuer)?.pem(), false)?;
    write(&out.client_key, &client_key.serialize_pem(), true)?;
    Ok(out)
}

fn write(path: &Path, text: &str, secret: bool) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if secret { 0o600 } else { 0o644 };
    let written = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(path).and_then(|mut f| f.write_all(text.as_bytes()));
    written.map_err(|source| TlsError::Write { path: path.display().to_string(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{client_config, AuthClients, ServerTls, TlsFiles};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("terrace-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// One exchange over a real TLS connection: the client says "ping", the server answers
    /// "pong". The client's error when the handshake fails.
    async fn exchange(server: &ServerTls, client: rustls::ClientConfig) -> Result<Vec<u8>, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = server.acceptor();
        let served = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.map_err(|e| e.to_string())?;
            let mut buf = [0u8; 4];
            tls.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
            tls.write_all(b"pong").await.map_err(|e| e.to_string())?;
            tls.shutdown().await.map_err(|e| e.to_string())
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let outcome = async {
            let mut tls = connector.connect(rustls_pki_types::ServerName::try_from("localhost").unwrap(), tcp).await.map_err(|e| e.to_string())?;
            tls.write_all(b"ping").await.map_err(|e| e.to_string())?;
            let mut got = Vec::new();
            tls.read_to_end(&mut got).await.map_err(|e| e.to_string())?;
            Ok(got)
        }
        .await;
        let _ = served.await;
        outcome
    }

    #[tokio::test]
    async fn generated_certificates_make_a_connection_and_a_wrong_ca_is_refused() {
        let d = dir("gen");
        let g = generate(&d, &["localhost".into(), "127.0.0.1".into()], "Terrace test CA").unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&g.server_key).unwrap().permissions().mode() & 0o777, 0o600);
        let files = TlsFiles::from_settings(Some(g.server_cert.clone()), Some(g.server_key.clone()), Some(g.ca_cert.clone()), None).unwrap().unwrap();
        let server = ServerTls::new(files).unwrap();
        assert_eq!(exchange(&server, client_config(&g.ca_cert, None).unwrap()).await.unwrap(), b"pong");
        // Another CA's client does not trust this server.
        let other = generate(&dir("other"), &["localhost".into()], "Another CA").unwrap();
        let e = exchange(&server, client_config(&other.ca_cert, None).unwrap()).await.unwrap_err();
        assert!(e.contains("UnknownIssuer") || e.contains("unknown issuer"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn client_certificates_are_asked_for_as_tls_auth_clients_says() {
        let d = dir("mtls");
        let g = generate(&d, &["localhost".into()], "Terrace test CA").unwrap();
        let server = |auth: &str| {
            let files = TlsFiles::from_settings(Some(g.server_cert.clone()), Some(g.server_key.clone()), Some(g.ca_cert.clone()), Some(auth)).unwrap().unwrap();
            assert_eq!(files.auth_clients, AuthClients::parse(auth).unwrap());
            ServerTls::new(files).unwrap()
        };
        let anonymous = || client_config(&g.ca_cert, None).unwrap();
        let with_cert = || client_config(&g.ca_cert, Some((&g.client_cert, &g.client_key))).unwrap();
        // yes: a client without a certificate is refused, one with it served.
        assert!(exchange(&server("yes"), anonymous()).await.is_err());
        assert_eq!(exchange(&server("yes"), with_cert()).await.unwrap(), b"pong");
        // optional: both served; no: both served (no certificate asked).
        assert_eq!(exchange(&server("optional"), anonymous()).await.unwrap(), b"pong");
        assert_eq!(exchange(&server("optional"), with_cert()).await.unwrap(), b"pong");
        assert_eq!(exchange(&server("no"), anonymous()).await.unwrap(), b"pong");
        // A client certificate of another CA is refused under yes.
        let other = generate(&dir("mtls-other"), &["localhost".into()], "Another CA").unwrap();
        let foreign = client_config(&g.ca_cert, Some((&other.client_cert, &other.client_key))).unwrap();
        assert!(exchange(&server("yes"), foreign).await.is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn a_reload_serves_the_new_certificate_and_a_bad_one_keeps_the_old() {
        let d = dir("reload");
        let first = generate(&d, &["localhost".into()], "First CA").unwrap();
        let files = TlsFiles::from_settings(Some(first.server_cert.clone()), Some(first.server_key.clone()), None, None).unwrap().unwrap();
        let server = ServerTls::new(files).unwrap();
        let first_ca = std::fs::read(&first.ca_cert).unwrap();
        let first_ca_file = d.join("first-ca.crt");
        std::fs::write(&first_ca_file, first_ca).unwrap();
        assert!(exchange(&server, client_config(&first_ca_file, None).unwrap()).await.is_ok());
        // Renewed by another CA in the same files: after the reload, clients of the new CA
        // connect and those of the old one no longer do.
        let second = generate(&d, &["localhost".into()], "Second CA").unwrap();
        server.reload().unwrap();
        assert!(exchange(&server, client_config(&second.ca_cert, None).unwrap()).await.is_ok());
        assert!(exchange(&server, client_config(&first_ca_file, None).unwrap()).await.is_err());
        // A key that does not go with the certificate: the reload fails, naming the key
        // file, and the server keeps what it had.
        std::fs::copy(d.join("client.key"), d.join("server.key")).unwrap();
        let e = server.reload().unwrap_err().to_string();
        assert!(e.contains("tls_key_file") && e.contains("server.key"), "{e}");
        assert!(exchange(&server, client_config(&second.ca_cert, None).unwrap()).await.is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
