//! Issue 11 item 7: in both runtimes, under the default policy, an agent's
//! harmless shell command runs while a destructive one becomes an approval
//! request and does not run. Claude Code (the real CLI) is checked through
//! the `PreToolUse` hook the daemon configures; the built-in runtime asks
//! the daemon before each workspace tool. Both against the scripted model
//! server and a real `agency serve`.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::path::Path;
use std::time::Duration;

use agent_story::{BIN, Story, claude_bin, json, transcript};
use serde_json::Value;

/// The root's run: mail, a harmless command, a destructive one, the reply.
fn script(shell_tool: &str, victim: &Path) -> String {
    let risky = format!("rm -rf {}", victim.display());
    format!(
        r#"{{
  "scenarios": [{{
    "name": "root",
    "match": {{ "system_contains": "Help the user accomplish all their work" }},
    "turns": [
      {{ "tool_calls": [ {{ "name": "mail_inbox", "input": {{}} }} ] }},
      {{ "tool_calls": [ {{ "name": "mail_ack", "input": {{ "messages": ["{{{{result:/messages/0/id}}}}"] }} }} ] }},
      {{ "tool_calls": [ {{ "name": "{shell_tool}", "input": {{ "command": "echo harmless-ran-$((40 + 2))" }} }} ] }},
      {{ "tool_calls": [ {{ "name": "{shell_tool}", "input": {{ "command": {risky:?} }} }} ] }},
      {{ "tool_calls": [ {{ "name": "kb_create", "input": {{ "description": "Composting guide", "content": "Greens and browns, kept moist." }} }} ] }},
      {{ "tool_calls": [ {{ "name": "mail_send", "input": {{ "to": "boss", "file": "{{{{result:/file}}}}", "subject": "Your composting guide" }} }} ] }},
      {{ "tool_calls": [ {{ "name": "audit_submit", "input": {{ "summary": "Wrote the guide and sent it to the user." }} }} ] }},
      {{ "text": "Done." }}
    ]
  }}],
  "fallback": {{ "text": "ok" }}
}}"#
    )
}

/// The one pending request: its tool and command.
fn the_request(home: &Path) -> (String, String) {
    let v = json(home, &["approvals"]);
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    let args: Value = serde_json::from_str(rows[0]["args"].as_str().unwrap()).unwrap();
    (
        rows[0]["tool"].as_str().unwrap().to_owned(),
        args["command"].as_str().unwrap().to_owned(),
    )
}

/// Issue 30: the shell tool's events, `(kind, ok, args_digest)` in log
/// order: each call admitted (or not) at its check, and the one that ran
/// reported ended by the runtime with the same digest.
fn shell_events(home: &Path, tool: &str) -> Vec<(String, bool, String)> {
    let (code, out, err) =
        agent_story::agency(home, &["--json", "watch", "--no-follow", "--kind", "tool"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["data"]["tool"] == tool)
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["data"]["ok"].as_bool().unwrap(),
                e["data"]["args_digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn assert_shell_events(home: &Path, tool: &str) {
    // A tool.ended is committed in the batch after the call: wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let ev = loop {
        let ev = shell_events(home, tool);
        if ev.iter().any(|e| e.0 == "tool.ended") || std::time::Instant::now() > deadline {
            break ev;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let kinds: Vec<(&str, bool)> = ev.iter().map(|e| (e.0.as_str(), e.1)).collect();
    assert_eq!(
        kinds,
        [
            ("tool.called", true),
            ("tool.ended", true),
            ("tool.called", false)
        ],
        "{ev:?}"
    );
    assert_eq!(ev[0].2, ev[1].2, "the end pairs with its admission");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item7_claude_code_bash_destructive_asks_harmless_runs() {
    let claude = std::fs::canonicalize(claude_bin()).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("precious");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("data"), "keep me").unwrap();
    let script = agency_testkit::Script::from_json(&script("Bash", &victim)).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"claude-code\"\nsandbox = \"off\"\nagency_program = {BIN:?}\n[agents.claude_code]\nprogram = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n[agents.claude_code.env]\nANTHROPIC_BASE_URL = {:?}\nANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n",
        claude.to_str().unwrap(),
        model.base_url()
    );
    // The default policy (no policy.toml).
    let story = Story::start_with_policy(&cfg, Duration::from_secs(120), None).await;
    let (_reply, agent) = story.ask_and_wait().await;
    assert!(victim.join("data").exists(), "the destructive command ran");
    let (tool, command) = the_request(&story.home);
    assert_eq!(tool, "claude:Bash");
    assert_eq!(command, format!("rm -rf {}", victim.display()));
    let raw = transcript(&story.home, agent["id"].as_str().unwrap());
    assert!(
        raw.contains("harmless-ran-42"),
        "the harmless command did not run:\n{raw}"
    );
    assert!(raw.contains("pending approval"), "{raw}");
    assert_shell_events(&story.home, "claude:Bash");
    story.stop();
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item7_builtin_bash_destructive_asks_harmless_runs() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("precious");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("data"), "keep me").unwrap();
    let script = agency_testkit::Script::from_json(&script("bash", &victim)).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nsandbox = \"off\"\nagency_program = {BIN:?}\n\
         [agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 30\n\
         tools = [\"bash\"]\n",
        model.base_url()
    );
    let story = Story::start_with_policy(&cfg, Duration::from_secs(120), None).await;
    let (_reply, agent) = story.ask_and_wait().await;
    assert!(victim.join("data").exists(), "the destructive command ran");
    let (tool, command) = the_request(&story.home);
    assert_eq!(tool, "bash");
    assert_eq!(command, format!("rm -rf {}", victim.display()));
    let text = transcript(&story.home, agent["id"].as_str().unwrap());
    assert!(text.contains("harmless-ran-42"), "{text}");
    assert!(text.contains("pending approval"), "{text}");
    assert_shell_events(&story.home, "bash");
    story.stop();
    model.shutdown().await;
}
