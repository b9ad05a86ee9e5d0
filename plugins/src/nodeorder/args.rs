//! Arguments of the `nodeorder` plugin, with Volcano's keys and defaults.

use serde::Deserialize;
use volcano_api::conf::{args, Arguments};
use volcano_framework::ArgsError;

use volcano_framework::parse_args;

/// The `nodeorder` arguments, as written in the scheduler configuration: one integer
/// weight per kube-scheduler score plugin. A weight of 0 turns the scorer off; negative
/// weights are kept (they reverse the preference), as in Volcano.
#[derive(Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `leastrequested.weight` (1): NodeResourcesFit LeastAllocated over cpu and memory.
    #[serde(rename = "leastrequested.weight", default, deserialize_with = "args::int")]
    pub least_requested: Option<i64>,
    /// `mostrequested.weight` (0): NodeResourcesFit MostAllocated over cpu and memory.
    #[serde(rename = "mostrequested.weight", default, deserialize_with = "args::int")]
    pub most_requested: Option<i64>,
    /// `balancedresource.weight` (1): NodeResourcesBalancedAllocation over cpu, memory and
    /// `nvidia.com/gpu`.
    #[serde(rename = "balancedresource.weight", default, deserialize_with = "args::int")]
    pub balanced_resource: Option<i64>,
    /// `nodeaffinity.weight` (2): preferred node affinity.
    #[serde(rename = "nodeaffinity.weight", default, deserialize_with = "args::int")]
    pub node_affinity: Option<i64>,
    /// `tainttoleration.weight` (3): untolerated `PreferNoSchedule` taints.
    #[serde(rename = "tainttoleration.weight", default, deserialize_with = "args::int")]
    pub taint_toleration: Option<i64>,
    /// `podaffinity.weight` (2): InterPodAffinity (preferred terms, and the terms of other pods).
    #[serde(rename = "podaffinity.weight", default, deserialize_with = "args::int")]
    pub pod_affinity: Option<i64>,
    /// `imagelocality.weight` (1): ImageLocality (the task's images already on the node).
    #[serde(rename = "imagelocality.weight", default, deserialize_with = "args::int")]
    pub image_locality: Option<i64>,
    /// `podtopologyspread.weight` (2): PodTopologySpread (`ScheduleAnyway` constraints).
    #[serde(rename = "podtopologyspread.weight", default, deserialize_with = "args::int")]
    pub pod_topology_spread: Option<i64>,
    /// `selectorspread.weight` (0): SelectorSpread of Volcano releases before 1.9; accepted,
    /// no effect (as in Volcano 1.9 and later), a non-zero value logged.
    #[serde(rename = "selectorspread.weight", default, deserialize_with = "args::int")]
    pub selector_spread: Option<i64>,
}

/// The weights, defaults applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weights {
    /// LeastAllocated.
    pub least_requested: i64,
    /// MostAllocated.
    pub most_requested: i64,
    /// BalancedAllocation.
    pub balanced_resource: i64,
    /// NodeAffinity.
    pub node_affinity: i64,
    /// TaintToleration.
    pub taint_toleration: i64,
    /// InterPodAffinity.
    pub pod_affinity: i64,
    /// ImageLocality.
    pub image_locality: i64,
    /// PodTopologySpread.
    pub pod_topology_spread: i64,
}

impl Default for Weights {
    /// Volcano's defaults.
    fn default() -> Self {
        Weights {
            least_requested: 1,
            most_requested: 0,
            balanced_resource: 1,
            node_affinity: 2,
            taint_toleration: 3,
            pod_affinity: 2,
            image_locality: 1,
            pod_topology_spread: 2,
        }
    }
}

impl Args {
    /// Parses raw arguments, naming the key of a value with the wrong type.
    pub fn parse(arguments: &Arguments) -> Result<Args, ArgsError> {
        parse_args(arguments)
    }

    /// The weights, Volcano's defaults applied. A non-zero `selectorspread.weight` is
    /// logged as having no effect, once per configuration load.
    pub fn resolve(&self) -> Weights {
        if let Some(w) = self.selector_spread.filter(|w| *w != 0) {
            tracing::warn!(
                weight = w,
                "nodeorder: selectorspread.weight has no effect: SelectorSpread left kube-scheduler (1.29) and \
                 Volcano (1.9); spread pods with topologySpreadConstraints (podtopologyspread.weight) instead"
            );
        }
        let d = Weights::default();
        Weights {
            least_requested: self.least_requested.unwrap_or(d.least_requested),
            most_requested: self.most_requested.unwrap_or(d.most_requested),
            balanced_resource: self.balanced_resource.unwrap_or(d.balanced_resource),
            node_affinity: self.node_affinity.unwrap_or(d.node_affinity),
            taint_toleration: self.taint_toleration.unwrap_or(d.taint_toleration),
            pod_affinity: self.pod_affinity.unwrap_or(d.pod_affinity),
            image_locality: self.image_locality.unwrap_or(d.image_locality),
            pod_topology_spread: self.pod_topology_spread.unwrap_or(d.pod_topology_spread),
        }
    }
}
