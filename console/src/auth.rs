//! Who may use the console: argon2id password hashes, sessions (a random token in an HttpOnly,
//! SameSite=Strict cookie, only its SHA-256 stored), a CSRF token per session checked on every
//! form, API tokens (`Authorization: Bearer`, stored hashed, revocable) and a limit on failed
//! logins per client address.

use std::time::Duration;

use crate::db::{self, Db, DbError};
use crate::tenants::sha256_hex;

pub const SESSION_COOKIE: &str = "terrace_session";
pub const LOGIN_CSRF_COOKIE: &str = "terrace_login_csrf";
pub const SESSION_SECONDS: i64 = 12 * 3600;
/// Failed logins allowed per address per window.
const LOGIN_FAILURES: u32 = 5;
const LOGIN_WINDOW: Duration = Duration::from_secs(60);

pub use terrace_commands::passwords::random_hex;

/// An argon2id PHC string (slow on purpose: run it off the reactor).
pub fn hash_password(password: &str) -> String {
    terrace_commands::passwords::hash(password.as_bytes())
}

pub fn verify_password(password: &str, phc: &str) -> bool {
    terrace_commands::passwords::verify(password.as_bytes(), phc)
}

/// The first start: an `admin` user with the configured password or a generated one, which
/// is answered so that it can be printed once.
pub async fn ensure_admin(db: &Db, configured: Option<&str>) -> Result<Option<String>, DbError> {
    if db::user_count(db).await? > 0 {
        return Ok(None);
    }
    let password = configured.map(str::to_string).unwrap_or_else(|| random_hex(12));
    let pw = password.clone();
    let hash = tokio::task::spawn_blocking(move || hash_password(&pw)).await.expect("hashing does not panic");
    db::add_user(db, "admin", &hash, Role::Admin.name(), None).await?;
    Ok(configured.is_none().then_some(password))
}

/// What a user or token may do: a viewer reads; an operator changes everything but users and
/// API tokens; an admin changes those too. Ordered by what they allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub const NAMES: [&'static str; 3] = ["viewer", "operator", "admin"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// A stored or given role ("viewer", "operator", "admin").
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    /// The role a request needs: reading anything, a viewer; managing users or API tokens,
    /// an admin; any other change, an operator. `path` is under `/` (pages) or the API's root.
    pub fn needed(method: &axum::http::Method, path: &str) -> Role {
        let reads = matches!(*method, axum::http::Method::GET | axum::http::Method::HEAD);
        let local = path.strip_prefix("/api/v1").unwrap_or(path);
        let credentials = ["/users", "/tokens"].iter().any(|p| path == *p || path.starts_with(&format!("{p}/")));
        // Adding or removing an engine hands the engines' secret to an address, or takes a
        // share of every tenant's data: an admin's action.
        let engines = local == "/engines" || local.starts_with("/engines/") || local == "/topology/add-engine" || local == "/topology/remove-engine";
        // (Everyone may log out and change their own password.)
        let own = path == "/logout" || path == "/account";
        // Tenants' data — keys and values in the key browser, commands' arguments in the
        // slow log — is for operators: a viewer sees metadata.
        let values = local == "/slowlog" || local.starts_with("/tenants/") && matches!(local.split('/').nth(3), Some("keys" | "key"));
        match (reads, credentials) {
            _ if own => Role::Viewer,
            (true, false) if values => Role::Operator,
            (true, true) => Role::Admin,
            (true, false) => Role::Viewer,
            (false, true) => Role::Admin,
            (false, false) if engines => Role::Admin,
            (false, false) => Role::Operator,
        }
    }
}

/// A logged-in user's session.
#[derive(Debug, Clone)]
pub struct Session {
    pub user: String,
    pub csrf: String,
    pub role: Role,
    /// The one tenant the user sees and manages (None: the whole appliance).
    pub tenant: Option<String>,
}

/// Starts a session: answers the cookie's token.
pub async fn login(db: &Db, user_id: i64) -> Result<String, DbError> {
    let token = random_hex(32);
    db::add_session(db, &sha256_hex(token.as_bytes()), user_id, &random_hex(16), db::now() + SESSION_SECONDS).await?;
    Ok(token)
}

pub async fn session(db: &Db, token: &str) -> Result<Option<Session>, DbError> {
    Ok(db::session(db, &sha256_hex(token.as_bytes())).await?.map(|(user, csrf, role, tenant)| Session {
        user,
        csrf,
        role: Role::parse(&role).unwrap_or(Role::Viewer),
        tenant,
    }))
}

pub async fn logout(db: &Db, token: &str) -> Result<(), DbError> {
    db::drop_session(db, &sha256_hex(token.as_bytes())).await
}

/// A new API token (`t`'s name, role, end, maker and tenant): (id, the token — shown once).
pub async fn create_token(db: &Db, t: &db::NewToken<'_>) -> Result<(i64, String), DbError> {
    let token = format!("trc_{}", random_hex(24));
    let id = db::add_token(db, &sha256_hex(token.as_bytes()), &token[..12], t).await?;
    Ok((id, token))
}

/// A valid token's name, role and tenant (None: unknown, revoked or expired).
pub async fn token_valid(db: &Db, token: &str) -> Result<Option<(String, Role, Option<String>)>, DbError> {
    Ok(db::token_valid(db, &sha256_hex(token.as_bytes())).await?.map(|(name, role, tenant)| (name, Role::parse(&role).unwrap_or(Role::Viewer), tenant)))
}

/// Whether a caller scoped to `scope` (None: the whole appliance) sees tenant `tenant`.
pub fn in_scope(scope: Option<&str>, tenant: &str) -> bool {
    scope.is_none_or(|own| own == tenant)
}

/// Whether a user or token scoped to `tenant` (its own people's) may make a request, on top
/// of what its role allows: its tenant's pages and API — the tenant, its charts, statistics
/// and advice, its keys, its slow-log entries (the handlers keep to them), a dictionary
/// retrain and its password (`PATCH` with a password alone: the handler checks) — its
/// account, and nothing of the appliance's: no other tenant, node, topology, event, user or
/// token, no new tenant, nor the tenant's quota, placement or deletion.
pub fn scope_allows(tenant: &str, method: &axum::http::Method, path: &str) -> bool {
    use axum::http::Method;
    let reads = matches!(*method, Method::GET | Method::HEAD);
    if path == "/logout" || path == "/account" || (reads && path == "/") {
        return true;
    }
    // (The API's router is nested: its handlers may see their path without `/api/v1`. The
    // pages and the API have no path in common that this would confuse.)
    let local = path.strip_prefix("/api/v1").unwrap_or(path);
    if reads && (local == "/tenants" || local == "/slowlog") {
        return true;
    }
    let Some(rest) = local.strip_prefix("/tenants/") else { return false };
    let (name, sub) = rest.split_once('/').unwrap_or((rest, ""));
    if name != tenant {
        return false;
    }
    if reads {
        return sub != "edit";
    }
    // Its password (the API's PATCH), a retrain, a key deleted (the API's and the page's).
    matches!((method.clone(), sub), (Method::PATCH, "") | (Method::POST, "retrain" | "keys/delete") | (Method::DELETE, "key"))
}

/// Compares without stopping at the first difference.
pub fn same(a: &str, b: &str) -> bool {
    terrace_commands::passwords::constant_time_eq(a.as_bytes(), b.as_bytes())
}

/// Failed logins per client address: `LOGIN_FAILURES` within `LOGIN_WINDOW`.
pub fn login_limiter() -> terrace_commands::auth_limit::FailureLimiter {
    terrace_commands::auth_limit::FailureLimiter::new(LOGIN_FAILURES, LOGIN_WINDOW)
}

/// The value of one cookie in a `Cookie` header.
pub fn cookie<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, the whole site.
pub fn set_cookie(name: &str, value: &str, max_age: i64) -> String {
    format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finding 9 of issue 47: a viewer could read every tenant's values.
    #[test]
    fn a_viewer_sees_metadata_not_values() {
        use axum::http::Method;
        for values in ["/tenants/shop/keys", "/tenants/shop/keys/view", "/api/v1/tenants/shop/key", "/slowlog", "/api/v1/slowlog"] {
            assert_eq!(Role::needed(&Method::GET, values), Role::Operator, "{values}");
        }
        for metadata in ["/tenants/shop", "/tenants/shop/advisor", "/api/v1/tenants/shop/stats", "/tenants", "/events", "/topology"] {
            assert_eq!(Role::needed(&Method::GET, metadata), Role::Viewer, "{metadata}");
        }
        assert_eq!(Role::needed(&Method::POST, "/tenants/shop/keys/delete"), Role::Operator);
        // (Finding 2: adding an engine is an admin's action.)
        for engines in ["/api/v1/engines", "/api/v1/engines/10.0.0.1:7001", "/topology/add-engine", "/topology/remove-engine"] {
            assert_eq!(Role::needed(&Method::POST, engines), Role::Admin, "{engines}");
        }
        assert_eq!(Role::needed(&Method::POST, "/topology/apply"), Role::Operator);
    }

    /// Build 3 of issue 47: a tenant's own people reach their tenant alone.
    #[test]
    fn a_tenant_scoped_caller_reaches_its_tenant_alone() {
        use axum::http::Method;
        let get = |p: &str| scope_allows("shop", &Method::GET, p);
        for mine in [
            "/",
            "/tenants",
            "/api/v1/tenants",
            "/tenants/shop",
            "/tenants/shop/keys",
            "/api/v1/tenants/shop/history",
            "/slowlog",
            "/api/v1/slowlog",
            "/account",
        ] {
            assert!(get(mine), "{mine}");
        }
        for theirs in [
            "/tenants/other",
            "/api/v1/tenants/other/keys",
            "/tenants/shopx",
            "/topology",
            "/api/v1/nodes",
            "/events",
            "/api/v1/users",
            "/tokens",
            "/tenants/shop/edit",
            "/nodes/127.0.0.1:7001",
        ] {
            assert!(!get(theirs), "{theirs}");
        }
        let may = |m: Method, p: &str| scope_allows("shop", &m, p);
        assert!(
            may(Method::PATCH, "/api/v1/tenants/shop") && may(Method::POST, "/api/v1/tenants/shop/retrain") && may(Method::DELETE, "/api/v1/tenants/shop/key")
        );
        // (As the API's nested router shows its paths to handlers.)
        assert!(may(Method::DELETE, "/tenants/shop/key") && may(Method::PATCH, "/tenants/shop") && !may(Method::DELETE, "/tenants/shop"));
        assert!(may(Method::POST, "/tenants/shop/keys/delete") && may(Method::POST, "/tenants/shop/retrain") && may(Method::POST, "/logout"));
        assert!(!may(Method::DELETE, "/api/v1/tenants/shop") && !may(Method::POST, "/tenants/shop/delete") && !may(Method::POST, "/api/v1/tenants/shop/apply"));
        assert!(
            !may(Method::POST, "/api/v1/tenants")
                && !may(Method::POST, "/tenants/new")
                && !may(Method::POST, "/api/v1/tokens")
                && !may(Method::POST, "/snapshot")
        );
        assert!(!may(Method::PATCH, "/api/v1/tenants/other") && !may(Method::POST, "/tenants/shop/edit"));
    }

    #[test]
    fn passwords_hash_and_verify() {
        let h = hash_password("correct horse");
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("correct hors", &h));
        assert!(!verify_password("x", "not a hash"));
        assert_ne!(h, hash_password("correct horse"), "salted");
    }

    #[test]
    fn cookies_parse() {
        let mut h = axum::http::HeaderMap::new();
        h.insert(axum::http::header::COOKIE, "a=1; terrace_session=abc; b=2".parse().unwrap());
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
        assert!(set_cookie("x", "y", 5).contains("HttpOnly; SameSite=Strict"));
    }
}
