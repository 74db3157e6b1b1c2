//! HTTP: the router (pages, `/api/v1`, static assets), who is asking (session cookie or API
//! token), and the headers every response carries.

pub mod api;
mod audit;
mod forward;
mod openapi;
pub mod pages;

pub use forward::client as forward_client;

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::auth::{self, Session};
use crate::Console;

pub fn router(console: Arc<Console>) -> Router {
    let https = console.config.tls.is_some();
    let router = Router::new()
        .route("/login", get(pages::login_form).post(pages::login))
        .route("/logout", post(pages::logout))
        .route("/", get(pages::overview))
        .route("/tenants", get(pages::tenants))
        .route("/tenants/new", get(pages::new_tenant_form).post(pages::create_tenant))
        .route("/tenants/{name}", get(pages::tenant))
        .route("/tenants/{name}/edit", get(pages::edit_tenant_form).post(pages::update_tenant))
        .route("/tenants/{name}/delete", post(pages::delete_tenant))
        .route("/tenants/{name}/retrain", post(pages::retrain))
        .route("/tenants/{name}/advisor", get(pages::advisor))
        .route("/tenants/{name}/apply", post(pages::apply))
        .route("/tenants/{name}/keys", get(pages::keys))
        .route("/tenants/{name}/keys/view", get(pages::key))
        .route("/tenants/{name}/keys/delete", post(pages::delete_key))
        .route("/slowlog", get(pages::slowlog))
        .route("/snapshot", post(pages::snapshot_now))
        .route("/nodes/{address}", get(pages::node))
        .route("/topology", get(pages::topology))
        .route("/topology/failover", post(pages::fail_over))
        .route("/topology/{action}", post(pages::topology_change))
        .route("/account", get(pages::account).post(pages::change_password))
        .route("/users", get(pages::users).post(pages::create_user))
        .route("/users/{name}/role", post(pages::set_user_role))
        .route("/users/{name}/delete", post(pages::delete_user))
        .route("/events", get(pages::events))
        .route("/tokens", get(pages::tokens).post(pages::create_token))
        .route("/tokens/{id}/revoke", post(pages::revoke_token))
        .route("/static/console.css", get(css))
        .route("/static/console.js", get(js))
        .nest("/api/v1", api::router())
        .fallback(pages::not_found)
        .layer(axum::middleware::from_fn_with_state(console.clone(), audit::layer))
        .layer(axum::middleware::from_fn_with_state(console.clone(), only_the_coordinator_changes))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(console);
    if https {
        router.layer(axum::middleware::from_fn(https_headers))
    } else {
        router
    }
}

/// A console that does not coordinate (it stands by on etcd) serves reads and sessions
/// itself and forwards changes to the coordinator (`forward`); with no coordinator elected
/// (an election under way) it answers them 503. On the coordinator, a change is published
/// in etcd before it is answered: one that could not be is answered 503, saying it may be
/// undone by another coordinator.
async fn only_the_coordinator_changes(axum::extract::State(c): axum::extract::State<Arc<Console>>, req: Request, next: Next) -> Response {
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if read || matches!(req.uri().path(), "/login" | "/logout") {
        return next.run(req).await;
    }
    if c.coordination.leading() {
        let res = next.run(req).await;
        if !c.coordination.on_etcd_mode() || !(res.status().is_success() || res.status().is_redirection()) {
            return res;
        }
        return match crate::reconcile::publish_now(&c).await {
            Ok(()) => res,
            Err(e) => {
                let body = serde_json::json!({
                    "error": format!("the change was made on this console but not published in etcd ({e}): another coordinator may undo it; check and make it again"),
                });
                (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
            }
        };
    }
    match c.coordination.coordinator().filter(|named| named != c.coordination.me()) {
        Some(coordinator) => forward::to_coordinator(&c, &coordinator, req).await,
        None => forward::refused("no console coordinates now (one is being elected): make the change again in a few seconds".into()),
    }
}

async fn css() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "max-age=3600")], include_str!("../../static/console.css"))
}

async fn js() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, "max-age=3600")], include_str!("../../static/console.js"))
}

/// Over HTTPS: cookies are only ever sent back over TLS (`Secure`), and browsers are told to
/// come back over HTTPS alone (HSTS, a year).
async fn https_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    let cookies: Vec<HeaderValue> =
        h.get_all(axum::http::header::SET_COOKIE).iter().filter_map(|v| HeaderValue::from_str(&format!("{}; Secure", v.to_str().ok()?)).ok()).collect();
    if !cookies.is_empty() {
        h.remove(axum::http::header::SET_COOKIE);
        for c in cookies {
            h.append(axum::http::header::SET_COOKIE, c);
        }
    }
    h.insert("strict-transport-security", HeaderValue::from_static("max-age=31536000"));
    res
}

/// No framing, no inline scripts, nothing from elsewhere.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        "content-security-policy",
        HeaderValue::from_static("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    res
}

/// Who made a request: "user alice" or "token ci", with the role it acts with and the one
/// tenant it is for (None: the whole appliance).
#[derive(Debug, Clone)]
pub struct Caller {
    pub who: String,
    pub role: auth::Role,
    pub tenant: Option<String>,
}

impl Caller {
    /// Why this caller, called `name` in the answer, may not make the request (None: its
    /// role and its tenant allow it).
    fn refusal(&self, method: &Method, path: &str, name: &str) -> Option<String> {
        let needed = auth::Role::needed(method, path);
        if self.role < needed {
            return Some(format!("this needs the {} role; {name} has the {} role", needed.name(), self.role.name()));
        }
        match &self.tenant {
            Some(t) if !auth::scope_allows(t, method, path) => Some(format!("{name} is tenant {t}'s and reaches that tenant alone")),
            _ => None,
        }
    }

    /// Whether this caller sees tenant `name` (its own, or every one).
    pub fn sees(&self, name: &str) -> bool {
        auth::in_scope(self.tenant.as_deref(), name)
    }
}

/// Notes the caller for the audit log (`audit::layer` reads it once the request is done).
fn note_caller(parts: &mut Parts, caller: &Caller) {
    if let Some(slot) = parts.extensions.get::<audit::CallerSlot>() {
        *slot.0.lock() = Some(caller.clone());
    }
}

/// A logged-in user of the pages whose role allows the request; anyone else is sent to the
/// login page, a role short of it gets a 403 page saying which role it needs.
pub struct PageUser(pub Session, pub String);

impl FromRequestParts<Arc<Console>> for PageUser {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, console: &Arc<Console>) -> Result<Self, Self::Rejection> {
        let (s, token, via) = match session_of(parts, console).await {
            Ok(Some(found)) => found,
            Ok(None) => return Err(Redirect::to("/login").into_response()),
            Err(AuthFailure::Peer(e)) => return Err(pages::error_page(None, StatusCode::UNAUTHORIZED, &e)),
            Err(AuthFailure::Db(e)) => return Err(pages::error_page(None, StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())),
        };
        let caller = Caller { who: via_note(format!("user {}", s.user), &via), role: s.role, tenant: s.tenant.clone() };
        // (Noted first: a refusal is audited with who it was.)
        note_caller(parts, &caller);
        if let Some(why) = caller.refusal(&parts.method, parts.uri.path(), &s.user) {
            let frame = crate::views::Frame { user: s.user.clone(), csrf: s.csrf.clone(), tenant: s.tenant.clone() };
            // (A sentence on a page: "This needs …".)
            let sentence = why.get(..1).map(|first| format!("{}{}.", first.to_uppercase(), &why[1..])).unwrap_or_default();
            return Err(pages::error_page(Some(frame), StatusCode::FORBIDDEN, &sentence));
        }
        Ok(PageUser(s, token))
    }
}

/// Why a caller could not be told.
enum AuthFailure {
    /// A forwarded request whose consoles' key is wrong.
    Peer(String),
    Db(crate::db::DbError),
}

/// The session a request comes with: its cookie's on this console, or the one a standby
/// named forwarding it here (`forward`; no cookie token then) — and which console that was.
async fn session_of(parts: &Parts, console: &Console) -> Result<Option<(Session, String, Option<String>)>, AuthFailure> {
    let via = forward::forwarded_by(console, parts).await.map_err(AuthFailure::Peer)?;
    if via.is_some() {
        let named = forward::forwarded_session(console, parts).await.map_err(AuthFailure::Db)?;
        return Ok(named.map(|s| (s, String::new(), via)));
    }
    let Some(token) = auth::cookie(&parts.headers, auth::SESSION_COOKIE).map(str::to_string) else { return Ok(None) };
    Ok(auth::session(&console.db, &token).await.map_err(AuthFailure::Db)?.map(|s| (s, token, None)))
}

/// "user alice", or "user alice via console 10.0.0.2:8080" when a standby forwarded it.
fn via_note(who: String, via: &Option<String>) -> String {
    match via {
        Some(by) => format!("{who} via console {by}"),
        None => who,
    }
}

/// An API caller whose role allows the request: a valid bearer token, or a session cookie
/// (which must send its CSRF token in `X-CSRF-Token` on anything but GET).
pub struct ApiUser(pub Caller);

impl FromRequestParts<Arc<Console>> for ApiUser {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, console: &Arc<Console>) -> Result<Self, Self::Rejection> {
        let unauthorized = |m: &str| api::error(StatusCode::UNAUTHORIZED, m);
        let caller = if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
            let token = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).map(str::trim).unwrap_or("");
            let via = forward::forwarded_by(console, parts).await.map_err(|e| unauthorized(&e))?;
            match auth::token_valid(&console.db, token).await {
                Ok(Some((name, role, tenant))) => Caller { who: via_note(format!("token {name}"), &via), role, tenant },
                Ok(None) => return Err(unauthorized("invalid, revoked or expired API token")),
                Err(e) => return Err(api::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())),
            }
        } else {
            let (session, via) = match session_of(parts, console).await {
                Ok(Some((s, _, via))) => (s, via),
                Ok(None) if auth::cookie(&parts.headers, auth::SESSION_COOKIE).is_some() || parts.headers.contains_key(forward::PEER_KEY_HEADER) => {
                    return Err(unauthorized("session expired: log in again"))
                }
                Ok(None) => return Err(unauthorized("authentication required: an API token as `Authorization: Bearer <token>`")),
                Err(AuthFailure::Peer(e)) => return Err(unauthorized(&e)),
                Err(AuthFailure::Db(e)) => return Err(api::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())),
            };
            if parts.method != Method::GET && parts.method != Method::HEAD {
                let sent = parts.headers.get("x-csrf-token").and_then(|v| v.to_str().ok()).unwrap_or("");
                if !auth::same(sent, &session.csrf) {
                    return Err(api::error(StatusCode::FORBIDDEN, "CSRF token missing or wrong (send X-CSRF-Token with a session cookie)"));
                }
            }
            Caller { who: via_note(format!("user {}", session.user), &via), role: session.role, tenant: session.tenant }
        };
        note_caller(parts, &caller);
        if let Some(why) = caller.refusal(&parts.method, parts.uri.path(), &caller.who) {
            return Err(api::error(StatusCode::FORBIDDEN, &why));
        }
        Ok(ApiUser(caller))
    }
}
