//! Issue 28, against a real `agency serve`: Agency's own notices (a budget
//! reached, a stall) show as from `agency`, not from the root handler in
//! whose name they were sent, while the handler's own mail still shows
//! as the handler's; and the replies to outside callers have their own
//! view, `agency conversations`, instead of filling `agency inbox`,
//! whose `--all` shows every message delivered, acknowledged ones too.

#![allow(clippy::unwrap_used)]

use agency_config::Home;
use agency_core::{MailTarget, Principal};
use agency_service::{BudgetLimits, MailBody, OrgCaller};
use serde_json::{Value, json};

use crate::home_cli;

use home_cli::{agency, json, ok};

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: Some(t.to_owned()),
        text: t.into(),
    }
}

/// The message of `inbox` (a `--json inbox` list) whose subject starts
/// with `prefix`.
fn with_subject<'a>(inbox: &'a Value, prefix: &str) -> &'a Value {
    inbox
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["subject"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} in {inbox}"))
}

/// The block of the text inbox that holds `subject`.
fn block<'a>(inbox: &'a str, subject: &str) -> &'a str {
    inbox
        .split("\nmessage ")
        .find(|b| b.contains(subject))
        .unwrap_or_else(|| panic!("no {subject:?} in\n{inbox}"))
}

/// The `from` line of a message's block.
fn from_line(block: &str) -> &str {
    block
        .lines()
        .find(|l| l.starts_with("from "))
        .unwrap_or_else(|| panic!("no from line in\n{block}"))
}

#[test]
fn issue28_notices_come_from_agency_not_from_the_root_handler() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.init().unwrap();
    let root = {
        let svc = home.open_service().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        // A budget reached (its notice goes to the user)…
        svc.budget_set(
            Principal::User,
            root,
            BudgetLimits {
                tool_calls: Some(1),
                ..BudgetLimits::default()
            },
        )
        .unwrap();
        let agent = svc.agent_start(root).unwrap();
        let who = Principal::agent(root, agent);
        svc.tool_call_charge(who).unwrap();
        assert!(svc.tool_call_charge(who).is_err());
        // …the root's own word to the user…
        svc.mail_send(who, MailTarget::User, &text("Progress report"))
            .unwrap();
        svc.agent_end(agent, "test").unwrap();
        // …and a stall (its notice goes to the user, the root's boss).
        svc.handler_mark_stalled(root, "three agents exited without progress")
            .unwrap();
        root
    };
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));

    let inbox = json(&home, &["inbox"]);
    for notice in ["Budget reached", "Stalled"] {
        let m = with_subject(&inbox, notice);
        assert_eq!(m["from_agency"], true, "{m}");
    }
    let own = with_subject(&inbox, "Progress report");
    assert_eq!(own["from_agency"], Value::Null, "{own}");
    assert_eq!(own["from"]["id"], root.to_string(), "{own}");

    let text = ok(&home, &["inbox"]);
    for notice in ["Budget reached", "Stalled"] {
        assert_eq!(from_line(block(&text, notice)), "from     agency", "{text}");
    }
    assert_eq!(
        from_line(block(&text, "Progress report")),
        format!("from     handler {root}")
    );

    // `agency mail status` says the same.
    let id = with_subject(&inbox, "Stalled")["id"].as_str().unwrap();
    let status = ok(&home, &["mail", "status", id]);
    assert!(from_line(&status).ends_with(" agency"), "{status}");
    let _ = daemon.kill();
    let _ = daemon.wait();
}

#[test]
fn issue28_outside_conversations_have_their_own_view_not_the_inbox() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.init().unwrap();
    let (exec, asked) = {
        let svc = home.open_service().unwrap();
        let model: agency_org::AgencyModel = serde_json::from_value(json!({
            "name": "weather", "type": "Agency", "executiveAgent": "desk",
            "agents": [{"name": "desk", "title": "Desk", "source": {"file": "desk.agent", "line": 1}}],
            "source": {"file": "weather.agency", "line": 1}
        }))
        .unwrap();
        svc.org_apply(Principal::User, &model, false).unwrap();
        let exec = svc.org_executive("weather").unwrap().unwrap();
        // An outside caller asks; the executive answers it, and also
        // writes the user an ordinary message.
        let asked = svc
            .org_message_post(&OrgCaller::User, "weather", "Rain in Oslo?", None)
            .unwrap();
        let agent = svc.agent_start(exec).unwrap();
        let who = Principal::agent(exec, agent);
        let mail = svc.mail_inbox(who, None).unwrap()[0].id;
        svc.mail_send_replying(who, MailTarget::User, &text("Dry, 12 °C."), Some(mail))
            .unwrap();
        svc.mail_send(who, MailTarget::User, &text("Note for the user"))
            .unwrap();
        svc.agent_end(agent, "test").unwrap();
        (exec, asked)
    };
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));

    // The inbox holds the executive's own note, not the outside reply.
    let inbox = json(&home, &["inbox"]);
    let subjects: Vec<&str> = inbox
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["subject"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, ["Note for the user"], "{inbox}");
    assert!(!ok(&home, &["inbox"]).contains("Dry, 12 °C."));

    // The conversation is in its own view: what was asked and answered.
    let text = ok(&home, &["conversations"]);
    assert!(
        text.contains(&format!(
            "conversation {} with agency weather",
            asked.conversation
        )),
        "{text}"
    );
    assert!(text.contains("Rain in Oslo?"), "{text}");
    assert!(
        text.contains("answered:") && text.contains("Dry, 12 °C."),
        "{text}"
    );
    let list = json(&home, &["conversations", "--agency", "weather"]);
    assert_eq!(list[0]["id"], asked.id.to_string(), "{list}");
    assert_eq!(list[0]["text"], "Rain in Oslo?");
    assert_eq!(list[0]["reply"], "Dry, 12 °C.");
    assert_eq!(
        json(&home, &["conversations", "--agency", "other"]),
        json!([])
    );
    // The outside caller's own view carries no echo of its text.
    let answer = json(&home, &["answer", &asked.id.to_string()]);
    assert_eq!(answer["text"], Value::Null, "{answer}");
    assert_eq!(answer["reply"], "Dry, 12 °C.");

    // --all: everything delivered, the outside reply (acknowledged as it
    // reached its caller) and acknowledged mail too.
    ok(&home, &["inbox", "--ack"]);
    assert_eq!(json(&home, &["inbox"]), json!([]));
    let all = json(&home, &["inbox", "--all"]);
    let reply = with_subject(&all, "Dry, 12");
    assert_eq!(reply["from"]["id"], exec.to_string(), "{reply}");
    assert!(!reply["acked_at"].is_null(), "{reply}");
    assert!(!with_subject(&all, "Note for the user")["acked_at"].is_null());
    let text = ok(&home, &["inbox", "--all"]);
    assert!(
        text.contains("Dry, 12 °C.") && text.contains("acknowledged"),
        "{text}"
    );
    let (code, _, err) = agency(&home, &["inbox", "--all", "--ack"]);
    assert_ne!(code, 0, "--all shows, it never acknowledges: {err}");
    let _ = daemon.kill();
    let _ = daemon.wait();
}
