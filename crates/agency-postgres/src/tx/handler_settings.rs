//! [`HandlerSettingsTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{HandlerId, Timestamp};
use agency_store::tx::HandlerSettingsTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl HandlerSettingsTx for PgTx<'_> {
    fn set_handler_model(
        &mut self,
        handler: HandlerId,
        upstream: Option<&str>,
        at: Timestamp,
    ) -> R<()> {
        Err(unported("set_handler_model"))
    }
    fn handler_model(&mut self, handler: HandlerId) -> R<Option<String>> {
        Err(unported("handler_model"))
    }
    fn set_handler_standing(
        &mut self,
        handler: HandlerId,
        text: Option<&str>,
        at: Timestamp,
    ) -> R<()> {
        Err(unported("set_handler_standing"))
    }
    fn handler_standing(&mut self, handler: HandlerId) -> R<Option<String>> {
        Err(unported("handler_standing"))
    }
    fn set_handler_keep_warm(
        &mut self,
        handler: HandlerId,
        source: &str,
        ms: Option<i64>,
        at: Timestamp,
    ) -> R<()> {
        Err(unported("set_handler_keep_warm"))
    }
    fn handler_keep_warm(&mut self, handler: HandlerId) -> R<Vec<(String, i64)>> {
        Err(unported("handler_keep_warm"))
    }
}
