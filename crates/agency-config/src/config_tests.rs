//! Tests of `config.rs`: the template, every key, the refusals and a
//! fuzz of `Config::parse` (kept apart so that the module stays readable).

use super::*;
use crate::template::TEMPLATE;

#[test]
fn template_parses_to_defaults() {
    assert_eq!(
        Config::parse(Path::new("t"), TEMPLATE).unwrap(),
        Config::default()
    );
}

#[test]
fn issue9_item11_quota_and_retention_keys_reach_the_service() {
    let cfg = Config::parse(
        Path::new("t"),
        "[limits]\nmax_pending_deferred_per_handler = 1\nmax_outcomes_per_handler = 2\nmax_kb_files_per_handler = 3\nmax_handlers_per_subtree = 4\nmax_delegation_depth = 5\n[retention]\nacked_mail_days = 6\nblob_grace_minutes = 7\ngc_interval_hours = 8\n",
    )
    .unwrap();
    let l = cfg.limits();
    assert_eq!(
        (
            l.max_pending_deferred_per_handler,
            l.max_outcomes_per_handler,
            l.max_kb_files_per_handler,
            l.max_handlers_per_subtree,
            l.max_delegation_depth
        ),
        (1, 2, 3, 4, 5)
    );
    let r = cfg.retention();
    assert_eq!(r.acked_mail_days, 6);
    assert_eq!(r.blob_grace, std::time::Duration::from_secs(7 * 60));
    assert_eq!(cfg.retention.gc_interval_hours, 8);
    // The defaults are the service's.
    assert_eq!(Config::default().limits(), Limits::default());
    assert_eq!(
        Config::default().retention(),
        agency_service::Retention::default()
    );
}

#[test]
fn claude_code_config_parses() {
    let cfg = Config::parse(
        Path::new("t"),
        "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = \"/opt/claude\"\nmodel = \"m\"\nmax_turns = 7\n[agents.claude_code.env]\nANTHROPIC_BASE_URL = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    let c = &cfg.agents.claude_code;
    assert_eq!(cfg.agents.runtime, "claude-code");
    assert_eq!(
        (c.program.as_str(), c.model.as_str(), c.max_turns),
        ("/opt/claude", "m", 7)
    );
    // The direct setting is routed through the gateway: the CLI is not
    // given the URL, the implicit upstream [models.default] is.
    assert!(!c.env.contains_key("ANTHROPIC_BASE_URL"));
    assert_eq!(c.upstream, "default");
    assert_eq!(cfg.models["default"].base_url, "http://127.0.0.1:9");
    assert_eq!(cfg.models["default"].api, "anthropic");
    assert_eq!(cfg.notices.len(), 1);
}

#[test]
fn claude_code_tools_parse() {
    let cfg = Config::parse(
        Path::new("t"),
        "[agents.claude_code]\ntools = [\"Read\", \"Grep\"]\n",
    )
    .unwrap();
    assert_eq!(cfg.agents.claude_code.tools, ["Read", "Grep"]);
    let cfg = Config::parse(Path::new("t"), "[agents.claude_code]\ntools = []\n").unwrap();
    assert!(cfg.agents.claude_code.tools.is_empty());
    let e = Config::parse(
        Path::new("t"),
        "[agents.claude_code]\ntools = [\"webfetch\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("agents.claude_code.tools") && e.contains("\"WebFetch\""),
        "{e}"
    );
}

#[test]
fn bad_configs_are_refused_with_the_file_named() {
    for bad in [
        "[server]\nprot = 1\n",
        "[limits]\nmax_file_bytes = 0\n",
        "[limits]\nmax_outcomes_per_handler = 0\n",
        "[limits]\nmax_delegation_depth = 1000000001\n",
        "[retention]\nblob_grace_minutes = 0\n",
        "[retention]\nacked_mail_dayz = 3\n",
        "server = 3",
        "[agents]\nruntime = \"magic\"\n",
        "[agents]\nruntime = \"command\"\n",
        "[agents]\nmax_concurrent = 0\n",
        "[agents]\nruntime = \"builtin\"\n",
        "[agents]\nruntime = \"builtin\"\n[agents.builtin]\nbase_url = \"http://x\"\nmodel = \"m\"\napi = \"gemini\"\n",
        "[agents]\nruntime = \"builtin\"\n[agents.builtin]\nbase_url = \"http://x\"\nmodel = \"m\"\ntools = [\"Bash\"]\n",
        "[server]\nport = 70000\n",
        "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = \"\"\n",
        "[agents.claude_code]\nmodle = \"x\"\n",
        "[agents.claude_code.env]\nA = 1\n",
        "[repos_cache]\nfetch_timeout_secs = 0\n",
        "[repos_cache]\nfetch_timeout = 5\n",
        "[log]\nlevel = \"info,=[\"\n",
        "[log]\nfile_max_bytes = 10\n",
        "[agents.claude_code]\ntools = [\"bash\"]\n",
        "[agents.claude_code]\ntools = [\"Bash(git *)\"]\n",
        "[agents.claude_code]\ntools = \"Bash\"\n",
        "[agents]\nsandbox = \"yes\"\n",
        "[sandbox]\ntoolchains = [\"rel\"]\n",
        "[sandbox]\nread_write = [\"/h/run\"]\n",
        "[sandbox]\ntoolchains = [\"/\"]\n",
        "[sandbox]\nmax_processes = 2\n",
        "[sandbox]\nnetwork = true\n",
    ] {
        let e = Config::parse(Path::new("/h/agency.toml"), bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/h/agency.toml"), "{e}");
    }
}

/// Fuzzing: `Config::parse` on arbitrary text, on mangled copies of the
/// template, and on structured random configurations whose validity an
/// independent predicate decides. Never a panic; a refusal always
/// names the file; a valid config round-trips through TOML.
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: std::env::var("PROPTEST_CASES")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(256),
            ..ProptestConfig::default()
        }
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("none".to_owned()),
            Just("command".to_owned()),
            Just("builtin".to_owned()),
            Just("claude-code".to_owned()),
            Just("anthropic".to_owned()),
            Just("openai".to_owned()),
            Just("http://127.0.0.1:9".to_owned()),
            "\\PC{0,12}",
        ]
    }

    prop_compose! {
        fn random_config()(
            port in any::<u16>(),
            max_file_bytes in prop_oneof![Just(0usize), 1usize..=(1 << 30), (1usize << 30)..(1 << 40)],
            runtime in word(),
            max_concurrent in 0usize..5,
            stall_after_exits in 0u32..5,
            backoff in (0u64..i64::MAX as u64, 0u64..i64::MAX as u64, 0u64..i64::MAX as u64, 0u64..i64::MAX as u64),
            program in word(),
            args in proptest::collection::vec("\\PC{0,8}", 0..3),
            api in word(),
            base_url in word(),
            model in word(),
            cc_program in word(),
            env in proptest::collection::btree_map("[A-Z_]{1,8}", "\\PC{0,8}", 0..3),
            repos in proptest::collection::btree_map(prop_oneof!["[a-z][a-z0-9-]{0,10}", "\\PC{0,12}"], "\\PC{0,12}", 0..3),
            quotas in proptest::collection::vec(prop_oneof![Just(0usize), 1usize..=2000, MAX_QUOTA..=MAX_QUOTA + 1], 5),
            retention in (any::<u32>(), prop_oneof![Just(0u32), 1u32..=100_000], any::<u32>()),
            sandbox in prop_oneof![Just("on".to_owned()), Just("off".to_owned()), word()],
            max_processes in prop_oneof![Just(0u64), 1u64..16, 16u64..100_000],
            toolchains in proptest::collection::vec(prop_oneof![Just("/opt/tc".to_owned()), Just("/h".to_owned()), Just("/h/run".to_owned()), Just("/".to_owned()), "\\PC{0,8}"], 0..3),
        ) -> Config {
            let mut c = Config::default();
            c.server.port = port;
            c.limits.max_file_bytes = max_file_bytes;
            c.agents.runtime = runtime;
            c.agents.max_concurrent = max_concurrent;
            c.agents.stall_after_exits = stall_after_exits;
            (c.agents.respawn_backoff_ms, c.agents.max_backoff_ms, c.agents.kill_grace_ms, c.agents.idle_timeout_ms) = backoff;
            c.agents.command.program = program;
            c.agents.command.args = args;
            c.agents.builtin.api = api;
            c.agents.builtin.base_url = base_url;
            c.agents.builtin.model = model;
            c.agents.claude_code.program = cc_program;
            c.agents.claude_code.env = env;
            c.repos = repos;
            c.limits.max_pending_deferred_per_handler = quotas[0];
            c.limits.max_outcomes_per_handler = quotas[1];
            c.limits.max_kb_files_per_handler = quotas[2];
            c.limits.max_handlers_per_subtree = quotas[3];
            c.limits.max_delegation_depth = quotas[4];
            (c.retention.acked_mail_days, c.retention.blob_grace_minutes, c.retention.gc_interval_hours) = retention;
            c.agents.sandbox = sandbox;
            c.sandbox.max_processes = max_processes;
            c.sandbox.toolchains = toolchains;
            c
        }
    }

    /// The rules of agency.toml, restated from the table in docs/configuration.md.
    fn valid(c: &Config) -> bool {
        let a = &c.agents;
        let runtime_ok = match a.runtime.as_str() {
            "none" => true,
            "command" => !a.command.program.is_empty(),
            "builtin" => {
                // base_url becomes the upstream [models.default]: an
                // http(s) URL with a host, no credentials nor query.
                url::Url::parse(&a.builtin.base_url).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some()
                        && u.username().is_empty()
                        && u.password().is_none()
                        && u.query().is_none()
                }) && !a.builtin.model.is_empty()
                    && (a.builtin.api == "anthropic" || a.builtin.api == "openai")
            }
            "claude-code" => !a.claude_code.program.is_empty(),
            _ => false,
        };
        runtime_ok
            && (1..=1 << 30).contains(&c.limits.max_file_bytes)
            && [
                c.limits.max_pending_deferred_per_handler,
                c.limits.max_outcomes_per_handler,
                c.limits.max_kb_files_per_handler,
                c.limits.max_handlers_per_subtree,
                c.limits.max_delegation_depth,
            ]
            .iter()
            .all(|q| (1..=1_000_000_000).contains(q))
            && c.retention.blob_grace_minutes >= 1
            && a.max_concurrent >= 1
            && a.stall_after_exits >= 1
            && c.repos
                .keys()
                .all(|n| agency_core::validate::check_name("repo", n).is_ok())
            && (a.sandbox == "on" || a.sandbox == "off")
            && (c.sandbox.max_processes == 0 || c.sandbox.max_processes >= 8)
            // Absolute, no "." or "..", and apart from the home /h
            // (neither it, inside it, nor above it).
            && c.sandbox.toolchains.iter().all(|t| {
                let parts: Vec<&str> = t.split('/').filter(|p| !p.is_empty()).collect();
                t.starts_with('/')
                    && !parts.iter().any(|p| *p == "." || *p == "..")
                    && parts.first().is_some_and(|p| *p != "h")
            })
    }

    const PATH: &str = "/h/agency.toml";

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            if let Err(e) = Config::parse(Path::new(PATH), &text) {
                let want = format!("failed to read configuration {PATH}");
                prop_assert!(e.to_string().starts_with(&want));
            }
        }

        #[test]
        fn mangled_templates_never_panic(
            drop in proptest::collection::vec(any::<bool>(), 64),
            dup in 0usize..64,
            junk in "[\\[\\]=\"a-z0-9 .#\n]{0,20}",
        ) {
            let mut lines: Vec<&str> = TEMPLATE
                .lines()
                .enumerate()
                .filter(|(i, _)| !drop[i % drop.len()])
                .map(|(_, l)| l)
                .collect();
            if let Some(l) = lines.get(dup % lines.len().max(1)).copied() {
                lines.push(l);
            }
            let text = format!("{}\n{junk}\n", lines.join("\n"));
            if let Err(e) = Config::parse(Path::new(PATH), &text) {
                prop_assert!(e.to_string().contains(PATH));
            }
        }

        #[test]
        fn structured_configs_parse_iff_valid(c in random_config()) {
            let text = toml::to_string(&c).unwrap();
            match Config::parse(Path::new(PATH), &text) {
                Ok(parsed) => {
                    prop_assert!(valid(&c), "accepted an invalid config:\n{}", text);
                    // Deprecated direct settings come back routed
                    // through the gateway.
                    let mut want = c.clone();
                    want.notices = crate::models::route_direct_settings(&mut want).unwrap();
                    prop_assert_eq!(parsed, want);
                }
                Err(e) => {
                    prop_assert!(!valid(&c), "refused a valid config: {}\n{}", e, text);
                    prop_assert!(e.to_string().contains(PATH));
                }
            }
        }
    }
}

#[test]
fn log_filters_are_checked() {
    assert!(check_filter("info").is_ok());
    assert!(check_filter("info,agency_daemon=debug").is_ok());
    assert!(check_filter("info,=[").is_err());
}
