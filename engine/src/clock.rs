//! Wall-clock time for the engine: milliseconds and microseconds since the epoch, and the
//! cheap per-command reading (`now_ms_at`: a TSC instant the command read anyway, anchored to
//! the wall clock once a millisecond).

/// Wall-clock time in milliseconds since the epoch.
#[inline]
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Wall-clock milliseconds at monotonic instant `at` (one the caller read anyway, e.g. a
/// command's start): the thread's last wall-clock reading plus the monotonic time since,
/// read again once that reading is 1 ms old — so a command costs one clock read instead of
/// two, and a step of the system clock is followed within a millisecond. `at` is a TSC
/// reading (quanta): a command's clock reads are a rdtsc each, not a clock_gettime.
#[inline]
pub fn now_ms_at(at: quanta::Instant) -> i64 {
    use std::cell::Cell;
    use std::time::Duration;
    thread_local! {
        static ANCHOR: Cell<Option<(quanta::Instant, i64)>> = const { Cell::new(None) };
    }
    ANCHOR.with(|anchor| {
        if let Some((then, unix_us)) = anchor.get() {
            if let Some(since) = at.checked_duration_since(then) {
                if since < Duration::from_millis(1) {
                    return (unix_us + since.as_micros() as i64) / 1000;
                }
            }
        }
        let unix_us = now_us();
        anchor.set(Some((at, unix_us)));
        unix_us / 1000
    })
}

/// Wall-clock time in microseconds since the epoch.
pub fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quanta::Instant;
    use std::time::Duration;

    #[test]
    fn wall_clock_at_an_instant_follows_the_system_clock() {
        // The wall clock read before and after a call brackets what it returns (1 ms of
        // rounding either way), however long the thread was descheduled in between.
        let bracketed = |f: &dyn Fn() -> i64| {
            let lo = now_ms();
            let x = f();
            let hi = now_ms();
            assert!(lo - 1 <= x && x <= hi + 1, "{x} not within {lo}..={hi}");
            x
        };
        let first = Instant::now();
        let a = bracketed(&|| now_ms_at(first));
        // Within the millisecond: derived from the anchor, never behind it.
        let b = bracketed(&|| now_ms_at(Instant::now()));
        assert!(b >= a);
        // Past the millisecond: read again.
        std::thread::sleep(Duration::from_millis(5));
        let c = bracketed(&|| now_ms_at(Instant::now()));
        assert!(c >= a + 4, "{c} after {a}");
        // An instant before the anchor reads the clock rather than trusting the old reading.
        bracketed(&|| now_ms_at(first));
    }
}
