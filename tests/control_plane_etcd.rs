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

/// GET `path` of the console's API as `web`'s session, or, if that session ended (a
/// standby's end once, when it first takes the coordinator's users), as a new one.
async fn get_json(web: &reqwest::Client, console: &Console, path: &str) -> serde_json::Value {
    let r = web.get(format!("{}{path}", console.url)).send().await.unwrap();
    if r.status() != reqwest::StatusCode::UNAUTHORIZED {
        return r.json().await.unwrap();
    }
    let (again, _) = console_api::login(&console.url).await;
    again.get(format!("{}{path}", console.url)).send().await.unwrap().json().await.unwrap()
}

async fn topology(web: &reqwest::Client, console: &Console) -> serde_json::Value {
    get_json(web, console, "/api/v1/topology").await
}

async fn tenants(web: &reqwest::Client, console: &Console) -> Vec<String> {
    let body = get_json(web, console, "/api/v1/tenants").await;
    body["tenants"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

/// Waits until `console` lists tenant `name` (a standby: once it mirrored it).
async fn wait_tenant(web: &reqwest::Client, console: &Console, name: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !tenants(web, console).await.iter().any(|t| t == name) {
        assert!(std::time::Instant::now() < deadline, "{} does not list tenant {name}", console.url);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `console` names `coordinator` (None: nobody) as the coordinator.
async fn wait_coordinator(web: &reqwest::Client, console: &Console, coordinator: Option<&str>, seconds: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        let t = topology(web, console).await;
        // (Named by the election at once; coordinating once it applied the state: then it
        // no longer says it stands by.)
        let itself = coordinator == Some(address_of(console).as_str());
        if t["coordinator"].as_str() == coordinator && (!itself || t["standby"].is_null()) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{} does not name {coordinator:?} the coordinator: {t}", console.url);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What `console`'s events say `actor`s did (the audit log's newest first).
async fn actors(token: &str, console: &Console) -> Vec<String> {
    let (_, body) = console_api::api(reqwest::Method::GET, format!("{}/api/v1/events?limit=50", console.url), token, None).await;
    body["events"].as_array().unwrap().iter().filter_map(|e| e["actor"].as_str().map(str::to_string)).collect()
}

/// A standby takes changes by forwarding them to the coordinator: made with an API token,
/// with a session (its CSRF token checked), or through a page's form, each is made there,
/// audited there as made through the standby, and shown by the standby once answered. A
/// session's CSRF token is still required; a request claiming to be forwarded without the
/// consoles' key is refused by the coordinator.
async fn changes_made_on_a_standby_are_forwarded_to_the_coordinator(coordinator: &Console, standby: &Console, token: &str) {
    use reqwest::{Method, StatusCode};
    let listed = |console: &Console, name: &'static str| {
        let (url, token) = (console.url.clone(), token.to_string());
        async move {
            let (_, body) = console_api::api(Method::GET, format!("{url}/api/v1/tenants"), &token, None).await;
            body["tenants"].as_array().unwrap().iter().any(|t| t["name"] == name)
        }
    };
    let via = format!("via console {}", address_of(standby));
    // An API token.
    let tenant = serde_json::json!({"name": "by-token", "password": "pw"});
    let (status, body) = console_api::api(Method::POST, format!("{}/api/v1/tenants", standby.url), token, Some(tenant)).await;
    assert_eq!(status, StatusCode::CREATED, "a standby forwards a change: {body}");
    assert!(listed(standby, "by-token").await, "the standby shows the change it forwarded once it answered");
    assert!(listed(coordinator, "by-token").await, "the coordinator made it");
    assert!(actors(token, coordinator).await.iter().any(|a| a.starts_with("token etcd") && a.ends_with(&via)), "audited as forwarded");
    // A session of the standby's, with and without its CSRF token.
    let (web, csrf) = console_api::login(&standby.url).await;
    let post = |csrf: Option<&str>, name: &str| {
        let mut r = web.post(format!("{}/api/v1/tenants", standby.url)).json(&serde_json::json!({"name": name, "password": "pw"}));
        if let Some(csrf) = csrf {
            r = r.header("x-csrf-token", csrf);
        }
        r.send()
    };
    assert_eq!(post(None, "no-csrf").await.unwrap().status(), StatusCode::FORBIDDEN, "a session's change still needs its CSRF token");
    assert_eq!(post(Some("0123456789abcdef0123456789abcdef"), "bad-csrf").await.unwrap().status(), StatusCode::FORBIDDEN);
    let made = post(Some(&csrf), "by-session").await.unwrap();
    assert_eq!(made.status(), StatusCode::CREATED, "{}", made.text().await.unwrap());
    assert!(listed(standby, "by-session").await && listed(coordinator, "by-session").await);
    assert!(actors(token, coordinator).await.contains(&format!("user admin {via}")), "the session's user is named, through the standby");
    // A page's form: the coordinator's redirect comes back, to a page the standby serves
    // with the change.
    let form = [("csrf", csrf.as_str()), ("name", "by-page"), ("password", "pw")];
    let page = web.post(format!("{}/tenants/new", standby.url)).form(&form).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::SEE_OTHER, "{}", page.text().await.unwrap());
    assert_eq!(page.headers()["location"], "/tenants/by-page");
    let shown = web.get(format!("{}/tenants/by-page", standby.url)).send().await.unwrap();
    assert_eq!(shown.status(), StatusCode::OK, "the standby shows the tenant its form made");
    assert!(listed(coordinator, "by-page").await);
    // Claiming to be a forwarded request without the consoles' key, or with a wrong one:
    // refused.
    for key in [None, Some("guessed")] {
        let mut forged = reqwest::Client::new()
            .post(format!("{}/api/v1/tenants", coordinator.url))
            .header("x-terrace-forwarded-user", "admin")
            .header("x-terrace-forwarded-csrf", "c")
            .header("x-csrf-token", "c")
            .json(&serde_json::json!({"name": "forged", "password": "pw"}));
        if let Some(key) = key {
            forged = forged.header("x-terrace-peer-key", key);
        }
        assert_eq!(forged.send().await.unwrap().status(), StatusCode::UNAUTHORIZED, "key {key:?}");
    }
    assert!(!listed(coordinator, "forged").await);
}

/// Issue 46, Build 1: consoles on etcd. One is elected coordinator and names itself so; it
/// publishes the shared state and the proxies' topology in etcd, where a proxy with `--etcd`
/// takes the map — the first one, a tenant, a failover's. Another console stands by: it
/// mirrors the state (the tenant is there), forwards changes to the coordinator, and when the coordinator is
/// killed it takes over and coordinates — renews the primary's lease, publishes a tenant of
/// its own — while the old one, back on its database, stands by and mirrors in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consoles_on_etcd_elect_a_coordinator_mirror_its_state_and_take_over() {
    use reqwest::{Method, StatusCode};
    let (a, ra) = (Engine::start(&[]), Engine::start(&[]));
    let etcd = Member::start();
    let endpoint = etcd.endpoint();
    let proxy = Proxy::start_admin_on_with(free_port(), &[&a], &["--etcd", &endpoint, "--await-console"]);
    let replicas = format!("127.0.0.1:{}", ra.port);
    let flags = ["--etcd", endpoint.as_str(), "--replicas", replicas.as_str(), "--health-ms", "200", "--failover-after-ms", "1000"];
    let dir = temp_dir("console-etcd");
    let first = Console::start_in(dir.clone(), &[&a], &[&proxy], &flags, &[]);
    let (web, csrf) = console_api::login(&first.url).await;
    wait_coordinator(&web, &first, Some(&address_of(&first)), 15).await;
    // The map reaches the proxy through etcd; so does a tenant.
    let mut c = proxy.client();
    eventually(15, "the proxy routes by the published map", || redis::cmd("SET").arg("k").arg("1").query::<()>(&mut c).is_ok());
    let token = console_api::token(&web, &first.url, &csrf, "etcd").await;
    let create = |console: &Console, name: &'static str| {
        let (url, token) = (console.url.clone(), token.clone());
        async move { console_api::api(Method::POST, format!("{url}/api/v1/tenants"), &token, Some(serde_json::json!({"name": name, "password": "pw"}))).await }
    };
    let (status, body) = create(&first, "shop").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let tenant_works = |name: &'static str| {
        let port = proxy.port;
        move || {
            let mut t = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
            redis::cmd("AUTH").arg(name).arg("pw").query::<()>(&mut t).is_ok()
        }
    };
    eventually(15, "the tenant reaches the proxy", tenant_works("shop"));
    // A failover's map too: the primary dies, its replica is promoted and written to.
    eventually(20, "the replica follows", || q::<String>(&mut ra.client(), &["INFO", "replication"]).contains("master_link_status:up"));
    let mut a = a;
    let _ = a.child.kill();
    let _ = a.child.wait();
    eventually(30, "writes reach the promoted replica through the proxy", || {
        redis::cmd("SET").arg("after").arg("1").query::<()>(&mut c).is_ok() && q::<i64>(&mut ra.client(), &["EXISTS", "after"]) == 1
    });

    // A second console stands by, with the coordinator's state.
    let second = Console::start_with(&[&ra], &[&proxy], &["--etcd", &endpoint, "--health-ms", "200", "--failover-after-ms", "1000"]);
    let web2 = console_api::login(&second.url).await.0;
    wait_coordinator(&web2, &second, Some(&address_of(&first)), 10).await;
    wait_tenant(&web2, &second, "shop").await;
    changes_made_on_a_standby_are_forwarded_to_the_coordinator(&first, &second, &token).await;
    // The coordinator is killed: the standby takes over and coordinates.
    let mut first = first;
    let _ = first.child.kill();
    let _ = first.child.wait();
    std::mem::forget(first);
    wait_coordinator(&web2, &second, Some(&address_of(&second)), 15).await;
    let (status, body) = create(&second, "shop2").await;
    assert_eq!(status, StatusCode::CREATED, "the new coordinator takes changes: {body}");
    eventually(15, "its tenant reaches the proxy", tenant_works("shop2"));
    eventually(15, "the primary's lease is renewed by the new coordinator", || redis::cmd("SET").arg("later").arg("1").query::<()>(&mut c).is_ok());
    // The old coordinator, back on its database, stands by and mirrors the new state.
    let back = Console::start_in(dir, &[&ra], &[&proxy], &["--etcd", &endpoint], &[]);
    let (web3, _) = console_api::login(&back.url).await;
    wait_coordinator(&web3, &back, Some(&address_of(&second)), 10).await;
    wait_tenant(&web3, &back, "shop2").await;
}

/// The processes whose command line holds every one of `words` (read from /proc).
fn pids_running(words: &[&str]) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if words.iter().all(|w| args.iter().any(|a| a == w)) {
            pids.push(pid);
        }
    }
    pids
}

/// `terrace up --consoles N`: an engine with a replica added (on a standby, so forwarded to
/// the coordinator) without an address is started by the appliance — the consoles, processes
/// of their own, ask it on its launcher's socket — and takes its share of the keys in a
/// rebalance. Answers how to read its run ID, when it was added, and its run ID then.
async fn an_engine_added_on_a_standby_is_started_by_the_appliance(
    dir: &std::path::Path,
    url: &str,
    c: &mut redis::Connection,
) -> (impl Fn() -> String, std::time::Instant, String) {
    use reqwest::{Method, StatusCode};
    for i in 0..2000 {
        q::<()>(c, &["SET", &format!("u:{i}"), &i.to_string()]);
    }
    // (A token made through the standby's tokens page: the coordinator shows it once, the
    // standby relays the page. The standby's session may end once, as it first takes the
    // coordinator's users: then again.)
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let token = loop {
        let (web, csrf) = console_api::login(url).await;
        let page = web.post(format!("{url}/tokens")).form(&[("csrf", csrf.as_str()), ("name", "grow")]).send().await.unwrap().text().await.unwrap();
        if let Some(at) = page.find("trc_") {
            break page[at..].split('<').next().unwrap().to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no token made through the standby: {page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let call = |method: Method, path: &str, body: Option<serde_json::Value>| console_api::api(method, format!("{url}/api/v1{path}"), &token, body);
    let (status, body) = call(Method::POST, "/engines", Some(serde_json::json!({"replicas": 1}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let added = body["address"].as_str().unwrap().to_string();
    let port: u16 = added.rsplit(':').next().unwrap().parse().unwrap();
    assert!(dir.join(format!("engine-added-{port}")).is_dir(), "started by the appliance, in its data directory");
    let listed = std::fs::read_to_string(dir.join("added-engines")).unwrap();
    assert_eq!(listed.lines().count(), 2, "the engine and its replica are the appliance's to restart: {listed}");
    let (status, body) = call(Method::POST, "/rebalance", Some(serde_json::json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (_, body) = call(Method::GET, "/moves", None).await;
        let moves = body["moves"].as_array().unwrap();
        assert!(moves.iter().all(|m| m["state"] != "failed"), "a move failed: {body}");
        if !moves.is_empty() && moves.iter().all(|m| m["state"] == "done") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "moves not done: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dir = dir.to_path_buf();
    let on_added = move || common::up_engine(&dir, &added).unwrap();
    let n: i64 = q(&mut on_added(), &["DBSIZE"]);
    assert!(n > 400, "the added engine has its share of the keys ({n})");
    for i in 0..2000 {
        assert_eq!(q::<Option<String>>(c, &["GET", &format!("u:{i}")]), Some(i.to_string()));
    }
    let run_id = move || common::info_text(&mut on_added(), "server", "run_id");
    let first = run_id();
    (run_id, std::time::Instant::now(), first)
}

/// `terrace up --consoles 3`: three etcd members and three console processes; one is
/// elected coordinator (writes go on: it renews the primaries' leases). An engine added on a
/// standby is started by the appliance and lives through what follows. Paused (SIGSTOP),
/// another takes over and writes go on; resumed, the old one stands by. Killed, the
/// coordinator is replaced again (perhaps by itself, restarted by the supervisor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terrace_up_runs_three_consoles_and_survives_the_coordinators_loss() {
    let dir = temp_dir("up-consoles");
    let (first, console_port, etcd_port) = (free_ports(UP_PORTS), free_ports(3), free_ports(6));
    let extra = ["--consoles", "3", "--etcd-port", &etcd_port.to_string(), "--replicas", "1"];
    let (child, port) = start_up(&dir, first, console_port, &extra);
    let urls: Vec<String> = (0..3).map(|i| format!("http://127.0.0.1:{}", console_port + i)).collect();
    let mut webs = Vec::new();
    for url in &urls {
        webs.push(console_api::login(url).await.0);
    }
    // (A standby's sessions end once when it first takes the coordinator's users: logged in
    // again then.)
    let webs = std::sync::Mutex::new(webs);
    // What console `i` says: who coordinates, and whether it stands by.
    let view = |i: usize| {
        let (web, url) = (webs.lock().unwrap()[i].clone(), urls[i].clone());
        let webs = &webs;
        async move {
            let mut r = web.get(format!("{url}/api/v1/topology")).timeout(Duration::from_secs(2)).send().await.ok()?;
            if r.status() == reqwest::StatusCode::UNAUTHORIZED {
                let web = console_api::login(&url).await.0;
                webs.lock().unwrap()[i] = web.clone();
                r = web.get(format!("{url}/api/v1/topology")).timeout(Duration::from_secs(2)).send().await.ok()?;
            }
            let t: serde_json::Value = r.json().await.ok()?;
            Some((t["coordinator"].as_str().map(str::to_string), !t["standby"].is_null()))
        }
    };
    // The console that coordinates (named by itself, not standing by), among `among`.
    let coordinator = |among: Vec<usize>| {
        let urls = urls.clone();
        let view = &view;
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                for &i in &among {
                    if let Some((Some(named), false)) = view(i).await {
                        if named == urls[i].trim_start_matches("http://") {
                            return i;
                        }
                    }
                }
                assert!(std::time::Instant::now() < deadline, "none of {among:?} coordinates");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let leader = coordinator(vec![0, 1, 2]).await;
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    eventually(30, "writes through the proxy", || redis::cmd("SET").arg("k").arg("1").query::<()>(&mut c).is_ok());
    let standby = (0..3).find(|i| *i != leader).unwrap();
    let added = an_engine_added_on_a_standby_is_started_by_the_appliance(&dir, &urls[standby], &mut c).await;
    let pid_of = |i: usize| {
        let port = (console_port + i as u16).to_string();
        let pids = pids_running(&["console", "--port", &port]);
        assert_eq!(pids.len(), 1, "one console process on {port}: {pids:?}");
        pids[0]
    };
    let signal = |pid: i32, sig: i32| {
        // SAFETY: kill(2) on a console process `terrace up` (our child) started.
        unsafe { libc::kill(pid, sig) };
    };
    // Paused: another console takes over.
    let paused = pid_of(leader);
    signal(paused, libc::SIGSTOP);
    let at = std::time::Instant::now();
    let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let next = coordinator(others).await;
    eprintln!("console {next} took over {:.2} s after console {leader} was paused", at.elapsed().as_secs_f64());
    eventually(30, "writes go on under the new coordinator", || redis::cmd("SET").arg("k").arg("2").query::<()>(&mut c).is_ok());
    // Resumed, the old coordinator stands by under the new one.
    signal(paused, libc::SIGCONT);
    let named = urls[next].trim_start_matches("http://").to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while view(leader).await != Some((Some(named.clone()), true)) {
        assert!(std::time::Instant::now() < deadline, "the resumed console does not stand by: {:?}", view(leader).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Killed: coordination resumes (the supervisor restarts it; any console may win).
    signal(pid_of(next), libc::SIGKILL);
    let at = std::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = coordinator(vec![0, 1, 2]).await;
    eprintln!("console {again} coordinates {:.2} s after console {next} was killed", at.elapsed().as_secs_f64());
    eventually(30, "writes go on", || redis::cmd("SET").arg("k").arg("3").query::<()>(&mut c).is_ok());
    // The added engine outlived the consoles' losses (it is the appliance's child, not a
    // console's) and the ten seconds after which a forking thread's end killed it once.
    loop {
        assert_eq!(added.0(), added.2, "the added engine died {:?} after it was added", added.1.elapsed());
        if added.1.elapsed() > Duration::from_secs(12) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut child = child;
    assert!(child.wait().unwrap().success());
}
