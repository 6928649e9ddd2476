//! Agents: one live agent per handler, bearer tokens, process groups.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;
use crate::*;

pub fn one_live_agent_per_handler(new: &New) {
    let (_dir, store) = new();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    wr(&store, |tx| tx.insert_agent(&agent(100, h, 1)));
    let err = wr_err(&store, |tx| tx.insert_agent(&agent(101, h, 2)));
    let StoreError::Unique { op, message } = &err else {
        panic!("expected Unique: {err:?}")
    };
    assert_eq!(op, &format!("insert agent {} for handler {h}", aid(101)));
    assert_eq!(message, &format!("handler {h} already has a live agent"));

    // The refusal leaves the transaction usable: the service names the
    // live agent in the same transaction (on PostgreSQL a failed statement
    // would abort it).
    let (refused, live) = wr(&store, |tx| {
        let refused = tx.insert_agent(&agent(102, h, 2)).is_err();
        let live = tx.live_agents_of(&[h])?;
        tx.append_event(&NewEventRow {
            at: Timestamp(2),
            kind: "agent.refused".into(),
            handler: Some(h),
            agent: None,
            outcome: None,
            summary: String::new(),
            data: "{}".into(),
        })?;
        Ok((refused, live))
    });
    assert!(refused);
    assert_eq!(live, [agent(100, h, 1)]);
    assert_eq!(rd(&store, |tx| tx.agent(aid(102))), None);
    assert_eq!(
        rd(&store, |tx| tx.last_event_seq()),
        1,
        "the transaction committed"
    );

    assert!(wr(&store, |tx| tx.end_agent(
        aid(100),
        Timestamp(3),
        "exited"
    )));
    assert!(
        !wr(&store, |tx| tx.end_agent(aid(100), Timestamp(4), "again")),
        "no longer live"
    );
    wr(&store, |tx| tx.insert_agent(&agent(101, h, 5)));
    rd(&store, |tx| {
        let old = tx.agent(aid(100))?.unwrap();
        assert_eq!(
            (old.ended_at, old.end_reason.as_deref()),
            (Some(Timestamp(3)), Some("exited"))
        );
        assert_eq!(tx.live_agents()?, [agent(101, h, 5)]);
        assert_eq!(tx.live_agents_of(&[h, hid(9)])?, [agent(101, h, 5)]);
        assert_eq!(tx.live_agents_of(&[hid(9)])?, []);
        let recent: Vec<_> = tx.recent_agents(10)?.into_iter().map(|a| a.id).collect();
        assert_eq!(recent, [aid(101), aid(100)], "newest first");
        assert_eq!(tx.counts()?.agents_live, 1);
        Ok(())
    });
}

pub fn tokens_and_process_groups(new: &New) {
    let (_d, store) = new();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    let token = |hash: &str, agent_n| TokenRow {
        hash: hash.to_owned(),
        agent: aid(agent_n),
        handler: h,
        workspace: None,
        created_at: Timestamp(1),
        revoked_at: None,
    };
    wr(&store, |tx| {
        tx.insert_agent(&agent(100, h, 1))?;
        tx.insert_token(&token("t1", 100))?;
        tx.insert_token(&token("t2", 100))?;
        tx.put_agent_process(&AgentProcessRow {
            agent: aid(100),
            pgid: 4242,
            started: 7,
        })?;
        // Replaced, not added.
        tx.put_agent_process(&AgentProcessRow {
            agent: aid(100),
            pgid: 4343,
            started: 8,
        })
    });
    let err = wr_err(&store, |tx| tx.insert_token(&token("t1", 100)));
    assert!(matches!(err, StoreError::Unique { .. }), "{err:?}");
    rd(&store, |tx| {
        assert_eq!(tx.token("t1")?, Some(token("t1", 100)));
        assert_eq!(tx.token("nope")?, None);
        let procs = tx.live_agent_processes()?;
        assert_eq!(procs.len(), 1);
        assert_eq!(
            (procs[0].agent, procs[0].pgid, procs[0].started),
            (aid(100), 4343, 8)
        );
        Ok(())
    });
    wr(&store, |tx| {
        assert_eq!(tx.revoke_tokens_of(aid(100), Timestamp(5))?, 2);
        assert_eq!(
            tx.revoke_tokens_of(aid(100), Timestamp(6))?,
            0,
            "already revoked"
        );
        tx.end_agent(aid(100), Timestamp(9), "exited").map(drop)
    });
    rd(&store, |tx| {
        assert_eq!(tx.token("t2")?.unwrap().revoked_at, Some(Timestamp(5)));
        assert!(tx.live_agent_processes()?.is_empty(), "its agent ended");
        let live = tx.live_agents()?;
        assert!(live.is_empty());
        assert_eq!(tx.recent_agents(5)?.len(), 1);
        Ok(())
    });
}

/// An agent and the handler it works for, in one read (every agent's call
/// is authenticated with both): whatever their states; none for an
/// unknown agent.
pub fn an_agent_with_its_handler_in_one_read(new: &New) {
    let (_dir, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        Ok((h1, add_handler(tx, 2, Some(h1))?))
    });
    wr(&store, |tx| {
        tx.insert_agent(&agent(100, h1, 1))?;
        tx.insert_agent(&agent(200, h2, 2))?;
        tx.end_agent(aid(200), Timestamp(3), "done").map(|_| ())
    });
    rd(&store, |tx| {
        let both = tx.agent_with_handler(aid(100))?;
        assert_eq!(
            both,
            Some((agent(100, h1, 1), tx.handler(h1)?.expect("h1")))
        );
        let (ended, boss) = tx
            .agent_with_handler(aid(200))?
            .expect("an ended agent is read");
        assert_eq!(ended, tx.agent(aid(200))?.expect("agent 200"));
        assert_eq!(ended.ended_at, Some(Timestamp(3)));
        assert_eq!(boss, tx.handler(h2)?.expect("h2"));
        assert_eq!(boss.boss, Some(h1));
        assert_eq!(tx.agent_with_handler(aid(999))?, None);
        Ok(())
    });
}

/// A token with its agent and that agent's handler, in one read (every
/// request of an agent presents its token): a revoked one too, with its
/// time and workspace; none for an unknown hash.
pub fn a_token_with_its_agent_and_handler_in_one_read(new: &New) {
    let (_dir, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        Ok((h1, add_handler(tx, 2, Some(h1))?))
    });
    let token = |hash: &str, agent_n, handler| TokenRow {
        hash: hash.to_owned(),
        agent: aid(agent_n),
        handler,
        workspace: Some(format!("/work/{hash}")),
        created_at: Timestamp(4),
        revoked_at: None,
    };
    wr(&store, |tx| {
        tx.insert_agent(&agent(100, h1, 1))?;
        tx.insert_agent(&agent(200, h2, 2))?;
        tx.insert_token(&token("t1", 100, h1))?;
        tx.insert_token(&token("t2", 200, h2))?;
        tx.revoke_tokens_of(aid(200), Timestamp(5)).map(|_| ())
    });
    rd(&store, |tx| {
        assert_eq!(
            tx.token_caller("t1")?,
            Some((
                token("t1", 100, h1),
                agent(100, h1, 1),
                tx.handler(h1)?.expect("h1")
            ))
        );
        let (revoked, a, h) = tx.token_caller("t2")?.expect("a revoked token is read");
        assert_eq!(Some(&revoked), tx.token("t2")?.as_ref());
        assert_eq!(revoked.revoked_at, Some(Timestamp(5)));
        assert_eq!((a.id, h.id, h.boss), (aid(200), h2, Some(h1)));
        assert_eq!(tx.token_caller("nope")?, None);
        Ok(())
    });
}
