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
    volcano_builtin::registries()
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
        ("deploy/crds/scheduling.volcano.sh_podgroups.yaml", volcano_api::crds::pod_group()),
        ("deploy/crds/scheduling.volcano.sh_queues.yaml", volcano_api::crds::queue()),
        ("deploy/crds/batch.volcano.sh_jobs.yaml", volcano_api::crds::job()),
        ("deploy/crds/bus.volcano.sh_commands.yaml", volcano_api::crds::command()),
        ("deploy/crds/kai.alibabacloud.com_trainingjobs.yaml", volcano_api::crds::training_job()),
        ("deploy/crds/kai.alibabacloud.com_scaleouts.yaml", volcano_api::crds::scale_out()),
        ("deploy/crds/kai.alibabacloud.com_scaleins.yaml", volcano_api::crds::scale_in()),
        ("deploy/crds/topology.volcano.sh_hypernodes.yaml", volcano_api::crds::hyper_node()),
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
    ("volcano-builtin", 3),
    ("volcano-controller", 3),
    ("volcano-webhook", 3),
    ("volcano-scheduler", 4),
    ("volcano-sim", 4),
    ("volcano-benches", 5),
    ("volcano-replay", 5),
    ("volcano-rs", 6),
];

/// Crates with a narrower rule than their layer: the only workspace crates they may depend on.
const ONLY: &[(&str, &[&str])] = &[
    // The test kit builds fixtures for every crate's tests: api and framework only.
    ("volcano-testkit", &["volcano-api", "volcano-framework"]),
    // The built-in registries and profile loading: the core, no shell.
    ("volcano-builtin", &["volcano-framework", "volcano-plugins", "volcano-actions"]),
    // The kube backend never links the simulator or the bench harness.
    ("volcano-scheduler", &["volcano-api", "volcano-framework", "volcano-builtin", "volcano-kube", "volcano-metrics"]),
    // Volcano's metric families, fed from what the core reports.
    ("volcano-metrics", &["volcano-framework"]),
    // The controller plans from the API types; its shell serves Volcano's controller metrics.
    ("volcano-controller", &["volcano-api", "volcano-framework", "volcano-kube", "volcano-metrics"]),
    // The webhook admits with the API crate's pure checks.
    ("volcano-webhook", &["volcano-api", "volcano-kube"]),
    // The bench harness is an offline shell: the simulator's cluster model, never the kube side
    // (its feature `cluster`, the loader of `volcano-rs bench-cluster`, brings kube's client
    // and no workspace crate; built alone, the harness has it off).
    ("volcano-benches", &["volcano-api", "volcano-framework", "volcano-builtin", "volcano-metrics", "volcano-sim"]),
    // The trace replays are offline shells too: the simulator's cluster and the core.
    (
        "volcano-replay",
        &["volcano-api", "volcano-framework", "volcano-builtin", "volcano-plugins", "volcano-actions", "volcano-sim"],
    ),
];

/// The crates of the offline commands (`simulate`, `explain --manifests`, `bench`, `replay`): none of
/// them depends, directly or not, on a crate that talks to the API server.
const OFFLINE: &[&str] = &["volcano-builtin", "volcano-sim", "volcano-benches", "volcano-replay"];
/// The workspace crates that talk to the API server.
const KUBE_FACING: &[&str] = &["volcano-kube", "volcano-scheduler", "volcano-webhook"];

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

/// The offline commands never go through the kube side: the crates behind `simulate`,
/// `explain --manifests` and `bench` reach no kube-facing workspace crate and no Kubernetes
/// client, async runtime or HTTP crate (the controller's pure part, without its `shell`, is
/// checked by [`the_simulator_links_no_controller_shell`]).
#[test]
fn offline_commands_reach_no_kube_facing_crate() {
    for krate in OFFLINE {
        let listing = cargo_tree(krate, &["--prefix", "none", "--format", "{p}"]);
        for line in listing.lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            assert!(
                !KUBE_FACING.contains(&name),
                "{krate} reaches {name}:\n{}",
                cargo_tree(krate, &["--invert", name])
            );
        }
        assert_no_io(krate);
    }
}

/// The workspace crates, as their directories under the root: every directory with a
/// `Cargo.toml` of a `[package]`.
fn crate_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(root())
        .expect("readable root")
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("Cargo.toml")).is_ok_and(|t| t.lines().any(|l| l == "[package]"))
        })
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    dirs.sort();
    dirs
}

/// The `.rs` files under `dir`, at any depth.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
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
    files.sort();
    files
}

/// The top-level module of a file under `src`: the file or directory directly under it
/// (`lib` and `main` for the crate roots).
fn top_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules of a crate (`src/x.rs` or `src/x/`), crate roots left out.
fn top_modules(crate_dir: &str) -> std::collections::BTreeSet<String> {
    let src = root().join(crate_dir).join("src");
    rust_files(&src).iter().map(|f| top_module(&src, f)).filter(|m| m != "lib" && m != "main").collect()
}

type Edges = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// A crate's module graph: `use crate::x` (or `crate::x::…` anywhere outside tests and
/// comments) in a file of top-level module `m` is an edge `m → x`.
fn module_edges(crate_dir: &str) -> Edges {
    let src = root().join(crate_dir).join("src");
    let modules = top_modules(crate_dir);
    let mut edges = Edges::new();
    for f in rust_files(&src) {
        let m = top_module(&src, &f);
        if m == "lib" || m == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
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
        deps.retain(|d| modules.contains(d) && *d != m);
        edges.entry(m).or_default().extend(deps);
    }
    edges
}

/// A cycle of `edges` (its modules in order, the first repeated at the end), if any.
fn find_cycle(edges: &Edges) -> Option<Vec<String>> {
    // Depth-first search for a back edge.
    fn visit(
        m: &str,
        edges: &Edges,
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
    edges.keys().find_map(|m| visit(m, edges, &mut state, &mut Vec::new()))
}

/// Crates whose modules still import each other in a cycle, being untangled (issue 33).
/// This list only shrinks: a crate listed here without a cycle fails the check too, so that
/// it is removed from the list as soon as its cycle is gone.
const MODULE_CYCLES_ALLOWED: &[&str] = &[];

/// No crate's modules form an import cycle: a module is a file or directory directly under
/// `src`, and `use crate::x` (or `crate::x::…` anywhere outside tests and comments) is an
/// edge ([`module_edges`]).
#[test]
fn crate_modules_have_no_cycle() {
    let crates = crate_dirs();
    assert!(crates.len() >= 14, "expected the workspace crates, found {crates:?}");
    let framework = module_edges("framework");
    assert!(framework.len() > 10, "expected the framework's modules, found {framework:?}");
    let mut problems = Vec::new();
    for krate in &crates {
        let cycle = find_cycle(&module_edges(krate));
        let allowed = MODULE_CYCLES_ALLOWED.contains(&krate.as_str());
        match cycle {
            Some(c) if !allowed => problems.push(format!("{krate}: modules import each other: {}", c.join(" → "))),
            None if allowed => {
                problems.push(format!("{krate} has no module cycle any more: remove it from MODULE_CYCLES_ALLOWED"))
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The cycle finder finds a cycle, and only one that is there.
#[test]
fn the_cycle_finder_sees_a_cycle() {
    let edge = |a: &str, b: &str| (a.to_string(), std::collections::BTreeSet::from([b.to_string()]));
    let chain: Edges = [edge("a", "b"), edge("b", "c")].into_iter().collect();
    assert_eq!(find_cycle(&chain), None);
    let cycle: Edges = [edge("a", "b"), edge("b", "c"), edge("c", "b")].into_iter().collect();
    assert_eq!(find_cycle(&cycle), Some(vec!["b".to_string(), "c".to_string(), "b".to_string()]));
}

/// ARCHITECTURE.md is a map that stays true: it names every workspace crate and every
/// top-level module of each (`src/x.rs` or `src/x/`), and stays short. A crate's entry is the
/// list item that starts with `` - `dir/` `` and its indented continuation lines; it names a
/// module as `` `x` ``, `` `x.rs` `` or `` `x/` ``.
#[test]
fn architecture_names_every_crate_and_module() {
    let map = read("ARCHITECTURE.md");
    let words = map.split_whitespace().count();
    assert!(words <= 1_550, "ARCHITECTURE.md has {words} words: keep it a map (about 1,500 at most)");
    for (i, line) in map.lines().enumerate() {
        assert!(
            line.len() <= 700,
            "ARCHITECTURE.md line {} is {} characters: no longer than a paragraph",
            i + 1,
            line.len()
        );
    }
    let mut missing = Vec::new();
    for krate in crate_dirs() {
        let head = format!("- `{krate}/`");
        let Some(start) = map.lines().position(|l| l.starts_with(&head)) else {
            missing.push(format!("{krate}/ (no entry starting with {head})"));
            continue;
        };
        let lines: Vec<&str> = map.lines().collect();
        let entry: Vec<&str> = std::iter::once(lines[start])
            .chain(lines[start + 1..].iter().copied().take_while(|l| l.starts_with("  ")))
            .collect();
        let entry = entry.join("\n");
        for m in top_modules(&krate) {
            if !["`{m}`", "`{m}.rs`", "`{m}/`"].iter().any(|f| entry.contains(&f.replace("{m}", &m))) {
                missing.push(format!("{krate}/src/{m}"));
            }
        }
    }
    assert!(missing.is_empty(), "ARCHITECTURE.md does not name: {missing:#?}");
}
