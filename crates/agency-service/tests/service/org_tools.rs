//! Issue 12 item 4: the tools of applied organisations in the service —
//! installed and replaced per organisation, a name unique across
//! organisations and never one of Agency's own MCP tools, listed for an
//! agent only when its handler holds `tool:NAME`, checked on every call
//! (a revoked capability stops the next one).

use std::collections::BTreeMap;

use agency_core::{Level, Principal, Resource};
use agency_org::{CommandTool, HttpTool, SourceRef, Tool, ToolImplementation, ToolInterface};
use agency_service::GrantRequest;
use serde_json::json;

use crate::support::{Env, assert_kind};

fn tool(name: &str, url: &str) -> Tool {
    Tool {
        name: name.into(),
        description: format!("{name} does things"),
        implementation: ToolImplementation::Http(HttpTool {
            base_url: url.into(),
            endpoint: "/current".into(),
            method: "GET".into(),
            query: vec!["location".into()],
            body: vec![],
            output: BTreeMap::new(),
            headers: BTreeMap::new(),
            timeout_ms: 1000,
        }),
        interface: ToolInterface {
            input_format: [("location".to_owned(), "string".to_owned())].into(),
            output_format: [("temp".to_owned(), "number".to_owned())].into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
            output_schema: json!({"type": "object"}),
        },
        egress: vec![],
        source: SourceRef {
            file: format!("{name}.tool"),
            line: 1,
        },
    }
}

fn grant_tool(name: &str) -> GrantRequest {
    GrantRequest {
        resource: Resource::Tool(name.into()),
        level: Level::Read,
        delegatable: true,
    }
}

fn names(tools: &[Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[test]
fn issue12_item4_install_replace_and_names_unique_across_organisations() {
    let env = Env::new();
    let svc = &env.svc;
    let (a, b) = (
        tool("A", "https://a.example"),
        tool("B", "https://b.example"),
    );
    svc.org_tools_install(Principal::User, "org1", &[a.clone(), b.clone()])
        .unwrap();
    assert_eq!(
        names(&svc.org_tools_for(Principal::User).unwrap()),
        ["A", "B"]
    );
    // Only the user installs.
    let agent = env.agent(env.root);
    assert_kind(
        svc.org_tools_install(agent, "org1", std::slice::from_ref(&a)),
        "permission_denied",
    );
    // Replacing: B removed, A changed, C added.
    let a2 = tool("A", "https://a2.example");
    svc.org_tools_install(
        Principal::User,
        "org1",
        &[a2.clone(), tool("C", "https://c.example")],
    )
    .unwrap();
    let all = svc.org_tools_for(Principal::User).unwrap();
    assert_eq!(names(&all), ["A", "C"]);
    assert_eq!(all[0], a2);
    // Another organisation may not take a name org1 defines; nothing of
    // the refused install is kept.
    let e = assert_kind(
        svc.org_tools_install(
            Principal::User,
            "org2",
            &[
                tool("D", "https://d.example"),
                tool("A", "https://x.example"),
            ],
        ),
        "invalid_input",
    );
    assert!(
        e.to_string().contains("org1") && e.to_string().contains("org2"),
        "{e}"
    );
    assert_eq!(
        names(&svc.org_tools_for(Principal::User).unwrap()),
        ["A", "C"]
    );
    // Agency's own tool names, bad names, twice the same name, bad
    // definitions: refused.
    for bad in [
        tool("kb_read", "https://a.example"),
        tool("has.dot", "https://a.example"),
        tool("bad name", "https://a.example"),
        tool("F", "ftp://a.example"),
        {
            let mut t = tool("G", "https://a.example");
            t.interface.input_schema = json!({"type": "string"});
            t
        },
        {
            let mut t = tool("H", "https://a.example");
            t.implementation = ToolImplementation::Command(CommandTool {
                command: vec![],
                timeout_ms: 10,
                env: Default::default(),
                dir: None,
            });
            t
        },
        {
            let mut t = tool("I", "https://a.example");
            if let ToolImplementation::Http(h) = &mut t.implementation {
                h.query = vec!["not_an_input".into()];
            }
            t
        },
        // MCP tools: both or neither of command and url, a url that is
        // not http(s), a server tool name that is empty or has control
        // characters, no timeout.
        mcp(
            "K",
            Some(vec!["srv".into()]),
            Some("https://a.example"),
            None,
            10,
        ),
        mcp("L", None, None, None, 10),
        mcp("M", None, Some("file:///etc/passwd"), None, 10),
        mcp("N", Some(vec![String::new()]), None, None, 10),
        mcp("O", None, Some("https://a.example"), Some(""), 10),
        mcp("P", None, Some("https://a.example"), Some("a\nb"), 10),
        mcp("Q", None, Some("https://a.example"), Some("add"), 0),
    ] {
        assert_kind(
            svc.org_tools_install(Principal::User, "org3", &[bad]),
            "invalid_input",
        );
    }
    assert_kind(
        svc.org_tools_install(
            Principal::User,
            "org3",
            &[
                tool("J", "https://a.example"),
                tool("J", "https://b.example"),
            ],
        ),
        "invalid_input",
    );
    svc.org_tools_install(
        Principal::User,
        "org3",
        &[mcp(
            "R",
            None,
            Some("https://a.example/mcp"),
            Some("add"),
            10,
        )],
    )
    .unwrap();
    assert!(names(&svc.org_tools_for(Principal::User).unwrap()).contains(&"R"));
    svc.org_tools_install(Principal::User, "org3", &[]).unwrap();
    // An organisation installed with no tools loses them all.
    svc.org_tools_install(Principal::User, "org1", &[]).unwrap();
    assert!(svc.org_tools_for(Principal::User).unwrap().is_empty());
}

#[test]
fn issue12_item4_agents_see_and_call_only_the_tools_they_hold() {
    let env = Env::new();
    let svc = &env.svc;
    svc.org_tools_install(
        Principal::User,
        "org1",
        &[
            tool("A", "https://a.example"),
            tool("B", "https://b.example"),
        ],
    )
    .unwrap();
    let root = env.agent(env.root);
    assert!(svc.org_tools_for(root).unwrap().is_empty());
    let e = assert_kind(svc.org_tool_check(root, "A"), "permission_denied");
    assert!(e.to_string().contains("tool A"), "{e}");
    let cap = svc
        .grant(Principal::User, env.root, &grant_tool("A"))
        .unwrap();
    assert_eq!(names(&svc.org_tools_for(root).unwrap()), ["A"]);
    assert_eq!(svc.org_tool_check(root, "A").unwrap().name, "A");
    assert_kind(svc.org_tool_check(root, "B"), "permission_denied");
    // A capability on a tool no organisation defines shows nothing, and a
    // call says the tool is not there.
    svc.grant(Principal::User, env.root, &grant_tool("Ghost"))
        .unwrap();
    assert_eq!(names(&svc.org_tools_for(root).unwrap()), ["A"]);
    assert_kind(svc.org_tool_check(root, "Ghost"), "invalid_input");
    // A boss passes the tool on to its underling, who then sees it.
    let o = env.outcome(env.root, "sub", &[env.root.root()]);
    let sub = svc.delegate(root, o, &[]).unwrap().handler;
    let subp = env.agent(sub);
    assert!(svc.org_tools_for(subp).unwrap().is_empty());
    svc.grant(root, sub, &grant_tool("A")).unwrap();
    assert_eq!(names(&svc.org_tools_for(subp).unwrap()), ["A"]);
    // Revoked: gone for the holder and for what was derived from it.
    svc.revoke(Principal::User, cap).unwrap();
    assert_kind(svc.org_tool_check(root, "A"), "permission_denied");
    assert_kind(svc.org_tool_check(subp, "A"), "permission_denied");
    assert!(svc.org_tools_for(subp).unwrap().is_empty());
    // A level of none is no right to call.
    svc.grant(
        Principal::User,
        env.root,
        &GrantRequest {
            level: Level::None,
            ..grant_tool("B")
        },
    )
    .unwrap();
    assert_kind(svc.org_tool_check(root, "B"), "permission_denied");
}

/// An MCP tool named `name` (the other fields of `tool`).
fn mcp(
    name: &str,
    command: Option<Vec<String>>,
    url: Option<&str>,
    remote: Option<&str>,
    timeout_ms: u64,
) -> Tool {
    let mut t = tool(name, "https://a.example");
    t.implementation = ToolImplementation::Mcp(agency_org::McpTool {
        command,
        url: url.map(str::to_owned),
        tool: remote.map(str::to_owned),
        timeout_ms,
    });
    t
}
