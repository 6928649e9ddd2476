//! The search tools: `glob` (paths matching a pattern, sorted, capped;
//! directories end in `/`, so `*` lists a directory) and `grep` (lines
//! matching a regular expression, as `path:line:text`, capped).

use serde_json::Value;

use super::common::{Args, Ctx, MAX_FILE_BYTES, Outcome, ToolError, looks_binary};
use super::globs::{Glob, MAX_VISITED, WalkStats, split_literal_prefix, walk};

/// Paths `glob` lists at most.
const MAX_PATHS: usize = 1000;

/// Matching lines `grep` shows at most.
const MAX_MATCHES: usize = 500;

/// `grep` stops once its output passes this many bytes.
const MAX_GREP_OUTPUT: usize = 30_000;

/// A matching line longer than this is cut in `grep`'s output.
const MAX_MATCH_CHARS: usize = 300;

pub(crate) fn glob(ctx: &Ctx, input: &Value) -> Outcome {
    let a = Args::new(input, &["pattern", "path"])?;
    let pattern = a.str("pattern")?;
    let base = ctx.resolve("path", a.opt_str("path")?.unwrap_or("."))?;
    // Only the directory the pattern's literal start names is walked.
    let (dir, rest) = split_literal_prefix(pattern);
    let root = if dir.is_empty() {
        base
    } else {
        ctx.resolve("pattern", &base.join(&dir).to_string_lossy())?
    };
    let shown_root = ctx.show(&root);
    if rest.is_empty() {
        // No wildcard at all: the path exists or it does not.
        return Ok(match std::fs::symlink_metadata(&root) {
            Ok(m) if m.is_dir() => format!("{shown_root}/"),
            Ok(_) => shown_root,
            Err(_) => format!("no path matches {pattern:?}"),
        });
    }
    if !root.is_dir() {
        return Err(ToolError::not_found(format!(
            "failed to search {shown_root}: it is not a directory"
        )));
    }
    let matcher = Glob::new(&rest).map_err(|e| ToolError::invalid(e.to_string()))?;
    let mut found = Vec::new();
    let stats = walk(&root, |e| {
        if matcher.matches(&e.rel) {
            let mut shown = ctx.show(&e.path);
            if e.is_dir {
                shown.push('/');
            }
            found.push(shown);
        }
        true
    });
    found.sort();
    if found.is_empty() {
        let mut out = format!("no path matches {pattern:?} under {shown_root}");
        out.push_str(&notes(&stats));
        return Ok(out);
    }
    let total = found.len();
    let mut out = found
        .into_iter()
        .take(MAX_PATHS)
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    if total > MAX_PATHS {
        out.push_str(&format!(
            "[{total} paths match; the first {MAX_PATHS} are shown: narrow the pattern]\n"
        ));
    }
    out.push_str(&notes(&stats));
    Ok(out)
}

pub(crate) fn grep(ctx: &Ctx, input: &Value) -> Outcome {
    let a = Args::new(input, &["pattern", "path", "glob", "case_insensitive"])?;
    let pattern = a.str("pattern")?;
    let root = ctx.resolve("path", a.opt_str("path")?.unwrap_or("."))?;
    let filter = a.opt_str("glob")?;
    let regex = regex::RegexBuilder::new(pattern)
        .case_insensitive(a.bool("case_insensitive", false)?)
        .build()
        .map_err(|e| ToolError::invalid(format!("invalid regular expression: {e}")))?;
    // A filter without `/` is matched against file names, like `rg -g`.
    let filter = match filter {
        Some(g) => Some((
            Glob::new(g).map_err(|e| ToolError::invalid(e.to_string()))?,
            g.contains('/'),
        )),
        None => None,
    };
    let shown_root = ctx.show(&root);
    let meta = std::fs::metadata(&root).map_err(|e| ToolError::io("search", &shown_root, &e))?;
    let mut s = Search {
        ctx,
        regex: &regex,
        out: String::new(),
        matches: 0,
        skipped: 0,
        full: false,
    };
    let mut stats = WalkStats::default();
    if meta.is_dir() {
        stats = walk(&root, |e| {
            if e.is_dir {
                return true;
            }
            let wanted = filter.as_ref().is_none_or(|(g, whole)| {
                let name = e.rel.rsplit('/').next().unwrap_or(&e.rel);
                g.matches(if *whole { &e.rel } else { name })
            });
            if wanted {
                s.file(&e.path);
            }
            !s.full
        });
    } else {
        s.file(&root);
    }
    let mut out = s.out;
    if s.matches == 0 {
        out = format!("no line matches /{pattern}/ in {shown_root}\n");
    }
    if s.full {
        out.push_str(&format!(
            "[stopped after {} matches: narrow the pattern, path or glob]\n",
            s.matches
        ));
    }
    if s.skipped > 0 {
        out.push_str(&format!(
            "[{} binary or larger-than-{} MiB files were skipped]\n",
            s.skipped,
            MAX_FILE_BYTES / (1024 * 1024)
        ));
    }
    out.push_str(&notes(&stats));
    Ok(out)
}

/// One grep's progress.
struct Search<'a> {
    ctx: &'a Ctx,
    regex: &'a regex::Regex,
    out: String,
    matches: usize,
    skipped: usize,
    full: bool,
}

impl Search<'_> {
    fn file(&mut self, path: &std::path::Path) {
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        if !meta.is_file() {
            return;
        }
        if meta.len() > MAX_FILE_BYTES {
            self.skipped += 1;
            return;
        }
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        if looks_binary(&bytes) {
            self.skipped += 1;
            return;
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = self.ctx.show(path);
        for (n, line) in text.lines().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            if self.matches >= MAX_MATCHES || self.out.len() >= MAX_GREP_OUTPUT {
                self.full = true;
                return;
            }
            self.matches += 1;
            let line = match line.char_indices().nth(MAX_MATCH_CHARS) {
                Some((cut, _)) => format!("{} …", &line[..cut]),
                None => line.to_owned(),
            };
            self.out.push_str(&format!("{shown}:{}:{line}\n", n + 1));
        }
    }
}

/// What the walk could not do, for the end of a tool's output.
fn notes(stats: &WalkStats) -> String {
    let mut out = String::new();
    if stats.stopped {
        out.push_str(&format!(
            "[the search stopped after {MAX_VISITED} entries: give a narrower path]\n"
        ));
    }
    if stats.unreadable > 0 {
        out.push_str(&format!(
            "[{} directories could not be read]\n",
            stats.unreadable
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn ws(files: &[(&str, &str)]) -> (tempfile::TempDir, Ctx) {
        let (dir, ctx) = Ctx::temp();
        for (p, content) in files {
            let f = dir.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, content).unwrap();
        }
        (dir, ctx)
    }

    #[test]
    fn glob_lists_sorted_workspace_paths() {
        let (_d, ctx) = ws(&[
            ("src/main.rs", ""),
            ("src/tools/a.rs", ""),
            ("README.md", ""),
            (".git/config", ""),
        ]);
        let out = glob(&ctx, &json!({"pattern": "src/**/*.rs"})).unwrap();
        assert_eq!(out, "src/main.rs\nsrc/tools/a.rs\n");
        let out = glob(&ctx, &json!({"pattern": "*"})).unwrap();
        assert_eq!(out, "README.md\nsrc/\n");
        let out = glob(&ctx, &json!({"pattern": "*.rs", "path": "src/tools"})).unwrap();
        assert_eq!(out, "src/tools/a.rs\n");
        let out = glob(&ctx, &json!({"pattern": "**/*.py"})).unwrap();
        assert!(out.starts_with("no path matches"), "{out}");
        assert_eq!(glob(&ctx, &json!({"pattern": "src"})).unwrap(), "src/");
        let e = glob(&ctx, &json!({"pattern": "*", "path": "nowhere"})).unwrap_err();
        assert_eq!(e.kind, "not_found");
    }

    #[test]
    fn glob_is_capped() {
        let names: Vec<(String, &str)> = (0..MAX_PATHS + 5)
            .map(|i| (format!("f{i:05}"), ""))
            .collect();
        let refs: Vec<(&str, &str)> = names.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        let (_d, ctx) = ws(&refs);
        let out = glob(&ctx, &json!({"pattern": "f*"})).unwrap();
        assert_eq!(out.lines().count(), MAX_PATHS + 1);
        assert!(
            out.contains("1005 paths match"),
            "{}",
            out.lines().last().unwrap()
        );
    }

    #[test]
    fn grep_finds_lines_with_filters() {
        let (_d, ctx) = ws(&[
            ("src/a.rs", "fn main() {\n    todo!()\n}\n"),
            ("src/b.txt", "TODO later\n"),
            ("bin", "TODO\0binary"),
        ]);
        let out = grep(&ctx, &json!({"pattern": "todo"})).unwrap();
        assert_eq!(
            out,
            "src/a.rs:2:    todo!()\n[1 binary or larger-than-10 MiB files were skipped]\n"
        );
        let out = grep(
            &ctx,
            &json!({"pattern": "todo", "case_insensitive": true, "glob": "*.txt"}),
        )
        .unwrap();
        assert_eq!(out, "src/b.txt:1:TODO later\n");
        let out = grep(&ctx, &json!({"pattern": "^fn", "path": "src/a.rs"})).unwrap();
        assert_eq!(out, "src/a.rs:1:fn main() {\n");
        let out = grep(&ctx, &json!({"pattern": "nothing", "path": "src"})).unwrap();
        assert_eq!(out, "no line matches /nothing/ in src\n");
        let e = grep(&ctx, &json!({"pattern": "("})).unwrap_err();
        assert!(e.message.contains("invalid regular expression"), "{e}");
        let e = grep(&ctx, &json!({"pattern": "x", "path": "gone"})).unwrap_err();
        assert_eq!(e.kind, "not_found");
    }

    #[test]
    fn grep_is_capped() {
        let many: String = (0..MAX_MATCHES + 10)
            .map(|i| format!("hit {i}\n"))
            .collect();
        let (_d, ctx) = ws(&[("f", &many)]);
        let out = grep(&ctx, &json!({"pattern": "hit"})).unwrap();
        assert_eq!(
            out.lines().filter(|l| l.starts_with("f:")).count(),
            MAX_MATCHES
        );
        assert!(out.contains("[stopped after 500 matches"), "{out}");
    }
}
