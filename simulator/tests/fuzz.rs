//! The manifest reader, the normalisation, the first cycles and the configuration loader
//! never panic, whatever the input: random text and mutations of valid inputs give a result
//! or an error, never a crash. (Property tests with fixed seeds: deterministic and fast.)

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use volcano_framework::{Profile, Registries};
use volcano_sim::{normalise_for, FieldValidation, Manifest, Simulator};

const EXAMPLE: &str = include_str!("../../examples/gpu-cluster.yaml");
const CONF: &str = include_str!("../../examples/volcano-scheduler.conf");
const SMALL: &str = "apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
spec: {taints: [{key: k, value: v, effect: NoSchedule}]}
status: {allocatable: {cpu: \"4\", memory: 8Gi, nvidia.com/gpu: \"2\", pods: \"10\"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q1, annotations: {volcano.sh/hierarchy: root/a, volcano.sh/hierarchy-weights: 1/2}}
spec: {weight: 2, capability: {cpu: \"3\"}, deserved: {cpu: \"2\"}, guarantee: {resource: {cpu: \"1\"}}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: g, namespace: ml}
spec: {minMember: 2, queue: q1, minResources: {cpu: \"2\"}, minTaskMember: {w: 1}}
status: {phase: Inqueue}
---
apiVersion: v1
kind: Pod
metadata: {name: p0, namespace: ml, annotations: {scheduling.k8s.io/group-name: g, volcano.sh/task-spec: w}}
spec:
  schedulerName: volcano-rs
  priority: 5
  tolerations: [{key: k, operator: Exists}]
  containers: [{name: c, image: i, resources: {requests: {cpu: \"1\", memory: 1Gi, nvidia.com/gpu: \"1\"}, limits: {nvidia.com/gpu: \"1\"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: ml, annotations: {scheduling.k8s.io/group-name: g}}
spec:
  schedulerName: volcano-rs
  nodeName: n1
  containers: [{name: c, image: i, resources: {requests: {cpu: \"1\"}}}]
status: {phase: Running}
";

/// Block-style YAML as `kubectl get -o yaml` and serde_yaml_ng write it (the fast reader's
/// subset), with an unknown field, quoted numbers, empty collections and comments.
const BLOCK: &str = "# a dump
apiVersion: v1
kind: Node
metadata:
  labels:
    kubernetes.io/hostname: n1
    zone: a
  name: n1
spec:
  taints:
  - effect: NoSchedule
    key: k
    value: 'true'
status:
  allocatable:
    cpu: '4'
    memory: 8Gi
    nvidia.com/gpu: '2'
    pods: '10'
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: q1
spec:
  capability:
    cpu: '3'
  weight: 2
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  creationTimestamp: 2026-01-01T00:00:00Z
  name: g
  namespace: ml
spec:
  minMember: 2
  minResources:
    cpu: '2'
  queue: q1
status:
  phase: Inqueue
--- # a comment after the marker
apiVersion: v1
kind: Pod
metadata:
  annotations:
    scheduling.k8s.io/group-name: g
  labels: {}
  name: p0
  namespace: ml
spec:
  containers:
  - args: []
    image: i
    name: c
    resources:
      limits:
        nvidia.com/gpu: '1'
      requests:
        cpu: '1'
        memory: 1Gi
        nvidia.com/gpu: '1'
  priority: -5
  schedulerName: volcano-rs
  tolerations:
  - key: k
    operator: Exists
  unknownField: 1
---
apiVersion: v1
kind: Pod
metadata:
  name: p1
  namespace: ml
  annotations:
    scheduling.k8s.io/group-name: g
spec:
  schedulerName: volcano-rs
  nodeName: n1
  containers:
  -   name: c
      image: \"i\"
      resources:
        requests:
          cpu: 1
status:
  phase: Running
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: skipped
data:
  a: x
";

/// What reading a text gives, for comparisons: the objects, warnings and skipped kinds, or
/// the error with its causes.
fn read(text: &str, validation: FieldValidation, reference: bool) -> String {
    let mut m = Manifest::with_validation(validation);
    let result = if reference { m.load_str_reference("f.yaml", text) } else { m.load_str("f.yaml", text) };
    match result {
        Ok(()) => format!("{:?}\n{:?}\n{:?}", m.entries, m.warnings, m.skipped),
        Err(e) => {
            let mut s = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                s.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            s
        }
    }
}

fn registries() -> Registries {
    Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() }
}

fn runner(cases: u32) -> TestRunner {
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// Reads, normalises and schedules a text for up to two cycles; any error is fine. True
/// when the cycles ran.
fn simulate(text: &str, profile: &Profile) -> bool {
    let mut m = Manifest::new();
    if m.load_str("fuzz.yaml", text).is_err() {
        return false;
    }
    let Ok(n) = normalise_for(m, &["volcano-rs".to_string()]) else { return false };
    let Ok(mut sim) = Simulator::from_normalised(n, profile.clone_for_test()) else { return false };
    let ran = sim.run(Some(2)).is_ok();
    let _ = sim.report().to_table();
    ran
}

/// Replaces, inserts or deletes characters, duplicates or drops lines, and swaps numbers for
/// awkward ones.
fn mutate(text: &str, ops: &[(u8, usize, String)]) -> String {
    let mut s = text.to_string();
    for (op, at, piece) in ops {
        if s.is_empty() {
            s.push_str(piece);
            continue;
        }
        let mut i = at % s.len();
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        match op % 6 {
            0 => s.insert_str(i, piece),
            1 => {
                let mut end = (i + piece.len().max(1)).min(s.len());
                while !s.is_char_boundary(end) {
                    end += 1;
                }
                s.replace_range(i..end, "");
            }
            2 => {
                let lines: Vec<&str> = s.lines().collect();
                let l = at % lines.len().max(1);
                let mut v: Vec<String> = lines.iter().map(|x| x.to_string()).collect();
                if let Some(line) = v.get(l).cloned() {
                    v.insert(l, line);
                }
                s = v.join("\n");
            }
            3 => {
                let lines: Vec<&str> = s.lines().collect();
                let l = at % lines.len().max(1);
                s = lines.iter().enumerate().filter(|(j, _)| *j != l).map(|(_, x)| *x).collect::<Vec<_>>().join("\n");
            }
            4 => {
                // The next number becomes something awkward.
                if let Some(pos) = s[i..].find(|c: char| c.is_ascii_digit()).map(|p| p + i) {
                    let end = s[pos..].find(|c: char| !c.is_ascii_digit()).map_or(s.len(), |e| e + pos);
                    let awkward = ["-1", "0", "0.5", "99999999999999999999", "1e400", "2147483648", "-0", "1.5Ki"];
                    s.replace_range(pos..end, awkward[at % awkward.len()]);
                }
            }
            _ => s.replace_range(i..i, &piece.chars().rev().collect::<String>()),
        }
    }
    s
}

fn pieces() -> impl Strategy<Value = Vec<(u8, usize, String)>> {
    let piece = prop_oneof![
        Just(String::new()),
        Just(": ".to_string()),
        Just("\n- ".to_string()),
        Just("{".to_string()),
        Just("---\n".to_string()),
        Just("nvidia.com/gpu: \"0.5\"".to_string()),
        Just("minMember: -3".to_string()),
        Just("nodeName: ghost".to_string()),
        Just("phase: Runing".to_string()),
        Just("kind: List\nitems: [1, {}]".to_string()),
        "[ -~]{0,12}",
    ];
    // Half of the operations change a number, which keeps the YAML valid and reaches the
    // checks and the scheduler with awkward values.
    let op = prop_oneof![Just(4u8), any::<u8>()];
    proptest::collection::vec((op, any::<usize>(), piece), 1..3)
}

trait CloneForTest {
    fn clone_for_test(&self) -> Profile;
}

impl CloneForTest for Profile {
    fn clone_for_test(&self) -> Profile {
        Profile::load(self.conf.clone(), &registries()).expect("a loaded profile loads again")
    }
}

#[test]
fn random_text_never_panics() {
    let profile = Profile::builtin_default(&registries()).unwrap();
    runner(256)
        .run(&"(?s).{0,200}", |text| {
            simulate(&text, &profile);
            let _ = Profile::from_yaml(&text, &registries());
            Ok(())
        })
        .unwrap();
}

#[test]
fn mutated_manifests_never_panic() {
    let profile = Profile::from_yaml(CONF, &registries()).unwrap();
    assert!(simulate(SMALL, &profile) && simulate(EXAMPLE, &profile), "the unmutated inputs simulate");
    let ran = std::cell::Cell::new(0);
    // FUZZ_CASES=N runs more cases (a longer hunt); the suite runs 192.
    let cases: u32 = std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(192);
    runner(cases)
        .run(&(pieces(), any::<bool>()), |(ops, big)| {
            let base = if big { EXAMPLE } else { SMALL };
            if simulate(&mutate(base, &ops), &profile) {
                ran.set(ran.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    // Mutations must not all be rejected at the door, or the cycles would go untested.
    assert!(ran.get() * 5 >= cases, "only {} of {cases} mutated inputs reached the scheduler", ran.get());
}

#[test]
fn mutated_configurations_never_panic() {
    let confs = [CONF.to_string(), volcano_api::conf::DEFAULT_SCHEDULER_CONF.to_string()];
    runner(256)
        .run(&(pieces(), 0..2usize), |(ops, which)| {
            let text = mutate(&confs[which], &ops);
            if let Ok(profile) = Profile::from_yaml(&text, &registries()) {
                // A configuration that loads must also run.
                simulate(SMALL, &profile);
            }
            Ok(())
        })
        .unwrap();
}

/// Scalars YAML types or writes in ways the block reader must read as serde_yaml_ng does or
/// leave to it: numbers in every spelling, booleans and nulls of YAML 1.1 and 1.2, quotes
/// and escapes, text outside ASCII, comments, block scalars, anchors, aliases, tags, flow
/// collections, tabs and carriage returns.
const AWKWARD_SCALARS: &[&str] = &[
    ".inf",
    "-.inf",
    "+.inf",
    ".NaN",
    ".5",
    "-.5",
    "+1",
    "0x1F",
    "-0x1F",
    "0o17",
    "0b11",
    "010",
    "00",
    "-0",
    "1e3",
    "1E-3",
    "1.",
    "1_000",
    "18446744073709551616",
    "-9223372036854775809",
    "10.0.0.1",
    "2026-01-01",
    "64Gi",
    "inf",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "True",
    "FALSE",
    "tRUE",
    "~",
    "null",
    "NULL",
    "",
    "''",
    "''''",
    "'it''s'",
    "'a\\nb'",
    "\"\"",
    "\"1\"",
    "'1'",
    "\"caf\\u00e9\"",
    "\"a\\\"b\"",
    "\"x # y\"",
    "caf\u{e9}",
    "a # c",
    "a#c",
    "a: b",
    "a:",
    "|\n  x",
    "|-\n  x\n",
    ">\n  x\n  y",
    "&a x",
    "*a",
    "!!str 1",
    "{a: 1}",
    "[1, 2]",
    "{}",
    "[]",
    "{ }",
    "a\tb",
    "1\r",
    "- x",
    "-",
    "?x",
    ":x",
    "@x",
    "`x",
    "%x",
];

/// Replaces the value after the next `: ` at or after `at` (to the end of its line) with
/// `scalar`.
fn retype(text: &str, at: usize, scalar: &str) -> String {
    let mut start = at % text.len().max(1);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let Some(colon) = text[start..].find(": ").map(|p| p + start + 2) else { return text.to_string() };
    let end = text[colon..].find('\n').map_or(text.len(), |p| p + colon);
    format!("{}{scalar}{}", &text[..colon], &text[end..])
}

/// The fast path (the block reader, or serde_yaml_ng document by document, each document
/// decoded at once) gives exactly what the reference path (the whole file into strict
/// `Value`s, then decoding) gives: the same objects, origins, warnings and skipped kinds,
/// or the same error, for valid and mutated manifests in every validation mode, and with
/// values swapped for scalars YAML types or writes awkwardly.
#[test]
fn fast_and_reference_reading_agree() {
    let modes = [FieldValidation::Strict, FieldValidation::Warn, FieldValidation::Ignore];
    for base in [BLOCK, SMALL, EXAMPLE] {
        for mode in modes {
            assert_eq!(read(base, mode, false), read(base, mode, true), "{mode:?}");
        }
    }
    // The block text reads (in warn mode: its unknown field is a warning).
    let mut m = Manifest::with_validation(FieldValidation::Warn);
    m.load_str("f.yaml", BLOCK).expect("valid");
    assert_eq!(m.entries.len(), 5);
    assert!(m.warnings.iter().any(|w| w.contains("unknown field \"spec.unknownField\"")), "{:?}", m.warnings);
    // Every awkward scalar in every value of the block text.
    for scalar in AWKWARD_SCALARS {
        let mut at = 0;
        while let Some(p) = BLOCK[at..].find(": ").map(|p| p + at) {
            let text = retype(BLOCK, p, scalar);
            assert_eq!(read(&text, FieldValidation::Warn, false), read(&text, FieldValidation::Warn, true), "{text:?}");
            at = p + 2;
        }
    }
    let cases: u32 = std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(384);
    let retypes = proptest::collection::vec((any::<usize>(), 0..AWKWARD_SCALARS.len()), 0..3);
    runner(cases)
        .run(&(pieces(), 0..3usize, 0..3usize, retypes), |(ops, which, mode, retypes)| {
            let mut text = mutate([BLOCK, SMALL, EXAMPLE][which], &ops);
            for (at, scalar) in retypes {
                text = retype(&text, at, AWKWARD_SCALARS[scalar]);
            }
            let mode = modes[mode];
            prop_assert_eq!(read(&text, mode, false), read(&text, mode, true), "{:?} on {:?}", mode, text);
            Ok(())
        })
        .unwrap();
}
