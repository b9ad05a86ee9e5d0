//! What the API server and its admission plugins do to a pod before the scheduler sees it:
//! the pod defaults and the Priority admission plugin. [`normalise`](crate::normalise) applies
//! it to the input's pods and the simulated job controller to the pods it creates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::error::{InputError, Origin};
use crate::manifest::ObjectKind;

/// The PriorityClasses the Priority admission plugin knows: name → (value, preemption
/// policy), and the global default (name, value), if any.
#[derive(Clone, Debug, Default)]
pub struct PodAdmission {
    /// Name → (value, preemption policy).
    pub classes: BTreeMap<String, (i32, Option<String>)>,
    /// The global default class, if any.
    pub global_default: Option<(String, i32)>,
}

impl PodAdmission {
    /// Applies the pod defaults and the Priority admission plugin to `pod` (`key`:
    /// `namespace/name`; `origin`: where it was written, for errors).
    pub fn admit(&self, pod: &mut Pod, key: &str, origin: Option<&Origin>) -> Result<(), InputError> {
        pod_defaults(pod, key, origin, &self.classes, self.global_default.as_ref())
    }
}

/// API-server defaults of a pod and the Priority admission plugin.
pub(crate) fn pod_defaults(
    pod: &mut Pod,
    key: &str,
    origin: Option<&Origin>,
    classes: &BTreeMap<String, (i32, Option<String>)>,
    global_default: Option<&(String, i32)>,
) -> Result<(), InputError> {
    let status = pod.status.get_or_insert_with(PodStatus::default);
    if status.phase.as_deref().is_none_or(str::is_empty) {
        status.phase = Some("Pending".into());
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        spec.scheduler_name = Some("default-scheduler".into());
    }
    match spec.priority_class_name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => {
            let Some((value, policy)) = classes.get(name) else {
                return Err(InputError::Field {
                    origin: origin.cloned().map(Box::new),
                    kind: "Pod",
                    object: key.to_string(),
                    field: "spec.priorityClassName".into(),
                    message: format!(
                        "no PriorityClass named {name:?}: the Priority admission plugin rejects the pod \
                         (known: {})",
                        classes.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            };
            spec.priority.get_or_insert(*value);
            if spec.preemption_policy.is_none() {
                spec.preemption_policy = policy.clone();
            }
        }
        None => {
            if let Some((name, value)) = global_default {
                spec.priority_class_name = Some(name.clone());
                spec.priority.get_or_insert(*value);
                if spec.preemption_policy.is_none() {
                    spec.preemption_policy = classes.get(name).and_then(|c| c.1.clone());
                }
            } else {
                spec.priority.get_or_insert(0);
            }
        }
    }
    Ok(())
}

/// A deterministic UID from the object's kind and key: FNV-1a over the bytes, each half
/// finished with MurmurHash3's `fmix64` so that similar keys get unlike UIDs, printed as an
/// RFC 9562 version-8 UUID.
pub fn deterministic_uid(kind: ObjectKind, key: &str) -> String {
    fn fmix64(mut k: u64) -> u64 {
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in kind.as_str().bytes().chain([b'/']).chain(key.bytes()) {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    let hi = fmix64((h >> 64) as u64);
    let lo = fmix64(h as u64 ^ hi);
    // Version 8 (custom) and the RFC variant bits.
    let hi = (hi & !0xf000) | 0x8000;
    let lo = (lo & !(0b11 << 62)) | (0b10 << 62);
    let hex = format!("{hi:016x}{lo:016x}");
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}
