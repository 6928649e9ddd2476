//! Verbs (typed contracts of agents, issue 31 item 1): a table of
//! malformed verbs, each with its diagnostic at file:line:col, and the
//! compiled model of good ones from `.agent` frontmatter and agents.json.

use agency_org::compile;
use serde_json::json;

const AGENCY: &str = "# Agency Name: A\n## Executive Agent\nThe executive agent is Boss.\n";

/// A `.agent` whose `agency.verbs` is `verbs` (indented YAML lines).
fn agent(verbs: &str) -> String {
    format!("---\nagency:\n  verbs:\n{verbs}---\n# Boss\n")
}

/// Compile the agency with Boss.agent = `text`; every diagnostic, or "ok".
fn diags(text: &str) -> String {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("A.agency"), AGENCY).expect("write");
    std::fs::write(tmp.path().join("Boss.agent"), text).expect("write");
    match compile(tmp.path()) {
        Ok(_) => "ok".into(),
        Err(e) => e.diagnostics.iter().map(|d| format!("{d}\n")).collect(),
    }
}

const GOOD_IN: &str = "      input: {type: object}\n";
const GOOD_OUT: &str = "      output: {type: object}\n";

#[test]
fn malformed_verbs_are_reported_where_written() {
    let cases: &[(&str, String, &str)] = &[
        (
            "unknown key",
            format!("    - name: run\n{GOOD_IN}{GOOD_OUT}      inptu: 1\n"),
            "Boss.agent:7:7: error: unknown key `inptu` in a verb; did you mean `input`?\n",
        ),
        (
            "bad name",
            format!("    - name: Run-it\n{GOOD_IN}{GOOD_OUT}"),
            "Boss.agent:4:13: error: bad verb name `Run-it`: expected a lowercase letter then lowercase letters, digits or `_` (at most 64)\n",
        ),
        (
            "name starting with a digit",
            format!("    - name: 1run\n{GOOD_IN}{GOOD_OUT}"),
            "Boss.agent:4:13: error: bad verb name `1run`: expected a lowercase letter then lowercase letters, digits or `_` (at most 64)\n",
        ),
        (
            "duplicate name",
            format!("    - name: run\n{GOOD_IN}{GOOD_OUT}    - name: run\n{GOOD_IN}{GOOD_OUT}"),
            "Boss.agent:7:13: error: verb `run` is declared twice\n",
        ),
        (
            "missing name",
            format!("    - description: x\n{GOOD_IN}{GOOD_OUT}"),
            "Boss.agent:4:7: error: a verb needs a `name`\n",
        ),
        (
            "missing output",
            format!("    - name: run\n{GOOD_IN}"),
            "Boss.agent:4:13: error: verb `run` needs an `output` schema\n",
        ),
        (
            "schema not a mapping",
            format!("    - name: run\n      input: 3\n{GOOD_OUT}"),
            "Boss.agent:5:14: error: the verb's `input` must be a JSON Schema (a mapping), found a number\n",
        ),
        (
            "schema that does not compile, deep inside",
            format!(
                "    - name: run\n{GOOD_IN}      output:\n        type: object\n        properties:\n          n: {{type: integr}}\n"
            ),
            "",
        ),
        (
            "verbs not a list",
            "    run: 1\n".to_owned(),
            "Boss.agent:4:5: error: `verbs` must be a list of verbs, found a mapping\n",
        ),
    ];
    let mut failures = Vec::new();
    for (what, verbs, want) in cases {
        let got = diags(&agent(verbs));
        let ok = if want.is_empty() {
            // The schema error's text is the validator's: check the
            // position and the prefix only.
            got.starts_with("Boss.agent:9:21: error: the verb's `output` is not a valid JSON Schema (2020-12): ")
                && got.lines().count() == 1
        } else {
            got == *want
        };
        if !ok {
            failures.push(format!("{what}:\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn good_verbs_compile_into_the_model_in_source_order() {
    let text = agent(
        "    - name: summarise\n      description: Summarise a text\n      input:\n        type: object\n        required: [text]\n        properties:\n          text: {type: string}\n      output:\n        type: object\n        required: [summary]\n        properties:\n          summary: {type: string, maxLength: 200}\n    - name: ping\n      input: true\n      output: {type: string}\n",
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("A.agency"), AGENCY).expect("write");
    std::fs::write(tmp.path().join("Boss.agent"), text).expect("write");
    let c = compile(tmp.path()).expect("compiles");
    let boss = c
        .model
        .agents
        .iter()
        .find(|a| a.name == "Boss")
        .expect("Boss");
    let v = serde_json::to_value(&boss.verbs).expect("json");
    assert_eq!(
        v,
        json!([
            { "name": "summarise", "description": "Summarise a text",
              "input": { "type": "object", "required": ["text"], "properties": { "text": { "type": "string" } } },
              "output": { "type": "object", "required": ["summary"], "properties": { "summary": { "type": "string", "maxLength": 200 } } } },
            { "name": "ping", "input": true, "output": { "type": "string" } }
        ])
    );
}

#[test]
fn agents_without_verbs_serialise_as_before() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("A.agency"), AGENCY).expect("write");
    std::fs::write(tmp.path().join("Boss.agent"), "# Boss\n").expect("write");
    let c = compile(tmp.path()).expect("compiles");
    let json = agency_org::to_json(&c.model);
    assert!(!json.contains("verbs"), "{json}");
}

#[test]
fn agents_json_declares_verbs_under_agency() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        tmp.path().join("agents.json"),
        r#"{"agents": {"main": {"name": "Main", "agency": {"verbs": [
            {"name": "add", "input": {"type": "object"}, "output": {"type": "integer"}}]}},
           "bad": {"agency": {"verbs": [{"name": "x", "input": {"type": 5}, "output": {}}]}}}}"#,
    )
    .expect("write");
    let got = match compile(tmp.path()) {
        Ok(_) => "ok".to_owned(),
        Err(e) => e.diagnostics.iter().map(|d| format!("{d}\n")).collect(),
    };
    assert!(
        got.starts_with("agents.json:3:73: error: the verb's `input` is not a valid JSON Schema"),
        "{got}"
    );
    std::fs::write(
        tmp.path().join("agents.json"),
        r#"{"agents": {"main": {"agency": {"verbs": [{"name": "add", "input": {"type": "object"}, "output": {"type": "integer"}}]}}}}"#,
    )
    .expect("write");
    let c = compile(tmp.path()).expect("compiles");
    assert_eq!(c.model.agents[0].verbs[0].name, "add");
    assert_eq!(
        c.model.agents[0].verbs[0].output,
        json!({"type": "integer"})
    );
}

#[test]
fn agency_schema_covers_verbs() {
    let model = agency_org::model_schema();
    let verb = &model["$defs"]["Verb"];
    assert_eq!(
        verb["required"],
        json!(["name", "input", "output"]),
        "{verb}"
    );
    let fields = agency_org::schema::agent_fields();
    let item = &fields["properties"]["verbs"]["items"];
    assert_eq!(item["required"], json!(["name", "input", "output"]));
    assert_eq!(item["additionalProperties"], json!(false));
}
