//! The repo cache: `[repos]` in `agency.toml` names repositories (URLs or
//! local paths); each is kept as a bare mirror under `repos/NAME.git` in the
//! home, created on first use and refreshed on every clone, and agents clone
//! from the mirror into their workspace (`repo_clone`). We shell out to
//! `git`: it does worktrees and mirrors safely, libraries do not all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use agency_mcp::RepoCache;

#[derive(Debug)]
pub(crate) struct GitRepoCache {
    dir: PathBuf,
    sources: BTreeMap<String, String>,
    /// Serializes mirror updates: two clones of one repo must not fetch
    /// into the same mirror at once.
    lock: Mutex<()>,
}

impl GitRepoCache {
    pub fn new(dir: PathBuf, sources: BTreeMap<String, String>) -> GitRepoCache {
        GitRepoCache {
            dir,
            sources,
            lock: Mutex::new(()),
        }
    }

    fn mirror(&self, name: &str, source: &str) -> Result<PathBuf, String> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mirror = self.dir.join(format!("{name}.git"));
        if mirror.is_dir() {
            git(
                &[
                    "--git-dir",
                    &path_str(&mirror)?,
                    "remote",
                    "update",
                    "--prune",
                ],
                None,
            )?;
        } else {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| format!("failed to create {}: {e}", self.dir.display()))?;
            git(
                &["clone", "--mirror", "--quiet", source, &path_str(&mirror)?],
                None,
            )?;
        }
        Ok(mirror)
    }
}

impl RepoCache for GitRepoCache {
    fn clone_repo(&self, name: &str, dest: &Path) -> Result<String, String> {
        let Some(source) = self.sources.get(name) else {
            return Err(format!("no repo named {name} is configured in [repos]"));
        };
        let mirror = self.mirror(name, source)?;
        git(
            &["clone", "--quiet", &path_str(&mirror)?, &path_str(dest)?],
            None,
        )?;
        // The clone's origin is the real source, so a push goes there.
        git(&["remote", "set-url", "origin", source], Some(dest))?;
        Ok(source.clone())
    }
}

fn path_str(p: &Path) -> Result<String, String> {
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("path {} is not UTF-8", p.display()))
}

fn git(args: &[&str], cwd: Option<&Path>) -> Result<(), String> {
    let mut cmd = Command::new("git");
    cmd.args(args).env("GIT_TERMINAL_PROMPT", "0");
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("failed to run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
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

    #[test]
    fn clones_come_from_a_refreshed_mirror() {
        let tmp = tempfile::tempdir().unwrap();
        let origin = tmp.path().join("origin");
        std::fs::create_dir(&origin).unwrap();
        run(&origin, &["init", "--quiet", "-b", "main"]);
        std::fs::write(origin.join("README"), "one\n").unwrap();
        run(&origin, &["add", "README"]);
        run(
            &origin,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "--quiet",
                "-m",
                "one",
            ],
        );
        let src = origin.to_str().unwrap().to_owned();
        let cache = GitRepoCache::new(
            tmp.path().join("repos"),
            BTreeMap::from([("demo".to_owned(), src.clone())]),
        );

        let a = tmp.path().join("ws1/demo");
        std::fs::create_dir_all(a.parent().unwrap()).unwrap();
        assert_eq!(cache.clone_repo("demo", &a).unwrap(), src);
        assert_eq!(std::fs::read_to_string(a.join("README")).unwrap(), "one\n");
        assert!(tmp.path().join("repos/demo.git").is_dir());

        // A new commit upstream reaches the next clone through the mirror.
        std::fs::write(origin.join("README"), "two\n").unwrap();
        run(
            &origin,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "--quiet",
                "-am",
                "two",
            ],
        );
        let b = tmp.path().join("ws2/demo");
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        cache.clone_repo("demo", &b).unwrap();
        assert_eq!(std::fs::read_to_string(b.join("README")).unwrap(), "two\n");
        assert!(
            cache
                .clone_repo("nope", &tmp.path().join("x"))
                .unwrap_err()
                .contains("no repo named nope")
        );
    }
}
