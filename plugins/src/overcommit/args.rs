//! Arguments of the `overcommit` plugin.

use serde::Deserialize;
use volcano_api::conf::args;

/// The default `overcommit-factor`.
pub const DEFAULT_OVERCOMMIT_FACTOR: f64 = 1.2;

/// Arguments of `overcommit`, with Volcano's keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `overcommit-factor`: how far admission may go beyond the cluster's allocatable
    /// resources (admitted jobs' pods may wait as Pending). Default 1.2; a value below 1
    /// falls back to 1.2 (with a warning), as in Volcano.
    #[serde(rename = "overcommit-factor", default, deserialize_with = "args::float")]
    pub overcommit_factor: Option<f64>,
}

impl Args {
    /// The factor in effect: the configured value, or 1.2 when unset or below 1.
    pub fn factor(&self) -> f64 {
        match self.overcommit_factor {
            None => DEFAULT_OVERCOMMIT_FACTOR,
            Some(f) if f < 1.0 || f.is_nan() => {
                tracing::warn!(
                    factor = f,
                    "overcommit-factor cannot be less than 1: using the default {DEFAULT_OVERCOMMIT_FACTOR}"
                );
                DEFAULT_OVERCOMMIT_FACTOR
            }
            Some(f) => f,
        }
    }
}
