//! What Agency's MCP tools return to agents, where a tool's answer is not
//! already one of the views (a tool returning a view, such as
//! `outcome_view` or `delegate`, sends that view as it is). Each type
//! names the tools that return it; the agent reads it as JSON, so a field
//! renamed here changes what every agent reads.
//!
//! Paged answers carry the cursor of the next page as `next_after`, absent
//! on the last page (`run_list`'s `next_before` is `null` there instead).

use agency_core::access::FileKind;
use agency_core::status::MemoryState;
use agency_core::{
    CapabilityId, FileId, HandlerId, MailTarget, MemoryId, MessageId, OutcomeId, Timestamp,
};
use serde::{Deserialize, Serialize};

use crate::{
    Capability, FileInfo, HistoryEvent, KbAuditEntry, LogEntry, MailHeader, MessageView,
    OutcomeBrief, RunView, VersionInfo,
};

/// `kb_read`, `kb_read_version` and `state_read`: a file at one version
/// with its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbFileContent {
    pub file: FileId,
    pub kind: FileKind,
    pub description: String,
    pub version: i64,
    /// The content's hash (`blake3:…`): `kb_write` and `state_write` need
    /// it with `version`.
    pub hash: String,
    pub created_at: Timestamp,
    pub encoding: ContentEncoding,
    pub content: String,
}

/// How [`KbFileContent::content`] holds the file's bytes: text when they
/// are UTF-8, base64 otherwise (binary content must survive JSON intact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContentEncoding {
    #[serde(rename = "utf-8")]
    Utf8,
    /// Standard alphabet, padded.
    #[serde(rename = "base64")]
    Base64,
}

/// `kb_list` and `kb_browse`: one page of files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbFilesPage {
    pub files: Vec<FileInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<FileId>,
}

/// `kb_history`: one page of a file's versions, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbHistoryPage {
    pub file: FileId,
    pub versions: Vec<VersionInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<i64>,
}

/// `kb_create`: the new file, at version 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbCreated {
    pub file: FileId,
    pub version: i64,
    pub hash: String,
    /// The content's size in bytes.
    pub size: u64,
}

/// `kb_audit`: a file's access log, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbAuditLog {
    pub file: FileId,
    pub entries: Vec<KbAuditEntry>,
}

/// `audit_read`: one page of a handler's audit log, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    pub handler: HandlerId,
    pub entries: Vec<LogEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<i64>,
}

/// `audit_submit`: the summary was appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditSubmitted {
    /// Always true: a refusal is an error result.
    pub submitted: bool,
}

/// `mail_send`: the message sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailSent {
    pub message: MessageId,
    pub to: MailTarget,
}

/// `mail_send_deferred`: the message and when it will be delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailScheduled {
    pub message: MessageId,
    pub to: MailTarget,
    pub deliver_at: Timestamp,
    /// `deliver_at` as an RFC 3339 time, for the agent to read.
    pub deliver_at_rfc3339: String,
}

/// `mail_inbox`: one page of delivered, unacknowledged messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxPage {
    pub messages: Vec<MessageView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<MessageId>,
}

/// `mail_ack`: how many messages were acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailAcked {
    pub acknowledged: u64,
}

/// `mail_wait`: why the wait ended, as `{"status": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MailWait {
    /// Mail is waiting (at most a few headers: read it with `mail_inbox`).
    Mail { messages: Vec<MailHeader> },
    /// Nothing came within the timeout.
    Timeout,
    /// Agency needs the agent's slot: it saves its state and ends its run.
    Released,
}

/// `memory_store`: the memory stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStored {
    pub id: MemoryId,
    pub kind: Option<String>,
    pub tags: Vec<String>,
    pub created_at: Timestamp,
}

/// `memory_search`: the matching memories, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryHits {
    pub memories: Vec<MemoryHit>,
}

/// One memory found by `memory_search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryHit {
    pub id: MemoryId,
    pub text: String,
    pub tags: Vec<String>,
    pub kind: Option<String>,
    /// When it was stored, as an RFC 3339 time.
    pub created_at: String,
    pub score: Option<f64>,
}

/// `memory_forget`: the memory and its state now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryForgotten {
    pub id: MemoryId,
    pub state: MemoryState,
}

/// `outcome_create`: the new outcome (also its KB file's UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCreated {
    pub outcome: OutcomeId,
}

/// `outcome_ancestors`: every "why?" chain from the outcome up to a root,
/// each from the outcome upwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeChains {
    pub outcome: OutcomeId,
    pub chains: Vec<Vec<OutcomeBrief>>,
}

/// `outcome_history`: one page of an outcome's history, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeHistoryPage {
    pub outcome: OutcomeId,
    pub events: Vec<HistoryEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<i64>,
}

/// `outcome_list`: the outcomes a handler is responsible for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerOutcomes {
    pub handler: HandlerId,
    pub outcomes: Vec<OutcomeBrief>,
}

/// `permissions_list`: the caller's handler's live capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityList {
    pub capabilities: Vec<Capability>,
}

/// `permissions_grant`: the new capability and its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    pub capability: CapabilityId,
    pub handler: HandlerId,
}

/// `repo_clone`: where the clone was made from and to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoCloned {
    pub repo: String,
    /// The new directory, relative to the workspace.
    pub dest: String,
    /// What was cloned (the repo cache's mirror).
    pub source: String,
}

/// `repo_push`: the ref written on the origin and its commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoPushed {
    pub repo: String,
    /// The local branch pushed.
    pub branch: String,
    /// `agency/<handler>/<name>`: the branch on the origin.
    pub remote_branch: String,
    /// `refs/heads/` and `remote_branch`.
    #[serde(rename = "ref")]
    pub remote_ref: String,
    /// The commit's hex object id.
    pub commit: String,
}

/// `run_list`: one page of agent runs, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunsPage {
    pub runs: Vec<RunView>,
    /// Pass as `before` for the next page; `null` on the last.
    pub next_before: Option<Timestamp>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(n: u128) -> uuid::Uuid {
        uuid::Uuid::from_u128(n)
    }

    #[test]
    fn mail_wait_is_a_status_with_messages_only_for_mail() {
        assert_eq!(
            serde_json::to_value(MailWait::Timeout).unwrap(),
            json!({"status": "timeout"})
        );
        assert_eq!(
            serde_json::to_value(MailWait::Released).unwrap(),
            json!({"status": "released"})
        );
        let mail = MailWait::Mail {
            messages: vec![MailHeader {
                id: MessageId(id(1)),
                from: MailTarget::User,
                subject: "s".into(),
            }],
        };
        let v = serde_json::to_value(&mail).unwrap();
        assert_eq!(v["status"], "mail");
        assert_eq!(v["messages"][0]["subject"], "s");
        assert_eq!(serde_json::from_value::<MailWait>(v).unwrap(), mail);
    }

    #[test]
    fn a_last_page_has_no_cursor_key() {
        let last = KbHistoryPage {
            file: FileId(id(1)),
            versions: vec![],
            next_after: None,
        };
        let v = serde_json::to_value(&last).unwrap();
        assert!(v.get("next_after").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<KbHistoryPage>(v).unwrap(), last);
        let more = KbHistoryPage {
            next_after: Some(7),
            ..last
        };
        assert_eq!(serde_json::to_value(&more).unwrap()["next_after"], 7);
        // `run_list` says "no more" with null instead.
        let runs = RunsPage {
            runs: vec![],
            next_before: None,
        };
        assert_eq!(
            serde_json::to_value(&runs).unwrap(),
            json!({"runs": [], "next_before": null})
        );
    }

    #[test]
    fn wire_names_that_differ_from_the_fields() {
        let pushed = RepoPushed {
            repo: "r".into(),
            branch: "b".into(),
            remote_branch: "agency/h/b".into(),
            remote_ref: "refs/heads/agency/h/b".into(),
            commit: "c".into(),
        };
        let v = serde_json::to_value(&pushed).unwrap();
        assert_eq!(v["ref"], "refs/heads/agency/h/b");
        assert!(v.get("remote_ref").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<RepoPushed>(v).unwrap(), pushed);
        for (e, name) in [
            (ContentEncoding::Utf8, "utf-8"),
            (ContentEncoding::Base64, "base64"),
        ] {
            assert_eq!(serde_json::to_value(e).unwrap(), name);
        }
    }
}
