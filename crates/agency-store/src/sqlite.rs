//! SQLite backend (placeholder until the real implementation lands).

use std::path::Path;

use crate::error::StoreError;
use crate::store::Store;
use crate::tx::Tx;

#[derive(Debug)]
pub struct SqliteStore {}

impl SqliteStore {
    pub fn open(_path: &Path) -> Result<SqliteStore, StoreError> {
        Err(StoreError::backend("open database", "not implemented yet"))
    }
}

impl Store for SqliteStore {
    fn read_dyn(&self, _f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>) -> Result<(), StoreError> {
        Err(StoreError::backend("read", "not implemented yet"))
    }
    fn write_dyn(&self, _f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>) -> Result<(), StoreError> {
        Err(StoreError::backend("write", "not implemented yet"))
    }
}
