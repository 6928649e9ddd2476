//! A stage's `outcomes:`: what compiles, what fails where, and the plan's
//! graph check (tables and properties: every random DAG is accepted, any
//! added back edge is refused).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::super::*;
use super::*;

const PLAN: &str = r##"---
pipeline: plan
schemas:
  Task:
    type: object
    required: [id, title, deps]
    properties:
      id: {type: string}
      title: {type: string}
      about: {type: string}
      owner: {type: string}
      deps: {type: array, items: {type: string}}
      n: {type: integer}
stages:
  - name: P
    kind: code
    step: retriever
    reads: [input]
    output:
      type: object
      properties:
        tasks: {type: array, items: {$ref: "#/schemas/Task"}}
    outcomes: {items: tasks, id: id, title: title, description: about, depends: deps}
---
"##;

fn with_outcomes(line: &str) -> String {
    PLAN.replace(
        "    outcomes: {items: tasks, id: id, title: title, description: about, depends: deps}",
        line,
    )
}

fn spec() -> OutcomesSpec {
    OutcomesSpec {
        items: "tasks".into(),
        id: "id".into(),
        title: "title".into(),
        description: Some("about".into()),
        depends: Some("deps".into()),
    }
}

#[test]
fn a_plan_stage_compiles_its_outcomes_spec_into_the_model() {
    let m = compile_pipeline_str("plan.pipeline", PLAN).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.stages[0].outcomes, Some(spec()));
    // A model stored before `outcomes` existed still reads.
    let mut v = serde_json::to_value(&m).expect("serializes");
    v["stages"][0]
        .as_object_mut()
        .expect("a stage")
        .remove("outcomes");
    let old: PipelineModel = serde_json::from_value(v.clone()).expect("an older model parses");
    assert_eq!(old.stages[0].outcomes, None);
    assert!(
        !serde_json::to_string(&old)
            .expect("json")
            .contains("outcomes"),
        "absent, it is not written"
    );
}

#[test]
fn agencycores_planner_declares_its_tasks_as_outcomes() {
    let m = agencycore().unwrap_or_else(|e| panic!("{e}"));
    let planner = m
        .stages
        .iter()
        .find(|s| s.name == "Planner")
        .expect("Planner");
    assert_eq!(
        planner.outcomes,
        Some(OutcomesSpec {
            items: "tasks".into(),
            id: "id".into(),
            title: "title".into(),
            description: Some("description".into()),
            depends: Some("dependencies".into()),
        })
    );
    assert_eq!(
        m.stages.iter().filter(|s| s.outcomes.is_some()).count(),
        1,
        "only the Planner's output is a plan"
    );
}

/// (the `outcomes:` line, col of the error on line 23, message part).
const CASES: &[(&str, u32, &str)] = &[
    (
        "    outcomes: {items: tasks, id: id, title: title, description: n}",
        65,
        "`outcomes.description` of stage `P` names `n`, which must be a string in the output schema",
    ),
    (
        "    outcomes: {items: tasks, id: id, title: title, depends: about}",
        61,
        "`outcomes.depends` of stage `P` names `about`, which must be an array of strings",
    ),
    (
        "    outcomes: {items: tasks, id: id, title: owner}",
        45,
        "`outcomes.title` of stage `P` names `owner`, which every item of `tasks` must have",
    ),
    (
        "    outcomes: {items: tasks, id: n, title: title}",
        34,
        "`outcomes.id` of stage `P` names `n`, which must be a string",
    ),
    (
        "    outcomes: {items: tasks, id: id, title: titel}",
        45,
        "has no such field; did you mean `title`?",
    ),
    (
        "    outcomes: {items: tasks.id, id: id, title: title}",
        23,
        "names `tasks.id`, which must be an array of objects",
    ),
    ("    outcomes: [tasks]", 15, "`outcomes` must be a mapping"),
];

#[test]
fn outcomes_diagnostics_table() {
    for (line, col, part) in CASES {
        let err = compile_pipeline_str("plan.pipeline", &with_outcomes(line))
            .map(|_| ())
            .expect_err(&format!("{line:?} compiled"));
        let found = err
            .diagnostics
            .iter()
            .any(|d| (d.line, d.col) == (23, *col) && d.message.contains(part));
        assert!(
            found,
            "{line:?}: expected 23:{col} {part:?}, got:\n{}",
            err.diagnostics
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

fn task(id: &str, deps: &[&str]) -> Value {
    json!({"id": id, "title": format!("Task {id}"), "deps": deps})
}

fn plan(tasks: Vec<Value>) -> Value {
    json!({ "tasks": tasks })
}

fn issues(v: &Value) -> Vec<(String, &'static str)> {
    check_plan(&spec(), v)
        .into_iter()
        .map(|i| (i.instance_path, i.keyword))
        .collect()
}

#[test]
fn plan_check_table() {
    let p = |s: &str, k: &'static str| (s.to_owned(), k);
    let cases: Vec<(Value, Vec<(String, &'static str)>)> = vec![
        (
            plan(vec![
                task("a", &[]),
                task("b", &["a"]),
                task("c", &["a", "b"]),
            ]),
            vec![],
        ),
        (json!({"other": 1}), vec![]),
        (json!({"tasks": {}}), vec![p("/tasks", "type")]),
        (
            plan(vec![task("a", &[]), task("a", &[])]),
            vec![p("/tasks/1/id", "uniqueId")],
        ),
        (
            plan(vec![task("a", &[]), task("b", &["a", "z"])]),
            vec![p("/tasks/1/deps/1", "dependency")],
        ),
        (
            plan(vec![task("a", &["a"])]),
            vec![p("/tasks/0/deps/0", "cycle")],
        ),
        (
            plan(vec![
                task("a", &["c"]),
                task("b", &["a"]),
                task("c", &["b"]),
            ]),
            vec![p("/tasks/1/deps/0", "cycle")],
        ),
        (
            plan(vec![json!({"title": "no id", "deps": []})]),
            vec![p("/tasks/0/id", "type")],
        ),
        (
            plan(vec![
                task("a", &[]),
                json!({"id": "b", "title": "B", "deps": [3]}),
            ]),
            vec![p("/tasks/1/deps/0", "type")],
        ),
        (
            plan(
                (0..=MAX_PLAN_ITEMS)
                    .map(|i| task(&i.to_string(), &[]))
                    .collect(),
            ),
            vec![p("/tasks", "maxItems")],
        ),
    ];
    for (value, want) in cases {
        assert_eq!(issues(&value), want, "{value}");
    }
    let cycle = check_plan(
        &spec(),
        &plan(vec![
            task("a", &["c"]),
            task("b", &["a"]),
            task("c", &["b"]),
        ]),
    );
    assert_eq!(
        cycle[0].message,
        "the dependencies make a cycle: a → c → b → a (each depends on the next)"
    );
    let unknown = check_plan(&spec(), &plan(vec![task("t1", &[]), task("t2", &["t3"])]));
    assert!(
        unknown[0]
            .message
            .contains("depends on \"t3\", which is no item's id"),
        "{}",
        unknown[0].message
    );
}

#[test]
fn plan_items_carry_every_other_field_in_the_description() {
    let v = plan(vec![
        json!({"id": "a", "title": "First", "about": "Do it.", "owner": "qa", "deps": [], "n": 3}),
        json!({"id": "b", "title": "Second", "deps": ["a", "a"], "steps": ["one", "two"]}),
    ]);
    let items = plan_items(&spec(), &v);
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].title, "First");
    assert_eq!(items[0].description, "Do it.\n\n**n**: 3\n\n**owner**: qa");
    assert_eq!(
        items[1].depends,
        vec!["a".to_owned()],
        "each dependency once"
    );
    assert_eq!(items[1].description, "**steps**:\n- one\n- two");
}

/// A random DAG over `n` items: item i depends only on items before it.
fn dag() -> impl Strategy<Value = Vec<Vec<usize>>> {
    (1usize..24).prop_flat_map(|n| {
        (0..n)
            .map(|i| proptest::sample::subsequence((0..i).collect::<Vec<_>>(), 0..=i))
            .collect::<Vec<_>>()
    })
}

fn as_plan(deps: &[Vec<usize>], order: &[usize]) -> Value {
    // Items listed in `order`, so a DAG is not always in dependency order.
    plan(
        order
            .iter()
            .map(|&i| {
                let d: Vec<String> = deps[i].iter().map(|j| format!("t{j}")).collect();
                let d: Vec<&str> = d.iter().map(String::as_str).collect();
                task(&format!("t{i}"), &d)
            })
            .collect(),
    )
}

proptest! {
    #[test]
    fn every_random_dag_is_accepted(deps in dag(), seed in any::<u64>()) {
        let mut order: Vec<usize> = (0..deps.len()).collect();
        // A deterministic shuffle from the seed.
        let mut s = seed | 1;
        for i in (1..order.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            order.swap(i, (s % (i as u64 + 1)) as usize);
        }
        prop_assert_eq!(check_plan(&spec(), &as_plan(&deps, &order)), vec![]);
    }

    #[test]
    fn a_random_back_edge_is_refused(deps in dag(), pick in any::<proptest::sample::Index>()) {
        // A path i → … → j exists when j is reachable from i; adding j → i
        // closes a cycle. Take any edge i → j and add j → i (or, with no
        // edge, a self-dependency).
        let edges: Vec<(usize, usize)> = deps.iter().enumerate()
            .flat_map(|(i, d)| d.iter().map(move |&j| (i, j))).collect();
        let mut deps = deps;
        let order: Vec<usize> = (0..deps.len()).collect();
        if edges.is_empty() {
            let i = pick.index(deps.len());
            deps[i].push(i);
        } else {
            let (i, j) = edges[pick.index(edges.len())];
            deps[j].push(i);
        }
        let found = check_plan(&spec(), &as_plan(&deps, &order));
        prop_assert!(found.iter().any(|i| i.keyword == "cycle"), "{:?}", found);
        prop_assert!(found.iter().all(|i| i.keyword == "cycle"), "{:?}", found);
    }
}
