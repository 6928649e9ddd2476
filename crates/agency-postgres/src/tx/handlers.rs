//! [`HandlerTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::HandlerId;
use agency_store::model::HandlerRow;
use agency_store::tx::HandlerTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::*;

impl HandlerTx for PgTx<'_> {
    fn insert_handler(&mut self, h: &HandlerRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO handlers (",
                handler_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            &[
                &h.id.to_string(),
                &opt_text(h.boss),
                &h.status.as_str(),
                &h.state_doc.to_string(),
                &h.audit_log.to_string(),
                &h.created_at.0,
                &h.updated_at.0,
            ],
            || format!("insert handler {}", h.id),
        )
        .map(drop)
    }
    fn handler(&mut self, id: HandlerId) -> R<Option<HandlerRow>> {
        Err(unported("handler"))
    }
    fn update_handler(&mut self, h: &HandlerRow) -> R<()> {
        Err(unported("update_handler"))
    }
    fn root_handler(&mut self) -> R<Option<HandlerRow>> {
        Err(unported("root_handler"))
    }
    fn handler_subtree(&mut self, id: HandlerId) -> R<Vec<HandlerRow>> {
        Err(unported("handler_subtree"))
    }
    fn underlings(&mut self, id: HandlerId) -> R<Vec<HandlerRow>> {
        Err(unported("underlings"))
    }
    fn handlers(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<HandlerRow>> {
        Err(unported("handlers"))
    }
    fn handlers_with_work(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<HandlerId>> {
        Err(unported("handlers_with_work"))
    }
    fn has_work(&mut self, id: HandlerId) -> R<bool> {
        Err(unported("has_work"))
    }
    fn active_subtree_size(&mut self, id: HandlerId, limit: usize) -> R<usize> {
        Err(unported("active_subtree_size"))
    }
}
