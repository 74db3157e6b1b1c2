//! A key's or a prefix's changes, streamed by the gateway as one JSON object per line.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::client::{int, key_value, prefix_end, Client, KeyValue};
use crate::EtcdError;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Put(KeyValue),
    /// The key, and the revision that deleted it.
    Delete(Vec<u8>, i64),
}

/// An open watch: `next` answers the changes in revision order.
pub struct Watch {
    response: reqwest::Response,
    buf: Vec<u8>,
    from: i64,
}

impl Watch {
    /// Watches `key` (every key under it when `prefix`) from revision `from` on (0: from
    /// now); answers once etcd has created the watch.
    pub async fn open(client: &Client, key: &[u8], prefix: bool, from: i64) -> Result<Watch, EtcdError> {
        let mut create = json!({ "key": B64.encode(key) });
        if prefix {
            create["range_end"] = json!(B64.encode(prefix_end(key)));
        }
        if from > 0 {
            create["start_revision"] = json!(from.to_string());
        }
        let response = client.send("/v3/watch", &json!({ "create_request": create }), None).await?;
        let mut watch = Watch { response, buf: Vec::new(), from };
        // The first message says the watch was created (or why not).
        let first = watch.message().await?;
        if !first["created"].as_bool().unwrap_or(false) {
            return Err(EtcdError::WatchEnded(format!("etcd did not create the watch: {first}")));
        }
        Ok(watch)
    }

    /// The next changes (at least one).
    pub async fn next(&mut self) -> Result<Vec<Event>, EtcdError> {
        loop {
            let result = self.message().await?;
            if result["canceled"].as_bool().unwrap_or(false) {
                let compacted = int(&result["compact_revision"]);
                if compacted > 0 {
                    return Err(EtcdError::Compacted { wanted: self.from, compacted });
                }
                return Err(EtcdError::WatchEnded(format!("etcd cancelled it: {result}")));
            }
            let events: Vec<Event> = result["events"]
                .as_array()
                .map(|events| {
                    events
                        .iter()
                        .map(|e| {
                            let kv = key_value(&e["kv"]);
                            match e["type"].as_str() {
                                Some("DELETE") => Event::Delete(kv.key, kv.mod_revision),
                                _ => Event::Put(kv),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            if !events.is_empty() {
                return Ok(events);
            }
        }
    }

    /// The next message's `result` object.
    async fn message(&mut self) -> Result<Value, EtcdError> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let message: Value = serde_json::from_slice(&line).map_err(|e| EtcdError::Decode(format!("a watch message: {e}")))?;
                if let Some(error) = message.get("error") {
                    return Err(EtcdError::WatchEnded(error.to_string()));
                }
                return Ok(message["result"].clone());
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                Ok(None) => return Err(EtcdError::WatchEnded("etcd closed the stream".into())),
                Err(e) => return Err(EtcdError::WatchEnded(e.to_string())),
            }
        }
    }
}
