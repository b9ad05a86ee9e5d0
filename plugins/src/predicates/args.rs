//! Arguments of the `predicates` plugin, with Volcano's keys, and the argument parser the
//! node-scoring plugins share.

use std::collections::BTreeMap;

use serde::Deserialize;
use volcano_api::conf::{args, Arguments};
use volcano_framework::{parse_args, ArgsError};

/// The error for a key that no field takes.
pub(crate) fn unknown_key(key: &str, known: &[&str], dynamic: &str) -> ArgsError {
    let list: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
    ArgsError(format!("unknown field `{key}`, expected one of {}, or {dynamic}", list.join(", ")))
}

/// One point of `volumebinding.shape` (accepted, no effect).
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ShapePoint {
    /// Volume utilisation, percent.
    pub utilization: i64,
    /// Score at that utilisation.
    pub score: i64,
}

/// The `predicates` arguments, as written in the scheduler configuration.
///
/// Every field is optional; [`Args::resolve`] applies Volcano's defaults. Keys marked
/// "accepted, no effect" are parsed and type-checked so Volcano configurations load
/// unchanged, but volcano-rs has no DRA claims or device pools in its snapshot yet, and
/// does not bind or score volumes.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Args {
    /// `predicate.NodeAffinityEnable` (true): `nodeSelector` and required node affinity.
    #[serde(rename = "predicate.NodeAffinityEnable", default, deserialize_with = "args::bool")]
    pub node_affinity_enable: Option<bool>,
    /// `predicate.NodePortsEnable` (true): host port conflicts.
    #[serde(rename = "predicate.NodePortsEnable", default, deserialize_with = "args::bool")]
    pub node_ports_enable: Option<bool>,
    /// `predicate.TaintTolerationEnable` (true): `NoSchedule`/`NoExecute` taints.
    #[serde(rename = "predicate.TaintTolerationEnable", default, deserialize_with = "args::bool")]
    pub taint_toleration_enable: Option<bool>,
    /// `predicate.PodAffinityEnable` (true): required inter-pod (anti-)affinity; volcano-rs
    /// rejects such pods instead of placing them without the check.
    #[serde(rename = "predicate.PodAffinityEnable", default, deserialize_with = "args::bool")]
    pub pod_affinity_enable: Option<bool>,
    /// `predicate.PodTopologySpreadEnable` (true): `DoNotSchedule` topology spread
    /// constraints; volcano-rs rejects such pods instead of placing them without the check.
    #[serde(rename = "predicate.PodTopologySpreadEnable", default, deserialize_with = "args::bool")]
    pub pod_topology_spread_enable: Option<bool>,
    /// `predicate.NodeVolumeLimitsEnable` (true): the CSI volume attach limits of a node.
    #[serde(rename = "predicate.NodeVolumeLimitsEnable", default, deserialize_with = "args::bool")]
    pub node_volume_limits_enable: Option<bool>,
    /// `predicate.VolumeZoneEnable` (true): the zone and region labels of bound
    /// PersistentVolumes against the node's.
    #[serde(rename = "predicate.VolumeZoneEnable", default, deserialize_with = "args::bool")]
    pub volume_zone_enable: Option<bool>,
    /// `predicate.VolumeBindingEnable` (true): the pod's claims exist and are bound (or
    /// refused, for `WaitForFirstConsumer` classes, which volcano-rs does not bind yet), and
    /// their PersistentVolumes' node affinity matches the node.
    #[serde(rename = "predicate.VolumeBindingEnable", default, deserialize_with = "args::bool")]
    pub volume_binding_enable: Option<bool>,
    /// `predicate.DynamicResourceAllocationEnable` (the DRA feature gate): accepted, no effect.
    #[serde(rename = "predicate.DynamicResourceAllocationEnable", default, deserialize_with = "args::bool")]
    pub dynamic_resource_allocation_enable: Option<bool>,
    /// `predicate.CacheEnable` (false): accepted, no effect (the checks it caches are cheap
    /// here and give the same answers).
    #[serde(rename = "predicate.CacheEnable", default, deserialize_with = "args::bool")]
    pub cache_enable: Option<bool>,
    /// `predicate.GPUSharingEnable` (false): accepted, no effect (moved to `deviceshare`
    /// in Volcano).
    #[serde(rename = "predicate.GPUSharingEnable", default, deserialize_with = "args::bool")]
    pub gpu_sharing_enable: Option<bool>,
    /// `predicate.GPUNumberEnable` (false): accepted, no effect (moved to `deviceshare`).
    #[serde(rename = "predicate.GPUNumberEnable", default, deserialize_with = "args::bool")]
    pub gpu_number_enable: Option<bool>,
    /// `predicate.ProportionalEnable` (false): accepted, no effect (moved to
    /// `resource-strategy-fit` in Volcano).
    #[serde(rename = "predicate.ProportionalEnable", default, deserialize_with = "args::bool")]
    pub proportional_enable: Option<bool>,
    /// `predicate.resources` (""): comma list for the proportional check; accepted, no effect.
    #[serde(rename = "predicate.resources", default, deserialize_with = "args::string")]
    pub resources: Option<String>,
    /// `volumebinding.bindTimeoutSeconds` (600): accepted, no effect.
    #[serde(rename = "volumebinding.bindTimeoutSeconds", default, deserialize_with = "args::int")]
    pub volume_binding_timeout_seconds: Option<i64>,
    /// `volumebinding.weight` (1): accepted, no effect.
    #[serde(rename = "volumebinding.weight", default, deserialize_with = "args::int")]
    pub volume_binding_weight: Option<i64>,
    /// `volumebinding.shape`: accepted, no effect.
    #[serde(rename = "volumebinding.shape", default)]
    pub volume_binding_shape: Option<Vec<ShapePoint>>,
    /// `dynamicresources.filterTimeoutSeconds` (10): accepted, no effect.
    #[serde(rename = "dynamicresources.filterTimeoutSeconds", default, deserialize_with = "args::int")]
    pub dra_filter_timeout_seconds: Option<i64>,
    /// `predicate.resources.<name>.cpu` and `predicate.resources.<name>.memory` (numbers):
    /// accepted, no effect. Any other key is rejected by [`Args::validate`].
    #[serde(flatten)]
    pub dynamic: BTreeMap<String, serde_json::Value>,
}

/// Every fixed key of [`Args`].
pub const KEYS: &[&str] = &[
    "predicate.NodeAffinityEnable",
    "predicate.NodePortsEnable",
    "predicate.TaintTolerationEnable",
    "predicate.PodAffinityEnable",
    "predicate.PodTopologySpreadEnable",
    "predicate.NodeVolumeLimitsEnable",
    "predicate.VolumeZoneEnable",
    "predicate.VolumeBindingEnable",
    "predicate.DynamicResourceAllocationEnable",
    "predicate.CacheEnable",
    "predicate.GPUSharingEnable",
    "predicate.GPUNumberEnable",
    "predicate.ProportionalEnable",
    "predicate.resources",
    "volumebinding.bindTimeoutSeconds",
    "volumebinding.weight",
    "volumebinding.shape",
    "dynamicresources.filterTimeoutSeconds",
];

const RESOURCE_PREFIX: &str = "predicate.resources.";

/// The checks the plugin runs, with defaults applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enabled {
    /// `nodeSelector` and required node affinity.
    pub node_affinity: bool,
    /// Host ports.
    pub node_ports: bool,
    /// `NoSchedule`/`NoExecute` taints.
    pub taint_toleration: bool,
    /// Reject pods with required inter-pod (anti-)affinity.
    pub pod_affinity: bool,
    /// Reject pods with `DoNotSchedule` topology spread constraints.
    pub pod_topology_spread: bool,
    /// VolumeBinding: claims exist and are bound; bound volumes' node affinity.
    pub volume_binding: bool,
    /// VolumeZone: zone and region labels of bound volumes.
    pub volume_zone: bool,
    /// NodeVolumeLimits: CSI attach limits.
    pub node_volume_limits: bool,
}

impl Default for Enabled {
    fn default() -> Self {
        Enabled {
            node_affinity: true,
            node_ports: true,
            taint_toleration: true,
            pod_affinity: true,
            pod_topology_spread: true,
            volume_binding: true,
            volume_zone: true,
            node_volume_limits: true,
        }
    }
}

impl Args {
    /// Parses and validates raw arguments.
    pub fn parse(arguments: &Arguments) -> Result<Args, ArgsError> {
        let a: Args = parse_args(arguments)?;
        a.validate()?;
        Ok(a)
    }

    /// Checks the keys caught by the flattened map: only
    /// `predicate.resources.<name>.cpu|memory` with a number.
    pub fn validate(&self) -> Result<(), ArgsError> {
        for (key, value) in &self.dynamic {
            let dims = key.strip_prefix(RESOURCE_PREFIX).and_then(|rest| {
                rest.strip_suffix(".cpu").or_else(|| rest.strip_suffix(".memory")).filter(|name| !name.is_empty())
            });
            if dims.is_none() {
                return Err(unknown_key(key, KEYS, "`predicate.resources.<name>.cpu|memory`"));
            }
            if !value.is_number() {
                return Err(ArgsError(format!("argument {key:?}: expected a number, got {value}")));
            }
        }
        Ok(())
    }

    /// The checks to run, Volcano's defaults applied.
    pub fn resolve(&self) -> Enabled {
        let d = Enabled::default();
        Enabled {
            node_affinity: self.node_affinity_enable.unwrap_or(d.node_affinity),
            node_ports: self.node_ports_enable.unwrap_or(d.node_ports),
            taint_toleration: self.taint_toleration_enable.unwrap_or(d.taint_toleration),
            pod_affinity: self.pod_affinity_enable.unwrap_or(d.pod_affinity),
            pod_topology_spread: self.pod_topology_spread_enable.unwrap_or(d.pod_topology_spread),
            volume_binding: self.volume_binding_enable.unwrap_or(d.volume_binding),
            volume_zone: self.volume_zone_enable.unwrap_or(d.volume_zone),
            node_volume_limits: self.node_volume_limits_enable.unwrap_or(d.node_volume_limits),
        }
    }
}
