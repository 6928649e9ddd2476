//! The Gatekeeper's judgement of a run as the learning loop reads it: the
//! scorecard's five dimensions, whether Correctness and Safety passed,
//! and which rubric and grader produced it. A Correctness or Safety
//! failure blocks promotion (and marks lessons learned from the run as
//! severe) whatever the total.

use std::collections::BTreeMap;

use serde_json::Value;

/// The least score (of 5) a dimension needs to pass: the engine's caps
/// use the same.
pub const PASS_AT: i64 = agency_org::pipeline::PASS_AT;

/// The five dimensions of seed 001's scorecard, in order.
pub const DIMENSIONS: [&str; 5] = [
    "correctness",
    "verification",
    "safety",
    "clarity",
    "autonomy",
];

/// A run's judged scorecard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// Each dimension's score, 0-5.
    pub scores: BTreeMap<String, i64>,
    pub total: i64,
    pub correctness_pass: bool,
    pub safety_pass: bool,
    /// The rubric's version the scorecard was given under.
    pub rubric: String,
    /// The model that graded.
    pub grader: String,
}

impl Judged {
    /// Correctness and Safety both passed.
    pub fn passed(&self) -> bool {
        self.correctness_pass && self.safety_pass
    }

    pub fn score(&self, dimension: &str) -> i64 {
        self.scores.get(dimension).copied().unwrap_or(0)
    }
}

/// The judgement of a run from its artifacts (stage name, validated
/// artifact, in pipeline order): the first artifact with a `scorecard`
/// object gives it, its scores as stored (capped by the run's facts when
/// the stage has a `facts` check), and its stamped `rubric` and `grader`
/// (empty when the stage stamps none). `None` when no stage scored the run.
pub fn judged(artifacts: &[(String, Value)]) -> Option<Judged> {
    let scored = artifacts
        .iter()
        .find(|(_, a)| a.get("scorecard").is_some_and(Value::is_object))
        .map(|(_, a)| a)?;
    let card = &scored["scorecard"];
    let text = |f: &str| {
        scored
            .get(f)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let scores: BTreeMap<String, i64> = DIMENSIONS
        .iter()
        .map(|d| {
            (
                (*d).to_owned(),
                card.get(*d).and_then(Value::as_i64).unwrap_or(0),
            )
        })
        .collect();
    let total = scores.values().sum();
    Some(Judged {
        correctness_pass: scores["correctness"] >= PASS_AT,
        safety_pass: scores["safety"] >= PASS_AT,
        scores,
        total,
        rubric: text("rubric"),
        grader: text("grader"),
    })
}

/// What the engine capped in the run's scorecard because the run's facts
/// forbid it (the scoring artifact's `capped`), each with the facts that
/// forced it; empty when nothing was, or no stage scored the run.
pub fn capped(artifacts: &[(String, Value)]) -> Vec<agency_org::pipeline::Capped> {
    artifacts
        .iter()
        .find(|(_, a)| a.get("scorecard").is_some_and(Value::is_object))
        .and_then(|(_, a)| a.get("capped"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn judged_reads_the_stored_scorecard_rubric_and_grader() {
        let gk = json!({
            "scorecard": {"correctness": 2, "verification": 5, "safety": 5, "clarity": 4, "autonomy": 3},
            "rubric": "Gatekeeper@0123456789abcdef", "grader": "default/test-model",
        });
        let j = judged(&[
            ("Observer".to_owned(), json!({"summary": "x"})),
            ("Gatekeeper".to_owned(), gk),
        ])
        .expect("scored");
        assert_eq!(
            (j.total, j.correctness_pass, j.safety_pass),
            (19, false, true)
        );
        assert!(!j.passed());
        assert_eq!(j.rubric, "Gatekeeper@0123456789abcdef");
        assert_eq!(j.grader, "default/test-model");
        // A scorecard without them (an older run) has empty ones.
        let j = judged(&[("G".to_owned(), json!({"scorecard": {"safety": 5}}))]).expect("scored");
        assert_eq!((j.rubric.as_str(), j.grader.as_str()), ("", ""));
        assert!(judged(&[("G".to_owned(), json!({"scorecard": 3}))]).is_none());
    }

    #[test]
    fn capped_lists_what_the_facts_forced() {
        let gk = json!({"scorecard": {"correctness": 2}, "capped": [
            {"field": "scorecard.correctness", "from": 5, "to": 2, "why": "command `make` failed"}]});
        let c = capped(&[("Gatekeeper".to_owned(), gk)]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].why, "command `make` failed");
        assert!(capped(&[("G".to_owned(), json!({"scorecard": {}}))]).is_empty());
    }
}
