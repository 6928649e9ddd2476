//! Fuzzing of what agents hand the MCP endpoint: random argument objects
//! for every tool (the schema's own keys and junk ones, with values that
//! are real ids, hostile paths, extreme numbers, wrong types), and random
//! workspace paths (`..`, symlinks out and in, NUL, unicode, absolute
//! spellings of the workspace) against the confinement functions.
//!
//! Properties: no call panics or fails at the protocol level; every refusal
//! is a readable `[kind] failed to …` tool error and never `internal`; a
//! path argument never brings in content from outside the workspace; the
//! store is consistent (fsck) after the storm. Cases: `PROPTEST_CASES`, or
//! the defaults below sized for a 2-core machine.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use agency_mcp::TOOL_NAMES;
use agency_mcp::workspace::{read_in_workspace, resolve_in_workspace};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use crate::support::{Agency, call, connect, ok, serve, text};

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Strings an agent (or an attacker steering one) might send.
fn hostile_string(ids: Vec<String>) -> impl Strategy<Value = String> {
    prop_oneof![
        14 => proptest::sample::select(ids),
        1 => Just(String::new()),
        1 => Just("../../etc/passwd".to_owned()),
        1 => Just("/etc/passwd".to_owned()),
        1 => Just("pw".to_owned()),
        1 => Just("etc/passwd".to_owned()),
        1 => Just("notes.md".to_owned()),
        1 => Just("a\0b".to_owned()),
        1 => Just("boss".to_owned()),
        1 => Just("self".to_owned()),
        1 => Just("blake3:00".to_owned()),
        1 => Just("kb".to_owned()),
        1 => Just("read".to_owned()),
        1 => Just("blocked".to_owned()),
        1 => Just("2030-01-01T00:00:00Z".to_owned()),
        1 => Just("x".repeat(70_000)),
        2 => "\\PC{0,40}",
    ]
}

fn value(ids: Vec<String>) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => hostile_string(ids).prop_map(Value::String),
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => prop_oneof![
            Just(i64::MIN), Just(-1i64), Just(0i64), Just(1i64), Just(2i64),
            Just(i64::MAX), any::<i64>(),
        ].prop_map(|n| json!(n)),
        1 => Just(json!(u64::MAX)),
        1 => Just(json!(1.5e300)),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,12}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A value of the type a property's schema asks for (the enum's values,
/// integers at the edges, strings that are ids or hostile), or now and then
/// any value at all.
fn typed_value(schema: &Value, ids: &[String]) -> BoxedStrategy<Value> {
    let any_value = value(ids.to_vec()).boxed();
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let typed = if let Some(Value::Array(choices)) = schema.get("enum") {
        proptest::sample::select(choices.clone()).boxed()
    } else if types.contains(&"integer") {
        prop_oneof![
            Just(i64::MIN),
            Just(-1i64),
            Just(0i64),
            Just(1i64),
            Just(2i64),
            Just(3600i64),
            Just(i64::MAX),
            any::<i64>(),
        ]
        .prop_map(|n| json!(n))
        .boxed()
    } else if types.contains(&"boolean") {
        any::<bool>().prop_map(Value::Bool).boxed()
    } else if types.contains(&"array") {
        let items = schema
            .get("items")
            .cloned()
            .unwrap_or(json!({"type": "string"}));
        proptest::collection::vec(typed_value(&items, ids), 0..3)
            .prop_map(Value::Array)
            .boxed()
    } else if types.contains(&"object") {
        let props: Vec<(String, Value)> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        object(props, ids)
    } else {
        hostile_string(ids.to_vec()).prop_map(Value::String).boxed()
    };
    prop_oneof![9 => typed, 1 => any_value].boxed()
}

/// An object with each of `props` present or not, typed by its schema,
/// plus now and then a junk key.
fn object(props: Vec<(String, Value)>, ids: &[String]) -> BoxedStrategy<Value> {
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = props
        .into_iter()
        .map(|(k, schema)| {
            proptest::option::weighted(
                0.85,
                typed_value(&schema, ids).prop_map(move |v| (k.clone(), v)),
            )
            .boxed()
        })
        .collect();
    let junk = proptest::option::weighted(0.05, ("[a-z]{1,8}", value(ids.to_vec())));
    (fields, junk)
        .prop_map(|(fields, junk)| {
            let mut m: serde_json::Map<String, Value> = fields.into_iter().flatten().collect();
            if let Some((k, v)) = junk {
                m.insert(k, v);
            }
            Value::Object(m)
        })
        .boxed()
}

/// One call: a tool and an argument object built from its input schema.
fn tool_call(
    schemas: BTreeMap<String, Value>,
    ids: Vec<String>,
) -> impl Strategy<Value = (String, Value)> {
    let calls: Vec<BoxedStrategy<(String, Value)>> = schemas
        .into_iter()
        .map(|(name, schema)| {
            let props: Vec<(String, Value)> = schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
            object(props, &ids)
                .prop_map(move |args| (name.clone(), args))
                .boxed()
        })
        .collect();
    proptest::strategy::Union::new(calls)
}

#[test]
fn random_tool_arguments_never_panic_and_refuse_readably() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let a = Agency::new();
    let (_server, client, schemas, ids) = rt.block_on(async {
        let server = serve(a.svc.clone(), Some(a.identity())).await;
        let c = connect(&server.url).await.unwrap();
        let mut schemas = BTreeMap::new();
        for t in c.list_all_tools().await.unwrap() {
            schemas.insert(t.name.to_string(), Value::Object((*t.input_schema).clone()));
        }
        // Real ids of each kind, so that calls get past parsing.
        let o = ok(&call(
            &c,
            "outcome_create",
            json!({"title": "fuzz", "parents": [a.root.to_string()]}),
        )
        .await);
        let f = ok(&call(&c, "kb_create", json!({"description": "d", "content": "x"})).await);
        let o2 = ok(&call(
            &c,
            "outcome_create",
            json!({"title": "fuzz 2", "parents": [a.root.to_string()]}),
        )
        .await);
        let d = ok(&call(&c, "delegate", json!({"outcome": o2["outcome"]})).await);
        let ids: Vec<String> = [
            a.root.to_string(),
            a.agent.to_string(),
            o["outcome"].as_str().unwrap().to_owned(),
            f["file"].as_str().unwrap().to_owned(),
            f["hash"].as_str().unwrap().to_owned(),
            d["handler"].as_str().unwrap().to_owned(),
            uuid::Uuid::new_v4().to_string(),
        ]
        .into();
        (server, c, schemas, ids)
    });
    assert_eq!(schemas.len(), TOOL_NAMES.len());
    let outside = agency_store::BlobId::of(&std::fs::read("/etc/passwd").unwrap_or_default());

    let mut runner = TestRunner::new(Config {
        cases: cases(48),
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(tool_call(schemas, ids), 1..5);
    // Answers by kind ("ok" for successes), to show what the run reached.
    let tally = std::cell::RefCell::new(BTreeMap::<String, usize>::new());
    let result = runner.run(&strategy, |calls| {
        rt.block_on(async {
            for (name, args) in &calls {
                let Value::Object(map) = args.clone() else {
                    unreachable!()
                };
                let r = client
                    .call_tool(
                        rmcp::model::CallToolRequestParams::new(name.clone()).with_arguments(map),
                    )
                    .await
                    .map_err(|e| {
                        TestCaseError::fail(format!("{name} {args}: protocol error {e}"))
                    })?;
                let t = text(&r).to_owned();
                let kind = if r.is_error == Some(true) {
                    t.split(']')
                        .next()
                        .unwrap_or_default()
                        .trim_start_matches('[')
                        .to_owned()
                } else {
                    "ok".to_owned()
                };
                *tally.borrow_mut().entry(kind).or_default() += 1;
                if r.is_error == Some(true) {
                    prop_assert!(
                        t.starts_with('[') && t.contains("] failed to"),
                        "{} {}: unreadable refusal {:?}",
                        name,
                        args,
                        t
                    );
                    prop_assert!(!t.starts_with("[internal]"), "{} {}: {}", name, args, t);
                } else if matches!(name.as_str(), "kb_create" | "kb_write" | "state_write")
                    && args.get("path").is_some()
                {
                    // Content taken from a path is the workspace's own.
                    let v: Value = serde_json::from_str(&t).unwrap();
                    let hash = v["hash"].as_str().unwrap_or_default();
                    prop_assert_ne!(
                        hash,
                        outside.as_str(),
                        "{} {}: read /etc/passwd",
                        name,
                        args
                    );
                }
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let tally = tally.into_inner();
    println!("tool fuzz answers: {tally:?}");
    // Not vacuous: calls got past parsing to the service and succeeded.
    assert!(tally.get("ok").copied().unwrap_or(0) > 0, "{tally:?}");
    assert!(tally.len() >= 3, "{tally:?}");
    let report = a.sys.fsck().unwrap();
    assert!(report.is_clean(), "{report:?}");
    rt.block_on(async { client.cancel().await.ok() });
}

/// A workspace with regular files, symlinks pointing in and out, a loop,
/// a dangling link, a unicode name, and a file right beside it.
struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    alias: PathBuf,
    inside: Vec<Vec<u8>>,
}

fn ws() -> Ws {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(root.join("sub/deep")).unwrap();
    let files = [
        ("a.txt", "alpha"),
        ("sub/b.txt", "beta"),
        ("sub/deep/c.txt", "gamma"),
        ("é ü.txt", "unicode"),
    ];
    for (p, c) in files {
        std::fs::write(root.join(p), c).unwrap();
    }
    std::fs::write(dir.path().join("outside.txt"), "OUTSIDE").unwrap();
    symlink("/etc/passwd", root.join("pw")).unwrap();
    symlink("/etc", root.join("etc")).unwrap();
    symlink("..", root.join("up")).unwrap();
    symlink("../outside.txt", root.join("out")).unwrap();
    symlink("sub", root.join("in")).unwrap();
    symlink(root.join("a.txt"), root.join("abs_in")).unwrap();
    symlink("loop", root.join("loop")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    let alias = dir.path().join("alias");
    symlink(&root, &alias).unwrap();
    Ws {
        _dir: dir,
        root,
        alias,
        inside: files.iter().map(|(_, c)| c.as_bytes().to_vec()).collect(),
    }
}

fn path_strategy(w: &Ws) -> impl Strategy<Value = String> {
    let root = w.root.display().to_string();
    let canon = w.root.canonicalize().unwrap().display().to_string();
    let alias = w.alias.display().to_string();
    let parent = w.root.parent().unwrap().display().to_string();
    let prefix = prop_oneof![
        4 => Just(String::new()),
        1 => Just(format!("{root}/")),
        1 => Just(format!("{canon}/")),
        1 => Just(format!("{alias}/")),
        1 => Just(format!("{parent}/")),
        1 => Just(format!("{root}x/")),
        1 => Just("/".to_owned()),
        1 => Just("/etc/".to_owned()),
    ];
    let segment = prop_oneof![
        2 => Just("..".to_owned()),
        2 => Just(".".to_owned()),
        1 => Just(String::new()),
        3 => proptest::sample::select(vec![
            "a.txt", "sub", "b.txt", "deep", "c.txt", "é ü.txt", "pw", "etc", "passwd",
            "up", "out", "in", "abs_in", "loop", "dangling", "ws", "outside.txt", "alias",
        ])
        .prop_map(str::to_owned),
        1 => Just("a\0".to_owned()),
        1 => "[a-zé.\\\\ ]{1,5}",
    ];
    (
        prefix,
        proptest::collection::vec(segment, 0..6),
        any::<bool>(),
    )
        .prop_map(|(p, segs, trailing)| {
            let mut s = p + &segs.join("/");
            if trailing {
                s.push('/');
            }
            s
        })
}

#[test]
fn random_paths_never_resolve_outside_the_workspace() {
    let w = ws();
    let canon = w.root.canonicalize().unwrap();
    let mut runner = TestRunner::new(Config {
        cases: cases(2000),
        failure_persistence: None,
        ..Config::default()
    });
    // Paths read inside and refusals, to show both sides were reached.
    let (inside, refused) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let result = runner.run(&path_strategy(&w), |path| {
        let resolved = resolve_in_workspace(&w.root, &path);
        let read = read_in_workspace(&w.root, &path, 1 << 20);
        let via_alias = resolve_in_workspace(&w.alias, &path);
        for r in [&resolved, &via_alias] {
            match r {
                Ok(p) => {
                    prop_assert!(p.starts_with(&canon), "{:?} -> {}", path, p.display());
                    prop_assert!(p.is_file(), "{:?} -> {}", path, p.display());
                    prop_assert!(!path.contains('\0'), "{:?}", path);
                    prop_assert!(
                        !Path::new(&path)
                            .components()
                            .any(|c| c == Component::ParentDir),
                        "{:?}",
                        path
                    );
                }
                Err(e) => {
                    let t = e.to_string();
                    prop_assert!(t.starts_with("failed to "), "{:?}: {}", path, t);
                }
            }
        }
        match &read {
            Ok(_) => inside.set(inside.get() + 1),
            Err(_) => refused.set(refused.get() + 1),
        }
        match read {
            Ok(bytes) => {
                prop_assert!(resolved.is_ok(), "{:?} read but did not resolve", path);
                prop_assert!(w.inside.contains(&bytes), "{:?} read {:?}", path, bytes);
            }
            Err(e) => prop_assert!(resolved.is_err() || e.to_string().starts_with("failed to ")),
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        inside.get() > 0 && refused.get() > 0,
        "{inside:?} {refused:?}"
    );
}

/// Caught by the tool fuzz: the outcome state machine's refusals reached
/// agents as bare rule text ("the outcome is perpetual …"), not in the
/// "failed to …" form naming the outcome that every other error has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_machine_refusals_say_failed_to_and_name_the_outcome() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();
    let root = a.root.to_string();
    let t = crate::support::err(
        &call(&c, "outcome_request_completion", json!({"summary": "done"})).await,
        "perpetual",
    );
    assert_eq!(
        t.split(": ").next().unwrap(),
        format!("[invalid_input] failed to request completion of outcome {root}"),
        "{t}"
    );
    let o = ok(&call(
        &c,
        "outcome_create",
        json!({"title": "t", "parents": [root]}),
    )
    .await);
    ok(&call(
        &c,
        "outcome_complete",
        json!({"outcome": o["outcome"], "rationale": "done"}),
    )
    .await);
    let t = crate::support::err(
        &call(
            &c,
            "outcome_close",
            json!({"outcome": o["outcome"], "rationale": "again"}),
        )
        .await,
        "already completed",
    );
    assert!(
        t.starts_with(&format!(
            "[invalid_input] failed to close outcome {}",
            o["outcome"].as_str().unwrap()
        )),
        "{t}"
    );
}
