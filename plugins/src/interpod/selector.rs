//! Label selectors (`metav1.LabelSelector`) compiled once and matched without allocating,
//! and the pod matchers of inter-pod affinity terms and topology spread constraints.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// One requirement of a compiled selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Req {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A compiled label selector. `None` (a nil selector) selects nothing, an empty one
/// everything, as `metav1.LabelSelectorAsSelector` makes them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Selector {
    nothing: bool,
    reqs: Vec<Req>,
}

impl Selector {
    /// The selector that matches nothing.
    pub fn nothing() -> Selector {
        Selector { nothing: true, reqs: Vec::new() }
    }

    /// The selector that matches everything (an empty one).
    pub fn everything() -> Selector {
        Selector { nothing: false, reqs: Vec::new() }
    }

    /// Whether it has no requirement: it matches every label set (`labels.Selector.Empty`).
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.reqs.is_empty()
    }

    /// Adds every requirement of another selector (`labels.Selector.Add`); a selector that
    /// matches nothing adds none, as its requirements cannot be listed.
    pub fn add_all(&mut self, other: &Selector) {
        if other.nothing {
            return;
        }
        for r in &other.reqs {
            if !self.reqs.contains(r) {
                self.reqs.push(r.clone());
            }
        }
        self.reqs.sort();
    }

    /// Compiles a selector; an unknown operator makes it match nothing (the API server
    /// rejects such selectors, kube-scheduler fails the pod).
    pub fn compile(sel: Option<&LabelSelector>) -> Selector {
        let Some(sel) = sel else { return Selector::nothing() };
        let mut reqs = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            reqs.push(Req::In(k.clone(), vec![v.clone()]));
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            reqs.push(match e.operator.as_str() {
                "In" => Req::In(e.key.clone(), values),
                "NotIn" => Req::NotIn(e.key.clone(), values),
                "Exists" => Req::Exists(e.key.clone()),
                "DoesNotExist" => Req::DoesNotExist(e.key.clone()),
                _ => return Selector::nothing(),
            });
        }
        reqs.sort();
        reqs.dedup();
        Selector { nothing: false, reqs }
    }

    /// Adds `key In (value)` (matchLabelKeys) or `key NotIn (value)` (mismatchLabelKeys).
    pub fn require(&mut self, key: &str, value: &str, equal: bool) {
        let r = if equal {
            Req::In(key.to_string(), vec![value.to_string()])
        } else {
            Req::NotIn(key.to_string(), vec![value.to_string()])
        };
        if !self.reqs.contains(&r) {
            self.reqs.push(r);
            self.reqs.sort();
        }
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        if self.nothing {
            return false;
        }
        self.reqs.iter().all(|r| match r {
            Req::In(k, vs) => labels.get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            Req::Exists(k) => labels.contains_key(k),
            Req::DoesNotExist(k) => !labels.contains_key(k),
        })
    }

    /// A (key, value) that every matching label set has, to index selectors by.
    pub fn index_pair(&self) -> Option<(&str, &str)> {
        self.reqs.iter().find_map(|r| match r {
            Req::In(k, vs) if vs.len() == 1 => Some((k.as_str(), vs[0].as_str())),
            _ => None,
        })
    }

    /// Whether it matches nothing whatever the labels.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }
}

/// Which namespaces a term's pods may live in: a list, a namespace selector, or both
/// (either one admits a namespace), as `framework.AffinityTerm` has them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespaces {
    /// Listed namespaces (the owner's own when neither a list nor a selector is given).
    pub names: Vec<String>,
    /// `namespaceSelector`, if given (an empty one admits every namespace).
    pub selector: Option<Selector>,
}

impl Namespaces {
    /// Whether a pod of namespace `ns`, whose labels are `ns_labels`, is admitted.
    pub fn admit(&self, ns: &str, ns_labels: Option<&BTreeMap<String, String>>) -> bool {
        if self.names.iter().any(|n| n == ns) {
            return true;
        }
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.selector.as_ref().is_some_and(|s| s.matches(ns_labels.unwrap_or(&EMPTY)))
    }
}

/// Which pods a term or a spread constraint counts: a selector and the namespaces.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodMatcher {
    /// The label selector.
    pub selector: Selector,
    /// The namespaces.
    pub namespaces: Namespaces,
}

impl PodMatcher {
    /// Whether a pod (namespace, labels, its namespace's labels) matches.
    pub fn matches(
        &self,
        ns: &str,
        labels: &BTreeMap<String, String>,
        ns_labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        self.namespaces.admit(ns, ns_labels) && self.selector.matches(labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn nil_matches_nothing_and_empty_everything() {
        assert!(!Selector::compile(None).matches(&labels(&[])));
        assert!(Selector::compile(Some(&LabelSelector::default())).matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn expressions_follow_kubernetes() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "web")]).into_iter().collect()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["db".into()]),
                },
                LabelSelectorRequirement { key: "team".into(), operator: "Exists".into(), values: None },
            ]),
        };
        let s = Selector::compile(Some(&sel));
        assert!(s.matches(&labels(&[("app", "web"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("team", "x"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "web")])));
        assert_eq!(s.index_pair(), Some(("app", "web")));
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Gt".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(Selector::compile(Some(&bad)).is_nothing());
    }

    #[test]
    fn namespaces_admit_by_list_or_selector() {
        let ns = Namespaces { names: vec!["a".into()], selector: None };
        assert!(ns.admit("a", None));
        assert!(!ns.admit("b", None));
        let all = Namespaces { names: vec![], selector: Some(Selector::compile(Some(&LabelSelector::default()))) };
        assert!(all.admit("b", None), "an empty namespace selector admits every namespace");
        let team = Namespaces {
            names: vec![],
            selector: Some(Selector::compile(Some(&LabelSelector {
                match_labels: Some(labels(&[("team", "ml")]).into_iter().collect()),
                ..Default::default()
            }))),
        };
        assert!(team.admit("x", Some(&labels(&[("team", "ml")]))));
        assert!(!team.admit("x", Some(&labels(&[("team", "web")]))));
        assert!(!team.admit("x", None), "an unknown namespace has no labels");
    }
}
