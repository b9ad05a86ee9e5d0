//! `volcano-rs --version` says the version and the git commit the binary was built from
//! (cli/build.rs), which is what an image's users read to know what they run.

use std::process::Command;

#[test]
fn the_version_names_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_volcano-rs")).arg("--version").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let prefix = format!("volcano-rs {} (commit ", env!("CARGO_PKG_VERSION"));
    let commit = text
        .trim_end()
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("expected {prefix:?}<commit>), got {text:?}"));
    // From git (12 hex digits), from VOLCANO_RS_GIT_COMMIT, or `unknown` without either.
    match std::env::var("VOLCANO_RS_GIT_COMMIT") {
        Ok(set) if !set.trim().is_empty() => assert_eq!(commit, set.trim()),
        _ => assert!(
            commit == "unknown" || (commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
            "{commit:?}"
        ),
    }
}
