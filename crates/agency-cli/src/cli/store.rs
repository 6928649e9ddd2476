//! Arguments of `agency store`: the store itself, apart from what it holds.

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy this home's SQLite store (rows and blobs) into an empty
    /// PostgreSQL database, then check the copy with fsck. The SQLite store
    /// is only read. Stop the daemon first. Point the home at the copy
    /// afterwards with `[store] url` in agency.toml or AGENCY_STORE_URL.
    Migrate(StoreMigrateArgs),
}

#[derive(Debug, Args)]
pub struct StoreMigrateArgs {
    /// The PostgreSQL database to copy into: `postgres://user@host:port/db`
    /// (it must exist and be empty; its schema is created).
    #[arg(long, value_name = "URL")]
    pub to: String,
}
