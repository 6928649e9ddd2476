//! The one Server-Sent-Events parser of Agency: bytes in (in whatever
//! pieces the network delivers them), events out. Every event stream
//! Agency reads goes through it: the built-in agent's model answers, the
//! stdio bridge's MCP answers, the MCP proxy's check of an upstream
//! server's answer, the model gateway's usage tap and the benchmarks'
//! plain MCP client.
//!
//! It follows the WHATWG event-stream rules: lines end in LF, CRLF or CR
//! (a CR at the end of one chunk and an LF at the start of the next are
//! one line end); a leading BOM is ignored; `:` starts a comment; one
//! space after the field's colon is dropped, and a line without a colon is
//! a field with an empty value; several `data:` lines join with `\n`; a
//! blank line dispatches the event; unknown fields are ignored. Bytes are
//! kept until a whole line is there, so a UTF-8 character split between
//! chunks is decoded intact, and at most [`SseParser::with_max_line`]
//! bytes of one line are kept, so a server streaming without line ends
//! cannot exhaust memory: the line is refused ([`SseError`]) or, for a
//! reader that must go on, skipped ([`LongLines::Skip`]).
//!
//! Why not `sse-stream` (already in the tree through rmcp): it parses only
//! inside an async `Stream` over an HTTP body (its line parser is private,
//! so neither the blocking bridge nor the gateway's chunk tap can use it),
//! keeps an unfinished line without any bound, and fails the stream on a
//! line the standard accepts (a field without a colon, an unknown field, a
//! repeated `event:`).
//!
//! ```
//! let mut p = agency_sse::SseParser::new();
//! let mut events = p.push(b"event: ping\r\ndata: {\"a\"").unwrap();
//! events.extend(p.push(b":1}\r\n\r\n").unwrap());
//! assert_eq!(events[0].event, "ping");
//! assert_eq!(events[0].data, "{\"a\":1}");
//! ```

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the server sent none (OpenAI style).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// This event's own `id:` field, if it had one (one holding a NUL is
    /// ignored, as the standard says). The standard's "last event ID"
    /// carries over between events; a client that reconnects keeps it.
    pub id: Option<String>,
    /// The `retry:` field, if it had one made only of ASCII digits.
    pub retry: Option<u64>,
}

/// Why a stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A line grew past the cap without a line end ([`LongLines::Fail`]).
    #[error("an event-stream line exceeds {max} bytes")]
    LineTooLong { max: usize },
}

/// What to do with a line longer than the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LongLines {
    /// Fail the stream with [`SseError::LineTooLong`] (a client that needs
    /// every event: a lost line would be a wrong answer).
    #[default]
    Fail,
    /// Drop the line and go on with the next one (a tap that only looks
    /// at the stream and must never hold it up).
    Skip,
}

/// The default cap on one line: far above any real event, low enough that
/// a server streaming garbage without line ends cannot exhaust memory.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;

/// A line buffer that grew past this is given back to the allocator once
/// its line is done, rather than kept at its largest size.
const KEEP_CAPACITY: usize = 64 * 1024;

/// The parser's state between chunks.
#[derive(Debug)]
pub struct SseParser {
    max_line: usize,
    long_lines: LongLines,
    /// The current line, while its end has not arrived.
    line: Vec<u8>,
    /// The current line went over the cap ([`LongLines::Skip`]): its
    /// bytes are dropped until its end.
    skipping: bool,
    skipped: u64,
    /// The previous chunk ended in CR: an LF opening the next one belongs
    /// to that line end.
    after_cr: bool,
    started: bool,
    /// The event being read; its buffers are reused for the next one.
    pending: SseEvent,
    has_data: bool,
}

impl Default for SseParser {
    fn default() -> SseParser {
        SseParser {
            max_line: DEFAULT_MAX_LINE,
            long_lines: LongLines::Fail,
            line: Vec::new(),
            skipping: false,
            skipped: 0,
            after_cr: false,
            started: false,
            pending: SseEvent::default(),
            has_data: false,
        }
    }
}

impl SseParser {
    /// A parser with the [`DEFAULT_MAX_LINE`] cap that fails on a longer
    /// line.
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Keep at most `bytes` of one line (its line end not counted).
    pub fn with_max_line(mut self, bytes: usize) -> SseParser {
        self.max_line = bytes;
        self
    }

    /// What to do with a line over the cap.
    pub fn with_long_lines(mut self, long_lines: LongLines) -> SseParser {
        self.long_lines = long_lines;
        self
    }

    /// Bytes of the current unfinished line held (at most the cap).
    pub fn buffered(&self) -> usize {
        self.line.len()
    }

    /// Lines dropped for being over the cap ([`LongLines::Skip`]).
    pub fn skipped_lines(&self) -> u64 {
        self.skipped
    }

    /// Feed the next chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut out = Vec::new();
        self.push_with(chunk, |ev| out.push(ev.clone()))?;
        Ok(out)
    }

    /// Feed the next chunk, showing each event it completes to `on_event`
    /// as it completes. Nothing is allocated per event (the parser's
    /// buffers are reused), for a reader that looks at every event and
    /// keeps few. With [`LongLines::Skip`] it never fails.
    pub fn push_with(
        &mut self,
        chunk: &[u8],
        mut on_event: impl FnMut(&SseEvent),
    ) -> Result<(), SseError> {
        let mut rest = chunk;
        // An empty chunk (a network read of nothing) must not end the
        // wait for the LF of a CRLF split across chunks.
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if let Some(tail) = rest.strip_prefix(b"\n") {
                rest = tail;
            }
        }
        while let Some(i) = memchr::memchr2(b'\n', b'\r', rest) {
            let (segment, end) = (&rest[..i], rest[i]);
            rest = &rest[i + 1..];
            if end == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            if self.skipping {
                self.skipping = false;
                continue;
            }
            // A line wholly inside this chunk is read where it lies.
            if self.line.is_empty() {
                if !self.over_cap(segment.len())? {
                    self.line_done(segment, &mut on_event);
                }
                continue;
            }
            if self.over_cap(self.line.len() + segment.len())? {
                self.drop_line();
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            line.extend_from_slice(segment);
            self.line_done(&line, &mut on_event);
            line.clear();
            if line.capacity() <= KEEP_CAPACITY {
                self.line = line;
            }
        }
        if !self.skipping && !rest.is_empty() {
            if self.over_cap(self.line.len() + rest.len())? {
                self.drop_line();
                self.skipping = true;
            } else {
                self.line.extend_from_slice(rest);
            }
        }
        Ok(())
    }

    /// The stream ended. An event whose lines all ended but which lacks
    /// the closing blank line is still dispatched (some servers end the
    /// body right after `data: [DONE]\n`); a final line cut off before its
    /// line end is dropped, since it may be a truncated fragment.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let cut = !std::mem::take(&mut self.line).is_empty() || self.skipping;
        self.skipping = false;
        let ev = self.take_event();
        if cut { None } else { ev }
    }

    /// The stream ended, and a final line without its line end counts as
    /// a whole line: for a body read to its end, whose server closed the
    /// connection right after its last write (the response a client waits
    /// for would be lost otherwise). The event is dispatched as by
    /// [`finish`](Self::finish).
    pub fn finish_with_unterminated_line(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() && !self.skipping {
            let mut got = None;
            self.line_done(&line, &mut |ev| got = Some(ev.clone()));
            if got.is_some() {
                return got;
            }
        }
        self.skipping = false;
        self.take_event()
    }

    /// Whether a line of `len` bytes is over the cap: an error, or true
    /// (skip it) with [`LongLines::Skip`].
    fn over_cap(&mut self, len: usize) -> Result<bool, SseError> {
        if len <= self.max_line {
            return Ok(false);
        }
        match self.long_lines {
            LongLines::Fail => Err(SseError::LineTooLong { max: self.max_line }),
            LongLines::Skip => {
                self.skipped += 1;
                Ok(true)
            }
        }
    }

    /// Forget the current line (its memory too: it was over the cap).
    fn drop_line(&mut self) {
        self.line = Vec::new();
        self.started = true;
    }

    fn line_done(&mut self, raw: &[u8], on_event: &mut impl FnMut(&SseEvent)) {
        let mut raw = raw;
        if !self.started {
            self.started = true;
            if let Some(tail) = raw.strip_prefix("\u{feff}".as_bytes()) {
                raw = tail;
            }
        }
        if raw.is_empty() {
            if self.has_event() {
                on_event(&self.pending);
            }
            self.clear_event();
            return;
        }
        if raw[0] == b':' {
            return;
        }
        let line = String::from_utf8_lossy(raw);
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.pending.event),
            "data" => {
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.pending.id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                // Digits past u64 are a wait longer than anyone waits.
                self.pending.retry = Some(value.parse().unwrap_or(u64::MAX));
            }
            _ => {}
        }
    }

    /// Whether the event read so far is dispatched. The standard
    /// dispatches only events with data; an event with only other fields
    /// is reported too, because nothing is lost by reporting it, some
    /// servers send bare `event: ping`, and a proxy re-sending the stream
    /// keeps an `id:`-only priming event.
    fn has_event(&self) -> bool {
        let p = &self.pending;
        self.has_data || !p.event.is_empty() || p.id.is_some() || p.retry.is_some()
    }

    /// Start the next event, keeping the buffers unless one grew large.
    fn clear_event(&mut self) {
        let p = &mut self.pending;
        for s in [&mut p.event, &mut p.data] {
            if s.capacity() > KEEP_CAPACITY {
                *s = String::new();
            } else {
                s.clear();
            }
        }
        p.id = None;
        p.retry = None;
        self.has_data = false;
    }

    /// The event read so far, if it is dispatched, and start the next.
    fn take_event(&mut self) -> Option<SseEvent> {
        let ev = self.has_event().then(|| std::mem::take(&mut self.pending));
        self.clear_event();
        ev
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
            ..SseEvent::default()
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
        // A CR ending one chunk and the LF opening the next: one line end.
        let mut p = SseParser::new();
        assert!(p.push(b"data: x\r").unwrap().is_empty());
        assert_eq!(p.push(b"\n\r").unwrap(), vec![ev("", "x")]);
        assert_eq!(p.push(b"\ndata: y\n\n").unwrap(), vec![ev("", "y")]);
    }

    #[test]
    fn comments_multiline_data_no_space_and_unknown_fields() {
        let got = parse_every_split(
            ": keep-alive\n\ndata:one\ndata:  two\ndata\nfoo: bar\nevent: a\nevent: b\n\n",
        );
        assert_eq!(got, vec![ev("b", "one\n two\n")]);
    }

    #[test]
    fn id_and_retry_belong_to_their_event() {
        let got = parse_every_split(
            "id: 0\nretry: 1000\n\nid: 7\ndata: x\n\nid: a\0b\nretry: 5s\ndata: y\n\n",
        );
        let first = SseEvent {
            id: Some("0".into()),
            retry: Some(1000),
            ..SseEvent::default()
        };
        let second = SseEvent {
            id: Some("7".into()),
            ..ev("", "x")
        };
        assert_eq!(got, vec![first, second, ev("", "y")]);
    }

    #[test]
    fn utf8_split_across_chunks_and_bom() {
        let input = "\u{feff}data: héllo → ✓\n\n";
        let got = parse_every_split(input);
        assert_eq!(got, vec![ev("", "héllo → ✓")]);
        // Only at the start of the stream.
        let got = parse_every_split("\n\u{feff}data: x\n\n");
        assert!(got.is_empty(), "{got:?}");
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
    fn an_unterminated_last_line_can_count() {
        let mut p = SseParser::new();
        assert!(p.push(b"data: {\"a\":\ndata: 1}").unwrap().is_empty());
        assert_eq!(
            p.finish_with_unterminated_line(),
            Some(ev("", "{\"a\":\n1}"))
        );
        // A final blank line without its end dispatches nothing new.
        let mut p = SseParser::new();
        p.push(b"data: x\n\n").unwrap();
        assert_eq!(p.finish_with_unterminated_line(), None);
        // A final comment leaves the event before it whole.
        let mut p = SseParser::new();
        p.push(b"data: x\n: bye").unwrap();
        assert_eq!(p.finish_with_unterminated_line(), Some(ev("", "x")));
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut p = SseParser::new();
        let big = vec![b'x'; DEFAULT_MAX_LINE + 1];
        assert_eq!(
            p.push(&big),
            Err(SseError::LineTooLong {
                max: DEFAULT_MAX_LINE
            })
        );
        // Also when it ends inside the chunk, and when it comes in pieces.
        let mut p = SseParser::new().with_max_line(8);
        assert!(p.push(b"data: 123456\n").is_err());
        let mut p = SseParser::new().with_max_line(8);
        assert!(p.push(b"data: 12").is_ok());
        assert!(p.push(b"3").is_err());
        let mut p = SseParser::new().with_max_line(8);
        assert_eq!(p.push(b"data: 12\n\n").unwrap(), vec![ev("", "12")]);
    }

    #[test]
    fn a_long_line_can_be_skipped_and_the_next_one_still_counts() {
        let mut p = SseParser::new()
            .with_max_line(16)
            .with_long_lines(LongLines::Skip);
        let mut got = Vec::new();
        for _ in 0..10 {
            got.extend(p.push(&[b'x'; 7]).unwrap());
            assert!(p.buffered() <= 16);
        }
        got.extend(p.push(b"\ndata: ok\n\ndata: ").unwrap());
        got.extend(p.push(&[b'y'; 40]).unwrap());
        got.extend(p.push(b"\r").unwrap());
        got.extend(p.push(b"\ndata: 0123456789\r\n\n").unwrap());
        assert_eq!(p.finish(), None);
        assert_eq!(got, vec![ev("", "ok"), ev("", "0123456789")]);
        assert_eq!(p.skipped_lines(), 2);
        // Over the cap inside one chunk, too.
        let mut p = SseParser::new()
            .with_max_line(6)
            .with_long_lines(LongLines::Skip);
        assert_eq!(
            p.push(b"data: long\ndata:a\n\n").unwrap(),
            vec![ev("", "a")]
        );
        // A skipped last line is not taken at the end.
        let mut p = SseParser::new()
            .with_max_line(6)
            .with_long_lines(LongLines::Skip);
        p.push(b"data:a\ndata: long").unwrap();
        assert_eq!(p.finish_with_unterminated_line(), Some(ev("", "a")));
    }

    /// Found by `chunking_never_changes_the_events` in CI: a CR ending one
    /// chunk, then an empty chunk, then the LF made a second line end (a
    /// blank line that dispatched an extra empty event).
    #[test]
    fn an_empty_chunk_between_cr_and_lf_keeps_one_line_end() {
        let mut p = SseParser::new();
        let mut got = p.push(b"data: a\r").unwrap();
        got.extend(p.push(b"").unwrap());
        got.extend(p.push(b"\n").unwrap());
        assert!(got.is_empty(), "{got:?}");
        got.extend(p.push(b"\n").unwrap());
        assert_eq!(got, vec![ev("", "a")]);
        assert_eq!(p.finish(), None);
    }

    proptest::proptest! {
        /// However the stream is cut into chunks, the same events come out.
        #[test]
        fn chunking_never_changes_the_events(
            lines in proptest::collection::vec(
                ("(data|event|id|retry|:|x)?", "[: a-é\r]{0,6}", "(\n|\r|\r\n)"),
                0..12,
            ),
            cuts in proptest::collection::vec(0usize..64, 0..8),
        ) {
            let text: String = lines.iter().map(|(f, v, e)| format!("{f}{v}{e}")).collect();
            let bytes = text.as_bytes();
            let whole = parse_split(bytes, bytes.len().max(1));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut p = SseParser::new();
            let mut got = Vec::new();
            let mut from = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                got.extend(p.push(&bytes[from..c]).unwrap());
                from = c;
            }
            got.extend(p.finish());
            proptest::prop_assert_eq!(got, whole);
        }
    }
}
