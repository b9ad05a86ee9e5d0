//! The scheduler's HTTP endpoints: `/metrics` on `--listen-address`, `/healthz` and
//! `/readyz` on `--healthz-address` (both served on one listener when the addresses are
//! the same).
//!
//! `/healthz` answers `ok` while the process runs its loop; `/readyz` answers `ok` once the
//! caches are synced (503 before). `/metrics` serves the Prometheus text exposition of
//! [`Metrics`]: Volcano's scheduler families ([`SchedulerMetrics`], docs/observability.md),
//! the scheduler's own `volcano_rs_*` cycle, snapshot and applier counters, and the process
//! metrics.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use prometheus::{exponential_buckets, Histogram, HistogramOpts, IntCounter, IntGauge, Registry};
use volcano_metrics::SchedulerMetrics;

/// The metrics the scheduler exports now.
#[derive(Clone)]
pub struct Metrics {
    /// The registry served on `/metrics`.
    pub registry: Registry,
    /// Volcano's families (in the same registry).
    pub volcano: SchedulerMetrics,
    /// `volcano_rs_snapshot_duration_milliseconds`: taking the cycle's snapshot from the
    /// cache, whichever way (kept, updated or rebuilt).
    pub snapshot_latency: Histogram,
    /// `volcano_rs_snapshot_update_duration_milliseconds`: the snapshots updated in place.
    pub update_latency: Histogram,
    /// `volcano_rs_snapshot_rebuild_duration_milliseconds`: the snapshots rebuilt.
    pub rebuild_latency: Histogram,
    /// `volcano_rs_cycles_total`: cycles run.
    pub cycles: IntCounter,
    /// `volcano_rs_snapshot_rebuilds_total`: cycles whose snapshot had to be rebuilt.
    pub rebuilds: IntCounter,
    /// `volcano_rs_snapshot_updates_total`: cycles whose snapshot was brought up to date in
    /// place (in time proportional to the changes).
    pub updates: IntCounter,
    /// `volcano_rs_leader`: 1 while this replica holds the lease.
    pub leader: IntGauge,
    /// `volcano_rs_binds_total`: binds the API server accepted.
    pub binds: IntGauge,
    /// `volcano_rs_bind_failures_total`: binds that failed.
    pub bind_failures: IntGauge,
    /// `volcano_rs_evictions_total`: pods deleted for eviction.
    pub evictions: IntGauge,
    /// `volcano_rs_status_writes_total`: status writes sent.
    pub status_writes: IntGauge,
    /// `volcano_rs_config_reload_failures_total`: configuration reloads rejected.
    pub config_rejections: IntCounter,
}

impl Metrics {
    /// The metrics, registered.
    pub fn new() -> Self {
        let volcano = SchedulerMetrics::new();
        let registry = volcano.registry.clone();
        let histogram = |name: &str, help: &str, start: f64, count: usize| {
            // Volcano's buckets: `count` exponential buckets from `start` up to 5000 ms.
            let factor = (5000.0f64 / start).powf(1.0 / (count as f64 - 1.0));
            let h = Histogram::with_opts(
                HistogramOpts::new(name, help)
                    .buckets(exponential_buckets(start, factor, count).expect("valid buckets")),
            )
            .expect("valid histogram");
            registry.register(Box::new(h.clone())).expect("unique metric");
            h
        };
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("valid counter");
            registry.register(Box::new(c.clone())).expect("unique metric");
            c
        };
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("valid gauge");
            registry.register(Box::new(g.clone())).expect("unique metric");
            g
        };
        let metrics = Metrics {
            snapshot_latency: histogram(
                "volcano_rs_snapshot_duration_milliseconds",
                "Time to take the cycle's snapshot from the cache, in milliseconds",
                0.1,
                20,
            ),
            update_latency: histogram(
                "volcano_rs_snapshot_update_duration_milliseconds",
                "Time to update the kept snapshot in place with the changes since the last cycle, in milliseconds",
                0.1,
                20,
            ),
            rebuild_latency: histogram(
                "volcano_rs_snapshot_rebuild_duration_milliseconds",
                "Time to rebuild the snapshot from the cache, in milliseconds",
                0.1,
                20,
            ),
            cycles: counter("volcano_rs_cycles_total", "Scheduling cycles run"),
            rebuilds: counter("volcano_rs_snapshot_rebuilds_total", "Cycles whose snapshot was rebuilt from the cache"),
            updates: counter(
                "volcano_rs_snapshot_updates_total",
                "Cycles whose snapshot was updated in place with the changes since the last one",
            ),
            leader: gauge("volcano_rs_leader", "1 while this replica holds the leader lease"),
            binds: gauge("volcano_rs_binds_total", "Binds the API server accepted"),
            bind_failures: gauge("volcano_rs_bind_failures_total", "Binds that failed"),
            evictions: gauge("volcano_rs_evictions_total", "Pods deleted for eviction"),
            status_writes: gauge("volcano_rs_status_writes_total", "Status writes sent"),
            config_rejections: counter(
                "volcano_rs_config_reload_failures_total",
                "Scheduler configuration reloads rejected (the last good configuration stays)",
            ),
            registry,
            volcano,
        };
        #[cfg(target_os = "linux")]
        {
            let pc = prometheus::process_collector::ProcessCollector::for_self();
            metrics.registry.register(Box::new(pc)).expect("unique metric");
        }
        metrics
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        volcano_metrics::render(&self.registry)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// What the endpoints report.
#[derive(Clone)]
pub struct Health {
    /// Caches synced.
    pub ready: Arc<AtomicBool>,
    /// Metrics to serve.
    pub metrics: Metrics,
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(h): State<Health>) -> (StatusCode, &'static str) {
    if h.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
    }
}

async fn metrics(State(h): State<Health>) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], h.metrics.render())
}

/// The routes of one listener.
pub fn router(health: Health, serve_health: bool, serve_metrics: bool) -> Router {
    let mut r = Router::new();
    if serve_health {
        r = r.route("/healthz", get(healthz)).route("/readyz", get(readyz));
    }
    if serve_metrics {
        r = r.route("/metrics", get(metrics));
    }
    r.with_state(health)
}

/// Binds a listener (an error here is an error at start, before anything is watched).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}
