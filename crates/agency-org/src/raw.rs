//! What the readers get out of each source file before names are
//! resolved: every value with the position it came from, so that the
//! resolver can point at a bad reference and `explain` can say where an
//! effective field came from. `Option` means "not given" where that differs
//! from "given empty" (tools narrow, so "no tools" is not "inherit tools").

use std::collections::BTreeSet;

use crate::diag::Pos;
use crate::model::{Budget, ClaudeSubagent, ToolImplementation, Verb};

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct S<T> {
    pub v: T,
    pub pos: Pos,
}

impl<T> S<T> {
    pub fn new(v: T, pos: Pos) -> S<T> {
        S { v, pos }
    }
}

#[derive(Debug, Clone, Default)]
pub struct RawAgent {
    pub file: String,
    pub name: S<String>,
    pub title: Option<S<String>>,
    pub description: Option<S<String>>,
    pub inherits: Vec<S<String>>,
    pub static_memory: Vec<S<String>>,
    pub behavior: Vec<S<String>>,
    pub guidance: Vec<S<String>>,
    /// `None`: not given (inherit the parents' tools).
    pub tools: Option<S<Vec<S<String>>>>,
    pub tools_add: Vec<S<String>>,
    pub model: Option<S<String>>,
    pub runtime: Option<S<String>>,
    pub capabilities: Vec<S<String>>,
    pub budget: Option<S<Budget>>,
    pub connections: Vec<S<String>>,
    pub keep_warm: Option<S<String>>,
    /// Fields whose inherited values are dropped (`staticMemory`, …).
    pub replace: BTreeSet<String>,
    /// `agency.verbs`, already checked; at the verb's name.
    pub verbs: Vec<S<Verb>>,
    pub claude: Option<ClaudeSubagent>,
}

#[derive(Debug, Clone, Default)]
pub struct RawAgency {
    pub file: String,
    pub name: S<String>,
    pub description: Vec<String>,
    pub static_memory: Vec<S<String>>,
    pub executive: Option<S<String>>,
    /// `## Agents`: names with their role text.
    pub agents: Vec<(S<String>, Option<String>)>,
    /// Whether an `## Agents` list was given at all.
    pub lists_agents: bool,
    pub tools: Vec<S<String>>,
    pub sub_agencies: Vec<S<String>>,
    /// `## Connections`: `A -> B`.
    pub connections: Vec<(S<String>, S<String>)>,
    pub budget: Option<S<Budget>>,
}

#[derive(Debug, Clone)]
pub struct RawTool {
    pub file: String,
    pub name: S<String>,
    pub description: String,
    /// `None` when no implementation could be determined (already reported).
    pub implementation: Option<ToolImplementation>,
    /// Field → type; `None`: the interface was not declared (any object).
    pub input: Option<Vec<(String, String)>>,
    pub output: Option<Vec<(String, String)>>,
    /// `- Egress:` patterns (checked), in source order.
    pub egress: Vec<String>,
}

/// One agency folder after reading: its agency, agents, tools and
/// sub-agency folders.
#[derive(Debug, Clone, Default)]
pub struct RawFolder {
    /// Relative to the source root, `/`-separated; `""` for the root.
    pub dir: String,
    pub agency: RawAgency,
    pub agents: Vec<RawAgent>,
    pub tools: Vec<RawTool>,
    pub children: Vec<RawFolder>,
}

impl RawFolder {
    /// This folder and every folder below it, depth first.
    pub fn all(&self) -> Vec<&RawFolder> {
        let mut out = vec![self];
        for c in &self.children {
            out.extend(c.all());
        }
        out
    }
}

/// `dir` joined with `name` as a relative, `/`-separated path.
pub fn rel_join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}
