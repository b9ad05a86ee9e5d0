//! volcano-controller: the Volcano Job controller (`batch.volcano.sh/v1alpha1` Job), with the
//! distributed-training job plugins (svc, env, ssh, TensorFlow, PyTorch, MXNet, MPI).
//!
//! Start with [`plan`]: the pure planning functions (Job → PodGroup, pods, plugin objects,
//! `dependsOn` gating) that the reconciler applies and the simulator reuses. The job plugins
//! are in [`plugins`]; docs/jobs.md says what each one injects.

pub mod plan;
pub mod plugins;
