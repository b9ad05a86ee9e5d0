//! The `proportion` plugin (being written: registers no extension point yet).

use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::{ArgsError, Hooks, Plugin, PluginBuilder};

/// Configuration name.
pub const NAME: &str = "proportion";

struct Unfinished;

impl Plugin for Unfinished {
    fn name(&self) -> &'static str {
        NAME
    }
    fn hooks(&self) -> Hooks {
        Hooks::empty()
    }
}

/// Checks the arguments and returns the builder.
pub fn factory(_opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    Ok(Arc::new(|| Box::new(Unfinished) as Box<dyn Plugin>))
}
