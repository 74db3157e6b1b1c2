//! The events' webhook (`webhook_url`): every event — a change with who made it, a failover,
//! an engine's restart, an alert raised or cleared — is POSTed as JSON, in order, once. A
//! task follows the `events` table (so events any part of the console records are sent,
//! whichever wrote them); a receiver that fails or times out gets the same event again after
//! a pause, events after it wait.

use std::sync::Arc;
use std::time::Duration;

use crate::{db, Console};

const POLL: Duration = Duration::from_secs(1);
const TIMEOUT: Duration = Duration::from_secs(5);

pub async fn run(console: Arc<Console>, url: String) {
    // https:// receivers: the system's CAs, and `tls_ca_cert_file`'s.
    let client = match reqwest::Client::builder().timeout(TIMEOUT).tls_certs_merge(console.config.https_ca.clone()).build() {
        Ok(c) => c,
        Err(e) => return tracing::error!(error = %e, "no webhook client"),
    };
    // From the events recorded after the start.
    let mut sent = db::last_event_id(&console.db).await.unwrap_or(0);
    let mut backoff = POLL;
    loop {
        tokio::time::sleep(backoff).await;
        let pending = match db::events_after(&console.db, sent, 100).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "webhook: cannot read the events");
                continue;
            }
        };
        backoff = POLL;
        for (id, e) in pending {
            let mut body = e.to_json();
            body["id"] = id.into();
            match client.post(&url).json(&body).send().await.and_then(|r| r.error_for_status()) {
                Ok(_) => sent = id,
                Err(err) => {
                    tracing::warn!(error = %err, event = id, "webhook: not delivered; trying again");
                    backoff = (backoff * 4).min(Duration::from_secs(30));
                    break;
                }
            }
        }
    }
}
