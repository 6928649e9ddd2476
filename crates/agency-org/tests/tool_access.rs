//! Issue 28: a `.tool`'s headers, environment variables and egress, as
//! bullets and as frontmatter, in the compiled model; and the mistakes the
//! compiler refuses, at file:line:col.

use agency_org::{ToolImplementation, compile};

const AGENCY: &str =
    "# Agency Name: A\n## Executive Agent\nThe executive agent is Boss.\n## Tools\n- T\n";
const BOSS: &str = "# Agent Name: Boss\n## Tools\n- T\n";

/// Compile A with `tool` as `T.tool`: the model, or every diagnostic.
fn compile_tool(tool: &str) -> Result<agency_org::AgencyModel, String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (name, text) in [("A.agency", AGENCY), ("Boss.agent", BOSS), ("T.tool", tool)] {
        std::fs::write(tmp.path().join(name), text).expect("write");
    }
    compile(tmp.path())
        .map(|c| c.model)
        .map_err(|e| e.diagnostics.iter().map(|d| format!("{d}\n")).collect())
}

#[test]
fn issue28_headers_env_and_egress_reach_the_model() {
    let m = compile_tool(
        "# Tool Name: T\n- Base URL: https://api.example.com\n- Endpoint: /x\n- Header: X-Api-Key: ${secret:key}\n- Header: Accept-Language: en\n- Egress: api.example.com, 127.0.0.1:8080\n",
    )
    .expect("compiles");
    let t = &m.tools[0];
    assert_eq!(t.egress, ["api.example.com", "127.0.0.1:8080"]);
    let ToolImplementation::Http(h) = &t.implementation else {
        panic!("{t:?}")
    };
    assert_eq!(h.headers["X-Api-Key"], "${secret:key}");
    assert_eq!(h.headers["Accept-Language"], "en");

    let m = compile_tool(
        "---\ntype: command\ncommand: ./run\nenv: {TOKEN: \"${secret:key}\", MODE: ro}\negress: [\"api.example.com:8443\"]\n---\n# T\n",
    )
    .expect("compiles");
    let t = &m.tools[0];
    assert_eq!(t.egress, ["api.example.com:8443"]);
    let ToolImplementation::Command(c) = &t.implementation else {
        panic!("{t:?}")
    };
    assert_eq!(c.env["TOKEN"], "${secret:key}");
    assert_eq!(c.env["MODE"], "ro");
}

#[test]
fn issue28_bad_headers_env_and_egress_are_errors() {
    let http = "# Tool Name: T\n- Base URL: https://api.example.com\n- Endpoint: /x\n";
    for (line, want) in [
        ("- Header: X-Key", "is not `Name: value`"),
        (
            "- Header: Host: evil.example",
            "header `Host` is set by the daemon",
        ),
        ("- Header: X-Key: ${secret:k", "is not closed with }"),
        ("- Header: X Key: v", "is not a header name"),
        ("- Env: TOKEN=x", "not a command tool"),
        (
            "- Egress: https://api.example.com",
            "egress `https://api.example.com`",
        ),
    ] {
        let e = compile_tool(&format!("{http}{line}\n")).expect_err(line);
        assert!(e.contains("T.tool:4:") && e.contains(want), "{line}: {e}");
    }
    let cmd = "# Tool Name: T\n- Command: ./run\n";
    for (line, want) in [
        ("- Env: TOKEN", "is not `NAME=value`"),
        ("- Env: HTTP_PROXY=http://evil", "set by the daemon"),
        ("- Env: AGENCY_TOKEN=x", "set by the daemon"),
        ("- Env: 1X=y", "is not a name"),
        ("- Header: X-Key: v", "not an HTTP tool"),
    ] {
        let e = compile_tool(&format!("{cmd}{line}\n")).expect_err(line);
        assert!(e.contains("T.tool:3:") && e.contains(want), "{line}: {e}");
    }
}
