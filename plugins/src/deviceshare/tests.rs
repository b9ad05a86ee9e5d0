use serde_json::json;
use volcano_framework::device::{VGPU_IDS, VGPU_REGISTER};
use volcano_framework::{NodeId, Plugin, Snapshot, TaskStatus};
use volcano_testkit::{node, pod, Objects, PodBuilder};

use super::*;
use volcano_testkit::fixtures::{plugin_option, task_named};

fn plugin(args: serde_json::Value) -> Box<dyn Plugin> {
    factory(&plugin_option(NAME, args)).expect("valid arguments").build()
}

/// A node with two 16 GiB vGPU cards of 10 slots; `busy` holds half of card a.
fn vgpu_cluster(p: PodBuilder) -> Snapshot {
    Objects::new()
        .node(
            node("n1", "32", "64Gi")
                .res("volcano.sh/vgpu-number", "20")
                .annotation(VGPU_REGISTER, "GPU-a,10,16384,A100,true,hami-core:GPU-b,10,16384,A100,true,hami-core:"),
        )
        .pod(
            pod("ns", "busy")
                .cpu_mem("1", "1Gi")
                .req("volcano.sh/vgpu-number", "1")
                .req("volcano.sh/vgpu-cores", "50")
                .req("volcano.sh/vgpu-memory-percentage", "50")
                .annotation(VGPU_IDS, "GPU-a,NVIDIA,8192,50:")
                .running_on("n1"),
        )
        .pod(p)
        .snapshot()
}

fn vgpu(name: &str, cards: &str, cores: &str) -> PodBuilder {
    pod("ns", name)
        .cpu_mem("1", "1Gi")
        .req("volcano.sh/vgpu-number", cards)
        .req("volcano.sh/vgpu-cores", cores)
        .req("volcano.sh/vgpu-memory-percentage", cores)
}

#[test]
fn a_running_pods_cards_come_from_its_annotation() {
    let snap = vgpu_cluster(vgpu("p", "1", "10"));
    let gpus = snap.node(NodeId(0)).gpus.as_deref().expect("registered cards");
    assert_eq!(gpus.used[0].cores, 50);
    assert_eq!(gpus.used[1].pods, 0);
    assert_eq!(snap.task(task_named(&snap, "busy")).devices.as_deref(), Some(&[0u16][..]));
}

#[test]
fn fractions_share_a_card_and_whole_cards_need_idle_ones() {
    let on = json!({"deviceshare.VGPUEnable": true});
    // 40 % fits beside the 50 % on card a; the device layer picks the fuller card.
    let snap = vgpu_cluster(vgpu("p", "1", "40"));
    assert!(plugin(on.clone()).predicate(&snap, task_named(&snap, "p"), NodeId(0)).is_ok());
    let mut placed = snap.clone();
    let t = task_named(&placed, "p");
    placed.set_task_status(t, TaskStatus::Allocated);
    placed.node_add_task(NodeId(0), t);
    assert_eq!(placed.task(t).devices.as_deref(), Some(&[0u16][..]));
    assert_eq!(placed.node(NodeId(0)).gpus.as_ref().unwrap().used[0].cores, 90);
    // Undoing gives the card back.
    placed.node_remove_task(NodeId(0), t);
    assert_eq!(placed.node(NodeId(0)).gpus.as_ref().unwrap().used[0].cores, 50);
    // Two whole cards: card a is in use, so no.
    let snap = vgpu_cluster(vgpu("p", "2", "100"));
    let err = plugin(on.clone()).predicate(&snap, task_named(&snap, "p"), NodeId(0)).unwrap_err();
    assert!(err.reason == "not enough gpu fitted on this node", "{}", err.reason);
    // One whole card: card b.
    let snap = vgpu_cluster(vgpu("p", "1", "100"));
    assert!(plugin(on).predicate(&snap, task_named(&snap, "p"), NodeId(0)).is_ok());
    // Not enabled: not filtered here.
    let snap = vgpu_cluster(vgpu("p", "2", "100"));
    assert!(plugin(json!({})).predicate(&snap, task_named(&snap, "p"), NodeId(0)).is_ok());
}

#[test]
fn gpu_sharing_fits_memory_on_one_card_and_records_its_index() {
    let snap = Objects::new()
        .node(node("n1", "32", "64Gi").res("volcano.sh/gpu-memory", "32768").res("volcano.sh/gpu-number", "2"))
        .pod(
            pod("ns", "busy")
                .cpu_mem("1", "1Gi")
                .req("volcano.sh/gpu-memory", "10000")
                .annotation("volcano.sh/gpu-index", "1")
                .running_on("n1"),
        )
        .pod(pod("ns", "p").cpu_mem("1", "1Gi").req("volcano.sh/gpu-memory", "6000"))
        .pod(pod("ns", "big").cpu_mem("1", "1Gi").req("volcano.sh/gpu-memory", "17000"))
        .snapshot();
    let on = plugin(json!({"deviceshare.GPUSharingEnable": true}));
    assert!(on.predicate(&snap, task_named(&snap, "p"), NodeId(0)).is_ok());
    let err = on.predicate(&snap, task_named(&snap, "big"), NodeId(0)).unwrap_err();
    assert_eq!(err.reason, "GpuShare no enough gpu memory on this node");
    let gpus = snap.node(NodeId(0)).gpus.as_deref().unwrap();
    let ask = snap.task(task_named(&snap, "p")).gpu.unwrap();
    // The fuller card (1) first.
    assert_eq!(gpus.choose(&ask).unwrap().as_slice(), &[1]);
    let notes = gpus.annotations(&ask, &[1], "n1", 7);
    assert!(notes.contains(&("volcano.sh/gpu-index", "1".to_string())), "{notes:?}");
}

#[test]
fn exclusive_switches_are_refused() {
    let both = plugin_option(NAME, json!({"deviceshare.GPUSharingEnable": true, "deviceshare.GPUNumberEnable": true}));
    assert!(factory(&both).is_err());
    let vgpu = plugin_option(NAME, json!({"deviceshare.GPUSharingEnable": true, "deviceshare.VGPUEnable": "true"}));
    assert!(factory(&vgpu).is_err());
    let policy = plugin_option(NAME, json!({"deviceshare.SchedulePolicy": "pack"}));
    assert!(factory(&policy).err().unwrap().0.contains("deviceshare.SchedulePolicy"));
}

#[test]
fn binpack_policy_scores_fuller_cards_higher() {
    let args = json!({"deviceshare.VGPUEnable": true, "deviceshare.SchedulePolicy": "binpack", "deviceshare.ScheduleWeight": 2});
    let snap = vgpu_cluster(vgpu("p", "1", "10"));
    // Card a is 50 % used: 50 × 2.
    assert_eq!(plugin(args).node_order(&snap, task_named(&snap, "p"), NodeId(0)), 100.0);
}
