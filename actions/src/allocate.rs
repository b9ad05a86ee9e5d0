//! The `allocate` action (being written: does nothing yet).

use volcano_api::conf::Arguments;
use volcano_framework::{Action, ArgsError, Session};

/// Configuration name.
pub const NAME: &str = "allocate";

struct Unfinished;

impl Action for Unfinished {
    fn name(&self) -> &'static str {
        NAME
    }
    fn execute(&self, _ssn: &mut Session<'_>) {}
}

/// Checks the arguments and builds the action.
pub fn factory(_args: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    Ok(Box::new(Unfinished))
}
