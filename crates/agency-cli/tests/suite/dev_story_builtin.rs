//! Development work with the built-in runtime, offline (issue 10 item 7):
//! the real `agency serve` runs `agency agent` for the root handler against
//! `agency model-server`. The scripted agent clones a repo from the cache,
//! runs its test (which fails), fixes the bug with `edit_file`, runs the
//! test again with `bash` (it passes), commits, and has the daemon push
//! its branch with `repo_push`. The test then reads the pushed branch in
//! the origin repository from outside.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::git_repo;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_story::{BIN, Story, agency, json, transcript};
use git_repo::{bare_origin, git};
use serde_json::Value;

/// The root's run, one tool call per turn.
const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "fix calc",
    "match": { "system_contains": "Help the user accomplish all their work" },
    "turns": [
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
      { "tool_calls": [ { "name": "repo_clone", "input": { "name": "calc", "dest": "calc" } } ] },
      { "comment": "the test fails: add.sh subtracts",
        "tool_calls": [ { "name": "bash", "input": { "command": "cd calc && sh test.sh" } } ] },
      { "tool_calls": [ { "name": "read_file", "input": { "path": "calc/add.sh" } } ] },
      { "tool_calls": [ { "name": "edit_file", "input": { "path": "calc/add.sh", "old_string": "$(($1 - $2))", "new_string": "$(($1 + $2))" } } ] },
      { "tool_calls": [ { "name": "bash", "input": { "command": "cd calc && sh test.sh" } } ] },
      { "tool_calls": [ { "name": "bash", "input": { "command": "cd calc && git checkout -q -b fix-add && git -c user.name=Agent -c user.email=agent@agency.invalid commit -q -am 'Fix add: plus, not minus' && git log --format=%s -1" } } ] },
      { "comment": "what a command can see of the agent's environment",
        "tool_calls": [ { "name": "bash", "input": { "command": "env | cut -d= -f1 | sort" } } ] },
      { "comment": "issue 10 item 6: escape attempts from the agent's own tools (the workspace is HOME/run/ID/workspace)",
        "tool_calls": [ { "name": "bash", "input": { "command": "cat ../../../admin.token; head -c 16 ../../../agency.db; ls ../..; echo planted > ../../../planted; (echo hello > /dev/tcp/127.0.0.1/@PORT@) && echo reached the listener; echo attempts done" } } ] },
      { "tool_calls": [ { "name": "read_file", "input": { "path": "../../../admin.token" } } ] },
      { "tool_calls": [ { "name": "repo_push", "input": { "repo": "calc", "path": "calc", "branch": "fix-add" } } ] },
      { "tool_calls": [ { "name": "kb_create", "input": { "description": "Calc fix", "content": "Pushed {{result:/ref}}" } } ] },
      { "tool_calls": [ { "name": "mail_send", "input": { "to": "boss", "file": "{{result:/file}}", "subject": "Fixed calc" } } ] },
      { "tool_calls": [ { "name": "audit_submit", "input": { "summary": "Fixed add.sh in calc; test.sh passes; pushed branch fix-add." } } ] },
      { "text": "Done." }
    ]
  }],
  "fallback": { "text": "ok" }
}"#;

const ADD_SH: &str = "#!/bin/sh\n# Prints the sum of its two arguments.\necho $(($1 - $2))\n";

const TEST_SH: &str = "#!/bin/sh\n# add.sh must add.\ngot=$(sh add.sh 2 3)\nif [ \"$got\" = 5 ]; then echo \"PASS: 2 + 3 = $got\"; else echo \"FAIL: 2 + 3 gave $got, want 5\"; exit 1; fi\n";

/// `agency model-server --script FILE`, and the URL it prints.
fn model_server(script: &Path) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(["model-server", "--script"])
        .arg(script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    (child, url.trim().to_owned())
}

/// The results of the calls to one tool, in order.
fn results<'a>(events: &'a [Value], tool: &str) -> Vec<&'a str> {
    events
        .iter()
        .filter(|e| e["event"] == "tool_result" && e["name"] == tool)
        .map(|e| e["content"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builtin_agent_fixes_a_bug_tests_commits_and_pushes() {
    let fixtures = tempfile::tempdir().unwrap();
    let origin = bare_origin(
        fixtures.path(),
        &[("add.sh", ADD_SH), ("test.sh", TEST_SH)],
        "Add add.sh and its test",
    );
    // A loopback server that is not the daemon's: the agent must not reach it.
    let outsider = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    outsider.set_nonblocking(true).unwrap();
    let script = fixtures.path().join("script.json");
    let port = outsider.local_addr().unwrap().port().to_string();
    std::fs::write(&script, SCRIPT.replace("@PORT@", &port)).unwrap();
    let (mut model, url) = model_server(&script);
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n\
         [agents.builtin]\napi = \"anthropic\"\nbase_url = {url:?}\nmodel = \"scripted\"\nmax_turns = 30\n\
         tools = [\"bash\", \"read_file\", \"edit_file\"]\n\
         [repos]\ncalc = {:?}\n",
        origin.display().to_string()
    );
    let story = Story::start(&cfg, Duration::from_secs(120)).await;
    let root = json(&story.home, &["handlers"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Write on the repo: clone and push.
    let (code, _, err) = agency(&story.home, &["grant", &root, "repo:calc", "write"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = agency(&story.home, &["send", "calc's test fails: please fix it"]);
    assert_eq!(code, 0, "{err}");

    let agent = story
        .wait_for_the_agent(Instant::now() + Duration::from_secs(120))
        .await;
    let raw = transcript(&story.home, agent["id"].as_str().unwrap());
    let events: Vec<Value> = raw
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();

    // Only the configured workspace tools were offered.
    let offered: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "workspace_tools")
        .collect();
    assert_eq!(
        offered[0]["tools"],
        serde_json::json!(["bash", "read_file", "edit_file"])
    );
    // Failing test, the fix, passing test, the commit.
    let bash = results(&events, "bash");
    assert_eq!(bash[0], "FAIL: 2 + 3 gave -1, want 5\n[exit code 1]");
    assert_eq!(
        results(&events, "read_file")[..1],
        [
            "     1\t#!/bin/sh\n     2\t# Prints the sum of its two arguments.\n     3\techo $(($1 - $2))\n"
        ]
    );
    assert_eq!(
        results(&events, "edit_file"),
        ["edited calc/add.sh: replaced 1 occurrence"]
    );
    assert_eq!(bash[1], "PASS: 2 + 3 = 5\n[exit code 0]");
    assert_eq!(bash[2], "Fix add: plus, not minus\n[exit code 0]");
    // Commands do not see the agent's MCP token (the reaper's mark stays).
    let names: Vec<&str> = bash[3].lines().collect();
    assert!(names.contains(&"AGENCY_AGENT"), "{names:?}");
    assert!(!names.contains(&"AGENCY_TOKEN"), "{names:?}");
    // Issue 10 item 6, from the built-in runtime's own tools: the home's
    // token, database and run directories cannot be read, nothing can be
    // written outside the workspace, and a loopback port that is not the
    // daemon's cannot be reached.
    let attempts = bash[4];
    for denied in [
        "admin.token: Permission denied",
        "agency.db' for reading: Permission denied",
        "'../..': Permission denied",
        "planted: Permission denied",
        "connect: Permission denied",
    ] {
        assert!(attempts.contains(denied), "{denied} in {attempts}");
    }
    assert!(!attempts.contains("reached the listener"), "{attempts}");
    assert!(attempts.contains("attempts done"), "{attempts}");
    assert!(
        matches!(outsider.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the agent reached a loopback port that is not the daemon's"
    );
    assert!(!story.home.join("planted").exists());
    let token = std::fs::read_to_string(story.home.join("admin.token")).unwrap();
    assert!(
        !raw.contains(token.trim()),
        "the admin token reached the transcript"
    );
    let read = results(&events, "read_file");
    assert_eq!(read.len(), 2, "{read:?}");
    assert!(read[1].contains("Permission denied"), "{}", read[1]);

    // The daemon pushed the branch under the root's prefix.
    let pushed: Value = serde_json::from_str(results(&events, "repo_push")[0]).unwrap();
    let remote_ref = pushed["ref"].as_str().unwrap();
    assert_eq!(remote_ref, format!("refs/heads/agency/{root}/fix-add"));
    let log = git(&origin, &["log", "--format=%s", remote_ref]);
    assert_eq!(log, "Fix add: plus, not minus\nAdd add.sh and its test\n");
    assert_eq!(
        git(&origin, &["show", &format!("{remote_ref}:add.sh")]),
        ADD_SH.replace("$1 - $2", "$1 + $2")
    );
    assert_eq!(
        pushed["commit"],
        git(&origin, &["rev-parse", remote_ref]).trim()
    );
    // main is untouched.
    assert_eq!(git(&origin, &["show", "main:add.sh"]), ADD_SH);
    // The user sees the push in the root's audit log.
    let audit = json(&story.home, &["audit", &root[..8]]);
    let commit = pushed["commit"].as_str().unwrap();
    assert!(
        audit.as_array().unwrap().iter().any(|e| e["summary"]
            == format!(
                "repo push: branch fix-add of repo calc (commit {commit}) to {remote_ref} on the repo's origin"
            )),
        "{audit}"
    );
    // … and in the run's own record.
    let (code, run, err) = agency(&story.home, &["run", agent["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        run.contains("pushed") && run.contains(&format!("(commit {commit}) to {remote_ref}")),
        "{run}"
    );
    let view = json(&story.home, &["run", agent["id"].as_str().unwrap()]);
    assert_eq!(view["pushes"].as_array().unwrap().len(), 1, "{view}");
    assert_eq!(agent["end_reason"], "completed");
    let inbox = json(&story.home, &["inbox"]);
    let report = inbox
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["subject"] == "Fixed calc")
        .unwrap();
    assert_eq!(report["body"], format!("Pushed {remote_ref}"));

    story.stop();
    let _ = model.kill();
    let _ = model.wait();
}
