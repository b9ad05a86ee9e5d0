//! Arguments of the `deviceshare` plugin, with Volcano's keys and defaults.

use serde::Deserialize;
use volcano_api::conf::{args, Arguments};
use volcano_framework::{parse_args, ArgsError};

/// How cards are scored (`deviceshare.SchedulePolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Unset: no card score.
    None,
    /// `binpack`: fuller cards first.
    Binpack,
    /// `spread`: idle cards first.
    Spread,
}

/// The `deviceshare` arguments, as written in the scheduler configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    /// `deviceshare.GPUSharingEnable` (false): filter `volcano.sh/gpu-memory` pods.
    pub gpu_sharing: bool,
    /// `deviceshare.GPUNumberEnable` (false): filter `volcano.sh/gpu-number` pods.
    pub gpu_number: bool,
    /// `deviceshare.VGPUEnable` (false): filter HAMi vGPU pods.
    pub vgpu: bool,
    /// `deviceshare.SchedulePolicy` (""): `binpack` or `spread`.
    pub policy: Policy,
    /// `deviceshare.ScheduleWeight` (0): the node score's weight; 0 scores nothing.
    pub weight: i64,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(rename = "deviceshare.GPUSharingEnable", default, deserialize_with = "args::bool")]
    gpu_sharing: Option<bool>,
    #[serde(rename = "deviceshare.GPUNumberEnable", default, deserialize_with = "args::bool")]
    gpu_number: Option<bool>,
    #[serde(rename = "deviceshare.VGPUEnable", default, deserialize_with = "args::bool")]
    vgpu: Option<bool>,
    #[serde(rename = "deviceshare.NodeLockEnable", default, deserialize_with = "args::bool")]
    node_lock: Option<bool>,
    #[serde(rename = "deviceshare.SchedulePolicy", default, deserialize_with = "args::string")]
    policy: Option<String>,
    #[serde(rename = "deviceshare.ScheduleWeight", default, deserialize_with = "args::int")]
    weight: Option<i64>,
    #[serde(rename = "deviceshare.AscendMindClusterVNPUEnable", default, deserialize_with = "args::bool")]
    ascend_mind_cluster: Option<bool>,
    #[serde(rename = "deviceshare.AscendHAMiVNPUEnable", default, deserialize_with = "args::bool")]
    ascend_hami: Option<bool>,
    #[serde(rename = "deviceshare.KnownGeometriesCMName", default, deserialize_with = "args::string")]
    geometries_name: Option<String>,
    #[serde(rename = "deviceshare.KnownGeometriesCMNamespace", default, deserialize_with = "args::string")]
    geometries_namespace: Option<String>,
}

impl Args {
    /// Parses and checks the arguments: GPU sharing and whole cards exclude each other, and
    /// GPU sharing excludes vGPU (as Volcano); Ascend NPUs are refused (not supported).
    pub fn parse(arguments: &Arguments) -> Result<Args, ArgsError> {
        let raw: Raw = parse_args(arguments)?;
        let gpu_sharing = raw.gpu_sharing.unwrap_or(false);
        let gpu_number = raw.gpu_number.unwrap_or(false);
        let vgpu = raw.vgpu.unwrap_or(false);
        if gpu_sharing && gpu_number {
            return Err(ArgsError(
                "deviceshare.GPUSharingEnable and deviceshare.GPUNumberEnable cannot both be true".into(),
            ));
        }
        if gpu_sharing && vgpu {
            return Err(ArgsError(
                "deviceshare.GPUSharingEnable and deviceshare.VGPUEnable cannot both be true".into(),
            ));
        }
        if raw.ascend_mind_cluster == Some(true) || raw.ascend_hami == Some(true) {
            return Err(ArgsError(
                "deviceshare: Ascend NPUs (AscendMindClusterVNPUEnable, AscendHAMiVNPUEnable) are not supported by volcano-rs"
                    .into(),
            ));
        }
        let _ = (raw.node_lock, raw.geometries_name, raw.geometries_namespace);
        let policy = match raw.policy.as_deref().map(str::trim) {
            None | Some("") => Policy::None,
            Some("binpack") => Policy::Binpack,
            Some("spread") => Policy::Spread,
            Some(other) => {
                return Err(ArgsError(format!(
                    "argument \"deviceshare.SchedulePolicy\": {other:?} is not \"binpack\" or \"spread\""
                )))
            }
        };
        let weight = raw.weight.unwrap_or(0);
        if weight < 0 {
            return Err(ArgsError(format!("argument \"deviceshare.ScheduleWeight\": {weight} is negative")));
        }
        Ok(Args { gpu_sharing, gpu_number, vgpu, policy, weight })
    }
}
