//! `agency transcript <run>`: a readable replay of a run's transcript —
//! turns, the model's text, tool calls with their arguments, results cut
//! to a few lines — from either transcript format: the built-in loop's
//! JSONL (`event`: run_start, model_reply, tool_call, tool_result, …) and
//! Claude Code's stream-json (`type`: system, assistant, user, result).
//!
//! Everything in a transcript may have been written by a prompt-injected
//! agent or by a tool result it read, so every string goes through
//! `safe_text::line` or `safe_text::block`, which make control characters
//! visible (an ESC could otherwise set the clipboard or forge lines in the
//! user's terminal).

use std::fmt::Write as _;

use serde_json::Value;

use crate::safe_text::{block, line};

/// How much of a tool result the replay shows.
const RESULT_CHARS: usize = 400;
/// How much of a tool call's arguments the replay shows.
const ARGS_CHARS: usize = 600;

/// `s` cut to at most `max` characters, saying how much was left out.
fn cut(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}… ({} more characters)", n - max)
}

/// Indent every line of `text` by `pad`.
fn indented(text: &str, pad: &str) -> String {
    text.lines()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// " at TS" for an event's timestamp, or nothing when it has none.
fn at(ts: &str) -> String {
    if ts.is_empty() {
        String::new()
    } else {
        format!(" at {}", line(ts))
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The replay of a whole transcript (one JSON value per event).
pub fn replay(events: &[Value]) -> String {
    let mut out = String::new();
    for ev in events {
        event_into(&mut out, ev);
    }
    if out.is_empty() {
        out.push_str("(empty transcript)\n");
    }
    out
}

/// The replay of one event, as a followed transcript prints it (each
/// event stands alone: the replay keeps no state between them).
pub fn replay_event(ev: &Value) -> String {
    let mut out = String::new();
    event_into(&mut out, ev);
    out
}

fn event_into(out: &mut String, ev: &Value) {
    // Agency's own marker where it left part of the transcript out.
    if str_of(ev, "type") == "agency_omitted" {
        let _ = writeln!(
            out,
            "({} bytes left out here: {})",
            ev.get("bytes").map(compact).unwrap_or_default(),
            line(str_of(ev, "why"))
        );
    } else if ev.get("event").is_some() {
        builtin_event(out, ev);
    } else if ev.get("type").is_some() {
        claude_event(out, ev);
    } else if let Some(raw) = ev.get("unparsed").and_then(Value::as_str) {
        let _ = writeln!(out, "(not JSON) {}", line(&cut(raw, RESULT_CHARS)));
    } else {
        let _ = writeln!(
            out,
            "(unknown event) {}",
            line(&cut(&ev.to_string(), RESULT_CHARS))
        );
    }
}

fn tool_call_line(out: &mut String, name: &str, input: &Value) {
    let _ = writeln!(
        out,
        "  → {} {}",
        line(name),
        line(&cut(&compact(input), ARGS_CHARS))
    );
}

fn tool_result_lines(out: &mut String, name: &str, is_error: bool, content: &str) {
    let status = if is_error { "error" } else { "ok" };
    let _ = writeln!(out, "  ← {} {status}", line(name));
    out.push_str(&indented(
        &block(&cut(content.trim_end(), RESULT_CHARS)),
        "      ",
    ));
}

/// One event of the built-in loop's JSONL.
fn builtin_event(out: &mut String, ev: &Value) {
    let ts = str_of(ev, "ts");
    match str_of(ev, "event") {
        "run_start" => {
            let _ = writeln!(
                out,
                "run started{} — model {} ({})",
                at(ts),
                line(str_of(ev, "model")),
                line(str_of(ev, "api"))
            );
        }
        "mcp_connected" => {
            let n = ev
                .get("tools")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let _ = writeln!(out, "connected to Agency's MCP server: {n} tools");
        }
        "mcp_server_connected" => {
            let _ = writeln!(out, "connected to MCP server {}", line(str_of(ev, "name")));
        }
        "mcp_server_failed" => {
            let _ = writeln!(
                out,
                "MCP server {} failed: {}",
                line(str_of(ev, "name")),
                line(str_of(ev, "error"))
            );
        }
        "model_request" => {
            let turn = ev.get("turn").map(compact).unwrap_or_default();
            let _ = writeln!(out, "\n── turn {} ──", line(&turn));
        }
        "retry" => {
            let _ = writeln!(
                out,
                "  (retry {}: {})",
                ev.get("attempt").map(compact).unwrap_or_default(),
                line(&cut(str_of(ev, "error"), RESULT_CHARS))
            );
        }
        "model_reply" => {
            let text = str_of(ev, "text");
            if !text.trim().is_empty() {
                out.push_str("  assistant:\n");
                out.push_str(&indented(&block(text.trim_end()), "    "));
            }
            let _ = writeln!(
                out,
                "  (stop: {}, tokens in {} / out {})",
                line(&ev.get("stop_reason").map(compact).unwrap_or_default()),
                ev.get("input_tokens").map(compact).unwrap_or_default(),
                ev.get("output_tokens").map(compact).unwrap_or_default()
            );
        }
        "tool_call" => tool_call_line(
            out,
            str_of(ev, "name"),
            ev.get("input").unwrap_or(&Value::Null),
        ),
        "tool_result" => tool_result_lines(
            out,
            str_of(ev, "name"),
            ev.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            str_of(ev, "content"),
        ),
        "limit" => {
            let _ = writeln!(out, "limit reached: {}", line(str_of(ev, "limit")));
        }
        "error" => {
            let _ = writeln!(out, "error: {}", line(str_of(ev, "message")));
        }
        "run_end" => {
            let ended = ev.get("ended").map(compact).unwrap_or_default();
            let _ = writeln!(
                out,
                "\nrun ended{}: {} ({} turns, {} tool calls, {} input / {} output tokens)",
                at(ts),
                line(&ended),
                ev.get("turns").map(compact).unwrap_or_default(),
                ev.get("tool_calls").map(compact).unwrap_or_default(),
                ev.get("input_tokens").map(compact).unwrap_or_default(),
                ev.get("output_tokens").map(compact).unwrap_or_default()
            );
        }
        other => {
            let _ = writeln!(out, "({})", line(other));
        }
    }
}

/// The text of a tool result's `content`: a string, or a list of blocks.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| {
                b.get("text")
                    .and_then(Value::as_str)
                    .map_or_else(|| b.to_string(), str::to_owned)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => compact(other),
    }
}

/// One line of Claude Code's stream-json.
fn claude_event(out: &mut String, ev: &Value) {
    let blocks = |ev: &Value| -> Vec<Value> {
        ev.get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    match str_of(ev, "type") {
        "system" => {
            let servers: Vec<String> = ev
                .get("mcp_servers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|s| {
                            format!(
                                "{} ({})",
                                line(str_of(s, "name")),
                                line(str_of(s, "status"))
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "run started ({}) — model {}; MCP servers: {}",
                line(str_of(ev, "subtype")),
                line(str_of(ev, "model")),
                if servers.is_empty() {
                    "none".to_owned()
                } else {
                    servers.join(", ")
                }
            );
        }
        "assistant" => {
            out.push_str("\n── assistant ──\n");
            for b in blocks(ev) {
                match str_of(&b, "type") {
                    "text" => {
                        out.push_str(&indented(&block(str_of(&b, "text").trim_end()), "    "))
                    }
                    "tool_use" => tool_call_line(
                        out,
                        str_of(&b, "name"),
                        b.get("input").unwrap_or(&Value::Null),
                    ),
                    "thinking" => out.push_str("  (thinking)\n"),
                    other => {
                        let _ = writeln!(out, "  ({})", line(other));
                    }
                }
            }
        }
        "user" => {
            for b in blocks(ev) {
                if str_of(&b, "type") == "tool_result" {
                    let id = str_of(&b, "tool_use_id");
                    tool_result_lines(
                        out,
                        &format!("result of {id}"),
                        b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                        &result_text(b.get("content").unwrap_or(&Value::Null)),
                    );
                } else if let Some(t) = b.get("text").and_then(Value::as_str) {
                    out.push_str("  user:\n");
                    out.push_str(&indented(&block(&cut(t, RESULT_CHARS)), "    "));
                }
            }
        }
        "result" => {
            let _ = writeln!(
                out,
                "\nrun ended: {}{} ({} turns)",
                line(str_of(ev, "subtype")),
                if ev.get("is_error").and_then(Value::as_bool) == Some(true) {
                    ", is_error"
                } else {
                    ""
                },
                ev.get("num_turns").map(compact).unwrap_or_default()
            );
            let r = str_of(ev, "result");
            if !r.is_empty() {
                out.push_str(&indented(&block(&cut(r.trim_end(), RESULT_CHARS)), "    "));
            }
        }
        other => {
            let _ = writeln!(out, "({})", line(other));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn issue9_item12_builtin_transcript_replays_turns_calls_and_results() {
        let events = vec![
            json!({"ts": "2026-01-01T00:00:00Z", "event": "run_start", "api": "anthropic", "model": "m1"}),
            json!({"event": "mcp_connected", "tools": ["a", "b"]}),
            json!({"event": "model_request", "turn": 0}),
            json!({"event": "model_reply", "turn": 0, "text": "Checking my inbox.", "stop_reason": "tool_use", "input_tokens": 10, "output_tokens": 5}),
            json!({"event": "tool_call", "turn": 0, "id": "c1", "name": "mail_inbox", "input": {"limit": 5}}),
            json!({"event": "tool_result", "turn": 0, "id": "c1", "name": "mail_inbox", "is_error": false, "content": "x".repeat(1000)}),
            json!({"event": "run_end", "ended": "completed", "turns": 1, "tool_calls": 1, "input_tokens": 10, "output_tokens": 5}),
        ];
        let r = replay(&events);
        assert!(r.contains("model m1 (anthropic)"), "{r}");
        assert!(r.contains("── turn 0 ──"), "{r}");
        assert!(r.contains("    Checking my inbox."), "{r}");
        assert!(r.contains("→ mail_inbox {\"limit\":5}"), "{r}");
        assert!(r.contains("← mail_inbox ok"), "{r}");
        assert!(r.contains("(600 more characters)"), "{r}");
        assert!(r.contains("run started at 2026-01-01T00:00:00Z"), "{r}");
        assert!(
            r.contains("run ended: completed (1 turns, 1 tool calls"),
            "{r}"
        );
    }

    #[test]
    fn issue9_item12_claude_stream_json_replays() {
        let events = vec![
            json!({"type": "system", "subtype": "init", "model": "claude", "mcp_servers": [{"name": "agency", "status": "connected"}]}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "Hi"}, {"type": "tool_use", "id": "t1", "name": "mcp__agency__kb_read", "input": {"file": "f"}}]}}),
            json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "body"}]}]}}),
            json!({"type": "result", "subtype": "success", "num_turns": 2, "result": "done"}),
        ];
        let r = replay(&events);
        assert!(r.contains("agency (connected)"), "{r}");
        assert!(r.contains("→ mcp__agency__kb_read {\"file\":\"f\"}"), "{r}");
        assert!(r.contains("← result of t1 ok\n      body"), "{r}");
        assert!(r.contains("run ended: success (2 turns)"), "{r}");
    }

    #[test]
    fn issue9_item12_replay_makes_control_characters_visible() {
        let osc52 = "\u{1b}]52;c;ZXZpbA==\u{7}";
        let events = vec![
            json!({"event": "model_reply", "text": format!("look{osc52}\rFAKE LINE\u{202e}"), "stop_reason": "end"}),
            json!({"event": "tool_call", "name": format!("x\u{1b}[2J"), "input": {"a": osc52}}),
            json!({"event": "tool_result", "name": "kb_read", "content": format!("line1\nline2{osc52}")}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": osc52}]}}),
            json!({"unparsed": "\u{1b}[31mred"}),
        ];
        let r = replay(&events);
        assert!(
            !r.contains('\u{1b}') && !r.contains('\r') && !r.contains('\u{7}'),
            "{r:?}"
        );
        assert!(!r.contains('\u{202e}'), "{r:?}");
        assert!(r.contains("\\u{1b}]52;c;ZXZpbA==\\u{7}"), "{r}");
        assert!(
            r.contains("line1\n"),
            "multi-line results keep their lines: {r}"
        );
    }

    #[test]
    fn unparsed_and_empty_transcripts_say_so() {
        assert_eq!(replay(&[]), "(empty transcript)\n");
        assert!(replay(&[json!({"unparsed": "oops"})]).contains("(not JSON) oops"));
    }
}
