//! The program a standby sandbox runs, sent to it once it is ready.
//!
//! Confining a process costs milliseconds that are mostly waiting on the
//! kernel: moving it into its cgroups waits for an RCU grace period per
//! hierarchy (the cgroup threadgroup lock), and a network namespace takes
//! a few more. So the daemon starts `agency sandbox-exec --policy FILE
//! --await-command` ahead of need: it applies the whole policy, then
//! reads one [`ExecRequest`] from its stdin and execs it. An agent's spawn
//! then costs a pipe write instead of the sandbox's set-up.
//!
//! The encoding is the daemon's to its own child, over a pipe only the two
//! hold: NUL-separated fields (a NUL can be in no path, argument or
//! environment entry), a version tag first, so a mismatch between the
//! daemon and an `agency` binary replaced underneath it fails clearly.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// What a standby sandbox reads before it gives up: a command line is
/// bounded by the kernel's 2 MiB of arguments and environment anyway.
pub const MAX_EXEC_REQUEST: usize = 8 << 20;

const TAG: &[u8] = b"agency-exec-1";

/// Why a command could not be encoded (the daemon's side) or decoded (the
/// standby sandbox's). Names the field, never shows an argument or a
/// variable's value, which may be a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecRequestError {
    #[error("failed to encode the command: the program {} is not an absolute path", .0.display())]
    RelativeProgram(PathBuf),
    #[error(
        "failed to encode the command: the environment name {0:?} is empty or holds '=' or NUL"
    )]
    EnvName(String),
    /// Holds the field's name (`argument 2`, `the environment variable X`).
    #[error("failed to encode the command: {0} holds a NUL byte")]
    Nul(String),
    #[error(
        "failed to encode the command: it is {0} bytes, over the {MAX_EXEC_REQUEST} a standby sandbox reads"
    )]
    TooLarge(usize),
    #[error("the command is {0} bytes, over {MAX_EXEC_REQUEST}")]
    ReadTooLarge(usize),
    #[error(
        "the command does not start with {:?}: the daemon and this agency binary differ",
        String::from_utf8_lossy(TAG)
    )]
    Tag,
    #[error("the command ends before its {0}")]
    Truncated(&'static str),
    #[error("the program {} is not an absolute path", .0.display())]
    ReadRelativeProgram(PathBuf),
    #[error("the argument count is not a number")]
    ArgumentCount,
    #[error("the environment entry {0:?} is not NAME=VALUE")]
    EnvEntry(String),
}

/// One program to exec: absolute path, arguments (without `argv[0]`), the
/// whole environment and the working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: Option<PathBuf>,
}

impl ExecRequest {
    /// The bytes to send; fails (naming the field) on a NUL, a relative
    /// program, or an environment name that is empty or holds `=`.
    pub fn encode(&self) -> Result<Vec<u8>, ExecRequestError> {
        if !self.program.is_absolute() {
            return Err(ExecRequestError::RelativeProgram(self.program.clone()));
        }
        // Named, never shown: an argument or a variable may be a secret.
        let mut fields: Vec<(String, Vec<u8>)> = vec![
            ("the tag".into(), TAG.to_vec()),
            (
                "the working directory".into(),
                self.cwd
                    .as_deref()
                    .map_or(Vec::new(), |c| c.as_os_str().as_bytes().to_vec()),
            ),
            (
                "the program".into(),
                self.program.as_os_str().as_bytes().to_vec(),
            ),
            (
                "the argument count".into(),
                self.args.len().to_string().into_bytes(),
            ),
        ];
        for (i, a) in self.args.iter().enumerate() {
            fields.push((format!("argument {}", i + 1), a.as_bytes().to_vec()));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.as_bytes().contains(&b'=') || k.as_bytes().contains(&0) {
                return Err(ExecRequestError::EnvName(k.to_string_lossy().into_owned()));
            }
            let name = format!("the environment variable {}", k.to_string_lossy());
            fields.push((name, [k.as_bytes(), b"=", v.as_bytes()].concat()));
        }
        if let Some((name, _)) = fields.iter().find(|(_, f)| f.contains(&0)) {
            return Err(ExecRequestError::Nul(name.clone()));
        }
        let out = fields
            .into_iter()
            .map(|(_, f)| f)
            .collect::<Vec<_>>()
            .join(&0u8);
        if out.len() > MAX_EXEC_REQUEST {
            return Err(ExecRequestError::TooLarge(out.len()));
        }
        Ok(out)
    }

    /// Read back what [`ExecRequest::encode`] wrote; the error says what
    /// is wrong with it.
    pub fn decode(bytes: &[u8]) -> Result<ExecRequest, ExecRequestError> {
        if bytes.len() > MAX_EXEC_REQUEST {
            return Err(ExecRequestError::ReadTooLarge(bytes.len()));
        }
        let mut fields = bytes.split(|b| *b == 0);
        if fields.next() != Some(TAG) {
            return Err(ExecRequestError::Tag);
        }
        let mut next = |what: &'static str| fields.next().ok_or(ExecRequestError::Truncated(what));
        let cwd = next("working directory")?;
        let cwd = (!cwd.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(cwd)));
        let program = PathBuf::from(OsStr::from_bytes(next("program")?));
        if !program.is_absolute() {
            return Err(ExecRequestError::ReadRelativeProgram(program));
        }
        let nargs: usize = std::str::from_utf8(next("argument count")?)
            .ok()
            .and_then(|n| n.parse().ok())
            .ok_or(ExecRequestError::ArgumentCount)?;
        let mut args = Vec::new();
        for _ in 0..nargs {
            args.push(OsString::from_vec(next("arguments")?.to_vec()));
        }
        let mut env = Vec::new();
        for entry in fields {
            let eq = entry
                .iter()
                .position(|b| *b == b'=')
                .filter(|i| *i > 0)
                .ok_or_else(|| {
                    ExecRequestError::EnvEntry(String::from_utf8_lossy(entry).into_owned())
                })?;
            env.push((
                OsString::from_vec(entry[..eq].to_vec()),
                OsString::from_vec(entry[eq + 1..].to_vec()),
            ));
        }
        Ok(ExecRequest {
            program,
            args,
            env,
            cwd,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ExecRequest {
        ExecRequest {
            program: PathBuf::from("/usr/bin/env"),
            args: vec!["a b".into(), "".into(), "x=y".into()],
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("EMPTY".into(), "".into()),
                ("EQ".into(), "a=b=c".into()),
            ],
            cwd: Some(PathBuf::from("/tmp/work space")),
        }
    }

    #[test]
    fn a_request_reads_back_as_written() {
        let r = sample();
        assert_eq!(ExecRequest::decode(&r.encode().unwrap()).unwrap(), r);
        let bare = ExecRequest {
            args: vec![],
            env: vec![],
            cwd: None,
            ..sample()
        };
        assert_eq!(ExecRequest::decode(&bare.encode().unwrap()).unwrap(), bare);
    }

    #[test]
    fn what_cannot_be_sent_is_refused_by_name() {
        let mut cases: Vec<(ExecRequest, &str)> = vec![
            (
                ExecRequest {
                    program: "bin/sh".into(),
                    ..sample()
                },
                "not an absolute path",
            ),
            (
                ExecRequest {
                    args: vec!["x".into(), "secret\0b".into()],
                    ..sample()
                },
                "argument 2 holds a NUL",
            ),
            (
                ExecRequest {
                    env: vec![("A=B".into(), "c".into())],
                    ..sample()
                },
                "holds '='",
            ),
            (
                ExecRequest {
                    env: vec![("".into(), "c".into())],
                    ..sample()
                },
                "empty",
            ),
        ];
        cases.push((
            ExecRequest {
                env: vec![("TOKEN".into(), "secret\0x".into())],
                ..sample()
            },
            "variable TOKEN holds a NUL",
        ));
        for (r, want) in cases {
            let e = r.encode().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("secret"), "a value was shown: {e}");
        }
    }

    #[test]
    fn bad_bytes_are_refused_with_the_reason() {
        let good = sample().encode().unwrap();
        let cut = &good[..good.iter().position(|b| *b == 0).unwrap() + 1];
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"other-1\0/\0/bin/true\x000".to_vec(), "differ"),
            (cut.to_vec(), "program"),
            (b"agency-exec-1\0\0bin/true\x000".to_vec(), "absolute"),
            (
                b"agency-exec-1\0\0/bin/true\0two".to_vec(),
                "argument count",
            ),
            (b"agency-exec-1\0\0/bin/true\x002\0a".to_vec(), "arguments"),
            (
                b"agency-exec-1\0\0/bin/true\x000\0NOVALUE".to_vec(),
                "NAME=VALUE",
            ),
            (
                b"agency-exec-1\0\0/bin/true\x000\0=x".to_vec(),
                "NAME=VALUE",
            ),
            (vec![b'a'; MAX_EXEC_REQUEST + 1], "over"),
        ];
        for (bytes, want) in cases {
            let e = ExecRequest::decode(&bytes).unwrap_err().to_string();
            assert!(e.contains(want), "{e} (wanted {want})");
        }
    }
}
