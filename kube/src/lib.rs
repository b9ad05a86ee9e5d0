//! volcano-kube: what the cluster processes of volcano-rs (`scheduler`, `webhook`,
//! `controller`) share: [`client`] (a kubeconfig file, or the in-cluster or default
//! configuration), [`leader`] (Lease leader election as client-go does it) and
//! [`termination`] (SIGTERM or Ctrl-C), [`event_note`] (an event message the Events API
//! accepts), [`retry_backoff`] (the controllers' back-off after failed reconciles),
//! [`WatchBackoff`] (the watches' back-off, short and reset by every success),
//! [`relist_jitter`] (the wait before a relist the API server asked for) and
//! [`retry_after`] (the wait a throttling API server asks for).

pub mod leader;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{InferConfigError, KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};
use thiserror::Error;

/// Why no Kubernetes client could be made.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The kubeconfig file cannot be read or used.
    #[error("{}: {source}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// No kubeconfig was given, and neither the in-cluster configuration nor the default
    /// kubeconfig can be used.
    #[error(transparent)]
    Infer(#[from] InferConfigError),
    /// The configuration does not make a client (its TLS settings, say).
    #[error(transparent)]
    Build(#[from] kube::Error),
}

impl ClientError {
    /// A bounded label for logs and metrics: the user fixes the file (`kubeconfig`), the
    /// environment the process runs in (`no_configuration`) or the configuration's contents
    /// (`client`).
    pub fn category(&self) -> &'static str {
        match self {
            ClientError::Kubeconfig { .. } => "kubeconfig",
            ClientError::Infer(_) => "no_configuration",
            ClientError::Build(_) => "client",
        }
    }
}

/// The HTTP status of an error the API server answered (`None` for a connection or
/// decoding error).
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// A bounded label for a failed API call, saying what the operator looks at: the
/// component's RBAC (`forbidden`, `unauthorized`), an object gone or changed under it
/// (`not_found`, `conflict`), an object the API server refuses (`invalid`), an API server
/// that throttles or is unavailable (`throttled`, `unavailable`), the connection
/// (`connection`), or anything else (`api`).
pub fn api_error_category(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) => match s.code {
            401 => "unauthorized",
            403 => "forbidden",
            404 | 410 => "not_found",
            409 => "conflict",
            400 | 422 => "invalid",
            429 => "throttled",
            500..=599 => "unavailable",
            _ => "api",
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => "connection",
        _ => "api",
    }
}

/// A failed API call for a person: the API server's own message with its reason and code
/// (`pod x is already assigned to node y (Conflict, 409)`), or the client's error.
pub fn error_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => format!("{} ({}, {})", s.message, s.reason, s.code),
        e => e.to_string(),
    }
}

/// The Kubernetes client for `kubeconfig`, or the in-cluster / default configuration when
/// there is none. The error names the file.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    Ok(Client::try_from(config(kubeconfig).await?)?)
}

/// The client configuration [`client`] uses, to adjust before making the client (the
/// scheduler turns off kube's own retries of throttled calls: its applier retries them
/// itself, checking first that the decision still holds).
pub async fn config(kubeconfig: Option<&Path>) -> Result<Config, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let file = |source| ClientError::Kubeconfig { path: path.to_path_buf(), source };
            let kc = Kubeconfig::read_from(path).map_err(file)?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.map_err(file)?
        }
        None => Config::infer().await?,
    };
    Ok(config)
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn termination() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A message of at most 1 kB (the Events API's limit on `note`), cut at a character boundary.
pub fn event_note(message: &str) -> String {
    const MAX: usize = 1024;
    if message.len() <= MAX {
        return message.to_string();
    }
    let mut end = MAX - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// The wait before retrying after `failures` failed attempts in a row: 200 ms doubling up to
/// a minute.
pub fn retry_backoff(failures: u32) -> std::time::Duration {
    let ms = 200u64.saturating_mul(1u64 << (failures.max(1) - 1).min(9));
    std::time::Duration::from_millis(ms.min(60_000))
}

/// The first wait of a watch after an error.
pub const WATCH_BACKOFF_FIRST: Duration = Duration::from_millis(250);
/// The longest wait of a watch between attempts.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// The longest wait before a relist after `410 Gone`.
pub const RELIST_JITTER_MAX: Duration = Duration::from_secs(1);

/// The back-off of every watch of volcano-rs (`WatchStreamExt::backoff`) and of the
/// controllers' reconcile triggers: 250 ms doubling up to 2 s, each wait drawn between
/// half and all of that (so replicas and watches spread), and back to 250 ms at the first
/// success (kube-runtime's `StreamBackoff` resets it on every event, and the scheduler's pod
/// watch when a watch starts).
///
/// kube-runtime's default (800 ms doubling up to 30 s, reset only after two minutes
/// without an error) is at 12.8 or 25.6 s after a 15 s outage, so a watch first tries again
/// up to half a minute after the API server is back. An API server that is down costs a
/// refused connection per watch every 1–2 s instead; one that throttles answers 429 with
/// `Retry-After`, which the client honours before the watch sees an error.
#[derive(Clone, Debug)]
pub struct WatchBackoff {
    failures: u32,
    max: Duration,
    rng: u64,
}

impl WatchBackoff {
    /// A back-off whose jitter is seeded from the clock and the process id.
    pub fn new() -> Self {
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self::with_seed(nanos ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// A back-off with this jitter seed (for tests).
    pub fn with_seed(seed: u64) -> Self {
        WatchBackoff { failures: 0, max: WATCH_BACKOFF_MAX, rng: seed | 1 }
    }

    /// The same back-off, waiting at most `max` (a kind that may well not be served for a
    /// long time, such as an optional CRD, is asked less often).
    pub fn with_max(self, max: Duration) -> Self {
        WatchBackoff { max: max.max(WATCH_BACKOFF_FIRST), ..self }
    }

    /// A number in [0, 1) (xorshift64*).
    fn unit(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The wait before a relist the API server asked for (`410 Gone`): uniform in
    /// [0, [`RELIST_JITTER_MAX`]), so that replicas and components that all lost their
    /// watch at once do not all list at once.
    pub fn relist_jitter(&mut self) -> Duration {
        RELIST_JITTER_MAX.mul_f64(self.unit())
    }
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let full = WATCH_BACKOFF_FIRST.saturating_mul(1u32 << self.failures.min(16)).min(self.max);
        self.failures = self.failures.saturating_add(1);
        Some(full.mul_f64(0.5 + 0.5 * self.unit()))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// The wait before retrying a reconcile that failed because the API server was away or
/// throttling ([`is_transient`]): uniform in [1 s, 2 s], whatever the failures before, so
/// that reconciles resume within seconds of the API server's return and do not all retry
/// at once.
pub fn outage_retry() -> Duration {
    let mut b = WatchBackoff::new();
    WATCH_BACKOFF_MAX.mul_f64(0.5 + 0.5 * b.unit())
}

/// Whether a failed API call says the API server is away, overloaded or throttling (a
/// refused or broken connection, 429, 5xx): a failure that passes with the outage, unlike
/// one about the request or the object.
pub fn is_transient(e: &kube::Error) -> bool {
    matches!(api_error_category(e), "connection" | "throttled" | "unavailable")
}

/// Whether a failed API call never reached the API server: its connection was refused
/// (nothing listens on the port, as while kube-apiserver restarts), so sending it again
/// cannot do it twice.
pub fn is_connection_refused(e: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        source = err.source();
    }
    false
}

/// A fresh [`WatchBackoff`]'s [`relist_jitter`](WatchBackoff::relist_jitter).
pub fn relist_jitter() -> Duration {
    WatchBackoff::new().relist_jitter()
}

/// Whether a watch error is the API server saying the watch's resource version is too old
/// (`410 Gone`): the only error after which a watch relists.
pub fn is_gone(e: &kube::runtime::watcher::Error) -> bool {
    use kube::runtime::watcher::Error as W;
    match e {
        W::WatchError(s) => s.code == 410,
        W::WatchStartFailed(kube::Error::Api(s)) | W::WatchFailed(kube::Error::Api(s)) => s.code == 410,
        _ => false,
    }
}

/// The wait a throttling or unavailable API server asks for: `details.retryAfterSeconds`
/// of a 429 (API Priority and Fairness, or a storage that is initialising) or a 5xx answer,
/// at least a second for a 429 that gives none; `None` for any other error.
pub fn retry_after(e: &kube::Error) -> Option<Duration> {
    let kube::Error::Api(s) = e else { return None };
    let asked = s.details.as_ref().map(|d| u64::from(d.retry_after_seconds)).filter(|&n| n > 0);
    match (s.code, asked) {
        (429, asked) => Some(Duration::from_secs(asked.unwrap_or(1).min(60))),
        (500..=599, Some(n)) => Some(Duration::from_secs(n.min(60))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watch_backoff_is_short_jittered_and_reset_by_a_success() {
        use kube::runtime::utils::Backoff;
        let mut b = WatchBackoff::with_seed(42);
        let waits: Vec<Duration> = b.by_ref().take(12).collect();
        // Each wait is between half and all of 250 ms, 500 ms, 1 s, 2 s, 2 s, ...
        let fulls = [250u64, 500, 1000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000];
        for (w, full) in waits.iter().zip(fulls) {
            let ms = w.as_millis() as u64;
            assert!(ms >= full / 2 && ms <= full, "{ms} ms for a full wait of {full} ms");
        }
        assert!(waits[4..].windows(2).any(|w| w[0] != w[1]), "jittered: {waits:?}");
        // A 15 s outage: the watch tries again at most 2 s after the API server is back.
        assert!(waits.iter().all(|w| *w <= WATCH_BACKOFF_MAX));
        b.reset();
        assert!(b.next().unwrap() <= WATCH_BACKOFF_FIRST, "back to the first wait after a success");
        // Different seeds spread.
        let a: Vec<_> = WatchBackoff::with_seed(1).take(6).collect();
        let c: Vec<_> = WatchBackoff::with_seed(2).take(6).collect();
        assert_ne!(a, c);
        let slow: Vec<_> = WatchBackoff::with_seed(3).with_max(Duration::from_secs(30)).take(10).collect();
        assert!(slow[9] >= Duration::from_secs(15) && slow[9] <= Duration::from_secs(30), "{slow:?}");
    }

    #[test]
    fn relists_are_spread_over_a_second() {
        let mut b = WatchBackoff::with_seed(7);
        let waits: Vec<Duration> = (0..200).map(|_| b.relist_jitter()).collect();
        assert!(waits.iter().all(|w| *w < RELIST_JITTER_MAX));
        assert!(waits.iter().any(|w| *w < Duration::from_millis(250)));
        assert!(waits.iter().any(|w| *w > Duration::from_millis(750)));
    }

    #[test]
    fn outages_and_throttling_are_transient_and_the_retry_is_short() {
        let api = |code| kube::Error::Api(Box::new(kube::core::Status::failure("m", "r").with_code(code)));
        assert!([429, 500, 503, 504].iter().all(|&c| is_transient(&api(c))));
        assert!(![400, 403, 404, 409, 422].iter().any(|&c| is_transient(&api(c))));
        for _ in 0..50 {
            let w = outage_retry();
            assert!(w >= WATCH_BACKOFF_MAX / 2 && w <= WATCH_BACKOFF_MAX, "{w:?}");
        }
    }

    #[test]
    fn a_refused_connection_is_found_under_the_client_error() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(is_connection_refused(&kube::Error::Service(Box::new(refused))));
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(!is_connection_refused(&kube::Error::Service(Box::new(reset))));
        let api = kube::Error::Api(Box::new(kube::core::Status::failure("m", "r").with_code(503)));
        assert!(!is_connection_refused(&api));
    }

    #[test]
    fn only_410_makes_a_watch_relist() {
        use kube::runtime::watcher::Error as W;
        let status = |code| Box::new(kube::core::Status::failure("m", "r").with_code(code));
        assert!(is_gone(&W::WatchError(status(410))));
        assert!(is_gone(&W::WatchStartFailed(kube::Error::Api(status(410)))));
        assert!(!is_gone(&W::WatchError(status(500))));
        assert!(!is_gone(&W::InitialListFailed(kube::Error::Api(status(410)))));
        assert!(!is_gone(&W::NoResourceVersion));
    }

    #[test]
    fn throttling_answers_say_how_long_to_wait() {
        let status = |code, after: Option<i32>| {
            let mut s = kube::core::Status::failure("m", "TooManyRequests").with_code(code);
            s.details = after.map(|n| kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: n as u32,
            });
            kube::Error::Api(Box::new(s))
        };
        assert_eq!(retry_after(&status(429, Some(3))), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(&status(429, None)), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(&status(429, Some(600))), Some(Duration::from_secs(60)));
        assert_eq!(retry_after(&status(503, Some(2))), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(&status(503, None)), None);
        assert_eq!(retry_after(&status(409, Some(2))), None);
    }

    #[test]
    fn api_errors_are_labelled_by_what_the_operator_looks_at() {
        let api = |code| kube::Error::Api(Box::new(kube::core::Status::failure("m", "r").with_code(code)));
        let labels: Vec<_> = [403, 404, 409, 422, 429, 503, 418].map(|c| api_error_category(&api(c))).into();
        assert_eq!(labels, ["forbidden", "not_found", "conflict", "invalid", "throttled", "unavailable", "api"]);
    }

    #[test]
    fn api_errors_read_as_the_api_servers_message() {
        let e = kube::Error::Api(Box::new(kube::core::Status::failure("too many", "TooManyRequests").with_code(429)));
        assert_eq!(error_message(&e), "too many (TooManyRequests, 429)");
    }

    #[test]
    fn notes_fit_the_events_api() {
        let n = event_note(&"é".repeat(2000));
        assert!(n.len() <= 1024 && n.ends_with("..."), "{}", n.len());
        assert_eq!(event_note("short"), "short");
    }

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let ms = |f| retry_backoff(f).as_millis();
        assert_eq!((ms(0), ms(1), ms(2), ms(3)), (200, 200, 400, 800));
        assert_eq!((ms(10), ms(30)), (60_000, 60_000));
    }

    #[tokio::test]
    async fn a_kubeconfig_that_cannot_be_read_is_an_error_naming_the_file() {
        let path = std::env::temp_dir().join(format!("volcano-kube-missing-{}.yaml", std::process::id()));
        let e = client(Some(&path)).await.err().expect("no client from a missing file");
        assert_eq!(e.category(), "kubeconfig");
        assert!(e.to_string().starts_with(&path.display().to_string()), "{e}");
        assert!(std::error::Error::source(&e).is_some(), "the kubeconfig error is kept as the source");
    }
}
