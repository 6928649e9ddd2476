//! A positioned data tree: what YAML frontmatter and `agents.json` are
//! read into, so that every key and value keeps the line and column a
//! diagnostic points at. Duplicate keys are kept (and reported by the
//! readers) rather than silently overwritten.

use serde_json::Value;

use crate::diag::Pos;

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub kind: NodeKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// Keys in source order (keys are scalars; others are rejected when read).
    Map(Vec<(Node, Node)>),
    Seq(Vec<Node>),
    /// `plain`: an unquoted YAML scalar or a JSON number/true/false/null,
    /// whose text is resolved to a type; a quoted scalar is always a string.
    Scalar {
        text: String,
        plain: bool,
    },
}

impl Node {
    pub fn scalar(pos: Pos, text: impl Into<String>, plain: bool) -> Node {
        Node {
            pos,
            kind: NodeKind::Scalar {
                text: text.into(),
                plain,
            },
        }
    }

    /// A short name of the node's type for "expected X, found Y" messages.
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Map(_) => "a mapping",
            NodeKind::Seq(_) => "a list",
            NodeKind::Scalar { .. } => match self.to_json() {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                _ => "a string",
            },
        }
    }

    /// The scalar's text when it is a string (quoted, or plain text that
    /// does not resolve to null, a boolean or a number).
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar { text, plain } => {
                if !*plain || matches!(resolve_plain(text), Value::String(_)) {
                    Some(text)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// The scalar's text whatever it resolves to (for values such as
    /// `model: 4` that are names written without quotes).
    pub fn scalar_text(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.to_json(), Value::Null)
    }

    /// The node as JSON (plain scalars resolved as YAML 1.2's core schema).
    pub fn to_json(&self) -> Value {
        match &self.kind {
            NodeKind::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.scalar_text().unwrap_or_default().to_owned(), v.to_json()))
                    .collect(),
            ),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Scalar { text, plain: true } => resolve_plain(text),
            NodeKind::Scalar { text, plain: false } => Value::String(text.clone()),
        }
    }

    /// A JSON value as a node, every part at `pos` (an assistant's answer
    /// has no positions of its own: they are those of the text it placed).
    pub fn from_json(v: &Value, pos: Pos) -> Node {
        let kind = match v {
            Value::Object(m) => NodeKind::Map(
                m.iter()
                    .map(|(k, v)| (Node::scalar(pos, k.clone(), false), Node::from_json(v, pos)))
                    .collect(),
            ),
            Value::Array(a) => NodeKind::Seq(a.iter().map(|v| Node::from_json(v, pos)).collect()),
            Value::String(s) => NodeKind::Scalar {
                text: s.clone(),
                plain: false,
            },
            other => NodeKind::Scalar {
                text: other.to_string(),
                plain: true,
            },
        };
        Node { pos, kind }
    }
}

/// YAML 1.2 core schema resolution of a plain scalar.
pub fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && let Ok(i) = text.parse::<i64>()
    {
        return Value::from(i);
    }
    let numeric = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && text.bytes().any(|b| b.is_ascii_digit());
    if numeric
        && let Some(n) = text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
    {
        return Value::Number(n);
    }
    Value::String(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve() {
        assert_eq!(resolve_plain("12"), Value::from(12));
        assert_eq!(resolve_plain("1.5"), Value::from(1.5));
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("True"), Value::Bool(true));
        assert_eq!(resolve_plain("sonnet"), Value::from("sonnet"));
        assert_eq!(resolve_plain("1.2.3"), Value::from("1.2.3"));
    }
}
