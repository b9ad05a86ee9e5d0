//! Arguments of the `proportion` plugin.

use serde::Deserialize;

/// `proportion` takes no arguments (Volcano's plugin reads none); any key is rejected so a
/// misspelt or misplaced argument is reported at configuration load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}
