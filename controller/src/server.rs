//! The controller's HTTP endpoints: `/metrics` on `--listen-address`, `/healthz` and
//! `/readyz` on `--healthz-address`, both on one listener when the addresses are the same.
//!
//! `/metrics` is the Prometheus text exposition of the [`ControllerMetrics`] the
//! reconcilers update (Volcano's controller families, docs/observability.md) with the
//! process metrics; `/healthz` and `/readyz` answer `ok` while the process runs.

use std::net::SocketAddr;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderName;
use axum::routing::get;
use axum::Router;
use volcano_metrics::ControllerMetrics;

/// One listener: its address, the flag that asked for it, and what it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The address.
    pub addr: SocketAddr,
    /// The flag that gave it (for the error when it cannot be bound).
    pub flag: &'static str,
    /// Serves `/healthz` and `/readyz`.
    pub health: bool,
    /// Serves `/metrics`.
    pub metrics: bool,
}

/// The listeners for `--listen-address` (`listen`) and `--healthz-address` (`healthz`):
/// one for both when they are the same address, none for an address not given.
pub fn endpoints(listen: Option<SocketAddr>, healthz: Option<SocketAddr>) -> Vec<Endpoint> {
    match (listen, healthz) {
        (Some(l), Some(h)) if l == h => {
            vec![Endpoint { addr: l, flag: "listen-address", health: true, metrics: true }]
        }
        (l, h) => {
            let metrics = l.map(|addr| Endpoint { addr, flag: "listen-address", health: false, metrics: true });
            let health = h.map(|addr| Endpoint { addr, flag: "healthz-address", health: true, metrics: false });
            metrics.into_iter().chain(health).collect()
        }
    }
}

async fn ok() -> &'static str {
    "ok"
}

async fn metrics(State(m): State<ControllerMetrics>) -> ([(HeaderName, &'static str); 1], String) {
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], m.render())
}

/// The routes of `endpoint`.
pub fn router(endpoint: &Endpoint, m: ControllerMetrics) -> Router {
    let mut r = Router::new();
    if endpoint.health {
        r = r.route("/healthz", get(ok)).route("/readyz", get(ok));
    }
    if endpoint.metrics {
        r = r.route("/metrics", get(metrics));
    }
    r.with_state(m)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn one_listener_when_the_addresses_are_the_same() {
        let both = endpoints(Some(addr("0.0.0.0:8081")), Some(addr("0.0.0.0:8081")));
        assert_eq!(
            both,
            [Endpoint { addr: addr("0.0.0.0:8081"), flag: "listen-address", health: true, metrics: true }]
        );
        let two = endpoints(Some(addr("0.0.0.0:8081")), Some(addr("0.0.0.0:11252")));
        assert_eq!(
            two,
            [
                Endpoint { addr: addr("0.0.0.0:8081"), flag: "listen-address", health: false, metrics: true },
                Endpoint { addr: addr("0.0.0.0:11252"), flag: "healthz-address", health: true, metrics: false },
            ]
        );
        assert_eq!(endpoints(None, Some(addr("0.0.0.0:11252")))[0].flag, "healthz-address");
        assert!(endpoints(None, None).is_empty());
    }

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn metrics_and_health_on_one_listener() {
        let m = ControllerMetrics::new();
        m.register_process_metrics();
        m.job_completed("ml/a", "default");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let e = Endpoint { addr: at, flag: "listen-address", health: true, metrics: true };
        let server = tokio::spawn(async move { axum::serve(listener, router(&e, m)).await });
        let text = get(at, "/metrics").await;
        assert!(text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("text/plain; version=0.0.4"), "{text}");
        assert!(
            text.contains("volcano_job_completed_phase_count{job_name=\"ml/a\",queue_name=\"default\"} 1"),
            "{text}"
        );
        #[cfg(target_os = "linux")]
        assert!(text.contains("process_cpu_seconds_total"), "{text}");
        assert!(get(at, "/healthz").await.ends_with("ok"));
        assert!(get(at, "/readyz").await.ends_with("ok"));
        server.abort();
    }

    #[tokio::test]
    async fn each_listener_serves_its_own_paths() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let e = Endpoint { addr: at, flag: "healthz-address", health: true, metrics: false };
        let server = tokio::spawn(async move { axum::serve(listener, router(&e, ControllerMetrics::new())).await });
        assert!(get(at, "/metrics").await.contains(" 404 "));
        assert!(get(at, "/healthz").await.ends_with("ok"));
        server.abort();
    }
}
