//! A small Server-Sent Events parser: bytes in (in whatever pieces the
//! network delivers them), events out. Pure and synchronous so it can be
//! tested on every awkward split; the model clients feed it reqwest's byte
//! stream.
//!
//! It follows the WHATWG event-stream rules that matter for LLM APIs:
//! lines end in LF, CRLF or CR (a CR at the end of one chunk and an LF at
//! the start of the next are one line end); `:` starts a comment; one
//! space after the field's colon is dropped; several `data:` lines join
//! with `\n`; a blank line dispatches the event; a leading BOM is ignored.
//! Bytes are kept until a whole line is there, so a UTF-8 character split
//! between chunks is decoded intact.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the server sent none (OpenAI style).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The longest line accepted: far above any real event, low enough that a
/// server streaming garbage without newlines cannot exhaust memory.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in CR: an LF opening the next one belongs
    /// to that line end.
    after_cr: bool,
    started: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feed the next chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, String> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(tail) = rest.strip_prefix(b"\n") {
                rest = tail;
            }
        }
        while let Some(i) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..i]);
            let is_cr = rest[i] == b'\r';
            rest = &rest[i + 1..];
            if is_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(ev) = self.line_done(&line) {
                out.push(ev);
            }
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > MAX_LINE_BYTES {
            return Err(format!(
                "an event-stream line exceeds {MAX_LINE_BYTES} bytes"
            ));
        }
        Ok(out)
    }

    /// The stream ended. An event whose lines all ended but which lacks
    /// the closing blank line is still dispatched (some servers end the
    /// body right after `data: [DONE]\n`); a final line cut off before its
    /// line end is dropped, since it may be a truncated fragment.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let cut = !std::mem::take(&mut self.line).is_empty();
        let ev = self.dispatch();
        match ev {
            Some(ev) if !cut => vec![ev],
            _ => Vec::new(),
        }
    }

    fn line_done(&mut self, raw: &[u8]) -> Option<SseEvent> {
        let mut raw = raw;
        if !self.started {
            self.started = true;
            if let Some(tail) = raw.strip_prefix("\u{feff}".as_bytes()) {
                raw = tail;
            }
        }
        if raw.is_empty() {
            return self.dispatch();
        }
        let line = String::from_utf8_lossy(raw);
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id` and `retry` matter for reconnecting EventSource clients;
            // a model call is never resumed, so they are ignored.
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        let had_data = std::mem::replace(&mut self.has_data, false);
        // The standard dispatches only events with data; an `event:` line
        // alone is kept too because nothing is lost by reporting it and
        // some servers send bare `event: ping`.
        if had_data || !event.is_empty() {
            Some(SseEvent { event, data })
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    /// Parse `input` fed in pieces of `size` bytes.
    fn parse_split(input: &[u8], size: usize) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for chunk in input.chunks(size) {
            out.extend(p.push(chunk).unwrap());
        }
        out.extend(p.finish());
        out
    }

    fn parse_every_split(input: &str) -> Vec<SseEvent> {
        let whole = parse_split(input.as_bytes(), input.len().max(1));
        for size in 1..input.len().max(2) {
            assert_eq!(
                parse_split(input.as_bytes(), size),
                whole,
                "split at {size} differs"
            );
        }
        whole
    }

    #[test]
    fn named_events_and_data() {
        let got =
            parse_every_split("event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {}\n\n");
        assert_eq!(
            got,
            vec![ev("message_start", "{\"a\":1}"), ev("ping", "{}")]
        );
    }

    #[test]
    fn crlf_cr_and_lf_line_ends() {
        let got = parse_every_split("data: a\r\n\r\ndata: b\r\rdata: c\n\n");
        assert_eq!(got, vec![ev("", "a"), ev("", "b"), ev("", "c")]);
    }

    #[test]
    fn comments_multiline_data_and_no_space() {
        let got =
            parse_every_split(": keep-alive\n\ndata:one\ndata:  two\ndata\nid: 7\nretry: 10\n\n");
        assert_eq!(got, vec![ev("", "one\n two\n")]);
    }

    #[test]
    fn utf8_split_across_chunks_and_bom() {
        let input = "\u{feff}data: héllo → ✓\n\n";
        let got = parse_every_split(input);
        assert_eq!(got, vec![ev("", "héllo → ✓")]);
    }

    #[test]
    fn a_cut_line_is_dropped_and_blank_lines_dispatch_nothing() {
        let got = parse_every_split("\n\n\ndata: [DONE]\n\ndata: partial");
        assert_eq!(got, vec![ev("", "[DONE]")]);
        // Whole lines without the closing blank line still count.
        let got = parse_every_split("data: a\n\ndata: [DONE]\n");
        assert_eq!(got, vec![ev("", "a"), ev("", "[DONE]")]);
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut p = SseParser::new();
        let big = vec![b'x'; MAX_LINE_BYTES + 1];
        assert!(p.push(&big).is_err());
    }
}
