//! Loading a scheduler configuration into a validated [`Profile`]: every action and plugin
//! name resolved, every argument typed, conflicts checked — all before the first cycle.

use std::sync::Arc;

use thiserror::Error;
use volcano_api::conf::{ConfParseError, PluginOption, SchedulerConfiguration};

use crate::action::Action;
use crate::plugin::Hooks;
use crate::registry::{PluginBuilder, Registries};

/// Every plugin name Volcano's scheduler registers.
pub const VOLCANO_PLUGINS: &[&str] = &[
    "priority",
    "gang",
    "conformance",
    "drf",
    "proportion",
    "capacity",
    "predicates",
    "nodeorder",
    "binpack",
    "overcommit",
    "sla",
    "tdm",
    "task-topology",
    "numa-aware",
    "deviceshare",
    "extender",
    "pdb",
    "cdp",
    "rescheduling",
    "usage",
    "resourcequota",
    "nodegroup",
    "network-topology-aware",
    "resource-strategy-fit",
];

/// Every action name Volcano's scheduler registers.
pub const VOLCANO_ACTIONS: &[&str] =
    &["enqueue", "allocate", "backfill", "preempt", "reclaim", "shuffle", "gangpreempt", "gangreclaim"];

/// A configuration that cannot be used.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// The YAML does not parse.
    #[error(transparent)]
    Parse(#[from] ConfParseError),
    /// `actions` is empty.
    #[error("invalid scheduler configuration: field actions: expected at least one action")]
    NoActions,
    /// An empty entry in `actions` (`"enqueue, , allocate"`).
    #[error("invalid scheduler configuration: field actions: entry {position} of {actions:?} is empty (expected an action name between commas)")]
    EmptyAction {
        /// 1-based position of the empty entry.
        position: usize,
        /// The whole `actions` value.
        actions: String,
    },
    /// An action name nobody knows.
    #[error("invalid scheduler configuration: field actions: unknown action {name:?} (known: {known})")]
    UnknownAction {
        /// The name.
        name: String,
        /// Known names.
        known: String,
    },
    /// A Volcano action volcano-rs does not have yet.
    #[error("invalid scheduler configuration: field actions: action {name:?} is a Volcano action that volcano-rs does not implement yet")]
    ActionNotImplemented {
        /// The name.
        name: String,
    },
    /// A plugin name nobody knows.
    #[error("invalid scheduler configuration: tiers[{tier}].plugins[{index}].name: unknown plugin {name:?} (known: {known})")]
    UnknownPlugin {
        /// Tier index.
        tier: usize,
        /// Plugin index in the tier.
        index: usize,
        /// The name.
        name: String,
        /// Known names.
        known: String,
    },
    /// A Volcano plugin volcano-rs does not have yet.
    #[error("invalid scheduler configuration: tiers[{tier}].plugins[{index}].name: plugin {name:?} is a Volcano plugin that volcano-rs does not implement yet")]
    PluginNotImplemented {
        /// Tier index.
        tier: usize,
        /// Plugin index.
        index: usize,
        /// The name.
        name: String,
    },
    /// A plugin's arguments do not fit its typed `Args`.
    #[error("invalid scheduler configuration: tiers[{tier}].plugins[{index}] ({name}).arguments: {message}")]
    PluginArgs {
        /// Tier index.
        tier: usize,
        /// Plugin index.
        index: usize,
        /// Plugin name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// An action's arguments do not fit.
    #[error("invalid scheduler configuration: configurations[{index}] ({name}).arguments: {message}")]
    ActionArgs {
        /// Index in `configurations`.
        index: usize,
        /// Action name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// `configurations` names an action that is not configured or not known.
    #[error("invalid scheduler configuration: configurations[{index}].name: {name:?} is not an action of this configuration")]
    UnknownConfiguration {
        /// Index.
        index: usize,
        /// Name.
        name: String,
    },
    /// Two entries that cannot be used together.
    #[error("invalid scheduler configuration: {0}")]
    Conflict(String),
}

impl ProfileError {
    /// A bounded label for metrics and events.
    pub fn category(&self) -> &'static str {
        match self {
            ProfileError::Parse(_) => "parse",
            ProfileError::NoActions | ProfileError::EmptyAction { .. } => "no_actions",
            ProfileError::UnknownAction { .. } | ProfileError::UnknownConfiguration { .. } => "unknown_action",
            ProfileError::ActionNotImplemented { .. } | ProfileError::PluginNotImplemented { .. } => "not_implemented",
            ProfileError::UnknownPlugin { .. } => "unknown_plugin",
            ProfileError::PluginArgs { .. } | ProfileError::ActionArgs { .. } => "bad_arguments",
            ProfileError::Conflict(_) => "conflict",
        }
    }
}

/// One plugin of a tier, ready to build.
#[derive(Clone)]
pub struct PluginEntry {
    /// Plugin name.
    pub name: String,
    /// Extension points enabled by the entry's switches.
    pub enabled: Hooks,
    /// `enableHierarchy`.
    pub hierarchy: bool,
    /// Builds the plugin each session.
    pub builder: Arc<dyn PluginBuilder>,
}

impl std::fmt::Debug for PluginEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEntry").field("name", &self.name).field("enabled", &self.enabled).finish()
    }
}

/// A validated configuration: actions in order and plugin tiers.
pub struct Profile {
    /// Actions in configured order.
    pub actions: Vec<Box<dyn Action>>,
    /// Plugin tiers in order.
    pub tiers: Vec<Vec<PluginEntry>>,
    /// The configuration it was loaded from.
    pub conf: SchedulerConfiguration,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("actions", &self.actions.iter().map(|a| a.name()).collect::<Vec<_>>())
            .field("tiers", &self.tiers)
            .finish()
    }
}

impl Profile {
    /// Fresh plugin instances for one session, tier by tier, each with the extension points
    /// its entry enables (what [`crate::Session::open`] takes).
    pub fn instantiate(&self) -> Vec<Vec<(Box<dyn crate::Plugin>, Hooks)>> {
        self.tiers.iter().map(|tier| tier.iter().map(|e| (e.builder.build(), e.enabled)).collect()).collect()
    }
}

fn flag(v: Option<bool>) -> bool {
    v.unwrap_or(true)
}

/// The extension points a plugin entry enables (a missing switch is on).
pub fn enabled_hooks(p: &PluginOption) -> Hooks {
    let mut h = Hooks::JOB_VALID | Hooks::EVENT_HANDLER | Hooks::VICTIM_QUEUE_ORDER | Hooks::EVICTABLE;
    let pairs = [
        (p.enabled_job_order, Hooks::JOB_ORDER),
        (p.enabled_queue_order, Hooks::QUEUE_ORDER),
        (p.enabled_task_order, Hooks::TASK_ORDER),
        (p.enabled_predicate, Hooks::PRE_PREDICATE | Hooks::PREDICATE),
        (p.enabled_node_order, Hooks::NODE_ORDER | Hooks::BATCH_NODE_ORDER | Hooks::DEVICE_CHOICE),
        (p.enabled_preemptable, Hooks::PREEMPTABLE),
        (p.enabled_reclaimable, Hooks::RECLAIMABLE),
        (p.enabled_overused, Hooks::OVERUSED),
        (p.enabled_allocatable, Hooks::ALLOCATABLE),
        (p.enabled_preemptive, Hooks::PREEMPTIVE),
        (p.enabled_job_ready, Hooks::JOB_READY),
        (p.enabled_job_pipelined, Hooks::JOB_PIPELINED),
        (p.enabled_job_enqueued, Hooks::JOB_ENQUEUEABLE | Hooks::JOB_ENQUEUED),
        (p.enabled_job_starving, Hooks::JOB_STARVING),
        (p.enabled_hyper_node_order, Hooks::HYPER_NODE_ORDER),
        (p.enabled_hyper_node_gradient, Hooks::HYPER_NODE_GRADIENT),
    ];
    for (v, hook) in pairs {
        if flag(v) {
            h |= hook;
        }
    }
    h
}

impl Profile {
    /// Parses and loads a configuration file's text.
    pub fn from_yaml(text: &str, registries: &Registries) -> Result<Profile, ProfileError> {
        Self::load(SchedulerConfiguration::from_yaml(text)?, registries)
    }

    /// The built-in default configuration.
    pub fn builtin_default(registries: &Registries) -> Result<Profile, ProfileError> {
        Self::load(SchedulerConfiguration::builtin_default(), registries)
    }

    /// Resolves and validates a configuration.
    pub fn load(conf: SchedulerConfiguration, registries: &Registries) -> Result<Profile, ProfileError> {
        let names = conf.action_names();
        if names.is_empty() {
            return Err(ProfileError::NoActions);
        }
        if let Some(i) = names.iter().position(String::is_empty) {
            return Err(ProfileError::EmptyAction { position: i + 1, actions: conf.actions.clone() });
        }
        for (index, c) in conf.configurations.iter().enumerate() {
            if !names.contains(&c.name) && !VOLCANO_ACTIONS.contains(&c.name.as_str()) {
                return Err(ProfileError::UnknownConfiguration { index, name: c.name.clone() });
            }
        }
        let gang = names.iter().find(|n| matches!(n.as_str(), "gangpreempt" | "gangreclaim"));
        let legacy = names.iter().find(|n| matches!(n.as_str(), "preempt" | "reclaim"));
        if let (Some(g), Some(l)) = (gang, legacy) {
            return Err(ProfileError::Conflict(format!(
                "field actions: action {g:?} cannot be configured together with action {l:?} (gang-aware eviction replaces preempt and reclaim)"
            )));
        }
        let mut actions = Vec::new();
        for name in &names {
            let Some(factory) = registries.actions.get(name) else {
                if VOLCANO_ACTIONS.contains(&name.as_str()) {
                    return Err(ProfileError::ActionNotImplemented { name: name.clone() });
                }
                return Err(ProfileError::UnknownAction {
                    name: name.clone(),
                    known: registries.actions.names().collect::<Vec<_>>().join(", "),
                });
            };
            let (index, args) = conf
                .configurations
                .iter()
                .enumerate()
                .find(|(_, c)| &c.name == name)
                .map(|(i, c)| (i, c.arguments.clone()))
                .unwrap_or_default();
            let action =
                factory(&args).map_err(|e| ProfileError::ActionArgs { index, name: name.clone(), message: e.0 })?;
            actions.push(action);
        }

        let mut tiers = Vec::new();
        for (t, tier) in conf.tiers.iter().enumerate() {
            let mut entries = Vec::new();
            for (i, p) in tier.plugins.iter().enumerate() {
                let Some(factory) = registries.plugins.get(&p.name) else {
                    if VOLCANO_PLUGINS.contains(&p.name.as_str()) {
                        return Err(ProfileError::PluginNotImplemented { tier: t, index: i, name: p.name.clone() });
                    }
                    return Err(ProfileError::UnknownPlugin {
                        tier: t,
                        index: i,
                        name: p.name.clone(),
                        known: registries.plugins.names().collect::<Vec<_>>().join(", "),
                    });
                };
                let builder = factory(p).map_err(|e| ProfileError::PluginArgs {
                    tier: t,
                    index: i,
                    name: p.name.clone(),
                    message: e.0,
                })?;
                entries.push(PluginEntry {
                    name: p.name.clone(),
                    enabled: enabled_hooks(p),
                    hierarchy: p.enabled_hierarchy == Some(true),
                    builder,
                });
            }
            tiers.push(entries);
        }

        let all: Vec<&PluginEntry> = tiers.iter().flatten().collect();
        let has = |n: &str| all.iter().any(|e| e.name == n);
        if has("proportion") && all.iter().any(|e| e.name == "drf" && e.hierarchy) {
            return Err(ProfileError::Conflict(
                "plugin drf with enableHierarchy: true cannot be used together with plugin proportion".into(),
            ));
        }
        if has("proportion") && has("capacity") {
            return Err(ProfileError::Conflict(
                "plugins proportion and capacity cannot be used together: choose one queue policy".into(),
            ));
        }
        for (i, a) in all.iter().enumerate() {
            if all[..i].iter().any(|b| b.name == a.name) {
                return Err(ProfileError::Conflict(format!("plugin {:?} is configured twice", a.name)));
            }
        }
        Ok(Profile { actions, tiers, conf })
    }

    /// Whether an action with this name is configured.
    pub fn has_action(&self, name: &str) -> bool {
        self.actions.iter().any(|a| a.name() == name)
    }
}
