//! Capturing an agent's stdout and stderr while it runs, bounded: the first
//! `head` bytes and the last `tail` bytes are kept, what lies between is
//! cut and the cut marked (with its size). A runaway agent printing
//! gigabytes costs at most `head + tail` bytes of memory and storage. At
//! exit the capture is stored with the run record (`agency logs RUN`);
//! while the run lives, followers (`agency logs RUN --follow`) read the
//! same buffer ([`LiveOutput`]), each at its own offset, so a slow one
//! costs no memory: it falls behind and is told what it missed.
//!
//! The agent's output is untrusted and may echo what it was given: the
//! run's own token and every configured secret are replaced by
//! `[redacted]` as the output arrives ([`StreamRedactor`], which holds back
//! only what could be the start of a secret), so neither the buffer nor a
//! follower ever sees one; the stored log is redacted again at the end.
//! Cuts fall on line boundaries.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::io::{PipeReader, PipeWriter, Read};

use agency_config::mcp_servers::McpServers;
use agency_config::secrets::ExposeSecret;
use tokio::sync::watch;

/// Strings shorter than this are not redacted: very short values would
/// redact ordinary words, and are not worth hiding from the user who
/// configured them either.
const MIN_REDACTED: usize = 4;

/// The bounded buffer of one run's output.
#[derive(Debug)]
pub struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Bytes dropped from the front of the tail so far.
    cut: u64,
    head_max: usize,
    tail_max: usize,
}

impl Capture {
    pub fn new(head_max: usize, tail_max: usize) -> Capture {
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            cut: 0,
            head_max,
            tail_max,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        let room = self.head_max.saturating_sub(self.head.len());
        let (to_head, rest) = chunk.split_at(room.min(chunk.len()));
        self.head.extend_from_slice(to_head);
        if rest.len() >= self.tail_max {
            self.cut += (self.tail.len() + rest.len() - self.tail_max) as u64;
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - self.tail_max..]);
            return;
        }
        self.tail.extend(rest);
        let over = self.tail.len().saturating_sub(self.tail_max);
        if over > 0 {
            self.tail.drain(..over);
            self.cut += over as u64;
        }
    }

    /// The kept output, the cut marked, with `redact`ed strings replaced.
    pub fn finish(&self, redact: &[&str]) -> Vec<u8> {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if self.cut == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return redacted(all, redact);
        }
        // Cut on line boundaries: the head ends after its last newline,
        // the tail starts after its first one (unless a line is longer
        // than the whole part, which is then kept as it is).
        let head_end = self
            .head
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(self.head.len(), |i| i + 1);
        let tail_start = tail.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
        let cut = self.cut + (self.head.len() - head_end) as u64 + tail_start as u64;
        let mut out = self.head[..head_end].to_vec();
        if !out.is_empty() && !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        out.extend_from_slice(
            format!("[agency: {cut} bytes of output cut here; the first and the last part of the output are kept]\n")
                .as_bytes(),
        );
        out.extend_from_slice(&tail[tail_start..]);
        redacted(out, redact)
    }

    /// Bytes of the output from offset `from` (counted from the first
    /// byte the agent wrote), at most `max` of them: what a follower reads
    /// next. Offsets past the head and before the tail were cut.
    fn read_at(&self, from: u64, max: usize) -> OutputPiece {
        let head = self.head.len() as u64;
        let tail_start = head + self.cut;
        let total = tail_start + self.tail.len() as u64;
        if from < head {
            let end = (from + max as u64).min(head);
            return OutputPiece::Bytes(self.head[from as usize..end as usize].to_vec());
        }
        if from < tail_start {
            return OutputPiece::Skipped(tail_start - from);
        }
        if from < total {
            let start = (from - tail_start) as usize;
            let end = (start + max).min(self.tail.len());
            return OutputPiece::Bytes(self.tail.range(start..end).copied().collect());
        }
        OutputPiece::Nothing
    }
}

/// What a follower of a run's output reads next ([`LiveOutput::read`]).
#[derive(Debug, PartialEq, Eq)]
pub enum OutputPiece {
    /// The next bytes (already redacted).
    Bytes(Vec<u8>),
    /// This many bytes were cut before the follower read them (it fell
    /// more than the kept tail behind).
    Skipped(u64),
    /// Nothing new yet.
    Nothing,
}

fn redacted(mut bytes: Vec<u8>, redact: &[&str]) -> Vec<u8> {
    for needle in redact.iter().map(|s| s.as_bytes()) {
        if needle.len() < MIN_REDACTED {
            continue;
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i..].starts_with(needle) {
                out.extend_from_slice(b"[redacted]");
                i += needle.len();
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        bytes = out;
    }
    bytes
}

/// The strings cut from one run's output: its token and every secret
/// `agency.toml` configures, read from the registry each time (borrowed:
/// no copy of a configured secret outlives the registry).
#[derive(Clone)]
pub struct Secrets {
    servers: Arc<McpServers>,
    token: String,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token and the secrets are credentials: never in a log line.
        f.write_str("Secrets(..)")
    }
}

impl Secrets {
    pub fn new(servers: Arc<McpServers>, token: String) -> Secrets {
        Secrets { servers, token }
    }

    fn with<R>(&self, f: impl FnOnce(&[&str]) -> R) -> R {
        let list: Vec<&str> = self
            .servers
            .secret_values()
            .map(ExposeSecret::expose_secret)
            .chain([self.token.as_str()])
            .collect();
        f(&list)
    }
}

/// Redaction of a stream that arrives in chunks: a secret may be split
/// between two of them, so the end of what came so far is held back when,
/// and only as far as, it could be the start of a secret; everything else
/// goes on at once (a follower sees a line as soon as it is written).
#[derive(Debug, Default)]
pub struct StreamRedactor {
    pending: Vec<u8>,
}

impl StreamRedactor {
    /// The redacted bytes that can be released after `chunk`.
    pub fn push(&mut self, chunk: &[u8], redact: &[&str]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let mut all = redacted(std::mem::take(&mut self.pending), redact);
        let needles = || redact.iter().filter(|n| n.len() >= MIN_REDACTED);
        let longest = needles().map(|n| n.len()).max().unwrap_or(0);
        // The earliest position from which the rest is a proper prefix
        // of a secret: from there on, the next chunk may complete it.
        let from = all.len().saturating_sub(longest.saturating_sub(1));
        let hold = (from..all.len()).find(|&i| {
            needles().any(|n| n.len() > all.len() - i && n.as_bytes().starts_with(&all[i..]))
        });
        if let Some(i) = hold {
            self.pending = all.split_off(i);
        }
        all
    }

    /// What is still held back, redacted: the output has ended.
    pub fn finish(&mut self, redact: &[&str]) -> Vec<u8> {
        redacted(std::mem::take(&mut self.pending), redact)
    }
}

/// What the capture thread, the run's end and the followers share.
#[derive(Debug)]
struct Shared {
    capture: Capture,
    redactor: StreamRedactor,
    /// No more output comes (the pipe ended, or the run's end stopped
    /// waiting for it).
    closed: bool,
}

impl Shared {
    fn push(&mut self, chunk: &[u8], secrets: &Secrets) {
        // A process that escaped the group may write after the run's end
        // stopped waiting: the record is made, nothing reads this.
        if self.closed {
            return;
        }
        let out = secrets.with(|r| self.redactor.push(chunk, r));
        self.capture.push(&out);
    }

    fn close(&mut self, secrets: &Secrets) {
        if !self.closed {
            let out = secrets.with(|r| self.redactor.finish(r));
            self.capture.push(&out);
            self.closed = true;
        }
    }
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The capture of a running agent: one pipe that is both its stdout and
/// its stderr (so lines keep the order they were written in, as on a
/// terminal), read on a thread of its own into one bounded buffer.
#[derive(Debug)]
pub struct LogCapture {
    shared: Arc<Mutex<Shared>>,
    /// Bumped after each chunk and at the end, for followers.
    changed: Arc<watch::Sender<u64>>,
    secrets: Secrets,
    done: tokio::sync::oneshot::Receiver<()>,
}

/// The pipe an agent writes to: give `writer` (and a clone) to the child
/// as stdout and stderr, then start the capture on `reader`.
pub fn pipe() -> std::io::Result<(PipeReader, PipeWriter, PipeWriter)> {
    let (reader, writer) = std::io::pipe()?;
    let writer2 = writer.try_clone()?;
    Ok((reader, writer, writer2))
}

impl LogCapture {
    pub fn start(
        mut reader: PipeReader,
        head_max: usize,
        tail_max: usize,
        secrets: Secrets,
    ) -> LogCapture {
        let shared = Arc::new(Mutex::new(Shared {
            capture: Capture::new(head_max, tail_max),
            redactor: StreamRedactor::default(),
            closed: false,
        }));
        let changed = Arc::new(watch::Sender::new(0u64));
        let (tx, done) = tokio::sync::oneshot::channel();
        let (buf, bump, redact) = (shared.clone(), changed.clone(), secrets.clone());
        // A plain thread: the read blocks until the last holder of the
        // pipe's write end (the agent, its children) is gone.
        let _ = std::thread::Builder::new()
            .name("agent-log".to_owned())
            .spawn(move || {
                let mut chunk = vec![0u8; 16 << 10];
                loop {
                    match reader.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => {
                            lock(&buf).push(&chunk[..n], &redact);
                            bump.send_modify(|n| *n += 1);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                lock(&buf).close(&redact);
                bump.send_modify(|n| *n += 1);
                let _ = tx.send(());
            });
        LogCapture {
            shared,
            changed,
            secrets,
            done,
        }
    }

    /// A follower's view of the output, from its first byte.
    pub fn follow(&self) -> LiveOutput {
        LiveOutput {
            shared: self.shared.clone(),
            changed: self.changed.subscribe(),
        }
    }

    /// After the agent's process group is gone: wait (up to `wait`) for
    /// the pipe to drain, then return what was kept, redacted once more
    /// with the secrets configured now. A process that escaped the group
    /// may hold the pipe open; it does not hold up the run's end.
    pub async fn finish(self, wait: Duration) -> Vec<u8> {
        let _ = tokio::time::timeout(wait, self.done).await;
        let out = {
            let mut shared = lock(&self.shared);
            shared.close(&self.secrets);
            self.secrets.with(|r| shared.capture.finish(r))
        };
        self.changed.send_modify(|n| *n += 1);
        out
    }
}

/// A live run's output as its followers read it: the capture's bounded
/// buffer, shared, each follower at its own offset.
#[derive(Debug, Clone)]
pub struct LiveOutput {
    shared: Arc<Mutex<Shared>>,
    changed: watch::Receiver<u64>,
}

impl LiveOutput {
    /// What follows offset `from` (at most `max` bytes), and whether the
    /// output has ended (then `Nothing` means nothing more will come).
    pub fn read(&self, from: u64, max: usize) -> (OutputPiece, bool) {
        let shared = lock(&self.shared);
        (shared.capture.read_at(from, max), shared.closed)
    }

    /// Changes each time output arrives and when it ends.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.clone()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = Capture::new(16, 32);
        c.push(b"hello\n");
        c.push(b"world, this line is longer than the head\n");
        assert_eq!(
            text(c.finish(&[])),
            "hello\nworld, this line is longer than the head\n"
        );
    }

    #[test]
    fn issue9_item16_output_is_bounded_head_and_tail_with_the_cut_marked() {
        let mut c = Capture::new(64, 128);
        let lines: Vec<String> = (0..10_000).map(|i| format!("line {i:05}\n")).collect();
        let total: usize = lines.iter().map(String::len).sum();
        for l in &lines {
            c.push(l.as_bytes());
        }
        let out = text(c.finish(&[]));
        assert!(out.len() <= 64 + 128 + 120, "bounded: {} bytes", out.len());
        assert!(out.starts_with("line 00000\nline 00001\n"));
        assert!(out.ends_with("line 09999\n"));
        // Whole lines only, and the marker says exactly how much is gone.
        let marker = out.lines().find(|l| l.starts_with("[agency: ")).unwrap();
        let cut: usize = marker["[agency: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let kept: usize = out
            .lines()
            .filter(|l| l.starts_with("line "))
            .map(|l| l.len() + 1)
            .sum();
        assert_eq!(kept + cut, total);
        assert!(out.lines().all(|l| l.len() == 10 || l == marker));
    }

    #[test]
    fn a_chunk_larger_than_the_tail_keeps_its_end() {
        let mut c = Capture::new(4, 8);
        c.push(b"abcdefghijklmnopqrstuvwxyz");
        let out = text(c.finish(&[]));
        assert!(out.starts_with("abcd\n[agency: 14 bytes"), "{out}");
        assert!(out.ends_with("stuvwxyz"), "{out}");
    }

    #[test]
    fn tokens_and_secrets_are_redacted() {
        let mut c = Capture::new(1024, 1024);
        c.push(b"token=tok-123456 secret s3cr3t-value and s3cr3t-value again; ab\n");
        assert_eq!(
            text(c.finish(&["tok-123456", "s3cr3t-value", "ab"])),
            "token=[redacted] secret [redacted] and [redacted] again; ab\n"
        );
    }

    /// Every way of cutting a stream into two chunks leaves no secret,
    /// not even a part of one, in what is released.
    #[test]
    fn issue30_a_secret_split_between_chunks_is_still_redacted() {
        let secret = "tok-1234567890";
        let input = format!("line one\nmy token is {secret}, twice {secret}\nbye\n");
        let bytes = input.as_bytes();
        for a in 0..=bytes.len() {
            for b in a..=bytes.len() {
                let mut r = StreamRedactor::default();
                let mut out = Vec::new();
                for chunk in [&bytes[..a], &bytes[a..b], &bytes[b..]] {
                    let released = r.push(chunk, &[secret]);
                    assert!(
                        !String::from_utf8_lossy(&released).contains("tok-1234"),
                        "{a}/{b}"
                    );
                    out.extend(released);
                }
                out.extend(r.finish(&[secret]));
                assert_eq!(
                    text(out),
                    "line one\nmy token is [redacted], twice [redacted]\nbye\n",
                    "{a}/{b}"
                );
            }
        }
    }

    /// Only what could start a secret waits: a follower sees a line as
    /// soon as it is written.
    #[test]
    fn issue30_output_is_released_at_once_unless_it_could_start_a_secret() {
        let mut r = StreamRedactor::default();
        assert_eq!(r.push(b"hello\n", &["tok-123456"]), b"hello\n");
        assert_eq!(r.push(b"to", &["tok-123456"]), b"");
        assert_eq!(r.push(b"day\n", &["tok-123456"]), b"today\n");
        assert_eq!(r.push(b"x tok-12", &["tok-123456"]), b"x ");
        assert_eq!(r.finish(&["tok-123456"]), b"tok-12");
    }

    #[test]
    fn issue30_a_follower_reads_by_offset_and_is_told_what_was_cut() {
        let mut c = Capture::new(8, 16);
        c.push(b"0123456789");
        assert_eq!(c.read_at(0, 4), OutputPiece::Bytes(b"0123".to_vec()));
        assert_eq!(c.read_at(4, 100), OutputPiece::Bytes(b"4567".to_vec()));
        assert_eq!(c.read_at(8, 100), OutputPiece::Bytes(b"89".to_vec()));
        assert_eq!(c.read_at(10, 100), OutputPiece::Nothing);
        c.push(b"abcdefghijklmnopqrstuvwxyz");
        // 36 bytes: the head 0..8, the tail 20..36, 12 cut.
        assert_eq!(c.read_at(10, 100), OutputPiece::Skipped(10));
        assert_eq!(
            c.read_at(20, 100),
            OutputPiece::Bytes(b"klmnopqrstuvwxyz".to_vec())
        );
        assert_eq!(c.read_at(30, 3), OutputPiece::Bytes(b"uvw".to_vec()));
        assert_eq!(c.read_at(36, 100), OutputPiece::Nothing);
    }

    /// A real pipe: a follower sees output while the writer still holds
    /// the pipe, never the token, and then the end.
    #[tokio::test]
    async fn issue30_a_live_capture_is_followed_redacted_until_it_ends() {
        let (reader, mut writer, other) = pipe().unwrap();
        drop(other);
        let servers = Arc::new(McpServers::new(
            Default::default(),
            agency_config::secrets::Secrets::default(),
        ));
        let token = "agency_token_abcdef0123456789".to_owned();
        let cap = LogCapture::start(
            reader,
            1 << 10,
            1 << 12,
            Secrets::new(servers, token.clone()),
        );
        let live = cap.follow();
        let mut changes = live.changes();
        use std::io::Write;
        writeln!(writer, "first line, token {token}").unwrap();
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains("first line") {
            changes.changed().await.unwrap();
            if let (OutputPiece::Bytes(b), closed) = live.read(seen.len() as u64, 1 << 10) {
                assert!(!closed);
                seen.extend(b);
            }
        }
        assert_eq!(text(seen.clone()), "first line, token [redacted]\n");
        writeln!(writer, "last").unwrap();
        drop(writer);
        let stored = cap.finish(Duration::from_secs(10)).await;
        assert_eq!(text(stored), "first line, token [redacted]\nlast\n");
        let (piece, closed) = live.read(seen.len() as u64, 1 << 10);
        assert_eq!(piece, OutputPiece::Bytes(b"last\n".to_vec()));
        assert!(closed);
    }
}
