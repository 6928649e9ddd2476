//! An applied organisation's tools against a real daemon (port 0, the
//! sandbox off) and an MCP client holding the root handler's agent token:
//! the fixture the organisation-tool tests share.

// Shared by several test binaries, each of which uses only part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use agency_core::{CapabilityId, HandlerId, Level, Principal, Resource};
use agency_daemon::Daemon;
use agency_org::Tool;
use agency_service::{GrantRequest, System};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use super::fixture::{home_with_config, start};

pub type Client = RunningService<RoleClient, ()>;

pub struct Org {
    pub dir: tempfile::TempDir,
    pub daemon: Daemon,
    pub svc: Arc<System>,
    pub root: HandlerId,
    pub client: Client,
}

impl Org {
    /// A daemon with organisation `org`'s `tools` installed.
    pub async fn start(org: &str, tools: &[Tool]) -> Org {
        let (dir, home) = home_with_config("[agents]\nsandbox = \"off\"\n");
        let (daemon, svc, root) = start(&home).await;
        svc.org_tools_install(Principal::User, org, tools).unwrap();
        let minted = svc.token_mint(Principal::User, root, None).unwrap();
        let cfg =
            StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", daemon.addr()))
                .auth_header(minted.token.clone());
        let client = ().serve(StreamableHttpClientTransport::from_config(cfg)).await.unwrap();
        Org {
            dir,
            daemon,
            svc,
            root,
            client,
        }
    }

    pub fn grant(&self, kind: &str, key: &str) -> CapabilityId {
        self.svc
            .grant(
                Principal::User,
                self.root,
                &GrantRequest {
                    resource: Resource::from_parts(kind, key).unwrap(),
                    level: Level::Read,
                    delegatable: false,
                },
            )
            .unwrap()
    }

    pub async fn names(&self) -> Vec<String> {
        self.client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(args) = args else { panic!() };
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
            .await
            .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
    }

    pub fn egress_log(&self) -> Vec<String> {
        self.svc
            .audit_read(Principal::User, Some(self.root))
            .unwrap()
            .into_iter()
            .map(|e| e.summary)
            .filter(|s| s.starts_with("egress"))
            .collect()
    }

    /// How many `run/tool-*` directories of calls are left in `home`.
    pub fn run_dirs(&self, home: &Path) -> usize {
        std::fs::read_dir(home.join("run"))
            .map(|d| {
                d.filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("tool-"))
                })
                .count()
            })
            .unwrap_or(0)
    }

    pub async fn stop(self) {
        let _ = self.client.cancel().await;
        self.daemon.stop().await.unwrap();
    }
}

pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[track_caller]
pub fn failed(r: &CallToolResult, kind: &str) -> String {
    let t = text(r);
    assert_eq!(r.is_error, Some(true), "expected an error: {t}");
    assert!(t.starts_with(&format!("[{kind}]")), "expected {kind}: {t}");
    t
}
