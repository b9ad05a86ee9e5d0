//! Volcano's network topology resource: `topology.volcano.sh/v1alpha1` HyperNode.
//!
//! A HyperNode is a network performance domain (a switch): a tier, an optional tier name,
//! and members that are nodes or other HyperNodes, chosen by exact name, by a regular
//! expression on the name, or (nodes only) by labels. Field names and JSON spellings follow
//! Volcano's `staging/src/volcano.sh/apis/pkg/apis/topology/v1alpha1`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Annotation of a Job or PodGroup giving the network topology mode (`hard` or `soft`)
/// when the spec gives none.
pub const NETWORK_TOPOLOGY_MODE_ANNOTATION: &str = "volcano.sh/network-topology-mode";
/// Annotation of a Job or PodGroup giving the highest tier allowed when the spec gives none.
pub const NETWORK_TOPOLOGY_HIGHEST_TIER_ANNOTATION: &str = "volcano.sh/network-topology-highest-tier";

/// Member type `Node`.
pub const MEMBER_TYPE_NODE: &str = "Node";
/// Member type `HyperNode`.
pub const MEMBER_TYPE_HYPER_NODE: &str = "HyperNode";

/// Spec of a HyperNode: its tier and members.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "topology.volcano.sh",
    version = "v1alpha1",
    kind = "HyperNode",
    plural = "hypernodes",
    shortname = "hn",
    status = "HyperNodeStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeSpec {
    /// Tier of the HyperNode: 1 for the switches nodes hang off, higher further up.
    #[serde(default)]
    pub tier: i64,
    /// Name of the tier (e.g. `rack`, `zone`), which jobs may name instead of a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier_name: Option<String>,
    /// Nodes or HyperNodes in this HyperNode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberSpec>,
}

/// A member (or a group of members) of a HyperNode.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSpec {
    /// `Node` or `HyperNode`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Which objects of that type are members.
    #[serde(default)]
    pub selector: MemberSelector,
}

/// How members are chosen: exactly one of the three.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSelector {
    /// The member with this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_match: Option<ExactMatch>,
    /// The members whose name matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex_match: Option<RegexMatch>,
    /// The nodes with these labels (members of type `Node` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_match: Option<LabelSelector>,
}

/// Exact name match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ExactMatch {
    /// The member's name.
    #[serde(default)]
    pub name: String,
}

/// Regular expression match on names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RegexMatch {
    /// The expression (RE2 syntax, unanchored as Go's `MatchString`).
    #[serde(default)]
    pub pattern: String,
}

/// Observed state of a HyperNode.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Number of nodes in the HyperNode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_count: Option<i64>,
}

impl MemberSpec {
    /// Whether the member is a node (else a HyperNode).
    pub fn is_node(&self) -> bool {
        self.type_ == MEMBER_TYPE_NODE
    }
}
