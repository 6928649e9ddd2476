//! The Claude Code runtime: `claude -p` (headless) with Agency's MCP server
//! as its only MCP server, the built-in tools of `agents.claude_code.tools`
//! and no others, its stream-json transcript read back after exit
//! (DESIGN.md §3 lists the facts this relies on).

use std::path::Path;

use agency_service::RunReport;
use tokio::process::Command;

use crate::runtime::{Runtime, SpawnSpec, clean_env, write_private};
use agency_config::ClaudeCodeConfig;
use agency_config::ConfigError;
use agency_config::claude_tools::{KNOWN_TOOLS, unknown_tools};

/// The name of Agency's MCP server in Claude Code's configuration; its tools
/// appear as `mcp__agency__<tool>`.
const SERVER: &str = agency_config::mcp_servers::AGENCY_SERVER;
const TOOL_PREFIX: &str = "mcp__agency__";

/// Claude Code's permission mode for agents: `dontAsk` runs the tools of
/// `--allowedTools` and refuses every other call without a prompt.
const PERMISSION_MODE: &str = "dontAsk";

#[derive(Debug, Clone)]
pub struct ClaudeCodeRuntime {
    pub cfg: ClaudeCodeConfig,
    /// Each agent's upstream (Anthropic API only) through the gateway.
    pub routes: agency_config::upstreams::ModelRoutes,
}

impl ClaudeCodeRuntime {
    /// The runtime for `cfg`, warning once about tool names Claude Code may
    /// not know (it would leave them out without a word).
    pub fn new(
        cfg: ClaudeCodeConfig,
        routes: agency_config::upstreams::ModelRoutes,
    ) -> ClaudeCodeRuntime {
        for name in unknown_tools(&cfg.tools) {
            tracing::warn!(
                tool = name,
                known = %KNOWN_TOOLS.join(", "),
                "agents.claude_code.tools names {name:?}, which is not a Claude Code tool Agency knows; if this Claude Code does not know it either, agents go without it"
            );
        }
        ClaudeCodeRuntime { cfg, routes }
    }
}

impl Runtime for ClaudeCodeRuntime {
    fn name(&self) -> &str {
        "claude-code"
    }

    fn command(&self, spec: &SpawnSpec) -> Result<Command, ConfigError> {
        let mcp_path = write_private(
            &spec.run_dir,
            "mcp.json",
            spec.mcp_config().to_string().as_bytes(),
        )?;
        // Agency's tools by name, and Agency's server as a whole: an
        // organisation's tools are served there too, named by
        // their sources, and each call is checked in the service against
        // the handler's `tool:NAME` capability; an extra server's tools as
        // a whole (`mcp__NAME` allows every tool of server NAME); the
        // configured built-in tools.
        let allowed: Vec<String> = agency_mcp::TOOL_NAMES
            .iter()
            .map(|t| format!("{TOOL_PREFIX}{t}"))
            .chain(std::iter::once(format!("mcp__{SERVER}")))
            .chain(spec.mcp_servers.iter().map(|n| format!("mcp__{n}")))
            .chain(self.cfg.tools.iter().cloned())
            .collect();
        let program = if self.cfg.program.is_empty() {
            "claude"
        } else {
            &self.cfg.program
        };
        // The prompt and the first message go by file, never on the command
        // line: every local user can read a process's arguments (`ps`).
        let prompt = write_private(&spec.run_dir, "prompt.md", spec.system_prompt.as_bytes())?;
        let message = write_private(&spec.run_dir, "message.md", spec.initial_message.as_bytes())?;
        // Claude Code's own tools ask the daemon's policy first.
        // The hook's token comes from a private file, never from its
        // command line (which `ps` shows every local user).
        let hook_cfg = write_private(
            &spec.run_dir,
            "hook.json",
            serde_json::json!({ "url": spec.mcp_url, "token": spec.token })
                .to_string()
                .as_bytes(),
        )?;
        let settings = write_private(
            &spec.run_dir,
            "settings.json",
            hook_settings(&spec.launcher, &hook_cfg)
                .to_string()
                .as_bytes(),
        )?;
        let mut args: Vec<std::ffi::OsString> = vec![
            "-p".into(),
            "--append-system-prompt-file".into(),
            prompt.into(),
            "--mcp-config".into(),
            mcp_path.into(),
            "--strict-mcp-config".into(),
            "--settings".into(),
            settings.into(),
            // The built-in tools the model is offered at all (an empty
            // argument: none); the others do not exist for this run.
            "--tools".into(),
            self.cfg.tools.join(",").into(),
            "--allowedTools".into(),
            allowed.join(",").into(),
            // Nothing stops for a permission prompt, which `-p` could not
            // answer anyway: allowed tools run, anything else is refused.
            // Confinement is the sandbox's, not Claude Code's path checks.
            "--permission-mode".into(),
            PERMISSION_MODE.into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
        ];
        let route = self.routes.route(spec.upstream.as_deref());
        let model = route
            .as_ref()
            .and_then(|r| r.model.as_deref())
            .unwrap_or(&self.cfg.model);
        if !model.is_empty() {
            args.extend(["--model".into(), model.into()]);
        }
        if self.cfg.max_turns > 0 {
            args.extend(["--max-turns".into(), self.cfg.max_turns.to_string().into()]);
        }
        let mut cmd = if spec.keep_warm_ms > 0 {
            // Warm: `agency claude-warm` runs it in its
            // stream-json input mode, writes each message to its stdin
            // and the transcript to its file, and waits for mail between
            // turns (`commands/claude_warm.rs` in agency-cli).
            let mut cmd = Command::new(&spec.launcher);
            clean_env(&mut cmd, spec)?;
            cmd.arg("claude-warm")
                .arg("--keep-warm-ms")
                .arg(spec.keep_warm_ms.to_string())
                .arg("--message")
                .arg(&message)
                .arg("--transcript")
                .arg(spec.run_dir.join("transcript.jsonl"))
                .arg("--mcp-url")
                .arg(&spec.mcp_url)
                .arg("--")
                .arg(program)
                .args(&args)
                .arg("--input-format")
                .arg("stream-json")
                .env("AGENCY_TOKEN", &spec.token);
            cmd
        } else {
            // The supervisor captures stdout and stderr into the run's
            // log; the stream-json transcript (stdout) goes to its own
            // file instead, so the log holds Claude Code's stderr; `-p`
            // without a prompt argument reads the first message from stdin.
            let mut cmd = Command::new("/bin/sh");
            clean_env(&mut cmd, spec)?;
            cmd.arg("-c")
                .arg(r#"exec "$0" "$@" < "$AGENCY_MESSAGE_FILE" > "$AGENCY_TRANSCRIPT""#)
                .arg(program)
                .args(&args);
            cmd
        };
        cmd.current_dir(&spec.workspace)
            .env("AGENCY_TRANSCRIPT", spec.run_dir.join("transcript.jsonl"))
            .env("AGENCY_MESSAGE_FILE", &message)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("ENABLE_TOOL_SEARCH", "false")
            .env("IS_SANDBOX", "1")
            .envs(&self.cfg.env);
        // Only through the daemon's model gateway (the configuration always
        // names an upstream for this runtime), with the agent's own token
        // (sent as `Authorization: Bearer`); the provider key stays in the
        // daemon.
        if let Some(route) = route {
            cmd.env("ANTHROPIC_BASE_URL", spec.gateway_url(&route.upstream))
                .env("ANTHROPIC_AUTH_TOKEN", &spec.token)
                .env_remove("ANTHROPIC_API_KEY");
        }
        Ok(cmd)
    }

    fn collect(&self, spec: &SpawnSpec) -> RunReport {
        collect_transcript(&spec.run_dir)
    }

    fn programs(&self) -> Vec<String> {
        vec![self.cfg.program.clone()]
    }

    /// Warm through `agency claude-warm` (stream-json input mode).
    fn keeps_warm(&self) -> bool {
        true
    }
}

/// The settings that make every Claude Code tool call pass Agency's
/// `PreToolUse` hook (`agency hook pre-tool-use`, which asks the daemon's
/// `/agent/tool-check`). `|| exit 2`: should the hook itself fail to run
/// (a crash, a missing binary), exit status 2 still blocks the call, where
/// any other status would let it through.
pub fn hook_settings(agency: &Path, hook_cfg: &Path) -> serde_json::Value {
    let quote = |p: &Path| format!("'{}'", p.to_string_lossy().replace('\'', r"'\''"));
    let (quoted, cfg) = (quote(agency), quote(hook_cfg));
    serde_json::json!({
        "hooks": {
            "PreToolUse": [{
                "matcher": "*",
                "hooks": [{
                    "type": "command",
                    "command": format!("{quoted} hook pre-tool-use --config {cfg} || exit 2"),
                    "timeout": 60
                }]
            }],
            // How each call ended, for the event log; it never blocks.
            "PostToolUse": [{
                "matcher": "*",
                "hooks": [{
                    "type": "command",
                    "command": format!("{quoted} hook post-tool-use --config {cfg}"),
                    "timeout": 10
                }]
            }]
        }
    })
}

fn collect_transcript(run_dir: &Path) -> RunReport {
    match crate::runtime::read_transcript(run_dir) {
        Some(bytes) => {
            let mut report = parse_transcript(&String::from_utf8_lossy(&bytes)).into_report();
            report.transcript = Some(bytes);
            report
        }
        None => RunReport::default(),
    }
}

/// What a stream-json transcript says about a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transcript {
    /// Agency's MCP server status in the `system`/`init` event (`None`:
    /// no init event, or the server was not listed).
    pub mcp_status: Option<String>,
    /// Whether an init event was seen at all.
    pub saw_init: bool,
    /// The final `result` event, if the run got that far.
    pub result: Option<ResultEvent>,
    /// `tool_use` blocks in assistant events calling Agency's tools.
    pub tool_calls: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultEvent {
    pub subtype: String,
    pub is_error: bool,
    /// The `result` text, or the joined `errors`, for error reports.
    pub message: String,
    pub num_turns: Option<i64>,
    /// Input tokens including cache creation and cache reads.
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
}

/// Parse a stream-json transcript (one JSON object per line; lines that are
/// not JSON objects are skipped).
pub fn parse_transcript(text: &str) -> Transcript {
    let mut t = Transcript::default();
    for line in text.lines() {
        let Ok(ev) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
            continue;
        };
        match ev["type"].as_str() {
            Some("system") if ev["subtype"] == "init" => {
                t.saw_init = true;
                t.mcp_status = ev["mcp_servers"].as_array().and_then(|servers| {
                    servers
                        .iter()
                        .find(|s| s["name"] == SERVER)
                        .map(|s| s["status"].as_str().unwrap_or("unknown").to_owned())
                });
            }
            Some("assistant") => {
                if let Some(blocks) = ev["message"]["content"].as_array() {
                    t.tool_calls += blocks
                        .iter()
                        .filter(|b| {
                            b["type"] == "tool_use"
                                && b["name"]
                                    .as_str()
                                    .is_some_and(|n| n.starts_with(TOOL_PREFIX))
                        })
                        .count() as i64;
                }
            }
            Some("result") => {
                let usage = &ev["usage"];
                let input = [
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                ]
                .iter()
                .filter_map(|k| usage[*k].as_i64())
                .reduce(|a, b| a + b);
                let message = match ev["result"].as_str() {
                    Some(r) if !r.is_empty() => r.to_owned(),
                    _ => ev["errors"]
                        .as_array()
                        .map(|es| {
                            es.iter()
                                .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))
                                .collect::<Vec<_>>()
                                .join("; ")
                        })
                        .unwrap_or_default(),
                };
                // A warm run has one result per turn:
                // the counts add up, the last one says how it ended.
                let prev = t.result.take().unwrap_or_default();
                let add = |a: Option<i64>, b: Option<i64>| match (a, b) {
                    (Some(x), Some(y)) => Some(x + y),
                    (x, y) => x.or(y),
                };
                t.result = Some(ResultEvent {
                    subtype: ev["subtype"].as_str().unwrap_or_default().to_owned(),
                    is_error: ev["is_error"].as_bool().unwrap_or(false),
                    message,
                    num_turns: add(prev.num_turns, ev["num_turns"].as_i64()),
                    input_tokens: add(prev.input_tokens, input),
                    output_tokens: add(prev.output_tokens, usage["output_tokens"].as_i64()),
                });
            }
            _ => {}
        }
    }
    t
}

impl Transcript {
    /// The run's report (without the transcript bytes). `reason` is empty
    /// when the transcript says nothing about how the run ended (the
    /// supervisor then records `exited` or `killed`); `normal` is true only
    /// for a connected MCP server and a successful result.
    pub fn into_report(self) -> RunReport {
        let mut report = RunReport {
            tool_calls: Some(self.tool_calls),
            ..RunReport::default()
        };
        if let Some(r) = &self.result {
            report.input_tokens = r.input_tokens;
            report.output_tokens = r.output_tokens;
        }
        // A run that got as far as the init event or a result must show
        // Agency's server connected (a rejected token does not stop it).
        if (self.saw_init || self.result.is_some())
            && self.mcp_status.as_deref() != Some("connected")
        {
            report.reason = format!(
                "failed: Agency's MCP server was not connected (status {})",
                self.mcp_status.as_deref().unwrap_or("absent")
            );
            return report;
        }
        match self.result {
            None => {}
            Some(r) if r.is_error => {
                let detail = if r.message.is_empty() {
                    r.subtype
                } else {
                    truncate(&r.message, 500)
                };
                report.reason = format!("error: {detail}");
            }
            Some(r) if r.subtype == "success" => {
                report.reason = "completed".to_owned();
                report.normal = true;
            }
            Some(r) if r.subtype == "error_max_turns" => {
                report.reason = "max_turns".to_owned();
            }
            Some(r) => report.reason = format!("error: {}", r.subtype),
        }
        report
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use agency_config::claude_tools::DEFAULT_TOOLS;

    use super::*;

    /// Issue 9 item 6: neither the prompt nor the first message is an
    /// argument (every local user reads argv with `ps`), and the command
    /// starts from a cleared environment.
    fn spec(dir: &Path) -> SpawnSpec {
        SpawnSpec {
            handler: agency_core::HandlerId::new_random(),
            agent: agency_core::AgentId::new_random(),
            token: "agt_secret_token".into(),
            mcp_url: "http://127.0.0.1:1/mcp".into(),
            workspace: dir.join("workspace"),
            run_dir: dir.to_owned(),
            system_prompt: "SYSTEM PROMPT TEXT".into(),
            initial_message: "FIRST MESSAGE TEXT".into(),
            mcp_servers: vec![],
            launcher: "/opt/agency".into(),
            launch_nonces: Default::default(),
            egress_proxy: Some("127.0.0.1:4242".parse().unwrap()),
            upstream: None,
            keep_warm_ms: 0,
        }
    }

    fn args_of(cmd: &Command) -> Vec<String> {
        cmd.as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The value after `flag` in `args`.
    fn arg_after<'a>(args: &'a [String], flag: &str) -> &'a str {
        let at = args.iter().position(|a| a == flag).unwrap();
        &args[at + 1]
    }

    #[test]
    fn issue9_item6_prompt_and_message_are_files_not_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(dir.path());
        let rt = ClaudeCodeRuntime {
            cfg: ClaudeCodeConfig::default(),
            routes: agency_config::upstreams::ModelRoutes::default(),
        };
        let cmd = rt.command(&spec).unwrap();
        let args = args_of(&cmd);
        let joined = args.join(" ");
        assert!(!joined.contains("SYSTEM PROMPT TEXT"), "{joined}");
        assert!(!joined.contains("FIRST MESSAGE TEXT"), "{joined}");
        assert!(!joined.contains("agt_secret_token"), "{joined}");
        let at = args
            .iter()
            .position(|a| a == "--append-system-prompt-file")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&args[at + 1]).unwrap(),
            "SYSTEM PROMPT TEXT"
        );
        let envs: Vec<_> = cmd.as_std().get_envs().collect();
        let message = envs
            .iter()
            .find(|(k, _)| *k == "AGENCY_MESSAGE_FILE")
            .and_then(|(_, v)| *v)
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(message).unwrap(),
            "FIRST MESSAGE TEXT"
        );
        // Only what we set: HOME is the agent's own.
        let home = envs.iter().find(|(k, _)| *k == "HOME").unwrap().1.unwrap();
        assert!(Path::new(home).starts_with(dir.path()));
        // Issue 10 item 4: the egress proxy, the token as its password.
        let var = |name: &str| envs.iter().find(|(k, _)| *k == name).and_then(|(_, v)| *v);
        for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            assert_eq!(
                var(k).unwrap(),
                "http://agent:agt_secret_token@127.0.0.1:4242",
                "{k}"
            );
        }
        assert_eq!(var("NO_PROXY").unwrap(), "127.0.0.1,localhost,::1");
        assert_eq!(var("no_proxy").unwrap(), "127.0.0.1,localhost,::1");
    }

    /// Issue 11 item 4: every Claude Code tool call passes Agency's
    /// `PreToolUse` hook; its token is in a private file, not on any
    /// command line, and a hook that cannot run still blocks (`exit 2`).
    #[test]
    fn issue11_item4_the_pre_tool_use_hook_is_configured() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(dir.path());
        let rt = ClaudeCodeRuntime::new(
            ClaudeCodeConfig::default(),
            agency_config::upstreams::ModelRoutes::default(),
        );
        let args = args_of(&rt.command(&spec).unwrap());
        let settings_path = arg_after(&args, "--settings");
        let settings: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(settings_path).unwrap()).unwrap();
        let hooks = &settings["hooks"]["PreToolUse"];
        assert_eq!(hooks[0]["matcher"], "*");
        let command = hooks[0]["hooks"][0]["command"].as_str().unwrap();
        let cfg = dir.path().join("hook.json");
        assert_eq!(
            command,
            format!(
                "'/opt/agency' hook pre-tool-use --config '{}' || exit 2",
                cfg.display()
            )
        );
        assert!(!command.contains("agt_secret_token"));
        let post = settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        assert_eq!(
            post,
            format!(
                "'/opt/agency' hook post-tool-use --config '{}'",
                cfg.display()
            )
        );
        assert!(args.iter().all(|a| !a.contains("agt_secret_token")));
        let hook_cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
        assert_eq!(hook_cfg["token"], "agt_secret_token");
        assert_eq!(hook_cfg["url"], "http://127.0.0.1:1/mcp");
        let mode = std::fs::metadata(&cfg).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "hook.json is private");
    }

    /// Issue 10 item 1: the configured built-in tools are the only ones
    /// the model is offered (`--tools`), they and Agency's tools run without
    /// a prompt (`--allowedTools`), and any other call is refused, not
    /// asked about (`--permission-mode dontAsk`).
    #[test]
    fn issue10_item1_only_the_configured_builtin_tools_exist() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec(dir.path());
        spec.mcp_servers = vec!["echo".into()];
        let rt = ClaudeCodeRuntime::new(
            ClaudeCodeConfig {
                tools: vec!["Read".into(), "Bash".into()],
                ..ClaudeCodeConfig::default()
            },
            agency_config::upstreams::ModelRoutes::default(),
        );
        let args = args_of(&rt.command(&spec).unwrap());
        assert_eq!(arg_after(&args, "--tools"), "Read,Bash");
        let allowed: Vec<&str> = arg_after(&args, "--allowedTools").split(',').collect();
        for t in [
            "Read",
            "Bash",
            "mcp__agency__mail_send",
            "mcp__agency",
            "mcp__echo",
        ] {
            assert!(allowed.contains(&t), "{t} in {allowed:?}");
        }
        assert!(!allowed.contains(&"Write"), "{allowed:?}");
        assert_eq!(arg_after(&args, "--permission-mode"), "dontAsk");
        assert!(args.contains(&"--strict-mcp-config".to_owned()));

        // No built-in tool at all: an empty `--tools`, not a missing one
        // (which would mean every tool).
        let rt = ClaudeCodeRuntime::new(
            ClaudeCodeConfig {
                tools: vec![],
                ..ClaudeCodeConfig::default()
            },
            agency_config::upstreams::ModelRoutes::default(),
        );
        let args = args_of(&rt.command(&spec).unwrap());
        assert_eq!(arg_after(&args, "--tools"), "");

        // The default: the developer's tools, never the web or sub-agents.
        let args = args_of(
            &ClaudeCodeRuntime::new(
                ClaudeCodeConfig::default(),
                agency_config::upstreams::ModelRoutes::default(),
            )
            .command(&spec)
            .unwrap(),
        );
        let tools: Vec<&str> = arg_after(&args, "--tools").split(',').collect();
        assert_eq!(tools, DEFAULT_TOOLS);
        for t in ["Bash", "Read", "Edit", "Write", "Glob", "Grep"] {
            assert!(tools.contains(&t), "{t}");
        }
        for t in ["WebFetch", "WebSearch", "Task", "Agent"] {
            assert!(!tools.contains(&t), "{t}");
        }
    }

    const INIT_OK: &str = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"s","tools":["mcp__agency__mail_inbox"],"mcp_servers":[{"name":"agency","status":"connected"}],"model":"scripted"}"#;
    const ASSISTANT_TOOLS: &str = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":"mcp__agency__mail_inbox","input":{}},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"ls"}}]}}"#;
    const ASSISTANT_TOOL2: &str = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_3","name":"mcp__agency__mail_ack","input":{"messages":["m"]}}]}}"#;
    const USER_RESULT: &str = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"[]"}]}}"#;

    #[test]
    fn a_successful_run_completes_with_usage_and_tool_calls() {
        let text = [
            INIT_OK,
            ASSISTANT_TOOLS,
            USER_RESULT,
            ASSISTANT_TOOL2,
            "not json",
            r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"Done.","usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":5,"output_tokens":42}}"#,
        ]
        .join("\n");
        let t = parse_transcript(&text);
        assert_eq!(t.mcp_status.as_deref(), Some("connected"));
        assert_eq!(t.tool_calls, 2);
        assert_eq!(t.result.as_ref().unwrap().num_turns, Some(3));
        let r = t.into_report();
        assert_eq!(r.reason, "completed");
        assert!(r.normal);
        assert_eq!(r.input_tokens, Some(125));
        assert_eq!(r.output_tokens, Some(42));
        assert_eq!(r.tool_calls, Some(2));
    }

    #[test]
    fn is_error_wins_over_subtype_success() {
        let text = [
            INIT_OK,
            r#"{"type":"result","subtype":"success","is_error":true,"num_turns":1,"result":"API Error: 400 nothing scripted","usage":{"input_tokens":0,"output_tokens":0}}"#,
        ]
        .join("\n");
        let r = parse_transcript(&text).into_report();
        assert_eq!(r.reason, "error: API Error: 400 nothing scripted");
        assert!(!r.normal);
        assert_eq!(r.tool_calls, Some(0));
    }

    #[test]
    fn an_unconnected_mcp_server_fails_the_run() {
        let text = [
            r#"{"type":"system","subtype":"init","mcp_servers":[{"name":"agency","status":"failed"}]}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"I have no tools.","usage":{"input_tokens":10,"output_tokens":3}}"#,
        ]
        .join("\n");
        let r = parse_transcript(&text).into_report();
        assert_eq!(
            r.reason,
            "failed: Agency's MCP server was not connected (status failed)"
        );
        assert!(!r.normal);
        assert_eq!(r.input_tokens, Some(10));

        let no_init = r#"{"type":"result","subtype":"success","is_error":false,"usage":{}}"#;
        assert!(!parse_transcript(no_init).into_report().normal);
        let absent = r#"{"type":"system","subtype":"init","mcp_servers":[]}"#;
        let r = parse_transcript(absent).into_report();
        assert_eq!(
            r.reason,
            "failed: Agency's MCP server was not connected (status absent)"
        );
    }

    #[test]
    fn other_endings() {
        let r = parse_transcript(&format!(
            "{INIT_OK}\n{}",
            r#"{"type":"result","subtype":"error_max_turns","is_error":false,"num_turns":5,"usage":{"input_tokens":1,"output_tokens":1}}"#
        ))
        .into_report();
        assert_eq!(r.reason, "max_turns");
        assert!(!r.normal);
        let r = parse_transcript(&format!(
            "{INIT_OK}\n{}",
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["boom"]}"#
        ))
        .into_report();
        assert_eq!(r.reason, "error: boom");
        // Killed before any result: the supervisor's reason applies.
        let r = parse_transcript(INIT_OK).into_report();
        assert_eq!(r.reason, "");
        assert_eq!(parse_transcript("").into_report().reason, "");
    }
}
