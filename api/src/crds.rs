//! The CRDs as Volcano ships them, generated from the types of [`crate::crd`], [`crate::job`]
//! and [`crate::bus`]: the same names, scope, short names, subresources and printer columns,
//! and a schema that accepts what Volcano's accepts, so that installing them over a Volcano
//! installation keeps every object valid.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceSubresources,
};
use kube::CustomResourceExt;
use serde_json::Value;

fn column(name: &str, type_: &str, json_path: &str, priority: Option<i32>) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.into(),
        type_: type_.into(),
        json_path: json_path.into(),
        priority,
        ..Default::default()
    }
}

/// Volcano's schemas type phases and states as plain strings: drop the `enum`s the Rust
/// enums put in the generated schema (path from the version's `openAPIV3Schema`).
fn drop_enum(crd: &mut CustomResourceDefinition, path: &[&str]) {
    let mut v = serde_json::to_value(&crd.spec.versions[0].schema).expect("a schema serializes");
    let mut node = &mut v["openAPIV3Schema"];
    for p in path {
        node = &mut node["properties"][*p];
    }
    if let Value::Object(m) = node {
        m.remove("enum");
    }
    crd.spec.versions[0].schema = serde_json::from_value(v).expect("the schema deserializes");
}

/// `podgroups.scheduling.volcano.sh`: no status subresource (Volcano's scheduler and
/// controller write the status with the object), Volcano's printer columns, `phase` any
/// string.
pub fn pod_group() -> CustomResourceDefinition {
    let mut crd = crate::crd::PodGroup::crd();
    drop_enum(&mut crd, &["status", "phase"]);
    let v = &mut crd.spec.versions[0];
    v.subresources = Some(CustomResourceSubresources::default());
    v.additional_printer_columns = Some(vec![
        column("STATUS", "string", ".status.phase", None),
        column("minMember", "integer", ".spec.minMember", None),
        column("RUNNINGS", "integer", ".status.running", None),
        column("AGE", "date", ".metadata.creationTimestamp", None),
        column("QUEUE", "string", ".spec.queue", Some(1)),
    ]);
    crd
}

/// `queues.scheduling.volcano.sh`: the status subresource, the PARENT printer column,
/// `state` any string.
pub fn queue() -> CustomResourceDefinition {
    let mut crd = crate::crd::Queue::crd();
    drop_enum(&mut crd, &["status", "state"]);
    let v = &mut crd.spec.versions[0];
    v.additional_printer_columns = Some(vec![column("PARENT", "string", ".spec.parent", None)]);
    crd
}

/// The node of a schema at `path` from the version's `openAPIV3Schema`: a property name
/// steps into `properties`, `[]` into `items`.
fn node<'a>(schema: &'a mut Value, path: &[&str]) -> &'a mut Value {
    let mut node = schema;
    for p in path {
        node = if *p == "[]" { &mut node["items"] } else { &mut node["properties"][*p] };
    }
    node
}

/// Edit the version's `openAPIV3Schema` as JSON.
fn edit_schema(crd: &mut CustomResourceDefinition, f: impl FnOnce(&mut Value)) {
    let mut v = serde_json::to_value(&crd.spec.versions[0].schema).expect("a schema serializes");
    f(&mut v["openAPIV3Schema"]);
    crd.spec.versions[0].schema = serde_json::from_value(v).expect("the schema deserializes");
}

/// `jobs.batch.volcano.sh`: short names `vcjob` and `vj`, the status subresource,
/// Volcano's printer columns, and the `enum`s Volcano's schema has (policy events,
/// `status.state.phase`, `topologyPolicy`, network topology `mode`); actions,
/// `dependsOn.iteration` and the rest are any string, as in Volcano. The pod template
/// is typed as [`crate::job::pod_template_schema`] explains.
pub fn job() -> CustomResourceDefinition {
    use crate::bus::Event;
    use crate::job::{numa_policy, JobPhase};
    let mut crd = crate::job::Job::crd();
    let events: Vec<&str> = [
        Event::Any,
        Event::PodPending,
        Event::PodRunning,
        Event::PodFailed,
        Event::PodEvicted,
        Event::Unknown,
        Event::TaskCompleted,
        Event::OutOfSync,
        Event::CommandIssued,
        Event::JobUpdated,
        Event::TaskFailed,
    ]
    .iter()
    .map(|e| e.as_str())
    .collect();
    let phases: Vec<&str> = JobPhase::KNOWN.iter().map(|p| p.as_str()).collect();
    edit_schema(&mut crd, |s| {
        for policies in [&["spec", "policies"][..], &["spec", "tasks", "[]", "policies"]] {
            let p = node(s, policies);
            node(p, &["[]", "event"])["enum"] = serde_json::json!(events);
            node(p, &["[]", "events", "[]"])["enum"] = serde_json::json!(events);
        }
        node(s, &["status", "state", "phase"])["enum"] = serde_json::json!(phases);
        // Volcano's Job may leave out its spec (the webhook then rejects it for having no
        // task); the derive makes it required.
        if let Value::Object(root) = s {
            root.remove("required");
        }
        node(s, &["spec", "tasks", "[]", "topologyPolicy"])["enum"] = serde_json::json!(numa_policy::ALL);
        for nt in [&["spec", "networkTopology"][..], &["spec", "tasks", "[]", "partitionPolicy", "networkTopology"]] {
            let mode = node(s, &[nt, &["mode"]].concat());
            mode["enum"] = serde_json::json!(["hard", "soft"]);
            mode["default"] = serde_json::json!("hard");
            node(s, &[nt, &["highestTierAllowed"]].concat())["minimum"] = serde_json::json!(0);
            node(s, &[nt, &["highestTierName"]].concat())["maxLength"] = serde_json::json!(253);
        }
    });
    crd.spec.names.list_kind = Some("JobList".into());
    let v = &mut crd.spec.versions[0];
    v.additional_printer_columns = Some(vec![
        column("STATUS", "string", ".status.state.phase", None),
        column("minAvailable", "integer", ".status.minAvailable", None),
        column("RUNNINGS", "integer", ".status.running", None),
        column("AGE", "date", ".metadata.creationTimestamp", None),
        column("QUEUE", "string", ".spec.queue", Some(1)),
    ]);
    crd
}

/// `commands.bus.volcano.sh`: `action`, `target`, `reason` and `message` at the top
/// level (no spec, no status, no subresources), as Volcano's.
pub fn command() -> CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionNames, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
        CustomResourceValidation,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .into_generator();
    let mut target = serde_json::to_value(generator.into_root_schema_for::<OwnerReference>()).expect("serializes");
    if let Value::Object(m) = &mut target {
        m.remove("title");
        m.insert("description".into(), "The job or queue the command acts on.".into());
        m.insert("x-kubernetes-map-type".into(), "atomic".into());
    }
    let string = |d: &str| serde_json::json!({ "type": "string", "description": d });
    let schema = serde_json::json!({
        "description": "A request to the job or queue controller (Volcano's Command: no spec, fields at the top level).",
        "type": "object",
        "properties": {
            "apiVersion": { "type": "string" },
            "kind": { "type": "string" },
            "metadata": { "type": "object" },
            "action": string("The action to take on the target."),
            "target": target,
            "reason": string("Unique, one-word, CamelCase reason for the command."),
            "message": string("Human-readable message of the command."),
        }
    });
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some("commands.bus.volcano.sh".into()),
            annotations: Some([("helm.sh/resource-policy".to_string(), "keep".to_string())].into()),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: crate::bus::GROUP.into(),
            names: CustomResourceDefinitionNames {
                kind: "Command".into(),
                list_kind: Some("CommandList".into()),
                plural: "commands".into(),
                singular: Some("command".into()),
                ..Default::default()
            },
            scope: "Namespaced".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: crate::bus::VERSION.into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(serde_json::from_value(schema).expect("a valid schema")),
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

/// `trainingjobs.kai.alibabacloud.com`, as et-operator's: the status subresource, the
/// `Phase` and `Age` printer columns, `etReplicaSpecs` keeping unknown fields.
pub fn training_job() -> CustomResourceDefinition {
    let mut crd = crate::et::TrainingJob::crd();
    edit_schema(&mut crd, |s| {
        node(s, &["spec", "etReplicaSpecs"])["x-kubernetes-preserve-unknown-fields"] = serde_json::json!(true);
    });
    crd.spec.names.list_kind = Some("TrainingJobList".into());
    crd.spec.versions[0].additional_printer_columns = Some(vec![
        column("Phase", "string", ".status.phase", None),
        column("Age", "date", ".metadata.creationTimestamp", None),
    ]);
    crd
}

/// The printer columns of et-operator's scale requests: the last condition's type, the age.
fn scaler_columns(crd: &mut CustomResourceDefinition) {
    crd.spec.versions[0].additional_printer_columns = Some(vec![
        column("Phase", "string", ".status.conditions[-1:].type", None),
        column("Age", "date", ".metadata.creationTimestamp", None),
    ]);
}

/// `scaleouts.kai.alibabacloud.com`, as et-operator's: the status subresource and its
/// printer columns.
pub fn scale_out() -> CustomResourceDefinition {
    let mut crd = crate::et::ScaleOut::crd();
    crd.spec.names.list_kind = Some("ScaleOutList".into());
    scaler_columns(&mut crd);
    crd
}

/// `scaleins.kai.alibabacloud.com`, as et-operator's: the status subresource and its
/// printer columns.
pub fn scale_in() -> CustomResourceDefinition {
    let mut crd = crate::et::ScaleIn::crd();
    crd.spec.names.list_kind = Some("ScaleInList".into());
    scaler_columns(&mut crd);
    crd
}

/// Removes `keys` from every node of a schema.
fn strip(schema: &mut Value, keys: &[&str]) {
    match schema {
        Value::Object(m) => {
            for k in keys {
                m.remove(*k);
            }
            m.values_mut().for_each(|v| strip(v, keys));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip(v, keys)),
        _ => {}
    }
}

/// The CEL rules of Volcano's `MemberSelector`: one of the three selectors, and only one.
pub const HYPER_NODE_SELECTOR_RULES: [(&str, &str); 2] = [
    (
        "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)",
        "Either ExactMatch or RegexMatch or LabelMatch must be specified",
    ),
    (
        "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? 1 : 0) <= 1",
        "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
    ),
];

/// The pattern Volcano's schema gives `exactMatch.name` (a DNS-1123 subdomain).
pub const HYPER_NODE_EXACT_NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// `hypernodes.topology.volcano.sh`, as Volcano's (`config/crd/volcano/bases`): cluster
/// scoped, short name `hn`, the status subresource, the Tier, TierName, NodeCount and Age
/// printer columns, and Volcano's constraints: `spec.tier` required and at least 0,
/// `tierName` at most 253 characters, at least one member, member `type` `Node` or
/// `HyperNode`, the selector's two CEL rules (exactly one of `exactMatch`, `regexMatch`,
/// `labelMatch`), `exactMatch.name` a DNS-1123 subdomain, `regexMatch.pattern` non-empty,
/// `labelMatch` atomic as `metav1.LabelSelector` is, `status.nodeCount` at least 0 and
/// `metav1.Condition`'s constraints on the conditions. Nothing is nullable and nothing has
/// a default, as in Volcano's (a `null` is dropped by the API server, not kept).
/// What the schema cannot say (the pattern compiles) is [`crate::validation::hyper_node`].
pub fn hyper_node() -> CustomResourceDefinition {
    use crate::topology::{HyperNode, MEMBER_TYPE_HYPER_NODE, MEMBER_TYPE_NODE};
    use serde_json::json;
    let mut crd = HyperNode::crd();
    edit_schema(&mut crd, |s| {
        strip(s, &["nullable", "default"]);
        if let Value::Object(root) = s {
            // Volcano's HyperNode may leave out its spec (the webhook then rejects it for
            // having no member); the derive makes it required.
            root.remove("required");
            root.remove("title");
            root.insert(
                "description".into(),
                "HyperNode represents a collection of nodes sharing similar network topology or performance \
                 characteristics."
                    .into(),
            );
        }
        let spec = node(s, &["spec"]);
        spec["required"] = json!(["tier"]);
        let tier = node(spec, &["tier"]);
        tier["minimum"] = json!(0);
        // Go's `int`: no format.
        if let Value::Object(t) = tier {
            t.remove("format");
        }
        node(spec, &["tierName"])["maxLength"] = json!(253);
        let members = node(spec, &["members"]);
        members["minItems"] = json!(1);
        let member = node(members, &["[]"]);
        member["required"] = json!(["type"]);
        node(member, &["type"])["enum"] = json!([MEMBER_TYPE_NODE, MEMBER_TYPE_HYPER_NODE]);
        let selector = node(member, &["selector"]);
        selector["x-kubernetes-validations"] = HYPER_NODE_SELECTOR_RULES
            .iter()
            .map(|(rule, message)| json!({ "rule": rule, "message": message }))
            .collect();
        let exact = node(selector, &["exactMatch"]);
        exact["required"] = json!(["name"]);
        let name = node(exact, &["name"]);
        name["minLength"] = json!(1);
        name["maxLength"] = json!(253);
        name["pattern"] = json!(HYPER_NODE_EXACT_NAME_PATTERN);
        let regex = node(selector, &["regexMatch"]);
        regex["required"] = json!(["pattern"]);
        node(regex, &["pattern"])["minLength"] = json!(1);
        let labels = node(selector, &["labelMatch"]);
        labels["x-kubernetes-map-type"] = json!("atomic");
        let expressions = node(labels, &["matchExpressions"]);
        expressions["x-kubernetes-list-type"] = json!("atomic");
        node(expressions, &["[]", "values"])["x-kubernetes-list-type"] = json!("atomic");
        let status = node(s, &["status"]);
        node(status, &["nodeCount"])["minimum"] = json!(0);
        let condition = node(status, &["conditions", "[]"]);
        node(condition, &["message"])["maxLength"] = json!(32768);
        node(condition, &["observedGeneration"])["minimum"] = json!(0);
        let reason = node(condition, &["reason"]);
        reason["maxLength"] = json!(1024);
        reason["minLength"] = json!(1);
        reason["pattern"] = json!("^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$");
        node(condition, &["status"])["enum"] = json!(["True", "False", "Unknown"]);
        let type_ = node(condition, &["type"]);
        type_["maxLength"] = json!(316);
        type_["pattern"] = json!(
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        );
    });
    crd.metadata.annotations = Some([("helm.sh/resource-policy".to_string(), "keep".to_string())].into());
    crd.spec.names.list_kind = Some("HyperNodeList".into());
    crd.spec.versions[0].additional_printer_columns = Some(vec![
        column("Tier", "string", ".spec.tier", None),
        column("TierName", "string", ".spec.tierName", None),
        column("NodeCount", "integer", ".status.nodeCount", None),
        column("Age", "date", ".metadata.creationTimestamp", None),
    ]);
    crd
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    fn schema(
        crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ) -> Value {
        serde_json::to_value(&crd.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema).unwrap()
    }

    /// Structural (as the API server requires of a CRD): every node has a type unless it
    /// preserves unknown fields or is int-or-string, and nothing is a `$ref` or an `anyOf`
    /// of types.
    fn assert_structural(node: &Value, path: &str) {
        let Value::Object(m) = node else { return };
        for bad in ["$ref", "anyOf", "oneOf", "allOf"] {
            assert!(!m.contains_key(bad), "{path}: {bad}");
        }
        let free =
            m.contains_key("x-kubernetes-preserve-unknown-fields") || m.contains_key("x-kubernetes-int-or-string");
        assert!(free || m.contains_key("type"), "{path} has no type");
        for (k, v) in m.get("properties").and_then(Value::as_object).into_iter().flatten() {
            assert_structural(v, &format!("{path}.{k}"));
        }
        for sub in ["items", "additionalProperties"] {
            if let Some(v) = m.get(sub).filter(|v| v.is_object()) {
                assert_structural(v, &format!("{path}.{sub}"));
            }
        }
    }

    #[test]
    fn the_job_crd_is_structural_small_and_constrains_what_volcano_does() {
        let crd = super::job();
        let s = schema(&crd);
        assert_structural(&s, "");
        let size = serde_json::to_string(&crd).unwrap().len();
        assert!(size < 100_000, "{size} bytes: far from the 256 KiB client-side apply limit");
        let task = &s["properties"]["spec"]["properties"]["tasks"]["items"]["properties"];
        assert_eq!(task["template"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(task["template"]["properties"]["metadata"]["properties"]["labels"]["type"], "object");
        let policy = &s["properties"]["spec"]["properties"]["policies"]["items"]["properties"];
        assert_eq!(policy["event"]["enum"].as_array().unwrap().len(), 11);
        assert_eq!(policy["events"]["items"]["enum"][0], "*");
        assert!(policy["action"].get("enum").is_none(), "Volcano accepts any action");
        assert!(task["dependsOn"]["properties"]["iteration"].get("enum").is_none());
        assert_eq!(s["properties"]["status"]["properties"]["state"]["properties"]["phase"]["enum"][9], "Failed");
        assert!(s.get("required").is_none(), "Volcano's Job may leave out its spec");
        let v = &crd.spec.versions[0];
        assert!(v.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<&str> = v.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(columns, ["STATUS", "minAvailable", "RUNNINGS", "AGE", "QUEUE"]);
        assert_eq!(crd.spec.names.short_names.as_deref(), Some(&["vcjob".to_string(), "vj".to_string()][..]));
    }

    #[test]
    fn the_et_operator_crds_are_structural_with_et_operators_names_and_columns() {
        for (crd, plural, columns) in [
            (super::training_job(), "trainingjobs", [".status.phase", ".metadata.creationTimestamp"]),
            (super::scale_out(), "scaleouts", [".status.conditions[-1:].type", ".metadata.creationTimestamp"]),
            (super::scale_in(), "scaleins", [".status.conditions[-1:].type", ".metadata.creationTimestamp"]),
        ] {
            let s = schema(&crd);
            assert_structural(&s, plural);
            assert_eq!(crd.spec.group, "kai.alibabacloud.com");
            assert_eq!(crd.spec.names.plural, plural);
            assert_eq!(crd.spec.scope, "Namespaced");
            let v = &crd.spec.versions[0];
            assert_eq!(v.name, "v1alpha1");
            assert!(v.subresources.as_ref().unwrap().status.is_some());
            let paths: Vec<&str> =
                v.additional_printer_columns.iter().flatten().map(|c| c.json_path.as_str()).collect();
            assert_eq!(paths, columns);
            let status = &s["properties"]["status"]["properties"];
            for field in ["phase", "conditions", "replicaStatuses", "currentScaler", "restartCount", "startTime"] {
                assert!(status.get(field).is_some(), "{plural}: status.{field}");
            }
        }
        let tj = schema(&super::training_job());
        assert_eq!(
            tj["properties"]["spec"]["properties"]["etReplicaSpecs"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert_eq!(tj["properties"]["spec"]["required"], serde_json::json!(["etReplicaSpecs"]));
        for f in ["targetWorkers", "currentWorkers"] {
            assert!(tj["properties"]["status"]["properties"].get(f).is_some(), "status.{f}");
        }
        let worker = &tj["properties"]["spec"]["properties"]["etReplicaSpecs"]["properties"]["worker"]["properties"];
        for f in ["replicas", "minReplicas", "maxReplicas", "template", "restartPolicy"] {
            assert!(worker.get(f).is_some(), "worker.{f}");
        }
        let so = schema(&super::scale_out());
        assert_eq!(so["properties"]["spec"]["properties"]["toAdd"]["properties"]["count"]["type"], "integer");
        assert!(so["properties"]["status"]["properties"].get("addPods").is_some());
        let si = schema(&super::scale_in());
        let to_delete = &si["properties"]["spec"]["properties"]["toDelete"]["properties"];
        assert_eq!(to_delete["podNames"]["items"]["type"], "string");
        assert!(si["properties"]["status"]["properties"].get("toDeletePods").is_some());
    }

    #[test]
    fn the_command_crd_has_its_fields_at_the_top_level() {
        let crd = super::command();
        let s = schema(&crd);
        assert_structural(&s, "");
        let props: Vec<&String> = s["properties"].as_object().unwrap().keys().collect();
        assert_eq!(props, ["action", "apiVersion", "kind", "message", "metadata", "reason", "target"]);
        assert_eq!(s["properties"]["target"]["required"], serde_json::json!(["apiVersion", "kind", "name", "uid"]));
        assert!(crd.spec.versions[0].subresources.is_none());
        assert_eq!(crd.spec.scope, "Namespaced");
    }

    /// `description`s removed from every node, and numbers as floats (the schema's
    /// `minimum` is one; `0` and `0.0` are the same bound).
    fn without_descriptions(mut v: Value) -> Value {
        fn floats(v: &mut Value) {
            match v {
                Value::Number(n) => *v = serde_json::json!(n.as_f64().unwrap()),
                Value::Object(m) => m.values_mut().for_each(floats),
                Value::Array(a) => a.iter_mut().for_each(floats),
                _ => {}
            }
        }
        super::strip(&mut v, &["description"]);
        floats(&mut v);
        v
    }

    #[test]
    fn the_hyper_node_crd_is_volcanos_but_for_the_descriptions() {
        let ours = serde_json::to_value(super::hyper_node()).unwrap();
        let volcano: Value =
            serde_yaml_ng::from_str(include_str!("../tests/volcano/topology.volcano.sh_hypernodes.yaml")).unwrap();
        assert_structural(&ours["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "");
        // Everything but the schema, as Volcano's (but controller-gen's version annotation).
        let mut annotations = volcano["metadata"]["annotations"].clone();
        annotations.as_object_mut().unwrap().remove("controller-gen.kubebuilder.io/version");
        assert_eq!(ours["metadata"]["annotations"], annotations);
        assert_eq!(ours["metadata"]["name"], "hypernodes.topology.volcano.sh");
        assert_eq!(ours["spec"]["names"], volcano["spec"]["names"]);
        assert_eq!(ours["spec"]["scope"], "Cluster");
        assert_eq!(ours["spec"]["group"], volcano["spec"]["group"]);
        let (v, theirs) = (&ours["spec"]["versions"][0], &volcano["spec"]["versions"][0]);
        for field in ["name", "served", "storage", "subresources", "additionalPrinterColumns"] {
            assert_eq!(v[field], theirs[field], "versions[0].{field}");
        }
        // The schema, field for field: types, formats, enums, limits, patterns, required
        // fields, list and map types and the CEL rules with their messages.
        let (ours, theirs) = (
            without_descriptions(v["schema"]["openAPIV3Schema"].clone()),
            without_descriptions(theirs["schema"]["openAPIV3Schema"].clone()),
        );
        // Volcano's also types the apiVersion, kind and metadata, which every object has.
        let mut theirs_props = theirs.clone();
        for f in ["apiVersion", "kind", "metadata"] {
            theirs_props["properties"].as_object_mut().unwrap().remove(f);
        }
        if ours != theirs_props {
            panic!(
                "the schemas differ:\nours:   {}\nVolcano: {}",
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&theirs_props).unwrap()
            );
        }
        let rules = &ours["properties"]["spec"]["properties"]["members"]["items"]["properties"]["selector"]
            ["x-kubernetes-validations"];
        assert_eq!(rules[1]["message"], "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified");
    }
}
