//! volcano-controller: the Volcano Job controller (`batch.volcano.sh/v1alpha1` Job), with the
//! distributed-training job plugins (svc, env, ssh, TensorFlow, PyTorch, MXNet, MPI).
//!
//! Not written yet: this crate only holds its place in the workspace layout (ARCHITECTURE.md).
//! The planning code will be a pure function (Job + observed objects → desired pods,
//! services, config maps and PodGroup) that the simulator reuses.
