//! The console's REST API and pages as a test drives them: logging in through the form, an
//! API token, JSON requests.

use reqwest::StatusCode;
use serde_json::Value;

use super::CONSOLE_ADMIN_PASSWORD;

/// The value of the first `name="csrf" value="…"` in a page.
pub fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form with a CSRF token") + 19;
    html[at..].split('"').next().unwrap().to_string()
}

pub fn browser() -> reqwest::Client {
    reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Posts the login form (with the CSRF token of a fresh login page) as admin.
pub async fn post_login(c: &reqwest::Client, url: &str, password: &str) -> reqwest::Response {
    let page = c.get(format!("{url}/login")).send().await.unwrap().text().await.unwrap();
    c.post(format!("{url}/login")).form(&[("csrf", csrf_of(&page).as_str()), ("user", "admin"), ("password", password)]).send().await.unwrap()
}

/// Logs in through the login form; answers the client (holding the session cookie) and the
/// session's CSRF token.
pub async fn login(url: &str) -> (reqwest::Client, String) {
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
pub async fn token(c: &reqwest::Client, url: &str, csrf: &str, name: &str) -> String {
    let page = c.post(format!("{url}/tokens")).form(&[("csrf", csrf), ("name", name)]).send().await.unwrap().text().await.unwrap();
    let at = page.find("trc_").expect("the new token is shown once");
    page[at..].split('<').next().unwrap().to_string()
}

pub async fn api(method: reqwest::Method, url: String, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut r = reqwest::Client::new().request(method, url).bearer_auth(token);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let res = r.send().await.unwrap();
    let status = res.status();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}")))
}
