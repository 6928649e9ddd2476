//! The pipeline context and an llm stage's prompt template over it:
//! `{{input}}`, `{{Stage}}` (its whole output), `{{Stage.a.b}}` (a field
//! of it; a number indexes an array). Strings are inserted raw, every
//! other value as pretty JSON. The compiler already checked each
//! placeholder against the stages that run before; a missing path here is
//! still an error naming it, never an empty string.
//!
//! The context holds stage outputs only as [`Artifact`]s: what a later
//! stage reads has passed its stage's contract.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::validate::Artifact;

/// What the stages of a run have produced so far, and its input.
#[derive(Debug, Clone, Default)]
pub struct Context {
    input: Value,
    /// The run's `history` (built by the service from the store), when
    /// the stage reads it.
    history: Option<Value>,
    /// The run's `facts` (computed by the service from the store), when
    /// the stage reads them.
    facts: Option<Value>,
    outputs: BTreeMap<String, Artifact>,
}

impl Context {
    /// A run's context before any stage: its input (validated against the
    /// pipeline's input schema by the caller).
    pub fn new(input: Value) -> Self {
        Context {
            input,
            history: None,
            facts: None,
            outputs: BTreeMap::new(),
        }
    }

    /// Set the run's `history`.
    pub fn set_history(&mut self, history: Value) {
        self.history = Some(history);
    }

    /// Set the run's `facts`.
    pub fn set_facts(&mut self, facts: Value) {
        self.facts = Some(facts);
    }

    /// Record a finished stage's artifact under its name.
    pub fn insert(&mut self, stage: impl Into<String>, artifact: Artifact) {
        self.outputs.insert(stage.into(), artifact);
    }

    pub fn input(&self) -> &Value {
        &self.input
    }

    pub fn output(&self, stage: &str) -> Option<&Artifact> {
        self.outputs.get(stage)
    }

    /// The value at `input…`, `history…`, `facts…` or `Stage…`, `fields` outermost
    /// first.
    pub fn lookup<'a>(&'a self, stage: &str, fields: &[&str]) -> Option<&'a Value> {
        let mut v = if stage == "input" {
            &self.input
        } else if stage == agency_org::pipeline::HISTORY {
            self.history.as_ref()?
        } else if stage == agency_org::pipeline::FACTS {
            self.facts.as_ref()?
        } else {
            self.outputs.get(stage)?.value()
        };
        for f in fields {
            v = match v {
                Value::Object(m) => m.get(*f)?,
                Value::Array(a) => a.get(f.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(v)
    }
}

/// Why a template did not render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("failed to render the prompt: {{{{{path}}}}} names nothing in the pipeline context")]
    Missing { path: String },
    #[error(
        "failed to render the prompt: the placeholder opened at byte {at} is not closed with }}}}"
    )]
    Unclosed { at: usize },
    #[error("failed to render the prompt: an empty placeholder at byte {at}")]
    Empty { at: usize },
}

/// Render `template` over `context`.
pub fn render(template: &str, context: &Context) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    let mut offset = 0;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(TemplateError::Unclosed { at: offset + open });
        };
        let path = after[..close].trim();
        if path.is_empty() {
            return Err(TemplateError::Empty { at: offset + open });
        }
        let mut parts = path.split('.');
        let stage = parts.next().unwrap_or_default();
        let fields: Vec<&str> = parts.collect();
        let value = context
            .lookup(stage, &fields)
            .ok_or_else(|| TemplateError::Missing {
                path: path.to_owned(),
            })?;
        match value {
            Value::String(s) => out.push_str(s),
            // Pretty JSON of a `Value` does not fail.
            other => out.push_str(&serde_json::to_string_pretty(other).unwrap_or_default()),
        }
        let consumed = open + 2 + close + 2;
        offset += consumed;
        rest = &rest[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::OutputContract;
    use crate::validate::tests::{stage, stamps};
    use serde_json::json;

    fn context() -> Context {
        let contract = OutputContract::compile(&stage(json!({"type": "object"}), vec![], vec![]))
            .expect("compiles");
        let observer = contract
            .accept(
                json!({"domain": "Dev", "keywords": ["a", "b"], "meta": {"n": 2, "s": "deep"}}),
                &stamps(),
            )
            .expect("valid");
        let mut c = Context::new(json!("build a CLI"));
        c.insert("Observer", observer);
        c
    }

    #[test]
    fn renders_placeholders() {
        let c = context();
        let cases = [
            ("Task: {{input}}", "Task: build a CLI"),
            ("{{ Observer.domain }}!", "Dev!"),
            ("{{Observer.meta.s}}", "deep"),
            ("{{Observer.keywords.1}}", "b"),
            ("{{Observer.meta.n}}", "2"),
            ("{{Observer.keywords}}", "[\n  \"a\",\n  \"b\"\n]"),
            ("no placeholders", "no placeholders"),
            ("{{input}}{{input}}", "build a CLIbuild a CLI"),
        ];
        for (t, want) in cases {
            assert_eq!(render(t, &c).as_deref(), Ok(want), "{t}");
        }
    }

    #[test]
    fn errors_name_the_path() {
        let c = context();
        let cases = [
            (
                "{{Planner}}",
                TemplateError::Missing {
                    path: "Planner".into(),
                },
            ),
            (
                "{{Observer.nope}}",
                TemplateError::Missing {
                    path: "Observer.nope".into(),
                },
            ),
            (
                "{{Observer.domain.x}}",
                TemplateError::Missing {
                    path: "Observer.domain.x".into(),
                },
            ),
            ("a {{input", TemplateError::Unclosed { at: 2 }),
            ("{{ }}", TemplateError::Empty { at: 0 }),
        ];
        for (t, want) in cases {
            assert_eq!(render(t, &c), Err(want.clone()), "{t}");
        }
        assert!(
            TemplateError::Missing {
                path: "Planner".into()
            }
            .to_string()
            .contains("{{Planner}}")
        );
    }
}
