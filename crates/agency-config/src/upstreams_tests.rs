//! Tests of `upstreams.rs`: upstream roots and the choice of each agent's
//! upstream.

use super::*;

#[test]
fn roots_drop_the_trailing_v1() {
    assert_eq!(
        root_of("https://api.openai.com/v1/"),
        "https://api.openai.com"
    );
    assert_eq!(root_of("http://127.0.0.1:9"), "http://127.0.0.1:9");
}

/// A handler's choice wins when the runtime can use it; else the
/// runtime's upstream (Claude Code cannot use an OpenAI one).
#[test]
fn routes_prefer_the_handlers_usable_choice() {
    let up = |api: &str, model: &str| ModelUpstreamConfig {
        model: model.into(),
        ..ModelUpstreamConfig::new(api, "http://x".into())
    };
    let cfg = BTreeMap::from([
        ("a".to_owned(), up("anthropic", "")),
        ("cheap".to_owned(), up("anthropic", "haiku")),
        ("o".to_owned(), up("openai", "")),
    ]);
    let r = ModelRoutes::new(&cfg, "a", Some(Api::Anthropic));
    assert_eq!(r.route(None).unwrap().upstream, "a");
    let c = r.route(Some("cheap")).unwrap();
    assert_eq!(
        (c.upstream.as_str(), c.model.as_deref()),
        ("cheap", Some("haiku"))
    );
    assert_eq!(r.route(Some("o")).unwrap().upstream, "a");
    assert_eq!(r.route(Some("gone")).unwrap().upstream, "a");
    assert!(ModelRoutes::new(&cfg, "", None).route(None).is_none());
    let mut m = Models::new(&cfg, &BTreeMap::new(), &Secrets::default()).unwrap();
    assert_eq!(m.allowed_for(Some("o")), Some("o"));
    assert_eq!(m.allowed_for(None), None);
    m.set_runtime("a", Some(Api::Anthropic));
    assert_eq!(m.usable().collect::<Vec<_>>(), ["a", "cheap"]);
    assert_eq!(m.allowed_for(Some("o")), Some("a"));
    assert_eq!(m.allowed_for(Some("cheap")), Some("cheap"));
    assert_eq!(m.allowed_for(None), Some("a"));
}
