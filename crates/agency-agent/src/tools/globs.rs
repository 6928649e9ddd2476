//! Glob patterns and the directory walk behind `glob` and `grep`.
//!
//! A pattern is translated to an anchored regular expression over `/`
//! separated relative paths: `*` is any run of characters but `/`, `?` one
//! of them, `**` any run including `/` (`**/` also matches no directory at
//! all), `[abc]` / `[!a-z]` a class, `{rs,toml}` alternatives, `\x` a
//! literal `x`. Written here on the `regex` crate the workspace already
//! uses, rather than adding a glob crate for these few rules.
//!
//! The walk never follows symbolic links (a link to `/` must not turn a
//! search into a scan of the machine), skips `.git` directories, and stops
//! after a bounded number of entries, saying so.

use std::path::{Path, PathBuf};

use regex::Regex;

/// Entries the walk visits before it stops.
pub(crate) const MAX_VISITED: usize = 200_000;

/// Characters that make a path component a pattern rather than a name.
const META: &[char] = &['*', '?', '[', '{', '\\'];

/// A pattern that is not a glob this module can compile.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid glob {pattern:?}: {source}")]
pub(crate) struct GlobError {
    pattern: String,
    source: regex::Error,
}

/// A compiled glob.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    regex: Regex,
}

impl Glob {
    pub fn new(pattern: &str) -> Result<Glob, GlobError> {
        let mut re = String::from("^");
        translate(&pattern.chars().collect::<Vec<_>>(), &mut re);
        re.push('$');
        let regex = Regex::new(&re).map_err(|source| GlobError {
            pattern: pattern.to_owned(),
            source,
        })?;
        Ok(Glob { regex })
    }

    /// Whether a `/`-separated relative path matches.
    pub fn matches(&self, rel: &str) -> bool {
        self.regex.is_match(rel)
    }
}

fn translate(p: &[char], out: &mut String) {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '*' if p.get(i + 1) == Some(&'*') => {
                if p.get(i + 2) == Some(&'/') {
                    out.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    out.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '\\' if i + 1 < p.len() => {
                i += 1;
                out.push_str(&regex::escape(&p[i].to_string()));
            }
            '[' => {
                if let Some(end) = class_end(p, i) {
                    out.push('[');
                    let mut j = i + 1;
                    if matches!(p[j], '!' | '^') {
                        out.push('^');
                        j += 1;
                    }
                    for &c in &p[j..end] {
                        if c == '-' {
                            out.push('-');
                        } else {
                            out.push_str(&regex::escape(&c.to_string()));
                        }
                    }
                    out.push(']');
                    i = end + 1;
                    continue;
                }
                out.push_str(r"\[");
            }
            '{' => {
                if let Some((end, alternatives)) = braces(p, i) {
                    out.push_str("(?:");
                    for (n, alt) in alternatives.iter().enumerate() {
                        if n > 0 {
                            out.push('|');
                        }
                        translate(alt, out);
                    }
                    out.push(')');
                    i = end + 1;
                    continue;
                }
                out.push_str(r"\{");
            }
            c => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
}

/// The index of the `]` closing the class opened at `start` (a `]` right
/// after `[` or `[!` belongs to the class); `None` leaves `[` literal.
fn class_end(p: &[char], start: usize) -> Option<usize> {
    let mut j = start + 1;
    if matches!(p.get(j), Some('!' | '^')) {
        j += 1;
    }
    if p.get(j) == Some(&']') {
        j += 1;
    }
    (j..p.len()).find(|&k| p[k] == ']')
}

/// The `}` closing the braces opened at `start` and the top-level
/// alternatives inside; `None` leaves `{` literal.
fn braces(p: &[char], start: usize) -> Option<(usize, Vec<&[char]>)> {
    let mut depth = 0;
    let mut from = start + 1;
    let mut alternatives = Vec::new();
    let mut k = start;
    while k < p.len() {
        match p[k] {
            '\\' => k += 1,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    alternatives.push(&p[from..k]);
                    return Some((k, alternatives));
                }
            }
            ',' if depth == 1 => {
                alternatives.push(&p[from..k]);
                from = k + 1;
            }
            _ => {}
        }
        k += 1;
    }
    None
}

/// Split a pattern into the directory its literal leading components name
/// and the rest: `src/**/*.rs` → (`src`, `**/*.rs`), so only `src` is
/// walked. An absolute pattern's directory is absolute.
pub(crate) fn split_literal_prefix(pattern: &str) -> (String, String) {
    let parts: Vec<&str> = pattern.split('/').collect();
    let literal = parts
        .iter()
        .position(|c| c.contains(META))
        .unwrap_or(parts.len());
    let mut dir = parts[..literal].join("/");
    if dir.is_empty() && pattern.starts_with('/') {
        dir.push('/');
    }
    (dir, parts[literal..].join("/"))
}

/// One entry the walk found.
#[derive(Debug)]
pub(crate) struct Entry {
    pub path: PathBuf,
    /// Relative to the walk's root, `/`-separated.
    pub rel: String,
    pub is_dir: bool,
}

/// What a walk saw besides its entries.
#[derive(Debug, Default)]
pub(crate) struct WalkStats {
    /// Directories that could not be read.
    pub unreadable: usize,
    /// The walk stopped at [`MAX_VISITED`] entries.
    pub stopped: bool,
}

/// Every entry under `root` (not `root` itself), depth first in name
/// order, until `visit` returns `false` or [`MAX_VISITED`] is reached.
pub(crate) fn walk(root: &Path, mut visit: impl FnMut(Entry) -> bool) -> WalkStats {
    let mut stats = WalkStats::default();
    let mut seen = 0usize;
    // A stack of directories still to list, each with its relative name.
    let mut stack = vec![(root.to_owned(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            stats.unreadable += 1;
            continue;
        };
        let mut names: Vec<_> = read.filter_map(Result::ok).collect();
        names.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in names {
            seen += 1;
            if seen > MAX_VISITED {
                stats.stopped = true;
                return stats;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && name == ".git" {
                continue;
            }
            let child_rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if is_dir {
                subdirs.push((e.path(), child_rel.clone()));
            }
            let entry = Entry {
                path: e.path(),
                rel: child_rel,
                is_dir,
            };
            if !visit(entry) {
                return stats;
            }
        }
        // Reversed so the first name is listed first.
        stack.extend(subdirs.into_iter().rev());
    }
    stats
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn m(pattern: &str, path: &str) -> bool {
        Glob::new(pattern).unwrap().matches(path)
    }

    #[test]
    fn glob_rules() {
        assert!(m("*.rs", "main.rs"));
        assert!(!m("*.rs", "src/main.rs"));
        assert!(m("**/*.rs", "main.rs"));
        assert!(m("**/*.rs", "a/b/main.rs"));
        assert!(m("src/**", "src/a/b"));
        assert!(m("src/**/mod.rs", "src/mod.rs"));
        assert!(!m("src/**/mod.rs", "srcx/mod.rs"));
        assert!(m("?.txt", "a.txt"));
        assert!(!m("?.txt", "ab.txt"));
        assert!(m("[ab].c", "b.c"));
        assert!(!m("[!ab].c", "b.c"));
        assert!(m("[a-c]x", "bx"));
        assert!(m("*.{rs,toml}", "Cargo.toml"));
        assert!(m("{src,tests}/**/*.rs", "tests/x/y.rs"));
        assert!(!m("*.{rs,toml}", "x.md"));
        // Regex characters are literal; an unclosed class or brace too.
        assert!(m("a+b(1).txt", "a+b(1).txt"));
        assert!(m("[x", "[x"));
        assert!(m("{x", "{x"));
        assert!(m(r"\*", "*"));
        assert!(!m(r"\*", "a"));
    }

    #[test]
    fn literal_prefixes() {
        let s = |p: &str| split_literal_prefix(p);
        assert_eq!(s("src/**/*.rs"), ("src".into(), "**/*.rs".into()));
        assert_eq!(s("*.rs"), ("".into(), "*.rs".into()));
        assert_eq!(s("/etc/*.conf"), ("/etc".into(), "*.conf".into()));
        assert_eq!(s("/*"), ("/".into(), "*".into()));
        assert_eq!(s("a/b.txt"), ("a/b.txt".into(), "".into()));
    }

    #[test]
    fn walk_skips_git_and_links_and_sorts() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        for p in ["b/z.txt", "b/a.txt", "a.txt", ".git/HEAD"] {
            let f = r.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "x").unwrap();
        }
        std::os::unix::fs::symlink("/", r.join("root-link")).unwrap();
        let mut seen = Vec::new();
        let stats = walk(r, |e| {
            seen.push(format!("{}{}", e.rel, if e.is_dir { "/" } else { "" }));
            true
        });
        assert_eq!(seen, ["a.txt", "b/", "root-link", "b/a.txt", "b/z.txt"]);
        assert!(!stats.stopped);
        assert_eq!(stats.unreadable, 0);
        let mut n = 0;
        walk(r, |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2);
    }
}
