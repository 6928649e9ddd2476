//! What the workspace tools share: the workspace (root directory and the
//! environment variables its commands must not see), argument reading that
//! refuses unknown or mistyped arguments, path resolution and display, and
//! the error every tool returns as an `isError` result.
//!
//! Paths are not confined here: the whole agent process runs inside the
//! sandbox the daemon applies, which is what keeps it in. Relative paths
//! resolve against the workspace so the model never depends on the
//! process's current directory.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

/// Files above this size are not read whole (read_file, edit_file) or are
/// skipped (grep): the model's context could not hold them anyway.
pub(crate) const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// How far into a file a NUL byte marks it as binary (git's heuristic).
const BINARY_PROBE: usize = 8000;

/// A failed tool call, shown to the model as `[kind] failed to …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolError {
    pub kind: &'static str,
    pub message: String,
}

impl ToolError {
    pub fn invalid(message: impl Into<String>) -> ToolError {
        ToolError {
            kind: "invalid_input",
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ToolError {
        ToolError {
            kind: "not_found",
            message: message.into(),
        }
    }

    pub fn refused(message: impl Into<String>) -> ToolError {
        ToolError {
            kind: "refused",
            message: message.into(),
        }
    }

    /// An I/O failure of `action` ("read", "write", …) on `shown`; a
    /// missing file is `not_found`.
    pub fn io(action: &str, shown: &str, e: &std::io::Error) -> ToolError {
        let kind = match e.kind() {
            std::io::ErrorKind::NotFound => "not_found",
            _ => "io",
        };
        ToolError {
            kind,
            message: format!("failed to {action} {shown}: {e}"),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.kind, self.message)
    }
}

/// A tool's text for the model, or why it failed.
pub(crate) type Outcome = Result<String, ToolError>;

/// The workspace the tools act in.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// Absolute; relative paths resolve against it.
    pub root: PathBuf,
    /// Variables removed from the environment of `bash` commands (the API
    /// key and the MCP token), so a command cannot print them.
    pub hidden_env: Vec<String>,
}

impl Ctx {
    /// The path a tool argument names: absolute as given, relative against
    /// the workspace, `.` and `..` folded lexically (the file system still
    /// decides where a symlink leads).
    pub fn resolve(&self, arg: &str, path: &str) -> Result<PathBuf, ToolError> {
        if path.is_empty() {
            return Err(ToolError::invalid(format!("`{arg}` is empty")));
        }
        if path.contains('\0') {
            return Err(ToolError::invalid(format!("`{arg}` contains a NUL byte")));
        }
        let joined = self.root.join(path);
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                other => out.push(other),
            }
        }
        Ok(out)
    }

    /// A workspace in a fresh temporary directory (kept while the
    /// returned handle lives), for the tools' tests.
    #[cfg(test)]
    #[allow(clippy::unwrap_used)]
    pub fn temp() -> (tempfile::TempDir, Ctx) {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Ctx {
            root: dir.path().to_owned(),
            hidden_env: Vec::new(),
        };
        (dir, ctx)
    }

    /// How a path is shown to the model: relative to the workspace when
    /// inside it (so it can be passed straight back), absolute otherwise.
    pub fn show(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

/// A tool's arguments, checked against the names it accepts so that a
/// misspelt argument is an error rather than silently ignored.
#[derive(Debug)]
pub(crate) struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    pub fn new(input: &'a Value, known: &[&str]) -> Result<Args<'a>, ToolError> {
        let Value::Object(map) = input else {
            return Err(ToolError::invalid("the arguments are not a JSON object"));
        };
        if let Some(k) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ToolError::invalid(format!(
                "unknown argument `{k}` (this tool takes {})",
                known.join(", ")
            )));
        }
        Ok(Args { map })
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    pub fn str(&self, name: &str) -> Result<&'a str, ToolError> {
        self.opt_str(name)?
            .ok_or_else(|| ToolError::invalid(format!("missing argument `{name}`")))
    }

    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::invalid(format!("`{name}` must be a string"))),
        }
    }

    /// A non-negative integer (also accepted as a whole float or a numeric
    /// string: models write `"20"` and `20.0`).
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, ToolError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        crate::model::lenient_u64(Some(v))
            .filter(|_| v.as_f64().is_none_or(|f| f.fract() == 0.0))
            .map(Some)
            .ok_or_else(|| ToolError::invalid(format!("`{name}` must be a whole number ≥ 0")))
    }

    /// A boolean (also `"true"` / `"false"`).
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, ToolError> {
        match self.get(name) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s == "true" => Ok(true),
            Some(Value::String(s)) if s == "false" => Ok(false),
            Some(_) => Err(ToolError::invalid(format!(
                "`{name}` must be true or false"
            ))),
        }
    }
}

/// Whether bytes look like a binary file: a NUL near the start.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_PROBE)].contains(&0)
}

/// Read a whole text file for a tool, refusing what is not one: a
/// directory, a special file (a FIFO would block), a file over
/// [`MAX_FILE_BYTES`], or binary content.
pub(crate) fn read_text(action: &str, shown: &str, path: &Path) -> Result<Vec<u8>, ToolError> {
    let meta = std::fs::metadata(path).map_err(|e| ToolError::io(action, shown, &e))?;
    if meta.is_dir() {
        return Err(ToolError::refused(format!(
            "failed to {action} {shown}: it is a directory (list it with glob)"
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::refused(format!(
            "failed to {action} {shown}: it is not a regular file"
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolError::refused(format!(
            "failed to {action} {shown}: it is {} bytes, more than the {} MiB these tools read; use bash (head, tail, sed -n, grep) to work on parts of it",
            meta.len(),
            MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| ToolError::io(action, shown, &e))?;
    if looks_binary(&bytes) {
        return Err(ToolError::refused(format!(
            "failed to {action} {shown}: it looks binary (it contains NUL bytes); inspect it with bash (file, xxd | head)"
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn ctx() -> Ctx {
        Ctx {
            root: PathBuf::from("/ws/here"),
            hidden_env: Vec::new(),
        }
    }

    #[test]
    fn paths_resolve_against_the_workspace() {
        let c = ctx();
        assert_eq!(c.resolve("path", "a/b").unwrap(), Path::new("/ws/here/a/b"));
        assert_eq!(
            c.resolve("path", "./a/../b").unwrap(),
            Path::new("/ws/here/b")
        );
        assert_eq!(c.resolve("path", "/etc/x").unwrap(), Path::new("/etc/x"));
        assert_eq!(c.resolve("path", "..").unwrap(), Path::new("/ws"));
        assert_eq!(c.resolve("path", "").unwrap_err().kind, "invalid_input");
        assert!(
            c.resolve("path", "a\0b")
                .unwrap_err()
                .message
                .contains("NUL")
        );
        assert_eq!(c.show(Path::new("/ws/here/a/b")), "a/b");
        assert_eq!(c.show(Path::new("/ws/here")), ".");
        assert_eq!(c.show(Path::new("/ws/other")), "/ws/other");
    }

    #[test]
    fn arguments_are_checked() {
        let v = json!({"path": "p", "n": "20", "f": 2.0, "b": "true", "x": null});
        let a = Args::new(&v, &["path", "n", "f", "b", "x"]).unwrap();
        assert_eq!(a.str("path").unwrap(), "p");
        assert_eq!(a.opt_u64("n").unwrap(), Some(20));
        assert_eq!(a.opt_u64("f").unwrap(), Some(2));
        assert_eq!(a.opt_u64("x").unwrap(), None);
        assert!(a.bool("b", false).unwrap());
        assert!(
            a.str("x")
                .unwrap_err()
                .message
                .contains("missing argument `x`")
        );
        assert!(a.opt_u64("path").is_err());
        let v = json!({"f": 2.5, "n": -1});
        let a = Args::new(&v, &["f", "n"]).unwrap();
        assert!(a.opt_u64("f").is_err());
        assert!(a.opt_u64("n").is_err());
        let e = Args::new(&json!({"pth": 1}), &["path"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[invalid_input] unknown argument `pth` (this tool takes path)"
        );
    }

    #[test]
    fn binary_is_a_nul_near_the_start() {
        assert!(!looks_binary(b"plain text\n"));
        assert!(looks_binary(b"ELF\0\x01"));
        let mut late = vec![b'a'; BINARY_PROBE];
        late.push(0);
        assert!(!looks_binary(&late));
    }
}
