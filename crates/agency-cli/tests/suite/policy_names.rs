//! Issue 28: `policy.toml` accepted `tool = "Counter"` for an
//! organisation's tool and never matched (the name is `tool:Counter`),
//! and any other name no tool has. Now a rule's tool name without a glob
//! must name a tool the daemon asks about, or `agency serve` refuses to
//! start, naming the line and what was meant.

#![allow(clippy::unwrap_used)]

use crate::home;

use home::TestHome;

fn rule(tool: &str) -> String {
    format!("# my rules\n[[rule]]\ntool = {tool:?}\nverdict = \"deny\"\n")
}

#[test]
fn issue28_policy_refuses_unknown_tool_names_with_a_did_you_mean() {
    for (tool, want) in [
        ("Counter", "did you mean \"tool:Counter\"?"),
        ("Bash", "did you mean \"bash\"?"),
        ("claude:bash", "did you mean \"claude:Bash\"?"),
        ("mcp:mial/send", "did you mean \"mcp:mail/send\"?"),
    ] {
        let h = TestHome::new();
        h.init_with("[mcp_servers.mail]\ncommand = \"true\"\n");
        std::fs::write(h.dir.join("policy.toml"), rule(tool)).unwrap();
        let out = h.command(&["serve"]).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{tool}: {err}");
        assert!(err.contains("policy.toml:3"), "{tool}: {err}");
        assert!(err.contains(want), "{tool}: {err}");
    }

    // The names that exist, and globs, start.
    let h = TestHome::new();
    h.init_with("[mcp_servers.mail]\ncommand = \"true\"\n");
    let names = [
        "tool:Counter",
        "bash",
        "claude:Bash",
        "claude:mcp__agency__mail_send",
        "mcp:mail/send",
        "mcp:*",
        "repo_push",
        "Count*",
    ];
    let policy: String = names.iter().map(|t| rule(t)).collect();
    std::fs::write(h.dir.join("policy.toml"), policy).unwrap();
    let daemon = h.serve();
    assert_eq!(h.run(&["status"]).code, 0);
    daemon.terminate();
}
