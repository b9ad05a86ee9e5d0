//! `volcano-rs scheduler`'s command line, spelled as Volcano's `vc-scheduler` spells it
//! (spec §4.2), checked whole before anything is watched ([`SchedulerOptions::validate`]).
//!
//! Flags of Volcano that do not apply to volcano-rs are not accepted (an unknown flag is an
//! error, as it is for any Go binary); docs/scheduler.md lists them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use thiserror::Error;
use volcano_api::validation::{dns1123_label, dns1123_subdomain};

/// The scheduler name pods ask for by default.
pub const DEFAULT_SCHEDULER_NAME: &str = volcano_api::names::DEFAULT_SCHEDULER_NAME;

/// The command line of `volcano-rs scheduler`.
#[derive(Args, Clone, Debug)]
pub struct SchedulerOptions {
    /// Path to a kubeconfig; without it, the in-cluster configuration (service account) is
    /// used, then the usual kubeconfig locations.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The scheduler configuration (Volcano's volcano-scheduler.conf, or the ConfigMap that
    /// holds it); watched and reloaded when it changes. Default: the built-in configuration.
    #[arg(long = "scheduler-conf", value_name = "FILE")]
    pub scheduler_conf: Option<PathBuf>,
    /// Schedule the pods whose spec.schedulerName is this (repeatable).
    #[arg(long = "scheduler-name", value_name = "NAME", default_value = DEFAULT_SCHEDULER_NAME)]
    pub scheduler_names: Vec<String>,
    /// Time between the end of one cycle and the start of the next (Go duration: 1s, 500ms).
    #[arg(long = "schedule-period", value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub schedule_period: Duration,
    /// The queue created at start when missing (with queue root), and the queue of PodGroups
    /// made for plain pods that name none.
    #[arg(long = "default-queue", value_name = "NAME", default_value = volcano_api::names::DEFAULT_QUEUE)]
    pub default_queue: String,
    /// Only the holder of the Lease schedules (`--leader-elect=false` to turn it off, for a
    /// single replica).
    #[arg(long = "leader-elect", value_name = "BOOL", default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// Namespace of the Lease (Volcano's deprecated `--lock-object-namespace` is accepted too).
    #[arg(
        long = "leader-elect-resource-namespace",
        visible_alias = "lock-object-namespace",
        value_name = "NAMESPACE",
        default_value = "volcano-system"
    )]
    pub lease_namespace: String,
    /// Name of the Lease; default: the scheduler name (`volcano` when several are given).
    #[arg(long = "leader-elect-resource-name", value_name = "NAME")]
    pub lease_name: Option<String>,
    /// How long a Lease is valid without renewal.
    #[arg(long = "leader-elect-lease-duration", value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// A leader that cannot renew within this long stops scheduling (shorter than the lease
    /// duration, so that it stops before another replica can take over).
    #[arg(long = "leader-elect-renew-deadline", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew the Lease.
    #[arg(long = "leader-elect-retry-period", value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,
    /// Address of the metrics server (`/metrics`); empty turns it off.
    #[arg(long = "listen-address", value_name = "ADDR", default_value = ":8080")]
    pub listen_address: String,
    /// Address of the health server (`/healthz`, `/readyz`); empty turns it off.
    #[arg(long = "healthz-address", value_name = "ADDR", default_value = ":11251")]
    pub healthz_address: String,
    /// Sustained rate of API writes (binds, evictions, status writes, events) per second.
    #[arg(long = "kube-api-qps", value_name = "QPS", default_value_t = 2000.0)]
    pub kube_api_qps: f64,
    /// Burst of API writes above the sustained rate.
    #[arg(long = "kube-api-burst", value_name = "N", default_value_t = 2000)]
    pub kube_api_burst: u32,
    /// Schedule only nodes with this label (`key:value`, repeatable: a node with any of them).
    #[arg(long = "node-selector", value_name = "KEY:VALUE")]
    pub node_selector: Vec<String>,
    /// How long to wait for the first lists of nodes, pods, PodGroups, queues,
    /// PriorityClasses, Namespaces and volume objects before giving up (0: wait for ever).
    #[arg(long = "resource-sync-timeout", value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub resource_sync_timeout: Duration,
    /// Binds (and evictions) in flight at once.
    #[arg(long = "bind-concurrency", value_name = "N", default_value_t = 64)]
    pub bind_concurrency: usize,
    /// Status writes (PodGroups, Queues, pod conditions) in flight at once.
    #[arg(long = "status-concurrency", value_name = "N", default_value_t = 16)]
    pub status_concurrency: usize,
    /// Identity in the Lease and in events; default: the host name and a random suffix.
    #[arg(long = "identity", value_name = "NAME")]
    pub identity: Option<String>,
}

/// A command line that cannot be used.
#[derive(Debug, Error, PartialEq)]
#[error("flag --{flag}: {message}")]
pub struct OptionsError {
    /// The flag, without dashes.
    pub flag: &'static str,
    /// What is wrong and what is expected.
    pub message: String,
}

fn err(flag: &'static str, message: impl Into<String>) -> OptionsError {
    OptionsError { flag, message: message.into() }
}

/// A Go duration (`1s`, `500ms`, `1m30s`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    match volcano_framework::snapshot::parse_duration_ms(s) {
        Some(ms) if ms >= 0 => Ok(Duration::from_millis(ms as u64)),
        _ => Err(format!("{s:?} is not a duration (expected a Go duration such as 1s, 500ms or 1m30s)")),
    }
}

/// `:8080`, `0.0.0.0:8080`, `127.0.0.1:0` or `[::1]:8080` as a socket address (`:PORT` means
/// every interface, as in Go).
pub fn parse_listen_address(s: &str) -> Result<SocketAddr, String> {
    let full = if s.starts_with(':') { format!("0.0.0.0{s}") } else { s.to_string() };
    full.parse().map_err(|_| format!("{s:?} is not a listen address (expected HOST:PORT or :PORT)"))
}

impl SchedulerOptions {
    /// Options with every default, for tests and embedding: as if `volcano-rs scheduler` were
    /// run with no flag.
    pub fn defaults() -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            options: SchedulerOptions,
        }
        Wrapper::parse_from(["volcano-rs-scheduler"]).options
    }

    /// Checks every flag; the first problem is returned, naming the flag.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.scheduler_names.is_empty() {
            return Err(err("scheduler-name", "at least one scheduler name is needed"));
        }
        for name in &self.scheduler_names {
            dns1123_subdomain(name).map_err(|m| err("scheduler-name", format!("{name:?}: {m}")))?;
        }
        if self.schedule_period.is_zero() {
            return Err(err("schedule-period", "must be longer than 0"));
        }
        dns1123_subdomain(&self.default_queue)
            .map_err(|m| err("default-queue", format!("{:?}: {m}", self.default_queue)))?;
        if self.leader_elect {
            dns1123_label(&self.lease_namespace)
                .map_err(|m| err("leader-elect-resource-namespace", format!("{:?}: {m}", self.lease_namespace)))?;
            dns1123_subdomain(&self.lease_name())
                .map_err(|m| err("leader-elect-resource-name", format!("{:?}: {m}", self.lease_name())))?;
            if self.renew_deadline >= self.lease_duration {
                return Err(err(
                    "leader-elect-renew-deadline",
                    format!(
                        "{:?} must be shorter than --leader-elect-lease-duration {:?}",
                        self.renew_deadline, self.lease_duration
                    ),
                ));
            }
            if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
                return Err(err(
                    "leader-elect-retry-period",
                    format!("{:?} must be longer than 0 and shorter than the renew deadline", self.retry_period),
                ));
            }
        }
        if !self.listen_address.is_empty() {
            parse_listen_address(&self.listen_address).map_err(|m| err("listen-address", m))?;
        }
        if !self.healthz_address.is_empty() {
            parse_listen_address(&self.healthz_address).map_err(|m| err("healthz-address", m))?;
        }
        if !(self.kube_api_qps.is_finite() && self.kube_api_qps > 0.0) {
            return Err(err("kube-api-qps", format!("{} must be a number above 0", self.kube_api_qps)));
        }
        if self.kube_api_burst == 0 {
            return Err(err("kube-api-burst", "must be at least 1"));
        }
        self.node_selector_labels()?;
        if self.bind_concurrency == 0 {
            return Err(err("bind-concurrency", "must be at least 1"));
        }
        if self.status_concurrency == 0 {
            return Err(err("status-concurrency", "must be at least 1"));
        }
        Ok(())
    }

    /// The Lease's name: `--leader-elect-resource-name`, else the scheduler name, else
    /// `volcano` when there are several (as Volcano names it).
    pub fn lease_name(&self) -> String {
        if let Some(n) = &self.lease_name {
            return n.clone();
        }
        match self.scheduler_names.as_slice() {
            [one] => one.clone(),
            _ => "volcano".to_string(),
        }
    }

    /// `--node-selector` as label key → accepted values.
    pub fn node_selector_labels(&self) -> Result<BTreeMap<String, Vec<String>>, OptionsError> {
        parse_node_selector(&self.node_selector)
    }
}

/// `--node-selector KEY:VALUE` flags as label → accepted values (a key given twice accepts
/// either value).
pub fn parse_node_selector(flags: &[String]) -> Result<BTreeMap<String, Vec<String>>, OptionsError> {
    let mut labels: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in flags {
        let Some((k, v)) = s.split_once(':') else {
            return Err(err("node-selector", format!("{s:?} is not KEY:VALUE")));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(err("node-selector", format!("{s:?}: the label key is empty")));
        }
        labels.entry(k.to_string()).or_default().push(v.to_string());
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        options: SchedulerOptions,
    }

    fn parse(args: &[&str]) -> SchedulerOptions {
        let mut all = vec!["scheduler"];
        all.extend_from_slice(args);
        Wrapper::try_parse_from(all).expect("flags parse").options
    }

    #[test]
    fn defaults_are_volcanos() {
        let o = SchedulerOptions::defaults();
        assert_eq!(o.scheduler_names, ["volcano-rs"]);
        assert_eq!(o.schedule_period, Duration::from_secs(1));
        assert_eq!(o.default_queue, "default");
        assert!(o.leader_elect);
        assert_eq!(o.lease_namespace, "volcano-system");
        assert_eq!(o.lease_name(), "volcano-rs");
        assert_eq!((o.kube_api_qps, o.kube_api_burst), (2000.0, 2000));
        assert_eq!(o.listen_address, ":8080");
        assert_eq!(o.healthz_address, ":11251");
        o.validate().unwrap();
    }

    #[test]
    fn volcano_spellings_parse() {
        let o = parse(&[
            "--scheduler-name",
            "volcano",
            "--scheduler-name",
            "volcano-rs",
            "--schedule-period=500ms",
            "--leader-elect=false",
            "--lock-object-namespace",
            "kube-system",
            "--node-selector",
            "pool:gpu",
            "--node-selector",
            "pool:cpu",
        ]);
        assert_eq!(o.lease_name(), "volcano");
        assert_eq!(o.schedule_period, Duration::from_millis(500));
        assert!(!o.leader_elect);
        assert_eq!(o.lease_namespace, "kube-system");
        assert_eq!(o.node_selector_labels().unwrap()["pool"], ["gpu", "cpu"]);
        o.validate().unwrap();
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--schedule-period", "0s"], "schedule-period"),
            (&["--scheduler-name", "Volcano_RS"], "scheduler-name"),
            (&["--default-queue", "Bad Queue"], "default-queue"),
            (&["--listen-address", "8080"], "listen-address"),
            (&["--kube-api-qps", "0"], "kube-api-qps"),
            (&["--node-selector", "nocolon"], "node-selector"),
            (&["--leader-elect-renew-deadline", "20s"], "leader-elect-renew-deadline"),
            (&["--bind-concurrency", "0"], "bind-concurrency"),
        ];
        for (args, flag) in cases {
            let e = parse(args).validate().expect_err(&format!("{args:?} must be refused"));
            assert_eq!(e.flag, *flag, "{args:?}: {e}");
        }
        assert!(Wrapper::try_parse_from(["s", "--schedule-period", "soon"]).is_err());
    }

    #[test]
    fn listen_addresses_accept_go_forms() {
        assert_eq!(parse_listen_address(":8080").unwrap().port(), 8080);
        assert!(parse_listen_address("127.0.0.1:0").is_ok());
        assert!(parse_listen_address("[::1]:9").is_ok());
        assert!(parse_listen_address("localhost").is_err());
    }
}
