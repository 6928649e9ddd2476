//! `--assist`: unplaced text goes to the assistant, whose answer is checked
//! like frontmatter; without an assistant nothing is asked.

use std::cell::RefCell;

use agency_org::{Assist, AssistError, AssistRequest, compile, compile_with};
use serde_json::{Value, json};

struct Fake {
    answer: Value,
    asked: RefCell<Vec<String>>,
}

impl Assist for Fake {
    fn place(&self, r: &AssistRequest) -> Result<Value, AssistError> {
        self.asked
            .borrow_mut()
            .push(format!("{}:{}", r.file, r.heading));
        Ok(self.answer.clone())
    }
}

fn folder() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        tmp.path().join("A.agency"),
        "# Agency Name: A\n## Executive Agent\nBoss\n",
    )
    .expect("write");
    std::fs::write(
        tmp.path().join("Boss.agent"),
        "# Boss\n## How I work\nI keep it short, and I use the budget of $5.\n",
    )
    .expect("write");
    tmp
}

#[test]
fn a_valid_answer_is_placed_and_said() {
    let tmp = folder();
    let fake = Fake {
        answer: json!({"behavior": ["Keep it short."], "budget": {"usd": 5}}),
        asked: RefCell::default(),
    };
    let c = compile_with(tmp.path(), Some(&fake)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.asked.borrow().as_slice(), ["Boss.agent:How I work"]);
    let boss = &c.model.agents[0];
    assert_eq!(boss.behavior.on_message, ["Keep it short."]);
    assert_eq!(boss.budget.as_ref().and_then(|b| b.usd), Some(5.0));
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("placed by --assist"))
    );
    // Without the assistant the section is static memory, with a warning.
    let plain = compile(tmp.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(plain.model.agents[0].behavior.on_message.is_empty());
}

#[test]
fn an_answer_outside_the_schema_is_an_error() {
    let tmp = folder();
    let fake = Fake {
        answer: json!({"behaviour": ["x"], "budget": {"usd": "lots"}}),
        asked: RefCell::default(),
    };
    let e = compile_with(tmp.path(), Some(&fake)).expect_err("bad answer");
    let text: Vec<String> = e
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        text,
        [
            "Boss.agent:2:4: error: bad budget value for `usd`: expected a non-negative number of dollars, found `lots`",
            "Boss.agent:2:4: error: unknown key `behaviour` in the --assist answer for section `How I work`; did you mean `behavior`?",
        ]
    );
}

/// An assistant's own error, as a model-backed one returns.
#[derive(Debug, thiserror::Error)]
#[error("failed to reach the model: {0}")]
struct Unreachable(&'static str);

struct Failing;

impl Assist for Failing {
    fn place(&self, _: &AssistRequest) -> Result<Value, AssistError> {
        Err(AssistError::new(Unreachable("connection refused")))
    }
}

#[test]
fn a_failed_assistant_is_a_warning_with_its_message_and_the_text_stays() {
    let tmp = folder();
    let c = compile_with(tmp.path(), Some(&Failing)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        c.warnings.iter().any(|w| w.message
            == "--assist could not place section `How I work`: failed to reach the model: connection refused"),
        "{:?}",
        c.warnings
    );
    // Handled as without --assist: static memory.
    assert!(c.model.agents[0].behavior.on_message.is_empty());
    // The caller that chose the implementation gets its error back.
    let e = AssistError::new(Unreachable("x"));
    assert!(e.downcast_ref::<Unreachable>().is_some());
    assert_eq!(e.to_string(), "failed to reach the model: x");
}
