//! volcano-builtin: what every shell schedules with, the built-in plugins and actions.
//!
//! [`registries`] lists them (`volcano_plugins::in_tree()` and `volcano_actions::in_tree()`),
//! and [`profile_from_text`] and [`default_profile`] load a scheduler configuration against
//! them. A configuration is given as its text (Volcano's `volcano-scheduler.conf` or the
//! ConfigMap that holds it): reading a file is the shells' business (`volcano-scheduler`'s
//! `config`, the `volcano-rs` command), so this crate does no IO and links no Kubernetes
//! client, and the offline commands (`simulate`, `explain --manifests`, `bench`) load their
//! configuration exactly as the scheduler does without depending on it.
#![deny(missing_docs)]

use volcano_framework::{Profile, ProfileError, Registries};

/// The registries of the built-in plugins and actions.
pub fn registries() -> Registries {
    Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() }
}

/// Loads a scheduler configuration (Volcano's file, or the ConfigMap holding it) from its
/// text, against the built-in registries: every name resolved, every argument typed.
pub fn profile_from_text(text: &str) -> Result<Profile, ProfileError> {
    Profile::from_yaml(text, &registries())
}

/// The built-in default configuration (Volcano's), loaded against the built-in registries.
pub fn default_profile() -> Result<Profile, ProfileError> {
    Profile::builtin_default(&registries())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions(p: &Profile) -> Vec<&str> {
        p.actions.iter().map(|a| a.name()).collect()
    }

    #[test]
    fn the_default_profile_runs_volcanos_default_actions() {
        assert_eq!(actions(&default_profile().unwrap()), ["enqueue", "allocate", "backfill"]);
    }

    #[test]
    fn a_file_and_its_configmap_load_the_same() {
        let conf = "actions: \"allocate, backfill\"\ntiers:\n- plugins:\n  - name: gang\n  - name: binpack\n";
        let cm = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: volcano-scheduler-configmap}}\ndata:\n  volcano-scheduler.conf: |\n{}",
            conf.lines().map(|l| format!("    {l}\n")).collect::<String>()
        );
        assert_eq!(actions(&profile_from_text(conf).unwrap()), ["allocate", "backfill"]);
        assert_eq!(actions(&profile_from_text(&cm).unwrap()), ["allocate", "backfill"]);
    }

    #[test]
    fn an_unknown_plugin_is_refused_with_its_name() {
        let e = profile_from_text("actions: \"allocate\"\ntiers:\n- plugins:\n  - name: gangg\n").unwrap_err();
        assert_eq!(e.category(), "unknown_plugin");
        assert!(e.to_string().contains("gangg"), "{e}");
    }

    #[test]
    fn volcanos_plugins_and_actions_are_registered() {
        let reg = registries();
        let plugins: Vec<&str> = reg.plugins.names().collect();
        let actions: Vec<&str> = reg.actions.names().collect();
        for name in ["gang", "priority", "drf", "proportion", "predicates", "nodeorder", "binpack"] {
            assert!(plugins.contains(&name), "{name} missing from {plugins:?}");
        }
        for name in ["enqueue", "allocate", "backfill", "preempt", "reclaim"] {
            assert!(actions.contains(&name), "{name} missing from {actions:?}");
        }
    }
}
