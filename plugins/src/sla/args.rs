//! Arguments of the `sla` plugin, with Volcano's key.

use serde::Deserialize;
use volcano_api::conf::args;
use volcano_framework::snapshot::parse_duration_ms;
use volcano_framework::ArgsError;

/// The argument key of the global waiting time.
pub const WAITING_TIME_KEY: &str = "sla-waiting-time";

/// The `sla` arguments, as written in the scheduler configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `sla-waiting-time` (none): the waiting time of jobs whose PodGroup has no
    /// `sla-waiting-time` annotation of its own, as a Go duration (`1h30m`, `90s`; units
    /// `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`). Unset: only annotated jobs have a waiting time.
    #[serde(rename = "sla-waiting-time", default, deserialize_with = "args::string")]
    pub waiting_time: Option<String>,
}

impl Args {
    /// The global waiting time in milliseconds, if set; a value that is not a positive Go
    /// duration is an error naming the key.
    pub fn waiting_time_ms(&self) -> Result<Option<i64>, ArgsError> {
        let Some(s) = &self.waiting_time else { return Ok(None) };
        match parse_duration_ms(s) {
            Some(ms) if ms > 0 => Ok(Some(ms)),
            Some(_) => Err(ArgsError(format!("argument {WAITING_TIME_KEY:?}: {s:?} is not a positive duration"))),
            None => Err(ArgsError(format!(
                "argument {WAITING_TIME_KEY:?}: {s:?} is not a Go duration (for example \"1h30m\", \"90s\")"
            ))),
        }
    }
}
