//! Tests of `push.rs`: the round trip through the mirror, the prefix,
//! the refusals, a hostile clone whose configuration would run commands,
//! and the upload-pack prefix the sandbox plugs in.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use agency_core::{AgentId, HandlerId};
use agency_mcp::{PushError, PushRequest, Pushed, RepoCache};

use crate::cache::GitRepoCache;
use crate::cache::tests::{commit, origin, run, settings};

struct Setup {
    tmp: tempfile::TempDir,
    cache: GitRepoCache,
    handler: HandlerId,
    agent: AgentId,
    /// The workspace (canonical) and the clone in it, with one commit on
    /// branch `work` ("work\n" in README).
    ws: PathBuf,
    clone: PathBuf,
    work: String,
}

impl Setup {
    fn origin(&self) -> PathBuf {
        self.tmp.path().join("origin")
    }

    fn req<'a>(&'a self, branch: &'a str, remote_branch: &'a str) -> PushRequest<'a> {
        PushRequest {
            repo: "demo",
            handler: self.handler,
            agent: self.agent,
            workspace: &self.ws,
            clone: &self.clone,
            branch,
            remote_branch,
        }
    }

    /// Push, recording what `record` was told.
    fn push(&self, branch: &str, remote: &str) -> (Result<Pushed, PushError>, Vec<Pushed>) {
        let mut seen = Vec::new();
        let mut admitted = Vec::new();
        let r = self.cache.push_repo(
            &self.req(branch, remote),
            &mut |p| {
                admitted.push(p.clone());
                Ok(())
            },
            &mut |p| {
                seen.push(p.clone());
                Ok(())
            },
        );
        // What was recorded was admitted first, for the same commit.
        assert!(
            seen.iter().all(|p| admitted.contains(p)),
            "{admitted:?} {seen:?}"
        );
        (r, seen)
    }

    /// `rev-parse` in the origin, `None` when the name does not resolve.
    fn origin_rev(&self, name: &str) -> Option<String> {
        rev(&self.origin(), name)
    }

    fn prefix(&self) -> String {
        format!("agency/{}", self.handler)
    }
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

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let src = origin(tmp.path(), "origin");
    let cache = GitRepoCache::new(
        tmp.path().join("repos"),
        BTreeMap::from([("demo".to_owned(), src)]),
        &settings(60, 0),
    );
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let clone = ws.join("repo");
    crate::cache::tests::clone_into(&cache, "demo", &clone).unwrap();
    run(&clone, &["switch", "--quiet", "-c", "work"]);
    commit(&clone, "work\n");
    let work = rev(&clone, "HEAD").unwrap();
    Setup {
        tmp,
        cache,
        handler: HandlerId::new_random(),
        agent: AgentId::new_random(),
        ws,
        clone,
        work,
    }
}

fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn issue10_item5_a_branch_reaches_the_origin_under_the_handlers_prefix() {
    let s = setup();
    let (pushed, seen) = s.push("work", "work");
    let pushed = pushed.unwrap();
    let want = format!("refs/heads/{}/work", s.prefix());
    assert_eq!(pushed.remote_ref, want);
    assert_eq!(pushed.commit, s.work);
    assert_eq!(seen, vec![pushed.clone()], "recorded once, before the push");
    assert_eq!(s.origin_rev(&want).as_deref(), Some(s.work.as_str()));
    // Only that ref was written: main is untouched, no tag came along.
    assert_eq!(
        git_in(&s.origin(), &["for-each-ref", "--format=%(refname)"]),
        format!("{want}\nrefs/heads/main")
    );
    // The temporary ref is gone from the mirror.
    let mirror = s.tmp.path().join("repos/demo.git");
    assert_eq!(git_in(&mirror, &["for-each-ref", "refs/agency-push/"]), "");

    // A rewritten branch replaces it (force within the prefix), under
    // another name too.
    run(
        &s.clone,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "--amend",
            "-m",
            "rewritten",
        ],
    );
    let amended = rev(&s.clone, "HEAD").unwrap();
    assert_eq!(s.push("work", "work").0.unwrap().commit, amended);
    assert_eq!(s.origin_rev(&want).as_deref(), Some(amended.as_str()));
    let other = s.push("work", "fix/x").0.unwrap();
    assert_eq!(other.remote_ref, format!("refs/heads/{}/fix/x", s.prefix()));
}

#[test]
fn issue10_item5_names_that_would_leave_the_prefix_are_refused() {
    let s = setup();
    for bad in [
        "../main",
        "refs/heads/main",
        "-f",
        "x:main",
        "+main",
        "a/../../main",
        "@{-1}",
        "main lock",
    ] {
        for (branch, remote) in [(bad, "ok"), ("work", bad)] {
            let (r, seen) = s.push(branch, remote);
            assert!(
                matches!(&r, Err(PushError::Invalid(e)) if e.contains("failed to accept")),
                "{branch:?} → {remote:?}: {r:?}"
            );
            assert!(seen.is_empty());
        }
    }
    assert_eq!(s.origin_rev("main"), rev(&s.origin(), "HEAD"));
    assert_eq!(
        git_in(&s.origin(), &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main"
    );
}

#[test]
fn issue10_item5_our_branch_rule_is_no_looser_than_gits() {
    // Every name check_branch accepts, git accepts as a branch name.
    for name in [
        "main",
        "fix/parser",
        "a.b",
        "v1.2-rc_3",
        "x/y/z",
        "HEADS",
        "a-",
        "a_",
        "_a",
        "a/b-c.d_e",
        "9",
    ] {
        assert!(agency_core::git_ref::check_branch("b", name).is_ok());
        let ok = Command::new("git")
            .args(["check-ref-format", "--branch", name])
            .output()
            .unwrap();
        assert!(ok.status.success(), "git refuses {name:?}");
    }
}

#[test]
fn issue10_item5_a_refused_record_pushes_nothing() {
    let s = setup();
    let r = s
        .cache
        .push_repo(&s.req("work", "work"), &mut |_| Ok(()), &mut |_| {
            Err("failed to push to repo demo: revoked".to_owned())
        });
    assert!(
        matches!(&r, Err(PushError::Refused(e)) if e.contains("revoked")),
        "{r:?}"
    );
    assert_eq!(s.origin_rev(&format!("{}/work", s.prefix())), None);
    let mirror = s.tmp.path().join("repos/demo.git");
    assert_eq!(git_in(&mirror, &["for-each-ref", "refs/agency-push/"]), "");
}

/// Issue 27: the fetch from the agent's clone came before the approval
/// check. A push the admission refuses (denied, or an approval still
/// pending) stops after the ref advertisement: nothing of the clone is
/// fetched into the mirror, and the admission is asked about the commit
/// the branch names.
#[test]
fn issue27_a_push_not_admitted_fetches_nothing_of_the_clone() {
    let s = setup();
    let mirror = s.tmp.path().join("repos/demo.git");
    let mut asked = Vec::new();
    let mut recorded = 0;
    let r = s.cache.push_repo(
        &s.req("work", "work"),
        &mut |p| {
            asked.push(p.clone());
            Err("failed to push: pending approval 7".to_owned())
        },
        &mut |_| {
            recorded += 1;
            Ok(())
        },
    );
    assert!(
        matches!(&r, Err(PushError::Refused(e)) if e.contains("pending approval 7")),
        "{r:?}"
    );
    assert_eq!(recorded, 0);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].commit, s.work, "admitted for the branch's commit");
    // The agent's commit never reached the mirror.
    let has = Command::new("git")
        .args(["--git-dir", ".", "cat-file", "-e", &s.work])
        .current_dir(&mirror)
        .status()
        .unwrap();
    assert!(!has.success(), "the clone's commit was fetched");
    assert_eq!(git_in(&mirror, &["for-each-ref", "refs/agency-push/"]), "");
    assert_eq!(s.origin_rev(&format!("{}/work", s.prefix())), None);
}

#[test]
fn issue10_item5_clones_that_are_not_plainly_the_agents_are_refused() {
    let s = setup();
    // A missing branch.
    let (r, _) = s.push("nope", "nope");
    assert!(
        matches!(&r, Err(PushError::Invalid(e)) if e.contains("no branch nope")),
        "{r:?}"
    );

    // Objects borrowed from elsewhere (the mirror, another agent's clone):
    // the upload-pack could then send objects the agent cannot read.
    let alternates = s.clone.join(".git/objects/info/alternates");
    std::fs::create_dir_all(alternates.parent().unwrap()).unwrap();
    std::fs::write(
        &alternates,
        format!(
            "{}\n",
            s.tmp.path().join("repos/demo.git/objects").display()
        ),
    )
    .unwrap();
    let (r, seen) = s.push("work", "work");
    assert!(
        matches!(&r, Err(PushError::Invalid(e)) if e.contains("alternates")),
        "{r:?}"
    );
    assert!(seen.is_empty());
    std::fs::remove_file(&alternates).unwrap();

    // A `.git` file pointing at the mirror.
    let other = s.ws.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(
        other.join(".git"),
        format!(
            "gitdir: {}\n",
            s.tmp.path().join("repos/demo.git").display()
        ),
    )
    .unwrap();
    let req = PushRequest {
        clone: &other,
        ..s.req("main", "main")
    };
    let r = s.cache.push_repo(&req, &mut |_| Ok(()), &mut |_| Ok(()));
    assert!(
        matches!(&r, Err(PushError::Invalid(e)) if e.contains("not a directory")),
        "{r:?}"
    );

    // A `.git` symlinked to another repository.
    let linked = s.ws.join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(s.tmp.path().join("repos/demo.git"), linked.join(".git")).unwrap();
    let req = PushRequest {
        clone: &linked,
        ..s.req("main", "main")
    };
    assert!(matches!(
        s.cache.push_repo(&req, &mut |_| Ok(()), &mut |_| Ok(())),
        Err(PushError::Invalid(_))
    ));

    // An `objects` directory symlinked elsewhere.
    let objects = s.clone.join(".git/objects");
    std::fs::rename(&objects, s.clone.join(".git/objects-real")).unwrap();
    std::os::unix::fs::symlink(s.clone.join(".git/objects-real"), &objects).unwrap();
    let (r, _) = s.push("work", "work");
    assert!(
        matches!(&r, Err(PushError::Invalid(e)) if e.contains("objects")),
        "{r:?}"
    );

    // Not a git clone at all; outside the workspace.
    let plain = s.ws.join("plain");
    std::fs::create_dir(&plain).unwrap();
    let req = PushRequest {
        clone: &plain,
        ..s.req("work", "work")
    };
    assert!(matches!(
        s.cache.push_repo(&req, &mut |_| Ok(()), &mut |_| Ok(())),
        Err(PushError::Invalid(_))
    ));
    let outside = s.tmp.path().join("origin");
    let req = PushRequest {
        clone: &outside,
        ..s.req("main", "main")
    };
    assert!(matches!(
        s.cache.push_repo(&req, &mut |_| Ok(()), &mut |_| Ok(())),
        Err(PushError::Invalid(_))
    ));
    assert_eq!(
        git_in(&s.origin(), &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main"
    );
}

#[test]
fn issue10_item5_a_hostile_clone_config_runs_nothing_as_the_daemon() {
    let s = setup();
    // Everything the agent's repository could make a git run inside it
    // execute. Each writes a marker; none may appear.
    let markers = s.tmp.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let hook = |name: &str| format!("touch '{}/{name}'", markers.display());
    let bin = s.tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for name in [
        "fsmonitor",
        "ssh",
        "pager",
        "pack-objects-hook",
        "alternate-refs",
        "editor",
    ] {
        script(&bin.join(name), &format!("{}\nexec \"$@\"", hook(name)));
    }
    let hooks = s.clone.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for name in [
        "pre-push",
        "reference-transaction",
        "post-checkout",
        "pre-commit",
        "post-update",
        "pre-receive",
        "update",
        "push-to-checkout",
        "fsmonitor-watchman",
        "post-index-change",
    ] {
        script(&hooks.join(name), &hook(&format!("hook-{name}")));
    }
    let cfg = |k: &str, v: &str| run(&s.clone, &["config", k, v]);
    let b = |n: &str| bin.join(n).display().to_string();
    cfg("core.fsmonitor", &b("fsmonitor"));
    cfg("core.sshCommand", &b("ssh"));
    cfg("core.pager", &b("pager"));
    cfg("core.editor", &b("editor"));
    cfg("core.alternateRefsCommand", &b("alternate-refs"));
    cfg("uploadpack.packObjectsHook", &b("pack-objects-hook"));
    cfg("core.hooksPath", &hooks.display().to_string());
    cfg("remote.origin.url", "ssh://attacker.invalid/x.git");
    // The config is live: git run inside the clone does run it (so the
    // test would see a daemon that did).
    let probe = Command::new("git")
        .args(["status", "--short"])
        .current_dir(&s.clone)
        .output()
        .unwrap();
    assert!(probe.status.success());
    assert!(
        markers.join("fsmonitor").exists(),
        "the probe ran fsmonitor"
    );
    for e in std::fs::read_dir(&markers).unwrap().flatten() {
        std::fs::remove_file(e.path()).unwrap();
    }

    let (r, _) = s.push("work", "work");
    let pushed = r.unwrap();
    assert_eq!(pushed.commit, s.work);
    let left: Vec<_> = std::fs::read_dir(&markers)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "ran as the daemon: {left:?}");
    // And it went to the configured origin, not the clone's.
    assert_eq!(
        s.origin_rev(&format!("{}/work", s.prefix())).as_deref(),
        Some(s.work.as_str())
    );
}

#[test]
fn issue10_item5_the_upload_pack_runs_under_the_agents_prefix() {
    let s = setup();
    // A stand-in for `agency sandbox-exec --policy P --`: logs its
    // arguments, then runs the rest. Its path has a space and a quote,
    // which the shell git runs it through must not split.
    let dir = s.tmp.path().join("sand box's");
    std::fs::create_dir(&dir).unwrap();
    let wrapper = dir.join("sandbox-exec");
    let log = s.tmp.path().join("wrapper.log");
    script(
        &wrapper,
        &format!(
            "printf '%s\\n' \"$@\" >> '{}'\nshift 3\nexec \"$@\"",
            log.display()
        ),
    );
    s.cache.upload_packs.set(
        s.agent,
        vec![
            wrapper.display().to_string(),
            "--policy".into(),
            "/p o'l".into(),
            "--".into(),
        ],
    );
    s.push("work", "work").0.unwrap();
    let args: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let once = [
        "--policy".to_owned(),
        "/p o'l".to_owned(),
        "--".to_owned(),
        "git-upload-pack".to_owned(),
        s.clone.join(".git").display().to_string(),
    ];
    // Twice: the ref advertisement the push is admitted on, then the fetch.
    assert_eq!(args, [once.clone(), once].concat());

    // Another agent has no prefix: plain upload-pack, the wrapper unused.
    std::fs::remove_file(&log).unwrap();
    s.cache.upload_packs.forget_agent(s.agent);
    s.push("work", "again").0.unwrap();
    assert!(!log.exists());

    // A prefix that refuses (a sandbox that cannot start) fails the push.
    s.cache
        .upload_packs
        .set(s.agent, vec!["/bin/false".into(), "--".into()]);
    let (r, seen) = s.push("work", "third");
    assert!(matches!(r, Err(PushError::Failed(_))), "{r:?}");
    assert!(seen.is_empty());
    assert_eq!(s.origin_rev(&format!("{}/third", s.prefix())), None);
}
