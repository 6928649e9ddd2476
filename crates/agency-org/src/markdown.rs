//! The Markdown side of a source file: the optional `---` frontmatter, the
//! `# …` title heading, the text under it (the preamble) and the `## …`
//! sections, each line with its file line number. Headings inside fenced
//! code blocks are text.

use crate::diag::Pos;

/// A line of text with where it starts (the column of its first
/// non-blank character).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub pos: Pos,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The heading's text (after `## `).
    pub heading: String,
    pub pos: Pos,
    /// Non-blank lines, trimmed.
    pub lines: Vec<Line>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Doc {
    /// The frontmatter's text and the file line it starts on.
    pub frontmatter: Option<(String, u32)>,
    /// Everything after the frontmatter, verbatim.
    pub body: String,
    /// The first `# ` heading's text, if it comes before any section.
    pub title: Option<Line>,
    pub preamble: Vec<Line>,
    pub sections: Vec<Section>,
}

/// Split `text` into frontmatter and body and the body into parts.
/// An unterminated frontmatter is an error at line 1.
pub fn parse(text: &str) -> Result<Doc, (Pos, String)> {
    let mut doc = Doc::default();
    let lines: Vec<&str> = text.split('\n').collect();
    let mut body_start = 0;
    if lines.first().map(|l| l.trim_end()) == Some("---") {
        let end = lines
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, l)| matches!(l.trim_end(), "---" | "..."))
            .map(|(i, _)| i)
            .ok_or_else(|| {
                (
                    Pos::start(),
                    "the frontmatter opened here is never closed: add a `---` line after it"
                        .to_owned(),
                )
            })?;
        doc.frontmatter = Some((lines[1..end].join("\n"), 2));
        body_start = end + 1;
    }
    doc.body = lines.get(body_start..).unwrap_or_default().join("\n");
    let mut in_fence = false;
    for (i, raw) in lines.iter().enumerate().skip(body_start) {
        let line_no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let trimmed = raw.trim();
        let indent = raw.chars().take_while(|c| c.is_whitespace()).count();
        let col = u32::try_from(indent + 1).unwrap_or(1);
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if !in_fence && indent < 4 {
            if let Some(h) =
                trimmed
                    .strip_prefix("## ")
                    .or(if trimmed == "##" { Some("") } else { None })
            {
                doc.sections.push(Section {
                    heading: h.trim().trim_end_matches('#').trim().to_owned(),
                    pos: Pos::new(line_no, col + 3),
                    lines: Vec::new(),
                });
                continue;
            }
            if let Some(h) = trimmed.strip_prefix("# ")
                && doc.title.is_none()
                && doc.sections.is_empty()
                && doc.preamble.is_empty()
            {
                doc.title = Some(Line {
                    pos: Pos::new(line_no, col + 2),
                    text: h.trim().trim_end_matches('#').trim().to_owned(),
                });
                continue;
            }
        }
        if trimmed.is_empty() {
            continue;
        }
        let line = Line {
            pos: Pos::new(line_no, col),
            text: trimmed.to_owned(),
        };
        match doc.sections.last_mut() {
            Some(s) => s.lines.push(line),
            None => doc.preamble.push(line),
        }
    }
    Ok(doc)
}

/// A list item's text (`- x`, `* x`, `+ x`, `1. x`, `1) x`) and the column
/// offset of the text, or `None` for a prose line.
pub fn list_item(text: &str) -> Option<(&str, u32)> {
    for b in ["- ", "* ", "+ "] {
        if let Some(rest) = text.strip_prefix(b) {
            let skipped = rest.len() - rest.trim_start().len();
            return Some((rest.trim(), 2 + u32::try_from(skipped).unwrap_or(0)));
        }
    }
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits < 4 {
        let rest = &text[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            let skipped = r.len() - r.trim_start().len();
            return Some((r.trim(), u32::try_from(digits + 2 + skipped).unwrap_or(0)));
        }
    }
    None
}

/// Whether a section's prose says "nothing here": a first line starting
/// with "No" or "None" as a word ("No inheritance.", "None.").
pub fn says_none(lines: &[Line]) -> bool {
    lines.first().is_some_and(|l| {
        let first = l
            .text
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or_default();
        first.eq_ignore_ascii_case("no") || first.eq_ignore_ascii_case("none")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_title_sections() {
        let d = parse(
            "---\nname: x\n---\n# Agent Name: A\nTitle: T\n\n## Tools\n- W\n```\n## not\n```\n",
        )
        .expect("parses");
        assert_eq!(d.frontmatter, Some(("name: x".into(), 2)));
        assert_eq!(d.title.as_ref().map(|t| t.pos), Some(Pos::new(4, 3)));
        assert_eq!(d.preamble[0].text, "Title: T");
        assert_eq!(d.sections.len(), 1);
        assert_eq!(d.sections[0].pos, Pos::new(7, 4));
        assert_eq!(d.sections[0].lines.len(), 4);
        assert!(parse("---\nname: x\n").is_err());
    }

    #[test]
    fn items_and_none() {
        assert_eq!(list_item("- WeatherTool"), Some(("WeatherTool", 2)));
        assert_eq!(list_item("12. Step"), Some(("Step", 4)));
        assert_eq!(list_item("Prose line"), None);
        let l = |t: &str| Line {
            pos: Pos::start(),
            text: t.into(),
        };
        assert!(says_none(&[l("No direct tools needed here.")]));
        assert!(says_none(&[l("None.")]));
        assert!(!says_none(&[l("Nobody knows")]));
    }
}
