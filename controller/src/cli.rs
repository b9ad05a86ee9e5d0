//! `volcano-rs job …` and `volcano-rs queue …`: vcctl's commands, in kubectl's habits.
//!
//! | command | does |
//! |---|---|
//! | `job run -f FILE` | creates the Job(s) of a manifest |
//! | `job list [-n NS \| -A]` | a table of jobs as vcctl prints it |
//! | `job view NAME` | the job's spec and status as YAML |
//! | `job suspend NAME` / `job resume NAME` | a `bus.volcano.sh` Command `AbortJob` / `ResumeJob` for the job |
//! | `job delete NAME` | deletes the Job |
//! | `queue create NAME [--weight N] [--state S]` | creates a Queue |
//! | `queue list` | a table of queues |
//! | `queue open NAME` / `queue close NAME` | a Command `OpenQueue` / `CloseQueue` for the queue |
//!
//! State changes go through Commands, as vcctl sends them, so that the controller applies
//! them exactly once (it deletes the Command first). The tables and the Commands are built
//! by pure functions ([`job_table`], [`queue_table`], [`job_command`], [`queue_command`]).

use std::fmt::Write as _;
use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use volcano_api::bus::{Action, Command};
use volcano_api::crd::{Queue, QueueState};
use volcano_api::job::Job;

/// `volcano-rs job …`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum JobCommand {
    /// Create the Volcano Job(s) of a manifest.
    Run {
        /// The manifest (YAML, one or more documents).
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: PathBuf,
        /// Namespace of jobs that name none.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// List jobs.
    List {
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Every namespace.
        #[arg(short = 'A', long = "all-namespaces")]
        all_namespaces: bool,
    },
    /// Show a job's spec and status.
    View {
        /// The job.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// Abort a job: kill its pods and keep it Aborted until resumed (Command AbortJob).
    Suspend {
        /// The job.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// Resume an aborted job (Command ResumeJob).
    Resume {
        /// The job.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// Delete a job (its pods go with it).
    Delete {
        /// The job.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
}

/// `volcano-rs queue …`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum QueueCommand {
    /// Create a queue.
    Create {
        /// The queue.
        name: String,
        /// Weight (1 to 65535).
        #[arg(long, default_value_t = 1)]
        weight: i32,
        /// Initial state (Open or Closed).
        #[arg(long, default_value = "Open")]
        state: String,
    },
    /// List queues.
    List,
    /// Open a queue (Command OpenQueue).
    Open {
        /// The queue.
        name: String,
    },
    /// Close a queue: it admits no new job (Command CloseQueue).
    Close {
        /// The queue.
        name: String,
    },
}

/// The namespace Commands for queues are created in (queues are cluster-scoped; vcctl uses
/// `default`).
pub const QUEUE_COMMAND_NAMESPACE: &str = "default";

/// An error of a command, for the user.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An API call failed. The message shows the API server's own message; the error is
    /// kept whole for callers that look at its status.
    #[error("{what}: {}", api_message(.error))]
    Api {
        /// What was being done.
        what: String,
        /// The API error.
        error: kube::Error,
    },
    /// A file or a flag the user gave is wrong.
    #[error("{0}")]
    Input(String),
}

impl CliError {
    /// A bounded label: the API call's [`volcano_kube::api_error_category`] (`not_found`,
    /// `forbidden`, …) or `input`.
    pub fn category(&self) -> &'static str {
        match self {
            CliError::Api { error, .. } => volcano_kube::api_error_category(error),
            CliError::Input(_) => "input",
        }
    }
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

fn api_err(what: &str) -> impl Fn(kube::Error) -> CliError + '_ {
    move |error| CliError::Api { what: what.to_string(), error }
}

/// The owner reference a Command uses to name its target.
fn target<K: Resource<DynamicType = ()>>(obj: &K) -> Result<OwnerReference, CliError> {
    let meta = obj.meta();
    let uid = meta.uid.clone().ok_or_else(|| CliError::Input(format!("{} has no uid", obj.name_any())))?;
    Ok(OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: obj.name_any(),
        uid,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// The Command that asks the controller for `action` on `job` (named after the job and the
/// action, with a generated suffix so that a repeated request is a new Command).
pub fn job_command(job: &Job, action: Action) -> Result<Command, CliError> {
    let mut c = Command::new("", action.clone(), target(job)?);
    c.metadata.name = None;
    c.metadata.generate_name = Some(format!("{}-{}-", job.name_any(), action.as_str().to_lowercase()));
    c.metadata.namespace = job.namespace();
    c.metadata.owner_references = Some(vec![target(job)?]);
    Ok(c)
}

/// The Command that asks the controller for `action` on `queue`.
pub fn queue_command(queue: &Queue, action: Action) -> Result<Command, CliError> {
    let mut c = Command::new("", action.clone(), target(queue)?);
    c.metadata.name = None;
    c.metadata.generate_name = Some(format!("{}-{}-", queue.name_any(), action.as_str().to_lowercase()));
    c.metadata.namespace = Some(QUEUE_COMMAND_NAMESPACE.to_string());
    Ok(c)
}

fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut first = true;
        for (w, c) in widths.iter().zip(cells) {
            if !first {
                out.push_str("  ");
            }
            first = false;
            let _ = write!(out, "{c:<w$}");
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(&mut out, &mut header.iter().copied());
    for r in rows {
        line(&mut out, &mut r.iter().map(String::as_str));
    }
    out
}

/// Jobs as vcctl lists them: name, creation, phase, replicas, min, pending, running,
/// succeeded, failed, unknown, retries (with the namespace first when listing all).
pub fn job_table(jobs: &[Job], with_namespace: bool) -> String {
    let mut header = vec![
        "Name",
        "Creation",
        "Phase",
        "Replicas",
        "Min",
        "Pending",
        "Running",
        "Succeeded",
        "Failed",
        "Unknown",
        "RetryCount",
    ];
    if with_namespace {
        header.insert(0, "Namespace");
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let s = j.status.clone().unwrap_or_default();
            let replicas: i32 = j.spec.tasks.iter().map(|t| t.replicas).sum();
            let created = j.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()).unwrap_or_default();
            let created = created.get(..19).unwrap_or(&created).replace('T', " ");
            let phase = s.state.phase.as_ref().map(|p| p.as_str().to_string()).unwrap_or_else(|| "Pending".into());
            let mut row = vec![
                j.name_any(),
                created,
                phase,
                replicas.to_string(),
                j.spec.min_available.to_string(),
                s.pending.to_string(),
                s.running.to_string(),
                s.succeeded.to_string(),
                s.failed.to_string(),
                s.unknown.to_string(),
                s.retry_count.to_string(),
            ];
            if with_namespace {
                row.insert(0, j.namespace().unwrap_or_default());
            }
            row
        })
        .collect();
    table(&header, &rows)
}

/// Queues: name, weight, state, parent, capability.
pub fn queue_table(queues: &[Queue]) -> String {
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|q| {
            let state = q.status.as_ref().and_then(|s| s.state).map(|s| format!("{s:?}")).unwrap_or_else(|| "-".into());
            let cap = q
                .spec
                .capability
                .as_ref()
                .map(|c| c.iter().map(|(k, v)| format!("{k}={}", v.0)).collect::<Vec<_>>().join(","))
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| "-".into());
            vec![
                q.name_any(),
                q.spec.weight.unwrap_or(1).to_string(),
                state,
                q.spec.parent.clone().unwrap_or_else(|| "-".into()),
                cap,
            ]
        })
        .collect();
    table(&["Name", "Weight", "State", "Parent", "Capability"], &rows)
}

/// Runs a job command; returns what to print.
pub async fn job(client: Client, cmd: &JobCommand) -> Result<String, CliError> {
    match cmd {
        JobCommand::Run { file, namespace } => {
            let text =
                std::fs::read_to_string(file).map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
            let mut out = String::new();
            for (i, de) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
                let value: serde_json::Value = serde::Deserialize::deserialize(de)
                    .map_err(|e| CliError::Input(format!("{}: document {}: {e}", file.display(), i + 1)))?;
                if value.is_null() {
                    continue;
                }
                if value["kind"] != "Job" || value["apiVersion"] != "batch.volcano.sh/v1alpha1" {
                    return Err(CliError::Input(format!(
                        "{}: document {}: {} {} is not a batch.volcano.sh/v1alpha1 Job",
                        file.display(),
                        i + 1,
                        value["apiVersion"],
                        value["kind"]
                    )));
                }
                let job: Job = serde_json::from_value(value)
                    .map_err(|e| CliError::Input(format!("{}: document {}: {e}", file.display(), i + 1)))?;
                let ns = job.namespace().unwrap_or_else(|| namespace.clone());
                let api: Api<Job> = Api::namespaced(client.clone(), &ns);
                let created = api
                    .create(&PostParams::default(), &job)
                    .await
                    .map_err(api_err(&format!("job {ns}/{}", job.name_any())))?;
                let _ = writeln!(out, "job.batch.volcano.sh/{} created", created.name_any());
            }
            Ok(out)
        }
        JobCommand::List { namespace, all_namespaces } => {
            let api: Api<Job> = if *all_namespaces { Api::all(client) } else { Api::namespaced(client, namespace) };
            let mut jobs = api.list(&ListParams::default()).await.map_err(api_err("listing jobs"))?.items;
            jobs.sort_by_key(|j| (j.namespace(), j.name_any()));
            Ok(job_table(&jobs, *all_namespaces))
        }
        JobCommand::View { name, namespace } => {
            let api: Api<Job> = Api::namespaced(client, namespace);
            let mut job = api.get(name).await.map_err(api_err(&format!("job {namespace}/{name}")))?;
            job.metadata.managed_fields = None;
            serde_yaml_ng::to_string(&job).map_err(|e| CliError::Input(e.to_string()))
        }
        JobCommand::Suspend { name, namespace } | JobCommand::Resume { name, namespace } => {
            let action = if matches!(cmd, JobCommand::Suspend { .. }) { Action::AbortJob } else { Action::ResumeJob };
            let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
            let job = jobs.get(name).await.map_err(api_err(&format!("job {namespace}/{name}")))?;
            let commands: Api<Command> = Api::namespaced(client, namespace);
            let c = commands
                .create(&PostParams::default(), &job_command(&job, action.clone())?)
                .await
                .map_err(api_err(&format!("command for job {namespace}/{name}")))?;
            Ok(format!("command.bus.volcano.sh/{} created: {} job {namespace}/{name}\n", c.name_any(), action.as_str()))
        }
        JobCommand::Delete { name, namespace } => {
            let api: Api<Job> = Api::namespaced(client, namespace);
            api.delete(name, &DeleteParams::background()).await.map_err(api_err(&format!("job {namespace}/{name}")))?;
            Ok(format!("job.batch.volcano.sh/{name} deleted\n"))
        }
    }
}

/// Runs a queue command; returns what to print.
pub async fn queue(client: Client, cmd: &QueueCommand) -> Result<String, CliError> {
    let api: Api<Queue> = Api::all(client.clone());
    match cmd {
        QueueCommand::Create { name, weight, state } => {
            let state = match state.as_str() {
                "Open" => QueueState::Open,
                "Closed" => QueueState::Closed,
                s => return Err(CliError::Input(format!("--state: {s:?} is not a state; expected Open or Closed"))),
            };
            let q: Queue = serde_json::from_value(serde_json::json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": weight, "reclaimable": true},
            }))
            .map_err(|e| CliError::Input(e.to_string()))?;
            let created = api.create(&PostParams::default(), &q).await.map_err(api_err(&format!("queue {name}")))?;
            if state == QueueState::Closed {
                let commands: Api<Command> = Api::namespaced(client, QUEUE_COMMAND_NAMESPACE);
                commands
                    .create(&PostParams::default(), &queue_command(&created, Action::CloseQueue)?)
                    .await
                    .map_err(api_err(&format!("command for queue {name}")))?;
            }
            Ok(format!("queue.scheduling.volcano.sh/{name} created\n"))
        }
        QueueCommand::List => {
            let mut queues = api.list(&ListParams::default()).await.map_err(api_err("listing queues"))?.items;
            queues.sort_by_key(|q| q.name_any());
            Ok(queue_table(&queues))
        }
        QueueCommand::Open { name } | QueueCommand::Close { name } => {
            let action = if matches!(cmd, QueueCommand::Open { .. }) { Action::OpenQueue } else { Action::CloseQueue };
            let q = api.get(name).await.map_err(api_err(&format!("queue {name}")))?;
            let commands: Api<Command> = Api::namespaced(client, QUEUE_COMMAND_NAMESPACE);
            let c = commands
                .create(&PostParams::default(), &queue_command(&q, action.clone())?)
                .await
                .map_err(api_err(&format!("command for queue {name}")))?;
            Ok(format!("command.bus.volcano.sh/{} created: {} queue {name}\n", c.name_any(), action.as_str()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(name: &str, phase: Option<&str>) -> Job {
        let mut v = json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                         "creationTimestamp": "2026-11-25T10:00:00Z"},
            "spec": {"minAvailable": 3, "tasks": [
                {"name": "ps", "replicas": 1, "template": {}},
                {"name": "worker", "replicas": 2, "template": {}}
            ]}
        });
        if let Some(p) = phase {
            v["status"] = json!({"state": {"phase": p}, "running": 3, "retryCount": 1});
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_job_table_has_vcctls_columns() {
        let t = job_table(&[job("tf", Some("Running")), job("new", None)], false);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("Name  Creation             Phase    Replicas  Min"), "{t}");
        assert!(lines[1].starts_with("tf    2026-11-25 10:00:00  Running  3         3"), "{t}");
        assert!(lines[1].ends_with("1"), "retries last: {t}");
        assert!(lines[2].contains("Pending"), "a job without status is Pending: {t}");
        let all = job_table(&[job("tf", None)], true);
        assert!(all.starts_with("Namespace  Name"), "{all}");
        assert!(all.lines().nth(1).unwrap().starts_with("ml         tf"), "{all}");
    }

    #[test]
    fn commands_name_their_target_by_uid() {
        let j = job("tf", None);
        let c = job_command(&j, Action::AbortJob).unwrap();
        let t = c.target.as_ref().unwrap();
        assert_eq!((t.kind.as_str(), t.name.as_str(), t.uid.as_str()), ("Job", "tf", "uid-tf"));
        assert_eq!(t.api_version, "batch.volcano.sh/v1alpha1");
        assert_eq!(c.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(c.metadata.generate_name.as_deref(), Some("tf-abortjob-"));
        assert_eq!(c.action, Some(Action::AbortJob));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["action"], "AbortJob");
        assert_eq!(v["kind"], "Command");

        let q: Queue = serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "team-a", "uid": "uid-q"}, "spec": {}}))
        .unwrap();
        let c = queue_command(&q, Action::CloseQueue).unwrap();
        assert_eq!(c.target.unwrap().kind, "Queue");
        assert_eq!(c.metadata.namespace.as_deref(), Some(QUEUE_COMMAND_NAMESPACE));
        let mut nouid = job("x", None);
        nouid.metadata.uid = None;
        assert!(job_command(&nouid, Action::ResumeJob).unwrap_err().to_string().contains("no uid"));
    }

    #[test]
    fn the_queue_table_shows_state_and_capability() {
        let q: Queue = serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "team-a"}, "spec": {"weight": 4, "capability": {"nvidia.com/gpu": "8"}},
            "status": {"state": "Closed"}}))
        .unwrap();
        let t = queue_table(&[q]);
        assert_eq!(t.lines().nth(1).unwrap(), "team-a  4       Closed  -       nvidia.com/gpu=8");
    }
}
