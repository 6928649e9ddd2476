//! Secrets: declared in `[secrets]` of `agency.toml` as where to read them
//! (a file, an environment variable of the daemon, or a command such as a
//! password manager's CLI), read once at daemon start, kept in memory only.
//!
//! Values are referenced from extra MCP servers' environment and headers as
//! `${secret:NAME}`. Nothing here writes a value anywhere: each is held as
//! a `secrecy` [`SecretString`], whose `Debug` is redacted and whose memory
//! is zeroed when it is dropped, and is read only through
//! [`ExposeSecret::expose_secret`] where it must be sent; errors name the
//! secret and its source but never hold the value, and resolution happens
//! only when a launcher asks for the server a handler holds a capability on
//! (see `mcp_servers.rs`).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use secrecy::zeroize::Zeroizing;
pub use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

/// Where one secret is read from. Exactly one of the fields is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecretSource {
    /// A file holding the value (a relative path is relative to the home);
    /// one trailing newline is dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// An environment variable of the daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// A program and its arguments whose standard output is the value
    /// (e.g. `["op", "read", "op://vault/item/field"]`); run without a
    /// shell, once, at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

impl SecretSource {
    /// Why this source is not usable as written, if it is not.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        let set = [
            self.file.is_some(),
            self.env.is_some(),
            self.command.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if set != 1 {
            return Some("give exactly one of file, env or command");
        }
        if self.command.as_ref().is_some_and(|c| c.is_empty()) {
            return Some("command must name a program");
        }
        None
    }
}

/// Why a secret could not be read. Never holds the value.
#[derive(Debug, thiserror::Error)]
#[error("failed to read secret {name:?} from {source_desc}: {reason}")]
pub struct SecretError {
    pub name: String,
    pub source_desc: String,
    pub reason: String,
}

/// Why a `${secret:NAME}` template could not be read or filled in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("a ${{secret:… reference is not closed with }}")]
    Unclosed,
    #[error("a ${{secret:}} reference names no secret")]
    NoName,
    /// Config validation makes sure every name is declared: met only by a
    /// template that escaped it.
    #[error("secret {0:?} is not declared in [secrets]")]
    Undeclared(String),
}

/// The secrets read at start, by name.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    values: BTreeMap<String, SecretString>,
}

/// How long a secret command may take (a password manager may prompt a
/// biometric unlock; longer than this is a hung command).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

impl Secrets {
    /// Read every declared secret; the first failure is returned.
    pub fn load(
        sources: &BTreeMap<String, SecretSource>,
        home: &Path,
    ) -> Result<Secrets, SecretError> {
        let mut values = BTreeMap::new();
        for (name, source) in sources {
            values.insert(name.clone(), read_one(name, source, home)?);
        }
        Ok(Secrets { values })
    }

    pub fn get(&self, name: &str) -> Option<&SecretString> {
        self.values.get(name)
    }

    /// Every value, for redaction and for tests that look for leaks.
    pub fn values(&self) -> impl Iterator<Item = &SecretString> {
        self.values.values()
    }

    /// Secrets given as they are, for tests of what uses them.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Secrets {
        Secrets {
            values: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), SecretString::from(*v)))
                .collect(),
        }
    }
}

fn read_one(name: &str, source: &SecretSource, home: &Path) -> Result<SecretString, SecretError> {
    let fail = |desc: String, reason: String| SecretError {
        name: name.to_owned(),
        source_desc: desc,
        reason,
    };
    let (desc, value) = if let Some(file) = &source.file {
        let path = home.join(file);
        let desc = format!("file {}", path.display());
        match std::fs::read(&path) {
            Ok(bytes) => (desc, bytes),
            Err(e) => return Err(fail(desc, e.to_string())),
        }
    } else if let Some(var) = &source.env {
        let desc = format!("environment variable {var}");
        match std::env::var_os(var) {
            Some(v) => (desc, v.into_encoded_bytes()),
            None => return Err(fail(desc, "it is not set".to_owned())),
        }
    } else if let Some(argv) = &source.command {
        let desc = format!("command {:?}", argv.first().map_or("", String::as_str));
        match run_command(argv) {
            Ok(out) => (desc, out),
            Err(reason) => return Err(fail(desc, reason)),
        }
    } else {
        return Err(fail(
            "nowhere".to_owned(),
            "give exactly one of file, env or command".to_owned(),
        ));
    };
    // The bytes read are zeroed when dropped; the value is copied once, into
    // its `SecretString`.
    let value = Zeroizing::new(value);
    let text = std::str::from_utf8(&value)
        .map_err(|_| fail(desc.clone(), "it is not UTF-8".to_owned()))?;
    // `echo x > file` and password-manager CLIs end the value with a newline
    // that is not part of it.
    let text = text
        .strip_suffix('\n')
        .map_or(text, |t| t.strip_suffix('\r').unwrap_or(t));
    if text.is_empty() {
        return Err(fail(desc, "it is empty".to_owned()));
    }
    Ok(SecretString::from(text))
}

/// Run a secret command: stdout is the value; a failure reports the exit
/// status and the first line of stderr (which does not hold the value).
fn run_command(argv: &[String]) -> Result<Vec<u8>, String> {
    let (program, args) = argv.split_first().ok_or("command is empty")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("failed to run it: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "it did not finish within {} s",
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("failed to wait for it: {e}")),
        }
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        let first = String::from_utf8_lossy(&err)
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect::<String>();
        return Err(format!("it exited with {status}: {first}"));
    }
    Ok(out)
}

/// Walk `template`: literal text goes to `text`, each `${secret:NAME}`
/// reference's name to `reference`. The one parser of the syntax.
fn walk<'a>(
    template: &'a str,
    mut text: impl FnMut(&'a str),
    mut reference: impl FnMut(&'a str) -> Result<(), TemplateError>,
) -> Result<(), TemplateError> {
    const OPEN: &str = "${secret:";
    let mut rest = template;
    while let Some(at) = rest.find(OPEN) {
        text(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let end = after.find('}').ok_or(TemplateError::Unclosed)?;
        let name = &after[..end];
        if name.is_empty() {
            return Err(TemplateError::NoName);
        }
        reference(name)?;
        rest = &after[end + 1..];
    }
    text(rest);
    Ok(())
}

/// The names of the secrets `template` references (`${secret:NAME}`).
pub fn references(template: &str) -> Result<Vec<&str>, TemplateError> {
    let mut names = Vec::new();
    walk(
        template,
        |_| {},
        |name| {
            names.push(name);
            Ok(())
        },
    )?;
    Ok(names)
}

/// Replace every `${secret:NAME}` in `template` by the secret's value: a
/// secret itself. Config validation made sure every name is declared; an
/// unknown one here is an error all the same.
pub fn interpolate(template: &str, secrets: &Secrets) -> Result<SecretString, TemplateError> {
    let pieces = std::cell::RefCell::new(Vec::new());
    walk(
        template,
        |t| pieces.borrow_mut().push(t),
        |name| {
            let value = secrets
                .get(name)
                .ok_or_else(|| TemplateError::Undeclared(name.to_owned()))?;
            pieces.borrow_mut().push(value.expose_secret());
            Ok(())
        },
    )?;
    // Sized at once: a growing string would leave copies of the secrets
    // in the memory it let go of.
    let pieces = pieces.into_inner();
    let mut out = String::with_capacity(pieces.iter().map(|p| p.len()).sum());
    for p in pieces {
        out.push_str(p);
    }
    Ok(SecretString::from(out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn source(toml_text: &str) -> SecretSource {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn secrets_are_read_from_file_env_and_command() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tok"), "from-file\n").unwrap();
        // The workspace forbids `unsafe`, so `set_var` is out: read a
        // variable every test process has.
        let var = "PATH";
        let mut sources = BTreeMap::new();
        sources.insert("a".to_owned(), source("file = \"tok\""));
        sources.insert("b".to_owned(), source(&format!("env = \"{var}\"")));
        sources.insert(
            "c".to_owned(),
            source("command = [\"sh\", \"-c\", \"printf 'from-command\\\\r\\\\n'\"]"),
        );
        let s = Secrets::load(&sources, dir.path()).unwrap();
        assert_eq!(s.get("a").unwrap().expose_secret(), "from-file");
        assert_eq!(
            s.get("b").unwrap().expose_secret(),
            std::env::var(var).unwrap()
        );
        assert_eq!(s.get("c").unwrap().expose_secret(), "from-command");
        assert!(!format!("{:?}", s.get("a").unwrap()).contains("from-"));
        assert!(!format!("{s:?}").contains("from-"));
    }

    #[test]
    fn failures_name_the_secret_and_source_but_not_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("file = \"missing\"", "file "),
            ("env = \"AGENCY_TEST_SURELY_UNSET_VAR\"", "it is not set"),
            (
                "command = [\"sh\", \"-c\", \"echo hunter2; echo boom >&2; exit 3\"]",
                "exited with exit status: 3: boom",
            ),
            ("command = [\"sh\", \"-c\", \"true\"]", "it is empty"),
            ("command = [\"/nonexistent/op\"]", "failed to run it"),
        ];
        for (src, want) in cases {
            let mut sources = BTreeMap::new();
            sources.insert("tok".to_owned(), source(src));
            let e = Secrets::load(&sources, dir.path()).unwrap_err().to_string();
            assert!(e.starts_with("failed to read secret \"tok\""), "{e}");
            assert!(e.contains(want), "{src}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn references_and_interpolation() {
        let s = Secrets::from_pairs(&[("gh", "ghp_x"), ("k", "v")]);
        let cases = [
            ("plain", "plain"),
            ("Bearer ${secret:gh}", "Bearer ghp_x"),
            ("${secret:k}${secret:k}-$HOME-${other}", "vv-$HOME-${other}"),
        ];
        for (t, want) in cases {
            assert_eq!(interpolate(t, &s).unwrap().expose_secret(), want);
        }
        assert_eq!(
            references("a ${secret:gh} b ${secret:k}").unwrap(),
            ["gh", "k"]
        );
        assert_eq!(references("${secret:gh"), Err(TemplateError::Unclosed));
        assert_eq!(references("${secret:}"), Err(TemplateError::NoName));
        let e = interpolate("${secret:nope}", &s).unwrap_err();
        assert_eq!(
            e.to_string(),
            "secret \"nope\" is not declared in [secrets]"
        );
        assert!(!format!("{:?}", interpolate("${secret:gh}", &s).unwrap()).contains("ghp_x"));
    }
}
