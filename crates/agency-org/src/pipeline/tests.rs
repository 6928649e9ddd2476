//! Diagnostics of the `.pipeline` compiler, as a table of cases: each
//! edits one line of a small valid pipeline and names the `file:line:col`
//! and the message the compile must fail with.

use super::*;

const BASE: &str = r##"---
pipeline: demo
schemas:
  Item: {type: object, properties: {id: {type: string}}}
stages:
  - name: A
    kind: llm
    reads: [input]
    output:
      type: object
      properties:
        agent: {const: A}
        items: {type: array, items: {$ref: "#/schemas/Item"}}
        when: {type: string, format: date-time}
    stamp: {agent: A, when: now}
  - name: B
    kind: code
    step: retriever
    reads: [A.items.id]
    output: {type: object, properties: {n: {type: integer}}}
---
## A
Do {{input}}.
"##;

const FILE: &str = "demo.pipeline";

/// BASE with line `line` (1-based) replaced by `with` (which may hold
/// several lines).
fn edited(line: usize, with: &str) -> String {
    let mut lines: Vec<&str> = BASE.split('\n').collect();
    lines[line - 1] = with;
    lines.join("\n")
}

#[test]
fn the_base_compiles() {
    let m = compile_pipeline_str(FILE, BASE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.name, "demo");
    assert_eq!(m.stages.len(), 2);
    let StageKind::Llm { prompt, .. } = &m.stages[0].kind else {
        panic!("A is an llm stage")
    };
    assert_eq!(prompt, "Do {{input}}.");
    assert_eq!(
        m.stages[1].reads,
        vec![ReadPath {
            stage: "A".into(),
            fields: vec!["items".into(), "id".into()]
        }]
    );
    assert_eq!(m.stages[0].output_schema["$defs"]["Item"]["type"], "object");
    assert_eq!(
        m.stages[0].output_schema["properties"]["items"]["items"]["$ref"],
        "#/$defs/Item"
    );
    assert_eq!(
        m.stages[1].source,
        crate::model::SourceRef {
            file: FILE.into(),
            line: 16
        }
    );
    assert_eq!(
        m.source_hash,
        blake3::hash(BASE.as_bytes()).to_hex().to_string()
    );
    assert_eq!(m.stages[0].retry, RetryPolicy::default());
}

/// (line to replace, its replacement, expected line:col, message part).
const CASES: &[(usize, &str, (u32, u32), &str)] = &[
    (
        8,
        "    readz: [input]",
        (8, 5),
        "unknown key `readz` in a stage; did you mean `reads`?",
    ),
    (
        2,
        "pipeline: demo\nversion: 2",
        (3, 1),
        "unknown key `version` in a pipeline's frontmatter",
    ),
    (
        16,
        "  - name: A",
        (16, 11),
        "stage `A` is declared twice (first at line 6)",
    ),
    (
        19,
        "    reads: [A.mood]",
        (19, 13),
        "stage `B` reads `A.mood`, but stage `A`'s output has no field `mood`",
    ),
    (
        19,
        "    reads: [A.items.title]",
        (19, 13),
        "has no field `title` at `items` (it has: id)",
    ),
    (
        19,
        "    reads: [A.item]",
        (19, 13),
        "no field `item`; did you mean `items`?",
    ),
    (
        19,
        "    reads: [input.x]",
        (19, 13),
        "the pipeline's input has no field `x`",
    ),
    (
        8,
        "    reads: [input, B]",
        (8, 20),
        "stage `A` reads `B`, but stage `B` runs after it",
    ),
    (
        8,
        "    reads: [input, A]",
        (8, 20),
        "stage `A` reads `A`, its own output",
    ),
    (8, "    reads: [input, Q]", (8, 20), "no stage is named `Q`"),
    (8, "    reads: [input, A..b]", (8, 20), "bad read `A..b`"),
    (
        8,
        "    reads: [input, input]",
        (8, 20),
        "`input` is read twice",
    ),
    (
        23,
        "Do {{input}} and {{B}}.",
        (23, 18),
        "placeholder `{{B}}` of stage `A` is not covered by its reads",
    ),
    (
        23,
        "Do {{input.x}}.",
        (23, 4),
        "uses placeholder `input.x`, but the pipeline's input has no field `x`",
    ),
    (
        14,
        "        when: {type: strin, format: date-time}",
        (14, 22),
        "the output of stage `A` is not valid JSON Schema (draft 2020-12)",
    ),
    (
        20,
        "    output: {type: array}",
        (20, 13),
        "must be an object schema (`type: object`)",
    ),
    (
        20,
        "    description: no output",
        (16, 5),
        "stage `B` needs an `output` schema",
    ),
    (
        15,
        "    stamp: {agent: A, when: now, who: A}",
        (15, 34),
        "stamped field `who` is not a property of the stage's output schema",
    ),
    (
        15,
        "    stamp: {agent: B, when: now}",
        (15, 13),
        "stamped field `agent` is the constant \"B\", which its schema in the output does not allow",
    ),
    (
        15,
        "    stamp: {agent: A, when: level}",
        (15, 23),
        "stamped field `when` is a permission level",
    ),
    (
        18,
        "    step: retreiver",
        (18, 11),
        "unknown code step `retreiver`: the built-in steps are retriever, safety_guard, tool_runner; did you mean `retriever`?",
    ),
    (
        18,
        "    step: retriever\n    retry: {repair_attempts: 9}",
        (19, 30),
        "`repair_attempts` must be a whole number from 0 to 5",
    ),
    (
        18,
        "    step: retriever\n    budget: {max_tokens: 0}",
        (19, 26),
        "`budget.max_tokens` must be a positive whole number",
    ),
    (
        18,
        "    step: retriever\n    budget: {timeout_seconds: soon}",
        (19, 31),
        "`budget.timeout_seconds` must be a positive whole number of seconds, found `soon`",
    ),
    (
        7,
        "    kind: lmm",
        (7, 11),
        "unknown stage kind `lmm`: expected llm, agent or code; did you mean `llm`?",
    ),
    (
        17,
        "    kind: agent",
        (17, 11),
        "stage `B` is an agent stage and needs `agent`",
    ),
    (
        18,
        "    step: retriever\n    model: big",
        (19, 5),
        "`model` applies to llm stages only, and stage `B` is a code stage",
    ),
    (
        7,
        "    kind: llm\n    prompt: short",
        (8, 13),
        "stage `A` has a prompt both in `prompt:` and in its `## A` section",
    ),
    (
        22,
        "## Z",
        (6, 11),
        "llm stage `A` needs a prompt: a `## A` section in the body",
    ),
    (
        22,
        "## B",
        (22, 4),
        "section `B` is a prompt, but stage `B` is not an llm stage",
    ),
    (
        4,
        "  Item: {type: object, properties: {id: {$ref: \"#/schemas/Nope\"}}}",
        (4, 48),
        "`$ref` names schema `Nope`, which is not declared",
    ),
    (
        4,
        "  Item: {type: object, properties: {id: {$ref: \"#/$defs/X\"}}}",
        (4, 48),
        "is not a shared schema",
    ),
    (
        4,
        "  Item: {type: object, properties: {id: {type: 3}}}",
        (4, 48),
        "schema `Item` is not valid JSON Schema",
    ),
    (
        18,
        "    step: retriever\n    checks: [{check: sum, total: nope, of: n}]",
        (19, 14),
        "check `sum` names `nope`, which is not a field of the stage's output",
    ),
    (
        18,
        "    step: retriever\n    checks: [{check: product, total: n, of: n}]",
        (19, 22),
        "unknown check `product`",
    ),
    (
        18,
        "    step: retriever\n    input: {type: object, required: [id, count], properties: {id: {type: string}, count: {type: integer}}}",
        (19, 42),
        "stage `B` declares input `count` as required, but none of its reads provides it",
    ),
    (
        18,
        "    step: retriever\n    input: {type: object, required: [id], properties: {id: {type: integer}}}",
        (20, 13),
        "stage `B` declares input `id` as integer, but its read `A.items.id` is string",
    ),
    (
        2,
        "pipeline: two words",
        (2, 11),
        "bad pipeline name `two words`",
    ),
    (
        6,
        "  - name: input",
        (6, 11),
        "`input` is the pipeline's input",
    ),
    (
        6,
        "  - name: history",
        (6, 11),
        "`history` is the run's history of earlier runs",
    ),
    (
        19,
        "    reads: [history.runz]",
        (19, 13),
        "the run's history has no field `runz`; did you mean `runs`?",
    ),
    (
        15,
        "    stamp: {agent: A, when: now, items: similar_runs}",
        (15, 34),
        "stamp `items: similar_runs` needs the stage to read `history`",
    ),
    (
        15,
        "    stamp: {agent: A, when: now, items: blocked_actions}",
        (15, 34),
        "stamp `items: blocked_actions` needs an `actions` property in the output",
    ),
    (
        15,
        "    stamp: {agent: A, when: now}\n    outcomes: {items: itemz, id: id, title: id}",
        (16, 23),
        "`outcomes.items` of stage `A` names `itemz`, but the stage's output has no field `itemz`; did you mean `items`?",
    ),
    (
        15,
        "    stamp: {agent: A, when: now}\n    outcomes: {items: when, id: id, title: id}",
        (16, 23),
        "names `when`, which must be an array of objects with properties",
    ),
    (
        15,
        "    stamp: {agent: A, when: now}\n    outcomes: {items: items, id: id, title: id}",
        (16, 34),
        "`outcomes.id` of stage `A` names `id`, which every item of `items` must have: add it to the item schema's `required`",
    ),
    (
        15,
        "    stamp: {agent: A, when: now}\n    outcomes: {items: items, id: idx, title: id}",
        (16, 34),
        "names `idx`, but an item of `items` has no such field; did you mean `id`? (it has: id)",
    ),
    (
        15,
        "    stamp: {agent: A, when: now}\n    outcomes: {items: items, id: id}",
        (16, 15),
        "`outcomes` needs `items` (the output's array of plan items), `id` and `title` (fields of each item); missing: title",
    ),
    (
        15,
        "    stamp: {agent: A, when: now}\n    outcomes: {items: items, id: id, title: id, dependz: x}",
        (16, 49),
        "unknown key `dependz` in `outcomes`; did you mean `depends`?",
    ),
];

#[test]
fn diagnostics_table() {
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

#[test]
fn a_prompt_key_is_a_template_too_and_its_placeholders_are_reported_at_it() {
    let body_less = BASE.replace("## A\nDo {{input}}.\n", "");
    let ok = body_less.replace(
        "    kind: llm\n",
        "    kind: llm\n    prompt: \"Do {{input}}\"\n",
    );
    let m = compile_pipeline_str(FILE, &ok).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(&m.stages[0].kind, StageKind::Llm { prompt, .. } if prompt == "Do {{input}}"));
    let bad = body_less.replace(
        "    kind: llm\n",
        "    kind: llm\n    prompt: |\n      Use {{input}} and {{Q.x}}\n",
    );
    let err = compile_pipeline_str(FILE, &bad)
        .map(|_| ())
        .expect_err("compiled");
    let shown: Vec<String> = err.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "demo.pipeline:9:7: error: placeholder `{{Q.x}}` of stage `A` is not covered by its reads: add `Q.x` to `reads`"
        ]
    );
}

#[test]
fn a_read_the_prompt_never_places_is_a_warning() {
    let text = BASE.replace("    reads: [input]\n", "    reads: [input, input.x]\n");
    // `input.x` does not exist (a string has no fields): that is the error;
    // the unused-read warning is for reads that do exist.
    assert!(compile_pipeline_str(FILE, &text).is_err());
    let text = BASE.replace("Do {{input}}.", "Do it.");
    let c = compile_pipeline_full(FILE, &text).unwrap_or_else(|e| panic!("{e}"));
    let shown: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "demo.pipeline:8:13: warning: stage `A` reads `input`, but its prompt never places it (`{{input}}`): the model does not see it"
        ]
    );
    // AgencyCore places everything it reads.
    let core = compile_pipeline_full(AGENCYCORE_FILE, AGENCYCORE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(core.warnings, Vec::new());
}

#[test]
fn an_agent_stage_compiles_to_a_typed_call() {
    let text = BASE.replace(
        "    kind: code\n    step: retriever\n",
        "    kind: agent\n    agent: Reviewer\n    verb: review\n",
    );
    let m = compile_pipeline_str(FILE, &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        m.stages[1].kind,
        StageKind::Agent {
            agent: "Reviewer".into(),
            verb: "review".into()
        }
    );
}

/// Issue 31's named test: "a pipeline whose stage reads a field no
/// earlier stage produces fails to compile at file:line".
#[test]
fn a_stage_reading_a_field_no_earlier_stage_produces_fails_at_file_line() {
    let text = edited(19, "    reads: [A.items.id, A.summary]");
    let err = compile_pipeline_str("p/x.pipeline", &text)
        .map(|_| ())
        .expect_err("compiled");
    let shown: Vec<String> = err.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "p/x.pipeline:19:25: error: stage `B` reads `A.summary`, but stage `A`'s output has no field `summary` (it has: agent, items, when)"
        ]
    );
}

#[test]
fn a_compile_with_an_error_returns_no_model_and_warnings_do_not_fail() {
    assert!(compile_pipeline_str(FILE, "no frontmatter").is_err());
    assert!(compile_pipeline_str(FILE, "---\n---\n").is_err());
    assert!(compile_pipeline_str(FILE, "---\npipeline: [\n---\n").is_err());
    let prose = format!("{BASE}\n## Notes\nWhy this pipeline exists.\n");
    let c = compile_pipeline_full(FILE, &prose).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(
        c.warnings[0]
            .message
            .contains("section `Notes` names no llm stage")
    );
}

#[test]
fn stamps_checks_and_defaults_compile_to_the_model() {
    let text = edited(
        18,
        "    step: retriever\n    retry: {repair_attempts: 0, escalate_model: big}\n    budget: {max_tokens: 900}\n    checks: [{check: sum, total: n, of: card}]",
    );
    let text = text.replace(
        "output: {type: object, properties: {n: {type: integer}}}",
        "output: {type: object, properties: {n: {type: integer}, card: {type: object, properties: {a: {type: integer}, b: {type: number}}}}}",
    );
    let m = compile_pipeline_str(FILE, &text).unwrap_or_else(|e| panic!("{e}"));
    let b = &m.stages[1];
    assert_eq!(
        b.retry,
        RetryPolicy {
            repair_attempts: 0,
            escalate_model: Some("big".into())
        }
    );
    assert_eq!(
        b.budget,
        Some(StageBudget {
            max_tokens: Some(900),
            max_output_tokens_per_call: None,
            timeout_seconds: None
        })
    );
    assert_eq!(
        b.checks,
        vec![Check::Sum {
            total: "n".into(),
            of: "card".into()
        }]
    );
    assert_eq!(
        m.stages[0].stamped,
        vec![
            StampedField::Const {
                field: "agent".into(),
                value: serde_json::json!("A")
            },
            StampedField::Timestamp {
                field: "when".into()
            },
        ]
    );
    assert_eq!(m.input_schema, serde_json::json!({ "type": "string" }));
}

#[test]
fn compile_pipeline_reads_a_file_and_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("demo.pipeline");
    std::fs::write(&path, BASE).expect("write");
    let m = compile_pipeline(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.source.file, path.display().to_string());
    let missing = compile_pipeline(&dir.path().join("nope.pipeline")).expect_err("missing file");
    assert!(
        missing.diagnostics[0]
            .message
            .starts_with("failed to read pipeline")
    );
}

#[test]
fn the_pipeline_model_schema_names_its_fields() {
    let s = pipeline_schema();
    let props = s["properties"].as_object().expect("properties");
    for k in [
        "version",
        "name",
        "inputSchema",
        "stages",
        "source",
        "sourceHash",
    ] {
        assert!(props.contains_key(k), "{k}");
    }
}

mod robustness {
    use proptest::prelude::*;

    use super::*;

    /// A diagnostic must point into the file (or at its start).
    fn in_file(text: &str, d: &Diagnostic) -> bool {
        let lines = u32::try_from(text.split('\n').count()).unwrap_or(u32::MAX);
        d.line >= 1 && d.line <= lines && d.col >= 1
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Any line of AgencyCore removed, or the file cut anywhere: the
        /// compiler never panics, and either compiles or says where.
        #[test]
        fn damaged_sources_fail_with_positions(line in 0usize..541, cut in 0usize..40_000, by_line in any::<bool>()) {
            let text = if by_line {
                let mut lines: Vec<&str> = AGENCYCORE.split('\n').collect();
                let i = line % lines.len();
                lines.remove(i);
                lines.join("\n")
            } else {
                let mut end = cut % AGENCYCORE.len();
                while !AGENCYCORE.is_char_boundary(end) {
                    end -= 1;
                }
                AGENCYCORE[..end].to_owned()
            };
            match compile_pipeline_str(AGENCYCORE_FILE, &text) {
                Ok(m) => prop_assert!(!m.stages.is_empty()),
                Err(e) => {
                    prop_assert!(e.error_count() >= 1);
                    for d in &e.diagnostics {
                        prop_assert!(in_file(&text, d), "{d} is outside the file");
                    }
                }
            }
        }

        /// Any placeholder text in a prompt either compiles (a covered
        /// read) or fails at the placeholder's line.
        #[test]
        fn placeholders_are_checked_where_written(path in "[A-Za-z.]{0,12}") {
            let text = BASE.replace("Do {{input}}.", &format!("Do {{{{input}}}} {{{{{path}}}}}."));
            match compile_pipeline_str(FILE, &text) {
                Ok(_) => prop_assert!(path == "input"),
                Err(e) => prop_assert!(
                    e.diagnostics.iter().any(|d| d.line == 23 && d.col == 14),
                    "{e}"
                ),
            }
        }
    }
}
