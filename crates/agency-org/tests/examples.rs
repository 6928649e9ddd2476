//! The repository's example organisations compile to the expected models
//! (seed 002's WeatherAgency verbatim, seed 004's agents.json), the same
//! bytes every time and from a copy elsewhere, and a Claude Code subagent
//! file is a valid `.agent` that exports back unchanged.

use std::path::{Path, PathBuf};

use agency_org::{ToolImplementation, compile, export_claude, to_json};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

#[test]
fn weather_agency_compiles_as_the_seed_describes() {
    let c = compile(&example("weather-agency")).expect("compiles");
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let m = &c.model;
    assert_eq!(m.name, "WeatherAgency");
    assert_eq!(m.executive_agent, "FrontDeskAgent");
    assert_eq!(
        m.static_memory,
        ["We are WeatherAgency. We handle user greetings and weather information."]
    );
    let front = &m.agents[0];
    assert_eq!(
        (front.name.as_str(), front.title.as_str()),
        ("FrontDeskAgent", "Front Desk")
    );
    assert!(front.tools.is_empty() && front.inherits.is_empty());
    assert_eq!(
        front.behavior.on_message,
        [
            "Decide if the user is just greeting.",
            "If they want weather information, pass the request to WeatherAgent.",
            "Return a final response.",
        ]
    );
    assert_eq!(front.static_memory.len(), 2);
    let weather = &m.agents[1];
    assert_eq!(weather.tools, ["WeatherTool"]);
    assert_eq!(weather.description, "Helps retrieve weather information");
    assert_eq!(
        weather.behavior.on_message,
        [
            "When requested for weather, use WeatherTool to fetch the data.",
            "Format the result and return it to the caller.",
        ]
    );
    assert_eq!(
        weather.memory.guidance,
        ["Stores latest location requests for repeated usage."]
    );
    let tool = &m.tools[0];
    let ToolImplementation::Http(h) = &tool.implementation else {
        panic!("not http: {:?}", tool.implementation)
    };
    assert_eq!(h.base_url, "https://api.example-weather.com");
    assert_eq!(h.endpoint, "/current");
    assert_eq!(h.method, "GET");
    assert_eq!(h.query, ["location"]);
    assert_eq!(
        tool.interface
            .input_format
            .get("location")
            .map(String::as_str),
        Some("string")
    );
    assert_eq!(
        tool.interface.output_format.get("temp").map(String::as_str),
        Some("number")
    );
    assert_eq!(
        tool.interface
            .output_format
            .get("conditions")
            .map(String::as_str),
        Some("string")
    );
    assert_eq!(tool.interface.input_schema["additionalProperties"], false);
    assert_eq!(
        tool.interface.input_schema["required"],
        serde_json::json!(["location"])
    );
}

#[test]
fn octybot_agents_json_compiles() {
    let c = compile(&example("octybot")).expect("compiles");
    let m = &c.model;
    assert_eq!(m.name, "octybot");
    assert_eq!(m.executive_agent, "main");
    let main = m.executive().expect("executive");
    assert_eq!(main.connections, ["airtable", "github"]);
    assert_eq!(main.title, "Main Agent");
    let names: Vec<&str> = m.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["airtable", "github"]);
    let ToolImplementation::Command(cmd) = &m.tools[0].implementation else {
        panic!("not a command")
    };
    assert_eq!(cmd.command, ["python3", "airtable.py"]);
    // The agents' lists name the tool by the script's stem too.
    let airtable = m
        .agents
        .iter()
        .find(|a| a.name == "airtable")
        .expect("airtable");
    assert_eq!(airtable.tools, ["airtable"]);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

#[test]
fn compiling_is_deterministic_and_independent_of_location() {
    for name in ["weather-agency", "octybot"] {
        let a = to_json(&compile(&example(name)).expect("compiles").model);
        let b = to_json(&compile(&example(name)).expect("compiles").model);
        assert_eq!(a, b);
        let tmp = tempfile::tempdir().expect("tempdir");
        let copy = tmp.path().join(name);
        copy_dir(&example(name), &copy);
        let c = to_json(&compile(&copy).expect("compiles").model);
        assert_eq!(a, c, "{name}");
        assert!(a.ends_with("}\n"));
        // A changed source changes the hash.
        let any = std::fs::read_dir(&copy)
            .expect("dir")
            .next()
            .expect("a file")
            .expect("entry")
            .path();
        let mut text = std::fs::read_to_string(&any).expect("read");
        text.push(' ');
        std::fs::write(&any, text).expect("write");
        let d = compile(&copy).expect("compiles").model;
        assert_ne!(
            d.metadata,
            compile(&example(name)).expect("compiles").model.metadata
        );
    }
}

const REVIEWER: &str = "---
name: code-reviewer
description: Expert code review specialist. Use immediately after writing or modifying code.
tools: Read, Grep, Glob, Bash
model: sonnet
---

You are a senior code reviewer ensuring high standards of code quality and security.

When invoked:
1. Run git diff to see recent changes
2. Focus on modified files
3. Begin review immediately

## Review checklist
- Code is simple and readable
- No exposed secrets or API keys
";

#[test]
fn a_claude_code_subagent_is_an_agent_and_round_trips() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        tmp.path().join("review.agency"),
        "# Agency Name: Review\n## Executive Agent\ncode-reviewer\n",
    )
    .expect("write");
    std::fs::write(tmp.path().join("code-reviewer.agent"), REVIEWER).expect("write");
    let c = compile(tmp.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let a = &c.model.agents[0];
    assert_eq!(a.name, "code-reviewer");
    assert_eq!(
        a.description,
        "Expert code review specialist. Use immediately after writing or modifying code."
    );
    assert!(
        a.tools.is_empty(),
        "Claude's tools are Claude Code's, not organisation tools"
    );
    assert!(a.static_memory.iter().any(|l| l == "## Review checklist"));
    assert_eq!(export_claude(a), REVIEWER);
}
