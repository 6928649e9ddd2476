//! Issue 10 item 5, the development round trip, end to end: the real
//! `agency serve` with a repo whose origin is a local repository made by
//! the test, an MCP client holding an agent token with a workspace. It
//! clones with `repo_clone`, commits in the workspace, and `repo_push`
//! puts the commit on the origin as `agency/<handler>/<branch>`; the user
//! sees the push in `agency audit`. Refused: a Read-only holder, names
//! that would leave the prefix, a revoked capability; and a clone whose
//! `.git/config` and hooks would run commands makes the daemon run none.

#![allow(clippy::unwrap_used)]

use crate::git_repo;
use crate::home;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use home::TestHome;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

/// `git` in `dir` as a committer named `t`; its stdout trimmed.
fn git(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["-c", "user.name=t", "-c", "user.email=t@t"];
    all.extend_from_slice(args);
    git_repo::git(dir, &all).trim().to_owned()
}

fn rev(dir: &Path, name: &str) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--verify", "--quiet", name])
        .current_dir(dir)
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    c.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap()
}

fn text(r: &CallToolResult) -> String {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

#[track_caller]
fn ok(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(false), "tool failed: {}", text(r));
    serde_json::from_str(&text(r)).unwrap()
}

#[track_caller]
fn refused(r: &CallToolResult, needle: &str) -> String {
    assert_eq!(r.is_error, Some(true), "tool succeeded: {}", text(r));
    let t = text(r);
    assert!(t.contains(needle), "{t:?} lacks {needle:?}");
    t
}

/// A push under the default policy: the first call is refused as pending
/// an approval (nothing reaches the origin), the user approves it with
/// `agency approve`, and the same call then pushes.
async fn approved_push(c: &Client, home: &TestHome, args: Value) -> CallToolResult {
    let first = call(c, "repo_push", args.clone()).await;
    let t = refused(&first, "pending approval ");
    let id = t
        .split("pending approval ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .unwrap()
        .to_owned();
    home.ok(&["approve", &id]);
    call(c, "repo_push", args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item5_clone_commit_push_round_trip() {
    let home = TestHome::new();
    let tmp = home.tmp.path();
    // The origin: a repository with one commit on main.
    let origin = tmp.join("origin");
    std::fs::create_dir(&origin).unwrap();
    git(&origin, &["init", "--quiet", "-b", "main"]);
    std::fs::write(origin.join("README"), "one\n").unwrap();
    git(&origin, &["add", "README"]);
    git(&origin, &["commit", "--quiet", "-m", "one"]);
    home.init_with(&format!(
        "[repos]\ndemo = {:?}\n",
        origin.display().to_string()
    ));
    let daemon = home.serve();
    let root = home.root();
    let ws = tmp.join("ws");
    std::fs::create_dir(&ws).unwrap();
    let token = home
        .ok(&[
            "token",
            "mint",
            "--handler",
            &root,
            "--workspace",
            ws.to_str().unwrap(),
        ])
        .trim()
        .to_owned();
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(home.dir.join("daemon.json")).unwrap())
            .unwrap();
    let url = format!("http://{}/mcp", info["addr"].as_str().unwrap());
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let c = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();

    // Read: clone, commit, but no push.
    home.ok(&["grant", &root, "repo:demo", "read"]);
    ok(&call(&c, "repo_clone", json!({"name": "demo", "dest": "demo"})).await);
    let clone = ws.join("demo");
    git(&clone, &["switch", "--quiet", "-c", "feature"]);
    std::fs::write(clone.join("README"), "two\n").unwrap();
    git(&clone, &["commit", "--quiet", "-am", "two"]);
    let commit = rev(&clone, "HEAD").unwrap();
    let push = json!({"repo": "demo", "path": "demo", "branch": "feature"});
    refused(
        &call(&c, "repo_push", push.clone()).await,
        "[permission_denied]",
    );

    // Write: the commit is on the origin under the root handler's prefix.
    home.ok(&["grant", &root, "repo:demo", "write"]);
    let done = ok(&approved_push(&c, &home, push.clone()).await);
    let branch = format!("agency/{root}/feature");
    assert_eq!(done["remote_branch"], branch.as_str());
    assert_eq!(done["ref"], format!("refs/heads/{branch}"));
    assert_eq!(done["commit"], commit.as_str());
    assert_eq!(rev(&origin, &branch), Some(commit.clone()));
    assert_eq!(
        std::fs::read_to_string(origin.join("README")).unwrap(),
        "one\n",
        "the origin's checked-out main is untouched"
    );

    // Nothing outside the prefix can be named.
    for bad in ["../main", "refs/heads/main", "-f", "x:main", "main:main"] {
        refused(
            &call(
                &c,
                "repo_push",
                json!({"repo": "demo", "path": "demo", "branch": "feature", "remote_branch": bad}),
            )
            .await,
            "[invalid_input]",
        );
        refused(
            &call(
                &c,
                "repo_push",
                json!({"repo": "demo", "path": "demo", "branch": bad}),
            )
            .await,
            "[invalid_input]",
        );
    }
    assert_eq!(
        git(&origin, &["for-each-ref", "--format=%(refname)"]),
        format!("refs/heads/{branch}\nrefs/heads/main")
    );

    // A hostile clone: its config and hooks would run commands in any git
    // run inside it. The daemon runs none of them, and the push works.
    let markers = tmp.join("markers");
    std::fs::create_dir(&markers).unwrap();
    let tool = |name: &str| {
        let path = tmp.join(format!("evil-{name}"));
        std::fs::write(
            &path,
            format!("#!/bin/sh\ntouch '{}/{name}'\n", markers.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    };
    let hooks = clone.join(".git/hooks");
    for hook in [
        "pre-push",
        "reference-transaction",
        "post-update",
        "pre-commit",
    ] {
        std::fs::copy(tool(hook), hooks.join(hook)).unwrap();
    }
    for (key, name) in [
        ("core.fsmonitor", "fsmonitor"),
        ("core.sshCommand", "ssh"),
        ("core.pager", "pager"),
        ("uploadpack.packObjectsHook", "pack-objects-hook"),
    ] {
        git(&clone, &["config", key, &tool(name)]);
    }
    git(
        &clone,
        &["config", "remote.origin.url", "ssh://attacker.invalid/x"],
    );
    let hostile = ok(&approved_push(
        &c,
        &home,
        json!({"repo": "demo", "path": "demo", "branch": "feature", "remote_branch": "again"}),
    )
    .await);
    assert_eq!(hostile["commit"], commit.as_str());
    let ran: Vec<_> = std::fs::read_dir(&markers)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        ran.is_empty(),
        "the daemon ran the clone's commands: {ran:?}"
    );

    // The user sees each push in the handler's audit log.
    let audit = home.ok(&["audit", &root]);
    assert!(
        audit.contains(&format!(
            "repo push: branch feature of repo demo (commit {commit}) to refs/heads/{branch}"
        )),
        "{audit}"
    );
    assert!(
        audit.contains(&format!("refs/heads/agency/{root}/again")),
        "{audit}"
    );

    // Revoked: refused again.
    let caps = home.json(&["caps", &root]);
    let write = caps
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["resource"]["kind"] == "repo" && c["level"] == "write")
        .unwrap()["id"]
        .to_string();
    home.ok(&["revoke", &write]);
    refused(&call(&c, "repo_push", push).await, "[permission_denied]");
    let _ = c.cancel().await;
    daemon.terminate();
}
