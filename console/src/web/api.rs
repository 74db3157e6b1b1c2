//! The REST API under `/api/v1`: JSON in and out, the same operations as the pages, errors as
//! `{"error": "…"}` with the matching status. Described by `/api/v1/openapi.json`.

use std::sync::Arc;

use axum::extract::path::ErrorKind;
use axum::extract::rejection::JsonRejection;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::ApiUser;
use crate::db;
use crate::ops::{self, OpError};
use crate::tenants::TenantInput;
use crate::Console;

pub fn router() -> Router<Arc<Console>> {
    Router::new()
        .route("/openapi.json", get(openapi))
        .route("/tenants", get(list_tenants).post(create_tenant))
        .route("/tenants/{name}", get(get_tenant).patch(update_tenant).delete(delete_tenant))
        .route("/tenants/{name}/retrain", post(retrain).get(last_retrain))
        .route("/tenants/{name}/stats", get(stats))
        .route("/tenants/{name}/advice", get(advice))
        .route("/tenants/{name}/apply", post(apply))
        .route("/topology", get(topology))
        .route("/topology/failover", post(fail_over))
        .route("/nodes", get(nodes))
        .route("/nodes/{address}/history", get(node_history))
        .route("/tenants/{name}/history", get(tenant_history))
        .route("/tenants/{name}/keys", get(list_keys))
        .route("/tenants/{name}/key", get(get_key).delete(delete_key))
        .route("/slowlog", get(slowlog))
        .route("/snapshot", post(snapshot_now))
        .route("/engines", post(add_engine))
        .route("/engines/{address}", axum::routing::delete(remove_engine))
        .route("/moves", get(list_moves).post(queue_move))
        .route("/moves/pause", post(pause_moves))
        .route("/moves/resume", post(resume_moves))
        .route("/rebalance", get(rebalance_plan).post(rebalance))
        .route("/users", get(list_users).post(create_user))
        .route("/users/{user}", axum::routing::patch(update_user).delete(delete_user))
        .route("/events", get(events))
        .route("/tokens", get(list_tokens).post(create_token))
        .route("/tokens/{id}", axum::routing::delete(revoke_token))
        .fallback(|_: ApiUser| async { error(StatusCode::NOT_FOUND, "no such API route") })
        .method_not_allowed_fallback(|_: ApiUser, m: axum::http::Method, uri: axum::http::Uri| async move {
            error(StatusCode::METHOD_NOT_ALLOWED, &format!("{m} is not an operation of /api/v1{} (the OpenAPI document lists those there are)", uri.path()))
        })
}

pub fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

fn op_error(e: OpError) -> Response {
    error(e.status(), &e.to_string())
}

/// `Json` whose rejections (malformed JSON, wrong content type, unknown fields) answer in the
/// API's error shape.
pub struct Body<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Body(v)),
            Err(r) => {
                let status = match &r {
                    JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    JsonRejection::JsonDataError(_) => StatusCode::UNPROCESSABLE_ENTITY,
                    _ => StatusCode::BAD_REQUEST,
                };
                Err(error(status, &plain_words(&r.body_text())))
            }
        }
    }
}

/// `Path` whose rejections answer in the API's error shape: a 400 naming the parameter and
/// what it must be, in words (no Rust type names).
pub struct ApiPath<T>(pub T);

impl<T: serde::de::DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(ApiPath(v)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => {
                let message = match e.kind() {
                    ErrorKind::ParseErrorAtKey { key, value, expected_type } => format!("path: {key} '{value}' is not {}", type_in_words(expected_type)),
                    ErrorKind::ParseError { value, expected_type } => format!("path: '{value}' is not {}", type_in_words(expected_type)),
                    ErrorKind::InvalidUtf8InPathParam { key } => format!("path: {key} is not UTF-8"),
                    _ => "path: a parameter is not valid".to_string(),
                };
                Err(error(StatusCode::BAD_REQUEST, &message))
            }
            Err(r) => Err(error(StatusCode::BAD_REQUEST, &plain_words(&r.body_text()))),
        }
    }
}

/// `Query` whose rejections answer in the API's error shape.
pub struct ApiQuery<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(ApiQuery(v)),
            Err(r) => {
                let why = std::error::Error::source(&r).map(|s| s.to_string()).unwrap_or_else(|| r.body_text());
                Err(error(StatusCode::BAD_REQUEST, &format!("query: {}", plain_words(&why))))
            }
        }
    }
}

/// What a Rust type a value must parse to means, for a message.
fn type_in_words(t: &str) -> &'static str {
    match t {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number ≥ 0",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        "bool" => "true or false",
        _ => "valid here",
    }
}

/// An extractor's or serde's message with Rust type names put in words and the framework's
/// prefix shortened ("Failed to deserialize the JSON body into the target type: x: invalid
/// type: string \"a\", expected u64 at line 1 column 9" → "body: x: invalid type: string
/// \"a\", expected a whole number ≥ 0 at line 1 column 9").
pub fn plain_words(message: &str) -> String {
    let mut out = message.replacen("Failed to deserialize the JSON body into the target type: ", "body: ", 1);
    out = out.replacen("Failed to parse the request body as JSON: ", "body: not JSON: ", 1);
    out = out.replacen("Failed to deserialize query string: ", "", 1);
    for t in ["u128", "u64", "u32", "u16", "u8", "usize", "i128", "i64", "i32", "i16", "i8", "isize", "f64", "f32"] {
        for (before, after) in [(format!("expected {t}"), format!("expected {}", type_in_words(t))), (format!("`{t}`"), type_in_words(t).to_string())] {
            out = out.replace(&before, &after);
        }
    }
    // "expected struct TenantInput" / "expected a map": the body is a JSON object.
    while let Some(at) = out.find("struct ") {
        let end = out[at + 7..].find(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(out.len(), |e| at + 7 + e);
        out.replace_range(at..end, "a JSON object");
    }
    out
}

async fn openapi(_: ApiUser) -> Response {
    Json(super::openapi::document()).into_response()
}

async fn list_tenants(ApiUser(caller): ApiUser, State(c): State<Arc<Console>>) -> Response {
    match db::tenants(&c.db).await {
        Ok(mut t) => {
            t.retain(|t| caller.sees(&t.name));
            Json(json!({ "tenants": t })).into_response()
        }
        Err(e) => op_error(e.into()),
    }
}

async fn get_tenant(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>) -> Response {
    match ops::tenant(&c, &name).await {
        Ok(t) => Json(json!({ "tenant": t })).into_response(),
        Err(e) => op_error(e),
    }
}

fn saved(status: StatusCode, s: ops::Saved) -> Response {
    (status, Json(json!({ "tenant": s.tenant, "applied": s.problems.is_empty(), "problems": s.problems }))).into_response()
}

async fn create_tenant(_: ApiUser, State(c): State<Arc<Console>>, Body(input): Body<TenantInput>) -> Response {
    match ops::create_tenant(&c, &input).await {
        Ok(s) => saved(StatusCode::CREATED, s),
        Err(e) => op_error(e),
    }
}

async fn update_tenant(ApiUser(caller): ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>, Body(input): Body<TenantInput>) -> Response {
    // A tenant's own people change its password alone: its quota, placement and port are
    // the appliance operator's.
    if caller.tenant.is_some() && !input.password_alone() {
        return error(StatusCode::FORBIDDEN, &format!("{} may change the tenant's password alone", caller.who));
    }
    match ops::update_tenant(&c, &name, &input).await {
        Ok(s) => saved(StatusCode::OK, s),
        Err(e) => op_error(e),
    }
}

async fn delete_tenant(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>) -> Response {
    match ops::delete_tenant(&c, &name).await {
        Ok(problems) => Json(json!({ "deleted": name, "problems": problems })).into_response(),
        Err(e) => op_error(e),
    }
}

async fn retrain(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>) -> Response {
    match ops::retrain(&c, &name).await {
        Ok(id) => (StatusCode::ACCEPTED, Json(json!({ "retrain": id, "status": "running" }))).into_response(),
        Err(e) => op_error(e),
    }
}

async fn last_retrain(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>) -> Response {
    if let Err(e) = ops::tenant(&c, &name).await {
        return op_error(e);
    }
    match db::last_retrain(&c.db, &name).await {
        Ok(r) => Json(json!({ "retrain": r })).into_response(),
        Err(e) => op_error(e.into()),
    }
}

async fn stats(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>) -> Response {
    let engines = match ops::engine_stats(&c, &name).await {
        Ok(v) => v,
        Err(e) => return op_error(e),
    };
    let usage = db::usage(&c.db, &name, db::now() - 24 * 3600).await.unwrap_or_default();
    Json(json!({ "tenant": name, "engines": engines, "usage": usage })).into_response()
}

#[derive(serde::Deserialize)]
struct EngineChoice {
    engine: Option<usize>,
}

async fn advice(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>, ApiQuery(q): ApiQuery<EngineChoice>) -> Response {
    match ops::advice_from(&c, &name, q.engine).await {
        Ok((engine, advise, workload)) => Json(json!({ "tenant": name, "engine": engine, "advise": advise, "workload": workload })).into_response(),
        Err(e) => op_error(e),
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ApplyRequest {
    /// The configuration to apply, by its name in the advice's options (None: the
    /// recommended one).
    #[serde(default)]
    option: Option<String>,
}

async fn apply(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>, Body(r): Body<ApplyRequest>) -> Response {
    match ops::apply_advice(&c, &name, r.option.as_deref()).await {
        Ok((recommended, s)) => {
            Json(json!({ "applied_recommendation": recommended, "tenant": s.tenant, "applied": s.problems.is_empty(), "problems": s.problems })).into_response()
        }
        Err(e) => op_error(e),
    }
}

async fn topology(_: ApiUser, State(c): State<Arc<Console>>) -> Response {
    let (engines, ranges) = match db::topology(&c.db).await {
        Ok(t) => t,
        Err(e) => return op_error(e.into()),
    };
    let proxies = db::proxies(&c.db).await.unwrap_or_default();
    let replicas = db::replicas(&c.db).await.unwrap_or_default();
    let events = db::events(&c.db, 50).await.unwrap_or_default();
    let slots: Vec<Value> = ranges.iter().map(|(f, l, e)| json!({ "first": f, "last": l, "engine": e })).collect();
    let replicas: Vec<Value> = replicas.iter().map(|(a, e)| json!({ "address": a, "engine": e })).collect();
    let members = c.state.lock().members.clone();
    let (coordinator, standby) = (c.coordination.coordinator(), c.coordination.standby_reason());
    Json(json!({ "engines": engines, "replicas": replicas, "members": members, "slots": slots, "proxies": proxies, "events": events, "coordinator": coordinator, "standby": standby }))
        .into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FailoverRequest {
    engine: usize,
}

/// Planned maintenance: the engine's best replica takes its place now.
async fn fail_over(_: ApiUser, State(c): State<Arc<Console>>, Body(r): Body<FailoverRequest>) -> Response {
    let (engines, _) = match db::topology(&c.db).await {
        Ok(t) => t,
        Err(e) => return op_error(e.into()),
    };
    let Some(old) = engines.get(r.engine).cloned() else {
        return error(StatusCode::NOT_FOUND, &format!("engine: no engine {} in the slot map", r.engine));
    };
    let replicas: Vec<String> = db::replicas(&c.db).await.unwrap_or_default().into_iter().filter(|(_, e)| *e == r.engine).map(|(a, _)| a).collect();
    if replicas.is_empty() {
        return error(StatusCode::CONFLICT, &format!("engine {} ({old}) has no replica to fail over to", r.engine));
    }
    match crate::failover::planned_failover(&c, r.engine, &old, &replicas).await {
        Ok(true) => {
            let (engines, _) = db::topology(&c.db).await.unwrap_or_default();
            Json(json!({ "engine": r.engine, "primary": engines.get(r.engine), "previous": old })).into_response()
        }
        Ok(false) => error(StatusCode::BAD_GATEWAY, "no replica could be promoted (see the events)"),
        Err(e) => op_error(e.into()),
    }
}

/// Every engine starts a snapshot: 202 with each one's answer, 502 if one could not.
async fn snapshot_now(_: ApiUser, State(c): State<Arc<Console>>) -> Response {
    match ops::snapshot_now(&c).await {
        Ok(replies) => {
            let all_started = replies.iter().all(|(_, r)| r.is_ok());
            let engines: serde_json::Map<String, Value> =
                replies.into_iter().map(|(addr, r)| (addr, r.map_or_else(|e| json!({ "error": e }), |ok| json!({ "started": ok })))).collect();
            let status = if all_started { StatusCode::ACCEPTED } else { StatusCode::BAD_GATEWAY };
            (status, Json(json!({ "engines": engines }))).into_response()
        }
        Err(e) => op_error(e),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Span {
    /// How far back, in hours (6 unless given; at most 720).
    hours: Option<i64>,
}

impl Span {
    /// The time the span starts (None: `hours` out of range).
    fn since(&self) -> Option<i64> {
        match self.hours.unwrap_or(6) {
            h @ 1..=720 => Some(db::now() - h * 3600),
            _ => None,
        }
    }
}

fn bad_span() -> Response {
    error(StatusCode::BAD_REQUEST, "query: hours must be from 1 to 720")
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysQuery {
    #[serde(default)]
    pattern: String,
    #[serde(default)]
    cursor: String,
}

async fn list_keys(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>, ApiQuery(q): ApiQuery<KeysQuery>) -> Response {
    match crate::browse::scan(&c, &name, &q.pattern, &q.cursor).await {
        Ok(page) => Json(json!({ "tenant": name, "keys": page.keys, "cursor": page.cursor })).into_response(),
        Err(e) => op_error(e),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyQuery {
    key: String,
}

async fn get_key(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>, ApiQuery(q): ApiQuery<KeyQuery>) -> Response {
    match crate::browse::view(&c, &name, &q.key).await {
        Ok(key) => Json(json!({ "tenant": name, "key": key })).into_response(),
        Err(e) => op_error(e),
    }
}

async fn delete_key(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>, ApiQuery(q): ApiQuery<KeyQuery>) -> Response {
    match crate::browse::delete(&c, &name, &q.key).await {
        Ok(deleted) => Json(json!({ "tenant": name, "key": q.key, "deleted": deleted })).into_response(),
        Err(e) => op_error(e),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SlowlogQuery {
    tenant: Option<String>,
}

async fn slowlog(ApiUser(caller): ApiUser, State(c): State<Arc<Console>>, ApiQuery(q): ApiQuery<SlowlogQuery>) -> Response {
    let tenant = match (&caller.tenant, q.tenant) {
        (Some(own), Some(asked)) if asked != *own => return error(StatusCode::FORBIDDEN, &format!("{} sees tenant {own}'s slow log alone", caller.who)),
        (Some(own), _) => Some(own.clone()),
        (None, asked) => asked,
    };
    match crate::browse::slowlog(&c, tenant.as_deref()).await {
        Ok((entries, problems)) => Json(json!({ "entries": entries, "problems": problems })).into_response(),
        Err(e) => op_error(e),
    }
}

async fn node_history(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(address): ApiPath<String>, ApiQuery(q): ApiQuery<Span>) -> Response {
    let Some(since) = q.since() else { return bad_span() };
    match db::node_history(&c.db, &address, since).await {
        Ok(samples) => Json(json!({ "address": address, "samples": samples })).into_response(),
        Err(e) => op_error(e.into()),
    }
}

async fn tenant_history(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>, ApiQuery(q): ApiQuery<Span>) -> Response {
    let Some(since) = q.since() else { return bad_span() };
    if let Err(e) = ops::tenant(&c, &name).await {
        return op_error(e);
    }
    match db::tenant_history(&c.db, &name, since).await {
        Ok(samples) => Json(json!({ "tenant": name, "samples": samples })).into_response(),
        Err(e) => op_error(e.into()),
    }
}

async fn nodes(_: ApiUser, State(c): State<Arc<Console>>) -> Response {
    let st = c.state.lock();
    Json(json!({ "proxies": st.proxies, "engines": st.engines })).into_response()
}

async fn list_users(_: ApiUser, State(c): State<Arc<Console>>) -> Response {
    match db::users(&c.db).await {
        Ok(u) => Json(json!({ "users": u })).into_response(),
        Err(e) => op_error(e.into()),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NewUser {
    name: String,
    password: String,
    role: String,
    /// The one tenant the user sees and manages (none: the whole appliance).
    tenant: Option<String>,
}

async fn create_user(_: ApiUser, State(c): State<Arc<Console>>, Body(u): Body<NewUser>) -> Response {
    match ops::create_user(&c, &u.name, &u.password, &u.role, u.tenant.as_deref()).await {
        Ok(user) => (StatusCode::CREATED, Json(json!({ "user": user }))).into_response(),
        Err(e) => op_error(e),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UserChange {
    role: String,
}

async fn update_user(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>, Body(u): Body<UserChange>) -> Response {
    match ops::set_user_role(&c, &name, &u.role).await {
        Ok(user) => Json(json!({ "user": user })).into_response(),
        Err(e) => op_error(e),
    }
}

async fn delete_user(ApiUser(caller): ApiUser, State(c): State<Arc<Console>>, ApiPath(name): ApiPath<String>) -> Response {
    let me = caller.who.strip_prefix("user ").unwrap_or("");
    match ops::delete_user(&c, &name, me).await {
        Ok(()) => Json(json!({ "deleted": name })).into_response(),
        Err(e) => op_error(e),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    limit: Option<i64>,
}

/// The events: the coordinator's, engines' restarts, alerts, and every change with who made it.
async fn events(_: ApiUser, State(c): State<Arc<Console>>, ApiQuery(q): ApiQuery<EventsQuery>) -> Response {
    let limit = q.limit.unwrap_or(100);
    if !(1..=10_000).contains(&limit) {
        return error(StatusCode::BAD_REQUEST, "query: limit must be from 1 to 10000");
    }
    match db::events(&c.db, limit).await {
        Ok(list) => {
            let list: Vec<Value> = list.iter().map(db::Event::to_json).collect();
            Json(json!({ "events": list })).into_response()
        }
        Err(e) => op_error(e.into()),
    }
}

async fn list_tokens(_: ApiUser, State(c): State<Arc<Console>>) -> Response {
    match db::tokens(&c.db).await {
        Ok(t) => Json(json!({ "tokens": t })).into_response(),
        Err(e) => op_error(e.into()),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NewToken {
    name: String,
    role: Option<String>,
    expires_in_days: Option<i64>,
    /// The one tenant the token is for (none: the whole appliance).
    tenant: Option<String>,
}

async fn create_token(ApiUser(caller): ApiUser, State(c): State<Arc<Console>>, Body(t): Body<NewToken>) -> Response {
    let asked = ops::TokenRequest { name: &t.name, role: t.role.as_deref(), expires_in_days: t.expires_in_days, tenant: t.tenant.as_deref() };
    match ops::new_token(&c, &caller.who, caller.role, &asked).await {
        Ok((id, token, role, expires_at, tenant)) => (
            StatusCode::CREATED,
            Json(json!({ "id": id, "name": t.name.trim(), "token": token, "role": role.name(), "expires_at": expires_at, "tenant": tenant })),
        )
            .into_response(),
        Err(e) => op_error(e),
    }
}

async fn revoke_token(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(id): ApiPath<i64>) -> Response {
    match db::revoke_token(&c.db, id).await {
        Ok(true) => Json(json!({ "revoked": id })).into_response(),
        Ok(false) => error(StatusCode::NOT_FOUND, &format!("no active token {id}")),
        Err(e) => op_error(e.into()),
    }
}

fn move_error(e: crate::moves::MoveError) -> Response {
    match e {
        crate::moves::MoveError::Invalid(why) => error(StatusCode::UNPROCESSABLE_ENTITY, &why),
        crate::moves::MoveError::Db(e) => op_error(e.into()),
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NewEngine {
    /// A running engine's `host:port`; none: `terrace up` starts one.
    #[serde(default)]
    address: Option<String>,
    /// Its replicas: addresses of running engines, or how many `terrace up` starts.
    #[serde(default)]
    replicas: crate::engines::Replicas,
}

fn engine_error(e: crate::engines::EngineError) -> Response {
    use crate::engines::EngineError::*;
    let status = match &e {
        Address | ReplicaAddress | NoLauncher | NotAnEngine(_) => StatusCode::UNPROCESSABLE_ENTITY,
        Start(_) | Unreachable(..) => StatusCode::BAD_GATEWAY,
        Conflict(_) => StatusCode::CONFLICT,
        Db(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, &e.to_string())
}

/// Adds an engine to the slot map with no slots (a rebalance then gives it its share): one
/// running at `address`, or one `terrace up` starts and supervises.
async fn add_engine(_: ApiUser, State(c): State<Arc<Console>>, Body(e): Body<NewEngine>) -> Response {
    match crate::engines::add(&c, e.address.as_deref(), e.replicas).await {
        Ok((idx, address)) => (StatusCode::CREATED, Json(json!({ "engine": idx, "address": address }))).into_response(),
        Err(e) => engine_error(e),
    }
}

/// Removes an engine that owns no slots (drain it first).
async fn remove_engine(_: ApiUser, State(c): State<Arc<Console>>, ApiPath(address): ApiPath<String>) -> Response {
    match crate::engines::remove(&c, &address).await {
        Ok(()) => Json(json!({ "removed": address })).into_response(),
        Err(e) => engine_error(e),
    }
}

async fn list_moves(_: ApiUser, State(c): State<Arc<Console>>) -> Response {
    let moves = match db::moves(&c.db, 100).await {
        Ok(m) => m,
        Err(e) => return op_error(e.into()),
    };
    let paused = crate::moves::paused(&c).await;
    let progress = crate::moves::progress(&c).await;
    Json(json!({ "paused": paused, "moves": moves, "progress": progress })).into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMove {
    source: String,
    target: String,
    slots: String,
}

async fn queue_move(_: ApiUser, State(c): State<Arc<Console>>, Body(m): Body<NewMove>) -> Response {
    match crate::moves::queue_one(&c, &m.source, &m.target, &m.slots).await {
        Ok(id) => (StatusCode::CREATED, Json(json!({ "id": id }))).into_response(),
        Err(e) => move_error(e),
    }
}

async fn pause_moves(_: ApiUser, State(c): State<Arc<Console>>) -> Response {
    match crate::moves::set_paused(&c, true).await {
        Ok(()) => Json(json!({ "paused": true })).into_response(),
        Err(e) => op_error(e.into()),
    }
}

async fn resume_moves(_: ApiUser, State(c): State<Arc<Console>>) -> Response {
    match crate::moves::set_paused(&c, false).await {
        Ok(()) => Json(json!({ "paused": false })).into_response(),
        Err(e) => op_error(e.into()),
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RebalanceRequest {
    /// Empty this engine onto the others (None: even shares for all).
    #[serde(default)]
    drain: Option<String>,
}

/// The plan a rebalance (or a drain) would queue: which slots move where, keys and bytes
/// per move, the estimated time.
async fn rebalance_plan(_: ApiUser, State(c): State<Arc<Console>>, ApiQuery(r): ApiQuery<RebalanceRequest>) -> Response {
    match crate::moves::plan(&c, r.drain.as_deref()).await {
        Ok(plan) => Json(plan).into_response(),
        Err(e) => move_error(e),
    }
}

/// Queues the plan's moves.
async fn rebalance(_: ApiUser, State(c): State<Arc<Console>>, Body(r): Body<RebalanceRequest>) -> Response {
    let plan = match crate::moves::plan(&c, r.drain.as_deref()).await {
        Ok(plan) => plan,
        Err(e) => return move_error(e),
    };
    match crate::moves::apply(&c, &plan).await {
        Ok(ids) => (StatusCode::CREATED, Json(json!({ "ids": ids, "plan": plan }))).into_response(),
        Err(e) => move_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::plain_words;

    #[test]
    fn messages_name_no_rust_types() {
        assert_eq!(
            plain_words("Failed to deserialize the JSON body into the target type: max_qps: invalid type: string \"x\", expected u64 at line 1 column 15"),
            "body: max_qps: invalid type: string \"x\", expected a whole number ≥ 0 at line 1 column 15"
        );
        assert_eq!(plain_words("invalid type: integer `1`, expected struct TenantInput"), "invalid type: integer `1`, expected a JSON object");
        assert_eq!(plain_words("engine: invalid digit found in string"), "engine: invalid digit found in string");
    }
}
