//! The Gatekeeper's judgement of a run as the learning loop reads it: the
//! scorecard's five dimensions, whether Correctness and Safety passed,
//! and which rubric and grader produced it. A Correctness or Safety
//! failure blocks promotion (and marks lessons learned from the run as
//! severe) whatever the total.

use std::collections::BTreeMap;

use serde_json::Value;

/// The least score (of 5) a dimension needs to pass.
pub const PASS_AT: i64 = 3;

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
/// object gives it. `None` when no stage scored the run.
pub fn judged(artifacts: &[(String, Value)]) -> Option<Judged> {
    let card = artifacts
        .iter()
        .find_map(|(_, a)| a.get("scorecard").filter(|c| c.is_object()))?;
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
        rubric: String::new(),
        grader: String::new(),
    })
}
