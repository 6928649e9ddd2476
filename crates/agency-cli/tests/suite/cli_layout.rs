//! Issue 28, the CLI a user expects: tables that fit a 100-column terminal
//! (short id prefixes that resolve back, long cells cut, relative times,
//! `--wide` for everything whole), exit codes by the README's rule
//! (`ask` without an answer, `--wait` past its maximum, `answer` with a
//! prefix) — each through the real binary against a real daemon, in a
//! home filled the way a few hours of work would fill it.

#![allow(clippy::unwrap_used)]

use crate::home;

use std::process::Stdio;

use agency_core::{Level, MailTarget, Principal, Resource};
use agency_service::{
    BudgetLimits, GrantRequest, MailBody, NewOutcome, RunReport, ToolCallRequest,
};
use home::{Run, TestHome};
use serde_json::json;

/// The widest line a default (not `--wide`) output may have when stdout is
/// a pipe and COLUMNS is unset.
const WIDTH: usize = 100;

/// Run in the default layout: what a user's terminal (or pipe) gets.
fn plain(h: &TestHome, args: &[&str]) -> Run {
    let mut c = h.command(args);
    c.env_remove("AGENCY_WIDE")
        .env_remove("COLUMNS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = c.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn plain_ok(h: &TestHome, args: &[&str]) -> String {
    let r = plain(h, args);
    assert_eq!(r.code, 0, "agency {args:?}: {}{}", r.stdout, r.stderr);
    r.stdout
}

/// The lines of `text` wider than [`WIDTH`] (in characters: the CLI's
/// tables hold no wide characters here).
fn too_wide(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().count() > WIDTH)
        .map(str::to_owned)
        .collect()
}

const LONG_TITLE: &str = "Write the quarterly infrastructure cost report with a breakdown per team, per service and per region, and recommendations";

/// What a few hours of work leave in a home: a three-level handler tree
/// with long titles, outcomes, KB files with long descriptions, runs (one
/// ended by a model API error whose whole JSON is its reason), mail to the
/// user with a long subject, a pending approval, memories, capabilities
/// and a budget. Returns (root, the deepest handler).
fn fill(h: &TestHome) -> (String, String) {
    h.ok(&["init"]);
    let home = agency_config::Home::new(h.dir.clone());
    let svc = home.open_service().unwrap();
    let root = svc.root_handler().unwrap().unwrap();
    let r = Principal::agent(root, svc.agent_start(root).unwrap());
    let brief = svc
        .kb_create(
            r,
            "Brief for the quarterly infrastructure cost report: audiences, sources, the format finance expects and the deadline",
            b"Audience: finance. Sources: the cloud bills.",
        )
        .unwrap();
    let mut boss = (root, r);
    let mut deepest = root;
    for level in 0..3 {
        let o = svc
            .outcome_create(
                boss.1,
                &NewOutcome {
                    title: format!("{LONG_TITLE} (level {level})"),
                    description: "A long description.\n".repeat(20),
                    parents: vec![boss.0.root()],
                    priority: level,
                },
            )
            .unwrap();
        let d = svc
            .delegate(
                boss.1,
                o,
                &[GrantRequest {
                    resource: Resource::Kb(brief),
                    level: Level::Read,
                    delegatable: true,
                }],
            )
            .unwrap();
        let agent = svc.agent_start(d.handler).unwrap();
        let w = Principal::agent(d.handler, agent);
        svc.kb_create(
            w,
            &format!("Findings of level {level}: every service's monthly cost, its trend over the last four quarters and outliers"),
            b"42",
        )
        .unwrap();
        svc.audit_submit(w, &format!("Read the brief, gathered the bills of every team and wrote my findings at level {level}; next I will compare the regions and write the summary")).unwrap();
        svc.memory_store(
            w,
            "The finance team wants the report as a spreadsheet with one tab per region, totals first, and no charts at all",
            &["finance".to_owned(), "format".to_owned()],
            Some("preference"),
        )
        .unwrap();
        svc.agent_record_spawn(
            agent,
            "builtin",
            "hash",
            agency_core::prompt::PROMPT_VERSION,
        )
        .unwrap();
        let error = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded: the upstream model provider could not serve this request right now, retry later"}, "request_id": "req_011CUnXYZ0123456789abcdef"});
        svc.agent_finish(
            agent,
            &RunReport {
                reason: format!("error: model API error 529: {error}"),
                normal: false,
                tool_calls: Some(17),
                input_tokens: Some(123_456),
                output_tokens: Some(7_890),
                ..RunReport::default()
            },
        )
        .unwrap();
        let next = Principal::agent(d.handler, svc.agent_start(d.handler).unwrap());
        boss = (d.handler, next);
        deepest = d.handler;
    }
    svc.mail_send(
        r,
        MailTarget::User,
        &MailBody::Text {
            subject: Some(format!("Progress on the report: {LONG_TITLE}")),
            text: "Level 0 has its findings; the rest follows.".into(),
        },
    )
    .unwrap();
    // A call the default policy asks the user about.
    let a = svc
        .tool_call_admit(
            boss.1,
            ToolCallRequest {
                tool: "bash".into(),
                args: json!({"command": "rm -rf /tmp/agency-issue28-drafts-of-every-region /tmp/agency-issue28-cache", "timeout_ms": 600_000}),
                read_only: None,
            },
        )
        .unwrap();
    assert!(
        matches!(a, agency_service::Admission::Pending { .. }),
        "{a:?}"
    );
    svc.budget_set(
        Principal::User,
        root,
        BudgetLimits {
            tokens: Some(10_000_000),
            micro_usd: Some(25_000_000),
            calls: Some(5000),
            tool_calls: Some(20_000),
            spawns: Some(1000),
            live_agents: Some(8),
            handlers: Some(200),
            depth: Some(10),
            wall_clock_ms: Some(86_400_000),
        },
    )
    .unwrap();
    drop(svc);
    (root.to_string(), deepest.to_string())
}

/// The first word of the first data line under a table's header (a
/// short id), tree drawing removed.
fn first_id(table: &str) -> String {
    table
        .lines()
        .nth(1)
        .unwrap()
        .trim_start_matches(['│', '├', '└', '─', ' '])
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn issue28_tables_fit_100_columns_and_print_ids_that_resolve() {
    let h = TestHome::new();
    let (root, deepest) = fill(&h);
    let _daemon = h.serve();
    // The organisation of seed 002 and an API key for it.
    let weather = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/weather-agency");
    plain_ok(&h, &["up", weather]);
    plain_ok(&h, &["key", "mint", "--agency", "WeatherAgency"]);
    let file = h.json(&["kb", "ls"])[0]["id"].as_str().unwrap().to_owned();

    let commands: Vec<Vec<&str>> = vec![
        vec!["status"],
        vec!["handlers"],
        vec!["outcomes"],
        vec!["outcomes", "--of", &deepest],
        vec!["agents"],
        vec!["runs"],
        vec!["inbox"],
        vec!["approvals"],
        vec!["caps", &deepest],
        vec!["audit", &deepest],
        vec!["orgs"],
        vec!["budget", "show"],
        vec!["cost"],
        vec!["kb", "ls"],
        vec!["kb", "log", &file],
        vec!["kb", "audit", &file],
        vec!["key", "list"],
        vec!["memory", "search", &deepest, "finance"],
        vec!["memory", "status", &deepest],
    ];
    let mut wide_somewhere = false;
    for args in &commands {
        let out = plain_ok(&h, args);
        assert!(!out.trim().is_empty(), "agency {args:?} printed nothing");
        let bad = too_wide(&out);
        assert!(
            bad.is_empty(),
            "agency {args:?} printed lines over {WIDTH} columns:\n{}\n\nwhole output:\n{out}",
            bad.join("\n")
        );
        // The same with --wide: everything whole, some of it wider.
        let mut wide_args = vec!["--wide"];
        wide_args.extend_from_slice(args);
        wide_somewhere |= !too_wide(&h.ok(&wide_args)).is_empty();
    }
    assert!(wide_somewhere, "--wide cut nothing and widened nothing");

    // Full ids are not printed in listings; the short ones resolve.
    let handlers = plain_ok(&h, &["handlers"]);
    assert!(!handlers.contains(&root), "{handlers}");
    let short_root = first_id(&handlers);
    assert!((8..36).contains(&short_root.len()), "{short_root}");
    assert!(root.starts_with(&short_root), "{short_root} of {root}");
    h.ok(&["caps", &short_root]);
    h.ok(&["audit", &short_root]);
    assert!(handlers.contains(&deepest[..8]), "{handlers}");

    let runs = plain_ok(&h, &["runs"]);
    assert!(runs.contains("abnormal"), "{runs}");
    assert!(runs.contains('…'), "the JSON error is cut: {runs}");
    assert!(
        runs.contains("(long cells are cut to fit; --wide shows them whole"),
        "{runs}"
    );
    assert!(runs.contains(" ago"), "relative times: {runs}");
    let agent = first_id(&runs);
    assert_eq!(
        h.json(&["run", &agent])["agent"]
            .as_str()
            .unwrap()
            .get(..agent.len()),
        Some(agent.as_str())
    );
    // --wide: the whole error, full ids, absolute times.
    let wide = h.ok(&["--wide", "runs"]);
    assert!(wide.contains("req_011CUnXYZ0123456789abcdef"), "{wide}");
    assert!(wide.contains(&deepest), "{wide}");
    assert!(!wide.contains(" ago"), "{wide}");
    // --json is unchanged: full ids and epoch milliseconds.
    let v = h.json(&["runs"]);
    assert_eq!(v[0]["handler"].as_str().unwrap().len(), 36);
    assert!(v[0]["started_at"].is_i64(), "{v}");

    let kb = plain_ok(&h, &["kb", "ls"]);
    let f = first_id(&kb);
    assert!(!h.ok(&["kb", "cat", &f]).is_empty());

    let outcomes = plain_ok(&h, &["outcomes"]);
    let o = first_id(&outcomes);
    h.ok(&["outcome", "show", &o]);

    let memories = plain_ok(&h, &["memory", "search", &deepest[..8], "finance"]);
    let m = first_id(&memories);
    assert!(m.len() < 36, "{memories}");
    assert!(
        h.ok(&["memory", "show", &deepest[..8], &m])
            .contains("spreadsheet")
    );

    let keys = plain_ok(&h, &["key", "list"]);
    let k = first_id(&keys);
    assert!(k.len() < 36, "{keys}");
    assert!(h.ok(&["key", "revoke", &k]).contains("revoked API key"));

    // COLUMNS narrows (and widens) the tables.
    let mut c = h.command(&["runs"]);
    c.env_remove("AGENCY_WIDE").env("COLUMNS", "72");
    let narrow = String::from_utf8(c.output().unwrap().stdout).unwrap();
    assert!(narrow.lines().all(|l| l.chars().count() <= 72), "{narrow}");
}

/// The README's rule (exit 0 success, 1 failure, 2 usage error) for
/// talking to an agency: no answer within `--wait` is a failure, a
/// `--wait` past its maximum is a usage error worded as `--help` says,
/// and `agency answer` takes a prefix like every other command.
#[test]
fn issue28_ask_and_answer_exit_codes_follow_the_readme() {
    let h = TestHome::new();
    h.ok(&["init"]);
    let _daemon = h.serve();
    let weather = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/weather-agency");
    h.ok(&["up", weather]);

    // No runtime answers: the wait ends without a reply.
    let r = h.run(&["ask", "WeatherAgency", "Weather in Oslo?", "--wait", "1s"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("failed to get an answer from agency WeatherAgency within 1.0s"),
        "{r:?}"
    );
    assert!(r.stderr.contains("agency answer "), "{r:?}");
    assert!(r.stdout.contains("no answer yet"), "{r:?}");
    // Not waiting at all is asked for, not a failure.
    let r = h.run(&["ask", "WeatherAgency", "And in Bergen?", "--wait", "0s"]);
    assert_eq!(r.code, 0, "{r:?}");

    // `answer` with a prefix of the id `ask` printed.
    let v = h.json(&["ask", "WeatherAgency", "And in Trondheim?", "--wait", "0s"]);
    let id = v["id"].as_str().unwrap();
    let r = h.run(&["answer", &id[..8]]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(id), "{r:?}");
    assert!(r.stdout.contains("no answer yet"), "{r:?}");
    let r = h.run(&["answer", "ffffffff"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("agency message"), "{r:?}");

    // --wait past its maximum: a usage error, as --help words it.
    let help = h.ok(&["ask", "--help"]);
    assert!(help.contains("at most 2m"), "{help}");
    let r = h.run(&["ask", "WeatherAgency", "hi", "--wait", "3m"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("at most 2m"), "{r:?}");
    assert!(r.stderr.contains("agency answer ID"), "{r:?}");
}
