//! Issue 33 item 4, the many-daemons case: three `agency serve` processes
//! (three homes) share one PostgreSQL database; 10,000 messages from the
//! user to 500 handlers, sent through all three daemons, are every one
//! handled, and for every handler no two agent runs overlap in time.
//!
//! The agent is a `command` runtime program (Python, MCP over HTTP to the
//! daemon that started it): it reads its handler's inbox, acknowledges what
//! it read until the inbox is empty, and leaves a record of its run (its
//! daemon, its start and end on the wall clock, the messages it
//! acknowledged). One run handles all the mail waiting for its handler, so
//! the number of runs follows how the mail batches, not the number of
//! messages. The handlers are delegated with their root outcome blocked
//! (waiting for mail): only mail gives them work.
//!
//! Checked from the agents' records and from the store (the user's REST
//! API, as the CLI uses it): every message was acknowledged, by an agent of
//! its handler; no handler has mail, work or a live agent left; the runs
//! the store recorded are exactly the agents that left a record, each
//! ended normally; per handler no two runs overlap, by the agents' clocks
//! and by the store's; every daemon started agents (none is a leader); all
//! three daemons stop cleanly.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use agency_postgres::scratch::{ScratchDb, admin_url};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::home::TestHome;

const HANDLERS: usize = 500;
const PER_HANDLER: usize = 20;
/// Sending threads per daemon (the user's REST API over its socket).
const SENDERS_PER_DAEMON: usize = 2;
/// MCP sessions creating the handlers in parallel.
const CREATORS: usize = 8;

/// The agent: reads and acknowledges its handler's mail until the inbox is
/// empty, rewriting its record (`<out>/<agent>.json`) after every
/// acknowledgement and once more with its end time.
const AGENT: &str = r#"
import http.client, json, os, sys, time
from urllib.parse import urlsplit

start = time.time_ns()
out = sys.argv[1]
env = os.environ
agent, handler, mcp = env["AGENCY_AGENT"], env["AGENCY_HANDLER"], env["AGENCY_MCP_URL"]
url = urlsplit(mcp)
headers = {
    "Authorization": "Bearer " + env["AGENCY_TOKEN"],
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}
conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
ids = iter(range(1, 1 << 30))

def post(body):
    conn.request("POST", url.path, json.dumps(body), headers)
    resp = conn.getresponse()
    data = resp.read().decode()
    if resp.status >= 300:
        sys.exit(f"{body.get('method')}: HTTP {resp.status}: {data[:500]}")
    return resp, data

def rpc(method, params):
    resp, data = post({"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params})
    if resp.getheader("Content-Type", "").startswith("text/event-stream"):
        data = next(l[5:] for l in data.splitlines() if l.startswith("data:") and l[5:].strip())
    msg = json.loads(data)
    if "error" in msg:
        sys.exit(f"{method}: {msg['error']}")
    return resp, msg["result"]

def tool(name, args):
    _, result = rpc("tools/call", {"name": name, "arguments": args})
    text = "".join(c.get("text", "") for c in result.get("content", []))
    if result.get("isError"):
        sys.exit(f"{name}: {text}")
    return json.loads(text)

acked = []

def record(end):
    rec = {"agent": agent, "handler": handler, "daemon": mcp,
           "start_ns": start, "end_ns": end, "acked": acked}
    tmp = os.path.join(out, "." + agent + ".tmp")
    with open(tmp, "w") as f:
        json.dump(rec, f)
    os.replace(tmp, os.path.join(out, agent + ".json"))

resp, init = rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "daemons-three-agent", "version": "1"}})
session = resp.getheader("Mcp-Session-Id")
if session:
    headers["Mcp-Session-Id"] = session
headers["MCP-Protocol-Version"] = init["protocolVersion"]
post({"jsonrpc": "2.0", "method": "notifications/initialized"})

while True:
    page = tool("mail_inbox", {"limit": 1000})
    batch = [m["id"] for m in page["messages"]]
    if not batch:
        break
    tool("mail_ack", {"messages": batch})
    acked.extend(batch)
    record(None)
record(time.time_ns())
"#;

fn scratch() -> ScratchDb {
    let admin = admin_url().expect("AGENCY_TEST_POSTGRES=off: no server for this test");
    ScratchDb::create(&admin).unwrap()
}

/// Every home's `agency.toml`: the shared store with a 5 s lease renewed
/// every 500 ms, and the agent above, several at once per daemon.
fn config(url: &str, script: &Path, out: &Path) -> String {
    let args = [script.display().to_string(), out.display().to_string()];
    format!(
        "[store]\nurl = {url:?}\nlease_ms = 5000\nheartbeat_ms = 500\n\
         [agents]\nruntime = \"command\"\nmax_concurrent = 8\nkill_grace_ms = 300\nsandbox = \"off\"\n\
         [agents.command]\nprogram = \"python3\"\nargs = {args:?}\n"
    )
}

/// The user's REST API of one daemon, over its socket with the home's
/// admin token: what the CLI does, without a process per request.
struct Rest {
    http: reqwest::blocking::Client,
    token: String,
}

impl Rest {
    fn of(home: &TestHome) -> Rest {
        let h = agency_config::Home::new(&home.dir);
        let socket = h.checked_admin_socket().unwrap().expect("no daemon socket");
        let http = reqwest::blocking::Client::builder()
            .unix_socket(socket)
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        Rest {
            http,
            token: h.admin_token().unwrap(),
        }
    }

    fn answer(resp: reqwest::blocking::Response, what: &str) -> Value {
        let status = resp.status();
        let text = resp.text().unwrap();
        assert!(status.is_success(), "{what}: {status}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    fn get(&self, path: &str) -> Value {
        let resp = self
            .http
            .get(format!("http://localhost/v1/{path}"))
            .bearer_auth(&self.token)
            .send()
            .unwrap();
        Self::answer(resp, path)
    }

    fn post(&self, path: &str, body: &Value) -> Value {
        let resp = self
            .http
            .post(format!("http://localhost/v1/{path}"))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .unwrap();
        Self::answer(resp, path)
    }
}

type Client = RunningService<RoleClient, ()>;

async fn connect(url: &str, token: &str) -> Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("MCP initialize")
}

/// Call a tool that must succeed; its JSON answer.
async fn call(client: &Client, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    let r = client.call_tool(params).await.expect(tool);
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert_ne!(r.is_error, Some(true), "{tool}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool}: {e}: {text}"))
}

fn mcp_url(home: &TestHome) -> String {
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(home.dir.join("daemon.json")).unwrap())
            .unwrap();
    format!("http://{}/mcp", info["addr"].as_str().unwrap())
}

/// The root's `HANDLERS` underlings, each delegated with its root outcome
/// blocked (waiting for mail), through the root's MCP tools at `url`.
fn make_handlers(url: &str, token: &str, root: &str) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for c in 0..CREATORS {
            let (url, token, root) = (url.to_owned(), token.to_owned(), root.to_owned());
            tasks.spawn(async move {
                let client = connect(&url, &token).await;
                let mut made = Vec::new();
                for i in (c..HANDLERS).step_by(CREATORS) {
                    let o = call(
                        &client,
                        "outcome_create",
                        json!({"title": format!("mail handler {i}"), "parents": [root]}),
                    )
                    .await;
                    let o = o["outcome"].as_str().unwrap().to_owned();
                    call(
                        &client,
                        "outcome_update",
                        json!({"outcome": o, "status": "blocked", "reason": "waiting for mail"}),
                    )
                    .await;
                    call(&client, "delegate", json!({"outcome": o})).await;
                    made.push((i, o));
                }
                made
            });
        }
        let mut all: Vec<(usize, String)> = Vec::new();
        while let Some(made) = tasks.join_next().await {
            all.extend(made.unwrap());
        }
        all.sort();
        all.into_iter().map(|(_, h)| h).collect()
    })
}

/// One agent run as its agent recorded it.
#[derive(Debug, Clone)]
struct Record {
    agent: String,
    handler: String,
    daemon: String,
    start_ns: u128,
    end_ns: Option<u128>,
    acked: Vec<String>,
}

fn records(dir: &Path) -> Vec<Record> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().into_string().unwrap();
        if !name.ends_with(".json") {
            continue;
        }
        let v: Value = serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let s = |k: &str| v[k].as_str().unwrap().to_owned();
        out.push(Record {
            agent: s("agent"),
            handler: s("handler"),
            daemon: s("daemon"),
            start_ns: v["start_ns"].as_u64().unwrap().into(),
            end_ns: v["end_ns"].as_u64().map(u128::from),
            acked: v["acked"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_str().unwrap().to_owned())
                .collect(),
        });
    }
    out
}

/// The last `n` bytes of `text`.
fn tail(text: &str, n: usize) -> &str {
    let cut = text.len().saturating_sub(n);
    let cut = (cut..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    &text[cut..]
}

/// The last part of every daemon's log, for a failure's message.
fn logs(homes: &[&TestHome]) -> String {
    homes
        .iter()
        .map(|h| {
            let log = std::fs::read_to_string(h.dir.join("logs/daemon.log")).unwrap_or_default();
            format!(
                "--- {}\n{}{}",
                h.dir.display(),
                tail(&h.log(), 2000),
                tail(&log, 6000)
            )
        })
        .collect()
}

/// What the store says of the handlers that still have mail, work or an
/// agent, and the runs of the first few: for a failure's message.
fn stuck(home: &TestHome, rest: &Rest, handlers: &HashSet<&str>) -> String {
    let view = home.json(&["handlers"]);
    let busy: Vec<&Value> = view
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| handlers.contains(h["id"].as_str().unwrap()))
        .filter(|h| h["inbox_depth"] != 0 || !h["live_agent"].is_null() || h["has_work"] != false)
        .collect();
    let mut out = format!("{} handlers not idle\n", busy.len());
    for h in busy.iter().take(3) {
        let id = h["id"].as_str().unwrap();
        out += &format!(
            "{h}\nruns: {}\n",
            rest.get(&format!("runs?handler={id}&limit=5"))
        );
    }
    out += &format!("problems: {}\n", home.json(&["problems"]));
    out
}

/// Intervals `(start, end, id)` of one handler's runs that overlap: pairs
/// of neighbours, by start, where the later starts before the earlier ends.
fn overlaps<T: Ord + Copy>(mut runs: Vec<(T, T, String)>) -> Vec<String> {
    runs.sort();
    runs.windows(2)
        .filter(|w| w[1].0 < w[0].1)
        .map(|w| format!("{} overlaps {}", w[0].2, w[1].2))
        .collect()
}

#[test]
fn three_daemons_handle_10000_messages_to_500_handlers_without_overlapping_runs() {
    let t0 = Instant::now();
    let db = scratch();
    let url = db.url();
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("agent.py");
    std::fs::write(&script, AGENT).unwrap();
    let out = work.path().join("runs");
    std::fs::create_dir(&out).unwrap();

    let homes = [TestHome::new(), TestHome::new(), TestHome::new()];
    for h in &homes {
        let init = h
            .command(&["init", "--no-budget"])
            .env("AGENCY_STORE_URL", url)
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        std::fs::write(h.dir.join("agency.toml"), config(url, &script, &out)).unwrap();
    }
    let daemons: Vec<_> = homes.iter().map(TestHome::serve).collect();
    let all: Vec<&TestHome> = homes.iter().collect();
    let root = homes[0].root();
    for h in &homes[1..] {
        assert_eq!(h.root(), root, "one organisation");
    }
    let urls: Vec<String> = homes.iter().map(mcp_url).collect();

    let token = homes[0].mint(&root);
    let handlers = make_handlers(&urls[0], &token, &root);
    assert_eq!(handlers.len(), HANDLERS);
    let made = t0.elapsed();
    eprintln!("daemons_three: {HANDLERS} handlers made in {made:?}");

    // Message k goes to handler k % HANDLERS through daemon k % 3, so that
    // every handler gets mail through every daemon, spread over the run.
    let t1 = Instant::now();
    let rests: Vec<Rest> = homes.iter().map(Rest::of).collect();
    let total = HANDLERS * PER_HANDLER;
    let senders = SENDERS_PER_DAEMON * homes.len();
    let sent: HashMap<String, String> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..senders)
            .map(|t| {
                let (rests, handlers) = (&rests, &handlers);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for k in (t..total).step_by(senders) {
                        let to = &handlers[k % HANDLERS];
                        let v = rests[k % rests.len()].post(
                            "mail",
                            &json!({"to": to, "text": format!("message {k}"), "subject": format!("m{k}")}),
                        );
                        mine.push((v["message"].as_str().unwrap().to_owned(), to.clone()));
                    }
                    mine
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    assert_eq!(sent.len(), total, "every send gave a message id of its own");
    let sending = t1.elapsed();
    eprintln!("daemons_three: {total} messages sent in {sending:?}");

    // Until no handler has mail, work or an agent left: nothing more can
    // happen then (a generous bound: a hang fails).
    let deadline = Instant::now() + Duration::from_secs(600);
    let handler_set: HashSet<&str> = handlers.iter().map(String::as_str).collect();
    let mut report = Instant::now();
    let view = loop {
        let view = homes[1].json(&["handlers"]);
        let ours: Vec<Value> = view
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| handler_set.contains(h["id"].as_str().unwrap()))
            .cloned()
            .collect();
        let idle = |h: &Value| {
            h["live_agent"].is_null() && h["has_work"] == false && h["inbox_depth"] == 0
        };
        if ours.iter().all(idle) {
            break ours;
        }
        assert!(
            Instant::now() < deadline,
            "the handlers did not settle: {}\n{}",
            stuck(&homes[1], &rests[1], &handler_set),
            logs(&all)
        );
        if report.elapsed() > Duration::from_secs(15) {
            let recs = records(&out);
            let acked: HashSet<&String> = recs.iter().flat_map(|r| r.acked.iter()).collect();
            eprintln!(
                "daemons_three: {:?}: {} of {total} handled, {} runs",
                t1.elapsed(),
                acked.len(),
                recs.len()
            );
            report = Instant::now();
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    let handling = t1.elapsed();
    assert_eq!(view.len(), HANDLERS, "{view:?}");
    for h in &view {
        assert!(h["stalled"].is_null(), "{h}");
    }

    // The store's run records: every run ended normally (a daemon that
    // stopped a healthy agent would show here, with its reason), and no
    // two of one handler overlap.
    let recs = records(&out);
    let mut by_handler: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in &recs {
        by_handler.entry(&r.handler).or_default().push(r);
    }
    let mut store_overlaps = Vec::new();
    let mut store_runs = 0;
    for (i, h) in handlers.iter().enumerate() {
        let runs = rests[i % rests.len()].get(&format!("runs?handler={h}&limit=1000"));
        let runs = runs.as_array().unwrap();
        for r in runs {
            assert_eq!(r["live"], false, "{r}");
            assert_eq!(r["normal"], true, "a run ended abnormally: {r}");
            assert_eq!(r["exit_status"], 0, "{r}");
        }
        // Exactly the agents that left a record: none ran unrecorded.
        let agents: HashSet<&str> = runs.iter().map(|r| r["agent"].as_str().unwrap()).collect();
        let recorded: HashSet<&str> = by_handler
            .get(h.as_str())
            .map(|rs| rs.iter().map(|r| r.agent.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(agents, recorded, "handler {h}: store runs {runs:?}");
        store_runs += runs.len();
        store_overlaps.extend(overlaps(
            runs.iter()
                .map(|r| {
                    (
                        r["started_at"].as_i64().unwrap(),
                        r["ended_at"].as_i64().unwrap(),
                        r["agent"].as_str().unwrap().to_owned(),
                    )
                })
                .collect(),
        ));
    }
    assert!(
        store_overlaps.is_empty(),
        "runs of one handler overlapped (the store's records):\n{}",
        store_overlaps.join("\n")
    );
    assert_eq!(store_runs, recs.len());

    // Every message, as the store has it (asked of all three daemons):
    // delivered to its handler and acknowledged.
    let ids: Vec<(&String, &String)> = sent.iter().collect();
    std::thread::scope(|s| {
        for (t, chunk) in ids.chunks(total.div_ceil(senders)).enumerate() {
            let rest = &rests[t % rests.len()];
            s.spawn(move || {
                for (m, to) in chunk {
                    let v = rest.get(&format!("mail/{m}"));
                    assert_eq!(v["to"]["id"].as_str(), Some(to.as_str()), "{v}");
                    assert!(!v["acked_at"].is_null(), "not acknowledged: {v}");
                }
            });
        }
    });

    // The agents' records: each run ended, acknowledged only its own
    // handler's mail, and every message was acknowledged by some run.
    let mut acked_by: HashMap<&str, Vec<&str>> = HashMap::new();
    for r in &recs {
        assert!(r.end_ns.is_some(), "a run did not finish: {r:?}");
        for m in &r.acked {
            let to = sent
                .get(m)
                .unwrap_or_else(|| panic!("{} acknowledged a message nobody sent: {m}", r.agent));
            assert_eq!(to, &r.handler, "{r:?}");
            acked_by.entry(m).or_default().push(&r.agent);
        }
    }
    let missing: Vec<&String> = sent
        .keys()
        .filter(|m| !acked_by.contains_key(m.as_str()))
        .collect();
    assert!(missing.is_empty(), "never handled: {missing:?}");
    let twice = acked_by.values().filter(|a| a.len() > 1).count();

    // Per handler, no two runs overlap by the agents' own clocks.
    let mut overlapping = Vec::new();
    for runs in by_handler.values() {
        overlapping.extend(overlaps(
            runs.iter()
                .map(|r| (r.start_ns, r.end_ns.unwrap(), r.agent.clone()))
                .collect(),
        ));
    }
    assert!(
        overlapping.is_empty(),
        "runs of one handler overlapped (agents' clocks):\n{}",
        overlapping.join("\n")
    );
    // Every daemon started agents: none is a leader.
    let mut per_daemon: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &recs {
        *per_daemon.entry(&r.daemon).or_default() += 1;
    }
    for u in &urls {
        assert!(
            per_daemon.get(u.as_str()).copied().unwrap_or(0) > 0,
            "daemon {u} started no agent: {per_daemon:?}"
        );
    }
    assert_eq!(per_daemon.len(), urls.len(), "{per_daemon:?}");

    for (d, h) in daemons.into_iter().zip(&homes) {
        let status = d.terminate();
        assert!(
            status.success(),
            "{} exited with {status}:\n{}",
            h.dir.display(),
            h.log()
        );
    }
    eprintln!(
        "daemons_three: {HANDLERS} handlers made in {made:?}; {total} messages sent in {sending:?}, \
         all handled {handling:?} after the first send; {} agent runs ({per_daemon:?} per daemon), \
         {twice} messages acknowledged by more than one run; {:?} in all",
        recs.len(),
        t0.elapsed()
    );
}
