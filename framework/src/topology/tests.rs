use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use volcano_api::topology::{ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec, RegexMatch};

use super::*;
use crate::resource::Resource;

fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    let n = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        ..Default::default()
    };
    NodeInfo {
        name: Arc::from(name),
        allocatable: Resource::empty(),
        capacity: Resource::empty(),
        idle: Resource::empty(),
        used: Resource::empty(),
        releasing: Resource::empty(),
        pipelined: Resource::empty(),
        nonzero_cpu: 0,
        nonzero_memory: 0,
        tasks: Arc::new(Vec::new()),
        gpus: None,
        unschedulable: false,
        has_taints: false,
        node: Arc::new(n),
    }
}

fn exact(type_: &str, name: &str) -> MemberSpec {
    MemberSpec {
        type_: type_.into(),
        selector: MemberSelector { exact_match: Some(ExactMatch { name: name.into() }), ..Default::default() },
    }
}

fn regex(type_: &str, pattern: &str) -> MemberSpec {
    MemberSpec {
        type_: type_.into(),
        selector: MemberSelector { regex_match: Some(RegexMatch { pattern: pattern.into() }), ..Default::default() },
    }
}

fn labels(type_: &str, key: &str, value: &str) -> MemberSpec {
    MemberSpec {
        type_: type_.into(),
        selector: MemberSelector {
            label_match: Some(LabelSelector {
                match_labels: Some([(key.to_string(), value.to_string())].into_iter().collect()),
                ..Default::default()
            }),
            ..Default::default()
        },
    }
}

fn hn(name: &str, tier: i64, tier_name: Option<&str>, members: Vec<MemberSpec>) -> (String, Arc<HyperNode>) {
    let spec = HyperNodeSpec { tier, tier_name: tier_name.map(Into::into), members };
    (name.to_string(), Arc::new(HyperNode::new(name, spec)))
}

/// node0..node7: s0 = {0,1} (exact), s1 = {2,3} (regex), s2 = {4,5} (labels), s3 = {6,7};
/// s4 = {s0, s1}, s5 = {s2, s3}; s6 = {s4, s5} (regex on HyperNode names).
fn tree() -> (Vec<NodeInfo>, BTreeMap<String, Arc<HyperNode>>) {
    let nodes: Vec<NodeInfo> =
        (0..8).map(|i| node(&format!("node{i}"), &[("tor", if i / 2 == 2 { "t2" } else { "other" })])).collect();
    let objects = [
        hn("s0", 1, Some("leaf"), vec![exact("Node", "node0"), exact("Node", "node1")]),
        hn("s1", 1, Some("leaf"), vec![regex("Node", "^node[23]$")]),
        hn("s2", 1, None, vec![labels("Node", "tor", "t2")]),
        hn("s3", 1, Some("leaf"), vec![exact("Node", "node6"), exact("Node", "node7"), exact("Node", "gone")]),
        hn("s4", 2, Some("spine"), vec![exact("HyperNode", "s0"), exact("HyperNode", "s1")]),
        hn("s5", 2, Some("spine"), vec![regex("HyperNode", "^s[23]$")]),
        hn("s6", 3, None, vec![regex("HyperNode", "^s[45]$")]),
    ]
    .into_iter()
    .collect();
    (nodes, objects)
}

fn build(nodes: &[NodeInfo], objects: &BTreeMap<String, Arc<HyperNode>>) -> Topology {
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    Topology::build(objects, &refs)
}

fn names(t: &Topology, ids: &[NodeId]) -> Vec<usize> {
    let _ = t;
    ids.iter().map(|n| n.idx()).collect()
}

#[test]
fn members_resolve_by_name_regex_and_labels_and_the_top_holds_every_node() {
    let (nodes, objects) = tree();
    let t = build(&nodes, &objects);
    assert!(t.errors().is_empty(), "{:?}", t.errors());
    let id = |name: &str| t.by_name(name).unwrap();
    assert_eq!(names(&t, &t.get(id("s0")).nodes), [0, 1]);
    assert_eq!(names(&t, &t.get(id("s1")).nodes), [2, 3]);
    assert_eq!(names(&t, &t.get(id("s2")).nodes), [4, 5]);
    assert_eq!(names(&t, &t.get(id("s3")).nodes), [6, 7], "a member that does not exist is no member");
    assert_eq!(names(&t, &t.get(id("s5")).nodes), [4, 5, 6, 7]);
    assert_eq!(t.get(id("s6")).nodes.len(), 8);
    let top = t.top();
    assert_eq!(&*t.get(top).name, CLUSTER_TOP_HYPER_NODE);
    assert_eq!(t.get(top).tier, 4);
    assert_eq!(t.get(top).children, vec![id("s6")]);
    assert_eq!(t.tiers(), [1, 2, 3]);
    assert_eq!(t.of_tier(1), [id("s0"), id("s1"), id("s2"), id("s3")]);
    assert_eq!(t.tier_named("spine"), Some(2));
    assert_eq!(t.tier_named("leaf"), Some(1));
    assert_eq!(t.tier_named("zone"), None);
}

#[test]
fn ancestors_and_common_ancestors() {
    let (nodes, objects) = tree();
    let t = build(&nodes, &objects);
    let id = |name: &str| t.by_name(name).unwrap();
    assert_eq!(t.lowest_of(NodeId(5)), id("s2"));
    let chain: Vec<&str> = t.ancestors(id("s2")).map(|h| &*t.get(h).name).collect();
    assert_eq!(chain, ["s2", "s5", "s6", CLUSTER_TOP_HYPER_NODE]);
    assert_eq!(t.common_ancestor(id("s0"), id("s1")), id("s4"));
    assert_eq!(t.common_ancestor(id("s0"), id("s3")), id("s6"));
    assert_eq!(t.common_ancestor(id("s2"), id("s2")), id("s2"));
    assert_eq!(t.common_ancestor_of_nodes([NodeId(4), NodeId(7)]), Some(id("s5")));
    assert_eq!(t.common_ancestor_of_nodes([NodeId(1)]), Some(id("s0")));
    assert_eq!(t.common_ancestor_of_nodes([]), None);
    assert!(t.holds(id("s5"), NodeId(6)) && !t.holds(id("s5"), NodeId(3)));
    assert_eq!(t.of_node_at_tier(NodeId(3), 2), Some(id("s4")));
}

#[test]
fn a_node_outside_every_hyper_node_is_under_the_top_only() {
    let (mut nodes, objects) = tree();
    nodes.push(node("node8", &[]));
    let t = build(&nodes, &objects);
    assert_eq!(t.lowest_of(NodeId(8)), t.top());
    assert_eq!(t.common_ancestor_of_nodes([NodeId(0), NodeId(8)]), Some(t.top()));
    assert_eq!(t.get(t.top()).nodes.len(), 9);
}

#[test]
fn no_hyper_nodes_is_the_top_alone() {
    let nodes = vec![node("a", &[]), node("b", &[])];
    let t = build(&nodes, &BTreeMap::new());
    assert!(t.is_empty());
    assert_eq!(t.get(t.top()).tier, 1);
    assert!(t.tiers().is_empty());
    assert_eq!(t.lowest_of(NodeId(1)), t.top());
}

fn error_of<'a>(t: &'a Topology, name: &str) -> &'a TopologyError {
    t.errors().iter().find(|e| e.hyper_node == name).unwrap_or_else(|| panic!("no error for {name}: {:?}", t.errors()))
}

#[test]
fn hyper_nodes_that_break_the_tree_are_left_out_with_a_located_reason() {
    let (nodes, mut objects) = tree();
    // A member of a tier not below.
    objects.extend([hn("up", 1, None, vec![exact("HyperNode", "s6")])]);
    // s0 a member of a second parent.
    objects.extend([hn("s7", 2, None, vec![exact("HyperNode", "s0")])]);
    // node0 in a second tier-1 HyperNode.
    objects.extend([hn("t0", 1, None, vec![exact("Node", "node0")])]);
    // A second name for tier 1, a name given to two tiers.
    objects.extend([hn("u0", 1, Some("rack"), vec![])]);
    objects.extend([hn("u1", 3, Some("leaf"), vec![])]);
    // A broken regex, labels on HyperNodes, two selectors, an unknown type, a tier of 0.
    objects.extend([hn("v0", 1, None, vec![regex("Node", "node[")])]);
    objects.extend([hn("v1", 2, None, vec![labels("HyperNode", "a", "b")])]);
    let mut both = exact("Node", "node0");
    both.selector.regex_match = Some(RegexMatch { pattern: "x".into() });
    objects.extend([hn("v2", 1, None, vec![exact("Node", "node9"), both])]);
    objects.extend([hn("v3", 1, None, vec![exact("Switch", "x")])]);
    objects.extend([hn("v4", 0, None, vec![])]);
    let t = build(&nodes, &objects);
    assert!(error_of(&t, "up").message.contains("not below"), "{:?}", error_of(&t, "up"));
    assert!(error_of(&t, "s7").message.contains("already a member of HyperNode s4"));
    assert!(error_of(&t, "t0").message.contains("node node0 is already in HyperNode s0"));
    assert_eq!(error_of(&t, "u0").field, "spec.tierName");
    assert_eq!(error_of(&t, "u1").field, "spec.tierName");
    assert_eq!(error_of(&t, "v0").field, "spec.members[0].selector.regexMatch.pattern");
    assert_eq!(error_of(&t, "v1").field, "spec.members[0].selector.labelMatch");
    assert_eq!(error_of(&t, "v2").field, "spec.members[1].selector");
    assert_eq!(error_of(&t, "v3").field, "spec.members[0].type");
    assert_eq!(error_of(&t, "v4").field, "spec.tier");
    for bad in ["up", "s7", "t0", "u0", "u1", "v0", "v1", "v2", "v3", "v4"] {
        assert!(t.by_name(bad).is_none(), "{bad} is left out");
    }
    // The valid tree is intact.
    let id = |name: &str| t.by_name(name).unwrap();
    assert_eq!(t.lowest_of(NodeId(0)), id("s0"));
    assert_eq!(t.get(id("s0")).parent, Some(id("s4")));
    assert_eq!(t.get(id("s6")).nodes.len(), 8);
}

#[test]
fn a_node_directly_in_a_hyper_node_off_its_chain_is_left_out_of_it() {
    let (nodes, mut objects) = tree();
    // node0 is in s0 (under s4) and directly in s5 (tier 2 as well): a clash of tier 2.
    objects
        .insert("s5".into(), hn("s5", 2, Some("spine"), vec![regex("HyperNode", "^s[23]$"), exact("Node", "node0")]).1);
    let t = build(&nodes, &objects);
    assert!(error_of(&t, "s5").message.contains("node node0 is already in HyperNode s4"));
    // node0 directly in s6 only (tier 3, an ancestor of s0): fine.
    let (nodes, mut objects) = tree();
    objects.insert("s6".into(), hn("s6", 3, None, vec![regex("HyperNode", "^s[45]$"), exact("Node", "node0")]).1);
    let t = build(&nodes, &objects);
    assert!(t.errors().is_empty(), "{:?}", t.errors());
}
