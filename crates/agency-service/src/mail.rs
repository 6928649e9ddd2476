//! Mail: a message is a KB file plus an envelope. Sending is checked against
//! the handler tree (boss <-> direct underling, user <-> root, self, and the
//! user's direct intervention); deferred messages wait durably in the store
//! until `deliver_due`. Delivery grants the recipient Read on the body and
//! makes sure it has an open Process Inbox outcome; acknowledging the last
//! message completes that outcome.

use agency_core::access::FileKind;
use agency_core::{
    FileId, HandlerId, Level, MailTarget, MessageId, OutcomeId, OutcomeStatus, Principal, Resource,
    StatusChange, Timestamp,
};
use agency_store::{CapOrigin, HandlerStatus, MessageRow, NewCapability, OutcomeRow, Tx};

use crate::Result;
use crate::access::{file_at_level, kb_level};
use crate::error::ServiceError;
use crate::events::Event;
use crate::handlers::system_cap;
use crate::kb::create_document;
use crate::outcomes::{finish_outcome, insert_outcome};
use crate::render::{Author, SYSTEM_ACTION};
use crate::service::{Caller, Op, Service, authenticate};
use crate::views::{MailBody, MessageView};

/// Deferred mail may be scheduled at most this far ahead (ten years).
const MAX_DEFER_MS: i64 = 10 * 366 * 24 * 3600 * 1000;
const SUBJECT_CHARS: usize = 120;

impl Service {
    /// Send a message now.
    pub fn mail_send(&self, who: Principal, to: MailTarget, body: &MailBody) -> Result<MessageId> {
        self.send(who, to, body, None)
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
        let now = self.now();
        if deliver_at.0 > now.0.saturating_add(MAX_DEFER_MS) {
            return Err(ServiceError::invalid(format!(
                "failed to schedule mail for {deliver_at}: that is more than ten years ahead"
            )));
        }
        self.send(who, to, body, Some(deliver_at))
    }

    fn send(
        &self,
        who: Principal,
        to: MailTarget,
        body: &MailBody,
        deliver_at: Option<Timestamp>,
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
        let precheck = |tx: &mut dyn Tx| -> Result<Caller> {
            let caller = authenticate(tx, who)?;
            check_may_send(tx, &caller, to)?;
            // Only mail that will wait counts against the deferred quota.
            if let (Some(h), Some(at)) = (caller.handler(), deliver_at)
                && at > self.now()
            {
                crate::quotas::check_pending_deferred(tx, &self.cfg.limits, h)?;
            }
            if let MailBody::File { file, .. } = body {
                file_at_level(tx, &caller, *file, Level::Read, "attach")?;
            }
            Ok(caller)
        };
        self.read(|tx| precheck(tx).map(drop))?;
        if let MailBody::Text { text, .. } = body {
            self.blobs.put(text.as_bytes())?;
        }
        self.write(|op| {
            let caller = precheck(op.tx)?;
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
            let id = enqueue(op, &caller, to, file, subject, deliver_at)?;
            if let (Caller::User, MailTarget::Handler(h)) = (&caller, to) {
                grant_reply_to_user(op, h)?;
            }
            Ok(id)
        })
    }

    /// Daemon: deliver every deferred message due at `now`, including those
    /// that fell due while nothing was running. Returns what was delivered.
    pub fn deliver_due(&self, now: Timestamp) -> Result<Vec<MessageId>> {
        let mut out = Vec::new();
        loop {
            let batch = self.write(|op| {
                let due = op.tx.due_messages(now, 256)?;
                let mut ids = Vec::with_capacity(due.len());
                for m in due {
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

    /// Delivered, unacknowledged messages to the caller, with their bodies.
    pub fn mail_inbox(&self, who: Principal, limit: Option<usize>) -> Result<Vec<MessageView>> {
        let limit = self.cfg.limits.page(limit);
        let rows = self.read(|tx| {
            let caller = authenticate(tx, who)?;
            Ok(tx.inbox(caller.party(), limit)?)
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for m in rows {
            // Reading the body goes through the KB, so it is access-checked
            // and lands in the body file's audit log like any read.
            let body = self.kb_read(who, m.file).ok().map(|c| c.text());
            out.push(view(m, body));
        }
        Ok(out)
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
        let limit = self.cfg.limits.page(limit);
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            Ok(tx
                .outbox(caller.party(), limit)?
                .into_iter()
                .map(|m| view(m, None))
                .collect())
        })
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
fn check_may_send(tx: &mut dyn Tx, caller: &Caller, to: MailTarget) -> Result<()> {
    let refuse = || {
        ServiceError::denied(format!(
            "failed to send mail to {}: you may message only your boss, your direct underlings and yourself",
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

/// Store the envelope; deliver at once unless it is deferred to the future.
fn enqueue(
    op: &mut Op<'_>,
    caller: &Caller,
    to: MailTarget,
    file: FileId,
    subject: String,
    deliver_at: Option<Timestamp>,
) -> Result<MessageId> {
    let m = MessageRow {
        id: MessageId::new_random(),
        file,
        from: caller.party(),
        to,
        subject,
        created_at: op.now,
        deliver_at: deliver_at.unwrap_or(op.now).max(op.now),
        delivered_at: None,
        acked_at: None,
    };
    op.tx.insert_message(&m)?;
    if m.deliver_at <= op.now {
        deliver(op, &m)?;
    } else {
        op.events.push(Event::MailScheduled {
            message: m.id,
            deliver_at: m.deliver_at,
        });
    }
    Ok(m.id)
}

/// Mail composed by Agency on a caller's behalf (completion requests,
/// notices): the body is a new message file, sent without the tree check
/// because the operation that calls this already made its own.
pub(crate) fn system_mail(
    op: &mut Op<'_>,
    caller: &Caller,
    to: MailTarget,
    subject: &str,
    body: &str,
) -> Result<MessageId> {
    let id = FileId::new_random();
    let desc = format!(
        "Message from {} to {}: {}",
        party(caller.party()),
        party(to),
        clip(subject)
    );
    create_document(op, caller, id, FileKind::Message, &desc, body.as_bytes())?;
    enqueue(op, caller, to, id, clip(subject), None)
}

fn deliver(op: &mut Op<'_>, m: &MessageRow) -> Result<()> {
    op.tx.set_delivered(m.id, op.now)?;
    if let MailTarget::Handler(h) = m.to {
        // The recipient gains Read on the body unless it can already read it.
        let holder = op.tx.handler(h)?;
        if let (Some(row), Some(file)) = (holder, op.tx.file(m.file)?) {
            let caller = Caller::Handler {
                row: row.clone(),
                agent: agency_core::AgentId(uuid::Uuid::nil()),
            };
            if kb_level(op.tx, &caller, &file)?.is_none_or(|l| l < Level::Read) {
                let cap = NewCapability {
                    holder: h,
                    resource: Resource::Kb(m.file),
                    level: Level::Read,
                    delegatable: false,
                    scope: Some(h.root()),
                    // Not derived from the sender's capability: what was sent
                    // stays readable when the sender's outcome finishes.
                    derived_from: None,
                    granted_by: match m.from {
                        MailTarget::Handler(s) => Some(s),
                        MailTarget::User => None,
                    },
                    origin: CapOrigin::Mail,
                    created_at: op.now,
                };
                let cap_id = op.tx.insert_capability(&cap)?;
                op.events.push(Event::CapabilityGranted {
                    capability: cap_id,
                    holder: h,
                    resource: cap.resource,
                });
            }
            if row.status == HandlerStatus::Active {
                // New mail is new information: a stalled handler may run again.
                op.tx.clear_stalled(h)?;
                ensure_process_inbox(op, h)?;
            }
        }
    }
    op.events.push(Event::MessageDelivered {
        message: m.id,
        to: m.to,
    });
    Ok(())
}

/// Give the handler an open Process Inbox outcome (a child of its root) if
/// it has none, so that it has work and gets an agent.
pub(crate) fn ensure_process_inbox(op: &mut Op<'_>, h: HandlerId) -> Result<()> {
    if op.tx.open_process_inbox(h)?.is_some() {
        return Ok(());
    }
    let row = OutcomeRow {
        id: OutcomeId::new_random(),
        title: "Process inbox".to_owned(),
        description: "Read every message in the inbox, turn each into outcomes or state, and acknowledge it. Completes when the inbox is empty.".to_owned(),
        status: OutcomeStatus::Open,
        status_reason: None,
        priority: 100,
        perpetual: false,
        process_inbox: true,
        responsible: h,
        created_at: op.now,
        updated_at: op.now,
    };
    insert_outcome(
        op,
        &row,
        &[h.root()],
        Author::default(),
        &format!("{SYSTEM_ACTION}created"),
        "mail arrived".to_owned(),
    )
}

/// After the user writes to a handler directly, that handler may answer.
fn grant_reply_to_user(op: &mut Op<'_>, h: HandlerId) -> Result<()> {
    if op
        .tx
        .capabilities_on(h, &Resource::Mail(MailTarget::User))?
        .is_empty()
    {
        system_cap(op, h, Resource::Mail(MailTarget::User), Some(h.root()))?;
    }
    Ok(())
}

fn view(m: MessageRow, body: Option<String>) -> MessageView {
    MessageView {
        id: m.id,
        from: m.from,
        to: m.to,
        subject: m.subject,
        file: m.file,
        created_at: m.created_at,
        deliver_at: m.deliver_at,
        delivered_at: m.delivered_at,
        acked_at: m.acked_at,
        body,
    }
}

fn party(p: MailTarget) -> String {
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

fn clip(s: &str) -> String {
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
