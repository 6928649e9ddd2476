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
