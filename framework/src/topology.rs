//! The network topology of a snapshot: the HyperNode tree over its nodes.
//!
//! HyperNodes (`topology.volcano.sh/v1alpha1`) are switches: each has a tier (1 for the
//! switches nodes hang off, higher further up) and members, nodes or other HyperNodes,
//! chosen by exact name, by a regular expression on the name, or (nodes) by labels.
//! [`Topology::build`] resolves the members against the snapshot's nodes and the other
//! HyperNodes, checks the tree and adds Volcano's virtual top HyperNode
//! (`<cluster-top-hypernode>`, one tier above the highest, holding every node), so that
//! "the whole cluster" is a HyperNode like the others.
//!
//! A HyperNode that breaks the tree is left out, with a located [`TopologyError`]: a
//! member HyperNode of a tier not below its parent's, a HyperNode that is a member of two
//! parents, a cycle, a node in two HyperNodes of one tier (the later by name is left
//! out), two names for one tier, or an invalid selector. What remains is a forest in which
//! every node has at most one HyperNode per tier, all on one chain of parents, so the
//! HyperNodes holding a node are its lowest one and that one's ancestors.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use volcano_api::topology::HyperNode;

use crate::model::labels::Selector;
use crate::model::{NodeId, NodeInfo};

/// The name of the virtual HyperNode above all others (Volcano's).
pub const CLUSTER_TOP_HYPER_NODE: &str = "<cluster-top-hypernode>";

/// Index of a HyperNode in [`Topology::hyper_nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HyperNodeId(pub u32);

impl HyperNodeId {
    /// The index into [`Topology::hyper_nodes`].
    #[inline]
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// One HyperNode of the tree.
#[derive(Clone, Debug)]
pub struct HyperNodeInfo {
    /// Name (the virtual top's is [`CLUSTER_TOP_HYPER_NODE`]).
    pub name: Arc<str>,
    /// Tier.
    pub tier: u32,
    /// `spec.tierName`, if given.
    pub tier_name: Option<String>,
    /// The HyperNode this one is a member of (the virtual top for the highest).
    pub parent: Option<HyperNodeId>,
    /// Member HyperNodes, by name.
    pub children: Vec<HyperNodeId>,
    /// Every node in it, directly or through its members, in node order.
    pub nodes: Vec<NodeId>,
}

/// A HyperNode left out of the tree, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError {
    /// The HyperNode.
    pub hyper_node: String,
    /// The field at fault, e.g. `spec.members[1].selector.regexMatch.pattern`.
    pub field: String,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HyperNode {}: field {}: {}", self.hyper_node, self.field, self.message)
    }
}

/// The HyperNode tree of a snapshot (see the module docs).
#[derive(Clone, Debug)]
pub struct Topology {
    hyper_nodes: Vec<HyperNodeInfo>,
    by_name: HashMap<Arc<str>, HyperNodeId>,
    /// The lowest HyperNode of each node (by node index; the virtual top when in none).
    lowest: Vec<HyperNodeId>,
    /// The real tiers, ascending.
    tiers: Vec<u32>,
    tier_names: BTreeMap<String, u32>,
    /// Real HyperNodes by tier, by name.
    by_tier: BTreeMap<u32, Vec<HyperNodeId>>,
    errors: Vec<TopologyError>,
}

impl Default for Topology {
    /// No HyperNode and no node: the virtual top alone.
    fn default() -> Self {
        Topology::build(&BTreeMap::new(), &[])
    }
}

/// What a HyperNode's members resolve to.
struct Resolved {
    nodes: BTreeSet<NodeId>,
    children: BTreeSet<usize>,
}

impl Topology {
    /// The tree of these HyperNodes over these nodes (in node order).
    pub fn build(objects: &BTreeMap<String, Arc<HyperNode>>, nodes: &[&NodeInfo]) -> Topology {
        let mut errors = Vec::new();
        let names: Vec<&str> = objects.keys().map(String::as_str).collect();
        let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let node_index: HashMap<&str, NodeId> =
            nodes.iter().enumerate().map(|(i, n)| (&*n.name, NodeId(i as u32))).collect();
        let mut bad = vec![false; names.len()];
        let mut tier = vec![0u32; names.len()];
        let mut resolved: Vec<Resolved> = Vec::with_capacity(names.len());
        for (i, (name, hn)) in objects.iter().enumerate() {
            let mut fail = |field: String, message: String| {
                errors.push(TopologyError { hyper_node: name.clone(), field, message });
                bad[i] = true;
            };
            match u32::try_from(hn.spec.tier) {
                Ok(t) if t >= 1 => tier[i] = t,
                _ => fail("spec.tier".into(), format!("tier {} is not a whole number of at least 1", hn.spec.tier)),
            }
            let mut r = Resolved { nodes: BTreeSet::new(), children: BTreeSet::new() };
            for (m, member) in hn.spec.members.iter().enumerate() {
                let path = format!("spec.members[{m}]");
                match resolve(member, nodes, &node_index, &names, &index) {
                    Ok(Members::Nodes(ns)) => r.nodes.extend(ns),
                    Ok(Members::HyperNodes(hs)) => r.children.extend(hs),
                    Err((field, message)) => fail(format!("{path}.{field}"), message),
                }
            }
            r.children.remove(&i);
            resolved.push(r);
        }
        // Tier names: one name per tier.
        let mut tier_names: BTreeMap<String, u32> = BTreeMap::new();
        let mut name_of_tier: BTreeMap<u32, (String, &str)> = BTreeMap::new();
        for (i, hn) in objects.values().enumerate() {
            let Some(tn) = hn.spec.tier_name.as_deref().filter(|s| !s.is_empty()) else { continue };
            if bad[i] {
                continue;
            }
            match name_of_tier.get(&tier[i]) {
                Some((other, by)) if other != tn => {
                    errors.push(TopologyError {
                        hyper_node: names[i].to_string(),
                        field: "spec.tierName".into(),
                        message: format!("tier {} is named {other:?} by HyperNode {by}; a tier has one name", tier[i]),
                    });
                    bad[i] = true;
                }
                Some(_) => {}
                None => {
                    if let Some(t) = tier_names.get(tn).filter(|t| **t != tier[i]) {
                        errors.push(TopologyError {
                            hyper_node: names[i].to_string(),
                            field: "spec.tierName".into(),
                            message: format!("tier name {tn:?} already names tier {t}"),
                        });
                        bad[i] = true;
                        continue;
                    }
                    name_of_tier.insert(tier[i], (tn.to_string(), names[i]));
                    tier_names.insert(tn.to_string(), tier[i]);
                }
            }
        }
        // Parents: one per HyperNode, of a higher tier.
        let mut parent: Vec<Option<usize>> = vec![None; names.len()];
        for i in 0..names.len() {
            if bad[i] {
                continue;
            }
            for &c in &resolved[i].children {
                if bad[c] {
                    continue;
                }
                if tier[c] >= tier[i] {
                    errors.push(TopologyError {
                        hyper_node: names[i].to_string(),
                        field: "spec.members".into(),
                        message: format!(
                            "member HyperNode {} has tier {}, not below this HyperNode's tier {}",
                            names[c], tier[c], tier[i]
                        ),
                    });
                    bad[i] = true;
                    break;
                }
                if let Some(p) = parent[c] {
                    errors.push(TopologyError {
                        hyper_node: names[i].to_string(),
                        field: "spec.members".into(),
                        message: format!("member HyperNode {} is already a member of HyperNode {}", names[c], names[p]),
                    });
                    bad[i] = true;
                    break;
                }
                parent[c] = Some(i);
            }
        }
        // Tiers strictly decrease along parent links, so there is no cycle among the good
        // HyperNodes; a bad parent leaves its children at the top.
        for p in parent.iter_mut() {
            if p.is_some_and(|x| bad[x]) {
                *p = None;
            }
        }
        // Nodes of each HyperNode, lowest tiers first; a node in two HyperNodes of a tier
        // stays in the first by name.
        let mut order: Vec<usize> = (0..names.len()).filter(|i| !bad[*i]).collect();
        order.sort_by_key(|i| (tier[*i], *i));
        let mut all_nodes: Vec<BTreeSet<NodeId>> = vec![BTreeSet::new(); names.len()];
        let mut owner: HashMap<(u32, NodeId), usize> = HashMap::new();
        for &i in &order {
            let mut set = resolved[i].nodes.clone();
            for &c in &resolved[i].children {
                if !bad[c] && parent[c] == Some(i) {
                    set.extend(all_nodes[c].iter().copied());
                }
            }
            let clash = set.iter().find_map(|n| owner.get(&(tier[i], *n)).map(|o| (*n, *o)));
            if let Some((n, o)) = clash {
                errors.push(TopologyError {
                    hyper_node: names[i].to_string(),
                    field: "spec.members".into(),
                    message: format!(
                        "node {} is already in HyperNode {} of the same tier {}",
                        nodes[n.idx()].name,
                        names[o],
                        tier[i]
                    ),
                });
                bad[i] = true;
                continue;
            }
            for n in &set {
                owner.insert((tier[i], *n), i);
            }
            all_nodes[i] = set;
        }
        // A HyperNode under a bad parent, or with a bad member, keeps what it has: drop the
        // links to the bad ones.
        for p in parent.iter_mut() {
            if p.is_some_and(|x| bad[x]) {
                *p = None;
            }
        }
        // A node directly in a HyperNode and in another of a higher tier that is not an
        // ancestor of it breaks the chain: checked as the ancestors are walked below.
        let mut topo = Topology {
            hyper_nodes: Vec::new(),
            by_name: HashMap::new(),
            lowest: Vec::new(),
            tiers: Vec::new(),
            tier_names,
            by_tier: BTreeMap::new(),
            errors,
        };
        let mut id_of: Vec<Option<HyperNodeId>> = vec![None; names.len()];
        for i in (0..names.len()).filter(|i| !bad[*i]) {
            let id = HyperNodeId(topo.hyper_nodes.len() as u32);
            id_of[i] = Some(id);
            let hn = &objects[names[i]];
            topo.hyper_nodes.push(HyperNodeInfo {
                name: Arc::from(names[i]),
                tier: tier[i],
                tier_name: hn.spec.tier_name.clone().filter(|s| !s.is_empty()),
                parent: None,
                children: Vec::new(),
                nodes: all_nodes[i].iter().copied().collect(),
            });
        }
        let top_tier = topo.hyper_nodes.iter().map(|h| h.tier).max().unwrap_or(0) + 1;
        let top = HyperNodeId(topo.hyper_nodes.len() as u32);
        topo.hyper_nodes.push(HyperNodeInfo {
            name: Arc::from(CLUSTER_TOP_HYPER_NODE),
            tier: top_tier,
            tier_name: None,
            parent: None,
            children: Vec::new(),
            nodes: (0..nodes.len() as u32).map(NodeId).collect(),
        });
        for i in (0..names.len()).filter(|i| !bad[*i]) {
            let id = id_of[i].expect("good");
            let p = parent[i].and_then(|p| id_of[p]).unwrap_or(top);
            topo.hyper_nodes[id.idx()].parent = Some(p);
            topo.hyper_nodes[p.idx()].children.push(id);
        }
        for h in &topo.hyper_nodes[..top.idx()] {
            topo.by_tier.entry(h.tier).or_default();
        }
        for (i, h) in topo.hyper_nodes[..top.idx()].iter().enumerate() {
            topo.by_tier.get_mut(&h.tier).expect("inserted").push(HyperNodeId(i as u32));
        }
        topo.tiers = topo.by_tier.keys().copied().collect();
        // Lowest HyperNode of each node: the lowest tier holding it (each tier holds it at
        // most once).
        topo.lowest = vec![top; nodes.len()];
        let mut lowest_tier = vec![u32::MAX; nodes.len()];
        for (i, h) in topo.hyper_nodes[..top.idx()].iter().enumerate() {
            for n in &h.nodes {
                if h.tier < lowest_tier[n.idx()] {
                    lowest_tier[n.idx()] = h.tier;
                    topo.lowest[n.idx()] = HyperNodeId(i as u32);
                }
            }
        }
        topo.by_name =
            topo.hyper_nodes.iter().enumerate().map(|(i, h)| (h.name.clone(), HyperNodeId(i as u32))).collect();
        topo.check_chains(nodes);
        topo
    }

    /// Every HyperNode holding a node must be on its lowest HyperNode's chain of ancestors
    /// (a node directly in a tier-2 HyperNode and in a tier-1 HyperNode of another tier-2
    /// parent breaks it): such a node is reported and leaves the HyperNodes off its chain.
    fn check_chains(&mut self, nodes: &[&NodeInfo]) {
        let top = self.top();
        let mut strays: Vec<(HyperNodeId, NodeId)> = Vec::new();
        for (i, h) in self.hyper_nodes[..top.idx()].iter().enumerate() {
            let id = HyperNodeId(i as u32);
            for n in &h.nodes {
                if !self.ancestors(self.lowest[n.idx()]).any(|a| a == id) {
                    strays.push((id, *n));
                }
            }
        }
        for (h, n) in strays {
            let name = self.hyper_nodes[h.idx()].name.to_string();
            if !self.errors.iter().any(|e| e.hyper_node == name && e.message.contains(&*nodes[n.idx()].name)) {
                self.errors.push(TopologyError {
                    hyper_node: name,
                    field: "spec.members".into(),
                    message: format!(
                        "node {} is also in HyperNode {}, which is not below this one; left out of this one",
                        nodes[n.idx()].name,
                        self.hyper_nodes[self.lowest[n.idx()].idx()].name
                    ),
                });
            }
            self.hyper_nodes[h.idx()].nodes.retain(|x| *x != n);
        }
    }

    /// Whether any real HyperNode exists.
    pub fn is_empty(&self) -> bool {
        self.hyper_nodes.len() <= 1
    }

    /// Every HyperNode, the virtual top last.
    pub fn hyper_nodes(&self) -> &[HyperNodeInfo] {
        &self.hyper_nodes
    }

    /// The HyperNode.
    #[inline]
    pub fn get(&self, h: HyperNodeId) -> &HyperNodeInfo {
        &self.hyper_nodes[h.idx()]
    }

    /// The HyperNode with this name.
    pub fn by_name(&self, name: &str) -> Option<HyperNodeId> {
        self.by_name.get(name).copied()
    }

    /// The virtual top HyperNode (every node).
    pub fn top(&self) -> HyperNodeId {
        HyperNodeId(self.hyper_nodes.len().saturating_sub(1) as u32)
    }

    /// The real tiers, ascending.
    pub fn tiers(&self) -> &[u32] {
        &self.tiers
    }

    /// The real HyperNodes of a tier, by name.
    pub fn of_tier(&self, tier: u32) -> &[HyperNodeId] {
        self.by_tier.get(&tier).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The tier a `highestTierName` names.
    pub fn tier_named(&self, name: &str) -> Option<u32> {
        self.tier_names.get(name).copied()
    }

    /// The HyperNodes left out of the tree, and why.
    pub fn errors(&self) -> &[TopologyError] {
        &self.errors
    }

    /// The lowest HyperNode holding the node (the virtual top when none does).
    pub fn lowest_of(&self, n: NodeId) -> HyperNodeId {
        self.lowest.get(n.idx()).copied().unwrap_or_else(|| self.top())
    }

    /// The HyperNode and its ancestors, up to the virtual top.
    pub fn ancestors(&self, h: HyperNodeId) -> impl Iterator<Item = HyperNodeId> + '_ {
        std::iter::successors(Some(h), move |x| self.hyper_nodes[x.idx()].parent)
    }

    /// The node's HyperNode of a tier, if any.
    pub fn of_node_at_tier(&self, n: NodeId, tier: u32) -> Option<HyperNodeId> {
        self.ancestors(self.lowest_of(n)).find(|h| self.get(*h).tier == tier)
    }

    /// The lowest HyperNode holding both (Volcano's LCA).
    pub fn common_ancestor(&self, a: HyperNodeId, b: HyperNodeId) -> HyperNodeId {
        let mut x = a;
        let mut y = b;
        while x != y {
            // Climb the lower of the two (the top is above everything).
            if self.get(x).tier <= self.get(y).tier {
                match self.get(x).parent {
                    Some(p) => x = p,
                    None => return self.top(),
                }
            } else {
                match self.get(y).parent {
                    Some(p) => y = p,
                    None => return self.top(),
                }
            }
        }
        x
    }

    /// The lowest HyperNode holding all these nodes; `None` for no node.
    pub fn common_ancestor_of_nodes(&self, nodes: impl IntoIterator<Item = NodeId>) -> Option<HyperNodeId> {
        nodes.into_iter().map(|n| self.lowest_of(n)).reduce(|a, b| self.common_ancestor(a, b))
    }

    /// Whether `h` is `ancestor` or below it.
    pub fn is_within(&self, h: HyperNodeId, ancestor: HyperNodeId) -> bool {
        self.ancestors(h).any(|x| x == ancestor)
    }

    /// Whether the node is in the HyperNode.
    pub fn holds(&self, h: HyperNodeId, n: NodeId) -> bool {
        h == self.top() || self.is_within(self.lowest_of(n), h)
    }
}

enum Members {
    Nodes(Vec<NodeId>),
    HyperNodes(Vec<usize>),
}

fn resolve(
    member: &volcano_api::topology::MemberSpec,
    nodes: &[&NodeInfo],
    node_index: &HashMap<&str, NodeId>,
    names: &[&str],
    index: &HashMap<&str, usize>,
) -> Result<Members, (String, String)> {
    let sel = &member.selector;
    let given = [sel.exact_match.is_some(), sel.regex_match.is_some(), sel.label_match.is_some()];
    if given.iter().filter(|x| **x).count() != 1 {
        return Err(("selector".into(), "exactly one of exactMatch, regexMatch and labelMatch must be given".into()));
    }
    match member.type_.as_str() {
        "Node" => {
            if let Some(e) = &sel.exact_match {
                Ok(Members::Nodes(node_index.get(e.name.as_str()).copied().into_iter().collect()))
            } else if let Some(r) = &sel.regex_match {
                let re = compile(&r.pattern)?;
                Ok(Members::Nodes(
                    nodes
                        .iter()
                        .enumerate()
                        .filter(|(_, n)| re.is_match(&n.name))
                        .map(|(i, _)| NodeId(i as u32))
                        .collect(),
                ))
            } else {
                let s = sel.label_match.as_ref().expect("counted");
                let m = Selector::new(s).map_err(|e| ("selector.labelMatch".to_string(), e))?;
                Ok(Members::Nodes(
                    nodes
                        .iter()
                        .enumerate()
                        // An empty selector selects nothing here: a HyperNode of every node
                        // is the virtual top's job.
                        .filter(|(_, n)| !m.is_empty() && m.matches(n.node.metadata.labels.as_ref()))
                        .map(|(i, _)| NodeId(i as u32))
                        .collect(),
                ))
            }
        }
        "HyperNode" => {
            if let Some(e) = &sel.exact_match {
                Ok(Members::HyperNodes(index.get(e.name.as_str()).copied().into_iter().collect()))
            } else if let Some(r) = &sel.regex_match {
                let re = compile(&r.pattern)?;
                Ok(Members::HyperNodes((0..names.len()).filter(|i| re.is_match(names[*i])).collect()))
            } else {
                Err(("selector.labelMatch".into(), "labelMatch selects nodes only, not HyperNodes".into()))
            }
        }
        other => Err(("type".into(), format!("unknown member type {other:?}; expected Node or HyperNode"))),
    }
}

fn compile(pattern: &str) -> Result<regex::Regex, (String, String)> {
    regex::Regex::new(pattern)
        .map_err(|e| ("selector.regexMatch.pattern".to_string(), format!("invalid regular expression: {e}")))
}

#[cfg(test)]
mod tests;
