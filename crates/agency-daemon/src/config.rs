//! `agency.toml`: the daemon's configuration. Unknown keys are refused so a
//! typo never silently does nothing.

use std::path::Path;

use agency_core::Limits;
use serde::{Deserialize, Serialize};

use crate::error::DaemonError;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub limits: LimitsConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// TCP port on 127.0.0.1; 0 picks a free one (written to `daemon.json`).
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest KB file or message body accepted, in bytes.
    pub max_file_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_file_bytes: Limits::default().max_file_bytes,
        }
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, DaemonError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| DaemonError::io("read configuration", path, e))?;
        Config::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Config, DaemonError> {
        let cfg: Config = toml::from_str(text).map_err(|e| DaemonError::Config {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if cfg.limits.max_file_bytes == 0 || cfg.limits.max_file_bytes > 1 << 30 {
            return Err(DaemonError::Config {
                path: path.to_owned(),
                message: format!(
                    "limits.max_file_bytes = {} is out of range (1 byte to 1 GiB)",
                    cfg.limits.max_file_bytes
                ),
            });
        }
        Ok(cfg)
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_file_bytes: self.limits.max_file_bytes,
            ..Limits::default()
        }
    }
}

/// The commented configuration `agency init` writes.
pub(crate) const TEMPLATE: &str = r#"# Agency configuration. Every key is optional; the values shown are the
# defaults. Unknown keys are refused.

[server]
# TCP port on 127.0.0.1 (Agency never listens on other interfaces).
# 0 picks a free port; the chosen address is written to daemon.json
# in this directory for the CLI to find.
port = 0

[limits]
# Largest Knowledge Base file or message body accepted, in bytes.
max_file_bytes = 8388608
"#;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn template_parses_to_defaults() {
        assert_eq!(
            Config::parse(Path::new("t"), TEMPLATE).unwrap(),
            Config::default()
        );
    }

    #[test]
    fn bad_configs_are_refused_with_the_file_named() {
        for bad in [
            "[server]\nprot = 1\n",
            "[limits]\nmax_file_bytes = 0\n",
            "server = 3",
            "[server]\nport = 70000\n",
        ] {
            let e = Config::parse(Path::new("/h/agency.toml"), bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("/h/agency.toml"), "{e}");
        }
    }
}
