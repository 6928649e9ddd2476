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
//! clone a clear error, not a blocking thread forever.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agency_mcp::RepoCache;

use crate::config::ReposCacheConfig;

#[derive(Debug)]
pub(crate) struct GitRepoCache {
    dir: PathBuf,
    /// Per configured repo: its source and the lock that serialises its
    /// mirror's updates, which guards the time of its last fetch.
    repos: BTreeMap<String, Repo>,
    fetch_timeout: Duration,
    refresh_interval: Duration,
    /// The `git` program (a test substitutes a wrapper).
    git: PathBuf,
}

#[derive(Debug)]
struct Repo {
    source: String,
    /// When this daemon last brought the mirror up to date. In memory only:
    /// a restarted daemon refreshes on its first clone, which is cheap.
    fetched: Mutex<Option<Instant>>,
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
        }
    }

    /// The mirror of `name`, created or refreshed as needed; holds only
    /// this repo's lock.
    fn mirror(&self, name: &str, repo: &Repo) -> Result<PathBuf, String> {
        let mut fetched = repo.fetched.lock().unwrap_or_else(|p| p.into_inner());
        let mirror = self.dir.join(format!("{name}.git"));
        let fresh = fetched.is_some_and(|at| at.elapsed() < self.refresh_interval);
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
    fn git(&self, args: &[&str], cwd: Option<&Path>, what: &str) -> Result<(), String> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(&self.git);
        cmd.args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("failed to {what}: failed to run git: {e}"))?;
        // Read stderr on the side: a chatty git must not block on a full pipe.
        let stderr = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = err.by_ref().take(64 << 10).read_to_end(&mut buf);
                buf
            })
        });
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
            crate::process::signal_group(child.id(), nix::sys::signal::Signal::SIGKILL);
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
                    .find(|a| !a.starts_with('-') && !a.contains('/'))
                    .unwrap_or(&"")
            ));
        }
        Ok(())
    }
}

impl RepoCache for GitRepoCache {
    fn clone_repo(&self, name: &str, dest: &Path) -> Result<String, String> {
        let Some(repo) = self.repos.get(name) else {
            return Err(format!("no repo named {name} is configured in [repos]"));
        };
        let mirror = self.mirror(name, repo)?;
        let what = format!("clone repo {name}");
        self.git(
            &["clone", "--quiet", &path_str(&mirror)?, &path_str(dest)?],
            None,
            &what,
        )?;
        // The clone's origin is the real source, so a push goes there.
        self.git(
            &["remote", "set-url", "origin", &repo.source],
            Some(dest),
            &what,
        )?;
        Ok(repo.source.clone())
    }
}

fn path_str(p: &Path) -> Result<String, String> {
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("path {} is not UTF-8", p.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;

    use super::*;

    fn run(dir: &Path, args: &[&str]) {
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

    fn commit(dir: &Path, text: &str) {
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
    fn origin(root: &Path, name: &str) -> String {
        let origin = root.join(name);
        std::fs::create_dir(&origin).unwrap();
        run(&origin, &["init", "--quiet", "-b", "main"]);
        commit(&origin, "one\n");
        origin.to_str().unwrap().to_owned()
    }

    fn settings(timeout: u64, interval: u64) -> ReposCacheConfig {
        ReposCacheConfig {
            fetch_timeout_secs: timeout,
            refresh_interval_secs: interval,
        }
    }

    fn dest(root: &Path, ws: &str) -> PathBuf {
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
        assert_eq!(cache.clone_repo("demo", &a).unwrap(), src);
        assert_eq!(std::fs::read_to_string(a.join("README")).unwrap(), "one\n");
        assert!(tmp.path().join("repos/demo.git").is_dir());

        // A new commit upstream reaches the next clone through the mirror
        // (refresh interval 0: every clone fetches).
        commit(&tmp.path().join("origin"), "two\n");
        let b = dest(tmp.path(), "ws2");
        cache.clone_repo("demo", &b).unwrap();
        assert_eq!(std::fs::read_to_string(b.join("README")).unwrap(), "two\n");
        assert!(
            cache
                .clone_repo("nope", &tmp.path().join("x"))
                .unwrap_err()
                .contains("no repo named nope")
        );
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

        cache.clone_repo("demo", &dest(tmp.path(), "ws1")).unwrap();
        assert_eq!(fetches(), 1, "the first clone creates the mirror");
        commit(&tmp.path().join("origin"), "two\n");
        let b = dest(tmp.path(), "ws2");
        cache.clone_repo("demo", &b).unwrap();
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
        let err = cache
            .clone_repo("slow", &dest(tmp.path(), "ws1"))
            .unwrap_err();
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
        cache.clone_repo("later", &dest(tmp.path(), "ws2")).unwrap();
        let mirror = tmp.path().join("repos/later.git");
        run(
            &mirror,
            &["--git-dir", ".", "remote", "set-url", "origin", &url],
        );
        let err = cache
            .clone_repo("later", &dest(tmp.path(), "ws3"))
            .unwrap_err();
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
                let _ = slow_done.send(cache.clone_repo("slow", &d));
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
                let _ = fast_done.send(cache.clone_repo("fast", &d));
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
