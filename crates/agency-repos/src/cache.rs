//! The repo cache: `[repos]` in `agency.toml` names repositories (URLs or
//! local paths); each is kept as a bare mirror under `repos/NAME.git` in the
//! home, created on first use and refreshed before a clone unless it was
//! fetched less than `[repos_cache] refresh_interval_secs` ago, and agents
//! clone from the mirror into their workspace (`repo_clone`). We shell out
//! to `git`: it does worktrees and mirrors safely, libraries do not all.
//!
//! Each repo has a lock of its own (two clones of one repo must not fetch
//! into the same mirror at once; clones of different repos do not wait for
//! each other), and every `git` runs in a process group of its own with a
//! deadline (`fetch_timeout_secs`): a remote that never answers costs one
//! clone a clear error, not a blocking thread forever. `git` gets the
//! daemon's environment without its `GIT_*` variables, except those that
//! say how to reach and authenticate to an origin (`KEEP_GIT_ENV`).
//!
//! A clone is made through git's transport (`--no-local`), not as a local
//! copy: a local clone hardlinks the mirror's object files into the
//! workspace, where an agent that may write its workspace could rewrite
//! one and corrupt the mirror every later clone comes from. The transport
//! also sends only reachable objects. The clone's `origin` is the repo's
//! source without any password or token written in its URL.
//!
//! `repo_push` (`push.rs`) brings an agent's commit into the mirror
//! and pushes it from there.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agency_config::ReposCacheConfig;
use agency_mcp::{CloneError, PushError, PushRequest, Pushed, RepoCache};

use crate::push::UploadPacks;

/// The `GIT_*` variables of the daemon's environment that `git` keeps: how
/// to reach and authenticate to an origin, and where the user's own git
/// configuration is. Any other (`GIT_DIR`, `GIT_OBJECT_DIRECTORY`,
/// `GIT_CONFIG_PARAMETERS`, …) would redirect or reconfigure what we run.
const KEEP_GIT_ENV: &[&str] = &[
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
    "GIT_ASKPASS",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_PROXY_COMMAND",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
];

/// Where clones are made before they are moved into a workspace (a name
/// no mirror has: mirrors are `NAME.git`).
const STAGING: &str = ".staging";

#[derive(Debug)]
pub struct GitRepoCache {
    dir: PathBuf,
    /// Per configured repo: its source and the lock that serialises its
    /// mirror's updates, which guards the time of its last fetch.
    repos: BTreeMap<String, Repo>,
    fetch_timeout: Duration,
    refresh_interval: Duration,
    /// The `git` program (a test substitutes a wrapper).
    git: PathBuf,
    /// How each agent's clone is read for a push (`push.rs`); shared
    /// with the supervisor, which registers each agent's sandbox.
    pub upload_packs: std::sync::Arc<UploadPacks>,
}

#[derive(Debug)]
pub(crate) struct Repo {
    pub(crate) source: String,
    /// When this daemon last brought the mirror up to date. In memory only:
    /// a restarted daemon refreshes on its first clone, which is cheap.
    pub(crate) fetched: Mutex<Option<Instant>>,
}

impl GitRepoCache {
    pub fn new(
        dir: PathBuf,
        sources: BTreeMap<String, String>,
        settings: &ReposCacheConfig,
    ) -> GitRepoCache {
        GitRepoCache {
            dir,
            repos: sources
                .into_iter()
                .map(|(name, source)| {
                    let repo = Repo {
                        source,
                        fetched: Mutex::new(None),
                    };
                    (name, repo)
                })
                .collect(),
            fetch_timeout: Duration::from_secs(settings.fetch_timeout_secs),
            refresh_interval: Duration::from_secs(settings.refresh_interval_secs),
            git: PathBuf::from("git"),
            upload_packs: std::sync::Arc::default(),
        }
    }

    /// Remove what clones a stopped daemon left half-made in the staging
    /// directory (one daemon per home holds the home's lock, so nothing
    /// else is cloning there).
    pub fn clear_staging(&self) {
        let staging = self.dir.join(STAGING);
        if let Err(e) = std::fs::remove_dir_all(&staging)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, dir = %staging.display(), "failed to clear the clone staging directory");
        }
    }

    /// Repo `name`'s configuration.
    pub(crate) fn repo(&self, name: &str) -> Option<&Repo> {
        self.repos.get(name)
    }

    /// The mirror of `name`, created or refreshed as needed; holds only
    /// this repo's lock.
    fn mirror(&self, name: &str, repo: &Repo) -> Result<PathBuf, String> {
        let mut fetched = repo.fetched.lock().unwrap_or_else(|p| p.into_inner());
        self.mirror_locked(name, repo, &mut fetched, true)
    }

    /// The mirror of `name`, made if missing and, when `refresh`, fetched
    /// unless that was done recently. The caller holds the repo's lock,
    /// whose guarded value is `fetched`.
    pub(crate) fn mirror_locked(
        &self,
        name: &str,
        repo: &Repo,
        fetched: &mut Option<Instant>,
        refresh: bool,
    ) -> Result<PathBuf, String> {
        let mirror = self.dir.join(format!("{name}.git"));
        let fresh = !refresh || fetched.is_some_and(|at| at.elapsed() < self.refresh_interval);
        if mirror.is_dir() && fresh {
            tracing::debug!(repo = name, "mirror fetched recently; not fetching");
            return Ok(mirror);
        }
        let what = format!("fetch repo {name}");
        if mirror.is_dir() {
            self.git(
                &[
                    "--git-dir",
                    &path_str(&mirror)?,
                    "remote",
                    "update",
                    "--prune",
                ],
                None,
                &what,
            )?;
        } else {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| format!("failed to create {}: {e}", self.dir.display()))?;
            // A half-made mirror from a failed or killed clone would be
            // taken for a real one next time.
            let result = self.git(
                &[
                    "clone",
                    "--mirror",
                    "--quiet",
                    &repo.source,
                    &path_str(&mirror)?,
                ],
                None,
                &what,
            );
            if result.is_err() {
                let _ = std::fs::remove_dir_all(&mirror);
            }
            result?;
        }
        tracing::info!(repo = name, "mirror fetched");
        *fetched = Some(Instant::now());
        Ok(mirror)
    }

    /// Run `git` with a deadline, in a process group of its own so that a
    /// timeout kills its helpers too (`git-remote-https`, `ssh`, …).
    pub(crate) fn git(&self, args: &[&str], cwd: Option<&Path>, what: &str) -> Result<(), String> {
        self.git_out(args, cwd, what).map(drop)
    }

    /// [`Self::git`], returning what git printed on stdout (the first 64 KiB).
    pub(crate) fn git_out(
        &self,
        args: &[&str],
        cwd: Option<&Path>,
        what: &str,
    ) -> Result<String, String> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(&self.git);
        for (key, _) in std::env::vars_os() {
            let name = key.to_string_lossy();
            if name.starts_with("GIT_") && !KEEP_GIT_ENV.contains(&name.as_ref()) {
                cmd.env_remove(&key);
            }
        }
        cmd.args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            // An upload-pack reading an agent's clone must not fetch missing
            // objects from a promisor remote its configuration names.
            .env("GIT_NO_LAZY_FETCH", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("failed to {what}: failed to run git: {e}"))?;
        // Read both pipes on the side: a chatty git must not block on a
        // full pipe.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            pipe.map(|mut p| {
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let _ = p.by_ref().take(64 << 10).read_to_end(&mut buf);
                    // The rest is read and dropped, so git never blocks.
                    let _ = std::io::copy(&mut p, &mut std::io::sink());
                    buf
                })
            })
        };
        let stdout = drain(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let stderr = drain(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let deadline = Instant::now() + self.fetch_timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() >= deadline => break None,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("failed to {what}: failed to wait for git: {e}")),
            }
        };
        let Some(status) = status else {
            // git and its helpers (`git-remote-https`, ssh).
            agency_sandbox::process_group::kill_group(child.id());
            let _ = child.kill();
            let _ = child.wait();
            tracing::warn!(
                what,
                timeout_secs = self.fetch_timeout.as_secs(),
                "git timed out"
            );
            return Err(format!(
                "failed to {what}: git did not finish within {} s and was stopped; the remote may be unreachable or slow (try again later, or raise [repos_cache] fetch_timeout_secs in agency.toml)",
                self.fetch_timeout.as_secs()
            ));
        };
        let err = stderr
            .and_then(|h| h.join().ok())
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .unwrap_or_default();
        if !status.success() {
            tracing::warn!(what, stderr = %err, "git failed");
            return Err(format!(
                "failed to {what}: git {} failed: {err}",
                args.iter()
                    .find(|a| !a.starts_with('-') && !a.contains(['/', '=']))
                    .unwrap_or(&"")
            ));
        }
        let out = stdout
            .and_then(|h| h.join().ok())
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .unwrap_or_default();
        Ok(out)
    }
}

impl RepoCache for GitRepoCache {
    fn clone_repo(&self, name: &str, workspace: &Path, dest: &Path) -> Result<String, CloneError> {
        let Some(repo) = self.repos.get(name) else {
            return Err(CloneError::Failed(format!(
                "no repo named {name} is configured in [repos]"
            )));
        };
        let mirror = self.mirror(name, repo).map_err(CloneError::Failed)?;
        let what = format!("clone repo {name}");
        // Cloned where only the daemon writes, then moved into the
        // workspace in one rename beneath it (`place.rs`): git never
        // runs on a path of the agent's, which could change between a
        // check and the clone (a parent swapped for a symlink
        // made git write outside the sandbox), nor in a repository the
        // agent could already have configured.
        let staging = self.dir.join(STAGING);
        create_private(&staging).map_err(|e| {
            CloneError::Failed(format!("failed to create {}: {e}", staging.display()))
        })?;
        let staged = staging.join(uuid::Uuid::new_v4().simple().to_string());
        let cloned = (|| {
            let staged_str = path_str(&staged)?;
            // `--no-local`: through git's transport, never hardlinks into
            // the mirror (see the module doc).
            self.git(
                &[
                    "clone",
                    "--quiet",
                    "--no-local",
                    "--end-of-options",
                    &path_str(&mirror)?,
                    &staged_str,
                ],
                None,
                &what,
            )?;
            // The clone's origin is the real source, so the agent sees
            // where its work goes; it pushes through `repo_push`, never
            // with the credentials a URL may carry.
            let public = public_source(&repo.source);
            self.git(
                &["remote", "set-url", "origin", &public],
                Some(&staged),
                &what,
            )?;
            Ok(public)
        })();
        let placed = cloned.map_err(CloneError::Failed).and_then(|public| {
            crate::place::place_dir(&staged, workspace, dest)
                .map(|()| public)
                .map_err(|e| match e {
                    crate::place::PlaceError::Invalid(m) => CloneError::Invalid(m),
                    crate::place::PlaceError::Failed(m) => CloneError::Failed(m),
                })
        });
        if placed.is_err() {
            let _ = std::fs::remove_dir_all(&staged);
        }
        placed
    }

    fn push_repo(
        &self,
        req: &PushRequest<'_>,
        admit: &mut dyn FnMut(&Pushed) -> Result<(), String>,
        record: &mut dyn FnMut(&Pushed) -> Result<(), String>,
    ) -> Result<Pushed, PushError> {
        crate::push::push(self, req, admit, record)
    }
}

/// A repo's source as an agent may see it: a URL's password or token
/// (`https://user:TOKEN@host/…`, `https://TOKEN@host/…`) removed. An SSH
/// user name (`git@host:…`, `ssh://git@host/…`) is no secret and stays.
pub(crate) fn public_source(source: &str) -> String {
    let Some((scheme, rest)) = source.split_once("://") else {
        return source.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return source.to_owned();
    };
    let keep_user = scheme.eq_ignore_ascii_case("ssh") || scheme.eq_ignore_ascii_case("git+ssh");
    match userinfo.split_once(':') {
        Some((user, _secret)) if keep_user => format!("{scheme}://{user}@{host}{path}"),
        None if keep_user => source.to_owned(),
        _ => format!("{scheme}://{host}{path}"),
    }
}

pub(crate) fn path_str(p: &Path) -> Result<String, String> {
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("path {} is not UTF-8", p.display()))
}

/// The clone staging directory, private to the daemon's user.
fn create_private(d: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(d)
    {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => Ok(()),
        r => r,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;

    use super::*;

    pub(crate) fn run(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            ok.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
    }

    pub(crate) fn commit(dir: &Path, text: &str) {
        std::fs::write(dir.join("README"), text).unwrap();
        run(dir, &["add", "README"]);
        run(
            dir,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "--quiet",
                "-m",
                text,
            ],
        );
    }

    /// A local origin repository with one commit ("one\n").
    pub(crate) fn origin(root: &Path, name: &str) -> String {
        let origin = root.join(name);
        std::fs::create_dir(&origin).unwrap();
        run(&origin, &["init", "--quiet", "-b", "main"]);
        commit(&origin, "one\n");
        origin.to_str().unwrap().to_owned()
    }

    pub(crate) fn settings(timeout: u64, interval: u64) -> ReposCacheConfig {
        ReposCacheConfig {
            fetch_timeout_secs: timeout,
            refresh_interval_secs: interval,
        }
    }

    /// Clone into `d`, a new directory in an existing workspace.
    pub(crate) fn clone_into(cache: &GitRepoCache, name: &str, d: &Path) -> Result<String, String> {
        cache
            .clone_repo(name, d.parent().unwrap(), Path::new(d.file_name().unwrap()))
            .map_err(|e| e.to_string())
    }

    pub(crate) fn dest(root: &Path, ws: &str) -> PathBuf {
        let d = root.join(ws).join("repo");
        std::fs::create_dir_all(d.parent().unwrap()).unwrap();
        d
    }

    /// A `git://` remote that accepts connections and never answers: a
    /// fetch from it hangs until the connection is closed. Each accepted
    /// connection is handed to the test, which decides when to close it.
    fn silent_remote() -> (String, mpsc::Receiver<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("git://{}/hang.git", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                if tx.send(conn).is_err() {
                    return;
                }
            }
        });
        (url, rx)
    }

    #[test]
    fn clones_come_from_a_refreshed_mirror() {
        let tmp = tempfile::tempdir().unwrap();
        let src = origin(tmp.path(), "origin");
        let cache = GitRepoCache::new(
            tmp.path().join("repos"),
            BTreeMap::from([("demo".to_owned(), src.clone())]),
            &settings(60, 0),
        );

        let a = dest(tmp.path(), "ws1");
        assert_eq!(clone_into(&cache, "demo", &a).unwrap(), src);
        assert_eq!(std::fs::read_to_string(a.join("README")).unwrap(), "one\n");
        assert!(tmp.path().join("repos/demo.git").is_dir());

        // A new commit upstream reaches the next clone through the mirror
        // (refresh interval 0: every clone fetches).
        commit(&tmp.path().join("origin"), "two\n");
        let b = dest(tmp.path(), "ws2");
        clone_into(&cache, "demo", &b).unwrap();
        assert_eq!(std::fs::read_to_string(b.join("README")).unwrap(), "two\n");
        assert!(
            clone_into(&cache, "nope", &tmp.path().join("x"))
                .unwrap_err()
                .contains("no repo named nope")
        );
    }

    /// Every regular file under `dir`, by (device, inode).
    fn inodes(dir: &Path) -> std::collections::BTreeSet<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let mut out = std::collections::BTreeSet::new();
        let mut todo = vec![dir.to_owned()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let m = e.path().symlink_metadata().unwrap();
                if m.is_dir() {
                    todo.push(e.path());
                } else if m.is_file() {
                    out.insert((m.dev(), m.ino()));
                }
            }
        }
        out
    }

    #[test]
    fn issue10_item5_a_clone_shares_no_object_file_with_the_mirror() {
        // A local clone would hardlink the mirror's objects into the
        // workspace: an agent could chmod one and rewrite it, corrupting
        // the mirror every later clone comes from.
        let tmp = tempfile::tempdir().unwrap();
        let src = origin(tmp.path(), "origin");
        // Objects as loose files and as a pack, both of which a local
        // clone would link.
        commit(&tmp.path().join("origin"), "two\n");
        run(&tmp.path().join("origin"), &["repack", "-q"]);
        commit(&tmp.path().join("origin"), "three\n");
        let cache = GitRepoCache::new(
            tmp.path().join("repos"),
            BTreeMap::from([("demo".to_owned(), src)]),
            &settings(60, 0),
        );
        let d = dest(tmp.path(), "ws1");
        clone_into(&cache, "demo", &d).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("README")).unwrap(),
            "three\n"
        );
        let mirror = inodes(&tmp.path().join("repos/demo.git/objects"));
        let clone = inodes(&d.join(".git/objects"));
        assert!(!mirror.is_empty() && !clone.is_empty());
        assert!(
            mirror.is_disjoint(&clone),
            "the clone shares object files with the mirror"
        );
    }

    #[test]
    fn issue10_item5_a_clone_origin_carries_no_credentials() {
        for (src, public) in [
            (
                "https://x-access-token:s3cret@github.com/o/r.git",
                "https://github.com/o/r.git",
            ),
            (
                "https://s3cret@github.com/o/r.git",
                "https://github.com/o/r.git",
            ),
            ("http://u:p@127.0.0.1:8/r", "http://127.0.0.1:8/r"),
            (
                "ssh://git:pw@example.org/r.git",
                "ssh://git@example.org/r.git",
            ),
            ("ssh://git@example.org/r.git", "ssh://git@example.org/r.git"),
            ("git@github.com:o/r.git", "git@github.com:o/r.git"),
            ("https://github.com/o/r.git", "https://github.com/o/r.git"),
            ("https://github.com/a@b", "https://github.com/a@b"),
            ("/srv/repos/r.git", "/srv/repos/r.git"),
        ] {
            assert_eq!(public_source(src), public, "{src}");
        }
    }

    #[test]
    fn issue9_item17_a_mirror_fetched_recently_is_not_fetched_again() {
        let tmp = tempfile::tempdir().unwrap();
        let src = origin(tmp.path(), "origin");
        // A `git` that records its arguments, then runs the real one.
        let calls = tmp.path().join("git-calls");
        let wrapper = tmp.path().join("git-wrapper");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\necho \"$*\" >> '{}'\nexec git \"$@\"\n",
                calls.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cache = GitRepoCache::new(
            tmp.path().join("repos"),
            BTreeMap::from([("demo".to_owned(), src)]),
            &settings(60, 3600),
        );
        cache.git = wrapper;
        let fetches = || {
            std::fs::read_to_string(&calls)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("remote update") || l.contains("clone --mirror"))
                .count()
        };

        clone_into(&cache, "demo", &dest(tmp.path(), "ws1")).unwrap();
        assert_eq!(fetches(), 1, "the first clone creates the mirror");
        commit(&tmp.path().join("origin"), "two\n");
        let b = dest(tmp.path(), "ws2");
        clone_into(&cache, "demo", &b).unwrap();
        assert_eq!(fetches(), 1, "a clone within the interval does not fetch");
        // So the second clone is the mirror as it was.
        assert_eq!(std::fs::read_to_string(b.join("README")).unwrap(), "one\n");
    }

    #[test]
    fn issue9_item17_a_hanging_fetch_times_out_with_the_repo_named() {
        let tmp = tempfile::tempdir().unwrap();
        let (url, conns) = silent_remote();
        let cache = GitRepoCache::new(
            tmp.path().join("repos"),
            BTreeMap::from([("slow".to_owned(), url.clone())]),
            &settings(1, 0),
        );
        // First use: the mirror clone hangs.
        let err = clone_into(&cache, "slow", &dest(tmp.path(), "ws1")).unwrap_err();
        assert!(
            err.contains("failed to fetch repo slow")
                && err.contains("did not finish within 1 s")
                && err.contains("fetch_timeout_secs"),
            "{err}"
        );
        assert!(conns.try_recv().is_ok(), "git did reach the remote");
        // No half-made mirror is left to be mistaken for a real one.
        assert!(!tmp.path().join("repos/slow.git").exists());

        // An existing mirror whose remote hangs: the refresh times out.
        let src = origin(tmp.path(), "origin");
        let cache = GitRepoCache::new(
            tmp.path().join("repos"),
            BTreeMap::from([("later".to_owned(), src)]),
            &settings(1, 0),
        );
        clone_into(&cache, "later", &dest(tmp.path(), "ws2")).unwrap();
        let mirror = tmp.path().join("repos/later.git");
        run(
            &mirror,
            &["--git-dir", ".", "remote", "set-url", "origin", &url],
        );
        let err = clone_into(&cache, "later", &dest(tmp.path(), "ws3")).unwrap_err();
        assert!(
            err.contains("failed to fetch repo later") && err.contains("did not finish"),
            "{err}"
        );
    }

    #[test]
    fn issue9_item17_clones_of_different_repos_do_not_wait_for_each_other() {
        let tmp = tempfile::tempdir().unwrap();
        let (url, conns) = silent_remote();
        let src = origin(tmp.path(), "origin");
        let cache = std::sync::Arc::new(GitRepoCache::new(
            tmp.path().join("repos"),
            BTreeMap::from([("slow".to_owned(), url), ("fast".to_owned(), src)]),
            &settings(600, 0),
        ));
        // Repo `slow` is being fetched (and holds its lock) until we close
        // the connection its git is waiting on.
        let (slow_done, slow_result) = mpsc::channel();
        {
            let cache = cache.clone();
            let d = dest(tmp.path(), "ws1");
            std::thread::spawn(move || {
                let _ = slow_done.send(clone_into(&cache, "slow", &d));
            });
        }
        let conn = conns
            .recv_timeout(Duration::from_secs(60))
            .expect("the slow clone reaches its remote");

        // Meanwhile `fast` clones. With one lock for all repos it would wait
        // for `slow`, which waits for us: the bound turns that into a failure.
        let (fast_done, fast_result) = mpsc::channel();
        {
            let cache = cache.clone();
            let d = dest(tmp.path(), "ws2");
            std::thread::spawn(move || {
                let _ = fast_done.send(clone_into(&cache, "fast", &d));
            });
        }
        let fast = fast_result
            .recv_timeout(Duration::from_secs(60))
            .expect("the clone of another repo does not wait for the slow one");
        assert!(fast.is_ok(), "{fast:?}");
        assert!(
            slow_result.try_recv().is_err(),
            "the slow fetch is still running"
        );

        // The remote hangs up: the slow clone ends, with an error.
        drop(conn);
        let slow = slow_result.recv_timeout(Duration::from_secs(60)).unwrap();
        assert!(
            slow.as_ref()
                .is_err_and(|e| e.contains("failed to fetch repo slow")),
            "{slow:?}"
        );
    }
}
