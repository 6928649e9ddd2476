//! Issue 31 item 1, typed calls between agents: the input is checked
//! before anything is sent, the answer before anything is delivered (and
//! may be corrected), a call outside the caller's connections is refused
//! like mail, a reply is matched to its request and delivered once, only
//! the callee may answer, and nested calls spend a step budget and count
//! hops (seed 003's bounded loops).

use agency_core::{HandlerId, MailTarget, Principal};
use agency_service::{CallAnswer, CallRequest, OrgPlan, ServiceError};
use serde_json::{Value, json};

use crate::orgs_up::model;
use crate::support::{Env, assert_kind};

const U: Principal = Principal::User;

fn summarise() -> Value {
    json!({"name": "summarise", "description": "Summarise a text",
        "input": {"type": "object", "required": ["text"], "additionalProperties": false,
                  "properties": {"text": {"type": "string", "minLength": 1}}},
        "output": {"type": "object", "required": ["summary"],
                   "properties": {"summary": {"type": "string", "maxLength": 40}}}})
}

fn lookup() -> Value {
    json!({"name": "lookup", "input": {"type": "object"}, "output": {"type": "integer"}})
}

fn agent(name: &str, connections: &[&str], verbs: Value) -> Value {
    json!({"name": name, "title": name, "connections": connections, "verbs": verbs,
           "source": {"file": format!("{name}.agent"), "line": 1}})
}

/// front (executive) over main, worker, helper and loner: main may reach
/// worker, worker may reach helper and main; loner has no connection.
fn org() -> Value {
    json!({
        "name": "Calls", "type": "Agency", "executiveAgent": "front",
        "agents": [agent("front", &[], json!([])), agent("main", &["worker"], json!([])),
                   agent("worker", &["helper", "main"], json!([summarise(), lookup()])),
                   agent("helper", &[], json!([lookup()])),
                   agent("loner", &[], json!([]))],
        "source": {"file": "agents.json", "line": 1}
    })
}

struct World {
    env: Env,
    plan: OrgPlan,
}

impl World {
    fn new() -> World {
        let env = Env::new();
        let plan = env.svc.org_apply(U, &model(org()), false).unwrap();
        World { env, plan }
    }

    fn h(&self, name: &str) -> HandlerId {
        self.plan
            .agents
            .iter()
            .find(|a| a.agent == name)
            .and_then(|a| a.handler)
            .unwrap()
    }

    fn who(&self, name: &str) -> Principal {
        self.env.agent(self.h(name))
    }

    fn call(
        &self,
        from: &str,
        to: &str,
        verb: &str,
        input: &Value,
    ) -> Result<agency_api::CallSent, ServiceError> {
        self.env.svc.agent_call(
            self.who(from),
            &CallRequest {
                target: to,
                verb,
                input,
                steps: None,
                within: None,
            },
        )
    }

    /// Subjects of the unacknowledged mail in `name`'s inbox.
    fn inbox(&self, name: &str) -> Vec<String> {
        self.env
            .svc
            .mail_inbox(self.who(name), None)
            .unwrap()
            .into_iter()
            .map(|m| m.subject)
            .collect()
    }

    /// The bodies of the mail in `name`'s inbox.
    fn bodies(&self, name: &str) -> Vec<String> {
        self.env
            .svc
            .mail_inbox(self.who(name), None)
            .unwrap()
            .into_iter()
            .map(|m| m.body.unwrap_or_default())
            .collect()
    }

    /// How many messages `name` has sent.
    fn sent(&self, name: &str) -> usize {
        self.env.svc.mail_sent(self.who(name), None).unwrap().len()
    }
}

/// The JSON envelope of a call's mail body (after its instructions).
fn envelope(body: &str) -> Value {
    let start = body.find("```json\n").unwrap() + 8;
    let end = body[start..].find("\n```").unwrap() + start;
    serde_json::from_str(&body[start..end]).unwrap()
}

fn issues(e: &ServiceError) -> Vec<(String, String)> {
    match e {
        ServiceError::SchemaViolation { issues, .. } => issues
            .iter()
            .map(|i| (i.instance_path.clone(), i.keyword.clone()))
            .collect(),
        other => panic!("expected a schema violation, got {other:?}"),
    }
}

#[test]
fn issue31_item1_input_violating_the_schema_is_refused_before_anything_is_sent() {
    let w = World::new();
    let cases = [
        (json!({}), vec![("", "required")]),
        (json!({"text": 7}), vec![("/text", "type")]),
        (json!({"text": ""}), vec![("/text", "minLength")]),
        (
            json!({"text": "x", "extra": 1}),
            vec![("", "additionalProperties")],
        ),
        (json!("just text"), vec![("", "type")]),
    ];
    for (input, want) in cases {
        let e = assert_kind(
            w.call("main", "worker", "summarise", &input),
            "schema_violation",
        );
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(p, k)| (p.to_owned(), k.to_owned()))
            .collect();
        assert_eq!(issues(&e), want, "{input}");
        assert!(e.to_string().contains("\"instancePath\""), "{e}");
    }
    assert_eq!(w.sent("main"), 0, "no mail row for a refused call");
    assert!(w.inbox("worker").is_empty());
    // An unknown verb is refused too, naming the verbs there are.
    let e = assert_kind(
        w.call("main", "worker", "translate", &json!({})),
        "not_found",
    );
    assert!(e.to_string().contains("summarise, lookup"), "{e}");
    assert_eq!(w.sent("main"), 0);
}

#[test]
fn issue31_item1_a_call_outside_the_callers_connections_is_refused_like_mail() {
    let w = World::new();
    let input = json!({"text": "hello"});
    // loner has no connection to worker: the same refusal as its mail.
    let mail = w.env.svc.mail_send(
        w.who("loner"),
        MailTarget::Handler(w.h("worker")),
        &agency_service::MailBody::Text {
            subject: None,
            text: "hi".into(),
        },
    );
    let mail = assert_kind(mail, "permission_denied");
    let call = assert_kind(
        w.call("loner", "worker", "summarise", &input),
        "permission_denied",
    );
    assert_eq!(call.to_string(), mail.to_string());
    // By handler id too; and the refusal says nothing of the verb, even
    // an input that breaks the schema (permission comes first).
    let by_id = w.h("worker").to_string();
    assert_kind(
        w.call("loner", &by_id, "summarise", &json!({})),
        "permission_denied",
    );
    assert_kind(
        w.call("loner", "worker", "nope", &input),
        "permission_denied",
    );
    // helper may answer worker back along worker's connection, but may not
    // reach main, to which it has none.
    assert_kind(
        w.call("helper", "main", "summarise", &input),
        "permission_denied",
    );
    assert_eq!(
        w.sent("loner"),
        0,
        "neither the mail nor the call was stored"
    );
}

#[test]
fn issue31_item1_reply_is_matched_validated_and_delivered_once() {
    let w = World::new();
    let sent = w
        .call(
            "main",
            "worker",
            "summarise",
            &json!({"text": "a long text"}),
        )
        .unwrap();
    assert_eq!(
        (sent.hops, sent.steps_left),
        (1, agency_service::DEFAULT_STEPS)
    );
    assert_eq!(sent.callee, w.h("worker"));
    // The callee got the request as mail, with the typed envelope.
    let bodies = w.bodies("worker");
    assert_eq!(bodies.len(), 1);
    let env = envelope(&bodies[0]);
    assert_eq!(env["agency_call"]["type"], "request");
    assert_eq!(env["agency_call"]["request_id"], json!(sent.request_id));
    assert_eq!(
        env["agency_call"]["conversation_id"],
        json!(sent.conversation_id)
    );
    assert_eq!(env["agency_call"]["caller"]["name"], "main");
    assert_eq!(env["agency_call"]["caller"]["handler"], json!(w.h("main")));
    assert_eq!(env["agency_call"]["hops"], 1);
    assert_eq!(
        env["agency_call"]["steps_left"],
        json!(agency_service::DEFAULT_STEPS)
    );
    assert_eq!(env["input"], json!({"text": "a long text"}));
    assert_eq!(env["output_schema"], summarise()["output"]);

    // Only the callee may answer: the caller and a bystander are told the
    // call does not exist.
    for who in ["main", "helper"] {
        let r = w.env.svc.agent_reply(
            w.who(who),
            sent.request_id,
            CallAnswer::Output(&json!({"summary": "x"})),
        );
        assert_kind(r, "not_found");
    }
    // An answer that breaks the output schema is refused to the callee;
    // nothing is delivered and the call stays open.
    for (bad, want) in [
        (json!({"summary": 3}), ("/summary", "type")),
        (json!({}), ("", "required")),
        (
            json!({"summary": "x".repeat(41)}),
            ("/summary", "maxLength"),
        ),
    ] {
        let e = assert_kind(
            w.env
                .svc
                .agent_reply(w.who("worker"), sent.request_id, CallAnswer::Output(&bad)),
            "schema_violation",
        );
        assert_eq!(
            issues(&e),
            vec![(want.0.to_owned(), want.1.to_owned())],
            "{bad}"
        );
    }
    assert!(w.inbox("main").is_empty(), "nothing delivered");
    assert_eq!(w.sent("worker"), 0);
    let view = w.env.svc.call_view(w.who("main"), sent.request_id).unwrap();
    assert_eq!(view.status, "pending");

    // A valid answer is accepted, delivered to the caller in the same
    // conversation, and matched to the request.
    let replied = w
        .env
        .svc
        .agent_reply(
            w.who("worker"),
            sent.request_id,
            CallAnswer::Output(&json!({"summary": "short"})),
        )
        .unwrap();
    assert_eq!(replied.request_id, sent.request_id);
    assert_eq!(replied.conversation_id, sent.conversation_id);
    assert_eq!(replied.kind, "response");
    let inbox = w.env.svc.mail_inbox(w.who("main"), None).unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].id, replied.message);
    assert_eq!(
        inbox[0].in_reply_to,
        Some(sent.message),
        "a reply to the request mail"
    );
    let env = envelope(inbox[0].body.as_deref().unwrap());
    assert_eq!(env["agency_call"]["type"], "response");
    assert_eq!(env["agency_call"]["request_id"], json!(sent.request_id));
    assert_eq!(env["output"], json!({"summary": "short"}));
    let view = w.env.svc.call_view(w.who("main"), sent.request_id).unwrap();
    assert_eq!(
        (view.status.as_str(), view.output),
        ("answered", Some(json!({"summary": "short"})))
    );
    // mail_wait keyed by the conversation finds exactly the reply.
    let waiting = w
        .env
        .svc
        .mail_waiting_in(w.who("main"), sent.conversation_id, &[], 20)
        .unwrap();
    assert_eq!(
        waiting.iter().map(|m| m.id).collect::<Vec<_>>(),
        [replied.message]
    );
    let other = agency_core::ConversationId::new_random();
    assert!(
        w.env
            .svc
            .mail_waiting_in(w.who("main"), other, &[], 20)
            .unwrap()
            .is_empty()
    );
    assert!(
        w.env
            .svc
            .mail_waiting_in(w.who("loner"), sent.conversation_id, &[], 20)
            .unwrap()
            .is_empty(),
        "not loner's conversation"
    );

    // A second answer, valid or an error, is refused; the caller still has
    // exactly one reply.
    let again = w.env.svc.agent_reply(
        w.who("worker"),
        sent.request_id,
        CallAnswer::Output(&json!({"summary": "again"})),
    );
    assert!(
        assert_kind(again, "invalid_input")
            .to_string()
            .contains("already answered")
    );
    let again = w
        .env
        .svc
        .agent_reply(w.who("worker"), sent.request_id, CallAnswer::Error("no"));
    assert_kind(again, "invalid_input");
    assert_eq!(w.inbox("main").len(), 1);
    assert_eq!(w.sent("worker"), 1);
}

#[test]
fn issue31_item1_an_error_answer_closes_the_call() {
    let w = World::new();
    let sent = w
        .call("main", "worker", "lookup", &json!({"q": 1}))
        .unwrap();
    assert_kind(
        w.env
            .svc
            .agent_reply(w.who("worker"), sent.request_id, CallAnswer::Error("  ")),
        "invalid_input",
    );
    let r = w
        .env
        .svc
        .agent_reply(
            w.who("worker"),
            sent.request_id,
            CallAnswer::Error("no such record"),
        )
        .unwrap();
    assert_eq!(r.kind, "error");
    let env = envelope(&w.bodies("main")[0]);
    assert_eq!(env["agency_call"]["type"], "error");
    assert_eq!(env["error"], "no such record");
    let view = w.env.svc.call_view(w.who("main"), sent.request_id).unwrap();
    assert_eq!(
        (view.status.as_str(), view.error.as_deref()),
        ("failed", Some("no such record"))
    );
}

#[test]
fn issue31_item1_nested_calls_spend_the_step_budget_and_count_hops() {
    let w = World::new();
    let top = w
        .env
        .svc
        .agent_call(
            w.who("main"),
            &CallRequest {
                target: "worker",
                verb: "summarise",
                input: &json!({"text": "t"}),
                steps: Some(2),
                within: None,
            },
        )
        .unwrap();
    assert_eq!((top.hops, top.steps_left), (1, 2));
    // worker, serving it, calls helper: one step spent, one hop more, the
    // same conversation.
    let n1 = w.call("worker", "helper", "lookup", &json!({})).unwrap();
    assert_eq!((n1.hops, n1.steps_left), (2, 1));
    assert_eq!(n1.conversation_id, top.conversation_id);
    let env = envelope(&w.bodies("helper")[0]);
    assert_eq!(
        env["agency_call"]["parent_request_id"],
        json!(top.request_id)
    );
    // A second nested call, named explicitly, spends the last step of the
    // tree's budget (its own `steps` cannot add any).
    let n2 = w
        .env
        .svc
        .agent_call(
            w.who("worker"),
            &CallRequest {
                target: "helper",
                verb: "lookup",
                input: &json!({}),
                steps: Some(50),
                within: Some(top.request_id),
            },
        )
        .unwrap();
    assert_eq!(
        (n2.hops, n2.steps_left),
        (2, 0),
        "the tree shares one budget"
    );
    let env = w
        .bodies("helper")
        .iter()
        .map(|b| envelope(b))
        .find(|e| e["agency_call"]["request_id"] == json!(n2.request_id))
        .unwrap();
    assert_eq!(env["agency_call"]["steps_left"], 0);
    // Now no call of the tree may nest another, wherever it is made:
    // helper serving n2 (the newest open call to it), or n1, or worker
    // serving the top call. Refused before anything is sent.
    let (helper_sent, worker_sent) = (w.sent("helper"), w.sent("worker"));
    for within in [None, Some(n1.request_id), Some(n2.request_id)] {
        let e = assert_kind(
            w.env.svc.agent_call(
                w.who("helper"),
                &CallRequest {
                    target: "worker",
                    verb: "lookup",
                    input: &json!({}),
                    steps: None,
                    within,
                },
            ),
            "quota",
        );
        assert!(e.to_string().contains("no step budget left"), "{e}");
    }
    assert_kind(w.call("worker", "helper", "lookup", &json!({})), "quota");
    assert_eq!(
        (w.sent("helper"), w.sent("worker")),
        (helper_sent, worker_sent)
    );
    // Serving a call one is not the callee of is refused.
    assert_kind(
        w.env.svc.agent_call(
            w.who("helper"),
            &CallRequest {
                target: "worker",
                verb: "lookup",
                input: &json!({}),
                steps: None,
                within: Some(top.request_id),
            },
        ),
        "not_found",
    );
    // Once worker answered the top call, nothing is open to it: its next
    // call is top-level again, in a new conversation with a fresh budget.
    w.env
        .svc
        .agent_reply(
            w.who("worker"),
            top.request_id,
            CallAnswer::Output(&json!({"summary": "s"})),
        )
        .unwrap();
    let fresh = w.call("worker", "helper", "lookup", &json!({})).unwrap();
    assert_eq!(
        (fresh.hops, fresh.steps_left),
        (1, agency_service::DEFAULT_STEPS)
    );
    assert_ne!(fresh.conversation_id, top.conversation_id);
    // A nested call's answer closes only that call: helper answers n1, and
    // worker's call_view shows it.
    w.env
        .svc
        .agent_reply(
            w.who("helper"),
            n1.request_id,
            CallAnswer::Output(&json!(42)),
        )
        .unwrap();
    let v = w.env.svc.call_view(w.who("worker"), n1.request_id).unwrap();
    assert_eq!((v.status.as_str(), v.output), ("answered", Some(json!(42))));
    assert_eq!(
        w.env
            .svc
            .call_view(w.who("worker"), n2.request_id)
            .unwrap()
            .status,
        "pending"
    );
}

#[test]
fn issue31_item1_the_hop_limit_bounds_a_chain_of_calls() {
    let env = Env::with_limits(agency_core::Limits {
        max_handoffs: 2,
        ..Default::default()
    });
    let plan = env.svc.org_apply(U, &model(org()), false).unwrap();
    let w = World { env, plan };
    let top = w
        .call("main", "worker", "summarise", &json!({"text": "t"}))
        .unwrap();
    let n1 = w.call("worker", "helper", "lookup", &json!({})).unwrap();
    assert_eq!((top.hops, n1.hops), (1, 2));
    let e = assert_kind(w.call("helper", "worker", "lookup", &json!({})), "quota");
    assert!(e.to_string().contains("limits.max_handoffs = 2"), "{e}");
}
