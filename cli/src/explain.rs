//! `volcano-rs explain`: what one scheduling cycle sees of a job, on a cluster (the
//! scheduler's caches, `volcano_scheduler::explain`) or on manifests (simulated as `simulate`
//! does, then one more cycle explained).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use volcano_sim::{normalise_for, FieldValidation, Manifest, SimError, Simulator};

use crate::load_profile;

#[derive(Args, Debug)]
pub(crate) struct ExplainArgs {
    /// The job: `NAMESPACE/NAME` of a PodGroup or of a Volcano Job.
    #[arg(value_name = "NAMESPACE/NAME")]
    job: String,
    /// Explain on these manifests instead of a cluster (a file or a directory; repeat the
    /// flag for several): they are simulated as `simulate` does (until a cycle changes
    /// nothing, or --cycles), then the next cycle is explained.
    #[arg(long, value_name = "FILE")]
    manifests: Vec<PathBuf>,
    /// With --manifests: run exactly N cycles before the explained one.
    #[arg(long, value_name = "N", requires = "manifests")]
    cycles: Option<u32>,
    /// The scheduler configuration (Volcano's file or its ConfigMap); default: the built-in
    /// configuration.
    #[arg(long = "scheduler-conf", alias = "config", value_name = "FILE")]
    scheduler_conf: Option<PathBuf>,
    /// The scheduler names whose pods are scheduled (repeatable).
    #[arg(long = "scheduler-name", value_name = "NAME", default_value = "volcano-rs")]
    scheduler_names: Vec<String>,
    /// The kubeconfig (cluster mode); in-cluster configuration or ~/.kube/config when absent.
    #[arg(long, value_name = "FILE", conflicts_with = "manifests")]
    kubeconfig: Option<PathBuf>,
    /// Cluster mode: only the nodes with this label, as the scheduler's --node-selector
    /// (KEY:VALUE, repeatable).
    #[arg(long = "node-selector", value_name = "KEY:VALUE", conflicts_with = "manifests")]
    node_selector: Vec<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = ExplainOutput::Text)]
    output: ExplainOutput,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExplainOutput {
    /// Readable text.
    Text,
    /// JSON, for tools.
    Json,
}

pub(crate) fn explain(args: &ExplainArgs) -> anyhow::Result<String> {
    use volcano_scheduler::explain::Explained;
    if args.job.split_once('/').is_none_or(|(ns, n)| ns.is_empty() || n.is_empty()) {
        anyhow::bail!("explain: {:?} is not NAMESPACE/NAME", args.job);
    }
    let profile = load_profile(args.scheduler_conf.as_deref())?;
    let found = if args.manifests.is_empty() {
        let selector = volcano_scheduler::options::parse_node_selector(&args.node_selector)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let profile = std::sync::Arc::new(profile);
        runtime.block_on(async {
            let client = volcano_kube::client(args.kubeconfig.as_deref()).await?;
            let explained = volcano_scheduler::explain::explain(
                &client,
                args.scheduler_names.clone(),
                selector,
                profile,
                &args.job,
                std::time::Duration::from_secs(120),
            )
            .await?;
            anyhow::Ok(match explained {
                Explained::Job(e) => Some(*e),
                Explained::NotFound => None,
            })
        })?
    } else {
        let manifest = Manifest::from_paths_with(&args.manifests, FieldValidation::Strict).map_err(SimError::from)?;
        let normalised = normalise_for(manifest, &args.scheduler_names).map_err(SimError::from)?;
        let mut sim = Simulator::from_normalised(normalised, profile)?;
        sim.run(args.cycles)?;
        sim.explain(&args.job)?
    };
    let Some(e) = found else {
        anyhow::bail!(
            "explain: no PodGroup and no Volcano Job {} is scheduled by {}",
            args.job,
            args.scheduler_names.join(", ")
        );
    };
    Ok(match args.output {
        ExplainOutput::Text => e.to_string(),
        ExplainOutput::Json => {
            let mut s = serde_json::to_string_pretty(&explanation_json(&e))?;
            s.push('\n');
            s
        }
    })
}

/// An explanation as JSON (docs/observability.md shows the fields).
pub(crate) fn explanation_json(e: &volcano_framework::Explanation) -> serde_json::Value {
    use serde_json::json;
    json!({
        "job": e.job,
        "queue": e.queue,
        "priority": e.priority,
        "minMember": e.min_member,
        "phase": e.phase,
        "ready": e.ready,
        "tasks": e.tasks,
        "notAdmitted": e.not_admitted,
        "refused": e.refused,
        "rolledBack": e.rolled_back.iter().map(|(t, n)| json!({"pod": t, "node": n})).collect::<Vec<_>>(),
        "placed": e.placed.iter().map(|(t, n, s)| json!({"pod": t, "node": n, "status": s})).collect::<Vec<_>>(),
        "blocked": e.blocked.iter().map(|b| json!({
            "count": b.count,
            "examples": b.examples,
            "error": b.error,
            "nodes": b.nodes,
            "reasons": b.reasons.iter().map(|(r, n)| json!({"reason": r, "nodes": n})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "notTried": e.not_tried,
        "ahead": e.ahead.iter().map(|a| json!({"job": a.job, "by": a.by, "placed": a.placed, "pending": a.pending})).collect::<Vec<_>>(),
        "moreAhead": e.more_ahead,
        "preemption": e.preemption,
        "condition": e.condition,
        "networkTopology": e.network_topology,
    })
}
