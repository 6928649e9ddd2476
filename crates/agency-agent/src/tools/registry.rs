//! The workspace tools as the loop sees them: their names, the
//! descriptions and JSON Schemas the model is given, and the dispatch of a
//! call to its implementation. File and search tools run on a thread of
//! their own; `bash` manages its own threads.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::common::{Ctx, ToolError};
use super::{files, search, shell};
use crate::mcp::ToolOutcome;
use crate::model::ToolSpec;

/// Every workspace tool, in the order they are offered. None contains
/// `__` (extra MCP servers' tools do) and none is one of Agency's MCP
/// tools; a clash at run time stops the run before the first model call.
pub const WORKSPACE_TOOLS: &[&str] = &[
    "bash",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
];

/// The workspace and the tools offered in it.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    ctx: Ctx,
    offered: Vec<&'static str>,
    /// The daemon's admission check, asked before every call; `None` only
    /// in unit tests that drive the tools directly.
    check: Option<super::ToolCheck>,
}

impl Workspace {
    /// `tools`: the names to offer (already validated against
    /// [`WORKSPACE_TOOLS`]; unknown names are ignored). `hidden_env`: the
    /// variables `bash` commands must not see.
    pub fn new(root: PathBuf, tools: &[String], hidden_env: Vec<String>) -> Workspace {
        let offered = WORKSPACE_TOOLS
            .iter()
            .copied()
            .filter(|t| tools.iter().any(|n| n == t))
            .collect();
        Workspace {
            ctx: Ctx { root, hidden_env },
            offered,
            check: None,
        }
    }

    /// Ask the daemon before every call (`admission.rs`).
    pub fn with_check(mut self, check: super::ToolCheck) -> Workspace {
        self.check = Some(check);
        self
    }

    pub fn root(&self) -> &std::path::Path {
        &self.ctx.root
    }

    /// The variables `bash` commands do not see.
    #[cfg(test)]
    pub fn hidden_env(&self) -> &[String] {
        &self.ctx.hidden_env
    }

    pub fn offers(&self, name: &str) -> bool {
        self.offered.contains(&name)
    }

    pub fn names(&self) -> &[&'static str] {
        &self.offered
    }

    /// The offered tools' specifications.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.offered.iter().map(|n| spec(n)).collect()
    }

    /// Run one call; failures come back as `isError` results for the model.
    pub async fn call(&self, name: &str, input: &Value) -> ToolOutcome {
        let checked = self.check.as_ref().filter(|_| self.offers(name));
        if let Some(check) = checked
            && let Err(refused) = check.admit(name, input).await
        {
            return ToolOutcome {
                content: refused.to_string(),
                is_error: true,
            };
        }
        let started = std::time::Instant::now();
        let out = self.run(name, input).await;
        if let Some(check) = checked {
            check
                .report(name, input, out.is_error, &out.content, started.elapsed())
                .await;
        }
        out
    }

    /// Run an admitted call.
    async fn run(&self, name: &str, input: &Value) -> ToolOutcome {
        let result: Result<(String, bool), ToolError> = match name {
            "bash" => shell::bash(&self.ctx, input).await,
            _ => {
                let f = match name {
                    "read_file" => files::read_file,
                    "write_file" => files::write_file,
                    "edit_file" => files::edit_file,
                    "glob" => search::glob,
                    "grep" => search::grep,
                    _ => {
                        return ToolOutcome {
                            content: format!(
                                "[not_found] failed to call tool {name:?}: it is not a workspace tool"
                            ),
                            is_error: true,
                        };
                    }
                };
                let ctx = self.ctx.clone();
                let input = input.clone();
                // A thread of its own rather than the runtime's blocking
                // pool, whose shutdown waits for every task: a call stuck
                // on a slow file system must not keep a stopped run alive.
                let (tx, rx) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    let _ = tx.send(f(&ctx, &input));
                });
                match rx.await {
                    Ok(r) => r.map(|text| (text, false)),
                    Err(_) => Err(ToolError {
                        kind: "internal",
                        message: format!("failed to run tool {name}: its thread ended early"),
                    }),
                }
            }
        };
        match result {
            Ok((content, is_error)) => ToolOutcome { content, is_error },
            Err(e) => ToolOutcome {
                content: e.to_string(),
                is_error: true,
            },
        }
    }
}

/// A workspace tool as the model is offered it (for `agency tools`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceTool {
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
}

/// Every workspace tool's description and argument schema, exactly as the
/// model is given them.
pub fn workspace_tool_list() -> Vec<WorkspaceTool> {
    WORKSPACE_TOOLS
        .iter()
        .map(|n| {
            let s = spec(n);
            WorkspaceTool {
                name: s.name,
                description: s.description,
                input_schema: s.input_schema,
            }
        })
        .collect()
}

/// A tool's description and input schema, as the model sees them.
fn spec(name: &str) -> ToolSpec {
    let (description, schema) = match name {
        "bash" => (
            "Run a shell command (bash -c, or sh) in the workspace directory and return its output \
             (stdout and stderr interleaved; long output keeps its start and end) and exit code. \
             stdin is empty. The command and everything it starts run in one process group, killed \
             when the command exits or times out: background processes do not outlive the call. \
             Use it to build, test, run git, and inspect files with the usual tools.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command line."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": shell::MAX_TIMEOUT_MS,
                        "description": format!("Kill the command after this many milliseconds (default {}, at most {}).", shell::DEFAULT_TIMEOUT_MS, shell::MAX_TIMEOUT_MS)}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
        "read_file" => (
            "Read a text file, with line numbers (`     N<TAB>line`). Relative paths are in the \
             workspace. Reads up to 2000 lines from `offset`; the output says how to continue. \
             Binary files and files over 10 MiB are refused (use bash for those).",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace or absolute."},
                    "offset": {"type": "integer", "minimum": 1, "description": "The first line to show (1 = the first line)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show (default 2000)."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        "write_file" => (
            "Write a whole file (created, or replaced), creating its parent directories. To change \
             part of an existing file, use edit_file.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace or absolute."},
                    "content": {"type": "string", "description": "The complete new content."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        ),
        "edit_file" => (
            "Replace an exact piece of text in a file. `old_string` must match the file exactly \
             (whitespace and indentation included) and occur once, unless `replace_all` is true; \
             otherwise the edit is refused and the file is unchanged. Read the file first.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace or absolute."},
                    "old_string": {"type": "string", "description": "The exact text to replace."},
                    "new_string": {"type": "string", "description": "The text to put in its place."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        ),
        "glob" => (
            "List the paths matching a glob pattern, sorted (directories end in `/`; `.git` is \
             skipped; links are not followed). `*` and `?` stay within a directory, `**` crosses \
             directories, `{a,b}` and `[a-z]` work as usual: `src/**/*.rs`, `*` (a listing).",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The glob, relative to `path`."},
                    "path": {"type": "string", "description": "The directory to search (default: the workspace)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        "grep" => (
            "Search file contents with a regular expression (Rust regex syntax); prints \
             `path:line:text` for each matching line. Binary and very large files are skipped, \
             as is `.git`. Narrow it with `path` and `glob`.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The regular expression."},
                    "path": {"type": "string", "description": "A file or directory to search (default: the workspace)."},
                    "glob": {"type": "string", "description": "Only files whose name (or, with a `/`, whose path under `path`) matches, e.g. `*.rs`."},
                    "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        _ => ("", json!({"type": "object"})),
    };
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: schema,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_tool_has_a_schema_naming_its_required_arguments() {
        let all: Vec<String> = WORKSPACE_TOOLS.iter().map(|s| s.to_string()).collect();
        let ws = Workspace::new(PathBuf::from("/w"), &all, Vec::new());
        let specs = ws.specs();
        assert_eq!(specs.len(), WORKSPACE_TOOLS.len());
        for s in &specs {
            assert!(!s.description.is_empty(), "{}", s.name);
            assert!(!s.name.contains("__"), "{}", s.name);
            let props = s.input_schema["properties"].as_object().unwrap();
            for r in s.input_schema["required"].as_array().unwrap() {
                assert!(props.contains_key(r.as_str().unwrap()), "{}: {r}", s.name);
            }
        }
        let some = Workspace::new(
            PathBuf::from("/w"),
            &["grep".into(), "bash".into()],
            Vec::new(),
        );
        assert_eq!(some.names(), ["bash", "grep"]);
        assert!(!some.offers("read_file"));
        assert!(
            Workspace::new(PathBuf::from("/w"), &[], Vec::new())
                .specs()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn calls_are_routed_and_errors_are_results() {
        let dir = tempfile::tempdir().unwrap();
        let all: Vec<String> = WORKSPACE_TOOLS.iter().map(|s| s.to_string()).collect();
        let ws = Workspace::new(dir.path().to_owned(), &all, Vec::new());
        let out = ws
            .call("write_file", &json!({"path": "x.txt", "content": "hi\n"}))
            .await;
        assert_eq!(
            out,
            ToolOutcome {
                content: "created x.txt (3 bytes, 1 line)".into(),
                is_error: false
            }
        );
        let out = ws.call("read_file", &json!({"path": "nope"})).await;
        assert!(
            out.is_error && out.content.starts_with("[not_found] failed to read nope"),
            "{out:?}"
        );
        let out = ws
            .call("bash", &json!({"command": "cat x.txt; exit 1"}))
            .await;
        assert_eq!(
            out,
            ToolOutcome {
                content: "hi\n[exit code 1]".into(),
                is_error: true
            }
        );
    }
}
