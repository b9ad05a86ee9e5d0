//! The real-node suite: the image built here, a single-node cluster from local binaries
//! (a kubelet on containerd and runc, with kube-apiserver, kube-controller-manager and
//! kube-scheduler), `deploy/` installed with `kubectl apply -k`, the example jobs run to
//! Completed by real containers, a rolling update of the scheduler under load, and the
//! uninstall (docs/testing.md, "The real-node suite").
//!
//! The work is done by `deploy/image/build.sh --test-images` and `deploy/e2e/run.sh`, which a
//! person can run by hand too; this test runs them in order and fails with their output.
//! Without `VOLCANO_RS_NODE_ASSETS` (the folder of the Kubernetes binaries) it prints
//! SKIPPED and passes: CI has no Kubernetes binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(what: &str, cmd: &mut Command) {
    eprintln!("real_node: {what}");
    let status = cmd.status().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(status.success(), "{what} failed ({status}); its output is above");
}

#[test]
fn the_install_runs_on_a_real_node() {
    let Some(assets) = std::env::var_os("VOLCANO_RS_NODE_ASSETS") else {
        eprintln!(
            "SKIPPED: the real-node suite needs VOLCANO_RS_NODE_ASSETS (a folder with etcd, kube-apiserver, \
             kube-controller-manager, kube-scheduler and kubelet), root, podman and containerd; see docs/testing.md"
        );
        return;
    };
    let missing: Vec<&str> = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"]
        .into_iter()
        .filter(|b| !Path::new(&assets).join(b).is_file())
        .collect();
    assert!(missing.is_empty(), "VOLCANO_RS_NODE_ASSETS={}: missing {missing:?}", Path::new(&assets).display());
    let state = std::env::temp_dir().join(format!("volcano-rs-node-{}", std::process::id()));
    run(
        "deploy/image/build.sh --test-images",
        Command::new(root().join("deploy/image/build.sh")).arg("--test-images").current_dir(root()),
    );
    run(
        "deploy/e2e/run.sh",
        Command::new(root().join("deploy/e2e/run.sh")).arg(&state).env("VOLCANO_RS_NODE_ASSETS", &assets),
    );
    let summary = std::fs::read_to_string(state.join("summary.txt")).unwrap_or_default();
    assert!(summary.lines().any(|l| l.ends_with("PASSED")), "run.sh exited 0 without passing:\n{summary}");
    let _ = std::fs::remove_dir_all(&state);
}
