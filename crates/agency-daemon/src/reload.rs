//! `agency reload` (`POST /v1/reload`, admin only) and SIGHUP to `agency
//! serve`: read `agency.toml` and `policy.toml` again, apply what can be
//! applied to a running daemon, and say, per changed setting, whether it
//! was applied or needs a restart.
//!
//! Both files are checked whole first: one that does not parse or
//! validate changes nothing, and the error names the file (and the line,
//! where the problem is one). The daemon then keeps *the settings in
//! force*: the file's at start, and after each reload the new values of
//! the settings that apply live over the old values of the others. A
//! setting that needs a restart is therefore reported at every reload
//! until the daemon restarts, and nothing runs on a half-applied value.
//!
//! Which settings apply live is `Config::live_part`'s decision, documented in
//! `docs/configuration.md`; each reaches the running daemon through one
//! seam: the service's setters (policy, retention, memory), `Live`
//! handles read per request (model upstreams and prices, keep-warm
//! defaults), the confiner's shared directories and the supervisor's
//! `[agents]` settings (both read at each spawn).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use agency_service::{KeepWarmDefaults, System};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

use crate::error::DaemonError;
use crate::server::AppState;
use agency_config::Config;
use agency_config::home::Home;
use agency_config::live::Live;
use agency_config::mcp_servers::McpServers;
use agency_config::secrets::Secrets;
use agency_config::upstreams::{Models, UpstreamError};
use agency_supervisor::Reconfigure;
use agency_supervisor::confine::{Confiner, SharedDirs};

use agency_api::ReloadStatus;
pub use agency_api::{ReloadChange, ReloadView};

/// What a reload needs of the running daemon.
#[derive(Debug)]
pub(crate) struct Reloader {
    home: Home,
    /// The settings in force and `policy.toml`'s text (`None`: no file).
    /// Held for a whole reload, so two never interleave.
    current: tokio::sync::Mutex<(Config, Option<String>)>,
    svc: Arc<System>,
    /// The secrets read at start: new model upstreams may use only these.
    secrets: Secrets,
    pub models: Arc<Live<Models>>,
    pub keep_warm: Arc<Live<KeepWarmDefaults>>,
    confiner: Arc<Confiner>,
    servers: Arc<McpServers>,
    /// Set once the supervisor runs (none runs for `runtime = "none"`).
    supervisor: OnceLock<Reconfigure>,
}

/// The model gateway's upstreams and prices for `cfg`, with the keys read
/// at start and the runtime's own upstream named.
pub(crate) fn build_models(cfg: &Config, secrets: &Secrets) -> Result<Models, UpstreamError> {
    let mut models = Models::new(&cfg.models, &cfg.prices, secrets)?;
    let a = &cfg.agents;
    match a.runtime.as_str() {
        "builtin" => models.set_runtime(&a.builtin.upstream, None),
        "command" => models.set_runtime(&a.command.upstream, None),
        "claude-code" => {
            models.set_runtime(
                &a.claude_code.upstream,
                Some(agency_config::models::Api::Anthropic),
            );
        }
        _ => {}
    }
    Ok(models)
}

/// The names `cfg` declares, for the service's checks of grants and
/// `agency model set`.
pub(crate) fn declared(cfg: &Config, models: &Models) -> agency_service::Declared {
    agency_service::Declared {
        mcp_servers: cfg.mcp_servers.keys().cloned().collect(),
        repos: cfg.repos.keys().cloned().collect(),
        models: models.usable().map(str::to_owned).collect(),
        runtime: Some(cfg.agents.runtime.clone()),
        secrets: cfg.secrets.keys().cloned().collect(),
    }
}

impl Reloader {
    pub fn new(
        home: &Home,
        cfg: Config,
        svc: Arc<System>,
        secrets: Secrets,
        models: Models,
        confiner: Arc<Confiner>,
        servers: Arc<McpServers>,
    ) -> Reloader {
        let policy_text = read_policy_text(home);
        Reloader {
            home: home.clone(),
            keep_warm: Arc::new(Live::new(cfg.agents.keep_warm_defaults())),
            current: tokio::sync::Mutex::new((cfg, policy_text)),
            svc,
            secrets,
            models: Arc::new(Live::new(models)),
            confiner,
            servers,
            supervisor: OnceLock::new(),
        }
    }

    pub fn set_supervisor(&self, s: Reconfigure) {
        let _ = self.supervisor.set(s);
    }

    /// Read both files, apply what applies live, report every change.
    pub async fn reload(&self) -> Result<ReloadView, DaemonError> {
        let mut current = self.current.lock().await;
        let home = self.home.clone();
        let (new, policy, policy_text) = tokio::task::spawn_blocking(move || {
            let new = Config::load(&home.config_path())?;
            let policy = agency_tools::tool_check::load_policy(
                home.dir(),
                &agency_tools::tool_check::policy_tool_names(&new),
            )?;
            Ok::<_, DaemonError>((new, policy, read_policy_text(&home)))
        })
        .await
        .map_err(|e| {
            DaemonError::io(
                "reload the configuration of",
                self.home.dir(),
                std::io::Error::other(e),
            )
        })??;
        let effective = current.0.live_part(&new);
        let models = build_models(&effective, &self.secrets).map_err(|e| DaemonError::Config {
            path: self.home.config_path(),
            message: format!(
                "{e} (secrets are read when the daemon starts: a new one needs a restart)"
            ),
        })?;
        let mut changes = changes(&current.0, &effective, &new);
        if policy_text != current.1 {
            changes.insert(
                0,
                ReloadChange {
                    setting: "policy.toml".to_owned(),
                    status: ReloadStatus::Applied,
                    note: "tool calls from now are classified by it".to_owned(),
                },
            );
        }
        // Everything checked: apply (the unchanged parts are applied as
        // they were, which changes nothing).
        for notice in &new.notices {
            tracing::warn!("{notice}");
        }
        self.svc.set_policy(policy);
        self.svc.set_retention(effective.retention());
        self.svc
            .set_memory_config(effective.memory.service_config());
        self.svc.set_declared(declared(&effective, &models));
        self.servers.set_servers(effective.mcp_servers.clone());
        self.models.store(models);
        self.keep_warm.store(effective.agents.keep_warm_defaults());
        self.confiner.set_dirs(SharedDirs::of(&effective.sandbox));
        if let Some(s) = self.supervisor.get() {
            s.agents(effective.agents.clone());
        }
        for c in &changes {
            tracing::info!(setting = %c.setting, status = %c.status, "reload: {}", c.note);
        }
        *current = (effective, policy_text);
        Ok(ReloadView { changes })
    }
}

fn read_policy_text(home: &Home) -> Option<String> {
    std::fs::read_to_string(home.dir().join(agency_tools::tool_check::POLICY_FILE)).ok()
}

/// Every setting whose value differs between `old` and `new`: applied
/// when the settings in force (`effective`) now hold `new`'s value.
fn changes(old: &Config, effective: &Config, new: &Config) -> Vec<ReloadChange> {
    let (old, effective, new) = (flat(old), flat(effective), flat(new));
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| {
            let applied = effective.get(k) == new.get(k);
            ReloadChange {
                setting: k.clone(),
                status: if applied { ReloadStatus::Applied } else { ReloadStatus::NeedsRestart },
                note: if applied {
                    applied_note(k)
                } else {
                    "read only at start: restart the daemon (`agency shutdown`, then `agency serve`)"
                        .to_owned()
                },
            }
        })
        .collect()
}

/// From when an applied setting holds.
fn applied_note(key: &str) -> String {
    let section = key.split('.').next().unwrap_or(key);
    match section {
        "sandbox" | "mcp_servers" => "for agents started from now",
        "models" | "prices" => "for model calls from now",
        "retention" => "from the next collection",
        "memory" => "for agents started from now",
        _ if key.starts_with("agents.keep_warm") => "for agents started from now",
        _ => "now",
    }
    .to_owned()
}

/// The maps whose entries are reported whole (`models.main`, not each of
/// its fields): an entry is one thing to the user.
const ENTRY_SECTIONS: &[&str] = &["repos", "secrets", "mcp_servers", "models", "prices"];

/// The configuration as `section.key = value`, for comparison.
fn flat(cfg: &Config) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Ok(Value::Object(m)) = serde_json::to_value(cfg) {
        for (section, v) in m {
            let depth = if ENTRY_SECTIONS.contains(&section.as_str()) {
                1
            } else {
                usize::MAX
            };
            flatten(&section, v, depth, &mut out);
        }
    }
    out
}

fn flatten(prefix: &str, v: Value, depth: usize, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) if depth > 0 => {
            for (k, v) in m {
                flatten(&format!("{prefix}.{k}"), v, depth - 1, out);
            }
        }
        v => {
            out.insert(prefix.to_owned(), v);
        }
    }
}

/// `POST /v1/reload` (behind the admin-token guard, on the Unix socket).
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/v1/reload", post(reload))
}

async fn reload(State(st): State<Arc<AppState>>) -> Response {
    match st.reloader.reload().await {
        Ok(view) => axum::Json(view).into_response(),
        Err(e) => agency_http::error(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            &format!("{e}; nothing was changed: fix it and run `agency reload` again"),
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(std::path::Path::new("/h/agency.toml"), text).unwrap()
    }

    #[test]
    fn live_settings_are_applied_and_the_others_wait_for_a_restart() {
        let old = parse("[server]\nport = 0\n");
        let new = parse(
            "[server]\nport = 4100\n[agents]\nkeep_warm_ms = 5000\n[retention]\nacked_mail_days = 3\n",
        );
        let effective = old.live_part(&new);
        let got: Vec<(String, ReloadStatus)> = changes(&old, &effective, &new)
            .into_iter()
            .map(|c| (c.setting, c.status))
            .collect();
        assert_eq!(
            got,
            [
                ("agents.keep_warm_ms".to_owned(), ReloadStatus::Applied),
                (
                    "retention.acked_mail_days".to_owned(),
                    ReloadStatus::Applied
                ),
                ("server.port".to_owned(), ReloadStatus::NeedsRestart),
            ]
        );
        assert_eq!(effective.server.port, 0);
        // Reloading the same file again: the port still waits.
        let again = changes(&effective, &effective.live_part(&new), &new);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].setting, "server.port");
    }
}
