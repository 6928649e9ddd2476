//! Leases: claimed once, extended by the holder, refused to others while
//! unexpired, taken over after expiry with a higher fencing token; renewal
//! tells a daemon which leases it still owns; the fence, release, the
//! sweeper's list, input checks, the database clock, and owners racing
//! for the same handlers.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agency_core::{HandlerId, Timestamp};

use super::New;
use super::fixtures::*;
use crate::{LeaseRow, StoreError};

/// A minute: long enough that a lease does not expire during a story.
const LONG: i64 = 60_000;

fn claim(store: &dyn crate::Store, h: HandlerId, owner: &str, ttl: i64) -> Option<LeaseRow> {
    wr(store, |tx| tx.claim_lease(h, owner, ttl))
}

fn handlers(rows: &[LeaseRow]) -> Vec<HandlerId> {
    rows.iter().map(|r| r.handler).collect()
}

fn wall_clock_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap()
}

pub fn claims_extend_refuse_and_take_over_with_higher_tokens(new: &New) {
    let (_d, store) = new();
    let store = &*store;
    let (h1, h2, h3) = (hid(1), hid(2), hid(3));

    let before = rd(store, |tx| tx.db_now());
    let first = claim(store, h1, "a", LONG).expect("a free lease is taken");
    let after = rd(store, |tx| tx.db_now());
    assert_eq!(
        (first.handler, first.owner.as_str(), first.token),
        (h1, "a", 1)
    );
    assert!(
        before <= first.claimed_at && first.claimed_at <= after,
        "{first:?}"
    );
    assert_eq!(first.expires_at.0, first.claimed_at.0 + LONG);
    assert_eq!(rd(store, |tx| tx.lease(h1)), Some(first.clone()));

    // The holder claims again: same token, extended, claimed_at kept.
    let again = claim(store, h1, "a", 2 * LONG).expect("the holder re-claims");
    assert_eq!(again.token, 1, "an extension keeps the token");
    assert_eq!(again.claimed_at, first.claimed_at);
    assert!(
        again.expires_at.0 >= first.claimed_at.0 + 2 * LONG,
        "{again:?}"
    );
    assert!(again.expires_at > first.expires_at);
    assert_eq!(rd(store, |tx| tx.lease(h1)), Some(again.clone()));

    // Another owner is refused while it has not expired; nothing changes.
    assert_eq!(claim(store, h1, "b", LONG), None);
    assert_eq!(rd(store, |tx| tx.lease(h1)), Some(again));

    // Taken over after expiry (ttl 0 expires at once): token + 1.
    let lapsed = claim(store, h2, "b", 0).expect("free");
    assert_eq!(lapsed.token, 1);
    assert_eq!(lapsed.expires_at, lapsed.claimed_at, "ttl 0");
    let taken = claim(store, h2, "a", LONG).expect("an expired lease is free");
    assert_eq!((taken.owner.as_str(), taken.token), ("a", 2));
    assert!(taken.claimed_at >= lapsed.expires_at);
    assert_eq!(rd(store, |tx| tx.lease(h2)), Some(taken.clone()));
    assert_eq!(claim(store, h2, "b", LONG), None, "a holds it now");

    // The same owner taking its own expired lease gets a new token too.
    assert_eq!(claim(store, h3, "c", 0).map(|l| l.token), Some(1));
    let own = claim(store, h3, "c", LONG).expect("expired, so free");
    assert_eq!((own.owner.as_str(), own.token), ("c", 2));

    assert_eq!(rd(store, |tx| tx.lease(hid(9))), None, "never claimed");
}

pub fn renewal_returns_only_the_leases_still_owned(new: &New) {
    let (_d, store) = new();
    let store = &*store;
    let (h1, h2, h3, h4, h5) = (hid(1), hid(2), hid(3), hid(4), hid(5));
    // Claimed out of handler order, to see renewal's order.
    for (h, ttl) in [(h3, LONG), (h1, LONG), (h2, 0)] {
        claim(store, h, "a", ttl).expect("free");
    }
    claim(store, h4, "b", LONG).expect("free");
    let stolen = claim(store, h2, "b", LONG).expect("a's lease expired");
    assert_eq!(stolen.token, 2);

    let now = rd(store, |tx| tx.db_now());
    let renewed = wr(store, |tx| tx.renew_leases("a", 2 * LONG));
    assert_eq!(handlers(&renewed), [h1, h3], "h2 was taken over");
    for r in &renewed {
        assert_eq!((r.owner.as_str(), r.token), ("a", 1), "{r:?}");
        assert!(r.expires_at.0 >= now.0 + 2 * LONG, "extended: {r:?}");
    }
    assert_eq!(rd(store, |tx| tx.leases_of("a")), renewed);
    assert_eq!(rd(store, |tx| tx.lease(h2)), Some(stolen), "untouched");
    assert_eq!(handlers(&rd(store, |tx| tx.leases_of("b"))), [h2, h4]);
    assert_eq!(rd(store, |tx| tx.leases_of("nobody")), []);

    // An expired lease is lost even if nobody took it yet: renewal leaves
    // it out (and expired), and claiming it again gives a new token.
    claim(store, h5, "a", 0).expect("free");
    let renewed = wr(store, |tx| tx.renew_leases("a", LONG));
    assert_eq!(handlers(&renewed), [h1, h3]);
    assert!(rd(store, |tx| tx.lease(h5)).unwrap().expires_at <= rd(store, |tx| tx.db_now()));
    assert_eq!(
        claim(store, h5, "a", LONG).expect("expired, so free").token,
        2
    );
    // A released lease is not renewed either.
    let l1 = rd(store, |tx| tx.lease(h1)).unwrap();
    assert!(wr(store, |tx| tx.release_lease(h1, "a", l1.token)));
    let renewed = wr(store, |tx| tx.renew_leases("a", LONG));
    assert_eq!(handlers(&renewed), [h3, h5]);

    // A stale owner learns it lost everything: its renewal is empty.
    claim(store, hid(6), "c", 0).expect("free");
    claim(store, hid(6), "d", LONG).expect("expired");
    assert_eq!(wr(store, |tx| tx.renew_leases("c", LONG)), []);
    assert_eq!(rd(store, |tx| tx.lease(hid(6))).unwrap().owner, "d");
}

pub fn the_fence_holds_only_for_the_current_token_and_release_frees_it(new: &New) {
    let (_d, store) = new();
    let store = &*store;
    let h = hid(1);
    let held = claim(store, h, "a", LONG).expect("free");
    rd(store, |tx| {
        assert!(tx.lease_holds(h, held.token)?);
        assert!(!tx.lease_holds(h, held.token + 1)?);
        assert!(!tx.lease_holds(hid(2), held.token)?, "no row");
        Ok(())
    });

    assert!(!wr(store, |tx| tx.release_lease(h, "b", 1)), "not b's");
    assert!(
        !wr(store, |tx| tx.release_lease(h, "a", 2)),
        "not that token"
    );
    assert_eq!(rd(store, |tx| tx.lease(h)), Some(held.clone()), "unchanged");
    assert!(wr(store, |tx| tx.release_lease(h, "a", 1)));
    assert!(
        !wr(store, |tx| tx.release_lease(h, "a", 1)),
        "already released"
    );
    let released = rd(store, |tx| tx.lease(h)).unwrap();
    assert_eq!((released.owner.as_str(), released.token), ("a", 1));
    assert!(released.expires_at < held.expires_at);
    assert!(
        released.expires_at <= rd(store, |tx| tx.db_now()),
        "expired"
    );
    assert!(
        rd(store, |tx| tx.lease_holds(h, 1)),
        "the token is still the row's, whatever its expiry"
    );
    assert_eq!(handlers(&rd(store, |tx| tx.expired_leases(10))), [h]);

    // A new claim after release bumps the token, and the old one's fence
    // fails from then on.
    let next = claim(store, h, "b", LONG).expect("released, so free");
    assert_eq!((next.owner.as_str(), next.token), ("b", 2));
    rd(store, |tx| {
        assert!(!tx.lease_holds(h, 1)?);
        assert!(tx.lease_holds(h, 2)?);
        Ok(())
    });
    assert!(!wr(store, |tx| tx.release_lease(h, "a", 1)), "stale token");

    // A write made as the stale owner checks the fence in its own
    // transaction and does nothing.
    let wrote = wr(store, |tx| {
        if !tx.lease_holds(h, 1)? {
            return Ok(false);
        }
        tx.set_handler_hops(h, 7)?;
        Ok(true)
    });
    assert!(!wrote);
}

pub fn expired_leases_are_listed_oldest_first_and_limited(new: &New) {
    let (_d, store) = new();
    let store = &*store;
    assert_eq!(rd(store, |tx| tx.expired_leases(10)), []);
    // Expired in the order h3, h1, h2 (ttl 0, a few ms apart), so that
    // expiry order is not handler order; h4 and h5 are held.
    for (n, owner) in [(3, "a"), (1, "b"), (2, "a")] {
        claim(store, hid(n), owner, 0).expect("free");
        std::thread::sleep(Duration::from_millis(3));
    }
    claim(store, hid(4), "a", LONG).expect("free");
    claim(store, hid(5), "b", LONG).expect("free");
    let expired = rd(store, |tx| tx.expired_leases(10));
    assert_eq!(handlers(&expired), [hid(3), hid(1), hid(2)]);
    assert!(
        expired
            .windows(2)
            .all(|w| w[0].expires_at < w[1].expires_at)
    );
    assert_eq!(
        handlers(&rd(store, |tx| tx.expired_leases(2))),
        [hid(3), hid(1)]
    );
    assert_eq!(rd(store, |tx| tx.expired_leases(0)), []);

    // Ties on expires_at are broken by handler: renewing with ttl 0 in one
    // statement gives b's unexpired leases (h5, h6) one expiry.
    claim(store, hid(6), "b", LONG).expect("free");
    let renewed = wr(store, |tx| tx.renew_leases("b", 0));
    assert_eq!(handlers(&renewed), [hid(5), hid(6)]);
    assert_eq!(renewed[0].expires_at, renewed[1].expires_at);
    let expired = rd(store, |tx| tx.expired_leases(10));
    assert_eq!(handlers(&expired), [hid(3), hid(1), hid(2), hid(5), hid(6)]);
    let mut sorted = expired.clone();
    sorted.sort_by_key(|r| (r.expires_at, r.handler));
    assert_eq!(expired, sorted);
}

pub fn leases_read_by_page_and_summed_by_owner(new: &New) {
    let (_d, store) = new();
    let store = &*store;
    assert_eq!(rd(store, |tx| tx.leases_for(&[hid(1), hid(2)])), []);
    assert_eq!(rd(store, |tx| tx.lease_owners()), []);
    claim(store, hid(3), "a", LONG).expect("free");
    claim(store, hid(1), "a", LONG).expect("free");
    claim(store, hid(2), "b", LONG).expect("free");
    claim(store, hid(4), "b", 0).expect("free");
    // Expired rows too, ordered by handler; handlers without a row and
    // repeats add nothing.
    let page = rd(store, |tx| {
        tx.leases_for(&[hid(4), hid(3), hid(9), hid(1), hid(3)])
    });
    assert_eq!(handlers(&page), [hid(1), hid(3), hid(4)]);
    assert_eq!(page[2].expires_at, page[2].claimed_at, "the expired one");
    for row in &page {
        assert_eq!(rd(store, |tx| tx.lease(row.handler)).as_ref(), Some(row));
    }
    assert_eq!(rd(store, |tx| tx.leases_for(&[])), []);

    // Owners of unexpired leases only: b's expired h4 does not count.
    let owners = rd(store, |tx| tx.lease_owners());
    let summary: Vec<(&str, i64)> = owners
        .iter()
        .map(|o| (o.owner.as_str(), o.handlers))
        .collect();
    assert_eq!(summary, [("a", 2), ("b", 1)]);
    let a_last = rd(store, |tx| tx.leases_of("a"))
        .iter()
        .map(|l| l.expires_at)
        .max();
    assert_eq!(Some(owners[0].expires_at), a_last);
    wr(store, |tx| tx.renew_leases("b", 0));
    assert_eq!(
        rd(store, |tx| tx.lease_owners())
            .iter()
            .map(|o| o.owner.as_str())
            .collect::<Vec<_>>(),
        ["a"],
        "b's leases lapsed"
    );
}

pub fn lease_input_is_validated(new: &New) {
    let (_d, store) = new();
    let store = &*store;
    let h = hid(1);
    let refused = |err: StoreError, names: &str| {
        let text = err.to_string();
        assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
        assert!(text.starts_with("failed to "), "{text}");
        assert!(text.contains(names), "{text} should name {names}");
    };
    refused(
        wr_err(store, |tx| tx.claim_lease(h, "a", -1)),
        &h.to_string(),
    );
    refused(
        wr_err(store, |tx| tx.claim_lease(h, "", LONG)),
        &h.to_string(),
    );
    refused(wr_err(store, |tx| tx.renew_leases("a", -5)), "leases of a");
    refused(wr_err(store, |tx| tx.renew_leases("", LONG)), "renew");
    refused(
        wr_err(store, |tx| tx.release_lease(h, "", 1)),
        &h.to_string(),
    );
    assert_eq!(rd(store, |tx| tx.lease(h)), None, "nothing was written");
    // ttl 0 is allowed: a lease that expires at once.
    assert!(claim(store, h, "a", 0).is_some());
}

pub fn db_now_is_the_wall_clock_in_milliseconds(new: &New) {
    let (_d, store) = new();
    let store = &*store;
    let before = wall_clock_ms();
    let read_now = rd(store, |tx| tx.db_now());
    let write_now = wr(store, |tx| tx.db_now());
    let after = wall_clock_ms();
    for now in [read_now, write_now] {
        assert!(
            before - 5_000 <= now.0 && now.0 <= after + 5_000,
            "{now:?} is not within 5 s of [{before}, {after}]"
        );
    }
    // Read afresh on each call, not the transaction's start.
    let (first, second) = rd(store, |tx| {
        let first = tx.db_now()?;
        std::thread::sleep(Duration::from_millis(20));
        Ok((first, tx.db_now()?))
    });
    assert!(second.0 >= first.0 + 10, "{first:?} then {second:?}");
    assert!(
        rd(store, |tx| tx.db_now()) > Timestamp(1_600_000_000_000),
        "milliseconds since the epoch"
    );
}

/// Eight daemons race for the same twenty handlers, each claim its own
/// write transaction. With ttl 0 every lease is expired as soon as it is
/// taken, so every claim takes it (never the holder's extension) and must
/// get the next token: per handler the tokens handed out are exactly
/// 1..=n, and the row's final token is n. Then they race for twenty fresh
/// handlers with a long ttl: exactly one wins each.
pub fn racing_owners_get_distinct_tokens(new: &New) {
    let (_d, store) = new();
    let store = &*store;
    const OWNERS: usize = 8;
    const HANDLERS: usize = 20;
    const ATTEMPTS: usize = 100;
    let claims: Vec<Vec<LeaseRow>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..OWNERS)
            .map(|t| {
                s.spawn(move || {
                    let owner = format!("daemon-{t}");
                    (0..ATTEMPTS)
                        .filter_map(|i| {
                            let h = hid(1 + ((i + t) % HANDLERS) as u128);
                            wr(store, |tx| {
                                let got = tx.claim_lease(h, &owner, 0)?;
                                if let Some(l) = &got {
                                    // The fence holds in the claim's own
                                    // transaction.
                                    assert!(tx.lease_holds(h, l.token)?);
                                    assert_eq!(l.owner, owner);
                                }
                                Ok(got)
                            })
                        })
                        .collect()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut tokens: BTreeMap<HandlerId, Vec<i64>> = BTreeMap::new();
    for l in claims.into_iter().flatten() {
        tokens.entry(l.handler).or_default().push(l.token);
    }
    assert_eq!(tokens.len(), HANDLERS);
    let total: usize = tokens.values().map(Vec::len).sum();
    assert_eq!(
        total,
        OWNERS * ATTEMPTS,
        "ttl 0: every claim takes the lease"
    );
    for (h, mut got) in tokens {
        got.sort_unstable();
        let n = got.len() as i64;
        assert_eq!(got, (1..=n).collect::<Vec<_>>(), "tokens of {h}");
        assert_eq!(rd(store, |tx| tx.lease(h)).unwrap().token, n, "{h}");
    }

    let winners: Vec<Vec<LeaseRow>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..OWNERS)
            .map(|t| {
                s.spawn(move || {
                    let owner = format!("daemon-{t}");
                    (0..HANDLERS)
                        .filter_map(|i| {
                            let h = hid(101 + ((i + t) % HANDLERS) as u128);
                            wr(store, |tx| tx.claim_lease(h, &owner, LONG))
                        })
                        .collect()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut won: BTreeMap<HandlerId, Vec<LeaseRow>> = BTreeMap::new();
    for l in winners.into_iter().flatten() {
        won.entry(l.handler).or_default().push(l);
    }
    assert_eq!(won.len(), HANDLERS);
    for (h, ls) in won {
        assert_eq!(ls.len(), 1, "one winner for {h}: {ls:?}");
        assert_eq!(ls[0].token, 1);
        assert_eq!(rd(store, |tx| tx.lease(h)), Some(ls[0].clone()));
    }
}
