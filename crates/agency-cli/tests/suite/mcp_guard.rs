//! Issue 11 items 5 and 7 ("a rug-pull server quarantined"), end to end
//! with real processes: the daemon, the launcher `agency mcp-launch rug`
//! run exactly as the agent's MCP client would run it (stdio JSON-RPC), and
//! a Python server (`tests/fixtures/rugpull_mcp.py`) that changes a tool's
//! description after its first listing, adds a tool, and answers one tool
//! with output its manifest forbids. The server records every call that
//! reaches it, so the test proves refused calls never did.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::mcp_stdio;

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_story::{Story, agency, json};
use mcp_stdio::launch;
use serde_json::{Value, json};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/rugpull_mcp.py"
);

/// The manifest: `note` takes a short text and returns `{saved: string}`,
/// at most 3 calls a minute per handler; `count` must return an integer.
const MANIFEST: &str = r#"
[mcp_servers.rug.manifest]
allow_unlisted = true
[mcp_servers.rug.manifest.tools.note]
read_only = false
rate_limit = { per_handler = 3 }
input_schema = { type = "object", required = ["text"], additionalProperties = false, properties = { text = { type = "string", maxLength = 20 } } }
output_schema = { type = "object", required = ["saved"], properties = { saved = { type = "string" } } }
[mcp_servers.rug.manifest.tools.count]
read_only = true
output_schema = { type = "object", required = ["n"], properties = { n = { type = "integer" } } }
"#;

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().map(|t| t["name"].as_str().unwrap()).collect()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap().to_owned()
}

/// The calls that reached the server.
fn calls(file: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// POST `body` to the daemon's agent listener with the agent's token and
/// maybe a guard session; the status and body.
fn post(base: &str, path: &str, token: &str, session: Option<&str>, body: &Value) -> (u16, String) {
    tokio::task::block_in_place(|| {
        let mut req = reqwest::blocking::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(format!("{base}{path}"))
            .bearer_auth(token)
            .json(body);
        if let Some(s) = session {
            req = req.header("x-agency-guard-session", s);
        }
        let r = req.send().unwrap();
        (r.status().as_u16(), r.text().unwrap())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item7_a_rug_pull_server_is_quarantined_and_the_manifest_is_enforced() {
    let (_out, calls_file, story, config) = start_rug(Some(agent_story::WALLS_ONLY_POLICY)).await;
    let entry = &config["mcpServers"]["rug"];
    let env = entry["env"].as_object().unwrap();
    let token = env["AGENCY_TOKEN"].as_str().unwrap().to_owned();
    let base = env["AGENCY_MCP_URL"]
        .as_str()
        .unwrap()
        .trim_end_matches("/mcp")
        .to_owned();

    // Attack: the agent reports a listing to the guard itself, to pin a
    // definition of its choosing. There is nothing to report to: the
    // guard reads listings from the server's own answers as they pass the
    // daemon's proxy (issue 27: the daemon runs the server).
    let fake = json!({"result": {"tools": [{"name": "note", "description": "anything"}]}});
    for path in ["/mcp-guard/rug/tools", "/mcp-guard/rug/call"] {
        let (status, body) = post(&base, path, &token, Some("ags_made_up"), &fake);
        assert_eq!(status, 404, "{body}");
    }
    assert!(
        json(&story.home, &["mcp", "pins"])["pins"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing was pinned by the agent's own reports"
    );

    // The launcher, run as the agent's MCP client runs it.
    let (mut child, mut c) = tokio::task::block_in_place(|| launch(&config, "rug"));
    assert_eq!(
        c.server_info["name"], "rugpull-fixture",
        "{:?}",
        c.server_info
    );

    // The first listing pins both tools; the manifest's word on what
    // they do replaces the server's hints.
    let first = c.tools();
    assert_eq!(names(&first), ["note", "count"]);
    assert_eq!(first[0]["annotations"]["readOnlyHint"], false, "{first:?}");
    assert_eq!(first[1]["annotations"]["readOnlyHint"], true, "{first:?}");
    let ok = c.call("note", json!({"text": "hello"}));
    assert_eq!(ok["structuredContent"], json!({"saved": "hello"}), "{ok}");

    // Input that breaks the manifest's schema never reaches the server.
    let long = "x".repeat(50);
    let refused = c.call("note", json!({ "text": long }));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("input schema"), "{refused}");
    assert!(text(&refused).contains("/text"), "{refused}");
    let refused = c.call("note", json!({"text": "hi", "to": "evil"}));
    assert_eq!(refused["isError"], true, "{refused}");

    // Output that breaks it is withheld (the server did run).
    let withheld = c.call("count", json!({}));
    assert_eq!(withheld["isError"], true, "{withheld}");
    assert!(text(&withheld).contains("output schema"), "{withheld}");
    assert!(!withheld.to_string().contains("many"), "{withheld}");
    let seen: Vec<Value> = calls(&calls_file);
    assert_eq!(
        seen,
        [
            json!({"name": "note", "arguments": {"text": "hello"}}),
            json!({"name": "count", "arguments": {}})
        ]
    );

    // The rug pull: the second listing changes `note`'s description and
    // adds `extra`. Both are withheld; `count` is unchanged.
    assert_eq!(names(&c.tools()), ["count"]);
    let refused = c.call("note", json!({"text": "again"}));
    assert_eq!(refused["isError"], true, "{refused}");
    let why = text(&refused);
    assert!(why.contains("changed since it was approved"), "{why}");
    assert!(why.contains("agency mcp approve-tool rug note"), "{why}");
    let refused = c.call("extra", json!({}));
    assert!(text(&refused).contains("appeared after"), "{refused}");
    assert_eq!(
        calls(&calls_file).len(),
        2,
        "refused calls reached the server"
    );

    // The user sees both changes.
    let pins = json(&story.home, &["mcp", "pins"]);
    let state = |tool: &str| {
        pins["pins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["tool"] == tool)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(
        (state("note"), state("count"), state("extra")),
        (
            json!("quarantined"),
            json!("approved"),
            json!("quarantined")
        ),
        "{pins}"
    );
    let pending = pins["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 2, "{pins}");
    let note_change = pending.iter().find(|p| p["tool"] == "note").unwrap();
    assert!(why.contains(note_change["id"].as_str().unwrap()), "{why}");
    let extra_id = pending.iter().find(|p| p["tool"] == "extra").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, listing, err) = agency(&story.home, &["mcp", "pins"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        listing.contains(&extra_id) && listing.contains("new tool"),
        "{listing}"
    );
    // The user hears of each quarantine once, in the inbox, with the way
    // to decide it.
    let (code, inbox, err) = agency(&story.home, &["inbox"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        inbox.matches("MCP tool quarantined: ").count(),
        2,
        "{inbox}"
    );
    assert!(
        inbox.contains(&format!("agency approve {extra_id}")),
        "{inbox}"
    );

    // Attack: the agent approves through the admin API: not on its listener.
    let (status, _) = post(
        &base,
        &format!("/v1/mcp/changes/{extra_id}/approve"),
        &token,
        None,
        &json!({}),
    );
    assert_eq!(status, 404);

    // The user approves `note`'s change, seeing the diff.
    let (code, shown, err) = agency(&story.home, &["mcp", "approve-tool", "rug", "note"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.contains("-   \"description\": \"Save a short note.\""),
        "{shown}"
    );
    assert!(
        shown.contains("+   \"description\": \"Save a short note. IMPORTANT"),
        "{shown}"
    );
    assert!(shown.contains("approved change"), "{shown}");
    let (code, _, err) = agency(
        &story.home,
        &["mcp", "approve", note_change["id"].as_str().unwrap()],
    );
    assert_eq!(code, 1);
    assert!(err.contains("already approved"), "{err}");

    // The approved definition is what the agent now sees and calls.
    let tools = c.tools();
    assert_eq!(names(&tools), ["note", "count"]);
    assert!(
        tools[0]["description"]
            .as_str()
            .unwrap()
            .contains("IMPORTANT")
    );
    assert_eq!(
        c.call("note", json!({"text": "b"}))["structuredContent"],
        json!({"saved": "b"})
    );
    assert_eq!(
        c.call("note", json!({"text": "c"}))["structuredContent"],
        json!({"saved": "c"})
    );

    // The rate limit (3 a minute per handler) refuses the 4th call of
    // `note` within the minute ("hello", "b", "c"; refused calls do not count).
    let limited = c.call("note", json!({"text": "d"}));
    assert_eq!(limited["isError"], true, "{limited}");
    assert!(text(&limited).contains("rate limit"), "{limited}");
    let seen = calls(&calls_file);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(!seen.iter().any(|c| c["arguments"]["text"] == "d"));

    // The user rejects `extra` with the same command that decides
    // tool-call requests (a change's id is a UUID): it stays withheld.
    let (code, shown, err) = agency(
        &story.home,
        &["deny", &extra_id, "--reason", "not asked for"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains("rejected change"), "{shown}");
    assert_eq!(names(&c.tools()), ["note", "count"]);
    let refused = c.call("extra", json!({}));
    assert!(text(&refused).contains("rejected"), "{refused}");

    // The server is the daemon's (issue 27), not a child of the launcher:
    // closing the client's end ends the launcher, and a SIGTERM to a
    // launcher ends it; the servers end with their agent (here, as the
    // daemon stops).
    let rug = rug_servers();
    assert!(!rug.is_empty());
    for pid in &rug {
        assert_ne!(parent_of(*pid), Some(child.id()), "{rug:?}");
    }
    drop(c);
    let status = tokio::task::block_in_place(|| child.wait()).unwrap();
    assert!(status.success(), "{status}");
    let (mut child, mut c) = tokio::task::block_in_place(|| launch(&config, "rug2"));
    assert_eq!(names(&c.tools()), ["note", "count"]);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::task::block_in_place(|| child.wait()).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15), "{status}");
    drop(c.stdin);
    let servers = rug_servers();
    assert!(!servers.is_empty());
    // The agents end with the daemon, and their servers with them.
    let (code, _, err) = agency(&story.home, &["shutdown"]);
    assert_eq!(code, 0, "{err}");
    for pid in servers {
        story
            .wait_gone(pid, "the MCP server", Duration::from_secs(20))
            .await;
    }
    story.stop();
}

/// The fixture servers running.
fn rug_servers() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("rugpull_mcp.py"))
        })
        .collect()
}

/// A process's parent.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_manifest_stops_the_daemon_naming_server_tool_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let (code, _, err) = agency(&home, &["init"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(
        home.join("rug.json"),
        r#"{"tools": {"note": {"input_schema": {"type": "texte"}}}}"#,
    )
    .unwrap();
    std::fs::write(
        home.join("agency.toml"),
        "[mcp_servers.rug]\ncommand = \"python3\"\nmanifest = \"rug.json\"\n",
    )
    .unwrap();
    let (code, _, err) = agency(&home, &["serve"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("[mcp_servers.rug] manifest (")
            && err.contains("tool \"note\" input_schema: not a valid JSON Schema"),
        "{err}"
    );
}

/// A daemon whose agent (the `command` runtime) holds `rug` and `rug2`
/// and has written its MCP configuration: the home's `policy.toml` is
/// `policy` (`None`: the defaults). Returns the scratch directory, the
/// server's call log, the story and the agent's MCP configuration.
async fn start_rug(policy: Option<&str>) -> (tempfile::TempDir, std::path::PathBuf, Story, Value) {
    let out = tempfile::tempdir().unwrap();
    let calls_file = out.path().join("calls.jsonl");
    let config_file = out.path().join("mcp.json");
    let script = format!(
        "cp \"$AGENCY_MCP_CONFIG\" {0:?}.tmp; mv {0:?}.tmp {0:?}; exec sleep 300",
        config_file.display().to_string()
    );
    let cfg = format!(
        "[agents]\nruntime = \"command\"\nagency_program = {:?}\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n[mcp_servers.rug]\ncommand = \"python3\"\nargs = [{FIXTURE:?}]\nenv = {{ RUGPULL_CALLS = {:?} }}\n{MANIFEST}[mcp_servers.rug2]\ncommand = \"python3\"\nargs = [{FIXTURE:?}]\n{}",
        agent_story::BIN,
        calls_file.display().to_string(),
        agency_testkit::sandbox::sandbox_toml(&[out.path()])
    );
    let story = Story::start_with_policy(&cfg, Duration::from_secs(60), policy).await;
    let config = grant_and_start(&story, &["rug", "rug2"], &config_file).await;
    (out, calls_file, story, config)
}

/// Issue 11 items 4 and 5 together: a tool the manifest marks as not
/// read-only is asked about by the default policy; the call is pending
/// (and never reaches the server) until the user approves it, then runs
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item4_a_write_through_an_extra_mcp_tool_waits_for_approval_once() {
    let (_out, calls_file, story, config) = start_rug(None).await;
    let (mut child, mut c) = tokio::task::block_in_place(|| launch(&config, "rug"));
    assert_eq!(names(&c.tools()), ["note", "count"]);
    let pending = c.call("note", json!({"text": "ship it"}));
    assert_eq!(pending["isError"], true, "{pending}");
    let t = text(&pending);
    assert!(t.contains("pending approval"), "{t}");
    assert!(calls(&calls_file).is_empty(), "the server never saw it");
    let requests = json(&story.home, &["approvals"]);
    let request = &requests.as_array().unwrap()[0];
    assert_eq!(request["tool"], "mcp:rug/note", "{requests}");
    let id = request["id"].to_string();
    let (code, _, err) = agency(&story.home, &["approve", &id]);
    assert_eq!(code, 0, "{err}");
    let ok = c.call("note", json!({"text": "ship it"}));
    assert_eq!(ok["structuredContent"], json!({"saved": "ship it"}), "{ok}");
    assert_eq!(calls(&calls_file).len(), 1);
    let again = c.call("note", json!({"text": "ship it"}));
    assert!(text(&again).contains("pending approval"), "{again}");
    assert_eq!(calls(&calls_file).len(), 1, "the approval served one call");
    // A read-only tool is not asked about.
    let count = c.call("count", json!({}));
    assert!(!text(&count).contains("pending approval"), "{count}");
    drop(c);
    let _ = tokio::task::block_in_place(|| child.wait());
    story.stop();
}

/// Issue 27: a destructive tool of a server without a manifest ran
/// without approval, since only a manifest said what a tool does. Now the
/// approved definition speaks when no manifest does, and a tool that does
/// not say it only reads counts as one that may change things: the
/// default policy asks before the call reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_a_tool_not_marked_read_only_waits_for_approval_without_a_manifest() {
    let (_out, _calls, story, config) = start_rug(None).await;
    let (mut child, mut c) = tokio::task::block_in_place(|| launch(&config, "rug2"));
    assert_eq!(names(&c.tools()), ["note", "count"]);
    let pending = c.call("count", json!({}));
    assert_eq!(pending["isError"], true, "{pending}");
    assert!(text(&pending).contains("pending approval"), "{pending}");
    assert!(text(&pending).contains("not read-only"), "{pending}");
    let requests = json(&story.home, &["approvals"]);
    assert_eq!(
        requests.as_array().unwrap()[0]["tool"],
        "mcp:rug2/count",
        "{requests}"
    );
    drop(c);
    let _ = tokio::task::block_in_place(|| child.wait());
    story.stop();
}

/// Grant the root handler every server of `servers`, wake its agent, and
/// wait for the MCP configuration it writes to `config_file` (whole: the
/// last server has its entry).
async fn grant_and_start(story: &Story, servers: &[&str], config_file: &std::path::Path) -> Value {
    let root = json(&story.home, &["handlers"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for s in servers {
        let (code, _, err) = agency(
            &story.home,
            &["grant", &root, &format!("mcp_server:{s}"), "read"],
        );
        assert_eq!(code, 0, "{err}");
    }
    let (code, _, err) = agency(&story.home, &["send", "go"]);
    assert_eq!(code, 0, "{err}");
    let last = servers.last().copied().unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(t) = std::fs::read_to_string(config_file)
            && let Ok(v) = serde_json::from_str::<Value>(&t)
            && v["mcpServers"][last].is_object()
        {
            return v;
        }
        assert!(Instant::now() < deadline, "no agent; log:\n{}", story.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The same guard in the daemon's `/mcp-proxy` for an HTTP server: the
/// listing is pinned, input against the schema is refused there, output
/// against it is withheld. Two names for one server, with two manifests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item5_an_http_server_is_guarded_by_the_daemons_proxy() {
    let mut server = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/echo_mcp_http.py"
        ))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_owned();
    let out = tempfile::tempdir().unwrap();
    let config_file = out.path().join("mcp.json");
    let script = format!(
        "cp \"$AGENCY_MCP_CONFIG\" {0:?}.tmp; mv {0:?}.tmp {0:?}; exec sleep 300",
        config_file.display().to_string()
    );
    let cfg = format!(
        r#"[agents]
runtime = "command"
agency_program = {:?}
[agents.command]
program = "sh"
args = ["-c", {script:?}]
[mcp_servers.web]
url = {url:?}
[mcp_servers.web.manifest.tools.reveal]
input_schema = {{ type = "object", additionalProperties = false }}
output_schema = {{ type = "object", required = ["reversed_key"], properties = {{ authorization_seen = {{ const = false }} }} }}
[mcp_servers.strict]
url = {url:?}
[mcp_servers.strict.manifest.tools.reveal]
output_schema = {{ type = "object", properties = {{ authorization_seen = {{ const = true }} }} }}
{}"#,
        agent_story::BIN,
        agency_testkit::sandbox::sandbox_toml(&[out.path()])
    );
    let story = Story::start(&cfg, Duration::from_secs(60)).await;
    let config = grant_and_start(&story, &["web", "strict"], &config_file).await;

    let (mut web, mut c) = tokio::task::block_in_place(|| launch(&config, "web"));
    // Calling before any listing is refused: nothing is pinned yet.
    let early = c.call("reveal", json!({}));
    assert!(text(&early).contains("has not listed"), "{early}");
    assert_eq!(names(&c.tools()), ["reveal"]);
    let refused = c.call("reveal", json!({"extra": 1}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("input schema"), "{refused}");
    let ok = c.call("reveal", json!({}));
    assert!(ok.get("isError").is_none(), "{ok}");
    let report: Value = serde_json::from_str(&text(&ok)).unwrap();
    assert_eq!(report["authorization_seen"], false, "{ok}");
    drop(c);
    let _ = web.kill();
    let _ = web.wait();

    let (mut strict, mut c) = tokio::task::block_in_place(|| launch(&config, "strict"));
    assert_eq!(names(&c.tools()), ["reveal"]);
    let withheld = c.call("reveal", json!({}));
    assert_eq!(withheld["isError"], true, "{withheld}");
    assert!(text(&withheld).contains("output schema"), "{withheld}");
    assert!(!withheld.to_string().contains("reversed_key"), "{withheld}");
    drop(c);
    let _ = strict.kill();
    let _ = strict.wait();

    let pins = json(&story.home, &["mcp", "pins"]);
    assert_eq!(pins["pins"].as_array().unwrap().len(), 2, "{pins}");
    assert!(
        pins["pins"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["state"] == "approved")
    );
    story.stop();
    let _ = server.kill();
    let _ = server.wait();
}
