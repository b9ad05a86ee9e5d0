//! Explicit registries: name → factory for plugins and actions. No global state: the
//! binaries build `Registries { plugins::in_tree(), actions::in_tree() }` and may merge
//! out-of-tree additions; a duplicate name is an error.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use thiserror::Error;
use volcano_api::conf::{Arguments, PluginOption};

use crate::action::Action;
use crate::plugin::Plugin;

/// Arguments that do not fit a plugin's or action's typed `Args`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct ArgsError(pub String);

/// Deserialises raw arguments into a typed `Args` struct (Volcano's dotted keys), the one
/// parser of every plugin's and action's arguments. An unknown key is named by serde (with
/// the known ones); a value of the wrong type is named by its key (`argument
/// "binpack.weight": invalid type: string "ten", expected i64`), even under a flattened map.
pub fn parse_args<T: DeserializeOwned>(args: &Arguments) -> Result<T, ArgsError> {
    fn parse<T: DeserializeOwned>(args: &Arguments) -> Result<T, String> {
        let map: serde_json::Map<String, serde_json::Value> =
            args.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| e.to_string())
    }
    match parse::<T>(args) {
        Ok(v) => Ok(v),
        Err(whole) => {
            // Find the key at fault: the first one that fails on its own.
            for (k, v) in args {
                let single: Arguments = [(k.clone(), v.clone())].into_iter().collect();
                if let Err(one) = parse::<T>(&single) {
                    if one.starts_with("unknown field") {
                        return Err(ArgsError(one));
                    }
                    return Err(ArgsError(format!("argument {k:?}: {one}")));
                }
            }
            Err(ArgsError(whole))
        }
    }
}

/// Builds a fresh plugin value for each session, holding the typed arguments.
pub trait PluginBuilder: Send + Sync {
    /// A new plugin for one session.
    fn build(&self) -> Box<dyn Plugin>;
}

impl<F: Fn() -> Box<dyn Plugin> + Send + Sync> PluginBuilder for F {
    fn build(&self) -> Box<dyn Plugin> {
        self()
    }
}

/// Checks a plugin entry's arguments and returns its builder.
pub type PluginFactory = fn(&PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError>;

/// Checks an action's arguments (from `configurations`) and builds it.
pub type ActionFactory = fn(&Arguments) -> Result<Box<dyn Action>, ArgsError>;

/// A name registered twice.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{kind} {name:?} is registered twice")]
pub struct DuplicateName {
    /// `plugin` or `action`.
    pub kind: &'static str,
    /// The name.
    pub name: String,
}

/// Plugin name → factory.
#[derive(Default, Clone)]
pub struct PluginRegistry {
    entries: BTreeMap<&'static str, PluginFactory>,
}

impl fmt::Debug for PluginRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.keys()).finish()
    }
}

impl PluginRegistry {
    /// Registers a plugin; a duplicate name is an error.
    pub fn register(&mut self, name: &'static str, factory: PluginFactory) -> Result<(), DuplicateName> {
        if self.entries.insert(name, factory).is_some() {
            return Err(DuplicateName { kind: "plugin", name: name.to_string() });
        }
        Ok(())
    }

    /// Adds every entry of `other`; a name in both is an error.
    pub fn merge(&mut self, other: PluginRegistry) -> Result<(), DuplicateName> {
        for (name, f) in other.entries {
            self.register(name, f)?;
        }
        Ok(())
    }

    /// The factory of a name.
    pub fn get(&self, name: &str) -> Option<PluginFactory> {
        self.entries.get(name).copied()
    }

    /// Registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.keys().copied()
    }
}

/// Action name → factory.
#[derive(Default, Clone)]
pub struct ActionRegistry {
    entries: BTreeMap<&'static str, ActionFactory>,
}

impl fmt::Debug for ActionRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.keys()).finish()
    }
}

impl ActionRegistry {
    /// Registers an action; a duplicate name is an error.
    pub fn register(&mut self, name: &'static str, factory: ActionFactory) -> Result<(), DuplicateName> {
        if self.entries.insert(name, factory).is_some() {
            return Err(DuplicateName { kind: "action", name: name.to_string() });
        }
        Ok(())
    }

    /// Adds every entry of `other`; a name in both is an error.
    pub fn merge(&mut self, other: ActionRegistry) -> Result<(), DuplicateName> {
        for (name, f) in other.entries {
            self.register(name, f)?;
        }
        Ok(())
    }

    /// The factory of a name.
    pub fn get(&self, name: &str) -> Option<ActionFactory> {
        self.entries.get(name).copied()
    }

    /// Registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.keys().copied()
    }
}

/// The plugin and action registries a profile is resolved against.
#[derive(Default, Clone, Debug)]
pub struct Registries {
    /// Plugins.
    pub plugins: PluginRegistry,
    /// Actions.
    pub actions: ActionRegistry,
}
