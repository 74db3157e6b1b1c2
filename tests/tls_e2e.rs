//! TLS end to end: certificates made at test time by `terrace tls-gen`, the real proxy with
//! TLS ports beside its plain ones, and real clients over TLS — `redis-cli --tls`, the
//! `redis` crate (rustls), pymemcache with an `ssl` context — with and without client
//! certificates, a CA the clients do not trust, and certificates renewed under load.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{eventually, info_field, q, temp_dir, Console, Engine, Proxy, PROXY_ADMIN_PASSWORD};

/// The files `terrace tls-gen` writes.
struct Certs {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

/// Runs `terrace tls-gen DIR` (the binary, as an operator would) and checks what it wrote.
fn tls_gen(dir: &Path) -> Certs {
    let out = Command::new(env!("CARGO_BIN_EXE_terrace")).arg("tls-gen").arg(dir).output().expect("run terrace tls-gen");
    assert!(out.status.success(), "tls-gen: {}", String::from_utf8_lossy(&out.stderr));
    let certs = Certs {
        ca: dir.join("ca.crt"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
    };
    use std::os::unix::fs::PermissionsExt;
    for key in [&certs.server_key, &certs.client_key, &dir.join("ca.key")] {
        assert_eq!(std::fs::metadata(key).unwrap().permissions().mode() & 0o777, 0o600, "{} is its owner's alone", key.display());
    }
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("server.crt") && said.contains("localhost, 127.0.0.1"), "{said}");
    certs
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A proxy in front of `engine` with a Redis and a Memcached TLS port on `certs`.
fn tls_proxy(engine: &Engine, certs: &Certs, extra: &[&str]) -> Proxy {
    let mut args = vec!["--tls-port", "0", "--memcache-tls-port", "0"];
    args.extend(["--tls-cert-file", path(&certs.server_cert), "--tls-key-file", path(&certs.server_key), "--tls-ca-cert-file", path(&certs.ca)]);
    args.extend(extra);
    let proxy = Proxy::start(&[engine], &args, &[]);
    assert!(proxy.tls_port.is_some() && proxy.memcache_tls_port.is_some(), "the proxy announced its TLS ports");
    proxy
}

/// A `redis` crate connection over TLS, trusting `ca`, showing `identity` when given.
fn redis_tls(port: u16, ca: &Path, identity: Option<(&Path, &Path)>) -> redis::RedisResult<redis::Connection> {
    let certs = redis::TlsCertificates {
        client_tls: identity.map(|(cert, key)| redis::ClientTlsConfig { client_cert: std::fs::read(cert).unwrap(), client_key: std::fs::read(key).unwrap() }),
        root_cert: Some(std::fs::read(ca).unwrap()),
    };
    redis::Client::build_with_tls(format!("rediss://127.0.0.1:{port}"), certs)?.get_connection()
}

/// `redis-cli --tls` against `port`: its stdout and stderr together.
fn redis_cli(port: u16, tls: &[&str], command: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["--tls", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(tls)
        .args(command)
        .output()
        .expect("redis-cli (Debian's redis-tools) must be installed");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn redis_clients_speak_tls_beside_the_plain_port() {
    terrace_tls::install_default_provider();
    let certs = tls_gen(&temp_dir("tls"));
    let engine = Engine::start(&[]);
    let proxy = tls_proxy(&engine, &certs, &[]);
    let tls_port = proxy.tls_port.unwrap();

    // redis-cli, as the README says to run it.
    let ca = ["--cacert", path(&certs.ca)];
    assert_eq!(redis_cli(tls_port, &ca, &["SET", "greeting", "hello over tls"]).trim(), "OK");
    assert_eq!(redis_cli(tls_port, &ca, &["GET", "greeting"]).trim(), "hello over tls");

    // The redis crate: single requests, a pipeline of 2,000, a 4 MiB value (more than
    // rustls sends in one write: what is left must be flushed).
    let mut con = redis_tls(tls_port, &certs.ca, None).expect("a TLS connection trusting the CA");
    let got: String = q(&mut con, &["GET", "greeting"]);
    assert_eq!(got, "hello over tls");
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    pipe.cmd("MGET").arg("k0").arg("k1999");
    let (values,): (Vec<i64>,) = pipe.query(&mut con).unwrap();
    assert_eq!(values, vec![0, 1999]);
    let big = "x".repeat(4 << 20);
    let _: () = redis::cmd("SET").arg("big").arg(&big).query(&mut con).unwrap();
    let back: String = q(&mut con, &["GET", "big"]);
    assert_eq!(back.len(), big.len());

    // The plain port serves the same data, side by side.
    let mut plain = redis::Client::open(format!("redis://127.0.0.1:{}", proxy.port)).unwrap().get_connection().unwrap();
    let got: String = q(&mut plain, &["GET", "greeting"]);
    assert_eq!(got, "hello over tls");

    // A CA the server's certificate is not from: refused by both clients.
    let other = tls_gen(&temp_dir("tls-other"));
    let said = redis_cli(tls_port, &["--cacert", path(&other.ca)], &["PING"]);
    assert!(!said.contains("PONG") && said.to_lowercase().contains("certificate"), "{said}");
    let e = redis_tls(tls_port, &other.ca, None).map(|_| ()).unwrap_err().to_string();
    assert!(e.to_lowercase().contains("certificate") || e.contains("UnknownIssuer"), "{e}");

    // A plain client on the TLS port is not served (its bytes are no handshake), and the
    // failed handshakes leave no client behind.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
    raw.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    use std::io::{Read, Write};
    raw.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = raw.read(&mut buf).unwrap_or(0);
    assert!(!String::from_utf8_lossy(&buf[..n]).contains("PONG"));
    drop(raw);
    drop(con);
    eventually(10, "only the plain client is left", || info_field(&mut plain, "clients", "connected_clients") == 1);
}

#[test]
fn client_certificates_are_required_as_tls_auth_clients_says() {
    terrace_tls::install_default_provider();
    let certs = tls_gen(&temp_dir("tls-mtls"));
    let other = tls_gen(&temp_dir("tls-mtls-other"));
    let engine = Engine::start(&[]);
    let required = tls_proxy(&engine, &certs, &["--tls-auth-clients", "yes"]);
    let port = required.tls_port.unwrap();
    let ca = ["--cacert", path(&certs.ca)];
    // No certificate: refused.
    assert!(!redis_cli(port, &ca, &["PING"]).contains("PONG"));
    assert!(redis_tls(port, &certs.ca, None).and_then(|mut c| redis::cmd("PING").query::<String>(&mut c)).is_err());
    // The CA's client certificate: served.
    let identity = ["--cacert", path(&certs.ca), "--cert", path(&certs.client_cert), "--key", path(&certs.client_key)];
    assert_eq!(redis_cli(port, &identity, &["PING"]).trim(), "PONG");
    let mut con = redis_tls(port, &certs.ca, Some((&certs.client_cert, &certs.client_key))).unwrap();
    let pong: String = q(&mut con, &["PING"]);
    assert_eq!(pong, "PONG");
    // Another CA's client certificate: refused.
    let foreign = redis_tls(port, &certs.ca, Some((&other.client_cert, &other.client_key))).and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
    assert!(foreign.is_err(), "{foreign:?}");

    // optional: served either way.
    let optional = tls_proxy(&engine, &certs, &["--tls-auth-clients", "optional"]);
    let port = optional.tls_port.unwrap();
    assert_eq!(redis_cli(port, &ca, &["PING"]).trim(), "PONG");
    assert_eq!(redis_cli(port, &identity, &["PING"]).trim(), "PONG");
}

#[test]
fn memcached_clients_speak_tls() {
    let certs = tls_gen(&temp_dir("tls-mc"));
    let engine = Engine::start(&[]);
    let proxy = tls_proxy(&engine, &certs, &[]);
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pymemcache/venv/bin/python");
    assert!(python.exists(), "pymemcache's virtualenv is missing: run tests/run.sh first");
    // pymemcache over TLS: its `tls_context` is Python's ssl module (OpenSSL) trusting the CA.
    let script = r#"
import ssl, sys
from pymemcache.client.base import Client
ctx = ssl.create_default_context(cafile=sys.argv[2])
c = Client(("127.0.0.1", int(sys.argv[1])), tls_context=ctx, connect_timeout=5, timeout=5)
assert c.set("tls-key", b"tls-value") is True
assert c.get("tls-key") == b"tls-value", c.get("tls-key")
c.set("n", b"41")
assert c.incr("n", 1) == 42
many = {"m%d" % i: b"v%d" % i for i in range(500)}
assert c.set_many(many) == []
assert c.get_many(list(many)) == many
assert c.set("big", b"y" * 900000) is True
assert c.get("big") == b"y" * 900000
assert c.delete("m0") is True
print("ok")
"#;
    let out = Command::new(&python).args(["-c", script, &proxy.memcache_tls_port.unwrap().to_string(), path(&certs.ca)]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok", "{}", String::from_utf8_lossy(&out.stderr));
    // What it stored is there on the plain Memcached port.
    let mut raw = proxy.memcache();
    raw.send(b"get tls-key n\r\n");
    let got = raw.read_available();
    assert!(got.contains("tls-value") && got.contains("42"), "{got}");
    // A context trusting another CA is refused.
    let other = tls_gen(&temp_dir("tls-mc-other"));
    let out = Command::new(&python).args(["-c", script, &proxy.memcache_tls_port.unwrap().to_string(), path(&other.ca)]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("CERTIFICATE_VERIFY_FAILED"), "{err}");
}

#[test]
fn renewed_certificates_are_read_on_sighup_without_dropping_clients() {
    terrace_tls::install_default_provider();
    let dir = temp_dir("tls-reload");
    let first = tls_gen(&dir);
    let first_ca = dir.join("first-ca.crt");
    std::fs::copy(&first.ca, &first_ca).unwrap();
    let engine = Engine::start(&[]);
    let proxy = tls_proxy(&engine, &first, &[]);
    let port = proxy.tls_port.unwrap();

    // Four clients over TLS, each writing and reading its own key without pause.
    let stop = Arc::new(AtomicBool::new(false));
    let reloaded = Arc::new(AtomicBool::new(false));
    let after = Arc::new(AtomicU64::new(0));
    let loaders: Vec<_> = (0..4)
        .map(|id| {
            let (stop, reloaded, after) = (stop.clone(), reloaded.clone(), after.clone());
            let ca = first_ca.clone();
            std::thread::spawn(move || -> Result<u64, String> {
                let mut con = redis_tls(port, &ca, None).map_err(|e| e.to_string())?;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let key = format!("load:{id}");
                    redis::cmd("SET").arg(&key).arg(n).query::<()>(&mut con).map_err(|e| format!("SET after {n}: {e}"))?;
                    let got: u64 = redis::cmd("GET").arg(&key).query(&mut con).map_err(|e| format!("GET after {n}: {e}"))?;
                    if got != n {
                        return Err(format!("{key}: {got}, wrote {n}"));
                    }
                    if reloaded.load(Ordering::Relaxed) {
                        after.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(n)
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));

    // Renewed by another CA, in the same files; then SIGHUP.
    let second = tls_gen(&dir);
    sighup(&proxy);
    eventually(10, "new clients get the renewed certificate", || redis_tls(port, &second.ca, None).is_ok());
    reloaded.store(true, Ordering::Relaxed);
    let e = redis_tls(port, &first_ca, None).map(|_| ()).unwrap_err().to_string();
    assert!(e.to_lowercase().contains("certificate") || e.contains("UnknownIssuer"), "{e}");
    eventually(10, "the clients connected before keep working", || after.load(Ordering::Relaxed) > 400);
    stop.store(true, Ordering::Relaxed);
    for (id, l) in loaders.into_iter().enumerate() {
        let n = l.join().unwrap().unwrap_or_else(|e| panic!("client {id} was dropped or failed: {e}"));
        assert!(n > 100, "client {id} ran ({n} rounds)");
    }

    // A renewal gone wrong (a key that is not the certificate's): the reload is refused and
    // the port keeps serving what it had.
    std::fs::copy(dir.join("client.key"), dir.join("server.key")).unwrap();
    sighup(&proxy);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut con = redis_tls(port, &second.ca, None).expect("still served with the renewed certificate");
    let pong: String = q(&mut con, &["PING"]);
    assert_eq!(pong, "PONG");
}

fn sighup(proxy: &Proxy) {
    sighup_child(&proxy.child);
}

fn sighup_child(child: &std::process::Child) {
    // SAFETY: kill(2) on the pid of a child of this test.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGHUP) }, 0);
}

/// An engine's flags for a TLS port alone (no plain port) on `certs`, clients' certificates
/// required.
fn tls_only_engine(certs: &Certs, extra: &[&str]) -> Engine {
    let mut args = vec!["--tls-port", "0", "--tls-only", "--tls-auth-clients", "yes"];
    args.extend(["--tls-cert-file", path(&certs.server_cert), "--tls-key-file", path(&certs.server_key), "--tls-ca-cert-file", path(&certs.ca)]);
    args.extend(extra);
    Engine::start(&args)
}

#[test]
fn engines_serve_tls_alone_to_the_proxy_to_clients_and_to_their_replicas() {
    terrace_tls::install_default_provider();
    let dir = temp_dir("tls-engines");
    let certs = tls_gen(&dir);
    let first_ca = dir.join("first-ca.crt");
    std::fs::copy(&certs.ca, &first_ca).unwrap();
    let (client_cert, client_key) = (dir.join("first-client.crt"), dir.join("first-client.key"));
    std::fs::copy(&certs.client_cert, &client_cert).unwrap();
    std::fs::copy(&certs.client_key, &client_key).unwrap();
    let identity = Some((client_cert.as_path(), client_key.as_path()));
    let primary = tls_only_engine(&certs, &["--tls-cluster"]);
    let port = primary.port;

    // The port speaks TLS alone: a plain client gets no reply, a client without a
    // certificate is refused, one with the CA's certificate is served.
    {
        use std::io::{Read, Write};
        let mut plain = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        plain.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        plain.write_all(b"PING\r\n").unwrap();
        let mut got = Vec::new();
        let _ = plain.read_to_end(&mut got);
        assert!(!String::from_utf8_lossy(&got).contains("PONG"), "a plain client was served: {got:?}");
    }
    assert!(redis_tls(port, &first_ca, None).and_then(|mut c| redis::cmd("PING").query::<String>(&mut c)).is_err(), "no client certificate, no service");
    let mut direct = redis_tls(port, &first_ca, identity).expect("a client with the CA's certificate");
    assert_eq!(q::<String>(&mut direct, &["PING"]), "PONG");
    let cli = redis_cli(port, &["--cacert", path(&first_ca), "--cert", path(&client_cert), "--key", path(&client_key)], &["PING"]);
    assert_eq!(cli.trim(), "PONG", "redis-cli --tls with a client certificate: {cli}");

    // The proxy's links to the engine over TLS, showing its client certificate.
    let link_args =
        ["--tls-engines", "--tls-ca-cert-file", path(&first_ca), "--tls-client-cert-file", path(&client_cert), "--tls-client-key-file", path(&client_key)];
    let proxy = Proxy::start(&[&primary], &link_args, &[]);
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{}", proxy.port)).unwrap().get_connection().unwrap();
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(format!("v{i}")).ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let big: Vec<u8> = (0..4 << 20).map(|i| (i % 251) as u8).collect();
    redis::cmd("SET").arg("big").arg(&big).query::<()>(&mut con).unwrap();
    assert_eq!(redis::cmd("GET").arg("big").query::<Vec<u8>>(&mut con).unwrap(), big);
    assert_eq!(q::<String>(&mut con, &["GET", "k1999"]), "v1999");
    assert_eq!(q::<u64>(&mut direct, &["DBSIZE"]), 2001, "the keys are on the engine");

    // The engine lists its TLS clients under their TCP peers' addresses and its TLS port.
    let list: String = q(&mut direct, &["CLIENT", "LIST"]);
    assert!(list.lines().count() >= 2 && list.lines().all(|l| l.contains("addr=127.0.0.1:") && l.contains(&format!("laddr=127.0.0.1:{port}"))), "{list}");
    // CLIENT KILL ends a TLS client's connection.
    let mut victim = redis_tls(port, &first_ca, identity).unwrap();
    let id: u64 = q(&mut victim, &["CLIENT", "ID"]);
    assert_eq!(q::<u64>(&mut direct, &["CLIENT", "KILL", "ID", &id.to_string()]), 1);
    assert!(redis::cmd("PING").query::<String>(&mut victim).is_err(), "a killed TLS client's connection ends");

    // A replica, TLS alone too, follows the primary over TLS (tls_replication), showing
    // its own certificate (tls_cert_file, Redis's fallback for the client side).
    let replica = tls_only_engine(&certs, &["--tls-replication"]);
    let mut rcon = redis_tls(replica.port, &first_ca, identity).unwrap();
    q::<String>(&mut rcon, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
    eventually(30, "the replica has the primary's keys", || redis::cmd("DBSIZE").query::<u64>(&mut rcon).ok() == Some(2001));
    assert_eq!(redis::cmd("GET").arg("big").query::<Vec<u8>>(&mut rcon).unwrap(), big);
    q::<()>(&mut con, &["SET", "after-sync", "1"]);
    eventually(10, "the stream follows over TLS", || q::<Option<String>>(&mut rcon, &["GET", "after-sync"]).as_deref() == Some("1"));

    // Renewed by another CA and SIGHUP: new clients need the new CA's certificates; the
    // connections made before — a client, the proxy's links, the replica's — go on.
    let second = tls_gen(&dir);
    sighup_child(&primary.child);
    eventually(10, "new clients get the renewed certificate", || redis_tls(port, &second.ca, Some((&second.client_cert, &second.client_key))).is_ok());
    assert!(redis_tls(port, &first_ca, identity).and_then(|mut c| redis::cmd("PING").query::<String>(&mut c)).is_err(), "the old CA's clients are refused");
    assert_eq!(q::<String>(&mut direct, &["PING"]), "PONG");
    q::<()>(&mut con, &["SET", "after-renewal", "2"]);
    assert_eq!(q::<String>(&mut con, &["GET", "after-renewal"]), "2");
    eventually(10, "the replica's link goes on", || q::<Option<String>>(&mut rcon, &["GET", "after-renewal"]).as_deref() == Some("2"));

    // A slot move to another engine, TLS alone too, over a TLS link (tls_cluster) made with
    // the renewed files (SIGHUP re-read the links' side as well).
    let target = tls_only_engine(&certs, &[]);
    let mut tcon = redis_tls(target.port, &second.ca, Some((&second.client_cert, &second.client_key))).unwrap();
    let before: u64 = q(&mut direct, &["DBSIZE"]);
    let phase = |con: &mut redis::Connection, want: &str| {
        eventually(60, &format!("the move reaches {want}"), || {
            let st: serde_json::Value = serde_json::from_str(&q::<String>(con, &["TERRACE.MIGRATE", "STATUS"])).unwrap();
            assert_ne!(st["phase"], "failed", "{st}");
            st["phase"] == want
        })
    };
    q::<String>(&mut direct, &["TERRACE.MIGRATE", "START", "tls-move", &format!("127.0.0.1:{}", target.port), "0-8191"]);
    phase(&mut direct, "ready");
    q::<String>(&mut direct, &["TERRACE.MIGRATE", "SEAL"]);
    phase(&mut direct, "handed-over");
    q::<String>(&mut direct, &["TERRACE.MIGRATE", "FINISH"]);
    phase(&mut direct, "done");
    let moved: u64 = q(&mut tcon, &["DBSIZE"]);
    assert!(moved > 500, "{moved} keys moved");
    eventually(10, "the source keeps the rest", || q::<u64>(&mut direct, &["DBSIZE"]) + moved == before);
}

#[test]
fn bad_tls_settings_stop_the_start_and_name_the_setting() {
    let certs = tls_gen(&temp_dir("tls-bad"));
    let start = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_terrace")).args(["proxy", "--port", "0", "--memcache-port", "0"]).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = start(&["--tls-port", "0"]);
    assert!(e.contains("`tls_port`") && e.contains("tls_cert_file"), "{e}");
    let e = start(&["--tls-port", "0", "--tls-cert-file", "/nonexistent/server.crt", "--tls-key-file", path(&certs.server_key)]);
    assert!(e.contains("`tls_cert_file`") && e.contains("/nonexistent/server.crt"), "{e}");
    let e = start(&["--tls-port", "0", "--tls-cert-file", path(&certs.server_cert), "--tls-key-file", path(&certs.client_key)]);
    assert!(e.contains("`tls_key_file`") && e.contains("client.key"), "{e}");
    let e = start(&["--tls-port", "0", "--tls-cert-file", path(&certs.server_cert), "--tls-key-file", path(&certs.server_key), "--tls-auth-clients", "yes"]);
    assert!(e.contains("`tls_ca_cert_file`"), "{e}");
    let e =
        start(&["--tls-port", "0", "--tls-cert-file", path(&certs.server_cert), "--tls-key-file", path(&certs.server_key), "--tls-auth-clients", "sometimes"]);
    assert!(e.contains("`tls_auth_clients`") && e.contains("'sometimes'"), "{e}");
}

/// An HTTPS receiver for the console's webhook on `tls`: every POST's body, in order.
async fn https_receiver(tls: terrace_tls::ServerTls) -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let bodies: Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let received = bodies.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let Ok(mut s) = tls.acceptor().accept(tcp).await else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Headers, then Content-Length bytes of body.
            loop {
                let n = s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                let Some(end) = text.find("\r\n\r\n") else { continue };
                let len = text[..end]
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()))
                    .unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    received.lock().unwrap().push(String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).to_string());
                    break;
                }
            }
            let _ = s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
            let _ = s.shutdown().await;
        }
    });
    (port, bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_reaches_engines_and_proxies_over_tls_and_posts_events_over_https() {
    use common::console_api::{api, login, token};
    terrace_tls::install_default_provider();
    let dir = temp_dir("tls-console");
    let certs = tls_gen(&dir);
    let engine = tls_only_engine(&certs, &[]);
    // The proxy's links to the engine show its own certificate (Redis's fallback); the
    // console reaches it on its TLS port.
    let mut proxy_args = vec!["--tls-port", "0", "--tls-engines"];
    proxy_args.extend(["--tls-cert-file", path(&certs.server_cert), "--tls-key-file", path(&certs.server_key), "--tls-ca-cert-file", path(&certs.ca)]);
    let proxy = Proxy::start(&[&engine], &proxy_args, &[("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)]);
    let files = terrace_tls::TlsFiles::from_settings(Some(certs.server_cert.clone()), Some(certs.server_key.clone()), None, None).unwrap().unwrap();
    let (hook_port, received) = https_receiver(terrace_tls::ServerTls::new(files).unwrap()).await;
    let hook = format!("https://localhost:{hook_port}/hook");
    let console = Console::start_for(
        temp_dir("tls-console-db"),
        &format!("127.0.0.1:{}", engine.port),
        &format!("127.0.0.1:{}", proxy.tls_port.unwrap()),
        &[
            "--tls-nodes",
            "--tls-ca-cert-file",
            path(&certs.ca),
            "--tls-client-cert-file",
            path(&certs.client_cert),
            "--tls-client-key-file",
            path(&certs.client_key),
            "--webhook-url",
            &hook,
        ],
        &[],
    );
    let url = console.url.clone();
    let (session, csrf) = login(&url).await;
    let token = token(&session, &url, &csrf, "tls").await;

    // The console sees the engine and the proxy up, over TLS.
    let mut nodes = serde_json::Value::Null;
    for _ in 0..100 {
        nodes = api(reqwest::Method::GET, format!("{url}/api/v1/nodes"), &token, None).await.1;
        if nodes["engines"][0]["up"] == true && nodes["proxies"][0]["up"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(nodes["engines"][0]["up"] == true && nodes["proxies"][0]["up"] == true, "both over TLS: {nodes}");
    // A tenant created in the console reaches the proxy (its admin link over TLS) and the
    // engine (the tenant's namespace): a client logs in as it through the proxy.
    let (status, body) =
        api(reqwest::Method::POST, format!("{url}/api/v1/tenants"), &token, Some(serde_json::json!({"name": "shop", "password": "shop-pw"}))).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{body}");
    let as_tenant = || -> redis::RedisResult<redis::Connection> {
        let mut con = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port))?.get_connection()?;
        redis::cmd("AUTH").arg("shop").arg("shop-pw").query::<()>(&mut con)?;
        Ok(con)
    };
    eventually(20, "the tenant is pushed to the proxy over TLS", || as_tenant().is_ok());
    let mut con = as_tenant().unwrap();
    q::<()>(&mut con, &["SET", "order:1", "paid"]);
    assert_eq!(q::<String>(&mut con, &["GET", "order:1"]), "paid");
    // The events reach the https:// webhook, verified against tls_ca_cert_file.
    for _ in 0..200 {
        if received.lock().unwrap().iter().any(|b| b.contains("POST /api/v1/tenants")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let got = received.lock().unwrap().clone();
    assert!(got.iter().any(|b| b.contains("POST /api/v1/tenants")), "the webhook got no event of the tenant's creation over HTTPS: {got:?}");
}

/// While a script holds an engine's only reactor, a TLS client is still answered (at the
/// socket, as a plain one): its relay runs off the reactors, so SCRIPT KILL gets through.
#[test]
fn a_tls_client_stops_a_busy_script() {
    terrace_tls::install_default_provider();
    let dir = temp_dir("tls-busy");
    let certs = tls_gen(&dir);
    let engine = tls_only_engine(&certs, &["--threads", "1"]);
    let identity = Some((certs.client_cert.as_path(), certs.client_key.as_path()));
    let mut admin = redis_tls(engine.port, &certs.ca, identity).unwrap();
    q::<()>(&mut admin, &["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let mut runner = redis_tls(engine.port, &certs.ca, identity).unwrap();
    let ran = std::thread::spawn(move || redis::cmd("EVAL").arg("while true do end").arg(0).query::<()>(&mut runner).unwrap_err().to_string());
    std::thread::sleep(std::time::Duration::from_millis(500));
    let e = redis::cmd("GET").arg("k").query::<Option<String>>(&mut admin).unwrap_err().to_string();
    assert!(e.contains("BUSY"), "{e}");
    assert_eq!(q::<String>(&mut admin, &["SCRIPT", "KILL"]), "OK");
    let e = ran.join().unwrap();
    assert!(e.contains("killed"), "{e}");
    assert_eq!(q::<String>(&mut admin, &["PING"]), "PONG");
}
