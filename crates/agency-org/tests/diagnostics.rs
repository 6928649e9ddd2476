//! Malformed sources: each gives the diagnostics expected, at file:line:col,
//! and a folder with many problems reports all of them in one run.

use agency_org::compile;

const AGENCY: &str = "# Agency Name: A\n## Executive Agent\nThe executive agent is Boss.\n";
const BOSS: &str = "# Agent Name: Boss\n## Static Memory\nYou lead.\n";

/// Compile a folder made of `files` (path, text) and return every
/// diagnostic, one per line.
fn diags(files: &[(&str, &str)]) -> String {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let p = tmp.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    match compile(tmp.path()) {
        Ok(c) => {
            c.warnings
                .iter()
                .map(|d| format!("{d}\n"))
                .collect::<String>()
                + "ok"
        }
        Err(e) => e.diagnostics.iter().map(|d| format!("{d}\n")).collect(),
    }
}

fn with(extra: &[(&str, &str)]) -> String {
    let mut files = vec![("A.agency", AGENCY), ("Boss.agent", BOSS)];
    files.extend_from_slice(extra);
    diags(&files)
}
// CASES

#[test]
fn unknown_agency_key_with_did_you_mean() {
    assert_eq!(
        with(&[("W.agent", "---\nagency:\n  runtim: builtin\n---\n# W\n")]),
        r#"W.agent:3:3: error: unknown key `runtim` in `agency:`; did you mean `runtime`?
"#
    );
}

#[test]
fn misspelt_top_level_agency_key() {
    assert_eq!(
        with(&[("W.agent", "---\nname: W\nagnecy:\n  model: x\n---\nHi\n")]),
        r#"W.agent:3:1: error: unknown key `agnecy`; did you mean `agency`? (Agency's fields go under one `agency:` key)
"#
    );
}

#[test]
fn misspelt_section_heading_is_an_error() {
    assert_eq!(
        with(&[("W.agent", "# W\n## Statik Memory\nx\n")]),
        r#"W.agent:2:4: error: unknown section `Statik Memory`; did you mean `Static Memory`?
"#
    );
}

#[test]
fn unknown_prose_section_is_a_warning() {
    assert_eq!(
        with(&[("W.agent", "# W\n## Notes for humans\nx\n")]),
        r#"W.agent:2:4: warning: section `Notes for humans` is not one Agency reads (Static Memory, Behavior, Behaviour, Tools, Inheritance, Volatile Memory, Connections); its text is kept as static memory
ok"#
    );
}

#[test]
fn unresolved_listed_agent() {
    assert_eq!(
        diags(&[
            (
                "A.agency",
                "# Agency Name: A\n## Executive Agent\nBoss\n## Agents\n- Wether (weather)\n"
            ),
            ("Boss.agent", BOSS),
            ("Weather.agent", "# Weather\n")
        ]),
        r#"A.agency:5:3: error: agent `Wether` is not an agent of this agency (no Wether.agent here); did you mean `Weather`?
Weather.agent:1:3: warning: agent `Weather` is not listed under `## Agents` of A.agency (it is part of the agency all the same)
"#
    );
}

#[test]
fn unresolved_tool() {
    assert_eq!(
        with(&[
            ("W.agent", "# W\n## Tools\n- WeatherTol\n"),
            ("WeatherTool.tool", "# WeatherTool\n- Command: ./w\n")
        ]),
        r#"W.agent:3:3: error: tool `WeatherTol` is not defined (no .tool file or tool script of that name); did you mean `WeatherTool`?
"#
    );
}

#[test]
fn unresolved_connection() {
    assert_eq!(
        with(&[("W.agent", "---\nagency:\n  connections: [Bos]\n---\n# W\n")]),
        r#"W.agent:3:17: error: connection `Bos` is not an agent of this organisation; did you mean `Boss`?
"#
    );
}

#[test]
fn unresolved_parent() {
    assert_eq!(
        with(&[
            ("W.agent", "# W\n## Inheritance\nInherits Bas\n"),
            ("Base.agent", "# Base\n")
        ]),
        r#"W.agent:3:10: error: parent `Bas` is not an agent of this organisation; did you mean `Base`?
"#
    );
}

#[test]
fn unresolved_executive() {
    assert_eq!(
        diags(&[
            (
                "A.agency",
                "# Agency Name: A\n## Executive Agent\nThe executive agent is Bosss.\n"
            ),
            ("Boss.agent", BOSS),
            ("X.agent", "# X\n")
        ]),
        r#"A.agency:3:24: error: executive agent `Bosss` is not an agent of this agency (no Bosss.agent here); did you mean `Boss`?
"#
    );
}

#[test]
fn no_executive_with_two_agents() {
    assert_eq!(
        diags(&[
            ("A.agency", "# Agency Name: A\n"),
            ("Boss.agent", BOSS),
            ("X.agent", "# X\n")
        ]),
        r#"A.agency:1:3: error: agency `A` has no executive agent: say which of its 2 agents receives its messages under `## Executive Agent`
"#
    );
}

#[test]
fn duplicate_agent_across_sub_agencies() {
    assert_eq!(
        with(&[
            ("sub/S.agency", "# Agency Name: S\n"),
            ("sub/Boss.agent", "# Boss\n")
        ]),
        r#"sub/Boss.agent:1:3: error: duplicate agent name `Boss`: already defined at Boss.agent:1 (agent names are unique across the whole tree)
"#
    );
}

#[test]
fn duplicate_tool_names() {
    assert_eq!(
        with(&[
            ("T.tool", "# T\n- Command: ./t\n"),
            ("sub/S.agency", "# S\n"),
            ("sub/Z.agent", "# Z\n"),
            ("sub/T2.tool", "# Tool Name: T\n- Command: ./t\n")
        ]),
        r#"sub/T2.tool:1:3: error: duplicate tool name `T`: already defined at T.tool:1 (tool names are unique across the whole tree)
"#
    );
}

#[test]
fn inheritance_cycle_names_the_chain() {
    assert_eq!(
        with(&[
            ("X.agent", "# X\n## Inheritance\n- Y\n"),
            ("Y.agent", "# Y\n## Inheritance\n- Z\n"),
            ("Z.agent", "# Z\n## Inheritance\n- X\n")
        ]),
        r#"X.agent:3:3: error: inheritance cycle: X -> Y -> Z -> X
"#
    );
}

#[test]
fn self_inheritance_is_a_cycle() {
    assert_eq!(
        with(&[("X.agent", "---\nagency: {inherits: [X]}\n---\n# X\n")]),
        r#"X.agent:2:21: error: inheritance cycle: X -> X
"#
    );
}

#[test]
fn bad_yaml() {
    assert_eq!(
        with(&[("W.agent", "---\nagency:\n  tools: [a, b\n---\n# W\n")]),
        r#"W.agent:4:1: error: invalid YAML: while parsing a flow sequence, expected ',' or ']'
"#
    );
}

#[test]
fn unterminated_frontmatter() {
    assert_eq!(
        with(&[("W.agent", "---\nname: W\n# W\n")]),
        r#"W.agent:1:1: error: the frontmatter opened here is never closed: add a `---` line after it
"#
    );
}

#[test]
fn bad_budget_values() {
    assert_eq!(
        with(&[(
            "W.agent",
            "---\nagency:\n  budget: {usd: lots, tokens: -5, wall_clock: 2 hours, spawn: 3}\n---\n# W\n"
        )]),
        r#"W.agent:3:17: error: bad budget value for `usd`: expected a non-negative number of dollars, found `lots`
W.agent:3:31: error: bad budget value for `tokens`: expected a non-negative whole number, found `-5`
W.agent:3:47: error: bad budget value for `wall_clock`: `2 hours` is not a duration such as 90s, 30m, 2h, 1d or 1h30m
W.agent:3:56: error: unknown key `spawn` in `budget`; did you mean `spawns`?
"#
    );
}

#[test]
fn bad_runtime() {
    assert_eq!(
        with(&[(
            "W.agent",
            "---\nagency:\n  runtime: claude_code\n---\n# W\n"
        )]),
        r#"W.agent:3:12: error: unknown runtime `claude_code`: expected builtin, claude-code or command; did you mean `claude-code`?
"#
    );
}

#[test]
fn tool_narrowing_violation() {
    assert_eq!(
        with(&[
            ("P.agent", "# P\n## Tools\n- T1\n"),
            ("C.agent", "# C\n## Inheritance\n- P\n## Tools\n- T2\n"),
            ("T1.tool", "# T1\n- Command: ./a\n"),
            ("T2.tool", "# T2\n- Command: ./b\n")
        ]),
        r#"C.agent:5:3: error: agent `C` lists tool `T2`, which none of its parents has (they have: T1); inherited tools only narrow: to add a tool, list it under `agency: {tools_add: [T2]}`
"#
    );
}

#[test]
fn two_agency_files() {
    assert_eq!(
        with(&[("B.agency", "# Agency Name: B\n")]),
        r#"B.agency:1:1: error: a folder holds one .agency file, and A.agency is already this folder's
"#
    );
}

#[test]
fn missing_agency_in_subfolder() {
    assert_eq!(
        with(&[("team/X.agent", "# X\n")]),
        r#"team:1:1: error: folder team has agents or tools but no .agency file (or agents.json) to say which agency they belong to
"#
    );
}

#[test]
fn missing_agency_at_root() {
    assert_eq!(
        diags(&[("X.agent", "# X\n")]),
        r#".:1:1: error: the source folder has no .agency file (or agents.json): nothing says which agency this is
"#
    );
}

#[test]
fn agents_json_wrong_types() {
    assert_eq!(
        diags(&[(
            "agents.json",
            "{\"agents\": {\"main\": {\"name\": 3, \"tools\": \"a.py\", \"conections\": []}}}"
        )]),
        r#"agents.json:1:30: error: `name` must be a string, found a number
agents.json:1:42: error: `tools` must be an array of strings, found a string
agents.json:1:50: error: unknown key `conections` in agent `main`; did you mean `connections`?
"#
    );
}

#[test]
fn agents_json_syntax_error() {
    assert_eq!(
        diags(&[(
            "agents.json",
            "{\"agents\": {\n  \"main\": {\"name\": \"M\",}\n}}"
        )]),
        r#"agents.json:2:24: error: invalid JSON: expected a string key, found `}`
"#
    );
}

#[test]
fn agents_json_and_agency_together() {
    assert_eq!(
        with(&[("agents.json", "{\"agents\": {\"main\": {}}}")]),
        r#"agents.json:1:1: error: a folder holds an .agency file or an agents.json, not both (A.agency is this folder's agency)
"#
    );
}

#[test]
fn tool_without_implementation() {
    assert_eq!(
        with(&[("T.tool", "# T\nIt does weather things.\n")]),
        r#"T.tool:1:3: error: tool `T` has no implementation: give `- Base URL:` and `- Endpoint:` (an HTTP API), `- Command:` (a program reading JSON on stdin), `- MCP Command:`/`- MCP URL:`, or frontmatter `type:`
"#
    );
}

#[test]
fn http_tool_missing_endpoint_and_bad_url() {
    assert_eq!(
        with(&[("T.tool", "# T\n- Base URL: ftp://x\n")]),
        r#"T.tool:1:3: error: HTTP tool `T` has no implementation: missing `- Endpoint:` (or `endpoint`)
T.tool:2:13: error: bad base URL `ftp://x`: expected http(s)://HOST[:PORT] with no path (the path goes in the endpoint)
"#
    );
}

#[test]
fn misspelt_tool_detail() {
    assert_eq!(
        with(&[(
            "T.tool",
            "# T\n- Base URL: https://x.example\n- Endpiont: /a\n"
        )]),
        r#"T.tool:1:3: error: HTTP tool `T` has no implementation: missing `- Endpoint:` (or `endpoint`)
T.tool:3:3: error: unknown tool detail `Endpiont`; did you mean `Endpoint`?
"#
    );
}

#[test]
fn bad_field_type() {
    assert_eq!(
        with(&[(
            "T.tool",
            "# T\n- Command: ./t\n- Returns JSON with fields: { \"a\": strng }\n"
        )]),
        r#"T.tool:3:29: error: unknown field type `strng`: expected one of string, number, integer, boolean, object, array; did you mean `string`?
"#
    );
}

#[test]
fn bad_capability_and_replace() {
    assert_eq!(
        with(&[(
            "W.agent",
            "---\nagency:\n  capabilities: [egres:example.com, repo:x=admin]\n  replace: [staticMemmory]\n---\n# W\n"
        )]),
        r#"W.agent:3:18: error: bad capability `egres:example.com`: kind `egres` is not egress, mcp_server or repo; did you mean `egress`?
W.agent:3:37: error: bad capability `repo:x=admin`: level `admin` is not read or write
W.agent:4:13: error: `replace` names `staticMemmory`, which is not a field that inherits by appending (staticMemory, behavior, memory, capabilities, connections); did you mean `staticMemory`?
"#
    );
}

#[test]
fn bad_agent_name() {
    assert_eq!(
        with(&[("W.agent", "# Agent Name: Weather Bot\n")]),
        r#"W.agent:1:15: error: bad agent name `Weather Bot`: use 1-64 ASCII letters, digits, '_', '-' or '.'
"#
    );
}

#[test]
fn unknown_sub_agency() {
    assert_eq!(
        diags(&[
            (
                "A.agency",
                "# Agency Name: A\n## Executive Agent\nBoss\n## Sub-Agencies\n- Sals\n"
            ),
            ("Boss.agent", BOSS),
            ("sales/Sales.agency", "# Sales\n"),
            ("sales/Rep.agent", "# Rep\n")
        ]),
        r#"A.agency:5:3: error: sub-agency `Sals` is not the agency of a subfolder here; did you mean `Sales`?
"#
    );
}

#[test]
fn inheritance_too_deep() {
    assert_eq!(
        with(&[
            ("L0.agent", "# L0\n## Inheritance\n- L1\n"),
            ("L1.agent", "# L1\n## Inheritance\n- L2\n"),
            ("L2.agent", "# L2\n## Inheritance\n- L3\n"),
            ("L3.agent", "# L3\n## Inheritance\n- L4\n"),
            ("L4.agent", "# L4\n## Inheritance\n- L5\n"),
            ("L5.agent", "# L5\n## Inheritance\n- L6\n"),
            ("L6.agent", "# L6\n## Inheritance\n- L7\n"),
            ("L7.agent", "# L7\n## Inheritance\n- L8\n"),
            ("L8.agent", "# L8\n## Inheritance\n- L9\n"),
            ("L9.agent", "# L9\n")
        ]),
        r#"L0.agent:1:3: error: inheritance deeper than 8 levels: L0 -> L1 -> L2 -> L3 -> L4 -> L5 -> L6 -> L7 -> L8 -> L9
"#
    );
}

#[test]
fn every_problem_of_a_folder_is_reported_in_one_run() {
    let out = diags(&[
        (
            "A.agency",
            "# Agency Name: A\n## Executive Agent\nBoss\n## Agnets\n- X\n",
        ),
        (
            "Boss.agent",
            "---\nagency:\n  modle: x\n---\n# Boss\n## Tools\n- Nope\n",
        ),
        (
            "W.agent",
            "---\nagency: {runtime: fast}\n---\n# W\n## Inheritance\n- Ghost\n",
        ),
        ("T.tool", "# T\nNothing to run.\n"),
        ("sub/X.agent", "# X\n"),
    ]);
    assert_eq!(
        out,
        r#"A.agency:4:4: error: unknown section `Agnets`; did you mean `Agents`?
Boss.agent:3:3: error: unknown key `modle` in `agency:`; did you mean `model`?
Boss.agent:7:3: error: tool `Nope` is not defined (no .tool file or tool script of that name)
T.tool:1:3: error: tool `T` has no implementation: give `- Base URL:` and `- Endpoint:` (an HTTP API), `- Command:` (a program reading JSON on stdin), `- MCP Command:`/`- MCP URL:`, or frontmatter `type:`
W.agent:2:19: error: unknown runtime `fast`: expected builtin, claude-code or command
W.agent:6:3: error: parent `Ghost` is not an agent of this organisation
sub:1:1: error: folder sub has agents or tools but no .agency file (or agents.json) to say which agency they belong to
"#
    );
}

#[test]
fn a_symlinked_folder_back_to_an_ancestor_is_a_sub_agency_cycle() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    std::fs::write(root.join("A.agency"), AGENCY).expect("write");
    std::fs::write(root.join("Boss.agent"), BOSS).expect("write");
    std::fs::create_dir(root.join("sub")).expect("mkdir");
    std::fs::write(root.join("sub/S.agency"), "# Agency Name: S\n").expect("write");
    std::fs::write(root.join("sub/Rep.agent"), "# Rep\n").expect("write");
    std::os::unix::fs::symlink(root, root.join("sub/back")).expect("symlink");
    let e = compile(root).expect_err("a cycle");
    let text: Vec<String> = e.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "sub/back:1:1: error: sub-agency cycle: A -> S -> A (folder sub/back leads back to an enclosing agency's folder)"
        ]
    );
}

#[test]
fn an_inherited_agent_gets_its_parents_fields_in_order() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = [
        ("A.agency", AGENCY),
        (
            "Boss.agent",
            "---\nagency:\n  tools_add: [T1]\n---\n# Boss\n## Inheritance\n- P1\n- P2\n## Static Memory\nmine\n",
        ),
        (
            "P1.agent",
            "---\nagency: {model: m1, capabilities: [egress:a.example]}\n---\n# P1\n## Static Memory\none\n## Tools\n- T2\n",
        ),
        (
            "P2.agent",
            "---\nagency: {model: m2}\n---\n# P2\n## Static Memory\ntwo\n## Behavior\n- act\n",
        ),
        (
            "R.agent",
            "---\nagency: {replace: [staticMemory]}\n---\n# R\n## Inheritance\nInherits from P1 and P2.\n## Static Memory\nonly mine\n## Tools\n- T2\n",
        ),
        ("T1.tool", "# T1\n- Command: ./a\n"),
        ("T2.tool", "# T2\n- Command: ./b\n"),
    ];
    for (p, t) in files {
        std::fs::write(tmp.path().join(p), t).expect("write");
    }
    let c = compile(tmp.path()).unwrap_or_else(|e| panic!("{e}"));
    let boss = &c.explanations["Boss"].agent;
    assert_eq!(boss.static_memory, ["one", "two", "mine"]);
    assert_eq!(boss.behavior.on_message, ["act"]);
    assert_eq!(boss.model.as_deref(), Some("m2"), "the last parent's model");
    assert_eq!(boss.tools, ["T2", "T1"]);
    assert_eq!(boss.capabilities, ["egress:a.example=read"]);
    let r = &c.explanations["R"].agent;
    assert_eq!(r.inherits, ["P1", "P2"]);
    assert_eq!(r.static_memory, ["only mine"]);
    assert_eq!(r.tools, ["T2"]);
    let origin = c.explanations["Boss"]
        .fields
        .iter()
        .find(|f| f.field == "model")
        .expect("model origin");
    assert_eq!(
        (origin.from.file.as_str(), origin.from.line),
        ("P2.agent", 2)
    );
}

/// Issue 12 item 4: a tool of type mcp names the server's tool in `tool:`
/// (else its own name) and keeps its `timeout_ms`; a misspelt key is still
/// an error.
#[test]
fn mcp_tool_names_the_servers_tool() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = [
        ("A.agency", AGENCY),
        ("Boss.agent", BOSS),
        (
            "Adder.tool",
            "---\ntype: mcp\ncommand: [python3, server.py]\ntool: add\ntimeout_ms: 2000\n---\n# Adder\n",
        ),
        (
            "Remote.tool",
            "# Remote\n- MCP URL: http://127.0.0.1:9/mcp\n",
        ),
    ];
    for (path, text) in files {
        std::fs::write(tmp.path().join(path), text).expect("write");
    }
    let c = compile(tmp.path()).expect("compiles");
    let mcp = |name: &str| {
        let t = c.model.tools.iter().find(|t| t.name == name).expect("tool");
        match &t.implementation {
            agency_org::ToolImplementation::Mcp(m) => m.clone(),
            other => panic!("{name} is not an mcp tool: {other:?}"),
        }
    };
    let adder = mcp("Adder");
    assert_eq!(adder.tool.as_deref(), Some("add"));
    assert_eq!(adder.timeout_ms, 2000);
    assert_eq!(
        adder.command,
        Some(vec!["python3".to_owned(), "server.py".to_owned()])
    );
    let remote = mcp("Remote");
    assert_eq!(remote.tool, None);
    assert_eq!(remote.url.as_deref(), Some("http://127.0.0.1:9/mcp"));
    assert_eq!(
        with(&[(
            "T.tool",
            "---\ntype: mcp\nurl: http://x\ntoool: add\n---\n# T\n"
        )]),
        "T.tool:4:1: error: unknown key `toool` in a .tool file's frontmatter; did you mean `tool`?\n"
    );
}
