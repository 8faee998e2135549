//! A recent time-to-first-byte distribution per failure domain, so that a
//! slow-call threshold can be set from data: about 3× the normal high
//! percentile, per model (per failure domain here; with `isolate_by_model`
//! each model is one), since a reasoning model and a small fast model have
//! different baselines.
//!
//! Off by default ([`BreakerLayerBuilder::latency_estimate`]): it costs a
//! clock read at admission and one shared atomic increment per response.
//!
//! [`BreakerLayerBuilder::latency_estimate`]: super::BreakerLayerBuilder::latency_estimate

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Buckets are half-octaves of milliseconds: bucket `i` holds latencies in
/// `[2^(i/2), 2^((i+1)/2))` ms (bucket 0 also holds everything under 1 ms),
/// so a percentile is read to within a factor of √2; the last bucket holds
/// everything from about 3 hours up.
const BUCKETS: usize = 48;

/// After this many samples every bucket is halved: the distribution follows
/// the last few thousand responses, not the process's whole life.
const DECAY_EVERY: u32 = 2048;

/// The distribution of one failure domain's time to first byte.
#[derive(Debug, Default)]
pub(crate) struct LatencyHistogram {
    // Boxed, so that the domain's status word, read on every call, keeps its
    // cache line to itself; and made at the first record, so that a layer
    // that estimates nothing pays 8 bytes per failure domain, not 200.
    buckets: OnceLock<Box<[AtomicU32; BUCKETS]>>,
    since_decay: AtomicU32,
}

impl LatencyHistogram {
    /// Counts one response that took `latency` to its first byte. Concurrent
    /// records during a decay may be halved or not: an estimate, not a count.
    pub(crate) fn record(&self, latency: Duration) {
        let buckets = self
            .buckets
            .get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU32::new(0))));
        buckets[bucket(latency)].fetch_add(1, Ordering::Relaxed);
        if self.since_decay.fetch_add(1, Ordering::Relaxed) + 1 >= DECAY_EVERY {
            self.since_decay.store(0, Ordering::Relaxed);
            for b in buckets.iter() {
                let _ = b.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n / 2));
            }
        }
    }

    pub(crate) fn reset(&self) {
        for b in self.buckets.get().into_iter().flat_map(|b| b.iter()) {
            b.store(0, Ordering::Relaxed);
        }
        self.since_decay.store(0, Ordering::Relaxed);
    }

    /// The upper bound of the bucket holding the `q` quantile, with the
    /// samples it was read from; `None` before any record. Allocates
    /// nothing: read where a call waits on it.
    pub(crate) fn upper_quantile(&self, q: f64) -> Option<(u64, Duration)> {
        let buckets = self.buckets.get()?;
        let samples: u64 = buckets
            .iter()
            .map(|b| u64::from(b.load(Ordering::Relaxed)))
            .sum();
        if samples == 0 {
            return None;
        }
        let rank = ((samples as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        let i = buckets
            .iter()
            .position(|b| {
                seen += u64::from(b.load(Ordering::Relaxed));
                seen >= rank
            })
            .unwrap_or(BUCKETS - 1);
        Some((samples, upper_bound(i)))
    }

    /// The estimate, if any response was recorded.
    pub(crate) fn estimate(&self) -> Option<LatencyEstimate> {
        let counts: Vec<u64> = self
            .buckets
            .get()?
            .iter()
            .map(|b| u64::from(b.load(Ordering::Relaxed)))
            .collect();
        let samples: u64 = counts.iter().sum();
        if samples == 0 {
            return None;
        }
        let quantile = |q: f64| {
            // The smallest bucket whose cumulative count reaches q of all.
            let rank = ((samples as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            let i = counts
                .iter()
                .position(|&n| {
                    seen += n;
                    seen >= rank
                })
                .unwrap_or(BUCKETS - 1);
            representative(i)
        };
        Some(LatencyEstimate {
            samples,
            p50: quantile(0.50),
            p90: quantile(0.90),
            p99: quantile(0.99),
        })
    }
}

/// The bucket of `latency`.
fn bucket(latency: Duration) -> usize {
    let ms = latency.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        return 0;
    }
    // 2·log2(ms) is the half-octave; the cast saturates, the `min` caps.
    ((2.0 * ms.log2()) as usize).min(BUCKETS - 1)
}

/// The least latency above bucket `i`.
fn upper_bound(i: usize) -> Duration {
    Duration::from_secs_f64(2f64.powf((i as f64 + 1.0) / 2.0) / 1000.0)
}

/// The latency a bucket stands for: the geometric middle of its bounds.
fn representative(i: usize) -> Duration {
    let ms = 2f64.powf((i as f64 + 0.5) / 2.0);
    Duration::from_secs_f64(ms / 1000.0)
}

/// A failure domain's recent time to first byte, kept by a layer built with
/// [`latency_estimate`](super::BreakerLayerBuilder::latency_estimate): set
/// `slow_call` at about 3× its p99. Percentiles are read from
/// half-octave buckets, so they are within a factor of √2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LatencyEstimate {
    /// Responses counted, recent ones weighing more (halved every 2,048).
    pub samples: u64,
    /// Median.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "p50_ms", serialize_with = "crate::millis::duration")
    )]
    pub p50: Duration,
    /// 90th percentile.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "p90_ms", serialize_with = "crate::millis::duration")
    )]
    pub p90: Duration,
    /// 99th percentile: a `slow_call` of about 3× this.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "p99_ms", serialize_with = "crate::millis::duration")
    )]
    pub p99: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_empty_histogram_has_no_estimate() {
        assert_eq!(LatencyHistogram::default().estimate(), None);
    }

    #[test]
    fn percentiles_come_within_a_half_octave_of_the_latencies() {
        let h = LatencyHistogram::default();
        // 98 responses at 400 ms, 2 at 9 s: p50 and p90 near 400 ms, p99 near 9 s.
        for _ in 0..98 {
            h.record(Duration::from_millis(400));
        }
        for _ in 0..2 {
            h.record(Duration::from_secs(9));
        }
        let e = h.estimate().expect("recorded");
        assert_eq!(e.samples, 100);
        let near = |d: Duration, want: f64| {
            let got = d.as_secs_f64() * 1000.0;
            got / want < 2f64.sqrt() && want / got < 2f64.sqrt()
        };
        assert!(near(e.p50, 400.0), "{e:?}");
        assert!(near(e.p90, 400.0), "{e:?}");
        assert!(near(e.p99, 9000.0), "{e:?}");
    }

    #[test]
    fn an_upper_quantile_bounds_the_latencies_below_it() {
        let h = LatencyHistogram::default();
        assert_eq!(h.upper_quantile(0.95), None);
        for ms in 800..=960 {
            h.record(Duration::from_millis(ms));
        }
        let (samples, bound) = h.upper_quantile(0.95).expect("recorded");
        assert_eq!(samples, 161);
        assert!(bound >= Duration::from_millis(960), "{bound:?}");
        assert!(bound <= Duration::from_millis(1400), "{bound:?}");
    }

    #[test]
    fn old_samples_fade_so_the_estimate_follows_a_slowdown() {
        let h = LatencyHistogram::default();
        for _ in 0..10 * DECAY_EVERY {
            h.record(Duration::from_millis(100));
        }
        for _ in 0..4 * DECAY_EVERY {
            h.record(Duration::from_secs(3));
        }
        let e = h.estimate().expect("recorded");
        assert!(e.p50 > Duration::from_secs(2), "{e:?}");
        assert!(e.samples < u64::from(2 * DECAY_EVERY), "{e:?}");
    }

    proptest! {
        /// Every latency lands in a bucket whose representative is within
        /// a factor of √2 of it (from 1 ms to the last bucket).
        #[test]
        fn a_latency_is_read_back_within_a_half_octave(ms in 1.0f64..4_000_000.0) {
            let d = Duration::from_secs_f64(ms / 1000.0);
            let back = representative(bucket(d)).as_secs_f64() * 1000.0;
            prop_assert!(back / ms <= 2f64.sqrt() + 1e-9 && ms / back <= 2f64.sqrt() + 1e-9, "{ms} -> {back}");
        }

        #[test]
        fn any_latency_has_a_bucket(nanos in any::<u64>()) {
            prop_assert!(bucket(Duration::from_nanos(nanos)) < BUCKETS);
        }
    }
}
