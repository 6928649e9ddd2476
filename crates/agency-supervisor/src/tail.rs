//! Following a live run's transcript (`agency transcript RUN --follow`):
//! the run directory's `transcript.jsonl`, which the agent writes, read by
//! the unconfined daemon as it grows.
//!
//! The file is opened as `beneath.rs` opens every file an agent wrote (not
//! through a symlink, not a FIFO or device, not a second hard link) and is
//! then read from that open file only: nothing the agent does to the path
//! afterwards makes the daemon read another file. Each step re-checks all
//! the same: the open file must still be a regular file with one link, and
//! the path must still name it (or nothing: an ended run's directory is
//! deleted). A path the agent pointed elsewhere (a symlink to a file
//! outside, a FIFO, another file) ends the following with the reason.
//!
//! Bounded: a step reads at most 64 KiB; a partial line is kept up to
//! [`MAX_LINE`] bytes, and a longer line is replaced by one line saying
//! how long it was (JSON, so the transcript stays JSON lines).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::beneath::{AgentFile, one_regular_file, open_agent_file};

/// The longest transcript line a follower is sent.
pub const MAX_LINE: usize = 1 << 20;
/// The most one step reads.
const STEP: usize = 64 << 10;

/// What one step of [`TranscriptTail`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum TailStep {
    /// The whole lines read (without their line ends); none: nothing new.
    Lines(Vec<String>),
    /// There is no transcript (yet).
    Missing,
    /// Refused: why. Nothing more is read.
    Refused(String),
}

/// The line that stands for one too long to send.
fn omitted_line(bytes: u64) -> String {
    format!(
        "{{\"type\":\"agency_omitted\",\"bytes\":{bytes},\"why\":\"a transcript line longer than {MAX_LINE} bytes is not sent to followers\"}}"
    )
}

/// A live run's transcript, read as it grows.
#[derive(Debug)]
pub struct TranscriptTail {
    path: PathBuf,
    /// The open file, with its device and inode (which the path must keep
    /// naming).
    file: Option<(File, u64, u64)>,
    /// The start of a line whose end has not come yet.
    partial: Vec<u8>,
    /// Bytes of a line too long to send, so far: its rest is skipped.
    skipping: Option<u64>,
}

impl TranscriptTail {
    /// The transcript of the run whose run directory is `run_dir`.
    pub fn new(run_dir: &Path) -> TranscriptTail {
        TranscriptTail {
            path: run_dir.join("transcript.jsonl"),
            file: None,
            partial: Vec::new(),
            skipping: None,
        }
    }

    /// Whether the file was found and opened.
    pub fn opened(&self) -> bool {
        self.file.is_some()
    }

    /// Read what was added since the last step (at most 64 KiB). Blocking:
    /// a bounded amount of file I/O.
    pub fn step(&mut self) -> TailStep {
        if self.file.is_none() {
            match open_agent_file(&self.path) {
                Ok((file, _)) => match file.metadata() {
                    Ok(m) => self.file = Some((file, m.dev(), m.ino())),
                    Err(e) => return self.refused(format!("failed to stat it: {e}")),
                },
                Err(AgentFile::Missing) => return TailStep::Missing,
                Err(AgentFile::Refused(why)) => return TailStep::Refused(why),
                Err(AgentFile::Bytes(_)) => return TailStep::Missing,
            }
        }
        if let Err(why) = self.recheck() {
            self.file = None;
            return TailStep::Refused(why);
        }
        let Some((file, _, _)) = self.file.as_mut() else {
            return TailStep::Missing;
        };
        let mut buf = vec![0u8; STEP];
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => 0,
            Err(e) => return self.refused(format!("failed to read it: {e}")),
        };
        TailStep::Lines(self.lines(&buf[..n]))
    }

    /// At the run's end: its last line, if it has no line end.
    pub fn rest(&mut self) -> Option<String> {
        if let Some(n) = self.skipping.take() {
            return Some(omitted_line(n));
        }
        (!self.partial.is_empty())
            .then(|| String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned())
    }

    fn refused(&mut self, why: String) -> TailStep {
        self.file = None;
        TailStep::Refused(format!("{}: {why}", self.path.display()))
    }

    /// The open file is still one regular file, and the path still names
    /// it or nothing.
    fn recheck(&self) -> Result<(), String> {
        let Some((file, dev, ino)) = &self.file else {
            return Ok(());
        };
        let meta = file
            .metadata()
            .map_err(|e| format!("failed to stat {}: {e}", self.path.display()))?;
        // No link at all is fine: the run's directory was deleted at its
        // end, and the open file still holds what was written.
        let deleted = meta.nlink() == 0 && meta.file_type().is_file();
        match one_regular_file(&self.path, &meta) {
            Ok(()) => {}
            Err(_) if deleted => {}
            Err(AgentFile::Refused(why)) => return Err(why),
            Err(_) => return Err(format!("{} changed", self.path.display())),
        }
        let now = match rustix::fs::statat(
            rustix::fs::CWD,
            &self.path,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => st,
            // The run's directory is deleted at its end; the open file
            // still holds what was written.
            Err(rustix::io::Errno::NOENT) => return Ok(()),
            Err(e) => return Err(format!("failed to stat {}: {e}", self.path.display())),
        };
        if now.st_dev == *dev && now.st_ino == *ino {
            return Ok(());
        }
        let what = match rustix::fs::FileType::from_raw_mode(now.st_mode) {
            rustix::fs::FileType::Symlink => "a symbolic link",
            rustix::fs::FileType::Fifo => "a FIFO",
            rustix::fs::FileType::RegularFile => "another file",
            _ => "something else",
        };
        Err(format!(
            "{} was replaced by {what} while it was followed; what the path names now is not read",
            self.path.display()
        ))
    }

    /// The whole lines `bytes` completes, bounded by [`MAX_LINE`].
    fn lines(&mut self, mut bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(i) = bytes.iter().position(|b| *b == b'\n') {
            let (line, rest) = (&bytes[..i], &bytes[i + 1..]);
            bytes = rest;
            if let Some(n) = self.skipping.take() {
                out.push(omitted_line(n + line.len() as u64 + 1));
                continue;
            }
            if self.partial.len() + line.len() > MAX_LINE {
                out.push(omitted_line((self.partial.len() + line.len() + 1) as u64));
                self.partial.clear();
                continue;
            }
            self.partial.extend_from_slice(line);
            let whole = std::mem::take(&mut self.partial);
            out.push(String::from_utf8_lossy(&whole).into_owned());
        }
        if let Some(n) = self.skipping.as_mut() {
            *n += bytes.len() as u64;
        } else if self.partial.len() + bytes.len() > MAX_LINE {
            self.skipping = Some((self.partial.len() + bytes.len()) as u64);
            self.partial.clear();
        } else {
            self.partial.extend_from_slice(bytes);
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "tail_tests.rs"]
mod tests;
