//! Choosing the answer to a conversation, independent of the wire API:
//! scenario selection, the stateless turn index, error turns, placeholders,
//! tool-name mapping and usage numbers.
//!
//! The only state is the count of error answers already served, so that
//! "fail twice, then succeed" works while everything else stays a pure
//! function of the request (a retried request gets the same answer).

use crate::script::{Answer, Match, Script, Turn};
use crate::template::{Context, shorten};
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

/// What the engine needs from a request, whichever API it came in by.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conversation {
    /// The system prompt; several blocks or messages are joined by newlines.
    pub system: String,
    /// The text of the first user message (text blocks joined by newlines).
    pub first_user: String,
    /// How many assistant messages the conversation already holds: the
    /// conversation position, hence the turn to play.
    pub assistant_messages: usize,
    /// The text of every tool result, oldest first.
    pub tool_results: Vec<String>,
    /// The names of the tools the client offered.
    pub tools: Vec<String>,
    /// Characters of the system prompt and messages, for usage numbers.
    pub input_chars: usize,
}

/// A successful answer, ready to be rendered by either API.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub text: Option<String>,
    pub tool_calls: Vec<AnsweredCall>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Unique per conversation and position; message and tool-call ids are
    /// derived from it so that retries see the same ids.
    pub id: String,
}

#[derive(Debug, Clone)]
pub(crate) struct AnsweredCall {
    pub name: String,
    pub input: Value,
}

/// An HTTP error answer.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub status: u16,
    pub message: String,
    pub retry_after_seconds: Option<u64>,
}

impl Failure {
    pub(crate) fn bad_request(message: String) -> Failure {
        Failure {
            status: 400,
            message,
            retry_after_seconds: None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Reply(Reply),
    Fail(Failure),
}

/// The answer and how it was chosen (recorded for tests).
#[derive(Debug, Clone)]
pub(crate) struct Decision {
    /// None when the fallback answered or nothing matched.
    pub scenario: Option<String>,
    /// The conversation position (assistant messages already present).
    pub turn: usize,
    /// 0-based index in the scenario's `turns`, when one was played.
    pub script_turn: Option<usize>,
    pub outcome: Outcome,
}

#[derive(Debug)]
pub(crate) struct Engine {
    script: Script,
    /// (scenario index, turn index, conversation fingerprint) → error
    /// answers served so far.
    errors_served: Mutex<HashMap<(usize, usize, u64), u32>>,
}

impl Engine {
    pub(crate) fn new(script: Script) -> Engine {
        Engine {
            script,
            errors_served: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn decide(&self, conv: &Conversation) -> Decision {
        let turn = conv.assistant_messages;
        let fingerprint = fingerprint(conv);
        let id = format!("{fingerprint:016x}{turn:04x}");
        let system_lower = conv.system.to_lowercase();
        let found = self
            .script
            .scenarios
            .iter()
            .enumerate()
            .find(|(_, s)| matches(&s.matcher, conv, &system_lower));
        let Some((index, scenario)) = found else {
            let outcome = match &self.script.fallback {
                Some(answer) => play(answer, conv, "the fallback", id),
                None => Outcome::Fail(Failure::bad_request(format!(
                    "failed to choose a scenario: none matches this conversation and the script \
                     has no fallback (the system prompt begins {:?}; the first user message \
                     begins {:?})",
                    shorten(&conv.system, 160),
                    shorten(&conv.first_user, 160)
                ))),
            };
            return Decision {
                scenario: None,
                turn,
                script_turn: None,
                outcome,
            };
        };
        let decided = |script_turn, outcome| Decision {
            scenario: Some(scenario.name.clone()),
            turn,
            script_turn,
            outcome,
        };
        // Answer turns take one conversation position each; an error turn
        // belongs to the position of the answer after it, and once served
        // `times` times it lets that answer through.
        let mut position = 0;
        for (i, script_turn) in scenario.turns.iter().enumerate() {
            match script_turn {
                Turn::Error(error) if position == turn => {
                    if self.take_error((index, i, fingerprint), error.times) {
                        return decided(
                            Some(i),
                            Outcome::Fail(Failure {
                                status: error.status,
                                message: error.message.clone(),
                                retry_after_seconds: error.retry_after_seconds,
                            }),
                        );
                    }
                }
                Turn::Error(_) => {}
                Turn::Answer(answer) if position == turn => {
                    let label = format!("scenario {:?} turn {}", scenario.name, i + 1);
                    return decided(Some(i), play(answer, conv, &label, id));
                }
                Turn::Answer(_) => position += 1,
            }
        }
        let outcome = match &scenario.after_last {
            Some(answer) => play(
                answer,
                conv,
                &format!("scenario {:?} after_last", scenario.name),
                id,
            ),
            None => {
                let text = format!("end of script (scenario {:?})", scenario.name);
                Outcome::Reply(Reply {
                    output_tokens: tokens(text.chars().count()),
                    input_tokens: tokens(conv.input_chars),
                    text: Some(text),
                    tool_calls: Vec::new(),
                    id,
                })
            }
        };
        decided(None, outcome)
    }

    /// Whether another error answer is due, counting it if so.
    fn take_error(&self, key: (usize, usize, u64), times: u32) -> bool {
        // A panic elsewhere cannot leave the counts half-updated, so a
        // poisoned lock is still usable.
        let mut served = self
            .errors_served
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = served.entry(key).or_insert(0);
        if *count < times {
            *count += 1;
            true
        } else {
            false
        }
    }
}

fn matches(m: &Match, conv: &Conversation, system_lower: &str) -> bool {
    m.system_contains
        .as_deref()
        .is_none_or(|s| conv.system.contains(s))
        && m.user_contains
            .as_deref()
            .is_none_or(|s| conv.first_user.contains(s))
        && m.handler
            .as_deref()
            .is_none_or(|h| system_lower.contains(h))
}

/// Identifies a conversation across its requests: its system prompt and
/// first user message do not change as it grows.
fn fingerprint(conv: &Conversation) -> u64 {
    let mut hasher = DefaultHasher::new();
    conv.system.hash(&mut hasher);
    conv.first_user.hash(&mut hasher);
    hasher.finish()
}

/// Renders a scripted answer; an unresolvable placeholder is a 400 naming
/// where it is, so a test fails loudly instead of making a wrong call.
fn play(answer: &Answer, conv: &Conversation, label: &str, id: String) -> Outcome {
    let cx = Context {
        system: &conv.system,
        first_user: &conv.first_user,
        tool_results: &conv.tool_results,
    };
    let fail = |e: String| {
        Outcome::Fail(Failure::bad_request(format!(
            "failed to answer from {label}: {e}"
        )))
    };
    let text = match answer.text.as_ref().map(|t| t.render_text(cx)).transpose() {
        Ok(text) => text,
        Err(e) => return fail(format!("text: {e}")),
    };
    let mut tool_calls = Vec::with_capacity(answer.tool_calls.len());
    for (i, call) in answer.tool_calls.iter().enumerate() {
        match call.input.resolve(cx) {
            Ok(input) => tool_calls.push(AnsweredCall {
                name: offered_name(&call.name, &conv.tools),
                input,
            }),
            Err(e) => return fail(format!("tool call {} ({}): {e}", i + 1, call.name)),
        }
    }
    // An empty text block next to tool calls is noise some clients reject.
    let text = text.filter(|t| !t.is_empty() || tool_calls.is_empty());
    let output_chars = text.as_deref().map_or(0, |t| t.chars().count())
        + tool_calls
            .iter()
            .map(|c| c.name.chars().count() + c.input.to_string().chars().count())
            .sum::<usize>();
    Outcome::Reply(Reply {
        text,
        tool_calls,
        input_tokens: tokens(conv.input_chars),
        output_tokens: tokens(output_chars),
        id,
    })
}

/// The scripted tool name, or the offered tool it stands for: Claude Code
/// offers MCP tools as `mcp__SERVER__NAME`, so a script saying `mail_inbox`
/// works with it and with the built-in loop alike.
fn offered_name(name: &str, offered: &[String]) -> String {
    if offered.iter().any(|o| o == name) {
        return name.to_owned();
    }
    let suffix = format!("__{name}");
    offered
        .iter()
        .find(|o| o.starts_with("mcp__") && o.ends_with(&suffix))
        .cloned()
        .unwrap_or_else(|| name.to_owned())
}

/// Deterministic token count: a quarter of the characters, at least 1.
pub(crate) fn tokens(chars: usize) -> u64 {
    u64::try_from(chars / 4).unwrap_or(u64::MAX).max(1)
}

/// Splits `text` into pieces of at most 24 characters, and into at least
/// two when it has two characters or more, so clients must reassemble.
pub(crate) fn pieces(text: &str) -> Vec<&str> {
    let count = text.chars().count();
    let size = count.div_ceil(2).clamp(1, 24);
    let mut out = Vec::with_capacity(count / size + 1);
    let mut start = 0;
    for (n, (at, _)) in text.char_indices().enumerate() {
        if n > 0 && n % size == 0 {
            out.push(&text[start..at]);
            start = at;
        }
    }
    if start < text.len() || out.is_empty() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(json: &str) -> Engine {
        Engine::new(Script::from_json(json).unwrap())
    }

    fn conv(system: &str, user: &str, assistants: usize) -> Conversation {
        Conversation {
            system: system.to_owned(),
            first_user: user.to_owned(),
            assistant_messages: assistants,
            ..Conversation::default()
        }
    }

    fn text_of(d: &Decision) -> String {
        match &d.outcome {
            Outcome::Reply(r) => r.text.clone().unwrap_or_default(),
            Outcome::Fail(f) => format!("{} {}", f.status, f.message),
        }
    }

    #[test]
    fn pieces_cover_the_text() {
        for text in ["", "a", "{}", "abc", "héllo wörld", &"x".repeat(100)] {
            let p = pieces(text);
            assert_eq!(p.concat(), text);
            if text.chars().count() >= 2 {
                assert!(p.len() >= 2, "{text}: {p:?}");
            }
            assert!(p.iter().all(|s| s.chars().count() <= 24));
        }
    }

    #[test]
    fn first_matching_scenario_wins_and_all_conditions_must_hold() {
        let e = engine(
            r#"{"scenarios": [
                {"name": "both", "match": {"system_contains": "boss", "user_contains": "guide"}, "turns": [{"text": "both"}]},
                {"name": "handler", "match": {"handler": "0B7E6F1C-1111-4222-8333-444455556666"}, "turns": [{"text": "handler"}]},
                {"name": "any", "turns": [{"text": "any"}]}
            ]}"#,
        );
        assert_eq!(text_of(&e.decide(&conv("boss", "a guide", 0))), "both");
        assert_eq!(text_of(&e.decide(&conv("boss", "nothing", 0))), "any");
        let d = e.decide(&conv("You are 0b7e6f1c-1111-4222-8333-444455556666", "", 0));
        assert_eq!(d.scenario.as_deref(), Some("handler"));
    }

    #[test]
    fn no_match_without_fallback_is_a_400() {
        let e = engine(
            r#"{"scenarios": [{"name": "a", "match": {"system_contains": "zzz"}, "turns": [{"text": "x"}]}]}"#,
        );
        let text = text_of(&e.decide(&conv("sys", "user", 0)));
        assert!(
            text.starts_with("400 failed to choose a scenario"),
            "{text}"
        );
    }

    #[test]
    fn error_turns_fall_through_at_the_same_position() {
        let e = engine(
            r#"{"scenarios": [{"name": "a", "turns": [
                {"text": "first"},
                {"error": {"status": 429, "message": "slow", "times": 2}},
                {"error": {"status": 500, "message": "boom"}},
                {"text": "second"}
            ]}]}"#,
        );
        assert_eq!(text_of(&e.decide(&conv("s", "u", 0))), "first");
        let seen: Vec<String> = (0..4)
            .map(|_| text_of(&e.decide(&conv("s", "u", 1))))
            .collect();
        assert_eq!(seen, ["429 slow", "429 slow", "500 boom", "second"]);
        // Another conversation has its own count.
        assert_eq!(text_of(&e.decide(&conv("s", "other", 1))), "429 slow");
        let end = e.decide(&conv("s", "u", 2));
        assert_eq!(text_of(&end), "end of script (scenario \"a\")");
        assert_eq!(end.script_turn, None);
    }

    #[test]
    fn scripted_names_map_to_offered_mcp_tools() {
        let offered = ["Bash".to_owned(), "mcp__agency__mail_inbox".to_owned()];
        assert_eq!(
            offered_name("mail_inbox", &offered),
            "mcp__agency__mail_inbox"
        );
        assert_eq!(offered_name("Bash", &offered), "Bash");
        assert_eq!(offered_name("unknown", &offered), "unknown");
    }
}
