//! Test actions that do not depend on the in-tree plugins and actions, so the simulator's
//! tests exercise the simulator alone.
#![allow(dead_code, unreachable_pub)]

use volcano_api::conf::Arguments;
use volcano_framework::{Action, ArgsError, NodeId, Profile, Registries, Session, Statement, TaskId, TaskStatus};
use volcano_sim::{Manifest, Simulator};

/// Binds the first pending task of a job (by `namespace/name`) to the first node it fits.
struct BindOne;

impl Action for BindOne {
    fn name(&self) -> &'static str {
        "bind-one"
    }
    fn execute(&self, ssn: &mut Session) {
        let mut pending: Vec<TaskId> = (0..ssn.snap.tasks.len() as u32)
            .map(TaskId)
            .filter(|t| {
                let t = ssn.snap.task(*t);
                t.status == TaskStatus::Pending && t.job.is_some()
            })
            .collect();
        pending.sort_by(|a, b| ssn.snap.task(*a).key.cmp(&ssn.snap.task(*b).key));
        for t in pending {
            let node = (0..ssn.snap.nodes.len() as u32)
                .map(NodeId)
                .find(|n| ssn.snap.node(*n).fits_future_idle(ssn.snap.task(t)).is_ok());
            if let Some(n) = node {
                ssn.allocate(t, n);
                return;
            }
        }
    }
}

/// Binds every pending task of a job to the first node, whether it fits or not.
struct Overcommit;

impl Action for Overcommit {
    fn name(&self) -> &'static str {
        "overcommit"
    }
    fn execute(&self, ssn: &mut Session) {
        let pending: Vec<TaskId> = (0..ssn.snap.tasks.len() as u32)
            .map(TaskId)
            .filter(|t| ssn.snap.task(*t).status == TaskStatus::Pending && ssn.snap.task(*t).job.is_some())
            .collect();
        for t in pending {
            ssn.allocate(t, NodeId(0));
        }
    }
}

/// Evicts every running task of a job.
struct EvictAll;

impl Action for EvictAll {
    fn name(&self) -> &'static str {
        "evict-all"
    }
    fn execute(&self, ssn: &mut Session) {
        let running: Vec<TaskId> = (0..ssn.snap.tasks.len() as u32)
            .map(TaskId)
            .filter(|t| ssn.snap.task(*t).status == TaskStatus::Running && ssn.snap.task(*t).job.is_some())
            .collect();
        let mut st = Statement::new();
        for t in running {
            st.evict(ssn, t, "test eviction");
        }
        st.commit(ssn);
    }
}

fn bind_one(_: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    Ok(Box::new(BindOne))
}
fn overcommit(_: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    Ok(Box::new(Overcommit))
}
fn evict_all(_: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    Ok(Box::new(EvictAll))
}

/// A profile running the given test actions (comma-separated), with no plugins.
pub fn profile(actions: &str) -> Profile {
    let mut r = Registries::default();
    r.actions.register("bind-one", bind_one).unwrap();
    r.actions.register("overcommit", overcommit).unwrap();
    r.actions.register("evict-all", evict_all).unwrap();
    Profile::from_yaml(&format!("actions: \"{actions}\"\ntiers: []\n"), &r).unwrap()
}

/// A manifest from one YAML text named `test.yaml`.
pub fn manifest(yaml: &str) -> Manifest {
    let mut m = Manifest::new();
    m.load_str("test.yaml", yaml).unwrap();
    m
}

/// A simulator over a YAML text with the given test actions.
pub fn simulator(yaml: &str, actions: &str) -> Simulator {
    Simulator::new(manifest(yaml), profile(actions)).unwrap()
}

/// A node document.
pub fn node(name: &str, cpu: &str, memory: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nstatus: {{allocatable: {{cpu: \"{cpu}\", memory: {memory}, pods: \"110\"}}}}\n"
    )
}

/// A pod document of volcano-rs requesting cpu and memory, with extra YAML lines for
/// `metadata` (`annotations: …`) left out when empty.
pub fn pod(ns: &str, name: &str, cpu: &str, memory: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  schedulerName: volcano-rs\n  containers:\n  - name: c\n    image: busybox\n    resources: {{requests: {{cpu: \"{cpu}\", memory: {memory}}}}}\n"
    )
}

/// Joins documents with `---`.
pub fn docs(parts: &[String]) -> String {
    parts.join("---\n")
}
