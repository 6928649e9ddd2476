use std::io::Write;
use std::os::unix::fs::symlink;
use std::time::Duration;

use super::*;

fn lines(step: TailStep) -> Vec<String> {
    match step {
        TailStep::Lines(l) => l,
        other => panic!("expected lines, got {other:?}"),
    }
}

fn refused(step: TailStep) -> String {
    match step {
        TailStep::Refused(why) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn issue30_lines_come_as_they_are_written_whole_and_the_last_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut tail = TranscriptTail::new(dir.path());
    assert_eq!(tail.step(), TailStep::Missing);
    assert!(!tail.opened());
    let path = dir.path().join("transcript.jsonl");
    append(&path, "{\"event\":\"run_start\"}\n{\"event\":\"tool_");
    assert_eq!(lines(tail.step()), ["{\"event\":\"run_start\"}"]);
    assert!(tail.opened());
    assert!(lines(tail.step()).is_empty(), "nothing new");
    append(&path, "call\"}\n{\"event\":\"run_e");
    assert_eq!(lines(tail.step()), ["{\"event\":\"tool_call\"}"]);
    append(&path, "nd\"}");
    assert!(
        lines(tail.step()).is_empty(),
        "a line without its end waits"
    );
    assert_eq!(tail.rest().as_deref(), Some("{\"event\":\"run_end\"}"));
    assert_eq!(tail.rest(), None);
}

#[test]
fn issue30_a_line_longer_than_the_limit_is_replaced_by_one_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcript.jsonl");
    let mut tail = TranscriptTail::new(dir.path());
    let long = "x".repeat(MAX_LINE + 10);
    append(&path, &format!("{{\"a\":1}}\n{long}\n{{\"b\":2}}\n"));
    let mut got = Vec::new();
    // Enough steps of 64 KiB for the whole file, and a few more.
    for _ in 0..(MAX_LINE >> 16) + 4 {
        got.extend(lines(tail.step()));
    }
    assert_eq!(
        got.len(),
        3,
        "{:?}",
        got.iter().map(String::len).collect::<Vec<_>>()
    );
    assert_eq!(got[0], "{\"a\":1}");
    let omitted: serde_json::Value = serde_json::from_str(&got[1]).unwrap();
    assert_eq!(omitted["type"], "agency_omitted");
    assert_eq!(omitted["bytes"], (MAX_LINE + 11) as u64);
    assert_eq!(got[2], "{\"b\":2}");
}

/// The attack: the agent points its transcript at a file it may not read
/// (its daemon runs unconfined): never read, before or while following.
#[test]
fn issue30_a_transcript_replaced_by_a_symlink_is_never_read_through() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "{\"secret\":\"s3cr3t-outside\"}\n").unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let path = run.join("transcript.jsonl");

    // Before the follower opened it: refused.
    symlink(&secret, &path).unwrap();
    let why = refused(TranscriptTail::new(&run).step());
    assert!(why.contains("symbolic link"), "{why}");
    std::fs::remove_file(&path).unwrap();

    // While it is followed: the path is swapped; what it names now is not
    // read, and the follower is told.
    append(&path, "{\"event\":\"run_start\"}\n");
    let mut tail = TranscriptTail::new(&run);
    assert_eq!(lines(tail.step()), ["{\"event\":\"run_start\"}"]);
    std::fs::remove_file(&path).unwrap();
    symlink(&secret, &path).unwrap();
    let why = refused(tail.step());
    assert!(why.contains("replaced by a symbolic link"), "{why}");
    assert!(!why.contains("s3cr3t"), "{why}");
}

#[test]
fn issue30_a_transcript_replaced_by_a_fifo_does_not_block_the_follower() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcript.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let run = dir.path().to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(TranscriptTail::new(&run).step());
    });
    let why = refused(
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a FIFO must not block the follower"),
    );
    assert!(why.contains("not a regular file"), "{why}");
}

#[test]
fn issue30_a_finished_runs_deleted_directory_still_yields_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let path = run.join("transcript.jsonl");
    append(&path, "{\"n\":1}\n");
    let mut tail = TranscriptTail::new(&run);
    assert_eq!(lines(tail.step()), ["{\"n\":1}"]);
    append(&path, "{\"n\":2}\n");
    std::fs::remove_dir_all(&run).unwrap();
    assert_eq!(lines(tail.step()), ["{\"n\":2}"]);
    assert!(lines(tail.step()).is_empty());
}

#[test]
fn issue30_a_second_hard_link_made_while_following_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcript.jsonl");
    append(&path, "{\"n\":1}\n");
    let mut tail = TranscriptTail::new(dir.path());
    assert_eq!(lines(tail.step()), ["{\"n\":1}"]);
    std::fs::hard_link(&path, dir.path().join("elsewhere")).unwrap();
    assert!(refused(tail.step()).contains("hard links"));
}
