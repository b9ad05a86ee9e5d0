//! volcano-plugins: the in-tree scheduling plugins.
//!
//! Start at [`in_tree`], the explicit registry of every plugin. Each plugin lives in its own
//! module: the plugin type implementing [`volcano_framework::Plugin`], a typed `Args`
//! struct with Volcano's argument keys and defaults, and its unit tests. Code that several
//! plugins use lives beside them: [`matching`] (node selectors, affinity terms, taints and
//! tolerations, host ports, for `predicates` and `nodeorder`) and [`queue_accounting`]
//! (the per-queue accounts [`queue_accounting::QueueAccount`] with the allocation and
//! admission checks and the close-time report, job usage, the inqueue reservation, the
//! shortfall messages, for `proportion`, `capacity` and `overcommit`).

use volcano_framework::PluginRegistry;

pub mod bestfit;
pub mod binpack;
pub mod capacity;
pub mod conformance;
pub mod deviceshare;
pub mod dotprod;
pub mod drf;
pub mod elastic;
pub mod fragmentation;
pub mod gang;
pub mod gpu_packing;
pub mod interpod;
pub mod matching;
pub mod network_topology_aware;
pub mod node_labels;
pub mod nodeorder;
pub mod overcommit;
pub mod placement;
pub mod predicates;
pub mod priority;
pub mod proportion;
pub mod queue_accounting;
pub mod random;
pub mod sla;
pub mod task_topology;

/// Every in-tree plugin, by configuration name.
pub fn in_tree() -> PluginRegistry {
    let mut r = PluginRegistry::default();
    let entries: &[(&'static str, volcano_framework::PluginFactory)] = &[
        (bestfit::NAME, bestfit::factory),
        (binpack::NAME, binpack::factory),
        (capacity::NAME, capacity::factory),
        (conformance::NAME, conformance::factory),
        (deviceshare::NAME, deviceshare::factory),
        (dotprod::NAME, dotprod::factory),
        (drf::NAME, drf::factory),
        (elastic::NAME, elastic::factory),
        (fragmentation::NAME, fragmentation::factory),
        (gang::NAME, gang::factory),
        (gpu_packing::NAME, gpu_packing::factory),
        (network_topology_aware::NAME, network_topology_aware::factory),
        (nodeorder::NAME, nodeorder::factory),
        (overcommit::NAME, overcommit::factory),
        (predicates::NAME, predicates::factory),
        (priority::NAME, priority::factory),
        (proportion::NAME, proportion::factory),
        (random::NAME, random::factory),
        (sla::NAME, sla::factory),
        (task_topology::NAME, task_topology::factory),
    ];
    for &(name, f) in entries {
        r.register(name, f).expect("in-tree plugin names are unique");
    }
    r
}
