//! `bus.volcano.sh/v1alpha1`: the [`Command`] object (what `vcctl job suspend` and friends
//! create) and the vocabulary the job and queue controllers share: [`Action`]s and
//! [`Event`]s.
//!
//! Spellings follow Volcano's `staging/src/volcano.sh/apis/pkg/apis/bus/v1alpha1`.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::NamespaceResourceScope;
use serde::{Deserialize, Serialize};

use crate::open_enum::open_enum;

/// The API group of [`Command`].
pub const GROUP: &str = "bus.volcano.sh";
/// The API version of [`Command`].
pub const VERSION: &str = "v1alpha1";

open_enum! {
    /// What a controller does to a job or queue: the `action` of a [`Command`] and of a
    /// lifecycle policy. Volcano's schema accepts any string here.
    pub enum Action {
        /// Kill every pod and keep the job aborted until resumed.
        AbortJob = "AbortJob",
        /// Kill every pod and start the job again (counts a retry).
        RestartJob = "RestartJob",
        /// Kill and recreate the pods of the event's task.
        RestartTask = "RestartTask",
        /// Kill and recreate the event's pod.
        RestartPod = "RestartPod",
        /// Kill and recreate the pods of the event's partition.
        RestartPartition = "RestartPartition",
        /// Kill every pod; the job cannot be resumed.
        TerminateJob = "TerminateJob",
        /// Kill the unfinished pods and complete the job.
        CompleteJob = "CompleteJob",
        /// Resume an aborted job.
        ResumeJob = "ResumeJob",
        /// Internal: sync the job with its pods.
        SyncJob = "SyncJob",
        /// Internal: sync the job's Inqueue status.
        EnqueueJob = "EnqueueJob",
        /// Internal: sync a queue's status.
        SyncQueue = "SyncQueue",
        /// Open a queue.
        OpenQueue = "OpenQueue",
        /// Close a queue.
        CloseQueue = "CloseQueue",
    }
}

impl Action {
    /// The actions a user may put in a job's lifecycle policies (Volcano's webhook
    /// `policyActionMap`); the others are internal or for queues.
    pub const POLICY: [Action; 8] = [
        Action::AbortJob,
        Action::RestartJob,
        Action::RestartTask,
        Action::RestartPod,
        Action::RestartPartition,
        Action::TerminateJob,
        Action::CompleteJob,
        Action::ResumeJob,
    ];
}

open_enum! {
    /// What happened to a job's pods or the job: the `event`/`events` of a lifecycle policy.
    pub enum Event {
        /// Any event (`*`).
        Any = "*",
        /// A pod is Pending (matches a policy only with a `timeout`).
        PodPending = "PodPending",
        /// Internal: a pod became Running.
        PodRunning = "PodRunning",
        /// A pod failed.
        PodFailed = "PodFailed",
        /// A pod was deleted.
        PodEvicted = "PodEvicted",
        /// The PodGroup became Unknown (part of the gang runs, the rest cannot be scheduled).
        Unknown = "Unknown",
        /// Every replica of a task succeeded.
        TaskCompleted = "TaskCompleted",
        /// Internal: the job or a pod changed.
        OutOfSync = "OutOfSync",
        /// Internal: a Command was issued.
        CommandIssued = "CommandIssued",
        /// The job was updated (scaled).
        JobUpdated = "JobUpdated",
        /// A task's pods restarted more than its `maxRetry`.
        TaskFailed = "TaskFailed",
    }
}

impl Event {
    /// The events a user may put in a job's lifecycle policies (Volcano's webhook
    /// `policyEventMap`): all but the internal `OutOfSync`, `CommandIssued`, `PodRunning`.
    pub const POLICY: [Event; 8] = [
        Event::Any,
        Event::PodFailed,
        Event::PodEvicted,
        Event::PodPending,
        Event::Unknown,
        Event::TaskCompleted,
        Event::TaskFailed,
        Event::JobUpdated,
    ];
}

/// A request to a controller to act on a job or queue, deleted by the controller once read.
///
/// Volcano's Command has no `spec`: `action`, `target`, `reason` and `message` sit at the
/// top level of the object, so it is written by hand rather than with the
/// `CustomResource` derive (which nests fields under `spec`). It serializes with its
/// `apiVersion` and `kind`; its CRD is [`crate::crds::command`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The action to take on the target.
    #[serde(default)]
    pub action: Option<Action>,
    /// The job or queue to act on.
    #[serde(default)]
    pub target: Option<OwnerReference>,
    /// Unique, one-word, CamelCase reason for the command.
    #[serde(default)]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default)]
    pub message: Option<String>,
}

impl Command {
    /// A command named `name` asking for `action` on `target`.
    pub fn new(name: &str, action: Action, target: OwnerReference) -> Self {
        Command {
            metadata: ObjectMeta { name: Some(name.to_string()), ..Default::default() },
            action: Some(action),
            target: Some(target),
            ..Default::default()
        }
    }
}

impl Serialize for Command {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            api_version: &'a str,
            kind: &'a str,
            metadata: &'a ObjectMeta,
            #[serde(skip_serializing_if = "Option::is_none")]
            action: &'a Option<Action>,
            #[serde(skip_serializing_if = "Option::is_none")]
            target: &'a Option<OwnerReference>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: &'a Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            message: &'a Option<String>,
        }
        Wire {
            api_version: "bus.volcano.sh/v1alpha1",
            kind: "Command",
            metadata: &self.metadata,
            action: &self.action,
            target: &self.target,
            reason: &self.reason,
            message: &self.message,
        }
        .serialize(s)
    }
}

impl kube::Resource for Command {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Command".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "commands".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_and_events_keep_volcano_spellings_and_any_other_string() {
        assert_eq!(serde_json::to_string(&Action::RestartPartition).unwrap(), "\"RestartPartition\"");
        assert_eq!(serde_json::from_str::<Action>("\"EnqueueJob\"").unwrap(), Action::EnqueueJob);
        let other: Action = serde_json::from_str("\"Reboot\"").unwrap();
        assert_eq!(other, Action::Other("Reboot".into()));
        assert_eq!(serde_json::to_string(&other).unwrap(), "\"Reboot\"");
        assert_eq!(serde_json::to_string(&Event::Any).unwrap(), "\"*\"");
        assert_eq!(Event::parse("TaskFailed"), Event::TaskFailed);
        assert_eq!(Action::KNOWN.len(), 13);
        assert_eq!(Event::KNOWN.len(), 11);
        for a in Action::KNOWN.iter().chain(&Action::POLICY) {
            assert_eq!(&Action::parse(a.as_str()), a);
        }
    }

    #[test]
    fn a_command_has_its_fields_at_the_top_level() {
        let yaml = r#"
apiVersion: bus.volcano.sh/v1alpha1
kind: Command
metadata:
  name: tf-job-abortjob-x7k2p
  namespace: ml
action: AbortJob
target:
  apiVersion: batch.volcano.sh/v1alpha1
  kind: Job
  name: tf-job
  uid: 5f1d7a5e-2a0e-4c36-9d1a-7f0c2c3f1b11
  controller: true
reason: UserRequest
message: suspended by vcctl
"#;
        let c: Command = serde_yaml_ng::from_str(yaml).unwrap();
        assert_eq!(c.action, Some(Action::AbortJob));
        assert_eq!(c.target.as_ref().unwrap().name, "tf-job");
        let back = serde_json::to_value(&c).unwrap();
        let orig: serde_json::Value = serde_yaml_ng::from_str(yaml).unwrap();
        assert_eq!(back, orig);
        assert_eq!(<Command as kube::Resource>::api_version(&()), "bus.volcano.sh/v1alpha1");
        assert_eq!(
            <Command as kube::Resource>::url_path(&(), Some("ml")),
            "/apis/bus.volcano.sh/v1alpha1/namespaces/ml/commands"
        );
    }
}
