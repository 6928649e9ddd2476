//! Mail: scheduling, inboxes and outboxes, pages, quotas and retention.

use agency_core::access::FileKind;
use agency_core::{MailTarget, Timestamp};

use super::New;
use super::fixtures::*;
use crate::*;

pub fn mail_scheduling_inbox_and_outbox(new: &New) {
    let (_d, store) = new();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    let to_h = MailTarget::Handler(h);
    let msg = |n: u128, deliver_at, created_at| MessageRow {
        id: mid(n),
        file: fid(DOC + n),
        from: MailTarget::User,
        to: to_h,
        subject: format!("message {n}"),
        created_at: Timestamp(created_at),
        deliver_at: Timestamp(deliver_at),
        delivered_at: None,
        acked_at: None,
        dropped_reason: None,
        in_reply_to: None,
        notice: false,
    };
    wr(&store, |tx| {
        let reply = MessageRow {
            from: to_h,
            to: MailTarget::User,
            in_reply_to: Some(mid(4)),
            notice: true,
            ..msg(5, 0, 9)
        };
        for m in [
            msg(4, 100, 1),
            msg(2, 50, 2),
            msg(3, 200, 3),
            msg(1, 100, 4),
            reply,
        ] {
            tx.insert_file(&file(m.file, FileKind::Message, "body", None))?;
            tx.insert_message(&m)?;
        }
        Ok(())
    });
    let mids = |rows: Vec<MessageRow>| rows.into_iter().map(|m| m.id).collect::<Vec<_>>();
    rd(&store, |tx| {
        assert_eq!(
            mids(tx.due_messages(Timestamp(150), 10)?),
            [5, 2, 1, 4].map(mid),
            "by (deliver_at, id)"
        );
        assert_eq!(mids(tx.due_messages(Timestamp(150), 2)?), [5, 2].map(mid));
        assert_eq!(tx.due_messages(Timestamp(-1), 10)?, []);
        assert_eq!(tx.next_due()?, Some(Timestamp(0)));
        assert_eq!(tx.inbox_count(to_h)?, 0, "nothing delivered yet");
        Ok(())
    });
    wr(&store, |tx| {
        for (n, at) in [(5, 1), (1, 160), (2, 160), (4, 155)] {
            tx.set_delivered(mid(n), Timestamp(at))?;
        }
        Ok(())
    });
    rd(&store, |tx| {
        assert_eq!(tx.next_due()?, Some(Timestamp(200)));
        assert_eq!(tx.due_messages(Timestamp(150), 10)?, []);
        assert_eq!(
            mids(tx.inbox(to_h, 10)?),
            [4, 1, 2].map(mid),
            "by (delivered_at, id)"
        );
        assert_eq!(mids(tx.inbox(MailTarget::User, 10)?), [mid(5)]);
        // The reply keeps the message it answers; others answer none.
        assert_eq!(tx.message(mid(5))?.unwrap().in_reply_to, Some(mid(4)));
        // A notice keeps its mark (migration 23); other mail has none.
        assert!(tx.message(mid(5))?.unwrap().notice);
        assert!(!tx.message(mid(4))?.unwrap().notice);
        assert_eq!(tx.message(mid(4))?.unwrap().in_reply_to, None);
        assert_eq!(
            mids(tx.outbox(MailTarget::User, 10)?),
            [1, 3, 2, 4].map(mid),
            "newest first"
        );
        assert_eq!(mids(tx.outbox(to_h, 10)?), [mid(5)]);
        Ok(())
    });
    wr(&store, |tx| tx.set_acked(mid(1), Timestamp(170)));
    rd(&store, |tx| {
        assert_eq!(tx.inbox_count(to_h)?, 2);
        assert_eq!(mids(tx.inbox(to_h, 1)?), [mid(4)]);
        let acked = tx.message(mid(1))?.unwrap();
        assert_eq!(
            (acked.delivered_at, acked.acked_at),
            (Some(Timestamp(160)), Some(Timestamp(170)))
        );
        assert_eq!(tx.message(mid(9))?, None);
        Ok(())
    });
    let err = wr_err(&store, |tx| tx.set_acked(mid(9), Timestamp(1)));
    assert_eq!(
        err.to_string(),
        format!(
            "failed to mark message {} acknowledged: no such row",
            mid(9)
        )
    );
}

/// A message `n` from `from` to `to`, its body file `DOC + n`, created at
/// `n` and due at once.
fn message(n: u128, from: MailTarget, to: MailTarget) -> MessageRow {
    MessageRow {
        id: mid(n),
        file: fid(DOC + n),
        from,
        to,
        subject: format!("message {n}"),
        created_at: Timestamp(n as i64),
        deliver_at: Timestamp(n as i64),
        delivered_at: None,
        acked_at: None,
        dropped_reason: None,
        in_reply_to: None,
        notice: false,
    }
}

pub fn mail_pages_quotas_and_retention(new: &New) {
    let (_d, store) = new();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    let (user, to_h) = (MailTarget::User, MailTarget::Handler(h));
    wr(&store, |tx| {
        for n in 1..=6 {
            let m = message(n, user, to_h);
            tx.insert_file(&file(m.file, FileKind::Message, "body", None))?;
            tx.insert_message(&m)?;
        }
        // 1-5 delivered in order; 1 and 2 acknowledged at 20 and 30.
        for n in 1..=5 {
            tx.set_delivered(mid(n), Timestamp(10 + n as i64))?;
        }
        tx.set_acked(mid(1), Timestamp(20))?;
        tx.set_acked(mid(2), Timestamp(30))
    });
    let mids = |rows: Vec<MessageRow>| rows.into_iter().map(|m| m.id).collect::<Vec<_>>();
    rd(&store, |tx| {
        // The inbox (delivered, not acknowledged) in pages.
        assert_eq!(mids(tx.inbox_after(to_h, None, 2)?), [3, 4].map(mid));
        assert_eq!(mids(tx.inbox_after(to_h, Some(mid(4)), 2)?), [mid(5)]);
        assert!(tx.inbox_after(to_h, Some(mid(5)), 2)?.is_empty());
        // The outbox, newest first, in pages.
        assert_eq!(
            mids(tx.outbox_before(user, None, 4)?),
            [6, 5, 4, 3].map(mid)
        );
        assert_eq!(
            mids(tx.outbox_before(user, Some(mid(3)), 4)?),
            [2, 1].map(mid)
        );
        // Undelivered mail of a sender, counted up to the limit.
        assert_eq!(tx.pending_mail_from(user, 10)?, 1);
        assert_eq!(tx.pending_mail_from(to_h, 10)?, 0);
        // Acknowledged before 30: only 1; before 31 both, in pages.
        assert_eq!(
            mids(tx.acked_messages_before(Timestamp(30), None, 10)?),
            [mid(1)]
        );
        let first = tx.acked_messages_before(Timestamp(31), None, 1)?;
        assert_eq!(mids(first.clone()), [mid(1)]);
        let cursor = (first[0].acked_at.unwrap(), first[0].id);
        assert_eq!(
            mids(tx.acked_messages_before(Timestamp(31), Some(cursor), 10)?),
            [mid(2)]
        );
        // A body in unacknowledged mail, or acknowledged at or after the
        // horizon, is still needed.
        assert!(tx.file_in_unexpired_mail(fid(DOC + 3), Timestamp(100))?);
        assert!(tx.file_in_unexpired_mail(fid(DOC + 2), Timestamp(30))?);
        assert!(!tx.file_in_unexpired_mail(fid(DOC + 2), Timestamp(31))?);
        Ok(())
    });
    wr(&store, |tx| {
        tx.delete_message(mid(1))?;
        assert_eq!(tx.delete_messages_carrying(fid(DOC + 2))?, 1);
        assert_eq!(tx.delete_messages_carrying(fid(DOC + 2))?, 0);
        Ok(())
    });
    rd(&store, |tx| {
        assert_eq!(tx.message(mid(1))?, None);
        assert_eq!(tx.message(mid(2))?, None);
        assert!(tx.message(mid(3))?.is_some());
        Ok(())
    });
    let err = wr_err(&store, |tx| tx.delete_message(mid(1)));
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
}
