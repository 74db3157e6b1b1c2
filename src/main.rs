//! The `terrace` command line: parses arguments and dispatches to the crates' `run` functions.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use terrace_engine::EngineSettings;

#[global_allocator]
static ALLOC: terrace_engine::alloc::CountingAlloc = terrace_engine::alloc::CountingAlloc;

#[derive(Parser)]
#[command(name = "terrace", version, about = "Redis- and Memcached-compatible caching appliance with cost-driven tiering")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole appliance on embedded defaults (today: one engine on port 6379).
    Up(UpArgs),
    /// Run one engine (data node).
    Engine(EngineArgs),
}

#[derive(Args)]
struct UpArgs {
    /// Port for Redis clients.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Data directory.
    #[arg(long, default_value = "data")]
    data_dir: PathBuf,
}

#[derive(Args)]
struct EngineArgs {
    /// TCP port [env: TERRACE_PORT] [default: 7001]
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on [env: TERRACE_BIND] [default: 127.0.0.1]
    #[arg(long)]
    bind: Option<String>,
    /// TOML configuration file; its [engine] table is read.
    #[arg(long, env = "TERRACE_CONFIG")]
    config: Option<PathBuf>,
    /// Memory limit, e.g. 1gb; 0 = none [env: TERRACE_MAXMEMORY]
    #[arg(long)]
    maxmemory: Option<String>,
    /// Eviction policy when maxmemory is reached [env: TERRACE_MAXMEMORY_POLICY]
    #[arg(long)]
    maxmemory_policy: Option<String>,
    /// Reactor threads: a count or `single` [env: TERRACE_THREADS] [default: 1]
    #[arg(long)]
    threads: Option<String>,
    /// Data directory [env: TERRACE_DATA_DIR] [default: data]
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

impl EngineArgs {
    fn settings(self) -> anyhow::Result<EngineSettings> {
        let flags = EngineSettings {
            port: self.port,
            bind: self.bind,
            maxmemory: self.maxmemory.map(toml::Value::String),
            maxmemory_policy: self.maxmemory_policy,
            threads: self.threads.map(toml::Value::String),
            data_dir: self.data_dir,
            shard_bits: None,
        };
        let env = EngineSettings::from_env()?;
        let file = match &self.config {
            Some(p) => EngineSettings::from_file(p)?,
            None => EngineSettings::default(),
        };
        Ok(flags.or(env).or(file))
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TERRACE_LOG").unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        Command::Engine(args) => args.settings().and_then(|s| Ok(s.resolve()?)).and_then(|c| Ok(terrace_engine::run(c)?)),
        Command::Up(args) => {
            let settings = EngineSettings {
                port: Some(args.port),
                bind: Some(args.bind),
                data_dir: Some(args.data_dir),
                ..Default::default()
            };
            settings.resolve().map_err(anyhow::Error::from).and_then(|c| {
                eprintln!("terrace up: engine on {}:{} (Redis clients connect here)", c.bind, c.port);
                Ok(terrace_engine::run(c)?)
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("terrace: {e:#}");
            ExitCode::FAILURE
        }
    }
}
