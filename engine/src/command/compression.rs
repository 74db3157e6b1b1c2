//! Terrace's compression admin commands:
//!
//! - `TERRACE.RETRAIN tenant [SYNC]` — train a new dictionary generation from the tenant's
//!   sample now (in the background, or waiting for it with SYNC; answers the STATS JSON then).
//! - `TERRACE.COMPRESSION STATS tenant` — JSON: settings, generations, live and trained ratios,
//!   what the last background pass counted (asking wakes the pass for a fresh count).
//! - `TERRACE.COMPRESSION ADVISE tenant` — JSON: the recommender's measurements and choice.
//! - `TERRACE.COMPRESSION CONFIG tenant [setting value …]` — changes settings (compression,
//!   compression_mode, compression_min_size, compression_cold_seconds, retrain_ratio_drift,
//!   retrain_unmatched, compression_sample_size, compression_train_after,
//!   compression_cpu_budget_us) and answers the settings as JSON.
//!
//! `default` names the namespace plain clients use.

use std::sync::Arc;
use std::time::Duration;

use super::args::{err, is, CmdError};
use super::{CmdResult, Ctx};
use crate::compress::tenant::TenantCompression;
use crate::server::state::Server;

/// The compression state of a tenant by name.
fn tenant(srv: &Server, name: &[u8]) -> Result<Arc<TenantCompression>, CmdError> {
    let name = String::from_utf8_lossy(name);
    srv.tenant_namespace(&name).map(|i| srv.keyspace.compression(i).clone()).ok_or_else(|| err(format!("ERR no such tenant '{name}'")))
}

pub fn retrain(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sync = match argv.len() {
        2 => false,
        3 if is(argv[2], "SYNC") => true,
        _ => return Err(CmdError::Syntax),
    };
    let t = tenant(ctx.srv, argv[1])?;
    if sync && !t.wait_idle(Duration::from_secs(120)) {
        return Err(err("ERR a training run is still running after 120 s"));
    }
    t.retrain().map_err(|e| err(format!("ERR {e}")))?;
    if !sync {
        ctx.out.simple("Background retraining started");
        return Ok(());
    }
    if !t.wait_idle(Duration::from_secs(120)) {
        return Err(err("ERR training is still running after 120 s"));
    }
    let stats = t.stats();
    if let Some(e) = stats["last_error"].as_str() {
        return Err(err(format!("ERR training failed: {e}")));
    }
    ctx.out.bulk(stats.to_string().as_bytes());
    Ok(())
}

pub fn compression(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = argv[1];
    if is(sub, "HELP") {
        ctx.out.help(&[
            "TERRACE.COMPRESSION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "STATS <tenant>",
            "    Settings, dictionary generations, trained and live ratios (JSON).",
            "ADVISE <tenant>",
            "    Measures every codec on the tenant's sample and recommends one (JSON).",
            "CONFIG <tenant> [<setting> <value> ...]",
            "    Changes the tenant's compression settings; answers them (JSON).",
            "HELP",
            "    Print this help.",
        ]);
        return Ok(());
    }
    if argv.len() < 3 {
        return Err(err(format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try TERRACE.COMPRESSION HELP.", String::from_utf8_lossy(sub))));
    }
    let t = tenant(ctx.srv, argv[2])?;
    let json = if is(sub, "STATS") && argv.len() == 3 {
        // Whoever reads the census wants it fresh: the resting background pass resumes.
        t.wake();
        t.stats()
    } else if is(sub, "ADVISE") && argv.len() == 3 {
        t.advise_now()
    } else if is(sub, "CONFIG") && argv.len() % 2 == 1 {
        let mut s = t.settings();
        for kv in argv[3..].chunks(2) {
            let (k, v) = (String::from_utf8_lossy(kv[0]), String::from_utf8_lossy(kv[1]));
            s.set(&k, &v).map_err(|e| err(format!("ERR {e}")))?;
        }
        if argv.len() > 3 {
            t.configure(s);
        }
        t.settings().to_json()
    } else {
        return Err(err(format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try TERRACE.COMPRESSION HELP.", String::from_utf8_lossy(sub))));
    };
    ctx.out.bulk(json.to_string().as_bytes());
    Ok(())
}
