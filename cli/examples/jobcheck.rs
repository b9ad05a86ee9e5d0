//! `jobcheck`: the entrypoint of the test image that the real-node suite runs in place of the
//! training images of `examples/jobs/` (docs/testing.md, "The real-node suite").
//!
//! Each argument is one expectation about the container it runs in; every one is checked,
//! each failure is printed on standard error, and the exit status is 0 only when all hold:
//!
//! - `env:NAME=VALUE`: the variable `NAME` is exactly `VALUE`;
//! - `json-env:NAME=JSON`: the variable `NAME` holds JSON equal to `JSON` (key order aside);
//! - `file:PATH=TEXT`: the file holds exactly `TEXT` (`\n` in `TEXT` is a line break);
//! - `nonempty:PATH`: the file exists and is not empty;
//! - `contains:PATH=OTHER`: the file `PATH` contains the whole text of the file `OTHER`;
//! - `hostname=NAME`: the container's host name;
//! - `sleep=SECONDS`: after the checks, wait that long before exiting (a pod that others
//!   depend on stays Running for a while);
//! - `pause`: never exit (until SIGTERM or SIGKILL): the pod sandbox's pause process.
//!
//! In every value, `{i}` is the pod's index (the number after the last `-` of its host name,
//! which the job controller makes `<job>-<task>-<index>`) and `{i+1}` that index plus one.
//! The program is static and needs nothing in its image but itself.

use std::process::ExitCode;
use std::time::Duration;

fn hostname() -> Result<String, String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .map_err(|e| format!("reading /proc/sys/kernel/hostname: {e}"))
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|e| format!("${name}: {e}"))
}

/// Replaces `{i}` and `{i+1}` with the pod's index taken from `host`.
fn substitute(value: &str, host: &str) -> Result<String, String> {
    if !value.contains("{i") {
        return Ok(value.to_owned());
    }
    let index: u64 = host
        .rsplit_once('-')
        .and_then(|(_, i)| i.parse().ok())
        .ok_or_else(|| format!("host name {host:?} does not end in -<index>, needed for {{i}} in {value:?}"))?;
    Ok(value.replace("{i+1}", &(index + 1).to_string()).replace("{i}", &index.to_string()))
}

fn split<'a>(what: &str, spec: &'a str) -> Result<(&'a str, &'a str), String> {
    spec.split_once('=').ok_or_else(|| format!("{what}: expected KEY=VALUE, got {spec:?}"))
}

/// Checks one expectation; `Ok(Some(seconds))` for `sleep=`.
fn check(arg: &str, host: &str) -> Result<Option<u64>, String> {
    if let Some(spec) = arg.strip_prefix("env:") {
        let (name, want) = split(arg, spec)?;
        let want = substitute(want, host)?;
        let got = env(name)?;
        return if got == want { Ok(None) } else { Err(format!("${name} is {got:?}, expected {want:?}")) };
    }
    if let Some(spec) = arg.strip_prefix("json-env:") {
        let (name, want) = split(arg, spec)?;
        let want = substitute(want, host)?;
        let want: serde_json::Value =
            serde_json::from_str(&want).map_err(|e| format!("{arg}: the expected value is not JSON: {e}"))?;
        let text = env(name)?;
        let got: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("${name} is not JSON ({e}): {text:?}"))?;
        return if got == want { Ok(None) } else { Err(format!("${name} is {got}, expected {want}")) };
    }
    if let Some(spec) = arg.strip_prefix("file:") {
        let (path, want) = split(arg, spec)?;
        let want = substitute(want, host)?.replace("\\n", "\n");
        let got = read(path)?;
        return if got == want { Ok(None) } else { Err(format!("{path} holds {got:?}, expected {want:?}")) };
    }
    if let Some(path) = arg.strip_prefix("nonempty:") {
        return if read(path)?.is_empty() { Err(format!("{path} is empty")) } else { Ok(None) };
    }
    if let Some(spec) = arg.strip_prefix("contains:") {
        let (path, other) = split(arg, spec)?;
        let needle = read(other)?;
        if needle.trim().is_empty() {
            return Err(format!("{other} is empty"));
        }
        return if read(path)?.contains(needle.trim()) {
            Ok(None)
        } else {
            Err(format!("{path} does not contain the text of {other}"))
        };
    }
    if let Some(want) = arg.strip_prefix("hostname=") {
        let want = substitute(want, host)?;
        return if host == want { Ok(None) } else { Err(format!("the host name is {host:?}, expected {want:?}")) };
    }
    if let Some(secs) = arg.strip_prefix("sleep=") {
        return secs.parse().map(Some).map_err(|e| format!("{arg}: not a number of seconds: {e}"));
    }
    Err(format!("unknown expectation {arg:?} (env:, json-env:, file:, nonempty:, contains:, hostname=, sleep=, pause)"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "pause") {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if args.is_empty() {
        eprintln!("jobcheck: no expectation given (see the doc comment of cli/examples/jobcheck.rs)");
        return ExitCode::from(2);
    }
    let host = match hostname() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("jobcheck: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = 0;
    let mut sleep = 0;
    for arg in &args {
        match check(arg, &host) {
            Ok(Some(secs)) => sleep = secs,
            Ok(None) => eprintln!("jobcheck: ok   {arg}"),
            Err(e) => {
                failed += 1;
                eprintln!("jobcheck: FAIL {arg}: {e}");
            }
        }
    }
    if failed > 0 {
        eprintln!("jobcheck: {failed} of {} expectations failed on {host}", args.len());
        return ExitCode::FAILURE;
    }
    eprintln!("jobcheck: all {} expectations hold on {host}", args.len());
    std::thread::sleep(Duration::from_secs(sleep));
    ExitCode::SUCCESS
}
