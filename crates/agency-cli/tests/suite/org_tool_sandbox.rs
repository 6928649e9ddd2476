//! Issue 12 item 4, the powers of an organisation's command tool, against
//! the real `agency serve` with the sandbox on: a folder of sources (an
//! `.agency`, an `.agent` holding the tool, a `.tool` of `type: command`
//! running a Python probe beside it) stood up with `agency up`, and the
//! tool called over MCP with a token of the agent's handler. The probe
//! (one script, told what to try by its input) plays a hostile tool; each
//! attempt the sandbox must refuse is paired with one it must allow, made
//! by the same script in the same run, so that a probe that cannot do
//! anything passes nothing:
//!
//! 1. writing the daemon's home, a directory outside, or its own source
//!    folder fails; its HOME and TMPDIR (private) are writable, its
//!    working directory is its source folder, readable;
//! 2. reading `admin.token` or `agency.db` fails; reading its own source
//!    and `/etc/passwd` works; a source folder holding the home is refused;
//! 3. a TCP connection to a local listener or to the daemon's port fails,
//!    to the egress proxy works; through the proxy, a host the handler has
//!    no `egress:` for is refused (403, audited, never reached) and works
//!    once `egress:HOST:PORT` is granted;
//! 4. a child in a session of its own, alive during the call, is gone
//!    when the call returns, whether or not it holds the tool's stdout;
//! 5. more than 4 MiB of stdout, or output that never ends, is an error
//!    and the daemon answers on; 1 MiB is fine;
//! 6. its environment holds neither the agent's token, the admin token
//!    nor anything of the daemon's environment.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agency_testkit::sandbox::sandbox_toml;
use agent_story::{Story, agency, alive, json};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// The hostile tool: reads `{"op", "arg"}`, tries it, answers `{"ok":
/// whether it worked, "detail": what came of it}` (an exception's type and
/// message when it did not).
const PROBE: &str = r#"import base64, json, os, socket, subprocess, sys, time, urllib.parse

def write(path):
    path = os.path.expandvars(path)
    with open(path, "w") as f:
        f.write("planted")
    with open(path) as f:
        return f.read()

def read(path):
    with open(path, "rb") as f:
        return f.read(200).decode("utf-8", "replace")

def proxy():
    return urllib.parse.urlsplit(os.environ["HTTP_PROXY"])

def connect(target):
    if target == "proxy":
        host, port = proxy().hostname, proxy().port
    else:
        host, port = target.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=3)
    s.close()
    return "connected"

def fetch(url):
    p = proxy()
    auth = base64.b64encode(f"{p.username}:{p.password}".encode()).decode()
    s = socket.create_connection((p.hostname, p.port), timeout=5)
    host = urllib.parse.urlsplit(url).netloc
    s.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\nProxy-Authorization: Basic {auth}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode()
    if " 200 " not in status:
        raise RuntimeError(status)
    return body.decode()

def fork(mode):
    # A session of its own: out of the tool's process group.
    out = subprocess.DEVNULL if mode == "quiet" else None
    p = subprocess.Popen(["sleep", "300"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    time.sleep(0.1)
    os.kill(p.pid, 0)
    return str(p.pid)

def where(_):
    return json.dumps({"cwd": os.getcwd(), "home": os.environ.get("HOME"),
                       "tmp": os.environ.get("TMPDIR")})

def env(_):
    return json.dumps(dict(os.environ))

req = json.load(sys.stdin)
op, arg = req["op"], req["arg"]
if op == "big":
    sys.stdout.write(json.dumps({"ok": True, "detail": "x" * int(arg)}))
    sys.exit(0)
if op == "endless":
    while True:
        sys.stdout.write("x" * 65536)
ops = {"write": write, "read": read, "connect": connect, "fetch": fetch,
       "fork": fork, "where": where, "env": env}
try:
    ok, detail = True, ops[op](arg)
except Exception as e:
    ok, detail = False, f"{type(e).__name__}: {e}"
print(json.dumps({"ok": ok, "detail": detail}))
"#;

/// Write the organisation's sources into `src`.
fn sources(src: &Path) {
    std::fs::create_dir_all(src).unwrap();
    let files = [
        (
            "ProbeAgency.agency",
            "# Agency Name: ProbeAgency\nProbes the sandbox of command tools.\n\n## Executive Agent\nThe executive agent is Prober.\n\n## Tools\n- Probe\n",
        ),
        (
            "Prober.agent",
            "# Agent Name: Prober\nTitle: Prober\n\n## Tools\n- Probe\n",
        ),
        (
            "Probe.tool",
            "---\ntype: command\ncommand: python3 probe.py\ntimeout_ms: 4000\ninput: {op: string, arg: string}\noutput: {ok: boolean, detail: string}\n---\n# Tool Name: Probe\nTries one thing in the sandbox it runs in.\n",
        ),
        ("probe.py", PROBE),
    ];
    for (name, text) in files {
        std::fs::write(src.join(name), text).unwrap();
    }
}

type Client = RunningService<RoleClient, ()>;

/// A daemon with the sandbox on and ProbeAgency up; an MCP client of an
/// agent of Prober's handler.
struct Org {
    story: Story,
    /// The source folder (canonical).
    src: PathBuf,
    /// Prober's handler.
    handler: String,
    /// The agent's token the client holds.
    token: String,
    client: Client,
}

/// What the probe reported, or the call's error text.
#[derive(Debug)]
enum Probe {
    Ok(String),
    Refused(String),
    Error(String),
}

impl Org {
    /// Start with `marker` in the daemon's environment.
    async fn start(marker: &str) -> Org {
        let cfg = format!(
            "[agents]\nruntime = \"command\"\nrespawn_backoff_ms = 3600000\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", \"exec sleep 300\"]\n{}",
            sandbox_toml(&[])
        );
        let story = Story::start_with_env(
            &cfg,
            Duration::from_secs(60),
            &[("LEAK_DAEMON_MARKER", marker)],
        )
        .await;
        let src = story.tmp.path().canonicalize().unwrap().join("org");
        sources(&src);
        let (code, out, err) = agency(&story.home, &["--json", "up", src.to_str().unwrap()]);
        assert_eq!(code, 0, "agency up: {out}{err}");
        let up: Value = serde_json::from_str(&out).unwrap();
        let handler = up["executive"].as_str().unwrap().to_owned();
        assert_eq!(json(&story.home, &["status"])["sandbox"], "on");
        let (code, token, err) = agency(&story.home, &["token", "mint", "--handler", &handler]);
        assert_eq!(code, 0, "{err}");
        let token = token.trim().to_owned();
        let cfg =
            StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", addr(&story)))
                .auth_header(token.clone());
        let client = ().serve(StreamableHttpClientTransport::from_config(cfg)).await.unwrap();
        Org {
            story,
            src,
            handler,
            token,
            client,
        }
    }

    async fn call(&self, op: &str, arg: &str) -> CallToolResult {
        let Value::Object(args) = json!({"op": op, "arg": arg}) else {
            unreachable!()
        };
        self.client
            .call_tool(CallToolRequestParams::new("Probe").with_arguments(args))
            .await
            .unwrap_or_else(|e| panic!("Probe {op}: protocol error {e}"))
    }

    async fn probe(&self, op: &str, arg: &str) -> Probe {
        let r = self.call(op, arg).await;
        if r.is_error == Some(true) {
            return Probe::Error(text(&r));
        }
        let out = r.structured_content.clone().unwrap();
        let detail = out["detail"].as_str().unwrap().to_owned();
        if out["ok"] == true {
            Probe::Ok(detail)
        } else {
            Probe::Refused(detail)
        }
    }

    /// The probe must succeed (a control); what it answered.
    async fn allowed(&self, op: &str, arg: &str) -> String {
        match self.probe(op, arg).await {
            Probe::Ok(d) => d,
            other => panic!(
                "control {op} {arg} failed: {other:?}\nlog:\n{}",
                self.story.log()
            ),
        }
    }

    /// The probe must run and be refused by the sandbox (permission
    /// denied, not a probe that could not find its target).
    async fn refused(&self, op: &str, arg: &str) -> String {
        match self.probe(op, arg).await {
            Probe::Refused(d) => {
                assert!(
                    d.starts_with("PermissionError") || d.contains("403"),
                    "{op} {arg} failed, but not for want of permission: {d}"
                );
                d
            }
            other => panic!("{op} {arg} was not refused: {other:?}"),
        }
    }

    /// The call must fail as a whole; its error text.
    async fn failed(&self, op: &str, arg: &str) -> String {
        match self.probe(op, arg).await {
            Probe::Error(t) => t,
            other => panic!("{op} {arg} did not fail: {other:?}"),
        }
    }

    fn audit(&self) -> Vec<String> {
        json(&self.story.home, &["audit", &self.handler[..8]])
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["summary"].as_str().map(str::to_owned))
            .collect()
    }

    /// The daemon still answers, and a tool call still works.
    async fn healthy(&self) {
        let (code, _, err) = agency(&self.story.home, &["status"]);
        assert_eq!(code, 0, "the daemon does not answer: {err}");
        self.allowed("read", "/etc/passwd").await;
    }

    async fn stop(self) {
        let _ = self.client.cancel().await;
        // Every private directory of a tool run was deleted (an agent's
        // waiting standby sandbox, `run/standby-<id>` without the
        // runtime's files, is no tool's).
        let left: Vec<_> = std::fs::read_dir(self.story.home.join("run"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        !e.file_name().to_string_lossy().starts_with("standby-")
                            || e.path().join("run/prompt.md").exists()
                    })
                    .map(|e| e.file_name())
                    .collect()
            })
            .unwrap_or_default();
        assert!(left.is_empty(), "left in run/: {left:?}");
        self.story.stop();
    }
}

fn addr(story: &Story) -> String {
    json(&story.home, &["status"])["addr"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Attacks 1, 2 and 6: the file system and the environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_a_command_tool_keeps_to_its_own_files_and_sees_no_secret() {
    let marker = format!("daemon-env-{}", uuid::Uuid::new_v4().simple());
    let org = Org::start(&marker).await;
    let home = org.story.home.canonicalize().unwrap();
    let outside = org.story.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();

    // Where it runs: its source folder, with a private HOME and TMPDIR in
    // the home's run/ (only its own).
    let place: Value = serde_json::from_str(&org.allowed("where", "").await).unwrap();
    assert_eq!(place["cwd"], s(&org.src), "{place}");
    for k in ["home", "tmp"] {
        let p = place[k].as_str().unwrap();
        let private = home.join("run");
        assert!(
            p.starts_with(&format!("{}/tool-", private.display())),
            "{k}: {place}"
        );
    }
    // 1. Writing: its HOME and TMPDIR yes; the home, a directory outside,
    // /tmp and its own source folder no.
    for var in ["$HOME", "$TMPDIR"] {
        assert_eq!(
            org.allowed("write", &format!("{var}/mine")).await,
            "planted"
        );
    }
    let tmp_escape = PathBuf::from(format!(
        "/tmp/agency-toolsbox-{}",
        uuid::Uuid::new_v4().simple()
    ));
    for target in [
        home.join("evil"),
        home.join("run").join("evil"),
        outside.join("escaped"),
        tmp_escape.clone(),
        org.src.join("evil"),
        org.src.join("probe.py"),
    ] {
        org.refused("write", s(&target)).await;
    }
    assert!(!home.join("evil").exists() && !outside.join("escaped").exists());
    assert!(!tmp_escape.exists() && !org.src.join("evil").exists());
    assert_eq!(
        std::fs::read_to_string(org.src.join("probe.py")).unwrap(),
        PROBE
    );
    // 2. Reading: its own source and the system yes; the home's secrets no.
    assert!(org.allowed("read", "probe.py").await.contains("import"));
    assert!(org.allowed("read", "/etc/passwd").await.contains("root"));
    for secret in ["admin.token", "agency.db", "agency.toml"] {
        org.refused("read", s(&home.join(secret))).await;
    }
    // 6. Its environment: none of the tokens, nothing of the daemon's.
    let env: Value = serde_json::from_str(&org.allowed("env", "").await).unwrap();
    let admin = std::fs::read_to_string(home.join("admin.token")).unwrap();
    let admin = admin.trim();
    assert!(!admin.is_empty() && !org.token.is_empty());
    for (k, v) in env.as_object().unwrap() {
        let v = v.as_str().unwrap();
        for secret in [admin, org.token.as_str(), marker.as_str(), "agk_"] {
            assert!(!v.contains(secret), "{k}={v} holds a secret");
        }
        assert!(!k.starts_with("AGENCY_"), "{k}={v}");
    }
    assert!(env["HTTP_PROXY"].as_str().unwrap().contains("tool:agt_"));

    // A source folder holding the home (here the folder above it, as a
    // model JSON may say): the tool is not run with the home readable.
    let model = org.story.tmp.path().join("model.json");
    let (code, out, err) = agency(&org.story.home, &["compile", s(&org.src), "-o", s(&model)]);
    assert_eq!(code, 0, "{out}{err}");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&model).unwrap()).unwrap();
    let above = org.story.tmp.path().canonicalize().unwrap();
    m["tools"][0]["implementation"]["dir"] = json!(s(&above));
    m["tools"][0]["implementation"]["command"] = json!(["python3", "org/probe.py"]);
    std::fs::write(&model, m.to_string()).unwrap();
    let (code, out, err) = agency(&org.story.home, &["up", s(&model)]);
    assert_eq!(code, 0, "{out}{err}");
    let t = org.failed("read", "home/admin.token").await;
    assert!(
        t.contains("the tool's folder") && t.contains("holds the Agency home"),
        "{t}"
    );
    org.stop().await;
}

/// A loopback HTTP server standing for a host on the internet: counts
/// connections, answers 200 `seen PATH`.
fn external() -> (Arc<AtomicUsize>, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let c = connections.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            c.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap_or(0) == 1 {
                head.push(b[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let body = format!("seen {}", head.split(' ').nth(1).unwrap_or(""));
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (connections, port)
}

/// Attack 3: the network is the egress proxy, and the proxy decides by
/// the calling agent's handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_a_command_tool_reaches_the_network_only_through_the_egress_rule() {
    let org = Org::start("unused").await;
    let (connections, port) = external();
    let target = format!("127.0.0.1:{port}");
    // Directly: neither the listener nor the daemon's own port; the proxy
    // is the one way out.
    org.refused("connect", &target).await;
    org.refused("connect", &addr(&org.story)).await;
    assert_eq!(org.allowed("connect", "proxy").await, "connected");
    assert_eq!(connections.load(Ordering::SeqCst), 0);
    // Through the proxy, without egress: 403, audited, never reached.
    let url = format!("http://{target}/hello");
    let d = org.refused("fetch", &url).await;
    assert!(d.contains("403"), "{d}");
    assert_eq!(connections.load(Ordering::SeqCst), 0);
    let refused = format!("egress to {target} refused");
    assert!(
        org.audit().iter().any(|l| l.contains(&refused)),
        "{:?}",
        org.audit()
    );
    // Granted to the handler: the same call gets through.
    let (code, _, err) = agency(
        &org.story.home,
        &["grant", &org.handler, &format!("egress:{target}"), "read"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(org.allowed("fetch", &url).await, "seen /hello");
    assert_eq!(connections.load(Ordering::SeqCst), 1);
    let allowed = format!("egress to {target} allowed");
    assert!(
        org.audit().iter().any(|l| l.contains(&allowed)),
        "{:?}",
        org.audit()
    );
    org.stop().await;
}

/// Attacks 4 and 5: nothing of a run outlives its call, and its output
/// is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_a_command_tool_leaves_nothing_running_and_its_output_is_bounded() {
    let org = Org::start("unused").await;
    // A child in a session of its own, alive when the tool answered (the
    // probe checked), is gone when the call returns: with its stdout
    // elsewhere, and holding the tool's stdout (the call does not wait
    // for it to let go).
    for mode in ["quiet", "loud"] {
        let started = Instant::now();
        let pid: u32 = org.allowed("fork", mode).await.parse().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{mode}: the call waited for the child: {:?}",
            started.elapsed()
        );
        assert!(
            !alive(pid),
            "{mode}: the tool's child {pid} outlived the call"
        );
    }
    // Output: 1 MiB is an answer; over 4 MiB, or endless, an error.
    assert_eq!(org.allowed("big", "1048576").await.len(), 1 << 20);
    let t = org.failed("big", &(5 << 20).to_string()).await;
    assert!(t.contains("over 4194304 bytes"), "{t}");
    org.healthy().await;
    let started = Instant::now();
    let t = org.failed("endless", "").await;
    assert!(t.starts_with("[timeout]"), "{t}");
    assert!(started.elapsed() < Duration::from_secs(15));
    org.healthy().await;
    org.stop().await;
}
