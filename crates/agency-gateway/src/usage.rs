//! Reading the usage of a model answer as it streams through the gateway,
//! without holding the answer back: an unstreamed answer's `usage` object,
//! or the `usage` of the Server-Sent Events that carry one (Anthropic:
//! `message_start` and `message_delta`, whose counts are running totals;
//! OpenAI: the final chunk of a stream asked with
//! `stream_options.include_usage`). The stream is read by Agency's SSE
//! parser (`agency-sse`: CR, CRLF or LF line ends, a BOM, split chunks).
//! Bounded: an event line over [`MAX_BUFFERED`] is skipped, never
//! buffered without end, and the lines after it still count; an
//! unstreamed answer of any size is scanned in constant memory
//! (`gateway/json.rs`).
//!
//! It also tells whether the answer's *final* usage was seen:
//! an unstreamed answer read to its end with its `usage`,
//! Anthropic's `message_delta`, OpenAI's usage chunk. Without it (a stream
//! cut before its last event, the agent gone, an answer that could not be
//! read) the counts seen so far are not what the provider billed, and the
//! gateway charges the call at its reservation instead.

use agency_sse::{LongLines, SseParser};
use agency_store::TokenUsage;
use serde_json::Value;

use crate::json::TopUsage;
use agency_config::models::Api;

/// The most of one event line kept to parse.
pub(crate) const MAX_BUFFERED: usize = 8 << 20;

/// What an answer said of its usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    pub usage: TokenUsage,
    /// The input counts were read (Anthropic's `message_start`, or the
    /// final usage): `usage`'s input side is the provider's.
    pub input_known: bool,
    /// The final usage was read: `usage` is what the provider billed.
    pub complete: bool,
}

/// Watches the bytes of one answer.
#[derive(Debug)]
pub(crate) struct UsageTap {
    api: Api,
    sse: bool,
    /// The streamed answer's events.
    parser: SseParser,
    /// The unstreamed answer's scan.
    json: TopUsage,
    seen: Seen,
}

/// Whether an event's JSON can have a `usage` key: it spells `usage`, or
/// has a `\u` escape, which could spell a key another way. Most events of
/// a stream (each text delta of an answer: hundreds in a long one) have
/// neither and are not parsed at all; parsing each into a
/// JSON tree was part of the gateway's CPU per model call.
fn may_hold_usage(data: &[u8]) -> bool {
    memchr::memmem::find(data, b"usage").is_some() || memchr::memmem::find(data, b"\\u").is_some()
}

impl UsageTap {
    pub(crate) fn new(api: Api, sse: bool) -> UsageTap {
        UsageTap {
            api,
            sse,
            parser: SseParser::new()
                .with_max_line(MAX_BUFFERED)
                .with_long_lines(LongLines::Skip),
            json: TopUsage::default(),
            seen: Seen::default(),
        }
    }

    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if !self.sse {
            self.json.feed(chunk);
            return;
        }
        let (api, seen) = (self.api, &mut self.seen);
        // Skipping over-long lines, the parser cannot fail.
        let _ = self.parser.push_with(chunk, |ev| {
            if may_hold_usage(ev.data.as_bytes()) {
                event(api, seen, ev.data.as_bytes());
            }
        });
    }

    /// The usage seen, once the answer has ended (or was cut off).
    pub(crate) fn finish(mut self) -> Seen {
        if self.sse {
            // A last line the server did not end is read as it is: if it
            // is cut, it does not parse as JSON and counts nothing.
            if let Some(ev) = self.parser.finish_with_unterminated_line()
                && may_hold_usage(ev.data.as_bytes())
            {
                event(self.api, &mut self.seen, ev.data.as_bytes());
            }
        } else if let Some(usage) = std::mem::take(&mut self.json).finish()
            && apply(self.api, &mut self.seen, &usage)
        {
            self.seen.input_known = true;
            self.seen.complete = true;
        }
        self.seen
    }
}

/// Count the usage one event's data carries, if any.
fn event(api: Api, seen: &mut Seen, data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(data.trim_ascii()) else {
        return; // `[DONE]`, or not JSON: nothing to count
    };
    // Anthropic's `message_delta` carries the final (cumulative)
    // counts, OpenAI's last chunk the only ones.
    match api {
        Api::Anthropic => match v["type"].as_str() {
            Some("message_start") => {
                let applied = apply(api, seen, &v["message"]["usage"]);
                seen.input_known |= applied;
            }
            Some("message_delta") => {
                let applied = apply(api, seen, &v["usage"]);
                seen.complete |= applied;
            }
            _ => {}
        },
        Api::OpenAi => {
            if apply(api, seen, &v["usage"]) {
                seen.input_known = true;
                seen.complete = true;
            }
        }
    }
}

/// Take the counts `usage` holds; absent ones keep their value (an
/// Anthropic `message_delta` may carry only `output_tokens`). False
/// when it is not an object (e.g. OpenAI's `"usage": null` chunks).
fn apply(api: Api, seen: &mut Seen, usage: &Value) -> bool {
    if !usage.is_object() {
        return false;
    }
    let n = |k: &str| usage[k].as_i64().filter(|n| *n >= 0);
    let u = &mut seen.usage;
    match api {
        Api::Anthropic => {
            if let Some(x) = n("input_tokens") {
                u.input_tokens = x;
            }
            if let Some(x) = n("output_tokens") {
                u.output_tokens = x;
            }
            if let Some(x) = n("cache_read_input_tokens") {
                u.cache_read_tokens = x;
            }
            if let Some(x) = n("cache_creation_input_tokens") {
                u.cache_write_tokens = x;
            }
        }
        Api::OpenAi => {
            // OpenAI counts cached input inside `prompt_tokens`;
            // Agency counts it apart, as it is priced apart.
            let cached = usage["prompt_tokens_details"]["cached_tokens"]
                .as_i64()
                .filter(|n| *n >= 0)
                .unwrap_or(0);
            if let Some(x) = n("prompt_tokens") {
                u.input_tokens = (x - cached).max(0);
                u.cache_read_tokens = cached.min(x);
            }
            if let Some(x) = n("completion_tokens") {
                u.output_tokens = x;
            }
        }
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn feed_in_pieces(tap: &mut UsageTap, text: &str, piece: usize) {
        for c in text.as_bytes().chunks(piece) {
            tap.feed(c);
        }
    }

    #[test]
    fn anthropic_stream_takes_start_and_delta_across_chunk_boundaries() {
        let text = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":5,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n",
            "event: content_block_delta\n",
            "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"usage\"}}\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n",
        );
        for piece in [1, 3, 7, 1000] {
            let mut tap = UsageTap::new(Api::Anthropic, true);
            feed_in_pieces(&mut tap, text, piece);
            let seen = tap.finish();
            assert!(seen.complete && seen.input_known, "pieces of {piece}");
            assert_eq!(
                seen.usage,
                TokenUsage {
                    input_tokens: 12,
                    output_tokens: 42,
                    cache_read_tokens: 100,
                    cache_write_tokens: 5
                },
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn a_usage_key_spelled_with_escapes_still_counts() {
        let text = concat!(
            "data: {\"type\":\"message_start\",\"message\":{\"\\u0075sage\":{\"input_tokens\":3}}}\n\n",
            "data: {\"type\":\"message_delta\",\"\\u0075\\u0073age\":{\"output_tokens\":8}}\n\n",
        );
        let mut tap = UsageTap::new(Api::Anthropic, true);
        tap.feed(text.as_bytes());
        let u = tap.finish().usage;
        assert_eq!((u.input_tokens, u.output_tokens), (3, 8));
    }

    #[test]
    fn which_events_are_parsed() {
        for (data, parsed) in [
            (
                &br#"{"type":"content_block_delta","delta":{"text":"hi\nthere"}}"#[..],
                false,
            ),
            (br#"{"type":"ping"}"#, false),
            (b"[DONE]", false),
            (
                br#"{"type":"message_delta","usage":{"output_tokens":1}}"#,
                true,
            ),
            (
                br#"{"type":"message_delta","\u0075sage":{"output_tokens":1}}"#,
                true,
            ),
            (br#"{"delta":{"text":"what usage means"}}"#, true),
        ] {
            assert_eq!(
                may_hold_usage(data),
                parsed,
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }

    /// The same stream read with every data line parsed, as before the
    /// `may_hold_usage` filter.
    fn unfiltered(api: Api, text: &str) -> Seen {
        let mut seen = Seen::default();
        for line in text.lines() {
            if let Some(data) = line.as_bytes().strip_prefix(b"data:") {
                event(api, &mut seen, data);
            }
        }
        seen
    }

    proptest::proptest! {
        /// Skipping the events that cannot hold usage never changes the
        /// count: streams of text deltas (which may say "usage" or carry
        /// escapes), usage events with plain or escaped keys, and junk.
        #[test]
        fn the_filter_counts_what_a_full_parse_counts(
            events in proptest::collection::vec(
                (0usize..6, "[a-z \\\\\"]{0,12}", 0i64..1000),
                0..12,
            ),
            openai in proptest::bool::ANY,
            piece in 1usize..40,
        ) {
            let api = if openai { Api::OpenAi } else { Api::Anthropic };
            let mut text = String::new();
            for (kind, words, n) in &events {
                let words = serde_json::to_string(words).unwrap();
                let line = match kind {
                    0 => format!(r#"{{"type":"content_block_delta","delta":{{"text":{words}}}}}"#),
                    1 => format!(r#"{{"type":"message_start","message":{{"usage":{{"input_tokens":{n}}}}}}}"#),
                    2 => format!(r#"{{"type":"message_delta","\u0075sage":{{"output_tokens":{n}}}}}"#),
                    3 => format!(r#"{{"choices":[],"usage":{{"prompt_tokens":{n},"completion_tokens":{n}}}}}"#),
                    4 => format!(r#"{{"type":"content_block_delta","delta":{{"text":"usage"}},"note":{words}}}"#),
                    _ => "[DONE]".to_owned(),
                };
                text.push_str(&format!("data: {line}\n\n"));
            }
            let mut tap = UsageTap::new(api, true);
            feed_in_pieces(&mut tap, &text, piece);
            proptest::prop_assert_eq!(tap.finish(), unfiltered(api, &text));
        }
    }

    #[test]
    fn unstreamed_answers_of_both_apis() {
        let mut tap = UsageTap::new(Api::Anthropic, false);
        tap.feed(br#"{"content":[],"usage":{"input_tokens":7,"output_tokens":3}}"#);
        assert_eq!(tap.finish().usage.output_tokens, 3);
        let mut tap = UsageTap::new(Api::OpenAi, false);
        tap.feed(br#"{"usage":{"prompt_tokens":10,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":6}}}"#);
        let seen = tap.finish();
        assert!(seen.complete);
        let u = seen.usage;
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.output_tokens),
            (4, 6, 4)
        );
    }

    #[test]
    fn openai_stream_final_usage_chunk() {
        let text = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        let mut tap = UsageTap::new(Api::OpenAi, true);
        feed_in_pieces(&mut tap, text, 5);
        let seen = tap.finish();
        assert!(seen.complete);
        let u = seen.usage;
        assert_eq!((u.input_tokens, u.output_tokens), (9, 2));
    }

    #[test]
    fn an_endless_line_is_bounded_and_the_next_line_still_counts() {
        let mut tap = UsageTap::new(Api::OpenAi, true);
        let junk = vec![b'x'; 1 << 20];
        for _ in 0..10 {
            tap.feed(&junk);
        }
        assert!(tap.parser.buffered() <= MAX_BUFFERED);
        tap.feed(b"\ndata: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n");
        assert_eq!(tap.finish().usage.output_tokens, 1);
    }

    /// Every line end the standard allows, a BOM, and a CR and its LF in
    /// two chunks: the same counts as with LF.
    #[test]
    fn cr_crlf_and_bom_streams_count_the_same() {
        let lf = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
            ": keep-alive\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n",
        );
        let want = {
            let mut tap = UsageTap::new(Api::Anthropic, true);
            tap.feed(lf.as_bytes());
            tap.finish()
        };
        assert!(want.complete && want.usage.output_tokens == 42, "{want:?}");
        let crlf = lf.replace('\n', "\r\n");
        let cr = format!("\u{feff}{}", lf.replace('\n', "\r"));
        for text in [crlf, cr] {
            for piece in [1, 2, 5, 1000] {
                let mut tap = UsageTap::new(Api::Anthropic, true);
                feed_in_pieces(&mut tap, &text, piece);
                assert_eq!(tap.finish(), want, "pieces of {piece}: {text:?}");
            }
        }
        // A last line the server did not end still counts.
        let mut tap = UsageTap::new(Api::OpenAi, true);
        tap.feed(b"data: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}");
        assert!(tap.finish().complete);
    }

    /// Issue 27 item 3: a stream cut before its final usage, or an answer
    /// cut before its end, is not complete; the counts seen are partial.
    #[test]
    fn issue27_a_cut_answer_is_not_complete() {
        let start = "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n";
        let delta = "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n";
        let mut tap = UsageTap::new(Api::Anthropic, true);
        tap.feed(format!("{start}{delta}").as_bytes());
        let seen = tap.finish();
        assert!(seen.input_known && !seen.complete, "{seen:?}");
        assert_eq!(seen.usage.output_tokens, 1);
        // OpenAI: the chunks before the usage chunk carry `"usage": null`.
        let mut tap = UsageTap::new(Api::OpenAi, true);
        tap.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n");
        assert_eq!(tap.finish(), Seen::default());
        let whole = br#"{"usage":{"input_tokens":7,"output_tokens":3}}"#;
        let mut tap = UsageTap::new(Api::Anthropic, false);
        tap.feed(&whole[..whole.len() - 1]);
        assert!(!tap.finish().complete);
    }
}
