//! `terrace bench burst`: the paper's elastic-threading experiment. A load generator sends a
//! low rate, then as fast as it can, then the low rate again, to `--threads single`, `2`,
//! `elastic:2` and redis-server (reference), one after the other in one run (order flipped
//! every round). Engines and the load generator share the same cores (`taskset -c 0,1`): a
//! 2-core machine has no spare core for either. Per second: throughput, p99 and the engine's
//! CPU use (from /proc). Prints a per-second table and a summary, and draws throughput and
//! p99 over time as an SVG.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use super::resp_client::Client;

#[derive(Args)]
pub struct BurstArgs {
    /// Requests per second in the low phases (all connections together).
    #[arg(long, default_value_t = 20_000)]
    low_rate: u64,
    /// Seconds of low rate before and after the burst.
    #[arg(long, default_value_t = 10)]
    low_seconds: u64,
    /// Seconds of the burst (as fast as the connections go).
    #[arg(long, default_value_t = 30)]
    burst_seconds: u64,
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Requests each connection sends at once (one round trip).
    #[arg(long, default_value_t = 4)]
    pipeline: usize,
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Cores the engines and the load generator share.
    #[arg(long, default_value = "0,1")]
    cores: String,
    /// redis-server for the reference line (skipped if missing).
    #[arg(long, default_value = "redis-server")]
    redis_server: String,
    /// Where the plot goes.
    #[arg(long, default_value = "BENCHMARKS-burst.svg")]
    svg: PathBuf,
}

/// Every round's seconds of one target, and when elastic scaled up in each.
type Runs = (Vec<Vec<Second>>, Vec<Option<Duration>>);
/// A plot panel: title, the value drawn, top edge.
type Panel = (&'static str, fn(&Second) -> f64, f64);

/// One second of one run.
#[derive(Clone, Copy, Default)]
struct Second {
    ops: f64,
    p99_us: f64,
    cpu: f64,
    active: f64,
}

struct Target {
    name: String,
    child: Child,
    port: u16,
    dir: Option<PathBuf>,
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn start_terrace(cores: &str, threads: &str, tag: usize) -> anyhow::Result<Target> {
    let dir = std::env::temp_dir().join(format!("terrace-bench-burst-{}-{tag}", std::process::id()));
    let (child, port) = super::spawn_engine_of(&std::env::current_exe()?, cores, &dir, &["--threads".as_ref(), threads.as_ref()])?;
    Ok(Target { name: format!("terrace --threads {threads}"), child, port, dir: Some(dir) })
}

fn start_redis(cores: &str, exe: &str) -> anyhow::Result<Target> {
    let (child, port) = super::spawn_redis(exe, cores, &[])?;
    Ok(Target { name: "redis-server".into(), child, port, dir: None })
}

/// The active reactor count (terrace) or 1 (redis).
fn active_reactors(c: &mut Client) -> f64 {
    match c.call(&[b"INFO", b"threads"]) {
        Ok(Some(text)) => text.lines().find_map(|l| l.strip_prefix("reactors_active:")).and_then(|v| v.trim().parse().ok()).unwrap_or(1.0),
        _ => 1.0,
    }
}

/// Runs the schedule against `port`; per-second samples and the time from the burst's start
/// until a second reactor served (None: never).
fn run_schedule(t: &Target, args: &BurstArgs) -> anyhow::Result<(Vec<Second>, Option<Duration>)> {
    let total = args.low_seconds * 2 + args.burst_seconds;
    let start = Instant::now() + Duration::from_millis(200);
    let burst_at = start + Duration::from_secs(args.low_seconds);
    let burst_end = burst_at + Duration::from_secs(args.burst_seconds);
    let end = start + Duration::from_secs(total);
    let ops: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    // The load generator must cost as little CPU as it can (it shares the cores with the
    // engine): keys made once, latencies kept per thread and merged at the end.
    let keys: Arc<Vec<Vec<u8>>> = Arc::new((0..100_000).map(|k| format!("key:{k}").into_bytes()).collect());
    let value = vec![b'v'; 100];
    let mut handles = Vec::new();
    for id in 0..args.clients {
        let (ops, keys, value) = (ops.clone(), keys.clone(), value.clone());
        let (port, pipeline, clients, low_rate) = (t.port, args.pipeline, args.clients, args.low_rate);
        handles.push(std::thread::spawn(move || -> anyhow::Result<Vec<Vec<u32>>> {
            let mut lat: Vec<Vec<u32>> = vec![Vec::new(); total as usize];
            let mut c = Client::connect(port)?;
            // Low phase: this connection's share of the rate, in batches of `pipeline`.
            let interval = Duration::from_secs_f64(pipeline as f64 * clients as f64 / low_rate as f64);
            let mut next = start + interval.mul_f64(id as f64 / clients as f64);
            let mut n = id as u64 * 1_000_003;
            std::thread::sleep(start.saturating_duration_since(Instant::now()));
            loop {
                let now = Instant::now();
                if now >= end {
                    return Ok(lat);
                }
                let bursting = now >= burst_at && now < burst_end;
                if !bursting {
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                    next += interval;
                    if next < Instant::now() - interval * 4 {
                        next = Instant::now(); // do not make up for lost time in a burst of our own
                    }
                } else {
                    // After the burst, the connections go back to their staggered slots.
                    next = burst_end + interval.mul_f64(id as f64 / clients as f64);
                }
                let sent = Instant::now();
                for _ in 0..pipeline {
                    n = n.wrapping_add(1);
                    let key = &keys[(n % 100_000) as usize];
                    if n.is_multiple_of(2) {
                        c.push(&[b"GET", key]);
                    } else {
                        c.push(&[b"SET", key, &value]);
                    }
                }
                c.flush()?;
                let done = Instant::now();
                let sec = (done.saturating_duration_since(start).as_secs()) as usize;
                if sec < ops.len() {
                    ops[sec].fetch_add(pipeline as u64, Ordering::Relaxed);
                    lat[sec].push((done - sent).as_micros().min(u32::MAX as u128) as u32);
                }
            }
        }));
    }
    // Sampler: CPU and active reactors each second; when the burst got a second reactor.
    let pid = t.child.id();
    let mut probe = Client::connect(t.port)?;
    let mut cpu = Vec::new();
    let mut active = Vec::new();
    let mut scaled = None;
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    let mut last_cpu = super::cpu_seconds(pid);
    for s in 0..total {
        let sec_end = start + Duration::from_secs(s + 1);
        let mut peak = active_reactors(&mut probe);
        while Instant::now() < sec_end {
            std::thread::sleep(Duration::from_millis(50));
            let a = active_reactors(&mut probe);
            peak = f64::max(peak, a);
            let now = Instant::now();
            if scaled.is_none() && a > 1.0 && now >= burst_at && now < burst_end {
                scaled = Some(now - burst_at);
            }
        }
        let c = super::cpu_seconds(pid);
        cpu.push(c - last_cpu);
        last_cpu = c;
        active.push(peak);
    }
    let mut lat: Vec<Vec<u32>> = vec![Vec::new(); total as usize];
    for h in handles {
        let mine = h.join().map_err(|_| anyhow::anyhow!("a load thread panicked"))??;
        for (all, m) in lat.iter_mut().zip(mine) {
            all.extend(m);
        }
    }
    let seconds = (0..total as usize)
        .map(|s| {
            let mut l = std::mem::take(&mut lat[s]);
            l.sort_unstable();
            let p99 = if l.is_empty() { 0.0 } else { l[(l.len() * 99 / 100).min(l.len() - 1)] as f64 };
            Second {
                ops: ops[s].load(Ordering::Relaxed) as f64,
                p99_us: p99,
                cpu: cpu.get(s).copied().unwrap_or(0.0),
                active: active.get(s).copied().unwrap_or(1.0),
            }
        })
        .collect();
    Ok((seconds, scaled))
}

pub fn run(args: BurstArgs) -> anyhow::Result<()> {
    let setups: Vec<&str> = vec!["single", "2", "elastic:2"];
    let has_redis = Command::new(&args.redis_server).arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    let names: Vec<String> = setups.iter().map(|t| format!("terrace --threads {t}")).chain(has_redis.then(|| "redis-server".to_string())).collect();
    println!(
        "terrace bench burst: {} connections, pipeline {}, {} req/s for {} s, as fast as possible for {} s, {} req/s for {} s; engines and load share cores {}; {} round(s)",
        args.clients, args.pipeline, args.low_rate, args.low_seconds, args.burst_seconds, args.low_rate, args.low_seconds, args.cores, args.rounds
    );
    // Per target: every round's seconds, and its scale-up times.
    let mut results: Vec<Runs> = vec![(Vec::new(), Vec::new()); names.len()];
    for round in 0..args.rounds {
        let mut order: Vec<usize> = (0..names.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let t = if i < setups.len() { start_terrace(&args.cores, setups[i], i)? } else { start_redis(&args.cores, &args.redis_server)? };
            // The keys the load reads, there before it starts.
            let mut c = Client::connect(t.port)?;
            for chunk in (0..100_000u64).collect::<Vec<_>>().chunks(1000) {
                for k in chunk {
                    c.push(&[b"SET", format!("key:{k}").as_bytes(), &[b'v'; 100]]);
                }
                c.flush()?;
            }
            std::thread::sleep(Duration::from_millis(2500)); // elastic: back to one reactor after the load
            let (secs, scaled) = run_schedule(&t, &args)?;
            eprintln!("{}: round {} done", t.name, round + 1);
            results[i].0.push(secs);
            results[i].1.push(scaled);
        }
    }
    // Per second, the median over rounds.
    let total = (args.low_seconds * 2 + args.burst_seconds) as usize;
    let med = |i: usize, s: usize, f: fn(&Second) -> f64| super::median(&results[i].0.iter().map(|r| f(&r[s])).collect::<Vec<_>>());
    println!();
    print!("| second | phase |");
    for n in &names {
        print!(" {n} req/s | p99 µs | CPU |");
    }
    println!(" elastic reactors |");
    println!("|{}", "---|".repeat(2 + names.len() * 3 + 1));
    let phase = |s: usize| if s < args.low_seconds as usize || s >= (args.low_seconds + args.burst_seconds) as usize { "low" } else { "burst" };
    for s in 0..total {
        print!("| {s} | {} |", phase(s));
        for i in 0..names.len() {
            print!(" {:.0} | {:.0} | {:.2} |", med(i, s, |x| x.ops), med(i, s, |x| x.p99_us), med(i, s, |x| x.cpu));
        }
        println!(" {:.0} |", med(2, s, |x| x.active));
    }
    // Summary: burst seconds after the first (ramp), low seconds after the first of each.
    let in_burst = |s: usize| s > args.low_seconds as usize && s < (args.low_seconds + args.burst_seconds) as usize;
    let in_low = |s: usize| (s > 0 && s < args.low_seconds as usize) || (s > (args.low_seconds + args.burst_seconds) as usize && s < total);
    let avg = |i: usize, pick: &dyn Fn(usize) -> bool, f: fn(&Second) -> f64| {
        let v: Vec<f64> = (0..total).filter(|&s| pick(s)).map(|s| med(i, s, f)).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    println!();
    println!("| engine | burst req/s | vs single | vs 2 threads | burst p99 µs | low-phase CPU (cores) | vs single |");
    println!("|---|---|---|---|---|---|---|");
    let (single_burst, two_burst, single_cpu) = (avg(0, &in_burst, |x| x.ops), avg(1, &in_burst, |x| x.ops), avg(0, &in_low, |x| x.cpu));
    for (i, n) in names.iter().enumerate() {
        let (b, c) = (avg(i, &in_burst, |x| x.ops), avg(i, &in_low, |x| x.cpu));
        println!(
            "| {n} | {b:.0} | {:.2}x | {:.2}x | {:.0} | {c:.3} | {:.2}x |",
            b / single_burst,
            b / two_burst,
            avg(i, &in_burst, |x| x.p99_us),
            c / single_cpu.max(1e-9)
        );
    }
    let ups: Vec<String> = results[2].1.iter().map(|d| d.map_or("never".into(), |d| format!("{} ms", d.as_millis()))).collect();
    println!();
    println!("elastic:2 scale-up after the burst began: {}", ups.join(", "));
    let series: Vec<(String, Vec<Second>)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                n.clone(),
                (0..total)
                    .map(|s| Second { ops: med(i, s, |x| x.ops), p99_us: med(i, s, |x| x.p99_us), cpu: med(i, s, |x| x.cpu), active: med(i, s, |x| x.active) })
                    .collect(),
            )
        })
        .collect();
    std::fs::write(&args.svg, svg(&series, args.low_seconds as usize, args.burst_seconds as usize))?;
    println!("plot: {}", args.svg.display());
    Ok(())
}

/// Two panels, throughput and p99 over time, one line per engine; the burst shaded.
fn svg(series: &[(String, Vec<Second>)], low: usize, burst: usize) -> String {
    const COLORS: [&str; 4] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f"];
    let (w, h, left, top, panel) = (900.0, 620.0, 70.0, 30.0, 240.0);
    let n = series.first().map_or(1, |s| s.1.len()).max(2);
    let x = |s: usize| left + (w - left - 30.0) * s as f64 / (n - 1) as f64;
    let mut out = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let panels: [Panel; 2] = [("requests/s", |s| s.ops, top), ("p99 latency, µs", |s| s.p99_us, top + panel + 60.0)];
    for (title, f, y0) in panels {
        let max = series.iter().flat_map(|(_, v)| v.iter().map(f)).fold(1.0, f64::max) * 1.1;
        let y = |v: f64| y0 + panel - panel * v / max;
        out += &format!("<rect x=\"{}\" y=\"{y0}\" width=\"{}\" height=\"{panel}\" fill=\"#f0f0f0\"/>\n", x(low), x(low + burst) - x(low));
        out += &format!("<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{left}\" y1=\"{y0}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>\n", y0 + panel, w - 30.0, y0 + panel, y0 + panel);
        out += &format!("<text x=\"{left}\" y=\"{}\">{title} (burst shaded; x: seconds)</text>\n", y0 - 8.0);
        for k in 0..=4 {
            let v = max * k as f64 / 4.0;
            out += &format!("<text x=\"5\" y=\"{:.1}\">{:.0}</text>\n", y(v) + 4.0, v);
        }
        for s in (0..n).step_by(5) {
            out += &format!("<text x=\"{:.1}\" y=\"{}\">{s}</text>\n", x(s) - 4.0, y0 + panel + 15.0);
        }
        for (i, (_, v)) in series.iter().enumerate() {
            let pts: Vec<String> = v.iter().enumerate().map(|(s, p)| format!("{:.1},{:.1}", x(s), y(f(p)))).collect();
            out += &format!("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", COLORS[i % 4], pts.join(" "));
        }
    }
    for (i, (name, _)) in series.iter().enumerate() {
        let ly = h - 12.0;
        let lx = left + 200.0 * i as f64;
        out += &format!(
            "<rect x=\"{lx}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{name}</text>\n",
            ly - 4.0,
            COLORS[i % 4],
            lx + 18.0,
            ly
        );
    }
    out + "</svg>\n"
}
