//! Issue 10 item 4: `egress:PATTERN` capabilities are granted, restricted,
//! delegated and revoked like every other one, `egress_check` decides from
//! them alone (plus the configured model endpoint), and every connection
//! is a record in the handler's audit log.

use agency_core::{CapabilityId, HandlerId, Level, OutcomeId, Principal, Resource};
use agency_service::{Declared, EgressDecision, GrantRequest};

use crate::support::{Env, assert_kind};

fn egress(pattern: &str, level: Level, delegatable: bool) -> GrantRequest {
    GrantRequest {
        resource: Resource::from_parts("egress", pattern).unwrap(),
        level,
        delegatable,
    }
}

fn allowed(env: &Env, who: Principal, host: &str, port: u16) -> bool {
    env.svc.egress_check(who, host, port).unwrap().allowed()
}

/// root -> b (outcome `ob`) -> c (outcome `oc`).
fn chain(env: &Env) -> (HandlerId, OutcomeId, HandlerId, OutcomeId) {
    let svc = &env.svc;
    let ob = env.outcome(env.root, "B", &[env.root.root()]);
    let b = svc.delegate(env.agent(env.root), ob, &[]).unwrap().handler;
    let oc = env.outcome(b, "C", &[ob]);
    let c = svc.delegate(env.agent(b), oc, &[]).unwrap().handler;
    (b, ob, c, oc)
}

#[test]
fn issue10_item4_egress_follows_the_grant_rule() {
    let env = Env::new();
    let svc = &env.svc;
    let (b, _, c, _) = chain(&env);
    let (pr, pb, pc) = (env.agent(env.root), env.agent(b), env.agent(c));
    // Deny by default, the user aside.
    assert!(!allowed(&env, pr, "api.github.com", 443));
    assert_eq!(
        svc.egress_check(Principal::User, "api.github.com", 443)
            .unwrap(),
        EgressDecision::User
    );
    // The user grants the root a wildcard it may pass on.
    let wide = svc
        .grant(
            Principal::User,
            env.root,
            &egress("*.GitHub.com", Level::Read, true),
        )
        .unwrap();
    assert!(allowed(&env, pr, "api.github.com", 443));
    assert!(allowed(&env, pr, "API.github.com.", 80));
    assert!(
        !allowed(&env, pr, "github.com", 443),
        "the apex is not a subdomain"
    );
    assert!(
        !allowed(&env, pr, "api.github.com", 22),
        "no port: 80 and 443 only"
    );
    assert!(!allowed(&env, pr, "evilgithub.com", 443));
    // Delegated and restricted: the root passes on one host of its
    // wildcard (a narrower pattern), never a wider one.
    assert!(!allowed(&env, pb, "api.github.com", 443));
    let narrow = svc
        .grant(pr, b, &egress("api.github.com", Level::Read, false))
        .unwrap();
    assert!(allowed(&env, pb, "api.github.com", 443));
    assert!(!allowed(&env, pb, "raw.github.com", 443));
    let e = assert_kind(
        svc.grant(pr, b, &egress("github.com", Level::Read, false)),
        "permission_denied",
    );
    assert!(e.to_string().contains("egress:github.com"), "{e}");
    assert_kind(
        svc.grant(pr, b, &egress("*.github.com:22", Level::Read, false)),
        "permission_denied",
    );
    // Not delegatable: b cannot pass it on to c.
    assert_kind(
        svc.grant(pb, c, &egress("api.github.com", Level::Read, false)),
        "permission_denied",
    );
    assert!(!allowed(&env, pc, "api.github.com", 443));
    // Level none reaches nothing.
    let none = svc
        .grant(pr, b, &egress("raw.github.com", Level::None, false))
        .unwrap();
    assert!(!allowed(&env, pb, "raw.github.com", 443));
    // b's capability derives from the root's: revoking the root's wildcard
    // revokes it too.
    let rows = svc.permissions_list(pb, None).unwrap();
    let row = rows.iter().find(|r| r.id == narrow).unwrap();
    assert_eq!(row.derived_from, Some(wide));
    let revoked = svc.revoke(Principal::User, wide).unwrap();
    assert!(
        revoked.contains(&narrow) && revoked.contains(&none),
        "{revoked:?}"
    );
    assert!(!allowed(&env, pr, "api.github.com", 443));
    assert!(!allowed(&env, pb, "api.github.com", 443));
    // An agent cannot revoke.
    assert_kind(svc.revoke(pb, CapabilityId(1)), "permission_denied");
}

#[test]
fn issue10_item4_an_egress_grant_ends_with_its_outcome() {
    let env = Env::new();
    let svc = &env.svc;
    let (b, _, c, oc) = chain(&env);
    let (pr, pb, pc) = (env.agent(env.root), env.agent(b), env.agent(c));
    svc.grant(
        Principal::User,
        env.root,
        &egress("127.0.0.1:5432", Level::Read, true),
    )
    .unwrap();
    // Escalation: the root grants b the address for c's outcome; b passes
    // it down.
    svc.grant_for(
        pr,
        b,
        &egress("127.0.0.1:5432", Level::Read, true),
        Some(oc),
    )
    .unwrap();
    svc.grant(pb, c, &egress("127.0.0.1:5432", Level::Read, false))
        .unwrap();
    assert!(allowed(&env, pc, "127.0.0.1", 5432));
    assert!(
        !allowed(&env, pc, "localhost", 5432),
        "an address grant is not a name"
    );
    assert!(!allowed(&env, pc, "127.0.0.1", 5433));
    svc.outcome_complete(pb, oc, "done").unwrap();
    assert!(!allowed(&env, pb, "127.0.0.1", 5432));
    assert!(allowed(&env, pr, "127.0.0.1", 5432));
}

#[test]
fn issue10_item4_the_decision_names_the_capability_and_the_way_out() {
    let env = Env::new();
    let svc = &env.svc;
    let pr = env.agent(env.root);
    let id = svc
        .grant(
            Principal::User,
            env.root,
            &egress("[::1]:8080", Level::Read, false),
        )
        .unwrap();
    match svc.egress_check(pr, "::1", 8080).unwrap() {
        EgressDecision::Granted {
            capability,
            pattern,
        } => {
            assert_eq!(capability, id);
            assert_eq!(pattern.to_string(), "[::1]:8080");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !svc.egress_check(pr, "[::1]", 8080)
            .unwrap()
            .check_resolved()
    );
    let EgressDecision::Refused { message } = svc.egress_check(pr, "example.com", 443).unwrap()
    else {
        panic!("refused expected")
    };
    assert!(
        message.contains("example.com:443") && message.contains("grant egress:example.com"),
        "{message}"
    );
    let EgressDecision::Refused { message } = svc.egress_check(pr, "example.com", 8443).unwrap()
    else {
        panic!("refused expected")
    };
    assert!(message.contains("egress:example.com:8443"), "{message}");
    assert_kind(
        svc.egress_check(pr, "https://example.com", 443),
        "invalid_input",
    );
    assert_kind(svc.egress_check(pr, "*.example.com", 443), "invalid_input");
}

/// Issue 11 item 1: agents reach their model only through the daemon's
/// gateway, so no model host is reachable through the egress proxy without
/// a capability, not even the one the configuration names.
#[test]
fn issue11_item1_no_model_host_is_implicitly_reachable() {
    let env = Env::new();
    let svc = &env.svc;
    let pr = env.agent(env.root);
    svc.set_declared(Declared::default());
    for (host, port) in [
        ("api.anthropic.com", 443),
        ("API.anthropic.com", 443),
        ("api.openai.com", 443),
        ("127.0.0.1", 11434),
    ] {
        assert!(!allowed(&env, pr, host, port), "{host}:{port}");
    }
}

#[test]
fn issue10_item4_every_connection_is_in_the_audit_log() {
    let env = Env::new();
    let svc = &env.svc;
    let pr = env.agent(env.root);
    let cap = svc
        .grant(
            Principal::User,
            env.root,
            &egress("*.example.com", Level::Read, false),
        )
        .unwrap();
    let ok = svc.egress_check(pr, "api.example.com", 443).unwrap();
    svc.egress_record(pr, "api.example.com", 443, &ok, None)
        .unwrap();
    let no = svc.egress_check(pr, "evil.net", 443).unwrap();
    svc.egress_record(pr, "evil.net", 443, &no, None).unwrap();
    svc.egress_record(
        pr,
        "db.example.com",
        443,
        &ok,
        Some("db.example.com resolves to 127.0.0.1,\na local address"),
    )
    .unwrap();
    // The user's connections are nobody's audit.
    svc.egress_record(Principal::User, "x.net", 443, &EgressDecision::User, None)
        .unwrap();
    let log: Vec<String> = svc
        .audit_read(Principal::User, Some(env.root))
        .unwrap()
        .into_iter()
        .map(|e| e.summary)
        .filter(|s| s.starts_with("egress"))
        .collect();
    assert_eq!(
        log,
        [
            format!("egress to api.example.com:443 allowed by capability {cap} (egress:*.example.com)"),
            "egress to evil.net:443 refused: no egress capability matches".to_owned(),
            "egress to db.example.com:443 refused: db.example.com resolves to 127.0.0.1, a local address"
                .to_owned(),
        ]
    );
    // The audit log file shows them too (rendered like every entry).
    let h = svc.handler_view(Principal::User, env.root).unwrap();
    let text =
        String::from_utf8(svc.kb_read(Principal::User, h.audit_log).unwrap().content).unwrap();
    assert!(text.contains("evil.net:443 refused"), "{text}");
    // A record is bounded: a long reason is clipped.
    svc.egress_record(pr, "db.example.com", 443, &ok, Some(&"x".repeat(10_000)))
        .unwrap();
    let last = svc
        .audit_read(Principal::User, Some(env.root))
        .unwrap()
        .pop()
        .unwrap();
    assert!(last.summary.len() < 500, "{}", last.summary.len());
}

/// Issue 11 item 5: an extra MCP server launched for an agent reaches its
/// manifest's hosts (same matching rules: no port means 80 and 443), only
/// while the agent's handler holds a capability on `mcp_server:NAME`, and
/// never through the handler's own `egress` capabilities.
#[test]
fn issue11_item5_a_servers_egress_is_its_manifest_while_the_server_is_held() {
    let env = Env::new();
    let svc = &env.svc;
    let pr = env.agent(env.root);
    let manifest = ["api.example.com", "127.0.0.1:8080"]
        .map(|p| agency_core::egress::EgressPattern::parse(p).unwrap());
    let check = |host: &str, port: u16| svc.mcp_egress_check(pr, "web", &manifest, host, port);
    // Not held: refused, whatever the manifest says.
    let EgressDecision::Refused { message } = check("api.example.com", 443).unwrap() else {
        panic!("refused expected")
    };
    assert!(message.contains("mcp_server web"), "{message}");
    let held = svc
        .grant(
            Principal::User,
            env.root,
            &GrantRequest {
                resource: Resource::from_parts("mcp_server", "web").unwrap(),
                level: Level::Read,
                delegatable: false,
            },
        )
        .unwrap();
    svc.grant(
        Principal::User,
        env.root,
        &egress("other.example.com", Level::Read, false),
    )
    .unwrap();
    match check("api.example.com", 443).unwrap() {
        EgressDecision::McpManifest { server, pattern } => {
            assert_eq!(server, "web");
            assert_eq!(pattern.to_string(), "api.example.com");
        }
        other => panic!("{other:?}"),
    }
    assert!(check("api.example.com", 80).unwrap().check_resolved());
    assert!(!check("api.example.com", 8443).unwrap().allowed());
    let ip = check("127.0.0.1", 8080).unwrap();
    assert!(ip.allowed() && !ip.check_resolved());
    assert!(!check("127.0.0.1", 8081).unwrap().allowed());
    // The handler's own grant is not the server's, nor the reverse.
    let EgressDecision::Refused { message } = check("other.example.com", 443).unwrap() else {
        panic!("refused expected")
    };
    assert!(
        message.contains("manifest of MCP server web declares no egress"),
        "{message}"
    );
    assert!(allowed(&env, pr, "other.example.com", 443));
    assert!(!allowed(&env, pr, "api.example.com", 443));
    // Each connection is recorded naming the server.
    svc.egress_record(
        pr,
        "api.example.com",
        443,
        &check("api.example.com", 443).unwrap(),
        None,
    )
    .unwrap();
    let log: Vec<String> = svc
        .audit_read(Principal::User, Some(env.root))
        .unwrap()
        .into_iter()
        .map(|e| e.summary)
        .filter(|s| s.starts_with("egress"))
        .collect();
    assert_eq!(
        log,
        [
            "egress to api.example.com:443 by MCP server web allowed by its manifest (egress api.example.com)"
        ]
    );
    // Revoked: refused again.
    svc.revoke(Principal::User, held).unwrap();
    assert!(!check("api.example.com", 443).unwrap().allowed());
    assert_kind(check("http://x", 443), "invalid_input");
}
