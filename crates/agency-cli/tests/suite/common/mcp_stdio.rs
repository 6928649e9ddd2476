//! An agent's MCP client as the MCP guard tests need it: one launcher
//! (`agency mcp-launch NAME`, started from the agent's MCP configuration
//! exactly as the agent's client starts it) spoken to in JSON-RPC over its
//! stdio, one request at a time.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command};

use serde_json::{Value, json};

use crate::home::spawn_piped;

pub struct Client {
    pub stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next: i64,
    /// The server's `serverInfo` from its `initialize` answer.
    pub server_info: Value,
}

impl Client {
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{msg}").unwrap();
        self.stdin.flush().unwrap();
        let answer: Value = serde_json::from_str(&self.lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    pub fn notify(&mut self, method: &str) {
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": method})
        )
        .unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn tools(&mut self) -> Vec<Value> {
        let a = self.request("tools/list", json!({}));
        a["result"]["tools"].as_array().unwrap().clone()
    }

    /// A `tools/call`'s `result`.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let a = self.request("tools/call", json!({"name": tool, "arguments": args}));
        a["result"].clone()
    }
}

/// Start the launcher entry `name` of the agent's MCP configuration and
/// initialize it, as the agent's MCP client would.
pub fn launch(config: &Value, name: &str) -> (Child, Client) {
    let entry = &config["mcpServers"][name];
    let mut launcher = Command::new(entry["command"].as_str().unwrap());
    launcher
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap());
    for a in entry["args"].as_array().unwrap() {
        launcher.arg(a.as_str().unwrap());
    }
    for (k, v) in entry["env"].as_object().unwrap() {
        launcher.env(k, v.as_str().unwrap());
    }
    let mut child = spawn_piped(&mut launcher);
    let mut c = Client {
        stdin: child.stdin.take().unwrap(),
        lines: BufReader::new(child.stdout.take().unwrap()).lines(),
        next: 0,
        server_info: Value::Null,
    };
    let init = c.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "test", "version": "1"}}),
    );
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    c.server_info = init["result"]["serverInfo"].clone();
    c.notify("notifications/initialized");
    (child, c)
}
