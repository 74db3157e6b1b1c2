//! Idle spinning: after a read, a reactor keeps polling its sockets for a short window
//! (`idle_spin_us`) before it sleeps in epoll_wait, as long as its core has nothing else to run.
//!
//! A reactor asleep in epoll_wait is woken by its client's send, and that wake-up (waking an
//! idle CPU: an IPI, a VM exit in a guest) is paid on the client's core, inside its send.
//! When requests come closer together than the window, the spinning reactor is already
//! awake: a send only puts the socket on the epoll ready list. BENCHMARKS.md ("Idle
//! spinning") has the measurements.
//!
//! What it costs is CPU while a reactor waits less than the window, so two guards: the
//! reactor controller (`elastic`) pauses spinning on a reactor that had to wait for a CPU
//! (other work wants the core), and subtracts the time spent spinning from the reactor's busy
//! share, so that spinning never looks like load to elastic threading.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::elastic::ReactorStats;
use super::state::Server;

thread_local! {
    /// Reads this reactor thread has made.
    static READS: Cell<u64> = const { Cell::new(0) };
    /// The spinner's waker while it waits for a read.
    static WAITING: Cell<Option<Waker>> = const { Cell::new(None) };
}

/// Spin time is published to the reactor's stats at least this often (ns).
const PUBLISH_NS: u64 = 1_000_000;
/// How often a paused spinner looks again.
const PAUSED_RECHECK: Duration = Duration::from_millis(100);

/// Counts a read on this thread and wakes its spinner if it waits for one.
#[inline]
pub fn note_read() {
    READS.with(|r| r.set(r.get().wrapping_add(1)));
    if let Some(w) = WAITING.with(|w| w.take()) {
        w.wake();
    }
}

fn reads() -> u64 {
    READS.with(|r| r.get())
}

/// Until this thread's next read.
async fn next_read() {
    let seen = reads();
    std::future::poll_fn(|cx| {
        if reads() != seen {
            return Poll::Ready(());
        }
        WAITING.with(|w| w.set(Some(cx.waker().clone())));
        Poll::Pending
    })
    .await
}

/// Reactor `index`'s spinner (a task on its LocalSet): from each read until `window` passes
/// without one, it yields, and the runtime polls the I/O driver without blocking in between.
pub async fn run(srv: Arc<Server>, index: usize, window: Duration) {
    if let Some(stats) = srv.reactors.stats.get(index) {
        spin(stats, window).await
    }
}

async fn spin(stats: &ReactorStats, window: Duration) {
    loop {
        if stats.spin_paused.load(Ordering::Relaxed) {
            tokio::time::sleep(PAUSED_RECHECK).await;
            continue;
        }
        next_read().await;
        let mut seen = reads();
        let mut last_read = quanta::Instant::now();
        let mut prev = last_read;
        let mut spun_ns = 0u64;
        while !stats.spin_paused.load(Ordering::Relaxed) {
            // tokio defers this wake-up past a zero-timeout poll of the I/O driver.
            tokio::task::yield_now().await;
            let now = quanta::Instant::now();
            let r = reads();
            if r != seen {
                seen = r;
                last_read = now;
            } else {
                spun_ns += now.duration_since(prev).as_nanos() as u64;
                if now.duration_since(last_read) > window {
                    break;
                }
            }
            prev = now;
            if spun_ns >= PUBLISH_NS {
                stats.spin_ns.fetch_add(std::mem::take(&mut spun_ns), Ordering::Relaxed);
            }
        }
        stats.spin_ns.fetch_add(spun_ns, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spun(stats: &ReactorStats) -> u64 {
        stats.spin_ns.load(Ordering::Relaxed)
    }

    /// Runs the spinner alongside `f` on a one-thread runtime, as a reactor does.
    fn with_spinner(stats: &ReactorStats, window: Duration, f: impl std::future::Future<Output = ()>) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            tokio::select! {
                _ = spin(stats, window) => unreachable!("the spinner runs forever"),
                _ = f => {}
            }
        });
    }

    async fn quiet(ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await
    }

    #[test]
    fn spins_from_a_read_until_the_window_passes_then_sleeps() {
        let stats = ReactorStats::default();
        let window = Duration::from_millis(5);
        with_spinner(&stats, window, async {
            quiet(20).await;
            assert_eq!(spun(&stats), 0, "no read yet: nothing to spin for");
            note_read();
            quiet(40).await;
            let after_read = spun(&stats);
            assert!(after_read >= window.as_nanos() as u64 / 2, "spun {after_read} ns after a read, window {window:?}");
            quiet(30).await;
            assert_eq!(spun(&stats), after_read, "still spinning after the window");
            // Reads within the window keep it going: ten of them 2 ms apart.
            for _ in 0..10 {
                note_read();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            quiet(40).await;
            assert!(spun(&stats) - after_read >= 20_000_000, "spun {} ns over ~25 ms of reads", spun(&stats) - after_read);
        });
    }

    #[test]
    fn a_paused_spinner_does_not_spin() {
        let stats = ReactorStats::default();
        stats.spin_paused.store(true, Ordering::Relaxed);
        with_spinner(&stats, Duration::from_millis(5), async {
            quiet(10).await;
            note_read();
            quiet(30).await;
            assert_eq!(spun(&stats), 0);
        });
    }
}
