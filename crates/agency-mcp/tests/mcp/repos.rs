//! `repo_clone`: refused without a capability on the repo, then cloned by
//! the repo cache into a confined workspace directory once it is granted.

use std::path::Path;
use std::sync::{Arc, Mutex};

use agency_core::{Level, Principal, Resource};
use agency_mcp::{RepoCache, RouterOptions, router_with};
use agency_service::GrantRequest;
use serde_json::json;

use crate::support::{Agency, call, connect, err, ok, serve_router};

/// A stand-in cache that "clones" by writing one file, and records calls.
#[derive(Debug, Default)]
struct FakeCache(Mutex<Vec<String>>);

impl RepoCache for FakeCache {
    fn clone_repo(
        &self,
        name: &str,
        workspace: &Path,
        dest: &Path,
    ) -> Result<String, agency_mcp::CloneError> {
        self.0.lock().unwrap().push(name.to_owned());
        let fail = |e: std::io::Error| agency_mcp::CloneError::Failed(e.to_string());
        let dest = workspace.join(dest);
        std::fs::create_dir(&dest).map_err(fail)?;
        std::fs::write(dest.join("README"), name).map_err(fail)?;
        Ok(format!("https://example.invalid/{name}.git"))
    }

    fn push_repo(
        &self,
        req: &agency_mcp::PushRequest<'_>,
        admit: &mut dyn FnMut(&agency_mcp::Pushed) -> Result<(), String>,
        record: &mut dyn FnMut(&agency_mcp::Pushed) -> Result<(), String>,
    ) -> Result<agency_mcp::Pushed, agency_mcp::PushError> {
        self.0.lock().unwrap().push(format!("push {}", req.branch));
        let pushed = agency_mcp::Pushed {
            remote_ref: format!("refs/heads/agency/{}/{}", req.handler, req.remote_branch),
            commit: "0".repeat(40),
        };
        admit(&pushed).map_err(agency_mcp::PushError::Refused)?;
        self.0.lock().unwrap().push(format!("fetch {}", req.branch));
        record(&pushed).map_err(agency_mcp::PushError::Refused)?;
        Ok(pushed)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repo_clone_needs_a_capability_and_stays_in_the_workspace() {
    let a = Agency::new();
    let cache = Arc::new(FakeCache::default());
    let app = router_with(
        a.svc.clone(),
        RouterOptions {
            repos: Some(cache.clone()),
            ..Default::default()
        },
    );
    let server = serve_router(app, a.identity()).await;
    let c = connect(&server.url).await.unwrap();

    err(
        &call(
            &c,
            "repo_clone",
            json!({"name": "agency", "dest": "agency"}),
        )
        .await,
        "[permission_denied]",
    );
    assert!(
        cache.0.lock().unwrap().is_empty(),
        "nothing is cloned without the capability"
    );
    let grant = GrantRequest {
        resource: Resource::Repo("agency".into()),
        level: Level::Read,
        delegatable: false,
    };
    a.svc.grant(Principal::User, a.root, &grant).unwrap();
    std::fs::create_dir(a.ws.join("src")).unwrap();
    let done = ok(&call(
        &c,
        "repo_clone",
        json!({"name": "agency", "dest": "src/agency"}),
    )
    .await);
    assert_eq!(done["source"], "https://example.invalid/agency.git");
    assert_eq!(
        std::fs::read_to_string(a.ws.join("src/agency/README")).unwrap(),
        "agency"
    );
    for dest in ["../out", "/tmp/x", "etc/x", "src/agency", ""] {
        err(
            &call(&c, "repo_clone", json!({"name": "agency", "dest": dest})).await,
            "[invalid_path]",
        );
    }
    err(
        &call(&c, "repo_clone", json!({"name": "../x", "dest": "y"})).await,
        "[invalid_input]",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item5_repo_push_needs_write_checks_names_and_is_audited() {
    let a = Agency::new();
    let cache = Arc::new(FakeCache::default());
    let app = router_with(
        a.svc.clone(),
        RouterOptions {
            repos: Some(cache.clone()),
            ..Default::default()
        },
    );
    let server = serve_router(app, a.identity()).await;
    let c = connect(&server.url).await.unwrap();
    std::fs::create_dir(a.ws.join("clone")).unwrap();
    let push = |branch: &str| json!({"repo": "agency", "path": "clone", "branch": branch});
    let grant = |level| GrantRequest {
        resource: Resource::Repo("agency".into()),
        level,
        delegatable: false,
    };

    // Read (enough to clone) does not push; the cache is never asked.
    a.svc
        .grant(Principal::User, a.root, &grant(Level::Read))
        .unwrap();
    let t = err(
        &call(&c, "repo_push", push("work")).await,
        "[permission_denied]",
    );
    assert!(t.contains("grant write on repo agency"), "{t}");
    assert!(cache.0.lock().unwrap().is_empty());

    a.svc
        .grant(Principal::User, a.root, &grant(Level::Write))
        .unwrap();
    // Under the default policy a push first waits for the user's approval
    // (the agent gets an error naming the request), then goes through once.
    let approve = |t: &str| {
        let id: agency_core::policy::ApprovalId = t
            .split("pending approval ")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .unwrap()
            .parse()
            .unwrap();
        a.svc.approve(Principal::User, id, false).unwrap();
    };
    approve(&err(
        &call(&c, "repo_push", push("work")).await,
        "[permission_denied] failed to push branch work of repo agency: pending approval",
    ));
    let done = ok(&call(&c, "repo_push", push("work")).await);
    let prefix = format!("agency/{}", a.root);
    assert_eq!(done["remote_branch"], format!("{prefix}/work"));
    assert_eq!(done["ref"], format!("refs/heads/{prefix}/work"));
    assert_eq!(done["commit"], "0".repeat(40));
    let renamed_push =
        json!({"repo": "agency", "path": "clone", "branch": "work", "remote_branch": "fix/y"});
    approve(&err(
        &call(&c, "repo_push", renamed_push.clone()).await,
        "pending approval",
    ));
    let renamed = ok(&call(&c, "repo_push", renamed_push).await);
    assert_eq!(renamed["remote_branch"], format!("{prefix}/fix/y"));
    let log = a.svc.audit_read(Principal::User, Some(a.root)).unwrap();
    let pushes: Vec<_> = log
        .iter()
        .filter(|e| e.summary.starts_with("repo push:"))
        .collect();
    assert_eq!(pushes.len(), 2);
    assert!(
        pushes[0].summary.contains(&format!(
            "branch work of repo agency (commit {}) to refs/heads/{prefix}/work",
            "0".repeat(40)
        )),
        "{}",
        pushes[0].summary
    );
    assert_eq!(pushes[0].agent, Some(a.agent));

    // Names that would leave the prefix, and paths outside the workspace.
    let calls = cache.0.lock().unwrap().len();
    for bad in ["../main", "refs/heads/main", "-f", "x:main", "@{-1}", ""] {
        err(&call(&c, "repo_push", push(bad)).await, "[invalid_input]");
        err(
            &call(
                &c,
                "repo_push",
                json!({"repo": "agency", "path": "clone", "branch": "work", "remote_branch": bad}),
            )
            .await,
            "[invalid_input]",
        );
    }
    for path in ["../x", "/tmp", "etc", "notes.md", "missing"] {
        err(
            &call(
                &c,
                "repo_push",
                json!({"repo": "agency", "path": path, "branch": "work"}),
            )
            .await,
            "[invalid_path]",
        );
    }
    assert_eq!(
        cache.0.lock().unwrap().len(),
        calls,
        "none reached the cache"
    );
}
