//! Items 1 and 2: the latency of one MCP tool call, `kb_read` of a 4 KiB
//! file, through the real daemon and through a peer built with the official
//! Python MCP SDK, each against the floor of a bare HTTP round trip on the
//! same stack (a JSON echo route in axum with `TCP_NODELAY`, reqwest as the
//! client, one keep-alive connection).
//!
//! Two MCP clients: a plain one (`jsonrpc.rs`: reqwest and the protocol's
//! JSON-RPC, nothing else), which shows what the server costs, and rmcp's
//! streamable-HTTP client as the built-in agent uses it
//! (`crates/agency-agent/src/mcp.rs`), which adds its own task hand-offs
//! on the client side. Calls are made one after another. Samples are taken
//! in interleaved rounds (echo, subject, echo, subject …) so a noisy
//! neighbour hits both alike.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_core::{FileId, Principal};
use agency_service::System;
use anyhow::{Context, Result, bail};
use axum::serve::ListenerExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::Cfg;
use crate::report::{Row, Section, ratio};
use crate::util::{Pct, fmt_dur, new_home_with, repo_root};

/// The file every subject reads: 4 KiB of text.
pub fn four_kib() -> Vec<u8> {
    let line = b"Agency benchmark line: the quick brown fox jumps over the lazy dog.\n";
    line.iter().copied().cycle().take(4096).collect()
}

/// Calls made before any sample is kept (connections, caches, JIT-free
/// but allocator and page cache warm).
const WARMUP: usize = 200;
/// Interleaved rounds per measurement.
const ROUNDS: usize = 5;

/// A connected rmcp client session.
pub struct Mcp {
    client: RunningService<RoleClient, ()>,
}

impl Mcp {
    pub async fn connect(url: &str, token: Option<&str>) -> Result<Mcp> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        if let Some(t) = token {
            config = config.auth_header(t.to_owned());
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let client = tokio::time::timeout(Duration::from_secs(30), ().serve(transport))
            .await
            .with_context(|| format!("failed to connect an MCP client to {url}: timed out"))?
            .with_context(|| format!("failed to initialise an MCP session with {url}"))?;
        Ok(Mcp { client })
    }

    /// Call `kb_read` and check the reply carries the whole file.
    pub async fn kb_read(&self, file: &str) -> Result<()> {
        let mut args = serde_json::Map::new();
        args.insert("file".into(), json!(file));
        let r = self
            .client
            .call_tool(CallToolRequestParams::new("kb_read").with_arguments(args))
            .await
            .context("failed to call the MCP tool kb_read")?;
        let text: usize = r
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.len()))
            .sum();
        if r.is_error == Some(true) || text < 4096 {
            bail!(
                "kb_read answered an error or a short reply: {:?}",
                r.content
            );
        }
        Ok(())
    }

    pub async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.client.cancel()).await;
    }
}

/// The floor: an axum JSON echo on 127.0.0.1:0 with the daemon's socket
/// settings, and a reqwest client on one keep-alive connection.
pub struct Echo {
    url: String,
    client: reqwest::Client,
    body: Value,
    task: tokio::task::JoinHandle<()>,
}

impl Echo {
    pub async fn start() -> Result<Echo> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .await
            .context("failed to bind the echo server on 127.0.0.1")?;
        let addr = listener
            .local_addr()
            .context("failed to read the echo server's address")?;
        // Same as the daemon (server.rs): TCP_NODELAY on accepted sockets.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let app = axum::Router::new().route(
            "/echo",
            axum::routing::post(|body: axum::Json<Value>| async move { body }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        // A body the size of an MCP tools/call request.
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "kb_read", "arguments": {"file": uuid::Uuid::new_v4()}}});
        Ok(Echo {
            url: format!("http://{addr}/echo"),
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .context("failed to build the HTTP client")?,
            body,
            task,
        })
    }

    pub async fn call(&self) -> Result<()> {
        let r = self
            .client
            .post(&self.url)
            .json(&self.body)
            .send()
            .await
            .context("failed to call the echo route")?;
        if !r.status().is_success() {
            bail!("the echo route answered {}", r.status());
        }
        r.bytes().await.context("failed to read the echo reply")?;
        Ok(())
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An MCP client of either kind.
pub enum Client {
    Plain(crate::jsonrpc::Plain),
    Rmcp(Mcp),
}

impl Client {
    async fn kb_read(&self, file: &str) -> Result<()> {
        match self {
            Client::Plain(c) => c.kb_read(file).await,
            Client::Rmcp(c) => c.kb_read(file).await,
        }
    }

    async fn close(self) {
        if let Client::Rmcp(c) = self {
            c.close().await;
        }
    }
}

/// Interleaved samples of the floor and of a subject.
async fn sample(echo: &Echo, mcp: &Client, file: &str, n: usize) -> Result<(Pct, Pct)> {
    for _ in 0..WARMUP {
        echo.call().await?;
        mcp.kb_read(file).await?;
    }
    let (mut floor, mut subject) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..ROUNDS {
        for _ in 0..n / ROUNDS {
            let t = Instant::now();
            echo.call().await?;
            floor.push(t.elapsed());
        }
        for _ in 0..n / ROUNDS {
            let t = Instant::now();
            mcp.kb_read(file).await?;
            subject.push(t.elapsed());
        }
    }
    Ok((Pct::of(&floor), Pct::of(&subject)))
}

/// A daemon in this process on a fresh home (its store SQLite, or the
/// PostgreSQL database `store` names), an agent token for the root
/// handler, and a 4 KiB file it created.
pub struct Subject {
    pub daemon: agency_daemon::Daemon,
    pub token: String,
    pub file: FileId,
    pub principal: Principal,
    _dir: tempfile::TempDir,
}

impl Subject {
    pub async fn start(store: Option<&str>) -> Result<Subject> {
        let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
        let home = new_home_with(&dir.path().join("home"), "", store)?;
        let daemon = agency_daemon::Daemon::start(&home)
            .await
            .context("failed to start the daemon")?;
        let svc: Arc<System> = daemon.service().clone();
        let (token, file, principal) = tokio::task::spawn_blocking(move || {
            let root = svc
                .root_handler()?
                .context("failed to find the root handler")?;
            let minted = svc
                .token_mint(Principal::User, root, None)
                .context("failed to mint an agent token for the root handler")?;
            let who = Principal::agent(root, minted.agent);
            let file = svc
                .kb_create(who, "benchmark file, 4 KiB", &four_kib())
                .context("failed to create the 4 KiB KB file")?;
            anyhow::Ok((minted.token, file, who))
        })
        .await
        .context("failed to join the setup task")??;
        Ok(Subject {
            daemon,
            token,
            file,
            principal,
            _dir: dir,
        })
    }

    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.daemon.addr())
    }
}

/// One backend's figures for item 1.
struct Backend {
    floor: Pct,
    plain: Pct,
    floor_r: Pct,
    rmcp: Pct,
    direct: Pct,
}

/// The daemon on `store` (`None`: SQLite) measured with both clients, each
/// interleaved with `echo`, and the same work in-process.
async fn measure(echo: &Echo, store: Option<&str>, n: usize) -> Result<Backend> {
    let subject = Subject::start(store).await?;
    let url = subject.mcp_url();
    let file = subject.file.to_string();
    let plain = Client::Plain(crate::jsonrpc::Plain::connect(&url, Some(&subject.token)).await?);
    let (floor, agency) = sample(echo, &plain, &file, n).await?;
    let rmcp = Client::Rmcp(Mcp::connect(&url, Some(&subject.token)).await?);
    let (floor_r, agency_r) = sample(echo, &rmcp, &file, n).await?;
    rmcp.close().await;
    // The same work without HTTP and MCP: what the tool handler calls
    // (token lookup, then kb_read), timed in-process.
    let svc = subject.daemon.service().clone();
    let (who, fid, token) = (subject.principal, subject.file, subject.token.clone());
    let direct = tokio::task::spawn_blocking(move || {
        let mut v = Vec::with_capacity(n);
        for i in 0..n + WARMUP {
            let t = Instant::now();
            svc.token_authenticate(&token)?;
            svc.kb_read(who, fid)?;
            if i >= WARMUP {
                v.push(t.elapsed());
            }
        }
        anyhow::Ok(Pct::of(&v))
    })
    .await
    .context("failed to join the direct-call task")??;
    subject
        .daemon
        .stop()
        .await
        .context("failed to stop the daemon")?;
    Ok(Backend {
        floor,
        plain: agency,
        floor_r,
        rmcp: agency_r,
        direct,
    })
}

/// The rows of one backend (`tag`: "" for SQLite, " on PostgreSQL").
fn rows(s: &mut Section, b: &Backend, tag: &str) {
    s.rows.push(Row::times(
        format!("kb_read p50 (plain JSON-RPC client){tag}"),
        b.plain.p50,
        ("bare HTTP echo p50", b.floor.p50),
    ));
    s.rows.push(Row::times(
        format!("kb_read p99 (plain JSON-RPC client){tag}"),
        b.plain.p99,
        ("bare HTTP echo p99", b.floor.p99),
    ));
    s.rows.push(Row::times(
        format!("kb_read p50 (rmcp client){tag}"),
        b.rmcp.p50,
        ("bare HTTP echo p50", b.floor_r.p50),
    ));
    s.rows.push(Row::times(
        format!("kb_read p99 (rmcp client){tag}"),
        b.rmcp.p99,
        ("bare HTTP echo p99", b.floor_r.p99),
    ));
    s.rows.push(Row::times(
        format!("kb_read p50 (plain client){tag}, against the same work in-process"),
        b.plain.p50,
        (
            "token check + Service::kb_read in-process, no HTTP/MCP, p50",
            b.direct.p50,
        ),
    ));
}

/// Item 1: `kb_read` through the real daemon against the echo floor, with
/// the store on SQLite (the default) and on PostgreSQL.
pub async fn agency_vs_echo(cfg: Cfg) -> Result<Vec<Section>> {
    let n = cfg.pick(5000, 1000);
    let echo = Echo::start().await?;
    let sqlite = measure(&echo, None, n).await?;
    let scratch = crate::pg::scratch();
    let pg = match &scratch {
        Ok(db) => match measure(&echo, Some(db.url()), n).await {
            Ok(b) => Ok((b, crate::pg::describe(db.url()))),
            Err(e) => Err(format!("failed: {e:#}")),
        },
        Err(reason) => Err(reason.clone()),
    };
    drop(scratch);
    let mut s = Section::new("1. MCP tool-call latency: kb_read of 4 KiB through the daemon");
    rows(&mut s, &sqlite, "");
    if let Ok((b, _)) = &pg {
        rows(&mut s, b, " on PostgreSQL");
        s.rows.push(Row::times(
            "kb_read p50 (plain client), PostgreSQL against SQLite (same run)",
            b.plain.p50,
            ("SQLite kb_read p50", sqlite.plain.p50),
        ));
        s.rows.push(Row::times(
            "same work in-process p50, PostgreSQL against SQLite (same run)",
            b.direct.p50,
            ("SQLite, in-process p50", sqlite.direct.p50),
        ));
    }
    let above = |b: &Backend| fmt_dur(b.plain.p50.saturating_sub(b.floor.p50));
    s.shows = match &pg {
        Ok((b, _)) => format!(
            "what a tool call costs above the bare HTTP floor: token check, permission check, store read, blob read and MCP framing add {} at p50 (plain client) with the store on SQLite and {} with it on PostgreSQL (×{:.2} SQLite's p50: there each statement of the token check, the permission check, the file and version reads and the blob read is a round trip to the server); rmcp's client adds {} more on its own side.",
            above(&sqlite),
            above(b),
            b.plain.p50.as_secs_f64() / sqlite.plain.p50.as_secs_f64().max(1e-9),
            fmt_dur(sqlite.rmcp.p50.saturating_sub(sqlite.plain.p50))
        ),
        Err(_) => format!(
            "what a tool call costs above the bare HTTP floor: token check, permission check, SQLite read, blob read and MCP framing add {} at p50 (plain client); rmcp's client adds {} more on its own side. PostgreSQL: not measured (below).",
            above(&sqlite),
            fmt_dur(sqlite.rmcp.p50.saturating_sub(sqlite.plain.p50))
        ),
    };
    s.notes.push(format!(
        "{} samples per client after {WARMUP} warm-up calls, each interleaved with the echo in {ROUNDS} rounds; daemon in this process (`Daemon::start`), stateless MCP endpoint answering in JSON; clients with the agent's bearer token: plain = reqwest speaking MCP's JSON-RPC (`crates/agency-bench/src/jsonrpc.rs`: initialize, notifications/initialized, then tools/call with the protocol-version header), rmcp = rmcp's streamable-HTTP client as the built-in agent uses it; echo: axum route on 127.0.0.1:0 with TCP_NODELAY, reqwest client.",
        sqlite.plain.n
    ));
    match &pg {
        Ok((b, server)) => s.notes.push(format!(
            "PostgreSQL rows: the same daemon, clients and echo server, the home's store (rows and blobs) in a fresh database on the server at {} (`[store] url` in the home's agency.toml; dropped after the run), measured after the SQLite rows; server: {server}. The in-process rows show where the time goes: the same token check and read, without HTTP or MCP, cost {} on PostgreSQL against {} on SQLite, which is most of the difference between the two backends' tool calls; each statement is a round trip to the server, driven by the thread that waits for it (`crates/agency-postgres/src/conn.rs`).",
            crate::pg::server(),
            fmt_dur(b.direct.p50),
            fmt_dur(sqlite.direct.p50),
        )),
        Err(reason) => s.notes.push(format!("PostgreSQL rows {reason}.")),
    }
    Ok(vec![s])
}

/// The venv python with the official MCP SDK, created if missing.
fn venv_python() -> Result<PathBuf> {
    let root = repo_root();
    let venv = root.join("target/test-venv");
    let python = venv.join("bin/python");
    if python.is_file() {
        return Ok(python);
    }
    eprintln!(
        "agency-bench: creating {} with the Python MCP SDK",
        venv.display()
    );
    let ok = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .context("failed to run python3 -m venv (is Python 3.10+ installed?)")?;
    if !ok.success() {
        bail!("python3 -m venv {} exited with {ok}", venv.display());
    }
    let ok = std::process::Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(root.join("tests/python/requirements.txt"))
        .status()
        .context("failed to run pip install in the venv")?;
    if !ok.success() {
        bail!("pip install -r tests/python/requirements.txt exited with {ok}");
    }
    Ok(python)
}

/// A free port on 127.0.0.1 (bound and released; the peer binds it next).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .context("failed to find a free port")?;
    Ok(l.local_addr().context("failed to read a port")?.port())
}

/// The Python peer (`bench/python_peer.py`) serving on `port`.
struct Peer {
    child: tokio::process::Child,
}

impl Peer {
    async fn start(
        python: &Path,
        dir: &Path,
        port: u16,
        file: &str,
        token: &str,
        mode: &str,
    ) -> Result<Peer> {
        let script = repo_root().join("bench/python_peer.py");
        let content = dir.join("content.txt");
        std::fs::write(&content, four_kib())
            .with_context(|| format!("failed to write {}", content.display()))?;
        let log = std::fs::File::create(dir.join("peer.log"))
            .context("failed to create the peer's log file")?;
        let child = tokio::process::Command::new(python)
            .arg(&script)
            .arg("--port")
            .arg(port.to_string())
            .arg("--db")
            .arg(dir.join("peer.db"))
            .arg("--content")
            .arg(&content)
            .arg("--file")
            .arg(file)
            .arg("--token")
            .arg(token)
            .arg("--mode")
            .arg(mode)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("failed to start {}", script.display()))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .await
            .is_err()
        {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(dir.join("peer.log")).unwrap_or_default();
                bail!("the Python peer did not listen on port {port} within 60 s: {log}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Peer { child })
    }
}

/// Item 2: the same call against the Python SDK peer, same client, same run.
pub async fn python_peer(cfg: Cfg) -> Result<Vec<Section>> {
    let title = "2. Peer: the same kb_read against the official Python MCP SDK (MCPServer, formerly FastMCP)";
    let python = match tokio::task::spawn_blocking(venv_python).await? {
        Ok(p) => p,
        Err(e) => {
            return Ok(vec![Section::not_measured(
                title,
                &format!("the Python MCP SDK is unavailable: {e:#}"),
            )]);
        }
    };
    let n = cfg.pick(3000, 600);
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let subject = Subject::start(None).await?;
    let file = subject.file.to_string();
    let peer_token = format!("peer-{}", uuid::Uuid::new_v4().simple());
    let echo = Echo::start().await?;
    let agency = Client::Plain(
        crate::jsonrpc::Plain::connect(&subject.mcp_url(), Some(&subject.token)).await?,
    );
    // The peer in its fastest mode, then with the SDK's defaults; each
    // stores the same content under the same id in its own database.
    let mut peers = Vec::new();
    for mode in ["fast", "default"] {
        let dir = dir.path().join(mode);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("failed to create {}", dir.display()))?;
        let port = free_port()?;
        let mut peer = Peer::start(&python, &dir, port, &file, &peer_token, mode).await?;
        let py = Client::Plain(
            crate::jsonrpc::Plain::connect(
                &format!("http://127.0.0.1:{port}/mcp"),
                Some(&peer_token),
            )
            .await?,
        );
        let (floor_p, theirs) = sample(&echo, &py, &file, n).await?;
        let _ = peer.child.kill().await;
        peers.push((mode, floor_p, theirs));
    }
    let (floor_a, ours) = sample(&echo, &agency, &file, n).await?;
    subject
        .daemon
        .stop()
        .await
        .context("failed to stop the daemon")?;
    let version = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let mut s = Section::new(title);
    for (mode, floor_p, theirs) in &peers {
        let mode = match *mode {
            "fast" => "stateless JSON, its fastest",
            _ => "SDK defaults: session, SSE",
        };
        s.rows.push(Row::times(
            format!("Python peer ({mode}) kb_read p50"),
            theirs.p50,
            ("bare HTTP echo p50", floor_p.p50),
        ));
        s.rows.push(Row::times(
            format!("Python peer ({mode}) kb_read p99"),
            theirs.p99,
            ("bare HTTP echo p99", floor_p.p99),
        ));
        s.rows.push(Row::new(
            format!("Python peer ({mode}) p50 against Agency's (same run)"),
            fmt_dur(theirs.p50),
            format!("{} (Agency kb_read p50)", fmt_dur(ours.p50)),
            ratio(theirs.p50.as_secs_f64(), ours.p50.as_secs_f64()),
        ));
        s.rows.push(Row::new(
            format!("Python peer ({mode}) p99 against Agency's (same run)"),
            fmt_dur(theirs.p99),
            format!("{} (Agency kb_read p99)", fmt_dur(ours.p99)),
            ratio(theirs.p99.as_secs_f64(), ours.p99.as_secs_f64()),
        ));
    }
    s.shows = "how many times faster Agency answers the same call than a server built with the official Python SDK doing the same work (a ratio above 1 means Agency is faster).".to_owned();
    s.notes.push(format!(
        "peer: `bench/python_peer.py`, MCPServer (FastMCP before mcp 2.0) from the official SDK (`mcp` {version}), streamable HTTP, run twice: stateless with JSON answers like the daemon (`stateless_http=True`, `json_response=True`, the SDK's fastest mode) and with the SDK's defaults (a session, SSE answers); one tool doing Agency's work per call: the bearer token's hash looked up in SQLite (WAL) with its agent, the caller's access level to the file, the 4 KiB row, and a read-audit row batched like Agency's; both sides driven by the same plain JSON-RPC client, {} samples each after {WARMUP} warm-up calls; Agency's echo floor in this pairing was {} p50.",
        ours.n,
        fmt_dur(floor_a.p50)
    ));
    Ok(vec![s])
}
