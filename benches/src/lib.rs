//! volcano-benches: the standard benchmark workloads (`docs/performance.md`) and the runner
//! behind `volcano-rs bench`.
//!
//! Start with [`cases::Case`] and [`runner::run_case`]; [`command`] is what `volcano-rs bench`
//! runs. The runner goes through the same
//! code path as the simulator and the kube backend — objects → [`volcano_framework::Snapshot`]
//! → [`volcano_framework::run_cycle`] → effects — and times each phase. [`rules`] checks that a cycle's binds keep the required
//! rules of Kubernetes (inter-pod (anti-)affinity, topology spread, node selection), from
//! the Kubernetes definitions rather than the plugins' code.
//!
//! Behind the feature `cluster`, the module `cluster` loads a real API server with a bench cluster
//! (`volcano-rs bench-cluster load`, the fault-injection suite at scale); without it the
//! harness links no Kubernetes client.

pub mod cases;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod command;
pub mod hetero;
pub mod manifests;
pub mod preempt;
pub mod rules;
pub mod runner;
pub mod topo;
pub mod workloads;
