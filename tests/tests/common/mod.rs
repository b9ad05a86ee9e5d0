//! What the metrics and explain tests share: a scenario file run through the simulator.

use std::path::{Path, PathBuf};

use volcano_framework::Profile;
use volcano_sim::{Manifest, Simulator};
use volcano_testkit::scenario::Scenario;

/// `tests/scenarios`.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub(crate) fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// The scenario at `path` loaded into a simulator (not run yet) with its cycle count; `None`
/// when its configuration or input is refused on purpose.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub(crate) fn load(path: &Path) -> Option<(Simulator, Option<u32>)> {
    let text = std::fs::read_to_string(path).expect("scenario file");
    let scenario: Scenario = serde_yaml_ng::from_str(&text).expect("scenario");
    let reg = volcano_builtin::registries();
    let profile = match &scenario.config {
        Some(c) => Profile::from_yaml(c, &reg).ok()?,
        None => Profile::builtin_default(&reg).expect("the built-in configuration"),
    };
    let mut manifest = Manifest::new();
    manifest.load_str("cluster", &scenario.cluster.expand().to_yaml()).ok()?;
    if let Some(objects) = &scenario.objects {
        manifest.load_str("objects", objects).ok()?;
    }
    Some((Simulator::new(manifest, profile).ok()?, scenario.cycles))
}

/// The scenario files under `dir`, in path order.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub(crate) fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            scenario_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml") {
            out.push(p);
        }
    }
}
