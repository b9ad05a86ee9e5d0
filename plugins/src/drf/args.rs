//! Arguments of the `drf` plugin.

use serde::Deserialize;

/// `drf` takes no arguments; any key is rejected so a misspelt or misplaced argument is
/// reported at configuration load. (`enableHierarchy` is a plugin-entry switch, not an
/// argument: the factory reads it from the entry and builds [`super::Drf::hierarchical`].)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}
