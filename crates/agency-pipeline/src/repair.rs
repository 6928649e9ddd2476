//! The lenient repair parse of a model's text (step (ii) of the ladder):
//! plain JSON; a byte-order mark; a fenced ```` ```json ```` block;
//! trailing commas; one JSON object inside prose, found by a balanced-brace
//! scan that respects strings. It never guesses content: each repair only
//! removes what is around or between the JSON the model wrote.
//!
//! Whether the value validates is the contract's business, not this one's.

use serde_json::Value;

/// Most `{` positions tried as the start of an object in prose: bounds the
/// work on a long answer full of braces.
const MAX_STARTS: usize = 64;

/// A value read from a model's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Repaired {
    pub value: Value,
    /// `false`: the text (trimmed) was JSON as it stood.
    pub repaired: bool,
}

/// Read `text` as JSON, leniently; `None` when no repair finds any.
pub fn repair(text: &str) -> Option<Repaired> {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return Some(Repaired {
            value,
            repaired: false,
        });
    }
    let repaired = |value| {
        Some(Repaired {
            value,
            repaired: true,
        })
    };
    let body = trimmed.trim_start_matches('\u{feff}').trim();
    if let Some(v) = parse_lenient(body) {
        return repaired(v);
    }
    for block in fenced_blocks(body) {
        if let Some(v) = parse_lenient(block.trim()) {
            return repaired(v);
        }
    }
    for candidate in objects_in_prose(body) {
        if let Some(v) = parse_lenient(candidate) {
            return repaired(v);
        }
    }
    None
}

/// JSON as it stands, or with its trailing commas removed.
fn parse_lenient(s: &str) -> Option<Value> {
    serde_json::from_str(s)
        .ok()
        .or_else(|| serde_json::from_str(&strip_trailing_commas(s)).ok())
}

/// Drop each `,` (outside strings) followed only by whitespace and a
/// closing `}` or `]`.
fn strip_trailing_commas(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            ',' => {
                let rest = s[i + 1..].trim_start();
                if !(rest.starts_with('}') || rest.starts_with(']')) {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The contents of each ```` ``` ```` fenced block, with or without a
/// language tag; an unclosed fence runs to the end.
fn fenced_blocks(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        // The info string (`json`, `JSON`, nothing) ends at the line's end.
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let info = &after[..body_start];
        // ```{"a":1}``` on one line: no info string, the body starts here.
        let body = if info.trim_start().starts_with(['{', '[']) {
            after
        } else {
            &after[body_start..]
        };
        match body.find("```") {
            Some(end) => {
                out.push(&body[..end]);
                rest = &body[end + 3..];
            }
            None => {
                out.push(body);
                break;
            }
        }
    }
    out
}

/// Balanced `{…}` spans of `s`, scanned from each `{` (up to
/// [`MAX_STARTS`]), skipping braces inside strings.
fn objects_in_prose(s: &str) -> Vec<&str> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut starts = 0;
    let mut from = 0;
    while let Some(off) = s[from..].find('{') {
        let start = from + off;
        starts += 1;
        if starts > MAX_STARTS {
            break;
        }
        if let Some(end) = balanced_end(&bytes[start..]) {
            out.push(&s[start..start + end]);
        }
        from = start + 1;
    }
    out
}

/// The length of the balanced object opening `b` (which starts with `{`).
fn balanced_end(b: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in b.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn table_of_repairs() {
        let want = json!({"a": 1, "b": ["x", "}{"]});
        let cases: &[(&str, bool)] = &[
            (r#"{"a":1,"b":["x","}{"]}"#, false),
            ("  \n{\"a\":1,\"b\":[\"x\",\"}{\"]}\n", false),
            ("\u{feff}{\"a\":1,\"b\":[\"x\",\"}{\"]}", true),
            ("```json\n{\"a\":1,\"b\":[\"x\",\"}{\"]}\n```", true),
            (
                "Sure! Here it is:\n```JSON\n{\"a\":1,\"b\":[\"x\",\"}{\"]}\n```\nHope it helps.",
                true,
            ),
            ("```\n{\"a\":1,\"b\":[\"x\",\"}{\"]}\n```", true),
            ("```{\"a\":1,\"b\":[\"x\",\"}{\"]}```", true),
            ("```json\n{\"a\":1,\"b\":[\"x\",\"}{\"]}", true),
            ("{\"a\":1,\"b\":[\"x\",\"}{\",],}", true),
            (
                "The answer is {\"a\":1,\"b\":[\"x\",\"}{\"]} as requested.",
                true,
            ),
            (
                "Draft {not json} then {\"a\":1,\"b\":[\"x\",\"}{\"],} done",
                true,
            ),
        ];
        for (text, repaired) in cases {
            let r = repair(text).unwrap_or_else(|| panic!("no value from {text:?}"));
            assert_eq!(r.value, want, "{text:?}");
            assert_eq!(r.repaired, *repaired, "{text:?}");
        }
    }

    #[test]
    fn commas_inside_strings_are_kept() {
        let r = repair(r#"{"a": ", }", "b": [1,],}"#).expect("repaired");
        assert_eq!(r.value, json!({"a": ", }", "b": [1]}));
    }

    #[test]
    fn no_json_is_none() {
        for text in [
            "",
            "I cannot help with that.",
            "{",
            "{\"a\": }",
            "```json\n```",
        ] {
            assert_eq!(repair(text), None, "{text:?}");
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z{}\"]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-zA-Z{}\" ,]{0,8}", json_value(), 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn wrapped_objects_come_back_equal(
            v in object(),
            pretty in any::<bool>(),
            before in "[a-zA-Z .:!\n]{0,40}",
            after in "[a-zA-Z .:!\n]{0,40}",
            wrap in 0..4u8,
        ) {
            let json = if pretty {
                serde_json::to_string_pretty(&v).expect("serializes")
            } else {
                serde_json::to_string(&v).expect("serializes")
            };
            let text = match wrap {
                0 => json.clone(),
                1 => format!("```json\n{json}\n```"),
                2 => format!("{before}\n```json\n{json}\n```\n{after}"),
                _ => format!("{before} {json} {after}"),
            };
            let r = repair(&text).expect("a value");
            prop_assert_eq!(r.value, v);
        }

        #[test]
        fn never_panics_on_arbitrary_text(s in ".{0,200}") {
            let _ = repair(&s);
        }

        #[test]
        fn never_panics_on_json_like_text(s in "[{}\\[\\]\",:a1 \\\\`\n]{0,120}") {
            if let Some(r) = repair(&s) {
                // Whatever it returns is real JSON of the text's parts.
                prop_assert!(serde_json::to_string(&r.value).is_ok());
            }
        }
    }
}
