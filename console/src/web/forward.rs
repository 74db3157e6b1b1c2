//! A standby console takes changes too: it forwards each to the coordinator and relays the
//! answer, so an operator (or a load balancer) may use any console.
//!
//! Who asked travels with the request. An API token goes as it came (`Authorization`): the
//! coordinator checks it against its own tables. A session lives on the console it was
//! made on, so the standby checks it and names its user and CSRF token in
//! `x-terrace-forwarded-user` / `-csrf`, with the consoles' shared secret
//! (`coordination::PEER_KEY`) in `x-terrace-peer-key`: the coordinator believes those names
//! only beside that secret, takes the user's role from its own users, and checks the form's
//! or header's CSRF token against the one named, as it would its own session's. The
//! coordinator publishes a change before it answers; the standby applies what was
//! published before it relays the answer, so the page it redirects to shows the change.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::auth::{self, Session};
use crate::Console;

pub const PEER_KEY_HEADER: &str = "x-terrace-peer-key";
pub const USER_HEADER: &str = "x-terrace-forwarded-user";
pub const CSRF_HEADER: &str = "x-terrace-forwarded-csrf";
pub const BY_HEADER: &str = "x-terrace-forwarded-by";

/// The largest request body forwarded (a tenant's settings, a form: kilobytes).
const BODY_LIMIT: usize = 2 << 20;
/// How long the coordinator may take to answer a forwarded change (adding an engine
/// copies its slots' keys before it answers).
const TIMEOUT: Duration = Duration::from_secs(120);

/// The HTTP client standbys forward with: no redirects followed (a page's 303 goes back to
/// the browser), https:// coordinators checked against the system's CAs and
/// `tls_ca_cert_file`'s.
pub fn client(config: &crate::ConsoleConfig) -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).timeout(TIMEOUT).tls_certs_merge(config.https_ca.clone()).build().unwrap_or_default()
}

/// A change not made now, to be made again in a moment: 503 with `Retry-After`.
pub(super) fn refused(message: String) -> Response {
    let mut res = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({ "error": message }))).into_response();
    res.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    res
}

/// Forwards `req` — a change made on this standby — to the coordinator at `coordinator` and
/// relays its answer.
pub async fn to_coordinator(c: &Arc<Console>, coordinator: &str, req: Request) -> Response {
    if req.headers().contains_key(PEER_KEY_HEADER) {
        // Forwarded here by a console that took this one for the coordinator: the election
        // moved on meanwhile. Not forwarded again (no loops): asked again, it lands.
        return refused("the change reached a console that no longer coordinates (the coordinator just changed): make it again".into());
    }
    let key = match c.coordination.peer_key().await {
        Ok(Some(key)) => key,
        Ok(None) => return refused("this console does not coordinate".into()),
        Err(e) => return refused(format!("this console stands by and cannot forward the change to the coordinator ({e})")),
    };
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        return super::api::error(StatusCode::PAYLOAD_TOO_LARGE, &format!("a change's request body may hold at most {BODY_LIMIT} bytes"));
    };
    let headers = match forwarded_headers(c, &parts, &key).await {
        Ok(h) => h,
        Err((status, message)) => return super::api::error(status, &message),
    };
    let scheme = if c.config.tls.is_some() { "https" } else { "http" };
    let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let sent = c.peers.request(parts.method.clone(), format!("{scheme}://{coordinator}{path}")).headers(headers).body(body).send().await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) => return refused(format!("this console stands by and could not reach the coordinator at {coordinator}: {e}")),
    };
    let status = answer.status();
    let mut relayed = HeaderMap::new();
    for (name, value) in answer.headers() {
        if relayable(name) {
            relayed.append(name.clone(), value.clone());
        }
    }
    let Ok(bytes) = answer.bytes().await else {
        return refused(format!("the coordinator at {coordinator} did not finish its answer: the change may or may not have been made"));
    };
    if status.is_success() || status.is_redirection() {
        c.coordination.mirror_now(c).await;
    }
    let mut res = Response::new(Body::from(bytes));
    *res.status_mut() = status;
    *res.headers_mut() = relayed;
    res
}

/// The request's headers as the coordinator gets them: without this console's cookies
/// (a session here is named instead) or anything claiming to be a console's.
async fn forwarded_headers(c: &Console, parts: &Parts, key: &str) -> Result<HeaderMap, (StatusCode, String)> {
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        let ours = name.as_str().starts_with("x-terrace-");
        if !ours && !matches!(*name, header::HOST | header::COOKIE | header::CONNECTION | header::CONTENT_LENGTH | header::TRANSFER_ENCODING) {
            headers.append(name.clone(), value.clone());
        }
    }
    let value = |s: &str| header::HeaderValue::from_str(s).map_err(|_| (StatusCode::BAD_REQUEST, format!("'{s}' cannot be sent in a header")));
    headers.insert(PEER_KEY_HEADER, value(key)?);
    headers.insert(BY_HEADER, value(c.coordination.me())?);
    if parts.headers.contains_key(header::AUTHORIZATION) {
        return Ok(headers);
    }
    if let Some(token) = auth::cookie(&parts.headers, auth::SESSION_COOKIE) {
        match auth::session(&c.db, token).await {
            Ok(Some(s)) => {
                headers.insert(USER_HEADER, value(&s.user)?);
                headers.insert(CSRF_HEADER, value(&s.csrf)?);
            }
            // Sent as no one: the coordinator asks for a login (here: the login page is
            // this console's).
            Ok(None) => {}
            Err(e) => return Err((StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        }
    }
    Ok(headers)
}

/// Whether an answer's header is relayed (not hop-by-hop, not the coordinator's cookies).
fn relayable(name: &HeaderName) -> bool {
    !matches!(*name, header::CONNECTION | header::TRANSFER_ENCODING | header::CONTENT_LENGTH | header::SET_COOKIE)
}

/// On the coordinator: the console that forwarded this request (its address), if it carries
/// the consoles' shared secret. Err: it claims to be forwarded but the secret is wrong.
pub async fn forwarded_by(c: &Console, parts: &Parts) -> Result<Option<String>, String> {
    let Some(sent) = parts.headers.get(PEER_KEY_HEADER) else {
        if parts.headers.contains_key(USER_HEADER) {
            return Err("a forwarded user without the consoles' key".into());
        }
        return Ok(None);
    };
    let key = c.coordination.peer_key().await?.ok_or("this console has no peers (no etcd)")?;
    if !auth::same(sent.to_str().unwrap_or(""), &key) {
        return Err("a forwarded request with a wrong consoles' key".into());
    }
    let by = parts.headers.get(BY_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("another console");
    Ok(Some(by.to_string()))
}

/// On the coordinator: the session a standby named for a request it forwarded (None: it
/// named none, or the user is gone), with the role the user has here.
pub async fn forwarded_session(c: &Console, parts: &Parts) -> Result<Option<Session>, crate::db::DbError> {
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (Some(user), Some(csrf)) = (header(USER_HEADER), header(CSRF_HEADER)) else { return Ok(None) };
    Ok(crate::db::user(&c.db, &user).await?.map(|u| Session {
        user: u.name,
        csrf,
        role: auth::Role::parse(&u.role).unwrap_or(auth::Role::Viewer),
        tenant: u.tenant,
    }))
}
