//! Compiler diagnostics: `file:line:col: error|warning: message`, collected
//! for the whole run (one bad file never hides the others), and the
//! did-you-mean hints that go with misspelt keys, headings and names.

use std::fmt;

/// How bad a diagnostic is: any error fails the compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// A position in a source file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    pub fn new(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }

    /// The start of a file (for problems with the file as a whole).
    pub fn start() -> Pos {
        Pos::new(1, 1)
    }
}

/// One problem found in the sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Path relative to the source folder, `/`-separated.
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub severity: Severity,
    pub message: String,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{}:{}:{}: {sev}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// The diagnostics of one compile, in the order found; [`Diags::sorted`]
/// orders them by file and position for output.
#[derive(Debug, Default)]
pub struct Diags {
    list: Vec<Diagnostic>,
}

impl Diags {
    pub fn error(&mut self, file: &str, pos: Pos, message: impl Into<String>) {
        self.push(file, pos, Severity::Error, message.into());
    }

    pub fn warning(&mut self, file: &str, pos: Pos, message: impl Into<String>) {
        self.push(file, pos, Severity::Warning, message.into());
    }

    fn push(&mut self, file: &str, pos: Pos, severity: Severity, message: String) {
        let d = Diagnostic {
            file: file.to_owned(),
            line: pos.line,
            col: pos.col,
            severity,
            message,
        };
        // The same problem can be reached twice (e.g. an agent checked from
        // two agencies' listings); say it once.
        if !self.list.contains(&d) {
            self.list.push(d);
        }
    }

    pub fn has_errors(&self) -> bool {
        self.list.iter().any(Diagnostic::is_error)
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Every diagnostic, by file, line, column, then severity and text.
    pub fn sorted(mut self) -> Vec<Diagnostic> {
        self.list.sort_by(|a, b| {
            (&a.file, a.line, a.col, a.severity, &a.message)
                .cmp(&(&b.file, b.line, b.col, b.severity, &b.message))
        });
        self.list
    }
}

/// Edit distance (optimal string alignment: insertions, deletions,
/// substitutions and swaps of neighbours each cost 1), case-insensitive.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `word`, if close enough to be a likely typo:
/// at most a third of the word's length (and at most 3) edits away.
pub fn closest<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

/// `"; did you mean `x`?"` when a candidate is close, else `""`.
pub fn did_you_mean<'a, I>(word: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    match closest(word, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_and_hints() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("Behaviour", "behavior"), 1);
        assert_eq!(closest("runtim", ["runtime", "model"]), Some("runtime"));
        assert_eq!(closest("xyz", ["runtime", "model"]), None);
        assert_eq!(did_you_mean("modle", ["model"]), "; did you mean `model`?");
    }
}
