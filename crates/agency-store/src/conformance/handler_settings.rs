//! Handler settings: the model upstream, standing instructions and
//! keep-warm times are set, read back, replaced and cleared.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;

pub fn model_standing_and_keep_warm_are_set_and_cleared(new: &New) {
    let (_d, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        Ok((h1, add_handler(tx, 2, Some(h1))?))
    });
    wr(&store, |tx| {
        tx.set_handler_model(h1, Some("fast"), Timestamp(1))?;
        tx.set_handler_model(h1, Some("smart"), Timestamp(2))?;
        tx.set_handler_standing(h1, Some("be brief"), Timestamp(1))?;
        tx.set_handler_keep_warm(h1, "user", Some(5_000), Timestamp(1))?;
        tx.set_handler_keep_warm(h1, "org", Some(60_000), Timestamp(1))?;
        tx.set_handler_keep_warm(h1, "user", Some(7_000), Timestamp(2))
    });
    rd(&store, |tx| {
        assert_eq!(tx.handler_model(h1)?.as_deref(), Some("smart"), "replaced");
        assert_eq!(tx.handler_model(h2)?, None);
        assert_eq!(tx.handler_standing(h1)?.as_deref(), Some("be brief"));
        assert_eq!(tx.handler_standing(h2)?, None);
        assert_eq!(
            tx.handler_keep_warm(h1)?,
            [("org".to_owned(), 60_000), ("user".to_owned(), 7_000)],
            "one per source, ordered by source"
        );
        assert!(tx.handler_keep_warm(h2)?.is_empty());
        Ok(())
    });
    wr(&store, |tx| {
        tx.set_handler_model(h1, None, Timestamp(3))?;
        tx.set_handler_standing(h1, None, Timestamp(3))?;
        tx.set_handler_keep_warm(h1, "org", None, Timestamp(3))?;
        // Clearing what is not set is no error.
        tx.set_handler_model(h2, None, Timestamp(3))
    });
    rd(&store, |tx| {
        assert_eq!(tx.handler_model(h1)?, None);
        assert_eq!(tx.handler_standing(h1)?, None);
        assert_eq!(tx.handler_keep_warm(h1)?, [("user".to_owned(), 7_000)]);
        Ok(())
    });
}

/// The nearest model up the chain of bosses: a handler's own first, then
/// its boss's and so on; none when no one up the chain has one; a boss
/// cycle (corrupt data) ends the walk.
pub fn the_nearest_model_up_the_chain_of_bosses(new: &New) {
    let (_d, store) = new();
    // h1 (root) ← h2 ← h3 ← h4
    let [h1, h2, h3, h4] = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        let h3 = add_handler(tx, 3, Some(h2))?;
        Ok([h1, h2, h3, add_handler(tx, 4, Some(h3))?])
    });
    rd(&store, |tx| {
        for h in [h1, h2, h3, h4, hid(99)] {
            assert_eq!(tx.handler_model_up(h)?, None, "nothing set, {h}");
        }
        Ok(())
    });
    wr(&store, |tx| {
        tx.set_handler_model(h1, Some("root-model"), Timestamp(1))
    });
    rd(&store, |tx| {
        for h in [h1, h2, h3, h4] {
            assert_eq!(
                tx.handler_model_up(h)?,
                Some((h1, "root-model".to_owned())),
                "inherited from the root, {h}"
            );
        }
        assert_eq!(tx.handler_model_up(hid(99))?, None, "an unknown handler");
        Ok(())
    });
    wr(&store, |tx| {
        tx.set_handler_model(h3, Some("h3-model"), Timestamp(2))
    });
    rd(&store, |tx| {
        assert_eq!(
            tx.handler_model_up(h4)?,
            Some((h3, "h3-model".to_owned())),
            "the nearest wins"
        );
        assert_eq!(
            tx.handler_model_up(h3)?,
            Some((h3, "h3-model".to_owned())),
            "its own"
        );
        assert_eq!(
            tx.handler_model_up(h2)?,
            Some((h1, "root-model".to_owned())),
            "not one below"
        );
        Ok(())
    });
    // Corrupt data: h1's boss is h4, a cycle with no model on it.
    wr(&store, |tx| {
        tx.set_handler_model(h1, None, Timestamp(3))?;
        tx.set_handler_model(h3, None, Timestamp(3))?;
        let mut root = tx.handler(h1)?.expect("h1");
        root.boss = Some(h4);
        tx.update_handler(&root)
    });
    rd(&store, |tx| {
        assert_eq!(tx.handler_model_up(h2)?, None, "the cycle ends the walk");
        Ok(())
    });
    wr(&store, |tx| {
        tx.set_handler_model(h4, Some("h4-model"), Timestamp(4))
    });
    rd(&store, |tx| {
        assert_eq!(
            tx.handler_model_up(h2)?,
            Some((h4, "h4-model".to_owned())),
            "found round the cycle"
        );
        Ok(())
    });
}
