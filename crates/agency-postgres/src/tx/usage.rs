//! [`UsageTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{AgentId, HandlerId};
use agency_store::model::{ModelCallRow, UsageTotals};
use agency_store::tx::R;
use agency_store::tx::UsageTx;

use crate::PgTx;
use crate::convert::unported;

impl UsageTx for PgTx<'_> {
    fn insert_model_call(&mut self, call: &ModelCallRow) -> R<()> {
        Err(unported("insert_model_call"))
    }
    fn model_usage_of(&mut self, handlers: &[HandlerId]) -> R<Vec<UsageTotals>> {
        Err(unported("model_usage_of"))
    }
    fn model_calls_of_agent(&mut self, agent: AgentId, limit: usize) -> R<Vec<ModelCallRow>> {
        Err(unported("model_calls_of_agent"))
    }
}
