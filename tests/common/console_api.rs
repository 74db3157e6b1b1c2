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

/// Whether `value` matches `schema` of the OpenAPI document `doc` (its `$ref`s resolved):
/// type, `nullable`, `enum`, `required`, `properties`, `items`, `additionalProperties` and
/// `oneOf` — the subset of OpenAPI 3.0's schema objects the console's document uses. (By
/// hand: JSON Schema validators do not take OpenAPI 3.0's `nullable`.) The error says where.
pub fn conforms(value: &Value, schema: &Value, doc: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema["$ref"].as_str() {
        let target = r.trim_start_matches("#/").split('/').fold(doc, |v, k| &v[k]);
        assert!(!target.is_null(), "dangling $ref {r}");
        return conforms(value, target, doc, at);
    }
    if value.is_null() && schema["nullable"] == true {
        return Ok(());
    }
    if let Some(options) = schema["oneOf"].as_array() {
        return if options.iter().any(|o| conforms(value, o, doc, at).is_ok()) { Ok(()) } else { Err(format!("{at}: {value} matches none of {schema}")) };
    }
    let ok = match schema["type"].as_str() {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if !ok {
        return Err(format!("{at}: {value} is not of type {}", schema["type"]));
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(value) {
            return Err(format!("{at}: {value} is not one of {schema}", schema = schema["enum"]));
        }
    }
    if let Some(fields) = value.as_object() {
        for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !fields.contains_key(r) {
                return Err(format!("{at}: required '{r}' missing in {value}"));
            }
        }
        for (k, v) in fields {
            let here = format!("{at}.{k}");
            match (schema["properties"].get(k), schema.get("additionalProperties")) {
                (Some(s), _) => conforms(v, s, doc, &here)?,
                (None, Some(Value::Bool(false))) => return Err(format!("{here}: not a documented property")),
                (None, Some(s)) if s.is_object() => conforms(v, s, doc, &here)?,
                _ => {}
            }
        }
    }
    if let (Some(items), Some(s)) = (value.as_array(), schema.get("items")) {
        for (i, v) in items.iter().enumerate() {
            conforms(v, s, doc, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// A value for `schema`, mostly valid, sometimes of another type or out of its enum (with
/// `rng`): what a schemathesis-like test sends.
pub fn generate(schema: &Value, doc: &Value, rng: &mut fastrand::Rng) -> Value {
    if let Some(r) = schema["$ref"].as_str() {
        let target = r.trim_start_matches("#/").split('/').fold(doc, |v, k| &v[k]);
        return generate(target, doc, rng);
    }
    const STRINGS: [&str; 10] = ["shop", "", " ", "..", "a/b", "😀", "x'; DROP TABLE tenants;--", "100mb", "-1", "127.0.0.1:1"];
    if rng.u8(0..10) == 0 {
        return match rng.u8(0..6) {
            0 => Value::Null,
            1 => serde_json::json!(rng.i64(-5..1_000_000)),
            2 => serde_json::json!(true),
            3 => serde_json::json!([1, "a"]),
            4 => serde_json::json!({"nested": {}}),
            _ => serde_json::json!(1e300),
        };
    }
    if let Some(options) = schema["oneOf"].as_array() {
        return generate(&options[rng.usize(0..options.len())], doc, rng);
    }
    if let Some(allowed) = schema["enum"].as_array() {
        return if rng.u8(0..8) == 0 { serde_json::json!("not-one-of-them") } else { allowed[rng.usize(0..allowed.len())].clone() };
    }
    match schema["type"].as_str() {
        Some("object") => {
            let mut out = serde_json::Map::new();
            for (k, s) in schema["properties"].as_object().into_iter().flatten() {
                let required = schema["required"].as_array().is_some_and(|r| r.iter().any(|x| x == k));
                if required || rng.bool() {
                    out.insert(k.clone(), generate(s, doc, rng));
                }
            }
            if rng.u8(0..10) == 0 {
                out.insert("unknown_field".into(), serde_json::json!(1));
            }
            Value::Object(out)
        }
        Some("array") => (0..rng.usize(0..3)).map(|_| generate(&schema["items"], doc, rng)).collect(),
        Some("integer") => serde_json::json!([0, 1, 7, -1, 65535, 65536, i64::MAX][rng.usize(0..7)]),
        Some("number") => serde_json::json!([0.0, 0.5, -1.0, 1e9][rng.usize(0..4)]),
        Some("boolean") => serde_json::json!(rng.bool()),
        _ => serde_json::json!(STRINGS[rng.usize(0..STRINGS.len())]),
    }
}
