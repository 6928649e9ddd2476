//! Typed calls between agents: recorded, listed by conversation in order,
//! the newest open call to a handler found, and answered exactly once.

use agency_core::{AgentId, CallId, ConversationId, Timestamp};

use super::New;
use super::fixtures::*;
use crate::{CallRow, CallStatus, StoreError};

pub fn calls_are_recorded_listed_and_answered_once(new: &New) {
    let (_d, store) = new();
    let (talk, other) = (ConversationId(uuid(50)), ConversationId(uuid(51)));
    let call = |n: u128, conversation, callee: u128, at: i64| CallRow {
        id: CallId(uuid(n)),
        conversation,
        parent: (n > 1).then(|| CallId(uuid(1))),
        caller: hid(100),
        caller_agent: AgentId(uuid(101)),
        callee: hid(callee),
        org: "acme".into(),
        agent: format!("agent{callee}"),
        verb: "summarise".into(),
        hops: u32::try_from(n).unwrap_or(1),
        steps_left: 5,
        request_message: mid(n),
        reply_message: None,
        reply: None,
        status: CallStatus::Pending,
        created_at: Timestamp(at),
        answered_at: None,
    };
    wr(&store, |tx| {
        tx.insert_call(&call(1, talk, 200, 10))?;
        tx.insert_call(&call(2, talk, 300, 12))?;
        tx.insert_call(&call(3, other, 200, 11))
    });
    let err = wr_err(&store, |tx| tx.insert_call(&call(1, talk, 200, 13)));
    assert!(matches!(err, StoreError::Unique { .. }), "same id: {err:?}");
    let mut reused = call(4, talk, 200, 13);
    reused.request_message = mid(2);
    let err = wr_err(&store, |tx| tx.insert_call(&reused));
    assert!(
        matches!(err, StoreError::Unique { .. }),
        "same request mail: {err:?}"
    );
    rd(&store, |tx| {
        assert_eq!(tx.call(CallId(uuid(2)))?, Some(call(2, talk, 300, 12)));
        assert_eq!(tx.call(CallId(uuid(9)))?, None);
        let ids = |rows: Vec<CallRow>| rows.into_iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(
            ids(tx.calls_in_conversation(talk, 10)?),
            [CallId(uuid(1)), CallId(uuid(2))],
            "oldest first, this conversation only"
        );
        assert_eq!(ids(tx.calls_in_conversation(talk, 1)?), [CallId(uuid(1))]);
        assert_eq!(
            tx.newest_open_call_to(hid(200))?.map(|c| c.id),
            Some(CallId(uuid(3))),
            "the newest open one"
        );
        Ok(())
    });
    assert_eq!(
        wr(&store, |tx| tx.spend_call_step(CallId(uuid(1)))),
        Some(4)
    );
    for left in (0..4).rev() {
        assert_eq!(
            wr(&store, |tx| tx.spend_call_step(CallId(uuid(1)))),
            Some(left)
        );
    }
    assert_eq!(
        wr(&store, |tx| tx.spend_call_step(CallId(uuid(1)))),
        None,
        "no step left: nothing spent"
    );
    assert_eq!(
        rd(&store, |tx| tx.call(CallId(uuid(1))))
            .unwrap()
            .steps_left,
        0
    );
    assert_eq!(wr(&store, |tx| tx.spend_call_step(CallId(uuid(9)))), None);
    assert!(wr(&store, |tx| tx.answer_call(
        CallId(uuid(3)),
        CallStatus::Answered,
        mid(30),
        r#"{"ok":true}"#,
        Timestamp(20)
    )));
    assert!(
        !wr(&store, |tx| tx.answer_call(
            CallId(uuid(3)),
            CallStatus::Failed,
            mid(31),
            "late",
            Timestamp(21)
        )),
        "answered once"
    );
    rd(&store, |tx| {
        let c = tx.call(CallId(uuid(3)))?.expect("call 3");
        assert_eq!(c.status, CallStatus::Answered);
        assert_eq!(c.reply_message, Some(mid(30)));
        assert_eq!(
            c.reply.as_deref(),
            Some(r#"{"ok":true}"#),
            "the first answer stays"
        );
        assert_eq!(c.answered_at, Some(Timestamp(20)));
        assert_eq!(
            tx.newest_open_call_to(hid(200))?.map(|c| c.id),
            Some(CallId(uuid(1))),
            "an answered call is no longer open"
        );
        assert_eq!(tx.newest_open_call_to(hid(999))?, None);
        Ok(())
    });
}
