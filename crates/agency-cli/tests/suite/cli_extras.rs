//! Issue 28, the conveniences a CLI user expects: shell completions that
//! complete ids from the running daemon (and stay quiet without one), a
//! manual page, `agency kb put` to add a file to the KB, and `agency
//! tools` listing the built-in runtime's workspace tools too.

#![allow(clippy::unwrap_used)]

use crate::home;

use std::path::Path;
use std::process::{Command, Stdio};

use home::{BIN, TestHome};
use serde_json::Value;

/// Complete `words` (the last one being completed) in bash with the
/// script `agency completions bash` printed; the candidates.
fn bash_complete(h: &TestHome, words: &[&str]) -> (Vec<String>, String) {
    let script = h.dir.with_file_name("agency.bash");
    std::fs::write(&script, h.ok(&["completions", "bash"])).unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let array = words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let program = format!(
        "source '{}'; COMP_WORDS=({array}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; _agency_ids agency '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash")
        .args(["--norc", "-c", &program])
        .env(
            "PATH",
            format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
        )
        .env("AGENCY_HOME", &h.dir)
        .env("HOME", h.dir.with_file_name("user"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    (
        stdout
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn issue28_completions_complete_ids_from_the_daemon_and_stay_quiet_without_one() {
    let h = TestHome::new();
    h.ok(&["init"]);
    for shell in ["bash", "zsh", "fish"] {
        let s = h.ok(&["completions", shell]);
        assert!(
            s.contains("keep-warm") && s.contains("completions"),
            "{shell}: {s}"
        );
    }
    // The bash script is valid bash.
    let script = h.dir.with_file_name("check.bash");
    std::fs::write(&script, h.ok(&["completions", "bash"])).unwrap();
    let st = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(st.success());

    // Commands and options complete without a daemon, and no error shows.
    let (subs, err) = bash_complete(&h, &["agency", "keep-"]);
    assert_eq!(subs, ["keep-warm"], "{err}");
    let (none, err) = bash_complete(&h, &["agency", "audit", ""]);
    assert!(
        err.is_empty(),
        "errors spilled onto the command line: {err}"
    );
    assert!(none.iter().all(|c| c.len() != 36), "{none:?}");

    // With a daemon: the handler ids, by prefix.
    let _daemon = h.serve();
    let root = h.root();
    let (ids, err) = bash_complete(&h, &["agency", "audit", ""]);
    assert!(ids.contains(&root), "{ids:?} {err}");
    let (ids, _) = bash_complete(&h, &["agency", "caps", &root[..4]]);
    assert_eq!(ids, std::slice::from_ref(&root));
    // KB files for `kb cat`, none for a second argument.
    let put = h.run_with_stdin(
        &["--json", "kb", "put", "-", "--description", "notes"],
        Some(b"hi"),
    );
    assert_eq!(put.code, 0, "{put:?}");
    let file_id = serde_json::from_str::<Value>(&put.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (ids, _) = bash_complete(&h, &["agency", "kb", "cat", ""]);
    assert!(ids.contains(&file_id), "{ids:?}");
    let (ids, _) = bash_complete(&h, &["agency", "tell", &root, ""]);
    assert!(!ids.contains(&root), "{ids:?}");
}

#[test]
fn issue28_man_page_covers_the_commands() {
    let h = TestHome::new();
    let man = h.ok(&["man"]);
    assert!(
        man.starts_with(".ie") || man.starts_with(".TH"),
        "{}",
        &man[..200]
    );
    assert!(man.contains(".TH agency"), "{}", &man[..200]);
    for cmd in ["handlers", "kb", "completions", "ask"] {
        assert!(man.contains(cmd), "{cmd} missing");
    }
    assert!(!man.contains("__complete"), "hidden commands stay hidden");
}

#[test]
fn issue28_kb_put_adds_and_updates_files_with_checked_input() {
    let h = TestHome::new();
    h.ok(&["init"]);
    let _daemon = h.serve();
    let local = h.dir.with_file_name("notes.md");
    std::fs::write(&local, "# Notes\n\nFirst draft.\n").unwrap();
    let local = local.to_str().unwrap();

    let out = h.ok(&[
        "kb",
        "put",
        local,
        "--description",
        "My notes on the garden",
    ]);
    let v = h.json(&["kb", "ls"]);
    let f = v
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["description"] == "My notes on the garden")
        .unwrap();
    let id = f["id"].as_str().unwrap().to_owned();
    assert!(out.contains(&format!("KB file {id} version 1")), "{out}");
    assert_eq!(h.ok(&["kb", "cat", &id[..8]]), "# Notes\n\nFirst draft.\n");

    // A new version from standard input, by prefix.
    let r = h.run_with_stdin(
        &["kb", "put", "-", "--to", &id[..8]],
        Some(b"Second draft.\n"),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("version 2"), "{r:?}");
    assert_eq!(h.ok(&["kb", "cat", &id]), "Second draft.\n");
    assert_eq!(h.json(&["kb", "log", &id]).as_array().unwrap().len(), 2);

    // Bad input: each refused by name, nothing written.
    let bin = h.dir.with_file_name("image.bin");
    std::fs::write(&bin, [0xff, 0xfe, 0x00, 0x80]).unwrap();
    let r = h.run(&["kb", "put", bin.to_str().unwrap(), "--description", "bytes"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("is not UTF-8 text"), "{r:?}");
    let r = h.run(&[
        "kb",
        "put",
        h.dir.to_str().unwrap(),
        "--description",
        "a dir",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("not a regular file"), "{r:?}");
    let r = h.run(&["kb", "put", "/nonexistent/x", "--description", "x"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("failed to read /nonexistent/x"), "{r:?}");
    let r = h.run(&["kb", "put", local]);
    assert_eq!(r.code, 2, "neither --description nor --to: {r:?}");
    let r = h.run(&["kb", "put", local, "--description", "x", "--to", &id]);
    assert_eq!(r.code, 2, "{r:?}");
    // Over the daemon's size limit (limits.max_file_bytes, 8 MiB).
    let big = h.dir.with_file_name("big.txt");
    std::fs::write(&big, "x".repeat(9 * 1024 * 1024)).unwrap();
    let r = h.run(&[
        "kb",
        "put",
        big.to_str().unwrap(),
        "--description",
        "too big",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("failed to put"), "{r:?}");
    assert!(
        r.stderr.contains("maximum file size of 8388608 bytes"),
        "{r:?}"
    );
    // An empty description, and a control-character one, per the service.
    let r = h.run(&["kb", "put", local, "--description", ""]);
    assert_eq!(r.code, 2, "{r:?}");
    // A system file (a handler's audit log) cannot be written by hand.
    let root = h.root();
    let audit = h.json(&["handlers"])[0]["audit_log"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = h.run(&["kb", "put", local, "--to", &audit]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("Agency writes"), "{r:?}");
    let _ = root;
    let files: Vec<Value> = serde_json::from_value(h.json(&["kb", "ls"])).unwrap();
    assert!(
        files
            .iter()
            .all(|f| f["description"] != "bytes" && f["description"] != "too big")
    );
}

#[test]
fn issue28_tools_lists_the_builtin_workspace_tools() {
    let h = TestHome::new();
    let text = h.ok(&["tools"]);
    assert!(text.contains("kb_read\n"), "{text}");
    for t in [
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "glob",
        "grep",
    ] {
        assert!(text.contains(&format!("\n{t}\n")), "{t} missing: {text}");
    }
    assert!(
        text.contains("Workspace tools of the built-in runtime"),
        "{text}"
    );
    let v: Value = serde_json::from_str(&h.ok(&["tools", "--json"])).unwrap();
    let all = v.as_array().unwrap();
    let edit = all.iter().find(|t| t["name"] == "edit_file").unwrap();
    assert_eq!(edit["source"], "workspace");
    assert_eq!(edit["input_schema"]["type"], "object");
    assert_eq!(
        all.iter().find(|t| t["name"] == "kb_read").unwrap()["source"],
        "mcp"
    );
}
