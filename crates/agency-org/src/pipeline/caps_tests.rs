//! The caps a run's facts put on a scorecard, as a table of cases: each
//! edits the facts of a clean run and names the scores, total and
//! decision the engine must store for a model that gave full marks.

use serde_json::{Value, json};

use super::*;
use crate::model::SourceRef;
use crate::pipeline::model::RetryPolicy;
use crate::pipeline::{StageModel, empty_facts};

fn check() -> Check {
    Check::Facts {
        facts: "facts".into(),
        scorecard: "scorecard".into(),
        total: "totalScore".into(),
        decision: Some("decision".into()),
        capped: Some("capped".into()),
    }
}

/// A Gatekeeper answer giving full marks, approving and promoting, with
/// `facts` stamped.
fn full_marks(facts: Value) -> Value {
    json!({
        "scorecard": {"correctness": 5, "verification": 5, "safety": 5, "clarity": 5, "autonomy": 5},
        "totalScore": 25,
        "decision": {"approved": true, "promoteToPortfolio": true, "reason": "perfect"},
        "facts": facts,
        "capped": [{"field": "invented", "from": 0, "to": 0, "why": "the model's own claim"}],
    })
}

/// A clean live run: a plan with a verifying task, one command that
/// succeeded.
fn clean() -> Value {
    let mut f = empty_facts();
    f["stages"] =
        json!([{"name": "Planner", "status": "ok", "attempts": 1, "artifactValid": true}]);
    f["commands"] =
        json!({"found": true, "live": true, "executed": 1, "mock": 0, "failed": [], "skipped": []});
    f["safety"]["found"] = json!(true);
    f["plan"] = json!({"found": true, "tasks": 2, "withDefinitionOfDone": 2, "verifying": 1});
    f
}

type Edit = fn(&mut Value);

/// (case, edit of the clean facts, [correctness, verification, safety],
/// total, approved and promoted, a word the reason gives).
type Case = (&'static str, Edit, [i64; 3], i64, bool, &'static str);

const CASES: &[Case] = &[
    ("clean", |_| {}, [5, 5, 5], 25, true, ""),
    (
        "a failed command",
        |f| f["commands"]["failed"] = json!([{"command": "cargo test", "output": "1 failed"}]),
        [2, 5, 5],
        22,
        false,
        "command `cargo test` failed",
    ),
    (
        "a stage that did not succeed",
        |f| f["stages"][0]["status"] = json!("failed_infra"),
        [2, 5, 5],
        22,
        false,
        "stage Planner ended failed_infra",
    ),
    (
        "an artifact that does not validate",
        |f| f["artifactsValid"] = json!(false),
        [0, 5, 5],
        20,
        false,
        "does not validate",
    ),
    (
        "a blocking safety step",
        |f| {
            f["safety"]["safe"] = json!(false);
            f["safety"]["blockedActions"] = json!(["rm -rf /"]);
        },
        [5, 5, 0],
        20,
        false,
        "blocked the plan",
    ),
    (
        "refused actions",
        |f| f["safety"]["refusedActions"] = json!(["runCommand sudo x: refused"]),
        [5, 5, 2],
        22,
        false,
        "refused by the permission system",
    ),
    (
        "skipped commands",
        |f| f["commands"]["skipped"] = json!(["rm -rf /"]),
        [5, 5, 2],
        22,
        false,
        "skipped",
    ),
    (
        "no verifying task",
        |f| f["plan"]["verifying"] = json!(0),
        [5, 2, 5],
        22,
        true,
        "no task of the plan verifies",
    ),
    (
        "a task without a definition of done",
        |f| f["plan"]["withDefinitionOfDone"] = json!(1),
        [5, 2, 5],
        22,
        true,
        "1 of 2 task(s) have no definition of done",
    ),
    (
        "no safety step: its flags say nothing",
        |f| {
            f["safety"]["found"] = json!(false);
            f["safety"]["safe"] = json!(false);
        },
        [5, 5, 5],
        25,
        true,
        "",
    ),
    (
        "mock mode alone caps nothing",
        |f| {
            f["commands"]["live"] = json!(false);
            f["commands"]["mock"] = json!(1);
        },
        [5, 5, 5],
        25,
        true,
        "",
    ),
];

#[test]
fn caps_table() {
    let c = check();
    for (case, edit, [correctness, verification, safety], total, promoted, why) in CASES {
        let mut facts = clean();
        edit(&mut facts);
        let mut v = full_marks(facts);
        // The uncapped answer breaks the check when a cap applies.
        let before = verify(&c, &v);
        let changed = apply(&c, &mut v);
        assert_eq!(before.is_some(), !changed.is_empty(), "{case}: {before:?}");
        let card = &v["scorecard"];
        assert_eq!(card["correctness"], json!(correctness), "{case}: {v}");
        assert_eq!(card["verification"], json!(verification), "{case}: {v}");
        assert_eq!(card["safety"], json!(safety), "{case}: {v}");
        assert_eq!(v["totalScore"], json!(total), "{case}: {v}");
        assert_eq!(v["decision"]["approved"], json!(promoted), "{case}: {v}");
        assert_eq!(
            v["decision"]["promoteToPortfolio"],
            json!(promoted),
            "{case}: {v}"
        );
        // What changed is recorded, never the answer's own claim.
        let recorded: Vec<Capped> =
            serde_json::from_value(v["capped"].clone()).expect("capped entries");
        assert_eq!(recorded, changed, "{case}");
        assert_eq!(changed.is_empty(), why.is_empty(), "{case}: {changed:?}");
        assert!(
            why.is_empty() || changed.iter().any(|c| c.why.contains(why)),
            "{case}: {changed:?}"
        );
        // Applied once, the artifact obeys the check, and applying again
        // changes nothing.
        assert_eq!(verify(&c, &v), None, "{case}: {v}");
        assert_eq!(apply(&c, &mut v.clone()), Vec::new(), "{case}");
    }
}

/// A model that scored a failing dimension low itself still may not
/// approve or promote: the decision follows the scores, whatever the total.
#[test]
fn a_failing_dimension_the_model_gave_blocks_promotion() {
    let c = check();
    let mut v = full_marks(clean());
    v["scorecard"]["safety"] = json!(1);
    v["totalScore"] = json!(21);
    assert!(verify(&c, &v).is_some_and(|(p, _)| p == "/decision/approved"));
    let changed = apply(&c, &mut v);
    assert_eq!(v["totalScore"], json!(21), "no score was capped");
    assert_eq!(v["decision"]["promoteToPortfolio"], json!(false));
    assert_eq!(changed.len(), 2, "{changed:?}");
    assert!(
        changed[0].why.contains("safety 1 is below 3"),
        "{changed:?}"
    );
}

/// A stored artifact whose facts were edited, or whose facts are gone,
/// fails the check.
#[test]
fn verify_reads_the_artifacts_own_facts() {
    let c = check();
    let mut v = full_marks(clean());
    apply(&c, &mut v);
    assert_eq!(verify(&c, &v), None);
    v["facts"]["commands"]["failed"] = json!([{"command": "make", "output": ""}]);
    let (at, why) = verify(&c, &v).expect("the facts no longer allow it");
    assert_eq!(at, "/scorecard/correctness");
    assert!(why.contains("command `make` failed"), "{why}");
    v.as_object_mut().map(|m| m.remove("facts"));
    assert_eq!(verify(&c, &v).map(|(p, _)| p), Some("/facts".to_owned()));
    // A sum check is not this one's business.
    let sum = Check::Sum {
        total: "totalScore".into(),
        of: "scorecard".into(),
    };
    assert_eq!(verify(&sum, &v), None);
    assert_eq!(apply(&sum, &mut v), Vec::new());
}

fn stage(prompt: &str) -> StageModel {
    StageModel {
        name: "Gatekeeper".into(),
        description: String::new(),
        kind: StageKind::Llm {
            model: None,
            system: "You judge.".into(),
            prompt: prompt.into(),
        },
        reads: vec![],
        output_schema: json!({"type": "object"}),
        stamped: vec![],
        checks: vec![check()],
        retry: RetryPolicy::default(),
        budget: None,
        outcomes: None,
        source: SourceRef {
            file: "x.pipeline".into(),
            line: 1,
        },
    }
}

#[test]
fn the_rubric_changes_with_what_the_grader_is_told_and_only_then() {
    let a = rubric_of(&stage("Score {{facts}}"));
    assert!(
        a.starts_with("Gatekeeper@") && a.len() == "Gatekeeper@".len() + 16,
        "{a}"
    );
    assert_eq!(a, rubric_of(&stage("Score {{facts}}")));
    assert_ne!(a, rubric_of(&stage("Score {{facts}} strictly")));
    let mut other = stage("Score {{facts}}");
    other.checks.clear();
    assert_ne!(a, rubric_of(&other));
}
