//! A small JSON reader that keeps positions (for `agents.json`): serde_json
//! reports where a syntax error is, but not where a well-formed value of
//! the wrong type is, and a compiler must point at both.

use crate::diag::Pos;
use crate::node::{Node, NodeKind};

const MAX_DEPTH: usize = 64;

/// Parse a whole JSON document.
pub fn parse(text: &str) -> Result<Node, (Pos, String)> {
    let mut p = Reader {
        chars: text.chars().collect(),
        i: 0,
        line: 1,
        col: 1,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i < p.chars.len() {
        return Err((
            p.pos(),
            "invalid JSON: trailing characters after the document".into(),
        ));
    }
    Ok(v)
}

struct Reader {
    chars: Vec<char>,
    i: usize,
    line: u32,
    col: u32,
}

impl Reader {
    fn pos(&self) -> Pos {
        Pos::new(self.line, self.col)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r')) {
            self.bump();
        }
    }

    fn expect(&mut self, c: char) -> Result<(), (Pos, String)> {
        if self.peek() == Some(c) {
            self.bump();
            Ok(())
        } else {
            Err((
                self.pos(),
                format!("invalid JSON: expected `{c}`{}", self.found()),
            ))
        }
    }

    fn found(&self) -> String {
        match self.peek() {
            Some(c) => format!(", found `{c}`"),
            None => ", found the end of the file".into(),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, (Pos, String)> {
        if depth > MAX_DEPTH {
            return Err((
                self.pos(),
                format!("JSON nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        let pos = self.pos();
        match self.peek() {
            Some('{') => {
                self.bump();
                let mut entries = Vec::new();
                self.ws();
                if self.peek() == Some('}') {
                    self.bump();
                    return Ok(Node {
                        pos,
                        kind: NodeKind::Map(entries),
                    });
                }
                loop {
                    self.ws();
                    if self.peek() != Some('"') {
                        return Err((
                            self.pos(),
                            format!("invalid JSON: expected a string key{}", self.found()),
                        ));
                    }
                    let key = self.value(depth + 1)?;
                    self.ws();
                    self.expect(':')?;
                    self.ws();
                    let v = self.value(depth + 1)?;
                    entries.push((key, v));
                    self.ws();
                    match self.peek() {
                        Some(',') => {
                            self.bump();
                        }
                        Some('}') => {
                            self.bump();
                            return Ok(Node {
                                pos,
                                kind: NodeKind::Map(entries),
                            });
                        }
                        _ => {
                            return Err((
                                self.pos(),
                                format!("invalid JSON: expected `,` or `}}`{}", self.found()),
                            ));
                        }
                    }
                }
            }
            Some('[') => {
                self.bump();
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(']') {
                    self.bump();
                    return Ok(Node {
                        pos,
                        kind: NodeKind::Seq(items),
                    });
                }
                loop {
                    self.ws();
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek() {
                        Some(',') => {
                            self.bump();
                        }
                        Some(']') => {
                            self.bump();
                            return Ok(Node {
                                pos,
                                kind: NodeKind::Seq(items),
                            });
                        }
                        _ => {
                            return Err((
                                self.pos(),
                                format!("invalid JSON: expected `,` or `]`{}", self.found()),
                            ));
                        }
                    }
                }
            }
            Some('"') => {
                let start = self.i;
                self.bump();
                loop {
                    match self.bump() {
                        Some('"') => break,
                        Some('\\') => {
                            self.bump();
                        }
                        Some('\n') | None => {
                            return Err((pos, "invalid JSON: unterminated string".into()));
                        }
                        Some(_) => {}
                    }
                }
                let raw: String = self.chars[start..self.i].iter().collect();
                let s: String = serde_json::from_str(&raw)
                    .map_err(|e| (pos, format!("invalid JSON string: {e}")))?;
                Ok(Node::scalar(pos, s, false))
            }
            Some(c) if c == '-' || c.is_ascii_alphanumeric() => {
                let start = self.i;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.'))
                {
                    self.bump();
                }
                let word: String = self.chars[start..self.i].iter().collect();
                let ok = matches!(word.as_str(), "true" | "false" | "null")
                    || serde_json::from_str::<serde_json::Number>(&word).is_ok();
                if !ok {
                    return Err((pos, format!("invalid JSON: unexpected `{word}`")));
                }
                Ok(Node::scalar(pos, word, true))
            }
            _ => Err((
                pos,
                format!("invalid JSON: expected a value{}", self.found()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_positions() {
        let n = parse("{\n  \"a\": [1, true, \"x\\n\"],\n  \"b\": null\n}").expect("parses");
        let NodeKind::Map(e) = &n.kind else {
            panic!("map")
        };
        assert_eq!(e[0].0.pos, Pos::new(2, 3));
        assert_eq!(e[0].1.to_json(), serde_json::json!([1, true, "x\n"]));
        assert!(e[1].1.is_null());
        assert_eq!(parse("{\"a\" 1}").unwrap_err().0, Pos::new(1, 6));
        assert!(parse("[1,]").is_err());
        assert!(parse("{} x").is_err());
    }
}
