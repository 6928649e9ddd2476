//! Judge checks: a small frozen set of graded runs (anchors) shipped with
//! a pipeline whose stage scores runs. Whenever that stage's rubric or
//! grader model changes, the engine re-scores the anchors with it before
//! it judges a real run; scores that move beyond the set's tolerance flag
//! the change for the user instead of letting it grade silently.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

/// AgencyCore's anchors: the Gatekeeper's context of three graded runs.
pub const AGENCYCORE_ANCHORS: &str = include_str!("agencycore.anchors.json");

/// How far a re-scored anchor may move.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    /// Most points one dimension may move.
    pub dimension: i64,
    /// Most points the total may move.
    pub total: i64,
}

/// One graded run: what the scoring stage reads, and the scores it should
/// give.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    pub name: String,
    pub description: String,
    /// `input` and the artifacts the scoring stage reads, by stage name.
    pub context: Map<String, Value>,
    pub expected: BTreeMap<String, i64>,
}

/// A pipeline's anchors for its scoring stage.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AnchorSet {
    pub pipeline: String,
    /// The stage they check.
    pub stage: String,
    pub tolerance: Tolerance,
    pub anchors: Vec<Anchor>,
}

/// The anchors shipped for `pipeline`, if any.
pub fn anchors_for(pipeline: &str) -> Option<AnchorSet> {
    if pipeline != "agencycore" {
        return None;
    }
    serde_json::from_str(AGENCYCORE_ANCHORS).ok()
}

impl AnchorSet {
    /// Why `scores` of anchor `a` are beyond the tolerance, if they are.
    pub fn moved(&self, a: &Anchor, scores: &BTreeMap<String, i64>) -> Option<String> {
        let mut why = Vec::new();
        for (d, want) in &a.expected {
            let got = scores.get(d).copied().unwrap_or(0);
            if (got - want).abs() > self.tolerance.dimension {
                why.push(format!("{d} {got} (expected {want})"));
            }
        }
        let (got, want): (i64, i64) = (scores.values().sum(), a.expected.values().sum());
        if (got - want).abs() > self.tolerance.total {
            why.push(format!("total {got} (expected {want})"));
        }
        (!why.is_empty()).then(|| format!("anchor {:?}: {}", a.name, why.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agencycore_anchors_fit_the_gatekeeper_they_check() {
        let set = anchors_for("agencycore").expect("the anchors parse");
        assert!(anchors_for("other").is_none());
        let model = crate::pipeline::agencycore().unwrap();
        let judge = model.stages.iter().find(|s| s.name == set.stage).unwrap();
        assert!(set.anchors.len() >= 3);
        for a in &set.anchors {
            // Everything the Gatekeeper reads (but the engine's facts) is
            // there and valid against its stage's schema.
            for r in &judge.reads {
                if r.stage == crate::pipeline::FACTS {
                    continue;
                }
                let v = a
                    .context
                    .get(&r.stage)
                    .unwrap_or_else(|| panic!("{}: no {}", a.name, r.stage));
                if let Some(s) = model.stages.iter().find(|s| s.name == r.stage) {
                    let validator = crate::pipeline::schemas::validator(&s.output_schema).unwrap();
                    let errors: Vec<String> =
                        validator.iter_errors(v).map(|e| e.to_string()).collect();
                    assert!(errors.is_empty(), "{} {}: {errors:?}", a.name, r.stage);
                }
            }
            let dims: Vec<&str> = a.expected.keys().map(String::as_str).collect();
            assert_eq!(
                dims,
                [
                    "autonomy",
                    "clarity",
                    "correctness",
                    "safety",
                    "verification"
                ]
            );
        }
    }

    #[test]
    fn scores_beyond_the_tolerance_are_named() {
        let set = anchors_for("agencycore").unwrap();
        let a = &set.anchors[0];
        assert_eq!(set.moved(a, &a.expected), None);
        let mut near = a.expected.clone();
        *near.get_mut("clarity").unwrap() -= 1;
        assert_eq!(set.moved(a, &near), None);
        let mut far = a.expected.clone();
        *far.get_mut("safety").unwrap() -= 3;
        let why = set.moved(a, &far).unwrap();
        assert!(why.contains("safety 2 (expected 5)"), "{why}");
        let mut drift = a.expected.clone();
        for d in ["clarity", "autonomy", "verification", "correctness"] {
            *drift.get_mut(d).unwrap() -= 1;
        }
        assert!(
            set.moved(a, &drift).unwrap().contains("total"),
            "four small moves add up"
        );
    }
}
