//! Extra MCP servers (`[mcp_servers.NAME]` in `agency.toml`): what they are,
//! which agents get them, and how they are started without their secrets
//! ever passing through the agent.
//!
//! A handler that holds a capability on `mcp_server:NAME` gets, in every
//! agent's MCP configuration, an entry that runs `agency mcp-launch NAME`
//! (stdio). The launcher asks the daemon (`POST /launch/NAME`, the agent's
//! token and the spawn's single-use launch nonce) for the server's command
//! and environment with `${secret:…}` references filled in; the daemon
//! asks the service whether the caller holds the capability *now*. The
//! launcher then becomes the server (exec, from an empty environment plus
//! the server's own `env`). An HTTP server is bridged to the daemon's
//! `/mcp-proxy/NAME`, which adds its headers. So a secret lives in the
//! daemon's memory and in a stdio server's process, and nowhere else: not
//! in a file, not in the agent's environment, not in a transcript.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::mcp_manifest::{Compiled, ManifestError};
use crate::secrets::{self, SecretSource, SecretString, Secrets, TemplateError};

/// Why a declared server's launch specification could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// A `${secret:…}` of its `env`, `url` or `headers`.
    #[error(transparent)]
    Secret(#[from] TemplateError),
    /// Met only by a definition that escaped the checks at start.
    #[error("MCP server {0} has neither command nor url")]
    NoCommandNorUrl(String),
}

/// The name Agency's own server has in agents' MCP configurations.
pub const AGENCY_SERVER: &str = "agency";

/// One extra MCP server: a command (stdio) or a URL (streamable HTTP).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// The program to run (stdio transport), looked up in `PATH`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub args: Vec<String>,
    /// Environment of the server process; values may hold `${secret:NAME}`.
    pub env: BTreeMap<String, String>,
    /// The server's URL (streamable HTTP), instead of a command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent to `url`; values may hold `${secret:NAME}`.
    pub headers: BTreeMap<String, String>,
    /// The server's capability manifest (`mcp_manifest.rs`): an inline
    /// table, or the path of a JSON or TOML file relative to the home,
    /// which `load_manifests` replaces by its content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<serde_json::Value>,
}

/// A server's launch: what the daemon runs or reaches, with its secrets
/// filled in, or what `/launch` tells the launcher.
///
/// The filled-in values (a stdio server's `env`, an HTTP server's URL and
/// headers) are [`SecretString`]s, exposed only where a variable is passed
/// or a header set; they are never logged. Only [`LaunchSpec::Proxy`] goes
/// over the wire: the other two are skipped by serde, so a secret cannot
/// be serialized by mistake (serializing one is an error).
#[derive(Clone, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum LaunchSpec {
    #[serde(skip)]
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, SecretString>,
    },
    /// The URL may hold a secret too (`${secret:…}` is allowed there).
    #[serde(skip)]
    Http {
        url: SecretString,
        headers: BTreeMap<String, SecretString>,
    },
    /// An HTTP server reached through the daemon's `/mcp-proxy/NAME`, with
    /// the agent's token: its URL and headers (its secrets) stay in the
    /// daemon. What `/launch` answers for an HTTP server.
    Proxy { url: String },
}

impl std::fmt::Debug for LaunchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values may be secrets: show the shape only.
        match self {
            LaunchSpec::Stdio { command, env, .. } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish_non_exhaustive(),
            LaunchSpec::Http { headers, .. } => f
                .debug_struct("Http")
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish_non_exhaustive(),
            LaunchSpec::Proxy { url } => f.debug_struct("Proxy").field("url", url).finish(),
        }
    }
}

/// Check `[mcp_servers]` against `[secrets]`: the problem, if any, as a
/// sentence naming the server.
pub(crate) fn validate(
    servers: &BTreeMap<String, McpServerConfig>,
    secrets: &BTreeMap<String, SecretSource>,
) -> Result<(), String> {
    for (name, source) in secrets {
        agency_core::validate::check_name("secret", name).map_err(|e| format!("[secrets]: {e}"))?;
        if let Some(p) = source.problem() {
            return Err(format!("[secrets] {name}: {p}"));
        }
    }
    for (name, s) in servers {
        let at = format!("[mcp_servers.{name}]");
        agency_core::validate::check_name("mcp server", name).map_err(|e| format!("{at}: {e}"))?;
        if name == AGENCY_SERVER {
            return Err(format!(
                "{at}: the name {AGENCY_SERVER:?} is Agency's own server; choose another"
            ));
        }
        match (&s.command, &s.url) {
            (Some(c), None) => {
                if c.trim().is_empty() {
                    return Err(format!("{at}: command is empty"));
                }
                if !s.headers.is_empty() {
                    return Err(format!("{at}: headers need url, not command"));
                }
            }
            (None, Some(u)) => {
                if !(u.starts_with("http://") || u.starts_with("https://")) {
                    return Err(format!("{at}: url {u:?} is not http:// or https://"));
                }
                if !s.env.is_empty() || !s.args.is_empty() {
                    return Err(format!("{at}: env and args need command, not url"));
                }
            }
            _ => return Err(format!("{at}: give exactly one of command or url")),
        }
        for arg in &s.args {
            if !secrets::references(arg)
                .map_err(|e| format!("{at} args: {e}"))?
                .is_empty()
            {
                return Err(format!(
                    "{at}: put secrets in env, not args (arguments are visible to every local user in the process list)"
                ));
            }
        }
        let templated = s
            .env
            .iter()
            .map(|(k, v)| (format!("env {k}"), v))
            .chain(s.headers.iter().map(|(k, v)| (format!("header {k}"), v)))
            .chain(s.url.iter().map(|u| ("url".to_owned(), u)));
        for (what, value) in templated {
            for secret in secrets::references(value).map_err(|e| format!("{at} {what}: {e}"))? {
                if !secrets.contains_key(secret) {
                    return Err(format!(
                        "{at} {what}: secret {secret:?} is not declared in [secrets]"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Read and check every server's manifest, replacing a file reference by
/// the file's content, so that what the daemon runs with is what was
/// checked. The home is the directory of `agency.toml`.
pub(crate) fn load_manifests(
    servers: &mut BTreeMap<String, McpServerConfig>,
    home: &std::path::Path,
) -> Result<(), String> {
    for (name, s) in servers.iter_mut() {
        if let Some(value) = &s.manifest {
            let m = crate::mcp_manifest::load(name, value, home).map_err(|e| e.to_string())?;
            s.manifest = Some(
                serde_json::to_value(&m)
                    .map_err(|e| format!("[mcp_servers.{name}] manifest: {e}"))?,
            );
        }
    }
    Ok(())
}

/// The declared servers with the secrets read at start. The definitions
/// are replaced by `agency reload` (for agents and launches from then
/// on); the secrets are read once.
#[derive(Debug, Default)]
pub struct McpServers {
    defs: crate::live::Live<Defs>,
    secrets: Secrets,
}

/// The servers of one reading of `agency.toml`.
#[derive(Debug, Default)]
struct Defs {
    servers: BTreeMap<String, McpServerConfig>,
    /// Compiled manifests of the servers that declare one (an error only
    /// if a manifest escaped the checks at start: every call is refused).
    manifests: BTreeMap<String, std::sync::Arc<Result<Compiled, ManifestError>>>,
}

impl Defs {
    fn new(servers: BTreeMap<String, McpServerConfig>) -> Defs {
        let manifests = servers
            .iter()
            .filter_map(|(name, s)| {
                let v = s.manifest.as_ref()?;
                let at = format!("[mcp_servers.{name}] manifest");
                let compiled = crate::mcp_manifest::parse(v, &at).and_then(Compiled::new);
                Some((name.clone(), std::sync::Arc::new(compiled)))
            })
            .collect();
        Defs { servers, manifests }
    }
}

impl McpServers {
    pub fn new(servers: BTreeMap<String, McpServerConfig>, secrets: Secrets) -> McpServers {
        McpServers {
            defs: crate::live::Live::new(Defs::new(servers)),
            secrets,
        }
    }

    /// `agency reload`: the definitions from now on (their secrets were
    /// read at start; the reload checked that they name no other).
    pub fn set_servers(&self, servers: BTreeMap<String, McpServerConfig>) {
        self.defs.store(Defs::new(servers));
    }

    /// The server's compiled manifest, if it declares one.
    pub fn manifest(&self, name: &str) -> Option<std::sync::Arc<Result<Compiled, ManifestError>>> {
        self.defs.load().manifests.get(name).cloned()
    }

    pub fn is_declared(&self, name: &str) -> bool {
        self.defs.load().servers.contains_key(name)
    }

    /// Every secret value, so that redaction (and tests) can look for
    /// them; borrowed, so that no copy outlives the registry.
    pub fn secret_values(&self) -> impl Iterator<Item = &SecretString> {
        self.secrets.values()
    }

    /// The server's launch specification with secrets filled in: the
    /// server's environment or headers, which must hold the values.
    pub fn resolve(&self, name: &str) -> Option<Result<LaunchSpec, ResolveError>> {
        let defs = self.defs.load();
        let s = defs.servers.get(name)?;
        let filled = |v: &str| -> Result<SecretString, ResolveError> {
            Ok(secrets::interpolate(v, &self.secrets)?)
        };
        let fill =
            |m: &BTreeMap<String, String>| -> Result<BTreeMap<String, SecretString>, ResolveError> {
                m.iter().map(|(k, v)| Ok((k.clone(), filled(v)?))).collect()
            };
        Some((|| match (&s.command, &s.url) {
            (Some(command), _) => Ok(LaunchSpec::Stdio {
                command: command.clone(),
                args: s.args.clone(),
                env: fill(&s.env)?,
            }),
            (None, Some(url)) => Ok(LaunchSpec::Http {
                url: filled(url)?,
                headers: fill(&s.headers)?,
            }),
            (None, None) => Err(ResolveError::NoCommandNorUrl(name.to_owned())),
        })())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::secrets::ExposeSecret;

    fn parse(
        text: &str,
    ) -> (
        BTreeMap<String, McpServerConfig>,
        BTreeMap<String, SecretSource>,
    ) {
        #[derive(Deserialize)]
        struct T {
            #[serde(default)]
            mcp_servers: BTreeMap<String, McpServerConfig>,
            #[serde(default)]
            secrets: BTreeMap<String, SecretSource>,
        }
        let t: T = toml::from_str(text).unwrap();
        (t.mcp_servers, t.secrets)
    }

    #[test]
    fn valid_servers_resolve_with_secrets_filled_in() {
        let (servers, sources) = parse(
            r#"
            [secrets]
            gh = { env = "X" }
            [mcp_servers.files]
            command = "mcp-files"
            args = ["--root", "/srv"]
            env = { TOKEN = "${secret:gh}", MODE = "ro" }
            [mcp_servers.github]
            url = "https://example.test/mcp"
            headers = { Authorization = "Bearer ${secret:gh}" }
            "#,
        );
        validate(&servers, &sources).unwrap();
        let reg = McpServers::new(servers, Secrets::from_pairs(&[("gh", "ghp_secret")]));
        let LaunchSpec::Stdio { command, args, env } = reg.resolve("files").unwrap().unwrap()
        else {
            panic!("stdio expected")
        };
        assert_eq!((command.as_str(), args.len()), ("mcp-files", 2));
        assert_eq!(env["TOKEN"].expose_secret(), "ghp_secret");
        assert_eq!(env["MODE"].expose_secret(), "ro");
        let spec = reg.resolve("github").unwrap().unwrap();
        assert!(!format!("{spec:?}").contains("ghp_secret"));
        // Only the proxy's answer can be serialized: no secret on the wire.
        assert!(serde_json::to_string(&spec).is_err());
        let LaunchSpec::Http { url, headers } = spec else {
            panic!("http expected")
        };
        assert_eq!(url.expose_secret(), "https://example.test/mcp");
        assert_eq!(
            headers["Authorization"].expose_secret(),
            "Bearer ghp_secret"
        );
        assert!(reg.resolve("nope").is_none());
        let proxy = LaunchSpec::Proxy {
            url: "http://127.0.0.1:1/mcp-proxy/github".to_owned(),
        };
        let wire = serde_json::to_string(&proxy).unwrap();
        assert_eq!(
            wire,
            r#"{"transport":"proxy","url":"http://127.0.0.1:1/mcp-proxy/github"}"#
        );
        assert!(matches!(
            serde_json::from_str::<LaunchSpec>(&wire).unwrap(),
            LaunchSpec::Proxy { .. }
        ));
        let stdio = r#"{"transport":"stdio","command":"x","args":[],"env":{}}"#;
        assert!(serde_json::from_str::<LaunchSpec>(stdio).is_err());
    }

    #[test]
    fn invalid_servers_are_refused_naming_the_server() {
        let cases = [
            (
                "[mcp_servers.a]\nargs = []\n",
                "[mcp_servers.a]: give exactly one of command or url",
            ),
            (
                "[mcp_servers.a]\ncommand = \"x\"\nurl = \"http://h\"\n",
                "exactly one",
            ),
            (
                "[mcp_servers.agency]\ncommand = \"x\"\n",
                "Agency's own server",
            ),
            (
                "[mcp_servers.\"bad name\"]\ncommand = \"x\"\n",
                "[mcp_servers.bad name]",
            ),
            ("[mcp_servers.a]\nurl = \"ftp://h\"\n", "not http"),
            (
                "[mcp_servers.a]\nurl = \"http://h\"\nenv = { A = \"b\" }\n",
                "need command",
            ),
            (
                "[mcp_servers.a]\ncommand = \"x\"\nheaders = { A = \"b\" }\n",
                "need url",
            ),
            (
                "[mcp_servers.a]\ncommand = \"x\"\nenv = { A = \"${secret:nope}\" }\n",
                "secret \"nope\" is not declared",
            ),
            (
                "[mcp_servers.a]\ncommand = \"x\"\nenv = { A = \"${secret:nope\" }\n",
                "not closed",
            ),
            (
                "[secrets]\ns = { env = \"X\" }\n[mcp_servers.a]\ncommand = \"x\"\nargs = [\"${secret:s}\"]\n",
                "not args",
            ),
            (
                "[secrets]\ns = { env = \"X\", file = \"f\" }\n",
                "[secrets] s: give exactly one",
            ),
            ("[secrets]\ns = { command = [] }\n", "must name a program"),
        ];
        for (text, want) in cases {
            let (servers, sources) = parse(text);
            let e = validate(&servers, &sources).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
