//! The run's `facts`: what the engine computes from the store about the
//! stages that ran before a stage, which the stage may read like `input`
//! (`reads: [facts]`, `{{facts}}`). A judging stage (AgencyCore's
//! Gatekeeper) is given them as facts, never left to judge them itself:
//! whether every artifact validated, which commands ran and which failed,
//! what the safety step found and which approvals were used, whether the
//! plan has verification steps and definitions of done, whether the
//! budgets held. The shape is fixed ([`facts_schema`]): reads and
//! placeholders of it are compile-checked like a stage's output.
//!
//! The engine fills it from the store only, never from an answer: an
//! artifact is a fact source only through fields code wrote (ToolRunner's
//! `executedCommands`, SafetyGuard's `safe`) or the plan the contract
//! checked, and a stage's status, attempts and tokens are the store's.

use serde_json::{Value, json};

/// The context entry the engine fills with the run's facts.
pub const FACTS: &str = "facts";

/// Most items of each list in the facts (commands, risks, stages …): the
/// facts travel in a prompt.
pub const FACTS_MAX_ITEMS: usize = 50;

/// Most characters of a failed command's output in the facts.
pub const FACTS_MAX_OUTPUT_CHARS: usize = 500;

/// Words that make a plan's task a verifying one (besides an owner `qa`).
pub const VERIFYING_WORDS: &[&str] = &[
    "test", "tests", "verify", "verifies", "verified", "check", "checks", "assert", "asserts",
];

/// The schema of [`FACTS`], which reads of it are checked against.
pub fn facts_schema() -> Value {
    let strings =
        json!({"type": "array", "maxItems": FACTS_MAX_ITEMS, "items": {"type": "string"}});
    let count = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["stages", "artifactsValid", "commands", "safety", "plan", "budget"],
        "properties": {
            "stages": {
                "description": "each stage before this one, in order: how it ended, its model calls, and whether its stored artifact validates against its schema again now",
                "type": "array",
                "maxItems": FACTS_MAX_ITEMS,
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["name", "status", "attempts", "artifactValid"],
                    "properties": {
                        "name": {"type": "string"},
                        "status": {"type": "string", "description": "ok, repaired, failed_validation, failed_infra, blocked_policy, budget_exhausted …"},
                        "attempts": count,
                        "artifactValid": {"type": "boolean"},
                    }
                }
            },
            "artifactsValid": {"type": "boolean", "description": "every stage before this one ended with an artifact that validates"},
            "commands": {
                "description": "the commands a stage ran (AgencyCore's ToolRunner: the stage whose artifact has `executedCommands`)",
                "type": "object",
                "additionalProperties": false,
                "required": ["found", "live", "executed", "mock", "failed", "skipped"],
                "properties": {
                    "found": {"type": "boolean", "description": "a stage recorded commands"},
                    "live": {"type": "boolean", "description": "the run's tools ran for real (not mock mode)"},
                    "executed": count,
                    "mock": {"type": "integer", "minimum": 0, "description": "commands recorded without being run (mock mode)"},
                    "failed": {
                        "description": "commands that ran and did not succeed, with the end of their output",
                        "type": "array",
                        "maxItems": FACTS_MAX_ITEMS,
                        "items": {
                            "type": "object",
                            "additionalProperties": false,
                            "required": ["command", "output"],
                            "properties": {"command": {"type": "string"}, "output": {"type": "string"}}
                        }
                    },
                    "skipped": {"description": "commands not run: blocked by the plan rules or refused by the policy", "type": "array", "maxItems": FACTS_MAX_ITEMS, "items": {"type": "string"}},
                }
            },
            "safety": {
                "description": "what the safety step found (AgencyCore's SafetyGuard: the artifact with `safe`), the actions the permission system refused, and the approvals the run used",
                "type": "object",
                "additionalProperties": false,
                "required": ["found", "safe", "risks", "blockedActions", "requiresApproval", "refusedActions", "approvals"],
                "properties": {
                    "found": {"type": "boolean"},
                    "safe": {"type": "boolean"},
                    "risks": strings,
                    "blockedActions": strings,
                    "requiresApproval": {"type": "boolean"},
                    "refusedActions": {"description": "proposed actions the permission system refused (AgencyCore Implementor's `blocked`)", "type": "array", "maxItems": FACTS_MAX_ITEMS, "items": {"type": "string"}},
                    "approvals": {"description": "ids of the user's approvals the run's stages used", "type": "array", "maxItems": FACTS_MAX_ITEMS, "items": {"type": "string"}},
                }
            },
            "plan": {
                "description": "the plan of the stage with `outcomes` (AgencyCore's Planner)",
                "type": "object",
                "additionalProperties": false,
                "required": ["found", "tasks", "withDefinitionOfDone", "verifying"],
                "properties": {
                    "found": {"type": "boolean"},
                    "tasks": count,
                    "withDefinitionOfDone": {"type": "integer", "minimum": 0, "description": "tasks with a non-empty `definitionOfDone`"},
                    "verifying": {"type": "integer", "minimum": 0, "description": "tasks owned by qa, or whose title, steps or definition of done test, verify or check"},
                }
            },
            "budget": {
                "type": "object",
                "additionalProperties": false,
                "required": ["respected", "overruns", "inputTokens", "outputTokens", "costMicroUsd"],
                "properties": {
                    "respected": {"type": "boolean", "description": "no stage ended budget_exhausted or used more tokens than its budget"},
                    "overruns": strings,
                    "inputTokens": count,
                    "outputTokens": count,
                    "costMicroUsd": count,
                }
            }
        }
    })
}

/// Facts of a run where nothing was found: valid under [`facts_schema`];
/// what the compiler checks a `facts` stamp against, and the engine's
/// starting point.
pub fn empty_facts() -> Value {
    json!({
        "stages": [],
        "artifactsValid": true,
        "commands": {"found": false, "live": false, "executed": 0, "mock": 0, "failed": [], "skipped": []},
        "safety": {"found": false, "safe": true, "risks": [], "blockedActions": [], "requiresApproval": false, "refusedActions": [], "approvals": []},
        "plan": {"found": false, "tasks": 0, "withDefinitionOfDone": 0, "verifying": 0},
        "budget": {"respected": true, "overruns": [], "inputTokens": 0, "outputTokens": 0, "costMicroUsd": 0},
    })
}

/// Whether a plan's task (an object) verifies: its `owner` is `qa`, or
/// its title, description, steps or definition of done use one of
/// [`VERIFYING_WORDS`].
pub fn task_verifies(task: &Value) -> bool {
    if task.get("owner").and_then(Value::as_str) == Some("qa") {
        return true;
    }
    let mut texts: Vec<&str> = Vec::new();
    for f in ["title", "description", "steps", "definitionOfDone"] {
        match task.get(f) {
            Some(Value::String(s)) => texts.push(s),
            Some(Value::Array(items)) => texts.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    texts.iter().any(|t| {
        t.split(|c: char| !c.is_alphanumeric())
            .any(|w| VERIFYING_WORDS.contains(&w.to_lowercase().as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_facts_fit_the_schema() {
        let v = super::super::schemas::validator(&facts_schema()).expect("compiles");
        assert!(v.is_valid(&empty_facts()));
        let mut bad = empty_facts();
        bad["commands"]["failed"] = json!(["cargo test"]);
        assert!(!v.is_valid(&bad), "a failed command is an object");
    }

    #[test]
    fn verifying_tasks() {
        for (task, verifies) in [
            (json!({"owner": "qa", "title": "x"}), true),
            (
                json!({"owner": "implementor", "definitionOfDone": ["cargo test passes"]}),
                true,
            ),
            (
                json!({"owner": "implementor", "steps": ["Verify the route"]}),
                true,
            ),
            (
                json!({"owner": "implementor", "title": "Health route", "definitionOfDone": ["GET /health answers 200"]}),
                false,
            ),
            // A word that merely contains "test" is not one.
            (
                json!({"owner": "design", "description": "a contested layout"}),
                false,
            ),
        ] {
            assert_eq!(task_verifies(&task), verifies, "{task}");
        }
    }
}
