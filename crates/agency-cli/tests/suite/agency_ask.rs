//! Issue 12 items 6-7 from the command line against a real `agency
//! serve`: `agency key mint|list|revoke`, the key over TCP, `agency ask`
//! (pending, then answered by the executive handler's MCP `mail_send`
//! with `in_reply_to`) and `agency answer`.

#![allow(clippy::unwrap_used)]

use agency_config::Home;
use agency_core::{HandlerId, Principal};
use serde_json::{Value, json};

use crate::home_cli;

use home_cli::{agency, ok};

/// A home whose agency `weather` has an executive handler (recorded
/// before the daemon starts; `agency up` will do this).
fn home_with_agency(dir: &std::path::Path) -> (Home, HandlerId) {
    let home = Home::new(dir.join("home"));
    home.init().unwrap();
    let svc = home.open_service().unwrap();
    let root = svc.root_handler().unwrap().unwrap();
    let _ = root;
    let model: agency_org::AgencyModel = serde_json::from_value(serde_json::json!({
        "name": "weather", "type": "Agency", "executiveAgent": "desk",
        "agents": [{"name": "desk", "title": "Desk", "source": {"file": "desk.agent", "line": 1}}],
        "source": {"file": "weather.agency", "line": 1}
    }))
    .unwrap();
    svc.org_apply(Principal::User, &model, false).unwrap();
    let exec = svc.org_executive("weather").unwrap().unwrap();
    (home, exec)
}

/// One MCP tool call over streamable HTTP with an agent token.
fn mcp_call(base: &str, token: &str, tool: &str, args: Value) -> Value {
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    let url = format!("{base}/mcp");
    let post = |body: &Value, session: Option<&str>| {
        let mut rq = http
            .post(&url)
            .bearer_auth(token)
            .header("Accept", "application/json, text/event-stream")
            .json(body);
        if let Some(s) = session {
            rq = rq.header("mcp-session-id", s);
        }
        rq.send().unwrap()
    };
    let r = post(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
        None,
    );
    // The endpoint is stateless (issue 15): a session id only if given.
    let session = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let _ = r.text().unwrap();
    post(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        session.as_deref(),
    );
    let body = post(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": tool, "arguments": args}}),
        session.as_deref(),
    )
    .text()
    .unwrap();
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .chain(serde_json::from_str::<Value>(&body).ok())
        .find(|v| v["id"] == 2)
        .unwrap_or_else(|| panic!("no answer in {body}"))["result"]
        .clone()
}

#[test]
fn issue12_ask_an_agency_and_manage_its_keys_from_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, exec) = home_with_agency(tmp.path());
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));
    let status: Value = serde_json::from_str(&ok(&home, &["--json", "status"])).unwrap();
    let base = format!("http://{}", status["addr"].as_str().unwrap());

    // A key: printed alone, listed by its prefix only, usable over TCP.
    let key = ok(&home, &["key", "mint", "--agency", "weather"]);
    let key = key.trim().to_owned();
    assert!(key.starts_with("agk_"), "{key}");
    let list = ok(&home, &["key", "list"]);
    assert!(list.contains("weather") && list.contains("live"), "{list}");
    assert!(!list.contains(&key), "the secret is never listed: {list}");
    let (code, _, err) = agency(&home, &["key", "mint", "--agency", "nowhere"]);
    assert_ne!(code, 0);
    assert!(err.contains("agency nowhere"), "{err}");
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    let tcp_post = |k: &str| {
        http.post(format!("{base}/v1/agency/messages"))
            .bearer_auth(k)
            .json(&json!({"agency": "weather", "message": "from outside"}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(tcp_post(&key), 202);

    // Ask: no answer within the wait; then the executive answers over MCP
    // and `agency answer` shows it.
    // (No answer within --wait exits 1, the message still delivered.)
    let (code, out, _) = agency(
        &home,
        &[
            "--json",
            "ask",
            "weather",
            "Rain in Oslo?",
            "--wait",
            "200ms",
        ],
    );
    assert_eq!(code, 1, "{out}");
    let asked: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(asked["status"], "pending", "{asked}");
    let id = asked["id"].as_str().unwrap();
    let pending = ok(&home, &["answer", id]);
    assert!(pending.contains("no answer yet"), "{pending}");
    let minted = ok(&home, &["token", "mint", "--handler", &exec.to_string()]);
    let inbox = mcp_call(&base, minted.trim(), "mail_inbox", json!({}));
    let inbox: Value = serde_json::from_str(inbox["content"][0]["text"].as_str().unwrap()).unwrap();
    let mail = inbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["body"].as_str().unwrap_or("").contains("Rain in Oslo?"))
        .unwrap_or_else(|| panic!("{inbox}"))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sent = mcp_call(
        &base,
        minted.trim(),
        "mail_send",
        json!({"to": "user", "text": "Dry, 12 °C.", "in_reply_to": mail}),
    );
    assert_ne!(sent["isError"], true, "{sent}");
    let answered = ok(&home, &["answer", id]);
    assert!(answered.contains("Dry, 12 °C."), "{answered}");
    // The reply is among the user's mail (`inbox --all`), naming what it
    // answers, not in the inbox: `agency conversations` is its view.
    let inbox = ok(&home, &["inbox", "--all"]);
    assert!(inbox.contains(&format!("in reply to   {mail}")), "{inbox}");
    assert!(!ok(&home, &["inbox"]).contains("Dry, 12 °C."));
    let (code, _, err) = agency(&home, &["ask", "weather", "x", "--wait", "3m"]);
    assert_ne!(code, 0);
    assert!(err.contains("--wait"), "{err}");

    // Revoked: the key stops at once.
    let keys: Value = serde_json::from_str(&ok(&home, &["--json", "key", "list"])).unwrap();
    let key_id = keys[0]["id"].as_str().unwrap();
    let out = ok(&home, &["key", "revoke", key_id]);
    assert!(out.contains("revoked"), "{out}");
    assert_eq!(tcp_post(&key), 401);
    let _ = daemon.kill();
    let _ = daemon.wait();
}
