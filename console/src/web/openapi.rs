//! The OpenAPI 3.0 description of `/api/v1`, written out by hand (small, and it must match
//! the routes in `api.rs`; `tests/console_e2e.rs` calls every operation it lists).

use serde_json::{json, Value};

/// An operation: its summary, its success status and the schema of that answer (a name in
/// `components/schemas`), and the error statuses it may answer (401 always).
fn op(summary: &str, ok: &str, answer: &str, errors: &[&str]) -> Value {
    let mut responses = serde_json::Map::new();
    let schema = json!({ "$ref": format!("#/components/schemas/{answer}") });
    responses.insert(ok.to_string(), json!({ "description": "success", "content": { "application/json": { "schema": schema } } }));
    // (400: a malformed path parameter, query or body — any operation; 401: no valid token.)
    for e in errors.iter().chain(&["400", "401"]) {
        responses.insert(e.to_string(), json!({ "$ref": "#/components/responses/Error" }));
    }
    json!({ "summary": summary, "responses": responses })
}

/// An operation taking a JSON body of `schema`: a body of another content type is a 415, one
/// that does not match the schema a 422.
fn with_body(mut v: Value, schema: &str) -> Value {
    v["requestBody"] = json!({ "required": true, "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } });
    for e in ["415", "422"] {
        v["responses"][e] = json!({ "$ref": "#/components/responses/Error" });
    }
    v
}

pub fn document() -> Value {
    let name = json!([{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }]);
    let mut tenant = json!({
        "get": op("A tenant's settings (never its password).", "200", "TenantOne", &["404"]),
        "patch": with_body(op("Change a tenant's settings; applied live to proxies and engines.", "200", "Saved", &["404", "409", "422"]), "TenantInput"),
        "delete": op("Delete a tenant: proxies refuse it and close its clients; every engine drops its namespace (keys, stored rows, settings).", "200", "Deleted", &["404"]),
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
                "get": op("List tenants (a caller scoped to one tenant: that one).", "200", "TenantList", &[]),
                "post": with_body(op("Create a tenant; pushed to proxies and engines at once.", "201", "Saved", &["409", "415", "422"]), "TenantInput"),
            },
            "/tenants/{name}": tenant,
            "/tenants/{name}/retrain": sub(json!({
                "post": op("Retrain the tenant's compression dictionary on every engine (background; poll GET).", "202", "RetrainStarted", &["404", "409", "422"]),
                "get": op("The last retraining run: progress and per-engine result.", "200", "RetrainRun", &["404"]),
            })),
            "/tenants/{name}/stats": sub(json!({ "get": op("Per-engine workload and compression statistics and usage samples.", "200", "TenantStats", &["404"]) })),
            "/tenants/{name}/advice": sub(json!({ "get": {
                "summary": "The cost advisor's evaluation and recommendation (TERRACE.ADVISE) with the workload (TERRACE.WORKLOAD), from the first engine that answers or from `engine` (its index in the slot map).",
                "parameters": [{ "name": "engine", "in": "query", "required": false, "schema": { "type": "integer" } }],
                "responses": op("", "200", "Advice", &["404", "502"])["responses"].clone(),
            } })),
            "/tenants/{name}/apply": sub(json!({ "post": with_body(op("Apply one of the advisor's configurations to the tenant: `option` names it (as in the advice's options; absent: the recommended one). 409 when the engines cannot run it or it is today's.", "200", "Applied", &["404", "409", "422", "502"]), "ApplyRequest") })),
            "/topology": { "get": op("Engines (primaries), their replicas, each one's role, offset and lag as last checked (`members`), the slot map, the proxies, the coordinator's latest events and which console coordinates.", "200", "Topology", &[]) },
            "/topology/failover": { "post": with_body(op("Fail an engine over to its best replica now (planned maintenance).", "200", "FailedOver", &["404", "409", "422", "502"]), "FailoverRequest") },
            "/nodes": { "get": op("Health and load of proxies and engines as last checked, with what of each engine's data survives a restart (`durability`).", "200", "Nodes", &[]) },
            "/tenants/{name}/keys": {
                "get": {
                    "summary": "A page of the tenant's keys (SCAN, engine after engine; never KEYS): each one's type, TTL, size, encoding and engine. Pass `cursor` back for the next page (\"0\": the last).",
                    "parameters": [
                        { "name": "name", "in": "path", "required": true, "schema": { "type": "string" } },
                        { "name": "pattern", "in": "query", "required": false, "schema": { "type": "string" }, "description": "A glob, as SCAN's MATCH." },
                        { "name": "cursor", "in": "query", "required": false, "schema": { "type": "string" } },
                    ],
                    "responses": op("", "200", "KeyList", &["404", "422", "502"])["responses"].clone(),
                },
            },
            "/tenants/{name}/key": {
                "parameters": [
                    { "name": "name", "in": "path", "required": true, "schema": { "type": "string" } },
                    { "name": "key", "in": "query", "required": true, "schema": { "type": "string" } },
                ],
                "get": op("One key with the start of its value (4 KiB of a string, 100 elements of a collection).", "200", "KeyOne", &["404", "502"]),
                "delete": op("Delete one key.", "200", "KeyDeleted", &["404", "502"]),
            },
            "/slowlog": {
                "get": {
                    "summary": "Every engine's slow log merged, newest first, each entry with its tenant and engine (a caller scoped to one tenant: that tenant's entries).",
                    "parameters": [{ "name": "tenant", "in": "query", "required": false, "schema": { "type": "string" } }],
                    "responses": op("", "200", "Slowlog", &["502"])["responses"].clone(),
                },
            },
            "/nodes/{address}/history": {
                "get": {
                    "summary": "A proxy's or engine's history: a sample every `sample_ms` for a day, 5-minute averages for 30 days (rates per second over each interval).",
                    "parameters": [{ "name": "address", "in": "path", "required": true, "schema": { "type": "string" } }, { "name": "hours", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 1, "maximum": 720 } }],
                    "responses": op("", "200", "NodeHistory", &[])["responses"].clone(),
                },
            },
            "/tenants/{name}/history": {
                "get": {
                    "summary": "A tenant's history over every engine and proxy: operations per second by command class, hit ratio, latency percentiles at the proxies, memory against its quota, OOM refusals.",
                    "parameters": [{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }, { "name": "hours", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 1, "maximum": 720 } }],
                    "responses": op("", "200", "TenantHistory", &["404"])["responses"].clone(),
                },
            },
            "/snapshot": { "post": op("Every engine and replica starts a snapshot now (BGSAVE); each one's answer. 502 when one could not (down, or saving already).", "202", "Snapshot", &["502"]) },
            "/engines": { "post": with_body(op("Add an engine to the slot map, owning no slots yet (a rebalance gives it its share): a running one, or one `terrace up` starts. Needs the admin role. 422 when what answers at the address does not prove it holds that address's engine password (`terrace engine-password`).", "201", "EngineAdded", &["409", "422", "502"]), "NewEngine") },
            "/engines/{address}": {
                "parameters": [{ "name": "address", "in": "path", "required": true, "schema": { "type": "string" }, "description": "host:port" }],
                "delete": op("Remove an engine that owns no slots (drain it first), with its replicas. Needs the admin role.", "200", "EngineRemoved", &["409"]),
            },
            "/moves": {
                "get": op("Slot moves, newest first, whether the queue is paused, and the progress of the move under way.", "200", "Moves", &[]),
                "post": with_body(op("Queue a move of slots from one engine to another.", "201", "MoveQueued", &["422"]), "NewMove"),
            },
            "/moves/pause": { "post": op("Pause the queue: no new move starts (the one under way finishes).", "200", "Paused", &[]) },
            "/moves/resume": { "post": op("Resume the queue.", "200", "Paused", &[]) },
            "/rebalance": {
                "get": {
                    "summary": "The plan a rebalance would queue: which slots move where, the keys and bytes of each move, the estimated time. With `drain`, the plan that empties that engine.",
                    "parameters": [{ "name": "drain", "in": "query", "required": false, "schema": { "type": "string" } }],
                    "responses": op("", "200", "Plan", &["422"])["responses"].clone(),
                },
                "post": with_body(op("Queue a rebalance (or a drain) as planned now.", "201", "RebalanceQueued", &["422"]), "RebalanceRequest"),
            },
            "/users": {
                "get": op("List the console's users and their roles (admin).", "200", "Users", &["403"]),
                "post": with_body(op("Add a user with a password and a role (admin).", "201", "UserOne", &["403", "409"]), "NewUser"),
            },
            "/users/{user}": {
                "parameters": [{ "name": "user", "in": "path", "required": true, "schema": { "type": "string" } }],
                "patch": with_body(op("Change a user's role; its sessions end (admin; the last admin stays one).", "200", "UserOne", &["403", "404", "409"]), "UserChange"),
                "delete": op("Delete a user; its sessions end (admin; not oneself, not the last admin).", "200", "UserDeleted", &["403", "404", "409"]),
            },
            "/events": {
                "get": {
                    "summary": "The events, newest first: failovers and re-pointed replicas, engine restarts, slot moves, alerts, and every change made through the pages or the API with who made it and the state before and after (the audit log).",
                    "parameters": [{ "name": "limit", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 1, "maximum": 10000 } }],
                    "responses": op("", "200", "Events", &[])["responses"].clone(),
                },
            },
            "/tokens": {
                "get": op("List API tokens (without the tokens).", "200", "Tokens", &[]),
                "post": with_body(op("Create an API token; the answer shows it once.", "201", "TokenCreated", &["422"]), "NewToken"),
            },
            "/tokens/{id}": {
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } }],
                "delete": op("Revoke an API token.", "200", "Revoked", &["404"]),
            },
            "/openapi.json": { "get": op("This document.", "200", "OpenApi", &[]) },
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "responses": { "Error": { "description": "failure", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } } },
            "schemas": {
                "Error": { "type": "object", "required": ["error"], "properties": { "error": { "type": "string" } } },
                "Tenant": {
                    "type": "object",
                    "required": ["name", "has_password", "compression", "compression_mode", "storage_mode", "tier_policy", "wal", "replica_reads", "created_at", "updated_at"],
                    "properties": {
                        "name": { "type": "string" },
                        "has_password": { "type": "boolean" },
                        "max_qps": { "type": "integer", "nullable": true },
                        "max_memory": { "type": "integer", "nullable": true, "description": "Bytes over all engines." },
                        "compression": { "type": "string", "enum": crate::tenants::COMPRESSIONS },
                        "compression_mode": { "type": "string", "enum": crate::tenants::COMPRESSION_MODES },
                        "storage_mode": { "type": "string", "enum": crate::tenants::STORAGE_MODES },
                        "tier_policy": { "type": "string", "enum": crate::tenants::TIER_POLICIES },
                        "wal": { "type": "string", "enum": crate::tenants::WAL_MODES },
                        "memcache_port": { "type": "integer", "nullable": true },
                        "replica_reads": { "type": "boolean" },
                        "created_at": { "type": "integer", "description": "Unix seconds." },
                        "updated_at": { "type": "integer" },
                    },
                },
                "TenantList": { "type": "object", "required": ["tenants"], "properties": { "tenants": { "type": "array", "items": { "$ref": "#/components/schemas/Tenant" } } } },
                "TenantOne": { "type": "object", "required": ["tenant"], "properties": { "tenant": { "$ref": "#/components/schemas/Tenant" } } },
                "Saved": {
                    "type": "object",
                    "required": ["tenant", "applied", "problems"],
                    "properties": {
                        "tenant": { "$ref": "#/components/schemas/Tenant" },
                        "applied": { "type": "boolean", "description": "Every node took it (else `problems` says which did not: down, retried by the reconcile loop)." },
                        "problems": { "type": "array", "items": { "type": "string" } },
                    },
                },
                "Applied": {
                    "type": "object",
                    "required": ["applied_recommendation", "tenant", "applied", "problems"],
                    "properties": {
                        "applied_recommendation": { "type": "string", "description": "The configuration applied." },
                        "tenant": { "$ref": "#/components/schemas/Tenant" },
                        "applied": { "type": "boolean" },
                        "problems": { "type": "array", "items": { "type": "string" } },
                    },
                },
                "Deleted": { "type": "object", "required": ["deleted", "problems"], "properties": { "deleted": { "type": "string" }, "problems": { "type": "array", "items": { "type": "string" } } } },
                "RetrainStarted": { "type": "object", "required": ["retrain", "status"], "properties": { "retrain": { "type": "integer" }, "status": { "type": "string", "enum": ["running"] } } },
                "RetrainRun": {
                    "type": "object",
                    "required": ["retrain"],
                    "properties": { "retrain": {
                        "type": "object",
                        "nullable": true,
                        "description": "null: never retrained.",
                        "required": ["id", "tenant", "started_at", "engines_total", "engines_done", "status"],
                        "properties": {
                            "id": { "type": "integer" },
                            "tenant": { "type": "string" },
                            "started_at": { "type": "integer" },
                            "finished_at": { "type": "integer", "nullable": true },
                            "engines_total": { "type": "integer" },
                            "engines_done": { "type": "integer" },
                            "status": { "type": "string", "enum": ["running", "done", "failed"] },
                            "result": { "type": "object", "nullable": true, "description": "Per engine address: its new generation, trained ratio and sample size, or its error." },
                        },
                    } },
                },
                "TenantStats": {
                    "type": "object",
                    "required": ["tenant", "engines", "usage"],
                    "properties": {
                        "tenant": { "type": "string" },
                        "engines": { "type": "object", "description": "Per engine address: TERRACE.WORKLOAD and compression statistics, or its error.", "additionalProperties": { "type": "object" } },
                        "usage": { "type": "array", "items": { "type": "object" }, "description": "Samples of logical and stored bytes over time." },
                    },
                },
                "Advice": {
                    "type": "object",
                    "required": ["tenant", "engine", "advise", "workload"],
                    "properties": {
                        "tenant": { "type": "string" },
                        "engine": { "type": "string", "description": "The engine costed, or \"all N engines (costed on …)\"." },
                        "advise": {
                            "type": "object",
                            "required": ["advice", "live"],
                            "properties": {
                                "advice": {
                                    "type": "object",
                                    "required": ["recommended", "cheapest", "options", "reasons", "estimate"],
                                    "properties": {
                                        "recommended": { "type": "string" },
                                        "cheapest": { "type": "string", "description": "Differs from `recommended` while hysteresis keeps the incumbent." },
                                        "current": { "type": "string", "nullable": true },
                                        "expected_change": { "type": "number", "nullable": true },
                                        "estimate": { "type": "boolean" },
                                        "options": { "type": "array", "items": { "type": "object", "required": ["name", "setup", "evaluation"], "properties": { "name": { "type": "string" }, "setup": { "type": "object" }, "evaluation": { "type": "object" }, "cannot_run": { "type": "string", "nullable": true } } } },
                                        "reasons": { "type": "array", "items": { "type": "string" } },
                                    },
                                },
                                "live": { "type": "object", "description": "The workload costed." },
                                "workload_of": { "type": "string", "enum": ["every engine", "this engine"] },
                            },
                        },
                        "workload": { "type": "object", "description": "TERRACE.WORKLOAD, summed over the engines." },
                    },
                },
                "Topology": {
                    "type": "object",
                    "required": ["engines", "replicas", "members", "slots", "proxies", "events"],
                    "properties": {
                        "engines": { "type": "array", "items": { "type": "string" } },
                        "replicas": { "type": "array", "items": { "type": "object" } },
                        "members": { "type": "array", "items": { "type": "object", "required": ["address", "engine", "role", "up"], "properties": { "address": { "type": "string" }, "engine": { "type": "integer" }, "role": { "type": "string", "enum": ["primary", "replica"] }, "up": { "type": "boolean" }, "offset": { "type": "integer" }, "linked": { "type": "boolean" }, "lag": { "type": "integer", "nullable": true } } } },
                        "slots": { "type": "array", "items": { "type": "object" } },
                        "proxies": { "type": "array", "items": { "type": "string" } },
                        "events": { "type": "array", "items": { "type": "object" } },
                        "coordinator": { "type": "string", "nullable": true, "description": "The console that coordinates (host:port): this one when alone; elected on etcd otherwise (null: none now)." },
                        "standby": { "type": "string", "nullable": true, "description": "Why this console does not campaign to coordinate, if it does not (another console database owns the state in etcd)." },
                    },
                },
                "FailedOver": { "type": "object", "required": ["engine", "previous"], "properties": { "engine": { "type": "integer" }, "primary": { "type": "string", "nullable": true }, "previous": { "type": "string" } } },
                "NodeStatus": {
                    "type": "object",
                    "required": ["address", "kind", "up", "in_sync", "checked_at"],
                    "properties": {
                        "address": { "type": "string" },
                        "kind": { "type": "string", "enum": ["proxy", "engine"] },
                        "up": { "type": "boolean" },
                        "in_sync": { "type": "boolean" },
                        "error": { "type": "string", "nullable": true },
                        "checked_at": { "type": "integer" },
                        "pushed_at": { "type": "integer", "nullable": true },
                        "run_id": { "type": "string", "nullable": true },
                        "used_memory": { "type": "integer", "nullable": true },
                        "pmem_bytes": { "type": "integer", "nullable": true },
                        "ops_per_sec": { "type": "integer", "nullable": true },
                        "hits": { "type": "integer", "nullable": true },
                        "misses": { "type": "integer", "nullable": true },
                        "clients": { "type": "integer", "nullable": true },
                        "durability": { "type": "string", "nullable": true, "description": "What of its data survives a restart." },
                    },
                },
                "Nodes": { "type": "object", "required": ["proxies", "engines"], "properties": { "proxies": { "type": "array", "items": { "$ref": "#/components/schemas/NodeStatus" } }, "engines": { "type": "array", "items": { "$ref": "#/components/schemas/NodeStatus" } } } },
                "KeyRow": {
                    "type": "object",
                    "required": ["key", "type", "encoding", "engine"],
                    "properties": {
                        "key": { "type": "string" },
                        "type": { "type": "string" },
                        "ttl_ms": { "type": "integer", "nullable": true, "description": "null: no expiry." },
                        "bytes": { "type": "integer", "nullable": true },
                        "encoding": { "type": "string" },
                        "engine": { "type": "string" },
                        "length": { "type": "integer", "nullable": true },
                        "value": { "type": "array", "items": { "type": "string" } },
                        "truncated": { "type": "boolean" },
                    },
                },
                "KeyList": { "type": "object", "required": ["tenant", "keys", "cursor"], "properties": { "tenant": { "type": "string" }, "keys": { "type": "array", "items": { "$ref": "#/components/schemas/KeyRow" } }, "cursor": { "type": "string" } } },
                "KeyOne": { "type": "object", "required": ["tenant", "key"], "properties": { "tenant": { "type": "string" }, "key": { "$ref": "#/components/schemas/KeyRow" } } },
                "KeyDeleted": { "type": "object", "required": ["tenant", "key", "deleted"], "properties": { "tenant": { "type": "string" }, "key": { "type": "string" }, "deleted": { "type": "boolean", "description": "false: there was no such key." } } },
                "Slowlog": {
                    "type": "object",
                    "required": ["entries", "problems"],
                    "properties": {
                        "entries": { "type": "array", "items": { "type": "object", "required": ["id", "time", "duration_us", "args", "tenant", "engine"], "properties": { "id": { "type": "integer" }, "time": { "type": "integer" }, "duration_us": { "type": "integer" }, "args": { "type": "array", "items": { "type": "string" } }, "client": { "type": "string" }, "client_name": { "type": "string" }, "tenant": { "type": "string" }, "engine": { "type": "string" } } } },
                        "problems": { "type": "array", "items": { "type": "string" }, "description": "Engines whose slow log could not be read." },
                    },
                },
                "User": { "type": "object", "required": ["name", "role", "created_at"], "properties": { "name": { "type": "string" }, "role": { "type": "string", "enum": crate::auth::Role::NAMES }, "created_at": { "type": "integer" }, "tenant": { "type": "string", "nullable": true, "description": "The one tenant it sees and manages (its own people: a viewer or an operator); absent: the whole appliance." } } },
                "Users": { "type": "object", "required": ["users"], "properties": { "users": { "type": "array", "items": { "$ref": "#/components/schemas/User" } } } },
                "UserOne": { "type": "object", "required": ["user"], "properties": { "user": { "$ref": "#/components/schemas/User" } } },
                "UserDeleted": { "type": "object", "required": ["deleted"], "properties": { "deleted": { "type": "string" } } },
                "NewUser": { "type": "object", "required": ["name", "password", "role"], "properties": { "name": { "type": "string" }, "password": { "type": "string", "minLength": 8 }, "role": { "type": "string", "enum": crate::auth::Role::NAMES }, "tenant": { "type": "string", "nullable": true, "description": "The one tenant it sees and manages (its own people: a viewer or an operator); absent: the whole appliance." } }, "additionalProperties": false },
                "UserChange": { "type": "object", "required": ["role"], "properties": { "role": { "type": "string", "enum": crate::auth::Role::NAMES } }, "additionalProperties": false },
                "Events": {
                    "type": "object",
                    "required": ["events"],
                    "properties": { "events": { "type": "array", "items": {
                        "type": "object",
                        "required": ["at", "kind", "message"],
                        "properties": {
                            "at": { "type": "integer" },
                            "kind": { "type": "string" },
                            "message": { "type": "string" },
                            "actor": { "type": "string", "nullable": true, "description": "Who: \"user alice\", \"token ci\"; null: the console itself." },
                            "target": { "type": "string", "nullable": true },
                            "before": { "nullable": true, "description": "The state of the target before the change (JSON)." },
                            "after": { "nullable": true },
                        },
                    } } },
                },
                "NodeHistory": {
                    "type": "object",
                    "required": ["address", "samples"],
                    "properties": {
                        "address": { "type": "string" },
                        "samples": { "type": "array", "items": {
                            "type": "object",
                            "required": ["at", "resolution", "kind"],
                            "properties": {
                                "at": { "type": "integer", "description": "Unix seconds." },
                                "resolution": { "type": "integer", "description": "Seconds the sample covers." },
                                "kind": { "type": "string", "enum": ["proxy", "engine"] },
                                "ops_per_sec": { "type": "number", "nullable": true },
                                "hit_ratio": { "type": "number", "nullable": true },
                                "used_memory": { "type": "number", "nullable": true },
                                "maxmemory": { "type": "number", "nullable": true },
                                "evicted_per_sec": { "type": "number", "nullable": true },
                                "oom_per_sec": { "type": "number", "nullable": true },
                                "repl_lag": { "type": "number", "nullable": true },
                                "p50_us": { "type": "number", "nullable": true },
                                "p99_us": { "type": "number", "nullable": true },
                                "clients": { "type": "number", "nullable": true },
                            },
                        } },
                    },
                },
                "TenantHistory": {
                    "type": "object",
                    "required": ["tenant", "samples"],
                    "properties": {
                        "tenant": { "type": "string" },
                        "samples": { "type": "array", "items": {
                            "type": "object",
                            "required": ["at", "resolution", "by_class"],
                            "properties": {
                                "at": { "type": "integer" },
                                "resolution": { "type": "integer" },
                                "ops_per_sec": { "type": "number", "nullable": true },
                                "hit_ratio": { "type": "number", "nullable": true },
                                "used_bytes": { "type": "number", "nullable": true },
                                "quota_bytes": { "type": "number", "nullable": true },
                                "oom_per_sec": { "type": "number", "nullable": true },
                                "p50_us": { "type": "number", "nullable": true },
                                "p99_us": { "type": "number", "nullable": true },
                                "by_class": { "type": "object", "additionalProperties": { "type": "number" } },
                            },
                        } },
                    },
                },
                "Snapshot": { "type": "object", "required": ["engines"], "properties": { "engines": { "type": "object", "description": "Per engine address: {\"started\": reply} or {\"error\": why}.", "additionalProperties": { "type": "object" } } } },
                "EngineAdded": { "type": "object", "required": ["engine", "address"], "properties": { "engine": { "type": "integer" }, "address": { "type": "string" } } },
                "EngineRemoved": { "type": "object", "required": ["removed"], "properties": { "removed": { "type": "string" } } },
                "Moves": { "type": "object", "required": ["paused", "moves"], "properties": { "paused": { "type": "boolean" }, "moves": { "type": "array", "items": { "type": "object" } }, "progress": { "type": "object", "nullable": true } } },
                "MoveQueued": { "type": "object", "required": ["id"], "properties": { "id": { "type": "integer" } } },
                "Paused": { "type": "object", "required": ["paused"], "properties": { "paused": { "type": "boolean" } } },
                "Plan": { "type": "object", "required": ["moves", "estimated_seconds"], "properties": { "moves": { "type": "array", "items": { "type": "object" } }, "estimated_seconds": { "type": "number" } } },
                "RebalanceQueued": { "type": "object", "required": ["ids", "plan"], "properties": { "ids": { "type": "array", "items": { "type": "integer" } }, "plan": { "$ref": "#/components/schemas/Plan" } } },
                "Tokens": { "type": "object", "required": ["tokens"], "properties": { "tokens": { "type": "array", "items": { "type": "object", "required": ["id", "name", "role"], "properties": { "id": { "type": "integer" }, "name": { "type": "string" }, "role": { "type": "string", "enum": crate::auth::Role::NAMES }, "expires_at": { "type": "integer", "nullable": true }, "created_by": { "type": "string", "nullable": true }, "tenant": { "type": "string", "nullable": true, "description": "The one tenant it sees and manages (its own people: a viewer or an operator); absent: the whole appliance." } } } } } },
                "TokenCreated": { "type": "object", "required": ["id", "name", "token", "role"], "properties": { "id": { "type": "integer" }, "name": { "type": "string" }, "token": { "type": "string" }, "role": { "type": "string", "enum": crate::auth::Role::NAMES }, "expires_at": { "type": "integer", "nullable": true }, "tenant": { "type": "string", "nullable": true, "description": "The one tenant it sees and manages (its own people: a viewer or an operator); absent: the whole appliance." } } },
                "Revoked": { "type": "object", "required": ["revoked"], "properties": { "revoked": { "type": "integer" } } },
                "OpenApi": { "type": "object", "required": ["openapi", "paths"], "properties": { "openapi": { "type": "string" }, "paths": { "type": "object" } } },
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
                "NewToken": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": { "type": "string", "maxLength": 64 },
                        "role": { "type": "string", "enum": crate::auth::Role::NAMES, "description": "At most the creator's role (the default)." },
                        "expires_in_days": { "type": "integer", "minimum": 1, "maximum": 3650, "nullable": true, "description": "Absent: until revoked." },
                        "tenant": { "type": "string", "nullable": true, "description": "The one tenant it sees and manages (its own people: a viewer or an operator); absent: the whole appliance." },
                    },
                    "additionalProperties": false,
                },
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
