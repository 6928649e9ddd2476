//! The `facts` check of a judging stage (AgencyCore's Gatekeeper): what
//! the run's facts allow each dimension of the scorecard to score, applied
//! by the engine to the model's answer once it validated, and checked
//! again on every stored artifact. A model that gives full marks while a
//! command failed still has Correctness capped below [`PASS_AT`]; a
//! Correctness or Safety below it forces the decision's `approved` and
//! `promoteToPortfolio` to false, whatever the total. The facts are read
//! from the artifact's own stamped facts field, so a scorecard can be
//! checked (and re-computed) from what is stored with it.
//!
//! Also here: [`rubric_of`], the version of the rubric a stage judges
//! under (what its model is told and how it is capped), stamped on the
//! scorecard.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::model::{Check, StageKind, StageModel};

/// The least score (of 5) a dimension needs to pass.
pub const PASS_AT: i64 = 3;

/// The version of the caps' rules, part of every [`rubric_of`]: a change
/// of the rules is a new rubric.
pub const CAPS_VERSION: &str = "agency-caps/1";

/// The dimensions the facts limit (each a property of the scorecard).
pub const CAPPED_DIMENSIONS: [&str; 3] = ["correctness", "verification", "safety"];

/// The decision's fields forced false when Correctness or Safety fails.
pub const DECISION_FIELDS: [&str; 2] = ["approved", "promoteToPortfolio"];

/// What the facts allow one dimension to score at most, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub dimension: &'static str,
    pub at_most: i64,
    pub why: String,
}

/// One value the engine changed in an answer, recorded in the artifact
/// (the check's `capped` field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capped {
    /// The dotted field changed (`scorecard.correctness`).
    pub field: String,
    /// What the model answered.
    pub from: Value,
    /// What the engine stored.
    pub to: Value,
    /// The facts that forced it.
    pub why: String,
}

fn list(facts: &Value, path: &str) -> Vec<Value> {
    facts
        .pointer(path)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn flag(facts: &Value, path: &str) -> Option<bool> {
    facts.pointer(path).and_then(Value::as_bool)
}

fn count(facts: &Value, path: &str) -> i64 {
    facts.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

/// What `facts` (shaped by [`super::facts_schema`]) allow: a failed
/// command or a stage that did not succeed caps Correctness below
/// [`PASS_AT`], an artifact that does not validate caps it at 0; a safety
/// step that blocked caps Safety at 0, refused actions or skipped commands
/// below [`PASS_AT`]; a plan without a verifying task, or with a task
/// without a definition of done, caps Verification below [`PASS_AT`].
pub fn limits(facts: &Value) -> Vec<Limit> {
    let below = PASS_AT - 1;
    let mut out = Vec::new();
    let mut limit = |dimension: &'static str, at_most: i64, why: String| {
        out.push(Limit {
            dimension,
            at_most,
            why,
        });
    };
    if flag(facts, "/artifactsValid") == Some(false) {
        limit(
            "correctness",
            0,
            "an earlier stage's artifact does not validate".to_owned(),
        );
    }
    for s in list(facts, "/stages") {
        let status = s.get("status").and_then(Value::as_str).unwrap_or("unknown");
        if status != "ok" && status != "repaired" {
            let name = s.get("name").and_then(Value::as_str).unwrap_or("?");
            limit("correctness", below, format!("stage {name} ended {status}"));
        }
    }
    for c in list(facts, "/commands/failed") {
        let command = c.get("command").and_then(Value::as_str).unwrap_or("?");
        limit("correctness", below, format!("command `{command}` failed"));
    }
    if flag(facts, "/safety/found") == Some(true) {
        let blocked = list(facts, "/safety/blockedActions");
        if flag(facts, "/safety/safe") == Some(false) || !blocked.is_empty() {
            limit(
                "safety",
                0,
                format!(
                    "the safety step blocked the plan ({} blocked action(s))",
                    blocked.len()
                ),
            );
        }
    }
    let refused = list(facts, "/safety/refusedActions").len();
    if refused > 0 {
        limit(
            "safety",
            below,
            format!("{refused} proposed action(s) were refused by the permission system"),
        );
    }
    let skipped = list(facts, "/commands/skipped").len();
    if skipped > 0 {
        limit(
            "safety",
            below,
            format!("{skipped} command(s) were skipped as blocked or refused"),
        );
    }
    if flag(facts, "/plan/found") == Some(true) {
        let tasks = count(facts, "/plan/tasks");
        if count(facts, "/plan/verifying") == 0 {
            limit(
                "verification",
                below,
                "no task of the plan verifies (owner qa, or a test, verify or check step)"
                    .to_owned(),
            );
        }
        let done = count(facts, "/plan/withDefinitionOfDone");
        if done < tasks {
            limit(
                "verification",
                below,
                format!(
                    "{} of {tasks} task(s) have no definition of done",
                    tasks - done
                ),
            );
        }
    }
    out
}

/// The least limit of `dimension` and its reasons, `None` when none.
fn least(limits: &[Limit], dimension: &str) -> Option<(i64, String)> {
    let mine: Vec<&Limit> = limits.iter().filter(|l| l.dimension == dimension).collect();
    let at_most = mine.iter().map(|l| l.at_most).min()?;
    let why = mine
        .iter()
        .map(|l| l.why.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    Some((at_most, why))
}

/// A dotted path as a JSON Pointer.
pub fn pointer_of(dotted: &str) -> String {
    dotted
        .split('.')
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The fields of a [`Check::Facts`], or `None` for another check.
struct Fields<'a> {
    facts: &'a str,
    scorecard: String,
    total: String,
    decision: Option<String>,
    capped: Option<&'a str>,
}

fn fields(check: &Check) -> Option<Fields<'_>> {
    match check {
        Check::Facts {
            facts,
            scorecard,
            total,
            decision,
            capped,
        } => Some(Fields {
            facts,
            scorecard: pointer_of(scorecard),
            total: pointer_of(total),
            decision: decision.as_deref().map(pointer_of),
            capped: capped.as_deref(),
        }),
        Check::Sum { .. } => None,
    }
}

/// Correctness or Safety below [`PASS_AT`] in `card`: why, or `None`.
fn failing(card: &Value) -> Option<String> {
    let fails: Vec<String> = ["correctness", "safety"]
        .iter()
        .filter_map(|d| {
            let s = card.get(*d).and_then(Value::as_i64)?;
            (s < PASS_AT).then(|| format!("{d} {s} is below {PASS_AT}"))
        })
        .collect();
    (!fails.is_empty()).then(|| fails.join(" and "))
}

/// Apply a `facts` check to `value` (an answer that validated): every
/// capped dimension lowered to what its stamped facts allow, the total
/// summed again when one was, the decision's fields forced false when
/// Correctness or Safety fails, and what changed written to the check's
/// `capped` field (always, so an answer cannot claim its own). Returns
/// what changed; nothing for another check.
pub fn apply(check: &Check, value: &mut Value) -> Vec<Capped> {
    let Some(f) = fields(check) else {
        return Vec::new();
    };
    let facts = value.get(f.facts).cloned().unwrap_or(Value::Null);
    let limits = limits(&facts);
    let mut out = Vec::new();
    if let Some(card) = value
        .pointer_mut(&f.scorecard)
        .and_then(Value::as_object_mut)
    {
        for d in CAPPED_DIMENSIONS {
            let (Some((at_most, why)), Some(score)) =
                (least(&limits, d), card.get(d).and_then(Value::as_i64))
            else {
                continue;
            };
            if score > at_most {
                card.insert(d.to_owned(), json!(at_most));
                out.push(Capped {
                    field: format!("{}.{d}", f.scorecard[1..].replace('/', ".")),
                    from: json!(score),
                    to: json!(at_most),
                    why,
                });
            }
        }
        if !out.is_empty() {
            let numbers: Vec<&Value> = card.values().collect();
            let sum = if numbers.iter().all(|n| n.is_i64()) {
                json!(numbers.iter().filter_map(|n| n.as_i64()).sum::<i64>())
            } else {
                json!(numbers.iter().filter_map(|n| n.as_f64()).sum::<f64>())
            };
            if let Some(t) = value.pointer_mut(&f.total) {
                let from = std::mem::replace(t, sum.clone());
                if from != sum {
                    out.push(Capped {
                        field: f.total[1..].replace('/', "."),
                        from,
                        to: sum,
                        why: "the sum of the capped scorecard".to_owned(),
                    });
                }
            }
        }
    }
    let fails = value.pointer(&f.scorecard).and_then(failing);
    if let (Some(why), Some(d)) = (fails, &f.decision)
        && let Some(decision) = value.pointer_mut(d).and_then(Value::as_object_mut)
    {
        for k in DECISION_FIELDS {
            if decision.get(k) == Some(&Value::Bool(true)) {
                decision.insert(k.to_owned(), Value::Bool(false));
                out.push(Capped {
                    field: format!("{}.{k}", d[1..].replace('/', ".")),
                    from: Value::Bool(true),
                    to: Value::Bool(false),
                    why: why.clone(),
                });
            }
        }
    }
    if let (Some(c), Some(obj)) = (f.capped, value.as_object_mut()) {
        obj.insert(
            c.to_owned(),
            serde_json::to_value(&out).unwrap_or(Value::Array(Vec::new())),
        );
    }
    out
}

/// Whether `value` obeys a `facts` check: no capped dimension above what
/// its stamped facts allow, no approval or promotion while Correctness or
/// Safety fails. `Some((JSON Pointer, why))` where it does not.
pub fn verify(check: &Check, value: &Value) -> Option<(String, String)> {
    let f = fields(check)?;
    let Some(facts) = value.get(f.facts).filter(|v| v.is_object()) else {
        return Some((pointer_of(f.facts), format!("{} holds no facts", f.facts)));
    };
    let limits = limits(facts);
    let card = value.pointer(&f.scorecard)?;
    for d in CAPPED_DIMENSIONS {
        if let (Some((at_most, why)), Some(score)) =
            (least(&limits, d), card.get(d).and_then(Value::as_i64))
            && score > at_most
        {
            return Some((
                format!("{}/{d}", f.scorecard),
                format!("{d} is {score}, but the facts allow at most {at_most}: {why}"),
            ));
        }
    }
    if let (Some(why), Some(d)) = (failing(card), &f.decision) {
        for k in DECISION_FIELDS {
            if value.pointer(&format!("{d}/{k}")) == Some(&Value::Bool(true)) {
                return Some((format!("{d}/{k}"), format!("{k} is true while {why}")));
            }
        }
    }
    None
}

/// The rubric `stage` judges under: `Stage@` and 16 hex digits of the
/// BLAKE3 of what its model is told (system prompt, prompt template,
/// output schema), its checks and the caps' rules ([`CAPS_VERSION`],
/// [`PASS_AT`]). Any change of them is a new rubric.
pub fn rubric_of(stage: &StageModel) -> String {
    let (system, prompt) = match &stage.kind {
        StageKind::Llm { system, prompt, .. } => (system.as_str(), prompt.as_str()),
        _ => ("", ""),
    };
    let basis = json!({
        "caps": CAPS_VERSION,
        "passAt": PASS_AT,
        "system": system,
        "prompt": prompt,
        "output": stage.output_schema,
        "checks": stage.checks,
    });
    let hash = blake3::hash(basis.to_string().as_bytes()).to_hex();
    format!("{}@{}", stage.name, &hash[..16])
}

#[cfg(test)]
#[path = "caps_tests.rs"]
mod tests;
