//! volcano-kube: what the cluster processes of volcano-rs (`scheduler`, `webhook`,
//! `controller`) share: [`client`] (a kubeconfig file, or the in-cluster or default
//! configuration), [`leader`] (Lease leader election as client-go does it) and
//! [`termination`] (SIGTERM or Ctrl-C), [`event_note`] (an event message the Events API
//! accepts) and [`retry_backoff`] (the controllers' back-off after failed reconciles).

pub mod leader;

use std::path::{Path, PathBuf};

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

/// The Kubernetes client for `kubeconfig`, or the in-cluster / default configuration when
/// there is none. The error names the file.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let file = |source| ClientError::Kubeconfig { path: path.to_path_buf(), source };
            let kc = Kubeconfig::read_from(path).map_err(file)?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.map_err(file)?
        }
        None => Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_are_labelled_by_what_the_operator_looks_at() {
        let api = |code| kube::Error::Api(Box::new(kube::core::Status::failure("m", "r").with_code(code)));
        let labels: Vec<_> = [403, 404, 409, 422, 429, 503, 418].map(|c| api_error_category(&api(c))).into();
        assert_eq!(labels, ["forbidden", "not_found", "conflict", "invalid", "throttled", "unavailable", "api"]);
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
