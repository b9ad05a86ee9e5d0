use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use volcano_api::crd::{PodGroupSpec, SubGroupPolicySpec};

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A policy for the pods of task `task`, split by `volcano.sh/partition-id` (the shape the
/// job controller gives a task's `partitionPolicy`).
fn partition_policy(task: &str, size: i32, min: i32) -> SubGroupPolicySpec {
    SubGroupPolicySpec {
        name: task.into(),
        sub_group_size: Some(size),
        min_sub_groups: Some(min),
        label_selector: Some(LabelSelector {
            match_labels: Some(labels(&[("volcano.sh/task-spec", task)])),
            ..Default::default()
        }),
        match_label_keys: Some(vec!["volcano.sh/partition-id".into()]),
        ..Default::default()
    }
}

fn groups(policies: Vec<SubGroupPolicySpec>) -> Box<SubGroups> {
    SubGroups::of(&PodGroupSpec { sub_group_policy: Some(policies), ..Default::default() }).expect("policies")
}

fn pod(task: &str, partition: Option<&str>) -> BTreeMap<String, String> {
    let mut l = labels(&[("volcano.sh/task-spec", task)]);
    if let Some(p) = partition {
        l.insert("volcano.sh/partition-id".into(), p.into());
    }
    l
}

#[test]
fn no_policy_no_sub_groups() {
    assert!(SubGroups::of(&PodGroupSpec::default()).is_none());
    assert!(SubGroups::of(&PodGroupSpec { sub_group_policy: Some(vec![]), ..Default::default() }).is_none());
}

#[test]
fn pods_split_by_policy_and_match_values() {
    let mut sg = groups(vec![partition_policy("worker", 2, 2), partition_policy("ps", 1, 0)]);
    let w0 = sg.join(Some(&pod("worker", Some("0"))));
    let w1 = sg.join(Some(&pod("worker", Some("1"))));
    assert_eq!(sg.join(Some(&pod("worker", Some("0")))), w0, "same values, same sub-group");
    assert_ne!(w0, w1);
    let ps = sg.join(Some(&pod("ps", Some("0"))));
    assert_ne!(ps, w0, "another policy, another sub-group, even with the same values");
    // No partition label, an empty one, a pod of no policy: the rest.
    assert_eq!(sg.join(Some(&pod("worker", None))), None);
    assert_eq!(sg.join(Some(&pod("worker", Some("")))), None);
    assert_eq!(sg.join(Some(&pod("chief", Some("0")))), None);
    assert_eq!(sg.join(None), None);
    let names: Vec<&str> = sg.groups.iter().map(|g| &*g.name).collect();
    assert_eq!(names, ["worker-0", "worker-1", "ps-0"]);
    let tasks: Vec<u32> = sg.groups.iter().map(|g| g.counts.tasks).collect();
    assert_eq!(tasks, [2, 1, 1]);
    assert_eq!(sg.rest.tasks, 4);
    assert_eq!((sg.groups[1].match_index, sg.groups[1].min_available), (1, 2));
    assert_eq!(sg.min_available(None), 1, "the rest is a gang of one");
    sg.leave(w0);
    sg.leave(w0);
    assert_eq!(sg.live().map(|(_, g)| &*g.name).collect::<Vec<_>>(), ["worker-1", "ps-0"]);
}

#[test]
fn first_matching_policy_wins_and_keys_are_needed() {
    let any = SubGroupPolicySpec {
        name: "any".into(),
        match_label_keys: Some(vec!["rack".into(), "slot".into()]),
        ..Default::default()
    };
    let no_keys = SubGroupPolicySpec { name: "nokeys".into(), ..Default::default() };
    let mut sg = groups(vec![no_keys, any]);
    // A policy without matchLabelKeys groups no pod; no selector selects every pod.
    let g = sg.join(Some(&labels(&[("rack", "r1"), ("slot", "7")])));
    assert_eq!(g.map(|g| &*sg.groups[g as usize].name), Some("any-r1-7"));
    assert_eq!(sg.groups[0].match_index, 0, "a first value that is no number orders as 0");
    assert_eq!(sg.join(Some(&labels(&[("rack", "r1")]))), None, "every key is needed");
}

#[test]
fn selector_expressions_and_invalid_selectors() {
    let mut p = partition_policy("worker", 1, 0);
    p.label_selector = Some(LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "volcano.sh/task-spec".into(),
            operator: "In".into(),
            values: Some(vec!["worker".into(), "trainer".into()]),
        }]),
        ..Default::default()
    });
    let mut bad = partition_policy("bad", 1, 0);
    bad.label_selector = Some(LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "k".into(),
            operator: "Near".into(),
            values: None,
        }]),
        ..Default::default()
    });
    let mut sg = groups(vec![bad, p]);
    assert!(sg.policies[0].selector_error().is_some_and(|e| e.contains("unknown operator")));
    assert!(sg.join(Some(&pod("trainer", Some("3")))).is_some());
    assert!(sg.join(Some(&pod("ps", Some("3")))).is_none());
    assert_eq!(sg.groups.len(), 1, "the invalid policy selects no pod");
}

#[test]
fn validity_readiness_and_pods_needed() {
    let mut sg = groups(vec![partition_policy("worker", 2, 2)]);
    let a = sg.join(Some(&pod("worker", Some("0"))));
    sg.join(Some(&pod("worker", Some("0"))));
    assert_eq!(sg.invalid_policy().map(|(p, n)| (p.name.as_str(), n)), Some(("worker", 1)));
    let b = sg.join(Some(&pod("worker", Some("1"))));
    sg.join(Some(&pod("worker", Some("1"))));
    sg.join(Some(&pod("worker", Some("2"))));
    assert!(sg.invalid_policy().is_none());
    assert!(!sg.ready() && !sg.pipelined());
    assert_eq!(sg.pods_needed(), 4, "two sub-groups of two");
    // worker-0 runs whole, worker-1 has one pod placed and one pipelined.
    sg.counts_mut(a).status_counts[TaskStatus::Running as usize] = 2;
    sg.counts_mut(b).status_counts[TaskStatus::Allocated as usize] = 1;
    sg.counts_mut(b).status_counts[TaskStatus::Pipelined as usize] = 1;
    assert!(sg.group_ready(a) && !sg.group_ready(b) && sg.group_pipelined(b));
    assert!(!sg.ready(), "one ready sub-group of the two needed");
    assert!(sg.pipelined());
    assert_eq!(sg.pods_needed(), 1, "worker-1 is the closest to ready");
    sg.counts_mut(b).status_counts[TaskStatus::Pipelined as usize] = 0;
    sg.counts_mut(b).status_counts[TaskStatus::Allocated as usize] = 2;
    assert!(sg.ready());
    assert_eq!(sg.pods_needed(), 0);
}

#[test]
fn min_sub_groups_zero_asks_for_nothing() {
    let mut sg = groups(vec![partition_policy("worker", 4, 0)]);
    sg.join(Some(&pod("worker", Some("0"))));
    assert!(sg.invalid_policy().is_none() && sg.ready() && sg.pipelined());
    assert_eq!(sg.pods_needed(), 0);
}
