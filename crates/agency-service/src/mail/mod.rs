//! Mail: a message is a KB file plus an envelope. Sending is checked against
//! the mail capabilities the handler tree makes (boss <-> direct underling,
//! user <-> root, self, and the user's direct intervention) and those an
//! organisation's connections make (`orgs/apply.rs`; lateral mail only
//! where a connection grants it); deferred messages wait durably in the store
//! until `deliver_due`, which checks them again. Delivery gives the recipient
//! Read on the body derived from the sender's delegatable capability
//! and makes sure it has an open Process Inbox outcome;
//! acknowledging the last message completes that outcome. Message bodies
//! are immutable: their sender keeps Read, not Write.

pub(crate) mod org_reply;

use crate::event_log::Record;
use agency_api::EventKind;
use agency_core::access::FileKind;
use agency_core::capability::{AttachAccess, GrantRefusal, attach_access};
use agency_core::{
    FileId, HandlerId, HeldCap, Level, MailTarget, MessageId, Principal, Resource, StatusChange,
    Timestamp,
};
use agency_store::{CapOrigin, HandlerStatus, MessageRow, NewCapability, Tx};

use crate::Result;
use crate::access::{file_at_level, kb_level};
use crate::error::ServiceError;
use crate::events::Event;
use crate::kb::create_document;
use crate::render::log;
use crate::render::{Author, render_audit_log_file};
use crate::service::outbox::Notice;
use crate::service::{Caller, Op, Service, System, authenticate};
use crate::tree::handlers::system_cap;
use crate::tree::inbox::ensure_process_inbox;
use crate::tree::outcomes::finish_outcome;
use crate::views::{MailBody, MessageView};

/// Deferred mail may be scheduled at most this far ahead (ten years).
const MAX_DEFER_MS: i64 = 10 * 366 * 24 * 3600 * 1000;
const SUBJECT_CHARS: usize = 120;

impl Service {
    /// Send a message now.
    pub fn mail_send(&self, who: Principal, to: MailTarget, body: &MailBody) -> Result<MessageId> {
        self.send(who, to, body, None, None)
    }

    /// Send a message now, as the answer to `in_reply_to` when given: a
    /// message that was delivered to the sender (anything else is refused,
    /// so nobody answers mail it never received). An answer to a message
    /// from outside an agency, sent to the user by that agency's executive
    /// handler, is that message's reply (`orgs/messages.rs`).
    pub fn mail_send_replying(
        &self,
        who: Principal,
        to: MailTarget,
        body: &MailBody,
        in_reply_to: Option<MessageId>,
    ) -> Result<MessageId> {
        self.send(who, to, body, None, in_reply_to)
    }

    /// Send a message that is delivered at `deliver_at` (durably held until
    /// then, across restarts).
    pub fn mail_send_deferred(
        &self,
        who: Principal,
        to: MailTarget,
        body: &MailBody,
        deliver_at: Timestamp,
    ) -> Result<MessageId> {
        self.mail_send_deferred_replying(who, to, body, deliver_at, None)
    }

    /// [`Service::mail_send_deferred`] as the answer to `in_reply_to` (see
    /// [`Service::mail_send_replying`]); a reply to a message from outside
    /// counts when it is delivered.
    pub fn mail_send_deferred_replying(
        &self,
        who: Principal,
        to: MailTarget,
        body: &MailBody,
        deliver_at: Timestamp,
        in_reply_to: Option<MessageId>,
    ) -> Result<MessageId> {
        let now = self.now();
        if deliver_at.0 > now.0.saturating_add(MAX_DEFER_MS) {
            return Err(ServiceError::invalid(format!(
                "failed to schedule mail for {deliver_at}: that is more than ten years ahead"
            )));
        }
        self.send(who, to, body, Some(deliver_at), in_reply_to)
    }

    fn send(
        &self,
        who: Principal,
        to: MailTarget,
        body: &MailBody,
        deliver_at: Option<Timestamp>,
        in_reply_to: Option<MessageId>,
    ) -> Result<MessageId> {
        self.send_then(who, to, body, deliver_at, in_reply_to, &|_, _, _| Ok(()))
    }

    /// Send mail exactly as [`Service::mail_send_replying`] does, then run
    /// `then` in the same transaction with the new message's id: a typed
    /// call (`calls/`) records its envelope there, so the mail and the
    /// record are stored together or not at all (an error from `then`
    /// rolls the mail back).
    pub(crate) fn send_then(
        &self,
        who: Principal,
        to: MailTarget,
        body: &MailBody,
        deliver_at: Option<Timestamp>,
        in_reply_to: Option<MessageId>,
        then: &dyn Fn(&mut Op<'_>, &Caller, MessageId) -> Result<()>,
    ) -> Result<MessageId> {
        let subject = match body {
            MailBody::Text { subject, text } => {
                self.cfg
                    .limits
                    .check_content("the message body", text.len())?;
                if text.trim().is_empty() {
                    return Err(ServiceError::invalid(
                        "failed to send mail: the message body is empty",
                    ));
                }
                subject.clone().unwrap_or_else(|| first_line(text))
            }
            MailBody::File { subject, .. } => subject.clone().unwrap_or_default(),
        };
        let subject = clip(&subject);
        self.cfg.limits.check_description("subject", &subject)?;
        // Check before storing the body, so a refused sender stores nothing.
        // Set when the refusal is for lack of a connection: a sign of a
        // misdesigned organisation the user should see (`mail.refused`).
        let unconnected = std::cell::Cell::new(false);
        let precheck = |tx: &mut dyn Tx| -> Result<Caller> {
            let caller = authenticate(tx, who)?;
            check_may_send(tx, &caller, to).inspect_err(|_| unconnected.set(true))?;
            if let Some(r) = in_reply_to {
                check_reply_to(tx, &caller, r)?;
            }
            // Only mail that will wait counts against the deferred quota.
            if let (Some(h), Some(at)) = (caller.handler(), deliver_at)
                && at > self.now()
            {
                crate::quotas::check_pending_deferred(tx, &self.cfg.limits, h)?;
            }
            if let MailBody::File { file, .. } = body {
                file_at_level(tx, &caller, *file, Level::Read, "attach")?;
                if let Err(r) = attach_grant(tx, caller.party(), to, *file, Timestamp(0))? {
                    return Err(ServiceError::denied(format!(
                        "failed to attach KB file {file} to mail for {}: they cannot read it, and {r}; ask your boss for a delegatable capability on it",
                        party(to)
                    )));
                }
            }
            Ok(caller)
        };
        if let Err(e) = self.read(|tx| precheck(tx).map(drop)) {
            if let (true, Principal::Agent { handler, agent }) = (unconnected.get(), who) {
                let to_text = match to {
                    MailTarget::User => "the user".to_owned(),
                    MailTarget::Handler(h) => format!("handler {h}"),
                };
                self.log_step(
                    Record::new(
                        EventKind::MailRefused,
                        Some(handler),
                        format!("mail to {to_text} refused: {e}"),
                    )
                    .agent(Some(agent))
                    .data(
                        serde_json::json!({ "to": to, "subject": subject, "error": e.to_string() }),
                    ),
                );
            }
            return Err(e);
        }
        if let MailBody::Text { text, .. } = body {
            self.blobs.put(text.as_bytes())?;
        }
        self.write(|op| {
            let caller = precheck(op.tx)?;
            if let MailTarget::Handler(t) = to {
                crate::tree::handoffs::hand_off(op, &self.cfg.limits, &caller, t, "send mail")?;
            }
            let file = match body {
                MailBody::Text { text, .. } => {
                    let id = FileId::new_random();
                    let desc = format!(
                        "Message from {} to {}: {subject}",
                        party(caller.party()),
                        party(to)
                    );
                    create_document(op, &caller, id, FileKind::Message, &desc, text.as_bytes())?;
                    id
                }
                MailBody::File { file, .. } => *file,
            };
            let subject = if subject.is_empty() {
                op.tx
                    .file(file)?
                    .map(|f| clip(&f.description))
                    .unwrap_or_default()
            } else {
                subject.clone()
            };
            let id = enqueue(
                op,
                &caller,
                Envelope {
                    id: MessageId::new_random(),
                    to,
                    file,
                    subject,
                    deliver_at,
                    in_reply_to,
                    notice: false,
                },
            )?;
            if let (Caller::User, MailTarget::Handler(h)) = (&caller, to) {
                grant_reply_to_user(op, h)?;
            }
            then(op, &caller, id)?;
            Ok(id)
        })
    }

    /// The first page of the caller's delivered, unacknowledged messages,
    /// with the bodies that fit the page's budget (see `mail_inbox_page`).
    pub fn mail_inbox(&self, who: Principal, limit: Option<usize>) -> Result<Vec<MessageView>> {
        Ok(self.mail_inbox_page(who, None, limit)?.items)
    }

    /// Acknowledge processed messages (only their recipient may). When the
    /// inbox becomes empty, the handler's Process Inbox outcome completes.
    pub fn mail_ack(&self, who: Principal, ids: &[MessageId]) -> Result<usize> {
        if ids.is_empty() || ids.len() > 1000 {
            return Err(ServiceError::invalid(
                "failed to acknowledge: give between 1 and 1000 message ids",
            ));
        }
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let me = caller.party();
            let mut n = 0;
            for id in ids {
                let m = op
                    .tx
                    .message(*id)?
                    .filter(|m| m.to == me && m.delivered_at.is_some());
                let Some(m) = m else {
                    return Err(ServiceError::not_found("message", id));
                };
                if m.acked_at.is_none() {
                    op.tx.set_acked(m.id, op.now)?;
                    op.record(
                        Record::new(
                            EventKind::MailAcked,
                            caller.handler(),
                            format!("acknowledged mail {:?}", m.subject),
                        )
                        .agent(caller.agent())
                        .data(serde_json::json!({ "message": m.id, "subject": m.subject })),
                    );
                    n += 1;
                }
            }
            if let Caller::Handler { row, .. } = &caller
                && op.tx.inbox_count(me)? == 0
                && let Some(pi) = op.tx.open_process_inbox(row.id)?
                && let Some(o) = op.tx.outcome(pi)?
            {
                let a = Author {
                    handler: Some(row.id),
                    agent: caller.agent(),
                };
                finish_outcome(
                    op,
                    o,
                    StatusChange::Complete,
                    "inbox processed: every message acknowledged",
                    a,
                )?;
            }
            Ok(n)
        })
    }

    /// Messages the caller sent, newest first, with delivery and
    /// acknowledgement times.
    pub fn mail_sent(&self, who: Principal, limit: Option<usize>) -> Result<Vec<MessageView>> {
        Ok(self.mail_sent_page(who, None, limit)?.items)
    }

    /// One message's envelope, for its sender or recipient.
    pub fn mail_status(&self, who: Principal, id: MessageId) -> Result<MessageView> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let me = caller.party();
            let m = tx
                .message(id)?
                .filter(|m| m.from == me || (m.to == me && m.delivered_at.is_some()));
            m.map(|m| view(m, None))
                .ok_or_else(|| ServiceError::not_found("message", id))
        })
    }
}

/// Whether `caller` may write to `to`; the same refusal for a target that
/// does not exist and one that may not be written to.
pub(crate) fn check_may_send(tx: &mut dyn Tx, caller: &Caller, to: MailTarget) -> Result<()> {
    let refuse = || {
        ServiceError::denied(format!(
            "failed to send mail to {}: you may message only your boss, your direct underlings, yourself and (in an organisation) the agents a connection lets you reach",
            party(to)
        ))
    };
    match (caller, to) {
        (Caller::User, MailTarget::User) => Err(ServiceError::invalid(
            "failed to send mail: the user cannot write to the user's own inbox",
        )),
        (Caller::User, MailTarget::Handler(h)) => match tx.handler(h)? {
            Some(row) if row.status == HandlerStatus::Active => Ok(()),
            Some(_) => Err(ServiceError::invalid(format!(
                "failed to send mail to handler {h}: it is deactivated; delegate its outcome again to bring it back"
            ))),
            None => Err(ServiceError::not_found("handler", h)),
        },
        (Caller::Handler { row, .. }, MailTarget::Handler(h)) if h == row.id => Ok(()),
        (Caller::Handler { row, .. }, target) => {
            if tx
                .capabilities_on(row.id, &Resource::Mail(target))?
                .is_empty()
            {
                return Err(refuse());
            }
            if let MailTarget::Handler(h) = target
                && tx
                    .handler(h)?
                    .is_none_or(|r| r.status != HandlerStatus::Active)
            {
                return Err(refuse());
            }
            Ok(())
        }
    }
}

/// Whether `caller` may answer message `id`: only one delivered to it
/// (not dropped). The same refusal whether the message does not exist or
/// is someone else's, so the check reveals nothing.
fn check_reply_to(tx: &mut dyn Tx, caller: &Caller, id: MessageId) -> Result<()> {
    let me = caller.party();
    let received = tx
        .message(id)?
        .is_some_and(|m| m.to == me && m.delivered_at.is_some() && m.dropped_reason.is_none());
    if !received {
        return Err(ServiceError::invalid(format!(
            "failed to send mail in reply to message {id}: no such message was delivered to you; \
             give in_reply_to the id of a message from your inbox"
        )));
    }
    Ok(())
}

/// A message about to be stored: its id is chosen by the sender so that
/// a body may name it (`orgs/messages.rs`).
pub(crate) struct Envelope {
    pub id: MessageId,
    pub to: MailTarget,
    pub file: FileId,
    pub subject: String,
    pub deliver_at: Option<Timestamp>,
    pub in_reply_to: Option<MessageId>,
    /// Written by Agency itself (shown as from "agency").
    pub notice: bool,
}

/// Store the envelope; deliver at once unless it is deferred to the future.
pub(crate) fn enqueue(op: &mut Op<'_>, caller: &Caller, e: Envelope) -> Result<MessageId> {
    let m = MessageRow {
        id: e.id,
        file: e.file,
        from: caller.party(),
        to: e.to,
        subject: e.subject,
        created_at: op.now,
        deliver_at: e.deliver_at.unwrap_or(op.now).max(op.now),
        delivered_at: None,
        acked_at: None,
        dropped_reason: None,
        in_reply_to: e.in_reply_to,
        notice: e.notice,
    };
    op.tx.insert_message(&m)?;
    let (from, to) = (
        crate::event_log::party(op.tx, m.from)?,
        crate::event_log::party(op.tx, m.to)?,
    );
    let area = match (m.from, m.to) {
        (MailTarget::Handler(h), _) | (MailTarget::User, MailTarget::Handler(h)) => Some(h),
        (MailTarget::User, MailTarget::User) => None,
    };
    op.record(
        Record::new(
            EventKind::MailSent,
            area,
            format!("mail from {from} to {to}: {:?}", m.subject),
        )
        .agent(caller.agent())
        .data(serde_json::json!({
            "message": m.id,
            "from": m.from,
            "to": m.to,
            "subject": m.subject,
            "deliver_at": m.deliver_at,
            "notice": m.notice,
            "in_reply_to": m.in_reply_to,
        })),
    );
    if m.deliver_at <= op.now {
        deliver(op, &m)?;
    } else {
        op.emit(Event::MailScheduled {
            message: m.id,
            deliver_at: m.deliver_at,
        });
    }
    Ok(m.id)
}

/// Post one notice of an operation's outbox (`service/outbox.rs`): the
/// body is a new message file, sent without the tree check because the
/// operation that queued it already made its own. Sent in the name of
/// `from` (whose rights the grant of its body follows, and who a reply
/// would reach). Agency's own notices (a stall, an approval request or
/// decision, a budget reached, a quarantined MCP tool, an undelivered
/// message, changed MCP servers) are marked, so that every listing shows
/// them as from "agency", not as the handler's own word; system mail a
/// caller's action causes (a completion request, a boss's change told to
/// its underling) is not.
pub(crate) fn post(op: &mut Op<'_>, n: Notice) -> Result<()> {
    composed(op, &n.from, n.to, &n.subject, &n.body, n.from_agency)?;
    Ok(())
}

fn composed(
    op: &mut Op<'_>,
    caller: &Caller,
    to: MailTarget,
    subject: &str,
    body: &str,
    notice: bool,
) -> Result<MessageId> {
    let id = FileId::new_random();
    let desc = format!(
        "Message from {} to {}: {}",
        if notice {
            "agency".to_owned()
        } else {
            party(caller.party())
        },
        party(to),
        clip(subject)
    );
    create_document(op, caller, id, FileKind::Message, &desc, body.as_bytes())?;
    enqueue(
        op,
        caller,
        Envelope {
            id: MessageId::new_random(),
            to,
            file: id,
            subject: clip(subject),
            deliver_at: None,
            in_reply_to: None,
            notice,
        },
    )
}

fn deliver(op: &mut Op<'_>, m: &MessageRow) -> Result<()> {
    // Senders were checked before the message was stored (and deferred
    // mail again when due), so a refusal here is a broken invariant, and
    // failing the transaction leaves the store as it was.
    let grant = attach_grant(op.tx, m.from, m.to, m.file, op.now)?.map_err(|r| {
        ServiceError::denied(format!(
            "failed to deliver message {} to {}: {r}",
            m.id,
            party(m.to)
        ))
    })?;
    op.tx.set_delivered(m.id, op.now)?;
    if let MailTarget::Handler(h) = m.to {
        if let Some(cap) = grant {
            let cap_id = op.tx.insert_capability(&cap)?;
            op.emit(Event::CapabilityGranted {
                capability: cap_id,
                holder: h,
                resource: cap.resource,
            });
        }
        if let Some(row) = op.tx.handler(h)?
            && row.status == HandlerStatus::Active
        {
            // New mail is new information: a stalled handler may run again.
            op.tx.clear_stalled(h)?;
            ensure_process_inbox(op, h)?;
        }
    }
    if m.to == MailTarget::User && m.in_reply_to.is_some() {
        org_reply::record_reply(op, m)?;
    }
    op.emit(Event::MessageDelivered {
        message: m.id,
        to: m.to,
    });
    Ok(())
}

/// The Read capability delivering `file` from `from` to `to` gives the
/// recipient, `Ok(None)` when it needs none (it can read
/// the file already, or it is the user), or why the sender may not pass the
/// file on. From a handler the capability is derived from the sender's own,
/// so revoking or finishing that source revokes it; from the user it is
/// derived from nothing, the user being the source of every capability.
fn attach_grant(
    tx: &mut dyn Tx,
    from: MailTarget,
    to: MailTarget,
    file: FileId,
    now: Timestamp,
) -> Result<std::result::Result<Option<NewCapability>, GrantRefusal>> {
    let MailTarget::Handler(h) = to else {
        return Ok(Ok(None));
    };
    let row = tx
        .handler(h)?
        .ok_or_else(|| ServiceError::not_found("handler", h))?;
    let f = tx
        .file(file)?
        .ok_or_else(|| ServiceError::not_found("KB file", file))?;
    let recipient = Caller::Handler {
        row,
        agent: agency_core::AgentId(uuid::Uuid::nil()),
    };
    let reads = kb_level(tx, &recipient, &f)?.is_some_and(|l| l >= Level::Read);
    let resource = Resource::Kb(file);
    let (derived_from, granted_by) = match from {
        MailTarget::User if reads => return Ok(Ok(None)),
        MailTarget::User => (None, None),
        MailTarget::Handler(s) => {
            let held: Vec<HeldCap> = tx
                .capabilities_on(s, &resource)?
                .iter()
                .map(|c| HeldCap {
                    id: c.id,
                    level: c.level,
                    delegatable: c.delegatable,
                    scope: c.scope,
                })
                .collect();
            match attach_access(&resource, reads, &held) {
                Ok(AttachAccess::AlreadyReadable) => return Ok(Ok(None)),
                Ok(AttachAccess::Derive(src)) => (Some(src.id), Some(s)),
                Err(r) => return Ok(Err(r)),
            }
        }
    };
    Ok(Ok(Some(NewCapability {
        holder: h,
        resource,
        level: Level::Read,
        delegatable: false,
        scope: Some(h.root()),
        derived_from,
        granted_by,
        origin: CapOrigin::Mail,
        created_at: now,
    })))
}

/// Why a deferred message that fell due may not be delivered any more, if
/// so: its sender was retired, lost the right to write to the recipient,
/// or may no longer pass the attached file on.
fn undeliverable(tx: &mut dyn Tx, m: &MessageRow) -> Result<Option<String>> {
    if let MailTarget::Handler(s) = m.from {
        let active = tx
            .handler(s)?
            .is_some_and(|r| r.status == HandlerStatus::Active);
        if !active {
            return Ok(Some(format!(
                "its sender, handler {s}, was deactivated before it fell due"
            )));
        }
        if m.to != m.from && tx.capabilities_on(s, &Resource::Mail(m.to))?.is_empty() {
            return Ok(Some(format!(
                "handler {s} may no longer write to {}",
                party(m.to)
            )));
        }
    }
    Ok(attach_grant(tx, m.from, m.to, m.file, Timestamp(0))?
        .err()
        .map(|r| {
            format!(
                "{r}, so {} could not be given the attached file",
                party(m.to)
            )
        }))
}

/// Close a deferred message that failed its delivery check: it leaves the
/// queue without reaching any inbox (closed as dropped, with the reason,
/// granting nothing; its receipt says so), and the sender, if still
/// active, is told in its audit log and by a notice to itself.
fn drop_undeliverable(op: &mut Op<'_>, m: &MessageRow, why: &str) -> Result<()> {
    op.tx.set_dropped(m.id, op.now, why)?;
    let sender = match m.from {
        MailTarget::Handler(h) => Some(h),
        MailTarget::User => None,
    };
    op.record(
        Record::new(
            EventKind::MailDropped,
            sender,
            format!("deferred mail {:?} not delivered: {why}", m.subject),
        )
        .data(serde_json::json!({ "message": m.id, "to": m.to, "reason": why })),
    );
    let MailTarget::Handler(s) = m.from else {
        return Ok(());
    };
    let note = format!(
        "deferred message {} to {} was not delivered: {why}",
        m.id,
        party(m.to)
    );
    log(op, s, None, note.clone())?;
    render_audit_log_file(op, s, Author::default())?;
    if let Some(row) = op.tx.handler(s)?
        && row.status == HandlerStatus::Active
    {
        let sender = Caller::Handler {
            row,
            agent: agency_core::AgentId(uuid::Uuid::nil()),
        };
        let subject = format!("Not delivered: {}", m.subject);
        op.notice(&sender, MailTarget::Handler(s), &subject, &note);
    }
    Ok(())
}

/// After the user writes to a handler directly, that handler may answer.
pub(crate) fn grant_reply_to_user(op: &mut Op<'_>, h: HandlerId) -> Result<()> {
    if op
        .tx
        .capabilities_on(h, &Resource::Mail(MailTarget::User))?
        .is_empty()
    {
        system_cap(op, h, Resource::Mail(MailTarget::User), Some(h.root()))?;
    }
    Ok(())
}

pub(crate) fn view(m: MessageRow, body: Option<String>) -> MessageView {
    MessageView {
        id: m.id,
        from: m.from,
        to: m.to,
        subject: m.subject,
        file: m.file,
        created_at: m.created_at,
        deliver_at: m.deliver_at,
        // A dropped message was never delivered: its closing times are
        // shown as `dropped_at`, not as a delivery.
        delivered_at: m.delivered_at.filter(|_| m.dropped_reason.is_none()),
        acked_at: m.acked_at.filter(|_| m.dropped_reason.is_none()),
        dropped_at: m.delivered_at.filter(|_| m.dropped_reason.is_some()),
        dropped_reason: m.dropped_reason,
        body,
        body_size: None,
        body_truncated: false,
        in_reply_to: m.in_reply_to,
        from_agency: m.notice,
    }
}

pub(crate) fn party(p: MailTarget) -> String {
    match p {
        MailTarget::User => "the user".to_owned(),
        MailTarget::Handler(h) => format!("handler {h}"),
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned()
}

pub(crate) fn clip(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let mut out: String = one_line.chars().take(SUBJECT_CHARS).collect();
    if one_line.chars().count() > SUBJECT_CHARS {
        out.push('…');
    }
    out
}

impl System {
    /// Daemon: deliver every deferred message due at `now`, including those
    /// that fell due while nothing was running. Returns what was delivered.
    pub fn deliver_due(&self, now: Timestamp) -> Result<Vec<MessageId>> {
        let mut out = Vec::new();
        loop {
            let batch = self.write(|op| {
                let due = op.tx.due_messages(now, 256)?;
                let mut ids = Vec::with_capacity(due.len());
                for m in due {
                    // Checked again now, not only when it was sent: the
                    // sender may have lost the right to write to the
                    // recipient or to pass the attached file on.
                    if let Some(why) = undeliverable(op.tx, &m)? {
                        drop_undeliverable(op, &m, &why)?;
                        continue;
                    }
                    deliver(op, &m)?;
                    ids.push(m.id);
                }
                Ok(ids)
            })?;
            let done = batch.len() < 256;
            out.extend(batch);
            if done {
                return Ok(out);
            }
        }
    }

    /// Daemon: the subjects of a handler's unacknowledged mail, oldest
    /// first, for the first message an agent gets (no body is read).
    pub fn inbox_subjects(&self, handler: HandlerId, limit: usize) -> Result<Vec<String>> {
        self.read(|tx| {
            Ok(tx
                .inbox(MailTarget::Handler(handler), limit)?
                .into_iter()
                .map(|m| m.subject)
                .collect())
        })
    }

    /// Daemon: when the next deferred message falls due.
    pub fn next_due(&self) -> Result<Option<Timestamp>> {
        self.read(|tx| Ok(tx.next_due()?))
    }
}
