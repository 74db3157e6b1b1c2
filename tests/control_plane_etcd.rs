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
