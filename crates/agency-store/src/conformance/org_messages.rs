//! Talking to an agency from outside: API keys issued, found by hash and
//! revoked once; messages recorded, found, listed and answered once.

use agency_core::{ConversationId, OrgKeyId, OrgMessageId, Timestamp};
use uuid::Uuid;

use super::New;
use super::fixtures::*;
use crate::{OrgKeyRow, OrgMessageRow, OrgMessageStatus, StoreError};

pub fn keys_and_messages_from_outside(new: &New) {
    let (_d, store) = new();
    let key = |n: u128, agency: &str, at| OrgKeyRow {
        id: OrgKeyId(Uuid::from_u128(n)),
        agency: agency.to_owned(),
        key_hash: format!("hash {n}"),
        prefix: format!("ak_{n}"),
        created_at: Timestamp(at),
        revoked_at: None,
    };
    wr(&store, |tx| {
        tx.insert_org_key(&key(2, "acme", 5))?;
        tx.insert_org_key(&key(1, "acme", 6))?;
        tx.insert_org_key(&key(3, "beta", 1))
    });
    let err = wr_err(&store, |tx| tx.insert_org_key(&key(1, "acme", 7)));
    assert!(matches!(err, StoreError::Unique { .. }), "{err:?}");
    let k1 = key(1, "acme", 6).id;
    rd(&store, |tx| {
        assert_eq!(tx.org_key(k1)?, Some(key(1, "acme", 6)));
        assert_eq!(tx.org_key_by_hash("hash 3")?.unwrap().agency, "beta");
        assert_eq!(tx.org_key_by_hash("nope")?, None);
        let ids = |rows: Vec<OrgKeyRow>| rows.into_iter().map(|k| k.prefix).collect::<Vec<_>>();
        assert_eq!(
            ids(tx.org_keys(None)?),
            ["ak_2", "ak_1", "ak_3"],
            "by agency, then age"
        );
        assert_eq!(ids(tx.org_keys(Some("beta"))?), ["ak_3"]);
        Ok(())
    });
    assert!(wr(&store, |tx| tx.revoke_org_key(k1, Timestamp(8))));
    assert!(
        !wr(&store, |tx| tx.revoke_org_key(k1, Timestamp(9))),
        "already revoked"
    );
    assert_eq!(
        rd(&store, |tx| tx.org_key(k1)).unwrap().revoked_at,
        Some(Timestamp(8))
    );

    let (talk, other) = (
        ConversationId(Uuid::from_u128(50)),
        ConversationId(Uuid::from_u128(51)),
    );
    let msg = |n: u128, agency: &str, conversation| OrgMessageRow {
        id: OrgMessageId(Uuid::from_u128(n)),
        agency: agency.to_owned(),
        conversation,
        mail_message_id: mid(n),
        text: format!("question {n}"),
        reply_text: None,
        reply_message_id: None,
        status: OrgMessageStatus::Pending,
        created_at: Timestamp(n as i64),
        answered_at: None,
        key_id: Some(k1),
    };
    wr(&store, |tx| {
        tx.insert_org_message(&msg(1, "acme", talk))?;
        tx.insert_org_message(&msg(2, "beta", other))?;
        tx.insert_org_message(&msg(3, "acme", talk))?;
        tx.insert_org_message(&msg(4, "acme", talk))
    });
    let texts = |rows: Vec<OrgMessageRow>| rows.into_iter().map(|m| m.text).collect::<Vec<_>>();
    let m1 = msg(1, "acme", talk).id;
    rd(&store, |tx| {
        assert_eq!(tx.org_message(m1)?, Some(msg(1, "acme", talk)));
        assert_eq!(tx.org_message_by_mail(mid(2))?.unwrap().agency, "beta");
        assert_eq!(tx.org_message_by_mail(mid(9))?, None);
        assert_eq!(
            texts(tx.org_conversation(talk, 2)?),
            ["question 3", "question 4"],
            "the last two, oldest first"
        );
        assert_eq!(
            texts(tx.org_messages_recent(Some("acme"), 2)?),
            ["question 4", "question 3"],
            "newest first"
        );
        assert_eq!(tx.org_messages_recent(None, 10)?.len(), 4);
        assert_eq!(tx.org_messages_pending_of_key(k1)?, 4);
        Ok(())
    });
    assert!(wr(&store, |tx| tx.set_org_message_answered(
        m1,
        "yes",
        mid(10),
        Timestamp(11)
    )));
    assert!(
        !wr(&store, |tx| tx.set_org_message_answered(
            m1,
            "again",
            mid(11),
            Timestamp(12)
        )),
        "answered once"
    );
    rd(&store, |tx| {
        let m = tx.org_message(m1)?.unwrap();
        assert_eq!(m.status, OrgMessageStatus::Answered);
        assert_eq!(m.reply_text.as_deref(), Some("yes"));
        assert_eq!(m.reply_message_id, Some(mid(10)));
        assert_eq!(m.answered_at, Some(Timestamp(11)));
        assert_eq!(tx.org_messages_pending_of_key(k1)?, 3);
        Ok(())
    });
}
