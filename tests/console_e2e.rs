//! The console against real engines and a real proxy: its REST API (status codes, validation,
//! authentication, CSRF, tokens), tenants pushed so that Redis and Memcached clients can use
//! them, live configuration changes, and the reconcile loop bringing a tenant back after the
//! proxy and an engine restart.

mod common;

use common::console_api::*;
use common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

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
    assert_eq!((status, body["error"].as_str().unwrap()), (StatusCode::UNAUTHORIZED, "invalid, revoked or expired API token"));

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
    for p in
        ["/tenants", "/tenants/{name}", "/tenants/{name}/retrain", "/tenants/{name}/advice", "/topology", "/tokens/{id}", "/engines", "/moves", "/rebalance"]
    {
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
    let (status, body) = post(json!({"name": "shop", "password": "other"})).await;
    assert_eq!((status, body["error"].as_str().unwrap()), (StatusCode::CONFLICT, "tenant 'shop' already exists"));
    // A tenant without a password would take any password: refused, on create and update.
    for body in [json!({"name": "open"}), json!({"name": "open", "password": ""})] {
        let (status, body) = post(body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert!(body["error"].as_str().unwrap().starts_with("password: a tenant needs a password"), "{body}");
    }
    let (status, body) = api(reqwest::Method::PATCH, api_url("/tenants/shop"), &token, Some(json!({"password": ""}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
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
    // The advisor costs the whole tenant: every engine's share of its keys summed (it used
    // to cost the first engine's share as the tenant's).
    for i in 0..200 {
        let _: () = redis::cmd("SET").arg(format!("advised:{i}")).arg("x".repeat(100)).query(&mut con).unwrap();
    }
    let keys_of = |e: &Engine| -> u64 {
        let w: String = redis::cmd("TERRACE.WORKLOAD").arg("shop").query(&mut e.client()).unwrap();
        serde_json::from_str::<Value>(&w).unwrap()["keys"].as_u64().unwrap()
    };
    let (k1, k2) = (keys_of(&e1), keys_of(&e2));
    assert!(k1 > 0 && k2 > 0, "both engines hold some: {k1} {k2}");
    let (status, body) = get("/tenants/shop/advice").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["advise"]["advice"]["recommended"].is_string(), "{body}");
    assert_eq!(body["workload"]["keys"].as_f64(), Some((k1 + k2) as f64), "{body}");
    assert_eq!(body["advise"]["live"]["keys"].as_f64(), Some((k1 + k2) as f64), "{body}");
    assert_eq!(body["advise"]["workload_of"], "every engine");
    assert!(body["engine"].as_str().unwrap().starts_with("all 2 engines"), "{body}");
    let (status, body) = get("/tenants/shop/advice?engine=1").await;
    assert_eq!((status, body["engine"].as_str()), (StatusCode::OK, Some(format!("127.0.0.1:{}", e2.port).as_str())), "{body}");
    assert_eq!(body["advise"]["live"]["keys"].as_f64(), Some(k2 as f64), "one engine's share: {body}");
    let (status, body) = get("/tenants/shop/advice?engine=7").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("no engine 7 (the slot map has 2)")));
    // Apply takes the configuration chosen by name; the engines (no PMem, no storage tier)
    // cannot run some, which are listed with the reason and never recommended.
    let (_, body) = get("/tenants/shop/advice").await;
    let options = body["advise"]["advice"]["options"].as_array().unwrap().clone();
    let recommended = body["advise"]["advice"]["recommended"].as_str().unwrap().to_string();
    for o in &options {
        let tiered = o["setup"]["pmem"] == true || o["setup"]["storage_mode"].as_str().is_some_and(|m| m != "cache");
        assert_eq!(o["cannot_run"].is_string(), tiered, "{o}");
        assert!(!(tiered && o["name"] == recommended.as_str()), "recommended what the engines cannot run: {body}");
    }
    let apply = |option: Value| api(reqwest::Method::POST, api_url("/tenants/shop/apply"), &token, Some(option));
    let (status, body) = apply(json!({"option": "nothing-like-it"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["error"].as_str().unwrap().contains("lists no configuration 'nothing-like-it'"), "{body}");
    if let Some(o) = options.iter().find(|o| o["cannot_run"].is_string()) {
        let (status, body) = apply(json!({"option": o["name"]})).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body["error"].as_str().unwrap().contains("cannot run here"), "{body}");
    }
    let (status, body) = apply(json!({"option": "raw"})).await;
    assert_eq!((status, body["applied_recommendation"].as_str()), (StatusCode::OK, Some("raw")), "{body}");
    assert_eq!(body["tenant"]["compression"], "none", "the chosen configuration, not the recommended one: {body}");
    let (status, body) = apply(json!({"option": "raw"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "already today's: {body}");
    let (status, body) = api(reqwest::Method::PATCH, api_url("/tenants/shop"), &token, Some(json!({"compression": "zstd-dict"}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
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

    // Path, query and method errors are JSON too, in words (no Rust type names).
    let (status, body) = api(reqwest::Method::DELETE, api_url("/tokens/abc"), &token, None).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("path: 'abc' is not a whole number")), "{body}");
    let (status, body) = get("/tenants/shop/advice?engine=first").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().unwrap().starts_with("query: engine: "), "{body}");
    let (status, body) = api(reqwest::Method::PUT, api_url("/tenants"), &token, Some(json!({}))).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert_eq!(body["error"], "PUT is not an operation of /api/v1/tenants (the OpenAPI document lists those there are)");
    let (status, body) = post(json!({"name": "typed", "password": "pw", "max_qps": "many"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let message = body["error"].as_str().unwrap();
    assert!(!["u64", "i64", "usize", "struct", "Option<"].iter().any(|t| message.contains(t)), "{message}");

    // Revoked tokens stop working.
    let (_, tokens) = get("/tokens").await;
    let id = tokens["tokens"].as_array().unwrap().iter().find(|t| t["name"] == "ci").unwrap()["id"].as_i64().unwrap();
    let (status, _) = api(reqwest::Method::DELETE, api_url(&format!("/tokens/{id}")), &token, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = get("/tenants").await;
    assert_eq!((status, body["error"].as_str().unwrap()), (StatusCode::UNAUTHORIZED, "invalid, revoked or expired API token"));
    let token = self::token(&session, &url, &csrf, "second").await;

    // Delete: the proxy refuses the tenant, the engines drop its data.
    let (status, body) = api(reqwest::Method::DELETE, api_url("/tenants/shop"), &token, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["problems"], json!([]));
    assert!(redis_as(proxy.port, "shop", "s3cret").is_err());
    for e in [&e1, &e2] {
        let held: Vec<String> = redis::cmd("TERRACE.NAMESPACES").query(&mut e.client()).unwrap();
        assert!(!held.contains(&"shop".to_string()), "the engines dropped its namespace: {held:?}");
    }
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

    // Deleting from the page takes the tenant's name typed as confirmation.
    let delete = |confirm: &'static str| {
        let (session, csrf, url) = (session.clone(), csrf.clone(), console.url.clone());
        async move { session.post(format!("{url}/tenants/blog/delete")).form(&[("csrf", csrf.as_str()), ("confirm", confirm)]).send().await.unwrap() }
    };
    for wrong in ["", "blo", "other"] {
        let r = delete(wrong).await;
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "confirm {wrong:?}");
        assert!(r.text().await.unwrap().contains("type its name in the confirmation field"));
    }
    assert!(redis_as(proxy_port, "blog", "pw1").is_ok(), "still there");
    let r = delete("blog").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/tenants");
    eventually(10, "the proxy no longer knows the tenant", || redis_as(proxy_port, "blog", "pw1").is_err());

    // A form with one bad field comes back with what was typed (never the password).
    let r = session
        .post(format!("{}/tenants/new", console.url))
        .form(&[
            ("csrf", csrf.as_str()),
            ("name", "kept"),
            ("password", "secret-pw"),
            ("compression", "zstd"),
            ("compression_mode", "lazy"),
            ("storage_mode", "cache"),
            ("max_memory", "lots"),
            ("max_qps", "77"),
            ("memcache_port", ""),
            ("replica_reads", "1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = r.text().await.unwrap();
    assert!(page.contains("max_memory: &#39;lots&#39; is not a size"), "{page}");
    for kept in [r#"value="kept""#, r#"value="77""#, r#"<option value="zstd" selected>"#, r#"<option value="lazy" selected>"#, r#"value="1" checked"#] {
        assert!(page.contains(kept), "{kept} in {page}");
    }
    assert!(!page.contains("secret-pw"), "the password is not sent back");
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

/// Keys (hash tags) on each of two engines, found by writing through the proxy.
fn tags_per_engine(proxy_port: u16, first: &Engine, n: usize) -> [Vec<String>; 2] {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{proxy_port}/")).unwrap().get_connection().unwrap();
    let mut direct = first.client();
    let mut tags: [Vec<String>; 2] = Default::default();
    let mut i = 0;
    while tags.iter().any(|t| t.len() < n) {
        let tag = format!("t{i}");
        let _: () = redis::cmd("SET").arg(format!("{{{tag}}}")).arg(1).query(&mut c).unwrap();
        let on_first: i64 = redis::cmd("EXISTS").arg(format!("{{{tag}}}")).query(&mut direct).unwrap();
        tags[usize::from(on_first == 0)].push(tag);
        i += 1;
    }
    tags
}

fn role_of(e: &Engine) -> (String, String) {
    let text: String = redis::cmd("INFO").arg("replication").query(&mut e.client()).unwrap();
    let field = |f: &str| text.lines().find_map(|l| l.strip_prefix(f).and_then(|r| r.strip_prefix(':'))).unwrap_or("").trim().to_string();
    (field("role"), field("master_link_status"))
}

/// What each writer of `start_writers` answers: the writes a WAIT acknowledged, and the
/// failures of writes to the second engine's slots.
type Written = (Vec<(String, usize)>, Vec<String>);

/// `count` writers through the proxy on `port` until `stop`: each SETs new keys on both
/// engines' slots in turn (`tags`) and sends `WAIT 1 200` after each.
fn start_writers(
    count: usize,
    tags: &[Vec<String>; 2],
    port: u16,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<Written>> {
    (0..count)
        .map(|w| {
            let (stop, tags) = (stop.clone(), tags.clone());
            std::thread::spawn(move || {
                let connect = || redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
                let mut c = connect();
                let (mut acked, mut other_failures, mut n) = (Vec::new(), Vec::new(), 0usize);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let engine = n % 2;
                    let key = format!("{{{}}}:w{w}:{n}", tags[engine][(n / 2) % tags[engine].len()]);
                    match redis::cmd("SET").arg(&key).arg(n).query::<()>(&mut c) {
                        Ok(()) => {
                            if matches!(redis::cmd("WAIT").arg(1).arg(200).query::<i64>(&mut c), Ok(1)) {
                                acked.push((key, n));
                            }
                        }
                        Err(e) => {
                            if engine == 1 {
                                other_failures.push(e.to_string());
                            }
                            if e.is_connection_dropped() || e.is_io_error() {
                                c = connect();
                            }
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                    }
                }
                (acked, other_failures)
            })
        })
        .collect()
}

/// Stops and joins the writers: no write to the second engine's slots failed, and every
/// write a WAIT acknowledged reads back through the proxy. Answers those writes.
fn check_writers(writers: Vec<std::thread::JoinHandle<Written>>, stop: &std::sync::atomic::AtomicBool, port: u16) -> Vec<(String, usize)> {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked = Vec::new();
    for w in writers {
        let (a, other_failures) = w.join().unwrap();
        assert!(other_failures.is_empty(), "the other engine's slots never fail: {other_failures:?}");
        acked.extend(a);
    }
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    for (key, n) in &acked {
        let v: Option<usize> = redis::cmd("GET").arg(key).query(&mut c).unwrap();
        assert_eq!(v, Some(*n), "acknowledged write {key} lost");
    }
    acked
}

/// Kills `dead`'s process and waits until a write to the first engine's slots (`tag`)
/// succeeds through the proxy again: how long that took (at most 10 s).
fn kill_and_time_the_way_back(dead: &mut Engine, probe: &mut redis::Connection, tag: &str) -> std::time::Duration {
    let _ = dead.child.kill();
    let _ = dead.child.wait();
    let killed = std::time::Instant::now();
    while redis::cmd("SET").arg(format!("{{{tag}}}:probe")).arg(1).query::<()>(probe).is_err() {
        assert!(killed.elapsed() < std::time::Duration::from_secs(10), "writes not back within 10 s of the kill");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    killed.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_replaced_by_its_replica_and_rejoins_as_one() {
    let (mut e0, e1) = (Engine::start(&[]), Engine::start(&[]));
    let (r0, r1) = (Engine::start(&[]), Engine::start(&[]));
    let proxy = Proxy::start_admin_on(free_port(), &[&e0, &e1]);
    let replicas = format!("127.0.0.1:{},127.0.0.1:{}", r0.port, r1.port);
    let console = Console::start_with(&[&e0, &e1], &[&proxy], &["--replicas", &replicas, "--health-ms", "200", "--failover-after-ms", "1000"]);
    eventually(20, "the console points each replica at its primary", || {
        role_of(&r0) == ("slave".into(), "up".into()) && role_of(&r1) == ("slave".into(), "up".into())
    });
    // The proxy is given the replicas in sync (for tenants' replica_reads) and the proxies
    // (its cluster view).
    let mut admin = redis::Client::open(format!("redis://admin:{}@127.0.0.1:{}/", common::PROXY_ADMIN_PASSWORD, proxy.port)).unwrap().get_connection().unwrap();
    let want_replicas = serde_json::json!([[format!("127.0.0.1:{}", r0.port)], [format!("127.0.0.1:{}", r1.port)]]);
    eventually(20, "the proxy lists the replicas", || {
        let doc: serde_json::Value = serde_json::from_str(&q::<String>(&mut admin, &["TERRACE.TOPOLOGY", "GET"])).unwrap();
        doc["replicas"] == want_replicas && doc["proxies"] == serde_json::json!([format!("127.0.0.1:{}", proxy.port)])
    });
    let tags = tags_per_engine(proxy.port, &e0, 8);

    // Writers through the proxy, each write acknowledged by WAIT 1 200 or not.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers = start_writers(8, &tags, proxy.port, &stop);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let dead_port = e0.port;
    let mut probe = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    kill_and_time_the_way_back(&mut e0, &mut probe, &tags[0][0]);
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let acked = check_writers(writers, &stop, proxy.port);
    assert!(acked.len() > 100, "writes were acknowledged ({})", acked.len());
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    assert_eq!(role_of(&r0).0, "master", "the replica was promoted");

    // The console shows the new map and what it did.
    let (session, csrf) = login(&console.url).await;
    let token = token(&session, &console.url, &csrf, "failover-test").await;
    let (status, topology) = api(reqwest::Method::GET, format!("{}/api/v1/topology", console.url), &token, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(topology["engines"][0], format!("127.0.0.1:{}", r0.port));
    assert!(topology["replicas"].as_array().unwrap().iter().any(|r| r["address"] == format!("127.0.0.1:{dead_port}") && r["engine"] == 0));
    assert!(topology["events"].as_array().unwrap().iter().any(|e| e["kind"] == "failover"), "{topology}");
    let page = session.get(format!("{}/topology", console.url)).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Fail over now") && page.contains("promoted"), "{page}");

    // The old primary comes back empty on its address: it becomes a replica of the new one
    // and never serves the slots.
    let back = Engine::start_on(dead_port, &temp_dir("engine"));
    eventually(20, "the old primary rejoins as a replica", || role_of(&back) == ("slave".into(), "up".into()));
    for (key, n) in acked.iter().take(200) {
        let v: Option<usize> = redis::cmd("GET").arg(key).query(&mut c).unwrap();
        assert_eq!(v, Some(*n));
    }
    let (dbsize_new, dbsize_back): (i64, i64) =
        (redis::cmd("DBSIZE").query(&mut r0.client()).unwrap(), redis::cmd("DBSIZE").query(&mut back.client()).unwrap());
    assert_eq!(dbsize_back, dbsize_new, "it resynchronized from the new primary");

    // Roles, offsets and lag as the coordinator sees them; then a planned failover of the
    // other engine through the API.
    let mut seen = Value::Null;
    for _ in 0..50 {
        seen = api(reqwest::Method::GET, format!("{}/api/v1/topology", console.url), &token, None).await.1;
        let members = seen["members"].as_array().cloned().unwrap_or_default();
        if members.len() == 4 && members.iter().all(|m| m["up"] == true && (m["role"] == "primary" || m["linked"] == true)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let members = seen["members"].as_array().unwrap();
    assert_eq!(members.len(), 4, "{seen}");
    assert!(members.iter().all(|m| m["up"] == true && (m["role"] == "primary" || (m["linked"] == true && m["lag"].is_i64()))), "{seen}");
    let (status, body) = api(reqwest::Method::POST, format!("{}/api/v1/topology/failover", console.url), &token, Some(json!({ "engine": 1 }))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["primary"], format!("127.0.0.1:{}", r1.port));
    let (status, _) = api(reqwest::Method::POST, format!("{}/api/v1/topology/failover", console.url), &token, Some(json!({ "engine": 7 }))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    eventually(20, "writes to engine 1's slots go to its new primary", || {
        redis::cmd("SET").arg(format!("{{{}}}:after-planned", tags[1][0])).arg(1).query::<()>(&mut c).is_ok()
            && redis::cmd("EXISTS").arg(format!("{{{}}}:after-planned", tags[1][0])).query::<i64>(&mut r1.client()).unwrap_or(0) == 1
    });
    eventually(20, "the old primary of engine 1 follows the new one", || role_of(&e1) == ("slave".into(), "up".into()));
    drop(console);
}

/// Ten rounds: sixteen writers through the proxy with `WAIT 1 200` after each write, and the
/// primary of one engine killed with SIGKILL each round (its replica takes over; the killed
/// one comes back empty on its port and becomes the replica of the next round). No write a
/// WAIT acknowledged is lost, the other engine's slots never fail, and writes to the killed
/// primary's slots succeed again within 10 s every round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_kills_of_a_primary_lose_no_acknowledged_write() {
    use std::collections::HashMap;
    use std::sync::atomic::AtomicBool;
    let (a, e1, b, r1) = (Engine::start(&[]), Engine::start(&[]), Engine::start(&[]), Engine::start(&[]));
    let proxy = Proxy::start_admin_on(free_port(), &[&a, &e1]);
    let replicas = format!("127.0.0.1:{},127.0.0.1:{}", b.port, r1.port);
    let console = Console::start_with(&[&a, &e1], &[&proxy], &["--replicas", &replicas, "--health-ms", "200", "--failover-after-ms", "1000"]);
    eventually(20, "the replicas follow", || role_of(&b) == ("slave".into(), "up".into()) && role_of(&r1) == ("slave".into(), "up".into()));
    let tags = tags_per_engine(proxy.port, &a, 16);
    let (mut primary, mut replica) = (a.port, b.port);
    let mut pair: HashMap<u16, Engine> = HashMap::from([(a.port, a), (b.port, b)]);

    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let writers = start_writers(16, &tags, proxy.port, &stop);
    let mut probe = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    let mut recoveries = Vec::new();
    for _ in 0..10 {
        eventually(30, "the replica is linked", || role_of(&pair[&replica]) == ("slave".into(), "up".into()));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut dead = pair.remove(&primary).unwrap();
        recoveries.push(kill_and_time_the_way_back(&mut dead, &mut probe, &tags[0][0]));
        pair.insert(primary, Engine::start_on(primary, &temp_dir("engine")));
        std::mem::swap(&mut primary, &mut replica);
    }
    let acked = check_writers(writers, &stop, proxy.port);
    assert!(acked.len() > 500, "writes were acknowledged ({})", acked.len());
    eprintln!("writes back after each kill: {recoveries:?}");
    drop(console);
}

/// Planned failovers back and forth while the coordinator checks every 50 ms: each leaves one
/// primary and one replica following it, and writes go on. (A coordinator round that read
/// the roles before a promotion used to point the promoted replica back at its old primary,
/// and the two then followed each other: no primary, writes refused.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_failovers_never_leave_two_replicas_following_each_other() {
    let (a, b) = (Engine::start(&[]), Engine::start(&[]));
    let proxy = Proxy::start_admin_on(free_port(), &[&a]);
    let console = Console::start_with(&[&a], &[&proxy], &["--replicas", &format!("127.0.0.1:{}", b.port), "--health-ms", "50", "--failover-after-ms", "5000"]);
    eventually(20, "the replica follows", || role_of(&b) == ("slave".into(), "up".into()));
    let (session, csrf) = login(&console.url).await;
    let token = token(&session, &console.url, &csrf, "planned").await;
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    let by_port = |p: u16| if p == a.port { &a } else { &b };
    for round in 0..8 {
        let (status, body) = api(reqwest::Method::POST, format!("{}/api/v1/topology/failover", console.url), &token, Some(json!({ "engine": 0 }))).await;
        assert_eq!(status, StatusCode::OK, "round {round}: {body}");
        let primary: u16 = body["primary"].as_str().unwrap().rsplit(':').next().unwrap().parse().unwrap();
        let replica = if primary == a.port { b.port } else { a.port };
        eventually(20, &format!("round {round}: writes go to the new primary"), || {
            redis::cmd("SET").arg("k").arg(round).query::<()>(&mut c).is_ok()
                && redis::cmd("GET").arg("k").query::<Option<i64>>(&mut by_port(primary).client()).ok().flatten() == Some(round)
        });
        eventually(20, &format!("round {round}: the old primary follows the new one"), || role_of(by_port(replica)) == ("slave".into(), "up".into()));
        assert_eq!(role_of(by_port(primary)).0, "master", "round {round}");
    }
}

/// Deleting a tenant frees its namespace on every engine: with room for two tenants, tenants
/// created and deleted over and over are never refused (before: "this engine holds at most N
/// namespaces" once N had been created, until the engines restarted). An engine that was down
/// during a delete drops the namespace when the console next pushes to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_tenants_frees_their_namespaces_even_on_an_engine_that_was_down() {
    let dirs = [temp_dir("console-ns-1"), temp_dir("console-ns-2")];
    let cfg = dirs[0].join("engine.toml");
    std::fs::write(&cfg, "[engine]\nnamespaces = 3\n").unwrap();
    let flags = ["--config", cfg.to_str().unwrap(), "--wal", "always"];
    let e1 = Engine::start_on_with(0, &dirs[0], &flags);
    let mut e2 = Engine::start_on_with(0, &dirs[1], &flags);
    let proxy = Proxy::start_admin_on(0, &[&e1, &e2]);
    let console = Console::start(&[&e1, &e2], &[&proxy]);
    let url = console.url.clone();
    let api_url = |p: &str| format!("{url}/api/v1{p}");
    let (session, csrf) = login(&url).await;
    let token = token(&session, &url, &csrf, "ns").await;
    let create = |name: String| {
        let (url, token) = (api_url("/tenants"), token.clone());
        async move { api(reqwest::Method::POST, url, &token, Some(json!({"name": name, "password": "pw"}))).await }
    };
    let delete = |name: String| {
        let (url, token) = (api_url(&format!("/tenants/{name}")), token.clone());
        async move { api(reqwest::Method::DELETE, url, &token, None).await }
    };
    let held = |e: &Engine| redis::cmd("TERRACE.NAMESPACES").query::<Vec<String>>(&mut e.client()).unwrap();
    let (status, body) = create("stays".into()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    for round in 0..4 {
        let name = format!("t{round}");
        let (status, body) = create(name.clone()).await;
        assert_eq!(status, StatusCode::CREATED, "round {round}: {body}; held {:?} {:?}", held(&e1), held(&e2));
        assert!(body["problems"].as_array().is_none_or(Vec::is_empty), "round {round}: every engine took it: {body}");
        let mut c = redis_as(proxy.port, &name, "pw").unwrap();
        let _: () = redis::cmd("SET").arg("k").arg(&name).query(&mut c).unwrap();
        let (status, body) = delete(name.clone()).await;
        assert_eq!((status, &body["problems"]), (StatusCode::OK, &json!([])), "round {round}: {body}");
        assert!(redis::cmd("GET").arg("k").query::<Option<String>>(&mut c).is_err(), "round {round}: the deleted tenant's client is disconnected");
        for e in [&e1, &e2] {
            assert_eq!(held(e), ["stays"], "round {round}");
        }
    }

    // An engine down during the delete.
    let (status, _) = create("late".into()).await;
    assert_eq!(status, StatusCode::CREATED);
    eventually(20, "both engines hold 'late'", || [&e1, &e2].iter().all(|e| held(e).contains(&"late".to_string())));
    let port2 = e2.port;
    e2.stop();
    let (status, body) = delete("late".into()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["problems"].to_string().contains("not dropped"), "the engine that is down is named: {body}");
    assert_eq!(held(&e1), ["stays"]);
    let e2 = Engine::start_on_with(port2, &dirs[1], &flags);
    assert!(held(&e2).contains(&"late".to_string()), "it kept the namespace through its restart (WAL)");
    eventually(30, "the restarted engine dropped the deleted tenant's namespace", || held(&e2) == ["stays"]);
    drop(console);
}

/// The Overview says what of each engine's data survives a restart (from its WAL mode, save
/// points and last snapshot), and "Snapshot now" makes every engine save.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_says_what_survives_a_restart_and_snapshots_on_demand() {
    let (plain, saving) = (Engine::start(&[]), Engine::start(&["--save", "3600 1"]));
    let proxy = Proxy::start_admin_on(0, &[&plain, &saving]);
    let console = Console::start(&[&plain, &saving], &[&proxy]);
    let url = console.url.clone();
    let (session, csrf) = login(&url).await;
    let token = token(&session, &url, &csrf, "durability").await;
    let nodes = || api(reqwest::Method::GET, format!("{url}/api/v1/nodes"), &token, None);
    let durability = |body: &Value, port: u16| -> String {
        let e = body["engines"].as_array().unwrap().iter().find(|e| e["address"].as_str().unwrap().ends_with(&format!(":{port}"))).unwrap();
        e["durability"].as_str().unwrap_or("").to_string()
    };
    let mut body = Value::Null;
    for _ in 0..100 {
        body = nodes().await.1;
        if !durability(&body, plain.port).is_empty() && !durability(&body, saving.port).is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(durability(&body, plain.port), "nothing newer than a snapshot from before it started, if any (no WAL, no save points)");
    assert!(
        durability(&body, saving.port).starts_with("the newest state after a clean stop; after a crash, the last snapshot (save points \"3600 1\")"),
        "{body}"
    );
    let page = session.get(format!("{url}/")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("What survives a restart") && page.contains("nothing newer than a snapshot"), "{page}");

    let r = session.post(format!("{url}/snapshot")).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "back to the Overview");
    for e in [&plain, &saving] {
        eventually(20, "the engine saved", || info_field(&mut e.client(), "persistence", "rdb_saves") > 0);
    }
    let mut line = String::new();
    for _ in 0..100 {
        line = durability(&nodes().await.1, plain.port);
        if line.contains("last snapshot") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(line.starts_with("the last snapshot only (no save points, no WAL); last snapshot"), "{line}");
    let (status, body) = api(reqwest::Method::POST, format!("{url}/api/v1/snapshot"), &token, None).await;
    assert!(status == StatusCode::ACCEPTED || body.to_string().contains("already in progress"), "{status} {body}");
    assert_eq!(body["engines"].as_object().unwrap().len(), 2, "{body}");
    drop(console);
}

/// Schemathesis-like, against the OpenAPI document with a token: every operation it lists,
/// called over and over with generated path parameters, query strings and bodies (mostly
/// valid, some of the wrong type, out of an enum or with an unknown field), answers JSON with
/// a status the document lists for it — never an undocumented 5xx — and a body matching that
/// status's schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_answers_as_its_openapi_document_says() {
    let (e1, e2) = (Engine::start(&[]), Engine::start(&[]));
    let proxy = Proxy::start_admin_on(0, &[&e1, &e2]);
    let console = Console::start(&[&e1, &e2], &[&proxy]);
    let url = console.url.clone();
    let (session, csrf) = login(&url).await;
    let token = token(&session, &url, &csrf, "property").await;
    let api_url = |p: &str| format!("{url}/api/v1{p}");
    let (_, doc) = api(reqwest::Method::GET, api_url("/openapi.json"), &token, None).await;
    let (_, spare) = api(reqwest::Method::POST, api_url("/tokens"), &token, Some(json!({"name": "spare"}))).await;
    let spare_id = spare["id"].to_string();
    let names = ["shop", "nobody", "a%20b", "%F0%9F%98%80", "%2E%2E", &"x".repeat(80)];
    let ids = [spare_id.as_str(), "999999", "-1", "abc", "0"];
    let e1_addr = format!("127.0.0.1:{}", e1.port);
    let addresses = [e1_addr.as_str(), "127.0.0.1:1", "nope"];
    let mut rng = fastrand::Rng::with_seed(29);
    let mut calls = 0;
    let mut statuses = std::collections::BTreeSet::new();
    for round in 0..10 {
        // A tenant the generated requests find (it may have been deleted or changed by one).
        let _ = api(reqwest::Method::POST, api_url("/tenants"), &token, Some(json!({"name": "shop", "password": "pw"}))).await;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap().iter().filter(|(m, _)| *m != "parameters") {
                let mut p = path.replace("{name}", names[rng.usize(0..names.len())]);
                p = p.replace("{id}", ids[rng.usize(0..ids.len())]).replace("{address}", addresses[rng.usize(0..addresses.len())]);
                let mut query: Vec<String> = Vec::new();
                for q in op["parameters"].as_array().into_iter().flatten().filter(|q| q["in"] == "query") {
                    if rng.bool() {
                        let v = generate(&q["schema"], &doc, &mut rng);
                        let text = v.as_str().map(str::to_string).unwrap_or(v.to_string());
                        query.push(format!("{}={}", q["name"].as_str().unwrap(), text.replace(' ', "%20").replace('#', "%23").replace('&', "%26")));
                    }
                }
                if !query.is_empty() {
                    p = format!("{p}?{}", query.join("&"));
                }
                let body = op["requestBody"]["content"]["application/json"]["schema"]
                    .is_object()
                    .then(|| generate(&op["requestBody"]["content"]["application/json"]["schema"], &doc, &mut rng));
                let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let (status, answer) = api(m, api_url(&p), &token, body.clone()).await;
                calls += 1;
                statuses.insert(status.as_u16());
                let what = format!("round {round}: {} {p} with {body:?} answered {status}: {answer}", method.to_uppercase());
                let documented = &op["responses"][status.as_str()];
                assert!(documented.is_object(), "{what} — a status the document does not list");
                assert!(status != StatusCode::INTERNAL_SERVER_ERROR, "{what}");
                let documented = match documented["$ref"].as_str() {
                    Some(r) => r.trim_start_matches("#/").split('/').fold(&doc, |v, k| &v[k]),
                    None => documented,
                };
                conforms(&answer, &documented["content"]["application/json"]["schema"], &doc, "body").unwrap_or_else(|e| panic!("{what}: {e}"));
            }
        }
    }
    assert!(calls > 250, "{calls} calls");
    assert!(statuses.iter().any(|s| *s < 300) && statuses.contains(&422) && statuses.contains(&404), "a mix of answers: {statuses:?}");
    drop(console);
}

/// The history: sampled every `sample_ms` into the console's database, each tenant over every
/// engine and proxy (operations by command class, hit ratio, the proxies' latency
/// percentiles, memory against its quota) and each node (operations, hit ratio, memory,
/// latency at a proxy), served as JSON and charted on the tenant's and the node's pages with
/// time ticks the page's script writes in local time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_samples_every_node_and_tenant_and_charts_them() {
    let (e1, e2) = (Engine::start(&[]), Engine::start(&[]));
    let proxy = Proxy::start_admin_on(0, &[&e1, &e2]);
    let console = Console::start_with(&[&e1, &e2], &[&proxy], &["--sample-ms", "1000"]);
    let url = console.url.clone();
    let (session, csrf) = login(&url).await;
    let token = token(&session, &url, &csrf, "history").await;
    let api_url = |p: &str| format!("{url}/api/v1{p}");
    let (status, body) = api(reqwest::Method::POST, api_url("/tenants"), &token, Some(json!({"name": "shop", "password": "pw", "max_memory": "10mb"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut c = redis_as(proxy.port, "shop", "pw").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen: Option<Value> = None;
    let mut i = 0u64;
    while std::time::Instant::now() < deadline {
        // Strings (hits and misses) and hashes, between samples.
        for _ in 0..50 {
            i += 1;
            let _: () = redis::cmd("SET").arg(format!("k{i}")).arg("v").query(&mut c).unwrap();
            let _: Option<String> = redis::cmd("GET").arg(format!("k{}", i / 2)).query(&mut c).unwrap();
            let _: Option<String> = redis::cmd("GET").arg(format!("missing{i}")).query(&mut c).unwrap();
            let _: i64 = redis::cmd("HSET").arg("h").arg(i).arg(i).query(&mut c).unwrap();
        }
        let (_, h) = api(reqwest::Method::GET, api_url("/tenants/shop/history?hours=1"), &token, None).await;
        let good = h["samples"].as_array().unwrap().iter().find(|s| {
            s["ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0
                && s["by_class"]["string"].as_f64().unwrap_or(0.0) > 0.0
                && s["by_class"]["hash"].as_f64().unwrap_or(0.0) > 0.0
                && s["hit_ratio"].as_f64().is_some_and(|r| r > 0.2 && r < 0.9)
                && s["p99_us"].as_f64().unwrap_or(0.0) > 0.0
        });
        if let Some(s) = good {
            seen = Some(s.clone());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let sample = seen.expect("a tenant sample with operations by class, a hit ratio and latency within 30 s");
    assert!(sample["used_bytes"].as_f64().unwrap() > 0.0, "{sample}");
    assert_eq!(sample["quota_bytes"].as_f64(), Some(10.0 * 1024.0 * 1024.0), "{sample}");
    assert!(sample["p50_us"].as_f64().unwrap() <= sample["p99_us"].as_f64().unwrap(), "{sample}");

    let (_, engine) = api(reqwest::Method::GET, api_url(&format!("/nodes/127.0.0.1:{}/history", e1.port)), &token, None).await;
    let samples = engine["samples"].as_array().unwrap();
    assert!(samples.iter().any(|s| s["kind"] == "engine" && s["used_memory"].as_f64().unwrap_or(0.0) > 0.0 && s["hit_ratio"].is_number()), "{engine}");
    let (_, p) = api(reqwest::Method::GET, api_url(&format!("/nodes/127.0.0.1:{}/history", proxy.port)), &token, None).await;
    assert!(p["samples"].as_array().unwrap().iter().any(|s| s["kind"] == "proxy" && s["p99_us"].as_f64().unwrap_or(0.0) > 0.0), "{p}");
    let (status, _) = api(reqwest::Method::GET, api_url("/tenants/shop/history?hours=0"), &token, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let page = session.get(format!("{url}/tenants/shop")).send().await.unwrap().text().await.unwrap();
    for id in ["tenant-ops-chart", "tenant-hit-chart", "tenant-latency-chart", "tenant-memory-chart", "tenant-oom-chart"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "{id} on the tenant's page");
    }
    assert!(page.contains("data-name=\"string\"") && page.contains("data-name=\"hash\""), "a line per command class");
    assert!(page.contains("class=\"time\" data-epoch="), "time ticks carry their instant");
    let node = session.get(format!("{url}/nodes/127.0.0.1:{}", e1.port)).send().await.unwrap().text().await.unwrap();
    for id in ["node-ops-chart", "node-hit-chart", "node-memory-chart", "node-evictions-chart", "node-lag-chart"] {
        assert!(node.contains(&format!("id=\"{id}\"")), "{id} on the engine's page");
    }
    let overview = session.get(format!("{url}/")).send().await.unwrap().text().await.unwrap();
    assert!(overview.contains(&format!("href=\"/nodes/127.0.0.1:{}\"", e1.port)), "the Overview links each node's page");
    drop(console);
}

/// The key browser lists a tenant's keys with SCAN over every engine, page after page (each
/// key once), with type, TTL, size and encoding; shows one key's value; deletes one; and the
/// slow log merges every engine's, per tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_browser_and_the_slow_log() {
    let (e1, e2) = (Engine::start(&[]), Engine::start(&[]));
    let proxy = Proxy::start_admin_on(0, &[&e1, &e2]);
    let console = Console::start(&[&e1, &e2], &[&proxy]);
    let url = console.url.clone();
    let (session, csrf) = login(&url).await;
    let token = token(&session, &url, &csrf, "keys").await;
    let api_url = |p: &str| format!("{url}/api/v1{p}");
    for name in ["shop", "blog"] {
        let (status, body) = api(reqwest::Method::POST, api_url("/tenants"), &token, Some(json!({"name": name, "password": "pw"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let mut c = redis_as(proxy.port, "shop", "pw").unwrap();
    for i in 0..120 {
        let _: () = redis::cmd("SET").arg(format!("user:{i}")).arg(format!("name {i}")).query(&mut c).unwrap();
    }
    let _: () = redis::cmd("SET").arg("session").arg("s").arg("EX").arg("600").query(&mut c).unwrap();
    let _: () = redis::cmd("HSET").arg("h").arg("f1").arg("v1").arg("f2").arg("v2").query(&mut c).unwrap();
    let _: () = redis::cmd("RPUSH").arg("l").arg("a").arg("b").query(&mut c).unwrap();
    let mut other = redis_as(proxy.port, "blog", "pw").unwrap();
    let _: () = redis::cmd("SET").arg("user:blog").arg("not shop's").query(&mut other).unwrap();

    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut pages = 0;
    loop {
        let (status, body) = api(reqwest::Method::GET, api_url(&format!("/tenants/shop/keys?pattern=user:*&cursor={cursor}")), &token, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        pages += 1;
        for k in body["keys"].as_array().unwrap() {
            assert_eq!(k["type"], "string", "{k}");
            assert!(k["bytes"].as_i64().unwrap() > 0 && k["ttl_ms"].is_null(), "{k}");
            assert!(seen.insert(k["key"].as_str().unwrap().to_string()), "listed twice: {k}");
        }
        cursor = body["cursor"].as_str().unwrap().to_string();
        if cursor == "0" {
            break;
        }
        assert!(pages < 20, "{body}");
    }
    let want: std::collections::BTreeSet<String> = (0..120).map(|i| format!("user:{i}")).collect();
    assert_eq!(seen, want, "every key of the pattern, once, none of another tenant's");
    assert!(pages >= 3, "{pages} pages of about 50");

    let (_, body) = api(reqwest::Method::GET, api_url("/tenants/shop/key?key=h"), &token, None).await;
    assert_eq!((body["key"]["type"].as_str(), body["key"]["length"].as_i64()), (Some("hash"), Some(2)), "{body}");
    assert!(body["key"]["value"].as_array().unwrap().iter().any(|l| l == "f1 = v1"), "{body}");
    let (_, body) = api(reqwest::Method::GET, api_url("/tenants/shop/key?key=session"), &token, None).await;
    assert!(body["key"]["ttl_ms"].as_i64().unwrap() > 500_000, "{body}");
    let (status, _) = api(reqwest::Method::GET, api_url("/tenants/shop/key?key=nothing"), &token, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, body) = api(reqwest::Method::DELETE, api_url("/tenants/shop/key?key=user:5"), &token, None).await;
    assert_eq!(body["deleted"], true, "{body}");
    assert_eq!(redis::cmd("GET").arg("user:5").query::<Option<String>>(&mut c).unwrap(), None);
    let (_, body) = api(reqwest::Method::DELETE, api_url("/tenants/shop/key?key=user:5"), &token, None).await;
    assert_eq!(body["deleted"], false);

    // The pages.
    let page = session.get(format!("{url}/tenants/shop/keys?pattern=user%3A1*")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("href=\"/tenants/shop/keys/view?key=user%3A1") && !page.contains("user:blog"), "{page}");
    let page = session.get(format!("{url}/tenants/shop/keys/view?key=l")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("id=\"key-type\">list") && page.contains("data-confirm=\"Delete key l of tenant shop?\""), "{page}");
    let r = session.post(format!("{url}/tenants/shop/keys/delete")).form(&[("csrf", csrf.as_str()), ("key", "l")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(redis::cmd("EXISTS").arg("l").query::<i64>(&mut c).unwrap(), 0);

    // The slow log: every command is slow at a threshold of 0.
    for e in [&e1, &e2] {
        let _: () = redis::cmd("CONFIG").arg("SET").arg("slowlog-log-slower-than").arg("0").query(&mut e.client()).unwrap();
    }
    let _: () = redis::cmd("SET").arg("slow:shop").arg("1").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("slow:blog").arg("1").query(&mut other).unwrap();
    let (_, body) = api(reqwest::Method::GET, api_url("/slowlog?tenant=shop"), &token, None).await;
    let entries = body["entries"].as_array().unwrap();
    assert!(entries.iter().any(|e| e["args"] == json!(["SET", "slow:shop", "1"])), "{body}");
    assert!(entries.iter().all(|e| e["tenant"] == "shop" && e["engine"].is_string()), "{body}");
    let page = session.get(format!("{url}/slowlog")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("SET slow:shop 1") && page.contains("SET slow:blog 1"), "every tenant's: {page}");
    drop(console);
}

/// Users and roles: a viewer reads, an operator changes everything but users and API
/// tokens, an admin those too; tokens carry a role (at most their creator's) and an expiry;
/// every change is in the events with who made it and the state before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_limit_users_and_tokens_and_every_change_is_audited() {
    let e = Engine::start(&[]);
    let proxy = Proxy::start_admin_on(0, &[&e]);
    let console = Console::start(&[&e], &[&proxy]);
    let url = console.url.clone();
    let (session, csrf) = login(&url).await;
    let admin = token(&session, &url, &csrf, "ci").await;
    let api_url = |p: &str| format!("{url}/api/v1{p}");
    let call = |method: reqwest::Method, path: &str, token: &str, body: Option<Value>| {
        let (url, token) = (api_url(path), token.to_string());
        async move { api(method, url, &token, body).await }
    };
    for (name, role) in [("vera", "viewer"), ("otto", "operator")] {
        let (status, body) = call(reqwest::Method::POST, "/users", &admin, Some(json!({"name": name, "password": "password-1", "role": role}))).await;
        assert_eq!((status, body["user"]["role"].as_str()), (StatusCode::CREATED, Some(role)), "{body}");
    }
    let (status, _) = call(reqwest::Method::POST, "/users", &admin, Some(json!({"name": "vera", "password": "password-1", "role": "viewer"}))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, body) = call(reqwest::Method::POST, "/tokens", &admin, Some(json!({"name": "ro", "role": "viewer", "expires_in_days": 7}))).await;
    assert_eq!((status, body["role"].as_str()), (StatusCode::CREATED, Some("viewer")), "{body}");
    assert!(body["expires_at"].as_i64().unwrap() > 0);
    let viewer = body["token"].as_str().unwrap().to_string();
    let (status, body) = call(reqwest::Method::POST, "/tokens", &admin, Some(json!({"name": "x", "role": "root"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    // A viewer reads, and changes nothing.
    let (status, _) = call(reqwest::Method::GET, "/tenants", &viewer, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(reqwest::Method::POST, "/tenants", &viewer, Some(json!({"name": "shop", "password": "pw"}))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"], "this needs the operator role; token ro has the viewer role");
    let (status, _) = call(reqwest::Method::GET, "/users", &viewer, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // An operator changes tenants, not users or tokens.
    let otto = browser();
    let page = otto.get(format!("{url}/login")).send().await.unwrap().text().await.unwrap();
    let r = otto.post(format!("{url}/login")).form(&[("csrf", csrf_of(&page).as_str()), ("user", "otto"), ("password", "password-1")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "otto logs in");
    let page = otto.get(format!("{url}/tenants/new")).send().await.unwrap().text().await.unwrap();
    let otto_csrf = csrf_of(&page);
    let r = otto
        .post(format!("{url}/tenants/new"))
        .form(&[("csrf", otto_csrf.as_str()), ("name", "shop"), ("password", "pw"), ("compression", "none")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "an operator creates a tenant");
    let r = otto.get(format!("{url}/users")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("This needs the admin role; otto has the operator role."));
    let r = otto.post(format!("{url}/tokens")).form(&[("csrf", otto_csrf.as_str()), ("name", "mine")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "tokens are credentials: an admin's");

    // The audit log: who, what, before → after.
    let (status, body) = call(reqwest::Method::PATCH, "/tenants/shop", &admin, Some(json!({"compression": "zstd"}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, events) = call(reqwest::Method::GET, "/events?limit=50", &admin, None).await;
    let list = events["events"].as_array().unwrap();
    let patch = list.iter().find(|e| e["message"] == "PATCH /api/v1/tenants/shop").expect("the PATCH is in the log");
    assert_eq!((patch["actor"].as_str(), patch["target"].as_str()), (Some("token ci"), Some("tenant shop")), "{patch}");
    assert_eq!((patch["before"]["compression"].as_str(), patch["after"]["compression"].as_str()), (Some("none"), Some("zstd")), "{patch}");
    let created = list.iter().find(|e| e["message"] == "POST /tenants/new").expect("the page's create is in the log");
    assert_eq!(created["actor"], "user otto", "{created}");
    assert!(list.iter().any(|e| e["message"] == "POST /api/v1/users" && e["actor"] == "token ci"), "{events}");
    assert!(!list.iter().any(|e| e["actor"] == "token ro"), "a refused change is not one");
    let page = session.get(format!("{url}/events")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("compression: &#34;none&#34; → &#34;zstd&#34;"), "before → after, escaped: {page}");

    // The last admin stays; a role change ends the user's sessions.
    let (status, _) = call(reqwest::Method::PATCH, "/users/admin", &admin, Some(json!({"role": "viewer"}))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, body) = call(reqwest::Method::PATCH, "/users/otto", &admin, Some(json!({"role": "viewer"}))).await;
    assert_eq!((status, body["user"]["role"].as_str()), (StatusCode::OK, Some("viewer")));
    let r = otto.get(format!("{url}/tenants")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "otto's session ended with the role change");
    let (status, _) = call(reqwest::Method::DELETE, "/users/otto", &admin, None).await;
    assert_eq!(status, StatusCode::OK);
    drop(console);
}

/// Events and alerts: an engine that stops answering raises an alert on the Overview and in
/// the events; back (a new run ID) it is an engine restart and the alert clears; every event
/// — those and the changes with who made them — is POSTed to the webhook, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_and_events_reach_the_overview_and_the_webhook() {
    // A webhook receiver: every POST's JSON body, in arrival order.
    let received: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = Default::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies = received.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let Ok((mut s, _)) = listener.accept().await else { return };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Headers, then Content-Length bytes of body.
            let body = loop {
                let n = s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()))
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break Some(buf[end + 4..end + 4 + len].to_vec());
                    }
                }
            };
            if let Some(b) = body {
                bodies.lock().unwrap().push(serde_json::from_slice(&b).unwrap());
            }
            let _ = s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
        }
    });
    let dir = temp_dir("alerts-engine");
    let e1 = Engine::start(&[]);
    let mut e2 = Engine::start_on(0, &dir);
    let port2 = e2.port;
    let proxy = Proxy::start_admin_on(0, &[&e1, &e2]);
    let console = Console::start_with(&[&e1, &e2], &[&proxy], &["--sample-ms", "1000", "--webhook-url", &hook]);
    let url = console.url.clone();
    let (session, csrf) = login(&url).await;
    let token = token(&session, &url, &csrf, "alerts").await;
    let (status, _) = api(reqwest::Method::POST, format!("{url}/api/v1/tenants"), &token, Some(json!({"name": "shop", "password": "pw"}))).await;
    assert_eq!(status, StatusCode::CREATED);
    let wait_for_hook = |what: &'static str, pred: fn(&Value) -> bool| {
        let received = received.clone();
        async move {
            for _ in 0..300 {
                if received.lock().unwrap().iter().any(pred) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("the webhook got no {what}: {:?}", received.lock().unwrap());
        }
    };
    wait_for_hook("tenant creation", |e| e["message"] == "POST /api/v1/tenants" && e["actor"] == "token alerts" && e["kind"] == "change").await;

    e2.stop();
    let down = format!("engine 127.0.0.1:{port2} does not answer");
    let mut overview = String::new();
    for _ in 0..200 {
        overview = session.get(format!("{url}/")).send().await.unwrap().text().await.unwrap();
        if overview.contains(&down) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(overview.contains("id=\"alerts\"") && overview.contains(&down), "the Overview flags it: {overview}");
    assert!(overview.contains("<tr class=\"alert\">"), "its row is flagged");
    wait_for_hook("alert", |e| e["kind"] == "alert" && e["message"].as_str().unwrap_or("").ends_with("does not answer")).await;

    let _e2 = Engine::start_on(port2, &dir);
    wait_for_hook("restart", |e| e["kind"] == "restart" && e["message"].as_str().unwrap_or("").contains("restarted")).await;
    wait_for_hook("cleared alert", |e| e["kind"] == "alert cleared").await;
    let (_, events) = api(reqwest::Method::GET, format!("{url}/api/v1/events"), &token, None).await;
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"alert") && kinds.contains(&"restart") && kinds.contains(&"alert cleared") && kinds.contains(&"change"), "{kinds:?}");
    let ids: Vec<i64> = received.lock().unwrap().iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order, once each: {ids:?}");
    drop(console);
}

/// Issue 46, finding 5: a primary that died while the console was down came back fenced
/// (waiting for its role, as `terrace up --replicas` restarts it) and was never failed over
/// once the console returned — the console, never having seen its old run ID, kept trying to
/// give it its term ("TRYAGAIN … waits for its role") and its slots answered TRYAGAIN until
/// an operator failed it over by hand.
#[test]
fn a_primary_that_restarted_while_the_console_was_down_is_failed_over_when_it_returns() {
    let (e0_dir, console_dir) = (temp_dir("engine"), temp_dir("console"));
    let flags = ["--wal", "always"];
    let mut e0 = Engine::start_on_with(0, &e0_dir, &flags);
    let r0 = Engine::start(&flags);
    let proxy = Proxy::start_admin_on(free_port(), &[&e0]);
    let replicas = format!("127.0.0.1:{}", r0.port);
    let extra = ["--replicas", replicas.as_str(), "--health-ms", "200", "--failover-after-ms", "1000"];
    let console = Console::start_in(console_dir.clone(), &[&e0], &[&proxy], &extra, &[]);
    eventually(20, "the replica follows its primary", || role_of(&r0) == ("slave".into(), "up".into()));
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    for i in 0..100 {
        q::<()>(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "5000"]), 1);
    // The console goes; the primary dies and comes back fenced on its address.
    let mut console = console;
    let _ = console.child.kill();
    let _ = console.child.wait();
    std::mem::forget(console);
    let port = e0.port;
    let _ = e0.child.kill();
    let _ = e0.child.wait();
    std::mem::forget(e0);
    let back = Engine::start_on_with(port, &e0_dir, &["--wal", "always", "--wait-for-role"]);
    // The proxy's link to the killed engine may first answer for itself ("engine … unavailable")
    // while it reconnects; then the engine's own answer is the fence, never a value.
    let mut answer = String::new();
    for _ in 0..100 {
        answer = common::err(&mut c, &["GET", "k1"]);
        if !answer.contains(&format!("engine 127.0.0.1:{port} unavailable")) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(answer.contains("waits for its role"), "the restarted primary serves nothing yet: {answer}");
    // The console returns: it fails the restarted primary over to its replica.
    let console = Console::start_in(console_dir, &[&back], &[&proxy], &extra, &[]);
    eventually(20, "the replica is promoted", || role_of(&r0).0 == "master");
    eventually(20, "the proxy routes to the promoted replica", || {
        redis::cmd("GET").arg("k1").query::<Option<String>>(&mut c).ok().flatten().as_deref() == Some("1")
    });
    for i in 0..100 {
        assert_eq!(q::<Option<String>>(&mut c, &["GET", &format!("k{i}")]), Some(i.to_string()), "a WAIT-acknowledged write");
    }
    eventually(20, "the old primary follows the new one", || role_of(&back) == ("slave".into(), "up".into()));
    drop(console);
}

/// Issue 46, finding 3: a primary paused (SIGSTOP) for longer than a failover takes. Before
/// term leases the console promoted the replica while the proxy queued writes for the paused
/// primary, which ran them on SIGCONT and acknowledged them — then was demoted and resynced
/// them away. Now the primary takes and acknowledges writes only while its lease holds, and
/// the replica is promoted only once that lease has run out: no acknowledged write is lost,
/// and the resumed old primary takes no direct write either.
#[test]
fn a_paused_primary_acknowledges_no_write_its_successor_lacks() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let e0 = Engine::start(&[]);
    let r0 = Engine::start(&[]);
    // (The proxy waits longer than the pause for a reply: what the paused primary does with
    // the queued writes on SIGCONT is what its clients are told.)
    let proxy = Proxy::start_admin_on_with(free_port(), &[&e0], &["--timeout-ms", "20000"]);
    let replicas = format!("127.0.0.1:{}", r0.port);
    let console = Console::start_with(&[&e0], &[&proxy], &["--replicas", &replicas, "--health-ms", "200", "--failover-after-ms", "1000"]);
    eventually(20, "the replica follows its primary", || role_of(&r0) == ("slave".into(), "up".into()));
    let mut direct = e0.client();
    eventually(20, "the primary holds a lease", || {
        info_text(&mut direct, "replication", "terrace_term_epoch") == "1"
            && q::<String>(&mut direct, &["INFO", "replication"]).contains("terrace_term_lease_ms:")
    });
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (stop, acked, port) = (stop.clone(), acked.clone(), proxy.port);
            std::thread::spawn(move || {
                let mut n = 0;
                let connect = || redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection();
                let mut c = connect().ok();
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let (key, value) = (format!("w{w}:{n}"), format!("v{n}"));
                    let Some(con) = c.as_mut() else {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        c = connect().ok();
                        continue;
                    };
                    // Odd writers wait for the replica (SET then WAIT 1): those writes must
                    // survive anything; even ones are plain SETs.
                    let waited = w % 2 == 1;
                    let written = match redis::cmd("SET").arg(&key).arg(&value).query::<()>(con) {
                        Ok(()) if waited => redis::cmd("WAIT").arg(1).arg(2000).query::<i64>(con).map(|n| n == 1),
                        Ok(()) => Ok(true),
                        Err(e) => Err(e),
                    };
                    match written {
                        Ok(true) => acked.lock().unwrap().push((key, value, waited, std::time::Instant::now())),
                        Ok(false) => {}
                        Err(e) if e.is_io_error() || e.is_connection_dropped() => c = None,
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let paused_at = std::time::Instant::now();
    // SAFETY: kill(2) on the pid of an engine this test started and has not reaped.
    unsafe { libc::kill(e0.child.id() as i32, libc::SIGSTOP) };
    eventually(20, "the replica is promoted", || role_of(&r0).0 == "master");
    // (Promotion waits for the old primary's lease to end: an acknowledgement the old
    // primary sent came before this.)
    let promoted_at = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    // SAFETY: as above.
    unsafe { libc::kill(e0.child.id() as i32, libc::SIGCONT) };
    // The resumed old primary takes no write from anyone, until it follows the new one.
    let refused = common::err(&mut direct, &["SET", "direct", "1"]);
    assert!(["lease ran out", "READONLY", "LOADING"].iter().any(|e| refused.contains(e)), "{refused}");
    eventually(20, "the old primary follows the new one", || role_of(&e0) == ("slave".into(), "up".into()));
    // As a replica it holds no lease: promoted by hand later, its writes are not held back.
    assert!(!q::<String>(&mut e0.client(), &["INFO", "replication"]).contains("terrace_term_lease_ms"), "a replica keeps no lease");
    std::thread::sleep(std::time::Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 100, "writes were acknowledged ({})", acked.len());
    let mut on_new = r0.client();
    // A plain SET the old primary acknowledged before its pause may be lost (its replica had
    // not received it yet: replication is asynchronous, as Redis's; its reply may reach the
    // client just after the SIGSTOP). None acknowledged after the promotion may be — only
    // the old primary could have acknowledged it, after its term ended — and no write WAIT
    // acknowledged, ever.
    let mut lost = Vec::new();
    for chunk in acked.chunks(500) {
        let keys: Vec<&str> = chunk.iter().map(|(k, ..)| k.as_str()).collect();
        let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(&mut on_new).unwrap();
        lost.extend(chunk.iter().zip(got).filter(|((_, v, ..), g)| g.as_deref() != Some(v.as_str())).map(|((k, _, waited, at), _)| (k.clone(), *waited, *at)));
    }
    let forbidden: Vec<_> = lost.iter().filter(|(_, waited, at)| *waited || *at > promoted_at).collect();
    assert!(forbidden.is_empty(), "acknowledged writes lost (key, WAITed, acknowledged after the promotion): {forbidden:?} of {} acknowledged", acked.len());
    let around_the_pause = lost.iter().filter(|(.., at)| at.duration_since(paused_at) > std::time::Duration::from_millis(200)).count();
    assert_eq!(around_the_pause, 0, "plain SETs lost were acknowledged as the pause began, not later: {lost:?}");
    eprintln!("{} writes acknowledged; {} plain SETs acknowledged as the primary paused lost (asynchronous replication)", acked.len(), lost.len());
    assert_eq!(q::<Option<String>>(&mut on_new, &["GET", "direct"]), None);
    drop(console);
}

/// Issue 46, finding 4: the console killed in the middle of a failover — the old primary's
/// lease revoked and the replica promoted, but the map neither changed nor pushed. Before
/// leases the proxies kept writing to the old primary, which the returning console then
/// demoted: every write since was lost. Now the revoked old primary takes no write while no
/// coordinator is there (TRYAGAIN), the half-promoted replica gets none through the proxy,
/// and the returning console, finding the map's primary revoked, gives it a new term: writes
/// resume there, the replica follows it again, and no acknowledged write is lost.
#[test]
fn a_failover_interrupted_by_the_consoles_death_loses_no_acknowledged_write() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let console_dir = temp_dir("console");
    let e0 = Engine::start(&[]);
    let r0 = Engine::start(&[]);
    let proxy = Proxy::start_admin_on(free_port(), &[&e0]);
    let replicas = format!("127.0.0.1:{}", r0.port);
    let extra = ["--replicas", replicas.as_str(), "--health-ms", "200", "--failover-after-ms", "1000"];
    let mut console = Console::start_in(console_dir.clone(), &[&e0], &[&proxy], &extra, &[]);
    eventually(20, "the replica follows its primary", || role_of(&r0) == ("slave".into(), "up".into()));
    let mut direct = e0.client();
    eventually(20, "the primary holds a lease", || q::<String>(&mut direct, &["INFO", "replication"]).contains("terrace_term_lease_ms:"));
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let port = proxy.port;
    let writer = {
        let (stop, acked) = (stop.clone(), acked.clone());
        std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                match redis::cmd("SET").arg(format!("k{n}")).arg(n).query::<()>(&mut c) {
                    Ok(()) => acked.lock().unwrap().push(n),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    // What the console had done when it died: the old primary's lease revoked, the replica
    // given the next term and promoted; the map not yet changed.
    let _ = console.child.kill();
    let _ = console.child.wait();
    q::<()>(&mut direct, &["TERRACE.EPOCH", "range-0", "1", "LEASE", "0"]);
    let far = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 750).to_string();
    let mut promoted = r0.client();
    q::<()>(&mut promoted, &["TERRACE.EPOCH", "range-0", "2", "LEASE", &far]);
    q::<()>(&mut promoted, &["REPLICAOF", "NO", "ONE"]);
    let acked_before = acked.lock().unwrap().len();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert!(common::err(&mut direct, &["SET", "x", "1"]).contains("lease ran out"), "the revoked primary takes no write");
    let stalled = acked.lock().unwrap().len();
    assert!(stalled <= acked_before + 1, "no write acknowledged while no coordinator is there ({acked_before} → {stalled})");
    // The console returns.
    std::mem::forget(console);
    let console = Console::start_in(console_dir, &[&e0], &[&proxy], &extra, &[]);
    eventually(20, "writes resume", || acked.lock().unwrap().len() > stalled + 50);
    eventually(20, "the half-promoted replica follows the map's primary again", || role_of(&r0) == ("slave".into(), "up".into()));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    for n in &acked {
        assert_eq!(q::<Option<i64>>(&mut direct, &["GET", &format!("k{n}")]), Some(*n), "acknowledged write k{n} lost");
    }
    drop(console);
}

/// Issue 46, Build 1: a failover's decision and its publication are one step, before the
/// replica is promoted. A coordinator that dies after publishing it leaves a map whose primary
/// still follows its group's old primary; the next coordinator carries the failover out.
/// Here the console is killed, and what it had done is done by hand: the old primary's
/// lease revoked, then the decision recorded by the console's own `decide_failover`. Before,
/// a map primary following someone was taken for an operator's REPLICAOF and left so:
/// writes answered READONLY for good.
#[test]
fn a_failover_decided_but_not_carried_out_is_carried_out_by_the_next_coordinator() {
    let console_dir = temp_dir("console");
    let e0 = Engine::start(&[]);
    let r0 = Engine::start(&[]);
    let proxy = Proxy::start_admin_on(free_port(), &[&e0]);
    let (old, new) = (format!("127.0.0.1:{}", e0.port), format!("127.0.0.1:{}", r0.port));
    let extra = ["--replicas", new.as_str(), "--health-ms", "200", "--failover-after-ms", "1000"];
    let mut console = Console::start_in(console_dir.clone(), &[&e0], &[&proxy], &extra, &[]);
    eventually(20, "the replica follows its primary", || role_of(&r0) == ("slave".into(), "up".into()));
    let mut direct = e0.client();
    eventually(20, "the primary holds a lease", || q::<String>(&mut direct, &["INFO", "replication"]).contains("terrace_term_lease_ms:"));
    let mut c = proxy.client();
    q::<()>(&mut c, &["SET", "before", "1"]);
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "5000"]), 1);
    let _ = console.child.kill();
    let _ = console.child.wait();
    q::<()>(&mut direct, &["TERRACE.EPOCH", "range-0", "1", "LEASE", "0"]);
    let term = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let db = terrace_console::db::open(&console_dir.join("console.db")).await.unwrap();
        terrace_console::db::decide_failover(&db, 0, &old, &new).await.unwrap()
    });
    assert_eq!(term.epoch, 2);
    std::mem::forget(console);
    let console = Console::start_in(console_dir, &[&e0], &[&proxy], &extra, &[]);
    eventually(20, "the decided primary is promoted", || role_of(&r0).0 == "master");
    eventually(20, "writes through the proxy reach it", || {
        redis::cmd("SET").arg("after").arg("1").query::<()>(&mut c).is_ok() && q::<i64>(&mut r0.client(), &["EXISTS", "after"]) == 1
    });
    eventually(20, "the old primary follows it", || role_of(&e0) == ("slave".into(), "up".into()));
    assert_eq!(q::<Option<i64>>(&mut r0.client(), &["GET", "before"]), Some(1), "the WAIT-acknowledged write is there");
    drop(console);
}

/// Issue 46, finding 10: a tenant's long script made its healthy primary look dead — new
/// connections (the coordinator's health checks, its lease renewals) were placed on the
/// reactor the script held, and waited for its end — and the primary was failed over. A
/// script is not an outage: no failover, and its primary keeps its lease.
#[test]
fn a_long_script_does_not_get_its_primary_failed_over() {
    let e0 = Engine::start(&["--threads", "1"]);
    let r0 = Engine::start(&[]);
    let proxy = Proxy::start_admin_on(free_port(), &[&e0]);
    let replicas = format!("127.0.0.1:{}", r0.port);
    let console = Console::start_with(&[&e0], &[&proxy], &["--replicas", &replicas, "--health-ms", "200", "--failover-after-ms", "1000"]);
    eventually(20, "the replica follows its primary", || role_of(&r0) == ("slave".into(), "up".into()));
    let mut direct = e0.client();
    eventually(20, "the primary holds a lease", || q::<String>(&mut direct, &["INFO", "replication"]).contains("terrace_term_lease_ms:"));
    // Three seconds of Lua on the engine's only reactor (under the 5 s busy threshold: no
    // BUSY answers meanwhile either).
    let script = "local s = tonumber(redis.call('TIME')[1]) while tonumber(redis.call('TIME')[1]) < s + 3 do end return 1";
    let mut runner = e0.client();
    let started = std::time::Instant::now();
    let ran = std::thread::spawn(move || q::<i64>(&mut runner, &["EVAL", script, "0"]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut during = e0.client();
    let role: String = q(&mut during, &["INFO", "replication"]);
    assert!(role.contains("role:master"), "a new connection is answered while the script runs");
    assert_eq!(ran.join().unwrap(), 1);
    assert!(started.elapsed() >= std::time::Duration::from_secs(2), "the script ran for seconds");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(role_of(&r0).0, "slave", "the replica was not promoted");
    assert_eq!(role_of(&e0).0, "master");
    q::<()>(&mut direct, &["SET", "after", "1"]);
    drop(console);
}
