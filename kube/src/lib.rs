//! volcano-kube: what the cluster processes of volcano-rs (`scheduler`, `webhook`,
//! `controller`) share: [`client`] (a kubeconfig file, or the in-cluster or default
//! configuration), [`leader`] (Lease leader election as client-go does it) and
//! [`termination`] (SIGTERM or Ctrl-C), [`event_note`] (an event message the Events API
//! accepts) and [`retry_backoff`] (the controllers' back-off after failed reconciles).

pub mod leader;

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The Kubernetes client for `kubeconfig`, or the in-cluster / default configuration when
/// there is none. The error names the file.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => Config::infer().await.map_err(|e| e.to_string())?,
    };
    Client::try_from(config).map_err(|e| e.to_string())
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
}
