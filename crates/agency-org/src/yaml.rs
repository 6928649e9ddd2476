//! YAML frontmatter into a positioned [`Node`] tree, built from
//! `saphyr-parser`'s events (which carry their spans). Aliases are refused:
//! frontmatter has no use for them and they are the way to make a small
//! file expand into a huge tree.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use crate::diag::Pos;
use crate::node::{Node, NodeKind};

/// Nesting deeper than this is refused (no frontmatter needs it, and the
/// tree is built recursively elsewhere).
const MAX_DEPTH: usize = 32;

/// Parse one YAML document. `first_line` is the file line the text starts
/// on, so positions are the file's. An empty document is `None`.
pub fn parse(text: &str, first_line: u32) -> Result<Option<Node>, (Pos, String)> {
    let at = |span: &Span| {
        Pos::new(
            first_line + u32::try_from(span.start.line()).unwrap_or(u32::MAX - first_line) - 1,
            u32::try_from(span.start.col()).unwrap_or(u32::MAX - 1) + 1,
        )
    };
    // Open containers: (position, items, is_map, pending key).
    let mut stack: Vec<(Pos, Vec<Node>, bool)> = Vec::new();
    let mut root: Option<Node> = None;
    let mut documents = 0;
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| {
            let m = e.marker();
            let pos = Pos::new(
                first_line + u32::try_from(m.line()).unwrap_or(1).max(1) - 1,
                u32::try_from(m.col()).unwrap_or(0) + 1,
            );
            (pos, format!("invalid YAML: {}", e.info()))
        })?;
        let done = match ev {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err((
                        at(&span),
                        "frontmatter holds more than one YAML document".into(),
                    ));
                }
                None
            }
            Event::Alias(_) => {
                return Err((
                    at(&span),
                    "YAML aliases (`*name`) are not supported in frontmatter".into(),
                ));
            }
            Event::Scalar(v, style, _, _) => Some(Node::scalar(
                at(&span),
                v.into_owned(),
                style == ScalarStyle::Plain,
            )),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return Err((
                        at(&span),
                        format!("frontmatter nests deeper than {MAX_DEPTH} levels"),
                    ));
                }
                stack.push((at(&span), Vec::new(), matches!(ev, Event::MappingStart(..))));
                None
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some((pos, items, is_map)) = stack.pop() else {
                    return Err((at(&span), "invalid YAML: unbalanced collection".into()));
                };
                let kind = if is_map {
                    let mut entries = Vec::new();
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        if !matches!(k.kind, NodeKind::Scalar { .. }) {
                            return Err((
                                k.pos,
                                "a mapping key must be a plain value, not a list or mapping".into(),
                            ));
                        }
                        entries.push((k, v));
                    }
                    NodeKind::Map(entries)
                } else {
                    NodeKind::Seq(items)
                };
                Some(Node { pos, kind })
            }
            _ => None,
        };
        if let Some(node) = done {
            match stack.last_mut() {
                Some((_, items, _)) => items.push(node),
                None => root = Some(node),
            }
        }
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_the_files() {
        let n = parse("name: x\nagency:\n  runtime: builtin\n", 2)
            .expect("parses")
            .expect("a document");
        let NodeKind::Map(entries) = &n.kind else {
            panic!("not a map")
        };
        assert_eq!(entries[0].0.pos, Pos::new(2, 1));
        let NodeKind::Map(inner) = &entries[1].1.kind else {
            panic!("not a map")
        };
        assert_eq!(inner[0].1.pos, Pos::new(4, 12));
    }

    #[test]
    fn errors_and_aliases() {
        assert!(parse("a: [1, 2\n", 2).is_err());
        assert!(parse("a: &x 1\nb: *x\n", 2).is_err());
        assert_eq!(parse("", 2), Ok(None));
    }
}
