//! The OpenAPI 3.0 description of `/api/v1`, written out by hand (small, and it must match
//! the routes in `api.rs`; `tests/console_e2e.rs` calls every operation it lists).

use serde_json::{json, Value};

fn op(summary: &str, ok: &str, errors: &[&str]) -> Value {
    let mut responses = serde_json::Map::new();
    responses.insert(ok.to_string(), json!({ "description": "success", "content": { "application/json": { "schema": { "type": "object" } } } }));
    for e in errors.iter().chain(&["401"]) {
        responses.insert(e.to_string(), json!({ "$ref": "#/components/responses/Error" }));
    }
    json!({ "summary": summary, "responses": responses })
}

fn with_body(mut v: Value, schema: &str) -> Value {
    v["requestBody"] = json!({ "required": true, "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } });
    v
}

pub fn document() -> Value {
    let name = json!([{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }]);
    let mut tenant = json!({
        "get": op("A tenant's settings (never its password).", "200", &["404"]),
        "patch": with_body(op("Change a tenant's settings; applied live to proxies and engines.", "200", &["404", "409", "422"]), "TenantInput"),
        "delete": op("Delete a tenant: proxies refuse it, engines flush its data.", "200", &["404"]),
    });
    tenant["parameters"] = name.clone();
    let sub = |v: Value| {
        let mut v = v;
        v["parameters"] = name.clone();
        v
    };
    json!({
        "openapi": "3.0.3",
        "info": { "title": "Terrace console API", "version": "1", "description": "Tenants, their compression retraining, statistics and cost advice, the topology, and growing or shrinking it (engines, slot moves, rebalancing). Authenticate with `Authorization: Bearer <token>` (tokens are created on the console's API tokens page)." },
        "servers": [{ "url": "/api/v1" }],
        "security": [{ "bearer": [] }],
        "paths": {
            "/tenants": {
                "get": op("List tenants.", "200", &[]),
                "post": with_body(op("Create a tenant; pushed to proxies and engines at once.", "201", &["409", "415", "422"]), "TenantInput"),
            },
            "/tenants/{name}": tenant,
            "/tenants/{name}/retrain": sub(json!({
                "post": op("Retrain the tenant's compression dictionary on every engine (background; poll GET).", "202", &["404", "409", "422"]),
                "get": op("The last retraining run: progress and per-engine result.", "200", &["404"]),
            })),
            "/tenants/{name}/stats": sub(json!({ "get": op("Per-engine workload and compression statistics and usage samples.", "200", &["404"]) })),
            "/tenants/{name}/advice": sub(json!({ "get": {
                "summary": "The cost advisor's evaluation and recommendation (TERRACE.ADVISE) with the workload (TERRACE.WORKLOAD), from the first engine that answers or from `engine` (its index in the slot map).",
                "parameters": [{ "name": "engine", "in": "query", "required": false, "schema": { "type": "integer" } }],
                "responses": op("", "200", &["404", "502"])["responses"].clone(),
            } })),
            "/tenants/{name}/apply": sub(json!({ "post": with_body(op("Apply one of the advisor's configurations to the tenant: `option` names it (as in the advice's options; absent: the recommended one). 409 when the engines cannot run it or it is today's.", "200", &["404", "409", "422", "502"]), "ApplyRequest") })),
            "/topology": { "get": op("Engines (primaries), their replicas, each one's role, offset and lag as last checked (`members`), the slot map, the proxies and the coordinator's latest events.", "200", &[]) },
            "/topology/failover": { "post": with_body(op("Fail an engine over to its best replica now (planned maintenance).", "200", &["404", "409", "422", "502"]), "FailoverRequest") },
            "/nodes": { "get": op("Health and load of proxies and engines as last checked, with what of each engine's data survives a restart (`durability`).", "200", &[]) },
            "/snapshot": { "post": op("Every engine and replica starts a snapshot now (BGSAVE); each one's answer. 502 when one could not (down, or saving already).", "202", &["502"]) },
            "/engines": { "post": with_body(op("Add an engine to the slot map, owning no slots yet (a rebalance gives it its share): a running one, or one `terrace up` starts.", "201", &["409", "422", "502"]), "NewEngine") },
            "/engines/{address}": {
                "parameters": [{ "name": "address", "in": "path", "required": true, "schema": { "type": "string" }, "description": "host:port" }],
                "delete": op("Remove an engine that owns no slots (drain it first), with its replicas.", "200", &["409"]),
            },
            "/moves": {
                "get": op("Slot moves, newest first, whether the queue is paused, and the progress of the move under way.", "200", &[]),
                "post": with_body(op("Queue a move of slots from one engine to another.", "201", &["422"]), "NewMove"),
            },
            "/moves/pause": { "post": op("Pause the queue: no new move starts (the one under way finishes).", "200", &[]) },
            "/moves/resume": { "post": op("Resume the queue.", "200", &[]) },
            "/rebalance": {
                "get": {
                    "summary": "The plan a rebalance would queue: which slots move where, the keys and bytes of each move, the estimated time. With `drain`, the plan that empties that engine.",
                    "parameters": [{ "name": "drain", "in": "query", "required": false, "schema": { "type": "string" } }],
                    "responses": op("", "200", &["422"])["responses"].clone(),
                },
                "post": with_body(op("Queue a rebalance (or a drain) as planned now.", "201", &["422"]), "RebalanceRequest"),
            },
            "/tokens": {
                "get": op("List API tokens (without the tokens).", "200", &[]),
                "post": with_body(op("Create an API token; the answer shows it once.", "201", &["422"]), "NewToken"),
            },
            "/tokens/{id}": {
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } }],
                "delete": op("Revoke an API token.", "200", &["404"]),
            },
            "/openapi.json": { "get": op("This document.", "200", &[]) },
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "responses": { "Error": { "description": "failure", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } } },
            "schemas": {
                "Error": { "type": "object", "required": ["error"], "properties": { "error": { "type": "string" } } },
                "FailoverRequest": { "type": "object", "required": ["engine"], "properties": { "engine": { "type": "integer", "minimum": 0 } }, "additionalProperties": false },
                "NewEngine": {
                    "type": "object",
                    "properties": {
                        "address": { "type": "string", "description": "host:port of a running engine; omitted: `terrace up` starts one and supervises it" },
                        "replicas": { "oneOf": [{ "type": "array", "items": { "type": "string" } }, { "type": "integer", "minimum": 0, "maximum": 4 }], "description": "Its replicas: running engines' host:port, or how many `terrace up` starts; the coordinator keeps them following it." },
                    },
                    "additionalProperties": false,
                },
                "NewMove": {
                    "type": "object",
                    "required": ["source", "target", "slots"],
                    "properties": {
                        "source": { "type": "string", "description": "host:port of the engine owning the slots" },
                        "target": { "type": "string" },
                        "slots": { "type": "string", "description": "Ranges: \"0-99 200\"" },
                    },
                    "additionalProperties": false,
                },
                "ApplyRequest": { "type": "object", "properties": { "option": { "type": "string", "description": "A configuration's name from the advice's options." } }, "additionalProperties": false },
                "RebalanceRequest": { "type": "object", "properties": { "drain": { "type": "string", "description": "Empty this engine (host:port) onto the others." } }, "additionalProperties": false },
                "NewToken": { "type": "object", "required": ["name"], "properties": { "name": { "type": "string", "maxLength": 64 } }, "additionalProperties": false },
                "TenantInput": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "name": { "type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$", "description": "Create only." },
                        "password": { "type": "string", "minLength": 1, "description": "Required on create; on update, changes it (it cannot be removed: without one the proxy would take any password). Stored as SHA-256, never shown." },
                        "max_memory": { "oneOf": [{ "type": "integer" }, { "type": "string" }], "nullable": true, "description": "Bytes or a size (\"100mb\") over all engines; null or 0 = no limit." },
                        "max_qps": { "oneOf": [{ "type": "integer" }, { "type": "string" }], "nullable": true },
                        "compression": { "type": "string", "enum": crate::tenants::COMPRESSIONS },
                        "compression_mode": { "type": "string", "enum": crate::tenants::COMPRESSION_MODES },
                        "storage_mode": { "type": "string", "enum": crate::tenants::STORAGE_MODES },
                        "tier_policy": { "type": "string", "enum": crate::tenants::TIER_POLICIES },
                        "wal": { "type": "string", "enum": crate::tenants::WAL_MODES },
                        "memcache_port": { "oneOf": [{ "type": "integer" }, { "type": "string" }], "nullable": true },
                        "replica_reads": { "type": "boolean", "description": "Reads go to replicas of the engine owning the key when it has some in sync; they may miss the latest writes." },
                    }
                }
            }
        }
    })
}
