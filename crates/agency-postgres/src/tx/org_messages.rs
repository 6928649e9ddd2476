//! [`OrgMessageTx`] on PostgreSQL: talking to an agency from outside
//! (`org_keys`, `org_messages`).
//!
//! Messages are listed in the order they were stored: by `seq`, the
//! identity column standing in for SQLite's rowid.

use agency_core::{ConversationId, MessageId, OrgKeyId, OrgMessageId, Timestamp};
use agency_store::StoreError;
use agency_store::org_messages::{OrgKeyRow, OrgMessageRow, OrgMessageStatus};
use agency_store::tx::OrgMessageTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! key_cols {
    () => {
        "id, agency, key_hash, prefix, created_at, revoked_at"
    };
}

fn key_row(r: &Row) -> R<OrgKeyRow> {
    Ok(OrgKeyRow {
        id: col_id(r, 0, "agency key id")?,
        agency: col(r, 1, "agency key agency")?,
        key_hash: col(r, 2, "agency key hash")?,
        prefix: col(r, 3, "agency key prefix")?,
        created_at: col_ts(r, 4, "agency key created_at")?,
        revoked_at: col_opt_ts(r, 5, "agency key revoked_at")?,
    })
}

macro_rules! org_message_cols {
    () => {
        "id, agency, conversation, mail_message_id, text, reply_text, \
         reply_message_id, status, created_at, answered_at, key_id"
    };
}

fn org_message_row(r: &Row) -> R<OrgMessageRow> {
    let status: String = col(r, 7, "agency message status")?;
    Ok(OrgMessageRow {
        id: col_id(r, 0, "agency message id")?,
        agency: col(r, 1, "agency message agency")?,
        conversation: col_id(r, 2, "agency message conversation")?,
        mail_message_id: col_id(r, 3, "agency message mail id")?,
        text: col(r, 4, "agency message text")?,
        reply_text: col(r, 5, "agency message reply")?,
        reply_message_id: col_opt_id(r, 6, "agency message reply id")?,
        status: OrgMessageStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("agency message status", status))?,
        created_at: col_ts(r, 8, "agency message created_at")?,
        answered_at: col_opt_ts(r, 9, "agency message answered_at")?,
        key_id: col_opt_id(r, 10, "agency message key id")?,
    })
}

impl OrgMessageTx for PgTx<'_> {
    fn insert_org_key(&mut self, k: &OrgKeyRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO org_keys (",
                key_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6)"
            ),
            &[
                &k.id.to_string(),
                &k.agency,
                &k.key_hash,
                &k.prefix,
                &k.created_at.0,
                &k.revoked_at.map(|t| t.0),
            ],
            || format!("insert API key {} of agency {}", k.id, k.agency),
        )
        .map(drop)
    }

    fn org_key(&mut self, id: OrgKeyId) -> R<Option<OrgKeyRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", key_cols!(), " FROM org_keys WHERE id = $1"),
            &[&id.to_string()],
            || format!("read API key {id}"),
            key_row,
        )
    }

    fn org_key_by_hash(&mut self, hash: &str) -> R<Option<OrgKeyRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", key_cols!(), " FROM org_keys WHERE key_hash = $1"),
            &[&hash],
            || "look up an API key by its hash".to_owned(),
            key_row,
        )
    }

    fn org_keys(&mut self, agency: Option<&str>) -> R<Vec<OrgKeyRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                key_cols!(),
                " FROM org_keys WHERE $1::TEXT IS NULL OR agency = $1
                 ORDER BY agency, created_at, id"
            ),
            &[&agency],
            || "list API keys".to_owned(),
            key_row,
        )
    }

    fn revoke_org_key(&mut self, id: OrgKeyId, at: Timestamp) -> R<bool> {
        let n = execute(
            self.conn,
            "UPDATE org_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            &[&id.to_string(), &at.0],
            || format!("revoke API key {id}"),
        )?;
        Ok(n == 1)
    }

    fn insert_org_message(&mut self, m: &OrgMessageRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO org_messages (",
                org_message_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            ),
            &[
                &m.id.to_string(),
                &m.agency,
                &m.conversation.to_string(),
                &m.mail_message_id.to_string(),
                &m.text,
                &m.reply_text,
                &opt_text(m.reply_message_id),
                &m.status.as_str(),
                &m.created_at.0,
                &m.answered_at.map(|t| t.0),
                &opt_text(m.key_id),
            ],
            || format!("insert message {} to agency {}", m.id, m.agency),
        )
        .map(drop)
    }

    fn org_message(&mut self, id: OrgMessageId) -> R<Option<OrgMessageRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                org_message_cols!(),
                " FROM org_messages WHERE id = $1"
            ),
            &[&id.to_string()],
            || format!("read agency message {id}"),
            org_message_row,
        )
    }

    fn org_message_by_mail(&mut self, mail: MessageId) -> R<Option<OrgMessageRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                org_message_cols!(),
                " FROM org_messages WHERE mail_message_id = $1"
            ),
            &[&mail.to_string()],
            || format!("find the agency message carried by mail {mail}"),
            org_message_row,
        )
    }

    /// The last `n` messages of a conversation, returned oldest first. In the
    /// order they were stored (`seq`): two may share a millisecond.
    fn org_conversation(&mut self, conv: ConversationId, n: usize) -> R<Vec<OrgMessageRow>> {
        let mut rows = query_rows(
            self.conn,
            concat!(
                "SELECT ",
                org_message_cols!(),
                " FROM org_messages WHERE conversation = $1
                 ORDER BY seq DESC LIMIT $2"
            ),
            &[&conv.to_string(), &limit(n)],
            || format!("read conversation {conv}"),
            org_message_row,
        )?;
        rows.reverse();
        Ok(rows)
    }

    /// The last `n` messages from outside (of `agency`, or of all), newest
    /// first, in the order they were stored.
    fn org_messages_recent(&mut self, agency: Option<&str>, n: usize) -> R<Vec<OrgMessageRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                org_message_cols!(),
                " FROM org_messages WHERE $1::TEXT IS NULL OR agency = $1
                 ORDER BY seq DESC LIMIT $2"
            ),
            &[&agency, &limit(n)],
            || "list the messages from outside".to_owned(),
            org_message_row,
        )
    }

    /// Messages of API key `key` still pending (the partial index
    /// `org_messages_pending_by_key` holds exactly these rows).
    fn org_messages_pending_of_key(&mut self, key: OrgKeyId) -> R<u64> {
        let n: i64 = query_value(
            self.conn,
            "SELECT COUNT(*) FROM org_messages WHERE key_id = $1 AND status = 'pending'",
            &[&key.to_string()],
            || format!("count the pending messages of API key {key}"),
        )?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Record the reply if the message is still pending; whether it was.
    fn set_org_message_answered(
        &mut self,
        id: OrgMessageId,
        reply: &str,
        reply_message: MessageId,
        at: Timestamp,
    ) -> R<bool> {
        let n = execute(
            self.conn,
            "UPDATE org_messages SET status = 'answered', reply_text = $2, reply_message_id = $3,
                    answered_at = $4
             WHERE id = $1 AND status = 'pending'",
            &[&id.to_string(), &reply, &reply_message.to_string(), &at.0],
            || format!("record the reply to agency message {id}"),
        )?;
        Ok(n == 1)
    }
}
