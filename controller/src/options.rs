//! The command line of `volcano-rs controller`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgAction, Args};
use thiserror::Error;

/// A flag that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum OptionsError {
    /// `--worker-threads` is 0.
    #[error("--worker-threads must be at least 1")]
    WorkerThreads,
    /// `--healthz-address` is not `host:port` or `:port`.
    #[error("--healthz-address {0:?} is not an address (host:port or :port)")]
    HealthzAddress(String),
    /// `--listen-address` is not `host:port`, `:port` or empty.
    #[error("--listen-address {0:?} is not an address (host:port or :port; empty: no metrics server)")]
    ListenAddress(String),
    /// An empty Lease namespace or name with `--leader-elect`.
    #[error("--leader-elect-resource-namespace and --leader-elect-resource-name must not be empty")]
    Lease,
    /// An empty `--scheduler-name`.
    #[error("--scheduler-name must not be empty")]
    SchedulerName,
    /// An empty `--hypernode-config-namespace` or `--hypernode-config-name`.
    #[error("--hypernode-config-namespace and --hypernode-config-name must not be empty when given")]
    HyperNodeConfigMap,
}

/// The flags of `volcano-rs controller`.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct ControllerOptions {
    /// The kubeconfig file; the in-cluster or default configuration when unset.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The scheduler of the pods of jobs that name none (`spec.schedulerName` empty).
    #[arg(long, default_value = "volcano-rs")]
    pub scheduler_name: String,
    /// Run only while holding the Lease (`--leader-elect=false`: always).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// Namespace of the Lease.
    #[arg(long, default_value = "volcano-system")]
    pub leader_elect_resource_namespace: String,
    /// Name of the Lease.
    #[arg(long, default_value = "volcano-rs-controller")]
    pub leader_elect_resource_name: String,
    /// Jobs reconciled at once.
    #[arg(long, default_value_t = 3)]
    pub worker_threads: u16,
    /// Where `/healthz` and `/readyz` are served (`host:port` or `:port`); not served when unset.
    #[arg(long)]
    pub healthz_address: Option<String>,
    /// Where `/metrics` is served (`host:port` or `:port`; Volcano's controller manager
    /// default); empty: not served. The same address as `--healthz-address` serves both on
    /// one listener.
    #[arg(long, default_value = ":8081")]
    pub listen_address: String,
    /// Failed reconciles in a row after which a job is terminated (Volcano's
    /// `--max-requeue-num`); a negative number retries for ever.
    #[arg(long, default_value_t = 15, allow_negative_numbers = true)]
    pub max_requeue_num: i32,
    /// Seconds between two passes of the elastic autoscaler over the jobs annotated
    /// `volcano.sh/autoscale` (docs/jobs.md); 0 turns it off.
    #[arg(long, default_value_t = 10)]
    pub autoscale_period_seconds: u64,
    /// Least seconds between two resizes of one job by the autoscaler.
    #[arg(long, default_value_t = crate::autoscale::DEFAULT_COOLDOWN_SECONDS as u64)]
    pub autoscale_cooldown_seconds: u64,
    /// Seconds the scheduler has to bind the pods of a grow before the autoscaler gives
    /// back those it did not bind.
    #[arg(long, default_value_t = crate::autoscale::DEFAULT_PROBE_SECONDS as u64)]
    pub autoscale_probe_seconds: u64,
    /// Namespace of the HyperNode discovery ConfigMap (docs/hypernode-discovery.md); unset:
    /// `$KUBE_POD_NAMESPACE`, else `volcano-system` (Volcano's lookup).
    #[arg(long)]
    pub hypernode_config_namespace: Option<String>,
    /// Name of the HyperNode discovery ConfigMap; unset: `$HELM_RELEASE_NAME-controller-configmap`,
    /// else `volcano-controller-configmap` (Volcano's lookup).
    #[arg(long)]
    pub hypernode_config_name: Option<String>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            kubeconfig: None,
            scheduler_name: "volcano-rs".into(),
            leader_elect: true,
            leader_elect_resource_namespace: "volcano-system".into(),
            leader_elect_resource_name: "volcano-rs-controller".into(),
            worker_threads: 3,
            healthz_address: None,
            listen_address: ":8081".into(),
            max_requeue_num: 15,
            autoscale_period_seconds: 10,
            autoscale_cooldown_seconds: crate::autoscale::DEFAULT_COOLDOWN_SECONDS as u64,
            autoscale_probe_seconds: crate::autoscale::DEFAULT_PROBE_SECONDS as u64,
            hypernode_config_namespace: None,
            hypernode_config_name: None,
        }
    }
}

impl ControllerOptions {
    /// Checks what can be checked without the cluster.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.worker_threads == 0 {
            return Err(OptionsError::WorkerThreads);
        }
        if self.scheduler_name.is_empty() {
            return Err(OptionsError::SchedulerName);
        }
        if self.leader_elect
            && (self.leader_elect_resource_namespace.is_empty() || self.leader_elect_resource_name.is_empty())
        {
            return Err(OptionsError::Lease);
        }
        if [&self.hypernode_config_namespace, &self.hypernode_config_name].iter().any(|o| o.as_deref() == Some("")) {
            return Err(OptionsError::HyperNodeConfigMap);
        }
        self.healthz()?;
        self.listen()?;
        Ok(())
    }

    /// The namespace and name of the HyperNode discovery ConfigMap: the flags, else as
    /// Volcano finds it (`$KUBE_POD_NAMESPACE` or `volcano-system`;
    /// `$HELM_RELEASE_NAME-controller-configmap` or `volcano-controller-configmap`).
    pub fn hypernode_config_map(&self) -> (String, String) {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let ns = self
            .hypernode_config_namespace
            .clone()
            .or_else(|| env("KUBE_POD_NAMESPACE"))
            .unwrap_or_else(|| "volcano-system".into());
        let name = self.hypernode_config_name.clone().unwrap_or_else(|| match env("HELM_RELEASE_NAME") {
            Some(release) => format!("{release}-controller-configmap"),
            None => crate::hypernode::CONFIG_MAP_NAME.into(),
        });
        (ns, name)
    }

    /// The autoscaler's waits.
    pub fn autoscale_settings(&self) -> crate::autoscale::Settings {
        let ms = |s: u64| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX);
        crate::autoscale::Settings {
            cooldown_ms: ms(self.autoscale_cooldown_seconds),
            probe_ms: ms(self.autoscale_probe_seconds),
            ..Default::default()
        }
    }

    /// The `--healthz-address`, parsed.
    pub fn healthz(&self) -> Result<Option<SocketAddr>, OptionsError> {
        let Some(a) = &self.healthz_address else { return Ok(None) };
        parse_address(a).map(Some).ok_or_else(|| OptionsError::HealthzAddress(a.clone()))
    }

    /// The `--listen-address`, parsed; `None` when empty (no metrics server).
    pub fn listen(&self) -> Result<Option<SocketAddr>, OptionsError> {
        let a = &self.listen_address;
        if a.is_empty() {
            return Ok(None);
        }
        parse_address(a).map(Some).ok_or_else(|| OptionsError::ListenAddress(a.clone()))
    }
}

/// `host:port`, or `:port` for every IPv4 address (Go's listen addresses).
fn parse_address(a: &str) -> Option<SocketAddr> {
    let full = if a.starts_with(':') { format!("0.0.0.0{a}") } else { a.to_string() };
    full.parse().ok()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        opts: ControllerOptions,
    }

    #[test]
    fn defaults_and_flags() {
        let d = Cli::try_parse_from(["controller"]).unwrap().opts;
        assert_eq!(d, ControllerOptions::default());
        let o = Cli::try_parse_from([
            "controller",
            "--leader-elect=false",
            "--worker-threads",
            "5",
            "--healthz-address",
            ":11252",
            "--max-requeue-num",
            "-1",
            "--listen-address",
            "127.0.0.1:9090",
        ])
        .unwrap()
        .opts;
        assert!(!o.leader_elect);
        assert_eq!(o.worker_threads, 5);
        assert_eq!((d.max_requeue_num, o.max_requeue_num), (15, -1));
        assert_eq!(o.healthz().unwrap().unwrap().port(), 11252);
        assert_eq!(o.listen().unwrap(), Some("127.0.0.1:9090".parse().unwrap()));
        // Volcano's default, on every address; empty turns the metrics server off.
        assert_eq!(d.listen().unwrap(), Some("0.0.0.0:8081".parse().unwrap()));
        let off = Cli::try_parse_from(["controller", "--listen-address="]).unwrap().opts;
        assert_eq!(off.listen().unwrap(), None);
        o.validate().unwrap();
        let bad = ControllerOptions { worker_threads: 0, ..Default::default() };
        assert_eq!(bad.validate(), Err(OptionsError::WorkerThreads));
        let bad = ControllerOptions { healthz_address: Some("nope".into()), ..Default::default() };
        assert!(matches!(bad.validate(), Err(OptionsError::HealthzAddress(_))));
        let bad = ControllerOptions { listen_address: "8081".into(), ..Default::default() };
        assert_eq!(bad.validate(), Err(OptionsError::ListenAddress("8081".into())));
        let hn = Cli::try_parse_from([
            "controller",
            "--hypernode-config-namespace",
            "kube-system",
            "--hypernode-config-name",
            "topology",
        ])
        .unwrap()
        .opts;
        assert_eq!(hn.hypernode_config_map(), ("kube-system".to_string(), "topology".to_string()));
        let bad = ControllerOptions { hypernode_config_name: Some(String::new()), ..Default::default() };
        assert_eq!(bad.validate(), Err(OptionsError::HyperNodeConfigMap));
    }
}
