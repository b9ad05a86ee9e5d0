//! Tidy checks (rust-analyzer style): the docs and the code agree, the deploy files are up
//! to date, and the crate graph keeps its direction.
//!
//! `BLESS=1 cargo test -p volcano-testkit --test tidy` rewrites the generated CRD files.

use std::path::{Path, PathBuf};

use volcano_api::conf::SchedulerConfiguration;
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
    let cm: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&read("deploy/volcano-scheduler-configmap.yaml")).expect("yaml");
    let conf = cm["data"]["volcano-scheduler.conf"].as_str().expect("the ConfigMap holds volcano-scheduler.conf");
    let parsed = SchedulerConfiguration::from_yaml(conf).expect("parses");
    assert_eq!(parsed, SchedulerConfiguration::builtin_default(), "the deployed ConfigMap is the built-in default");
    Profile::load(parsed, &reg).expect("loads");
}

#[test]
fn crd_files_are_up_to_date() {
    let bless = std::env::var("BLESS").is_ok_and(|v| v == "1");
    for (file, crd) in [
        ("deploy/crds/scheduling.volcano.sh_podgroups.yaml", volcano_api::crd::crds::pod_group()),
        ("deploy/crds/scheduling.volcano.sh_queues.yaml", volcano_api::crd::crds::queue()),
        ("deploy/crds/batch.volcano.sh_jobs.yaml", volcano_api::crd::crds::job()),
        ("deploy/crds/bus.volcano.sh_commands.yaml", volcano_api::crd::crds::command()),
    ] {
        let generated = format!(
            "# Generated from volcano-api (tests/tests/tidy.rs); do not edit: BLESS=1 rewrites it.\n{}",
            serde_yaml_ng::to_string(&crd).expect("serialisable")
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

/// Layers of the workspace crates: a crate's normal dependencies on workspace crates go to
/// strictly lower layers only (ARCHITECTURE.md, "Crate graph").
const LAYERS: &[(&str, u32)] = &[
    ("volcano-api", 0),
    ("volcano-kube", 0),
    ("volcano-framework", 1),
    ("volcano-plugins", 2),
    ("volcano-actions", 2),
    ("volcano-testkit", 2),
    ("volcano-metrics", 2),
    ("volcano-controller", 3),
    ("volcano-scheduler", 3),
    ("volcano-webhook", 3),
    ("volcano-sim", 4),
    ("volcano-benches", 5),
    ("volcano-rs", 6),
];

/// Crates with a narrower rule than their layer: the only workspace crates they may depend on.
const ONLY: &[(&str, &[&str])] = &[
    // The test kit builds fixtures for every crate's tests: api and framework only.
    ("volcano-testkit", &["volcano-api", "volcano-framework"]),
    // The kube backend never links the simulator or the bench harness.
    (
        "volcano-scheduler",
        &["volcano-api", "volcano-framework", "volcano-plugins", "volcano-actions", "volcano-kube", "volcano-metrics"],
    ),
    // Volcano's metric families, fed from what the core reports.
    ("volcano-metrics", &["volcano-framework"]),
    // The controller plans from the API types; its shell serves Volcano's controller metrics.
    ("volcano-controller", &["volcano-api", "volcano-framework", "volcano-kube", "volcano-metrics"]),
    // The webhook admits with the API crate's pure checks.
    ("volcano-webhook", &["volcano-api", "volcano-kube"]),
];

/// Packages the pure core must not reach through normal dependencies, directly or not.
const IO_PACKAGES: &[&str] = &["kube-client", "kube-runtime", "tokio", "hyper", "reqwest", "tower"];
const CORE: &[&str] = &["volcano-framework", "volcano-plugins", "volcano-actions", "volcano-testkit"];

struct Graph {
    /// package id → name
    names: std::collections::BTreeMap<String, String>,
    /// package id → normal dependencies (package ids)
    normal: std::collections::BTreeMap<String, Vec<String>>,
    members: Vec<String>,
}

fn cargo_metadata() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    // Only this machine's platform: its dependencies are the ones a build downloaded, so
    // the check needs no network.
    let rustc = std::process::Command::new("rustc").arg("-vV").output().expect("rustc -vV runs");
    let rustc = String::from_utf8_lossy(&rustc.stdout).to_string();
    let host = rustc.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc -vV names the host").to_string();
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--filter-platform", &host])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let mut names = std::collections::BTreeMap::new();
    for p in v["packages"].as_array().expect("packages") {
        names.insert(p["id"].as_str().unwrap().to_string(), p["name"].as_str().unwrap().to_string());
    }
    let members = v["workspace_members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_string()).collect();
    let mut normal = std::collections::BTreeMap::new();
    for node in v["resolve"]["nodes"].as_array().expect("resolve.nodes") {
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
            .map(|d| d["pkg"].as_str().unwrap().to_string())
            .collect();
        normal.insert(node["id"].as_str().unwrap().to_string(), deps);
    }
    Graph { names, normal, members }
}

/// The workspace crate graph keeps its direction (from `cargo metadata`, so that a
/// dependency added anywhere is seen): layers only point down, the narrow crates stay narrow,
/// and nobody depends on the binary crate.
#[test]
fn the_crate_graph_points_down() {
    let g = cargo_metadata();
    let layer = |name: &str| LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l);
    let mut problems = Vec::new();
    for m in &g.members {
        let name = &g.names[m];
        let Some(own) = layer(name) else {
            problems.push(format!("workspace crate {name} has no layer in tidy.rs LAYERS"));
            continue;
        };
        for d in &g.normal[m] {
            let dep = &g.names[d];
            if !g.members.contains(d) {
                continue;
            }
            let dl = layer(dep).unwrap_or(u32::MAX);
            if dl >= own {
                problems.push(format!("{name} (layer {own}) depends on {dep} (layer {dl}): dependencies point down"));
            }
            if let Some((_, only)) = ONLY.iter().find(|(n, _)| n == name) {
                if !only.contains(&dep.as_str()) {
                    problems.push(format!("{name} may depend on {only:?} only, not {dep}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// `cargo tree --offline -e normal -p CRATE EXTRA...`: features resolved as building that
/// crate alone does (`cargo metadata` unifies features over the whole workspace, where the
/// kube backend turns on `kube`'s client and the CLI the controller's shell).
fn cargo_tree(krate: &str, extra: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(&cargo)
        .args(["tree", "--offline", "-e", "normal", "-p", krate])
        .args(extra)
        .current_dir(root())
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree -p {krate}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Panics if `krate` reaches one of [`IO_PACKAGES`] through normal dependencies, showing
/// the path.
fn assert_no_io(krate: &str) {
    let listing = cargo_tree(krate, &["--prefix", "none", "--format", "{p}"]);
    for line in listing.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if IO_PACKAGES.contains(&name) {
            let path = cargo_tree(krate, &["--invert", name]);
            panic!("{krate} reaches {name}:\n{path}");
        }
    }
}

/// The scheduling core and the test kit never reach a Kubernetes client, an async runtime or
/// HTTP, directly or through another crate (ARCHITECTURE.md, "Architecture invariants").
#[test]
fn the_core_has_no_io_dependencies() {
    for core in CORE {
        assert_no_io(core);
    }
}

/// The simulator links the controller's pure part only: `volcano-controller`'s feature
/// `shell` (the reconciler, vcctl's commands, with kube's client and runtime, tokio, axum)
/// stays off, and nothing else brings a Kubernetes client, an async runtime or HTTP.
#[test]
fn the_simulator_links_no_controller_shell() {
    let listing = cargo_tree("volcano-sim", &["--prefix", "none", "--format", "{p} | {f}"]);
    let controller: Vec<&str> = listing.lines().filter(|l| l.starts_with("volcano-controller ")).collect();
    assert!(!controller.is_empty(), "volcano-sim no longer depends on volcano-controller:\n{listing}");
    for line in controller {
        let features = line.rsplit_once(" | ").map(|(_, f)| f).unwrap_or_default();
        assert!(
            !features.split(',').any(|f| f.trim() == "shell"),
            "volcano-sim turns on volcano-controller's feature shell ({line}): depend on it with \
             default-features = false"
        );
    }
    assert_no_io("volcano-sim");
}

/// The framework's modules form no import cycle: a module is a file or directory directly
/// under `framework/src`, and `use crate::x` (or `crate::x::…` anywhere outside tests and
/// comments) is an edge.
#[test]
fn framework_modules_have_no_cycle() {
    let src = root().join("framework/src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("readable").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let module = |p: &Path| -> String {
        let rel = p.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: std::collections::BTreeSet<String> = files.iter().map(|f| module(f)).collect();
    let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for f in &files {
        let m = module(f);
        if m == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let code: String = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        let mut deps = std::collections::BTreeSet::new();
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let inner = &group[..group.find('}').unwrap_or(group.len())];
                for item in inner.split(',') {
                    deps.insert(item.trim().split("::").next().unwrap_or_default().to_string());
                }
            } else {
                deps.insert(rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect());
            }
        }
        deps.retain(|d| modules.contains(d) && *d != m && d != "lib");
        edges.entry(m).or_default().extend(deps);
    }
    assert!(edges.len() > 10, "expected the framework's modules, found {edges:?}");
    // Depth-first search for a back edge.
    fn visit(
        m: &str,
        edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        state: &mut std::collections::BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(1) => {
                let start = path.iter().position(|p| p == m).unwrap();
                let mut cycle = path[start..].to_vec();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            Some(_) => return None,
            None => {}
        }
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for d in edges.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, edges, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = Default::default();
    for m in edges.keys() {
        if let Some(cycle) = visit(m, &edges, &mut state, &mut Vec::new()) {
            panic!("framework modules import each other in a cycle: {}", cycle.join(" → "));
        }
    }
}
