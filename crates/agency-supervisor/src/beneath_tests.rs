use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use super::*;

fn bytes(r: AgentFile) -> Vec<u8> {
    match r {
        AgentFile::Bytes(b) => b,
        other => panic!("expected bytes, got {other:?}"),
    }
}

fn refused(r: AgentFile) -> String {
    match r {
        AgentFile::Refused(why) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Issue 27: a transcript that is a symlink to `/dev/zero` was read whole
/// until the daemon was killed for its memory.
#[test]
fn issue27_a_transcript_symlinked_to_dev_zero_is_refused_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("transcript.jsonl");
    symlink("/dev/zero", &t).unwrap();
    let why = refused(read_bounded(&t, 1 << 20, 1 << 20));
    assert!(why.contains("symbolic link"), "{why}");
}

/// Issue 27: a FIFO in the transcript's place hung the run's collection
/// (its slot never freed, graceful shutdown hung).
#[test]
fn issue27_a_transcript_that_is_a_fifo_does_not_block() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("transcript.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&t)
        .status()
        .unwrap();
    assert!(made.success());
    let began = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let path = t.clone();
    std::thread::spawn(move || {
        let _ = tx.send(read_bounded(&path, 1 << 20, 1 << 20));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("reading a FIFO must not block");
    let why = refused(r);
    assert!(why.contains("not a regular file"), "{why}");
    assert!(began.elapsed() < Duration::from_secs(30));
}

#[test]
fn issue27_a_hard_link_and_a_device_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("someone-elses");
    std::fs::write(&other, "secret\n").unwrap();
    let t = tmp.path().join("transcript.jsonl");
    std::fs::hard_link(&other, &t).unwrap();
    assert!(refused(read_bounded(&t, 64, 64)).contains("hard links"));
    assert!(refused(read_bounded(Path::new("/dev/null"), 64, 64)).contains("not a regular"));
    assert_eq!(
        read_bounded(&tmp.path().join("none"), 64, 64),
        AgentFile::Missing
    );
}

/// Issue 27: 300 MiB was read whole and kept as a blob for good; a large
/// transcript keeps its head and tail, cut at line ends, like run logs.
#[test]
fn issue27_a_large_transcript_keeps_its_head_and_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("transcript.jsonl");
    let lines: Vec<String> = (0..10_000).map(|i| format!("{{\"n\":{i}}}")).collect();
    let text = lines.join("\n") + "\n";
    std::fs::write(&t, &text).unwrap();
    let got = String::from_utf8(bytes(read_bounded(&t, 1000, 2000))).unwrap();
    assert!(got.len() <= 1000 + 2000 + 200, "{}", got.len());
    let got_lines: Vec<&str> = got.lines().collect();
    assert_eq!(got_lines[0], "{\"n\":0}");
    assert_eq!(*got_lines.last().unwrap(), "{\"n\":9999}");
    // Every line is whole JSON, the marker included, and says how much
    // was left out.
    let mut omitted = None;
    for l in &got_lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["type"] == "agency_omitted" {
            omitted = v["bytes"].as_u64();
        }
    }
    let kept = got.len() as u64 - omitted_line(omitted.unwrap()).len() as u64;
    assert_eq!(omitted.unwrap() + kept, text.len() as u64);

    // A small file is read whole, unchanged.
    std::fs::write(&t, "{\"a\":1}\n").unwrap();
    assert_eq!(bytes(read_bounded(&t, 1000, 2000)), b"{\"a\":1}\n");
}
