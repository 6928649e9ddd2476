//! Model scripts: parsing and validation, as pure functions (fuzzed by a
//! property test).
//!
//! Parsing goes through `serde_json::Value` one level at a time so that every
//! error can say *where* it is ("scenario 2 (\"root handler\") turn 3: tool
//! call 1: …"); serde alone would only give a line and column of a file the
//! reader has to count through. Numbers in messages are 1-based positions in
//! the file.

use crate::template::{TValue, Template};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// A parsed and validated model script: the scenarios the server plays.
/// See the crate documentation for the format.
#[derive(Debug, Clone)]
pub struct Script {
    pub(crate) scenarios: Vec<Scenario>,
    pub(crate) fallback: Option<Answer>,
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub name: String,
    pub matcher: Match,
    pub turns: Vec<Turn>,
    pub after_last: Option<Answer>,
}

/// All given conditions must hold; no condition matches everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct Match {
    pub system_contains: Option<String>,
    pub user_contains: Option<String>,
    /// Lower-case hyphenated, compared against the lower-cased system prompt.
    pub handler: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum Turn {
    Answer(Answer),
    Error(ErrorTurn),
}

/// A reply: optional text, then zero or more tool calls (never neither).
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub text: Option<Template>,
    pub tool_calls: Vec<ToolCall>,
}

#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    pub name: String,
    pub input: TValue,
}

#[derive(Debug, Clone)]
pub(crate) struct ErrorTurn {
    pub status: u16,
    pub message: String,
    pub times: u32,
    pub retry_after_seconds: Option<u64>,
}

/// Why a script could not be loaded. Displays as
/// `failed to load model script FILE: scenario 2 ("x") turn 3: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    file: Option<PathBuf>,
    problem: String,
}

impl ScriptError {
    fn new(problem: impl Into<String>) -> ScriptError {
        ScriptError {
            file: None,
            problem: problem.into(),
        }
    }

    /// The file being loaded, when loaded with [`Script::load`].
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// What is wrong and where, without the "failed to load" prefix.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(
                f,
                "failed to load model script {}: {}",
                file.display(),
                self.problem
            ),
            None => write!(f, "failed to load model script: {}", self.problem),
        }
    }
}

impl std::error::Error for ScriptError {}

impl Script {
    /// Parses and validates a script from JSON text.
    pub fn from_json(text: &str) -> Result<Script, ScriptError> {
        parse(text).map_err(ScriptError::new)
    }

    /// Reads, parses and validates a script file; errors name the file.
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let with_file = |problem: String| ScriptError {
            file: Some(path.to_owned()),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|e| with_file(e.to_string()))?;
        parse(&text).map_err(with_file)
    }

    /// The scenarios' names, in the order they are tried.
    pub fn scenario_names(&self) -> impl Iterator<Item = &str> {
        self.scenarios.iter().map(|s| s.name.as_str())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScript {
    scenarios: Vec<Value>,
    #[serde(default)]
    fallback: Option<Value>,
    /// Accepted and ignored so scripts (JSON has no comments) can explain
    /// themselves; also on scenarios and turns.
    #[serde(default, rename = "comment")]
    _comment: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default, rename = "match")]
    matcher: Option<RawMatch>,
    turns: Vec<Value>,
    #[serde(default)]
    after_last: Option<Value>,
    #[serde(default, rename = "comment")]
    _comment: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatch {
    #[serde(default)]
    system_contains: Option<String>,
    #[serde(default)]
    user_contains: Option<String>,
    #[serde(default)]
    handler: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    error: Option<RawError>,
    #[serde(default, rename = "comment")]
    _comment: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolCall {
    name: String,
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawError {
    status: u16,
    message: String,
    #[serde(default = "one")]
    times: u32,
    #[serde(default)]
    retry_after_seconds: Option<u64>,
}

/// Serde would also read a struct from an array; a script is objects.
fn object(value: &Value, what: &str) -> Result<(), String> {
    if value.is_object() {
        Ok(())
    } else {
        Err(format!(
            "expected {what} to be a JSON object, found {}",
            crate::template::shorten(&value.to_string(), 60)
        ))
    }
}

fn one() -> u32 {
    1
}

/// Parses and validates a script; the error is the problem and where it is.
pub(crate) fn parse(text: &str) -> Result<Script, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    object(&value, "the script")?;
    let raw: RawScript = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let mut scenarios = Vec::with_capacity(raw.scenarios.len());
    let mut names = HashSet::new();
    for (i, value) in raw.scenarios.into_iter().enumerate() {
        let scenario = parse_scenario(value, i + 1)?;
        if !names.insert(scenario.name.clone()) {
            return Err(format!(
                "scenario {} ({:?}): another scenario has the same name",
                i + 1,
                scenario.name
            ));
        }
        scenarios.push(scenario);
    }
    let fallback = raw
        .fallback
        .map(|v| parse_final_turn(v).map_err(|e| format!("fallback: {e}")))
        .transpose()?;
    if scenarios.is_empty() && fallback.is_none() {
        return Err("the script has no scenario and no fallback".to_owned());
    }
    Ok(Script {
        scenarios,
        fallback,
    })
}

fn parse_scenario(value: Value, number: usize) -> Result<Scenario, String> {
    // Name the scenario in errors as soon as its name can be read.
    let name_hint = value
        .get("name")
        .and_then(Value::as_str)
        .map(|n| format!(" ({n:?})"))
        .unwrap_or_default();
    let at = format!("scenario {number}{name_hint}");
    object(&value, "a scenario").map_err(|e| format!("{at}: {e}"))?;
    let raw: RawScenario = serde_json::from_value(value).map_err(|e| format!("{at}: {e}"))?;
    if raw.name.trim().is_empty() {
        return Err(format!("{at}: name is empty"));
    }
    let matcher = match raw.matcher {
        None => Match::default(),
        Some(m) => parse_match(m).map_err(|e| format!("{at}: match: {e}"))?,
    };
    if raw.turns.is_empty() {
        return Err(format!("{at}: turns is empty"));
    }
    let turns = raw
        .turns
        .into_iter()
        .enumerate()
        .map(|(i, v)| parse_turn(v).map_err(|e| format!("{at} turn {}: {e}", i + 1)))
        .collect::<Result<Vec<_>, _>>()?;
    let after_last = raw
        .after_last
        .map(|v| parse_final_turn(v).map_err(|e| format!("{at} after_last: {e}")))
        .transpose()?;
    Ok(Scenario {
        name: raw.name,
        matcher,
        turns,
        after_last,
    })
}

fn parse_match(raw: RawMatch) -> Result<Match, String> {
    for (field, value) in [
        ("system_contains", &raw.system_contains),
        ("user_contains", &raw.user_contains),
    ] {
        if value.as_deref() == Some("") {
            return Err(format!("{field} is empty (leave it out to match anything)"));
        }
    }
    let handler = raw
        .handler
        .map(|h| {
            Uuid::parse_str(h.trim())
                .map(|id| id.hyphenated().to_string())
                .map_err(|e| format!("handler {h:?} is not a UUID: {e}"))
        })
        .transpose()?;
    Ok(Match {
        system_contains: raw.system_contains,
        user_contains: raw.user_contains,
        handler,
    })
}

/// A turn where an error turn makes no sense: there is no next turn for it
/// to fall through to.
fn parse_final_turn(value: Value) -> Result<Answer, String> {
    match parse_turn(value)? {
        Turn::Answer(answer) => Ok(answer),
        Turn::Error(_) => Err("must be text or tool_calls, not an error turn".to_owned()),
    }
}

fn parse_turn(value: Value) -> Result<Turn, String> {
    object(&value, "a turn (with text, tool_calls or error)")?;
    let raw: RawTurn = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if let Some(error) = raw.error {
        if raw.text.is_some() || raw.tool_calls.is_some() {
            return Err("an error turn cannot also have text or tool_calls".to_owned());
        }
        return parse_error(error).map(Turn::Error);
    }
    let text = match raw.text {
        Some(text) if text.is_empty() => {
            // The real API rejects empty text blocks when a client sends
            // them back, so refuse to produce one.
            return Err("text is empty".to_owned());
        }
        Some(text) => Some(Template::parse(&text).map_err(|e| format!("text: {e}"))?),
        None => None,
    };
    let tool_calls = match raw.tool_calls {
        None => Vec::new(),
        Some(calls) if calls.is_empty() => return Err("tool_calls is empty".to_owned()),
        Some(calls) => calls
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_tool_call(v).map_err(|e| format!("tool call {}: {e}", i + 1)))
            .collect::<Result<_, _>>()?,
    };
    if text.is_none() && tool_calls.is_empty() {
        return Err("a turn needs text, tool_calls or error".to_owned());
    }
    Ok(Turn::Answer(Answer { text, tool_calls }))
}

fn parse_tool_call(value: Value) -> Result<ToolCall, String> {
    object(&value, "a tool call (with name and input)")?;
    let raw: RawToolCall = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if raw.name.trim().is_empty() {
        return Err("name is empty".to_owned());
    }
    let input = raw
        .input
        .unwrap_or_else(|| Value::Object(Default::default()));
    if !input.is_object() {
        return Err(format!(
            "input must be a JSON object (tool inputs are objects), found {input}"
        ));
    }
    let input = TValue::compile(&input).map_err(|e| format!("input {e}"))?;
    Ok(ToolCall {
        name: raw.name,
        input,
    })
}

fn parse_error(raw: RawError) -> Result<ErrorTurn, String> {
    if !(400..=599).contains(&raw.status) {
        return Err(format!(
            "error status {} is not an HTTP error (400 to 599)",
            raw.status
        ));
    }
    if raw.times == 0 {
        return Err("error times must be at least 1".to_owned());
    }
    if raw.message.trim().is_empty() {
        return Err("error message is empty".to_owned());
    }
    Ok(ErrorTurn {
        status: raw.status,
        message: raw.message,
        times: raw.times,
        retry_after_seconds: raw.retry_after_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EXAMPLE: &str = r#"{
      "scenarios": [
        {
          "name": "root handler",
          "match": { "system_contains": "Help the user accomplish" },
          "turns": [
            { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
            { "tool_calls": [ { "name": "outcome_create", "input": { "title": "Guide written", "parents": ["{{system:Outcome ([0-9a-f-]{36})}}"] } } ] },
            { "tool_calls": [ { "name": "delegate", "input": { "outcome": "{{result:/outcome}}" } } ] },
            { "text": "Done for now." }
          ]
        }
      ],
      "fallback": { "text": "Nothing scripted for this conversation; stopping." }
    }"#;

    #[test]
    fn the_documented_example_loads() {
        let script = Script::from_json(EXAMPLE).unwrap();
        assert_eq!(
            script.scenario_names().collect::<Vec<_>>(),
            ["root handler"]
        );
        assert_eq!(script.scenarios[0].turns.len(), 4);
        assert!(script.fallback.is_some());
    }

    #[test]
    fn good_scripts() {
        for text in [
            r#"{"scenarios": [], "fallback": {"text": "x"}}"#,
            r#"{"scenarios": [{"name": "a", "turns": [{"text": "hi"}]}]}"#,
            r#"{"comment": "why", "scenarios": [{"name": "a", "comment": "c", "turns": [{"text": "hi", "comment": "t"}]}]}"#,
            r#"{"scenarios": [{"name": "a", "match": {}, "turns": [{"tool_calls": [{"name": "t"}]}]}]}"#,
            r#"{"scenarios": [{"name": "a", "match": {"handler": "0B7E6F1C-1111-4222-8333-444455556666", "user_contains": "u", "system_contains": "s"}, "turns": [{"text": "a", "tool_calls": [{"name": "t", "input": {"n": 1, "l": [null, true, "{{result[2]:/x}}"]}}]}]}]}"#,
            r#"{"scenarios": [{"name": "a", "turns": [{"error": {"status": 429, "message": "slow down", "times": 2, "retry_after_seconds": 1}}, {"text": "ok"}], "after_last": {"text": "bye"}}]}"#,
            r#"{"scenarios": [{"name": "a", "turns": [{"error": {"status": 529, "message": "overloaded"}}]}]}"#,
        ] {
            if let Err(e) = Script::from_json(text) {
                panic!("{text}: {e}");
            }
        }
    }

    #[test]
    fn bad_scripts_say_what_and_where() {
        let s = |turns: &str| {
            format!(
                r#"{{"scenarios": [{{"name": "ok", "turns": [{{"text": "x"}}]}}, {{"name": "b", "turns": {turns}}}]}}"#
            )
        };
        for (text, expected) in [
            ("", "not valid JSON"),
            ("[]", "expected the script to be a JSON object, found []"),
            (
                r#"{"scenarios": [["a", []]]}"#,
                "scenario 1: expected a scenario to be a JSON object",
            ),
            (
                &s(r#"[{"tool_calls": [["t", {}]]}]"#),
                "turn 1: tool call 1: expected a tool call",
            ),
            (r#"{"scenarios": []}"#, "no scenario and no fallback"),
            (
                r#"{"scenarios": [], "fallbak": {}}"#,
                "unknown field `fallbak`",
            ),
            (
                r#"{"scenarios": [{"turns": []}]}"#,
                "scenario 1: missing field `name`",
            ),
            (
                r#"{"scenarios": [{"name": " ", "turns": [{"text": "x"}]}]}"#,
                "scenario 1 (\" \"): name is empty",
            ),
            (
                r#"{"scenarios": [{"name": "a", "turns": [{"text": "x"}]}, {"name": "a", "turns": [{"text": "x"}]}]}"#,
                "scenario 2 (\"a\"): another scenario has the same name",
            ),
            (&s("[]"), "scenario 2 (\"b\"): turns is empty"),
            (
                &s(r#"[{"text": "x"}, {}]"#),
                "scenario 2 (\"b\") turn 2: a turn needs text, tool_calls or error",
            ),
            (
                &s(r#"[{"txt": "x"}]"#),
                "scenario 2 (\"b\") turn 1: unknown field `txt`",
            ),
            (
                &s(r#"["x"]"#),
                "turn 1: expected a turn (with text, tool_calls or error) to be a JSON object, found \"x\"",
            ),
            (&s(r#"[{"text": ""}]"#), "turn 1: text is empty"),
            (
                &s(r#"[{"text": "{{result:x}}"}]"#),
                "turn 1: text: placeholder {{result:x}}: \"x\" is not a JSON pointer",
            ),
            (&s(r#"[{"tool_calls": []}]"#), "tool_calls is empty"),
            (
                &s(r#"[{"tool_calls": [{"name": ""}]}]"#),
                "turn 1: tool call 1: name is empty",
            ),
            (
                &s(r#"[{"tool_calls": [{"name": "a", "input": []}]}]"#),
                "tool call 1: input must be a JSON object",
            ),
            (
                &s(
                    r#"[{"tool_calls": [{"name": "a", "input": {"x": 1}}, {"name": "b", "input": {"p": ["{{system:nogroup}}"]}}]}]"#,
                ),
                "turn 1: tool call 2: input at /p/0: placeholder {{system:nogroup}}: the regex has no capture group",
            ),
            (
                &s(r#"[{"tool_calls": [{"name": "a", "args": {}}]}]"#),
                "unknown field `args`",
            ),
            (
                &s(r#"[{"error": {"status": 200, "message": "m"}}]"#),
                "error status 200 is not an HTTP error",
            ),
            (
                &s(r#"[{"error": {"status": 500, "message": "m", "times": 0}}]"#),
                "times must be at least 1",
            ),
            (
                &s(r#"[{"error": {"status": 500, "message": ""}}]"#),
                "error message is empty",
            ),
            (
                &s(r#"[{"error": {"status": 500, "message": "m"}, "text": "x"}]"#),
                "cannot also have text",
            ),
            (
                &s(r#"[{"error": {"status": 500}}]"#),
                "missing field `message`",
            ),
            (
                r#"{"scenarios": [{"name": "a", "match": {"handler": "nope"}, "turns": [{"text": "x"}]}]}"#,
                "scenario 1 (\"a\"): match: handler \"nope\" is not a UUID",
            ),
            (
                r#"{"scenarios": [{"name": "a", "match": {"system_contains": ""}, "turns": [{"text": "x"}]}]}"#,
                "match: system_contains is empty",
            ),
            (
                r#"{"scenarios": [{"name": "a", "match": {"model": "x"}, "turns": [{"text": "x"}]}]}"#,
                "unknown field `model`",
            ),
            (
                r#"{"scenarios": [{"name": "a", "turns": [{"text": "x"}], "after_last": {"error": {"status": 500, "message": "m"}}}]}"#,
                "scenario 1 (\"a\") after_last: must be text or tool_calls",
            ),
            (
                r#"{"scenarios": [], "fallback": {"tool_calls": [{"name": "a", "input": {"x": "{{"}}]}}"#,
                "fallback: tool call 1: input at /x: unclosed placeholder",
            ),
        ] {
            match Script::from_json(text) {
                Ok(_) => panic!("accepted: {text}"),
                Err(e) => {
                    let shown = e.to_string();
                    assert!(
                        shown.starts_with("failed to load model script: "),
                        "{shown}"
                    );
                    assert!(
                        shown.contains(expected),
                        "{text}\n  gave: {shown}\n  want: {expected}"
                    );
                }
            }
        }
    }

    #[test]
    fn load_names_the_file() {
        let missing = Path::new("/nonexistent/agency-script.json");
        let err = Script::load(missing).unwrap_err();
        assert_eq!(err.file(), Some(missing));
        assert!(
            err.to_string()
                .starts_with("failed to load model script /nonexistent/agency-script.json: "),
            "{err}"
        );
    }

    /// Strings built from the script's own vocabulary reach deeper into the
    /// parser than uniformly random bytes.
    fn json_ish() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just(",".to_owned()),
            Just(":".to_owned()),
            Just("\"scenarios\"".to_owned()),
            Just("\"name\"".to_owned()),
            Just("\"turns\"".to_owned()),
            Just("\"text\"".to_owned()),
            Just("\"tool_calls\"".to_owned()),
            Just("\"input\"".to_owned()),
            Just("\"error\"".to_owned()),
            Just("\"status\"".to_owned()),
            Just("\"times\"".to_owned()),
            Just("\"message\"".to_owned()),
            Just("\"match\"".to_owned()),
            Just("\"handler\"".to_owned()),
            Just("\"fallback\"".to_owned()),
            Just("\"after_last\"".to_owned()),
            Just("\"{{result:/a}}\"".to_owned()),
            Just("\"{{system:(x{2}}}\"".to_owned()),
            Just("\"{{user:(\"".to_owned()),
            Just("\"{{\"".to_owned()),
            Just("429".to_owned()),
            Just("-1".to_owned()),
            Just("null".to_owned()),
            "\"[^\"\\\\]{0,8}\"",
            "[0-9]{1,6}",
        ];
        prop::collection::vec(token, 0..60).prop_map(|tokens| tokens.concat())
    }

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "(\\{\\{)?[a-z\\[\\]0-9:/(){}]{0,12}(\\}\\})?".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            let key = prop_oneof![
                Just("scenarios".to_owned()),
                Just("name".to_owned()),
                Just("turns".to_owned()),
                Just("text".to_owned()),
                Just("tool_calls".to_owned()),
                Just("input".to_owned()),
                Just("error".to_owned()),
                Just("status".to_owned()),
                Just("message".to_owned()),
                Just("times".to_owned()),
                Just("match".to_owned()),
                Just("fallback".to_owned()),
                "[a-z_]{1,6}",
            ];
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key, inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn random_text_never_panics(text in "\\PC{0,300}") {
            let _ = Script::from_json(&text);
        }

        #[test]
        fn json_ish_text_never_panics(text in json_ish()) {
            let _ = Script::from_json(&text);
        }

        #[test]
        fn arbitrary_json_never_panics(value in arbitrary_json()) {
            let _ = Script::from_json(&value.to_string());
            let wrapped = serde_json::json!({"scenarios": [{"name": "n", "turns": [value]}]});
            let _ = Script::from_json(&wrapped.to_string());
        }

        #[test]
        fn templates_never_panic(text in "[{}a-z:/\\[\\]0-9()\\\\]{0,40}") {
            if let Ok(t) = Template::parse(&text) {
                let results = vec![text.clone()];
                let cx = crate::template::Context {
                    system: &text,
                    first_user: &text,
                    tool_results: &results,
                };
                let _ = t.render_value(cx);
            }
        }
    }
}
