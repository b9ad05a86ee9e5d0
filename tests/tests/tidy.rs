//! Tidy checks (rust-analyzer style): the docs and the code agree, the deploy files are up
//! to date, and the crate graph keeps its direction.
//!
//! `BLESS=1 cargo test -p volcano-testkit --test tidy` rewrites the generated CRD files.

use std::path::{Path, PathBuf};

use kube::CustomResourceExt;
use volcano_api::conf::SchedulerConfiguration;
use volcano_api::crd::{PodGroup, Queue};
use volcano_framework::{Profile, Registries};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn registries() -> Registries {
    Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() }
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

#[test]
fn every_plugin_and_action_has_a_doc_page() {
    let reg = registries();
    let mut missing = Vec::new();
    for name in reg.plugins.names() {
        let page = format!("docs/plugins/{name}.md");
        if !root().join(&page).exists() {
            missing.push(page);
        }
    }
    for name in reg.actions.names() {
        let page = format!("docs/actions/{name}.md");
        if !root().join(&page).exists() {
            missing.push(page);
        }
    }
    assert!(missing.is_empty(), "missing doc pages: {missing:?}");
}

/// Every ```yaml block of the docs that is a whole scheduler configuration loads.
#[test]
fn configuration_examples_in_the_docs_load() {
    let reg = registries();
    let mut pages = vec![root().join("docs/configuration.md")];
    for dir in ["docs/plugins", "docs/actions"] {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(root().join(dir)).expect("docs dir").filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        pages.extend(entries);
    }
    let mut checked = 0;
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("readable doc");
        for block in text.split("```yaml").skip(1) {
            let yaml = block.split("```").next().unwrap_or_default();
            if !(yaml.contains("actions:") && yaml.contains("tiers:")) {
                continue;
            }
            if let Err(e) = Profile::from_yaml(yaml, &reg) {
                panic!("{}: a configuration example does not load: {e}\n{yaml}", page.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "expected configuration examples in the docs, found {checked}");
}

#[test]
fn example_configuration_and_deploy_configmap_load() {
    let reg = registries();
    Profile::from_yaml(&read("examples/volcano-scheduler.conf"), &reg).expect("examples/volcano-scheduler.conf");
    let cm: serde_yaml::Value = serde_yaml::from_str(&read("deploy/volcano-scheduler-configmap.yaml")).expect("yaml");
    let conf = cm["data"]["volcano-scheduler.conf"].as_str().expect("the ConfigMap holds volcano-scheduler.conf");
    let parsed = SchedulerConfiguration::from_yaml(conf).expect("parses");
    assert_eq!(parsed, SchedulerConfiguration::builtin_default(), "the deployed ConfigMap is the built-in default");
    Profile::load(parsed, &reg).expect("loads");
}

#[test]
fn crd_files_are_up_to_date() {
    let bless = std::env::var("BLESS").is_ok_and(|v| v == "1");
    for (file, crd) in [
        ("deploy/crds/scheduling.volcano.sh_podgroups.yaml", PodGroup::crd()),
        ("deploy/crds/scheduling.volcano.sh_queues.yaml", Queue::crd()),
    ] {
        let generated = format!(
            "# Generated from volcano-api (tests/tests/tidy.rs); do not edit: BLESS=1 rewrites it.\n{}",
            serde_yaml::to_string(&crd).expect("serialisable")
        );
        let path = root().join(file);
        if bless {
            std::fs::write(&path, &generated).expect("writable");
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(on_disk == generated, "{file} is out of date: run BLESS=1 cargo test -p volcano-testkit --test tidy");
    }
}

/// The scheduling core and the test kit never depend on a Kubernetes client, an async
/// runtime or HTTP (ARCHITECTURE.md, "Architecture invariants").
#[test]
fn the_core_has_no_io_dependencies() {
    let forbidden = ["kube", "kube-runtime", "kube-client", "tokio", "hyper", "reqwest"];
    for krate in ["framework", "plugins", "actions", "tests"] {
        let manifest: toml_like::Manifest = toml_like::parse(&read(&format!("{krate}/Cargo.toml")));
        for dep in manifest.dependencies {
            assert!(!forbidden.contains(&dep.as_str()), "{krate} depends on {dep}");
        }
    }
    // `api` uses kube for its derive only: no client, no runtime.
    let workspace = read("Cargo.toml");
    let kube_line = workspace.lines().find(|l| l.starts_with("kube ")).expect("kube in the workspace dependencies");
    assert!(
        kube_line.contains("default-features = false")
            && kube_line.contains("\"derive\"")
            && !kube_line.contains("client"),
        "kube must be used without default features, for its derive only: {kube_line}"
    );
}

/// Just enough of TOML to list a manifest's `[dependencies]` names.
mod toml_like {
    pub(super) struct Manifest {
        pub(super) dependencies: Vec<String>,
    }

    pub(super) fn parse(text: &str) -> Manifest {
        let mut in_deps = false;
        let mut dependencies = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_deps = line == "[dependencies]";
                continue;
            }
            if in_deps && !line.is_empty() && !line.starts_with('#') {
                if let Some((name, _)) = line.split_once('=') {
                    dependencies.push(name.trim().trim_end_matches(".workspace").to_string());
                }
            }
        }
        Manifest { dependencies }
    }
}
