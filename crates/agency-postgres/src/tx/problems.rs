//! [`ProblemTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::Timestamp;
use agency_store::problems::ProblemRow;
use agency_store::tx::ProblemTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl ProblemTx for PgTx<'_> {
    fn open_problem(&mut self, p: &ProblemRow) -> R<Option<i64>> {
        Err(unported("open_problem"))
    }
    fn close_problem(&mut self, id: i64, at: Timestamp) -> R<bool> {
        Err(unported("close_problem"))
    }
    fn open_problems(&mut self, limit: usize) -> R<Vec<ProblemRow>> {
        Err(unported("open_problems"))
    }
    fn recent_problems(&mut self, limit: usize) -> R<Vec<ProblemRow>> {
        Err(unported("recent_problems"))
    }
}
