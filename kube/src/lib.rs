//! volcano-kube: what the cluster processes of volcano-rs (`scheduler`, `webhook`,
//! `controller`) share: [`client`] (a kubeconfig file, or the in-cluster or default
//! configuration), [`leader`] (Lease leader election as client-go does it) and
//! [`termination`] (SIGTERM or Ctrl-C).

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
