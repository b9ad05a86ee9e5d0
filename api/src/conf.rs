//! The scheduler configuration file, `volcano-scheduler.conf`, with Volcano's exact key spellings.
//!
//! This module only parses; resolving names against registries and typing plugin arguments
//! happens in `volcano_framework::profile`. Volcano's flags mix `enable` and `enabled`
//! prefixes; they are kept verbatim here, and only here.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;

/// Raw plugin or action arguments: key → YAML value (ints stay ints, floats stay floats).
pub type Arguments = BTreeMap<String, serde_json::Value>;

/// The whole configuration file.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfiguration {
    /// Comma-separated action names, run in this order each session.
    #[serde(default)]
    pub actions: String,
    /// Ordered plugin tiers.
    #[serde(default)]
    pub tiers: Vec<Tier>,
    /// Per-action arguments.
    #[serde(default)]
    pub configurations: Vec<Configuration>,
    /// Metrics source of the usage plugin (type, address, interval).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, String>,
}

/// One tier of plugins.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// The plugins of the tier, in order.
    #[serde(default)]
    pub plugins: Vec<PluginOption>,
}

/// Arguments of one action.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Configuration {
    /// Action name.
    pub name: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Arguments,
}

/// One plugin entry of a tier with its extension-point switches.
///
/// A missing switch means "on" once the configuration is loaded, except
/// `enableHierarchy` and `enabledClusterOrder`, which are off unless set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginOption {
    /// Plugin name.
    pub name: String,
    /// JobOrderFn.
    #[serde(rename = "enableJobOrder", default, skip_serializing_if = "Option::is_none")]
    pub enabled_job_order: Option<bool>,
    /// Hierarchical mode (drf, capacity).
    #[serde(rename = "enableHierarchy", default, skip_serializing_if = "Option::is_none")]
    pub enabled_hierarchy: Option<bool>,
    /// JobReadyFn.
    #[serde(rename = "enableJobReady", default, skip_serializing_if = "Option::is_none")]
    pub enabled_job_ready: Option<bool>,
    /// JobPipelinedFn.
    #[serde(rename = "enableJobPipelined", default, skip_serializing_if = "Option::is_none")]
    pub enabled_job_pipelined: Option<bool>,
    /// TaskOrderFn.
    #[serde(rename = "enableTaskOrder", default, skip_serializing_if = "Option::is_none")]
    pub enabled_task_order: Option<bool>,
    /// PreemptableFn.
    #[serde(rename = "enablePreemptable", default, skip_serializing_if = "Option::is_none")]
    pub enabled_preemptable: Option<bool>,
    /// ReclaimableFn.
    #[serde(rename = "enableReclaimable", default, skip_serializing_if = "Option::is_none")]
    pub enabled_reclaimable: Option<bool>,
    /// PreemptiveFn.
    #[serde(rename = "enablePreemptive", default, skip_serializing_if = "Option::is_none")]
    pub enabled_preemptive: Option<bool>,
    /// QueueOrderFn.
    #[serde(rename = "enableQueueOrder", default, skip_serializing_if = "Option::is_none")]
    pub enabled_queue_order: Option<bool>,
    /// ClusterOrderFn (multi-cluster).
    #[serde(rename = "enabledClusterOrder", default, skip_serializing_if = "Option::is_none")]
    pub enabled_cluster_order: Option<bool>,
    /// PrePredicateFn and PredicateFn.
    #[serde(rename = "enablePredicate", default, skip_serializing_if = "Option::is_none")]
    pub enabled_predicate: Option<bool>,
    /// BestNodeFn.
    #[serde(rename = "enableBestNode", default, skip_serializing_if = "Option::is_none")]
    pub enabled_best_node: Option<bool>,
    /// NodeOrderFn and batch node order.
    #[serde(rename = "enableNodeOrder", default, skip_serializing_if = "Option::is_none")]
    pub enabled_node_order: Option<bool>,
    /// TargetJobFn.
    #[serde(rename = "enableTargetJob", default, skip_serializing_if = "Option::is_none")]
    pub enabled_target_job: Option<bool>,
    /// ReservedNodesFn.
    #[serde(rename = "enableReservedNodes", default, skip_serializing_if = "Option::is_none")]
    pub enabled_reserved_nodes: Option<bool>,
    /// JobEnqueueableFn and JobEnqueuedFn.
    #[serde(rename = "enableJobEnqueued", default, skip_serializing_if = "Option::is_none")]
    pub enabled_job_enqueued: Option<bool>,
    /// VictimTasksFn.
    #[serde(rename = "enabledVictim", default, skip_serializing_if = "Option::is_none")]
    pub enabled_victim: Option<bool>,
    /// JobStarvingFn.
    #[serde(rename = "enableJobStarving", default, skip_serializing_if = "Option::is_none")]
    pub enabled_job_starving: Option<bool>,
    /// OverusedFn.
    #[serde(rename = "enabledOverused", default, skip_serializing_if = "Option::is_none")]
    pub enabled_overused: Option<bool>,
    /// AllocatableFn.
    #[serde(rename = "enabledAllocatable", default, skip_serializing_if = "Option::is_none")]
    pub enabled_allocatable: Option<bool>,
    /// HyperNodeOrderFn.
    #[serde(rename = "enabledHyperNodeOrder", default, skip_serializing_if = "Option::is_none")]
    pub enabled_hyper_node_order: Option<bool>,
    /// SubJobReadyFn.
    #[serde(rename = "enabledSubJobReady", default, skip_serializing_if = "Option::is_none")]
    pub enabled_sub_job_ready: Option<bool>,
    /// SubJobPipelinedFn.
    #[serde(rename = "enabledSubJobPipelined", default, skip_serializing_if = "Option::is_none")]
    pub enabled_sub_job_pipelined: Option<bool>,
    /// SubJobOrderFn.
    #[serde(rename = "enabledSubJobOrder", default, skip_serializing_if = "Option::is_none")]
    pub enabled_sub_job_order: Option<bool>,
    /// HyperNode gradients.
    #[serde(rename = "enabledHyperNodeGradient", default, skip_serializing_if = "Option::is_none")]
    pub enabled_hyper_node_gradient: Option<bool>,
    /// Plugin arguments.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "null_as_default")]
    pub arguments: Arguments,
}

fn null_as_default<'de, D: Deserializer<'de>>(d: D) -> Result<Arguments, D::Error> {
    Ok(Option::<Arguments>::deserialize(d)?.unwrap_or_default())
}

/// A configuration file that could not be parsed.
#[derive(Debug, Error)]
pub enum ConfParseError {
    /// The YAML does not parse into a configuration.
    #[error("invalid scheduler configuration: {0}")]
    Yaml(#[source] serde_yaml_ng::Error),
    /// A ConfigMap without the configuration key.
    #[error(
        "invalid scheduler configuration: ConfigMap {name}: data has no key {CONF_KEY:?} (keys: {keys}); \
         Volcano's scheduler reads its configuration from that key"
    )]
    ConfigMapWithoutConf {
        /// The ConfigMap's name.
        name: String,
        /// The keys it has.
        keys: String,
    },
}

/// The key of the scheduler ConfigMap that holds the configuration file, as Volcano ships it
/// (`volcano-scheduler-configmap`, mounted at `/volcano.scheduler/volcano-scheduler.conf`).
pub const CONF_KEY: &str = "volcano-scheduler.conf";

impl SchedulerConfiguration {
    /// Parses the YAML text of a configuration file, or of the ConfigMap that holds it
    /// (`kind: ConfigMap` with the file under `data."volcano-scheduler.conf"`).
    pub fn from_yaml(text: &str) -> Result<Self, ConfParseError> {
        if let Some(conf) = configmap_conf(text)? {
            return serde_yaml_ng::from_str(&conf).map_err(ConfParseError::Yaml);
        }
        serde_yaml_ng::from_str(text).map_err(ConfParseError::Yaml)
    }

    /// The entries of `actions`, in order, trimmed (an empty entry stays, empty: loading
    /// rejects it).
    pub fn action_names(&self) -> Vec<String> {
        let names: Vec<String> = self.actions.split(',').map(|s| s.trim().to_string()).collect();
        if names.iter().all(String::is_empty) {
            return Vec::new();
        }
        names
    }

    /// The built-in default configuration (used when no file is given).
    pub fn builtin_default() -> Self {
        Self::from_yaml(DEFAULT_SCHEDULER_CONF).expect("the built-in configuration parses")
    }
}

/// The configuration text of a ConfigMap document, `None` when the text is not a ConfigMap.
fn configmap_conf(text: &str) -> Result<Option<String>, ConfParseError> {
    // Only a document that says `kind: ConfigMap` at its top level is read as one.
    if !text.lines().any(|l| l.trim_end() == "kind: ConfigMap" || l.trim_end() == "kind: \"ConfigMap\"") {
        return Ok(None);
    }
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(ConfParseError::Yaml)?;
    if value.get("kind").and_then(|k| k.as_str()) != Some("ConfigMap") {
        return Ok(None);
    }
    let name =
        value.get("metadata").and_then(|m| m.get("name")).and_then(|n| n.as_str()).unwrap_or("(unnamed)").to_string();
    let data = value.get("data").and_then(|d| d.as_mapping());
    match data.and_then(|d| d.get(CONF_KEY)).and_then(|c| c.as_str()) {
        Some(conf) => Ok(Some(conf.to_string())),
        None => {
            let keys: Vec<&str> = data.map(|d| d.keys().filter_map(|k| k.as_str()).collect()).unwrap_or_default();
            let keys = if keys.is_empty() { "none".to_string() } else { keys.join(", ") };
            Err(ConfParseError::ConfigMapWithoutConf { name, keys })
        }
    }
}

/// Volcano's built-in default configuration, verbatim.
pub const DEFAULT_SCHEDULER_CONF: &str = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"#;

/// Typed readers for plugin arguments, with Volcano's typing rules:
/// an int must be a YAML int, a float accepts an int, a bool accepts `true`/`false`
/// or the strings `"true"`/`"false"`.
pub mod args {
    use serde::{de::Error, Deserialize, Deserializer};

    /// Reads an optional integer argument (floats are rejected).
    pub fn int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::Number(n) => {
                n.as_i64().map(Some).ok_or_else(|| D::Error::custom(format!("expected an integer, got {n}")))
            }
            other => Err(D::Error::custom(format!("expected an integer, got {other}"))),
        }
    }

    /// Reads an optional float argument (ints accepted).
    pub fn float<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::Number(n) => Ok(n.as_f64()),
            other => Err(D::Error::custom(format!("expected a number, got {other}"))),
        }
    }

    /// Reads an optional bool argument (`true`, `false`, `"true"`, `"false"`).
    pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::Bool(b) => Ok(Some(b)),
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
            other => Err(D::Error::custom(format!("expected true or false, got {other}"))),
        }
    }

    /// Reads an optional string argument.
    pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::String(s) => Ok(Some(s)),
            other => Err(D::Error::custom(format!("expected a string, got {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_configuration_parses_with_volcano_spelling() {
        let c = SchedulerConfiguration::builtin_default();
        assert_eq!(c.action_names(), ["enqueue", "allocate", "backfill"]);
        assert_eq!(c.tiers.len(), 2);
        let names: Vec<_> = c.tiers[1].plugins.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["overcommit", "drf", "predicates", "proportion", "nodeorder"]);
    }

    #[test]
    fn every_flag_spelling_is_accepted() {
        let text = r#"
actions: "enqueue,allocate"
tiers:
- plugins:
  - name: gang
    enableJobOrder: true
    enableHierarchy: false
    enableJobReady: true
    enableJobPipelined: true
    enableTaskOrder: true
    enablePreemptable: false
    enableReclaimable: true
    enablePreemptive: true
    enableQueueOrder: true
    enabledClusterOrder: false
    enablePredicate: true
    enableBestNode: true
    enableNodeOrder: true
    enableTargetJob: true
    enableReservedNodes: true
    enableJobEnqueued: true
    enabledVictim: true
    enableJobStarving: true
    enabledOverused: true
    enabledAllocatable: true
    enabledHyperNodeOrder: true
    enabledSubJobReady: true
    enabledSubJobPipelined: true
    enabledSubJobOrder: true
    enabledHyperNodeGradient: true
    arguments:
      a.int: 3
      a.float: 1.5
configurations:
- name: allocate
  arguments:
    predicateErrorCacheEnable: false
"#;
        let c = SchedulerConfiguration::from_yaml(text).unwrap();
        let p = &c.tiers[0].plugins[0];
        assert_eq!(p.enabled_preemptable, Some(false));
        assert_eq!(p.enabled_hyper_node_gradient, Some(true));
        assert_eq!(p.arguments["a.int"], serde_json::json!(3));
        assert_eq!(c.configurations[0].name, "allocate");
    }

    #[test]
    fn misspelt_flag_is_rejected() {
        let text = "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enablePreemtable: false\n";
        let e = SchedulerConfiguration::from_yaml(text).unwrap_err().to_string();
        assert!(e.contains("enablePreemtable"), "{e}");
    }
}
