//! Files in directories an agent can write, read back by the unconfined
//! daemon after a run (placing a clone there is `agency-repos`').
//!
//! The daemon runs as itself, outside every sandbox, so a path that
//! passes through anything the agent controls is the agent's to redirect:
//! a symlink to `/dev/zero` read whole gets the daemon killed, a FIFO
//! hangs it. So nothing here checks a path and then uses it. Reads open
//! the file itself without following a symlink and without blocking, take
//! it only if it is a regular file with one link, and read a bounded head
//! and tail.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// The line that stands where the middle of a file too large to keep was
/// left out (JSON, so a JSON-lines transcript stays one).
fn omitted_line(bytes: u64) -> String {
    format!(
        "{{\"type\":\"agency_omitted\",\"bytes\":{bytes},\"why\":\"the file was larger than the daemon keeps; its head and tail are kept\"}}\n"
    )
}

/// What [`read_bounded`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AgentFile {
    /// The file's bytes (its head and tail with a line between them when
    /// it was larger than `head + tail`).
    Bytes(Vec<u8>),
    /// No file there.
    Missing,
    /// Something that is not one regular file: refused, unread.
    Refused(String),
}

/// Read `path`, written by an agent: not through a symlink, not a FIFO or
/// device, not a hard link to another file; at most `head` bytes from its
/// start and `tail` from its end, cut at line ends, with
/// [`omitted_line`] between. Blocking (a bounded amount of file I/O).
pub(crate) fn read_bounded(path: &Path, head: usize, tail: usize) -> AgentFile {
    let (file, len) = match open_agent_file(path) {
        Ok(opened) => opened,
        Err(other) => return other,
    };
    match read_head_tail(file, len, head, tail) {
        Ok(bytes) => AgentFile::Bytes(bytes),
        Err(e) => AgentFile::Refused(format!("failed to read {}: {e}", path.display())),
    }
}

/// Open `path`, written by an agent, as [`read_bounded`] does: the file
/// and its length, or why not (`Missing`, `Refused`). Never blocks.
pub(crate) fn open_agent_file(path: &Path) -> Result<(std::fs::File, u64), AgentFile> {
    let file = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => std::fs::File::from(fd),
        Err(rustix::io::Errno::NOENT) => return Err(AgentFile::Missing),
        Err(rustix::io::Errno::LOOP) => {
            return Err(AgentFile::Refused(format!(
                "{} is a symbolic link",
                path.display()
            )));
        }
        Err(e) => {
            return Err(AgentFile::Refused(format!(
                "failed to open {}: {e}",
                path.display()
            )));
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| AgentFile::Refused(format!("failed to stat {}: {e}", path.display())))?;
    one_regular_file(path, &meta)?;
    Ok((file, meta.len()))
}

/// Refuse anything but a regular file with one link.
pub(crate) fn one_regular_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), AgentFile> {
    use std::os::unix::fs::MetadataExt;
    if !meta.file_type().is_file() {
        return Err(AgentFile::Refused(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if meta.nlink() != 1 {
        return Err(AgentFile::Refused(format!(
            "{} has {} hard links (a link to another file)",
            path.display(),
            meta.nlink()
        )));
    }
    Ok(())
}

fn read_head_tail(
    mut file: std::fs::File,
    len: u64,
    head: usize,
    tail: usize,
) -> std::io::Result<Vec<u8>> {
    let keep = (head as u64).saturating_add(tail as u64);
    if len <= keep {
        // Never more than was measured: a file still growing is cut there.
        let mut out = Vec::with_capacity(len as usize);
        file.take(keep).read_to_end(&mut out)?;
        return Ok(out);
    }
    let mut start = vec![0; head];
    file.read_exact(&mut start)?;
    if let Some(end) = start.iter().rposition(|b| *b == b'\n') {
        start.truncate(end + 1);
    }
    file.seek(SeekFrom::Start(len - tail as u64))?;
    let mut end = Vec::with_capacity(tail);
    file.take(tail as u64).read_to_end(&mut end)?;
    let from = end
        .iter()
        .position(|b| *b == b'\n')
        .map_or(end.len(), |i| i + 1);
    let kept = start.len() + (end.len() - from);
    let mut out = start;
    out.extend_from_slice(omitted_line(len - kept as u64).as_bytes());
    out.extend_from_slice(&end[from..]);
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "beneath_tests.rs"]
mod tests;
