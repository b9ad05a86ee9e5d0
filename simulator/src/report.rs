//! The result of a simulation, for people (a table) and for programs (JSON, YAML).
//!
//! The JSON and YAML shapes are the contract of `volcano-rs simulate` (docs/simulate.md):
//! `cycles`, `pods`, `podGroups`, `queues` and `jobs`, with these keys and no others.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Container, EnvVar, VolumeMount};
use serde::Serialize;
use volcano_api::crd::{PodGroupPhase, ResourceList};
use volcano_framework::{QueueReport, Resource};

use crate::cluster::{Cluster, CycleRecord};

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The requested number of cycles ran.
    CyclesDone,
    /// The last cycle changed nothing.
    Fixpoint,
    /// [`crate::MAX_CYCLES`] cycles ran and the last one still changed something.
    Limit,
}

/// What the last cycle computed besides its effects.
#[derive(Clone, Debug, Default)]
pub struct LastCycle {
    /// Queue reports (allocated, deserved, share) by queue name.
    pub queues: BTreeMap<String, QueueReport>,
    /// Why each waiting PodGroup (`namespace/name`) waits.
    pub pending_reasons: BTreeMap<String, String>,
}

/// A pod after the last cycle.
#[derive(Clone, Debug, PartialEq)]
pub struct PodLine {
    /// `namespace/name`.
    pub pod: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// `status.phase`.
    pub phase: String,
    /// `status.nominatedNodeName`.
    pub nominated_node: Option<String>,
    /// `spec.schedulerName`.
    pub scheduler: String,
    /// `namespace/name` of its PodGroup.
    pub pod_group: Option<String>,
    /// Why it waits, for a pending pod without a node.
    pub pending_reason: Option<String>,
    /// The GPU cards the scheduler chose for it (`volcano.sh/gpu-index`, or the card ids of
    /// `volcano.sh/vgpu-ids-new`), comma-separated.
    pub gpu_cards: Option<String>,
}

/// The GPU cards recorded on a pod by the `deviceshare` accounting, comma-separated.
fn gpu_cards(pod: &volcano_framework::pod::SchedPod) -> Option<String> {
    use volcano_framework::device::{GPU_INDEX, VGPU_IDS};
    let a = pod.metadata.annotations.as_ref()?;
    if let Some(ids) = a.get(VGPU_IDS) {
        let cards: Vec<&str> = ids
            .split(';')
            .flat_map(|c| c.split(':'))
            .filter(|c| c.contains(','))
            .filter_map(|c| c.split(',').next())
            .collect();
        return Some(cards.join(","));
    }
    a.get(GPU_INDEX).cloned()
}

/// A PodGroup condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConditionLine {
    /// `Unschedulable` or `Scheduled`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason (empty when none).
    pub reason: String,
    /// Human-readable message (empty when none).
    pub message: String,
}

/// A PodGroup after the last cycle.
#[derive(Clone, Debug, PartialEq)]
pub struct PodGroupLine {
    /// `namespace/name`.
    pub name: String,
    /// `status.phase` (Pending when unset).
    pub phase: String,
    /// `spec.minMember`.
    pub min_member: i32,
    /// `status.running`.
    pub running: i32,
    /// `spec.queue`.
    pub queue: String,
    /// `status.conditions`.
    pub conditions: Vec<ConditionLine>,
}

/// A queue after the last cycle.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueLine {
    /// Name.
    pub name: String,
    /// `spec.weight` (1 when unset).
    pub weight: i32,
    /// Deserved resources computed by the queue policy plugin, if one did.
    pub deserved: Option<ResourceList>,
    /// Resources allocated to the queue's pods.
    pub allocated: ResourceList,
    /// Share computed by the queue policy plugin, if one did.
    pub share: Option<f64>,
}

/// A container of a pod that came from a Job: what the job plugins set up in it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobContainerLine {
    /// Container name.
    pub name: String,
    /// `env`, as planned (`TF_CONFIG`, `MASTER_ADDR`, `VC_<TASK>_HOSTS` from a ConfigMap, …).
    pub env: Vec<EnvVar>,
    /// `volumeMounts`, as planned (the svc hosts, the MPI hostfile, the ssh keys).
    pub volume_mounts: Vec<VolumeMount>,
}

impl JobContainerLine {
    fn of(c: &Container) -> Self {
        JobContainerLine {
            name: c.name.clone(),
            env: c.env.clone().unwrap_or_default(),
            volume_mounts: c.volume_mounts.clone().unwrap_or_default(),
        }
    }
}

/// A pod of a Job after the last cycle, with its planned containers.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobPodLine {
    /// `namespace/name`.
    pub pod: String,
    /// The task it belongs to.
    pub task: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// `status.phase`.
    pub phase: String,
    /// `spec.hostname` (the `svc` plugin sets it).
    pub hostname: Option<String>,
    /// `spec.subdomain` (the `svc` plugin sets it).
    pub subdomain: Option<String>,
    /// Init containers, in order.
    pub init_containers: Vec<JobContainerLine>,
    /// Containers, in order.
    pub containers: Vec<JobContainerLine>,
}

/// A named object a job plugin creates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NamedLine {
    /// `namespace/name`.
    pub name: String,
}

/// A ConfigMap a job plugin creates, with its data.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfigMapLine {
    /// `namespace/name`.
    pub name: String,
    /// `data` (the svc hosts, the MPI hostfile).
    pub data: BTreeMap<String, String>,
}

/// A Secret a job plugin creates: its keys only, never the values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SecretLine {
    /// `namespace/name`.
    pub name: String,
    /// The keys of `data` and `stringData`.
    pub keys: Vec<String>,
}

/// The pods of one task of a Volcano Job that the job controller has not created: the
/// task's `dependsOn` is not met (or its PodGroup is still Pending).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotCreatedLine {
    /// The task.
    pub task: String,
    /// `namespace/name` of the pods not created, in plan order.
    pub pods: Vec<String>,
    /// The tasks it depends on (`dependsOn.name`).
    pub depends_on: Vec<String>,
    /// `dependsOn.iteration`: `all` (the default) or `any`.
    pub iteration: String,
    /// Why they are not created: the depended-on tasks not ready, with their ready pods and
    /// the number they need; the PodGroup if it is still Pending.
    pub reason: String,
}

/// A Volcano Job of the input, as planned, after the last cycle.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobLine {
    /// `namespace/name`.
    pub name: String,
    /// `spec.queue` after admission.
    pub queue: String,
    /// The job's phase, as the job controller wrote it (`Pending`, `Running`, `Completed`,
    /// `Failed`, …).
    pub phase: String,
    /// `namespace/name` of its PodGroup.
    pub pod_group: String,
    /// The enabled job plugins, in the order they ran.
    pub plugins: Vec<String>,
    /// Its pods that still exist, in plan order.
    pub pods: Vec<JobPodLine>,
    /// Its pods not created yet, by task: they wait for the task's `dependsOn`.
    pub not_created: Vec<NotCreatedLine>,
    /// Services the plugins create (not scheduled).
    pub services: Vec<NamedLine>,
    /// ConfigMaps the plugins create, with their data (not scheduled).
    pub config_maps: Vec<ConfigMapLine>,
    /// Secrets the plugins create, keys only (not scheduled).
    pub secrets: Vec<SecretLine>,
    /// NetworkPolicies the plugins create (not scheduled).
    pub network_policies: Vec<NamedLine>,
}

fn meta_key(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!("{}/{}", m.namespace.as_deref().unwrap_or("default"), m.name.as_deref().unwrap_or_default())
}

fn job_lines(cluster: &Cluster) -> Vec<JobLine> {
    cluster
        .jobs
        .iter()
        .map(|(key, j)| {
            let pods = j
                .pods
                .iter()
                .filter_map(|p| cluster.pods.get(p).map(|pod| (p, pod)))
                .map(|(p, pod)| {
                    let spec = pod.spec.clone().unwrap_or_default();
                    JobPodLine {
                        pod: p.clone(),
                        task: pod
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(volcano_api::crd::TASK_SPEC_KEY))
                            .cloned()
                            .unwrap_or_default(),
                        node: pod.node_name().map(str::to_string),
                        phase: pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Pending".into()),
                        hostname: spec.hostname.clone(),
                        subdomain: spec.subdomain.clone(),
                        init_containers: spec.init_containers.iter().flatten().map(JobContainerLine::of).collect(),
                        containers: spec.containers.iter().map(JobContainerLine::of).collect(),
                    }
                })
                .collect();
            let not_created = j
                .waiting_tasks(&cluster.pods)
                .into_iter()
                .map(|(task, pods)| {
                    let deps = j.job.spec.tasks.iter().find(|t| t.name() == task).and_then(|t| t.depends_on.clone());
                    let deps = deps.unwrap_or_default();
                    NotCreatedLine {
                        task: task.to_string(),
                        pods,
                        depends_on: deps.name,
                        iteration: deps.iteration.unwrap_or_else(|| volcano_api::job::iteration::ALL.into()),
                        reason: j.waiting_reason(task, &cluster.pods, &cluster.pod_groups),
                    }
                })
                .collect();
            let r = &j.resources;
            JobLine {
                name: key.clone(),
                queue: j.job.spec.queue.clone().unwrap_or_else(|| "default".into()),
                phase: j.phase().as_str().to_string(),
                pod_group: j.pod_group.clone(),
                plugins: j.plugins.clone(),
                pods,
                not_created,
                services: r.services.iter().map(|s| NamedLine { name: meta_key(&s.metadata) }).collect(),
                config_maps: r
                    .config_maps
                    .iter()
                    .map(|c| ConfigMapLine { name: meta_key(&c.metadata), data: c.data.clone().unwrap_or_default() })
                    .collect(),
                secrets: r
                    .secrets
                    .iter()
                    .map(|s| {
                        let mut keys: Vec<String> = s.data.iter().flatten().map(|(k, _)| k.clone()).collect();
                        keys.extend(s.string_data.iter().flatten().map(|(k, _)| k.clone()));
                        keys.sort();
                        keys.dedup();
                        SecretLine { name: meta_key(&s.metadata), keys }
                    })
                    .collect(),
                network_policies: r
                    .network_policies
                    .iter()
                    .map(|n| NamedLine { name: meta_key(&n.metadata) })
                    .collect(),
            }
        })
        .collect()
}

/// Everything a simulation prints.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// What each cycle changed.
    pub cycles: Vec<CycleRecord>,
    /// How the run ended (`None` if no run happened).
    pub stop: Option<Stop>,
    /// Every pod, sorted by namespace and name.
    pub pods: Vec<PodLine>,
    /// Every PodGroup, sorted by namespace and name.
    pub pod_groups: Vec<PodGroupLine>,
    /// Every queue, sorted by name.
    pub queues: Vec<QueueLine>,
    /// Every Volcano Job of the input, sorted by namespace and name.
    pub jobs: Vec<JobLine>,
}

fn ns_name(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

fn canonical(list: &ResourceList) -> ResourceList {
    Resource::from_list(list).map(|r| r.to_list()).unwrap_or_else(|_| list.clone())
}

impl Report {
    /// Builds the report from the cluster after the last cycle.
    pub fn new(
        cluster: &Cluster,
        cycles: &[CycleRecord],
        last: Option<&LastCycle>,
        stop: Option<Stop>,
        scheduler_names: &[String],
    ) -> Report {
        let pod_groups: Vec<PodGroupLine> = {
            let mut v: Vec<PodGroupLine> = cluster
                .pod_groups
                .iter()
                .map(|(key, pg)| {
                    let status = pg.status.clone().unwrap_or_default();
                    PodGroupLine {
                        name: key.clone(),
                        phase: status.phase.unwrap_or(PodGroupPhase::Pending).as_str().to_string(),
                        min_member: pg.spec.min_member,
                        running: status.running,
                        queue: pg.spec.queue.clone().unwrap_or_else(|| "default".into()),
                        conditions: status
                            .conditions
                            .iter()
                            .map(|c| ConditionLine {
                                type_: c.type_.clone(),
                                status: c.status.clone(),
                                reason: c.reason.clone().unwrap_or_default(),
                                message: c.message.clone().unwrap_or_default(),
                            })
                            .collect(),
                    }
                })
                .collect();
            v.sort_by(|a, b| ns_name(&a.name).cmp(&ns_name(&b.name)));
            v
        };

        let mut pods: Vec<PodLine> = cluster
            .pods
            .iter()
            .map(|(key, pod)| {
                let spec = pod.spec.as_ref();
                let status = pod.status.as_ref();
                let node = pod.node_name().map(str::to_string);
                let phase = status.and_then(|s| s.phase.clone()).unwrap_or_else(|| "Pending".into());
                let nominated_node = status.and_then(|s| s.nominated_node_name.clone()).filter(|n| !n.is_empty());
                let scheduler = spec.and_then(|s| s.scheduler_name.clone()).unwrap_or_default();
                let pod_group = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(volcano_api::crd::GROUP_NAME_ANNOTATION))
                    .map(|g| format!("{}/{g}", ns_name(key).0));
                let mut line = PodLine {
                    pod: key.clone(),
                    node,
                    phase,
                    nominated_node,
                    scheduler,
                    pod_group,
                    pending_reason: None,
                    gpu_cards: gpu_cards(pod),
                };
                if line.node.is_none() && line.phase == "Pending" {
                    line.pending_reason = Some(pending_reason(&line, cluster, last, scheduler_names));
                }
                line
            })
            .collect();
        pods.sort_by(|a, b| ns_name(&a.pod).cmp(&ns_name(&b.pod)));

        let queues = cluster
            .queues
            .iter()
            .map(|(name, q)| {
                let report = last.and_then(|l| l.queues.get(name));
                let allocated = match report {
                    Some(r) => r.allocated.to_list(),
                    None => q
                        .status
                        .as_ref()
                        .and_then(|s| s.allocated.as_ref())
                        .map(canonical)
                        .unwrap_or_else(|| Resource::empty().to_list()),
                };
                QueueLine {
                    name: name.clone(),
                    weight: q.spec.weight.unwrap_or(1),
                    deserved: report.and_then(|r| r.deserved.as_ref()).map(Resource::to_list),
                    allocated,
                    share: report.and_then(|r| r.share),
                }
            })
            .collect();

        let mut jobs = job_lines(cluster);
        jobs.sort_by(|a, b| ns_name(&a.name).cmp(&ns_name(&b.name)));
        Report { cycles: cycles.to_vec(), stop, pods, pod_groups, queues, jobs }
    }

    /// The pods that wait for a node.
    pub fn pending(&self) -> impl Iterator<Item = &PodLine> + '_ {
        self.pods.iter().filter(|p| p.pending_reason.is_some())
    }

    /// The report as a JSON value (keys exactly as docs/simulate.md specifies).
    pub fn to_json_value(&self) -> serde_json::Value {
        serde_json::to_value(self.output()).expect("the report serialises")
    }

    /// The report as pretty-printed JSON, with a final newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.output()).expect("the report serialises");
        s.push('\n');
        s
    }

    /// The report as YAML (the same structure as the JSON).
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(&self.output()).expect("the report serialises")
    }

    fn output(&self) -> Output<'_> {
        Output {
            cycles: self
                .cycles
                .iter()
                .map(|c| OutCycle {
                    cycle: c.cycle,
                    binds: c.binds.iter().map(|b| OutPlacement { pod: &b.pod, node: &b.node }).collect(),
                    evictions: c
                        .evictions
                        .iter()
                        .map(|e| OutEviction { pod: &e.pod, node: &e.node, action: &e.action })
                        .collect(),
                    pipelined: c.pipelined.iter().map(|b| OutPlacement { pod: &b.pod, node: &b.node }).collect(),
                    created: c.created.iter().map(String::as_str).collect(),
                    deleted: c.deleted.iter().map(String::as_str).collect(),
                    applied: c.applied.iter().map(|(job, change)| OutApplied { job, change }).collect(),
                    resizes: c
                        .resizes
                        .iter()
                        .map(|r| OutResize {
                            job: &r.job,
                            task: &r.task,
                            from: r.from,
                            to: r.to,
                            reason: r.reason,
                            message: &r.message,
                        })
                        .collect(),
                    host_lists: c
                        .host_lists
                        .iter()
                        .map(|h| OutHostList { config_map: &h.config_map, key: &h.key, value: &h.value })
                        .collect(),
                })
                .collect(),
            pods: self
                .pods
                .iter()
                .map(|p| OutPod {
                    pod: &p.pod,
                    node: p.node.as_deref(),
                    phase: &p.phase,
                    gpu_cards: p.gpu_cards.as_deref(),
                })
                .collect(),
            pod_groups: self
                .pod_groups
                .iter()
                .map(|g| OutPodGroup { name: &g.name, phase: &g.phase, conditions: &g.conditions })
                .collect(),
            queues: self
                .queues
                .iter()
                .map(|q| OutQueue {
                    name: &q.name,
                    weight: q.weight,
                    deserved: q.deserved.as_ref(),
                    allocated: &q.allocated,
                    share: q.share,
                })
                .collect(),
            jobs: &self.jobs,
        }
    }

    /// The report for people: what was bound where in each cycle, evictions, the pods still
    /// pending and why, PodGroups and queues.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for c in &self.cycles {
            let time = k8s_openapi::jiff::Timestamp::from_millisecond(c.time_ms).unwrap_or_default();
            let jobs_changed =
                !(c.applied.is_empty() && c.resizes.is_empty() && c.host_lists.is_empty() && c.deleted.is_empty());
            if c.binds.is_empty()
                && c.evictions.is_empty()
                && c.pipelined.is_empty()
                && c.created.is_empty()
                && !jobs_changed
            {
                let what = if c.changed() {
                    format!(
                        "status updates only ({} PodGroup(s), {} queue(s))",
                        c.pod_group_updates.len(),
                        c.queue_updates.len()
                    )
                } else {
                    "nothing changed".to_string()
                };
                let _ = writeln!(out, "Cycle {} ({time}): {what}", c.cycle);
                continue;
            }
            let created = if jobs_changed {
                format!(", {} created, {} deleted by the job controller", c.created.len(), c.deleted.len())
            } else if c.created.is_empty() {
                String::new()
            } else {
                format!(", {} created (dependsOn met)", c.created.len())
            };
            let _ = writeln!(
                out,
                "Cycle {} ({time}): {} bound, {} evicted, {} pipelined{created}",
                c.cycle,
                c.binds.len(),
                c.evictions.len(),
                c.pipelined.len()
            );
            let mut rows = Vec::new();
            for e in &c.evictions {
                rows.push(vec!["evicted".into(), e.pod.clone(), e.node.clone(), format!("{}: {}", e.action, e.reason)]);
            }
            for b in &c.binds {
                rows.push(vec!["bound".into(), b.pod.clone(), b.node.clone(), String::new()]);
            }
            for p in &c.pipelined {
                rows.push(vec![
                    "pipelined".into(),
                    p.pod.clone(),
                    p.node.clone(),
                    "waits for resources being released".into(),
                ]);
            }
            for (job, change) in &c.applied {
                rows.push(vec!["applied".into(), job.clone(), String::new(), format!("Job {change}")]);
            }
            for r in &c.resizes {
                rows.push(vec![
                    "resized".into(),
                    r.job.clone(),
                    format!("{} {} → {}", r.task, r.from, r.to),
                    format!("{}: {}", r.reason, r.message),
                ]);
            }
            for p in &c.created {
                rows.push(vec![
                    "created".into(),
                    p.clone(),
                    String::new(),
                    "by the job controller (dependsOn met, a resize, or a pod replaced)".into(),
                ]);
            }
            for p in &c.deleted {
                rows.push(vec!["deleted".into(), p.clone(), String::new(), "by the job controller".into()]);
            }
            for h in &c.host_lists {
                rows.push(vec![
                    "hosts".into(),
                    format!("{}[{}]", h.config_map, h.key),
                    String::new(),
                    h.value.lines().collect::<Vec<_>>().join(", "),
                ]);
            }
            table(&mut out, &["", "", "", ""], &rows);
        }
        match self.stop {
            Some(Stop::Fixpoint) => {
                let _ = writeln!(out, "Steady state: cycle {} changed nothing.", self.cycles.len());
            }
            Some(Stop::Limit) => {
                let _ = writeln!(out, "Stopped after {} cycles: the cluster was still changing.", self.cycles.len());
            }
            Some(Stop::CyclesDone) => {
                let _ = writeln!(out, "Ran {} cycle(s) as asked.", self.cycles.len());
            }
            None => {}
        }

        let running = self.pods.iter().filter(|p| p.phase == "Running").count();
        let pending: Vec<&PodLine> = self.pending().collect();
        let not_created: usize = self.jobs.iter().flat_map(|j| &j.not_created).map(|n| n.pods.len()).sum();
        let _ = writeln!(
            out,
            "\nPods: {} in total, {running} running, {} pending, {} other{}.",
            self.pods.len(),
            pending.len(),
            self.pods.len() - running - pending.len(),
            if not_created == 0 {
                String::new()
            } else {
                format!("; {not_created} of Volcano Jobs not created (dependsOn not met)")
            }
        );
        if !pending.is_empty() {
            let _ = writeln!(out, "\nPending pods, by PodGroup:");
            // Pods of one PodGroup wait for the same reason: say it once.
            let mut groups: Vec<(&str, &str, Vec<&str>)> = Vec::new();
            let mut index: HashMap<(&str, &str), usize> = HashMap::new();
            for p in &pending {
                let group = p.pod_group.as_deref().unwrap_or(&p.pod);
                let reason = p.pending_reason.as_deref().unwrap_or_default();
                let i = *index.entry((group, reason)).or_insert_with(|| {
                    groups.push((group, reason, Vec::new()));
                    groups.len() - 1
                });
                groups[i].2.push(&p.pod);
            }
            for (group, reason, pods) in groups {
                let names: Vec<&str> = pods.iter().map(|p| ns_name(p).1).collect();
                if names.len() == 1 && pods[0] == group {
                    let _ = writeln!(out, "  pod {group} (no PodGroup)");
                } else {
                    let plural = if names.len() == 1 { "" } else { "s" };
                    let _ = writeln!(out, "  {group}: {} pod{plural} ({})", names.len(), names_text(&names));
                }
                let _ = writeln!(out, "    {reason}");
            }
        }

        if not_created > 0 {
            let _ = writeln!(out, "\nPods not created, by job and task (the job controller waits for dependsOn):");
            for j in &self.jobs {
                for n in &j.not_created {
                    let names: Vec<&str> = n.pods.iter().map(|p| ns_name(p).1).collect();
                    let _ = writeln!(
                        out,
                        "  {} task {}: {} pod{} ({})",
                        j.name,
                        n.task,
                        names.len(),
                        if names.len() == 1 { "" } else { "s" },
                        names_text(&names)
                    );
                    let _ = writeln!(out, "    {}", n.reason);
                }
            }
        }

        if !self.pod_groups.is_empty() {
            let _ = writeln!(out, "\nPodGroups:");
            let rows: Vec<Vec<String>> = self
                .pod_groups
                .iter()
                .map(|g| {
                    vec![
                        g.name.clone(),
                        g.queue.clone(),
                        g.phase.clone(),
                        g.min_member.to_string(),
                        g.running.to_string(),
                    ]
                })
                .collect();
            table(&mut out, &["PODGROUP", "QUEUE", "PHASE", "MIN", "RUNNING"], &rows);
        }

        if !self.jobs.is_empty() {
            let _ = writeln!(
                out,
                "\nJobs (batch.volcano.sh/v1alpha1; --output json shows each pod's env and the plugin objects):"
            );
            let rows: Vec<Vec<String>> = self
                .jobs
                .iter()
                .map(|j| {
                    let running = j.pods.iter().filter(|p| p.phase == "Running").count();
                    let not_created: usize = j.not_created.iter().map(|n| n.pods.len()).sum();
                    vec![
                        j.name.clone(),
                        ns_name(&j.pod_group).1.to_string(),
                        format!("{running}/{}", j.pods.len() + not_created),
                        if j.plugins.is_empty() { "-".into() } else { j.plugins.join(",") },
                        j.phase.clone(),
                    ]
                })
                .collect();
            table(&mut out, &["JOB", "PODGROUP", "RUNNING", "PLUGINS", "PHASE"], &rows);
        }

        let _ = writeln!(out, "\nQueues:");
        let rows: Vec<Vec<String>> = self
            .queues
            .iter()
            .map(|q| {
                vec![
                    q.name.clone(),
                    q.weight.to_string(),
                    list_text(Some(&q.allocated)),
                    list_text(q.deserved.as_ref()),
                    q.share.map(|s| format!("{s:.2}")).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        table(&mut out, &["QUEUE", "WEIGHT", "ALLOCATED", "DESERVED", "SHARE"], &rows);
        out
    }
}

/// Pending pods named per PodGroup in the table; the others are counted.
const MAX_NAMES: usize = 8;

/// The first [`MAX_NAMES`] names, and how many more.
fn names_text(names: &[&str]) -> String {
    let shown = names.iter().take(MAX_NAMES).copied().collect::<Vec<_>>().join(", ");
    if names.len() > MAX_NAMES {
        format!("{shown} and {} more", names.len() - MAX_NAMES)
    } else {
        shown
    }
}

fn pending_reason(pod: &PodLine, cluster: &Cluster, last: Option<&LastCycle>, scheduler_names: &[String]) -> String {
    if let Some(node) = &pod.nominated_node {
        return format!("pipelined to {node}: waits for resources being released there");
    }
    if !scheduler_names.contains(&pod.scheduler) {
        return format!(
            "schedulerName is {:?}: this run schedules only pods with schedulerName {} (see --scheduler-name)",
            pod.scheduler,
            scheduler_names.join(" or ")
        );
    }
    let Some(pg_key) = &pod.pod_group else { return "the pod has no PodGroup".into() };
    let Some(pg) = cluster.pod_groups.get(pg_key) else {
        return format!("PodGroup {pg_key} does not exist");
    };
    let queue = pg.spec.queue.as_deref().unwrap_or("default");
    if !cluster.queues.contains_key(queue) {
        return format!("queue {queue} of PodGroup {pg_key} does not exist");
    }
    if let Some(reason) = last.and_then(|l| l.pending_reasons.get(pg_key)) {
        return reason.clone();
    }
    let status = pg.status.clone().unwrap_or_default();
    if let Some(m) = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Unschedulable" && c.status == "True")
        .and_then(|c| c.message.clone())
    {
        return m;
    }
    if last.is_none() {
        return "no cycle ran".into();
    }
    format!("PodGroup {pg_key} is {}", status.phase.unwrap_or_default().as_str())
}

fn list_text(list: Option<&ResourceList>) -> String {
    let Some(list) = list else { return "-".into() };
    let parts: Vec<String> = list.iter().filter(|(_, q)| q.0 != "0").map(|(k, q)| format!("{k}={}", q.0)).collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// Writes rows under a header, columns padded to their widest cell, two spaces apart.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::from("  ");
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            s.push_str(cell);
            if i + 1 < widths.len() {
                s.extend(std::iter::repeat_n(' ', widths[i] - cell.chars().count()));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    if header.iter().any(|h| !h.is_empty()) {
        line(&mut header.iter().copied());
    }
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
}

#[derive(Serialize)]
struct Output<'a> {
    cycles: Vec<OutCycle<'a>>,
    pods: Vec<OutPod<'a>>,
    #[serde(rename = "podGroups")]
    pod_groups: Vec<OutPodGroup<'a>>,
    queues: Vec<OutQueue<'a>>,
    jobs: &'a [JobLine],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutCycle<'a> {
    cycle: u64,
    binds: Vec<OutPlacement<'a>>,
    evictions: Vec<OutEviction<'a>>,
    pipelined: Vec<OutPlacement<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    created: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deleted: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    applied: Vec<OutApplied<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    resizes: Vec<OutResize<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    host_lists: Vec<OutHostList<'a>>,
}

#[derive(Serialize)]
struct OutApplied<'a> {
    job: &'a str,
    change: &'a str,
}

#[derive(Serialize)]
struct OutResize<'a> {
    job: &'a str,
    task: &'a str,
    from: i32,
    to: i32,
    reason: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutHostList<'a> {
    config_map: &'a str,
    key: &'a str,
    value: &'a str,
}

#[derive(Serialize)]
struct OutPlacement<'a> {
    pod: &'a str,
    node: &'a str,
}

#[derive(Serialize)]
struct OutEviction<'a> {
    pod: &'a str,
    node: &'a str,
    action: &'a str,
}

#[derive(Serialize)]
struct OutPod<'a> {
    pod: &'a str,
    node: Option<&'a str>,
    phase: &'a str,
    #[serde(rename = "gpuCards", skip_serializing_if = "Option::is_none")]
    gpu_cards: Option<&'a str>,
}

#[derive(Serialize)]
struct OutPodGroup<'a> {
    name: &'a str,
    phase: &'a str,
    conditions: &'a [ConditionLine],
}

#[derive(Serialize)]
struct OutQueue<'a> {
    name: &'a str,
    weight: i32,
    deserved: Option<&'a ResourceList>,
    allocated: &'a ResourceList,
    share: Option<f64>,
}
