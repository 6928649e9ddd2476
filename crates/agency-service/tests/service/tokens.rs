//! Bearer tokens map to exactly one live agent and die with it; abbreviated
//! ids resolve only when unique.

use agency_core::Principal;
use agency_store::IdKind;

use crate::support::{Env, assert_kind};

#[test]
fn tokens_name_one_agent_and_die_with_it() {
    let env = Env::new();
    let svc = &env.svc;
    let minted = svc.token_mint(Principal::User, env.root, None).unwrap();
    assert!(
        !format!("{minted:?}").contains(&minted.token),
        "Debug must not print the secret"
    );
    let id = svc.token_authenticate(&minted.token).unwrap();
    assert_eq!((id.handler, id.agent), (env.root, minted.agent));
    // One live agent per handler: a second mint is refused.
    assert_kind(
        svc.token_mint(Principal::User, env.root, None),
        "agent_live",
    );
    // Only the user mints.
    assert_kind(
        svc.token_mint(id.principal(), env.root, None),
        "permission_denied",
    );
    for bad in [
        "",
        "agency_",
        "Bearer x",
        &minted.token[..minted.token.len() - 1],
        &"a".repeat(10_000),
    ] {
        assert_kind(svc.token_authenticate(bad), "permission_denied");
    }
    assert!(svc.token_revoke(Principal::User, minted.agent).unwrap());
    assert_kind(svc.token_authenticate(&minted.token), "permission_denied");
    assert_kind(svc.kb_list(id.principal(), None, None), "permission_denied");

    assert_kind(
        svc.token_mint(
            Principal::User,
            env.root,
            Some(std::path::Path::new("relative")),
        ),
        "invalid_input",
    );
    assert_kind(
        svc.token_mint(
            Principal::User,
            env.root,
            Some(&env.dir.path().join("missing")),
        ),
        "invalid_input",
    );
    // A token also dies when its agent ends.
    let second = svc
        .agent_start_with_token(env.root, Some(env.dir.path()))
        .unwrap();
    assert_eq!(
        svc.token_authenticate(&second.token)
            .unwrap()
            .workspace
            .as_deref(),
        Some(env.dir.path())
    );
    svc.agent_end(second.agent, "exited").unwrap();
    assert_kind(svc.token_authenticate(&second.token), "permission_denied");
}

#[test]
fn prefixes_resolve_only_when_unique() {
    let env = Env::new();
    let svc = &env.svc;
    let full = env.root.to_string();
    assert_eq!(
        svc.resolve_prefix(Principal::User, IdKind::Handler, &full[..8])
            .unwrap(),
        env.root.uuid()
    );
    assert_eq!(
        svc.resolve_prefix(Principal::User, IdKind::Handler, &full.to_uppercase())
            .unwrap(),
        env.root.uuid()
    );
    assert_kind(
        svc.resolve_prefix(Principal::User, IdKind::Handler, "zz"),
        "invalid_input",
    );
    assert_kind(
        svc.resolve_prefix(Principal::User, IdKind::Handler, "%"),
        "invalid_input",
    );
    // Make many outcomes so that a one-character prefix is ambiguous.
    for i in 0..40 {
        env.outcome(env.root, &format!("o{i}"), &[env.root.root()]);
    }
    let ambiguous = (0..16u8).map(|d| format!("{d:x}")).find(|p| {
        svc.resolve_prefix(Principal::User, IdKind::Outcome, p)
            .is_err_and(|e| e.kind() == "invalid_input")
    });
    assert!(ambiguous.is_some());
    let r = env.agent(env.root);
    assert_kind(
        svc.resolve_prefix(r, IdKind::Handler, &full[..8]),
        "permission_denied",
    );
}
