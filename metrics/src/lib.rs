//! volcano-metrics: Volcano's Prometheus metrics, under Volcano's names, types, labels and
//! buckets (docs/observability.md has the table).
//!
//! - [`SchedulerMetrics`]: the scheduler's `volcano_*` families. The shells feed it what
//!   the core decided ([`volcano_framework::CycleOutcome`]: queue reports and
//!   [`volcano_framework::CycleMetrics`]) and how long each step took ([`CycleTimer`], an
//!   [`volcano_framework::Observer`] that reads the clock the core never reads).
//! - [`ControllerMetrics`]: the job and queue controllers' families.
//!
//! Both register into their own [`prometheus::Registry`] (no global registry), which the
//! cluster processes serve on `/metrics` and `volcano-rs simulate --metrics FILE` writes out.
//! Series of deleted queues and jobs are removed, so the number of series follows the
//! cluster, not its history.
#![deny(missing_docs)]

mod controller;
mod scheduler;
mod timing;

pub use controller::{ControllerMetrics, POD_GROUP_PHASES};
pub use scheduler::{SchedulerMetrics, TaskStage};
pub use timing::CycleTimer;

use prometheus::{Encoder, Registry, TextEncoder};

/// Go's `prometheus.ExponentialBucketsRange(min, max, count)`: `count` buckets from `min`
/// to `max`, each a constant factor above the last.
pub fn exponential_buckets_range(min: f64, max: f64, count: usize) -> Vec<f64> {
    assert!(min > 0.0 && max > min && count >= 2, "valid bucket range");
    let factor = (max / min).powf(1.0 / (count as f64 - 1.0));
    let mut buckets = Vec::with_capacity(count);
    let mut b = min;
    for _ in 0..count {
        buckets.push(b);
        b *= factor;
    }
    buckets
}

/// The text exposition of a registry.
pub fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    TextEncoder::new().encode(&registry.gather(), &mut buf).expect("the text encoder writes to memory");
    String::from_utf8(buf).expect("the text exposition is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_go() {
        // prometheus.ExponentialBucketsRange(1, 5000, 20): the first and the last are the
        // bounds, the factor is (5000/1)^(1/19) ≈ 1.5656.
        let b = exponential_buckets_range(1.0, 5000.0, 20);
        assert_eq!(b.len(), 20);
        assert_eq!(b[0], 1.0);
        assert!((b[19] - 5000.0).abs() < 1e-6, "{}", b[19]);
        assert!((b[1] - 1.565_7).abs() < 1e-3, "{}", b[1]);
        let b = exponential_buckets_range(0.1, 100.0, 15);
        assert!((b[14] - 100.0).abs() < 1e-9);
    }
}
