//! The console against real engines and a real proxy: its REST API (status codes, validation,
//! authentication, CSRF, tokens), tenants pushed so that Redis and Memcached clients can use
//! them, live configuration changes, and the reconcile loop bringing a tenant back after the
//! proxy and an engine restart.

mod common;

use common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// The value of the first `name="csrf" value="…"` in a page.
fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form with a CSRF token") + 19;
    html[at..].split('"').next().unwrap().to_string()
}

fn browser() -> reqwest::Client {
    reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Posts the login form (with the CSRF token of a fresh login page) as admin.
async fn post_login(c: &reqwest::Client, url: &str, password: &str) -> reqwest::Response {
    let page = c.get(format!("{url}/login")).send().await.unwrap().text().await.unwrap();
    c.post(format!("{url}/login")).form(&[("csrf", csrf_of(&page).as_str()), ("user", "admin"), ("password", password)]).send().await.unwrap()
}

/// Logs in through the login form; answers the client (holding the session cookie) and the
/// session's CSRF token.
async fn login(url: &str) -> (reqwest::Client, String) {
    let c = browser();
    let r = post_login(&c, url, CONSOLE_ADMIN_PASSWORD).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "login redirects to the overview");
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("terrace_session="))
        .expect("a session cookie");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let tokens = c.get(format!("{url}/tokens")).send().await.unwrap().text().await.unwrap();
    let csrf = csrf_of(&tokens);
    (c, csrf)
}

/// Creates an API token through the tokens page; answers it.
async fn token(c: &reqwest::Client, url: &str, csrf: &str, name: &str) -> String {
    let page = c.post(format!("{url}/tokens")).form(&[("csrf", csrf), ("name", name)]).send().await.unwrap().text().await.unwrap();
    let at = page.find("trc_").expect("the new token is shown once");
    page[at..].split('<').next().unwrap().to_string()
}

async fn api(method: reqwest::Method, url: String, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut r = reqwest::Client::new().request(method, url).bearer_auth(token);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let res = r.send().await.unwrap();
    let status = res.status();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}")))
}

fn redis_as(port: u16, user: &str, password: &str) -> Result<redis::Connection, redis::RedisError> {
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection()?;
    redis::cmd("AUTH").arg(user).arg(password).query::<()>(&mut con)?;
    Ok(con)
}

fn compression_setting(engine: &Engine, tenant: &str) -> Option<String> {
    let mut con = engine.client();
    let stats: String = redis::cmd("TERRACE.COMPRESSION").arg("STATS").arg(tenant).query(&mut con).ok()?;
    let v: Value = serde_json::from_str(&stats).ok()?;
    v["settings"]["compression"].as_str().map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_authenticates_validates_and_applies_tenants_live() {
    let (e1, e2) = (Engine::start(&[]), Engine::start(&[]));
    let proxy = Proxy::start_admin_on(0, &[&e1, &e2]);
    let console = Console::start(&[&e1, &e2], &[&proxy]);
    let url = console.url.clone();
    let api_url = |p: &str| format!("{url}/api/v1{p}");

    // Everything but the login page and static assets needs authentication.
    for path in ["/api/v1/tenants", "/api/v1/openapi.json", "/api/v1/nope"] {
        let r = reqwest::get(format!("{url}{path}")).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
        let body: Value = r.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("authentication required"), "{body}");
    }
    let page = browser().get(format!("{url}/tenants")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
    assert_eq!(page.headers()["location"], "/login");
    assert_eq!(reqwest::get(format!("{url}/static/console.css")).await.unwrap().status(), StatusCode::OK);
    let (status, body) = api(reqwest::Method::GET, api_url("/tenants"), "trc_bogus", None).await;
    assert_eq!((status, body["error"].as_str().unwrap()), (StatusCode::UNAUTHORIZED, "invalid or revoked API token"));

    let (session, csrf) = login(&url).await;
    // A form without the session's CSRF token is refused, and so is a cookie-authenticated
    // API write without X-CSRF-Token.
    let r = session.post(format!("{url}/tokens")).form(&[("csrf", "wrong"), ("name", "x")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = session.post(api_url("/tenants")).json(&json!({"name": "x"})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = session.get(api_url("/tenants")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "reads with the session cookie");
    let r = session.post(api_url("/tokens")).header("x-csrf-token", &csrf).json(&json!({"name": "via-session"})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED, "writes with the cookie and its CSRF token");

    let token = token(&session, &url, &csrf, "ci").await;
    let get = |p: &str| api(reqwest::Method::GET, api_url(p), &token, None);
    let (status, doc) = get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    for p in ["/tenants", "/tenants/{name}", "/tenants/{name}/retrain", "/tenants/{name}/advice", "/topology", "/tokens/{id}"] {
        assert!(doc["paths"].get(p).is_some(), "openapi lists {p}");
    }

    // Validation: clear 4xx with a JSON message.
    let post = |body: Value| api(reqwest::Method::POST, api_url("/tenants"), &token, Some(body));
    let (status, body) = post(json!({"name": "shop", "compression": "gzip"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"], "compression: 'gzip' is not one of none, zstd, zstd-dict, pattern, auto");
    // (`.` and `..` would name folders outside the engines' compression folder.)
    for name in ["bad name", ".", "..", "a/b"] {
        let (status, body) = post(json!({ "name": name })).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{name}: {body}");
        assert!(body["error"].as_str().unwrap().contains("is not a tenant name"), "{body}");
    }
    let (status, body) = post(json!({"name": "shop", "colour": "red"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["error"].as_str().unwrap().contains("unknown field `colour`"), "{body}");
    let r = reqwest::Client::new().post(api_url("/tenants")).bearer_auth(&token).header("content-type", "application/json").body("{nope").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.json::<Value>().await.unwrap()["error"].is_string());
    let (status, _) = get("/tenants/ghost").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Create: stored, pushed at once; a Redis client authenticates as the tenant through the
    // proxy and its data lands in the tenant's namespace with its compression settings.
    let mc_port = free_port();
    let (status, body) = post(json!({"name": "shop", "password": "s3cret", "compression": "zstd-dict", "max_memory": "64mb", "memcache_port": mc_port})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["applied"], true, "{body}");
    assert!(!body.to_string().contains("s3cret") && !body.to_string().contains("password_sha256"), "passwords are never shown back: {body}");
    let (status, body) = post(json!({"name": "shop"})).await;
    assert_eq!((status, body["error"].as_str().unwrap()), (StatusCode::CONFLICT, "tenant 'shop' already exists"));
    let mut con = redis_as(proxy.port, "shop", "s3cret").expect("the tenant authenticates through the proxy");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    assert_eq!(redis::cmd("GET").arg("k").query::<String>(&mut con).unwrap(), "v");
    let e = redis_as(proxy.port, "shop", "wrong").err().expect("a wrong password is refused");
    assert!(e.to_string().contains("WRONGPASS"), "{e}");
    assert_eq!(compression_setting(&e1, "shop").as_deref(), Some("zstd-dict"));
    assert_eq!(compression_setting(&e2, "shop").as_deref(), Some("zstd-dict"));
    // The tenant's own Memcached port opened on the running proxy.
    let mut mc = Raw::connect(mc_port);
    mc.send(b"set m 0 0 2\r\nhi\r\nget m\r\n");
    mc.expect(b"STORED\r\nVALUE m 0 2\r\nhi\r\nEND\r\n");

    // Update: applied live to the engines.
    let (status, body) = api(reqwest::Method::PATCH, api_url("/tenants/shop"), &token, Some(json!({"compression": "zstd", "max_qps": 1000}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((body["tenant"]["compression"].as_str(), body["tenant"]["max_qps"].as_u64()), (Some("zstd"), Some(1000)));
    assert_eq!(compression_setting(&e1, "shop").as_deref(), Some("zstd"));
    // A setting an engine cannot take is refused and nothing changes.
    let (status, body) =
        api(reqwest::Method::PATCH, api_url("/tenants/shop"), &token, Some(json!({"storage_mode": "write-back", "compression": "none"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let e = body["error"].as_str().unwrap();
    assert!(e.starts_with("not applied, nothing changed: engine 127.0.0.1:") && e.contains("this engine has no storage tier"), "{e}");
    let (_, body) = get("/tenants/shop").await;
    assert_eq!((body["tenant"]["storage_mode"].as_str(), body["tenant"]["compression"].as_str()), (Some("cache"), Some("zstd")));
    assert_eq!(compression_setting(&e1, "shop").as_deref(), Some("zstd"));
    let (status, body) = api(reqwest::Method::PATCH, api_url("/tenants/shop"), &token, Some(json!({"tier_policy": "dram-only"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "engines without a PMem tier refuse it: {body}");
    assert!(body["error"].as_str().unwrap().contains("this engine has no PMem tier"), "{body}");
    let (status, body) = api(reqwest::Method::PATCH, api_url("/tenants/shop"), &token, Some(json!({"wal": "off", "tier_policy": "engine"}))).await;
    assert_eq!((status, body["tenant"]["wal"].as_str()), (StatusCode::OK, Some("off")), "{body}");
    let (status, body) = api(reqwest::Method::PATCH, api_url("/tenants/shop"), &token, Some(json!({"name": "other"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, body) = get("/tenants/shop/stats").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["engines"].as_object().unwrap().len(), 2, "{body}");
    let (status, body) = get("/tenants/shop/advice").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["advise"]["advice"]["recommended"].is_string(), "{body}");
    let (status, body) = get("/tenants/shop/advice?engine=1").await;
    assert_eq!((status, body["engine"].as_str()), (StatusCode::OK, Some(format!("127.0.0.1:{}", e2.port).as_str())), "{body}");
    let (status, body) = get("/tenants/shop/advice?engine=7").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("no engine 7 (the slot map has 2)")));
    let (status, body) = get("/topology").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["slots"].as_array().unwrap().len(), 2, "{body}");
    assert_eq!(body["slots"][1]["first"], 8192);

    // Every operation the OpenAPI document lists is routed (none answers "no such route").
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys().filter(|m| *m != "parameters") {
            if method == "delete" {
                continue; // deleting is exercised below, on purpose
            }
            let p = path.replace("{name}", "shop").replace("{id}", "999");
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let body = (method != "get").then(|| json!({}));
            let (status, body) = api(m, api_url(&p), &token, body).await;
            assert_ne!(body["error"], "no such API route", "{method} {path}: {status}");
            assert!(status != StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        }
    }

    // Revoked tokens stop working.
    let (_, tokens) = get("/tokens").await;
    let id = tokens["tokens"].as_array().unwrap().iter().find(|t| t["name"] == "ci").unwrap()["id"].as_i64().unwrap();
    let (status, _) = api(reqwest::Method::DELETE, api_url(&format!("/tokens/{id}")), &token, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = get("/tenants").await;
    assert_eq!((status, body["error"].as_str().unwrap()), (StatusCode::UNAUTHORIZED, "invalid or revoked API token"));
    let token = self::token(&session, &url, &csrf, "second").await;

    // Delete: the proxy refuses the tenant, the engines drop its data.
    let (status, body) = api(reqwest::Method::DELETE, api_url("/tenants/shop"), &token, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["problems"], json!([]));
    assert!(redis_as(proxy.port, "shop", "s3cret").is_err());
    let mut raw = e1.client();
    let _: () = redis::cmd("TERRACE.NAMESPACE").arg("shop").query(&mut raw).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut raw).unwrap(), 0);
    let (status, _) = api(reqwest::Method::DELETE, api_url("/tenants/shop"), &token, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Failed logins are limited per address (last: it locks this address out for a minute).
    let c = browser();
    let mut statuses = Vec::new();
    for _ in 0..7 {
        let page = c.get(format!("{url}/login")).send().await.unwrap().text().await.unwrap();
        let r = c.post(format!("{url}/login")).form(&[("csrf", csrf_of(&page).as_str()), ("user", "admin"), ("password", "guess")]).send().await.unwrap();
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429]);
    drop(console);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_brings_a_tenant_back_after_the_proxy_and_an_engine_restart() {
    let (e1, mut e2) = (Engine::start(&[]), Engine::start(&[]));
    let proxy_port = free_port();
    let mut proxy = Proxy::start_admin_on(proxy_port, &[&e1, &e2]);
    let console = Console::start(&[&e1, &e2], &[&proxy]);
    let (session, csrf) = login(&console.url).await;
    // Through the pages this time: the form posts and redirects to the tenant's page.
    let r = session
        .post(format!("{}/tenants/new", console.url))
        .form(&[
            ("csrf", csrf.as_str()),
            ("name", "blog"),
            ("password", "pw1"),
            ("compression", "zstd"),
            ("compression_mode", "eager"),
            ("storage_mode", "cache"),
            ("max_memory", ""),
            ("max_qps", ""),
            ("memcache_port", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/tenants/blog");
    redis_as(proxy.port, "blog", "pw1").expect("pushed on create");

    // A new proxy process starts with no tenants; the console pushes them again.
    drop(proxy);
    proxy = Proxy::start_admin_on(proxy_port, &[&e1, &e2]);
    assert_eq!(proxy.port, proxy_port);
    eventually(10, "the restarted proxy knows the tenant", || redis_as(proxy_port, "blog", "pw1").is_ok());

    // A restarted engine (no persistence: an empty namespace list) gets the tenant's settings.
    let port = e2.port;
    let dir = e2.data_dir.clone();
    let _ = e2.child.kill();
    let _ = e2.child.wait();
    std::mem::forget(std::mem::replace(&mut e2, Engine::start_on(port, &dir)));
    eventually(10, "the restarted engine has the tenant's compression", || compression_setting(&e2, "blog").as_deref() == Some("zstd"));
    // And the tenant works end to end again on both engines' slots.
    let mut con = redis_as(proxy_port, "blog", "pw1").unwrap();
    for i in 0..50 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut con).unwrap();
    }
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap(), 50);
    // The overview shows both engines up and in sync.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let page = session.get(format!("{}/", console.url)).send().await.unwrap().text().await.unwrap();
        if page.matches(">in sync<").count() == 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the overview shows the three nodes in sync: {page}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[test]
fn the_proxy_takes_a_topology_only_from_its_admin() {
    let e = Engine::start(&[]);
    let plain = Proxy::start(&[&e], &[], &[]);
    let mut c = plain.raw();
    assert_eq!(c.cmd(&["TERRACE.TOPOLOGY", "GET"]), "-ERR admin commands are disabled (set the proxy's admin_password)\r\n");

    let proxy = Proxy::start_admin_on(0, &[&e]);
    let mut raw = proxy.raw();
    assert_eq!(raw.cmd(&["TERRACE.TOPOLOGY", "GET"]), "-NOPERM this command needs the admin user (AUTH admin <password>)\r\n");
    assert!(raw.cmd(&["AUTH", "admin", "wrong"]).starts_with("-WRONGPASS"));
    assert_eq!(raw.cmd(&["TERRACE.TOPOLOGY", "SET", "{nope"]).lines().next().unwrap(), "-NOPERM this command needs the admin user (AUTH admin <password>)");
    let mut c = proxy.client();
    let _: () = q(&mut c, &["AUTH", "admin", PROXY_ADMIN_PASSWORD]);
    let before: Value = serde_json::from_str(&q::<String>(&mut c, &["TERRACE.TOPOLOGY", "GET"])).unwrap();
    assert_eq!(before["digest"], Value::Null, "the configuration file's topology: {before}");
    assert!(err(&mut c, &["TERRACE.TOPOLOGY", "SET", "{nope"]).contains("invalid topology document"));
    assert!(err(&mut c, &["TERRACE.TOPOLOGY", "SET", r#"{"engines":["x"]}"#]).contains("invalid value for `engines`: 'x' is not host:port"));
    let bad_hash = json!({"engines": [format!("127.0.0.1:{}", e.port)], "tenants": [{"name": "t", "password_sha256": "abc"}]}).to_string();
    assert!(err(&mut c, &["TERRACE.TOPOLOGY", "SET", &bad_hash]).contains("password_sha256 of tenant 't' is not 64 hex digits"));
    let hash = {
        use std::fmt::Write;
        let digest = <sha2::Sha256 as sha2::Digest>::digest(b"pw");
        digest.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    };
    let doc = json!({"engines": [format!("127.0.0.1:{}", e.port)], "tenants": [{"name": "t", "password_sha256": hash, "compression": "zstd"}]}).to_string();
    let digest: String = q(&mut c, &["TERRACE.TOPOLOGY", "SET", &doc]);
    assert_eq!(digest.len(), 64);
    let after: Value = serde_json::from_str(&q::<String>(&mut c, &["TERRACE.TOPOLOGY", "GET"])).unwrap();
    assert_eq!(after["digest"], digest.as_str());
    assert_eq!(after["tenants"][0]["name"], "t");
    assert_eq!(after["tenants"][0]["has_password"], true);
    assert!(!after.to_string().contains(&hash), "the hash is not shown back: {after}");
    // The tenant authenticates with the password whose hash was pushed.
    let mut t = proxy.client();
    let _: () = q(&mut t, &["AUTH", "t", "pw"]);
    assert!(err(&mut t, &["AUTH", "t", "pw2"]).contains("WRONGPASS"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_changes_the_password_and_other_sessions_end() {
    let e = Engine::start(&[]);
    let proxy = Proxy::start_admin_on(0, &[&e]);
    let console = Console::start(&[&e], &[&proxy]);
    let url = console.url.clone();
    let (first, csrf) = login(&url).await;
    let (other, _) = login(&url).await;
    let change = |current: &str, new: &str, repeat: &str| {
        first.post(format!("{url}/account")).form(&[("csrf", csrf.as_str()), ("current", current), ("new", new), ("repeat", repeat)]).send()
    };
    assert_eq!(change(CONSOLE_ADMIN_PASSWORD, "short", "short").await.unwrap().status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(change(CONSOLE_ADMIN_PASSWORD, "new-password-1", "new-password-2").await.unwrap().status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(change("not-the-password", "new-password-1", "new-password-1").await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let r = change(CONSOLE_ADMIN_PASSWORD, "new-password-1", "new-password-1").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("Password changed"));
    // This session goes on; the other one ended; the old password no longer opens.
    assert_eq!(first.get(format!("{url}/tenants")).send().await.unwrap().status(), StatusCode::OK);
    assert_eq!(other.get(format!("{url}/tenants")).send().await.unwrap().status(), StatusCode::SEE_OTHER);
    let c = browser();
    let r = post_login(&c, &url, CONSOLE_ADMIN_PASSWORD).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let page = c.get(format!("{url}/login")).send().await.unwrap().text().await.unwrap();
    let r = c.post(format!("{url}/login")).form(&[("csrf", csrf_of(&page).as_str()), ("user", "admin"), ("password", "new-password-1")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}
