//! The built-in rules that apply after the user's `policy.toml` rules:
//! seed 001's SafetyGuard patterns plus the issue's "ask" cases.
//!
//! Each check returns a finding; the most severe one wins (deny over ask),
//! the first of that severity gives the reason. Shell command lines are
//! split into every simple command they would run (`shell.rs`), including
//! the ones inside `$(…)`, backticks, `bash -c '…'` and `eval`, and each is
//! checked with its program reduced to a base name (`/bin/rm` is `rm`) and
//! wrapper programs (`command`, `env`, `nice`, `xargs`, …) peeled off.

use std::path::{Path, PathBuf};

use super::shell::{self, Pipeline, SimpleCommand};
use super::{Decision, Facts, ToolCall, Verdict, absolute, inside, is_shell_tool, normalize};

pub(super) fn classify(call: &ToolCall<'_>, facts: &Facts) -> Option<Decision> {
    let mut f = Findings::default();
    if let Some(line) = &facts.command {
        let loc = Loc {
            base: call.workspace.map(Path::to_path_buf),
            ws: call.workspace,
        };
        shell_line(line, &loc, &mut f, 0);
    } else if call.tool == "repo_push" {
        f.ask("pushing to a repository's origin is published work; the user approves each push");
    } else if call.tool.starts_with("mcp:") {
        if call.read_only == Some(false) {
            f.ask(format!(
                "{} is an extra MCP tool annotated as not read-only (it may change things outside Agency)",
                call.tool
            ));
        }
        if sql_destructive(&facts.canonical_args) {
            f.ask("the arguments drop or truncate a database table");
        }
    }
    if !is_shell_tool(call.tool) {
        for p in &facts.paths {
            file_path(call.tool, p, call.workspace, &mut f);
        }
    }
    f.best()
}

/// Where a shell command runs: the directory relative paths resolve
/// against (`None`: unknown, after a `cd` we cannot follow) and the
/// workspace they must stay in.
struct Loc<'a> {
    base: Option<PathBuf>,
    ws: Option<&'a Path>,
}

/// Findings gathered for one call.
#[derive(Default)]
struct Findings {
    deny: Option<String>,
    ask: Option<String>,
}

impl Findings {
    fn deny(&mut self, why: impl Into<String>) {
        self.deny.get_or_insert_with(|| why.into());
    }
    fn ask(&mut self, why: impl Into<String>) {
        self.ask.get_or_insert_with(|| why.into());
    }
    fn best(self) -> Option<Decision> {
        if let Some(r) = self.deny {
            return Some(Decision {
                verdict: Verdict::Deny,
                reason: r,
            });
        }
        self.ask.map(|r| Decision {
            verdict: Verdict::Ask,
            reason: r,
        })
    }
}

/// A file tool's path argument.
fn file_path(tool: &str, p: &Path, workspace: Option<&Path>, f: &mut Findings) {
    let s = p.to_string_lossy();
    if let Some(what) = credential(&s) {
        f.deny(format!("{tool} would touch {what} ({s})"));
    } else if !inside(p, workspace) {
        f.ask(format!("{tool} names a path outside the workspace ({s})"));
    }
}

/// The programs that run the program named by their arguments.
const WRAPPERS: &[&str] = &[
    "command", "builtin", "exec", "nohup", "nice", "time", "env", "xargs", "timeout", "stdbuf",
    "ionice", "setsid", "chrt", "taskset", "unbuffer", "busybox", "doas", "sudo", "su", "then",
    "else", "do", "if", "while", "until", "elif", "!",
];

/// Shells and interpreters that run a script given on stdin or with `-c`.
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "fish", "ash", "csh", "tcsh", "python", "python2",
    "python3", "perl", "ruby", "node", "php",
];

/// Programs that download.
const DOWNLOADERS: &[&str] = &["curl", "wget", "fetch", "aria2c", "http", "https", "nc"];

/// Directories whose recursive removal is never part of a task.
const SYSTEM_DIRS: &[&str] = &[
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/media", "/mnt", "/opt",
    "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
];

fn base(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// A simple command as user `command` regexes see it: the program's base
/// name and the words joined by one space.
pub(super) fn normalized_command(c: &SimpleCommand) -> String {
    let mut words = c.words.clone();
    if let Some(first) = words.first_mut() {
        *first = base(first).to_string();
    }
    words.join(" ")
}

fn shell_line(line: &str, loc: &Loc<'_>, f: &mut Findings, depth: usize) {
    if depth > 8 {
        f.ask("the command nests shells too deeply to check");
        return;
    }
    if sql_destructive(line) {
        f.ask("the command drops or truncates a database table");
    }
    let pipelines = match shell::split_all(line) {
        Ok(p) => p,
        Err(e) => {
            f.ask(format!("the command could not be checked ({})", e.0));
            return;
        }
    };
    if line.contains(":(){") || line.contains(":() {") {
        f.deny("the command is a fork bomb");
    }
    // `cd` moves where later relative paths point (`cd / && rm -rf *`).
    let mut here = Loc {
        base: loc.base.clone(),
        ws: loc.ws,
    };
    for p in &pipelines {
        pipeline(p, &here, f, depth);
        if let Some(c) = p.first()
            && c.words.first().map(String::as_str) == Some("cd")
        {
            here.base = match c.words.get(1).map(String::as_str) {
                // `cd` alone goes home.
                None => Some(PathBuf::from("~")),
                Some(d) if d.starts_with('~') => Some(normalize(Path::new(d))),
                Some(d) if !d.starts_with(['$', '-']) => Some(absolute(d, here.base.as_deref())),
                // `-` or an expansion: somewhere we cannot see.
                _ => None,
            };
        }
    }
}

fn pipeline(p: &Pipeline, loc: &Loc<'_>, f: &mut Findings, depth: usize) {
    let mut downloaded = false;
    for c in p {
        let words = peel(c, f);
        let Some(program) = words.first().map(|w| base(w).to_string()) else {
            check_words(c, &[], loc, f);
            continue;
        };
        if c.program_expanded && words.len() == c.words.len() {
            f.ask(format!(
                "the program name {:?} comes from an expansion that cannot be checked",
                words[0]
            ));
        }
        if DOWNLOADERS.contains(&program.as_str()) {
            downloaded = true;
        }
        let is_shell = SHELLS
            .iter()
            .any(|s| program == *s || program.starts_with("python3."));
        if is_shell
            && (downloaded
                || c.subs
                    .iter()
                    .any(|s| DOWNLOADERS.iter().any(|d| s.contains(d))))
        {
            f.ask(format!("the command pipes a download into {program}"));
        }
        // `bash -c '…'`, `eval …`: the argument is a command line too.
        if is_shell
            && let Some(i) = words
                .iter()
                .position(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('c'))
            && let Some(script) = words.get(i + 1)
            && ["sh", "bash", "zsh", "dash", "ksh", "ash", "fish"].contains(&program.as_str())
        {
            shell_line(script, loc, f, depth + 1);
        }
        if program == "eval" {
            shell_line(&words[1..].join(" "), loc, f, depth + 1);
        }
        program_rules(&program, &words, loc, f);
        check_words(c, &words, loc, f);
    }
}

/// Drop wrapper programs (and their options) in front of the real program;
/// flags `sudo`/`su`/`doas` on the way.
fn peel(c: &SimpleCommand, f: &mut Findings) -> Vec<String> {
    let mut words: &[String] = &c.words;
    // Leading assignments `A=b cmd`.
    while let Some(w) = words.first() {
        if is_assignment(w) {
            words = &words[1..];
        } else {
            break;
        }
    }
    let mut guard = 0;
    while let Some(w) = words.first() {
        guard += 1;
        if guard > 32 {
            break;
        }
        let b = base(w);
        if !WRAPPERS.contains(&b) && w != "{" && w != "}" {
            break;
        }
        if matches!(b, "sudo" | "su" | "doas") {
            f.ask(format!(
                "the command runs as another user ({b}); the agent's work needs no privileges"
            ));
        }
        let takes_value: &[&str] = match b {
            "timeout" | "nice" | "ionice" | "chrt" | "taskset" => &["-n", "-s", "-k", "-c", "-p"],
            "env" => &["-u", "-C", "-S"],
            "sudo" => &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"],
            "su" => &["-c", "-s", "-g", "-G"],
            "xargs" => &["-I", "-n", "-L", "-P", "-s", "-d", "-E", "-a"],
            _ => &[],
        };
        words = &words[1..];
        if b == "env" && words.iter().all(|w| w.starts_with('-') || is_assignment(w)) {
            f.deny("the command prints the environment (it holds the agent's credentials)");
        }
        if b == "su"
            && let Some(i) = words.iter().position(|w| w == "-c")
            && let Some(script) = words.get(i + 1)
        {
            return vec!["sh".into(), "-c".into(), script.clone()];
        }
        while let Some(w) = words.first() {
            if w == "--" {
                words = &words[1..];
                break;
            }
            if w.starts_with('-') || is_assignment(w) {
                let needs = takes_value.contains(&w.as_str());
                words = &words[1..];
                if needs && !words.is_empty() {
                    words = &words[1..];
                }
            } else if (b == "timeout" || b == "nice" || b == "chrt" || b == "taskset")
                && w.chars().next().is_some_and(|c| c.is_ascii_digit())
            {
                words = &words[1..];
            } else {
                break;
            }
        }
    }
    words.to_vec()
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

fn program_rules(program: &str, words: &[String], loc: &Loc<'_>, f: &mut Findings) {
    let args = &words[1..];
    match program {
        "rm" | "rmdir" | "shred" | "unlink" => rm(program, args, loc, f),
        "printenv"
            if args.iter().all(|a| a.starts_with('-')) || args.iter().any(|a| secret_name(a)) =>
        {
            f.deny("the command prints the environment (it holds the agent's credentials)");
        }
        "export" | "declare" | "typeset" | "set"
            if args.is_empty() || args.iter().all(|a| a == "-p" || a == "-x") =>
        {
            f.deny("the command prints the environment (it holds the agent's credentials)");
        }
        "git" => git(args, f),
        "cp" | "mv" | "install" | "ln" | "rsync" | "scp" => {
            // The destination: the last operand (or `-t DIR`).
            let operands: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
            let target = args
                .iter()
                .position(|a| a == "-t" || a == "--target-directory")
                .and_then(|i| args.get(i + 1))
                .or_else(|| (operands.len() > 1).then(|| *operands.last().unwrap_or(&&args[0])));
            if let Some(t) = target {
                write_target(program, t, loc, f);
            }
        }
        "tee" | "truncate" | "touch" | "mkdir" => {
            for a in args.iter().filter(|a| !a.starts_with('-')) {
                write_target(program, a, loc, f);
            }
        }
        "find" => find(args, loc, f),
        "mkfs" | "fdisk" | "parted" | "wipefs" | "sfdisk" | "shutdown" | "reboot" | "halt"
        | "poweroff" => f.deny(format!("{program} acts on the machine, not on the task")),
        p if p.starts_with("mkfs.") => f.deny(format!("{p} formats a file system")),
        "dd" if args.iter().any(|a| a.starts_with("of=/dev/")) => {
            f.deny("dd writes to a device");
        }
        "chmod" | "chown" | "chgrp" if args.iter().any(|a| a == "-R" || a == "--recursive") => {
            for a in args.iter().filter(|a| !a.starts_with('-')) {
                let p = absolute(a, loc.base.as_deref());
                if broad(&p) {
                    f.deny(format!("{program} -R of {a} changes the whole system"));
                }
            }
        }
        "kill" if args.iter().any(|a| a == "-1" || a == "1") => {
            f.deny("kill of every process (-1) or of init");
        }
        _ => {}
    }
}

/// A path a command writes: outside the workspace (and `/tmp`) asks.
fn write_target(program: &str, a: &str, loc: &Loc<'_>, f: &mut Findings) {
    let p = absolute(a, loc.base.as_deref());
    let s = p.to_string_lossy();
    if !(inside(&p, loc.ws) || s == "/tmp" || s.starts_with("/tmp/") || s.starts_with("/dev/")) {
        f.ask(format!("{program} writes {a}, outside the workspace"));
    }
}

fn rm(program: &str, args: &[String], loc: &Loc<'_>, f: &mut Findings) {
    let mut recursive = program == "rmdir";
    let mut paths = Vec::new();
    let mut opts_done = false;
    for a in args {
        if !opts_done && a == "--" {
            opts_done = true;
        } else if !opts_done && a.starts_with("--") {
            if a == "--recursive" || a == "--dir" {
                recursive = true;
            }
            if a == "--no-preserve-root" {
                f.deny("rm --no-preserve-root removes the whole system");
            }
        } else if !opts_done && a.starts_with('-') && a.len() > 1 {
            if a.contains('r') || a.contains('R') {
                recursive = true;
            }
        } else {
            paths.push(a);
        }
    }
    if recursive && paths.is_empty() && program == "rm" {
        f.ask("rm -r of paths that cannot be seen here (given by xargs or a pipe)");
    }
    for a in paths {
        let p = absolute(a, loc.base.as_deref());
        let s = p.to_string_lossy().to_string();
        if credential(&s).is_some() {
            f.deny(format!("{program} would remove credentials ({a})"));
        } else if recursive && (broad(&p) || home(a) || home(&s)) {
            f.deny(format!(
                "{program} -r of {a} removes a system or home directory"
            ));
        } else if !inside(&p, loc.ws) {
            f.ask(format!("{program} removes {a}, outside the workspace"));
        }
    }
}

/// `find … -delete` / `find … -exec CMD … ;`: the start paths and the
/// commands it runs.
fn find(args: &[String], loc: &Loc<'_>, f: &mut Findings) {
    let starts: Vec<&String> = args
        .iter()
        .take_while(|a| !a.starts_with('-') && *a != "(" && *a != "!")
        .collect();
    if args.iter().any(|a| a == "-delete") {
        let as_rm: Vec<String> = std::iter::once("-r".to_string())
            .chain(starts.iter().map(|s| s.to_string()))
            .collect();
        rm("find -delete", &as_rm, loc, f);
    }
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let cmd: Vec<String> = args[i + 1..]
                .iter()
                .take_while(|a| *a != ";" && *a != "+")
                .cloned()
                .collect();
            i += cmd.len() + 1;
            if let Some(p) = cmd.first() {
                let program = base(p).to_string();
                let mut words = cmd.clone();
                words.iter_mut().for_each(|w| {
                    if w == "{}" {
                        w.clear();
                    }
                });
                words.retain(|w| !w.is_empty());
                if matches!(program.as_str(), "rm" | "shred" | "unlink") {
                    let mut as_rm = words[1..].to_vec();
                    as_rm.extend(starts.iter().map(|s| s.to_string()));
                    rm(&program, &as_rm, loc, f);
                } else {
                    program_rules(&program, &words, loc, f);
                }
            }
        }
        i += 1;
    }
}

/// A system directory, its direct entries, or a glob over them.
fn broad(p: &Path) -> bool {
    let mut s = p.to_string_lossy().to_string();
    while s.len() > 1 && (s.ends_with("/*") || s.ends_with('/') || s.ends_with("/.*")) {
        let cut = if s.ends_with("/*") {
            2
        } else if s.ends_with("/.*") {
            3
        } else {
            1
        };
        s.truncate(s.len() - cut);
    }
    if s.is_empty() || s == "/" || s == "*" || s.starts_with("/*") {
        return true;
    }
    if s.starts_with('/') && s.matches('/').count() == 1 {
        return true;
    }
    SYSTEM_DIRS.contains(&s.as_str())
}

/// The home directory or a glob over it (`~`, `~/`, `~/*`, `$HOME`, …).
fn home(a: &str) -> bool {
    let t = a.trim_end_matches(['/', '*', '.']);
    matches!(t, "~" | "$HOME" | "${HOME}") || t.starts_with("~") && !t[1..].contains('/')
}

fn git(args: &[String], f: &mut Findings) {
    // Skip git's own options (`-C dir`, `-c k=v`, `--git-dir=…`).
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "-C" || a == "-c" {
            i += 2;
        } else if a.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    let Some(sub) = args.get(i) else { return };
    if sub == "push" {
        let rest = &args[i + 1..];
        let forced = rest.iter().any(|a| {
            a == "-f"
                || a == "--force"
                || a.starts_with("--force-with-lease")
                || a == "--mirror"
                || a == "--delete"
                || a == "-d"
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('f'))
                || (a.starts_with('+') && a.len() > 1)
                || a.starts_with(":")
        });
        if forced {
            f.ask("git push with --force, --delete or a forced refspec rewrites published history");
        } else {
            f.ask("git push publishes work outside the workspace");
        }
    }
}

/// Every word and redirection target of a command, whatever the program:
/// credential files, the process environment, secrets in variables.
fn check_words(c: &SimpleCommand, words: &[String], loc: &Loc<'_>, f: &mut Findings) {
    for w in words.iter().chain(c.redirects.iter()) {
        let resolved = absolute(w, loc.base.as_deref());
        let text = resolved.to_string_lossy();
        if let Some(what) = credential(w).or_else(|| {
            if w.contains('/') {
                credential(&text)
            } else {
                None
            }
        }) {
            f.deny(format!("the command touches {what} ({w})"));
        }
        if w.contains("/environ") && (w.contains("/proc/") || text.starts_with("/proc/")) {
            f.deny("the command reads a process environment (it holds the agent's credentials)");
        }
        if let Some(v) = secret_variable(w) {
            f.deny(format!(
                "the command expands ${v}, which looks like a secret"
            ));
        }
    }
    for r in &c.redirects {
        let p = absolute(r, loc.base.as_deref());
        let s = p.to_string_lossy();
        if s.starts_with("/dev/sd") || s.starts_with("/dev/nvme") || s.starts_with("/dev/mem") {
            f.deny(format!("the command writes to a device ({r})"));
        } else if !(inside(&p, loc.ws)
            || s.starts_with("/dev/")
            || s.starts_with("/tmp/")
            || s == "/tmp")
        {
            f.ask(format!("the command writes to {r}, outside the workspace"));
        }
    }
}

/// A credential file or directory the path names, if any.
fn credential(path: &str) -> Option<&'static str> {
    let p = normalize(Path::new(path));
    let comps: Vec<String> = p
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let has = |name: &str| comps.iter().any(|c| c == name);
    let pair = |a: &str, b: &str| comps.windows(2).any(|w| w[0] == a && w[1] == b);
    let last = comps.last().map(String::as_str).unwrap_or("");
    if has(".ssh") {
        return Some("SSH keys (~/.ssh)");
    }
    if has(".gnupg") {
        return Some("GnuPG keys (~/.gnupg)");
    }
    if pair(".aws", "credentials") || pair(".aws", "config") {
        return Some("AWS credentials");
    }
    if pair(".kube", "config") || pair(".docker", "config.json") {
        return Some("cluster or registry credentials");
    }
    if pair(".config", "gh") || pair(".config", "gcloud") {
        return Some("CLI credentials (~/.config)");
    }
    if matches!(
        last,
        ".netrc" | ".git-credentials" | ".pgpass" | ".pypirc" | ".npmrc" | "shadow" | "gshadow"
    ) && (last != "shadow" && last != "gshadow" || has("etc"))
    {
        return Some("a credentials file");
    }
    if comps.len() > 1
        && (last.starts_with("id_rsa")
            || last.starts_with("id_ed25519")
            || last.starts_with("id_ecdsa")
            || last.starts_with("id_dsa"))
    {
        return Some("an SSH private key");
    }
    None
}

/// A variable expansion in `w` whose name looks like a secret.
fn secret_variable(w: &str) -> Option<String> {
    let mut rest = w;
    while let Some(i) = rest.find('$') {
        rest = &rest[i + 1..];
        let name: String = rest
            .trim_start_matches('{')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if secret_name(&name) {
            return Some(name);
        }
    }
    None
}

fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "API_KEY",
        "APIKEY",
        "PRIVATE_KEY",
        "CREDENTIAL",
    ]
    .iter()
    .any(|s| n.contains(s))
        || n == "AGENCY_TOKEN"
}

fn sql_destructive(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    let words: Vec<&str> = t
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).any(|w| {
        (w[0] == "drop" && matches!(w[1], "database" | "table" | "schema"))
            || (w[0] == "truncate" && w[1] == "table")
    })
}
