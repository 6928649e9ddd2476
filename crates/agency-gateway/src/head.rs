//! The head of a model request: the few top-level fields the gateway reads
//! (`model`, `stream`, `stream_options`, `max_tokens`,
//! `max_completion_tokens`, `n`) found without reading the rest as JSON.
//!
//! Why: a model request carries the whole conversation, hundreds of
//! kilobytes for a long one, and the gateway used to run it all through
//! serde's JSON reader to find five small fields (about
//! 30 µs of the daemon's CPU per model call in the many-agents bench, and
//! growing with every turn). [`scan`] walks the top-level object and jumps
//! over the other values: strings with `memchr`, containers by counting
//! brackets. Each field it keeps is then parsed by serde from its own bytes.
//!
//! It is sure of an answer only for the plain shape clients send; for
//! anything else — a key with an escape (`"max\u005ftokens"`), a field
//! twice, a bracket that does not match, bytes after the object — it says
//! [`Scan::Unsure`] and the caller reads the whole body with serde as
//! before, so such a body gets exactly the old answer. A value it skips is
//! not checked: a body whose skipped parts are not valid JSON is forwarded,
//! and the upstream refuses it (at no cost in tokens) where the gateway
//! used to.

use serde_json::{Map, Value};

/// The fields a head holds.
pub(crate) const FIELDS: [&str; 6] = [
    "model",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "n",
];

/// What a scan found.
#[derive(Debug, PartialEq)]
pub(crate) enum Scan {
    /// The body is one JSON object; these of [`FIELDS`] are in it.
    Head(Map<String, Value>),
    /// Not an object (its first byte after whitespace is not `{`).
    NotObject,
    /// Read the body with serde instead.
    Unsure,
}

/// The fields of [`FIELDS`] that `body`'s top-level object holds; `None`
/// when `body` is not one JSON object.
pub(crate) fn head(body: &[u8]) -> Option<Map<String, Value>> {
    match scan(body) {
        Scan::Head(fields) => Some(fields),
        Scan::NotObject => None,
        Scan::Unsure => with_serde(body),
    }
}

/// The top-level fields serde reads, in the order of [`FIELDS`]; every
/// other field is skipped by the parser without being built.
#[derive(serde::Deserialize)]
struct HeadFields {
    model: Option<Value>,
    stream: Option<Value>,
    stream_options: Option<Value>,
    max_tokens: Option<Value>,
    max_completion_tokens: Option<Value>,
    n: Option<Value>,
}

/// The whole body through serde: the reading before [`scan`], and still
/// the one for the bodies it is not sure of.
fn with_serde(body: &[u8]) -> Option<Map<String, Value>> {
    // serde also reads a struct from an array; a request is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    let h: HeadFields = serde_json::from_slice(body).ok()?;
    let values = [
        h.model,
        h.stream,
        h.stream_options,
        h.max_tokens,
        h.max_completion_tokens,
        h.n,
    ];
    Some(
        FIELDS
            .into_iter()
            .zip(values)
            .filter_map(|(k, v)| Some((k.to_owned(), v?)))
            .collect(),
    )
}

/// Find [`FIELDS`] in `body`'s top-level object.
pub(crate) fn scan(body: &[u8]) -> Scan {
    let mut at = skip_ws(body, 0);
    if body.get(at) != Some(&b'{') {
        return Scan::NotObject;
    }
    at = skip_ws(body, at + 1);
    let mut fields = Map::new();
    // Which of FIELDS were given, `null` ones too (serde reads a `null`
    // as absent, yet refuses the field given again after it).
    let mut seen = [false; FIELDS.len()];
    if body.get(at) == Some(&b'}') {
        return end(body, at + 1, fields);
    }
    loop {
        // A key: a string without escapes (one with escapes may spell a
        // field's name another way: serde decodes it).
        if body.get(at) != Some(&b'"') {
            return Scan::Unsure;
        }
        let Some(close) = memchr::memchr2(b'"', b'\\', &body[at + 1..]).map(|i| at + 1 + i) else {
            return Scan::Unsure;
        };
        if body[close] == b'\\' {
            return Scan::Unsure;
        }
        let key = &body[at + 1..close];
        at = skip_ws(body, close + 1);
        if body.get(at) != Some(&b':') {
            return Scan::Unsure;
        }
        let start = skip_ws(body, at + 1);
        let Some(stop) = skip_value(body, start) else {
            return Scan::Unsure;
        };
        if let Some(i) = FIELDS.iter().position(|f| f.as_bytes() == key) {
            // serde refuses a field given twice; so does the slow path.
            if std::mem::replace(&mut seen[i], true) {
                return Scan::Unsure;
            }
            match serde_json::from_slice::<Value>(&body[start..stop]) {
                Ok(Value::Null) => {}
                Ok(v) => {
                    fields.insert(FIELDS[i].to_owned(), v);
                }
                Err(_) => return Scan::Unsure,
            }
        }
        at = skip_ws(body, stop);
        match body.get(at) {
            Some(b',') => at = skip_ws(body, at + 1),
            Some(b'}') => return end(body, at + 1, fields),
            _ => return Scan::Unsure,
        }
    }
}

/// After the object's closing brace: only whitespace may follow.
fn end(body: &[u8], at: usize, fields: Map<String, Value>) -> Scan {
    if skip_ws(body, at) == body.len() {
        Scan::Head(fields)
    } else {
        Scan::Unsure
    }
}

fn skip_ws(body: &[u8], mut at: usize) -> usize {
    while body
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// The end of the string whose opening quote is at `at`.
fn skip_string(body: &[u8], mut at: usize) -> Option<usize> {
    at += 1;
    loop {
        let i = at + memchr::memchr2(b'"', b'\\', body.get(at..)?)?;
        if body[i] == b'"' {
            return Some(i + 1);
        }
        // An escape: the byte after the backslash is never the end.
        at = i + 2;
    }
}

/// The end of the value starting at `at`: a string, a container with its
/// brackets matched (the rest inside unchecked), or a scalar's bytes up to
/// the next delimiter. `None` if the body ends first or a bracket does not
/// match.
fn skip_value(body: &[u8], at: usize) -> Option<usize> {
    match body.get(at)? {
        b'"' => skip_string(body, at),
        b'{' | b'[' => {
            let mut open = vec![body[at]];
            let mut i = at + 1;
            while let Some(last) = open.last().copied() {
                match body.get(i)? {
                    b'"' => {
                        i = skip_string(body, i)?;
                        continue;
                    }
                    b @ (b'{' | b'[') => open.push(*b),
                    b'}' if last == b'{' => {
                        open.pop();
                    }
                    b']' if last == b'[' => {
                        open.pop();
                    }
                    b'}' | b']' => return None,
                    _ => {}
                }
                i += 1;
            }
            Some(i)
        }
        _ => {
            let mut i = at;
            while body
                .get(i)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                i += 1;
            }
            (i > at).then_some(i)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn by_serde(body: &[u8]) -> Option<Map<String, Value>> {
        with_serde(body)
    }

    fn scanned(body: &str) -> Scan {
        scan(body.as_bytes())
    }

    #[test]
    fn a_request_of_each_api() {
        let anthropic = r#"{"model":"claude-x","max_tokens":1024,"system":"Be brief. {not a brace}","messages":[{"role":"user","content":[{"type":"text","text":"say \"max_tokens\": 9 ]"}]}],"tools":[{"name":"t","input_schema":{"type":"object"}}],"stream":true}"#;
        let Scan::Head(h) = scanned(anthropic) else {
            panic!("no head")
        };
        assert_eq!(Some(h), by_serde(anthropic.as_bytes()));
        let openai = " {\n \"model\": \"gpt\", \"messages\": [], \"stream\": true,\n \"stream_options\": {\"include_usage\": false}, \"max_completion_tokens\": 50 }\n";
        let Scan::Head(h) = scanned(openai) else {
            panic!("no head")
        };
        assert_eq!(h["stream_options"]["include_usage"], false);
        assert_eq!(Some(h), by_serde(openai.as_bytes()));
    }

    /// Every shape the scan is not sure of goes to serde: a field twice
    /// (serde refuses it), a key spelled with escapes, a bracket that does
    /// not match, something after the object, a body cut off.
    #[test]
    fn the_shapes_left_to_serde() {
        for body in [
            r#"{"max_tokens":1,"max_tokens":100000}"#,
            r#"{"max\u005ftokens":100000}"#,
            r#"{"messages":[{"a":1]],"max_tokens":5}"#,
            r#"{"max_tokens":5}{"max_tokens":100000}"#,
            r#"{"max_tokens":5,"messages":["unclosed"#,
            r#"{"max_tokens":5,}"#,
            r#"{"max_tokens":}"#,
            r#"{"max_tokens":12abc}"#,
            r#"{max_tokens:5}"#,
        ] {
            assert_eq!(scanned(body), Scan::Unsure, "{body}");
        }
        for body in ["", "  ", "[1]", "\"x\"", "5"] {
            assert_eq!(scanned(body), Scan::NotObject, "{body}");
        }
        assert_eq!(scanned("{}"), Scan::Head(Map::new()));
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z \"\\\\{}\\[\\],:\u{e9}\u{1F600}]{0,10}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::vec(("[a-z_]{1,6}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// On any body serde reads as an object, the scan finds the same
        /// fields or leaves the body to serde; never other values. Keys
        /// are drawn so that the head's names, repeats and escaped
        /// spellings come up often; the body is written compact or pretty.
        #[test]
        fn the_scan_agrees_with_serde(
            members in proptest::collection::vec(
                (0usize..9, json_value()),
                0..8,
            ),
            pretty in proptest::bool::ANY,
        ) {
            let mut body = String::from("{");
            for (i, (k, v)) in members.iter().enumerate() {
                let key = match k {
                    0..=5 => format!("\"{}\"", FIELDS[*k]),
                    6 => "\"max\\u005ftokens\"".to_owned(),
                    7 => "\"messages\"".to_owned(),
                    _ => "\"other\"".to_owned(),
                };
                let v = if pretty {
                    serde_json::to_string_pretty(v).unwrap()
                } else {
                    serde_json::to_string(v).unwrap()
                };
                if i > 0 {
                    body.push_str(if pretty { ",\n  " } else { "," });
                }
                body.push_str(&format!("{key}:{v}"));
            }
            body.push('}');
            let serde = by_serde(body.as_bytes());
            match scan(body.as_bytes()) {
                Scan::Head(h) => proptest::prop_assert_eq!(Some(h), serde, "{}", body),
                Scan::NotObject => proptest::prop_assert!(false, "not an object: {}", body),
                Scan::Unsure => {}
            }
        }

        /// A plain body (each key once, none escaped) is always the scan's
        /// to answer, with serde's answer: the fast path is the one taken.
        #[test]
        fn a_plain_body_is_scanned(
            members in proptest::collection::btree_map(0usize..8, json_value(), 0..8),
        ) {
            let mut body = String::from("{");
            for (i, (k, v)) in members.iter().enumerate() {
                let key = FIELDS.get(*k).copied().unwrap_or("messages");
                if i > 0 {
                    body.push(',');
                }
                body.push_str(&format!("\"{key}\":{}", serde_json::to_string(v).unwrap()));
            }
            body.push('}');
            proptest::prop_assert_eq!(
                scan(body.as_bytes()),
                Scan::Head(by_serde(body.as_bytes()).unwrap()),
                "{}",
                body
            );
        }

        /// Arbitrary bytes: whatever the scan is sure of, serde agrees
        /// with on the fields it found, wherever serde reads the body.
        #[test]
        fn arbitrary_bytes_never_give_another_head(body in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::prelude::Just(b'{'), proptest::prelude::Just(b'}'),
                proptest::prelude::Just(b'['), proptest::prelude::Just(b']'),
                proptest::prelude::Just(b'"'), proptest::prelude::Just(b'\\'),
                proptest::prelude::Just(b':'), proptest::prelude::Just(b','),
                proptest::prelude::Just(b'1'), proptest::prelude::Just(b' '),
                proptest::prelude::Just(b'm'),
            ],
            0..40,
        )) {
            if let (Scan::Head(h), Some(s)) = (scan(&body), by_serde(&body)) {
                proptest::prop_assert_eq!(h, s);
            }
        }
    }
}
