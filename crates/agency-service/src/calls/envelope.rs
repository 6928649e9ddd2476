//! The mail a typed call travels as: a short instruction for the agent
//! that reads it, then the typed envelope as JSON (seed 003: `request_id`,
//! `conversation_id`, `type` request/response/error, the caller, the step
//! budget left and the hop count), with the input and the output schema
//! (a request) or the output or error (a reply).

use agency_api::MailBody;
use agency_core::{AgentId, CallId, ConversationId, HandlerId};
use serde_json::{Value, json};

/// What the request's envelope says.
pub(crate) struct Request<'a> {
    pub id: CallId,
    pub conversation: ConversationId,
    pub parent: Option<CallId>,
    pub caller: HandlerId,
    pub caller_agent: AgentId,
    /// The caller's organisation agent name, when it is one.
    pub caller_name: Option<&'a str>,
    pub verb: &'a agency_org::Verb,
    pub input: &'a Value,
    pub hops: u32,
    pub steps_left: u32,
}

/// What a reply carries.
pub(crate) enum Answer<'a> {
    Output(&'a Value),
    Error(&'a str),
}

impl Answer<'_> {
    /// The envelope's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Answer::Output(_) => "response",
            Answer::Error(_) => "error",
        }
    }

    /// The answer as stored with the call.
    pub fn json(&self) -> Value {
        match self {
            Answer::Output(v) => json!({ "output": v }),
            Answer::Error(e) => json!({ "error": e }),
        }
    }
}

fn fenced(v: &Value) -> String {
    let pretty = serde_json::to_string_pretty(v).unwrap_or_default();
    format!("```json\n{pretty}\n```\n")
}

pub(crate) fn request(r: &Request<'_>) -> MailBody {
    let caller = match r.caller_name {
        Some(n) => format!("{n} (handler {})", r.caller),
        None => format!("handler {}", r.caller),
    };
    let envelope = json!({
        "agency_call": {
            "type": "request",
            "request_id": r.id,
            "conversation_id": r.conversation,
            "parent_request_id": r.parent,
            "caller": { "handler": r.caller, "agent": r.caller_agent, "name": r.caller_name },
            "verb": r.verb.name,
            "hops": r.hops,
            "steps_left": r.steps_left,
        },
        "input": r.input,
        "output_schema": r.verb.output,
    });
    let text = format!(
        "Typed call {id}: {caller} calls your verb `{verb}`.\n\
         Answer it once with agent_reply {{\"request_id\": \"{id}\", \"output\": …}}, an output that matches \
         `output_schema` below (an answer that does not is refused with its issues, and you may try again), \
         or with agent_reply {{\"request_id\": \"{id}\", \"error\": \"why not\"}}. \
         You may make at most {steps} nested agent_call(s) while serving it.\n\n{body}",
        id = r.id,
        verb = r.verb.name,
        steps = r.steps_left,
        body = fenced(&envelope),
    );
    MailBody::Text {
        subject: Some(format!("call {} [request {}]", r.verb.name, r.id)),
        text,
    }
}

pub(crate) fn reply(
    row: &agency_store::CallRow,
    callee_agent: Option<AgentId>,
    answer: &Answer<'_>,
) -> MailBody {
    let mut envelope = json!({
        "agency_call": {
            "type": answer.kind(),
            "request_id": row.id,
            "conversation_id": row.conversation,
            "callee": { "handler": row.callee, "agent": callee_agent, "name": row.agent },
            "verb": row.verb,
            "hops": row.hops,
        },
    });
    if let (Value::Object(m), Value::Object(a)) = (&mut envelope, answer.json()) {
        m.extend(a);
    }
    let head = match answer {
        Answer::Output(_) => format!(
            "Reply to typed call {}: {} answered `{}`; the output matches the verb's schema.",
            row.id, row.agent, row.verb
        ),
        Answer::Error(_) => format!(
            "Reply to typed call {}: {} could not do `{}` and answered with an error.",
            row.id, row.agent, row.verb
        ),
    };
    MailBody::Text {
        subject: Some(format!("reply {} [request {}]", row.verb, row.id)),
        text: format!("{head}\n\n{}", fenced(&envelope)),
    }
}
