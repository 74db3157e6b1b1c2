//! Tenants at scale (issue 47, Build 1): `terrace up` on its defaults serves a thousand
//! tenants made through the REST API, each its own keyspace; deleted ones give their
//! namespace numbers to the next, which start empty.

mod common;

use common::*;
use reqwest::{Method, StatusCode};

fn tenant_client(port: u16, i: usize) -> redis::Connection {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    redis::cmd("AUTH").arg(format!("t{i}")).arg(format!("pw-{i}")).query::<()>(&mut c).unwrap_or_else(|e| panic!("tenant t{i} authenticates: {e}"));
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terrace_up_serves_a_thousand_tenants_made_through_the_api() {
    const TENANTS: usize = 1000;
    let dir = temp_dir("many-tenants");
    let (first, console_port) = (free_ports(UP_PORTS), free_port());
    let (child, port) = start_up(&dir, first, console_port, &[]);
    let url = format!("http://127.0.0.1:{console_port}");
    eventually(20, "the console answers", || std::net::TcpStream::connect(("127.0.0.1", console_port)).is_ok());
    let (web, csrf) = console_api::login(&url).await;
    let token = console_api::token(&web, &url, &csrf, "many").await;
    let create = |i: usize| {
        let (url, token) = (url.clone(), token.clone());
        async move {
            let body = serde_json::json!({"name": format!("t{i}"), "password": format!("pw-{i}"), "max_memory": "1mb"});
            let (status, body) = console_api::api(Method::POST, format!("{url}/api/v1/tenants"), &token, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "tenant t{i}: {body}");
        }
    };
    let started = std::time::Instant::now();
    for i in 0..TENANTS {
        create(i).await;
    }
    eprintln!("{TENANTS} tenants created in {:.1} s", started.elapsed().as_secs_f64());
    let (_, listed) = console_api::api(Method::GET, format!("{url}/api/v1/tenants"), &token, None).await;
    assert_eq!(listed["tenants"].as_array().unwrap().len(), TENANTS);

    // A sample, each in its own keyspace behind the one proxy.
    let sample: Vec<usize> = (0..TENANTS).step_by(37).chain([TENANTS - 1]).collect();
    for &i in &sample {
        let mut c = tenant_client(port, i);
        q::<()>(&mut c, &["SET", "shared-name", &format!("of t{i}")]);
        q::<()>(&mut c, &["SET", &format!("own{i}"), "x"]);
    }
    for &i in &sample {
        let mut c = tenant_client(port, i);
        assert_eq!(q::<String>(&mut c, &["GET", "shared-name"]), format!("of t{i}"), "t{i} reads its own key");
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2, "t{i} sees only its own keys");
    }
    // Quotas hold per tenant (1 MB each, over two engines).
    let mut c = tenant_client(port, sample[1]);
    let big = "v".repeat(100_000);
    let refused = (0..40).map(|k| redis::cmd("SET").arg(format!("big{k}")).arg(&big).query::<()>(&mut c)).find_map(Result::err);
    assert!(refused.is_some_and(|e| e.to_string().contains("OOM")), "a tenant's quota refuses writes past it");

    // Deleted, a tenant's namespace goes to the next one made, which starts empty.
    for &i in &sample[..3] {
        let (status, body) = console_api::api(Method::DELETE, format!("{url}/api/v1/tenants/t{i}"), &token, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    create(TENANTS).await;
    let mut c = tenant_client(port, TENANTS);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0, "a new tenant on a reused namespace number starts empty");
    for e in 0..2u16 {
        let mut engine = common::up_engine(&dir, &format!("127.0.0.1:{}", first + e)).unwrap();
        let held: Vec<String> = q(&mut engine, &["TERRACE.NAMESPACES"]);
        assert_eq!(held.len(), TENANTS - 3 + 1, "engine {e} holds every tenant but the deleted ones");
    }
    stop_up(child);
    let _ = std::fs::remove_dir_all(&dir);
}
