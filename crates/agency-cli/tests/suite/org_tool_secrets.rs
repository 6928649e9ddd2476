//! Issue 28: a `.tool` could not receive a credential at all, so an
//! organisation's tools reached only open APIs. Now a `.tool` names
//! secrets of the home (`[secrets]` in agency.toml) as `${secret:NAME}` in
//! an HTTP tool's headers (`- Header: X-Api-Key: ${secret:NAME}`) and a
//! command tool's environment (`- Env: TOKEN=${secret:NAME}`), and the
//! daemon fills them in for the request or the process only.
//!
//! Against the real daemon with the sandbox on, a `command` agent (a shell
//! script playing a prompt-injected agent, holding the tools) calls them:
//! the HTTP server gets the header, the command tool the variable (it
//! answers with a hash of it), and the agent gets the secret through none
//! of: its own environment, `/proc/<tool>/environ` of the command tool
//! while it runs (the control: the scan finds that process), the secret's
//! file, the tools' listing, the compiled model, the applied organisation
//! or the daemon's log.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::probe;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_testkit::sandbox::fixtures_dir;
use agent_story::{Story, agency, json};
use probe::{assert_denied, assert_ok, config, granting, preamble, result, send};

/// The command tool that waits: it holds the secret in its environment
/// until the test writes `stop` into its (source) folder.
const HOLD_PY: &str = r#"import json, os, sys, time
json.load(sys.stdin)
while not os.path.exists("stop"):
    time.sleep(0.05)
print(json.dumps({"held": "SECRET_TOKEN" in os.environ}))
"#;

/// The command tool that tells what it got: hashes, never the value.
const REVEAL_PY: &str = r#"import hashlib, json, os, sys
json.load(sys.stdin)
h = lambda k: hashlib.sha256(os.environ.get(k, "").encode()).hexdigest()
print(json.dumps({"token": h("SECRET_TOKEN"), "framed": h("FRAMED")}))
"#;

/// The agent's attacks on `/proc`: `self` reads its own environment (the
/// control: readable), `environ` every `hold.py` process's (waiting for
/// one to exist). Exit 0 when the secret was read.
const PROCS_PY: &str = r#"import os, sys, time
mode, secret = sys.argv[1], sys.argv[2]
if mode == "self":
    env = open("/proc/self/environ", "rb").read()
    print("token visible:", b"AGENCY_TOKEN=" in env)
    sys.exit(0 if secret.encode() in env else 1)
found, got = [], False
for _ in range(1200):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open("/proc/%s/cmdline" % pid, "rb").read()
        except OSError:
            continue
        if b"hold.py" in cmd and int(pid) != os.getpid():
            found.append(pid)
    if found:
        break
    time.sleep(0.05)
for pid in found:
    try:
        got |= secret.encode() in open("/proc/%s/environ" % pid, "rb").read()
    except OSError as e:
        print("pid %s: %s" % (pid, e))
open(os.environ["O"] + "/found", "w").write("%d\n" % len(found))
sys.exit(0 if got else 1)
"#;

/// The agent's view of its tools: `tools/list` as its MCP client sees it.
const LIST_PY: &str = r#"import json, os, urllib.request
url, token = os.environ["AGENCY_MCP_URL"], os.environ["AGENCY_TOKEN"]
def post(body, session=None):
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
         "Accept": "application/json, text/event-stream"}
    if session:
        h["Mcp-Session-Id"] = session
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=h)
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.headers.get("mcp-session-id"), r.read().decode()
s, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "l", "version": "0"}}})
post({"jsonrpc": "2.0", "method": "notifications/initialized"}, s)
_, text = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, s)
print(text)
"#;

/// A stand-in API: answers `{"temp": 1.5}` to every request and records
/// each request's `X-Api-Key` header.
fn api() -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap_or(0) == 1 {
                head.push(b[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let key = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("x-api-key")
                        .then(|| v.trim().to_owned())
                })
                .unwrap_or_default();
            keep.lock().unwrap().push(key);
            let body = "{\"temp\": 1.5}";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (addr, seen)
}

/// The organisation: Vault, whose executive Keeper holds the three tools.
fn sources(src: &Path, api: &str) {
    std::fs::create_dir_all(src).unwrap();
    let files = [
        (
            "Vault.agency",
            "# Agency Name: Vault\nKeeps keys.\n\n## Executive Agent\nThe executive agent is Keeper.\n\n## Tools\n- Hold\n- Reveal\n- Fetch\n".to_owned(),
        ),
        (
            "Keeper.agent",
            "# Agent Name: Keeper\n\n## Tools\n- Hold\n- Reveal\n- Fetch\n".to_owned(),
        ),
        (
            "Hold.tool",
            "---\ntype: command\ncommand: python3 hold.py\ntimeout_ms: 120000\nenv: {SECRET_TOKEN: \"${secret:api_key}\"}\noutput: {held: boolean}\n---\n# Tool Name: Hold\nHolds on.\n".to_owned(),
        ),
        (
            "Reveal.tool",
            "# Tool Name: Reveal\nSays what it got.\n- Command: python3 reveal.py\n- Env: SECRET_TOKEN=${secret:api_key}\n- Env: FRAMED=a-${secret:api_key}-z\n- Returns JSON with fields: { \"token\": string, \"framed\": string }\n".to_owned(),
        ),
        (
            "Fetch.tool",
            format!(
                "# Tool Name: Fetch\nCalls the API with its key.\n- Base URL: http://{api}\n- Endpoint: /current\n- Required Query Param: location\n- Header: X-Api-Key: ${{secret:api_key}}\n- Egress: {api}\n- Returns JSON with fields: {{ \"temp\": number }}\n"
            ),
        ),
        ("hold.py", HOLD_PY.to_owned()),
        ("reveal.py", REVEAL_PY.to_owned()),
    ];
    for (name, text) in files {
        std::fs::write(src.join(name), text).unwrap();
    }
}

/// SHA-256 of `s` in hex, as the Reveal tool computes it (Python's).
fn sha256(s: &str) -> String {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import hashlib, sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())",
            s,
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue28_tool_secrets_reach_the_tool_and_never_the_agent() {
    let out = tempfile::tempdir().unwrap();
    let keep = tempfile::tempdir().unwrap();
    let secret = format!("s3cret-{}", uuid::Uuid::new_v4().simple());
    let secret_file = keep.path().join("api_key");
    std::fs::write(&secret_file, format!("{secret}\n")).unwrap();
    for (name, text) in [("procs.py", PROCS_PY), ("list.py", LIST_PY)] {
        std::fs::write(out.path().join(name), text).unwrap();
    }
    let (api, seen) = api();
    let call = format!(
        "python3 {:?}",
        fixtures_dir()
            .canonicalize()
            .unwrap()
            .join("mcp_call.py")
            .display()
            .to_string()
    );
    let script = format!(
        r#"{pre}
export O
r control python3 "$O/procs.py" self {secret:?}
{call} Hold '{{}}' > "$O/hold.out" 2>&1 &
r environ python3 "$O/procs.py" environ {secret:?}
echo scanned > "$O/scanned"
wait
r reveal {call} Reveal '{{}}'
r fetch {call} Fetch '{{"location":"Oslo"}}'
r file cat {file:?}
r list python3 "$O/list.py"
r env sh -c 'env; cat /proc/self/environ; cat /proc/$PPID/environ'
echo done > "$O/done"
exec sleep 300
"#,
        pre = preamble(out.path()),
        file = secret_file.display().to_string(),
    );
    let story = Story::start(
        &config(
            &script,
            &format!("agency_program = {:?}\n", agent_story::BIN),
            &format!(
                "[secrets]\napi_key = {{ file = {:?} }}\n{}",
                secret_file.display().to_string(),
                granting(out.path(), "")
            ),
        ),
        Duration::from_secs(60),
    )
    .await;
    let src = story.tmp.path().canonicalize().unwrap().join("org");
    sources(&src, &api);
    let path = src.to_str().unwrap();

    // The compiled model names the secret, never its value.
    let (code, compiled, err) = agency(&story.home, &["compile", path]);
    assert_eq!(code, 0, "{err}");
    assert!(compiled.contains("${secret:api_key}"), "{compiled}");
    // `up` grants Fetch's egress with the tool; applied, the agent is the
    // root handler's (the script runs for it), given the same tools.
    let plan = json(&story.home, &["up", path, "--plan"]);
    assert!(
        plan["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["holder"] == "Keeper"
                && c["resource"] == format!("egress:{api}")
                && c["why"] == "tool egress"),
        "{plan}"
    );
    let (code, o, err) = agency(&story.home, &["up", path]);
    assert_eq!(code, 0, "{o}{err}");
    let root = json(&story.home, &["status"])["root_handler"]
        .as_str()
        .unwrap()
        .to_owned();
    for t in [
        "tool:Hold",
        "tool:Reveal",
        "tool:Fetch",
        &format!("egress:{api}"),
    ] {
        let (code, _, err) = agency(&story.home, &["grant", &root, t, "read"]);
        assert_eq!(code, 0, "{t}: {err}");
    }
    send(&story);
    story
        .wait_file(&out.path().join("scanned"), Duration::from_secs(120))
        .await;
    std::fs::write(src.join("stop"), "").unwrap();
    story
        .wait_file(&out.path().join("done"), Duration::from_secs(120))
        .await;

    // The tools got the secret: the command tool in its environment…
    assert_ok(out.path(), "reveal");
    let reveal = result(out.path(), "reveal");
    assert!(reveal.contains(&sha256(&secret)), "{reveal}");
    assert!(
        reveal.contains(&sha256(&format!("a-{secret}-z"))),
        "{reveal}"
    );
    let hold = std::fs::read_to_string(out.path().join("hold.out")).unwrap();
    assert!(hold.contains("held") && hold.contains("true"), "{hold}");
    // …and the API in the header.
    assert_ok(out.path(), "fetch");
    assert_eq!(*seen.lock().unwrap(), std::slice::from_ref(&secret));

    // The agent got it nowhere: its own environment is readable and holds
    // no secret; the tool's process was found while it ran and its
    // environment could not be read; the secret's file is closed to it.
    assert_denied(out.path(), "control");
    assert!(
        result(out.path(), "control").contains("token visible: True"),
        "{}",
        result(out.path(), "control")
    );
    assert_denied(out.path(), "environ");
    let found = std::fs::read_to_string(out.path().join("found")).unwrap();
    assert_ne!(found.trim(), "0", "the scan found the tool's process");
    assert_denied(out.path(), "file");
    assert_ok(out.path(), "list");
    assert!(result(out.path(), "list").contains("Fetch"));
    for name in [
        "control", "environ", "reveal", "fetch", "file", "list", "env",
    ] {
        let text = result(out.path(), name);
        assert!(!text.contains(&secret), "{name} holds the secret: {text}");
    }
    let hold = std::fs::read_to_string(out.path().join("hold.out")).unwrap();
    assert!(!hold.contains(&secret));
    assert!(!compiled.contains(&secret));
    let orgs = json(&story.home, &["orgs"]).to_string();
    assert!(!orgs.contains(&secret));
    assert!(!story.log().contains(&secret), "the daemon's log");
    story.stop();
}
