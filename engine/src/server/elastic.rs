//! Elastic threading (../shared/DESIGN.md, paper §4.4): one reactor serves every connection
//! while load is light; when the active reactors stay busy, the controller wakes another and
//! moves connections to it, and when load falls it folds them back and the spare reactor
//! parks (a reactor without connections waits in epoll and uses no CPU).
//!
//! - `Controller`: the decision, a pure state machine over busy-share samples (unit-tested).
//! - `Reactors`: the reactors' CPU clocks, counters and the active count (their channels are
//!   `server::dispatch`, in the layer above); the controller thread samples each reactor
//!   thread every `sample` and applies decisions by asking connections to move. The signal is a reactor's demand: the share of the interval
//!   it ran or was runnable but waiting for a core (`/proc/self/task/TID/schedstat`: CPU time
//!   plus run-queue delay) — on a shared machine a saturated reactor may get only part of a
//!   core, and its CPU share alone would hide that it wants more. Without schedstat, CPU time.
//! - A connection moves itself (`connection::serve`) at a safe point: between requests, its
//!   replies flushed, not blocked. It hands its socket, state and unparsed input to the
//!   target reactor, so nothing is lost, duplicated or reordered.

pub use crate::config::ElasticConfig;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::state::{ClientInfo, Server};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Hold,
    /// Wake one more reactor.
    Up,
    /// Fold the last active reactor back.
    Down,
}

/// The scaling decision over samples of the active reactors' busy shares.
pub struct Controller {
    cfg: ElasticConfig,
    busy_streak: u32,
    quiet_since: Option<Duration>,
}

impl Controller {
    pub fn new(cfg: ElasticConfig) -> Controller {
        Controller { cfg, busy_streak: 0, quiet_since: None }
    }

    /// One sample at time `now` (since any fixed origin): the busy share (0–1) of each active
    /// reactor.
    pub fn observe(&mut self, now: Duration, busy: &[f64]) -> Decision {
        let active = busy.len();
        let all_busy = !busy.is_empty() && busy.iter().all(|&b| b >= self.cfg.up_busy);
        let all_quiet = busy.iter().all(|&b| b < self.cfg.down_busy);
        self.busy_streak = if all_busy { self.busy_streak + 1 } else { 0 };
        if all_quiet && active > 1 {
            let since = *self.quiet_since.get_or_insert(now);
            if now.saturating_sub(since) >= self.cfg.down_after {
                self.quiet_since = None;
                return Decision::Down;
            }
        } else {
            self.quiet_since = None;
        }
        if self.busy_streak >= self.cfg.up_samples && active < self.cfg.max {
            self.busy_streak = 0;
            return Decision::Up;
        }
        Decision::Hold
    }
}

/// One reactor's measurements.
#[derive(Default)]
pub struct ReactorStats {
    /// The reactor thread's CPU clock (set by the thread when it starts; 0 until then).
    clock: AtomicI64,
    clock_set: std::sync::atomic::AtomicBool,
    /// The reactor thread's id (for its schedstat; 0 until it starts).
    tid: AtomicI64,
    /// CPU share of the last sample, and demand (CPU plus run-queue wait), in thousandths.
    pub busy_permille: AtomicU32,
    pub demand_permille: AtomicU32,
    /// Run-queue wait so far, in nanoseconds.
    pub wait_ns: AtomicU64,
    /// Connections it serves.
    pub connections: AtomicUsize,
    /// Its CPU time, in nanoseconds, so far.
    pub cpu_ns: AtomicU64,
    /// Of that, time spent spinning (polling with nothing to do; `spin`), in nanoseconds.
    pub spin_ns: AtomicU64,
    /// Set while its core is wanted by other work: it sleeps instead of spinning.
    pub spin_paused: std::sync::atomic::AtomicBool,
}

/// Run-queue wait, as a share of a sample, above which a reactor's spinning pauses. Measured
/// on the benchmark machine, 100 ms samples: a spinning reactor alone on its core waits 2–7%
/// (kernel threads, interrupts); sharing it with a CPU-bound process, 44–56%.
const SPIN_CONTENDED: f64 = 0.2;
/// How long spinning stays paused after the last contended sample.
const SPIN_HOLD_OFF: Duration = Duration::from_secs(1);

/// A reactor's counters at the last sample, and when its core was last contended.
#[derive(Clone, Copy, Default)]
struct Sampled {
    cpu: u64,
    wait: u64,
    spin: u64,
    contended_at: Option<Instant>,
}

/// What one sample says of a reactor.
#[derive(Debug, PartialEq)]
struct Reading {
    /// Share of the interval it worked (CPU less spinning), and worked or waited for a CPU.
    busy: f64,
    demand: f64,
    /// Whether it should sleep rather than spin.
    spin_paused: bool,
}

impl Sampled {
    /// Takes the reactor's counters now (`wait`: None when the kernel does not say) over an
    /// interval of `wall`, and moves on to them.
    fn next(&mut self, cpu: u64, wait: Option<u64>, spin: u64, now: Instant, wall: Duration) -> Reading {
        let wall = wall.as_nanos().max(1) as f64;
        let ran = cpu.saturating_sub(self.cpu).saturating_sub(spin.saturating_sub(self.spin)) as f64;
        let waited = wait.map_or(0.0, |w| w.saturating_sub(self.wait) as f64);
        if wait.is_none() || waited / wall > SPIN_CONTENDED {
            self.contended_at = Some(now);
        }
        *self = Sampled { cpu, wait: wait.unwrap_or(self.wait), spin, ..*self };
        Reading {
            busy: (ran / wall).min(1.0),
            demand: ((ran + waited) / wall).min(1.0),
            spin_paused: self.contended_at.is_some_and(|t| now.duration_since(t) < SPIN_HOLD_OFF),
        }
    }
}

/// The reactors and the elastic state.
pub struct Reactors {
    pub elastic: bool,
    pub cfg: ElasticConfig,
    pub stats: Box<[ReactorStats]>,
    pub active: AtomicUsize,
    next: AtomicUsize,
    pub migrations: AtomicU64,
    pub scale_ups: AtomicU64,
    pub scale_downs: AtomicU64,
}

/// The calling thread's CPU clock.
fn thread_clock() -> Option<libc::clockid_t> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: pthread_self is always valid for the calling thread; `id` is a valid out pointer.
    (unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) } == 0).then_some(id)
}

/// A thread's (CPU time, run-queue wait) so far, in nanoseconds, from the kernel's schedstat.
fn schedstat(tid: i64) -> Option<(u64, u64)> {
    if tid <= 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

fn clock_ns(id: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer.
    (unsafe { libc::clock_gettime(id, &mut ts) } == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

impl Reactors {
    /// `threads` reactors, all active when fixed; one active when elastic.
    pub fn new(threads: usize, elastic: bool, cfg: ElasticConfig) -> Reactors {
        Reactors {
            elastic,
            cfg,
            stats: (0..threads.max(1)).map(|_| ReactorStats::default()).collect(),
            active: AtomicUsize::new(if elastic { 1 } else { threads.max(1) }),
            next: AtomicUsize::new(0),
            migrations: AtomicU64::new(0),
            scale_ups: AtomicU64::new(0),
            scale_downs: AtomicU64::new(0),
        }
    }

    pub fn count(&self) -> usize {
        self.stats.len()
    }

    /// Called by reactor `i`'s thread as it starts.
    pub fn started(&self, i: usize) {
        // SAFETY: gettid has no preconditions.
        self.stats[i].tid.store(unsafe { libc::gettid() } as i64, Ordering::Relaxed);
        if let Some(id) = thread_clock() {
            self.stats[i].clock.store(id as i64, Ordering::Relaxed);
            self.stats[i].clock_set.store(true, Ordering::Release);
        }
    }

    /// Where a new connection goes: the active reactors in turn.
    pub fn assign(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.active.load(Ordering::Relaxed).max(1)
    }

    /// Samples every reactor at `now`; returns the active ones' demand since the last sample
    /// (`last`: their counters then, updated). Time spent spinning is not demand. A reactor
    /// that waited for a CPU, or whose wait cannot be read, stops spinning for a while.
    fn sample(&self, last: &mut [Sampled], now: Instant, wall: Duration) -> Vec<f64> {
        let active = self.active.load(Ordering::Relaxed);
        let mut demand = Vec::with_capacity(active);
        for (i, st) in self.stats.iter().enumerate() {
            if !st.clock_set.load(Ordering::Acquire) {
                continue;
            }
            let (cpu, wait) = match schedstat(st.tid.load(Ordering::Relaxed)) {
                Some((cpu, wait)) => (cpu, Some(wait)),
                None => match clock_ns(st.clock.load(Ordering::Relaxed) as libc::clockid_t) {
                    Some(cpu) => (cpu, None),
                    None => continue,
                },
            };
            let r = last[i].next(cpu, wait, st.spin_ns.load(Ordering::Relaxed), now, wall);
            st.spin_paused.store(r.spin_paused, Ordering::Relaxed);
            st.cpu_ns.store(cpu, Ordering::Relaxed);
            st.wait_ns.store(last[i].wait, Ordering::Relaxed);
            st.busy_permille.store((r.busy * 1000.0) as u32, Ordering::Relaxed);
            st.demand_permille.store((r.demand * 1000.0) as u32, Ordering::Relaxed);
            if i < active {
                demand.push(r.demand);
            }
        }
        demand
    }

    /// Sets how many reactors are active and moves connections so that each active one has
    /// its share (a folded reactor gives all of its away). Returns how many were asked to move.
    pub fn set_active(&self, srv: &Server, n: usize) -> usize {
        let n = n.clamp(1, self.count());
        self.active.store(n, Ordering::Relaxed);
        let clients: Vec<Arc<ClientInfo>> = srv.clients.lock().values().filter(|c| c.fd >= 0).cloned().collect();
        let total = clients.len();
        let share = total.div_ceil(n);
        let mut load: Vec<usize> = vec![0; self.count()];
        for c in &clients {
            if let Some(l) = load.get_mut(c.reactor.load(Ordering::Relaxed)) {
                *l += 1;
            }
        }
        let mut moved = 0;
        for c in &clients {
            let from = c.reactor.load(Ordering::Relaxed);
            if from >= self.count() {
                continue; // served off the reactors (while a script runs)
            }
            if from < n && load[from] <= share {
                continue;
            }
            // The least loaded active reactor takes it.
            let Some(to) = (0..n).filter(|&r| r != from).min_by_key(|&r| load[r]) else { continue };
            if from < n && load[to] + 1 >= load[from] {
                continue;
            }
            load[from] -= 1;
            load[to] += 1;
            c.request_move(to);
            moved += 1;
        }
        moved
    }

    /// The controller thread: samples, decides, applies, until `stop`.
    pub fn run_controller(&self, srv: std::sync::Weak<Server>, stop: &std::sync::atomic::AtomicBool) {
        let mut ctl = Controller::new(self.cfg.clone());
        let mut last = vec![Sampled::default(); self.count()];
        let origin = Instant::now();
        let mut prev = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(self.cfg.sample);
            let now = Instant::now();
            let busy = self.sample(&mut last, now, now - prev);
            prev = now;
            let active = self.active.load(Ordering::Relaxed);
            let Some(srv) = srv.upgrade() else { return };
            if !self.elastic || self.count() == 1 {
                continue;
            }
            match ctl.observe(now - origin, &busy) {
                Decision::Up => {
                    self.scale_ups.fetch_add(1, Ordering::Relaxed);
                    let moved = self.set_active(&srv, active + 1);
                    tracing::info!(active = active + 1, moved, "elastic threads: busy, another reactor woken");
                }
                Decision::Down => {
                    self.scale_downs.fetch_add(1, Ordering::Relaxed);
                    let moved = self.set_active(&srv, active - 1);
                    tracing::info!(active = active - 1, moved, "elastic threads: quiet, a reactor folded back");
                }
                Decision::Hold => {}
            }
        }
    }

    /// The `# Threads` section of INFO.
    pub fn info(&self) -> String {
        let mut s = format!(
            "# Threads\r\nthreads_mode:{}\r\nreactors_max:{}\r\nreactors_active:{}\r\nmigrations:{}\r\nscale_ups:{}\r\nscale_downs:{}\r\n",
            if self.elastic { "elastic" } else { "fixed" },
            self.count(),
            self.active.load(Ordering::Relaxed),
            self.migrations.load(Ordering::Relaxed),
            self.scale_ups.load(Ordering::Relaxed),
            self.scale_downs.load(Ordering::Relaxed),
        );
        let active = self.active.load(Ordering::Relaxed);
        for (i, st) in self.stats.iter().enumerate() {
            s += &format!(
                "reactor{i}:active={},connections={},busy={:.3},demand={:.3},cpu_ms={},spin_ms={},spin_paused={},runqueue_wait_ms={}\r\n",
                (i < active) as u8,
                st.connections.load(Ordering::Relaxed),
                st.busy_permille.load(Ordering::Relaxed) as f64 / 1000.0,
                st.demand_permille.load(Ordering::Relaxed) as f64 / 1000.0,
                st.cpu_ns.load(Ordering::Relaxed) / 1_000_000,
                st.spin_ns.load(Ordering::Relaxed) / 1_000_000,
                st.spin_paused.load(Ordering::Relaxed) as u8,
                st.wait_ns.load(Ordering::Relaxed) / 1_000_000
            );
        }
        s + "\r\n"
    }

    pub fn to_json(&self) -> serde_json::Value {
        let active = self.active.load(Ordering::Relaxed);
        serde_json::json!({
            "mode": if self.elastic { "elastic" } else { "fixed" },
            "max": self.count(),
            "active": active,
            "migrations": self.migrations.load(Ordering::Relaxed),
            "scale_ups": self.scale_ups.load(Ordering::Relaxed),
            "scale_downs": self.scale_downs.load(Ordering::Relaxed),
            "reactors": self.stats.iter().enumerate().map(|(i, st)| serde_json::json!({
                "active": i < active,
                "connections": st.connections.load(Ordering::Relaxed),
                "busy": st.busy_permille.load(Ordering::Relaxed) as f64 / 1000.0,
                "demand": st.demand_permille.load(Ordering::Relaxed) as f64 / 1000.0,
                "cpu_ms": st.cpu_ns.load(Ordering::Relaxed) / 1_000_000,
                "spin_ms": st.spin_ns.load(Ordering::Relaxed) / 1_000_000,
                "spin_paused": st.spin_paused.load(Ordering::Relaxed),
                "runqueue_wait_ms": st.wait_ns.load(Ordering::Relaxed) / 1_000_000,
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl(max: usize) -> Controller {
        Controller::new(ElasticConfig { max, ..Default::default() })
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn spinning_is_not_demand_and_a_contended_core_pauses_it_for_a_second() {
        let t0 = Instant::now();
        let at = |n: u64| t0 + ms(n);
        let mut s = Sampled::default();
        // 100 ms: 90 ms of CPU of which 60 spinning, 1 ms waiting for a CPU.
        let r = s.next(90_000_000, Some(1_000_000), 60_000_000, at(100), ms(100));
        assert!((r.busy - 0.30).abs() < 1e-9 && (r.demand - 0.31).abs() < 1e-9, "{r:?}");
        assert!(!r.spin_paused);
        // Next 100 ms: 30 ms waiting — other work wants the core.
        let r = s.next(150_000_000, Some(31_000_000), 100_000_000, at(200), ms(100));
        assert!((r.busy - 0.20).abs() < 1e-9 && (r.demand - 0.50).abs() < 1e-9, "{r:?}");
        assert!(r.spin_paused);
        // Quiet samples: still paused until a second has passed since the contended one.
        let r = s.next(160_000_000, Some(31_000_000), 100_000_000, at(1100), ms(900));
        assert!(r.spin_paused);
        let r = s.next(170_000_000, Some(32_000_000), 100_000_000, at(1200), ms(100));
        assert!(!r.spin_paused, "{r:?}");
        // Without the kernel's run-queue wait there is no telling: no spinning.
        assert!(s.next(180_000_000, None, 100_000_000, at(1300), ms(100)).spin_paused);
    }

    #[test]
    fn scales_up_after_two_busy_samples_and_not_past_max() {
        let mut c = ctl(2);
        assert_eq!(c.observe(ms(100), &[0.95]), Decision::Hold, "one busy sample is a blip");
        assert_eq!(c.observe(ms(200), &[0.95]), Decision::Up);
        assert_eq!(c.observe(ms(300), &[0.9, 0.9]), Decision::Hold);
        assert_eq!(c.observe(ms(400), &[0.9, 0.9]), Decision::Hold, "already at max");
    }

    #[test]
    fn a_blip_resets_the_streak_and_one_idle_reactor_holds_it_back() {
        let mut c = ctl(4);
        assert_eq!(c.observe(ms(100), &[0.9]), Decision::Hold);
        assert_eq!(c.observe(ms(200), &[0.5]), Decision::Hold);
        assert_eq!(c.observe(ms(300), &[0.9]), Decision::Hold);
        assert_eq!(c.observe(ms(400), &[0.9]), Decision::Up);
        // Two active, one of them not busy: the work is not short of threads.
        assert_eq!(c.observe(ms(500), &[0.95, 0.2]), Decision::Hold);
        assert_eq!(c.observe(ms(600), &[0.95, 0.2]), Decision::Hold);
    }

    #[test]
    fn folds_back_after_two_quiet_seconds_never_below_one() {
        let mut c = ctl(2);
        let mut t = 0;
        let mut step = |c: &mut Controller, busy: &[f64]| {
            t += 100;
            c.observe(ms(t), busy)
        };
        for _ in 0..20 {
            assert_eq!(step(&mut c, &[0.1, 0.1]), Decision::Hold);
        }
        assert_eq!(step(&mut c, &[0.1, 0.1]), Decision::Down, "quiet for 2 s");
        for _ in 0..40 {
            assert_eq!(step(&mut c, &[0.0]), Decision::Hold, "one reactor stays");
        }
        // Quiet, then a busy sample: the quiet period starts over.
        let mut c = ctl(2);
        for _ in 0..15 {
            step(&mut c, &[0.1, 0.1]);
        }
        assert_eq!(step(&mut c, &[0.1, 0.5]), Decision::Hold);
        for _ in 0..19 {
            assert_eq!(step(&mut c, &[0.1, 0.1]), Decision::Hold);
        }
        assert_eq!(step(&mut c, &[0.1, 0.1]), Decision::Hold);
        assert_eq!(step(&mut c, &[0.1, 0.1]), Decision::Down);
    }

    #[test]
    fn a_reactor_clock_measures_its_own_thread() {
        let id = thread_clock().expect("a CPU clock");
        let a = clock_ns(id).unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(clock_ns(id).unwrap() > a);
        // The kernel's schedstat for this thread: CPU time so far (run-queue wait beside it).
        // SAFETY: gettid has no preconditions.
        let (cpu, _wait) = schedstat(unsafe { libc::gettid() } as i64).expect("schedstat");
        assert!(cpu > 0);
    }
}
