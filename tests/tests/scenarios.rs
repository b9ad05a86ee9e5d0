//! The scenario runner: every `tests/scenarios/**/*.yaml` file is simulated through the
//! same code as `volcano-rs simulate`, and the outcome, rendered as text, is compared with
//! the file's `expect` block.
//!
//! `cargo test -p volcano-testkit --test scenarios -- <substring>` runs the matching files;
//! `BLESS=1` rewrites the `expect` blocks with the current outcome (review the diff!).

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;
use volcano_framework::{Profile, Registries};
use volcano_sim::{Manifest, Simulator};
use volcano_testkit::scenario::Scenario;

mod common;

fn registries() -> Registries {
    volcano_builtin::registries()
}

fn list(v: &Value) -> String {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            m.iter().map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or_default())).collect::<Vec<_>>().join(", ")
        }
        _ => "-".into(),
    }
}

fn all_zero(v: &Value) -> bool {
    v.as_object().is_none_or(|m| m.values().all(|q| q.as_str().is_some_and(|s| s == "0")))
}

/// Renders a simulation report (its JSON form) as the text kept in `expect`.
fn render(report: &Value) -> String {
    let mut out = String::new();
    for c in report["cycles"].as_array().into_iter().flatten() {
        let mut lines = Vec::new();
        for b in c["binds"].as_array().into_iter().flatten() {
            lines.push(format!(
                "  bind {} -> {}",
                b["pod"].as_str().unwrap_or_default(),
                b["node"].as_str().unwrap_or_default()
            ));
        }
        for e in c["evictions"].as_array().into_iter().flatten() {
            lines.push(format!(
                "  evict {} on {} by {}",
                e["pod"].as_str().unwrap_or_default(),
                e["node"].as_str().unwrap_or_default(),
                e["action"].as_str().unwrap_or_default()
            ));
        }
        for p in c["pipelined"].as_array().into_iter().flatten() {
            lines.push(format!(
                "  pipeline {} -> {}",
                p["pod"].as_str().unwrap_or_default(),
                p["node"].as_str().unwrap_or_default()
            ));
        }
        // Jobs applied, resized by the autoscaler, their host lists and the pods the job
        // controller deleted (a scale-in after its grace period, a kill).
        let mut jobs = Vec::new();
        for a in c["applied"].as_array().into_iter().flatten() {
            jobs.push(format!(
                "  apply {} ({})",
                a["job"].as_str().unwrap_or_default(),
                a["change"].as_str().unwrap_or_default()
            ));
        }
        for r in c["resizes"].as_array().into_iter().flatten() {
            jobs.push(format!(
                "  resize {} {} {} -> {} ({})",
                r["job"].as_str().unwrap_or_default(),
                r["task"].as_str().unwrap_or_default(),
                r["from"],
                r["to"],
                r["reason"].as_str().unwrap_or_default()
            ));
        }
        for d in c["deleted"].as_array().into_iter().flatten() {
            jobs.push(format!("  delete {}", d.as_str().unwrap_or_default()));
        }
        for h in c["hostLists"].as_array().into_iter().flatten() {
            let value: Vec<&str> = h["value"].as_str().unwrap_or_default().lines().collect();
            jobs.push(format!(
                "  hosts {}[{}]: {}",
                h["configMap"].as_str().unwrap_or_default(),
                h["key"].as_str().unwrap_or_default(),
                value.join(", ")
            ));
        }
        // Listed after the scheduler's decisions, in this order whatever the timing (Jobs are
        // applied before the cycle; the rest happens after its effects).
        let lines: Vec<String> = if jobs.is_empty() { lines } else { lines.into_iter().chain(jobs).collect() };
        if !lines.is_empty() {
            let _ = writeln!(out, "cycle {}", c["cycle"]);
            for l in lines {
                let _ = writeln!(out, "{l}");
            }
        }
    }
    out.push_str("pods\n");
    for p in report["pods"].as_array().into_iter().flatten() {
        let cards = p["gpuCards"].as_str().map(|c| format!(" cards {c}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}: {} {}{cards}",
            p["pod"].as_str().unwrap_or_default(),
            p["node"].as_str().unwrap_or("-"),
            p["phase"].as_str().unwrap_or_default()
        );
    }
    // Pods of Volcano Jobs not created (their task's dependsOn not met), when there are some.
    let mut not_created = Vec::new();
    for j in report["jobs"].as_array().into_iter().flatten() {
        for n in j["notCreated"].as_array().into_iter().flatten() {
            let pods: Vec<&str> = n["pods"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            not_created.push(format!(
                "  {} task {}: {}\n    {}",
                j["name"].as_str().unwrap_or_default(),
                n["task"].as_str().unwrap_or_default(),
                pods.join(", "),
                n["reason"].as_str().unwrap_or_default()
            ));
        }
    }
    if !not_created.is_empty() {
        out.push_str("not created\n");
        for l in not_created {
            let _ = writeln!(out, "{l}");
        }
    }
    out.push_str("podgroups\n");
    for g in report["podGroups"].as_array().into_iter().flatten() {
        let _ =
            write!(out, "  {}: {}", g["name"].as_str().unwrap_or_default(), g["phase"].as_str().unwrap_or_default());
        for c in g["conditions"].as_array().into_iter().flatten() {
            let _ = write!(
                out,
                "\n    {}={} {}",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default()
            );
            if let Some(m) = c["message"].as_str().filter(|m| !m.is_empty()) {
                let _ = write!(out, ": {m}");
            }
        }
        out.push('\n');
    }
    out.push_str("queues\n");
    for q in report["queues"].as_array().into_iter().flatten() {
        if q["deserved"].is_null() && all_zero(&q["allocated"]) {
            continue;
        }
        let share = q["share"].as_f64().map(|s| format!("{s:.3}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "  {}: weight {}, allocated {{{}}}, deserved {{{}}}, share {share}",
            q["name"].as_str().unwrap_or_default(),
            q["weight"],
            list(&q["allocated"]),
            list(&q["deserved"]),
        );
    }
    out
}

fn simulate(path: &Path, scenario: &Scenario) -> String {
    let reg = registries();
    let profile = match &scenario.config {
        Some(c) => Profile::from_yaml(c, &reg),
        None => Profile::builtin_default(&reg),
    };
    let profile = match profile {
        Ok(p) => p,
        Err(e) => return format!("config error: {e}\n"),
    };
    let mut manifest = Manifest::new();
    let name = path.file_name().unwrap_or_default().to_string_lossy().to_string();
    let expanded = scenario.cluster.expand().to_yaml();
    if !expanded.trim().is_empty() {
        if let Err(e) = manifest.load_str(&format!("{name}#cluster"), &expanded) {
            return format!("input error: {e}\n");
        }
    }
    if let Some(objects) = &scenario.objects {
        if let Err(e) = manifest.load_str(&format!("{name}#objects"), objects) {
            return format!("input error: {e}\n");
        }
    }
    let mut sim = match Simulator::new(manifest, profile) {
        Ok(s) => s,
        Err(e) => return format!("input error: {e}\n"),
    };
    if let Err(e) = sim.run(scenario.cycles) {
        return format!("simulation error: {e}\n");
    }
    render(&sim.report().to_json_value())
}

fn bless(path: &Path, text: &str, actual: &str) -> std::io::Result<()> {
    let head = match text.find("\nexpect:") {
        Some(i) => &text[..=i],
        None => text,
    };
    let mut out = head.trim_end().to_string();
    out.push_str("\nexpect: |\n");
    for line in actual.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "  {line}");
        }
    }
    std::fs::write(path, out)
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let blessing = std::env::var("BLESS").is_ok_and(|v| v == "1");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut paths = Vec::new();
    common::scenario_files(&root, &mut paths);
    let (mut passed, mut failed, mut blessed) = (0, 0, 0);
    for path in &paths {
        let rel = path.strip_prefix(&root).unwrap_or(path).display().to_string();
        if !filters.is_empty() && !filters.iter().any(|f| rel.contains(f.as_str())) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("readable scenario");
        let scenario: Scenario = match serde_yaml_ng::from_str(&text) {
            Ok(s) => s,
            Err(e) => {
                println!("scenario {rel} ... FAILED: the file does not parse: {e}");
                failed += 1;
                continue;
            }
        };
        let actual = simulate(path, &scenario);
        let expected = scenario.expect.clone().unwrap_or_default();
        if actual.trim_end() == expected.trim_end() {
            println!("scenario {rel} ... ok");
            passed += 1;
        } else if blessing {
            bless(path, &text, &actual).expect("writable scenario");
            println!("scenario {rel} ... blessed");
            blessed += 1;
        } else {
            println!("scenario {rel} ... FAILED ({})", scenario.description);
            let diff = similar::TextDiff::from_lines(expected.trim_end(), actual.trim_end());
            print!("{}", diff.unified_diff().header("expected", "actual"));
            println!();
            failed += 1;
        }
    }
    if blessed > 0 {
        println!("{blessed} scenario expectation(s) rewritten");
    }
    println!("scenarios: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
