//! The Grafana dashboards (`deploy/grafana/*.json`) and the Prometheus alert rules
//! (`deploy/prometheus/volcano-rs-alerts.yaml`) against a real Prometheus
//! (docs/observability.md#testing-the-dashboards).
//!
//! Without a Prometheus: the dashboards' shape (schema version, the `datasource` and
//! template variables, a description on every panel, unique ids) and the metric names
//! their queries use. With `prometheus` on `PATH` (skipped with a message otherwise):
//! `volcano-rs simulate` writes the metrics of two runs (the examples' GPU cluster with its
//! HyperNodes, and a `capacity` cluster where reclaim evicts), the test serves both files
//! over HTTP, and a
//! Prometheus scrapes them every second with the alert rules loaded. Then every panel
//! query and every rule expression must run without error, every metric they name must
//! have series (or be one `volcano-rs scheduler` serves and `simulate` does not, checked
//! against the scheduler's sources and registry), queries on simulated metrics only must
//! return data, and every rule group must evaluate with health `ok` and the alert states
//! the simulated cluster implies. With `promtool` on `PATH` the rules also pass
//! `promtool check rules` and their unit tests (`volcano-rs-alerts.test.yaml`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{root, run, stderr};
use serde_json::Value;

const DASHBOARDS: [&str; 2] = ["deploy/grafana/volcano-rs-queues.json", "deploy/grafana/volcano-rs-scheduler.json"];
const ALERTS: &str = "deploy/prometheus/volcano-rs-alerts.yaml";
const ALERT_TESTS: &str = "deploy/prometheus/volcano-rs-alerts.test.yaml";

/// Families the dashboards and rules must not name: the job controller's, which neither
/// `simulate` nor a volcano-rs process serves.
const FORBIDDEN: [&str; 3] = [
    "volcano_job_completed_phase_count",
    "volcano_job_failed_phase_count",
    "volcano_controller_job_to_pod_creation_latency_milliseconds",
];

/// The allow-list: families the dashboards and rules may name although `simulate` does not
/// write them, because only a running `volcano-rs scheduler` produces them. A name here
/// needs no series in the test's Prometheus; instead it must be declared where the
/// scheduler serves it (see [`Declared`]):
///
/// - `volcano_rs_*`: volcano-rs's own families, string literals in `scheduler/src/server.rs` and
///   series of the scheduler registry (`volcano_scheduler::server::Metrics`); but not those
///   declared in `metrics/src/scheduler.rs` ([`simulated_rs_families`]), which `simulate`
///   writes: those must have series and data like Volcano's;
/// - `process_*`: the process collector's, in the scheduler registry's text
///   (`volcano_scheduler::server::Metrics`);
/// - the two Volcano families observed by the scheduler's applier only (the bind call and
///   the binds in flight), declared in `metrics/src/scheduler.rs` and fed in
///   `scheduler/src/applier.rs`.
const SCHEDULER_ONLY_PREFIXES: [&str; 2] = ["volcano_rs_", "process_"];
const SCHEDULER_ONLY_FAMILIES: [(&str, &str); 2] = [
    ("volcano_scheduling_stage_duration_milliseconds", "stage_duration.with_label_values(&[\"Bind\"])"),
    ("volcano_goroutines", "goroutines.with_label_values(&[\"binding\"])"),
];

fn scheduler_only(name: &str) -> bool {
    (SCHEDULER_ONLY_PREFIXES.iter().any(|p| name.starts_with(p)) && !simulated_rs_families().contains(family(name)))
        || SCHEDULER_ONLY_FAMILIES.iter().any(|(f, _)| family(name) == *f)
}

/// volcano-rs's own families that `simulate --metrics` writes: the `"volcano_rs_…"` names in
/// `metrics/src/scheduler.rs`, the scheduler metrics the simulator records its cycles in
/// (the HyperNodes' utilisation, the jobs waiting for a network topology).
fn simulated_rs_families() -> &'static BTreeSet<String> {
    static FAMILIES: std::sync::OnceLock<BTreeSet<String>> = std::sync::OnceLock::new();
    FAMILIES.get_or_init(|| {
        let path = "metrics/src/scheduler.rs";
        let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        text.split("\"volcano_rs_")
            .skip(1)
            .filter_map(|rest| rest.split_once('"'))
            .map(|(name, _)| format!("volcano_rs_{name}"))
            .filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .collect()
    })
}

/// A histogram's or summary's series name without its `_bucket`, `_count` or `_sum`.
fn family(name: &str) -> &str {
    ["_bucket", "_count", "_sum"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

// ---------------------------------------------------------------------------------------
// The queries of the dashboards and the rules.

/// One query to check: where it is, and its text.
struct Query {
    /// `deploy/grafana/x.json: panel "Row / Title" target A`, or the rule's name.
    at: String,
    expr: String,
}

fn read_json(path: &str) -> Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON: {e}"))
}

/// Every panel of a dashboard, rows' nested panels included, with its row's title.
fn panels(dashboard: &Value) -> Vec<(String, &Value)> {
    fn walk<'a>(list: &'a Value, row: &str, out: &mut Vec<(String, &'a Value)>) {
        let mut row = row.to_string();
        for p in list.as_array().map(Vec::as_slice).unwrap_or_default() {
            let title = p["title"].as_str().unwrap_or("(untitled)");
            if p["type"] == "row" {
                row = title.to_string();
                out.push((title.to_string(), p));
                walk(&p["panels"], &row, out);
            } else {
                let path = if row.is_empty() { title.to_string() } else { format!("{row} / {title}") };
                out.push((path, p));
                walk(&p["panels"], &row, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], "", &mut out);
    out
}

/// The dashboard's template variables other than the data source.
fn template_variables(dashboard: &Value) -> Vec<&Value> {
    dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter(|v| v["type"] != "datasource")
        .collect()
}

/// Grafana's variables replaced as a query would see them with every value selected:
/// `$__rate_interval`, `$__interval` and `$__range` by `1m`, a template variable (`$queue`,
/// `${queue}`) by `.*`, which is only valid after `=~"` (a multi-value variable expands to
/// a regular expression), so any other use is an error.
fn substitute(expr: &str, variables: &[String]) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, len) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}').ok_or_else(|| format!("unclosed ${{ in {expr}"))?;
            (braced[..end].split(':').next().unwrap_or_default(), end + 2)
        } else {
            let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            (&after[..end], end)
        };
        match name {
            "__rate_interval" | "__interval" | "__range" => out.push_str("1m"),
            n if variables.iter().any(|v| v == n) => {
                if !out.ends_with("=~\"") {
                    return Err(format!("${n} is used outside a `=~\"…\"` matcher (it expands to a regex)"));
                }
                out.push_str(".*");
            }
            n => return Err(format!("unknown variable ${n}")),
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The queries of a dashboard's panels (variables substituted), and its variables' metrics
/// (`label_values(metric, label)`), as (metric, label, where).
fn dashboard_queries(path: &str) -> (Vec<Query>, Vec<(String, String, String)>) {
    let d = read_json(path);
    let vars: Vec<String> =
        template_variables(&d).iter().map(|v| v["name"].as_str().expect("a variable's name").to_string()).collect();
    let mut queries = Vec::new();
    for (title, p) in panels(&d) {
        for t in p["targets"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let raw = t["expr"].as_str().unwrap_or_else(|| panic!("{path}: panel {title:?}: a target without expr"));
            let at = format!("{path}: panel {title:?} target {}", t["refId"].as_str().unwrap_or("?"));
            let expr = substitute(raw, &vars).unwrap_or_else(|e| panic!("{at}: {e}\n  expr: {raw}"));
            queries.push(Query { at, expr });
        }
    }
    let mut label_values = Vec::new();
    for v in template_variables(&d) {
        let name = v["name"].as_str().unwrap_or_default();
        let q = v["query"]["query"].as_str().or(v["query"].as_str()).unwrap_or_default();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{path}: variable {name}: expected label_values(metric, label), got {q:?}"));
        let (metric, label) = inner.split_once(',').expect("label_values(metric, label)");
        label_values.push((metric.trim().to_string(), label.trim().to_string(), format!("{path}: variable ${name}")));
    }
    (queries, label_values)
}

/// The alert rules' expressions, by group.
fn rule_groups() -> Vec<(String, Vec<Query>)> {
    let text = std::fs::read_to_string(root().join(ALERTS)).expect("the alert rules");
    let v: Value = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{ALERTS}: not YAML: {e}"));
    let groups = v["groups"].as_array().unwrap_or_else(|| panic!("{ALERTS}: no groups"));
    groups
        .iter()
        .map(|g| {
            let name = g["name"].as_str().expect("a group's name").to_string();
            let rules = g["rules"]
                .as_array()
                .expect("a group's rules")
                .iter()
                .map(|r| {
                    let alert = r["alert"].as_str().expect("alerting rules only");
                    Query {
                        at: format!("{ALERTS}: alert {alert}"),
                        expr: r["expr"].as_str().expect("expr").to_string(),
                    }
                })
                .collect();
            (name, rules)
        })
        .collect()
}

fn all_queries() -> Vec<Query> {
    let mut out = Vec::new();
    for d in DASHBOARDS {
        out.extend(dashboard_queries(d).0);
    }
    out.extend(rule_groups().into_iter().flat_map(|(_, rules)| rules));
    out
}

/// The metric names a PromQL expression selects: identifiers that are not functions or
/// aggregations (followed by `(`), keywords, or label names (in `{…}` matchers and in
/// `by`/`without`/`on`/`ignoring`/`group_left`/`group_right` lists); strings, ranges and
/// comments are skipped.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const GROUPING: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];
    const KEYWORDS: [&str; 7] = ["and", "or", "unless", "bool", "offset", "inf", "nan"];
    // Aggregations may put their `by`/`without` clause before the parenthesis.
    const AGGREGATIONS: [&str; 12] = [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    ];
    let c: Vec<char> = expr.chars().collect();
    let skip_string = |mut i: usize| {
        let quote = c[i];
        i += 1;
        while i < c.len() && c[i] != quote {
            i += if c[i] == '\\' { 2 } else { 1 };
        }
        i + 1
    };
    let skip_to = |mut i: usize, close: char| {
        while i < c.len() && c[i] != close {
            i = if matches!(c[i], '"' | '\'' | '`') { skip_string(i) } else { i + 1 };
        }
        i + 1
    };
    let next_non_space = |mut i: usize| {
        while i < c.len() && c[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if matches!(ch, '"' | '\'' | '`') {
            i = skip_string(i);
        } else if ch == '{' {
            i = skip_to(i, '}');
        } else if ch == '[' {
            i = skip_to(i, ']');
        } else if ch == '#' {
            i = skip_to(i, '\n');
        } else if ch.is_ascii_digit() || ch == '.' {
            // A number or a duration (0.99, 1000, 5m, 1e3).
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.') {
                i += 1;
            }
        } else if ch.is_ascii_alphabetic() || ch == '_' || ch == ':' {
            let start = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_' || c[i] == ':') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let next = next_non_space(i);
            if GROUPING.contains(&word.as_str()) {
                if c.get(next) == Some(&'(') {
                    i = skip_to(next, ')');
                }
            } else if KEYWORDS.contains(&word.to_ascii_lowercase().as_str())
                || AGGREGATIONS.contains(&word.as_str())
                || c.get(next) == Some(&'(')
            {
                // A keyword, or a function or aggregation.
            } else {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

// ---------------------------------------------------------------------------------------
// Without Prometheus.

#[test]
fn metric_names_are_found_in_promql() {
    let names = |e: &str| metric_names(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            "histogram_quantile(0.99, sum by (action, le) (rate(volcano_action_scheduling_latency_milliseconds_bucket{instance=~\".*\"}[1m])))"
        ),
        ["volcano_action_scheduling_latency_milliseconds_bucket"]
    );
    assert_eq!(
        names("count(max by (queue_name) (volcano_queue_overused{queue_name=~\".*\"}) == 1) or vector(0)"),
        ["volcano_queue_overused"]
    );
    assert_eq!(
        names("rate(process_cpu_seconds_total[1m]) and on (job, instance) volcano_rs_leader{instance=~\"a}b\"}"),
        ["process_cpu_seconds_total", "volcano_rs_leader"]
    );
    assert_eq!(
        names("(max by (queue_name, resource) (a{resource=~\"x|y\"}) - max by(queue_name)(b)) / 1000 > 0\nand on (queue_name) c"),
        ["a", "b", "c"]
    );
    assert_eq!(names("sum(x) without (le) # a comment naming y\n/ z offset 5m + sum by (job) (w)"), ["w", "x", "z"]);
    assert_eq!(
        names("absent(volcano_e2e_scheduling_latency_milliseconds_count)"),
        ["volcano_e2e_scheduling_latency_milliseconds_count"]
    );
    assert_eq!(
        family("volcano_e2e_scheduling_latency_milliseconds_bucket"),
        "volcano_e2e_scheduling_latency_milliseconds"
    );
    assert_eq!(family("volcano_rs_cycles_total"), "volcano_rs_cycles_total");
}

#[test]
fn volcano_rs_families_simulate_writes_are_checked_for_data() {
    let simulated = simulated_rs_families();
    for f in ["volcano_rs_hypernode_utilization", "volcano_rs_network_topology_jobs_waiting"] {
        assert!(simulated.contains(f), "{f} not found in metrics/src/scheduler.rs: {simulated:?}");
        assert!(!scheduler_only(f), "{f} is written by simulate: its queries must return data");
    }
    for f in ["volcano_rs_leader", "volcano_rs_cycles_total", "volcano_rs_snapshot_duration_milliseconds_bucket"] {
        assert!(scheduler_only(f), "{f} is served by volcano-rs scheduler only");
    }
}

#[test]
fn variables_are_substituted_only_in_regex_matchers() {
    let vars = ["queue".to_string()];
    assert_eq!(
        substitute("rate(x{queue_name=~\"$queue\"}[$__rate_interval]) + y{q=~\"${queue}\"}", &vars).unwrap(),
        "rate(x{queue_name=~\".*\"}[1m]) + y{q=~\".*\"}"
    );
    assert!(substitute("x{queue_name=\"$queue\"}", &vars).unwrap_err().contains("outside"));
    assert!(substitute("x{a=~\"$nope\"}", &vars).unwrap_err().contains("unknown variable $nope"));
}

/// The dashboards' shape: what Grafana needs to import them and what the docs promise.
#[test]
fn dashboards_are_well_formed() {
    for path in DASHBOARDS {
        let d = read_json(path);
        assert!(d["schemaVersion"].as_u64().unwrap_or(0) >= 36, "{path}: schemaVersion below 36");
        for key in ["uid", "title", "description"] {
            assert!(d[key].as_str().is_some_and(|s| !s.is_empty()), "{path}: no {key}");
        }
        let vars = d["templating"]["list"].as_array().expect("templating.list");
        let ds = vars.iter().find(|v| v["name"] == "datasource").unwrap_or_else(|| panic!("{path}: no $datasource"));
        assert_eq!((ds["type"].as_str(), ds["query"].as_str()), (Some("datasource"), Some("prometheus")), "{path}");
        for v in template_variables(&d) {
            let name = v["name"].as_str().unwrap_or_default();
            assert_eq!(v["type"], "query", "{path}: ${name}");
            assert_eq!(v["datasource"]["uid"], "${datasource}", "{path}: ${name} queries another data source");
            assert!(v["multi"] == true && v["includeAll"] == true, "{path}: ${name} is not multi-select with All");
        }
        if path.ends_with("queues.json") {
            let q = vars.iter().find(|v| v["name"] == "queue").unwrap_or_else(|| panic!("{path}: no $queue"));
            assert_eq!(q["query"]["query"], "label_values(volcano_queue_allocated_milli_cpu, queue_name)", "{path}");
        }

        let mut ids = BTreeSet::new();
        let mut count = 0;
        for (title, p) in panels(&d) {
            let id = p["id"].as_u64().unwrap_or_else(|| panic!("{path}: panel {title:?} has no id"));
            assert!(ids.insert(id), "{path}: panel {title:?}: id {id} is used twice");
            let pos = &p["gridPos"];
            let (x, w) = (pos["x"].as_u64().unwrap_or(99), pos["w"].as_u64().unwrap_or(99));
            assert!(x + w <= 24 && pos["h"].as_u64().is_some(), "{path}: panel {title:?}: gridPos {pos} off the grid");
            if p["type"] == "row" {
                continue;
            }
            count += 1;
            assert!(
                p["description"].as_str().is_some_and(|s| s.len() > 40),
                "{path}: panel {title:?} has no description saying how to read it"
            );
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{path}: panel {title:?}: not on $datasource");
            let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or_default();
            assert!(!targets.is_empty(), "{path}: panel {title:?} has no query");
            let mut refs = BTreeSet::new();
            for t in targets {
                assert!(refs.insert(t["refId"].as_str().unwrap_or("")), "{path}: panel {title:?}: refIds repeat");
                assert_eq!(
                    t["datasource"]["uid"], "${datasource}",
                    "{path}: panel {title:?}: a target on another source"
                );
            }
        }
        assert!(count >= 15, "{path}: only {count} panels");
    }
    // Every query names metrics, none of the controller's job families.
    for q in all_queries() {
        let names = metric_names(&q.expr);
        assert!(!names.is_empty(), "{}: no metric found in {}", q.at, q.expr);
        for f in FORBIDDEN {
            assert!(!names.iter().any(|n| family(n) == f), "{}: names {f}, which no volcano-rs process serves", q.at);
        }
    }
}

// ---------------------------------------------------------------------------------------
// With Prometheus.

/// `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let dir = std::env::temp_dir().join(format!("volcano-rs-dashboards-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Serves each path's text as the Prometheus text exposition, from threads of this
/// process; returns the port.
fn serve_metrics(routes: BTreeMap<String, String>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().unwrap().port();
    let routes = Arc::new(routes);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let routes = Arc::clone(&routes);
            std::thread::spawn(move || answer(stream, &routes));
        }
    });
    port
}

fn answer(mut s: TcpStream, routes: &BTreeMap<String, String>) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let req = String::from_utf8_lossy(&req);
    let mut line = req.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (line.next().unwrap_or_default(), line.next().unwrap_or_default());
    let path = target.split('?').next().unwrap_or_default();
    let response = match routes.get(path) {
        Some(body) if method == "GET" => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string(),
    };
    let _ = s.write_all(response.as_bytes());
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A running Prometheus, killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts `prometheus` with this configuration, storing under `dir`; retried on another
    /// port if the free port was taken in between.
    fn start(bin: &Path, config: &Path, dir: &Path) -> Prometheus {
        let mut last = String::new();
        for attempt in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let log = dir.join(format!("prometheus-{attempt}.log"));
            let out = std::fs::File::create(&log).unwrap();
            let child = Command::new(bin)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", dir.join(format!("data-{attempt}")).display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .expect("prometheus starts");
            let mut p = Prometheus { child, port, log };
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(status)) = p.child.try_wait() {
                    last = format!("prometheus exited with {status}:\n{}", p.log_text());
                    if !last.contains("address already in use") {
                        panic!("{last}");
                    }
                    break;
                }
                if matches!(http_get(port, "/-/ready"), Ok((200, _))) {
                    return p;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if last.is_empty() {
                panic!("prometheus is not ready after 30 s:\n{}", p.log_text());
            }
        }
        panic!("{last}");
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An API call's `data`; an API error is returned as text.
    fn api(&self, path: &str) -> Result<Value, String> {
        let (code, body) = http_get(self.port, path)?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("HTTP {code}, not JSON ({e}): {body}"))?;
        if v["status"] == "success" {
            Ok(v["data"].clone())
        } else {
            Err(format!("{}: {}", v["errorType"].as_str().unwrap_or("error"), v["error"].as_str().unwrap_or(&body)))
        }
    }

    /// An instant query's result vector (or scalar, as a one-element list).
    fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let data = self.api(&format!("/api/v1/query?query={}", percent_encode(expr)))?;
        Ok(match &data["result"] {
            Value::Array(v) if data["resultType"] != "scalar" => v.clone(),
            other => vec![other.clone()],
        })
    }

    /// Waits until `ok` holds, polling every 200 ms; panics with `what` and the last state
    /// after `timeout`.
    fn wait_for<T>(&self, what: &str, timeout: Duration, mut ok: impl FnMut(&Self) -> Result<T, String>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            match ok(self) {
                Ok(t) => return t,
                Err(e) if Instant::now() > deadline => {
                    panic!("timed out waiting for {what}: {e}\nprometheus log:\n{}", self.log_text())
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

/// An HTTP/1.0 GET on the loopback (the server answers without chunking and closes).
fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(|| format!("no HTTP response: {raw}"))?;
    let code =
        head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| format!("bad status: {head}"))?;
    Ok((code, body.to_string()))
}

/// The cluster of the second simulation: the `capacity` plugin, a queue borrowing the
/// whole cluster (capability above its deserved share) and a queue owed most of it whose
/// gang reclaim makes room for. It produces what the examples do not: the queues'
/// `capacity` gauges and an eviction transaction.
const RECLAIM_CONFIG: &str = r#"actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
"#;

fn reclaim_cluster() -> String {
    let mut y = String::from(
        r#"apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "4", pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "4", pods: "110"}}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: borrower}
spec:
  deserved: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "2"}
  capability: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "8"}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: owner}
spec:
  deserved: {cpu: "28", memory: 112Gi, nvidia.com/gpu: "6"}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: borrow, namespace: default}
spec: {minMember: 1, queue: borrower}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: urgent, namespace: default}
spec: {minMember: 4, queue: owner, minResources: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "4"}}
---
apiVersion: v1
kind: List
items:
"#,
    );
    let resources =
        r#"resources: {requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}"#;
    for i in 0..8 {
        let node = if i < 4 { "n1" } else { "n2" };
        y += &format!(
            "- {{apiVersion: v1, kind: Pod, metadata: {{name: borrow-{i}, namespace: default, annotations: {{scheduling.k8s.io/group-name: borrow}}}}, spec: {{schedulerName: volcano-rs, nodeName: {node}, containers: [{{name: c, image: x, {resources}}}]}}, status: {{phase: Running}}}}\n"
        );
    }
    for i in 0..4 {
        y += &format!(
            "- {{apiVersion: v1, kind: Pod, metadata: {{name: urgent-{i}, namespace: default, annotations: {{scheduling.k8s.io/group-name: urgent}}}}, spec: {{schedulerName: volcano-rs, containers: [{{name: c, image: x, {resources}}}]}}}}\n"
        );
    }
    y
}

/// Runs `volcano-rs simulate` and returns the metrics it wrote.
fn simulate(args: &[&str], metrics: &Path) -> String {
    let mut all: Vec<&str> = vec!["simulate"];
    all.extend_from_slice(args);
    let m = metrics.to_str().unwrap();
    all.extend_from_slice(&["--metrics", m]);
    let o = run(&all);
    assert!(o.status.success(), "volcano-rs {}: {}", all.join(" "), stderr(&o));
    std::fs::read_to_string(metrics).expect("the metrics file")
}

/// Where the allow-listed families are declared: the scheduler's sources and registry.
struct Declared {
    server_rs: String,
    metrics_rs: String,
    applier_rs: String,
    registry: String,
}

impl Declared {
    fn read() -> Self {
        let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        Declared {
            server_rs: read("scheduler/src/server.rs"),
            metrics_rs: read("metrics/src/scheduler.rs"),
            applier_rs: read("scheduler/src/applier.rs"),
            registry: volcano_scheduler::server::Metrics::new().render(),
        }
    }

    /// Why an allow-listed name is not served by `volcano-rs scheduler`, if it is not.
    fn check(&self, name: &str) -> Result<(), String> {
        let literal = |text: &str, n: &str| text.contains(&format!("\"{n}\""));
        // A series of exactly this name in the scheduler registry's exposition (its
        // unlabelled families always have one: `volcano_rs_*` and the process collector's).
        let served =
            |n: &str| self.registry.lines().any(|l| l.strip_prefix(n).is_some_and(|rest| rest.starts_with([' ', '{'])));
        if name.starts_with("volcano_rs_") {
            if !literal(&self.server_rs, family(name)) {
                return Err(format!("{} is not a metric name in scheduler/src/server.rs", family(name)));
            }
            if !served(name) {
                return Err(format!("volcano-rs scheduler's registry has no series {name}"));
            }
            return Ok(());
        }
        if name.starts_with("process_") {
            if !served(name) {
                return Err(format!("volcano-rs scheduler's registry has no series {name} (the process collector)"));
            }
            return Ok(());
        }
        let (f, fed) = SCHEDULER_ONLY_FAMILIES.iter().find(|(f, _)| *f == family(name)).expect("allow-listed");
        if !literal(&self.metrics_rs, f) {
            return Err(format!("{f} is not declared in metrics/src/scheduler.rs"));
        }
        if !self.applier_rs.contains(fed) {
            return Err(format!("scheduler/src/applier.rs no longer feeds {f} ({fed})"));
        }
        Ok(())
    }
}

#[test]
fn dashboards_and_alerts_work_against_a_real_prometheus() {
    let Some(prometheus) = on_path("prometheus") else {
        println!("skipped: `prometheus` is not on PATH (apt-get install prometheus; docs/observability.md)");
        return;
    };
    let started = Instant::now();
    let dir = TempDir::new();

    // The metrics: the examples' GPU cluster, and a capacity cluster where reclaim evicts.
    let examples = simulate(&["examples/"], &dir.0.join("examples.prom"));
    for series in [
        "volcano_rs_hypernode_utilization{hypernode=\"leaf-a\",resource=\"nvidia.com/gpu\",tier=\"1\"}",
        "volcano_rs_hypernode_utilization{hypernode=\"spine\",resource=\"nvidia.com/gpu\",tier=\"2\"}",
    ] {
        assert!(
            examples.lines().any(|l| l.starts_with(series)),
            "the examples' GPU cluster has no HyperNodes (examples/gpu-cluster-topology.yaml): no {series}:\n{examples}"
        );
    }
    std::fs::write(dir.0.join("reclaim.conf"), RECLAIM_CONFIG).unwrap();
    std::fs::write(dir.0.join("reclaim.yaml"), reclaim_cluster()).unwrap();
    let conf = dir.0.join("reclaim.conf");
    let cluster = dir.0.join("reclaim.yaml");
    let reclaim =
        simulate(&["--config", conf.to_str().unwrap(), cluster.to_str().unwrap()], &dir.0.join("reclaim.prom"));
    assert!(
        reclaim.contains("volcano_eviction_transactions_total{action=\"reclaim\"} 1")
            && reclaim.contains("volcano_queue_capacity_milli_cpu{queue_name=\"borrower\"} 32000"),
        "the reclaim cluster no longer reclaims or has no capability:\n{reclaim}"
    );
    let port =
        serve_metrics(BTreeMap::from([("/metrics".to_string(), examples), ("/reclaim/metrics".to_string(), reclaim)]));

    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {rules}\n\
             scrape_configs:\n\
             - job_name: volcano-rs-simulate\n  metrics_path: /metrics\n  static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n\
             - job_name: volcano-rs-simulate-reclaim\n  metrics_path: /reclaim/metrics\n  static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n",
            rules = root().join(ALERTS).display()
        ),
    )
    .unwrap();
    let prom = Prometheus::start(&prometheus, &config, &dir.0);

    // Both targets up, and three scrapes of each in (rates need two samples).
    prom.wait_for("both targets up", Duration::from_secs(20), |p| {
        let targets = p.api("/api/v1/targets")?;
        let active = targets["activeTargets"].as_array().cloned().unwrap_or_default();
        let up = active.iter().filter(|t| t["health"] == "up").count();
        if up == 2 {
            Ok(())
        } else {
            Err(format!("{up} of {} targets up: {active:?}", active.len()))
        }
    });
    prom.wait_for("three scrapes of each target", Duration::from_secs(20), |p| {
        let r = p.query("min(count_over_time(up[1m]))")?;
        let n = r.first().and_then(|s| s["value"][1].as_str()).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        if n >= 3.0 {
            Ok(())
        } else {
            Err(format!("{n} scrapes"))
        }
    });

    // (a) every query runs; (b) every metric it names has series, or is allow-listed and
    // served by volcano-rs scheduler; queries on simulated metrics only return data.
    let names: BTreeSet<String> = prom
        .api("/api/v1/label/__name__/values")
        .expect("metric names")
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let declared = Declared::read();
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut empty_scheduler_only = 0;
    for q in all_queries() {
        checked += 1;
        let result = prom.query(&q.expr);
        let metrics = metric_names(&q.expr);
        match &result {
            Err(e) => failures.push(format!("{}: the query fails: {e}\n    expr: {}", q.at, q.expr)),
            Ok(r) if r.is_empty() && !metrics.iter().any(|n| scheduler_only(n)) && !q.at.contains(ALERTS) => failures
                .push(format!("{}: no data, though every metric it names is simulated\n    expr: {}", q.at, q.expr)),
            Ok(r) if r.is_empty() => empty_scheduler_only += 1,
            Ok(_) => {}
        }
        for n in &metrics {
            if scheduler_only(n) {
                if let Err(e) = declared.check(n) {
                    failures.push(format!("{}: {e}\n    expr: {}", q.at, q.expr));
                }
            } else if !names.contains(n) {
                failures.push(format!(
                    "{}: metric {n} has no series (a typo, or one simulate does not write: add it to the allow-list only if volcano-rs scheduler serves it)\n    expr: {}",
                    q.at, q.expr
                ));
            }
        }
    }
    for d in DASHBOARDS {
        for (metric, label, at) in dashboard_queries(d).1 {
            match prom.query(&format!("count by ({label}) ({metric})")) {
                Ok(r) if r.iter().any(|s| s["metric"][&label].is_string()) => {}
                Ok(_) => failures.push(format!("{at}: label_values({metric}, {label}) has no values")),
                Err(e) => failures.push(format!("{at}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{} of {checked} queries fail:\n{}", failures.len(), failures.join("\n"));

    // (c) every rule group loaded and evaluated, each rule healthy; the alerts the
    // simulated cluster implies are there: the scraped files never change, so the
    // scheduler is not cycling; the examples' research queue is starved (giant-moe waits
    // for 32 GPUs below research's deserved share) and giant-moe is short of its gang.
    let groups: Vec<String> = rule_groups().into_iter().map(|(g, _)| g).collect();
    let expected: [(&str, &str, &str); 5] = [
        ("VolcanoSchedulerNotCycling", "firing", "job=volcano-rs-simulate"),
        ("VolcanoSchedulerNotCycling", "firing", "job=volcano-rs-simulate-reclaim"),
        ("VolcanoQueueStarvedCPU", "pending", "queue_name=research"),
        ("VolcanoQueueStarvedGPU", "pending", "queue_name=research"),
        ("VolcanoJobUnschedulable", "pending", "job_id=giant-moe"),
    ];
    let alerts = prom.wait_for("every rule evaluated with the expected alerts", Duration::from_secs(20), |p| {
        let data = p.api("/api/v1/rules")?;
        let loaded = data["groups"].as_array().cloned().unwrap_or_default();
        let mut problems = Vec::new();
        let mut alerts = Vec::new();
        for g in &groups {
            let Some(lg) = loaded.iter().find(|l| l["name"] == g.as_str()) else {
                problems.push(format!("group {g} is not loaded"));
                continue;
            };
            for r in lg["rules"].as_array().cloned().unwrap_or_default() {
                let name = r["name"].as_str().unwrap_or("?").to_string();
                if r["health"] != "ok" || r["lastError"].as_str().is_some_and(|e| !e.is_empty()) {
                    problems.push(format!("rule {name}: health {} lastError {}", r["health"], r["lastError"]));
                }
                if r["lastEvaluation"].as_str().is_none_or(|t| t.starts_with("0001-")) {
                    problems.push(format!("rule {name} not evaluated yet"));
                }
                for a in r["alerts"].as_array().cloned().unwrap_or_default() {
                    let labels: Vec<String> = a["labels"]
                        .as_object()
                        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect())
                        .unwrap_or_default();
                    alerts.push((name.clone(), a["state"].as_str().unwrap_or_default().to_string(), labels));
                }
            }
        }
        for (name, state, label) in expected {
            if !alerts.iter().any(|(n, s, l)| n == name && s == state && l.iter().any(|x| x == label)) {
                problems.push(format!("no {state} {name}{{{label}}}"));
            }
        }
        if problems.is_empty() {
            Ok(alerts)
        } else {
            Err(format!("{}\nalerts: {alerts:?}", problems.join("\n")))
        }
    });
    let unexpected: Vec<_> = alerts
        .iter()
        .filter(|(n, s, l)| !expected.iter().any(|(en, es, el)| en == n && es == s && l.iter().any(|x| x == el)))
        .collect();
    assert!(unexpected.is_empty(), "alerts the simulated cluster does not imply: {unexpected:?}");

    // (d) promtool, when installed.
    let promtool = match on_path("promtool") {
        Some(promtool) => {
            let rules_dir = root().join("deploy/prometheus");
            for args in [["check", "rules", ALERTS], ["test", "rules", ALERT_TESTS]] {
                let file = root().join(args[2]);
                let o = Command::new(&promtool)
                    .args(&args[..2])
                    .arg(&file)
                    .current_dir(&rules_dir)
                    .output()
                    .expect("promtool runs");
                assert!(
                    o.status.success(),
                    "promtool {} {} {}:\n{}{}",
                    args[0],
                    args[1],
                    args[2],
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            "promtool check rules and test rules passed"
        }
        None => "promtool not on PATH: its checks skipped",
    };
    println!(
        "{checked} queries of {} dashboards and {} rule groups checked against Prometheus ({empty_scheduler_only} empty: they read metrics only volcano-rs scheduler serves); {} alerts as expected; {promtool}; {:.1} s",
        DASHBOARDS.len(),
        groups.len(),
        alerts.len(),
        started.elapsed().as_secs_f64()
    );
}
