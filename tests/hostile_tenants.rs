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
        let dir = temp_dir(tag);
        let (first, console_port, memcache_port) = (free_ports(UP_PORTS), free_port(), free_port());
        let (child, port) = start_up(&dir, first, console_port, &["--memcache-port", &memcache_port.to_string()]);
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

    /// A connection to engine `e` (0 or 1) with the engines' secret: what the operator sees.
    fn engine(&self, e: u16) -> redis::Connection {
        let secret = std::fs::read_to_string(self.dir.join("engine.secret")).unwrap().trim().to_string();
        redis::Client::open(format!("redis://:{secret}@127.0.0.1:{}/", self.first + e)).unwrap().get_connection().unwrap()
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
