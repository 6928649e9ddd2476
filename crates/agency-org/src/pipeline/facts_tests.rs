//! Diagnostics of the run's `facts` entry, its stamps (`facts`, `rubric`,
//! `grader`) and the `facts` check, as a table of cases: each edits one
//! line of a small valid pipeline with a judging stage and names the
//! `file:line:col` and the message the compile must fail with.

use super::*;

const BASE: &str = r##"---
pipeline: judged
schemas:
  Capped: {type: object, required: [field, from, to, why], properties: {field: {type: string}, from: {}, to: {}, why: {type: string}}}
stages:
  - name: Work
    kind: llm
    reads: [input]
    output: {type: object, properties: {done: {type: boolean}}}
  - name: Judge
    kind: llm
    reads: [Work, facts]
    output:
      type: object
      properties:
        card: {type: object, properties: {correctness: {type: integer}, verification: {type: integer}, safety: {type: integer}}}
        total: {type: integer}
        decision: {type: object, properties: {approved: {type: boolean}, promoteToPortfolio: {type: boolean}}}
        facts: {type: object}
        rubric: {type: string}
        grader: {type: string}
        capped: {type: array, items: {$ref: "#/schemas/Capped"}}
    stamp: {facts: facts, rubric: rubric, grader: grader}
    checks:
      - {check: facts, scorecard: card, total: total, decision: decision, capped: capped}
---
## Work
Do {{input}}.

## Judge
Judge {{Work}} by {{facts.commands.failed}} and {{facts}}.
"##;

const FILE: &str = "judged.pipeline";

fn edited(line: usize, with: &str) -> String {
    let mut lines: Vec<&str> = BASE.split('\n').collect();
    lines[line - 1] = with;
    lines.join("\n")
}

#[test]
fn the_base_compiles_to_facts_stamps_and_the_check() {
    let m = compile_pipeline_str(FILE, BASE).unwrap_or_else(|e| panic!("{e}"));
    let judge = &m.stages[1];
    assert_eq!(
        judge.reads[1],
        ReadPath {
            stage: FACTS.into(),
            fields: vec![]
        }
    );
    assert_eq!(
        judge.stamped,
        vec![
            StampedField::Facts {
                field: "facts".into()
            },
            StampedField::Rubric {
                field: "rubric".into()
            },
            StampedField::Grader {
                field: "grader".into()
            },
        ]
    );
    assert_eq!(
        judge.checks,
        vec![Check::Facts {
            facts: "facts".into(),
            scorecard: "card".into(),
            total: "total".into(),
            decision: Some("decision".into()),
            capped: Some("capped".into()),
        }]
    );
}

/// (line to replace, its replacement, expected line:col, message part).
const CASES: &[(usize, &str, (u32, u32), &str)] = &[
    (
        31,
        "Judge {{Work}} by {{facts.commandz}} and {{facts}}.",
        (31, 19),
        "the run's facts has no field `commandz`; did you mean `commands`?",
    ),
    (
        12,
        "    reads: [Work, facts.plan]",
        (23, 13),
        "stamp `facts: facts` needs the stage to read `facts` (all of it)",
    ),
    (
        6,
        "  - name: facts",
        (6, 11),
        "`facts` is the run's facts the engine computes",
    ),
    (
        7,
        "    kind: code\n    step: retriever\n    stamp: {done: grader}",
        (9, 13),
        "stamp `done: grader` is the model that answered: only an llm stage has one",
    ),
    (
        23,
        "    stamp: {facts: facts, rubric: rubric, grader: grader, total: rubric}",
        (23, 59),
        "stamped field `total` is a rubric version (a string), which its schema in the output does not allow",
    ),
    (
        23,
        "    stamp: {rubric: rubric, grader: grader}",
        (25, 9),
        "check `facts` caps the scorecard with the run's facts stored in the artifact",
    ),
    (
        25,
        "      - {check: facts, scorecard: kard, total: total}",
        (25, 9),
        "check `facts` names `kard`, which is not a field of the stage's output",
    ),
    (
        16,
        "        card: {type: object, properties: {correctness: {type: integer}, safety: {type: string}}}",
        (25, 9),
        "it lacks verification, safety",
    ),
    (
        25,
        "      - {check: facts, scorecard: card, total: rubric}",
        (25, 9),
        "check `facts`: `rubric` must be a number",
    ),
    (
        25,
        "      - {check: facts, scorecard: card, total: total, decision: card}",
        (25, 9),
        "check `facts`: `card` must be an object with boolean `approved` or `promoteToPortfolio`",
    ),
    (
        25,
        "      - {check: facts, scorecard: card, total: total, capped: rubric}",
        (25, 9),
        "check `facts`: `rubric` must be a top-level array of {field, from, to, why} objects",
    ),
    (
        25,
        "      - {check: facts, scorecard: card, total: total, of: card}",
        (25, 59),
        "`of` applies to a `sum` check, not to `facts`",
    ),
    (
        25,
        "      - {check: facts, total: total}",
        (25, 17),
        "a `facts` check needs `scorecard`",
    ),
    (
        25,
        "      - {check: fact, scorecard: card, total: total}",
        (25, 17),
        "unknown check `fact`: the checks are: sum, facts; did you mean `facts`?",
    ),
];

#[test]
fn facts_diagnostics_table() {
    for (line, with, (l, c), part) in CASES {
        let text = edited(*line, with);
        let err = compile_pipeline_str(FILE, &text)
            .map(|_| ())
            .expect_err(&format!("line {line} as {with:?} compiled"));
        let found = err.diagnostics.iter().any(|d| {
            d.is_error()
                && d.file == FILE
                && (d.line, d.col) == (*l, *c)
                && d.message.contains(part)
        });
        assert!(
            found,
            "line {line} as {with:?}: expected {FILE}:{l}:{c}: …{part}…, got:\n{err}"
        );
    }
}

/// Without a `capped` or `decision`, the check still compiles: the
/// engine caps the scores and records nothing.
#[test]
fn decision_and_capped_are_optional() {
    let text = edited(25, "      - {check: facts, scorecard: card, total: total}");
    let m = compile_pipeline_str(FILE, &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        m.stages[1].checks,
        vec![Check::Facts {
            facts: "facts".into(),
            scorecard: "card".into(),
            total: "total".into(),
            decision: None,
            capped: None,
        }]
    );
}
