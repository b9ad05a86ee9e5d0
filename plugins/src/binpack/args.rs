//! Arguments of the `binpack` plugin, with Volcano's keys and defaults.

use std::collections::BTreeMap;

use serde::Deserialize;
use volcano_api::conf::{args, Arguments};
use volcano_framework::ArgsError;

use crate::predicates::unknown_key;
use volcano_framework::parse_args;

/// Prefix of the per-resource weight keys (`binpack.resources.<name>`).
pub const RESOURCE_PREFIX: &str = "binpack.resources.";

/// The fixed keys of [`Args`].
pub const KEYS: &[&str] = &["binpack.weight", "binpack.cpu", "binpack.memory", "binpack.resources"];

/// The `binpack` arguments, as written in the scheduler configuration.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Args {
    /// `binpack.weight` (1): multiplies the score; 0 turns the plugin off. A negative value
    /// is kept (it spreads instead of packing), as in Volcano.
    #[serde(rename = "binpack.weight", default, deserialize_with = "args::int")]
    pub weight: Option<i64>,
    /// `binpack.cpu` (1): weight of cpu; negative → 1.
    #[serde(rename = "binpack.cpu", default, deserialize_with = "args::int")]
    pub cpu: Option<i64>,
    /// `binpack.memory` (1): weight of memory; negative → 1.
    #[serde(rename = "binpack.memory", default, deserialize_with = "args::int")]
    pub memory: Option<i64>,
    /// `binpack.resources` (""): comma-separated extra resources to pack
    /// (`nvidia.com/gpu, example.com/foo`).
    #[serde(rename = "binpack.resources", default, deserialize_with = "args::string")]
    pub resources: Option<String>,
    /// `binpack.resources.<name>` (1): weight of a listed resource; negative → 1. Checked
    /// by [`Args::validate`]: integers only, and no other key.
    #[serde(flatten)]
    pub resource_weights: BTreeMap<String, serde_json::Value>,
}

/// The weights, defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Weights {
    /// `binpack.weight`.
    pub weight: i64,
    /// `binpack.cpu`.
    pub cpu: i64,
    /// `binpack.memory`.
    pub memory: i64,
    /// Listed resources and their weights, in the order of `binpack.resources`
    /// (`cpu`/`memory` entries are overridden by `binpack.cpu`/`binpack.memory`).
    pub resources: Vec<(String, i64)>,
}

impl Default for Weights {
    /// Volcano's defaults: everything 1, no extra resource.
    fn default() -> Self {
        Weights { weight: 1, cpu: 1, memory: 1, resources: Vec::new() }
    }
}

impl Weights {
    /// The weight of a resource the task requests, if it is packed at all.
    pub fn of(&self, resource: &str) -> Option<i64> {
        match resource {
            "cpu" => Some(self.cpu),
            "memory" => Some(self.memory),
            r => self.resources.iter().find(|(n, _)| n == r).map(|(_, w)| *w),
        }
    }
}

fn non_negative(w: i64) -> i64 {
    if w < 0 {
        1
    } else {
        w
    }
}

impl Args {
    /// Parses and validates raw arguments.
    pub fn parse(arguments: &Arguments) -> Result<Args, ArgsError> {
        let a: Args = parse_args(arguments)?;
        a.validate()?;
        Ok(a)
    }

    /// Checks the keys caught by the flattened map: `binpack.resources.<name>` with an
    /// integer value, nothing else.
    pub fn validate(&self) -> Result<(), ArgsError> {
        for (key, value) in &self.resource_weights {
            if key.strip_prefix(RESOURCE_PREFIX).is_none_or(str::is_empty) {
                return Err(unknown_key(key, KEYS, "`binpack.resources.<name>`"));
            }
            if value.as_i64().is_none() {
                return Err(ArgsError(format!("argument {key:?}: expected an integer, got {value}")));
            }
        }
        Ok(())
    }

    /// The weights, Volcano's defaults applied. A `binpack.resources.<name>` key for a
    /// resource missing from `binpack.resources` is ignored, as in Volcano.
    pub fn resolve(&self) -> Weights {
        let mut w = Weights {
            weight: self.weight.unwrap_or(1),
            cpu: non_negative(self.cpu.unwrap_or(1)),
            memory: non_negative(self.memory.unwrap_or(1)),
            resources: Vec::new(),
        };
        for name in self.resources.as_deref().unwrap_or("").split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "cpu" || name == "memory" || w.resources.iter().any(|(n, _)| n == name) {
                continue;
            }
            let weight = self
                .resource_weights
                .get(&format!("{RESOURCE_PREFIX}{name}"))
                .and_then(serde_json::Value::as_i64)
                .map_or(1, non_negative);
            w.resources.push((name.to_string(), weight));
        }
        w
    }

    /// `binpack.resources.<name>` keys whose resource is not listed in `binpack.resources`.
    pub fn unlisted_weights(&self) -> impl Iterator<Item = &str> + '_ {
        let w = self.resolve();
        self.resource_weights
            .keys()
            .filter_map(|k| k.strip_prefix(RESOURCE_PREFIX))
            .filter(move |name| !w.resources.iter().any(|(n, _)| n == name))
    }
}
