//! HyperNode discovery from node labels, as pure functions (Volcano's
//! `pkg/controllers/hypernode`: the `label` discoverer and the reconcile of its results).
//! [`crate::hypernode_reconcile`] (feature `shell`) applies them to the API.
//!
//! The configuration is the `volcano-controller.conf` key of the ConfigMap
//! `volcano-controller-configmap` in the controller's namespace, in Volcano's format:
//!
//! ```yaml
//! networkTopologyDiscovery:
//!   - source: label
//!     enabled: true
//!     interval: 10m
//!     config:
//!       networkTopologyTypes:
//!         rack:                                 # a topology type: its labels, top tier first
//!           - nodeLabel: volcano.sh/hypercluster  # tier 2
//!           - nodeLabel: volcano.sh/tor           # tier 1
//!           - nodeLabel: kubernetes.io/hostname   # the node itself (not read)
//! ```
//!
//! [`parse_config`] reads and checks it whole ([`ConfigError`] names the entry, the field and
//! what was expected); only the `label` source is run, and an enabled `ufm`, `roce` or other
//! source is a warning of the [`DiscoveryConfig`], never silently ignored.
//!
//! [`discover`] computes the HyperNodes a label source wants, from the nodes and the
//! HyperNodes that exist, deterministically: per topology type, each node is walked up its
//! labels from tier 1 until the first label it lacks; every (label key, value) met is one
//! HyperNode of that key's tier, whose members are the nodes (tier 1) or the lower HyperNodes
//! (above) that reached it, by exact name. As in Volcano, a HyperNode is named
//! `hypernode-<type>-tier<N>-<suffix>` and keeps its name from one pass to the next through
//! its labels (`<key>: <value>` and `volcano.sh/network-topology-source: label`): an existing
//! discovered HyperNode with those labels and that prefix is reused (Volcano's HyperNodes
//! included), and a new one gets a suffix derived from the label (Volcano draws it at random).
//!
//! [`diff`] turns the wanted HyperNodes into creates, updates and deletes of the HyperNodes
//! labelled `volcano.sh/network-topology-source: label` only; [`node_counts`] gives every
//! HyperNode's `status.nodeCount`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;
use volcano_api::topology::{
    ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec, MEMBER_TYPE_HYPER_NODE, MEMBER_TYPE_NODE,
};

/// The label of the HyperNodes a discovery source made, whose value is the source: discovery
/// updates and deletes only HyperNodes with this label and its source as value.
pub const SOURCE_LABEL: &str = "volcano.sh/network-topology-source";
/// The source that discovers HyperNodes from node labels (the only one volcano-rs runs).
pub const LABEL_SOURCE: &str = "label";
/// The ConfigMap holding the discovery configuration (Volcano's
/// `<release>-controller-configmap` with the release `volcano`).
pub const CONFIG_MAP_NAME: &str = "volcano-controller-configmap";
/// The ConfigMap's key holding the configuration.
pub const CONFIG_KEY: &str = "volcano-controller.conf";
/// The interval of a source that gives none (or zero, or a negative one), as in Volcano.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(3600);
/// The longest topology type name Volcano accepts.
pub const MAX_TYPE_NAME_LEN: usize = 20;
/// The label Volcano's documentation puts last in a topology type: the node itself.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The sources Volcano knows besides `label` (run by Volcano, not by volcano-rs).
pub const VOLCANO_ONLY_SOURCES: [&str; 2] = ["ufm", "roce"];

/// The discovery configuration, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// The `label` source, when enabled.
    pub label: Option<LabelDiscovery>,
    /// What is configured but not done (enabled sources other than `label`, unknown keys at
    /// the top), one sentence each.
    pub warnings: Vec<String>,
}

/// The enabled `label` source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelDiscovery {
    /// The period of a full pass (`interval`, [`DEFAULT_INTERVAL`] when unset or not positive).
    pub interval: Duration,
    /// The topology types, by name.
    pub types: Vec<TopologyType>,
}

/// A topology type of the `label` source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyType {
    /// Its name, as configured.
    pub name: String,
    /// The label key of each tier, tier 1 first (the configured list reversed, without its
    /// last entry, which stands for the node).
    pub tiers: Vec<String>,
    /// The last label of the list (the node's own, not read).
    pub node_label: String,
}

/// Why a discovery configuration is rejected: where, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("volcano-controller.conf: {at}: {message}")]
pub struct ConfigError {
    /// The field: `networkTopologyDiscovery[2].config.networkTopologyTypes.rack[0].nodeLabel`,
    /// or a line and column for a YAML syntax error.
    pub at: String,
    /// What is wrong and what was expected.
    pub message: String,
}

fn err(at: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError { at: at.into(), message: message.into() }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

const YAML11_TRUE: [&str; 8] = ["y", "Y", "yes", "Yes", "YES", "on", "On", "ON"];
const YAML11_FALSE: [&str; 8] = ["n", "N", "no", "No", "NO", "off", "Off", "OFF"];

/// Reads and checks the configuration text (the ConfigMap's `volcano-controller.conf`). An
/// empty text, or one without `networkTopologyDiscovery`, discovers nothing (Volcano installs
/// the key empty).
pub fn parse_config(text: &str) -> Result<DiscoveryConfig, ConfigError> {
    let root: Value = serde_yaml_ng::from_str(text).map_err(|e| {
        let at =
            e.location().map_or_else(|| "YAML".to_string(), |l| format!("line {} column {}", l.line(), l.column()));
        err(at, format!("not YAML: {e}"))
    })?;
    let mut cfg = DiscoveryConfig::default();
    let top = match root {
        Value::Null => return Ok(cfg),
        Value::Object(m) => m,
        other => {
            return Err(err(
                "the document",
                format!("expected a map with networkTopologyDiscovery, found {}", kind(&other)),
            ))
        }
    };
    for k in top.keys().filter(|k| *k != "networkTopologyDiscovery") {
        cfg.warnings
            .push(format!("{CONFIG_KEY}: the key {k:?} is not read (volcano-rs reads networkTopologyDiscovery only)"));
    }
    let entries = match top.get("networkTopologyDiscovery") {
        None | Some(Value::Null) => return Ok(cfg),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(err("networkTopologyDiscovery", format!("expected a list of sources, found {}", kind(other))))
        }
    };
    let mut enabled_at: BTreeMap<String, usize> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("networkTopologyDiscovery[{i}]");
        let Value::Object(m) = entry else {
            return Err(err(
                at,
                format!("expected a map (source, enabled, interval, credentials, config), found {}", kind(entry)),
            ));
        };
        for k in m.keys() {
            if !["source", "enabled", "interval", "credentials", "config"].contains(&k.as_str()) {
                return Err(err(
                    format!("{at}.{k}"),
                    "unknown field: a source has source, enabled, interval, credentials and config",
                ));
            }
        }
        let source = match m.get("source") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(other) => {
                return Err(err(
                    format!("{at}.source"),
                    format!("expected a source name such as label, found {}", kind(other)),
                ))
            }
            None => return Err(err(format!("{at}.source"), "missing: the source's name, such as label")),
        };
        let at = format!("{at} (source {source})");
        let enabled = match m.get("enabled") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            // YAML 1.1's other booleans, which Volcano's YAML reader takes.
            Some(Value::String(s)) if YAML11_TRUE.contains(&s.as_str()) => true,
            Some(Value::String(s)) if YAML11_FALSE.contains(&s.as_str()) => false,
            Some(other) => {
                return Err(err(format!("{at}.enabled"), format!("expected true or false, found {}", kind(other))))
            }
        };
        let interval = parse_interval(m.get("interval")).map_err(|message| err(format!("{at}.interval"), message))?;
        if !enabled {
            continue;
        }
        if let Some(first) = enabled_at.insert(source.clone(), i) {
            return Err(err(at, format!("source {source} is enabled twice (entries {first} and {i}): enable it once")));
        }
        if source != LABEL_SOURCE {
            let known = if VOLCANO_ONLY_SOURCES.contains(&source.as_str()) {
                "Volcano's, not supported by volcano-rs"
            } else {
                "unknown"
            };
            cfg.warnings.push(format!(
                "{at}: the source {source} is {known}: volcano-rs discovers HyperNodes from node labels only (source label); \
                 the HyperNodes labelled {SOURCE_LABEL}={source} are left as they are"
            ));
            continue;
        }
        let types = parse_label_config(m.get("config"), &format!("{at}.config"))?;
        cfg.label = Some(LabelDiscovery { interval, types });
    }
    Ok(cfg)
}

/// `interval`: a Go duration (`10m`, `1h30m`) or a number of nanoseconds (what Go's YAML
/// reader makes of a number); unset, zero or negative: [`DEFAULT_INTERVAL`].
fn parse_interval(v: Option<&Value>) -> Result<Duration, String> {
    let secs = match v {
        None | Some(Value::Null) => return Ok(DEFAULT_INTERVAL),
        Some(Value::String(s)) => volcano_api::job::parse_go_duration(s)?,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0) / 1e9,
        Some(other) => return Err(format!("expected a duration such as 10m or 1h, found {}", kind(other))),
    };
    if secs <= 0.0 {
        return Ok(DEFAULT_INTERVAL);
    }
    Ok(Duration::from_secs_f64(secs.min(1e9)))
}

/// The `config` of the `label` source.
fn parse_label_config(v: Option<&Value>, at: &str) -> Result<Vec<TopologyType>, ConfigError> {
    let m = match v {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => {
            return Err(err(at, "missing: the label source needs config.networkTopologyTypes"));
        }
        Some(other) => return Err(err(at, format!("expected a map with networkTopologyTypes, found {}", kind(other)))),
    };
    if let Some(k) = m.keys().find(|k| *k != "networkTopologyTypes") {
        return Err(err(format!("{at}.{k}"), "unknown field: the label source's config has networkTopologyTypes only"));
    }
    let at = format!("{at}.networkTopologyTypes");
    let types = match m.get("networkTopologyTypes") {
        Some(Value::Object(t)) => t,
        None | Some(Value::Null) => {
            return Err(err(at, "missing: a map from topology type names to their node labels, top tier first"))
        }
        Some(other) => return Err(err(at, format!("expected a map of topology types, found {}", kind(other)))),
    };
    let mut out = Vec::new();
    // Tier and first type of each label key; the types' names in HyperNode names.
    let mut key_tier: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut cleaned: BTreeMap<String, String> = BTreeMap::new();
    // serde_json's map is sorted by key: the types are checked and kept by name.
    for (name, labels) in types {
        let at = format!("{at}.{name}");
        if name.is_empty() || name.chars().count() > MAX_TYPE_NAME_LEN {
            return Err(err(at, format!("a topology type name has 1 to {MAX_TYPE_NAME_LEN} characters")));
        }
        let clean = clean_type_name(name);
        let sample = format!("hypernode-{clean}-tier1-bcdfg");
        volcano_api::validation::dns1123_subdomain(&sample)
            .map_err(|e| err(&at, format!("the type's name makes HyperNode names such as {sample:?}, and {e}")))?;
        if let Some(other) = cleaned.insert(clean.clone(), name.clone()) {
            return Err(err(
                at,
                format!("types {other:?} and {name:?} both make HyperNode names hypernode-{clean}-…: rename one"),
            ));
        }
        let Value::Array(list) = labels else {
            return Err(err(
                at,
                format!("expected a list of {{nodeLabel: …}}, top tier first, found {}", kind(labels)),
            ));
        };
        let mut keys: Vec<String> = Vec::new();
        for (j, item) in list.iter().enumerate() {
            let at = format!("{at}[{j}]");
            let Value::Object(l) = item else {
                return Err(err(at, format!("expected {{nodeLabel: <label key>}}, found {}", kind(item))));
            };
            if let Some(k) = l.keys().find(|k| *k != "nodeLabel") {
                return Err(err(format!("{at}.{k}"), "unknown field: an entry has nodeLabel only"));
            }
            let key = match l.get("nodeLabel") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(err(format!("{at}.nodeLabel"), format!("expected a label key, found {}", kind(other))))
                }
                None => return Err(err(format!("{at}.nodeLabel"), "missing: the node label of this tier")),
            };
            volcano_api::validation::qualified_name(&key).map_err(|e| err(format!("{at}.nodeLabel"), e))?;
            if keys.contains(&key) {
                return Err(err(format!("{at}.nodeLabel"), format!("{key} is listed twice in this type")));
            }
            keys.push(key);
        }
        if keys.len() < 2 {
            return Err(err(
                at,
                format!(
                    "expected at least two labels: the tiers' labels, top tier first, then the node's own \
                     ({HOSTNAME_LABEL}), which is not read"
                ),
            ));
        }
        let node_label = keys.pop().expect("two labels at least");
        let tiers: Vec<String> = keys.into_iter().rev().collect();
        for (i, key) in tiers.iter().enumerate() {
            match key_tier.get(key) {
                Some((t, other)) if *t != i + 1 => {
                    return Err(err(
                        at,
                        format!(
                            "{key} is tier {} here and tier {t} in type {other:?}: a label is one tier in every type",
                            i + 1
                        ),
                    ))
                }
                Some(_) => {}
                None => {
                    key_tier.insert(key.clone(), (i + 1, name.clone()));
                }
            }
        }
        out.push(TopologyType { name: name.clone(), tiers, node_label });
    }
    Ok(out)
}

/// A topology type's name as it appears in HyperNode names (Volcano's `cleanString`): letters
/// in lower case, digits, `.` and `-` kept, anything else `-`.
pub fn clean_type_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'A'..='Z' => c.to_ascii_lowercase(),
            'a'..='z' | '0'..='9' | '.' | '-' => c,
            _ => '-',
        })
        .collect()
}

/// What discovery reads of a node: its name and labels.
#[derive(Clone, Copy, Debug)]
pub struct NodeLabels<'a> {
    /// The node's name.
    pub name: &'a str,
    /// Its labels.
    pub labels: &'a BTreeMap<String, String>,
}

/// The HyperNodes a `label` source wants, and what looks wrong in the labels.
#[derive(Clone, Debug, Default)]
pub struct Discovered {
    /// The HyperNodes, by name: labels, tier, tier name (the label key) and members.
    pub hyper_nodes: Vec<HyperNode>,
    /// A member in two HyperNodes of one tier (label values reused under different upper
    /// tiers, or a node in two types), one sentence each.
    pub warnings: Vec<String>,
}

/// Whether a HyperNode was made by the `source` discovery source.
pub fn made_by(hn: &HyperNode, source: &str) -> bool {
    hn.metadata.labels.as_ref().and_then(|l| l.get(SOURCE_LABEL)).map(String::as_str) == Some(source)
}

/// A group of nodes: one (label key, value).
type Group = (String, String);

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Member {
    Node(String),
    Group(Group),
}

/// The suffix alphabet of Volcano's random names (`k8s.io/apimachinery`'s `rand.String`).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five characters of [`SUFFIX_ALPHABET`] from a hash of the label (FNV-1a) and `attempt`.
fn suffix(key: &str, value: &str, attempt: u32) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes().chain([b'=']).chain(value.bytes()).chain(attempt.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (0..5)
        .map(|_| {
            let c = SUFFIX_ALPHABET[(h % SUFFIX_ALPHABET.len() as u64) as usize];
            h /= SUFFIX_ALPHABET.len() as u64;
            c as char
        })
        .collect()
}

/// The HyperNodes the `label` source `cfg` wants over `nodes`, given the HyperNodes that
/// exist (`existing`: all of them, whatever made them; their names are never taken, and the
/// discovered ones keep theirs).
pub fn discover(cfg: &LabelDiscovery, nodes: &[NodeLabels<'_>], existing: &[HyperNode]) -> Discovered {
    // Each label key's tier and the type named in its HyperNodes' names (the first by name).
    let mut key_info: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    for t in &cfg.types {
        for (i, key) in t.tiers.iter().enumerate() {
            key_info.entry(key.as_str()).or_insert((i + 1, t.name.as_str()));
        }
    }
    let mut members: BTreeMap<Group, BTreeSet<Member>> = BTreeMap::new();
    let mut sorted: Vec<&NodeLabels<'_>> = nodes.iter().collect();
    sorted.sort_by_key(|n| n.name);
    for node in sorted {
        for t in &cfg.types {
            let mut member = Member::Node(node.name.to_string());
            for key in &t.tiers {
                let Some(value) = node.labels.get(key) else { break };
                let group = (key.clone(), value.clone());
                members.entry(group.clone()).or_default().insert(member);
                member = Member::Group(group);
            }
        }
    }

    // Names: kept through the labels, else derived from them.
    let taken: BTreeSet<&str> = existing.iter().filter_map(|h| h.metadata.name.as_deref()).collect();
    let mut reusable: Vec<&HyperNode> = existing.iter().filter(|h| made_by(h, LABEL_SOURCE)).collect();
    reusable.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut order: Vec<&Group> = members.keys().collect();
    order.sort_by_key(|g| (key_info[g.0.as_str()].0, *g));
    let mut names: BTreeMap<&Group, String> = BTreeMap::new();
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    for g in order {
        let (tier, type_name) = key_info[g.0.as_str()];
        let prefix = format!("hypernode-{}-tier{tier}-", clean_type_name(type_name));
        let kept = reusable.iter().filter_map(|h| Some((h.metadata.name.as_deref()?, h))).find(|(n, h)| {
            n.starts_with(&prefix)
                && !claimed.contains(*n)
                && h.metadata.labels.as_ref().and_then(|l| l.get(&g.0)) == Some(&g.1)
        });
        let name = match kept {
            Some((n, _)) => n.to_string(),
            None => (0u32..)
                .map(|attempt| format!("{prefix}{}", suffix(&g.0, &g.1, attempt)))
                .find(|n| !taken.contains(n.as_str()) && !claimed.contains(n))
                .expect("an unused name"),
        };
        claimed.insert(name.clone());
        names.insert(g, name);
    }

    // Members in two HyperNodes of one tier.
    let mut parents: BTreeMap<(usize, &Member), Vec<&Group>> = BTreeMap::new();
    for (g, ms) in &members {
        let tier = key_info[g.0.as_str()].0;
        for m in ms {
            parents.entry((tier, m)).or_default().push(g);
        }
    }
    let mut warnings = Vec::new();
    for ((tier, m), groups) in &parents {
        if groups.len() < 2 {
            continue;
        }
        let what = match m {
            Member::Node(n) => format!("node {n}"),
            Member::Group((k, v)) => format!("HyperNode {} ({k}={v})", names[&(k.clone(), v.clone())]),
        };
        let list: Vec<String> = groups.iter().map(|g| format!("{} ({}={})", names[*g], g.0, g.1)).collect();
        warnings.push(format!(
            "{what} is in {} tier-{tier} HyperNodes: {}; a label value must name one switch cluster-wide",
            groups.len(),
            list.join(", ")
        ));
    }

    let mut hyper_nodes: Vec<HyperNode> = members
        .iter()
        .map(|(g, ms)| {
            let tier = key_info[g.0.as_str()].0;
            let mut member_names: Vec<(String, &str)> = ms
                .iter()
                .map(|m| match m {
                    Member::Node(n) => (n.clone(), MEMBER_TYPE_NODE),
                    Member::Group(sub) => (names[sub].clone(), MEMBER_TYPE_HYPER_NODE),
                })
                .collect();
            member_names.sort();
            let mut hn = HyperNode::new(
                &names[g],
                HyperNodeSpec {
                    tier: tier as i64,
                    tier_name: Some(g.0.clone()),
                    members: member_names
                        .into_iter()
                        .map(|(name, t)| MemberSpec {
                            type_: t.to_string(),
                            selector: MemberSelector { exact_match: Some(ExactMatch { name }), ..Default::default() },
                        })
                        .collect(),
                },
            );
            hn.metadata.labels = Some(discovery_labels(g));
            hn
        })
        .collect();
    hyper_nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Discovered { hyper_nodes, warnings }
}

fn discovery_labels((key, value): &Group) -> BTreeMap<String, String> {
    BTreeMap::from([(key.clone(), value.clone()), (SOURCE_LABEL.to_string(), LABEL_SOURCE.to_string())])
}

/// What to change so that the HyperNodes of a source are the wanted ones.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    /// HyperNodes to create, lower tiers first.
    pub create: Vec<HyperNode>,
    /// HyperNodes to update: the existing object with the wanted spec and the wanted labels
    /// added to its own, lower tiers first.
    pub update: Vec<HyperNode>,
    /// Names of HyperNodes to delete, higher tiers first.
    pub delete: Vec<String>,
}

impl Changes {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// The creates, updates and deletes that make the HyperNodes made by `source` among
/// `existing` the `wanted` ones. A HyperNode not labelled with `source` is never updated or
/// deleted, nor created over (a wanted one of the same name is left out).
pub fn diff(source: &str, wanted: &[HyperNode], existing: &[HyperNode]) -> Changes {
    let by_name: BTreeMap<&str, &HyperNode> =
        existing.iter().filter_map(|h| h.metadata.name.as_deref().map(|n| (n, h))).collect();
    let mut changes = Changes::default();
    let mut wanted_names = BTreeSet::new();
    for w in wanted {
        let name = w.metadata.name.as_deref().unwrap_or_default();
        wanted_names.insert(name);
        match by_name.get(name) {
            None => changes.create.push(w.clone()),
            Some(h) if !made_by(h, source) => {}
            Some(h) => {
                let labels = h.metadata.labels.clone().unwrap_or_default();
                let wanted_labels = w.metadata.labels.clone().unwrap_or_default();
                let labels_ok = wanted_labels.iter().all(|(k, v)| labels.get(k) == Some(v));
                if h.spec != w.spec || !labels_ok {
                    let mut next = (*h).clone();
                    let mut merged = labels;
                    merged.extend(wanted_labels);
                    next.metadata.labels = Some(merged);
                    next.spec = w.spec.clone();
                    changes.update.push(next);
                }
            }
        }
    }
    let mut gone: Vec<&HyperNode> = existing
        .iter()
        .filter(|h| made_by(h, source) && !wanted_names.contains(h.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    gone.sort_by(|a, b| b.spec.tier.cmp(&a.spec.tier).then_with(|| a.metadata.name.cmp(&b.metadata.name)));
    changes.delete = gone.into_iter().filter_map(|h| h.metadata.name.clone()).collect();
    let tier_then_name = |a: &HyperNode, b: &HyperNode| {
        a.spec.tier.cmp(&b.spec.tier).then_with(|| a.metadata.name.cmp(&b.metadata.name))
    };
    changes.create.sort_by(tier_then_name);
    changes.update.sort_by(tier_then_name);
    changes
}

/// The HyperNodes once `changes` are applied to `existing`.
pub fn apply(existing: &[HyperNode], changes: &Changes) -> Vec<HyperNode> {
    let deleted: BTreeSet<&str> = changes.delete.iter().map(String::as_str).collect();
    let mut by_name: BTreeMap<String, HyperNode> = existing
        .iter()
        .filter(|h| !deleted.contains(h.metadata.name.as_deref().unwrap_or_default()))
        .map(|h| (h.metadata.name.clone().unwrap_or_default(), h.clone()))
        .collect();
    for h in changes.create.iter().chain(&changes.update) {
        by_name.insert(h.metadata.name.clone().unwrap_or_default(), h.clone());
    }
    by_name.into_values().collect()
}

/// Whether `labels` match `selector` (`matchLabels` and `matchExpressions` with `In`,
/// `NotIn`, `Exists`, `DoesNotExist`). An empty selector, or one with an unknown operator,
/// matches nothing (as a HyperNode's `labelMatch` in Volcano).
fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let exprs = selector.match_expressions.as_deref().unwrap_or_default();
    let plain = selector.match_labels.as_ref();
    if exprs.is_empty() && plain.is_none_or(BTreeMap::is_empty) {
        return false;
    }
    plain.into_iter().flatten().all(|(k, v)| labels.get(k) == Some(v))
        && exprs.iter().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

/// The number of nodes in each HyperNode (`status.nodeCount`): the distinct existing nodes
/// its members select, through its member HyperNodes at any depth. A regular expression
/// that does not compile selects nothing, a HyperNode reached again on a cycle adds nothing.
pub fn node_counts(hyper_nodes: &[HyperNode], nodes: &[NodeLabels<'_>]) -> BTreeMap<String, i64> {
    let by_name: BTreeMap<&str, &HyperNode> =
        hyper_nodes.iter().filter_map(|h| h.metadata.name.as_deref().map(|n| (n, h))).collect();
    let node_names: BTreeSet<&str> = nodes.iter().map(|n| n.name).collect();
    let mut memo: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut regexes: BTreeMap<&str, Option<regex::Regex>> = BTreeMap::new();
    let mut counts = BTreeMap::new();
    for name in by_name.keys() {
        let mut visiting = BTreeSet::new();
        let (set, _) = collect(name, &by_name, nodes, &node_names, &mut memo, &mut regexes, &mut visiting);
        counts.insert(name.to_string(), set.len() as i64);
    }
    counts
}

fn compiled<'a>(regexes: &mut BTreeMap<&'a str, Option<regex::Regex>>, pattern: &'a str) -> Option<regex::Regex> {
    regexes.entry(pattern).or_insert_with(|| regex::Regex::new(pattern).ok()).clone()
}

/// The nodes under `name`, and whether a cycle was cut on the way (then the result depends
/// on where the walk entered the cycle, and is not remembered).
fn collect<'a>(
    name: &'a str,
    by_name: &BTreeMap<&'a str, &'a HyperNode>,
    nodes: &[NodeLabels<'a>],
    node_names: &BTreeSet<&'a str>,
    memo: &mut BTreeMap<&'a str, BTreeSet<&'a str>>,
    regexes: &mut BTreeMap<&'a str, Option<regex::Regex>>,
    visiting: &mut BTreeSet<&'a str>,
) -> (BTreeSet<&'a str>, bool) {
    if let Some(done) = memo.get(name) {
        return (done.clone(), false);
    }
    let Some(hn) = by_name.get(name) else { return (BTreeSet::new(), false) };
    if !visiting.insert(name) {
        return (BTreeSet::new(), true);
    }
    let mut out = BTreeSet::new();
    let mut cut = false;
    for m in &hn.spec.members {
        let sel = &m.selector;
        if m.is_node() {
            if let Some(e) = &sel.exact_match {
                if let Some(n) = node_names.get(e.name.as_str()) {
                    out.insert(*n);
                }
            }
            if let Some(r) = &sel.regex_match {
                if let Some(re) = compiled(regexes, &r.pattern) {
                    out.extend(nodes.iter().filter(|n| re.is_match(n.name)).map(|n| n.name));
                }
            }
            if let Some(l) = &sel.label_match {
                out.extend(nodes.iter().filter(|n| selector_matches(l, n.labels)).map(|n| n.name));
            }
        } else if m.type_ == MEMBER_TYPE_HYPER_NODE {
            let mut subs: Vec<&'a str> = Vec::new();
            if let Some(e) = &sel.exact_match {
                if let Some((n, _)) = by_name.get_key_value(e.name.as_str()) {
                    subs.push(n);
                }
            }
            if let Some(r) = &sel.regex_match {
                if let Some(re) = compiled(regexes, &r.pattern) {
                    subs.extend(by_name.keys().filter(|n| re.is_match(n)));
                }
            }
            for s in subs {
                let (set, c) = collect(s, by_name, nodes, node_names, memo, regexes, visiting);
                out.extend(set);
                cut |= c;
            }
        }
    }
    visiting.remove(name);
    if !cut {
        memo.insert(name, out.clone());
    }
    (out, cut)
}

/// The `status.nodeCount` writes: each HyperNode whose count is not `counts`' one, by name.
pub fn status_updates(hyper_nodes: &[HyperNode], counts: &BTreeMap<String, i64>) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = hyper_nodes
        .iter()
        .filter_map(|h| {
            let name = h.metadata.name.clone()?;
            let want = *counts.get(&name)?;
            let have = h.status.as_ref().and_then(|s| s.node_count);
            (have != Some(want)).then_some((name, want))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use volcano_api::topology::{HyperNodeStatus, RegexMatch};

    use super::*;

    /// The user guide's configuration: two types, the second of two tiers.
    const GUIDE: &str = r#"
networkTopologyDiscovery:
  - source: ufm
    enabled: false
    interval: 10m
  - source: label
    enabled: true
    interval: 30s
    config:
      networkTopologyTypes:
        topologyA2:
          - nodeLabel: "volcano.sh/tor"
          - nodeLabel: "kubernetes.io/hostname"
        topologyA3:
          - nodeLabel: "volcano.sh/hypercluster"
          - nodeLabel: "volcano.sh/hypernode"
          - nodeLabel: "kubernetes.io/hostname"
"#;

    struct Cluster(Vec<(String, BTreeMap<String, String>)>);

    impl Cluster {
        fn new(nodes: &[(&str, &[(&str, &str)])]) -> Self {
            Cluster(
                nodes
                    .iter()
                    .map(|(n, ls)| (n.to_string(), ls.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()))
                    .collect(),
            )
        }
        fn view(&self) -> Vec<NodeLabels<'_>> {
            self.0.iter().map(|(n, l)| NodeLabels { name: n, labels: l }).collect()
        }
    }

    /// The guide's eight nodes: s0..s3 (volcano.sh/hypernode) under s4 and s5
    /// (volcano.sh/hypercluster).
    fn guide_cluster() -> Cluster {
        let hn = ["s0", "s0", "s1", "s1", "s2", "s2", "s3", "s3"];
        let hc = ["s4", "s4", "s4", "s4", "s5", "s5", "s5", "s5"];
        let names: Vec<String> = (0..8).map(|i| format!("node{i}")).collect();
        let ips: Vec<String> = (0..8).map(|i| format!("192.168.1.1{i}")).collect();
        Cluster(
            (0..8)
                .map(|i| {
                    (
                        names[i].clone(),
                        BTreeMap::from([
                            ("kubernetes.io/hostname".to_string(), ips[i].clone()),
                            ("volcano.sh/hypernode".to_string(), hn[i].to_string()),
                            ("volcano.sh/hypercluster".to_string(), hc[i].to_string()),
                        ]),
                    )
                })
                .collect(),
        )
    }

    fn json(h: &[HyperNode]) -> serde_json::Value {
        serde_json::to_value(h).unwrap()
    }

    fn label_cfg(text: &str) -> LabelDiscovery {
        parse_config(text).unwrap().label.expect("label source enabled")
    }

    /// HyperNode name → (tier, tierName, label, members in order).
    fn shape(d: &[HyperNode]) -> BTreeMap<String, (i64, String, String, Vec<String>)> {
        d.iter()
            .map(|h| {
                let labels = h.metadata.labels.clone().unwrap_or_default();
                assert_eq!(labels.get(SOURCE_LABEL).map(String::as_str), Some("label"));
                let tier_name = h.spec.tier_name.clone().unwrap();
                let label = format!("{tier_name}={}", labels[&tier_name]);
                let want_type = if h.spec.tier == 1 { MEMBER_TYPE_NODE } else { MEMBER_TYPE_HYPER_NODE };
                let members = h
                    .spec
                    .members
                    .iter()
                    .map(|m| {
                        assert_eq!(m.type_, want_type, "{:?}", h.metadata.name);
                        m.selector.exact_match.as_ref().unwrap().name.clone()
                    })
                    .collect();
                (h.metadata.name.clone().unwrap(), (h.spec.tier, tier_name, label, members))
            })
            .collect()
    }

    /// The discovered HyperNode with label `key=value`.
    fn with_label<'a>(d: &'a [HyperNode], key: &str, value: &str) -> &'a HyperNode {
        d.iter()
            .find(|h| h.metadata.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str) == Some(value))
            .unwrap_or_else(|| panic!("no HyperNode {key}={value}"))
    }

    fn member_names(h: &HyperNode) -> Vec<&str> {
        h.spec.members.iter().map(|m| m.selector.exact_match.as_ref().unwrap().name.as_str()).collect()
    }

    fn name(h: &HyperNode) -> &str {
        h.metadata.name.as_deref().unwrap()
    }

    #[test]
    fn the_guides_configuration_reads_as_volcano_reads_it() {
        let cfg = parse_config(GUIDE).unwrap();
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        let label = cfg.label.unwrap();
        assert_eq!(label.interval, Duration::from_secs(30));
        assert_eq!(
            label.types,
            vec![
                TopologyType {
                    name: "topologyA2".into(),
                    tiers: vec!["volcano.sh/tor".into()],
                    node_label: HOSTNAME_LABEL.into()
                },
                TopologyType {
                    name: "topologyA3".into(),
                    tiers: vec!["volcano.sh/hypernode".into(), "volcano.sh/hypercluster".into()],
                    node_label: HOSTNAME_LABEL.into()
                },
            ]
        );
        // Volcano installs the key empty; no source, or a disabled one, discovers nothing.
        for text in [
            "",
            "\n",
            "networkTopologyDiscovery: []",
            "networkTopologyDiscovery:\n  - source: label\n    enabled: false\n",
        ] {
            assert_eq!(parse_config(text).unwrap(), DiscoveryConfig::default(), "{text:?}");
        }
        // No interval, or zero: an hour; nanoseconds as a number; YAML 1.1's `yes`.
        let base = "networkTopologyDiscovery:\n  - source: label\n    enabled: ENABLED\n    INTERVAL\n    config:\n      networkTopologyTypes:\n        t:\n          - nodeLabel: a\n          - nodeLabel: b\n";
        for (enabled, interval, want) in [
            ("true", "", DEFAULT_INTERVAL),
            ("yes", "interval: 0s", DEFAULT_INTERVAL),
            ("true", "interval: 1h30m", Duration::from_secs(5400)),
            ("On", "interval: 90000000000", Duration::from_secs(90)),
        ] {
            let text = base.replace("ENABLED", enabled).replace("INTERVAL", interval);
            assert_eq!(label_cfg(&text).interval, want, "{text}");
        }
    }

    #[test]
    fn other_sources_are_warnings_not_silence() {
        let text = r#"
networkTopologyDiscovery:
  - source: ufm
    enabled: true
    interval: 10m
    credentials: {secretRef: {name: ufm-credentials, namespace: volcano-system}}
    config: {endpoint: "https://ufm-server:8080", insecureSkipVerify: true}
  - source: roce
    enabled: false
    config: {endpoint: "https://roce-server:9090"}
  - source: infiniband
    enabled: true
"#;
        let cfg = parse_config(text).unwrap();
        assert_eq!(cfg.label, None);
        assert_eq!(cfg.warnings.len(), 2, "{:?}", cfg.warnings);
        assert!(
            cfg.warnings[0].contains("source ufm is Volcano's, not supported by volcano-rs"),
            "{}",
            cfg.warnings[0]
        );
        assert!(cfg.warnings[0].contains("volcano.sh/network-topology-source=ufm are left as they are"));
        assert!(cfg.warnings[1].contains("source infiniband is unknown"), "{}", cfg.warnings[1]);
        let odd = parse_config("networkTopologyDiscovery: []\nsomethingElse: 1\n").unwrap();
        assert_eq!(
            odd.warnings,
            vec![format!(
                "{CONFIG_KEY}: the key \"somethingElse\" is not read (volcano-rs reads networkTopologyDiscovery only)"
            )]
        );
    }

    #[test]
    fn configuration_errors_say_where_and_what_was_expected() {
        let types = |body: &str| {
            format!(
                "networkTopologyDiscovery:\n  - source: label\n    enabled: true\n    config:\n      networkTopologyTypes:\n{body}"
            )
        };
        let cases: Vec<(String, &str, &str)> = vec![
            ("networkTopologyDiscovery: {source: label}".into(), "networkTopologyDiscovery", "expected a list of sources, found a map"),
            ("networkTopologyDiscovery:\n  - enabled: true\n".into(), "networkTopologyDiscovery[0].source", "missing"),
            ("networkTopologyDiscovery:\n  - source: label\n    enable: true\n".into(), "networkTopologyDiscovery[0].enable", "unknown field"),
            ("networkTopologyDiscovery:\n  - source: label\n    enabled: maybe\n".into(), "networkTopologyDiscovery[0] (source label).enabled", "expected true or false, found a string"),
            ("networkTopologyDiscovery:\n  - source: label\n    enabled: true\n    interval: soon\n".into(), "networkTopologyDiscovery[0] (source label).interval", "is not a duration"),
            ("networkTopologyDiscovery:\n  - source: label\n    enabled: true\n".into(), "networkTopologyDiscovery[0] (source label).config", "missing"),
            ("networkTopologyDiscovery:\n  - source: label\n    enabled: true\n    config: {networkTopologyType: {}}\n".into(), "networkTopologyDiscovery[0] (source label).config.networkTopologyType", "unknown field"),
            (types("        averyveryverylongtypename:\n          - nodeLabel: a\n          - nodeLabel: b\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.averyveryverylongtypename", "1 to 20 characters"),
            (types("        t:\n          - nodeLabel: a\n          - nodeLabel: a\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.t[1].nodeLabel", "a is listed twice"),
            (types("        t:\n          - nodeLabel: kubernetes.io/hostname\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.t", "at least two labels"),
            (types("        t:\n          - nodeLabel: \"bad key!\"\n          - nodeLabel: b\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.t[0].nodeLabel", "not a qualified name"),
            (types("        t:\n          - label: a\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.t[0].label", "unknown field"),
            (types("        t: a\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.t", "expected a list of {nodeLabel: …}"),
            (types("        A_b:\n          - nodeLabel: a\n          - nodeLabel: h\n        a-b:\n          - nodeLabel: c\n          - nodeLabel: h\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.a-b", "both make HyperNode names hypernode-a-b-"),
            (types("        x.:\n          - nodeLabel: a\n          - nodeLabel: h\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.x.", "not a DNS-1123 subdomain"),
            (types("        p:\n          - nodeLabel: spine\n          - nodeLabel: tor\n          - nodeLabel: h\n        q:\n          - nodeLabel: tor\n          - nodeLabel: spine\n          - nodeLabel: h\n"), "networkTopologyDiscovery[0] (source label).config.networkTopologyTypes.q", "spine is tier 1 here and tier 2 in type \"p\""),
            ("networkTopologyDiscovery:\n  - source: label\n    enabled: true\n    config: {networkTopologyTypes: {}}\n  - source: label\n    enabled: true\n    config: {networkTopologyTypes: {}}\n".into(), "networkTopologyDiscovery[1] (source label)", "enabled twice (entries 0 and 1)"),
            ("networkTopologyDiscovery: [\n".into(), "line", "not YAML"),
        ];
        for (text, at, message) in cases {
            let e = parse_config(&text).expect_err(&text);
            assert!(e.at.starts_with(at), "{text}\nat {:?}, want {at:?}", e.at);
            assert!(e.message.contains(message), "{text}\n{e}\nwant {message:?}");
            assert!(e.to_string().starts_with("volcano-controller.conf: "), "{e}");
        }
        // A type shared at the same tier is fine: its HyperNodes are shared.
        let text = types("        p:\n          - nodeLabel: spine\n          - nodeLabel: tor\n          - nodeLabel: h\n        q:\n          - nodeLabel: tor\n          - nodeLabel: h\n");
        assert_eq!(label_cfg(&text).types.len(), 2);
        // An explicitly empty map of types is allowed: discovery wants no HyperNodes.
        assert_eq!(label_cfg(&types("        {}\n")).types, vec![]);
    }

    #[test]
    fn the_guides_eight_nodes_make_four_switches_under_two() {
        let cfg = label_cfg(GUIDE);
        let cluster = guide_cluster();
        let d = discover(&cfg, &cluster.view(), &[]);
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
        assert_eq!(d.hyper_nodes.len(), 6);
        let s: Vec<&HyperNode> = (0..6)
            .map(|i| {
                with_label(
                    &d.hyper_nodes,
                    if i < 4 { "volcano.sh/hypernode" } else { "volcano.sh/hypercluster" },
                    &format!("s{i}"),
                )
            })
            .collect();
        for (i, h) in s.iter().enumerate().take(4) {
            assert_eq!(h.spec.tier, 1);
            assert_eq!(h.spec.tier_name.as_deref(), Some("volcano.sh/hypernode"));
            assert!(name(h).starts_with("hypernode-topologya3-tier1-"), "{}", name(h));
            assert_eq!(member_names(h), vec![format!("node{}", 2 * i), format!("node{}", 2 * i + 1)]);
        }
        for (i, h) in s.iter().enumerate().skip(4) {
            assert_eq!(h.spec.tier, 2);
            assert_eq!(h.spec.tier_name.as_deref(), Some("volcano.sh/hypercluster"));
            assert!(name(h).starts_with("hypernode-topologya3-tier2-"), "{}", name(h));
            let mut want = vec![name(s[2 * (i - 4)]), name(s[2 * (i - 4) + 1])];
            want.sort();
            assert_eq!(member_names(h), want);
        }
        // Names: Volcano's shape, five characters of its alphabet; all distinct.
        let names: BTreeSet<&str> = d.hyper_nodes.iter().map(name).collect();
        assert_eq!(names.len(), 6);
        for n in &names {
            let suffix = n.rsplit('-').next().unwrap();
            assert_eq!(suffix.len(), 5);
            assert!(suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)), "{n}");
        }
        // Deterministic: the same inputs in another order give the same HyperNodes.
        let mut reversed = guide_cluster();
        reversed.0.reverse();
        let again = discover(&cfg, &reversed.view(), &[]);
        assert_eq!((json(&again.hyper_nodes), again.warnings), (json(&d.hyper_nodes), d.warnings.clone()));
        // The topologyA2 type reads volcano.sh/tor, which no node has.
        assert!(d.hyper_nodes.iter().all(|h| !name(h).contains("topologya2")));
        // The counts: four tier-1 switches of 2 nodes, two tier-2 of 4.
        let counts = node_counts(&d.hyper_nodes, &cluster.view());
        for h in &s[..4] {
            assert_eq!(counts[name(h)], 2);
        }
        for h in &s[4..] {
            assert_eq!(counts[name(h)], 4);
        }
        // Applied to an empty cluster: six creates, lower tier first, then six status writes.
        let changes = diff(LABEL_SOURCE, &d.hyper_nodes, &[]);
        assert_eq!(changes.create.iter().map(|h| h.spec.tier).collect::<Vec<_>>(), vec![1, 1, 1, 1, 2, 2]);
        assert!(changes.update.is_empty() && changes.delete.is_empty());
        let after = apply(&[], &changes);
        assert_eq!(status_updates(&after, &counts).len(), 6);
    }

    #[test]
    fn a_node_missing_a_label_stops_at_the_tier_below_it() {
        let cfg = label_cfg(GUIDE);
        let cluster = Cluster::new(&[
            // Both tiers.
            ("a", &[("volcano.sh/hypernode", "s0"), ("volcano.sh/hypercluster", "s4")]),
            // Tier 1 only: in s0, not directly in anything above.
            ("b", &[("volcano.sh/hypernode", "s0")]),
            // Tier 2 only: nothing (the walk stops at the missing tier 1).
            ("c", &[("volcano.sh/hypercluster", "s4")]),
            // No label: nothing.
            ("d", &[("kubernetes.io/hostname", "d")]),
            // The other type's tier 1.
            ("e", &[("volcano.sh/tor", "t9")]),
        ]);
        let d = discover(&cfg, &cluster.view(), &[]);
        let got = shape(&d.hyper_nodes);
        let s0 = with_label(&d.hyper_nodes, "volcano.sh/hypernode", "s0");
        let s4 = with_label(&d.hyper_nodes, "volcano.sh/hypercluster", "s4");
        let t9 = with_label(&d.hyper_nodes, "volcano.sh/tor", "t9");
        assert_eq!(got.len(), 3, "{got:#?}");
        assert_eq!(member_names(s0), vec!["a", "b"]);
        assert_eq!(member_names(s4), vec![name(s0)]);
        assert_eq!(member_names(t9), vec!["e"]);
        assert!(name(t9).starts_with("hypernode-topologya2-tier1-"));
        let counts = node_counts(&d.hyper_nodes, &cluster.view());
        assert_eq!((counts[name(s0)], counts[name(s4)], counts[name(t9)]), (2, 2, 1));
    }

    /// The cluster after a first pass: the discovered HyperNodes as the API holds them.
    fn created(d: &Discovered) -> Vec<HyperNode> {
        apply(&[], &diff(LABEL_SOURCE, &d.hyper_nodes, &[]))
    }

    #[test]
    fn a_relabelled_node_moves_and_names_stay() {
        let cfg = label_cfg(GUIDE);
        let before = guide_cluster();
        let first = discover(&cfg, &before.view(), &[]);
        let existing = created(&first);
        // node1 moves from s0 to s2 (still under s4's label: a wrong labelling, reported).
        let mut after = guide_cluster();
        after.0[1].1.insert("volcano.sh/hypernode".into(), "s2".into());
        let second = discover(&cfg, &after.view(), &existing);
        let s0 = with_label(&second.hyper_nodes, "volcano.sh/hypernode", "s0");
        let s2 = with_label(&second.hyper_nodes, "volcano.sh/hypernode", "s2");
        assert_eq!(member_names(s0), vec!["node0"]);
        assert_eq!(member_names(s2), vec!["node1", "node4", "node5"]);
        // Names are kept through the labels.
        for h in &second.hyper_nodes {
            assert!(existing.iter().any(|e| e.metadata.name == h.metadata.name), "{}", name(h));
        }
        // s2 is now under s4 (node1) and s5: a warning says so.
        assert_eq!(second.warnings.len(), 1, "{:?}", second.warnings);
        assert!(
            second.warnings[0]
                .contains(&format!("HyperNode {} (volcano.sh/hypernode=s2) is in 2 tier-2 HyperNodes", name(s2))),
            "{}",
            second.warnings[0]
        );
        // The changes: s0, s2 and s4 (s2 joins it) are updated, nothing else.
        let changes = diff(LABEL_SOURCE, &second.hyper_nodes, &existing);
        assert!(changes.create.is_empty() && changes.delete.is_empty(), "{changes:?}");
        let updated: Vec<&str> = changes.update.iter().map(name).collect();
        let s4 = with_label(&second.hyper_nodes, "volcano.sh/hypercluster", "s4");
        let mut want = vec![name(s0), name(s2)];
        want.sort();
        want.push(name(s4));
        assert_eq!(updated, want);
        // Moving it properly (s2 under s5) leaves no warning and updates s0, s2 and s4 too.
        after.0[1].1.insert("volcano.sh/hypercluster".into(), "s5".into());
        let third = discover(&cfg, &after.view(), &existing);
        assert!(third.warnings.is_empty(), "{:?}", third.warnings);
        assert_eq!(member_names(with_label(&third.hyper_nodes, "volcano.sh/hypercluster", "s4")).len(), 2);
        let counts = node_counts(&apply(&existing, &diff(LABEL_SOURCE, &third.hyper_nodes, &existing)), &after.view());
        assert_eq!(counts[name(with_label(&third.hyper_nodes, "volcano.sh/hypercluster", "s4"))], 3);
        assert_eq!(counts[name(with_label(&third.hyper_nodes, "volcano.sh/hypercluster", "s5"))], 5);
    }

    #[test]
    fn a_removed_node_empties_its_switch_which_goes() {
        let cfg = label_cfg(GUIDE);
        let first = discover(&cfg, &guide_cluster().view(), &[]);
        let existing = created(&first);
        let s3 = name(with_label(&first.hyper_nodes, "volcano.sh/hypernode", "s3")).to_string();
        let s5 = name(with_label(&first.hyper_nodes, "volcano.sh/hypercluster", "s5")).to_string();
        let mut cluster = guide_cluster();
        cluster.0.retain(|(n, _)| n != "node6" && n != "node7");
        let second = discover(&cfg, &cluster.view(), &existing);
        assert_eq!(second.hyper_nodes.len(), 5);
        let changes = diff(LABEL_SOURCE, &second.hyper_nodes, &existing);
        assert_eq!(changes.delete, vec![s3.clone()]);
        assert!(changes.create.is_empty());
        assert_eq!(changes.update.iter().map(name).collect::<Vec<_>>(), vec![s5.as_str()]);
        // All nodes gone: everything discovered goes, the higher tier first.
        let none = discover(&cfg, &[], &existing);
        let changes = diff(LABEL_SOURCE, &none.hyper_nodes, &existing);
        assert_eq!(changes.delete.len(), 6);
        let tiers: Vec<i64> = changes
            .delete
            .iter()
            .map(|n| existing.iter().find(|h| h.metadata.name.as_deref() == Some(n)).unwrap().spec.tier)
            .collect();
        assert_eq!(tiers, vec![2, 2, 1, 1, 1, 1]);
    }

    #[test]
    fn hyper_nodes_not_made_by_label_discovery_are_never_touched() {
        let cfg = label_cfg(GUIDE);
        let cluster = guide_cluster();
        let first = discover(&cfg, &cluster.view(), &[]);
        let taken = first.hyper_nodes[0].metadata.name.clone().unwrap();
        // A hand-written HyperNode holding a name discovery would pick, another made by ufm,
        // and one labelled label-made by a user with a wrong spec.
        let mut manual = HyperNode::new(&taken, HyperNodeSpec { tier: 1, ..Default::default() });
        manual.metadata.labels = Some(BTreeMap::from([("volcano.sh/hypernode".to_string(), "s0".to_string())]));
        let mut ufm = HyperNode::new("ufm-leaf", HyperNodeSpec { tier: 1, ..Default::default() });
        ufm.metadata.labels = Some(BTreeMap::from([(SOURCE_LABEL.to_string(), "ufm".to_string())]));
        let existing = vec![manual.clone(), ufm.clone()];
        let d = discover(&cfg, &cluster.view(), &existing);
        assert!(d.hyper_nodes.iter().all(|h| h.metadata.name.as_deref() != Some(&taken)), "the taken name is not used");
        let changes = diff(LABEL_SOURCE, &d.hyper_nodes, &existing);
        assert_eq!(changes.create.len(), 6);
        assert!(changes.update.is_empty() && changes.delete.is_empty(), "{changes:?}");
        // A wanted HyperNode whose name is held by another source's is left out, not taken.
        let mut clash = d.hyper_nodes[0].clone();
        clash.metadata.name = Some("ufm-leaf".into());
        let changes = diff(LABEL_SOURCE, &[clash], &existing);
        assert!(changes.is_empty(), "{changes:?}");
        // Nothing wanted: only label-made HyperNodes go.
        let mut mine = d.hyper_nodes[0].clone();
        mine.metadata.labels.as_mut().unwrap().insert("team".into(), "net".into());
        let changes = diff(LABEL_SOURCE, &[], &[manual, ufm, mine.clone()]);
        assert_eq!(changes.delete, vec![mine.metadata.name.clone().unwrap()]);
    }

    #[test]
    fn volcanos_hyper_nodes_are_adopted_and_updates_keep_other_labels() {
        let cfg = label_cfg(GUIDE);
        let cluster = guide_cluster();
        // Made by Volcano (a random suffix), with one member missing and a user's label.
        let mut volcano = HyperNode::new(
            "hypernode-topologya3-tier1-jcdfg",
            HyperNodeSpec {
                tier: 1,
                tier_name: Some("volcano.sh/hypernode".into()),
                members: vec![MemberSpec {
                    type_: MEMBER_TYPE_NODE.into(),
                    selector: MemberSelector {
                        exact_match: Some(ExactMatch { name: "node0".into() }),
                        ..Default::default()
                    },
                }],
            },
        );
        volcano.metadata.labels = Some(BTreeMap::from([
            ("volcano.sh/hypernode".to_string(), "s0".to_string()),
            (SOURCE_LABEL.to_string(), LABEL_SOURCE.to_string()),
            ("team".to_string(), "net".to_string()),
        ]));
        // A label-made HyperNode of another type's prefix is not reused for this one.
        let mut other_prefix = volcano.clone();
        other_prefix.metadata.name = Some("hypernode-topologya2-tier1-aaaaa".into());
        let existing = vec![volcano.clone(), other_prefix];
        let d = discover(&cfg, &cluster.view(), &existing);
        let s0 = with_label(&d.hyper_nodes, "volcano.sh/hypernode", "s0");
        assert_eq!(name(s0), "hypernode-topologya3-tier1-jcdfg");
        let s4 = with_label(&d.hyper_nodes, "volcano.sh/hypercluster", "s4");
        assert!(member_names(s4).contains(&"hypernode-topologya3-tier1-jcdfg"));
        let changes = diff(LABEL_SOURCE, &d.hyper_nodes, &existing);
        assert_eq!(changes.update.len(), 1);
        let u = &changes.update[0];
        assert_eq!(member_names(u), vec!["node0", "node1"]);
        assert_eq!(u.metadata.labels.as_ref().unwrap()["team"], "net", "the user's label stays");
        assert_eq!(changes.delete, vec!["hypernode-topologya2-tier1-aaaaa".to_string()]);
        assert_eq!(changes.create.len(), 5);
        // A second pass over the applied result changes nothing.
        let after = apply(&existing, &changes);
        let again = discover(&cfg, &cluster.view(), &after);
        assert_eq!(json(&again.hyper_nodes), json(&d.hyper_nodes));
        assert!(diff(LABEL_SOURCE, &again.hyper_nodes, &after).is_empty());
    }

    #[test]
    fn two_types_share_a_label_at_the_same_tier() {
        let text = r#"
networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        gpu:
          - nodeLabel: spine
          - nodeLabel: tor
          - nodeLabel: kubernetes.io/hostname
        npu:
          - nodeLabel: tor
          - nodeLabel: kubernetes.io/hostname
        rack:
          - nodeLabel: rack
          - nodeLabel: kubernetes.io/hostname
"#;
        let cfg = label_cfg(text);
        let cluster = Cluster::new(&[
            ("g0", &[("tor", "t0"), ("spine", "p0"), ("rack", "r0")]),
            ("g1", &[("tor", "t0"), ("spine", "p0"), ("rack", "r1")]),
            ("n0", &[("tor", "t1")]),
        ]);
        let d = discover(&cfg, &cluster.view(), &[]);
        let got = shape(&d.hyper_nodes);
        assert_eq!(got.len(), 5, "{got:#?}");
        // tor is named after the first type listing it (gpu), shared with npu.
        let t0 = with_label(&d.hyper_nodes, "tor", "t0");
        let t1 = with_label(&d.hyper_nodes, "tor", "t1");
        assert!(name(t0).starts_with("hypernode-gpu-tier1-") && name(t1).starts_with("hypernode-gpu-tier1-"));
        assert_eq!(member_names(t0), vec!["g0", "g1"]);
        assert_eq!(member_names(with_label(&d.hyper_nodes, "spine", "p0")), vec![name(t0)]);
        let r0 = with_label(&d.hyper_nodes, "rack", "r0");
        assert!(name(r0).starts_with("hypernode-rack-tier1-"));
        // g0 and g1 are in two tier-1 HyperNodes (tor and rack): reported.
        assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
        assert!(d.warnings[0].starts_with("node g0 is in 2 tier-1 HyperNodes"), "{}", d.warnings[0]);
    }

    #[test]
    fn node_counts_follow_every_kind_of_member() {
        let cluster = Cluster::new(&[
            ("gpu-0", &[("zone", "east")]),
            ("gpu-1", &[("zone", "west")]),
            ("cpu-0", &[("zone", "east"), ("pool", "batch")]),
            ("cpu-1", &[]),
        ]);
        let member = |t: &str, sel: MemberSelector| MemberSpec { type_: t.into(), selector: sel };
        let exact = |n: &str| MemberSelector { exact_match: Some(ExactMatch { name: n.into() }), ..Default::default() };
        let regex =
            |p: &str| MemberSelector { regex_match: Some(RegexMatch { pattern: p.into() }), ..Default::default() };
        let labels = |s: serde_json::Value| MemberSelector {
            label_match: Some(serde_json::from_value(s).unwrap()),
            ..Default::default()
        };
        let hn = |n: &str, tier: i64, members: Vec<MemberSpec>, count: Option<i64>| {
            let mut h = HyperNode::new(n, HyperNodeSpec { tier, tier_name: None, members });
            h.status = count.map(|c| HyperNodeStatus { node_count: Some(c), ..Default::default() });
            h
        };
        let hns = vec![
            // An exact name that is no node counts nothing; gpu-0 twice counts once.
            hn(
                "exact",
                1,
                vec![member("Node", exact("gpu-0")), member("Node", exact("gone")), member("Node", regex("^gpu-0$"))],
                Some(2),
            ),
            hn("regex", 1, vec![member("Node", regex("gpu"))], None),
            hn("bad-regex", 1, vec![member("Node", regex("(")), member("Node", exact("cpu-1"))], Some(1)),
            hn("east", 1, vec![member("Node", labels(serde_json::json!({"matchLabels": {"zone": "east"}})))], None),
            hn(
                "not-batch",
                1,
                vec![member(
                    "Node",
                    labels(serde_json::json!({"matchExpressions": [
                {"key": "zone", "operator": "Exists"}, {"key": "pool", "operator": "NotIn", "values": ["batch"]}]})),
                )],
                None,
            ),
            hn("empty-selector", 1, vec![member("Node", labels(serde_json::json!({})))], None),
            // Tier 2 over tier 1 by name and by expression: the union of their nodes.
            hn("top", 2, vec![member("HyperNode", exact("regex")), member("HyperNode", regex("^east$"))], None),
            // A cycle ends.
            hn("loop-a", 2, vec![member("HyperNode", exact("loop-b")), member("Node", exact("cpu-1"))], None),
            hn("loop-b", 2, vec![member("HyperNode", exact("loop-a"))], None),
        ];
        let counts = node_counts(&hns, &cluster.view());
        let want: BTreeMap<String, i64> = [
            ("exact", 1),
            ("regex", 2),
            ("bad-regex", 1),
            ("east", 2),
            ("not-batch", 2),
            ("empty-selector", 0),
            ("top", 3),
            ("loop-a", 1),
            ("loop-b", 1),
        ]
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect();
        assert_eq!(counts, want);
        // Only the ones whose status differs are written.
        let updates = status_updates(&hns, &counts);
        let names: Vec<&str> = updates.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["east", "empty-selector", "exact", "loop-a", "loop-b", "not-batch", "regex", "top"]);
        assert_eq!(updates[2], ("exact".to_string(), 1));
    }

    #[test]
    fn suffixes_are_stable_and_collisions_move_on() {
        assert_eq!(suffix("volcano.sh/tor", "s0", 0), suffix("volcano.sh/tor", "s0", 0));
        assert_ne!(suffix("volcano.sh/tor", "s0", 0), suffix("volcano.sh/tor", "s0", 1));
        assert_ne!(suffix("volcano.sh/tor", "s0", 0), suffix("volcano.sh/tor", "s1", 0));
        // A name taken by anything else is skipped for the next attempt's.
        let cfg = label_cfg(GUIDE);
        let cluster = Cluster::new(&[("a", &[("volcano.sh/tor", "t")])]);
        let first = format!("hypernode-topologya2-tier1-{}", suffix("volcano.sh/tor", "t", 0));
        let d = discover(&cfg, &cluster.view(), &[]);
        assert_eq!(name(&d.hyper_nodes[0]), first);
        let squatter = HyperNode::new(&first, HyperNodeSpec::default());
        let d = discover(&cfg, &cluster.view(), &[squatter]);
        assert_eq!(name(&d.hyper_nodes[0]), format!("hypernode-topologya2-tier1-{}", suffix("volcano.sh/tor", "t", 1)));
    }
}

#[cfg(test)]
mod example_tests {
    use super::*;

    /// examples/hypernode-discovery.yaml and the ConfigMap of docs/hypernode-discovery.md
    /// are valid configurations.
    #[test]
    fn the_example_and_the_docs_configuration_load() {
        let docs = include_str!("../../docs/hypernode-discovery.md");
        let block = docs.split("```yaml\n").nth(1).and_then(|b| b.split("```").next()).expect("a yaml block");
        for (what, text) in [
            ("examples/hypernode-discovery.yaml", include_str!("../../examples/hypernode-discovery.yaml")),
            ("docs", block),
        ] {
            let cm: serde_json::Value = serde_yaml_ng::from_str(text).expect(what);
            assert_eq!(cm["metadata"]["name"], CONFIG_MAP_NAME, "{what}");
            let cfg = parse_config(cm["data"][CONFIG_KEY].as_str().expect(what)).expect(what);
            assert!(cfg.warnings.is_empty(), "{what}: {:?}", cfg.warnings);
            let label = cfg.label.expect(what);
            assert_eq!(label.interval, Duration::from_secs(600), "{what}");
            assert!(!label.types.is_empty(), "{what}");
        }
    }
}
