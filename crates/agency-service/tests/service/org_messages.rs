//! Talking to an agency from outside (issue 12 items 6-7): a message
//! becomes mail from the user to the executive handler with a row that
//! tracks it; `in_reply_to` only names mail its sender received; the
//! reply counts only from the executive; conversations carry their
//! thread; API keys are scoped to one agency and die when revoked.

use agency_core::{ConversationId, HandlerId, MailTarget, MessageId, OrgMessageId, Principal};
use agency_service::{
    Event, MailBody, MessageView, OrgCaller, OrgMessageStatus, OrgMessageView, System,
};

use crate::support::{Env, assert_kind};

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

/// `agency up` of a one-level agency `name` with `agents`, `exec` its
/// executive; returns the executive's handler.
pub(crate) fn stand_up(svc: &System, name: &str, agents: &[&str], exec: &str) -> HandlerId {
    let agents: Vec<serde_json::Value> = agents
        .iter()
        .map(|a| serde_json::json!({"name": a, "title": a, "source": {"file": format!("{a}.agent"), "line": 1}}))
        .collect();
    let model: agency_org::AgencyModel = serde_json::from_value(serde_json::json!({
        "name": name, "type": "Agency", "executiveAgent": exec, "agents": agents,
        "source": {"file": format!("{name}.agency"), "line": 1}
    }))
    .unwrap();
    svc.org_apply(Principal::User, &model, false).unwrap();
    svc.org_executive(name).unwrap().unwrap()
}

/// An environment with two agencies: `weather` (executive `exec`) and
/// `other` (executive `other`), both handlers under the root.
struct Org {
    env: Env,
    exec: HandlerId,
    other: HandlerId,
}

impl Org {
    fn new() -> Org {
        let env = Env::new();
        let exec = stand_up(&env.svc, "weather", &["desk"], "desk");
        let other = stand_up(&env.svc, "other", &["otherdesk"], "otherdesk");
        Org { env, exec, other }
    }

    fn svc(&self) -> &System {
        &self.env.svc
    }

    fn post(&self, agency: &str, t: &str, conv: Option<ConversationId>) -> OrgMessageView {
        self.svc()
            .org_message_post(&OrgCaller::User, agency, t, conv)
            .unwrap()
    }

    /// The one new message in `h`'s inbox, acknowledged (so that the
    /// next call sees only what came after it).
    fn take_mail(&self, h: HandlerId) -> MessageView {
        let inbox = self.svc().mail_inbox(self.env.agent(h), None).unwrap();
        assert_eq!(inbox.len(), 1, "{inbox:?}");
        self.svc()
            .mail_ack(self.env.agent(h), &[inbox[0].id])
            .unwrap();
        inbox[0].clone()
    }

    fn reply(
        &self,
        h: HandlerId,
        to: MessageId,
        t: &str,
    ) -> Result<MessageId, agency_service::ServiceError> {
        self.svc()
            .mail_send_replying(self.env.agent(h), MailTarget::User, &text(t), Some(to))
    }

    fn get(&self, id: OrgMessageId) -> OrgMessageView {
        self.svc().org_message_get(&OrgCaller::User, id).unwrap()
    }
}

#[test]
fn a_message_becomes_mail_to_the_executive_with_how_to_answer() {
    let o = Org::new();
    let v = o.post("weather", "What is the weather in Oslo?", None);
    assert_eq!(v.status, OrgMessageStatus::Pending);
    assert_eq!(v.agency, "weather");
    assert!(v.reply.is_none());
    let m = o.take_mail(o.exec);
    assert_eq!(m.from, MailTarget::User);
    assert_eq!(m.to, MailTarget::Handler(o.exec));
    let body = m.body.clone().unwrap();
    assert!(body.contains("What is the weather in Oslo?"), "{body}");
    assert!(body.contains("outside party"), "{body}");
    assert!(
        body.contains(&format!("in_reply_to = \"{}\"", m.id)),
        "the body names the mail to answer: {body}"
    );
    assert!(body.contains(&v.conversation.to_string()), "{body}");
    // Nothing reached the other agency's executive.
    assert!(
        o.svc()
            .mail_inbox(o.env.agent(o.other), None)
            .unwrap()
            .is_empty()
    );
    // Unknown agency, bad name, empty or oversized text: refused, nothing sent.
    let u = OrgCaller::User;
    assert_kind(
        o.svc().org_message_post(&u, "nope", "hi", None),
        "not_found",
    );
    assert_kind(
        o.svc().org_message_post(&u, "../x", "hi", None),
        "invalid_input",
    );
    assert_kind(
        o.svc().org_message_post(&u, "weather", "  \n", None),
        "invalid_input",
    );
    let long = "x".repeat(agency_service::MAX_ORG_MESSAGE_BYTES + 1);
    assert_kind(
        o.svc().org_message_post(&u, "weather", &long, None),
        "invalid_input",
    );
    assert!(
        o.svc()
            .mail_inbox(o.env.agent(o.exec), None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_executives_reply_answers_the_message_and_wakes_waiters() {
    let o = Org::new();
    let v = o.post("weather", "Rain tomorrow?", None);
    let m = o.take_mail(o.exec);
    let mut events = o.svc().subscribe();
    let reply = o.reply(o.exec, m.id, "No rain, 12 °C.").unwrap();
    let got = o.get(v.id);
    assert_eq!(got.status, OrgMessageStatus::Answered);
    assert_eq!(got.reply.as_deref(), Some("No rain, 12 °C."));
    assert!(got.answered_at.is_some());
    let mut woke = false;
    while let Ok(e) = events.try_recv() {
        woke |= e
            == Event::OrgMessageAnswered {
                message: v.id,
                agency: "weather".into(),
            };
    }
    assert!(woke, "an OrgMessageAnswered event was published");
    // The reply is ordinary mail to the user too, naming what it answers.
    let status = o.svc().mail_status(Principal::User, reply).unwrap();
    assert_eq!(status.in_reply_to, Some(m.id));
    // Only the first answer counts.
    o.reply(o.exec, m.id, "Actually, storms.").unwrap();
    assert_eq!(o.get(v.id).reply.as_deref(), Some("No rain, 12 °C."));
}

#[test]
fn a_deferred_reply_counts_when_it_is_delivered() {
    let o = Org::new();
    let v = o.post("weather", "Later?", None);
    let m = o.take_mail(o.exec);
    let due = o.env.now_plus(60_000);
    o.svc()
        .mail_send_deferred_replying(
            o.env.agent(o.exec),
            MailTarget::User,
            &text("In a minute."),
            due,
            Some(m.id),
        )
        .unwrap();
    assert_eq!(o.get(v.id).status, OrgMessageStatus::Pending);
    o.env.clock.advance_millis(60_000);
    o.svc().deliver_due(due).unwrap();
    assert_eq!(o.get(v.id).reply.as_deref(), Some("In a minute."));
}

/// The attacks `in_reply_to` opens: answering mail one never received
/// (someone else's, one's own outgoing, an unknown id), and forging the
/// agency's answer from another handler.
#[test]
fn in_reply_to_names_only_mail_delivered_to_the_sender() {
    let o = Org::new();
    let root = o.env.root;
    let v = o.post("weather", "Hello?", None);
    let m = o.take_mail(o.exec);
    // The root handler may write to the user but never received this mail:
    // it cannot answer it, so it cannot forge the agency's answer.
    let forged = assert_kind(o.reply(root, m.id, "forged answer"), "invalid_input");
    assert!(forged.to_string().contains("in reply to"), "{forged}");
    // Nor can the other agency's executive (it may not even write to the
    // user: the user never wrote to it), and an unknown id gets the same
    // refusal as someone else's.
    o.svc()
        .mail_send(Principal::User, MailTarget::Handler(o.other), &text("hi"))
        .unwrap();
    let theirs = assert_kind(o.reply(o.other, m.id, "forged"), "invalid_input");
    let unknown = MessageId::new_random();
    let none = assert_kind(o.reply(o.other, unknown, "forged"), "invalid_input");
    assert_eq!(
        theirs.to_string().replace(&m.id.to_string(), "<id>"),
        none.to_string().replace(&unknown.to_string(), "<id>"),
        "someone else's message and none are refused alike"
    );
    // Its own outgoing mail is not mail it received.
    let sent = o
        .svc()
        .mail_send(o.env.agent(o.exec), MailTarget::User, &text("status"))
        .unwrap();
    assert_kind(o.reply(o.exec, sent, "x"), "invalid_input");
    // The user cannot answer mail it sent to a handler either.
    assert_kind(
        o.svc().mail_send_replying(
            Principal::User,
            MailTarget::Handler(o.exec),
            &text("x"),
            Some(m.id),
        ),
        "invalid_input",
    );
    assert_eq!(o.get(v.id).status, OrgMessageStatus::Pending);
    // The executive's own answer to a handler, not to the user, is not
    // the agency's answer either.
    o.svc()
        .mail_send_replying(
            o.env.agent(o.exec),
            MailTarget::Handler(root),
            &text("to my boss"),
            Some(m.id),
        )
        .unwrap();
    assert_eq!(o.get(v.id).status, OrgMessageStatus::Pending);
}

#[test]
fn a_reply_from_a_handler_that_is_no_longer_the_executive_is_not_the_answer() {
    let o = Org::new();
    let v = o.post("weather", "Who answers?", None);
    let m = o.take_mail(o.exec);
    // The agency's executive changes; the old one received the mail, so
    // it may answer it, but its answer is not the agency's.
    let new_exec = stand_up(o.svc(), "weather", &["desk", "chief"], "chief");
    assert_ne!(new_exec, o.exec);
    o.reply(o.exec, m.id, "old executive speaking").unwrap();
    let got = o.get(v.id);
    assert_eq!(got.status, OrgMessageStatus::Pending);
    assert!(got.reply.is_none());
}

#[test]
fn a_conversation_shows_the_executive_the_earlier_exchange() {
    let o = Org::new();
    let first = o.post("weather", "Is it sunny in Bergen?", None);
    let m1 = o.take_mail(o.exec);
    o.reply(o.exec, m1.id, "Never, it is Bergen.").unwrap();
    let second = o.post("weather", "And tomorrow?", Some(first.conversation));
    assert_eq!(second.conversation, first.conversation);
    let body = o.take_mail(o.exec).body.unwrap();
    let (earlier, new) = body.split_once("----- new message -----").unwrap();
    assert!(earlier.contains("Is it sunny in Bergen?"), "{body}");
    assert!(earlier.contains("Never, it is Bergen."), "{body}");
    assert!(new.contains("And tomorrow?"), "{body}");
    // A fresh message starts a fresh thread.
    let fresh = o.post("weather", "Unrelated", None);
    assert_ne!(fresh.conversation, first.conversation);
    let body = o.take_mail(o.exec).body.unwrap();
    assert!(!body.contains("Bergen"), "{body}");
    // Unknown conversation, or another agency's: not found.
    let u = OrgCaller::User;
    assert_kind(
        o.svc()
            .org_message_post(&u, "weather", "x", Some(ConversationId::new_random())),
        "not_found",
    );
    assert_kind(
        o.svc()
            .org_message_post(&u, "other", "x", Some(first.conversation)),
        "not_found",
    );
}

#[test]
fn a_long_conversation_keeps_only_its_newest_turns() {
    let o = Org::new();
    let mut conv = None;
    for n in 0..14 {
        let v = o.post("weather", &format!("question number {n:02}"), conv);
        conv = Some(v.conversation);
        let m = o.take_mail(o.exec);
        o.reply(o.exec, m.id, &format!("answer number {n:02}"))
            .unwrap();
    }
    o.post("weather", "the last question", conv);
    let body = o.take_mail(o.exec).body.unwrap();
    // The last 10 turns (04..13), the oldest dropped, and it says so.
    assert!(!body.contains("question number 03"), "{body}");
    assert!(body.contains("question number 04"), "{body}");
    assert!(body.contains("answer number 13"), "{body}");
    assert!(
        body.find("number 04") < body.find("number 13"),
        "oldest first"
    );
}

#[test]
fn api_keys_are_scoped_to_one_agency_and_die_when_revoked() {
    let o = Org::new();
    let svc = o.svc();
    // Only the user mints, for an agency that exists.
    let agent = o.env.agent(o.exec);
    assert_kind(svc.org_key_mint(agent, "weather"), "permission_denied");
    assert_kind(svc.org_key_mint(Principal::User, "nope"), "not_found");
    let k = svc.org_key_mint(Principal::User, "weather").unwrap();
    assert!(
        k.key.starts_with("agk_") && k.key.len() == 4 + 64,
        "{}",
        k.prefix
    );
    assert!(k.key.starts_with(&k.prefix));
    assert_eq!(svc.org_key_verify(&k.key).unwrap(), "weather");
    let key = OrgCaller::Key(k.key.clone());

    // Its own agency: post and read.
    let v = svc.org_message_post(&key, "weather", "hi", None).unwrap();
    assert_eq!(svc.org_message_get(&key, v.id).unwrap().id, v.id);
    // Another agency: refused; its messages are as unknown as none.
    assert_kind(
        svc.org_message_post(&key, "other", "hi", None),
        "permission_denied",
    );
    let theirs = o.post("other", "private", None);
    assert_kind(svc.org_message_get(&key, theirs.id), "not_found");
    // A made-up key, or the key with a character changed: refused.
    for bad in ["agk_0000", "agency_admin", &k.key[..k.key.len() - 1]] {
        let c = OrgCaller::Key(bad.to_owned());
        assert_kind(
            svc.org_message_post(&c, "weather", "hi", None),
            "permission_denied",
        );
        assert!(svc.org_key_verify(bad).is_err());
    }

    // Listed without its secret; revoked, it stops at once.
    let listed = svc.org_key_list(Principal::User, Some("weather")).unwrap();
    assert_eq!(listed.len(), 1);
    let json = serde_json::to_string(&listed).unwrap();
    assert!(!json.contains(&k.key), "the secret is never listed");
    assert_kind(svc.org_key_list(agent, None), "permission_denied");
    assert_kind(svc.org_key_revoke(agent, k.id), "permission_denied");
    assert!(svc.org_key_revoke(Principal::User, k.id).unwrap());
    assert!(
        !svc.org_key_revoke(Principal::User, k.id).unwrap(),
        "already revoked"
    );
    assert!(svc.org_key_verify(&k.key).is_err());
    assert_kind(
        svc.org_message_post(&key, "weather", "hi", None),
        "permission_denied",
    );
    assert_kind(svc.org_message_get(&key, v.id), "permission_denied");
    let listed = svc.org_key_list(Principal::User, None).unwrap();
    assert!(listed[0].revoked_at.is_some());
    assert_kind(
        svc.org_key_revoke(Principal::User, agency_core::OrgKeyId::new_random()),
        "not_found",
    );
}
