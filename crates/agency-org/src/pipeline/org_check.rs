//! A pipeline checked together with the organisations it runs against:
//! each `agent` stage must name an agent that one
//! loaded organisation has, a verb that agent declares, an output schema
//! equal to the verb's (the stage's artifact *is* the verb's answer, so a
//! different schema would refuse answers the callee was allowed to give,
//! or accept ones it was not), and reads that provide every property the
//! verb's input requires (the stage's input is the object of its reads,
//! each under its last field's name). A `.pipeline` compiles on its own;
//! this runs where an organisation is known, when a run starts, and
//! reports each problem at the stage's `file:line`.

use serde_json::Value;

use crate::diag::{Diagnostic, Diags, Pos, did_you_mean};
use crate::model::{AgencyModel, Verb};

use super::model::{PipelineModel, ReadPath, StageKind, StageModel};

/// Where an agent stage's call goes: the organisation, the agent and the
/// verb's contract.
#[derive(Debug, Clone, PartialEq)]
pub struct StageTarget {
    /// The stage's index in the pipeline.
    pub stage: usize,
    pub org: String,
    pub agent: String,
    pub verb: Verb,
}

/// The name a read has in the stage's input object: its last field, else
/// the stage's name (or `input`). The same rule as a declared input's.
pub fn read_name(r: &ReadPath) -> &str {
    r.fields.last().unwrap_or(&r.stage)
}

/// Check every agent stage of `model` against `orgs` (name, model of each
/// organisation that is up). The targets, or every problem found.
pub fn check_agent_stages(
    model: &PipelineModel,
    orgs: &[(&str, &AgencyModel)],
) -> Result<Vec<StageTarget>, Vec<Diagnostic>> {
    let mut diags = Diags::default();
    let mut targets = Vec::new();
    for (i, s) in model.stages.iter().enumerate() {
        let StageKind::Agent { agent, verb } = &s.kind else {
            continue;
        };
        if let Some(t) = check_stage(&mut diags, i, s, agent, verb, orgs) {
            targets.push(t);
        }
    }
    if diags.has_errors() {
        Err(diags.sorted())
    } else {
        Ok(targets)
    }
}

fn check_stage(
    diags: &mut Diags,
    i: usize,
    s: &StageModel,
    agent: &str,
    verb: &str,
    orgs: &[(&str, &AgencyModel)],
) -> Option<StageTarget> {
    // The model keeps the stage's line only: the column is the line's start.
    let pos = Pos::new(s.source.line, 1);
    let file = s.source.file.as_str();
    let me = &s.name;
    let found: Vec<(&str, &crate::model::Agent)> = orgs
        .iter()
        .flat_map(|(o, m)| {
            m.all_agents()
                .into_iter()
                .filter(|(_, a)| a.name == agent)
                .map(move |(_, a)| (*o, a))
        })
        .collect();
    let (org, a) = match found.as_slice() {
        [] => {
            let names: Vec<String> = orgs
                .iter()
                .flat_map(|(_, m)| m.all_agents().into_iter().map(|(_, a)| a.name.clone()))
                .collect();
            let hint = did_you_mean(agent, names.iter().map(String::as_str));
            let up = if orgs.is_empty() {
                " (no organisation is up: apply one with `agency org up DIR`)".to_owned()
            } else {
                String::new()
            };
            diags.error(
                file,
                pos,
                format!("stage `{me}` calls agent `{agent}`, which no organisation that is up has{hint}{up}"),
            );
            return None;
        }
        [one] => *one,
        many => {
            let names: Vec<&str> = many.iter().map(|(o, _)| *o).collect();
            diags.error(
                file,
                pos,
                format!(
                    "stage `{me}` calls agent `{agent}`, which several organisations have ({}): rename one so the stage names a single agent",
                    names.join(", ")
                ),
            );
            return None;
        }
    };
    let Some(v) = a.verbs.iter().find(|v| v.name == verb) else {
        let hint = did_you_mean(verb, a.verbs.iter().map(|v| v.name.as_str()));
        let has = if a.verbs.is_empty() {
            "it declares no verbs".to_owned()
        } else {
            let names: Vec<&str> = a.verbs.iter().map(|v| v.name.as_str()).collect();
            format!("its verbs: {}", names.join(", "))
        };
        diags.error(
            file,
            pos,
            format!("stage `{me}` calls verb `{verb}` of agent `{agent}` (organisation {org}), which the agent does not declare{hint} ({has})"),
        );
        return None;
    };
    let before = diags.len();
    if let Some(at) = difference(&s.output_schema, &v.output, "") {
        let at = if at.is_empty() { "/".to_owned() } else { at };
        diags.error(
            file,
            pos,
            format!(
                "the output schema of stage `{me}` differs from the output schema of verb `{verb}` of agent `{agent}` (first at {at}): the stage's artifact is the verb's answer, so declare the verb's output schema as the stage's `output`"
            ),
        );
    }
    let required: Vec<&str> = v
        .input
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for p in required {
        if !s.reads.iter().any(|r| read_name(r) == p) {
            diags.error(
                file,
                pos,
                format!(
                    "stage `{me}` calls verb `{verb}` of agent `{agent}`, whose input requires `{p}`, but none of the stage's reads provides it (a read provides its last field's name: `Stage.{p}`)"
                ),
            );
        }
    }
    (diags.len() == before).then(|| StageTarget {
        stage: i,
        org: org.to_owned(),
        agent: agent.to_owned(),
        verb: v.clone(),
    })
}

/// Keywords that annotate a schema without constraining a value.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$comment",
    "examples",
    "default",
    "deprecated",
];

/// Keywords whose value is a map from names to schemas (its keys are not
/// keywords, so a property called `description` is not an annotation).
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// The JSON Pointer of the first place two schemas differ in what they
/// allow (annotations aside; numbers compared by value), `None` if nowhere.
fn difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys = |m: &serde_json::Map<String, Value>| -> Vec<String> {
                m.keys()
                    .filter(|k| !ANNOTATIONS.contains(&k.as_str()))
                    .cloned()
                    .collect()
            };
            let (kx, ky) = (keys(x), keys(y));
            if let Some(k) = kx
                .iter()
                .chain(&ky)
                .find(|k| !(x.contains_key(*k) && y.contains_key(*k)))
            {
                return Some(format!("{at}/{}", escape(k)));
            }
            for k in kx {
                let here = format!("{at}/{}", escape(&k));
                let d = if SCHEMA_MAPS.contains(&k.as_str()) {
                    names_differ(&x[&k], &y[&k], &here)
                } else {
                    difference(&x[&k], &y[&k], &here)
                };
                if d.is_some() {
                    return d;
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(at.to_owned());
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (p, q))| difference(p, q, &format!("{at}/{i}")))
        }
        (Value::Number(x), Value::Number(y)) => (x.as_f64() != y.as_f64()).then(|| at.to_owned()),
        _ => (a != b).then(|| at.to_owned()),
    }
}

/// [`difference`] of two maps of named schemas: every name is compared,
/// annotations only inside each schema.
fn names_differ(a: &Value, b: &Value, at: &str) -> Option<String> {
    let (Value::Object(x), Value::Object(y)) = (a, b) else {
        return difference(a, b, at);
    };
    if let Some(k) = x
        .keys()
        .chain(y.keys())
        .find(|k| !(x.contains_key(*k) && y.contains_key(*k)))
    {
        return Some(format!("{at}/{}", escape(k)));
    }
    x.iter()
        .find_map(|(k, v)| difference(v, &y[k], &format!("{at}/{}", escape(k))))
}

fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::super::compile_pipeline_str;
    use super::*;
    use serde_json::json;

    /// A reviewer agent with verb `review`, and a writer without verbs.
    fn org() -> AgencyModel {
        let review = json!({"name": "review",
            "input": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "string"}}},
            "output": {"type": "object", "required": ["verdict"], "additionalProperties": false,
                       "properties": {"verdict": {"enum": ["ok", "redo"]}, "description": {"type": "string"}}}});
        let agent = |name: &str, verbs: Value| {
            json!({"name": name, "title": name, "verbs": verbs,
                   "source": {"file": format!("{name}.agent"), "line": 1}})
        };
        serde_json::from_value(json!({
            "name": "Org", "type": "Agency", "executiveAgent": "Writer",
            "agents": [agent("Writer", json!([])), agent("Reviewer", json!([review]))],
            "source": {"file": "agents.json", "line": 1}
        }))
        .unwrap()
    }

    /// Line 11 is the agent stage's `agent:`, 12 its `verb:`, 13 its
    /// reads, 14-18 its output.
    const BASE: &str = r#"---
pipeline: reviewed
stages:
  - name: Draft
    kind: code
    step: retriever
    reads: [input]
    output: {type: object, properties: {draft: {type: string}}}
  - name: Review
    kind: agent
    agent: Reviewer
    verb: review
    reads: [Draft.draft]
    output:
      type: object
      required: [verdict]
      additionalProperties: false
      properties: {verdict: {enum: [ok, redo], description: "the call"}, description: {type: string}}
---
"#;

    fn edited(line: usize, with: &str) -> String {
        let mut lines: Vec<&str> = BASE.split('\n').collect();
        lines[line - 1] = with;
        lines.join("\n")
    }

    fn check(text: &str, orgs: &[(&str, &AgencyModel)]) -> Result<Vec<StageTarget>, Vec<String>> {
        let m = compile_pipeline_str("r.pipeline", text).unwrap_or_else(|e| panic!("{e}"));
        check_agent_stages(&m, orgs).map_err(|d| d.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn issue31_an_agent_stage_matching_its_verb_resolves_to_its_target() {
        let o = org();
        let t = check(BASE, &[("org", &o)]).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].stage, t[0].org.as_str(), t[0].agent.as_str()),
            (1, "org", "Reviewer")
        );
        assert_eq!(t[0].verb.name, "review");
    }

    /// (line to replace, replacement, message part); each fails at
    /// `r.pipeline:9:1`, the stage's line.
    const CASES: &[(usize, &str, &str)] = &[
        (
            11,
            "    agent: Reviewr",
            "stage `Review` calls agent `Reviewr`, which no organisation that is up has; did you mean `Reviewer`?",
        ),
        (
            12,
            "    verb: reveiw",
            "calls verb `reveiw` of agent `Reviewer` (organisation org), which the agent does not declare; did you mean `review`? (its verbs: review)",
        ),
        (
            11,
            "    agent: Writer",
            "verb `review` of agent `Writer` (organisation org), which the agent does not declare (it declares no verbs)",
        ),
        (
            17,
            "      additionalProperties: true",
            "differs from the output schema of verb `review` of agent `Reviewer` (first at /additionalProperties)",
        ),
        (
            16,
            "      required: [verdict, description]",
            "(first at /required)",
        ),
        (
            18,
            "      properties: {verdict: {enum: [ok, redo]}}",
            "(first at /properties/description)",
        ),
        (
            18,
            "      properties: {verdict: {enum: [ok]}, description: {type: string}}",
            "(first at /properties/verdict/enum)",
        ),
        (
            13,
            "    reads: [Draft]",
            "whose input requires `draft`, but none of the stage's reads provides it",
        ),
    ];

    #[test]
    fn issue31_an_agent_stage_that_does_not_fit_its_verb_fails_at_the_stage_line() {
        let o = org();
        for (line, with, want) in CASES {
            let text = edited(*line, with);
            let got = check(&text, &[("org", &o)]).expect_err(with);
            assert_eq!(got.len(), 1, "{with}: {got:?}");
            assert!(
                got[0].starts_with("r.pipeline:9:1: error: "),
                "{with}: {}",
                got[0]
            );
            assert!(got[0].contains(want), "{with}:\n{}\nwants {want}", got[0]);
        }
    }

    #[test]
    fn issue31_no_organisation_or_two_with_the_agent_is_an_error() {
        let o = org();
        let none = check(BASE, &[]).unwrap_err();
        assert!(none[0].contains("no organisation is up"), "{none:?}");
        let two = check(BASE, &[("a", &o), ("b", &o)]).unwrap_err();
        assert!(
            two[0].contains("several organisations have (a, b)"),
            "{two:?}"
        );
    }

    #[test]
    fn issue31_schemas_differ_by_constraints_not_by_annotations_or_number_spelling() {
        let a = json!({"type": "object", "title": "x", "properties": {"title": {"type": "integer", "minimum": 1}}});
        let same = json!({"type": "object", "properties": {"title": {"type": "integer", "minimum": 1.0, "description": "y"}}});
        let other =
            json!({"type": "object", "properties": {"title": {"type": "integer", "minimum": 2}}});
        let dropped = json!({"type": "object", "properties": {}});
        assert_eq!(difference(&a, &same, ""), None);
        assert_eq!(
            difference(&a, &other, "").as_deref(),
            Some("/properties/title/minimum")
        );
        // A property named like an annotation is still a property.
        assert_eq!(
            difference(&a, &dropped, "").as_deref(),
            Some("/properties/title")
        );
    }
}
