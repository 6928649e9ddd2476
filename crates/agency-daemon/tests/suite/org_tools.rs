//! Issue 12 item 4, against a real daemon (port 0) and an MCP client with
//! an agent's token: seed 002's WeatherTool as an HTTP tool, called against
//! a loopback stand-in for the weather API; and command tools. Attacks: no
//! `tool:` capability (not listed, refused), no egress (refused, audited,
//! no connection), input that does not match the schema (refused before
//! any request), an answer that does not match the output schema, path
//! parameters that try to add segments, a query or a fragment, a revoked
//! capability, a command that fails, answers badly or hangs.
//!
//! Unconfined (`agents.sandbox = "off"`): an in-process daemon's
//! executable is this test binary, not `agency`, so it cannot run
//! `agency sandbox-exec`.

#![allow(clippy::unwrap_used)]

use crate::org_client;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agency_core::Principal;
use agency_org::{CommandTool, HttpTool, SourceRef, Tool, ToolImplementation, ToolInterface};
use org_client::{Org, failed, text};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A loopback stand-in for the weather API: counts connections, keeps
/// each request's head, answers `answer` as JSON.
#[derive(Clone)]
struct Weather {
    connections: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
    answer: Arc<Mutex<String>>,
}

impl Weather {
    async fn start(answer: Value) -> (Weather, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let w = Weather {
            connections: Arc::default(),
            heads: Arc::default(),
            answer: Arc::new(Mutex::new(answer.to_string())),
        };
        let w2 = w.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                w2.connections.fetch_add(1, Ordering::SeqCst);
                let w = w2.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while !buf.windows(4).any(|x| x == b"\r\n\r\n") {
                        let mut chunk = [0u8; 4096];
                        let n = s.read(&mut chunk).await.unwrap();
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    w.heads
                        .lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&buf).into_owned());
                    let body = w.answer.lock().unwrap().clone();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    s.write_all(head.as_bytes()).await.unwrap();
                    s.write_all(body.as_bytes()).await.unwrap();
                    let _ = s.shutdown().await;
                });
            }
        });
        (w, addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The request lines seen (`GET /current?location=… HTTP/1.1`).
    fn lines(&self) -> Vec<String> {
        self.heads
            .lock()
            .unwrap()
            .iter()
            .map(|h| h.lines().next().unwrap().to_owned())
            .collect()
    }
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

/// Seed 002's WeatherTool, pointed at `addr`.
fn weather_tool(addr: SocketAddr, endpoint: &str) -> Tool {
    Tool {
        name: "WeatherTool".into(),
        description: "Tool calls external weather API.".into(),
        implementation: ToolImplementation::Http(HttpTool {
            base_url: format!("http://{addr}"),
            endpoint: endpoint.into(),
            method: "GET".into(),
            query: if endpoint.contains('{') {
                vec![]
            } else {
                vec!["location".into()]
            },
            body: vec![],
            output: BTreeMap::new(),
            headers: BTreeMap::new(),
            timeout_ms: 5000,
        }),
        interface: interface(
            &[("location", "string")],
            &[("temp", "number"), ("conditions", "string")],
        ),
        egress: vec![],
        source: SourceRef {
            file: "WeatherTool.tool".into(),
            line: 1,
        },
    }
}

fn command_tool(name: &str, script: &str, timeout_ms: u64, out: &[(&str, &str)]) -> Tool {
    Tool {
        name: name.into(),
        description: format!("{name}: a command tool"),
        implementation: ToolImplementation::Command(CommandTool {
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            timeout_ms,
            env: Default::default(),
            dir: None,
        }),
        interface: interface(&[("location", "string")], out),
        egress: vec![],
        source: SourceRef {
            file: format!("{name}.tool"),
            line: 1,
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_weather_tool_is_listed_and_called_through_the_egress_rule() {
    let (w, addr) = Weather::start(json!({"temp": 21.5, "conditions": "sunny", "extra": 1})).await;
    let org = Org::start("WeatherAgency", &[weather_tool(addr, "/current")]).await;
    org.grant("tool", "WeatherTool");
    org.grant("egress", &addr.to_string());
    let tools = org.client.list_all_tools().await.unwrap();
    let t = tools.iter().find(|t| t.name == "WeatherTool").unwrap();
    assert_eq!(
        t.input_schema["properties"]["location"]["type"],
        json!("string")
    );
    assert!(t.output_schema.is_some());
    let r = org
        .call("WeatherTool", json!({"location": "New York"}))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    // The output is what the interface names, nothing more.
    assert_eq!(
        r.structured_content,
        Some(json!({"temp": 21.5, "conditions": "sunny"}))
    );
    assert_eq!(w.lines(), ["GET /current?location=New+York HTTP/1.1"]);
    let log = org.egress_log();
    assert!(
        log.iter()
            .any(|l| l.contains(&format!("egress to {addr} allowed"))),
        "{log:?}"
    );
    org.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_without_the_tool_capability_not_listed_and_refused() {
    let (w, addr) = Weather::start(json!({"temp": 1, "conditions": "x"})).await;
    let org = Org::start("WeatherAgency", &[weather_tool(addr, "/current")]).await;
    org.grant("egress", &addr.to_string());
    assert!(!org.names().await.contains(&"WeatherTool".to_owned()));
    assert!(org.names().await.contains(&"kb_read".to_owned()));
    let r = org.call("WeatherTool", json!({"location": "x"})).await;
    let t = failed(&r, "permission_denied");
    assert!(t.contains("tool WeatherTool"), "{t}");
    // Granted, used, revoked: the next call is refused and it is gone
    // from the list.
    let cap = org.grant("tool", "WeatherTool");
    assert!(org.names().await.contains(&"WeatherTool".to_owned()));
    let r = org.call("WeatherTool", json!({"location": "x"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    org.svc.revoke(Principal::User, cap).unwrap();
    let r = org.call("WeatherTool", json!({"location": "x"})).await;
    failed(&r, "permission_denied");
    assert!(!org.names().await.contains(&"WeatherTool".to_owned()));
    assert_eq!(w.connections(), 1, "only the granted call reached the API");
    org.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_without_egress_the_http_call_is_refused_and_audited() {
    let (w, addr) = Weather::start(json!({"temp": 1, "conditions": "x"})).await;
    let org = Org::start("WeatherAgency", &[weather_tool(addr, "/current")]).await;
    org.grant("tool", "WeatherTool");
    // A grant for another port is no grant for this one.
    org.grant("egress", &format!("127.0.0.1:{}", addr.port() ^ 1));
    let r = org.call("WeatherTool", json!({"location": "x"})).await;
    let t = failed(&r, "permission_denied");
    assert!(t.contains(&format!("egress:{addr}")), "{t}");
    assert_eq!(w.connections(), 0);
    let log = org.egress_log();
    assert!(
        log.iter()
            .any(|l| l.contains(&format!("egress to {addr} refused"))),
        "{log:?}"
    );
    org.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_input_and_output_are_held_to_the_interface() {
    let (w, addr) = Weather::start(json!({"temp": "hot", "conditions": "x"})).await;
    let org = Org::start("WeatherAgency", &[weather_tool(addr, "/current")]).await;
    org.grant("tool", "WeatherTool");
    org.grant("egress", &addr.to_string());
    for bad in [
        json!({"location": "x", "extra": 1}),
        json!({"location": 3}),
        json!({}),
    ] {
        let r = org.call("WeatherTool", bad.clone()).await;
        failed(&r, "invalid_input");
    }
    assert_eq!(w.connections(), 0, "nothing was sent for a bad input");
    // The API answers a string where the interface says number.
    let r = org.call("WeatherTool", json!({"location": "x"})).await;
    let t = failed(&r, "invalid_output");
    assert!(t.contains("/temp"), "{t}");
    assert!(!t.contains("hot"), "the answer is not passed on: {t}");
    // A field missing from the answer is named.
    *w.answer.lock().unwrap() = json!({"temp": 3}).to_string();
    let r = org.call("WeatherTool", json!({"location": "x"})).await;
    let t = failed(&r, "invalid_output");
    assert!(t.contains("conditions"), "{t}");
    org.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_path_parameters_are_encoded_not_injected() {
    let (w, addr) = Weather::start(json!({"temp": 1, "conditions": "x"})).await;
    let org = Org::start(
        "WeatherAgency",
        &[weather_tool(addr, "/city/{location}/now")],
    )
    .await;
    org.grant("tool", "WeatherTool");
    org.grant("egress", &addr.to_string());
    let r = org
        .call("WeatherTool", json!({"location": "../admin?x=1#f"}))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(w.lines(), ["GET /city/..%2Fadmin%3Fx%3D1%23f/now HTTP/1.1"]);
    let r = org.call("WeatherTool", json!({"location": ".."})).await;
    failed(&r, "invalid_input");
    assert_eq!(w.connections(), 1);
    org.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_command_tools_get_json_on_stdin_and_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let tools = [
        // Echoes its input: the output schema is the input's.
        command_tool("Echo", "cat", 5000, &[("location", "string")]),
        command_tool(
            "Liar",
            "cat >/dev/null; echo '{\"location\": 5}'",
            5000,
            &[("location", "string")],
        ),
        command_tool(
            "Broken",
            "echo 'the API key is missing' >&2; exit 3",
            5000,
            &[("location", "string")],
        ),
        command_tool(
            "Hangs",
            &format!("echo $$ > {}; exec sleep 30", pidfile.display()),
            300,
            &[("location", "string")],
        ),
    ];
    let org = Org::start("WeatherAgency", &tools).await;
    for t in ["Echo", "Liar", "Broken", "Hangs"] {
        org.grant("tool", t);
    }
    let r = org.call("Echo", json!({"location": "Paris"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(r.structured_content, Some(json!({"location": "Paris"})));
    let r = org.call("Echo", json!({"location": 1})).await;
    failed(&r, "invalid_input");
    let r = org.call("Liar", json!({"location": "Paris"})).await;
    let t = failed(&r, "invalid_output");
    assert!(t.contains("/location"), "{t}");
    let r = org.call("Broken", json!({"location": "Paris"})).await;
    let t = failed(&r, "failed");
    assert!(
        t.contains("the API key is missing") && t.contains('3'),
        "{t}"
    );
    let started = Instant::now();
    let r = org.call("Hangs", json!({"location": "Paris"})).await;
    failed(&r, "timeout");
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z "),
        "the hanging command was killed"
    );
    org.stop().await;
}

/// Seed 004's scripts with an unknown extension compile to `./NAME`: a
/// relative program runs from the tool's source folder (`CommandTool::dir`),
/// and one that climbs out of it, or has no folder to be relative to, is
/// refused before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_item4_a_relative_program_is_its_source_folders_file() {
    use std::os::unix::fs::PermissionsExt;
    let src = tempfile::tempdir().unwrap();
    let script = src.path().join("lookup");
    std::fs::write(&script, "#!/bin/sh\ncat\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let with = |name: &str, program: &str, dir: Option<&std::path::Path>| {
        let mut t = command_tool(name, "", 5000, &[("location", "string")]);
        t.implementation = ToolImplementation::Command(CommandTool {
            command: vec![program.into()],
            timeout_ms: 5000,
            env: Default::default(),
            dir: dir.map(|d| d.display().to_string()),
        });
        t
    };
    let tools = [
        with("Local", "./lookup", Some(src.path())),
        with("Climbs", "../lookup", Some(src.path())),
        with("Nowhere", "./lookup", None),
    ];
    let org = Org::start("WeatherAgency", &tools).await;
    for t in ["Local", "Climbs", "Nowhere"] {
        org.grant("tool", t);
    }
    let r = org.call("Local", json!({"location": "Paris"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(r.structured_content, Some(json!({"location": "Paris"})));
    for t in ["Climbs", "Nowhere"] {
        let r = org.call(t, json!({"location": "Paris"})).await;
        let msg = failed(&r, "internal");
        assert!(msg.contains("relative path"), "{t}: {msg}");
    }
    org.stop().await;
}
