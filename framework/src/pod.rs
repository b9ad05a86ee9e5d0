//! Exploration: the pod as the scheduler keeps it.
use std::sync::Arc;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A pod, its spec shared.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedPod {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec, shared.
    pub spec: Option<Arc<PodSpec>>,
    /// Status.
    pub status: Option<PodStatus>,
}

impl From<Pod> for SchedPod {
    fn from(p: Pod) -> Self {
        SchedPod { metadata: p.metadata, spec: p.spec.map(Arc::new), status: p.status }
    }
}

impl SchedPod {
    /// The Kubernetes pod.
    pub fn to_pod(&self) -> Pod {
        Pod { metadata: self.metadata.clone(), spec: self.spec.as_deref().cloned(), status: self.status.clone() }
    }

    /// The spec, to change (a copy when shared).
    pub fn spec_mut(&mut self) -> &mut PodSpec {
        Arc::make_mut(self.spec.get_or_insert_with(Default::default))
    }
}
