//! Compiling a stage's `facts` check (`{check: facts, scorecard, total,
//! decision, capped}`) against its output schema and its stamps: the
//! facts it caps with must be a field the stage stamps `facts`, the
//! scorecard an object holding every dimension the facts limit as a
//! number, the total a number, the decision an object of booleans, and
//! `capped` a top-level array that can hold what the engine records.
//! What the check does at run time is `caps.rs`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::fields::Cx;
use crate::raw::S;

use super::caps::{CAPPED_DIMENSIONS, DECISION_FIELDS};
use super::model::Check;
use super::read::{RawStage, Stamp};
use super::schemas;

/// The check as the model holds it (its `facts` field found), or `None`
/// after reporting why not.
pub fn build(cx: &mut Cx, s: &RawStage, output: &Value, c: &S<Check>) -> Option<Check> {
    let Check::Facts {
        scorecard,
        total,
        decision,
        capped,
        ..
    } = &c.v
    else {
        return None;
    };
    let number = BTreeSet::from(["number".to_owned()]);
    let boolean = BTreeSet::from(["boolean".to_owned()]);
    let mut ok = true;
    let facts = s
        .stamp
        .iter()
        .find(|(_, st)| *st == Stamp::Facts)
        .map(|(f, _)| f.v.clone());
    if facts.is_none() {
        cx.err(c.pos, format!("check `facts` caps the scorecard with the run's facts stored in the artifact: stamp a field with them (`stamp: {{facts: facts}}`) and read `{}`", super::FACTS));
        ok = false;
    }
    let mut field = |cx: &mut Cx, path: &str| {
        let fields: Vec<String> = path.split('.').map(str::to_owned).collect();
        match schemas::walk(output, &fields) {
            Ok(v) => Some(v),
            Err(_) => {
                cx.err(
                    c.pos,
                    format!(
                        "check `facts` names `{path}`, which is not a field of the stage's output"
                    ),
                );
                ok = false;
                None
            }
        }
    };
    let card = field(cx, scorecard);
    let sum = field(cx, total);
    let dec = decision.as_deref().and_then(|d| field(cx, d));
    let rec = capped.as_deref().and_then(|d| field(cx, d));
    let fits = |v: &Value, want: &BTreeSet<String>| {
        schemas::types_fit(
            schemas::types_of(schemas::deref(v, output)).as_ref(),
            Some(want),
        )
    };
    if let Some(card) = card {
        let props = card.get("properties").and_then(Value::as_object);
        let missing: Vec<&str> = CAPPED_DIMENSIONS
            .iter()
            .copied()
            .filter(|d| {
                !props
                    .and_then(|p| p.get(*d))
                    .is_some_and(|v| fits(v, &number))
            })
            .collect();
        if !missing.is_empty() {
            cx.err(c.pos, format!("check `facts`: `{scorecard}` must be an object with the number properties the facts cap ({}); it lacks {}", CAPPED_DIMENSIONS.join(", "), missing.join(", ")));
            ok = false;
        }
    }
    if let Some(t) = sum
        && !fits(t, &number)
    {
        cx.err(c.pos, format!("check `facts`: `{total}` must be a number"));
        ok = false;
    }
    if let (Some(d), Some(name)) = (dec, decision) {
        let props = d.get("properties").and_then(Value::as_object);
        let flags: Vec<&Value> = DECISION_FIELDS
            .iter()
            .filter_map(|k| props.and_then(|p| p.get(*k)))
            .collect();
        if flags.is_empty() || !flags.iter().all(|v| fits(v, &boolean)) {
            cx.err(c.pos, format!("check `facts`: `{name}` must be an object with boolean `{}` or `{}` (what a failing Correctness or Safety forces false)", DECISION_FIELDS[0], DECISION_FIELDS[1]));
            ok = false;
        }
    }
    if let (Some(r), Some(name)) = (rec, capped) {
        let mut check = r.clone();
        if let (Value::Object(m), Some(defs)) = (&mut check, output.get("$defs")) {
            m.entry("$defs").or_insert_with(|| defs.clone());
        }
        let sample = json!([{"field": "scorecard.correctness", "from": 5, "to": 2, "why": "command `cargo test` failed"}]);
        let holds =
            schemas::validator(&check).is_ok_and(|v| v.is_valid(&sample) && v.is_valid(&json!([])));
        if name.contains('.') || !holds {
            cx.err(c.pos, format!("check `facts`: `{name}` must be a top-level array of {{field, from, to, why}} objects: the engine writes there what it capped"));
            ok = false;
        }
    }
    let facts = facts?;
    ok.then(|| Check::Facts {
        facts,
        scorecard: scorecard.clone(),
        total: total.clone(),
        decision: decision.clone(),
        capped: capped.clone(),
    })
}
