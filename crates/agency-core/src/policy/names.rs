//! The tool names a `policy.toml` rule may name, checked when the policy
//! is loaded: a rule whose tool pattern names no tool the daemon ever asks
//! about never matches, silently (`tool = "Counter"` for an organisation's
//! tool, whose name is `tool:Counter`). A pattern with a glob character
//! (`*`, `?`) is taken as written: globs are how a rule reaches names this
//! check cannot know (a newer Claude Code's tools, say).
//!
//! The names:
//! - the built-in runtime's workspace tools: `bash`, `read_file`, …;
//! - Claude Code's own tools as `claude:Bash`, `claude:Write`, …, and the
//!   MCP tools it calls as `claude:mcp__SERVER__TOOL`;
//! - an extra MCP server's tools as `mcp:SERVER/TOOL` (SERVER declared in
//!   `[mcp_servers]`);
//! - an organisation's tools as `tool:NAME`;
//! - `repo_push`.

use super::{Policy, PolicyError};

/// What the daemon can ask the policy about; see the module doc.
#[derive(Debug, Clone, Default)]
pub struct ToolNames {
    /// Names known exactly: the workspace tools, `repo_push`, and
    /// `claude:TOOL` for every Claude Code tool.
    pub exact: Vec<String>,
    /// The extra MCP servers declared (`mcp:SERVER/…`).
    pub mcp_servers: Vec<String>,
}

impl Policy {
    /// Refuse a rule whose tool pattern (without glob characters) names
    /// no tool of `names`, with a did-you-mean; see the module doc.
    pub fn check_tool_names(&self, names: &ToolNames) -> Result<(), PolicyError> {
        for r in &self.rules {
            if let Err(message) = check(&r.tool, names) {
                return Err(PolicyError {
                    line: r.tool_line,
                    message,
                });
            }
        }
        Ok(())
    }
}

fn check(pattern: &str, names: &ToolNames) -> Result<(), String> {
    if pattern.contains(['*', '?']) {
        return Ok(());
    }
    if let Some(name) = pattern.strip_prefix("tool:") {
        return if plain(name) {
            Ok(())
        } else {
            Err(format!(
                "tool {pattern:?} names no organisation tool: write \"tool:NAME\" with the tool's name (letters, digits, '_' or '-')"
            ))
        };
    }
    if let Some(rest) = pattern.strip_prefix("mcp:") {
        let Some((server, tool)) = rest.split_once('/').filter(|(_, t)| !t.is_empty()) else {
            return Err(format!(
                "tool {pattern:?} is not an MCP server's tool: write \"mcp:SERVER/TOOL\" (or \"mcp:SERVER/*\" for all of them)"
            ));
        };
        if names.mcp_servers.iter().any(|s| s == server) {
            return Ok(());
        }
        let hint = match closest(server, names.mcp_servers.iter().map(String::as_str)) {
            Some(s) => format!("; did you mean \"mcp:{s}/{tool}\"?"),
            None if names.mcp_servers.is_empty() => {
                "; agency.toml declares no [mcp_servers]".to_owned()
            }
            None => format!("; declared: {}", names.mcp_servers.join(", ")),
        };
        return Err(format!(
            "tool {pattern:?} names MCP server {server:?}, which agency.toml does not declare{hint}"
        ));
    }
    if pattern.starts_with("claude:mcp__") || names.exact.iter().any(|n| n == pattern) {
        return Ok(());
    }
    let exact = || names.exact.iter().map(String::as_str);
    // `Write` for `claude:Write`: the prefix forgotten.
    let near = closest(pattern, exact()).or_else(|| closest(&format!("claude:{pattern}"), exact()));
    let hint = if let Some(n) = near {
        format!("did you mean {n:?}?")
    } else if plain(pattern) {
        format!(
            "did you mean \"tool:{pattern}\"? (an organisation's tool is named tool:NAME in policy.toml)"
        )
    } else {
        "no tool has that name".to_owned()
    };
    Err(format!(
        "unknown tool {pattern:?}: {hint}; the names are the built-in runtime's workspace tools (bash, read_file, …), claude:TOOL for Claude Code's tools, mcp:SERVER/TOOL for an extra MCP server's, tool:NAME for an organisation's, and repo_push; a glob (\"*\", \"?\") matches names this check does not know"
    ))
}

/// A tool name as `tool:NAME` takes it.
fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The candidate nearest `word`: equal but for case, or within a third of
/// its length in edits (2 for a word of 4 to 8 characters, so that a swap
/// of two letters counts; 1 for a shorter one; at most 3).
fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_lowercase();
    let n = word.chars().count();
    let bound = if n >= 4 { (n / 3).clamp(2, 3) } else { 1 };
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        let d = if c.to_lowercase() == lower {
            0
        } else {
            distance(&lower, &c.to_lowercase())
        };
        if d <= bound && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Levenshtein distance, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names() -> ToolNames {
        ToolNames {
            exact: [
                "bash",
                "read_file",
                "repo_push",
                "claude:Bash",
                "claude:Write",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            mcp_servers: vec!["mail".into()],
        }
    }

    fn policy(tool: &str) -> Policy {
        Policy::from_toml(&format!(
            "# x\n[[rule]]\ntool = {tool:?}\nverdict = \"ask\"\n"
        ))
        .unwrap()
    }

    #[test]
    fn issue28_known_names_and_globs_pass() {
        for ok in [
            "bash",
            "claude:Bash",
            "claude:mcp__agency__mail_send",
            "mcp:mail/send",
            "mcp:mail/*",
            "mcp:*",
            "tool:Counter",
            "repo_push",
            "*",
            "claude:Note*",
        ] {
            policy(ok).check_tool_names(&names()).unwrap();
        }
    }

    #[test]
    fn issue28_unknown_names_are_refused_with_a_did_you_mean() {
        for (bad, want) in [
            ("Counter", "did you mean \"tool:Counter\"?"),
            ("Bash", "did you mean \"bash\"?"),
            ("claude:bash", "did you mean \"claude:Bash\"?"),
            ("Write", "did you mean \"claude:Write\"?"),
            ("read-file", "did you mean \"read_file\"?"),
            ("mcp:mial/send", "did you mean \"mcp:mail/send\"?"),
            ("mcp:other/send", "declared: mail"),
            ("mcp:mail", "mcp:SERVER/TOOL"),
            ("tool:", "tool:NAME"),
            ("tool:a b", "tool:NAME"),
        ] {
            let e = policy(bad).check_tool_names(&names()).unwrap_err();
            assert_eq!(e.line, 3, "{bad}: {e}");
            assert!(e.message.contains(want), "{bad}: {e}");
        }
    }
}
