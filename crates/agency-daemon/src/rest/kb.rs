//! REST routes for the user to put a file into the Knowledge Base (`agency
//! kb put`): `POST /v1/kb` with `{"description", "content"}` creates a
//! document, `POST /v1/kb/{id}` with `{"content", "base_version",
//! "base_hash"}` writes a new version of one (compare-and-set, like
//! `kb_write`). One service call as the user each: the service checks the
//! description, the size (`limits.max_file_bytes`) and the file's kind.
//! The content is text, as over MCP.

use std::sync::Arc;

use agency_core::FileId;
use axum::extract::{Path, State};
use serde::Deserialize;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, call, parse};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBody {
    description: String,
    content: String,
}

pub(crate) async fn create(
    State(st): State<Arc<AppState>>,
    axum::Json(b): axum::Json<CreateBody>,
) -> Answer {
    Ok(call(&st.svc, move |svc| {
        let id = svc.kb_create(USER, &b.description, b.content.as_bytes())?;
        Ok(agency_api::FileCreated { id, version: 1 })
    })
    .await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteBody {
    content: String,
    base_version: i64,
    base_hash: String,
}

pub(crate) async fn write(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<WriteBody>,
) -> Answer {
    let id: FileId = parse("file", &id)?;
    Ok(call(&st.svc, move |svc| {
        svc.kb_write(USER, id, b.content.as_bytes(), b.base_version, &b.base_hash)
    })
    .await)
}
