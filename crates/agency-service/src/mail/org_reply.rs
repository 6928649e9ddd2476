//! Replies to an agency's API: mail an agency's executive handler sends
//! the user in answer to a message that came from outside (`orgs/messages.rs`)
//! is that message's answer, recorded as it is delivered. Part of
//! delivery, so that mail depends on no organisation module.

use agency_core::{HandlerId, MailTarget};
use agency_store::{MessageRow, OrgMessageStatus, Tx};

use crate::Result;
use crate::error::ServiceError;
use crate::events::Event;
use crate::service::Op;

/// The handler an agency's messages go to: the executive agent's handler
/// of the organisation `agency up` stood up under that name, while it is
/// up. The one place that knows where agencies are recorded.
pub(crate) fn executive_of(tx: &mut dyn Tx, agency: &str) -> Result<Option<HandlerId>> {
    Ok(tx
        .org(agency)?
        .filter(|o| o.retired_at.is_none())
        .map(|o| o.executive))
}

/// Mail `m` to the user was just delivered and answers `m.in_reply_to`:
/// if that is the mail of a pending message from outside and `m` comes
/// from that agency's executive handler, it is the message's reply. The
/// sender received the message it answers (checked when it was sent);
/// any other handler's answer, and every answer after the first, is
/// ordinary mail to the user.
pub(crate) fn record_reply(op: &mut Op<'_>, m: &MessageRow) -> Result<()> {
    let (Some(answers), MailTarget::Handler(from)) = (m.in_reply_to, m.from) else {
        return Ok(());
    };
    let Some(om) = op.tx.org_message_by_mail(answers)? else {
        return Ok(());
    };
    if om.status != OrgMessageStatus::Pending || executive_of(op.tx, &om.agency)? != Some(from) {
        return Ok(());
    }
    let text = message_text(op, m)?;
    if op.tx.set_org_message_answered(om.id, &text, m.id, op.now)? {
        // Its reader is the outside caller: `agency conversations` shows
        // it, the user's inbox (unacknowledged mail) does not fill up.
        op.tx.set_acked(m.id, op.now)?;
        op.emit(Event::OrgMessageAnswered {
            message: om.id,
            agency: om.agency,
        });
    }
    Ok(())
}

/// The text of a message's body (its KB file's latest version).
fn message_text(op: &mut Op<'_>, m: &MessageRow) -> Result<String> {
    let missing = || ServiceError::not_found("KB file", m.file);
    let f = op.tx.file(m.file)?.ok_or_else(missing)?;
    let v = op
        .tx
        .version(m.file, f.latest_version)?
        .ok_or_else(missing)?;
    let bytes = op.blobs.get(&v.hash)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
