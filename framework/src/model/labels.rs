//! Label selectors (`metav1.LabelSelector`), checked once and then matched against label
//! maps: HyperNode members chosen by node labels, and the pods of a sub-group policy.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// The operator of a selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A checked label selector: every `matchLabels` pair and every requirement of
/// `matchExpressions` must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    labels: Vec<(String, String)>,
    exprs: Vec<(String, Op, Vec<String>)>,
}

impl Selector {
    /// Checks the selector: an unknown operator, or `In`/`NotIn` without values, is an error
    /// naming the requirement.
    pub fn new(s: &LabelSelector) -> Result<Selector, String> {
        let labels = s.match_labels.iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut exprs = Vec::new();
        for r in s.match_expressions.iter().flatten() {
            let values: Vec<String> = r.values.iter().flatten().cloned().collect();
            let op = match r.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(format!("operator {} on key {} needs values", r.operator, r.key))
                }
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => return Err(format!("unknown operator {other:?}; expected In, NotIn, Exists or DoesNotExist")),
            };
            exprs.push((r.key.clone(), op, values));
        }
        Ok(Selector { labels, exprs })
    }

    /// Whether the selector has no requirement at all (Kubernetes: it selects everything).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.exprs.is_empty()
    }

    /// Whether the labels satisfy every requirement (an empty selector matches any labels).
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
        self.labels.iter().all(|(k, v)| get(k) == Some(v.as_str()))
            && self.exprs.iter().all(|(k, op, values)| match (op, get(k)) {
                (Op::In, Some(v)) => values.iter().any(|x| x == v),
                (Op::In, None) => false,
                (Op::NotIn, Some(v)) => !values.iter().any(|x| x == v),
                (Op::NotIn, None) => true,
                (Op::Exists, v) => v.is_some(),
                (Op::DoesNotExist, v) => v.is_none(),
            })
    }
}
