//! The console in a real browser: headless Chromium driven through chromedriver (WebDriver,
//! fantoccini). An operator logs in, creates a tenant, a Redis client authenticates as it
//! through the proxy and writes real records, the Retrain button trains a dictionary on every
//! engine, and the advisor page shows its charts and applies its recommendation. Screenshots
//! go to `$CARGO_TARGET_TMPDIR/console-screenshots/`.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fantoccini::{ClientBuilder, Locator};

/// chromedriver on a free port; killed on drop.
struct Driver {
    child: std::process::Child,
    port: u16,
}

impl Driver {
    fn start() -> Driver {
        let port = free_port();
        let mut cmd = Command::new("chromedriver");
        cmd.arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null());
        die_with_parent(&mut cmd);
        let child = cmd.spawn().expect("chromedriver (Debian package chromium-driver; tests/run.sh installs it)");
        eventually(20, "chromedriver listens", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        Driver { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &Driver, profile: &std::path::Path) -> fantoccini::Client {
    browser_with(driver, profile, &[]).await
}

/// A Chromium session with more command-line flags.
async fn browser_with(driver: &Driver, profile: &std::path::Path, extra: &[String]) -> fantoccini::Client {
    let mut args: Vec<String> =
        ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update"]
            .iter()
            .chain(&["--disable-sync", "--disable-dev-shm-usage", "--window-size=1280,1800"])
            .map(|a| a.to_string())
            .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.extend(extra.iter().cloned());
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), serde_json::json!({ "binary": "/usr/bin/chromium", "args": args }));
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a Chromium session through chromedriver")
}

/// A screenshot of the page, into `$CARGO_TARGET_TMPDIR/console-screenshots/` — and into the
/// repository's `docs/` with `TERRACE_SCREENSHOTS_TO_DOCS=1` (how the README's are made).
async fn screenshot(c: &fantoccini::Client, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    if std::env::var_os("TERRACE_SCREENSHOTS_TO_DOCS").is_some() {
        std::fs::write(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs").join(format!("console-{name}.png")), &png).unwrap();
    }
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// Whether the page is wider than the window (a horizontal scroll bar): (page, window) width.
async fn widths(c: &fantoccini::Client) -> (u64, u64) {
    let v = c.execute("return [document.documentElement.scrollWidth, window.innerWidth];", vec![]).await.unwrap();
    (v[0].as_u64().unwrap(), v[1].as_u64().unwrap())
}

/// Waits for a navigation (a form post and its redirect) to land on `path`.
async fn wait_for_path(c: &fantoccini::Client, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while c.current_url().await.unwrap().path() != path {
        if Instant::now() > deadline {
            let body = c.find(Locator::Css("body")).await.unwrap().text().await.unwrap();
            panic!("not at {path} but {}: {body}", c.current_url().await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for an element to appear (the page a click leads to has loaded).
async fn wait_for(c: &fantoccini::Client, css: &str) -> fantoccini::elements::Element {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            return e;
        }
        assert!(Instant::now() < deadline, "no {css} on {}", c.current_url().await.unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn text_of(c: &fantoccini::Client, css: &str) -> String {
    c.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}")).text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_creates_a_tenant_retrains_it_and_reads_the_advisor() {
    let (e1, e2) = (Engine::start(&[]), Engine::start(&[]));
    let proxy = Proxy::start_admin_on(0, &[&e1, &e2]);
    let console = Console::start_with(&[&e1, &e2], &[&proxy], &["--sample-ms", "1000"]);
    let driver = Driver::start();
    let profile = temp_dir("chromium-profile");
    let c = browser(&driver, &profile).await;
    let url = console.url.clone();

    // Log in.
    c.goto(&format!("{url}/")).await.unwrap();
    assert!(c.current_url().await.unwrap().path().ends_with("/login"), "unauthenticated pages send to the login page");
    c.find(Locator::Id("password")).await.unwrap().send_keys(CONSOLE_ADMIN_PASSWORD).await.unwrap();
    c.find(Locator::Id("login")).await.unwrap().click().await.unwrap();
    wait_for_path(&c, "/").await;
    // The overview lists both engines and the proxy, up (the reconcile loop has checked them).
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.find_all(Locator::Css("#engines td.ok, #proxies td.ok")).await.unwrap().len() < 3 {
        assert!(Instant::now() < deadline, "the overview shows every node up: {}", text_of(&c, "main").await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.refresh().await.unwrap();
    }
    screenshot(&c, "overview").await;

    // Create a tenant through the form.
    c.goto(&format!("{url}/tenants")).await.unwrap();
    c.find(Locator::Id("new-tenant")).await.unwrap().click().await.unwrap();
    wait_for_path(&c, "/tenants/new").await;
    c.find(Locator::Id("name")).await.unwrap().send_keys("cities").await.unwrap();
    // Without a password the form is not sent (a tenant without one would take any).
    c.find(Locator::Id("save")).await.unwrap().click().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(c.current_url().await.unwrap().path().ends_with("/tenants/new"), "the form stays until a password is given");
    let missing: bool = c.execute("return document.getElementById('tenant-password').validity.valueMissing", vec![]).await.unwrap().as_bool().unwrap();
    assert!(missing, "the browser flags the empty password");
    c.find(Locator::Id("tenant-password")).await.unwrap().send_keys("city-pw").await.unwrap();
    c.find(Locator::Css("#compression option[value='zstd-dict']")).await.unwrap().click().await.unwrap();
    c.find(Locator::Id("save")).await.unwrap().click().await.unwrap();
    wait_for_path(&c, "/tenants/cities").await;
    assert!(text_of(&c, "dl.facts").await.contains("zstd-dict"));

    // It reached the proxy: a Redis client authenticates as the tenant and writes records.
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    redis::cmd("AUTH").arg("cities").arg("city-pw").query::<()>(&mut con).expect("the new tenant authenticates through the proxy");
    let records = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cities-sample.jsonl")).unwrap();
    let mut pipe = redis::pipe();
    for (i, line) in records.lines().enumerate() {
        pipe.cmd("SET").arg(format!("city:{i}")).arg(line).ignore();
        pipe.cmd("GET").arg(format!("city:{}", i / 2)).ignore();
    }
    pipe.query::<()>(&mut con).unwrap();

    // Retrain: the button starts a run on every engine; the page shows its progress, then
    // its result.
    c.goto(&format!("{url}/tenants/cities")).await.unwrap();
    assert!(c.find(Locator::Id("retrain-status")).await.is_err(), "no run yet");
    c.find(Locator::Id("retrain")).await.unwrap().click().await.unwrap();
    wait_for(&c, "#retrain-status").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        c.goto(&format!("{url}/tenants/cities")).await.unwrap();
        let s = text_of(&c, "#retrain-status").await;
        if !s.contains("running") {
            break s;
        }
        assert!(Instant::now() < deadline, "retraining still running: {s}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(status.contains("done — 2 of 2 engines"), "{status}");
    assert_eq!(status.matches("trained ratio").count(), 2, "a result per engine: {status}");
    let generations = text_of(&c, "#generations").await;
    assert!(generations.contains("zstd-dict"), "{generations}");
    screenshot(&c, "tenant").await;

    // The advisor page: features, the evaluated configurations, both charts.
    c.find(Locator::Id("advisor-link")).await.unwrap().click().await.unwrap();
    wait_for_path(&c, "/tenants/cities/advisor").await;
    let options = c.find_all(Locator::Css("#options tbody tr")).await.unwrap();
    assert!(options.len() >= 2, "evaluated configurations: {}", options.len());
    assert!(text_of(&c, "#options").await.contains("zstd-dict (today)"));
    let points = c.find_all(Locator::Css("svg#pcsc-chart circle.point")).await.unwrap();
    assert_eq!(points.len(), options.len(), "one point per configuration on the PC-vs-SC chart");
    let curve = c.find(Locator::Css("svg#mrc-chart polyline.series")).await.unwrap();
    let pts = curve.attr("points").await.unwrap().unwrap_or_default();
    assert!(pts.split(' ').count() >= 10, "the miss-ratio curve has its points: {pts}");
    assert!(!text_of(&c, "#reasons").await.is_empty());
    screenshot(&c, "advisor").await;

    // Apply a configuration chosen in the table: the browser asks first, with its effect on
    // cost and memory; dismissed, nothing changes; accepted, that configuration is applied.
    let apply = c.find(Locator::Css("#options button.apply-option")).await.expect("an option to apply");
    apply.click().await.unwrap();
    let question = c.get_alert_text().await.unwrap();
    assert!(question.starts_with("Apply ") && question.contains("Cost ") && question.contains("memory"), "{question}");
    let chosen = question.trim_start_matches("Apply ").split('?').next().unwrap().to_string();
    c.dismiss_alert().await.unwrap();
    assert!(c.find(Locator::Css("p.notice")).await.is_err(), "dismissed: nothing applied");
    c.find(Locator::Css("#options button.apply-option")).await.unwrap().click().await.unwrap();
    c.accept_alert().await.unwrap();
    let notice = wait_for(&c, "p.notice").await.text().await.unwrap();
    assert!(notice.starts_with("Applied:") && notice.contains(&chosen), "{notice} (chose {chosen})");
    assert!(text_of(&c, "#options").await.contains(&format!("{chosen} (today)")), "the chosen configuration is today's now");

    // Every page at 1400 px and at 400 px: none is wider than its window.
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    redis::cmd("AUTH").arg("cities").arg("city-pw").query::<()>(&mut r).unwrap();
    let _: () = redis::cmd("HSET").arg("an-example-hash-with-a-rather-long-name-to-wrap").arg("field").arg("x".repeat(300)).query(&mut r).unwrap();
    let engine = format!("127.0.0.1:{}", e1.port);
    let pages = [
        "/".to_string(),
        "/tenants".into(),
        "/tenants/new".into(),
        "/tenants/cities".into(),
        "/tenants/cities/edit".into(),
        "/tenants/cities/advisor".into(),
        "/tenants/cities/keys".into(),
        "/tenants/cities/keys/view?key=an-example-hash-with-a-rather-long-name-to-wrap".into(),
        "/topology".into(),
        "/slowlog".into(),
        "/events".into(),
        format!("/nodes/{engine}"),
        "/tokens".into(),
        "/users".into(),
        "/account".into(),
    ];
    for (width, height) in [(1400u32, 1000u32), (400, 900)] {
        c.set_window_size(width, height).await.unwrap();
        for page in &pages {
            c.goto(&format!("{url}{page}")).await.unwrap();
            wait_for(&c, "main h1").await;
            let (page_width, window) = widths(&c).await;
            assert!(page_width <= window, "{page} at {width} px: the page is {page_width} px wide in a {window} px window");
        }
    }
    // The README's screenshots (after a few history samples of some traffic).
    for i in 0..3000 {
        let _: Option<String> = redis::cmd("GET").arg(format!("city:{}", i % 100)).query(&mut r).unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    c.set_window_size(1400, 1000).await.unwrap();
    for (page, name) in
        [("/", "overview"), ("/tenants/cities", "tenant"), (&format!("/nodes/{engine}")[..], "node"), ("/tenants/cities/keys", "keys"), ("/events", "events")]
    {
        c.goto(&format!("{url}{page}")).await.unwrap();
        wait_for(&c, "main h1").await;
        screenshot(&c, name).await;
    }
    c.set_window_size(400, 900).await.unwrap();
    c.goto(&format!("{url}/tenants/cities")).await.unwrap();
    wait_for(&c, "main h1").await;
    screenshot(&c, "tenant-narrow").await;

    // Delete the tenant: the form wants its name typed; then every engine has freed its
    // namespace and the proxy refuses it.
    c.set_window_size(1400, 1000).await.unwrap();
    c.goto(&format!("{url}/tenants/cities")).await.unwrap();
    c.find(Locator::Id("delete-confirm")).await.unwrap().send_keys("cities").await.unwrap();
    c.find(Locator::Id("delete")).await.unwrap().click().await.unwrap();
    wait_for_path(&c, "/tenants").await;
    for e in [&e1, &e2] {
        let held: Vec<String> = redis::cmd("TERRACE.NAMESPACES").query(&mut e.client()).unwrap();
        assert!(!held.contains(&"cities".to_string()), "the namespace is freed: {held:?}");
    }
    let mut again = redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    assert!(redis::cmd("AUTH").arg("cities").arg("city-pw").query::<()>(&mut again).is_err(), "the proxy refuses the deleted tenant");
    c.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&profile);
}

/// The SHA-256 of a certificate's public key (SubjectPublicKeyInfo), base64: what Chromium's
/// `--ignore-certificate-errors-spki-list` trusts (as a test trusts its CA; the browser has
/// no flag for a CA file).
fn spki_sha256(cert: &std::path::Path) -> String {
    let pipeline = format!("openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64", cert.display());
    let out = Command::new("sh").args(["-c", &pipeline]).output().expect("openssl (Debian's openssl package)");
    let hash = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(out.status.success() && hash.len() == 44, "openssl: {}", String::from_utf8_lossy(&out.stderr));
    hash
}

/// A client of the console trusting `ca` alone.
fn https_client(ca: &std::path::Path) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap();
    reqwest::Client::builder().tls_certs_only([ca]).cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_over_https() {
    let dir = temp_dir("console-certs");
    let certs = terrace_tls::generate(&dir, &["localhost".into(), "127.0.0.1".into()], "Console test CA").unwrap();
    let engine = Engine::start(&[]);
    let proxy = Proxy::start_admin_on(0, &[&engine]);
    let tls = ["--tls-cert-file", certs.server_cert.to_str().unwrap(), "--tls-key-file", certs.server_key.to_str().unwrap()];
    let console = Console::start_with(&[&engine], &[&proxy], &tls);
    let url = console.url.clone();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    // A client trusting the CA: the login page, its cookie Secure, HSTS; the login works.
    let c = https_client(&certs.ca_cert);
    let r = c.get(format!("{url}/login")).send().await.expect("HTTPS with the console's CA");
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    assert_eq!(r.headers()["strict-transport-security"], "max-age=31536000");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.ends_with("; Secure") && cookie.contains("HttpOnly"), "{cookie}");
    let r = console_api::post_login(&c, &url, CONSOLE_ADMIN_PASSWORD).await;
    assert_eq!(r.status(), reqwest::StatusCode::SEE_OTHER);
    let overview = c.get(format!("{url}/")).send().await.unwrap().text().await.unwrap();
    assert!(overview.contains("Engines"), "the overview over HTTPS");
    // Another CA's client refuses the console's certificate; plain HTTP gets no page.
    let other = terrace_tls::generate(&temp_dir("console-other-certs"), &["127.0.0.1".into()], "Another CA").unwrap();
    let e = https_client(&other.ca_cert).get(format!("{url}/login")).send().await.unwrap_err();
    assert!(format!("{e:?}").to_lowercase().contains("certificate"), "{e:?}");
    let plain = reqwest::Client::new().get(url.replace("https://", "http://") + "/login").send().await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success(), "plain HTTP on the HTTPS port");

    // Chromium trusting the certificate's key: log in, the overview.
    let driver = Driver::start();
    let pinned =
        browser_with(&driver, &temp_dir("chromium-https"), &[format!("--ignore-certificate-errors-spki-list={}", spki_sha256(&certs.server_cert))]).await;
    pinned.goto(&format!("{url}/")).await.unwrap();
    wait_for_path(&pinned, "/login").await;
    pinned.find(Locator::Id("password")).await.unwrap().send_keys(CONSOLE_ADMIN_PASSWORD).await.unwrap();
    pinned.find(Locator::Id("login")).await.unwrap().click().await.unwrap();
    wait_for_path(&pinned, "/").await;
    wait_for(&pinned, "#engines").await;
    assert_eq!(pinned.current_url().await.unwrap().scheme(), "https");
    pinned.close().await.unwrap();
    // Chromium trusting nothing of it: no login page (its certificate error page instead).
    let untrusting = browser(&driver, &temp_dir("chromium-https-untrusting")).await;
    let _ = untrusting.goto(&format!("{url}/login")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(untrusting.find(Locator::Id("password")).await.is_err(), "the login form shown under a certificate the browser does not trust");
    untrusting.close().await.unwrap();

    // Renewed by another CA in the same files, then SIGHUP: new clients get the new one.
    let old_ca = dir.join("old-ca.crt");
    std::fs::copy(&certs.ca_cert, &old_ca).unwrap();
    let renewed = terrace_tls::generate(&dir, &["localhost".into(), "127.0.0.1".into()], "Renewed CA").unwrap();
    // SAFETY: kill(2) on the console's own pid, a child of this test.
    assert_eq!(unsafe { libc::kill(console.child.id() as i32, libc::SIGHUP) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while https_client(&renewed.ca_cert).get(format!("{url}/login")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the renewed certificate is served after SIGHUP");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(https_client(&old_ca).get(format!("{url}/login")).send().await.is_err(), "the old CA's certificate is no longer served");
}

/// Logs in as admin through the login form.
async fn log_in(c: fantoccini::Client, url: &str) -> fantoccini::Client {
    c.goto(&format!("{url}/login")).await.unwrap();
    c.find(Locator::Id("password")).await.unwrap().send_keys(CONSOLE_ADMIN_PASSWORD).await.unwrap();
    c.find(Locator::Id("login")).await.unwrap().click().await.unwrap();
    wait_for_path(&c, "/").await;
    c
}

/// The operator's view of durability: `terrace up` with a tenant whose keys a client wrote,
/// stopped cleanly and started again — the console (in Chromium) still has the tenant, and its
/// key browser finds every key, with its value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_of_terrace_up_the_key_browser_finds_the_keys() {
    let dir = temp_dir("up-browser");
    let first = free_ports(UP_PORTS);
    let console_port = free_port();
    let (mut up, port) = start_up(&dir, first, console_port, &[]);
    let url = format!("http://127.0.0.1:{console_port}");
    eventually(30, "the console answers", || std::net::TcpStream::connect(("127.0.0.1", console_port)).is_ok());
    let driver = Driver::start();
    let c = browser(&driver, &temp_dir("chromium-up")).await;
    let c = log_in(c, &url).await;
    // A tenant, made through the form.
    c.goto(&format!("{url}/tenants/new")).await.unwrap();
    c.find(Locator::Id("name")).await.unwrap().send_keys("orders").await.unwrap();
    c.find(Locator::Id("tenant-password")).await.unwrap().send_keys("orders-pw").await.unwrap();
    c.find(Locator::Id("save")).await.unwrap().click().await.unwrap();
    wait_for_path(&c, "/tenants/orders").await;
    // Its client writes 40 orders through the proxy (once the console has told the proxy).
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    eventually(20, "the proxy knows the tenant", || redis::cmd("AUTH").arg("orders").arg("orders-pw").query::<()>(&mut con).is_ok());
    for i in 0..40 {
        let _: () = q(&mut con, &["SET", &format!("order:{i}"), &format!("{{\"id\":{i},\"state\":\"paid\"}}")]);
    }
    drop(con);
    c.close().await.unwrap();

    // A clean stop, and a start on the same data.
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(up.id() as i32, libc::SIGTERM) }, 0);
    assert!(up.wait().unwrap().success(), "terrace up stops cleanly");
    let (mut up, port) = start_up(&dir, first, console_port, &[]);
    eventually(30, "the console answers again", || std::net::TcpStream::connect(("127.0.0.1", console_port)).is_ok());

    // The key browser lists every order and opens one.
    let c = log_in(browser(&driver, &temp_dir("chromium-up-again")).await, &url).await;
    c.goto(&format!("{url}/tenants/orders/keys?pattern=order:*")).await.unwrap();
    wait_for(&c, "#keys").await;
    let mut listed = std::collections::BTreeSet::new();
    loop {
        for row in c.find_all(Locator::Css("#keys tbody td:first-child a")).await.unwrap() {
            listed.insert(row.text().await.unwrap());
        }
        match c.find(Locator::Id("next-keys")).await {
            Ok(next) => {
                next.click().await.unwrap();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(_) => break,
        }
    }
    let want: std::collections::BTreeSet<String> = (0..40).map(|i| format!("order:{i}")).collect();
    assert_eq!(listed, want, "the key browser after the restart");
    c.goto(&format!("{url}/tenants/orders/keys/view?key=order:7")).await.unwrap();
    let page = text_of(&c, "main").await;
    assert!(page.contains("{\"id\":7,\"state\":\"paid\"}"), "{page}");
    // And the client reads them through the proxy.
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    let _: () = q(&mut con, &["AUTH", "orders", "orders-pw"]);
    let n: i64 = q(&mut con, &["DBSIZE"]);
    assert_eq!(n, 40);
    c.close().await.unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(up.id() as i32, libc::SIGTERM) };
    let _ = up.wait();
}
