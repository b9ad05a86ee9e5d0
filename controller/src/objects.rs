//! What every object the controller plans shares, and what the job plugins add besides
//! pods: the job's owner reference, the metadata of an owned object, the job's name labels
//! and [`JobResources`]. Both [`crate::plan`] and [`crate::plugins`] build on it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Serialize;
use volcano_api::job::Job;

/// Pod annotation and label: the job's name.
pub const JOB_NAME_KEY: &str = "volcano.sh/job-name";
/// Pod label: the job's namespace.
pub const JOB_NAMESPACE_KEY: &str = "volcano.sh/job-namespace";

/// What the plugins' `OnJobAdd` creates, and the job's `status.controlledResources`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobResources {
    /// Services (`svc`: the headless `<job>`).
    pub services: Vec<Service>,
    /// ConfigMaps (`svc`: `<job>-svc`; `mpi`: `<job>-mpi-hostfile`).
    pub config_maps: Vec<ConfigMap>,
    /// Secrets (`ssh`: `<job>-ssh`).
    pub secrets: Vec<Secret>,
    /// NetworkPolicies (`svc`: `<job>`).
    pub network_policies: Vec<NetworkPolicy>,
    /// `plugin-<name>` → `<name>` for every enabled plugin.
    pub controlled_resources: BTreeMap<String, String>,
}

/// The names of the plugin objects a kill removes (Volcano's `OnJobDelete`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectNames {
    /// Services.
    pub services: Vec<String>,
    /// ConfigMaps.
    pub config_maps: Vec<String>,
    /// Secrets.
    pub secrets: Vec<String>,
    /// NetworkPolicies.
    pub network_policies: Vec<String>,
}

impl ObjectNames {
    /// Whether there is nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
            && self.config_maps.is_empty()
            && self.secrets.is_empty()
            && self.network_policies.is_empty()
    }
}

/// The controller reference to the job that every planned object carries.
pub fn owner_reference(job: &Job) -> OwnerReference {
    OwnerReference {
        api_version: "batch.volcano.sh/v1alpha1".into(),
        kind: "Job".into(),
        name: job.metadata.name.clone().unwrap_or_default(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Metadata `name` in the job's namespace, owned by the job.
pub(crate) fn owned_meta(job: &Job, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: job.metadata.namespace.clone(),
        owner_references: Some(vec![owner_reference(job)]),
        ..Default::default()
    }
}
