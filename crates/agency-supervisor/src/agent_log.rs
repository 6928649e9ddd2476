//! Capturing an agent's stdout and stderr while it runs, bounded: the first
//! `head` bytes and the last `tail` bytes are kept, what lies between is
//! cut and the cut marked (with its size). A runaway agent printing
//! gigabytes costs at most `head + tail` bytes of memory and storage. At
//! exit the capture is stored with the run record (`agency logs RUN`).
//!
//! The agent's output is untrusted and may echo what it was given: before
//! it is stored, the run's own token and every configured secret are
//! replaced by `[redacted]`. Cuts fall on line boundaries so that a secret
//! on one line is never left half-cut (and so unredacted) at a cut.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::io::{PipeReader, PipeWriter, Read};

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
}

fn redacted(mut bytes: Vec<u8>, redact: &[&str]) -> Vec<u8> {
    for needle in redact.iter().map(|s| s.as_bytes()) {
        // Very short values would redact ordinary words; they are not
        // worth hiding from the user who configured them either.
        if needle.len() < 4 {
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

/// The capture of a running agent: one pipe that is both its stdout and
/// its stderr (so lines keep the order they were written in, as on a
/// terminal), read on a thread of its own into one bounded buffer.
#[derive(Debug)]
pub struct LogCapture {
    buf: Arc<Mutex<Capture>>,
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
    pub fn start(mut reader: PipeReader, head_max: usize, tail_max: usize) -> LogCapture {
        let buf = Arc::new(Mutex::new(Capture::new(head_max, tail_max)));
        let (tx, done) = tokio::sync::oneshot::channel();
        let shared = buf.clone();
        // A plain thread: the read blocks until the last holder of the
        // pipe's write end (the agent, its children) is gone.
        let _ = std::thread::Builder::new()
            .name("agent-log".to_owned())
            .spawn(move || {
                let mut chunk = vec![0u8; 16 << 10];
                loop {
                    match reader.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => shared
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(&chunk[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                let _ = tx.send(());
            });
        LogCapture { buf, done }
    }

    /// After the agent's process group is gone: wait (up to `wait`) for
    /// the pipe to drain, then return what was kept. A process that escaped
    /// the group may hold the pipe open; it does not hold up the run's end.
    pub async fn finish(self, wait: Duration, redact: &[&str]) -> Vec<u8> {
        let _ = tokio::time::timeout(wait, self.done).await;
        self.buf
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .finish(redact)
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
}
