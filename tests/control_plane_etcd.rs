//! The control plane on etcd (issue 46, Build 1): proxies that take their topology from
//! etcd — watched, in revision order, the last one kept while etcd cannot be reached — with
//! a real etcd member (Debian's etcd-server) and real engines and proxies.

mod common;

use std::time::Duration;

use common::*;
use terrace_etcd::testing::Member;
use terrace_etcd::{Client, TOPOLOGY_KEY};

/// The proxies' topology document: `engines`, each owning the slot ranges given.
fn document(engines: &[&Engine], slots: &[(usize, &str)]) -> String {
    serde_json::json!({
        "engines": engines.iter().map(|e| format!("127.0.0.1:{}", e.port)).collect::<Vec<_>>(),
        "slots": slots.iter().map(|(e, r)| serde_json::json!({"engine": e, "range": r})).collect::<Vec<_>>(),
        "tenants": [],
    })
    .to_string()
}

async fn publish(etcd: &Member, doc: &str) {
    let client = Client::new(&[etcd.endpoint()], Duration::from_secs(2)).unwrap();
    client.put(TOPOLOGY_KEY.as_bytes(), doc.as_bytes(), 0).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_follows_the_topology_in_etcd_and_keeps_it_while_etcd_is_down() {
    let (a, b) = (Engine::start(&[]), Engine::start(&[]));
    let mut etcd = Member::start();
    // Until etcd has a topology, requests wait (as for a console's first push).
    let proxy = Proxy::start_admin_on_with(free_port(), &[&a], &["--etcd", &etcd.endpoint(), "--await-console"]);
    publish(&etcd, &document(&[&a, &b], &[(0, "0-8191"), (1, "8192-16383")])).await;
    let (mut c, mut admin) = (proxy.client(), proxy.client());
    q::<()>(&mut admin, &["AUTH", "admin", PROXY_ADMIN_PASSWORD]);
    eventually(10, "the proxy routes by etcd's topology", || {
        redis::cmd("SET").arg("probe").arg("1").query::<()>(&mut c).is_ok()
            && q::<String>(&mut admin, &["TERRACE.TOPOLOGY", "GET"]).contains(&format!("127.0.0.1:{}", b.port))
    });
    for i in 0..200 {
        q::<()>(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    let size = |e: &Engine| q::<i64>(&mut e.client(), &["DBSIZE"]);
    assert!(size(&a) > 50 && size(&b) > 50, "both engines have keys: {} {}", size(&a), size(&b));
    // One source: a push is refused, and says where the topology comes from.
    let refused = common::err(&mut admin, &["TERRACE.TOPOLOGY", "SET", &document(&[&a], &[(0, "0-16383")])]);
    assert!(refused.contains("takes its topology from etcd"), "{refused}");
    // etcd dies: the proxy keeps its topology and serves.
    etcd.kill();
    std::thread::sleep(Duration::from_millis(1500));
    for i in 0..200 {
        assert_eq!(q::<Option<String>>(&mut c, &["GET", &format!("k{i}")]), Some(i.to_string()), "served while etcd is down");
    }
    // Back, with a newer topology (every slot on b): the proxy follows it; an invalid one
    // after it changes nothing.
    etcd.restart();
    publish(&etcd, &document(&[&a, &b], &[(1, "0-16383")])).await;
    eventually(15, "the proxy follows the newer topology", || {
        let _ = redis::cmd("SET").arg("after").arg("1").query::<()>(&mut c);
        q::<i64>(&mut b.client(), &["EXISTS", "after"]) == 1 && q::<i64>(&mut a.client(), &["EXISTS", "after"]) == 0
    });
    publish(&etcd, "{\"engines\": 7}").await;
    std::thread::sleep(Duration::from_millis(500));
    q::<()>(&mut c, &["SET", "later", "1"]);
    assert_eq!(q::<i64>(&mut b.client(), &["EXISTS", "later"]), 1, "the valid topology stays in force");
}

/// The console's address as its URL names it (what `coordinator` says without --advertise).
fn address_of(console: &Console) -> String {
    console.url.trim_start_matches("http://").to_string()
}

async fn topology(web: &reqwest::Client, console: &Console) -> serde_json::Value {
    web.get(format!("{}/api/v1/topology", console.url)).send().await.unwrap().json().await.unwrap()
}

/// A console with `--etcd` is elected coordinator, names itself so, and publishes the
/// proxies' topology in etcd, where a proxy with `--etcd` takes it: the first map, a
/// tenant, a failover's new map. A console with another database stands by: it names the
/// coordinator, refuses changes, and never takes over, even once the coordinator is gone
/// (its state is not the cluster's); the coordinator restarted on its database leads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_on_etcd_coordinates_and_publishes_and_a_stranger_stands_by() {
    use reqwest::{Method, StatusCode};
    let (a, ra) = (Engine::start(&[]), Engine::start(&[]));
    let etcd = Member::start();
    let endpoint = etcd.endpoint();
    let proxy = Proxy::start_admin_on_with(free_port(), &[&a], &["--etcd", &endpoint, "--await-console"]);
    let replicas = format!("127.0.0.1:{}", ra.port);
    let flags = ["--etcd", endpoint.as_str(), "--replicas", replicas.as_str(), "--health-ms", "200", "--failover-after-ms", "1000"];
    let dir = temp_dir("console-etcd");
    let console = Console::start_in(dir.clone(), &[&a], &[&proxy], &flags, &[]);
    let (web, csrf) = console_api::login(&console.url).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while topology(&web, &console).await["coordinator"] != address_of(&console).as_str() {
        assert!(std::time::Instant::now() < deadline, "the console is not named coordinator: {}", topology(&web, &console).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The map reaches the proxy through etcd; so does a tenant.
    let mut c = proxy.client();
    eventually(15, "the proxy routes by the published map", || redis::cmd("SET").arg("k").arg("1").query::<()>(&mut c).is_ok());
    let token = console_api::token(&web, &console.url, &csrf, "etcd").await;
    let (status, body) =
        console_api::api(Method::POST, format!("{}/api/v1/tenants", console.url), &token, Some(serde_json::json!({"name": "shop", "password": "pw"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    eventually(15, "the tenant reaches the proxy", || {
        let mut t = proxy.client();
        redis::cmd("AUTH").arg("shop").arg("pw").query::<()>(&mut t).is_ok()
    });
    // A failover's map too: the primary dies, its replica is promoted and written to.
    eventually(20, "the replica follows", || q::<String>(&mut ra.client(), &["INFO", "replication"]).contains("master_link_status:up"));
    let mut a = a;
    let _ = a.child.kill();
    let _ = a.child.wait();
    eventually(30, "writes reach the promoted replica through the proxy", || {
        redis::cmd("SET").arg("after").arg("1").query::<()>(&mut c).is_ok() && q::<i64>(&mut ra.client(), &["EXISTS", "after"]) == 1
    });

    // A console with another database stands by.
    let stranger = Console::start_with(&[&ra], &[&proxy], &["--etcd", &endpoint]);
    let (web2, _) = console_api::login(&stranger.url).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let t = topology(&web2, &stranger).await;
        if t["coordinator"] == address_of(&console).as_str() && t["standby"].as_str().is_some_and(|s| s.contains("another console database")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the stranger does not stand by: {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = web2.post(format!("{}/api/v1/tenants", stranger.url)).json(&serde_json::json!({"name": "x", "password": "pw"})).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE, "a standby refuses changes");
    // The coordinator dies (its database kept): the stranger never takes over; the proxy
    // keeps its map (reads are served; writes wait for a coordinator to renew the lease).
    let mut console = console;
    let _ = console.child.kill();
    let _ = console.child.wait();
    std::mem::forget(console);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let t = topology(&web2, &stranger).await;
    assert!(t["coordinator"].is_null(), "nobody coordinates, the stranger least: {t}");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "after"]).as_deref(), Some("1"));
    // Back on its database, the coordinator leads again.
    let console = Console::start_in(dir, &[&ra], &[&proxy], &["--etcd", &endpoint], &[]);
    let (web, _) = console_api::login(&console.url).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while topology(&web, &console).await["coordinator"] != address_of(&console).as_str() {
        assert!(std::time::Instant::now() < deadline, "the restarted console does not coordinate: {}", topology(&web, &console).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
