//! Tests of `models.rs`: prices, upstream validation and the deprecated
//! direct settings.

use super::*;

#[test]
fn longest_prefix_and_overrides() {
    let mut cfg = BTreeMap::new();
    cfg.insert("gpt-4o".to_owned(), Price::new(1.0, 1.0, 0.0, 0.0));
    let p = Prices::new(&cfg);
    // The override wins over the default.
    assert_eq!(p.of("gpt-4o").unwrap().input, 1.0);
    // The longer default prefix wins over the shorter one.
    assert_eq!(p.of("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
    assert_eq!(p.of("claude-sonnet-4-5-20250929").unwrap().output, 15.0);
    assert_eq!(p.of("claude-opus-4-5-20251101").unwrap().input, 5.0);
    assert!(p.of("house-model-7b").is_none());
    assert_eq!(p.of("scripted").unwrap().output, 0.0);
    let u = TokenUsage {
        input_tokens: 1000,
        output_tokens: 100,
        cache_read_tokens: 10_000,
        cache_write_tokens: 2000,
    };
    // 1000*3 + 100*15 + 10000*0.3 + 2000*3.75 = 3000+1500+3000+7500
    assert_eq!(p.cost_micro_usd("claude-sonnet-4-5", &u), 15_000);
    assert_eq!(p.cost_micro_usd("unknown", &u), 0);
}

#[test]
fn upstreams_are_validated() {
    let m = |api: &str, url: &str, key: &str| {
        BTreeMap::from([(
            "main".to_owned(),
            ModelUpstreamConfig {
                api_key: key.into(),
                ..ModelUpstreamConfig::new(api, url.into())
            },
        )])
    };
    let none = BTreeMap::new();
    assert!(validate(&m("anthropic", "https://x", ""), &none, &BTreeMap::new()).is_ok());
    for (bad, want) in [
        (m("grpc", "https://x", ""), "api ="),
        (m("openai", "ftp://x", ""), "http(s)"),
        (m("openai", "https://u:p@x", ""), "no credentials"),
        (m("openai", "https://x", "${secret:k}"), "not declared"),
    ] {
        let e = validate(&bad, &none, &BTreeMap::new()).unwrap_err();
        assert!(e.contains(want), "{e}");
    }
    let prices = BTreeMap::from([("m".to_owned(), Price::new(-1.0, 0.0, 0.0, 0.0))]);
    assert!(validate(&BTreeMap::new(), &prices, &BTreeMap::new()).is_err());
}

/// The deprecated direct settings become the implicit upstream
/// `[models.default]`, its key kept for the daemon, and the runtime is
/// pointed at it; what cannot be routed is refused, naming the way out.
#[test]
fn direct_settings_become_the_implicit_upstream() {
    let parse = |t: &str| crate::Config::parse(std::path::Path::new("agency.toml"), t);
    let c = parse("[agents]\nruntime = \"builtin\"\n[agents.builtin]\napi = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"K\"\n").unwrap();
    let b = &c.agents.builtin;
    assert_eq!(
        (
            b.upstream.as_str(),
            b.base_url.as_str(),
            b.api_key_env.as_str()
        ),
        ("default", "", "")
    );
    let m = &c.models["default"];
    assert_eq!(
        (m.api.as_str(), m.base_url.as_str()),
        ("openai", "http://127.0.0.1:9/v1")
    );
    assert!(m.implicit_key == Some(ImplicitKey::Env("K".into())));
    assert!(c.notices[0].contains("deprecated"), "{:?}", c.notices);
    // Claude Code: the literal key of its env moves into the daemon,
    // out of what the CLI is given.
    let c = parse("[agents]\nruntime = \"claude-code\"\n[agents.claude_code.env]\nANTHROPIC_API_KEY = \"sk-x\"\nOTHER = \"1\"\n").unwrap();
    let cc = &c.agents.claude_code;
    assert_eq!(cc.upstream, "default");
    assert_eq!(cc.env.keys().collect::<Vec<_>>(), ["OTHER"]);
    let m = &c.models["default"];
    assert_eq!(m.base_url, "https://api.anthropic.com");
    assert!(m.implicit_key == Some(ImplicitKey::Literal("sk-x".into())));
    // The key's Debug shows nothing of it.
    assert!(!format!("{c:?}").contains("sk-x"));
    // Only the running runtime's settings are routed.
    let c = parse("[agents.builtin]\nbase_url = \"http://x\"\n").unwrap();
    assert!(c.models.is_empty() && c.notices.is_empty());
    for (text, want) in [
        (
            "[agents]\nruntime = \"builtin\"\n[agents.builtin]\nbase_url = \"http://x\"\nmodel = \"m\"\n[models.default]\napi = \"anthropic\"\nbase_url = \"http://y\"\n",
            "already declares",
        ),
        (
            "[agents]\nruntime = \"claude-code\"\n[agents.claude_code.env]\nANTHROPIC_AUTH_TOKEN = \"t\"\n",
            "ANTHROPIC_AUTH_TOKEN",
        ),
        (
            "[agents]\nruntime = \"builtin\"\n[agents.builtin]\nbase_url = \"ftp://x\"\nmodel = \"m\"\n",
            "http(s)",
        ),
        (
            "[agents]\nruntime = \"command\"\n[agents.command]\nprogram = \"p\"\nupstream = \"nope\"\n",
            "declares no [models.nope]",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
}

/// Settings that would still hand an agent the provider key, or point
/// it past the gateway, are refused beside an upstream.
#[test]
fn upstream_settings_that_would_leak_the_key_are_refused() {
    let base = "[secrets]\nk = { env = \"K\" }\n[models.a]\napi = \"anthropic\"\nbase_url = \"https://x\"\napi_key = \"${secret:k}\"\n[models.o]\napi = \"openai\"\nbase_url = \"https://y/v1\"\n";
    let parse = |extra: &str| {
        crate::Config::parse(
            std::path::Path::new("agency.toml"),
            &format!("{base}{extra}"),
        )
    };
    parse("[agents.claude_code]\nupstream = \"a\"\n").unwrap();
    parse("[agents]\nruntime = \"builtin\"\n[agents.builtin]\nupstream = \"o\"\nmodel = \"m\"\n")
        .unwrap();
    for (extra, want) in [
        (
            "[agents.claude_code]\nupstream = \"nope\"\n",
            "declares no [models.nope]",
        ),
        (
            "[agents.claude_code]\nupstream = \"o\"\n",
            "speaks the Anthropic API",
        ),
        (
            "[agents.claude_code]\nupstream = \"a\"\napi_key_env = \"K\"\n",
            "remove api_key_env",
        ),
        (
            "[agents.claude_code]\nupstream = \"a\"\n[agents.claude_code.env]\nANTHROPIC_API_KEY = \"sk\"\n",
            "ANTHROPIC_API_KEY",
        ),
        (
            "[agents.claude_code]\nupstream = \"a\"\n[agents.claude_code.env]\nANTHROPIC_BASE_URL = \"http://127.0.0.1:9\"\n",
            "ANTHROPIC_BASE_URL",
        ),
        (
            "[agents.builtin]\nupstream = \"a\"\napi_key_env = \"K\"\n",
            "remove api_key_env",
        ),
    ] {
        let e = parse(extra).unwrap_err().to_string();
        assert!(e.contains(want), "{extra}: {e}");
    }
}

/// Issue 27 item 3: the gateway's per-upstream limits are checked when the
/// configuration loads; one it could not honour is refused, naming it.
#[test]
fn issue27_gateway_limits_are_refused_at_load_when_out_of_range() {
    let parse = |extra: &str| {
        crate::Config::parse(
            std::path::Path::new("agency.toml"),
            &format!("[models.main]\napi = \"openai\"\nbase_url = \"http://x\"\n{extra}"),
        )
    };
    let c = parse("").unwrap();
    let m = &c.models["main"];
    assert_eq!(
        (
            m.reserve_output_tokens,
            m.request_timeout_secs,
            m.agent_request_bytes
        ),
        (
            DEFAULT_RESERVE_OUTPUT_TOKENS,
            DEFAULT_REQUEST_TIMEOUT_SECS,
            DEFAULT_AGENT_REQUEST_BYTES
        )
    );
    assert!(m.default_price.is_none());
    let c = parse("reserve_output_tokens = 100\nrequest_timeout_secs = 5\nagent_request_bytes = 1000000\ndefault_price = { input = 0.0, output = 0.0 }\n").unwrap();
    assert_eq!(c.models["main"].reserve_output_tokens, 100);
    for (bad, want) in [
        ("reserve_output_tokens = 0\n", "reserve_output_tokens = 0"),
        ("reserve_output_tokens = -5\n", "reserve_output_tokens = -5"),
        ("request_timeout_secs = 0\n", "request_timeout_secs = 0"),
        (
            "request_timeout_secs = 86400\n",
            "request_timeout_secs = 86400",
        ),
        ("agent_request_bytes = 10\n", "agent_request_bytes = 10"),
        (
            "default_price = { input = -1.0, output = 0.0 }\n",
            "default_price",
        ),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
    }
}
