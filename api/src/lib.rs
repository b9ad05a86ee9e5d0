//! volcano-api: the serde types of volcano-rs.
//!
//! Start with [`crd`] for the Volcano custom resources (`PodGroup`, `Queue` of
//! `scheduling.volcano.sh/v1beta1`) and [`conf`] for the scheduler configuration file
//! (`volcano-scheduler.conf`). [`quantity`] parses and prints Kubernetes quantities;
//! [`names`] holds the scheduler name, condition types, reasons and event reasons;
//! [`validation`] checks objects as the API server and Volcano's webhooks do.
//!
//! This crate does no IO beyond (de)serialisation and knows nothing of a client:
//! `kube` is used for its `CustomResource` derive only.
#![deny(missing_docs)]

pub mod conf;
pub mod crd;
pub mod names;
pub mod quantity;
pub mod validation;

pub use k8s_openapi;
