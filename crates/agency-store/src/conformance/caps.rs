//! Capabilities: revocation cascades, lookups by holder, kind and resource.

use agency_core::{CapabilityId, Level, MailTarget, Resource, ResourceKind, Timestamp};

use super::New;
use super::fixtures::*;
use crate::*;

struct Chain {
    a: CapabilityId,
    b: CapabilityId,
    c: CapabilityId,
    d: CapabilityId,
    unrelated: CapabilityId,
    mail_h2: CapabilityId,
    mail_h2_derived: CapabilityId,
    mail_h3: CapabilityId,
}

/// h1 holds A; B (h2, scoped to outcome 50) derives from A; C (h3) from B;
/// D (h4) from C. Plus an unrelated capability and mail capabilities: to h2
/// (and one derived from it, held by h3) and to h3.
fn cap_chain(store: &dyn Store) -> Chain {
    wr(store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        let h3 = add_handler(tx, 3, Some(h2))?;
        let h4 = add_handler(tx, 4, Some(h3))?;
        add_outcome(tx, outcome(oid(50), h2))?;
        let kb = Resource::Kb(fid(STATE + 1));
        let mut insert = |c: NewCapability| tx.insert_capability(&c);
        let a = insert(cap(h1, kb.clone(), Level::Write, None))?;
        let b = insert(NewCapability {
            scope: Some(oid(50)),
            ..cap(h2, kb.clone(), Level::Read, Some(a))
        })?;
        let c = insert(cap(h3, kb.clone(), Level::Read, Some(b)))?;
        let d = insert(cap(h4, kb, Level::None, Some(c)))?;
        let unrelated = insert(cap(h2, Resource::Repo("agency".into()), Level::Read, None))?;
        let mail = |to| Resource::Mail(MailTarget::Handler(to));
        let mail_h2 = insert(cap(h1, mail(h2), Level::Write, None))?;
        let mail_h2_derived = insert(cap(h3, mail(h2), Level::Write, Some(mail_h2)))?;
        let mail_h3 = insert(cap(h2, mail(h3), Level::Write, None))?;
        Ok(Chain {
            a,
            b,
            c,
            d,
            unrelated,
            mail_h2,
            mail_h2_derived,
            mail_h3,
        })
    })
}

/// Revoke, check the returned rows carry the time, return their ids.
fn revoke(store: &dyn Store, selector: RevokeSelector) -> Vec<CapabilityId> {
    let rows = wr(store, |tx| tx.revoke(&selector, Timestamp(99)));
    assert!(
        rows.iter().all(|r| r.revoked_at == Some(Timestamp(99))),
        "{rows:?}"
    );
    rows.iter().map(|r| r.id).collect()
}

fn live(store: &dyn Store, ids: &[CapabilityId]) -> Vec<bool> {
    rd(store, |tx| {
        ids.iter()
            .map(|id| {
                Ok(tx
                    .capability(*id)?
                    .expect("capability exists")
                    .revoked_at
                    .is_none())
            })
            .collect()
    })
}

pub fn revoke_cascades_through_derived_from(new: &New) {
    let (_d, store) = new();
    let k = cap_chain(&store);
    let all = [
        k.a,
        k.b,
        k.c,
        k.d,
        k.unrelated,
        k.mail_h2,
        k.mail_h2_derived,
        k.mail_h3,
    ];
    assert_eq!(
        revoke(&store, RevokeSelector::Ids(vec![k.a])),
        [k.a, k.b, k.c, k.d]
    );
    assert_eq!(
        live(&store, &all),
        [false, false, false, false, true, true, true, true]
    );
    assert_eq!(
        revoke(&store, RevokeSelector::Ids(vec![k.a, k.b])),
        [],
        "already revoked"
    );
    let mail = revoke(&store, RevokeSelector::MailTo(vec![hid(2)]));
    assert_eq!(mail, [k.mail_h2, k.mail_h2_derived]);
    assert_eq!(live(&store, &all[4..]), [true, false, false, true]);

    let (_d, store) = new();
    let k = cap_chain(&store);
    assert_eq!(
        revoke(&store, RevokeSelector::ScopedTo(oid(50))),
        [k.b, k.c, k.d]
    );
    assert_eq!(live(&store, &[k.a, k.unrelated, k.mail_h2]), [true; 3]);

    let (_d, store) = new();
    let k = cap_chain(&store);
    let held_by = revoke(&store, RevokeSelector::HeldBy(vec![hid(3), hid(9)]));
    assert_eq!(held_by, [k.c, k.d, k.mail_h2_derived]);
    assert_eq!(
        live(&store, &[k.a, k.b, k.unrelated, k.mail_h2, k.mail_h3]),
        [true; 5]
    );
    rd(&store, |tx| {
        let held: Vec<_> = tx
            .capabilities_held(hid(2))?
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(held, [k.b, k.unrelated, k.mail_h3]);
        let on = tx.capabilities_on(hid(2), &Resource::Kb(fid(STATE + 1)))?;
        assert_eq!(on.len(), 1);
        assert_eq!(
            (on[0].id, on[0].level, on[0].scope),
            (k.b, Level::Read, Some(oid(50)))
        );
        assert_eq!(
            (on[0].derived_from, on[0].origin),
            (Some(k.a), CapOrigin::Grant)
        );
        assert_eq!(
            tx.capabilities_on(hid(3), &Resource::Kb(fid(STATE + 1)))?,
            []
        );
        Ok(())
    });
}

pub fn capabilities_by_holder_kind_and_resource(new: &New) {
    let (_d, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        Ok((h1, add_handler(tx, 2, Some(h1))?))
    });
    let kb = Resource::Kb(fid(DOC + 1));
    let repo = Resource::Repo("agency".into());
    let (a, b, c, d) = wr(&store, |tx| {
        let a = tx.insert_capability(&cap(h2, kb.clone(), Level::Read, None))?;
        let b = tx.insert_capability(&cap(h2, repo.clone(), Level::Write, None))?;
        let c = tx.insert_capability(&cap(h1, kb.clone(), Level::Write, None))?;
        let d = tx.insert_capability(&cap(h2, kb.clone(), Level::Write, None))?;
        Ok((a, b, c, d))
    });
    let ids = |rows: Vec<CapabilityRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
    rd(&store, |tx| {
        let row = tx.capability(a)?.unwrap();
        assert_eq!(
            (row.holder, row.level, row.revoked_at),
            (h2, Level::Read, None)
        );
        assert_eq!(ids(tx.capabilities_on(h2, &kb)?), [a, d]);
        assert_eq!(ids(tx.capabilities_held(h2)?), [a, b, d]);
        assert_eq!(ids(tx.capabilities_of_kind(h2, ResourceKind::Repo)?), [b]);
        assert_eq!(ids(tx.live_capabilities_on(&kb)?), [a, c, d]);
        assert!(tx.capabilities_held(hid(9))?.is_empty());
        Ok(())
    });
    wr(&store, |tx| {
        tx.revoke(&RevokeSelector::Ids(vec![a]), Timestamp(9))
    });
    rd(&store, |tx| {
        assert_eq!(ids(tx.capabilities_on(h2, &kb)?), [d], "live only");
        assert_eq!(ids(tx.live_capabilities_on(&kb)?), [c, d]);
        assert_eq!(tx.capability(a)?.unwrap().revoked_at, Some(Timestamp(9)));
        Ok(())
    });
}
