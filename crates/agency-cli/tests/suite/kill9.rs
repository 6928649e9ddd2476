//! Crash durability of the real daemon: `agency serve` is killed with
//! SIGKILL at a random moment while 16 MCP clients (one per handler, tokens
//! from `agency token mint`) write KB versions over HTTP, then restarted on
//! the same home, at least 20 times.
//!
//! After every restart, checked through the CLI only (`kb log`, `kb cat`,
//! `fsck`): every version whose `kb_write` was acknowledged is there with
//! the BLAKE3 hash of the bytes the client sent; versions are contiguous;
//! a version nobody was told about holds content some client really tried
//! to write (never a torn mix); every blob re-hashes to its name. Every
//! tenth operation is a `kb_create`: an acknowledged one exists with its
//! content, an unacknowledged one either does not exist or holds exactly
//! what was sent.
//!
//! The kill delays come from a seeded generator: the seed is printed, and
//! `AGENCY_KILL9_SEED=<n>` replays a run. `AGENCY_KILL9_ROUNDS` changes
//! the number of rounds (default 20).
//!
//! It runs twice: on the home's SQLite store, and on a PostgreSQL database
//! of its own (`AGENCY_STORE_URL`), where an acknowledged write is one the
//! server committed.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agency");
const CLIENTS: usize = 16;
/// Safety net for one MCP call; a killed daemon fails calls at once.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// splitmix64: small, seedable, good enough to pick delays and sizes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn hash_of(content: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(content).to_hex())
}

/// A running `agency serve`; killed when dropped, so that a failing test
/// leaves no daemon behind.
struct Daemon(Child);

impl Daemon {
    /// SIGKILL (what `Child::kill` sends on Unix) and reap.
    fn sigkill(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A temporary home (`<tmp>/home`), its daemon log beside it.
struct Home {
    tmp: tempfile::TempDir,
    dir: PathBuf,
    /// The PostgreSQL store every command of this home uses, if any.
    store_url: Option<String>,
}

impl Home {
    fn new(store_url: Option<String>) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        Home {
            tmp,
            dir,
            store_url,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("AGENCY_HOME", &self.dir)
            .env("HOME", self.tmp.path().join("user"))
            .env_remove("RUST_LOG")
            .env_remove("AGENCY_STORE_URL")
            .env("AGENCY_WIDE", "1")
            .stdin(Stdio::null());
        if let Some(url) = &self.store_url {
            c.env("AGENCY_STORE_URL", url);
        }
        c
    }

    /// Run and require exit 0; stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(
            out.status.success(),
            "agency {args:?} failed: {}{}\ndaemon log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("serve.log")).unwrap_or_default()
    }

    /// Start `agency serve` and wait (bounded) until it answers. The daemon
    /// of the previous round left a stale `daemon.json`: removed first, so
    /// that the wait is for the new process.
    fn serve(&self) -> Daemon {
        let _ = std::fs::remove_file(self.dir.join("daemon.json"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.tmp.path().join("serve.log"))
            .unwrap();
        let mut child = self
            .command(&["serve"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if self.dir.join("daemon.json").exists()
                && self
                    .command(&["status"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .unwrap()
                    .success()
            {
                return Daemon(child);
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the daemon exited with {status}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not start:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn mcp_url(&self) -> String {
        let info: Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("daemon.json")).unwrap())
                .unwrap();
        format!("http://{}/mcp", info["addr"].as_str().unwrap())
    }

    fn mint(&self, handler: &str, workspace: &Path) -> String {
        self.ok(&[
            "token",
            "mint",
            "--handler",
            handler,
            "--workspace",
            workspace.to_str().unwrap(),
        ])
        .trim()
        .to_owned()
    }
}

type Client = RunningService<RoleClient, ()>;

async fn connect(url: &str, token: &str) -> Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    tokio::time::timeout(
        CALL_TIMEOUT,
        ().serve(StreamableHttpClientTransport::from_config(config)),
    )
    .await
    .expect("MCP initialize timed out")
    .expect("MCP initialize")
}

/// Call a tool: `Ok(json)` when acknowledged, `Err(text)` for a tool error
/// or a transport failure (the daemon died).
async fn call(client: &Client, tool: &str, args: Value) -> Result<Value, String> {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    let r = match tokio::time::timeout(CALL_TIMEOUT, client.call_tool(params)).await {
        Err(_) => return Err(format!("{tool}: no answer")),
        Ok(Err(e)) => return Err(format!("{tool}: transport: {e}")),
        Ok(Ok(r)) => r,
    };
    let text = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<String>();
    if r.is_error == Some(true) {
        return Err(format!("{tool}: tool error: {text}"));
    }
    Ok(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool}: {e}: {text}")))
}

/// One client's file and everything it knows about it.
#[derive(Debug, Default, Clone)]
struct Track {
    handler: String,
    file: String,
    workspace: PathBuf,
    /// The latest (version, hash) the client may base a write on.
    base: (i64, String),
    /// Acknowledged versions: version -> content.
    acked: BTreeMap<i64, Vec<u8>>,
    /// Hashes of every content ever sent for this file, acked or not.
    attempted: HashSet<String>,
}

/// What one client did in a round.
#[derive(Debug)]
struct RoundResult {
    acked: Vec<(i64, Vec<u8>)>,
    attempted: Vec<String>,
    /// Files whose `kb_create` was acknowledged: id and content.
    created: Vec<(String, Vec<u8>)>,
    /// Every `kb_create` tried: description (unique) and content hash.
    create_attempts: Vec<(String, String)>,
}

/// Content of write `n` of client `c` in `round`: recognisable text, its
/// size varied so that some blob writes take a while.
fn content(c: usize, round: usize, n: usize, size: usize) -> Vec<u8> {
    let head = format!("client {c} round {round} write {n}\n");
    let mut v = head.into_bytes();
    while v.len() < size {
        v.extend_from_slice(b"the quick brown fox jumps over the lazy dog\n");
    }
    v
}

/// What every client of a round shares.
#[derive(Debug, Clone)]
struct RoundCtx {
    round: usize,
    url: String,
    /// Content sizes, cycled through.
    sizes: Vec<usize>,
    /// Clients connected so far: the kill timer starts when all are.
    connected: Arc<AtomicUsize>,
    /// Set once the daemon is dead.
    killed: tokio::sync::watch::Receiver<bool>,
}

/// Write versions one after another until a call fails (the daemon died).
/// A failed call is never retried: its outcome is unknown, and the
/// verification allows for either.
async fn writer(c: usize, token: String, track: Track, cx: RoundCtx) -> RoundResult {
    let RoundCtx {
        round,
        url,
        sizes,
        connected,
        mut killed,
    } = cx;
    let client = connect(&url, &token).await;
    connected.fetch_add(1, Ordering::SeqCst);
    let mut base = track.base.clone();
    let mut out = RoundResult {
        acked: Vec::new(),
        attempted: Vec::new(),
        created: Vec::new(),
        create_attempts: Vec::new(),
    };
    let mut n = 0;
    loop {
        let body = content(c, round, n, sizes[n % sizes.len()]);
        if (n + c) % 10 == 9 {
            // Every tenth operation (staggered by client) creates a file.
            let name = format!("c{round}-{n}.txt");
            let description = format!("{CREATED} client {c} round {round} op {n}");
            tokio::fs::write(track.workspace.join(&name), &body)
                .await
                .unwrap();
            out.create_attempts
                .push((description.clone(), hash_of(&body)));
            let create = call(
                &client,
                "kb_create",
                json!({"description": description, "path": name}),
            );
            let r = tokio::select! {
                r = create => r,
                _ = killed.wait_for(|k| *k) => Err("kb_create: the daemon was killed".to_owned()),
            };
            match r {
                Ok(v) => {
                    assert_eq!(v["version"], 1, "client {c}: {v}");
                    assert_eq!(v["hash"], json!(hash_of(&body)), "client {c}: {v}");
                    out.created
                        .push((v["file"].as_str().unwrap().to_owned(), body));
                }
                Err(e) => {
                    assert!(!e.contains("tool error"), "client {c}: {e}");
                    break;
                }
            }
            n += 1;
            continue;
        }
        let name = format!("w{round}-{n}.txt");
        tokio::fs::write(track.workspace.join(&name), &body)
            .await
            .unwrap();
        out.attempted.push(hash_of(&body));
        let write = call(
            &client,
            "kb_write",
            json!({
                "file": track.file,
                "base_version": base.0,
                "base_hash": base.1,
                "path": name,
            }),
        );
        // An answer that has not arrived when the daemon is dead never
        // will: the write is then unacknowledged (rmcp's client may take
        // long to notice a dead server on its own).
        let r = tokio::select! {
            r = write => r,
            _ = killed.wait_for(|k| *k) => Err("kb_write: the daemon was killed".to_owned()),
        };
        match r {
            Ok(v) => {
                let version = v["version"].as_i64().unwrap();
                let hash = v["hash"].as_str().unwrap().to_owned();
                assert_eq!(version, base.0 + 1, "client {c}: {v}");
                assert_eq!(hash, hash_of(&body), "client {c}: acknowledged hash");
                out.acked.push((version, body));
                base = (version, hash);
            }
            Err(e) => {
                // Only a dead daemon may fail a write: each client is the
                // only writer of its file, so a conflict is a bug.
                assert!(!e.contains("tool error"), "client {c}: {e}");
                break;
            }
        }
        n += 1;
    }
    // The session is gone with the daemon; dropping the client is enough.
    drop(client);
    out
}

/// Check a file after a restart against what its client knows; return the
/// latest (version, hash) to base the next round on.
fn verify(home: &Home, t: &Track) -> (i64, String) {
    let log = home.json(&["kb", "log", &t.file]);
    let mut versions: Vec<(i64, String)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_i64().unwrap(),
                v["hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    versions.sort();
    for (i, (v, _)) in versions.iter().enumerate() {
        assert_eq!(*v, i as i64 + 1, "{}: versions not contiguous", t.file);
    }
    let stored: BTreeMap<i64, String> = versions.iter().cloned().collect();
    for (v, body) in &t.acked {
        let got = stored.get(v).unwrap_or_else(|| {
            panic!(
                "{}: acknowledged version {v} is missing after the kill",
                t.file
            )
        });
        assert_eq!(
            got,
            &hash_of(body),
            "{}: acknowledged version {v} has another hash",
            t.file
        );
    }
    for (v, h) in &stored {
        assert!(
            t.acked.contains_key(v) || t.attempted.contains(h),
            "{}: version {v} holds content no client sent ({h})",
            t.file
        );
    }
    // The newest acknowledged version reads back byte for byte.
    if let Some((v, body)) = t.acked.last_key_value() {
        let f = home.json(&["kb", "cat", &t.file, "--version", &v.to_string()]);
        assert_eq!(f["text"].as_str().unwrap().as_bytes(), &body[..], "{v}");
        assert_eq!(f["hash"].as_str().unwrap(), hash_of(body));
    }
    versions.last().cloned().unwrap()
}

/// The description prefix of the files clients create during rounds.
const CREATED: &str = "kill9-created";

/// Check the files created in a round: each acknowledged one exists with
/// exactly the content sent; any other new one is an unacknowledged create
/// of this round holding exactly that create's content. Returns how many
/// were committed without their answer.
fn verify_creates(
    home: &Home,
    known: &mut HashSet<String>,
    created: &BTreeMap<String, Vec<u8>>,
    attempts: &BTreeMap<String, String>,
) -> usize {
    let mut unanswered = 0;
    let listed = home.json(&["kb", "ls"]);
    let mut seen = HashSet::new();
    for f in listed.as_array().unwrap() {
        let desc = f["description"].as_str().unwrap();
        let id = f["id"].as_str().unwrap().to_owned();
        if !desc.starts_with(CREATED) {
            continue;
        }
        seen.insert(id.clone());
        if known.contains(&id) {
            continue;
        }
        assert_eq!(f["latest_version"], 1, "{f}");
        let got = home.json(&["kb", "cat", &id]);
        let hash = got["hash"].as_str().unwrap();
        match created.get(&id) {
            Some(body) => {
                assert_eq!(hash, hash_of(body), "{id}: acknowledged create");
                assert_eq!(got["text"].as_str().unwrap().as_bytes(), &body[..]);
            }
            None => {
                let want = attempts
                    .get(desc)
                    .unwrap_or_else(|| panic!("{id}: {desc:?} was never created"));
                assert_eq!(hash, want, "{id}: unacknowledged create of {desc:?}");
                unanswered += 1;
            }
        }
        known.insert(id);
    }
    for id in created.keys() {
        assert!(seen.contains(id), "acknowledged create {id} is missing");
    }
    unanswered
}

fn fsck_clean(home: &Home) {
    let report = home.json(&["fsck"]);
    assert_eq!(report["problems"], json!([]), "fsck: {report}");
}

#[test]
fn acknowledged_kb_writes_survive_sigkill_of_the_daemon() {
    kill9_rounds(None);
}

#[test]
fn acknowledged_kb_writes_survive_sigkill_of_the_daemon_on_postgres() {
    let admin = agency_postgres::scratch::admin_url()
        .expect("AGENCY_TEST_POSTGRES=off: no server for this test");
    let db = agency_postgres::scratch::ScratchDb::create(&admin).unwrap();
    kill9_rounds(Some(db.url().to_owned()));
}

fn kill9_rounds(store_url: Option<String>) {
    let on_postgres = store_url.is_some();
    let seed = std::env::var("AGENCY_KILL9_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let rounds: usize = std::env::var("AGENCY_KILL9_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    // Printed so that a failure can be replayed (cargo shows it on failure).
    println!("kill9 seed: {seed} (AGENCY_KILL9_SEED={seed} to replay), {rounds} rounds");
    let mut rng = Rng(seed);

    let home = Home::new(store_url);
    let init = home.ok(&["init"]);
    let root = init.split_whitespace().last().unwrap().to_owned();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();

    // Setup, without faults: the root delegates 15 outcomes, so that 16
    // handlers each have a live agent of their own, and each creates one
    // file it alone writes.
    let mut daemon = home.serve();
    let mut tracks: Vec<Track> = (0..CLIENTS)
        .map(|c| {
            let ws = home.tmp.path().join(format!("ws{c}"));
            std::fs::create_dir(&ws).unwrap();
            Track {
                workspace: ws,
                ..Track::default()
            }
        })
        .collect();
    tracks[0].handler = root.clone();
    let url = home.mcp_url();
    let root_token = home.mint(&root, &tracks[0].workspace);
    rt.block_on(async {
        let client = connect(&url, &root_token).await;
        for t in tracks.iter_mut().skip(1) {
            let o = call(
                &client,
                "outcome_create",
                json!({"title": "write a file", "parents": [root]}),
            )
            .await
            .unwrap();
            let o = o["outcome"].as_str().unwrap().to_owned();
            call(&client, "delegate", json!({"outcome": o}))
                .await
                .unwrap();
            t.handler = o;
        }
    });
    for (c, t) in tracks.iter_mut().enumerate() {
        let token = if c == 0 {
            root_token.clone()
        } else {
            home.mint(&t.handler, &t.workspace)
        };
        let body = content(c, 0, 0, 64);
        std::fs::write(t.workspace.join("first.txt"), &body).unwrap();
        let v = rt
            .block_on(async {
                let client = connect(&url, &token).await;
                call(
                    &client,
                    "kb_create",
                    json!({"description": format!("file of client {c}"), "path": "first.txt"}),
                )
                .await
            })
            .unwrap();
        t.file = v["file"].as_str().unwrap().to_owned();
        t.base = (1, hash_of(&body));
        t.acked.insert(1, body.clone());
        t.attempted.insert(hash_of(&body));
    }
    // The setup's agents stay live until a restart reaps them.
    daemon.sigkill();
    daemon = home.serve();
    fsck_clean(&home);

    let mut total_acked = 0;
    let mut killed_mid_write = 0;
    let mut known_created = HashSet::new();
    let mut total_created = 0;
    for round in 1..=rounds {
        // Agents recorded as live were reaped at the restart: every round
        // needs fresh tokens.
        let tokens: Vec<String> = tracks
            .iter()
            .map(|t| home.mint(&t.handler, &t.workspace))
            .collect();
        let url = home.mcp_url();
        let connected = Arc::new(AtomicUsize::new(0));
        let (kill_tx, kill_rx) = tokio::sync::watch::channel(false);
        let delay = Duration::from_millis(50 + rng.below(750));
        let sizes: Vec<usize> = (0..8)
            .map(|_| 16 + rng.below(256 * 1024) as usize)
            .collect();
        let results = rt.block_on(async {
            let tasks: Vec<_> = tracks
                .iter()
                .enumerate()
                .map(|(c, t)| {
                    tokio::spawn(writer(
                        c,
                        tokens[c].clone(),
                        t.clone(),
                        RoundCtx {
                            round,
                            url: url.clone(),
                            sizes: sizes.clone(),
                            connected: connected.clone(),
                            killed: kill_rx.clone(),
                        },
                    ))
                })
                .collect();
            // Kill once every client is writing, after the random delay.
            let deadline = Instant::now() + Duration::from_secs(60);
            while connected.load(Ordering::SeqCst) < CLIENTS {
                assert!(Instant::now() < deadline, "clients did not connect");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(delay).await;
            // SIGKILL: no destructor, no flush, no graceful shutdown.
            daemon.sigkill();
            kill_tx.send_replace(true);
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        daemon = home.serve();
        let (mut acked_now, mut created_now) = (0, 0);
        let mut created = BTreeMap::new();
        let mut create_attempts = BTreeMap::new();
        for (t, r) in tracks.iter_mut().zip(results) {
            acked_now += r.acked.len();
            created_now += r.created.len();
            created.extend(r.created);
            create_attempts.extend(r.create_attempts);
            for (v, body) in r.acked {
                t.acked.insert(v, body);
            }
            t.attempted.extend(r.attempted);
        }
        fsck_clean(&home);
        killed_mid_write += verify_creates(&home, &mut known_created, &created, &create_attempts);
        for t in tracks.iter_mut() {
            let latest = verify(&home, t);
            if latest.0 > t.acked.keys().last().copied().unwrap_or(0) {
                // Committed, but the answer was lost with the process.
                killed_mid_write += 1;
            }
            t.base = latest;
        }
        total_acked += acked_now;
        total_created += created_now;
        println!(
            "round {round}: killed after {} ms, {acked_now} writes and {created_now} creates acknowledged",
            delay.as_millis()
        );
    }
    println!(
        "{total_acked} acknowledged writes and {total_created} creates survived {rounds} kills; \
         {killed_mid_write} committed without their answer"
    );
    if on_postgres {
        assert!(
            !home.dir.join("agency.db").exists(),
            "the rows went to PostgreSQL, not to a SQLite file"
        );
    }
    // The test is only meaningful if writes were really under way.
    assert!(total_acked > rounds, "too few writes: {total_acked}");
    assert!(total_created > 0, "no create was acknowledged");
    daemon.sigkill();
}
