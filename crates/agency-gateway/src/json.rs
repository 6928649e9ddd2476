//! The top-level `usage` of an unstreamed JSON answer, found as the answer
//! streams through the gateway, in constant memory.
//!
//! Why not buffer and parse: the gateway used to keep up to 8 MiB of an
//! unstreamed answer to parse it at the end, and recorded a larger one as
//! 0 tokens, so an agent could ask for a large answer and be charged
//! nothing. [`TopUsage`] instead follows the JSON's structure byte by byte
//! (strings are skipped with `memchr`), and keeps only the value of the
//! top-level `usage` key (a few hundred bytes; at most [`MAX_VALUE`]).
//! An answer that is not one object, ends before its object closes, or
//! whose `usage` is missing or too large, yields no usage: the gateway
//! then charges the call at its reservation, never at 0.

/// The most of the `usage` value kept; a provider's is a few hundred bytes.
pub(crate) const MAX_VALUE: usize = 64 << 10;
/// Keys longer than this are not `usage`, even with escapes.
const MAX_KEY: usize = 64;

/// Follows one JSON answer's bytes.
#[derive(Debug, Default)]
pub(crate) struct TopUsage {
    /// Containers open: 1 inside the top-level object.
    depth: usize,
    in_string: bool,
    escape: bool,
    /// At depth 1, the next string is a key.
    key_next: bool,
    /// The key being read (raw, escapes kept), when at depth 1.
    key: Option<Vec<u8>>,
    key_too_long: bool,
    /// The last key read at depth 1 was `usage`; its value follows `:`.
    usage_key: bool,
    /// The `usage` value being read.
    value: Option<Vec<u8>>,
    value_too_long: bool,
    /// The last complete top-level `usage` value (the last one wins, as
    /// with serde).
    found: Option<Vec<u8>>,
    /// The top-level object closed: the answer was read to its end.
    closed: bool,
    /// Not one JSON object.
    broken: bool,
}

impl TopUsage {
    pub(crate) fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() && !self.broken && !self.closed {
            if self.in_string {
                if self.escape {
                    self.escape = false;
                    self.keep(&data[..1], true);
                    data = &data[1..];
                    continue;
                }
                let Some(i) = memchr::memchr2(b'"', b'\\', data) else {
                    self.keep(data, true);
                    return;
                };
                self.keep(&data[..i], true);
                if data[i] == b'\\' {
                    self.escape = true;
                    self.keep(&data[i..=i], true);
                } else {
                    self.in_string = false;
                    self.keep(&data[i..=i], false);
                    if let Some(key) = self.key.take() {
                        self.usage_key = !self.key_too_long && is_usage(&key);
                    }
                }
                data = &data[i + 1..];
                continue;
            }
            let b = data[0];
            data = &data[1..];
            self.byte(b);
        }
    }

    /// One byte outside a string.
    fn byte(&mut self, b: u8) {
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.key_next {
                    self.key_next = false;
                    self.key = Some(Vec::new());
                    self.key_too_long = false;
                }
                self.keep(&[b], false);
            }
            b'{' | b'[' if self.depth == 0 => {
                if b == b'{' {
                    self.depth = 1;
                    self.key_next = true;
                } else {
                    self.broken = true;
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.keep(&[b], false);
            }
            b'}' | b']' if self.depth == 1 => {
                self.end_value();
                self.depth = 0;
                self.closed = true;
            }
            b'}' | b']' if self.depth > 1 => {
                self.depth -= 1;
                self.keep(&[b], false);
            }
            b':' if self.depth == 1 => {
                if std::mem::take(&mut self.usage_key) {
                    self.value = Some(Vec::new());
                    self.value_too_long = false;
                }
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.key_next = true;
            }
            b' ' | b'\t' | b'\r' | b'\n' => self.keep(&[b], false),
            _ if self.depth == 0 => self.broken = true,
            _ => self.keep(&[b], false),
        }
    }

    /// Keep bytes of the key being read (`in_key`: they are inside it) and
    /// of the `usage` value being read, each bounded.
    fn keep(&mut self, bytes: &[u8], in_key: bool) {
        if in_key && let Some(k) = &mut self.key {
            if k.len() + bytes.len() > MAX_KEY {
                self.key_too_long = true;
            } else {
                k.extend_from_slice(bytes);
            }
        }
        if let Some(v) = &mut self.value {
            if v.len() + bytes.len() > MAX_VALUE {
                self.value_too_long = true;
            } else {
                v.extend_from_slice(bytes);
            }
        }
    }

    fn end_value(&mut self) {
        if let Some(v) = self.value.take() {
            // A value cut short is no value: the usage is then unknown.
            self.found = (!self.value_too_long).then_some(v);
        }
    }

    /// The top-level `usage` value, if the answer was one whole object
    /// that had one.
    pub(crate) fn finish(self) -> Option<serde_json::Value> {
        if !self.closed || self.broken {
            return None;
        }
        serde_json::from_slice(&self.found?).ok()
    }
}

/// Whether a key's raw bytes spell `usage` (with escapes decoded).
fn is_usage(raw: &[u8]) -> bool {
    if !raw.contains(&b'\\') {
        return raw == b"usage";
    }
    let quoted = [&b"\""[..], raw, b"\""].concat();
    serde_json::from_slice::<String>(&quoted).is_ok_and(|k| k == "usage")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn scan(text: &[u8], piece: usize) -> Option<Value> {
        let mut t = TopUsage::default();
        for c in text.chunks(piece.max(1)) {
            t.feed(c);
        }
        t.finish()
    }

    #[test]
    fn the_top_level_usage_only_in_any_pieces() {
        let text = br#" {"content":[{"type":"text","text":"a \"usage\": {\"x\":1} }"},{"usage":{"output_tokens":99}}],"u\u0073age" : {"input_tokens":7,"output_tokens":3} , "z":[1,{"a":"]"}]} trailing"#;
        for piece in [1, 2, 5, 64, 10_000] {
            assert_eq!(
                scan(text, piece),
                Some(json!({"input_tokens":7,"output_tokens":3})),
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn an_answer_past_eight_mebibytes_still_yields_its_usage() {
        let big = "x".repeat(20 << 20);
        let text =
            json!({"content":[{"type":"text","text":big}],"usage":{"output_tokens":5}}).to_string();
        assert_eq!(
            scan(text.as_bytes(), 1 << 16),
            Some(json!({"output_tokens":5}))
        );
    }

    #[test]
    fn cut_broken_or_oversized_answers_yield_nothing() {
        let whole = br#"{"usage":{"output_tokens":5},"content":[]}"#;
        assert!(scan(whole, 3).is_some());
        // Cut before the object closed: not read to its end.
        assert_eq!(scan(&whole[..whole.len() - 1], 3), None);
        assert_eq!(scan(br#"[{"usage":{"output_tokens":5}}]"#, 3), None);
        assert_eq!(scan(br#"oops {"usage":{}}"#, 3), None);
        assert_eq!(scan(br#"{"content":[]}"#, 3), None);
        let huge = format!(r#"{{"usage":{{"pad":"{}"}}}}"#, "p".repeat(MAX_VALUE));
        assert_eq!(scan(huge.as_bytes(), 4096), None);
    }

    fn value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z\"\\\\{}\\[\\],: ]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("usage|text|[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// On any JSON object, in any pieces, the scan finds what serde
        /// finds under the top-level `usage`.
        #[test]
        fn the_scan_agrees_with_serde(
            fields in proptest::collection::btree_map("usage|text|[a-z]{1,3}", value(), 0..5),
            piece in 1usize..50,
        ) {
            let v = Value::Object(fields.into_iter().collect());
            let text = serde_json::to_string_pretty(&v).unwrap();
            let want = v.get("usage").cloned();
            proptest::prop_assert_eq!(scan(text.as_bytes(), piece), want);
        }
    }
}
