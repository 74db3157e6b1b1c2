//! `instantaneous_ops_per_sec` as Redis computes it (its `trackInstantaneousMetric`): the
//! command counter sampled every 100 ms, the rate of each interval kept for the last 16
//! samples, their mean reported.

use std::time::Instant;

/// Intervals averaged (Redis's STATS_METRIC_SAMPLES).
const SAMPLES: usize = 16;

/// How often the counter is sampled.
pub const EVERY: std::time::Duration = std::time::Duration::from_millis(100);

#[derive(Debug, Default)]
pub struct OpsMeter {
    rates: [f64; SAMPLES],
    /// Intervals measured so far (the next one goes at `taken % SAMPLES`).
    taken: usize,
    last: Option<(Instant, u64)>,
}

impl OpsMeter {
    /// Takes the counter's value `total` at `now`.
    pub fn sample(&mut self, now: Instant, total: u64) {
        if let Some((at, before)) = self.last {
            let secs = now.saturating_duration_since(at).as_secs_f64();
            if secs > 0.0 {
                self.rates[self.taken % SAMPLES] = total.saturating_sub(before) as f64 / secs;
                self.taken += 1;
            }
        }
        self.last = Some((now, total));
    }

    /// The mean rate of the last intervals, per second (0 before the first one).
    pub fn per_sec(&self) -> u64 {
        let n = self.taken.min(SAMPLES);
        if n == 0 {
            return 0;
        }
        (self.rates[..n].iter().sum::<f64>() / n as f64).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_rate_is_the_mean_of_the_last_sixteen_intervals() {
        let mut m = OpsMeter::default();
        let t0 = Instant::now();
        assert_eq!(m.per_sec(), 0);
        m.sample(t0, 0);
        assert_eq!(m.per_sec(), 0, "one sample is no interval");
        // 1,000 commands per 100 ms: 10,000/s.
        for i in 1..=20u64 {
            m.sample(t0 + Duration::from_millis(100 * i), 1000 * i);
        }
        assert_eq!(m.per_sec(), 10_000);
        // Idle for 8 intervals: half of the window is idle.
        for i in 21..=28u64 {
            m.sample(t0 + Duration::from_millis(100 * i), 20_000);
        }
        assert_eq!(m.per_sec(), 5_000);
        for i in 29..=44u64 {
            m.sample(t0 + Duration::from_millis(100 * i), 20_000);
        }
        assert_eq!(m.per_sec(), 0);
    }
}
