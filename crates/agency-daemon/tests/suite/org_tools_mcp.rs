//! Issue 12 item 4, tools of type `mcp`, against a real daemon (port 0)
//! and an MCP client with an agent's token. The MCP servers are small
//! Python programs using only the standard library, written into a temp
//! dir: a stdio server (JSON-RPC lines: `initialize`, `tools/list`,
//! `tools/call` of `add`, `fail`, `text`; a `hang` mode that never
//! answers, a `flood` mode that writes 5 MiB), and a streamable-HTTP server on 127.0.0.1 port 0 answering
//! POSTs with JSON. Each server appends what it did to a log file, so a
//! test can say a server never started or was never reached.
//!
//! Attacks: no `tool:` capability (not listed, refused, the server never
//! started), arguments off the schema (refused before the server starts),
//! an `isError` answer, a JSON-RPC error of 100 kB (shown bounded), a
//! server writing over 4 MiB, a server that never answers `initialize`
//! (killed at the timeout), a `url` server without `egress:` (refused, audited,
//! never reached).
//!
//! Unconfined (`agents.sandbox = "off"`), as in `org_tools.rs`: an
//! in-process daemon's executable is this test binary, not `agency`, so it
//! cannot run `agency sandbox-exec`.

#![allow(clippy::unwrap_used)]

use crate::org_client;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agency_org::{McpTool, SourceRef, Tool, ToolImplementation, ToolInterface};
use org_client::{Org, failed, text};
use serde_json::{Value, json};

/// The JSON-RPC handling both servers share: one message in, the answer
/// out (None for a notification).
const RPC: &str = r#"
import json, os, sys

def handle(msg, log):
    mid = msg.get("id")
    method = msg.get("method")
    if mid is None:
        return None
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "adder", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                            for n in ("add", "fail", "text")]}
    elif method == "tools/call":
        name = msg["params"]["name"]
        a = msg["params"].get("arguments") or {}
        with open(log, "a") as f:
            f.write("call %s %s\n" % (name, json.dumps(a, sort_keys=True)))
        if name == "add":
            s = a["a"] + a["b"]
            result = {"content": [{"type": "text", "text": json.dumps({"sum": s})}],
                      "structuredContent": {"sum": s}}
        elif name == "fail":
            result = {"content": [{"type": "text", "text": "no such account\n\"quoted\""}],
                      "isError": True}
        elif name == "text":
            result = {"content": [{"type": "text", "text": "plain words"}]}
        else:
            return {"jsonrpc": "2.0", "id": mid,
                "error": {"code": -32602,
                          "message": "unknown tool " + name + "\n" + "y" * 100000}}
    else:
        return {"jsonrpc": "2.0", "id": mid,
                "error": {"code": -32601, "message": "no method " + str(method)}}
    return {"jsonrpc": "2.0", "id": mid, "result": result}
"#;

const STDIO: &str = r#"
mode, log = sys.argv[1], sys.argv[2]
with open(log, "a") as f:
    f.write("started %d\n" % os.getpid())
if mode == "hang":
    import time
    time.sleep(60)
if mode == "flood":
    sys.stdout.write("x" * (5 << 20))
    sys.stdout.flush()
for line in sys.stdin:
    out = handle(json.loads(line), log)
    if out is not None:
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
"#;

const HTTP: &str = r#"
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
portfile, log = sys.argv[1], sys.argv[2]

class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        with open(log, "a") as f:
            f.write("POST %s\n" % self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        out = handle(json.loads(body), log)
        if out is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_DELETE = do_GET

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
"#;

/// The real Python executable (not a pyenv shim, which needs a HOME the
/// tool's private one is not).
fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn interface(input: &[(&str, &str)], output: &[(&str, &str)]) -> ToolInterface {
    let schema = |fields: &[(&str, &str)]| {
        let props: serde_json::Map<String, Value> = fields
            .iter()
            .map(|(k, t)| (k.to_string(), json!({"type": t})))
            .collect();
        let required: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    };
    let format = |fields: &[(&str, &str)]| -> BTreeMap<String, String> {
        fields
            .iter()
            .map(|(k, t)| (k.to_string(), t.to_string()))
            .collect()
    };
    ToolInterface {
        input_format: format(input),
        output_format: format(output),
        input_schema: schema(input),
        output_schema: schema(output),
    }
}

fn mcp_tool(name: &str, m: McpTool, output: &[(&str, &str)]) -> Tool {
    Tool {
        name: name.into(),
        description: format!("{name}: one tool of an MCP server"),
        implementation: ToolImplementation::Mcp(m),
        interface: interface(&[("a", "integer"), ("b", "integer")], output),
        egress: vec![],
        source: SourceRef {
            file: format!("{name}.tool"),
            line: 1,
        },
    }
}

/// Where the servers and their logs are.
struct Servers {
    dir: tempfile::TempDir,
    python: String,
}

impl Servers {
    fn new() -> Servers {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stdio.py"), format!("{RPC}{STDIO}")).unwrap();
        std::fs::write(dir.path().join("http_server.py"), format!("{RPC}{HTTP}")).unwrap();
        Servers {
            dir,
            python: python(),
        }
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.log(name)).ok()
    }

    /// A stdio MCP tool: `remote` of the server in `mode`, logging to
    /// `NAME.log`.
    fn stdio(&self, name: &str, mode: &str, remote: Option<&str>, timeout_ms: u64) -> McpTool {
        McpTool {
            command: Some(vec![
                self.python.clone(),
                self.dir.path().join("stdio.py").display().to_string(),
                mode.into(),
                self.log(name).display().to_string(),
            ]),
            url: None,
            tool: remote.map(str::to_owned),
            timeout_ms,
        }
    }

    /// Start the streamable-HTTP server; its port.
    async fn http(&self) -> (tokio::process::Child, u16) {
        let portfile = self.dir.path().join("port");
        let child = tokio::process::Command::new(&self.python)
            .arg(self.dir.path().join("http_server.py"))
            .arg(&portfile)
            .arg(self.log("http"))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(p) = std::fs::read_to_string(&portfile) {
                return (child, p.trim().parse().unwrap());
            }
            assert!(Instant::now() < deadline, "the HTTP server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_a_stdio_mcp_tool_is_called_only_with_the_capability_and_a_valid_input() {
    let s = Servers::new();
    let org = Org::start(
        "Adders",
        &[mcp_tool(
            "Adder",
            s.stdio("Adder", "serve", Some("add"), 10_000),
            &[("sum", "integer")],
        )],
    )
    .await;
    // Without tool:Adder: not listed, refused, the server never started.
    assert!(!org.names().await.contains(&"Adder".to_owned()));
    let r = org.call("Adder", json!({"a": 2, "b": 3})).await;
    let t = failed(&r, "permission_denied");
    assert!(t.contains("tool Adder"), "{t}");
    assert_eq!(s.read("Adder"), None, "the server never started");
    org.grant("tool", "Adder");
    assert!(org.names().await.contains(&"Adder".to_owned()));
    // Arguments off the schema: refused before the server starts.
    for bad in [
        json!({"a": 2}),
        json!({"a": "2", "b": 3}),
        json!({"a": 2, "b": 3, "c": 1}),
    ] {
        let r = org.call("Adder", bad).await;
        failed(&r, "invalid_input");
    }
    assert_eq!(s.read("Adder"), None, "the server never started");
    let r = org.call("Adder", json!({"a": 2, "b": 3})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(r.structured_content, Some(json!({"sum": 5})));
    let log = s.read("Adder").unwrap();
    assert!(log.contains("call add {\"a\": 2, \"b\": 3}"), "{log}");
    assert_eq!(log.matches("started").count(), 1, "{log}");
    // The server of a finished call is gone.
    let pid: i32 = log
        .lines()
        .find_map(|l| l.strip_prefix("started "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(gone(pid), "the server of a finished call was killed");
    org.stop().await;
}

/// `pid` no longer runs (absent, or a zombie awaiting its reaper).
fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z ") {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_mcp_errors_text_answers_and_hanging_servers() {
    let s = Servers::new();
    let tools = [
        mcp_tool(
            "Failing",
            s.stdio("Failing", "serve", Some("fail"), 10_000),
            &[("sum", "integer")],
        ),
        mcp_tool(
            "Texty",
            s.stdio("Texty", "serve", Some("text"), 10_000),
            &[("text", "string")],
        ),
        // Its own name is the server's tool by default: `add` is not
        // called, the server says it has no tool `Missing`.
        mcp_tool(
            "Missing",
            s.stdio("Missing", "serve", None, 10_000),
            &[("sum", "integer")],
        ),
        mcp_tool(
            "Floods",
            s.stdio("Floods", "flood", Some("add"), 10_000),
            &[("sum", "integer")],
        ),
        mcp_tool(
            "Hangs",
            s.stdio("Hangs", "hang", Some("add"), 500),
            &[("sum", "integer")],
        ),
    ];
    let org = Org::start("Adders", &tools).await;
    for t in ["Failing", "Texty", "Missing", "Floods", "Hangs"] {
        org.grant("tool", t);
    }
    let r = org.call("Failing", json!({"a": 1, "b": 1})).await;
    let t = failed(&r, "failed");
    assert!(t.contains("no such account"), "{t}");
    // The server's text is one line and quoted as a JSON string.
    assert!(t.contains(r#"\"quoted\""#), "{t}");
    assert!(!t.contains('\n'), "{t}");

    let r = org.call("Texty", json!({"a": 1, "b": 1})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(r.structured_content, Some(json!({"text": "plain words"})));

    let r = org.call("Missing", json!({"a": 1, "b": 1})).await;
    let t = failed(&r, "failed");
    // The server's JSON-RPC error, on one line and bounded.
    assert!(t.contains("unknown tool Missing"), "{t}");
    assert!(!t.contains('\n') && t.len() < 2000, "{}", t.len());
    assert!(!s.read("Missing").unwrap().contains("call add"));

    // A server writing more than 4 MiB is cut off and killed.
    let r = org.call("Floods", json!({"a": 1, "b": 1})).await;
    let t = failed(&r, "failed");
    assert!(t.contains("over 4194304 bytes"), "{t}");

    let started = Instant::now();
    let r = org.call("Hangs", json!({"a": 1, "b": 1})).await;
    let t = failed(&r, "timeout");
    assert!(t.contains("500 ms"), "{t}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let log = s.read("Hangs").unwrap();
    let pid: i32 = log
        .lines()
        .find_map(|l| l.strip_prefix("started "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(gone(pid), "the hanging server was killed");
    assert_eq!(org.run_dirs(&org.dir.path().join("home")), 0);
    org.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_a_url_mcp_tool_goes_through_the_egress_rule() {
    let s = Servers::new();
    let (_server, port) = s.http().await;
    let tool = mcp_tool(
        "RemoteAdder",
        McpTool {
            command: None,
            url: Some(format!("http://127.0.0.1:{port}/mcp")),
            tool: Some("add".into()),
            timeout_ms: 10_000,
        },
        &[("sum", "integer")],
    );
    let org = Org::start("Adders", &[tool]).await;
    org.grant("tool", "RemoteAdder");
    // A grant for another port is no grant for this one.
    org.grant("egress", &format!("127.0.0.1:{}", port ^ 1));
    let r = org.call("RemoteAdder", json!({"a": 2, "b": 3})).await;
    let t = failed(&r, "permission_denied");
    assert!(t.contains(&format!("egress:127.0.0.1:{port}")), "{t}");
    assert_eq!(s.read("http"), None, "the server was never reached");
    let log = org.egress_log();
    assert!(
        log.iter()
            .any(|l| l.contains(&format!("egress to 127.0.0.1:{port} refused"))),
        "{log:?}"
    );
    org.grant("egress", &format!("127.0.0.1:{port}"));
    let r = org.call("RemoteAdder", json!({"a": 2, "b": 3})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(r.structured_content, Some(json!({"sum": 5})));
    let http = s.read("http").unwrap();
    assert!(http.contains("POST /mcp"), "{http}");
    assert!(http.contains("call add {\"a\": 2, \"b\": 3}"), "{http}");
    assert!(
        org.egress_log()
            .iter()
            .any(|l| l.contains(&format!("egress to 127.0.0.1:{port} allowed"))),
        "{:?}",
        org.egress_log()
    );
    org.stop().await;
}
