//! GPUs as devices: what a node's GPUs are, what each one holds, what a pod asks of them,
//! and which devices a pod gets — Volcano's `deviceshare` accounting (spec §3.12), in the
//! core so that the scheduler, the simulator and `replay` account GPUs alike.
//!
//! Two device kinds, as Volcano's device plugins register them:
//! - **GPU sharing** (`volcano.sh/gpu-memory` and `volcano.sh/gpu-number` in the node's
//!   capacity: the memory of all cards and their count). A pod asks for memory on one card
//!   (`volcano.sh/gpu-memory`) or for whole cards (`volcano.sh/gpu-number`); the chosen card
//!   indices go on the pod as `volcano.sh/gpu-index` (`"0"`, `"0,1"`).
//! - **HAMi vGPU** (the node annotation `volcano.sh/node-vgpu-register`, one
//!   `uuid,count,memory,type,health,mode` entry per card). A pod asks for cards with
//!   `volcano.sh/vgpu-number`, and per card for memory (`volcano.sh/vgpu-memory` in MiB, or
//!   `volcano.sh/vgpu-memory-percentage`; neither means the whole card's memory, as HAMi) and
//!   compute (`volcano.sh/vgpu-cores`, percent; 100 means the card alone). The chosen cards go
//!   on the pod as `volcano.sh/vgpu-ids-new` (`uuid,NVIDIA,memory,cores:` per card).
//!
//! Plain `nvidia.com/gpu` stays a scalar of the resource vector (whole GPUs, counted by the
//! device plugin); [`gpu_free`] shows it to the placement plugins as that many whole
//! devices.
//!
//! The snapshot keeps each node's per-card use ([`NodeGpus`]) and each task's cards
//! ([`crate::TaskInfo::devices`]): placing a task picks its cards ([`NodeGpus::choose`]:
//! the most used card that fits first, lowest index on a tie — Volcano's per-card binpack,
//! and the tightest fit of the FGD paper), removing it frees them. A running pod's cards
//! come from its annotation.

use std::sync::Arc;

use crate::pod::SchedPod as Pod;
use k8s_openapi::api::core::v1::Node;
use smallvec::SmallVec;
use volcano_api::quantity;

/// Memory of one card asked by a GPU-sharing pod, MiB (node capacity: all cards' memory).
pub const GPU_MEMORY: &str = "volcano.sh/gpu-memory";
/// Whole cards asked by a pod (node capacity: the number of cards).
pub const GPU_NUMBER: &str = "volcano.sh/gpu-number";
/// vGPU cards asked by a pod.
pub const VGPU_NUMBER: &str = "volcano.sh/vgpu-number";
/// Memory per vGPU card, MiB.
pub const VGPU_MEMORY: &str = "volcano.sh/vgpu-memory";
/// Memory per vGPU card, percent of the card.
pub const VGPU_MEMORY_PERCENTAGE: &str = "volcano.sh/vgpu-memory-percentage";
/// Compute per vGPU card, percent of the card.
pub const VGPU_CORES: &str = "volcano.sh/vgpu-cores";
/// The node annotation with which HAMi's device plugin registers a node's cards.
pub const VGPU_REGISTER: &str = "volcano.sh/node-vgpu-register";
/// The pod annotation with the GPU-sharing card indices.
pub const GPU_INDEX: &str = "volcano.sh/gpu-index";
/// The pod annotation with the time the cards were chosen (GPU sharing), nanoseconds.
pub const PREDICATE_TIME: &str = "volcano.sh/predicate-time";
/// The pod annotation with the vGPU cards chosen.
pub const VGPU_IDS: &str = "volcano.sh/vgpu-ids-new";
/// The pod annotation HAMi's device plugin reads the cards to set up from.
pub const VGPU_TO_ALLOCATE: &str = "volcano.sh/devices-to-allocate";
/// The pod annotation with the node the vGPU cards were chosen on.
pub const VGPU_NODE: &str = "volcano.sh/vgpu-node";
/// The pod annotation with the time the vGPU cards were chosen, nanoseconds.
pub const VGPU_TIME: &str = "volcano.sh/vgpu-time";
/// The pod annotation HAMi's device plugin moves from `allocating` to `success`.
pub const BIND_PHASE: &str = "volcano.sh/bind-phase";
/// The node annotation listing GPU-sharing cards out of service (`"1,3"`).
pub const UNHEALTHY_GPU_IDS: &str = "volcano.sh/gpu-unhealthy-ids";
/// The node label naming the GPU model (NVIDIA's GPU feature discovery); the model of
/// GPU-sharing cards, and of the whole GPUs of [`gpu_free`].
pub const GPU_MODEL_LABEL: &str = "nvidia.com/gpu.product";

/// The resource names the resource vector leaves to this module (Volcano's
/// `IgnoredDevicesList` for vGPU): no node advertises them, the cards account them.
pub use crate::resource::CARD_ONLY_RESOURCES as IGNORED_RESOURCES;

/// Milli-units of one card.
pub const MILLI: u32 = 1000;

/// Which device plugin registered a node's cards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// `volcano.sh/gpu-memory` and `volcano.sh/gpu-number`.
    GpuShare,
    /// HAMi vGPU (`volcano.sh/vgpu-*`).
    Vgpu,
}

/// One card of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuDevice {
    /// Its id on the pod annotation: the index for GPU sharing, the UUID for vGPU.
    pub id: Arc<str>,
    /// The model (vGPU: the registered type; GPU sharing: the node's model label).
    pub model: Arc<str>,
    /// Memory, MiB.
    pub memory_mib: u32,
    /// How many pods may share it (vGPU's split count; unbounded for GPU sharing).
    pub slots: u32,
    /// Whether it is in service.
    pub healthy: bool,
}

/// What a card holds now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceUse {
    /// Memory, MiB.
    pub memory_mib: u32,
    /// Compute, percent.
    pub cores: u32,
    /// Pods.
    pub pods: u32,
}

/// A node's cards and what each holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeGpus {
    /// The device plugin.
    pub kind: DeviceKind,
    /// The cards (shared between snapshots).
    pub devices: Arc<[GpuDevice]>,
    /// Use per card, by index.
    pub used: SmallVec<[DeviceUse; 8]>,
}

/// How a pod asks for cards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AskKind {
    /// `volcano.sh/gpu-memory`: memory on one card.
    Memory,
    /// `volcano.sh/gpu-number`: whole cards.
    Number,
    /// `volcano.sh/vgpu-number`: vGPU cards with memory and compute each.
    Vgpu,
}

/// What a pod asks of the cards (summed over its containers, as one request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GpuAsk {
    /// How.
    pub kind: AskKind,
    /// Cards.
    pub count: u32,
    /// Memory per card, MiB (when `memory_percent` is unset).
    pub memory_mib: u32,
    /// Memory per card, percent of the card; [`GpuAsk::UNSET`] when not asked.
    pub memory_percent: u32,
    /// Compute per card, percent.
    pub cores: u32,
}

impl GpuAsk {
    /// `memory_percent` not asked (HAMi's 101).
    pub const UNSET: u32 = 101;

    /// The device kind this ask needs.
    pub fn device_kind(&self) -> DeviceKind {
        match self.kind {
            AskKind::Memory | AskKind::Number => DeviceKind::GpuShare,
            AskKind::Vgpu => DeviceKind::Vgpu,
        }
    }

    /// The memory and compute it takes on a card.
    fn demand(&self, dev: &GpuDevice) -> DeviceUse {
        match self.kind {
            AskKind::Memory => DeviceUse { memory_mib: self.memory_mib, cores: 0, pods: 1 },
            AskKind::Number => DeviceUse { memory_mib: dev.memory_mib, cores: 100, pods: 1 },
            AskKind::Vgpu => {
                let memory_mib = if self.memory_percent != Self::UNSET {
                    (dev.memory_mib as u64 * self.memory_percent as u64 / 100) as u32
                } else {
                    self.memory_mib
                };
                DeviceUse { memory_mib, cores: self.cores, pods: 1 }
            }
        }
    }

    /// Whether one card can take one share of this ask now (Volcano's per-card checks).
    fn fits(&self, dev: &GpuDevice, used: &DeviceUse) -> bool {
        if !dev.healthy {
            return false;
        }
        let d = self.demand(dev);
        match self.kind {
            AskKind::Memory => dev.memory_mib.saturating_sub(used.memory_mib) >= d.memory_mib,
            AskKind::Number => used.pods == 0 && used.memory_mib == 0,
            AskKind::Vgpu => {
                used.pods < dev.slots
                    && dev.memory_mib.saturating_sub(used.memory_mib) >= d.memory_mib
                    && used.cores + d.cores <= 100
                    && !(d.cores == 100 && used.pods > 0)
                    && !(used.cores >= 100 && d.cores == 0)
            }
        }
    }

    /// The share of one card it takes, in milli-cards, on a card of this memory: the
    /// larger of its compute and memory shares (a whole card for `gpu-number`).
    pub fn milli_on(&self, memory_mib: u32) -> u32 {
        let mem =
            |m: u32| if memory_mib == 0 { 0 } else { (m as u64 * MILLI as u64).div_ceil(memory_mib as u64) as u32 };
        match self.kind {
            AskKind::Number => MILLI,
            AskKind::Memory => mem(self.memory_mib).min(MILLI),
            AskKind::Vgpu => {
                let memory =
                    if self.memory_percent != Self::UNSET { self.memory_percent * 10 } else { mem(self.memory_mib) };
                (self.cores * 10).max(memory).min(MILLI)
            }
        }
    }
}

/// A card's use, in milli-cards: the larger of its compute and memory shares.
pub fn used_milli(dev: &GpuDevice, used: &DeviceUse) -> u32 {
    if used.pods == 0 {
        return 0;
    }
    let mem = if dev.memory_mib == 0 {
        0
    } else {
        (used.memory_mib as u64 * MILLI as u64).div_ceil(dev.memory_mib as u64) as u32
    };
    (used.cores * 10).max(mem).min(MILLI)
}

impl NodeGpus {
    /// The cards a node's object registers, with nothing in use; `None` for a node without.
    pub fn from_node(node: &Node) -> Option<NodeGpus> {
        let annotations = node.metadata.annotations.as_ref();
        if let Some(reg) = annotations.and_then(|a| a.get(VGPU_REGISTER)) {
            let devices = parse_vgpu_register(reg);
            if !devices.is_empty() {
                let used = devices.iter().map(|_| DeviceUse::default()).collect();
                return Some(NodeGpus { kind: DeviceKind::Vgpu, devices: devices.into(), used });
            }
        }
        let capacity = node.status.as_ref()?.capacity.as_ref()?;
        let memory = quantity::parse_value(&capacity.get(GPU_MEMORY)?.0).ok()?;
        let number = quantity::parse_value(&capacity.get(GPU_NUMBER)?.0).ok()?;
        if number < 1.0 || memory < 0.0 {
            return None;
        }
        let count = number as u32;
        let per_card = (memory / number) as u32;
        let unhealthy: Vec<u32> = annotations
            .and_then(|a| a.get(UNHEALTHY_GPU_IDS))
            .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
            .unwrap_or_default();
        let model: Arc<str> =
            Arc::from(node.metadata.labels.as_ref().and_then(|l| l.get(GPU_MODEL_LABEL)).map_or("", |s| s.as_str()));
        let devices: Vec<GpuDevice> = (0..count)
            .map(|i| GpuDevice {
                id: Arc::from(i.to_string()),
                model: model.clone(),
                memory_mib: per_card,
                slots: u32::MAX,
                healthy: !unhealthy.contains(&i),
            })
            .collect();
        let used = devices.iter().map(|_| DeviceUse::default()).collect();
        Some(NodeGpus { kind: DeviceKind::GpuShare, devices: devices.into(), used })
    }

    /// The cards `ask` would get here now, in the order they are chosen; `None` when it
    /// does not fit. The most used card first (in milli-cards), lowest index on a tie.
    pub fn choose(&self, ask: &GpuAsk) -> Option<SmallVec<[u16; 8]>> {
        let mut order = self.choose_all(ask)?;
        order.sort_by_key(|&i| (std::cmp::Reverse(used_milli(&self.devices[i as usize], &self.used[i as usize])), i));
        order.truncate(ask.count as usize);
        Some(order)
    }

    /// [`NodeGpus::choose`], but the least shared card first (fewest pods), lowest index on
    /// a tie: Volcano's vGPU card order under `deviceshare.SchedulePolicy: spread`.
    pub fn choose_least_shared(&self, ask: &GpuAsk) -> Option<SmallVec<[u16; 8]>> {
        let mut order = self.choose_all(ask)?;
        order.sort_by_key(|&i| (self.used[i as usize].pods, i));
        order.truncate(ask.count as usize);
        Some(order)
    }

    /// [`NodeGpus::choose`], but the cards in a random order (a hash of `seed`, `salt` and
    /// the card's index) instead of the fullest first.
    pub fn choose_at_random(&self, ask: &GpuAsk, seed: u64, salt: &str) -> Option<SmallVec<[u16; 8]>> {
        let mut order = self.choose_all(ask)?;
        let mut h: u64 = 0xcbf29ce484222325 ^ seed.wrapping_mul(0x9e3779b97f4a7c15);
        for b in salt.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        let key = |i: u16| {
            let mut z = h ^ (i as u64).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^ (z >> 31)
        };
        order.sort_by_key(|&i| key(i));
        order.truncate(ask.count as usize);
        Some(order)
    }

    /// Every card that can take one share of `ask` now, by index; `None` when fewer than
    /// it asks.
    fn choose_all(&self, ask: &GpuAsk) -> Option<SmallVec<[u16; 8]>> {
        if ask.device_kind() != self.kind || ask.count as usize > self.devices.len() {
            return None;
        }
        let fit: SmallVec<[u16; 8]> = (0..self.devices.len() as u16)
            .filter(|&i| ask.fits(&self.devices[i as usize], &self.used[i as usize]))
            .collect();
        (fit.len() >= ask.count as usize).then_some(fit)
    }

    /// Whether `ask` fits here now.
    pub fn fits(&self, ask: &GpuAsk) -> bool {
        if ask.device_kind() != self.kind {
            return false;
        }
        let n = (0..self.devices.len()).filter(|&i| ask.fits(&self.devices[i], &self.used[i])).count();
        n >= ask.count as usize
    }

    /// Whether these cards can take `ask` now (a kept choice being reused).
    pub fn fits_on(&self, ask: &GpuAsk, cards: &[u16]) -> bool {
        ask.device_kind() == self.kind
            && cards.len() == ask.count as usize
            && cards.iter().all(|&i| {
                (i as usize) < self.devices.len() && ask.fits(&self.devices[i as usize], &self.used[i as usize])
            })
    }

    /// Accounts `ask` on these cards.
    pub fn take(&mut self, ask: &GpuAsk, cards: &[u16]) {
        for &i in cards {
            let Some(dev) = self.devices.get(i as usize) else { continue };
            let d = ask.demand(dev);
            let u = &mut self.used[i as usize];
            u.memory_mib = u.memory_mib.saturating_add(d.memory_mib);
            u.cores = u.cores.saturating_add(d.cores);
            u.pods += 1;
        }
    }

    /// Reverses [`NodeGpus::take`].
    pub fn give_back(&mut self, ask: &GpuAsk, cards: &[u16]) {
        for &i in cards {
            let Some(dev) = self.devices.get(i as usize) else { continue };
            let d = ask.demand(dev);
            let u = &mut self.used[i as usize];
            u.memory_mib = u.memory_mib.saturating_sub(d.memory_mib);
            u.cores = u.cores.saturating_sub(d.cores);
            u.pods = u.pods.saturating_sub(1);
        }
    }

    /// The indices of the cards an annotation names (the pod's cards on this node), if
    /// it names cards of this node only.
    pub fn cards_of(&self, pod: &Pod) -> Option<SmallVec<[u16; 8]>> {
        let annotations = pod.metadata.annotations.as_ref()?;
        let mut out = SmallVec::new();
        match self.kind {
            DeviceKind::GpuShare => {
                for id in annotations.get(GPU_INDEX)?.split(',') {
                    let id = id.trim();
                    out.push(self.devices.iter().position(|d| &*d.id == id)? as u16);
                }
            }
            DeviceKind::Vgpu => {
                for container in annotations.get(VGPU_IDS)?.split(';') {
                    for card in container.split(':').filter(|c| c.contains(',')) {
                        let uuid = card.split(',').next().unwrap_or_default();
                        out.push(self.devices.iter().position(|d| &*d.id == uuid)? as u16);
                    }
                }
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Free milli-cards per card (0 for a card out of service), in card order.
    pub fn free_milli(&self, out: &mut SmallVec<[u32; 8]>) {
        out.clear();
        for (d, u) in self.devices.iter().zip(&self.used) {
            out.push(if d.healthy { MILLI - used_milli(d, u) } else { 0 });
        }
    }

    /// The annotations that record `cards` for `ask` on the pod (Volcano's, so that the
    /// device plugins on the node read them). `node` names the node, `now_ns` the time.
    pub fn annotations(&self, ask: &GpuAsk, cards: &[u16], node: &str, now_ns: i64) -> Vec<(&'static str, String)> {
        match self.kind {
            DeviceKind::GpuShare => {
                let ids: Vec<&str> = cards.iter().map(|&i| &*self.devices[i as usize].id).collect();
                vec![(PREDICATE_TIME, now_ns.to_string()), (GPU_INDEX, ids.join(","))]
            }
            DeviceKind::Vgpu => {
                let mut encoded = String::new();
                for &i in cards {
                    let dev = &self.devices[i as usize];
                    let d = ask.demand(dev);
                    encoded.push_str(&format!("{},NVIDIA,{},{}:", dev.id, d.memory_mib, d.cores));
                }
                vec![
                    (VGPU_NODE, node.to_string()),
                    (VGPU_TIME, now_ns.to_string()),
                    (VGPU_IDS, encoded.clone()),
                    (VGPU_TO_ALLOCATE, encoded),
                    (BIND_PHASE, "allocating".to_string()),
                ]
            }
        }
    }
}

/// The cards of a `volcano.sh/node-vgpu-register` annotation: `uuid,count,memory,type,
/// health[,mode]` per card, `:`-separated. Malformed entries are left out (as Volcano).
pub fn parse_vgpu_register(text: &str) -> Vec<GpuDevice> {
    let mut out = Vec::new();
    for entry in text.split(':').filter(|e| e.contains(',')) {
        let items: Vec<&str> = entry.split(',').collect();
        if items.len() < 5 {
            continue;
        }
        let (Ok(count), Ok(memory)) = (items[1].trim().parse::<u32>(), items[2].trim().parse::<u32>()) else {
            continue;
        };
        out.push(GpuDevice {
            id: Arc::from(items[0].trim()),
            model: Arc::from(items[3].trim()),
            memory_mib: memory,
            slots: count,
            healthy: items[4].trim().parse().unwrap_or(false),
        });
    }
    out
}

/// What a pod asks of the cards, from its containers' limits (then requests), as
/// Volcano's device plugins read them; `None` for a pod that asks for no card.
/// vGPU names win over GPU-sharing names when a pod has both.
pub fn pod_ask(pod: &Pod) -> Option<GpuAsk> {
    let spec = pod.spec.as_ref()?;
    let read = |c: &k8s_openapi::api::core::v1::Container, name: &str| -> Option<f64> {
        let r = c.resources.as_ref()?;
        let q =
            r.limits.as_ref().and_then(|l| l.get(name)).or_else(|| r.requests.as_ref().and_then(|l| l.get(name)))?;
        quantity::parse_value(&q.0).ok()
    };
    let mut vgpu: Option<GpuAsk> = None;
    let mut share: Option<GpuAsk> = None;
    for c in &spec.containers {
        let number = read(c, VGPU_NUMBER);
        let memory = read(c, VGPU_MEMORY);
        if number.is_some() || memory.is_some() {
            let count = number.map_or(1, |n| n.max(0.0) as u32);
            let memory_mib = memory.unwrap_or(0.0).max(0.0) as u32;
            let mut memory_percent =
                read(c, VGPU_MEMORY_PERCENTAGE).map_or(GpuAsk::UNSET, |p| p.clamp(0.0, 101.0) as u32);
            if memory_percent == GpuAsk::UNSET && memory_mib == 0 {
                memory_percent = 100;
            }
            let cores = read(c, VGPU_CORES).map_or(0, |v| v.clamp(0.0, 100.0) as u32);
            let ask = GpuAsk { kind: AskKind::Vgpu, count, memory_mib, memory_percent, cores };
            vgpu = Some(match vgpu {
                // Containers of one pod: the cards add up; memory and compute per card are
                // the first container's (Volcano allocates per container; volcano-rs keeps
                // one request per pod, see docs/plugins/deviceshare.md).
                Some(prev) => GpuAsk { count: prev.count + ask.count, ..prev },
                None => ask,
            });
            continue;
        }
        if let Some(n) = read(c, GPU_NUMBER).filter(|n| *n > 0.0) {
            let count = n as u32 + share.filter(|s| s.kind == AskKind::Number).map_or(0, |s| s.count);
            share =
                Some(GpuAsk { kind: AskKind::Number, count, memory_mib: 0, memory_percent: GpuAsk::UNSET, cores: 100 });
        } else if let Some(m) = read(c, GPU_MEMORY).filter(|m| *m > 0.0) {
            let memory_mib = m as u32 + share.filter(|s| s.kind == AskKind::Memory).map_or(0, |s| s.memory_mib);
            share =
                Some(GpuAsk { kind: AskKind::Memory, count: 1, memory_mib, memory_percent: GpuAsk::UNSET, cores: 0 });
        }
    }
    vgpu.filter(|a| a.count > 0).or(share)
}

/// A node's GPUs as the placement plugins see them: free milli-cards per card (devices,
/// or the whole GPUs of `nvidia.com/gpu`: idle ones 1000, the others 0), and the model.
pub fn gpu_free(node: &crate::NodeInfo, out: &mut SmallVec<[u32; 8]>) {
    if let Some(g) = &node.gpus {
        g.free_milli(out);
        return;
    }
    out.clear();
    let total = (node.allocatable.get(crate::resource::NVIDIA_GPU) / MILLI as f64).round() as u32;
    let idle = ((node.idle.get(crate::resource::NVIDIA_GPU) / MILLI as f64).floor().max(0.0) as u32).min(total);
    out.extend((0..total).map(|i| if i < idle { MILLI } else { 0 }));
}

/// A task's GPU request as the placement plugins see it: cards and milli-cards per card on
/// this node (`nvidia.com/gpu` counts whole cards); `(0, 0)` for a task without.
pub fn gpu_request(task: &crate::TaskInfo, node: &crate::NodeInfo) -> (u32, u32) {
    if let Some(ask) = &task.gpu {
        let memory = node.gpus.as_ref().and_then(|g| g.devices.first()).map_or(0, |d| d.memory_mib);
        return (ask.count, ask.milli_on(memory));
    }
    let whole = task.resreq.get(crate::resource::NVIDIA_GPU) / MILLI as f64;
    if whole > 0.0 {
        (whole.ceil() as u32, MILLI)
    } else {
        (0, 0)
    }
}

/// The GPU model of a node: its first card's, else the model label.
pub fn node_model(node: &crate::NodeInfo) -> Option<&str> {
    node.gpus
        .as_ref()
        .and_then(|g| g.devices.first())
        .map(|d| &*d.model)
        .filter(|m| !m.is_empty())
        .or_else(|| node.labels().get(GPU_MODEL_LABEL).map(|s| s.as_str()))
}
