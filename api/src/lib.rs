//! volcano-api: the serde types of volcano-rs.
//!
//! Start with [`crd`] for the Volcano custom resources (`PodGroup`, `Queue` of
//! `scheduling.volcano.sh/v1beta1`), [`job`] for the `batch.volcano.sh/v1alpha1` Job and
//! [`bus`] for the `bus.volcano.sh/v1alpha1` Command, actions and events, and [`conf`] for
//! the scheduler configuration file (`volcano-scheduler.conf`). [`quantity`] parses and prints Kubernetes quantities;
//! [`names`] holds the scheduler name, condition types, reasons and event reasons;
//! [`validation`] checks objects as the API server and Volcano's webhooks do;
//! [`admission`] defaults and checks Jobs as Volcano's job webhooks do, and [`job_plugins`]
//! their plugins' arguments, for the webhook and the job controller alike;
//! [`et`] holds Alibaba et-operator's TrainingJob, ScaleOut and ScaleIn
//! (`kai.alibabacloud.com/v1alpha1`); [`topology`] the HyperNode (`topology.volcano.sh/v1alpha1`); [`crds`] generates the CustomResourceDefinitions from these types.
//!
//! This crate does no IO beyond (de)serialisation and knows nothing of a client:
//! `kube` is used for its `CustomResource` derive and `Resource` trait only.
#![deny(missing_docs)]

pub mod admission;
pub mod bus;
pub mod conf;
pub mod crd;
pub mod crds;
pub mod et;
pub mod job;
pub mod job_plugins;
pub mod names;
mod open_enum;
pub mod quantity;
pub mod topology;
pub mod validation;

pub use k8s_openapi;
