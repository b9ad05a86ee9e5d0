//! [`LabelIndex`]: the nodes' label values by key, so that a node selector or a node
//! selector requirement is evaluated once per distinct value of its key instead of once
//! per node. A session's plugins build their per-node verdicts of node selectors and
//! node affinity terms through it (a few dozen distinct selectors and terms over 10,000
//! nodes, about five label keys).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelectorTerm;
use volcano_framework::Snapshot;

use crate::matching;

/// The nodes' values of each label key met so far (built per key on first use, for the
/// snapshot it is used with: one index per session, kept beside the verdicts it serves).
#[derive(Debug, Default)]
pub struct LabelIndex {
    keys: HashMap<String, Arc<KeyValues>>,
}

/// The values of one label key.
#[derive(Debug)]
struct KeyValues {
    /// The distinct values, by number (in node order of first occurrence).
    values: Vec<String>,
    /// Each node's value number, `values.len()` for a node without the label.
    of_node: Vec<u32>,
}

impl LabelIndex {
    fn key(&mut self, snap: &Snapshot, key: &str) -> Arc<KeyValues> {
        if let Some(found) = self.keys.get(key) {
            return found.clone();
        }
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut values: Vec<String> = Vec::new();
        let of_node: Vec<Option<u32>> = snap
            .nodes
            .iter()
            .map(|n| {
                n.labels().get(key).map(|v| {
                    *ids.entry(v.as_str()).or_insert_with(|| {
                        values.push(v.clone());
                        values.len() as u32 - 1
                    })
                })
            })
            .collect();
        let absent = values.len() as u32;
        let of_node = of_node.into_iter().map(|id| id.unwrap_or(absent)).collect();
        let kv = Arc::new(KeyValues { values, of_node });
        self.keys.insert(key.to_string(), kv.clone());
        kv
    }

    /// Whether each node (by index) has every label of a node selector.
    pub fn selector_matches(&mut self, snap: &Snapshot, selector: &BTreeMap<String, String>) -> Vec<bool> {
        let mut out = vec![true; snap.nodes.len()];
        for (k, v) in selector {
            let kv = self.key(snap, k);
            // A value no node has (`values.len() + 1`) matches no node.
            let want = kv.values.iter().position(|x| x == v).map_or(kv.values.len() as u32 + 1, |p| p as u32);
            for (o, &id) in out.iter_mut().zip(&kv.of_node) {
                *o &= id == want;
            }
        }
        out
    }

    /// [`matching::term_matches`] on each node (by index). A requirement reads only the
    /// value of its key (or its absence), so it is evaluated once per distinct value; a
    /// term with `matchFields` reads the node's name and is evaluated per node.
    pub fn term_matches(&mut self, snap: &Snapshot, term: &NodeSelectorTerm) -> Vec<bool> {
        let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
        let has_fields = term.match_fields.as_deref().is_some_and(|f| !f.is_empty());
        if has_fields {
            return snap.nodes.iter().map(|n| matching::term_matches(term, n.labels(), &n.name)).collect();
        }
        if exprs.is_empty() {
            return vec![false; snap.nodes.len()];
        }
        let mut out = vec![true; snap.nodes.len()];
        for e in exprs {
            let kv = self.key(snap, &e.key);
            let mut table = Vec::with_capacity(kv.values.len() + 1);
            for value in kv.values.iter().map(Some).chain([None]) {
                let labels: BTreeMap<String, String> = value.map(|v| (e.key.clone(), v.clone())).into_iter().collect();
                match matching::expression_matches(e, &labels) {
                    // An invalid requirement fails the whole term on every node.
                    None => return vec![false; snap.nodes.len()],
                    Some(m) => table.push(m),
                }
            }
            for (o, &id) in out.iter_mut().zip(&kv.of_node) {
                *o &= table[id as usize];
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeSelectorRequirement;
    use volcano_testkit::{node, Objects};

    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn verdicts_per_value_are_those_of_each_node() {
        // 30 nodes with zone, rack and size labels (some missing, one not an integer); every
        // term below (valid, invalid, on missing keys, with matchFields) and selector must
        // give each node the answer of `matching::term_matches` on that node.
        let mut objs = Objects::new();
        for i in 0..30 {
            let mut n = node(&format!("n{i:02}"), "8", "16Gi");
            if i % 5 != 0 {
                n = n.label("zone", &format!("z{}", i % 3));
            }
            if i % 4 != 1 {
                n = n.label("rack", &format!("r{}", i % 7));
            }
            n = n.label("size", if i == 7 { "big" } else { ["1", "8", "16"][i % 3] });
            objs = objs.node(n);
        }
        let snap = objs.snapshot();
        let terms: Vec<NodeSelectorTerm> = vec![
            vec![req("zone", "In", &["z1", "z2"])],
            vec![req("zone", "NotIn", &["z1"]), req("rack", "Exists", &[])],
            vec![req("rack", "DoesNotExist", &[])],
            vec![req("size", "Gt", &["4"])],
            vec![req("size", "Lt", &["9"]), req("zone", "In", &["z0"])],
            vec![req("missing", "NotIn", &["x"])],
            vec![req("zone", "In", &["z1"]), req("rack", "In", &[])], // invalid: In without values
            vec![req("size", "Gt", &["x"])],                          // invalid bound
            vec![req("zone", "Bogus", &["z1"])],
            vec![],
        ]
        .into_iter()
        .map(|exprs| NodeSelectorTerm { match_expressions: Some(exprs), match_fields: None })
        .chain([NodeSelectorTerm {
            match_expressions: Some(vec![req("zone", "In", &["z1"])]),
            match_fields: Some(vec![req("metadata.name", "NotIn", &["n04"])]),
        }])
        .collect();
        let mut index = LabelIndex::default();
        for term in &terms {
            let expected: Vec<bool> =
                snap.nodes.iter().map(|n| matching::term_matches(term, n.labels(), &n.name)).collect();
            assert_eq!(index.term_matches(&snap, term), expected, "{term:?}");
        }
        assert!(terms.iter().any(|t| index.term_matches(&snap, t).iter().any(|m| *m)));
        for sel in [vec![("zone", "z1")], vec![("zone", "z2"), ("rack", "r3")], vec![("zone", "nowhere")], vec![]] {
            let sel: BTreeMap<String, String> = sel.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let expected: Vec<bool> =
                snap.nodes.iter().map(|n| sel.iter().all(|(k, v)| n.labels().get(k) == Some(v))).collect();
            assert_eq!(index.selector_matches(&snap, &sel), expected, "{sel:?}");
        }
    }
}
