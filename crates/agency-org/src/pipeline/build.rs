//! From the raw frontmatter and the prompt sections to the checked
//! [`PipelineModel`]: every schema self-contained and compiled, every
//! read and placeholder resolved against what earlier stages produce,
//! stamps, checks and a stage's declared input checked against its output
//! schema and its reads. Problems go to the diagnostics; the caller
//! returns no model when any is an error.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::diag::{Pos, closest, did_you_mean};
use crate::fields::Cx;
use crate::model::SourceRef;
use crate::node::Node;

use super::model::{
    Check, PIPELINE_VERSION, PipelineModel, ReadPath, StageKind, StageModel, StampedField,
};
use super::read::{RawPipeline, RawStage, Stamp};
use super::schemas::{self, Converted, Shared};
use super::template::{self, PromptSection};

/// What the builder needs besides the frontmatter.
#[derive(Debug)]
pub struct Source<'a> {
    pub file: &'a str,
    pub hash: String,
    pub sections: Vec<PromptSection>,
}

/// A stage already built: what later stages may read.
struct Earlier {
    name: String,
    output: Value,
}

pub fn build(cx: &mut Cx, raw: &RawPipeline, src: Source) -> PipelineModel {
    let shared = shared_schemas(cx, raw);
    let input_schema = match raw.input {
        Some(node) => schema(cx, node, &shared, "the pipeline's `input`", false),
        None => json!({ "type": "string" }),
    };
    let prompts = prompt_sections(cx, raw, &src.sections);
    let mut stages: Vec<StageModel> = Vec::new();
    let mut earlier: Vec<Earlier> = Vec::new();
    let all: Vec<&str> = raw
        .stages
        .iter()
        .filter_map(|s| s.name.as_ref().map(|n| n.v.as_str()))
        .collect();
    for s in &raw.stages {
        let Some(name) = &s.name else { continue };
        if let Some(first) = stages.iter().find(|m| m.name == name.v) {
            cx.err(
                name.pos,
                format!(
                    "stage `{}` is declared twice (first at line {})",
                    name.v, first.source.line
                ),
            );
            continue;
        }
        let output = s
            .output
            .map(|o| {
                schema(
                    cx,
                    o,
                    &shared,
                    &format!("the output of stage `{}`", name.v),
                    true,
                )
            })
            .unwrap_or(Value::Null);
        let reads = reads(cx, s, &name.v, &input_schema, &earlier, &all);
        let stamped = stamps(cx, s, &output);
        let checks = checks(cx, s, &output);
        let outcomes = s
            .outcomes
            .as_ref()
            .and_then(|o| super::outcomes::build(cx, o, &name.v, &output));
        if let Some(node) = s.input {
            declared_input(cx, node, &shared, &name.v, &reads);
        }
        let kind = kind(
            cx,
            s,
            &name.v,
            prompts.get(name.v.as_str()).copied(),
            &reads,
        );
        earlier.push(Earlier {
            name: name.v.clone(),
            output: output.clone(),
        });
        stages.push(StageModel {
            name: name.v.clone(),
            description: s.description.clone(),
            kind,
            reads: reads.into_iter().map(|r| r.path).collect(),
            output_schema: output,
            stamped,
            checks,
            retry: s.retry.clone(),
            budget: s.budget.clone(),
            outcomes,
            source: SourceRef {
                file: src.file.to_owned(),
                line: s.pos.line,
            },
        });
    }
    PipelineModel {
        version: PIPELINE_VERSION.to_owned(),
        name: raw.name.as_ref().map(|n| n.v.clone()).unwrap_or_default(),
        description: raw.description.clone(),
        input_schema,
        stages,
        source: SourceRef {
            file: src.file.to_owned(),
            line: 1,
        },
        source_hash: src.hash,
    }
}

/// The top-level `schemas:`, each converted and compiled once (so an
/// error in one is reported at its definition, not at every use).
fn shared_schemas(cx: &mut Cx, raw: &RawPipeline) -> Shared {
    let names: BTreeSet<String> = raw.schemas.iter().map(|(n, _)| n.v.clone()).collect();
    let shared: Shared = raw
        .schemas
        .iter()
        .map(|(n, node)| (n.v.clone(), schemas::convert(cx, node, &names)))
        .collect();
    for (n, node) in &raw.schemas {
        let Some(c) = shared.get(&n.v) else { continue };
        if schemas::is_broken(c, &shared) {
            continue;
        }
        if let Err(e) = schemas::validator(&schemas::self_contained(c, &shared))
            && !e.pointer.starts_with("/$defs/")
        {
            cx.err(
                schemas::node_at(node, &e.pointer),
                format!(
                    "schema `{}` is not valid JSON Schema (draft 2020-12): {}",
                    n.v, e.message
                ),
            );
        }
    }
    shared
}

/// A schema written in the source, self-contained and compiled; an
/// output schema must describe an object.
fn schema(cx: &mut Cx, node: &Node, shared: &Shared, what: &str, object: bool) -> Value {
    let names: BTreeSet<String> = shared.keys().cloned().collect();
    let c: Converted = schemas::convert(cx, node, &names);
    let value = schemas::self_contained(&c, shared);
    if schemas::is_broken(&c, shared) {
        return value;
    }
    if let Err(e) = schemas::validator(&value) {
        // Errors inside a shared schema were reported at its definition.
        if !e.pointer.starts_with("/$defs/") {
            cx.err(
                schemas::node_at(node, &e.pointer),
                format!(
                    "{what} is not valid JSON Schema (draft 2020-12): {}",
                    e.message
                ),
            );
        }
    } else if object && value.get("type").and_then(Value::as_str) != Some("object") {
        cx.err(node.pos, format!("{what} must be an object schema (`type: object`): a stage's output is a JSON object"));
    }
    value
}

/// The `## Heading` sections that are prompts, by stage name. A section
/// naming a stage that is not an llm stage is an error, and so is one
/// whose heading is a near miss of a stage's name; others are prose.
fn prompt_sections<'a>(
    cx: &mut Cx,
    raw: &RawPipeline,
    sections: &'a [PromptSection],
) -> BTreeMap<&'a str, &'a PromptSection> {
    let mut out: BTreeMap<&str, &PromptSection> = BTreeMap::new();
    let llm: Vec<&str> = raw
        .stages
        .iter()
        .filter(|s| s.kind.as_ref().is_some_and(|k| k.v == "llm"))
        .filter_map(|s| s.name.as_ref().map(|n| n.v.as_str()))
        .collect();
    for sec in sections {
        let h = sec.heading.as_str();
        if llm.contains(&h) {
            if out.insert(h, sec).is_some() {
                cx.err(sec.pos, format!("stage `{h}` has two prompt sections"));
            }
        } else if let Some(s) = raw
            .stages
            .iter()
            .find(|s| s.name.as_ref().is_some_and(|n| n.v == h))
        {
            let kind = s.kind.as_ref().map_or("unknown", |k| k.v.as_str());
            cx.err(
                sec.pos,
                format!(
                    "section `{h}` is a prompt, but stage `{h}` is not an llm stage (it is {kind})"
                ),
            );
        } else if let Some(near) = closest(h, llm.iter().copied()) {
            cx.err(
                sec.pos,
                format!("section `{h}` names no stage; did you mean `{near}`?"),
            );
        } else {
            cx.warn(sec.pos, format!("section `{h}` names no llm stage; it is prose and ignored (a prompt's heading is its stage's name)"));
        }
    }
    out
}

/// A resolved read: the path, where it was written and the schema of
/// what it reads.
struct Read {
    path: ReadPath,
    pos: Pos,
    schema: Value,
}

impl Read {
    /// The name the read has in a declared input: its last field, else
    /// the stage's name (or `input`).
    fn name(&self) -> &str {
        self.path.fields.last().unwrap_or(&self.path.stage)
    }
}

fn reads(
    cx: &mut Cx,
    s: &RawStage,
    me: &str,
    input: &Value,
    earlier: &[Earlier],
    all: &[&str],
) -> Vec<Read> {
    let mut out: Vec<Read> = Vec::new();
    let history = super::history_schema();
    let facts = super::facts_schema();
    for r in &s.reads {
        let Some(path) = parse_path(cx, &r.v, r.pos, "read") else {
            continue;
        };
        if out.iter().any(|o| o.path == path) {
            cx.err(r.pos, format!("`{}` is read twice", r.v));
            continue;
        }
        let root = if path.stage == "input" {
            input
        } else if path.stage == super::HISTORY {
            &history
        } else if path.stage == super::FACTS {
            &facts
        } else if let Some(e) = earlier.iter().find(|e| e.name == path.stage) {
            &e.output
        } else {
            let why = if path.stage == me {
                format!(
                    "stage `{me}` reads `{}`, its own output: a stage reads only `input`, `history`, `facts` and earlier stages' outputs",
                    r.v
                )
            } else if all.contains(&path.stage.as_str()) {
                format!(
                    "stage `{me}` reads `{}`, but stage `{}` runs after it: a stage reads only `input`, `history`, `facts` and earlier stages' outputs",
                    r.v, path.stage
                )
            } else {
                let names = earlier.iter().map(|e| e.name.as_str()).chain([
                    "input",
                    super::HISTORY,
                    super::FACTS,
                ]);
                format!(
                    "stage `{me}` reads `{}`, but no stage is named `{}`{}",
                    r.v,
                    path.stage,
                    did_you_mean(&path.stage, names)
                )
            };
            cx.err(r.pos, why);
            continue;
        };
        match schemas::walk(root, &path.fields) {
            Ok(sub) => {
                let mut sub = sub.clone();
                // Keep the read's schema self-contained for type checks.
                if let (Value::Object(m), Some(defs)) = (&mut sub, root.get("$defs")) {
                    m.entry("$defs").or_insert_with(|| defs.clone());
                }
                out.push(Read {
                    path,
                    pos: r.pos,
                    schema: sub,
                });
            }
            Err(e) => cx.err(r.pos, no_field(me, &r.v, &path, &e)),
        }
    }
    out
}

/// "stage X reads `Observer.mood`, but stage `Observer`'s output has no field `mood` …"
fn no_field(me: &str, written: &str, path: &ReadPath, e: &schemas::NoField) -> String {
    let field = &path.fields[e.index];
    let owner = if path.stage == "input" {
        "the pipeline's input".to_owned()
    } else if path.stage == super::HISTORY {
        "the run's history".to_owned()
    } else if path.stage == super::FACTS {
        "the run's facts".to_owned()
    } else {
        format!("stage `{}`'s output", path.stage)
    };
    let at = if e.index == 0 {
        String::new()
    } else {
        format!(" at `{}`", path.fields[..e.index].join("."))
    };
    let hint = did_you_mean(field, e.available.iter().map(String::as_str));
    let has = if e.available.is_empty() {
        " (it has no fields there)".to_owned()
    } else {
        format!(" (it has: {})", e.available.join(", "))
    };
    format!("stage `{me}` reads `{written}`, but {owner} has no field `{field}`{at}{hint}{has}")
}

/// `input`, `Stage` or `Stage.a.b`, each part non-empty.
fn parse_path(cx: &mut Cx, text: &str, pos: Pos, what: &str) -> Option<ReadPath> {
    let mut parts = text.split('.');
    let stage = parts.next().unwrap_or_default();
    let fields: Vec<String> = parts.map(str::to_owned).collect();
    if stage.is_empty()
        || fields.iter().any(String::is_empty)
        || text.chars().any(char::is_whitespace)
    {
        cx.err(
            pos,
            format!("bad {what} `{text}`: expected `input`, `Stage` or `Stage.field.sub`"),
        );
        return None;
    }
    Some(ReadPath {
        stage: stage.to_owned(),
        fields,
    })
}

fn kind(
    cx: &mut Cx,
    s: &RawStage,
    me: &str,
    section: Option<&PromptSection>,
    reads: &[Read],
) -> StageKind {
    let text = |o: &Option<crate::raw::S<String>>| o.as_ref().map(|v| v.v.clone());
    match s.kind.as_ref().map(|k| k.v.as_str()) {
        Some("agent") => StageKind::Agent {
            agent: text(&s.agent).unwrap_or_default(),
            verb: text(&s.verb).unwrap_or_default(),
        },
        Some("code") => StageKind::Code {
            step: text(&s.step).unwrap_or_default(),
        },
        _ => {
            // A section's placeholders are reported where they are; a
            // YAML value's at the value's start (a folded scalar's lines are not
            // the file's lines one for one).
            let (prompt, line, pin) = match (section, &s.prompt) {
                (Some(sec), Some(p)) => {
                    cx.err(p.pos, format!("stage `{me}` has a prompt both in `prompt:` and in its `## {me}` section: keep one"));
                    (sec.text.clone(), sec.first_line, None)
                }
                (Some(sec), None) => (sec.text.clone(), sec.first_line, None),
                (None, Some(p)) => (p.v.clone(), p.pos.line, Some(p.pos)),
                (None, None) => {
                    if s.kind.is_some() {
                        cx.err(s.name.as_ref().map_or(s.pos, |n| n.pos), format!("llm stage `{me}` needs a prompt: a `## {me}` section in the body (or `prompt:`)"));
                    }
                    (String::new(), 0, None)
                }
            };
            let mut used: Vec<String> = Vec::new();
            for mut p in template::placeholders(&prompt, line, 1) {
                if let Some(at) = pin {
                    p.pos = at;
                }
                placeholder(cx, me, &p, reads);
                used.push(p.path);
            }
            // The model sees only what the prompt places: a read it never
            // places is a mistake, or a leftover.
            if section.is_some() || s.prompt.is_some() {
                for r in reads {
                    let written = show(&r.path);
                    let placed = used.iter().any(|u| {
                        u == &written
                            || u.strip_prefix(written.as_str())
                                .is_some_and(|rest| rest.starts_with('.'))
                    });
                    if !placed {
                        cx.warn(r.pos, format!("stage `{me}` reads `{written}`, but its prompt never places it (`{{{{{written}}}}}`): the model does not see it"));
                    }
                }
            }
            StageKind::Llm {
                model: text(&s.model),
                system: text(&s.system).unwrap_or_default(),
                prompt,
            }
        }
    }
}

/// A placeholder must be a read, or a field below one that the read's
/// schema has.
fn placeholder(cx: &mut Cx, me: &str, p: &template::Placeholder, reads: &[Read]) {
    let Some(path) = parse_path(cx, &p.path, p.pos, "placeholder") else {
        return;
    };
    let covering = reads
        .iter()
        .find(|r| r.path.stage == path.stage && path.fields.starts_with(&r.path.fields));
    let Some(r) = covering else {
        cx.err(p.pos, format!("placeholder `{{{{{}}}}}` of stage `{me}` is not covered by its reads: add `{}` to `reads`", p.path, p.path));
        return;
    };
    let rest = &path.fields[r.path.fields.len()..];
    if let Err(e) = schemas::walk(&r.schema, rest) {
        let full = ReadPath {
            stage: path.stage.clone(),
            fields: path.fields.clone(),
        };
        let e = schemas::NoField {
            index: e.index + r.path.fields.len(),
            available: e.available,
        };
        cx.err(
            p.pos,
            no_field(me, &p.path, &full, &e).replace(" reads ", " uses placeholder "),
        );
    }
}

fn stamps(cx: &mut Cx, s: &RawStage, output: &Value) -> Vec<StampedField> {
    let mut out = Vec::new();
    for (field, stamp) in &s.stamp {
        let Some(prop) = output.get("properties").and_then(|p| p.get(&field.v)) else {
            let props = output.get("properties").and_then(Value::as_object);
            let hint = did_you_mean(
                &field.v,
                props.into_iter().flat_map(|p| p.keys().map(String::as_str)),
            );
            cx.err(
                field.pos,
                format!(
                    "stamped field `{}` is not a property of the stage's output schema{hint}",
                    field.v
                ),
            );
            continue;
        };
        let prop = schemas::deref(prop, output);
        let (sample, what) = match stamp {
            Stamp::Const(v) => (v.clone(), format!("the constant {v}")),
            Stamp::Timestamp => (
                json!("2000-01-01T00:00:00Z"),
                "a timestamp (an RFC 3339 string)".to_owned(),
            ),
            Stamp::Level => (json!(0), "a permission level (an integer 0-3)".to_owned()),
            Stamp::SimilarRuns => {
                let reads_runs = s
                    .reads
                    .iter()
                    .any(|r| r.v == super::HISTORY || r.v == format!("{}.runs", super::HISTORY));
                if !reads_runs {
                    cx.err(
                        field.pos,
                        format!(
                            "stamp `{}: similar_runs` needs the stage to read `{}` (or `{}.runs`): the ids come from it",
                            field.v,
                            super::HISTORY,
                            super::HISTORY
                        ),
                    );
                    continue;
                }
                (
                    json!(["00000000-0000-0000-0000-000000000000"]),
                    "a list of run ids (strings)".to_owned(),
                )
            }
            Stamp::BlockedActions => {
                let actions = output.get("properties").and_then(|p| p.get("actions"));
                if actions.is_none() {
                    cx.err(
                        field.pos,
                        format!(
                            "stamp `{}: blocked_actions` needs an `actions` property in the output: the refused actions are the answer's own",
                            field.v
                        ),
                    );
                    continue;
                }
                (
                    json!(["runCommand rm -rf /: refused"]),
                    "a list of refused actions (strings)".to_owned(),
                )
            }
            Stamp::Facts => {
                if !s.reads.iter().any(|r| r.v == super::FACTS) {
                    cx.err(
                        field.pos,
                        format!(
                            "stamp `{}: facts` needs the stage to read `{}` (all of it): the facts stored are the ones it read",
                            field.v,
                            super::FACTS
                        ),
                    );
                    continue;
                }
                (
                    super::empty_facts(),
                    "the run's facts (an object)".to_owned(),
                )
            }
            Stamp::Rubric => (
                json!("Gatekeeper@0123456789abcdef"),
                "a rubric version (a string)".to_owned(),
            ),
            Stamp::Grader => {
                if s.kind.as_ref().is_some_and(|k| k.v != "llm") {
                    cx.err(
                        field.pos,
                        format!(
                            "stamp `{}: grader` is the model that answered: only an llm stage has one",
                            field.v
                        ),
                    );
                    continue;
                }
                (
                    json!("default/model-id"),
                    "a model's name (a string)".to_owned(),
                )
            }
        };
        // The stamp must satisfy the field's own schema, or every artifact fails.
        let mut check = prop.clone();
        if let (Value::Object(m), Some(defs)) = (&mut check, output.get("$defs")) {
            m.entry("$defs").or_insert_with(|| defs.clone());
        }
        if let Ok(v) = schemas::validator(&check)
            && !v.is_valid(&sample)
        {
            cx.err(
                field.pos,
                format!(
                    "stamped field `{}` is {what}, which its schema in the output does not allow",
                    field.v
                ),
            );
            continue;
        }
        out.push(match stamp {
            Stamp::Const(value) => StampedField::Const {
                field: field.v.clone(),
                value: value.clone(),
            },
            Stamp::Timestamp => StampedField::Timestamp {
                field: field.v.clone(),
            },
            Stamp::Level => StampedField::Level {
                field: field.v.clone(),
            },
            Stamp::SimilarRuns => StampedField::SimilarRuns {
                field: field.v.clone(),
            },
            Stamp::BlockedActions => StampedField::BlockedActions {
                field: field.v.clone(),
            },
            Stamp::Facts => StampedField::Facts {
                field: field.v.clone(),
            },
            Stamp::Rubric => StampedField::Rubric {
                field: field.v.clone(),
            },
            Stamp::Grader => StampedField::Grader {
                field: field.v.clone(),
            },
        });
    }
    out
}

fn checks(cx: &mut Cx, s: &RawStage, output: &Value) -> Vec<Check> {
    let number = BTreeSet::from(["number".to_owned()]);
    let mut out = Vec::new();
    for c in &s.checks {
        let (total, of) = match &c.v {
            Check::Sum { total, of } => (total, of),
            Check::Facts { .. } => {
                if let Some(built) = super::facts_check::build(cx, s, output, c) {
                    out.push(built);
                }
                continue;
            }
        };
        let field = |cx: &mut Cx, path: &str| {
            let fields: Vec<String> = path.split('.').map(str::to_owned).collect();
            match schemas::walk(output, &fields) {
                Ok(v) => Some(v),
                Err(_) => {
                    cx.err(
                        c.pos,
                        format!(
                            "check `sum` names `{path}`, which is not a field of the stage's output"
                        ),
                    );
                    None
                }
            }
        };
        let t = field(cx, total);
        let o = field(cx, of);
        if let Some(t) = t
            && !schemas::types_fit(schemas::types_of(t).as_ref(), Some(&number))
        {
            cx.err(c.pos, format!("check `sum`: `{total}` must be a number"));
        }
        if let Some(o) = o {
            let props = o.get("properties").and_then(Value::as_object);
            let numeric = props.is_some_and(|p| {
                p.values().all(|v| {
                    schemas::types_fit(
                        schemas::types_of(schemas::deref(v, output)).as_ref(),
                        Some(&number),
                    )
                })
            });
            if !numeric {
                cx.err(
                    c.pos,
                    format!(
                        "check `sum`: `{of}` must be an object whose properties are all numbers"
                    ),
                );
            }
        }
        out.push(c.v.clone());
    }
    out
}

/// A stage's declared `input`: each required property must be provided by
/// a read of that name (its last field, or the stage's name) whose
/// schema's type fits the property's.
fn declared_input(cx: &mut Cx, node: &Node, shared: &Shared, me: &str, reads: &[Read]) {
    let input = schema(
        cx,
        node,
        shared,
        &format!("the declared input of stage `{me}`"),
        true,
    );
    let required: Vec<&str> = input
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (i, p) in required.iter().enumerate() {
        let at = schemas::node_at(node, &format!("/required/{i}"));
        let providers: Vec<&Read> = reads.iter().filter(|r| r.name() == *p).collect();
        let r = match providers.as_slice() {
            [] => {
                cx.err(at, format!("stage `{me}` declares input `{p}` as required, but none of its reads provides it (a read provides its last field's name: `Stage.{p}`)"));
                continue;
            }
            [r] => r,
            [a, b, ..] => {
                cx.err(
                    b.pos,
                    format!(
                        "stage `{me}`'s reads `{}` and `{}` both provide input `{p}`",
                        show(&a.path),
                        show(&b.path)
                    ),
                );
                continue;
            }
        };
        let wanted = input
            .get("properties")
            .and_then(|ps| ps.get(*p))
            .map(|w| schemas::types_of(schemas::deref(w, &input)));
        let given = schemas::types_of(schemas::deref(&r.schema, &r.schema));
        if let Some(wanted) = wanted
            && !schemas::types_fit(given.as_ref(), wanted.as_ref())
        {
            let list = |t: Option<&BTreeSet<String>>| {
                t.map_or("any".to_owned(), |t| {
                    t.iter().cloned().collect::<Vec<_>>().join(" or ")
                })
            };
            cx.err(
                r.pos,
                format!(
                    "stage `{me}` declares input `{p}` as {}, but its read `{}` is {}",
                    list(wanted.as_ref()),
                    show(&r.path),
                    list(given.as_ref())
                ),
            );
        }
    }
}

fn show(p: &ReadPath) -> String {
    std::iter::once(p.stage.as_str())
        .chain(p.fields.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(".")
}
