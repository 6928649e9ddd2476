//! The outbox: mail an operation sends from Agency itself — a budget
//! reached, an approval asked for or decided, a handler stalled, an
//! outcome changed by a boss — is queued here while the operation runs
//! and posted by mail (`mail/`) once the operation's own work is done,
//! still inside its transaction. A failure anywhere rolls the operation
//! and its mail back together; and the modules that notify import
//! nothing of mail, which stays above them.

use agency_core::MailTarget;

use super::{Caller, Op};
use crate::Result;

/// One message queued by an operation.
#[derive(Debug, Clone)]
pub(crate) struct Notice {
    /// In whose name it is sent (the handler concerned, or the user).
    pub from: Caller,
    pub to: MailTarget,
    pub subject: String,
    pub body: String,
    /// Marked as from "agency" (not the sender's own word) in every
    /// listing; `false` for system mail a handler's own action causes.
    pub from_agency: bool,
}

/// How queued notices are posted: mail's, wired in by the builder (the
/// service cannot name mail, which depends on it).
pub(crate) type Post = fn(&mut Op<'_>, Notice) -> Result<()>;

impl Op<'_> {
    /// Queue a notice from "agency" to `to`, in `from`'s name.
    pub fn notice(&mut self, from: &Caller, to: MailTarget, subject: &str, body: &str) {
        self.queue(from, to, subject, body, true);
    }

    /// Queue system mail to `to` in `from`'s name, as its own words.
    pub fn system_mail(&mut self, from: &Caller, to: MailTarget, subject: &str, body: &str) {
        self.queue(from, to, subject, body, false);
    }

    fn queue(&mut self, from: &Caller, to: MailTarget, subject: &str, body: &str, agency: bool) {
        self.outbox.push(Notice {
            from: from.clone(),
            to,
            subject: subject.to_owned(),
            body: body.to_owned(),
            from_agency: agency,
        });
    }

    /// Post every queued notice, in the order queued (posting one may
    /// queue more; they follow).
    pub(super) fn flush_outbox(&mut self, post: Post) -> Result<()> {
        while !self.outbox.is_empty() {
            for n in std::mem::take(&mut self.outbox) {
                post(self, n)?;
            }
        }
        Ok(())
    }
}
