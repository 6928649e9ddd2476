//! Issue 9 item 12 from the command line: `agency runs`, `run`,
//! `transcript` (a replay with control characters made visible, and the
//! raw events with `--json`), `mail status` and `kb audit` against a real
//! `agency serve`, for a run and mail recorded in the home beforehand.

#![allow(clippy::unwrap_used)]

use agency_config::Home;
use agency_core::prompt::PROMPT_VERSION;
use agency_core::{MailTarget, Principal};
use agency_service::{MailBody, RunReport};

use crate::home_cli;

use home_cli::ok;

#[test]
fn issue9_item12_runs_transcripts_receipts_and_access_logs_from_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.init().unwrap();
    let osc52 = "\u{1b}]52;c;ZXZpbA==\u{7}";
    let (root, agent, message, file) = {
        let svc = home.open_service().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        let agent = svc.agent_start(root).unwrap();
        let me = Principal::agent(root, agent);
        svc.agent_record_spawn(agent, "builtin", "hash", PROMPT_VERSION)
            .unwrap();
        let file = svc.kb_create(me, "findings", b"42").unwrap();
        let message = svc
            .mail_send(
                me,
                MailTarget::User,
                &MailBody::Text {
                    subject: Some("report".into()),
                    text: "done".into(),
                },
            )
            .unwrap();
        let transcript = format!(
            "{}\n{}\n",
            serde_json::json!({"event": "tool_call", "name": "kb_read", "input": {"file": file}}),
            serde_json::json!({"event": "model_reply", "text": format!("hi{osc52}"), "stop_reason": "end_turn"})
        );
        svc.agent_finish(
            agent,
            &RunReport {
                reason: "killed".into(),
                normal: false,
                transcript: Some(transcript.into_bytes()),
                ..RunReport::default()
            },
        )
        .unwrap();
        (root, agent, message, file)
    };
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));

    let a8 = &agent.to_string()[..8];
    let runs = ok(&home, &["runs"]);
    assert!(runs.contains(&agent.to_string()), "{runs}");
    assert!(runs.contains("abnormal: killed"), "{runs}");
    let run = ok(&home, &["run", a8]);
    assert!(
        run.contains(&format!("prompt version  {PROMPT_VERSION}")),
        "{run}"
    );
    assert!(run.contains("builtin"), "{run}");

    let replay = ok(&home, &["transcript", a8]);
    assert!(replay.contains("→ kb_read"), "{replay}");
    assert!(
        !replay.contains('\u{1b}') && !replay.contains('\u{7}'),
        "{replay:?}"
    );
    assert!(replay.contains("hi\\u{1b}]52"), "{replay}");
    let raw = ok(&home, &["--json", "transcript", a8]);
    let events: Vec<serde_json::Value> = raw
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1]["text"], format!("hi{osc52}"));

    let receipt = ok(&home, &["mail", "status", &message.to_string()[..8]]);
    assert!(receipt.contains("acknowledged  not yet"), "{receipt}");
    ok(&home, &["inbox", "--ack"]);
    let receipt = ok(&home, &["mail", "status", &message.to_string()]);
    assert!(!receipt.contains("not yet"), "{receipt}");

    let audit = ok(&home, &["kb", "audit", &format!("kb://{file}")]);
    assert!(audit.contains("create"), "{audit}");

    let outcomes = ok(&home, &["outcomes", "--of", &root.to_string()[..8]]);
    assert!(outcomes.contains("Help the user"), "{outcomes}");
    let _ = daemon.kill();
    let _ = daemon.wait();
}

/// Issue 15 (found by the kill -9 suite in CI): `kb log` showed only the
/// first page of a file's versions (1,000), so a file written more often
/// than that lost its newest versions from view. It pages through them all.
#[test]
fn issue_15_kb_log_lists_every_version_past_the_first_page() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.init().unwrap();
    let total: i64 = 1_003;
    let file = {
        let svc = home.open_service().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        let agent = svc.agent_start(root).unwrap();
        let me = Principal::agent(root, agent);
        let file = svc.kb_create(me, "counter", b"1").unwrap();
        let mut base = svc.kb_history(me, file).unwrap().remove(0);
        for n in 2..=total {
            base = svc
                .kb_write(
                    me,
                    file,
                    n.to_string().as_bytes(),
                    base.version,
                    &base.hash.to_string(),
                )
                .unwrap();
        }
        file
    };
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));

    let log = home_cli::json(&home, &["kb", "log", &file.to_string()]);
    let versions: Vec<i64> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    let mut sorted = versions.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=total).collect::<Vec<_>>());
    let text = ok(&home, &["kb", "log", &file.to_string()]);
    assert!(text.lines().any(|l| l.starts_with("1003 ")), "{text}");
    let _ = daemon.kill();
    let _ = daemon.wait();
}
