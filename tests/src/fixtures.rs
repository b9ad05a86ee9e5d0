//! The small helpers every plugin and action test needs: a session context, ids by key, a
//! GPU count, a plugin's configuration entry, and a session that runs just one plugin.
//!
//! Tests import them under the short names they use, e.g.
//! `use volcano_testkit::fixtures::{job_id as job, session_ctx as ctx};`.

use volcano_api::conf::PluginOption;
use volcano_framework::resource::Resource;
use volcano_framework::{
    Hooks, JobId, NodeId, Plugin, QueueId, Session, SessionContext, SessionOptions, Snapshot, TaskId,
};

/// The context of session 1 at time 0, with `enqueue` configured.
pub fn session_ctx() -> SessionContext {
    session_ctx_at(0)
}

/// The context of session 1 at `now_ms`, with `enqueue` configured.
pub fn session_ctx_at(now_ms: i64) -> SessionContext {
    SessionContext { now_ms, cycle: 1, uid: "session-1".into(), enqueue_enabled: true }
}

/// The job (PodGroup) `namespace/name`; panics naming it when it is not in the snapshot.
pub fn job_id(snap: &Snapshot, key: &str) -> JobId {
    snap.job_id(key).unwrap_or_else(|| panic!("job {key} is not in the snapshot"))
}

/// The task (pod) `namespace/name`; panics naming it when it is not in the snapshot.
pub fn task_id(snap: &Snapshot, key: &str) -> TaskId {
    let i = snap.tasks.iter().position(|t| &*t.key == key);
    TaskId(i.unwrap_or_else(|| panic!("task {key} is not in the snapshot")) as u32)
}

/// The first task (pod) named `name`, in any namespace; panics naming it when there is none.
pub fn task_named(snap: &Snapshot, name: &str) -> TaskId {
    let i = snap.tasks.iter().position(|t| t.name() == name);
    TaskId(i.unwrap_or_else(|| panic!("no task named {name} in the snapshot")) as u32)
}

/// A configuration entry for plugin `name` with these arguments (a JSON object).
pub fn plugin_option(name: &str, args: serde_json::Value) -> PluginOption {
    PluginOption {
        name: name.into(),
        arguments: serde_json::from_value(args).expect("arguments are a map"),
        ..Default::default()
    }
}

/// The queue `name`; panics naming it when it is not in the snapshot.
pub fn queue_id(snap: &Snapshot, name: &str) -> QueueId {
    snap.queue_id(name).unwrap_or_else(|| panic!("queue {name} is not in the snapshot"))
}

/// The node `name`; panics naming it when it is not in the snapshot.
pub fn node_id(snap: &Snapshot, name: &str) -> NodeId {
    snap.node_id(name).unwrap_or_else(|| panic!("node {name} is not in the snapshot"))
}

/// Whole `nvidia.com/gpu` of a resource vector (Volcano counts them in thousandths).
pub fn gpus(r: &Resource) -> f64 {
    r.get("nvidia.com/gpu") / 1000.0
}

/// A session over `snap` that runs just this plugin, every extension point it registers
/// enabled, sequential (so that results do not depend on threads).
pub fn plugin_session(snap: Snapshot, plugin: Box<dyn Plugin>) -> Session {
    let options = SessionOptions { parallelism: 1, ..SessionOptions::default() };
    Session::open(snap, vec![vec![(plugin, Hooks::all())]], session_ctx(), options)
}
