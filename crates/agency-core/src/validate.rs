//! Input validation shared by every interface: limits, names and search
//! terms. A failure is an [`InvalidInput`] whose text says what to change.

use serde::{Deserialize, Serialize};

/// Bad input from a caller, with an actionable message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

impl InvalidInput {
    pub fn new(msg: impl Into<String>) -> Self {
        InvalidInput(msg.into())
    }
}

/// Size limits, configurable per installation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest KB file content accepted, in bytes (also bounds message bodies).
    pub max_file_bytes: usize,
    pub max_title_chars: usize,
    pub max_description_chars: usize,
    /// Rationale, blocked reason, audit summary.
    pub max_reason_chars: usize,
    /// Most rows a listing returns in one call.
    pub max_list: usize,
    /// Most bytes of variable-length text (bodies, descriptions, summaries,
    /// details) one listing returns; the rest follows on the next page.
    #[serde(default = "default_page_bytes")]
    pub max_page_bytes: usize,
    /// Largest message body an inbox page carries inline; a larger body is
    /// returned as a reference to read with `kb_read`.
    #[serde(default = "default_inline_bytes")]
    pub max_inline_bytes: usize,
    // Quotas: what a handler's agents cannot exceed (the user is not bound
    // by them); each refusal is a `quota` error naming the key to raise.
    /// Deferred messages a handler has scheduled that are not yet delivered.
    pub max_pending_deferred_per_handler: usize,
    /// Outcomes a handler has created (ever: outcomes are never deleted).
    pub max_outcomes_per_handler: usize,
    /// KB documents a handler has created (mail bodies are not counted).
    pub max_kb_files_per_handler: usize,
    /// Active handlers in any subtree of the handler tree, its root
    /// handler's included (which bounds the whole organisation).
    pub max_handlers_per_subtree: usize,
    /// How many levels below the root handler a handler may be created.
    pub max_delegation_depth: usize,
    /// Hand-offs in one chain of work: each message
    /// from a handler to another and each delegation is one more hop than
    /// the hop count of the handler that makes it; the user's message
    /// starts a chain at 0.
    #[serde(default = "default_max_handoffs")]
    pub max_handoffs: usize,
}

fn default_max_handoffs() -> usize {
    500
}

fn default_page_bytes() -> usize {
    256 * 1024
}

fn default_inline_bytes() -> usize {
    64 * 1024
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 8 * 1024 * 1024,
            max_title_chars: 200,
            max_description_chars: 20_000,
            max_reason_chars: 20_000,
            max_list: 1000,
            max_page_bytes: default_page_bytes(),
            max_inline_bytes: default_inline_bytes(),
            max_pending_deferred_per_handler: 1_000,
            max_outcomes_per_handler: 10_000,
            max_kb_files_per_handler: 10_000,
            max_handlers_per_subtree: 1_000,
            max_delegation_depth: 32,
            max_handoffs: default_max_handoffs(),
        }
    }
}

impl Limits {
    pub fn check_content(&self, what: &str, len: usize) -> Result<(), InvalidInput> {
        if len > self.max_file_bytes {
            return Err(InvalidInput(format!(
                "failed to accept {what}: it is {len} bytes, more than the maximum file size of {} bytes; split it into smaller linked files (kb://UUID)",
                self.max_file_bytes
            )));
        }
        Ok(())
    }

    /// A title: one line, not empty, bounded.
    pub fn check_title(&self, title: &str) -> Result<(), InvalidInput> {
        let t = title.trim();
        if t.is_empty() {
            return Err(InvalidInput::new("failed to accept title: it is empty"));
        }
        if t.contains(['\n', '\r']) {
            return Err(InvalidInput::new(
                "failed to accept title: it must be a single line",
            ));
        }
        check_len("title", t, self.max_title_chars)?;
        check_no_nul("title", t)
    }

    pub fn check_description(&self, what: &str, text: &str) -> Result<(), InvalidInput> {
        check_len(what, text, self.max_description_chars)?;
        check_no_nul(what, text)
    }

    /// A rationale, reason or summary: not blank, bounded.
    pub fn check_reason(&self, what: &str, text: &str) -> Result<(), InvalidInput> {
        if text.trim().is_empty() {
            return Err(InvalidInput(format!(
                "failed to accept {what}: it is empty; say why"
            )));
        }
        check_len(what, text, self.max_reason_chars)?;
        check_no_nul(what, text)
    }

    /// Clamp a caller's requested page size.
    pub fn page(&self, requested: Option<usize>) -> usize {
        requested.unwrap_or(200).clamp(1, self.max_list)
    }
}

fn check_len(what: &str, text: &str, max: usize) -> Result<(), InvalidInput> {
    let n = text.chars().count();
    if n > max {
        return Err(InvalidInput(format!(
            "failed to accept {what}: it has {n} characters, more than the maximum of {max}"
        )));
    }
    Ok(())
}

fn check_no_nul(what: &str, text: &str) -> Result<(), InvalidInput> {
    if text.contains('\0') {
        return Err(InvalidInput(format!(
            "failed to accept {what}: it contains a NUL byte"
        )));
    }
    Ok(())
}

/// A name of an MCP server or repo as written in the configuration:
/// 1–64 characters of ASCII letters, digits, `_`, `-` and `.`.
pub fn check_name(what: &str, name: &str) -> Result<(), InvalidInput> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !ok {
        return Err(InvalidInput(format!(
            "failed to accept {what} name {name:?}: use 1-64 ASCII letters, digits, '_', '-' or '.'"
        )));
    }
    Ok(())
}

/// Split a browse query into lowercase words; a description matches when it
/// contains every word as a substring (case-insensitive).
pub fn search_terms(query: &str) -> Result<Vec<String>, InvalidInput> {
    let terms: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    if terms.len() > 16 {
        return Err(InvalidInput::new(
            "failed to accept search query: use at most 16 words",
        ));
    }
    if terms.iter().any(|t| t.chars().count() > 100) {
        return Err(InvalidInput::new(
            "failed to accept search query: a word is longer than 100 characters",
        ));
    }
    Ok(terms)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        let l = Limits::default();
        for (title, ok) in [
            ("Ship it", true),
            ("", false),
            ("   ", false),
            ("a\nb", false),
            ("x\0", false),
        ] {
            assert_eq!(l.check_title(title).is_ok(), ok, "{title:?}");
        }
        assert!(l.check_title(&"x".repeat(201)).is_err());
        assert!(l.check_title(&"é".repeat(200)).is_ok());
    }

    #[test]
    fn names() {
        for (name, ok) in [
            ("github", true),
            ("my-server.v2_x", true),
            ("", false),
            ("a b", false),
            ("../x", false),
        ] {
            assert_eq!(check_name("server", name).is_ok(), ok, "{name:?}");
        }
        assert!(check_name("server", &"a".repeat(65)).is_err());
    }

    #[test]
    fn content_size() {
        let l = Limits {
            max_file_bytes: 10,
            ..Limits::default()
        };
        assert!(l.check_content("content", 10).is_ok());
        let err = l.check_content("content", 11).unwrap_err();
        assert!(err.0.contains("maximum file size of 10 bytes"), "{err}");
    }

    #[test]
    fn terms() {
        assert_eq!(
            search_terms("  Design  DOC ").unwrap(),
            vec!["design", "doc"]
        );
        assert!(search_terms("").unwrap().is_empty());
    }
}
