//! The v3 KV and lease calls over etcd's JSON gateway: keys and values travel in base64,
//! 64-bit numbers as JSON strings.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::EtcdError;

/// A client of one etcd cluster: each call goes to the endpoint that answered last, and to
/// the next ones in turn when it cannot be reached (a request that reached one and failed
/// is not sent again: it may have been applied).
pub struct Client {
    endpoints: Vec<String>,
    http: reqwest::Client,
    preferred: AtomicUsize,
    timeout: Duration,
}

/// A key with its value and revisions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// The revision that created it (it changes only when the key is deleted and made
    /// again), the last that changed it, and the lease it is attached to (0: none).
    pub create_revision: i64,
    pub mod_revision: i64,
    pub lease: i64,
}

/// A transaction's condition on one key.
#[derive(Debug, Clone)]
pub enum Compare {
    /// The key was last changed at this revision (0: it does not exist).
    ModRevision(Vec<u8>, i64),
    /// The key was created at this revision (0: it does not exist).
    CreateRevision(Vec<u8>, i64),
    /// The key holds this value.
    Value(Vec<u8>, Vec<u8>),
}

/// A transaction's operation.
#[derive(Debug, Clone)]
pub enum Op {
    Put { key: Vec<u8>, value: Vec<u8>, lease: i64 },
    Delete { key: Vec<u8> },
    Get { key: Vec<u8> },
}

/// What a transaction did: whether its compares held (its success branch ran), the store's
/// revision after it, and what each `Op::Get` of the branch that ran found.
#[derive(Debug, Clone, Default)]
pub struct TxnOutcome {
    pub succeeded: bool,
    pub revision: i64,
    pub gets: Vec<Vec<KeyValue>>,
}

impl Client {
    /// A client of the cluster at `endpoints` (`host:port` or `http://host:port`), each
    /// call waiting at most `timeout`.
    pub fn new(endpoints: &[String], timeout: Duration) -> Result<Client, EtcdError> {
        if endpoints.is_empty() {
            return Err(EtcdError::NoEndpoints);
        }
        let endpoints = endpoints.iter().map(|e| normalize(e)).collect::<Result<Vec<_>, _>>()?;
        let http = reqwest::Client::builder().connect_timeout(timeout).build().map_err(|source| EtcdError::Http { endpoint: endpoints[0].clone(), source })?;
        Ok(Client { endpoints, http, preferred: AtomicUsize::new(0), timeout })
    }

    /// The endpoints, as URLs.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// POSTs `body` to `path` on the endpoints in turn; the answer's JSON.
    pub(crate) async fn call(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let response = self.send(path, body, Some(self.timeout)).await?;
        response.json().await.map_err(|e| EtcdError::Decode(e.to_string()))
    }

    /// POSTs `body` to `path`, and answers the response once its status is 200 (a watch
    /// reads its body as a stream; `timeout` None: no limit).
    pub(crate) async fn send(&self, path: &str, body: &Value, timeout: Option<Duration>) -> Result<reqwest::Response, EtcdError> {
        let first = self.preferred.load(Ordering::Relaxed);
        let mut last = None;
        for i in 0..self.endpoints.len() {
            let at = (first + i) % self.endpoints.len();
            let endpoint = &self.endpoints[at];
            let mut request = self.http.post(format!("{endpoint}{path}")).json(body);
            if let Some(t) = timeout {
                request = request.timeout(t);
            }
            match request.send().await {
                Ok(response) if response.status().is_success() => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Ok(response);
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body = response.text().await.unwrap_or_default();
                    return Err(EtcdError::Status { endpoint: endpoint.clone(), status, body });
                }
                // Not reached: the next endpoint may be.
                Err(source) if source.is_connect() => last = Some(EtcdError::Http { endpoint: endpoint.clone(), source }),
                Err(source) => return Err(EtcdError::Http { endpoint: endpoint.clone(), source }),
            }
        }
        Err(last.unwrap_or(EtcdError::NoEndpoints))
    }

    /// The key's value and revisions (None: no such key), and the store's revision.
    pub async fn get(&self, key: &[u8]) -> Result<(Option<KeyValue>, i64), EtcdError> {
        let answer = self.call("/v3/kv/range", &json!({ "key": B64.encode(key) })).await?;
        Ok((kvs(&answer).into_iter().next(), revision(&answer)))
    }

    /// Every key under `prefix`, in key order, and the store's revision.
    pub async fn get_prefix(&self, prefix: &[u8]) -> Result<(Vec<KeyValue>, i64), EtcdError> {
        let body = json!({ "key": B64.encode(prefix), "range_end": B64.encode(prefix_end(prefix)) });
        let answer = self.call("/v3/kv/range", &body).await?;
        Ok((kvs(&answer), revision(&answer)))
    }

    /// Sets the key (attached to `lease`, 0: none); the store's revision after.
    pub async fn put(&self, key: &[u8], value: &[u8], lease: i64) -> Result<i64, EtcdError> {
        let answer = self.call("/v3/kv/put", &put_body(key, value, lease)).await?;
        Ok(revision(&answer))
    }

    /// Deletes the key; how many were deleted (0 or 1).
    pub async fn delete(&self, key: &[u8]) -> Result<i64, EtcdError> {
        let answer = self.call("/v3/kv/deleterange", &json!({ "key": B64.encode(key) })).await?;
        Ok(int(&answer["deleted"]))
    }

    /// Runs `success` if every compare holds, else `failure`, as one step.
    pub async fn txn(&self, compares: &[Compare], success: &[Op], failure: &[Op]) -> Result<TxnOutcome, EtcdError> {
        let body = json!({
            "compare": compares.iter().map(compare_json).collect::<Vec<_>>(),
            "success": success.iter().map(op_json).collect::<Vec<_>>(),
            "failure": failure.iter().map(op_json).collect::<Vec<_>>(),
        });
        let answer = self.call("/v3/kv/txn", &body).await?;
        let gets = answer["responses"].as_array().map(|r| r.iter().filter(|r| r.get("response_range").is_some()).map(|r| kvs(&r["response_range"])).collect());
        Ok(TxnOutcome { succeeded: answer["succeeded"].as_bool().unwrap_or(false), revision: revision(&answer), gets: gets.unwrap_or_default() })
    }

    /// A lease of `ttl` (whole seconds, at least 1); its id.
    pub async fn lease_grant(&self, ttl: Duration) -> Result<i64, EtcdError> {
        let answer = self.call("/v3/lease/grant", &json!({ "TTL": ttl.as_secs().max(1).to_string() })).await?;
        match int(&answer["ID"]) {
            0 => Err(EtcdError::Decode(format!("a lease grant without an ID: {answer}"))),
            id => Ok(id),
        }
    }

    /// Renews the lease; its new time to live in seconds, None once it has expired (or was
    /// revoked): its keys are gone.
    pub async fn lease_keepalive(&self, id: i64) -> Result<Option<i64>, EtcdError> {
        let answer = self.call("/v3/lease/keepalive", &json!({ "ID": id.to_string() })).await?;
        let ttl = int(&answer["result"]["TTL"]);
        Ok((ttl > 0).then_some(ttl))
    }

    /// Ends the lease now, deleting its keys.
    pub async fn lease_revoke(&self, id: i64) -> Result<(), EtcdError> {
        self.call("/v3/lease/revoke", &json!({ "ID": id.to_string() })).await.map(|_| ())
    }
}

/// `host:port` as a URL; URLs as they are (without a trailing slash).
fn normalize(endpoint: &str) -> Result<String, EtcdError> {
    let url = if endpoint.contains("://") { endpoint.trim_end_matches('/').to_string() } else { format!("http://{endpoint}") };
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")).unwrap_or("");
    if rest.is_empty() || !rest.contains(':') || rest.contains('/') {
        return Err(EtcdError::BadEndpoint(endpoint.to_string()));
    }
    Ok(url)
}

/// The first key after every key starting with `prefix` (etcd's `range_end` for a prefix).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // (every key: an empty or all-0xff prefix)
}

/// A 64-bit number as the gateway sends it (a string; absent when 0).
pub(crate) fn int(v: &Value) -> i64 {
    v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_i64()).unwrap_or(0)
}

pub(crate) fn bytes(v: &Value) -> Vec<u8> {
    v.as_str().and_then(|s| B64.decode(s).ok()).unwrap_or_default()
}

pub(crate) fn revision(answer: &Value) -> i64 {
    int(&answer["header"]["revision"])
}

pub(crate) fn key_value(kv: &Value) -> KeyValue {
    KeyValue {
        key: bytes(&kv["key"]),
        value: bytes(&kv["value"]),
        create_revision: int(&kv["create_revision"]),
        mod_revision: int(&kv["mod_revision"]),
        lease: int(&kv["lease"]),
    }
}

fn kvs(answer: &Value) -> Vec<KeyValue> {
    answer["kvs"].as_array().map(|a| a.iter().map(key_value).collect()).unwrap_or_default()
}

fn put_body(key: &[u8], value: &[u8], lease: i64) -> Value {
    let mut body = json!({ "key": B64.encode(key), "value": B64.encode(value) });
    if lease != 0 {
        body["lease"] = json!(lease.to_string());
    }
    body
}

fn compare_json(c: &Compare) -> Value {
    match c {
        Compare::ModRevision(k, r) => json!({ "key": B64.encode(k), "target": "MOD", "result": "EQUAL", "mod_revision": r.to_string() }),
        Compare::CreateRevision(k, r) => json!({ "key": B64.encode(k), "target": "CREATE", "result": "EQUAL", "create_revision": r.to_string() }),
        Compare::Value(k, v) => json!({ "key": B64.encode(k), "target": "VALUE", "result": "EQUAL", "value": B64.encode(v) }),
    }
}

fn op_json(op: &Op) -> Value {
    match op {
        Op::Put { key, value, lease } => json!({ "request_put": put_body(key, value, *lease) }),
        Op::Delete { key } => json!({ "request_delete_range": { "key": B64.encode(key) } }),
        Op::Get { key } => json!({ "request_range": { "key": B64.encode(key) } }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_urls_or_named_wrong() {
        assert_eq!(normalize("10.0.0.1:2379").ok().as_deref(), Some("http://10.0.0.1:2379"));
        assert_eq!(normalize("https://etcd:2379/").ok().as_deref(), Some("https://etcd:2379"));
        assert!(matches!(normalize("etcd"), Err(EtcdError::BadEndpoint(_))));
        assert!(matches!(normalize("http://etcd:2379/v3"), Err(EtcdError::BadEndpoint(_))));
    }

    #[test]
    fn a_prefix_ends_after_its_last_key() {
        assert_eq!(prefix_end(b"/terrace/"), b"/terrace0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b""), vec![0]);
    }

    #[test]
    fn numbers_come_as_strings_and_zero_is_left_out() {
        let kv = key_value(&json!({ "key": B64.encode("k"), "create_revision": "7", "mod_revision": "9" }));
        assert_eq!(kv, KeyValue { key: b"k".to_vec(), value: Vec::new(), create_revision: 7, mod_revision: 9, lease: 0 });
    }
}
