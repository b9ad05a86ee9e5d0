//! volcano-benches: the standard benchmark workloads (`docs/performance.md`) and the runner
//! behind `volcano-rs bench`.
//!
//! Start with [`workloads::Case`] and [`runner::run_case`]. The runner goes through the same
//! code path as the simulator and the kube backend — objects → [`volcano_framework::Snapshot`]
//! → [`volcano_framework::run_cycle`] → effects — and times each phase. [`cluster`] is the benchmark against a real API server
//! (`volcano-rs bench-cluster`).

pub mod cluster;
pub mod runner;
pub mod workloads;
