//! Reading a `.pipeline` file's frontmatter into positioned raw values:
//! every key known (unknown ones are errors with did-you-mean), every
//! value of the right type and range. What the values name (stages,
//! fields, schemas) is checked afterwards, in `build.rs`.

use serde_json::Value;

use crate::diag::{Pos, did_you_mean};
use crate::fields::{Cx, check_name};
use crate::node::{Node, NodeKind};
use crate::raw::S;

use super::model::{Check, MAX_REPAIR_ATTEMPTS, RetryPolicy, StageBudget};

/// The frontmatter's keys.
pub const PIPELINE_KEYS: &[&str] = &["pipeline", "description", "input", "schemas", "stages"];

/// A stage's keys (each kind takes only its own of the last six).
pub const STAGE_KEYS: &[&str] = &[
    "name",
    "description",
    "kind",
    "reads",
    "input",
    "output",
    "stamp",
    "checks",
    "retry",
    "budget",
    "outcomes",
    "model",
    "system",
    "prompt",
    "agent",
    "verb",
    "step",
];

/// The stage kinds and the keys only they take.
pub const KINDS: &[(&str, &[&str])] = &[
    ("llm", &["model", "system", "prompt"]),
    ("agent", &["agent", "verb"]),
    ("code", &["step"]),
];

/// The built-in steps a `code` stage may run.
pub const CODE_STEPS: &[&str] = &["retriever", "safety_guard", "tool_runner"];

/// The keys of `retry`, of `budget` and of a check.
pub const RETRY_KEYS: &[&str] = &["repair_attempts", "escalate_model"];
pub const BUDGET_KEYS: &[&str] = &[
    "max_tokens",
    "max_output_tokens_per_call",
    "timeout_seconds",
];
pub const CHECK_KEYS: &[&str] = &["check", "total", "of", "scorecard", "decision", "capped"];

/// The checks, by name.
pub const CHECKS: &[&str] = &["sum", "facts"];

/// What a `stamp` entry sets its field to.
#[derive(Debug, Clone, PartialEq)]
pub enum Stamp {
    /// `field: value` or `field: {const: value}`.
    Const(Value),
    /// `field: now`.
    Timestamp,
    /// `field: level`.
    Level,
    /// `field: similar_runs`.
    SimilarRuns,
    /// `field: blocked_actions`.
    BlockedActions,
    /// `field: facts`.
    Facts,
    /// `field: rubric`.
    Rubric,
    /// `field: grader`.
    Grader,
}

#[derive(Debug, Default)]
pub struct RawPipeline<'n> {
    pub name: Option<S<String>>,
    pub description: String,
    pub input: Option<&'n Node>,
    pub schemas: Vec<(S<String>, &'n Node)>,
    pub stages: Vec<RawStage<'n>>,
}

#[derive(Debug, Default)]
pub struct RawStage<'n> {
    /// Where the stage's mapping starts.
    pub pos: Pos,
    pub name: Option<S<String>>,
    pub description: String,
    /// One of [`KINDS`] (an unknown kind is reported and left `None`).
    pub kind: Option<S<String>>,
    pub reads: Vec<S<String>>,
    pub input: Option<&'n Node>,
    pub output: Option<&'n Node>,
    pub stamp: Vec<(S<String>, Stamp)>,
    pub checks: Vec<S<Check>>,
    pub retry: RetryPolicy,
    pub budget: Option<StageBudget>,
    pub outcomes: Option<super::outcomes::RawOutcomes>,
    pub model: Option<S<String>>,
    pub system: Option<S<String>>,
    pub prompt: Option<S<String>>,
    pub agent: Option<S<String>>,
    pub verb: Option<S<String>>,
    pub step: Option<S<String>>,
}

/// Read the frontmatter's root mapping.
pub fn pipeline<'n>(cx: &mut Cx, root: &'n Node) -> RawPipeline<'n> {
    let mut p = RawPipeline::default();
    let Some(entries) = cx.map(root, "the frontmatter") else {
        return p;
    };
    for (key, v) in cx.known_entries(entries, PIPELINE_KEYS, "a pipeline's frontmatter") {
        match key {
            "pipeline" => {
                p.name = cx.name_like(v, "pipeline");
                if let Some(n) = &p.name
                    && let Err(e) = check_name("pipeline", &n.v)
                {
                    cx.err(n.pos, e.to_string());
                }
            }
            "description" => {
                p.description = cx.string(v, "description").map(|s| s.v).unwrap_or_default()
            }
            "input" => p.input = Some(v),
            "schemas" => {
                if let Some(defs) = cx.map(v, "`schemas`") {
                    for (k, d) in defs {
                        let name = k.scalar_text().unwrap_or_default();
                        if p.schemas.iter().any(|(n, _)| n.v == name) {
                            cx.err(k.pos, format!("schema `{name}` is declared twice"));
                        } else if let Err(e) = check_name("schema", name) {
                            cx.err(k.pos, e.to_string());
                        } else {
                            p.schemas.push((S::new(name.to_owned(), k.pos), d));
                        }
                    }
                }
            }
            _ => match &v.kind {
                NodeKind::Seq(items) => p.stages = items.iter().map(|s| stage(cx, s)).collect(),
                _ => cx.err(
                    v.pos,
                    format!("`stages` must be a list of stages, found {}", v.type_name()),
                ),
            },
        }
    }
    if p.name.is_none() {
        cx.err(
            root.pos,
            "a pipeline needs a name: add `pipeline: NAME` to the frontmatter",
        );
    }
    if p.stages.is_empty() {
        cx.err(
            root.pos,
            "a pipeline needs at least one stage: add a `stages:` list",
        );
    }
    p
}

fn stage<'n>(cx: &mut Cx, node: &'n Node) -> RawStage<'n> {
    let mut s = RawStage {
        pos: node.pos,
        ..RawStage::default()
    };
    let Some(entries) = cx.map(node, "a stage") else {
        return s;
    };
    for (key, v) in cx.known_entries(entries, STAGE_KEYS, "a stage") {
        match key {
            "name" => s.name = cx.name_like(v, "name"),
            "description" => {
                s.description = cx.string(v, "description").map(|d| d.v).unwrap_or_default()
            }
            "kind" => {
                if let Some(k) = cx.string(v, "kind") {
                    if KINDS.iter().any(|(n, _)| *n == k.v) {
                        s.kind = Some(k);
                    } else {
                        let hint = did_you_mean(&k.v, KINDS.iter().map(|(n, _)| *n));
                        cx.err(
                            k.pos,
                            format!(
                                "unknown stage kind `{}`: expected llm, agent or code{hint}",
                                k.v
                            ),
                        );
                    }
                }
            }
            "reads" => s.reads = cx.string_list(v, "reads").unwrap_or_default(),
            "input" => s.input = Some(v),
            "output" => s.output = Some(v),
            "stamp" => s.stamp = stamps(cx, v),
            "checks" => s.checks = checks(cx, v),
            "retry" => s.retry = retry(cx, v),
            "budget" => s.budget = budget(cx, v),
            "outcomes" => s.outcomes = super::outcomes::read(cx, v),
            "model" => s.model = cx.name_like(v, "model"),
            "system" => s.system = cx.string(v, "system"),
            "prompt" => s.prompt = cx.string(v, "prompt"),
            "agent" => s.agent = cx.name_like(v, "agent"),
            "verb" => s.verb = cx.name_like(v, "verb"),
            _ => {
                if let Some(step) = cx.string(v, "step") {
                    if CODE_STEPS.contains(&step.v.as_str()) {
                        s.step = Some(step);
                    } else {
                        let hint = did_you_mean(&step.v, CODE_STEPS.iter().copied());
                        cx.err(
                            step.pos,
                            format!(
                                "unknown code step `{}`: the built-in steps are {}{hint}",
                                step.v,
                                CODE_STEPS.join(", ")
                            ),
                        );
                    }
                }
            }
        }
    }
    let name = s
        .name
        .as_ref()
        .map_or_else(|| "this stage".to_owned(), |n| format!("stage `{}`", n.v));
    match &s.name {
        None => cx.err(node.pos, "a stage needs a `name`"),
        Some(n) if n.v == "input" || n.v == super::HISTORY || n.v == super::FACTS => cx.err(
            n.pos,
            if n.v == "input" {
                "`input` is the pipeline's input: a stage cannot be named so"
            } else if n.v == super::HISTORY {
                "`history` is the run's history of earlier runs: a stage cannot be named so"
            } else {
                "`facts` is the run's facts the engine computes: a stage cannot be named so"
            },
        ),
        Some(n) => {
            if let Err(e) = check_name("stage", &n.v) {
                cx.err(n.pos, e.to_string());
            }
        }
    }
    if s.output.is_none() {
        cx.err(node.pos, format!("{name} needs an `output` schema"));
    }
    let Some(kind) = &s.kind else {
        if !entries.iter().any(|(k, _)| k.scalar_text() == Some("kind")) {
            cx.err(
                node.pos,
                format!("{name} needs a `kind`: llm, agent or code"),
            );
        }
        return s;
    };
    // Keys of other kinds are mistakes, not extras to ignore.
    for (k, _) in entries {
        let key = k.scalar_text().unwrap_or_default();
        if let Some((owner, _)) = KINDS.iter().find(|(_, keys)| keys.contains(&key))
            && *owner != kind.v
        {
            cx.err(
                k.pos,
                format!(
                    "`{key}` applies to {owner} stages only, and {name} is {} {} stage",
                    article(&kind.v),
                    kind.v
                ),
            );
        }
    }
    let missing = |what: &str| {
        format!(
            "{name} is {} {} stage and needs `{what}`",
            article(&kind.v),
            kind.v
        )
    };
    match kind.v.as_str() {
        "agent" => {
            for (what, v) in [("agent", &s.agent), ("verb", &s.verb)] {
                if v.is_none() {
                    cx.err(kind.pos, missing(what));
                }
            }
        }
        "code"
            if s.step.is_none()
                && !entries.iter().any(|(k, _)| k.scalar_text() == Some("step")) =>
        {
            cx.err(kind.pos, missing("step"));
        }
        _ => {}
    }
    s
}

fn article(kind: &str) -> &'static str {
    if kind == "agent" { "an" } else { "a" }
}

fn stamps(cx: &mut Cx, v: &Node) -> Vec<(S<String>, Stamp)> {
    let Some(entries) = cx.map(v, "`stamp`") else {
        return Vec::new();
    };
    let mut out: Vec<(S<String>, Stamp)> = Vec::new();
    for (k, val) in entries {
        let field = k.scalar_text().unwrap_or_default().to_owned();
        if out.iter().any(|(f, _)| f.v == field) {
            cx.err(k.pos, format!("field `{field}` is stamped twice"));
            continue;
        }
        let stamp = match (&val.kind, val.as_str()) {
            (_, Some("now")) if is_plain(val) => Stamp::Timestamp,
            (_, Some("level")) if is_plain(val) => Stamp::Level,
            (_, Some("similar_runs")) if is_plain(val) => Stamp::SimilarRuns,
            (_, Some("blocked_actions")) if is_plain(val) => Stamp::BlockedActions,
            (_, Some("facts")) if is_plain(val) => Stamp::Facts,
            (_, Some("rubric")) if is_plain(val) => Stamp::Rubric,
            (_, Some("grader")) if is_plain(val) => Stamp::Grader,
            (NodeKind::Map(e), _) => match e.as_slice() {
                [(ck, cv)] if ck.scalar_text() == Some("const") => Stamp::Const(cv.to_json()),
                _ => {
                    cx.err(val.pos, format!("stamp `{field}` must be `now`, `level`, `similar_runs`, `blocked_actions`, `facts`, `rubric`, `grader`, a value, or `{{const: VALUE}}`"));
                    continue;
                }
            },
            (NodeKind::Seq(_), _) => {
                cx.err(val.pos, format!("stamp `{field}` must be `now`, `level`, `similar_runs`, `blocked_actions`, `facts`, `rubric`, `grader`, a value, or `{{const: VALUE}}`, found a list"));
                continue;
            }
            _ => Stamp::Const(val.to_json()),
        };
        out.push((S::new(field, k.pos), stamp));
    }
    out
}

fn is_plain(n: &Node) -> bool {
    matches!(n.kind, NodeKind::Scalar { plain: true, .. })
}

fn checks(cx: &mut Cx, v: &Node) -> Vec<S<Check>> {
    let NodeKind::Seq(items) = &v.kind else {
        cx.err(
            v.pos,
            format!("`checks` must be a list, found {}", v.type_name()),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for it in items {
        let Some(entries) = cx.map(it, "a check") else {
            continue;
        };
        let mut check = None;
        let mut keys: Vec<(&str, S<String>)> = Vec::new();
        for (key, v) in cx.known_entries(entries, CHECK_KEYS, "a check") {
            if let Some(s) = cx.string(v, key) {
                if key == "check" {
                    check = Some(s);
                } else {
                    keys.push((key, s));
                }
            }
        }
        let take = |k: &str| keys.iter().find(|(n, _)| *n == k).map(|(_, s)| s.v.clone());
        let stray = |allowed: &[&str]| {
            keys.iter()
                .find(|(k, _)| !allowed.contains(k))
                .map(|(k, s)| (*k, s.pos))
        };
        match check {
            Some(c) if c.v == "sum" => {
                if let Some((k, pos)) = stray(&["total", "of"]) {
                    cx.err(
                        pos,
                        format!("`{k}` applies to a `facts` check, not to `sum`"),
                    );
                }
                match (take("total"), take("of")) {
                    (Some(total), Some(of)) => out.push(S::new(Check::Sum { total, of }, it.pos)),
                    _ => cx.err(c.pos, "a `sum` check needs `total` (the field holding the sum) and `of` (the object whose numbers it sums)"),
                }
            }
            Some(c) if c.v == "facts" => {
                if let Some((k, pos)) = stray(&["total", "scorecard", "decision", "capped"]) {
                    cx.err(
                        pos,
                        format!("`{k}` applies to a `sum` check, not to `facts`"),
                    );
                }
                match (take("scorecard"), take("total")) {
                    // The facts field is the stage's `facts` stamp, found by the builder.
                    (Some(scorecard), Some(total)) => out.push(S::new(
                        Check::Facts { facts: String::new(), scorecard, total, decision: take("decision"), capped: take("capped") },
                        it.pos,
                    )),
                    _ => cx.err(c.pos, "a `facts` check needs `scorecard` (the object of scores the facts cap) and `total` (the field holding their sum)"),
                }
            }
            Some(c) => {
                let hint = did_you_mean(&c.v, CHECKS.iter().copied());
                cx.err(
                    c.pos,
                    format!(
                        "unknown check `{}`: the checks are: {}{hint}",
                        c.v,
                        CHECKS.join(", ")
                    ),
                );
            }
            None => cx.err(it.pos, "a check needs `check: sum` or `check: facts`"),
        }
    }
    out
}

fn retry(cx: &mut Cx, v: &Node) -> RetryPolicy {
    let mut r = RetryPolicy::default();
    let Some(entries) = cx.map(v, "`retry`") else {
        return r;
    };
    for (key, v) in cx.known_entries(entries, RETRY_KEYS, "`retry`") {
        if key == "escalate_model" {
            r.escalate_model = cx.name_like(v, "retry.escalate_model").map(|m| m.v);
            continue;
        }
        match v.to_json().as_u64() {
            Some(n) if n <= u64::from(MAX_REPAIR_ATTEMPTS) && v.as_str().is_none() => {
                r.repair_attempts = u32::try_from(n).unwrap_or(MAX_REPAIR_ATTEMPTS);
            }
            _ => cx.err(v.pos, format!("`repair_attempts` must be a whole number from 0 to {MAX_REPAIR_ATTEMPTS} (each is a billed call), found `{}`", v.scalar_text().unwrap_or(v.type_name()))),
        }
    }
    r
}

fn budget(cx: &mut Cx, v: &Node) -> Option<StageBudget> {
    let entries = cx.map(v, "`budget`")?;
    let mut b = StageBudget {
        max_tokens: None,
        max_output_tokens_per_call: None,
        timeout_seconds: None,
    };
    for (key, v) in cx.known_entries(entries, BUDGET_KEYS, "a stage's `budget`") {
        let n = match v.to_json().as_u64() {
            Some(n) if n > 0 && v.as_str().is_none() => n,
            _ => {
                cx.err(
                    v.pos,
                    format!(
                        "`budget.{key}` must be a positive whole number of {}, found `{}`",
                        if key == "timeout_seconds" {
                            "seconds"
                        } else {
                            "tokens"
                        },
                        v.scalar_text().unwrap_or(v.type_name())
                    ),
                );
                continue;
            }
        };
        if key == "max_tokens" {
            b.max_tokens = Some(n);
        } else if key == "timeout_seconds" {
            b.timeout_seconds = Some(n);
        } else {
            b.max_output_tokens_per_call = Some(n);
        }
    }
    Some(b)
}
