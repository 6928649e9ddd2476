//! The JSON Schemas of a `.pipeline` (the pipeline's `input`, each stage's
//! `output` and declared `input`), written as YAML: shared definitions are
//! declared once under the top-level `schemas:` key and used as
//! `$ref: "#/schemas/NAME"`. The compiler rewrites each such reference to
//! `#/$defs/NAME` and copies every definition a schema reaches into its
//! `$defs`, so that each compiled schema is self-contained (the engine, a
//! provider's constrained output and a stored artifact's reader need
//! nothing else). Also here: compiling a schema as draft 2020-12, and
//! walking a schema's `properties` along a field path (what `reads`,
//! placeholders, stamps and checks name).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::diag::{Pos, did_you_mean};
use crate::fields::Cx;
use crate::node::{Node, NodeKind};

/// How a source names a shared schema in `$ref`.
pub const SCHEMA_REF_PREFIX: &str = "#/schemas/";

/// Where a compiled schema holds the shared schemas it uses.
pub const DEFS_REF_PREFIX: &str = "#/$defs/";

/// A schema written in the source, converted to JSON, with the shared
/// schemas it names directly.
#[derive(Debug, Clone, Default)]
pub struct Converted {
    pub value: Value,
    pub uses: BTreeSet<String>,
    /// Converting it found errors (already reported): compiling it would
    /// only repeat them.
    pub broken: bool,
}

/// The top-level `schemas:`: name → converted definition.
pub type Shared = BTreeMap<String, Converted>;

/// Convert a schema node, rewriting `#/schemas/NAME` references; an
/// unknown name or a reference of another form is an error at the `$ref`.
pub fn convert(cx: &mut Cx, node: &Node, names: &BTreeSet<String>) -> Converted {
    let mut uses = BTreeSet::new();
    let before = cx.diags.len();
    let value = convert_node(cx, node, names, &mut uses);
    Converted {
        value,
        uses,
        broken: cx.diags.len() > before,
    }
}

fn convert_node(
    cx: &mut Cx,
    node: &Node,
    names: &BTreeSet<String>,
    uses: &mut BTreeSet<String>,
) -> Value {
    match &node.kind {
        NodeKind::Map(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                let key = k.scalar_text().unwrap_or_default();
                if out.contains_key(key) {
                    cx.err(k.pos, format!("key `{key}` is given twice"));
                    continue;
                }
                let value = match key {
                    "$ref" => reference(cx, v, names, uses),
                    "$defs" | "definitions" => {
                        cx.err(k.pos, format!("`{key}` is not written in a pipeline's schemas: declare shared schemas once under the top-level `schemas:` key and use them as `$ref: \"#/schemas/NAME\"`"));
                        continue;
                    }
                    _ => convert_node(cx, v, names, uses),
                };
                out.insert(key.to_owned(), value);
            }
            Value::Object(out)
        }
        NodeKind::Seq(items) => Value::Array(
            items
                .iter()
                .map(|i| convert_node(cx, i, names, uses))
                .collect(),
        ),
        NodeKind::Scalar { .. } => node.to_json(),
    }
}

fn reference(
    cx: &mut Cx,
    v: &Node,
    names: &BTreeSet<String>,
    uses: &mut BTreeSet<String>,
) -> Value {
    let Some(text) = v.as_str() else {
        cx.err(
            v.pos,
            format!(
                "`$ref` must be a string such as \"#/schemas/NAME\", found {}",
                v.type_name()
            ),
        );
        return v.to_json();
    };
    let Some(name) = text.strip_prefix(SCHEMA_REF_PREFIX) else {
        cx.err(v.pos, format!("`$ref: {text}` is not a shared schema: write `$ref: \"#/schemas/NAME\"` with NAME declared under the top-level `schemas:` key"));
        return v.to_json();
    };
    if !names.contains(name) {
        let hint = did_you_mean(name, names.iter().map(String::as_str));
        cx.err(v.pos, format!("`$ref` names schema `{name}`, which is not declared under the top-level `schemas:`{hint}"));
        return v.to_json();
    }
    uses.insert(name.to_owned());
    Value::String(format!("{DEFS_REF_PREFIX}{name}"))
}

/// The schema made self-contained: every shared schema it reaches,
/// directly or through others, under `$defs` (sorted, so deterministic).
pub fn self_contained(c: &Converted, shared: &Shared) -> Value {
    let reached = reached(c, shared);
    let mut value = c.value.clone();
    if let (Value::Object(m), false) = (&mut value, reached.is_empty()) {
        let defs: Map<String, Value> = reached
            .into_iter()
            .filter_map(|n| shared.get(&n).map(|d| (n, d.value.clone())))
            .collect();
        m.insert("$defs".into(), Value::Object(defs));
    }
    value
}

/// The shared schemas `c` uses, directly or through others.
pub fn reached(c: &Converted, shared: &Shared) -> BTreeSet<String> {
    let mut reached = BTreeSet::new();
    let mut todo: Vec<&String> = c.uses.iter().collect();
    while let Some(name) = todo.pop() {
        if reached.insert(name.clone())
            && let Some(d) = shared.get(name)
        {
            todo.extend(d.uses.iter());
        }
    }
    reached
}

/// Whether `c` or a shared schema it reaches had errors when converted.
pub fn is_broken(c: &Converted, shared: &Shared) -> bool {
    c.broken
        || reached(c, shared)
            .iter()
            .any(|n| shared.get(n).is_some_and(|d| d.broken))
}

/// Why a schema does not compile: the message and where in the schema
/// (a JSON pointer, empty for the whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidSchema {
    pub pointer: String,
    pub message: String,
}

/// Compile `schema` as JSON Schema draft 2020-12, with `format` asserted
/// (a `date-time` that is not RFC 3339 is invalid). The stage engine uses
/// the same options, so that what compiles here validates the same there.
pub fn validator(schema: &Value) -> Result<jsonschema::Validator, InvalidSchema> {
    let with_draft = match schema {
        Value::Object(m) if !m.contains_key("$schema") => {
            let mut m = m.clone();
            m.insert(
                "$schema".into(),
                Value::String("https://json-schema.org/draft/2020-12/schema".into()),
            );
            Value::Object(m)
        }
        other => other.clone(),
    };
    if let Err(e) = jsonschema::meta::validate(&with_draft) {
        return Err(InvalidSchema {
            pointer: e.instance_path().to_string(),
            message: e.to_string(),
        });
    }
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| InvalidSchema {
            pointer: e.instance_path().to_string(),
            message: e.to_string(),
        })
}

/// The position of the part of `node` a JSON pointer names, as deep as the
/// tree goes (an error inside a schema points at its line).
pub fn node_at(node: &Node, pointer: &str) -> Pos {
    let mut at = node;
    for raw in pointer.split('/').skip(1) {
        let part = raw.replace("~1", "/").replace("~0", "~");
        let next = match &at.kind {
            NodeKind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.scalar_text() == Some(part.as_str()))
                .map(|(_, v)| v),
            NodeKind::Seq(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
            NodeKind::Scalar { .. } => None,
        };
        match next {
            Some(n) => at = n,
            None => break,
        }
    }
    at.pos
}

/// A field path that leaves the schema: the index of the first field the
/// schema does not have, and the fields it has there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoField {
    pub index: usize,
    pub available: Vec<String>,
}

/// `schema` with `$ref`s to its own `$defs` followed (at most a few
/// hops: a reference cycle is a schema, not a path).
pub fn deref<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut at = schema;
    for _ in 0..16 {
        let Some(name) = at
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(DEFS_REF_PREFIX))
        else {
            break;
        };
        match root.get("$defs").and_then(|d| d.get(name)) {
            Some(d) => at = d,
            None => break,
        }
    }
    at
}

/// The sub-schema at `fields` below `root`: each field is a property,
/// looked up through `$ref`s and, for arrays, in their `items` (so
/// `tasks.id` is each task's id).
pub fn walk<'a>(root: &'a Value, fields: &[String]) -> Result<&'a Value, NoField> {
    let mut at = deref(root, root);
    for (index, f) in fields.iter().enumerate() {
        if at.get("properties").is_none()
            && let Some(items) = at.get("items")
        {
            at = deref(items, root);
        }
        match at.get("properties").and_then(|p| p.get(f)) {
            Some(s) => at = deref(s, root),
            None => {
                let available = at
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                return Err(NoField { index, available });
            }
        }
    }
    Ok(at)
}

/// The JSON types a (dereferenced) schema allows, when it says: from
/// `type`, else `const`, else `enum`. `None`: any.
pub fn types_of(schema: &Value) -> Option<BTreeSet<String>> {
    let of_value = |v: &Value| {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
        .to_owned()
    };
    match (schema.get("type"), schema.get("const"), schema.get("enum")) {
        (Some(Value::String(t)), _, _) => Some(BTreeSet::from([t.clone()])),
        (Some(Value::Array(ts)), _, _) => Some(
            ts.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        ),
        (_, Some(c), _) => Some(BTreeSet::from([of_value(c)])),
        (_, _, Some(Value::Array(vs))) => Some(vs.iter().map(of_value).collect()),
        _ => None,
    }
}

/// Whether every value of a type in `given` is allowed by `wanted`
/// (an integer is a number; an unknown side accepts).
pub fn types_fit(given: Option<&BTreeSet<String>>, wanted: Option<&BTreeSet<String>>) -> bool {
    match (given, wanted) {
        (Some(g), Some(w)) => g
            .iter()
            .all(|t| w.contains(t) || (t == "integer" && w.contains("number"))),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn walks_through_refs_and_items() {
        let root = json!({
            "type": "object",
            "properties": { "tasks": { "type": "array", "items": { "$ref": "#/$defs/T" } } },
            "$defs": { "T": { "type": "object", "properties": { "id": { "type": "string" } } } }
        });
        let f = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            walk(&root, &f(&["tasks", "id"])).map(types_of),
            Ok(Some(BTreeSet::from(["string".to_owned()])))
        );
        assert_eq!(
            walk(&root, &f(&["tasks", "title"])),
            Err(NoField {
                index: 1,
                available: vec!["id".into()]
            })
        );
        assert_eq!(
            walk(&root, &f(&["nope"])).map(|_| ()),
            Err(NoField {
                index: 0,
                available: vec!["tasks".into()]
            })
        );
    }

    #[test]
    fn types_fit_cases() {
        let s = |t: &[&str]| t.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        for (given, wanted, fits) in [
            (s(&["integer"]), s(&["number"]), true),
            (s(&["number"]), s(&["integer"]), false),
            (s(&["string"]), s(&["string", "null"]), true),
            (s(&["array"]), s(&["string"]), false),
        ] {
            assert_eq!(
                types_fit(Some(&given), Some(&wanted)),
                fits,
                "{given:?} into {wanted:?}"
            );
        }
        assert!(types_fit(None, Some(&s(&["string"]))));
    }

    #[test]
    fn validator_asserts_formats_and_rejects_bad_schemas() {
        let v = validator(&json!({ "type": "string", "format": "date-time" })).expect("compiles");
        assert!(v.is_valid(&json!("2026-12-03T10:00:00Z")));
        assert!(!v.is_valid(&json!("yesterday")));
        let e = validator(&json!({ "type": "object", "properties": { "a": { "type": "strin" } } }))
            .expect_err("bad type");
        assert_eq!(e.pointer, "/properties/a/type");
        assert!(validator(&json!({ "minItems": -1 })).is_err());
    }
}
