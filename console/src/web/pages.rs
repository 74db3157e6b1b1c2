//! The pages: server-rendered HTML (askama), forms with CSRF tokens, redirects after posts.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;

use super::PageUser;
use crate::auth::{self, Session};
use crate::db;
use crate::ops::{self, OpError};
use crate::tenants::{Limit, TenantInput};
use crate::views::*;
use crate::Console;

type Fields = Form<HashMap<String, String>>;

fn frame(s: &Session) -> Frame {
    Frame { user: s.user.clone(), csrf: s.csrf.clone(), tenant: s.tenant.clone() }
}

pub fn error_page(frame: Option<Frame>, status: StatusCode, message: &str) -> Response {
    (status, ErrorPage { frame, status: status.as_u16(), message: message.to_string() }).into_response()
}

fn op_error(s: &Session, e: OpError) -> Response {
    error_page(Some(frame(s)), e.status(), &e.to_string())
}

/// Every form carries the session's CSRF token.
#[allow(clippy::result_large_err)] // the error is the page to answer with, built once per refusal
fn csrf_ok(s: &Session, f: &HashMap<String, String>) -> Result<(), Response> {
    match f.get("csrf") {
        Some(t) if auth::same(t, &s.csrf) => Ok(()),
        _ => Err(error_page(Some(frame(s)), StatusCode::FORBIDDEN, "The form's CSRF token is missing or wrong: reload the page and try again.")),
    }
}

/// No such page — or, under `/api/` (`/api/v1/` itself, another version), no such API route,
/// answered as the API answers.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    if uri.path() == "/api" || uri.path().starts_with("/api/") {
        return super::api::error(StatusCode::NOT_FOUND, "no such API route");
    }
    error_page(None, StatusCode::NOT_FOUND, "No such page.")
}

pub async fn login_form(headers: HeaderMap) -> Response {
    // Double-submit: the form's token must match the cookie's (no session exists yet).
    let csrf = auth::cookie(&headers, auth::LOGIN_CSRF_COOKIE).filter(|c| c.len() == 32).map(str::to_string).unwrap_or_else(|| auth::random_hex(16));
    ([(header::SET_COOKIE, auth::set_cookie(auth::LOGIN_CSRF_COOKIE, &csrf, 3600))], LoginPage { csrf, error: None }).into_response()
}

pub async fn login(State(console): State<Arc<Console>>, ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap, Form(f): Fields) -> Response {
    let cookie_csrf = auth::cookie(&headers, auth::LOGIN_CSRF_COOKIE).unwrap_or("").to_string();
    let again = |status: StatusCode, error: &str| {
        let csrf = auth::random_hex(16);
        (status, [(header::SET_COOKIE, auth::set_cookie(auth::LOGIN_CSRF_COOKIE, &csrf, 3600))], LoginPage { csrf, error: Some(error.to_string()) })
            .into_response()
    };
    if cookie_csrf.is_empty() || !auth::same(f.get("csrf").map(String::as_str).unwrap_or(""), &cookie_csrf) {
        return again(StatusCode::FORBIDDEN, "The form expired: try again.");
    }
    if let Err(wait) = console.limiter.check(&peer.ip()) {
        return again(StatusCode::TOO_MANY_REQUESTS, &format!("Too many failed logins: try again in {wait} s."));
    }
    let (user, password) = (f.get("user").cloned().unwrap_or_default(), f.get("password").cloned().unwrap_or_default());
    let found = match db::user_by_name(&console.db, &user).await {
        Ok(u) => u,
        Err(e) => return error_page(None, StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    // An unknown user is verified against a dummy hash, so timing does not tell names apart.
    let hash = found.as_ref().map(|(_, h)| h.clone());
    let dummy = console.dummy_hash.clone();
    let ok = tokio::task::spawn_blocking(move || match hash {
        Some(h) => auth::verify_password(&password, &h),
        None => {
            let _ = auth::verify_password(&password, &dummy);
            false
        }
    })
    .await
    .unwrap_or(false);
    let Some((id, _)) = found.filter(|_| ok) else {
        console.limiter.failed(peer.ip());
        let tried: String = user.chars().take(64).collect();
        super::audit::denied(&console, &format!("login '{tried}' from {}", peer.ip()), "a failed login (wrong user or password)").await;
        return again(StatusCode::UNAUTHORIZED, "Wrong user or password.");
    };
    console.limiter.succeeded(&peer.ip());
    match auth::login(&console.db, id).await {
        Ok(token) => {
            let mut res = Redirect::to("/").into_response();
            res.headers_mut().append(header::SET_COOKIE, auth::set_cookie(auth::SESSION_COOKIE, &token, auth::SESSION_SECONDS).parse().expect("cookie"));
            res.headers_mut().append(header::SET_COOKIE, auth::set_cookie(auth::LOGIN_CSRF_COOKIE, "", 0).parse().expect("cookie"));
            res
        }
        Err(e) => error_page(None, StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

pub async fn logout(State(console): State<Arc<Console>>, PageUser(s, token): PageUser, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    let _ = auth::logout(&console.db, &token).await;
    ([(header::SET_COOKIE, auth::set_cookie(auth::SESSION_COOKIE, "", 0))], Redirect::to("/login")).into_response()
}

pub async fn overview(State(console): State<Arc<Console>>, PageUser(s, _): PageUser) -> Response {
    // One tenant's people start on their tenant's page: the appliance's is not theirs.
    if let Some(t) = &s.tenant {
        return Redirect::to(&format!("/tenants/{t}")).into_response();
    }
    let (proxies, engines) = {
        let st = console.state.lock();
        (st.proxies.clone(), st.engines.clone())
    };
    let tenants = db::tenants(&console.db).await.map(|t| t.len()).unwrap_or(0);
    let alerts = {
        let members = console.state.lock().members.clone();
        crate::alerts::current(&proxies, &engines, &members, &console.history.lock().latest)
    };
    OverviewPage { frame: frame(&s), proxies, engines, tenants, alerts }.into_response()
}

/// "Snapshot now" on the Overview: every engine starts a snapshot; back to the Overview, or
/// a page naming those that could not.
pub async fn snapshot_now(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    match ops::snapshot_now(&console).await {
        Ok(replies) => {
            let failed: Vec<String> = replies.into_iter().filter_map(|(addr, r)| r.err().map(|e| format!("{addr}: {e}"))).collect();
            if failed.is_empty() {
                Redirect::to("/").into_response()
            } else {
                error_page(Some(frame(&s)), StatusCode::BAD_GATEWAY, &format!("Not every engine started a snapshot: {}", failed.join("; ")))
            }
        }
        Err(e) => op_error(&s, e),
    }
}

#[derive(serde::Deserialize)]
pub struct KeysQuery {
    #[serde(default)]
    pattern: String,
    #[serde(default)]
    cursor: String,
}

/// The key browser: a page of the tenant's keys matching a pattern.
pub async fn keys(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Query(q): Query<KeysQuery>) -> Response {
    match crate::browse::scan(&console, &name, &q.pattern, &q.cursor).await {
        Ok(page) => crate::views::KeysPage { frame: frame(&s), tenant: name, pattern: q.pattern, page }.into_response(),
        Err(e) => op_error(&s, e),
    }
}

#[derive(serde::Deserialize)]
pub struct KeyQuery {
    key: String,
}

/// One key and (the start of) its value.
pub async fn key(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Query(q): Query<KeyQuery>) -> Response {
    match crate::browse::view(&console, &name, &q.key).await {
        Ok(key) => crate::views::KeyPage { frame: frame(&s), tenant: name, key }.into_response(),
        Err(e) => op_error(&s, e),
    }
}

pub async fn delete_key(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    let Some(key) = f.get("key") else {
        return error_page(Some(frame(&s)), StatusCode::UNPROCESSABLE_ENTITY, "Which key? (key: its name)");
    };
    match crate::browse::delete(&console, &name, key).await {
        Ok(_) => Redirect::to(&format!("/tenants/{name}/keys")).into_response(),
        Err(e) => op_error(&s, e),
    }
}

#[derive(serde::Deserialize)]
pub struct SlowlogQuery {
    #[serde(default)]
    tenant: String,
}

/// Every engine's slow log, merged; one tenant's when asked.
pub async fn slowlog(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Query(q): Query<SlowlogQuery>) -> Response {
    let tenant = match &s.tenant {
        Some(own) => own.clone(),
        None => q.tenant.trim().to_string(),
    };
    match crate::browse::slowlog(&console, (!tenant.is_empty()).then_some(tenant.as_str())).await {
        Ok((entries, problems)) => {
            let entries = entries.iter().map(crate::views::SlowRow::of).collect();
            crate::views::SlowlogPage { frame: frame(&s), tenant, entries, problems }.into_response()
        }
        Err(e) => op_error(&s, e),
    }
}

#[derive(serde::Deserialize)]
pub struct Span {
    hours: Option<i64>,
}

/// A node's page: its status and its history's charts.
pub async fn node(
    State(console): State<Arc<Console>>,
    PageUser(s, _): PageUser,
    Path(address): Path<String>,
    axum::extract::Query(q): axum::extract::Query<Span>,
) -> Response {
    let hours = q.hours.unwrap_or(6).clamp(1, 24 * 30);
    let status = {
        let st = console.state.lock();
        st.engines.iter().chain(&st.proxies).find(|n| n.address == address).cloned()
    };
    let samples = match db::node_history(&console.db, &address, db::now() - hours * 3600).await {
        Ok(v) => v,
        Err(e) => return op_error(&s, e.into()),
    };
    if status.is_none() && samples.is_empty() {
        return error_page(Some(frame(&s)), StatusCode::NOT_FOUND, &format!("No node {address} (see the Overview for the proxies and engines)."));
    }
    let kind = status.as_ref().map(|n| n.kind.to_string()).or_else(|| samples.last().map(|x| x.kind.clone())).unwrap_or_else(|| "engine".into());
    let charts = crate::views::node_history_charts(&samples, &kind);
    crate::views::NodePage { frame: frame(&s), address, kind, status, hours, charts }.into_response()
}

pub async fn tenants(State(console): State<Arc<Console>>, PageUser(s, _): PageUser) -> Response {
    match db::tenants(&console.db).await {
        Ok(mut tenants) => {
            tenants.retain(|t| auth::in_scope(s.tenant.as_deref(), &t.name));
            TenantsPage { frame: frame(&s), tenants }.into_response()
        }
        Err(e) => op_error(&s, e.into()),
    }
}

pub async fn new_tenant_form(PageUser(s, _): PageUser) -> Response {
    TenantFormPage::new(frame(&s), None, None).into_response()
}

/// A form's fields as a create/update: empty optional fields mean "no limit"; an empty
/// password keeps the password on an edit (and is refused on a create: a tenant needs one).
fn input_of(f: &HashMap<String, String>, create: bool) -> TenantInput {
    let text = |k: &str| f.get(k).map(|v| v.trim().to_string());
    let password = text("password").filter(|p| !p.is_empty());
    TenantInput {
        name: if create { text("name") } else { None },
        password,
        max_qps: text("max_qps").map(Limit::Text),
        max_memory: text("max_memory").map(Limit::Text),
        compression: text("compression"),
        compression_mode: text("compression_mode"),
        storage_mode: text("storage_mode"),
        tier_policy: text("tier_policy"),
        wal: text("wal"),
        memcache_port: text("memcache_port").map(Limit::Text),
        // The checkbox is on every form: absent means unchecked.
        replica_reads: Some(crate::views::checked(f, "replica_reads")),
    }
}

pub async fn create_tenant(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    match ops::create_tenant(&console, &input_of(&f, true)).await {
        Ok(saved) => Redirect::to(&format!("/tenants/{}", saved.tenant.name)).into_response(),
        Err(OpError::Db(e)) => op_error(&s, OpError::Db(e)),
        Err(e) => (StatusCode::UNPROCESSABLE_ENTITY, TenantFormPage::new(frame(&s), None, Some(e.to_string())).with_submitted(f)).into_response(),
    }
}

pub async fn edit_tenant_form(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>) -> Response {
    match ops::tenant(&console, &name).await {
        Ok(t) => TenantFormPage::new(frame(&s), Some(t), None).into_response(),
        Err(e) => op_error(&s, e),
    }
}

pub async fn update_tenant(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    match ops::update_tenant(&console, &name, &input_of(&f, false)).await {
        Ok(_) => Redirect::to(&format!("/tenants/{name}")).into_response(),
        Err(e @ (OpError::Invalid(_) | OpError::Conflict(_))) => {
            let t = ops::tenant(&console, &name).await.ok();
            (StatusCode::UNPROCESSABLE_ENTITY, TenantFormPage::new(frame(&s), t, Some(e.to_string())).with_submitted(f)).into_response()
        }
        Err(e) => op_error(&s, e),
    }
}

pub async fn delete_tenant(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    // Deleting drops the tenant's data on every engine: the operator types its name first.
    if f.get("confirm").map(|c| c.trim()) != Some(name.as_str()) {
        let msg = format!("Tenant '{name}' was not deleted: type its name in the confirmation field to delete it and its data.");
        return error_page(Some(frame(&s)), StatusCode::UNPROCESSABLE_ENTITY, &msg);
    }
    match ops::delete_tenant(&console, &name).await {
        Ok(problems) if problems.is_empty() => Redirect::to("/tenants").into_response(),
        Ok(problems) => error_page(Some(frame(&s)), StatusCode::BAD_GATEWAY, &format!("Tenant '{name}' deleted, but: {}", problems.join("; "))),
        Err(e) => op_error(&s, e),
    }
}

pub async fn tenant(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>) -> Response {
    let t = match ops::tenant(&console, &name).await {
        Ok(t) => t,
        Err(e) => return op_error(&s, e),
    };
    let samples = db::usage(&console.db, &name, db::now() - 6 * 3600).await.unwrap_or_default();
    let stats = ops::engine_stats(&console, &name).await.unwrap_or_default();
    let mut generations = Vec::new();
    let mut engine_errors = Vec::new();
    if let Some(m) = stats.as_object() {
        for (engine, v) in m {
            if let Some(e) = v["error"].as_str() {
                engine_errors.push(format!("engine {engine}: {e}"));
                continue;
            }
            let c = &v["compression"];
            for g in c["generations"].as_array().into_iter().flatten() {
                generations.push(Generation {
                    engine: engine.clone(),
                    slot: g["slot"].to_string(),
                    codec: g["codec"].as_str().unwrap_or("").to_string(),
                    trained_ratio: g["trained_ratio"].as_f64().filter(|r| *r > 0.0).map(|r| format!("{:.2}×", 1.0 / r)).unwrap_or_else(|| "—".into()),
                    values: g["values"].as_u64().map(|v| v.to_string()).unwrap_or_else(|| "—".into()),
                });
            }
        }
    }
    let ratios: Vec<f64> = stats
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|v| v["compression"]["live_ratio"].as_f64())
        .filter(|r| *r > 0.0)
        .map(|r| 1.0 / r)
        .collect();
    let compression_ratio = (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64);
    let counted: Vec<(u64, u64)> = stats
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|v| {
            let st = &v["workload"]["bytes"]["storage"];
            Some((st["keys"].as_u64()?, st["bytes"].as_u64()?))
        })
        .collect();
    let storage = (!counted.is_empty()).then(|| counted.iter().fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1)));
    let advice = ops::advice(&console, &name).await.ok().map(|(e, a, w)| AdvisorView::build(&e, &a, &w));
    let retrain = db::last_retrain(&console.db, &name).await.ok().flatten();
    let history = db::tenant_history(&console.db, &name, db::now() - 6 * 3600).await.unwrap_or_default();
    TenantPage {
        frame: frame(&s),
        usage_svg: usage_chart(&samples),
        history_svgs: crate::views::tenant_history_charts(&history),
        latest: samples.last().cloned(),
        tenant: t,
        compression_ratio,
        storage,
        generations,
        retrain,
        advice,
        engine_errors,
    }
    .into_response()
}

pub async fn retrain(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    match ops::retrain(&console, &name).await {
        Ok(_) => Redirect::to(&format!("/tenants/{name}")).into_response(),
        Err(e) => op_error(&s, e),
    }
}

#[derive(serde::Deserialize)]
pub struct AdvisorQuery {
    applied: Option<String>,
    /// Whose view (index in the slot map); the first engine that answers by default.
    engine: Option<usize>,
}

pub async fn advisor(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Query(q): Query<AdvisorQuery>) -> Response {
    if let Err(e) = ops::tenant(&console, &name).await {
        return op_error(&s, e);
    }
    let message = q.applied.map(|a| format!("Applied: {a}. The engines use it from now on; the advice below is recomputed as the workload runs."));
    let engines = db::topology(&console.db).await.map(|t| t.0).unwrap_or_default();
    match ops::advice_from(&console, &name, q.engine).await {
        Ok((engine, a, w)) => {
            AdvisorPage { frame: frame(&s), tenant: name, advice: Some(AdvisorView::build(&engine, &a, &w)), error: None, message, engines }.into_response()
        }
        Err(e @ OpError::NotFound(_)) => op_error(&s, e),
        Err(e) => (StatusCode::BAD_GATEWAY, AdvisorPage { frame: frame(&s), tenant: name, advice: None, error: Some(e.to_string()), message, engines })
            .into_response(),
    }
}

pub async fn apply(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    let Some(option) = f.get("option").filter(|o| !o.is_empty()) else {
        return error_page(Some(frame(&s)), StatusCode::UNPROCESSABLE_ENTITY, "Choose the configuration to apply (the form names none).");
    };
    match ops::apply_advice(&console, &name, Some(option)).await {
        Ok((recommended, saved)) if saved.problems.is_empty() => {
            Redirect::to(&format!("/tenants/{name}/advisor?applied={}", urlencode(&recommended))).into_response()
        }
        Ok((_, saved)) => error_page(Some(frame(&s)), StatusCode::BAD_GATEWAY, &format!("Saved, but not every node took it: {}", saved.problems.join("; "))),
        Err(e) => op_error(&s, e),
    }
}

fn urlencode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

#[derive(serde::Deserialize, Default)]
pub struct PlanQuery {
    /// Show the rebalance plan (`rebalance`) or the plan that drains this engine.
    #[serde(default)]
    plan: Option<String>,
    #[serde(default)]
    drain: Option<String>,
}

/// The moves not yet done, for the slot map: the one under way with how far it got
/// (during the copy, keys copied against the move's estimate), the queued ones.
fn moving_slots(engines: &[String], moves: &[db::SlotMove], progress: Option<&crate::moves::Progress>) -> Vec<crate::views::MovingSlots> {
    moves
        .iter()
        .filter(|m| !m.ended())
        .map(|m| {
            let running = progress.filter(|p| p.id == m.id).map(|p| {
                let done = match p.phase.as_str() {
                    "idle" | "purging" => 0.0,
                    "copying" => m.estimated_keys.filter(|&k| k > 0).map_or(0.0, |k| (p.keys_copied as f64 / k as f64).min(0.99)),
                    _ => 1.0,
                };
                (p.phase.clone(), done)
            });
            crate::views::MovingSlots {
                id: m.id,
                slots: m.slots.clone(),
                target: engines.iter().position(|e| *e == m.target).unwrap_or(engines.len()),
                running,
            }
        })
        .collect()
}

pub async fn topology(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Query(q): Query<PlanQuery>) -> Response {
    let (engines, ranges) = match db::topology(&console.db).await {
        Ok(t) => t,
        Err(e) => return op_error(&s, e.into()),
    };
    let proxies = db::proxies(&console.db).await.unwrap_or_default();
    let events = db::events(&console.db, 30).await.unwrap_or_default();
    let members = console.state.lock().members.clone();
    let moves = db::moves(&console.db, 20).await.unwrap_or_default();
    let progress = crate::moves::progress(&console).await;
    let paused = crate::moves::paused(&console).await;
    let (plan, plan_error) = if q.plan.is_some() || q.drain.is_some() {
        match crate::moves::plan(&console, q.drain.as_deref()).await {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(e.to_string())),
        }
    } else {
        (None, None)
    };
    TopologyPage {
        frame: frame(&s),
        map_svg: slot_map_svg(&ranges, &moving_slots(&engines, &moves, progress.as_ref())),
        engines,
        members,
        events,
        ranges,
        proxies,
        moves,
        progress,
        paused,
        plan,
        plan_error,
        drain: q.drain,
        can_start: console.config.launcher.0.is_some(),
    }
    .into_response()
}

/// The Topology page's forms that grow and shrink: add an engine, remove one, apply a plan
/// (rebalance or drain), pause or resume the moves.
pub async fn topology_change(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(action): Path<String>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    let field = |k: &str| f.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let failed = |status: StatusCode, why: &str| error_page(Some(frame(&s)), status, why);
    match action.as_str() {
        "add-engine" => {
            if let Err(e) = crate::engines::add(&console, field("address").as_deref(), Default::default()).await {
                return failed(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string());
            }
        }
        "remove-engine" => {
            if let Err(e) = crate::engines::remove(&console, &field("address").unwrap_or_default()).await {
                return failed(StatusCode::CONFLICT, &e.to_string());
            }
        }
        "apply" => {
            let drain = field("drain");
            let plan = match crate::moves::plan(&console, drain.as_deref()).await {
                Ok(p) => p,
                Err(e) => return failed(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string()),
            };
            if let Err(e) = crate::moves::apply(&console, &plan).await {
                return failed(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string());
            }
        }
        "pause" | "resume" => {
            if let Err(e) = crate::moves::set_paused(&console, action == "pause").await {
                return op_error(&s, e.into());
            }
        }
        _ => return failed(StatusCode::NOT_FOUND, "No such change."),
    }
    Redirect::to("/topology").into_response()
}

/// "Fail over now" on the Topology page: the engine's best replica takes its place.
pub async fn fail_over(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    let Some(idx) = f.get("engine").and_then(|e| e.parse::<usize>().ok()) else {
        return error_page(Some(frame(&s)), StatusCode::UNPROCESSABLE_ENTITY, "Which engine? (engine: a number)");
    };
    let engines = db::topology(&console.db).await.map(|t| t.0).unwrap_or_default();
    let Some(old) = engines.get(idx).cloned() else {
        return error_page(Some(frame(&s)), StatusCode::NOT_FOUND, &format!("There is no engine {idx} in the slot map."));
    };
    let replicas: Vec<String> = db::replicas(&console.db).await.unwrap_or_default().into_iter().filter(|(_, e)| *e == idx).map(|(a, _)| a).collect();
    if replicas.is_empty() {
        return error_page(Some(frame(&s)), StatusCode::CONFLICT, &format!("Engine {idx} ({old}) has no replica to fail over to."));
    }
    match crate::failover::planned_failover(&console, idx, &old, &replicas).await {
        Ok(true) => Redirect::to("/topology").into_response(),
        Ok(false) => error_page(Some(frame(&s)), StatusCode::BAD_GATEWAY, "No replica could be promoted (see the events on the Topology page)."),
        Err(e) => op_error(&s, e.into()),
    }
}

pub async fn tokens(State(console): State<Arc<Console>>, PageUser(s, _): PageUser) -> Response {
    match db::tokens(&console.db).await {
        Ok(tokens) => TokensPage { frame: frame(&s), tokens, created: None }.into_response(),
        Err(e) => op_error(&s, e.into()),
    }
}

pub async fn create_token(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    let name = f.get("name").cloned().unwrap_or_default();
    let days = match f.get("expires_in_days").map(|d| d.trim()).filter(|d| !d.is_empty()) {
        None => None,
        Some(d) => match d.parse::<i64>() {
            Ok(d) => Some(d),
            Err(_) => return error_page(Some(frame(&s)), StatusCode::UNPROCESSABLE_ENTITY, "Expires in: a number of days."),
        },
    };
    let asked = ops::TokenRequest { name: &name, role: f.get("role").map(String::as_str), expires_in_days: days, tenant: f.get("tenant").map(String::as_str) };
    match ops::new_token(&console, &format!("user {}", s.user), s.role, &asked).await {
        Ok((_, token, _, _, _)) => {
            let tokens = db::tokens(&console.db).await.unwrap_or_default();
            TokensPage { frame: frame(&s), tokens, created: Some(token) }.into_response()
        }
        Err(e) => op_error(&s, e),
    }
}

pub async fn revoke_token(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(id): Path<i64>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    match db::revoke_token(&console.db, id).await {
        Ok(true) => Redirect::to("/tokens").into_response(),
        Ok(false) => error_page(Some(frame(&s)), StatusCode::NOT_FOUND, "No such active token."),
        Err(e) => op_error(&s, e.into()),
    }
}

pub async fn users(State(console): State<Arc<Console>>, PageUser(s, _): PageUser) -> Response {
    match db::users(&console.db).await {
        Ok(users) => crate::views::UsersPage { frame: frame(&s), users, roles: auth::Role::NAMES }.into_response(),
        Err(e) => op_error(&s, e.into()),
    }
}

pub async fn create_user(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    let field = |k: &str| f.get(k).map(String::as_str).unwrap_or("");
    match ops::create_user(&console, field("name"), field("password"), field("role"), Some(field("tenant"))).await {
        Ok(_) => Redirect::to("/users").into_response(),
        Err(e) => op_error(&s, e),
    }
}

pub async fn set_user_role(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    match ops::set_user_role(&console, &name, f.get("role").map(String::as_str).unwrap_or("")).await {
        Ok(_) => Redirect::to("/users").into_response(),
        Err(e) => op_error(&s, e),
    }
}

pub async fn delete_user(State(console): State<Arc<Console>>, PageUser(s, _): PageUser, Path(name): Path<String>, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    match ops::delete_user(&console, &name, &s.user).await {
        Ok(()) => Redirect::to("/users").into_response(),
        Err(e) => op_error(&s, e),
    }
}

pub async fn events(State(console): State<Arc<Console>>, PageUser(s, _): PageUser) -> Response {
    match db::events(&console.db, 500).await {
        Ok(events) => crate::views::EventsPage { frame: frame(&s), events }.into_response(),
        Err(e) => op_error(&s, e.into()),
    }
}

pub async fn account(PageUser(s, _): PageUser) -> Response {
    AccountPage { frame: frame(&s), message: None, error: None }.into_response()
}

/// Changes the logged-in user's password (the current one is asked again); other sessions of
/// the user end.
pub async fn change_password(State(console): State<Arc<Console>>, PageUser(s, token): PageUser, Form(f): Fields) -> Response {
    if let Err(r) = csrf_ok(&s, &f) {
        return r;
    }
    let again = |status: StatusCode, e: &str| (status, AccountPage { frame: frame(&s), message: None, error: Some(e.to_string()) }).into_response();
    let field = |k: &str| f.get(k).cloned().unwrap_or_default();
    let (current, new, repeat) = (field("current"), field("new"), field("repeat"));
    if new.len() < 8 {
        return again(StatusCode::UNPROCESSABLE_ENTITY, "The new password needs at least 8 characters.");
    }
    if new != repeat {
        return again(StatusCode::UNPROCESSABLE_ENTITY, "The new password and its repetition differ.");
    }
    let Ok(Some((id, hash))) = db::user_by_name(&console.db, &s.user).await else {
        return error_page(Some(frame(&s)), StatusCode::INTERNAL_SERVER_ERROR, "Cannot read the user.");
    };
    let checked = tokio::task::spawn_blocking(move || auth::verify_password(&current, &hash).then(|| auth::hash_password(&new))).await.ok().flatten();
    let Some(new_hash) = checked else {
        return again(StatusCode::UNAUTHORIZED, "The current password is wrong.");
    };
    match db::set_password(&console.db, id, &new_hash, &crate::tenants::sha256_hex(token.as_bytes())).await {
        Ok(()) => AccountPage { frame: frame(&s), message: Some("Password changed; other sessions have ended.".into()), error: None }.into_response(),
        Err(e) => op_error(&s, e.into()),
    }
}
