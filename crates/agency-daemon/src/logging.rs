//! The daemon's log: `tracing` events of every crate (ours, rmcp, axum,
//! tower-http, and `log` records through `tracing-log`) go to
//! `logs/daemon.log` in the home, filtered by `RUST_LOG` or else
//! `[log] level`, rotated by size. Installed by `agency serve` (the binary
//! owns the process's global subscriber; this crate only builds it), so
//! the library itself never prints to the terminal.
//!
//! What is logged never includes a token or a secret: request spans carry
//! the method and path (never headers, and path segments that look like
//! tokens are elided), and no event of ours formats a token.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::error::DaemonError;
use agency_config::LogConfig;
use agency_config::home::Home;

/// Where the daemon's log of `home` is written.
pub fn log_path(home: &Home) -> PathBuf {
    home.dir().join("logs").join("daemon.log")
}

/// Install the process-wide subscriber writing to the home's
/// `logs/daemon.log`. `RUST_LOG`, when set and not empty, overrides the
/// configured level; a `RUST_LOG` that does not parse is reported in the
/// log and the configured level is used. Fails if the log file cannot be
/// opened or a subscriber is already installed.
pub fn init(home: &Home) -> Result<PathBuf, DaemonError> {
    let cfg = home.config()?.log;
    let path = log_path(home);
    let writer = RotatingFile::open(&path, cfg.file_max_bytes, cfg.files_kept)?;
    let env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let (filter, bad_env) = match env {
        Some(v) => match EnvFilter::builder().parse(&v) {
            Ok(f) => (f, None),
            Err(e) => (configured(&cfg), Some((v, e.to_string()))),
        },
        None => (configured(&cfg), None),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(writer),
        )
        .try_init()
        .map_err(|e| DaemonError::io("install the logger for", &path, std::io::Error::other(e)))?;
    if let Some((v, e)) = bad_env {
        tracing::warn!(rust_log = %v, error = %e, "RUST_LOG is not a valid filter; using [log] level");
    }
    Ok(path)
}

fn configured(cfg: &LogConfig) -> EnvFilter {
    // Config::parse has checked it; "info" is the fallback for a config
    // built in code.
    EnvFilter::builder()
        .parse(&cfg.level)
        .unwrap_or_else(|_| EnvFilter::new("info"))
}

/// A log file rotated by size: a write that would take it past `max_bytes`
/// first renames `daemon.log` to `daemon.log.1` (and `.1` to `.2`, …,
/// keeping `keep` old files). One event is one write, so no line is split
/// across files. Created 0600 in a 0700 directory: the log names agents,
/// handlers and paths.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    state: Mutex<Open>,
}

#[derive(Debug)]
struct Open {
    file: Option<File>,
    len: u64,
}

impl RotatingFile {
    pub fn open(path: &Path, max_bytes: u64, keep: u32) -> Result<RotatingFile, DaemonError> {
        if let Some(dir) = path.parent() {
            create_private_dir(dir)?;
        }
        let file = open_append(path).map_err(|e| DaemonError::io("open the log", path, e))?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(RotatingFile {
            path: path.to_owned(),
            max_bytes,
            keep,
            state: Mutex::new(Open {
                file: Some(file),
                len,
            }),
        })
    }

    fn rotated(&self, n: u32) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&self, state: &mut Open) -> std::io::Result<()> {
        state.file = None;
        if self.keep == 0 {
            let _ = std::fs::remove_file(&self.path);
        } else {
            for n in (1..self.keep).rev() {
                let from = self.rotated(n);
                if from.exists() {
                    std::fs::rename(&from, self.rotated(n + 1))?;
                }
            }
            std::fs::rename(&self.path, self.rotated(1))?;
        }
        state.file = Some(open_append(&self.path)?);
        state.len = 0;
        Ok(())
    }

    fn write_event(&self, buf: &[u8]) -> std::io::Result<usize> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.len > 0 && state.len + buf.len() as u64 > self.max_bytes {
            // A failed rotation keeps logging to the file we have (or a
            // fresh one): losing the log is worse than an oversized file.
            if self.rotate(&mut state).is_err() && state.file.is_none() {
                state.file = open_append(&self.path).ok();
            }
        }
        let Some(file) = state.file.as_mut() else {
            return Ok(buf.len());
        };
        file.write_all(buf)?;
        state.len += buf.len() as u64;
        Ok(buf.len())
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

fn create_private_dir(dir: &Path) -> Result<(), DaemonError> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| DaemonError::io("create", dir, e))
}

/// One event's writer: a handle on the shared file.
#[derive(Debug)]
pub struct EventWriter<'a>(&'a RotatingFile);

impl Write for EventWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_event(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for RotatingFile {
    type Writer = EventWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        EventWriter(self)
    }
}

/// The path of a request as logged: segments that could be a credential
/// (long, and not a UUID) are elided. No route carries one today; this
/// keeps a future one out of the log.
pub(crate) fn loggable_path(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            if seg.len() > 40 && uuid::Uuid::parse_str(seg).is_err() {
                "…"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

type MakeSpan = fn(&http::Request<axum::body::Body>) -> tracing::Span;
type OnResponse = fn(&http::Response<axum::body::Body>, std::time::Duration, &tracing::Span);
type HttpTraceLayer = tower_http::trace::TraceLayer<
    tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>,
    MakeSpan,
    (),
    OnResponse,
>;

/// The request span and response event of the HTTP server: method and
/// path (never headers: they carry tokens), then status and latency.
pub(crate) fn http_trace_layer() -> HttpTraceLayer {
    fn make_span(req: &http::Request<axum::body::Body>) -> tracing::Span {
        tracing::info_span!(
            "http",
            method = %req.method(),
            path = %loggable_path(req.uri().path()),
        )
    }
    fn on_response(
        res: &http::Response<axum::body::Body>,
        latency: std::time::Duration,
        _: &tracing::Span,
    ) {
        let status = res.status().as_u16();
        let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        if res.status().is_server_error() {
            tracing::warn!(status, latency_us, "request failed");
        } else {
            tracing::info!(status, latency_us, "request finished");
        }
    }
    tower_http::trace::TraceLayer::new_for_http()
        .make_span_with(make_span as fn(&_) -> _)
        .on_request(())
        .on_response(on_response as fn(&_, _, &_))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_by_size_and_keeps_n_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("logs/daemon.log");
        let log = RotatingFile::open(&path, 100, 2).unwrap();
        for i in 0..10 {
            let line = format!("event {i} {}\n", "x".repeat(30));
            log.make_writer().write_all(line.as_bytes()).unwrap();
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let current = read(&path);
        assert!(
            current.len() <= 100 && current.ends_with("event 9 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n")
        );
        assert!(read(&log.rotated(1)).contains("event 7 "));
        assert!(read(&log.rotated(2)).contains("event 4 "));
        assert!(!log.rotated(3).exists(), "only two old files are kept");
        // Whole events only: every file is a sequence of full lines.
        for p in [path.clone(), log.rotated(1), log.rotated(2)] {
            assert!(
                read(&p)
                    .lines()
                    .all(|l| l.starts_with("event ") && l.len() == 38)
            );
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn long_path_segments_are_elided() {
        let uuid = "0b6f5c8e-2a51-4c1e-9d0e-3f1c2b4a5d6e";
        assert_eq!(
            loggable_path(&format!("/v1/handlers/{uuid}")),
            format!("/v1/handlers/{uuid}")
        );
        let token = "a".repeat(64);
        assert_eq!(loggable_path(&format!("/launch/x/{token}")), "/launch/x/…");
    }
}
