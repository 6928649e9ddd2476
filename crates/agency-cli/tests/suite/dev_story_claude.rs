//! Issue 10 items 1 and 7, with the real Claude Code CLI (offline, against
//! the scripted model server): an agent does development work with Claude
//! Code's own tools. It clones a repo from Agency's cache (`repo_clone`),
//! reads and fixes a bug with `Read` and `Edit`, runs the repo's test
//! script and commits with `Bash`, and has the daemon push its branch
//! (`repo_push`); the test then looks at the origin repository from
//! outside. A second story is the attack: an agent whose configuration
//! gives it only `Read` tries the tools it was not given.
//!
//! The CLI is found through `AGENCY_CLAUDE_BIN`; without it these tests
//! fail, they are never skipped.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::git_repo;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use agent_story::{Story, agency, claude_bin, json, transcript};
use git_repo::{bare_origin, git};
use serde_json::Value;

/// The root's run. Paths are relative to the workspace (Claude Code's
/// working directory) and no command `cd`s: Claude Code keeps a `cd` for
/// the next command and for its file tools' relative paths. `Edit` needs a
/// `Read` of the file first (Claude Code refuses to edit a file unseen).
const FIX_SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "root",
    "match": { "system_contains": "Help the user accomplish all their work" },
    "turns": [
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
      { "tool_calls": [ { "name": "repo_clone", "input": { "name": "calc", "dest": "calc" } } ] },
      { "tool_calls": [ { "name": "Read", "input": { "file_path": "calc/add.sh" } } ] },
      { "tool_calls": [ { "name": "Edit", "input": { "file_path": "calc/add.sh", "old_string": "$1 - $2", "new_string": "$1 + $2" } } ] },
      { "tool_calls": [ { "name": "Bash", "input": { "command": "sh calc/test.sh", "description": "Run the repo's tests" } } ] },
      { "tool_calls": [ { "name": "Bash", "input": { "command": "git -C calc switch -q -c fix/add && git -C calc -c user.name=Agent -c user.email=agent@example.invalid commit -q -am 'Fix add: it subtracted' && git -C calc rev-parse HEAD", "description": "Commit the fix on a branch" } } ] },
      { "comment": "issue 10 item 6: escape attempts from Claude Code's Bash (the workspace is HOME/run/ID/workspace)",
        "tool_calls": [ { "name": "Bash", "input": { "command": "cat ../../../admin.token; head -c 16 ../../../agency.db; ls ../..; (echo hello > /dev/tcp/127.0.0.1/@PORT@) && echo reached the listener; echo attempts done", "description": "Try to leave the sandbox" } } ] },
      { "tool_calls": [ { "name": "repo_push", "input": { "repo": "calc", "path": "calc", "branch": "fix/add" } } ] },
      { "tool_calls": [ { "name": "audit_submit", "input": { "summary": "Fixed add in calc; tests pass; pushed {{result:/ref}}." } } ] },
      { "text": "Done: add is fixed." }
    ]
  }],
  "fallback": { "text": "ok" }
}"#;

/// The buggy repository: `add` subtracts, and `test.sh` (runnable from
/// anywhere) says so.
const ADD_SH: &str = "add() { echo $(($1 - $2)); }\n";
const TEST_SH: &str = r#"cd "$(dirname "$0")" || exit 1
. ./add.sh
got=$(add 2 3)
if [ "$got" = 5 ]; then echo "ok: add 2 3 = 5"; else echo "FAIL: add 2 3 = $got"; exit 1; fi
"#;

/// `agency.toml` for Claude Code against the model server, with `extra`
/// appended to `[agents.claude_code]`.
fn claude_config(model_url: &str, extra: &str) -> String {
    let claude = std::fs::canonicalize(claude_bin()).unwrap();
    format!(
        "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = {:?}\nmodel = \"scripted\"\nmax_turns = 30\n{extra}[agents.claude_code.env]\nANTHROPIC_BASE_URL = {model_url:?}\nANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n",
        claude.to_str().unwrap(),
    )
}

/// One tool call of a run, read back from its stream-json transcript.
#[derive(Debug)]
struct Call {
    name: String,
    input: Value,
    /// The result's text (text blocks joined).
    result: String,
    is_error: bool,
}

/// The tool calls of a run in order, each with its result.
fn tool_calls(home: &Path, agent: &str) -> Vec<Call> {
    let raw = transcript(home, agent);
    let mut calls = Vec::new();
    let mut by_id = HashMap::new();
    for line in raw.lines() {
        let Ok(ev) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        for block in ev["message"]["content"].as_array().into_iter().flatten() {
            match (ev["type"].as_str(), block["type"].as_str()) {
                (Some("assistant"), Some("tool_use")) => {
                    by_id.insert(block["id"].as_str().unwrap().to_owned(), calls.len());
                    calls.push(Call {
                        name: block["name"].as_str().unwrap().to_owned(),
                        input: block["input"].clone(),
                        result: String::new(),
                        is_error: false,
                    });
                }
                (Some("user"), Some("tool_result")) => {
                    let call = &mut calls[by_id[block["tool_use_id"].as_str().unwrap()]];
                    call.is_error = block["is_error"].as_bool().unwrap_or(false);
                    call.result = match &block["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n"),
                        other => other.to_string(),
                    };
                }
                _ => {}
            }
        }
    }
    calls
}

/// The root's agent once it has ended (by `deadline`), and its tool calls.
async fn ended_run(story: &Story, deadline: Instant) -> (Value, Vec<Call>) {
    let agent = story.wait_for_the_agent(deadline).await;
    let calls = tool_calls(&story.home, agent["id"].as_str().unwrap());
    (agent, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_fixes_a_bug_runs_the_tests_commits_and_pushes() {
    // A loopback server that is not the daemon's: the agent must not reach it.
    let outsider = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    outsider.set_nonblocking(true).unwrap();
    let port = outsider.local_addr().unwrap().port().to_string();
    let script = agency_testkit::Script::from_json(&FIX_SCRIPT.replace("@PORT@", &port)).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let repos = tempfile::tempdir().unwrap();
    let origin = bare_origin(
        repos.path(),
        &[("add.sh", ADD_SH), ("test.sh", TEST_SH)],
        "add, with a bug",
    );
    let cfg = format!(
        "{}[repos]\ncalc = {:?}\n",
        claude_config(&model.base_url(), ""),
        origin.to_str().unwrap()
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let story = Story::start(&cfg, Duration::from_secs(120)).await;
    let root = json(&story.home, &["handlers"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = agency(&story.home, &["grant", &root, "repo:calc", "write"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = agency(
        &story.home,
        &["send", "add in calc is broken; please fix it"],
    );
    assert_eq!(code, 0, "{err}");

    let (agent, calls) = ended_run(&story, deadline).await;
    assert_eq!(agent["end_reason"], "completed", "{agent}");
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mcp__agency__mail_inbox",
            "mcp__agency__mail_ack",
            "mcp__agency__repo_clone",
            "Read",
            "Edit",
            "Bash",
            "Bash",
            "Bash",
            "mcp__agency__repo_push",
            "mcp__agency__audit_submit",
        ],
        "{calls:#?}"
    );
    for c in &calls {
        assert!(!c.is_error, "{c:#?}");
    }
    let [_, _, clone, read, edit, test, commit, escape, push, _] = &calls[..] else {
        unreachable!()
    };
    // Issue 10 item 6, from Claude Code's own Bash: the home's token,
    // database and run directories cannot be read, and a loopback port
    // that is not the daemon's cannot be reached.
    for denied in [
        "admin.token: Permission denied",
        "agency.db' for reading: Permission denied",
        "'../..': Permission denied",
        "connect: Permission denied",
    ] {
        assert!(escape.result.contains(denied), "{denied} in {escape:#?}");
    }
    assert!(
        !escape.result.contains("reached the listener"),
        "{escape:#?}"
    );
    assert!(
        matches!(outsider.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the agent reached a loopback port that is not the daemon's"
    );
    let token = std::fs::read_to_string(story.home.join("admin.token")).unwrap();
    assert!(!escape.result.contains(token.trim()), "{escape:#?}");
    assert!(clone.result.contains("\"repo\":\"calc\""), "{clone:#?}");
    assert!(read.result.contains("$1 - $2"), "{read:#?}");
    assert!(edit.result.contains("updated successfully"), "{edit:#?}");
    assert_eq!(test.result.trim(), "ok: add 2 3 = 5", "{test:#?}");
    let head = commit.result.trim().to_owned();
    assert!(
        head.len() == 40 && head.chars().all(|c| c.is_ascii_hexdigit()),
        "{commit:#?}"
    );
    assert_eq!(
        commit.input["command"].as_str().unwrap().split(' ').next(),
        Some("git")
    );

    // From outside: the origin has the agent's commit under the root
    // handler's prefix, with the fix; its main still has the bug.
    let pushed_ref = format!("refs/heads/agency/{root}/fix/add");
    assert!(push.result.contains(&pushed_ref), "{push:#?}");
    assert_eq!(git(&origin, &["rev-parse", &pushed_ref]).trim(), head);
    assert_eq!(
        git(&origin, &["show", &format!("{pushed_ref}:add.sh")]),
        ADD_SH.replace("$1 - $2", "$1 + $2")
    );
    assert_eq!(
        git(
            &origin,
            &["log", "-1", "--format=%an <%ae> %s", &pushed_ref]
        )
        .trim(),
        "Agent <agent@example.invalid> Fix add: it subtracted"
    );
    assert_eq!(git(&origin, &["show", "main:add.sh"]), ADD_SH);
    // The user sees the push in the handler's audit log.
    let (code, audit, err) = agency(&story.home, &["audit", &root]);
    assert_eq!(code, 0, "{err}");
    assert!(
        audit.contains(&format!("(commit {head}) to {pushed_ref}")),
        "{audit}"
    );

    // Claude Code was offered its developer tools next to Agency's, and
    // not the web or sub-agents.
    let requests = model.requests();
    let first = requests
        .iter()
        .find(|r| r.scenario.as_deref() == Some("root"))
        .unwrap();
    for t in [
        "Read",
        "Edit",
        "Bash",
        "Write",
        "Glob",
        "Grep",
        "mcp__agency__repo_clone",
    ] {
        assert!(first.tools.iter().any(|o| o == t), "{t}: {:?}", first.tools);
    }
    for t in ["WebFetch", "WebSearch", "Task", "Agent"] {
        assert!(
            !first.tools.iter().any(|o| o == t),
            "{t}: {:?}",
            first.tools
        );
    }
    story.stop();
    model.shutdown().await;
}

/// The attack (issue 10 item 1): an agent configured with `Read` only is
/// made (by a prompt injection, say) to call the tools it was not given:
/// `Write`, `Bash`, `WebFetch` and `Task`. Each is refused, none is offered
/// to the model, and the file `Write` and `Bash` aim at is never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_outside_the_configured_list_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("planted");
    let script = format!(
        r#"{{
  "scenarios": [{{
    "name": "root",
    "match": {{ "system_contains": "Help the user accomplish all their work" }},
    "turns": [
      {{ "tool_calls": [ {{ "name": "mail_inbox", "input": {{}} }} ] }},
      {{ "tool_calls": [ {{ "name": "mail_ack", "input": {{ "messages": ["{{{{result:/messages/0/id}}}}"] }} }} ] }},
      {{ "tool_calls": [ {{ "name": "Write", "input": {{ "file_path": {t:?}, "content": "written" }} }} ] }},
      {{ "tool_calls": [ {{ "name": "Bash", "input": {{ "command": "echo ran > {t}", "description": "x" }} }} ] }},
      {{ "tool_calls": [ {{ "name": "WebFetch", "input": {{ "url": "http://127.0.0.1:9/", "prompt": "x" }} }} ] }},
      {{ "tool_calls": [ {{ "name": "Task", "input": {{ "description": "x", "prompt": "write {t}", "subagent_type": "general-purpose" }} }} ] }},
      {{ "tool_calls": [ {{ "name": "Read", "input": {{ "file_path": "/etc/hostname" }} }} ] }},
      {{ "text": "Done." }}
    ]
  }}],
  "fallback": {{ "text": "ok" }}
}}"#,
        t = target.to_str().unwrap()
    );
    let model =
        agency_testkit::ModelServer::start(agency_testkit::Script::from_json(&script).unwrap())
            .await
            .unwrap();
    let cfg = claude_config(&model.base_url(), "tools = [\"Read\"]\n");
    let deadline = Instant::now() + Duration::from_secs(120);
    let story = Story::start(&cfg, Duration::from_secs(120)).await;
    let (code, _, err) = agency(&story.home, &["send", "hello"]);
    assert_eq!(code, 0, "{err}");
    let (_, calls) = ended_run(&story, deadline).await;
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mcp__agency__mail_inbox",
            "mcp__agency__mail_ack",
            "Write",
            "Bash",
            "WebFetch",
            "Task",
            "Read"
        ],
        "{calls:#?}"
    );
    for c in &calls[2..6] {
        assert!(c.is_error, "{c:#?}");
        assert!(
            c.result
                .contains(&format!("No such tool available: {}", c.name)),
            "{c:#?}"
        );
    }
    // The one tool it was given works.
    assert!(!calls[6].is_error, "{:#?}", calls[6]);
    assert!(
        !target.exists(),
        "a refused tool wrote {}",
        target.display()
    );
    let requests = model.requests();
    let offered = &requests
        .iter()
        .find(|r| r.scenario.as_deref() == Some("root"))
        .unwrap()
        .tools;
    assert!(offered.iter().any(|t| t == "Read"), "{offered:?}");
    assert!(
        offered
            .iter()
            .all(|t| t == "Read" || t.starts_with("mcp__agency__")),
        "{offered:?}"
    );
    story.stop();
    model.shutdown().await;
}
