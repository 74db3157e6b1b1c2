//! A hostile tenant against `terrace up` (issue 47's findings): with a tenant's password, or
//! none (the default tenant), it tries what an attacker would — the engines' settings through
//! the Memcached port, writes past its quota, unbounded queues and heaps, commands whose work
//! it chooses — and each test checks that the engines, the control plane and the other
//! tenants are untouched.

mod common;

use std::path::PathBuf;
use std::process::Child;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// `terrace up` on its defaults, with the console's API token in hand.
struct Appliance {
    child: Option<Child>,
    dir: PathBuf,
    /// The first engine's port; the second is the next.
    first: u16,
    /// The proxy's Redis port.
    port: u16,
    /// The default tenant's Memcached port.
    memcache_port: u16,
    url: String,
    token: String,
}

impl Appliance {
    async fn start(tag: &str) -> Appliance {
        Appliance::start_with_env(tag, &[]).await
    }

    async fn start_with_env(tag: &str, env: &[(&str, &str)]) -> Appliance {
        Appliance::start_in(temp_dir(tag), &[], env).await
    }

    /// `terrace up` in `dir` with `extra` flags and `env`.
    async fn start_in(dir: PathBuf, extra: &[&str], env: &[(&str, &str)]) -> Appliance {
        let (first, console_port, memcache_port) = (free_ports(UP_PORTS), free_port(), free_port());
        let mc = memcache_port.to_string();
        let flags: Vec<&str> = ["--memcache-port", mc.as_str()].into_iter().chain(extra.iter().copied()).collect();
        let (child, port) = start_up_with_env(&dir, first, console_port, &flags, env);
        let url = format!("http://127.0.0.1:{console_port}");
        eventually(20, "the console answers", || std::net::TcpStream::connect(("127.0.0.1", console_port)).is_ok());
        let (web, csrf) = console_api::login(&url).await;
        let token = console_api::token(&web, &url, &csrf, "hostile").await;
        Appliance { child: Some(child), dir, first, port, memcache_port, url, token }
    }

    async fn api(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        console_api::api(method, format!("{}/api/v1/{path}", self.url), &self.token, body).await
    }

    /// Makes a tenant (its password `NAME-pw`) with the API's `settings` beside its name, and
    /// waits until the proxy knows it.
    async fn tenant(&self, name: &str, settings: Value) {
        let mut body = settings;
        body["name"] = json!(name);
        body["password"] = json!(format!("{name}-pw"));
        let (status, reply) = self.api(Method::POST, "tenants", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "tenant {name}: {reply}");
        eventually(20, "the proxy knows the new tenant", || {
            let c = redis::Client::open(format!("redis://{name}:{name}-pw@127.0.0.1:{}/", self.port)).unwrap();
            c.get_connection().is_ok()
        });
    }

    /// A connection to the proxy as `tenant`.
    fn client(&self, tenant: &str) -> redis::Connection {
        let c = redis::Client::open(format!("redis://{tenant}:{tenant}-pw@127.0.0.1:{}/", self.port)).unwrap();
        let c = c.get_connection().unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        c
    }

    /// A connection to the proxy as the default tenant (no password).
    fn anonymous(&self) -> redis::Connection {
        let c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap().get_connection().unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        c
    }

    /// A connection to engine `e` (0 or 1) with its password: what the operator sees.
    fn engine(&self, e: u16) -> redis::Connection {
        common::up_engine(&self.dir, &format!("127.0.0.1:{}", self.first + e)).unwrap()
    }

    /// Every engine's CONFIG GET `name`.
    fn engines_config(&self, name: &str) -> Vec<String> {
        (0..2).map(|e| q::<Vec<String>>(&mut self.engine(e), &["CONFIG", "GET", name]).join("=")).collect()
    }
}

impl Drop for Appliance {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            if !std::thread::panicking() {
                stop_up(child);
                let _ = std::fs::remove_dir_all(&self.dir);
            }
        }
    }
}

/// Sends `lines` to a Memcached port and reads until the reply ends with `last`.
fn memcache(port: u16, lines: &str, last: &str) -> String {
    let mut c = Raw::connect(port);
    c.send(lines.as_bytes());
    let mut reply = String::new();
    eventually(10, "the Memcached port answers", || {
        reply.push_str(&c.read_available());
        reply.ends_with(last)
    });
    reply
}

/// What engine `e` holds `namespace` to (INFO's `terrace_namespace_maxmemory`).
fn namespace_limit(up: &Appliance, e: u16, namespace: &str) -> u64 {
    let mut c = up.engine(e);
    q::<()>(&mut c, &["TERRACE.NAMESPACE", namespace]);
    info_field(&mut c, "memory", "terrace_namespace_maxmemory")
}

/// Finding 1: `cache_memlimit` on any Memcached port set every engine's maxmemory. It now sets
/// the calling tenant's own limit, which lowers its quota and never raises it; the engines'
/// settings and the other tenants are untouched, and `flush_all` empties the caller's keys only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_admin_commands_touch_only_the_callers_tenant() {
    let up = Appliance::start("hostile-memcache").await;
    let shop_port = free_port();
    up.tenant("shop", json!({"memcache_port": shop_port, "max_memory": "64mb"})).await;
    up.tenant("victim", json!({"max_memory": "64mb"})).await;
    let mut victim = up.client("victim");
    q::<()>(&mut victim, &["SET", "kept", "yes"]);
    let before = up.engines_config("maxmemory");
    let quota_share = 32 << 20;
    assert_eq!(namespace_limit(&up, 0, "shop"), quota_share);

    for port in [shop_port, up.memcache_port] {
        let reply = memcache(port, "cache_memlimit 8\r\nverbosity 1\r\nmn\r\n", "MN\r\n");
        assert_eq!(reply, "OK\r\nOK\r\nMN\r\n", "port {port}");
    }
    for e in 0..2 {
        assert_eq!(namespace_limit(&up, e, "shop"), 4 << 20, "the tenant lowered its own limit");
        assert_eq!(namespace_limit(&up, e, "default"), 4 << 20, "the default tenant lowered its own");
        assert_eq!(namespace_limit(&up, e, "victim"), quota_share, "another tenant's quota is untouched");
    }
    assert_eq!(up.engines_config("maxmemory"), before, "the engines' memory limit is unchanged");
    // Asking for more than the quota gives the quota back, no more.
    assert_eq!(memcache(shop_port, "cache_memlimit 100000\r\n", "\r\n"), "OK\r\n");
    assert_eq!(namespace_limit(&up, 0, "shop"), quota_share);

    // flush_all empties the caller's keys only.
    assert_eq!(memcache(shop_port, "set a 0 0 1\r\n1\r\nflush_all\r\nget a\r\n", "END\r\n"), "STORED\r\nOK\r\nEND\r\n");
    assert_eq!(q::<String>(&mut victim, &["GET", "kept"]), "yes");
    q::<()>(&mut victim, &["SET", "still", "writes"]);
}

/// Finding 3: a write larger than the room its tenant has left was stored (the quota was
/// checked before the write's size was known), and the default tenant had no quota. Both
/// are refused with Redis's OOM error now, the default tenant's quota set by
/// `default_max_memory`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_past_the_quota_is_refused_whatever_its_size() {
    let up = Appliance::start_with_env("hostile-quota", &[("TERRACE_PROXY_DEFAULT_MAX_MEMORY", "8mb")]).await;
    up.tenant("small", json!({"max_memory": "16mb"})).await;
    let mut small = up.client("small");
    let mut anonymous = up.anonymous();
    let twenty_mb = "x".repeat(20 << 20);
    for (who, c) in [("a tenant", &mut small), ("the default tenant", &mut anonymous)] {
        let refused = err(c, &["SET", "big", &twenty_mb]);
        assert!(refused.contains("OOM"), "{who}: {refused}");
        assert_eq!(q::<Option<String>>(c, &["GET", "big"]), None, "{who}: nothing was stored");
        let refused = err(c, &["SETRANGE", "big", &(20 << 20).to_string(), "x"]);
        assert!(refused.contains("OOM"), "{who}'s SETRANGE past the quota: {refused}");
        q::<()>(c, &["SET", "small", "fits"]);
    }
    for e in 0..2 {
        assert_eq!(namespace_limit(&up, e, "default"), 4 << 20, "engine {e} holds the default tenant to its share");
    }
}

/// Sends MULTI, then SETs of 4 KB (keys of one slot, as a proxy's transaction needs) until one is refused or `most` are queued; answers the
/// refusal and how many were queued. EXEC then answers EXECABORT.
fn queue_until_refused(c: &mut redis::Connection, most: usize) -> (String, usize) {
    q::<()>(c, &["MULTI"]);
    let value = "v".repeat(4096);
    for i in 0..most {
        if let Err(e) = redis::cmd("SET").arg(format!("{{tx}}k{i}")).arg(&value).query::<String>(c) {
            let exec = err(c, &["EXEC"]);
            assert!(exec.contains("Transaction discarded"), "EXEC after a refused command: {exec}");
            return (e.to_string(), i);
        }
    }
    q::<()>(c, &["DISCARD"]);
    (String::new(), most)
}

/// Finding 4: a MULTI queue was unbounded and uncounted (300,000 queued 4 KB SETs took the
/// process to 4 GB). What a transaction holds queued now counts in its tenant's quota, and
/// one transaction is bounded by `client-query-buffer-limit` whatever the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_queue_is_bounded_and_counted_in_the_quota() {
    let up = Appliance::start("hostile-multi").await;
    up.tenant("queued", json!({"max_memory": "16mb"})).await;
    let (refusal, queued) = queue_until_refused(&mut up.client("queued"), 10_000);
    assert!(refusal.contains("OOM"), "past the quota's share (8 MB on the engine): {refusal}");
    assert!((1_000..2_100).contains(&queued), "about 8 MB of 4 KB commands were queued: {queued}");

    // A tenant without a quota is held to the engines' bound on one transaction.
    up.tenant("unlimited", json!({})).await;
    for e in 0..2 {
        q::<()>(&mut up.engine(e), &["CONFIG", "SET", "client-query-buffer-limit", "1mb"]);
    }
    let (refusal, queued) = queue_until_refused(&mut up.client("unlimited"), 10_000);
    assert!(refusal.contains("client-query-buffer-limit"), "{refusal}");
    assert!((200..260).contains(&queued), "about 1 MB was queued: {queued}");
    // The queue's bytes are given back: the tenant writes again.
    let mut queued = up.client("queued");
    q::<()>(&mut queued, &["SET", "after", "the transaction"]);
    for e in 0..2 {
        let mut c = up.engine(e);
        q::<()>(&mut c, &["TERRACE.NAMESPACE", "queued"]);
        let used = info_field(&mut c, "memory", "terrace_namespace_data_bytes");
        assert!(used < 1 << 20, "engine {e}: the tenant's data is small again ({used} bytes)");
    }
}

/// One RESP request from `reader` (`*N`, then N `$len` + argument pairs); None at its end.
fn read_request(reader: &mut impl std::io::BufRead) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let n: usize = line.trim_start_matches('*').trim().parse().ok()?;
    let mut argv = Vec::new();
    for _ in 0..n {
        let mut len = String::new();
        reader.read_line(&mut len).ok()?;
        let mut arg = vec![0; len.trim_start_matches('$').trim().parse::<usize>().ok()? + 2];
        reader.read_exact(&mut arg).ok()?;
        arg.truncate(arg.len() - 2);
        argv.push(arg);
    }
    Some(argv)
}

/// A master that is not one: it answers a replica's handshake, sends `image` as its
/// snapshot, then `stream`, and keeps the link open until the replica closes it. Answers
/// its port and a receiver told when the replica hung up.
fn fake_master(image: Vec<u8>, stream: Vec<u8>) -> (u16, std::sync::mpsc::Receiver<()>) {
    use std::io::{BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (done, hung_up) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(socket.try_clone().unwrap());
        let mut out = socket;
        while let Some(request) = read_request(&mut reader) {
            let argv: Vec<String> = request.iter().map(|a| String::from_utf8_lossy(a).to_ascii_uppercase()).collect();
            let reply = match argv.first().map(String::as_str) {
                Some("PING") => b"+PONG\r\n".to_vec(),
                Some("PSYNC") => {
                    let mut r = format!("+FULLRESYNC {} 0\r\n${}\r\n", "f".repeat(40), image.len()).into_bytes();
                    r.extend_from_slice(&image);
                    r.extend_from_slice(&stream);
                    r
                }
                // REPLCONF ACK gets no answer; the handshake's REPLCONFs get +OK.
                Some("REPLCONF") if argv.get(1).is_some_and(|a| a == "ACK") => Vec::new(),
                _ => b"+OK\r\n".to_vec(),
            };
            if out.write_all(&reply).is_err() {
                break;
            }
        }
        let _ = done.send(());
    });
    (port, hung_up)
}

/// The smallest image that loads: the header, no keys, EOF, no checksum.
fn empty_image() -> Vec<u8> {
    [&b"REDIS0010"[..], &[0xff], &[0; 8]].concat()
}

/// Finding 8: a failed full sync wiped a replica's keys, and a replica obeyed SHUTDOWN NOSAVE
/// arriving in its master's stream. A master's image that does not load now leaves the
/// replica as it was, and administrative commands in the stream are not applied (the writes
/// around them are).
#[test]
fn a_bad_master_can_neither_wipe_a_replica_nor_shut_it_down() {
    let replica = Engine::start(&[]);
    let mut c = replica.client();
    q::<()>(&mut c, &["SET", "kept", "yes"]);
    // Checksum 0 (not checked), then a type byte no RDB has.
    let corrupt = [&b"REDIS0010"[..], &[0xfe, 0, 0x7e], b"key", &[0; 8]].concat();
    let (port, hung_up) = fake_master(corrupt, Vec::new());
    q::<()>(&mut c, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
    hung_up.recv_timeout(std::time::Duration::from_secs(20)).expect("the replica refused the image and hung up");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "kept"]), Some("yes".into()), "a bad image left the replica's keys");
    // An image whose function library does not load is a bad image too (OP_FUNCTION2, then a
    // 6-bit length and the code).
    let code = b"#!lua name=bad\nthis is not lua";
    let bad_library = [&b"REDIS0010"[..], &[245, code.len() as u8], code, &[0xff], &[0; 8]].concat();
    let (port, hung_up) = fake_master(bad_library, Vec::new());
    q::<()>(&mut c, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
    hung_up.recv_timeout(std::time::Duration::from_secs(20)).expect("the replica refused the image and hung up");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "kept"]), Some("yes".into()), "a bad library left the replica's keys");

    let stream = [encode(&["SHUTDOWN", "NOSAVE"]), encode(&["CONFIG", "SET", "maxmemory", "1"]), encode(&["SET", "after", "shutdown"])].concat();
    let (port, _) = fake_master(empty_image(), stream);
    q::<()>(&mut c, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
    eventually(20, "the write after SHUTDOWN is applied", || {
        let mut c = replica.client();
        q::<Option<String>>(&mut c, &["GET", "after"]).is_some()
    });
    let mut c = replica.client();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG", "the replica is still up");
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "maxmemory"]), vec!["maxmemory", "0"]);
}

/// Finding 8: `DEBUG SLEEP inf` (with DEBUG enabled) hung an engine's reactor for an hour.
#[test]
fn debug_sleep_is_bounded() {
    let engine = Engine::start(&["--enable-debug-command", "yes"]);
    let mut c = engine.client();
    for endless in ["inf", "31", "1e9"] {
        let refused = err(&mut c, &["DEBUG", "SLEEP", endless]);
        assert!(refused.contains("sleeps at most 30 seconds"), "DEBUG SLEEP {endless}: {refused}");
    }
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SLEEP", "0.01"]), "OK");
}

/// GET `url` with `token` as a bearer token (None: none); answers the status.
async fn get_status(url: &str, token: Option<&str>) -> StatusCode {
    let mut r = reqwest::Client::new().get(url);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    r.send().await.unwrap().status()
}

/// Finding 9: the console's database was world-readable, the metrics endpoints needed no
/// credentials (and name every tenant), the audit log had no refused requests or failed
/// logins, and a viewer could read every tenant's values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_keeps_its_secrets_and_audits_refusals() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("hostile-console");
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("metrics.token");
    std::fs::write(&token_file, "scrape-me\n").unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let metrics = free_ports(3);
    let token_path = token_file.to_str().unwrap();
    let env = [("TERRACE_METRICS_TOKEN_FILE", token_path), ("TERRACE_PROXY_METRICS_TOKEN_FILE", token_path)];
    let up = Appliance::start_in(dir.clone(), &["--metrics-port", &metrics.to_string()], &env).await;
    up.tenant("shop", json!({})).await;
    q::<()>(&mut up.client("shop"), &["SET", "card", "4111-1111"]);

    let mode = std::fs::metadata(dir.join("console.db")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the console's database is the operators' alone");
    // A tenant's password is kept as an argon2id hash (it was an unsalted SHA-256), and the
    // proxy checks AUTH against it (the tenant's client above authenticated).
    let db = terrace_console::db::open(&dir.join("console.db")).await.unwrap();
    let stored = terrace_console::db::tenant(&db, "shop").await.unwrap().unwrap().password_hash.unwrap();
    assert!(stored.starts_with("$argon2id$") && terrace_commands::passwords::verify(b"shop-pw", &stored), "{stored}");
    let wrong = redis::Client::open(format!("redis://shop:wrong@127.0.0.1:{}/", up.port)).unwrap().get_connection();
    assert!(wrong.is_err(), "a wrong password is refused");

    // The proxy's and each engine's /metrics, without and with the token.
    for port in [metrics, metrics + 1, metrics + 2] {
        let url = format!("http://127.0.0.1:{port}/metrics");
        assert_eq!(get_status(&url, None).await, StatusCode::UNAUTHORIZED, "{url} without a token");
        assert_eq!(get_status(&url, Some("wrong")).await, StatusCode::UNAUTHORIZED, "{url} with a wrong one");
        assert_eq!(get_status(&url, Some("scrape-me")).await, StatusCode::OK, "{url} with it");
    }

    // A viewer sees the tenant, not its keys or values; what it is refused is audited.
    let (status, made) = up.api(Method::POST, "tokens", Some(json!({"name": "watcher", "role": "viewer"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let viewer = made["token"].as_str().unwrap().to_string();
    let as_viewer = |method: Method, path: &str| console_api::api(method, format!("{}/api/v1/{path}", up.url), &viewer, None);
    assert_eq!(as_viewer(Method::GET, "tenants/shop").await.0, StatusCode::OK);
    assert_eq!(as_viewer(Method::GET, "tenants/shop/keys").await.0, StatusCode::FORBIDDEN);
    assert_eq!(as_viewer(Method::GET, "tenants/shop/key?key=card").await.0, StatusCode::FORBIDDEN);
    assert_eq!(as_viewer(Method::GET, "slowlog").await.0, StatusCode::FORBIDDEN);
    assert_eq!(as_viewer(Method::DELETE, "tenants/shop").await.0, StatusCode::FORBIDDEN);
    let (status, _) = console_api::api(Method::DELETE, format!("{}/api/v1/tenants/shop", up.url), "trc_not-a-token", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let login = console_api::post_login(&console_api::browser(), &up.url, "guessed").await;
    assert_eq!(login.status(), StatusCode::UNAUTHORIZED);

    let (_, events) = up.api(Method::GET, "events?limit=50", None).await;
    let denied: Vec<String> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "denied")
        .map(|e| format!("{} | {}", e["actor"].as_str().unwrap_or(""), e["message"].as_str().unwrap_or("")))
        .collect();
    let has = |actor: &str, message: &str| denied.iter().any(|d| d.contains(actor) && d.contains(message));
    assert!(has("token watcher from 127.0.0.1", "GET /api/v1/tenants/shop/keys refused (403)"), "{denied:#?}");
    assert!(has("token watcher", "DELETE /api/v1/tenants/shop refused (403)"), "{denied:#?}");
    assert!(has("unauthenticated from 127.0.0.1", "DELETE /api/v1/tenants/shop refused (401)"), "{denied:#?}");
    assert!(has("login 'admin' from 127.0.0.1", "a failed login"), "{denied:#?}");
    assert_eq!(q::<String>(&mut up.client("shop"), &["GET", "card"]), "4111-1111", "the refused delete deleted nothing");
}

/// The requests an impostor was sent, each its arguments.
type Received = std::sync::Arc<std::sync::Mutex<Vec<Vec<Vec<u8>>>>>;

/// An address that is not an engine: it keeps every request it is sent, answers AUTH and
/// the rest +OK, and relays TERRACE.PROVE to the real engine on `relay_to` (an attacker
/// that cannot make a proof borrows one). Answers its port and what it was sent.
fn impostor(relay_to: u16) -> (u16, Received) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = sent.clone();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(socket) = socket else { continue };
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(socket.try_clone().unwrap());
                let mut out = socket;
                while let Some(argv) = read_request(&mut reader) {
                    kept.lock().unwrap().push(argv.clone());
                    let reply = if argv[0].eq_ignore_ascii_case(b"terrace.prove") {
                        // The real engine's proof of the same nonce, relayed as it came.
                        let real = std::net::TcpStream::connect(("127.0.0.1", relay_to)).unwrap();
                        let args: Vec<&str> = argv.iter().map(|a| std::str::from_utf8(a).unwrap()).collect();
                        (&real).write_all(&encode(&args)).unwrap();
                        let mut real = BufReader::new(real);
                        let (mut head, mut body) = (String::new(), String::new());
                        real.read_line(&mut head).unwrap();
                        if head.starts_with('$') {
                            real.read_line(&mut body).unwrap();
                        }
                        format!("{head}{body}").into_bytes()
                    } else {
                        b"+OK\r\n".to_vec()
                    };
                    if out.write_all(&reply).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, sent)
}

/// Finding 2: an address registered as an engine was sent the engines' one password (AUTH,
/// four times), which opens every tenant's keys on every engine, and registering it cut
/// every tenant's per-engine quota. Each engine now has its own password, derived from the
/// appliance's key and its address, and proves it holds it before the console
/// authenticates: an impostor, even one relaying a real engine's proof, is refused, is sent
/// no password, and nothing it was sent opens an engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_registered_as_an_engine_learns_no_password() {
    let up = Appliance::start("hostile-engine").await;
    up.tenant("shop", json!({"max_memory": "64mb"})).await;
    q::<()>(&mut up.client("shop"), &["SET", "card", "4111-1111"]);
    let limit = namespace_limit(&up, 0, "shop");
    let (port, sent) = impostor(up.first);
    let address = format!("127.0.0.1:{port}");

    let (status, body) = up.api(Method::POST, "engines", Some(json!({"address": address}))).await;
    assert!(status.is_client_error(), "{status} {body}");
    assert!(body.to_string().contains("not an engine of this appliance"), "{body}");
    let (_, topology) = up.api(Method::GET, "topology", None).await;
    assert!(!topology.to_string().contains(&address), "the impostor is not in the slot map: {topology}");
    assert_eq!(namespace_limit(&up, 0, "shop"), limit, "the tenants' per-engine quotas are unchanged");

    let sent = sent.lock().unwrap().clone();
    assert!(sent.iter().any(|argv| argv[0].eq_ignore_ascii_case(b"terrace.prove")), "the console asked for a proof: {sent:?}");
    assert!(!sent.iter().any(|argv| argv[0].eq_ignore_ascii_case(b"auth")), "the console sent no password: {sent:?}");
    for e in 0..2u16 {
        let engine = format!("127.0.0.1:{}", up.first + e);
        for argument in sent.iter().flatten() {
            let mut c = redis::Client::open(format!("redis://{engine}/")).unwrap().get_connection().unwrap();
            let argument = String::from_utf8_lossy(argument).into_owned();
            assert!(err(&mut c, &["AUTH", &argument]).contains("WRONGPASS"), "{argument:?} opens {engine}");
        }
    }
    // A proof is no password, and an engine's password opens that engine alone.
    let (a0, a1) = (format!("127.0.0.1:{}", up.first), format!("127.0.0.1:{}", up.first + 1));
    let mut c = redis::Client::open(format!("redis://{a1}/")).unwrap().get_connection().unwrap();
    assert!(err(&mut c, &["AUTH", &up_engine_password(&up.dir, &a0)]).contains("WRONGPASS"));
    assert_eq!(q::<String>(&mut up.client("shop"), &["GET", "card"]), "4111-1111");
}

/// Build 3: a tenant's own people — a token or a user scoped to their tenant — see and
/// manage that tenant alone (its keys, charts, slow-log entries, a retrain, its password),
/// nothing of another tenant's or the appliance's, and go when the tenant is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_own_people_reach_their_tenant_alone() {
    let up = Appliance::start("hostile-scoped").await;
    up.tenant("shop", json!({})).await;
    up.tenant("rival", json!({})).await;
    for e in 0..2 {
        q::<()>(&mut up.engine(e), &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    }
    q::<()>(&mut up.client("shop"), &["SET", "order", "17"]);
    q::<()>(&mut up.client("rival"), &["SET", "secret-plan", "x"]);

    // Made by the admin: a viewer or an operator of an existing tenant.
    let ask = |body: Value| up.api(Method::POST, "tokens", Some(body));
    assert_eq!(ask(json!({"name": "t", "role": "operator", "tenant": "nope"})).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(ask(json!({"name": "t", "role": "admin", "tenant": "shop"})).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, made) = ask(json!({"name": "shop-ops", "role": "operator", "tenant": "shop"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["tenant"], "shop");
    let token = made["token"].as_str().unwrap().to_string();
    let call = |method: Method, path: &str, body: Option<Value>| console_api::api(method, format!("{}/api/v1/{path}", up.url), &token, body);

    let (_, listed) = call(Method::GET, "tenants", None).await;
    let names: Vec<&str> = listed["tenants"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["shop"]);
    for mine in ["tenants/shop", "tenants/shop/keys", "tenants/shop/key?key=order", "tenants/shop/history", "tenants/shop/stats"] {
        let (status, body) = call(Method::GET, mine, None).await;
        assert_eq!(status, StatusCode::OK, "{mine}: {body}");
    }
    let (_, key) = call(Method::GET, "tenants/shop/key?key=order", None).await;
    assert!(key.to_string().contains("17"), "{key}");
    for theirs in [
        "tenants/rival",
        "tenants/rival/keys",
        "tenants/rival/key?key=secret-plan",
        "topology",
        "nodes",
        "events",
        "users",
        "tokens",
        "moves",
        "slowlog?tenant=rival",
    ] {
        let (status, body) = call(Method::GET, theirs, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{theirs}: {body}");
    }
    let (_, slow) = call(Method::GET, "slowlog", None).await;
    let entries = slow["entries"].as_array().unwrap();
    assert!(entries.iter().any(|e| e["args"] == json!(["SET", "order", "17"])), "{slow}");
    assert!(entries.iter().all(|e| e["tenant"] == "shop"), "its own entries alone: {slow}");

    // Changes: its keys, a retrain and its password; not its quota, placement or existence,
    // nor a new tenant, a snapshot or a token.
    assert_eq!(call(Method::PATCH, "tenants/shop", Some(json!({"max_memory": "8gb"}))).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(Method::PATCH, "tenants/shop", Some(json!({"password": "shop-pw-2", "max_memory": "8gb"}))).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(Method::DELETE, "tenants/shop", None).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(Method::POST, "tenants/shop/apply", Some(json!({}))).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(Method::POST, "tenants", Some(json!({"name": "mine", "password": "mine-pw-1"}))).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(Method::POST, "tokens", Some(json!({"name": "more"}))).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(Method::POST, "snapshot", None).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(Method::DELETE, "tenants/rival/key?key=secret-plan", None).await.0, StatusCode::FORBIDDEN);
    assert_eq!(q::<String>(&mut up.client("rival"), &["GET", "secret-plan"]), "x");
    let (status, body) = call(Method::DELETE, "tenants/shop/key?key=order", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(q::<i64>(&mut up.client("shop"), &["EXISTS", "order"]), 0);
    let (status, body) = call(Method::PATCH, "tenants/shop", Some(json!({"password": "shop-pw-2"}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    eventually(20, "the proxy takes the new password", || {
        redis::Client::open(format!("redis://shop:shop-pw-2@127.0.0.1:{}/", up.port)).unwrap().get_connection().is_ok()
    });
    let (_, tenant) = up.api(Method::GET, "tenants/shop", None).await;
    assert_eq!(tenant["tenant"]["max_memory"], up.api(Method::GET, "tenants/rival", None).await.1["tenant"]["max_memory"], "the quota is unchanged");

    // A scoped user of the pages starts on its tenant's page and reaches no other.
    let (status, made) = up.api(Method::POST, "users", Some(json!({"name": "shopper", "password": "shopper-pw", "role": "viewer", "tenant": "shop"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let web = console_api::browser();
    let form = web.get(format!("{}/login", up.url)).send().await.unwrap().text().await.unwrap();
    let csrf = console_api::csrf_of(&form);
    let r = web.post(format!("{}/login", up.url)).form(&[("csrf", csrf.as_str()), ("user", "shopper"), ("password", "shopper-pw")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = web.get(format!("{}/", up.url)).send().await.unwrap();
    assert_eq!(r.headers()["location"], "/tenants/shop", "the overview is the appliance's");
    let page = web.get(format!("{}/tenants/shop", up.url)).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("href=\"/tenants/shop\"") && !page.contains("href=\"/topology\""), "its menu is its tenant's: {page}");
    for theirs in ["/tenants/rival", "/topology", "/events", "/tenants/shop/keys"] {
        assert_eq!(web.get(format!("{}{theirs}", up.url)).send().await.unwrap().status(), StatusCode::FORBIDDEN, "{theirs}");
    }
    let page = web.get(format!("{}/tenants", up.url)).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("/tenants/shop") && !page.contains("rival"), "{page}");

    // Deleting the tenant ends its people's access.
    assert_eq!(up.api(Method::DELETE, "tenants/shop", None).await.0, StatusCode::OK);
    assert_eq!(call(Method::GET, "tenants", None).await.0, StatusCode::UNAUTHORIZED);
    let (_, users) = up.api(Method::GET, "users", None).await;
    assert!(!users.to_string().contains("shopper"), "{users}");
}

/// Both engines' `used_memory` together.
fn engines_used_memory(up: &Appliance) -> u64 {
    (0..2).map(|e| info_field(&mut up.engine(e), "memory", "used_memory")).sum()
}

/// Finding 6: Lua's heap had no bound (`string.rep('x', 2^30)` twice took an engine from 1.0
/// to 4.7 GB, kept after the script ended). A run may now grow its VM's heap by 256 MB at
/// most, and what a run left is collected when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripts_heap_is_bounded_and_given_back() {
    let up = Appliance::start("hostile-lua").await;
    up.tenant("greedy", json!({})).await;
    let mut greedy = up.client("greedy");
    let before = engines_used_memory(&up);
    for script in ["return #string.rep('x', 2^30)", "local t = {} for i = 1, 1e5 do local row = {} for j = 1, 256 do row[j] = j end t[i] = row end return #t"] {
        let refused = err(&mut greedy, &["EVAL", script, "0"]);
        assert!(refused.contains("not enough memory"), "{script}: {refused}");
    }
    // Within the bound: it runs, and its 100-odd MB go with it.
    let fits = "local t = {} for i = 1, 25000 do local row = {} for j = 1, 256 do row[j] = j end t[i] = row end return #t";
    assert_eq!(q::<i64>(&mut greedy, &["EVAL", fits, "0"]), 25_000);
    let after = engines_used_memory(&up);
    assert!(after < before + (64 << 20), "the engines kept {} MB after the scripts", (after.saturating_sub(before)) >> 20);
    assert_eq!(q::<i64>(&mut greedy, &["EVAL", "return 1 + 1", "0"]), 2, "the VM still runs scripts");
}

/// The proxy's INFO `field` (of `section`), read as the default tenant.
fn proxy_info(up: &Appliance, section: &str, field: &str) -> u64 {
    info_field(&mut up.anonymous(), section, field)
}

/// Finding 5: the proxy had no maxclients (20,000 idle connections exhausted `terrace up`'s
/// descriptors: the console stopped answering, the accept loop spun) and no bound on all
/// clients' unread replies together (20 pipelining clients that never read: 2.5 GB). A client
/// past `maxclients` is now refused with Redis's or memcached's error, and clients that do
/// not read are closed once all together hold more than `client_memory_limit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_bounds_its_clients_and_their_unread_replies() {
    let env = [("TERRACE_PROXY_MAXCLIENTS", "40"), ("TERRACE_PROXY_CLIENT_MEMORY_LIMIT", "16mb")];
    let up = Appliance::start_with_env("hostile-clients", &env).await;
    // Clients that stay, each seen served, until one is refused.
    let mut idle = Vec::new();
    let refused = loop {
        let mut c = Raw::connect(up.port);
        c.send(&encode(&["PING"]));
        let reply = c.read_available();
        if reply != "+PONG\r\n" {
            break reply;
        }
        idle.push(c);
        assert!(idle.len() <= 40, "more than maxclients clients were served");
    };
    assert_eq!(refused, "-ERR max number of clients reached\r\n");
    assert_eq!(idle.len(), 40);
    let mut mc = Raw::connect(up.memcache_port);
    mc.send(b"version\r\n");
    assert_eq!(mc.read_available(), "SERVER_ERROR Too many open connections\r\n");
    let (status, _) = up.api(Method::GET, "tenants", None).await;
    assert_eq!(status, StatusCode::OK, "the console still answers");
    drop(idle);
    eventually(10, "clients are served again once others left", || {
        let mut c = Raw::connect(up.port);
        c.send(&encode(&["PING"]));
        c.read_available() == "+PONG\r\n"
    });
    assert!(proxy_info(&up, "stats", "rejected_connections") >= 2);
    assert_eq!(proxy_info(&up, "clients", "maxclients"), 40);

    // Clients that pipeline GETs of a 1 MB value and never read.
    q::<()>(&mut up.anonymous(), &["SET", "big", &"b".repeat(1 << 20)]);
    let gets: Vec<u8> = (0..64).flat_map(|_| encode(&["GET", "big"])).collect();
    let mut greedy: Vec<std::net::TcpStream> = Vec::new();
    for _ in 0..8 {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", up.port)).unwrap();
        s.write_all(&gets).unwrap();
        greedy.push(s);
    }
    eventually(20, "clients are closed for what they leave unread", || proxy_info(&up, "stats", "client_output_buffer_limit_disconnections") > 0);
    let held = proxy_info(&up, "clients", "clients_reply_bytes");
    assert!(held < 32 << 20, "all clients hold {held} bytes unread, over twice the 16 MB bound");
    assert_eq!(q::<String>(&mut up.anonymous(), &["GET", "big"]).len(), 1 << 20, "a client that reads is served");
}
