//! Placeholders in scripted strings: `{{result:/ptr}}`, `{{result[N]:/ptr}}`,
//! `{{system:REGEX}}` and `{{user:REGEX}}`.
//!
//! Templates are parsed (and regexes compiled) once when the script is
//! loaded, so a typo is a load error rather than a surprise in the middle of a
//! test; they are resolved per request against the conversation the client
//! sent. Everything here is pure: no I/O, no shared state.

use regex::Regex;
use serde_json::{Map, Value};
use std::fmt;

/// A string with zero or more placeholders, parsed.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone)]
enum Segment {
    Literal(String),
    Placeholder(Placeholder),
}

#[derive(Debug, Clone)]
struct Placeholder {
    /// The placeholder as written, braces included, for error messages.
    raw: String,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    /// `nth` = 1 is the most recent tool result.
    Result {
        nth: usize,
        pointer: String,
    },
    System(Regex),
    User(Regex),
}

/// A JSON value whose strings are templates (a scripted tool input).
#[derive(Debug, Clone)]
pub(crate) enum TValue {
    /// null, a boolean or a number: nothing to resolve.
    Plain(Value),
    String(Template),
    Array(Vec<TValue>),
    Object(Vec<(String, TValue)>),
}

/// What a resolution needs from the conversation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub system: &'a str,
    pub first_user: &'a str,
    /// The tool results' texts, oldest first.
    pub tool_results: &'a [String],
}

/// A placeholder that could not be resolved against the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlaceholderError {
    pub placeholder: String,
    pub reason: String,
}

impl fmt::Display for PlaceholderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "placeholder {}: {}", self.placeholder, self.reason)
    }
}

/// A resolved placeholder: text is inserted raw, JSON as JSON.
enum Resolved {
    Text(String),
    Json(Value),
}

impl Template {
    /// Parses `text`. `{{` always opens a placeholder (there is no escape: a
    /// stray `{{` is more likely a typo than intended text), and the
    /// placeholder ends at the last `}` of the first run of two or more `}`,
    /// so a regex may end in a quantifier: `{{system:x{2}}}` is `x{2}`.
    pub(crate) fn parse(text: &str) -> Result<Template, String> {
        let mut segments = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            if start > 0 {
                segments.push(Segment::Literal(rest[..start].to_owned()));
            }
            let after = &rest[start + 2..];
            let Some(mut end) = after.find("}}") else {
                return Err(format!(
                    "unclosed placeholder {:?} (a placeholder is {{{{kind:argument}}}})",
                    shorten(&rest[start..], 60)
                ));
            };
            // Extend over a longer run of braces: the last two close the
            // placeholder, the others belong to its argument.
            while after[end + 2..].starts_with('}') {
                end += 1;
            }
            let body = &after[..end];
            let raw = format!("{{{{{body}}}}}");
            let source = parse_source(body).map_err(|e| format!("placeholder {raw}: {e}"))?;
            segments.push(Segment::Placeholder(Placeholder { raw, source }));
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            segments.push(Segment::Literal(rest.to_owned()));
        }
        Ok(Template { segments })
    }

    /// Resolves into text: JSON values are inserted as compact JSON.
    pub(crate) fn render_text(&self, cx: Context<'_>) -> Result<String, PlaceholderError> {
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Placeholder(p) => match p.resolve(cx)? {
                    Resolved::Text(text) => out.push_str(&text),
                    Resolved::Json(value) => out.push_str(&value.to_string()),
                },
            }
        }
        Ok(out)
    }

    /// Resolves into a JSON value: a string that is exactly one placeholder
    /// whose value is not a string becomes that value (so `"{{result:/ids}}"`
    /// can be an array); anything else is a string.
    pub(crate) fn render_value(&self, cx: Context<'_>) -> Result<Value, PlaceholderError> {
        if let [Segment::Placeholder(p)] = self.segments.as_slice() {
            return Ok(match p.resolve(cx)? {
                Resolved::Text(text) => Value::String(text),
                Resolved::Json(value) => value,
            });
        }
        self.render_text(cx).map(Value::String)
    }
}

impl TValue {
    /// Compiles every string in `value` as a template; the error names the
    /// JSON pointer of the offending string.
    pub(crate) fn compile(value: &Value) -> Result<TValue, String> {
        compile_at(value, &mut String::new())
    }

    pub(crate) fn resolve(&self, cx: Context<'_>) -> Result<Value, PlaceholderError> {
        Ok(match self {
            TValue::Plain(value) => value.clone(),
            TValue::String(template) => template.render_value(cx)?,
            TValue::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| item.resolve(cx))
                    .collect::<Result<_, _>>()?,
            ),
            TValue::Object(fields) => {
                let mut map = Map::new();
                for (key, item) in fields {
                    map.insert(key.clone(), item.resolve(cx)?);
                }
                Value::Object(map)
            }
        })
    }
}

fn compile_at(value: &Value, path: &mut String) -> Result<TValue, String> {
    Ok(match value {
        Value::String(text) => TValue::String(Template::parse(text).map_err(|e| {
            if path.is_empty() {
                e
            } else {
                format!("at {path}: {e}")
            }
        })?),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                out.push(compile_at(item, path)?);
                path.truncate(len);
            }
            TValue::Array(out)
        }
        Value::Object(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            for (key, item) in fields {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                out.push((key.clone(), compile_at(item, path)?));
                path.truncate(len);
            }
            TValue::Object(out)
        }
        other => TValue::Plain(other.clone()),
    })
}

fn parse_source(body: &str) -> Result<Source, String> {
    let Some((kind, arg)) = body.split_once(':') else {
        return Err(
            "expected kind:argument (result:/pointer, result[N]:/pointer, \
                    system:REGEX or user:REGEX)"
                .to_owned(),
        );
    };
    match kind {
        "system" => compile_regex(arg).map(Source::System),
        "user" => compile_regex(arg).map(Source::User),
        _ => {
            let nth = if kind == "result" {
                1
            } else if let Some(n) = kind
                .strip_prefix("result[")
                .and_then(|n| n.strip_suffix(']'))
            {
                match n.parse::<usize>() {
                    Ok(n) if n >= 1 => n,
                    _ => {
                        return Err(format!(
                            "result[{n}]: N must be a whole number from 1 (the most recent \
                             tool result)"
                        ));
                    }
                }
            } else {
                return Err(format!(
                    "unknown kind {kind:?} (expected result, result[N], system or user)"
                ));
            };
            if !(arg.is_empty() || arg.starts_with('/')) {
                return Err(format!(
                    "{arg:?} is not a JSON pointer (it must be empty or start with /)"
                ));
            }
            Ok(Source::Result {
                nth,
                pointer: arg.to_owned(),
            })
        }
    }
}

fn compile_regex(pattern: &str) -> Result<Regex, String> {
    let regex = Regex::new(pattern).map_err(|e| format!("failed to compile the regex: {e}"))?;
    // captures_len counts the implicit whole-match group.
    if regex.captures_len() < 2 {
        return Err("the regex has no capture group: wrap the wanted part in ( )".to_owned());
    }
    Ok(regex)
}

impl Placeholder {
    fn resolve(&self, cx: Context<'_>) -> Result<Resolved, PlaceholderError> {
        let fail = |reason: String| PlaceholderError {
            placeholder: self.raw.clone(),
            reason,
        };
        match &self.source {
            Source::System(regex) => capture(regex, cx.system)
                .map(Resolved::Text)
                .ok_or_else(|| fail("the system prompt does not match the regex".to_owned())),
            Source::User(regex) => capture(regex, cx.first_user)
                .map(Resolved::Text)
                .ok_or_else(|| {
                    fail(format!(
                        "the first user message does not match the regex (it starts {:?})",
                        shorten(cx.first_user, 120)
                    ))
                }),
            Source::Result { nth, pointer } => {
                let count = cx.tool_results.len();
                let Some(text) = count.checked_sub(*nth).and_then(|i| cx.tool_results.get(i))
                else {
                    return Err(fail(format!(
                        "the conversation has {count} tool result(s); this needs at least {nth}"
                    )));
                };
                match lookup(text, pointer) {
                    Some(Value::String(text)) => Ok(Resolved::Text(text)),
                    Some(value) => Ok(Resolved::Json(value)),
                    None => Err(fail(format!(
                        "the tool result has nothing at {pointer:?} (it reads {:?})",
                        shorten(text, 300)
                    ))),
                }
            }
        }
    }
}

fn capture(regex: &Regex, haystack: &str) -> Option<String> {
    regex
        .captures(haystack)
        .and_then(|caps| caps.get(1))
        .map(|m| m.as_str().to_owned())
}

/// The value at `pointer` in a tool result's text. The text is read as
/// JSON (or, failing that, as one JSON string); Claude Code's wrapper
/// `{"result": "<text>"}` is looked through first, and the unwrapped
/// reading is tried before the literal one so a tool whose own output is
/// `{"result": …}` still resolves.
pub(crate) fn lookup(text: &str, pointer: &str) -> Option<Value> {
    let literal: Value =
        serde_json::from_str(text.trim()).unwrap_or_else(|_| Value::String(text.to_owned()));
    let unwrapped = match &literal {
        Value::Object(map) if map.len() == 1 => match map.get("result") {
            Some(Value::String(inner)) => Some(
                serde_json::from_str(inner.trim()).unwrap_or_else(|_| Value::String(inner.clone())),
            ),
            _ => None,
        },
        _ => None,
    };
    unwrapped
        .iter()
        .chain(std::iter::once(&literal))
        .find_map(|doc| doc.pointer(pointer).cloned())
}

/// At most `max` characters of `text`, marked when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cx<'a>(results: &'a [String]) -> Context<'a> {
        Context {
            system: "You own Outcome 0b7e6f1c-1111-4222-8333-444455556666 now.",
            first_user: "Please write guide #42",
            tool_results: results,
        }
    }

    #[test]
    fn parses_good_templates() {
        for text in [
            "",
            "plain",
            "{{result:/a}}",
            "{{result:}}",
            "{{result[3]:/a/0}}",
            "x {{system:Outcome ([0-9a-f-]{36})}} y",
            "{{system:x{2}(y)}}",
            "{{user:#(\\d+)}}",
            "{{system:(a{2})}}",
            "a}}b",
        ] {
            assert!(Template::parse(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn rejects_bad_templates() {
        for (text, needle) in [
            ("{{result:/a", "unclosed"),
            ("{{nope:/a}}", "unknown kind"),
            ("{{result}}", "kind:argument"),
            ("{{result:a}}", "JSON pointer"),
            ("{{result[0]:/a}}", "from 1"),
            ("{{result[x]:/a}}", "from 1"),
            ("{{system:abc}}", "capture group"),
            ("{{user:(}}", "compile"),
        ] {
            let err = Template::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn regex_ending_in_a_quantifier_keeps_its_braces() {
        // Cut at the first `}}`, the regex would be `(0b7e6f1c)-[0-9]{4`.
        let t = Template::parse("{{system:(0b7e6f1c)-[0-9]{4}}}").unwrap();
        assert_eq!(t.render_text(cx(&[])).unwrap(), "0b7e6f1c");
        let t = Template::parse("{{system:(0b7e6f1c-[0-9a-f]{4})}}").unwrap();
        assert_eq!(t.render_text(cx(&[])).unwrap(), "0b7e6f1c-1111");
    }

    #[test]
    fn resolves_results_system_and_user() {
        let results = vec![
            r#"{"id": "old", "n": 1}"#.to_owned(),
            r#"{"result": "{\"outcome\": \"abc\", \"ids\": [1, 2]}"}"#.to_owned(),
        ];
        let cx = cx(&results);
        let value = TValue::compile(&json!({
            "o": "{{result:/outcome}}",
            "ids": "{{result:/ids}}",
            "mixed": "ids={{result:/ids}} old={{result[2]:/id}}",
            "n": "{{result[2]:/n}}",
            "h": "{{system:Outcome ([0-9a-f-]{36})}}",
            "u": "{{user:#(\\d+)}}",
            "k": [true, null, 3],
        }))
        .unwrap()
        .resolve(cx)
        .unwrap();
        assert_eq!(
            value,
            json!({
                "o": "abc",
                "ids": [1, 2],
                "mixed": "ids=[1,2] old=old",
                "n": 1,
                "h": "0b7e6f1c-1111-4222-8333-444455556666",
                "u": "42",
                "k": [true, null, 3],
            })
        );
    }

    #[test]
    fn wrapper_with_plain_text_and_literal_result_objects() {
        assert_eq!(
            lookup(r#"{"result": "hello"}"#, ""),
            Some(Value::String("hello".into()))
        );
        // A tool whose own output is {"result": {...}} is not a wrapper.
        assert_eq!(
            lookup(r#"{"result": {"a": 1}}"#, "/result/a"),
            Some(json!(1))
        );
        // The literal reading is tried when the unwrapped one lacks the path.
        assert_eq!(
            lookup(r#"{"result": "plain"}"#, "/result"),
            Some(json!("plain"))
        );
        assert_eq!(lookup("not json", ""), Some(json!("not json")));
        assert_eq!(lookup("not json", "/a"), None);
    }

    #[test]
    fn unresolvable_placeholders_name_themselves() {
        let t = Template::parse("{{result:/missing}}").unwrap();
        let err = t.render_value(cx(&[r#"{"a":1}"#.to_owned()])).unwrap_err();
        assert_eq!(err.placeholder, "{{result:/missing}}");
        assert!(err.to_string().contains("/missing"), "{err}");
        let err = t.render_value(cx(&[])).unwrap_err();
        assert!(err.reason.contains("0 tool result"), "{err}");
        let t = Template::parse("{{system:Handler ([0-9]+)}}").unwrap();
        assert!(t.render_text(cx(&[])).is_err());
    }

    #[test]
    fn compile_names_the_pointer_of_a_bad_string() {
        let err = TValue::compile(&json!({"a": [1, {"b/c": "{{bad:x}}"}]})).unwrap_err();
        assert!(err.starts_with("at /a/1/b~1c: "), "{err}");
    }

    #[test]
    fn shorten_respects_char_boundaries() {
        assert_eq!(shorten("héllo", 2), "hé…");
        assert_eq!(shorten("hi", 2), "hi");
    }
}
