//! HTTPS serving: one POST route per enabled [`Endpoint`] (an AdmissionReview in, one out),
//! `GET /healthz`, over rustls, HTTP/1.1 (what the API server speaks to webhooks).

use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::future::BoxFuture;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use kube::core::DynamicObject;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use volcano_api::crd::Queue;

use crate::admit::{admit, Endpoint, Facts, Settings};

/// What the handlers read of the cluster.
pub trait Cluster: Send + Sync + 'static {
    /// Every queue, as last seen.
    fn queues(&self) -> Vec<Queue>;
    /// The `scheduling.volcano.sh/queue-name` annotation of a namespace, if any.
    fn namespace_queue(&self, namespace: &str) -> BoxFuture<'static, Option<String>>;
}

/// A cluster with fixed queues and no namespace annotations (tests, and `--dry-run` use).
#[derive(Clone, Debug, Default)]
pub struct StaticCluster {
    /// The queues.
    pub queues: Vec<Queue>,
}

impl Cluster for StaticCluster {
    fn queues(&self) -> Vec<Queue> {
        self.queues.clone()
    }
    fn namespace_queue(&self, _namespace: &str) -> BoxFuture<'static, Option<String>> {
        Box::pin(async { None })
    }
}

struct Shared {
    settings: Settings,
    cluster: Arc<dyn Cluster>,
}

/// The router: the enabled endpoints and `/healthz`.
pub fn router(settings: Settings, cluster: Arc<dyn Cluster>, enabled: &[Endpoint]) -> Router {
    let shared = Arc::new(Shared { settings, cluster });
    let mut r = Router::new().route("/healthz", get(|| async { "ok" }));
    for e in enabled {
        r = r.route(e.path(), post(handle));
    }
    r.with_state(shared)
}

async fn handle(State(s): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    let Some(endpoint) = Endpoint::from_path(uri.path()) else {
        return (StatusCode::NOT_FOUND, "no such endpoint").into_response();
    };
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("not an AdmissionReview: {e}")).into_response(),
    };
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("an AdmissionReview without a request: {e}")).into_response()
        }
    };
    let queues = s.cluster.queues();
    let namespace_queue = match (endpoint, req.namespace.as_deref()) {
        (Endpoint::PodGroupsMutate, Some(ns)) => s.cluster.namespace_queue(ns).await,
        _ => None,
    };
    let facts = Facts { queues: &queues, namespace_queue: namespace_queue.as_deref() };
    let res = admit(endpoint, &req, &s.settings, facts);
    if !res.allowed {
        tracing::info!(path = endpoint.path(), object = %req.name, namespace = ?req.namespace, reason = %res.result.message, "denied");
    }
    Json(res.into_review()).into_response()
}

/// Serves `app` over TLS on `listener` until `shutdown` completes; then each open
/// connection finishes the request it is serving and is closed, so that the API server's
/// kept-alive connections do not keep reaching a webhook that stopped.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    tokio::pin!(shutdown);
    let (closing_tx, closing_rx) = tokio::sync::watch::channel(false);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = &mut shutdown => {
                let _ = closing_tx.send(true);
                return Ok(());
            }
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let mut closing = closing_rx.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, "TLS handshake failed: {e}");
                    return;
                }
            };
            let service = TowerToHyperService::new(app);
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let served = tokio::select! {
                served = conn.as_mut() => served,
                // Stopping (or the server gone): finish the request in progress, then close.
                _ = async { drop(closing.wait_for(|c| *c).await) } => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = served {
                tracing::debug!(%peer, "connection ended: {e}");
            }
        });
    }
}
