//! The audit log: every change made through the pages or the API — a request other than a
//! read, answered without an error by an authenticated caller — becomes an event naming who
//! made it, what it was, and the state of what it changed before and after (a tenant, a user,
//! an API token, the engines and slot map), so the log reads "who, what, before → after"
//! whichever page or API route made the change. Requests refused for who made them (401,
//! 403) and failed logins are recorded too, as `denied` events with the caller's address.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{json, Value};

use super::Caller;
use crate::{db, Console};

/// Where the authenticating extractor leaves the caller for this layer.
#[derive(Clone, Default)]
pub struct CallerSlot(pub Arc<parking_lot::Mutex<Option<Caller>>>);

/// What a request changes, from its path (pages: `/tenants/x/edit`; API:
/// `/api/v1/tenants/x`).
#[derive(Debug, PartialEq)]
enum Target {
    Tenant(String),
    User(String),
    Token(i64),
    Topology,
    Nothing,
}

fn target_of(path: &str) -> Target {
    let path = path.strip_prefix("/api/v1").unwrap_or(path);
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["tenants", "new"] | ["tenants"] => Target::Nothing, // (a creation: its "after" is in the answer's tenant)
        ["tenants", name, ..] => Target::Tenant(percent_decode(name)),
        ["users", name, ..] => Target::User(percent_decode(name)),
        ["tokens", id, ..] => id.parse().map(Target::Token).unwrap_or(Target::Nothing),
        ["engines", ..] | ["moves", ..] | ["rebalance", ..] | ["topology", ..] => Target::Topology,
        _ => Target::Nothing,
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The state of what a request changes, as JSON (None: nothing to show, or gone).
async fn state_of(console: &Console, target: &Target) -> Option<Value> {
    match target {
        Target::Tenant(name) => db::tenant(&console.db, name).await.ok().flatten().map(|t| json!(t)),
        Target::User(name) => db::user(&console.db, name).await.ok().flatten().map(|u| json!(u)),
        Target::Token(id) => db::tokens(&console.db)
            .await
            .ok()?
            .into_iter()
            .find(|t| t.id == *id)
            .map(|t| json!({ "name": t.name, "role": t.role, "expires_at": t.expires_at, "revoked_at": t.revoked_at })),
        Target::Topology => {
            let (engines, ranges) = db::topology(&console.db).await.ok()?;
            let replicas = db::replicas(&console.db).await.ok()?;
            Some(json!({ "engines": engines, "slots": ranges.iter().map(|(f, l, e)| json!([f, l, e])).collect::<Vec<_>>(), "replicas": replicas }))
        }
        Target::Nothing => None,
    }
}

fn name_of(target: &Target) -> Option<String> {
    match target {
        Target::Tenant(n) => Some(format!("tenant {n}")),
        Target::User(n) => Some(format!("user {n}")),
        Target::Token(id) => Some(format!("token {id}")),
        Target::Topology => Some("topology".into()),
        Target::Nothing => None,
    }
}

/// The layer: notes the state before, runs the request, and records the change — or, when
/// the request was refused for who made it (401, 403), the attempt.
pub async fn layer(State(console): State<Arc<Console>>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let changes = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS) && path != "/login" && path != "/logout";
    let peer = peer_of(&req);
    let slot = CallerSlot::default();
    req.extensions_mut().insert(slot.clone());
    let target = if changes { target_of(&path) } else { Target::Nothing };
    let before = state_of(&console, &target).await;
    let res = next.run(req).await;
    // (A failed login is recorded by the login itself, with the name it tried.)
    if path != "/login" {
        record_denied(&console, &slot, &peer, &method, &path, res.status().as_u16()).await;
    }
    if !changes {
        return res;
    }
    let caller = slot.0.lock().take();
    if let Some(caller) = caller.filter(|_| res.status().as_u16() < 400) {
        let after = state_of(&console, &target).await;
        let message = format!("{method} {path}");
        let text = |v: &Option<Value>| v.as_ref().map(Value::to_string);
        if let Err(e) = db::add_change(&console.db, &caller.who, name_of(&target).as_deref(), &message, text(&before).as_deref(), text(&after).as_deref()).await
        {
            tracing::error!(error = %e, "cannot record a change in the audit log");
        }
    }
    res
}

/// The address a request came from (a standby console's, for what it forwarded).
fn peer_of(req: &Request) -> String {
    req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip().to_string()).unwrap_or_else(|| "?".into())
}

/// Records a request refused for who made it (401: no or bad credentials; 403: a role short
/// of it, or a wrong CSRF token) as a `denied` event.
async fn record_denied(console: &Console, slot: &CallerSlot, peer: &str, method: &Method, path: &str, status: u16) {
    if status != 401 && status != 403 {
        return;
    }
    let caller = slot.0.lock().clone();
    let who = match caller {
        Some(caller) => format!("{} from {peer}", caller.who),
        None => format!("unauthenticated from {peer}"),
    };
    denied(console, &who, &format!("{method} {path} refused ({status})")).await;
}

/// Records a `denied` event: `who` tried what `message` says.
pub async fn denied(console: &Console, who: &str, message: &str) {
    if let Err(e) = db::add_denied(&console.db, who, message).await {
        tracing::error!(error = %e, "cannot record a refused request in the audit log");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_what_it_changes() {
        assert_eq!(target_of("/api/v1/tenants/shop"), Target::Tenant("shop".into()));
        assert_eq!(target_of("/tenants/shop/edit"), Target::Tenant("shop".into()));
        assert_eq!(target_of("/api/v1/tenants/a%20b/keys"), Target::Tenant("a b".into()));
        assert_eq!(target_of("/tenants/new"), Target::Nothing);
        assert_eq!(target_of("/api/v1/tokens/7"), Target::Token(7));
        assert_eq!(target_of("/users/bob/role"), Target::User("bob".into()));
        assert_eq!(target_of("/api/v1/moves/pause"), Target::Topology);
        assert_eq!(target_of("/snapshot"), Target::Nothing);
    }
}
