//! Text written by agents (titles, subjects, bodies, summaries,
//! descriptions, reasons) made safe for the user's terminal. An agent may
//! be prompt-injected: a raw ESC in a title could set the clipboard (OSC
//! 52), clear the screen or move the cursor, and a `\r` or a bidi override
//! could forge a line that looks like the CLI's own output. Every table
//! cell goes through [`line()`], every multi-line body through [`block`],
//! error messages through [`block`], and `--json` through [`json`].
//!
//! A character is shown as `\u{XX}` (Rust's escape syntax) when it is a C0
//! or C1 control, DEL, or a Unicode format character that changes how the
//! text around it is displayed (bidi embeddings, overrides and isolates,
//! line and paragraph separators, zero-width marks).

use std::fmt::Write as _;

/// Whether `c` must not reach the terminal as itself.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Zero-width space, joiners, LRM/RLM; line and paragraph
            // separators; bidi embeddings and overrides; bidi isolates;
            // Arabic letter mark; BOM / zero-width no-break space.
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{061c}'
                | '\u{feff}'
        )
}

fn escape_into(out: &mut String, c: char) {
    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
}

/// One line of text: every unsafe character made visible, newlines
/// included (a table cell or a header must stay one line).
pub fn line(s: &str) -> String {
    if !s.chars().any(is_unsafe) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Multi-line text: newlines and tabs kept, every other unsafe character
/// (`\r` included) made visible. Callers indent each line, so a body
/// cannot forge a line that starts where the CLI's own lines start.
pub fn block(s: &str) -> String {
    if !s.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) && c != '\n' && c != '\t' {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Serialised JSON with the characters serde_json leaves raw (DEL, C1
/// controls, bidi and other format characters) escaped as `\uXXXX`, which
/// is still the same JSON: they can only occur inside strings. serde_json
/// already escapes C0 controls.
pub fn json(s: &str) -> String {
    if !s.chars().any(is_unsafe_in_json) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe_in_json(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{u:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn is_unsafe_in_json(c: char) -> bool {
    // Newlines and indentation between tokens belong to the pretty layout.
    is_unsafe(c) && !matches!(c, '\n' | ' ')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NASTY: &str =
        "a\u{1b}]52;c;ZXZpbA==\u{7}b\u{1b}[2Jc\rerror: forged\u{202e}d\u{9b}e\u{7f}f";

    #[test]
    fn line_makes_every_control_visible() {
        let s = line(&format!("{NASTY}\nnext"));
        assert_eq!(
            s,
            "a\\u{1b}]52;c;ZXZpbA==\\u{7}b\\u{1b}[2Jc\\u{d}error: forged\\u{202e}d\\u{9b}e\\u{7f}f\\u{a}next"
        );
        assert!(!s.chars().any(is_unsafe));
        assert_eq!(line("plain – ünïcode ✓"), "plain – ünïcode ✓");
    }

    #[test]
    fn block_keeps_newlines_and_tabs_only() {
        let s = block(&format!("one\n\ttwo {NASTY}"));
        assert!(s.starts_with("one\n\ttwo a\\u{1b}]52"));
        assert!(s.contains("c\\u{d}error: forged"));
        assert!(!s.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t'));
    }

    #[test]
    fn json_stays_the_same_json_without_raw_controls() {
        let v = serde_json::json!({ "title": NASTY, "x": "\u{2066}\u{85}" });
        let text = serde_json::to_string_pretty(&v).unwrap();
        let safe = json(&text);
        assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, v);
    }
}
