//! Issue 28: the README's offline quickstart, followed literally in a
//! fresh home — its `hello.json` and its commands, read from README.md
//! itself — reaches the first answer. Only the home's directory and the
//! model server's port (whatever it printed) differ from the text. The
//! time from the first command to the answer is printed (run with
//! `--nocapture` to see it).

#![allow(clippy::unwrap_used)]

use crate::home;

use std::io::BufRead;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use home::TestHome;

/// The text of the README's section `heading`, up to the next heading of
/// the same or a higher level.
fn section(readme: &str, heading: &str) -> String {
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in README.md"));
    let rest = &readme[start + heading.len()..];
    let end = rest
        .find("\n## ")
        .into_iter()
        .chain(rest.find("\n### "))
        .min()
        .unwrap_or(rest.len());
    rest[..end].to_owned()
}

/// The first fenced block of `lang` in `text`.
fn block(text: &str, lang: &str) -> String {
    let open = format!("```{lang}\n");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block"))
        + open.len();
    let len = text[start..].find("```").unwrap();
    text[start..start + len].to_owned()
}

/// A command line as the shell would split it (double quotes only, which
/// is all the quickstart uses); a trailing `&` runs it in the background.
fn words(line: &str) -> (Vec<String>, bool) {
    let line = match line.find(" #") {
        Some(i) => &line[..i],
        None => line,
    };
    let mut line = line.trim();
    let background = line.ends_with('&');
    if background {
        line = line.trim_end_matches('&').trim_end();
    }
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    (out, background)
}

struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }
}

#[test]
fn issue28_the_readme_quickstart_reaches_the_first_answer() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let quick = section(&readme, "### Offline quickstart");
    let h = TestHome::new();
    let work = h.tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("hello.json"), block(&quick, "json")).unwrap();
    let script = block(&quick, "sh");
    let mut children = Killed(Vec::new());
    let mut model_url: Option<String> = None;
    let mut pipes = Vec::new();
    let started = Instant::now();
    let mut answered = None;
    for line in script.lines().filter(|l| !l.trim().is_empty()) {
        let (mut argv, background) = words(line);
        if argv[0] == "export" {
            // Our own fresh home instead of the README's path.
            assert!(argv[1].starts_with("AGENCY_HOME="), "{line}");
            continue;
        }
        assert_eq!(
            argv[0], "agency",
            "a quickstart line that is not an agency command: {line}"
        );
        argv.remove(0);
        // The port is whatever the model server printed.
        if let Some(url) = &model_url {
            for a in &mut argv {
                *a = a.replace("http://127.0.0.1:40123", url);
            }
        }
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut c = h.command(&args);
        c.current_dir(&work);
        if background {
            if args[0] == "model-server" {
                let mut child = c
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let mut url = String::new();
                let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
                out.read_line(&mut url).unwrap();
                // Kept open: the server may write more.
                pipes.push(out);
                let url = url.trim().to_owned();
                assert!(url.starts_with("http://127.0.0.1:"), "{url}");
                model_url = Some(url);
                children.0.push(child);
            } else {
                assert_eq!(args, ["serve"], "{line}");
                let log = std::fs::File::create(h.log_path()).unwrap();
                children
                    .0
                    .push(c.stdout(Stdio::null()).stderr(log).spawn().unwrap());
                let deadline = Instant::now() + Duration::from_secs(60);
                while h.run(&["status"]).code != 0 {
                    assert!(
                        Instant::now() < deadline,
                        "the daemon did not start: {}",
                        h.log()
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            continue;
        }
        if args == ["inbox"] {
            // "A moment later": poll, bounded.
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let out = h.ok(&["inbox"]);
                if out.contains("You wrote: hello") {
                    answered = Some(started.elapsed());
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "no answer in the inbox: {out}\n{}",
                    h.log()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            continue;
        }
        let r = h.run(&args);
        assert_eq!(r.code, 0, "`{line}` failed: {}{}", r.stdout, r.stderr);
    }
    let took = answered.expect("the quickstart has no `agency inbox` that shows the answer");
    // An existing home's configuration is never rewritten; a bad URL is
    // refused before a home is made.
    let url = model_url.unwrap();
    let r = h.run(&["init", "--model-server", &url]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("already exists and its agency.toml is left as it is"),
        "{r:?}"
    );
    let other = h.tmp.path().join("other-home");
    let r = h.run(&[
        "--home",
        other.to_str().unwrap(),
        "init",
        "--model-server",
        "127.0.0.1:40123",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("failed to use \"127.0.0.1:40123\" as the scripted model server"),
        "{r:?}"
    );
    assert!(!other.exists());
    eprintln!(
        "quickstart: from `agency model-server` to the answer in the inbox: {:.2}s",
        took.as_secs_f64()
    );
}
