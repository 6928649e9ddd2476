//! An organisation's HTTP tool: the daemon makes the
//! call the `.tool` file describes — base URL plus endpoint, `{param}`
//! segments filled from the input (percent-encoded: a value never adds a
//! path segment, a query or a fragment), the `query` fields as query
//! parameters, the `body` fields as a JSON object (POST) — and maps the
//! JSON answer onto the output (`output` JSON pointers, else the top-level
//! fields the output format names).
//!
//! The destination passes the calling agent's egress rule
//! (`egress::authorize_agent`: the handler's `egress` capabilities, a name
//! resolved once and refused if local, the connection recorded in the
//! handler's audit log), and the request goes to the addresses checked,
//! not to a second resolution. No redirect is followed; the answer is
//! bounded in time (`timeoutMs`) and size.

use std::collections::BTreeMap;
use std::time::Duration;

use agency_config::secrets::ExposeSecret;
use agency_core::Principal;
use agency_core::egress::{EgressTarget, Host};
use agency_mcp::OrgToolFailure;
use agency_org::{HttpTool, Tool};
use serde_json::{Map, Value};

use crate::org_tools::CallCtx;

/// The largest answer read (bytes).
pub(crate) const MAX_RESPONSE_BYTES: usize = 4 << 20;
/// How much of a failed answer the agent is shown.
const ERROR_BODY_CHARS: usize = 300;

/// Make the call; the output (not yet validated).
pub(crate) async fn call(
    ctx: &CallCtx,
    who: Principal,
    tool: &Tool,
    h: &HttpTool,
    args: &Value,
) -> Result<Value, OrgToolFailure> {
    let input = args.as_object().cloned().unwrap_or_default();
    let url = build_url(tool, h, &input)?;
    let host = url.host_str().unwrap_or_default().to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let target = EgressTarget::new(&bare, port).map_err(|e| {
        OrgToolFailure::new(
            "failed",
            format!(
                "failed to call tool {}: its baseUrl host is not usable: {e}",
                tool.name
            ),
        )
    })?;
    let addrs = agency_egress::authorize_agent(&ctx.svc, who, &target)
        .await
        .map_err(|m| {
            OrgToolFailure::new(
                "permission_denied",
                format!("failed to call tool {}: {m}", tool.name),
            )
        })?;
    let timeout = Duration::from_millis(h.timeout_ms);
    let mut client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .user_agent(concat!("agency/", env!("CARGO_PKG_VERSION")));
    if let Host::Name(name) = &target.host {
        // The connection goes to the addresses the egress rule checked.
        client = client.resolve_to_addrs(name, &addrs);
    }
    let client = client.build().map_err(|e| internal(tool, &e.to_string()))?;
    let mut req = match h.method.as_str() {
        "POST" => {
            let body: Map<String, Value> = h
                .body
                .iter()
                .filter_map(|f| input.get(f).map(|v| (f.clone(), v.clone())))
                .collect();
            client.post(url.clone()).json(&Value::Object(body))
        }
        _ => client.get(url.clone()),
    };
    req = req.header(reqwest::header::ACCEPT, "application/json");
    // The tool's headers, secrets filled in: on this request only, marked
    // sensitive (never logged), and never in an error (which names the
    // header, not its value).
    for (name, template) in &h.headers {
        let what = format!("header {name}");
        let value = crate::org_tools::fill_secrets(tool, &what, template, &ctx.secrets)?;
        let mut v = reqwest::header::HeaderValue::from_str(value.expose_secret()).map_err(|_| {
            internal(
                tool,
                &format!("its {what} is not a valid header value once its secrets are filled in (a secret holding a line break?)"),
            )
        })?;
        v.set_sensitive(true);
        req = req.header(name.as_str(), v);
    }
    let failed = |what: String| {
        OrgToolFailure::new(
            "failed",
            format!("failed to call tool {}: {what}", tool.name),
        )
    };
    let started = tokio::time::Instant::now();
    let mut resp = req.send().await.map_err(|e| {
        if e.is_timeout() {
            OrgToolFailure::new(
                "timeout",
                format!(
                    "failed to call tool {}: no answer from {target} within {} ms",
                    tool.name, h.timeout_ms
                ),
            )
        } else {
            failed(format!("the request to {target} failed: {e}"))
        }
    })?;
    let status = resp.status();
    let mut body = Vec::new();
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        let chunk = tokio::time::timeout(left, resp.chunk())
            .await
            .map_err(|_| {
                OrgToolFailure::new(
                    "timeout",
                    format!(
                        "failed to call tool {}: the answer from {target} took over {} ms",
                        tool.name, h.timeout_ms
                    ),
                )
            })?
            .map_err(|e| failed(format!("reading the answer from {target} failed: {e}")))?;
        let Some(chunk) = chunk else { break };
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(failed(format!(
                "the answer from {target} is over {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        let text: String = String::from_utf8_lossy(&body)
            .chars()
            .take(ERROR_BODY_CHARS)
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        return Err(failed(format!("{target} answered HTTP {status}: {text}")));
    }
    let answer: Value = serde_json::from_slice(&body)
        .map_err(|e| failed(format!("the answer from {target} is not JSON: {e}")))?;
    Ok(map_output(tool, h, &answer))
}

/// The URL: base URL, its path, the endpoint with `{param}` filled, the
/// query parameters.
pub(crate) fn build_url(
    tool: &Tool,
    h: &HttpTool,
    input: &Map<String, Value>,
) -> Result<reqwest::Url, OrgToolFailure> {
    let base = reqwest::Url::parse(&h.base_url).map_err(|e| {
        internal(
            tool,
            &format!("its baseUrl {:?} does not parse: {e}", h.base_url),
        )
    })?;
    if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
        return Err(internal(
            tool,
            "its baseUrl is not an http(s) URL with a host",
        ));
    }
    let endpoint = fill(tool, &h.endpoint, input)?;
    let mut url = base.clone();
    let prefix = base.path().trim_end_matches('/');
    url.set_path(&format!("{prefix}{endpoint}"));
    url.set_query(None);
    url.set_fragment(None);
    let mut pairs: Vec<(String, String)> = base
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    for f in &h.query {
        match input.get(f) {
            None | Some(Value::Null) => {}
            Some(v) => pairs.push((f.clone(), scalar(v))),
        }
    }
    if !pairs.is_empty() {
        url.query_pairs_mut().extend_pairs(pairs);
    }
    Ok(url)
}

/// The endpoint with each `{name}` replaced by the input field `name`,
/// percent-encoded (everything but RFC 3986's unreserved characters). A
/// segment that would then be `.` or `..` is refused: URL parsers resolve
/// those, and the value would climb out of the endpoint.
fn fill(tool: &Tool, endpoint: &str, input: &Map<String, Value>) -> Result<String, OrgToolFailure> {
    let mut out = String::with_capacity(endpoint.len());
    let mut rest = endpoint;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(internal(tool, "its endpoint has a '{' without '}'"));
        };
        let name = &after[..close];
        let value = match input.get(name) {
            None | Some(Value::Null) => {
                return Err(OrgToolFailure::new(
                    "invalid_input",
                    format!(
                        "failed to call tool {}: the endpoint needs field {name}; call it again with {name}",
                        tool.name
                    ),
                ));
            }
            Some(v) => scalar(v),
        };
        out.push_str(&encode(&value));
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    for seg in out.split('/') {
        let s = seg.to_ascii_lowercase().replace("%2e", ".");
        if s == "." || s == ".." {
            return Err(OrgToolFailure::new(
                "invalid_input",
                format!(
                    "failed to call tool {}: a path parameter may not be \".\" or \"..\"",
                    tool.name
                ),
            ));
        }
    }
    Ok(out)
}

/// A value as text in a URL: strings as they are, anything else as JSON.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The output: each `output` field from its JSON pointer (a pointer that
/// finds nothing leaves the field out, for the output schema to judge), or
/// without `output` the answer's top-level fields the output format names.
fn map_output(tool: &Tool, h: &HttpTool, answer: &Value) -> Value {
    let mut out = Map::new();
    if h.output.is_empty() {
        let fields: BTreeMap<&String, &String> = tool.interface.output_format.iter().collect();
        for name in fields.keys() {
            if let Some(v) = answer.get(name.as_str()) {
                out.insert((*name).clone(), v.clone());
            }
        }
    } else {
        for (field, pointer) in &h.output {
            if let Some(v) = answer.pointer(pointer) {
                out.insert(field.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn internal(tool: &Tool, why: &str) -> OrgToolFailure {
    OrgToolFailure::new(
        "internal",
        format!(
            "failed to call tool {}: {why}; ask the user to fix the .tool file",
            tool.name
        ),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tool(endpoint: &str, query: &[&str]) -> (Tool, HttpTool) {
        let h = HttpTool {
            base_url: "https://api.example-weather.com/v1/".into(),
            endpoint: endpoint.into(),
            method: "GET".into(),
            query: query.iter().map(|s| s.to_string()).collect(),
            body: vec![],
            output: BTreeMap::new(),
            headers: BTreeMap::new(),
            timeout_ms: 1000,
        };
        let t: Tool = serde_json::from_value(serde_json::json!({
            "name": "W", "implementation": {"type": "http", "baseUrl": h.base_url,
            "endpoint": h.endpoint, "method": "GET"},
            "interface": {"inputFormat": {}, "outputFormat": {"temp": "number"},
              "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}},
            "source": {"file": "W.tool", "line": 1}
        }))
        .unwrap();
        (t, h)
    }

    fn input(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn params_are_encoded_never_injected() {
        let (t, h) = tool("/current/{city}", &["location", "n"]);
        let u = build_url(
            &t,
            &h,
            &input(
                serde_json::json!({"city": "../admin?x=1#f", "location": "New York&a=b", "n": 3}),
            ),
        )
        .unwrap();
        assert_eq!(u.host_str(), Some("api.example-weather.com"));
        assert_eq!(u.path(), "/v1/current/..%2Fadmin%3Fx%3D1%23f");
        assert_eq!(u.fragment(), None);
        let q: Vec<(String, String)> = u.query_pairs().map(|(a, b)| (a.into(), b.into())).collect();
        assert_eq!(
            q,
            [
                ("location".into(), "New York&a=b".into()),
                ("n".into(), "3".into())
            ]
        );
        for dots in ["..", "."] {
            let e = build_url(&t, &h, &input(serde_json::json!({"city": dots}))).unwrap_err();
            assert_eq!(e.kind, "invalid_input", "{dots}: {e:?}");
        }
        // An encoded dot is a literal: the server sees %252e, not a dot.
        let u = build_url(&t, &h, &input(serde_json::json!({"city": "%2e%2e"}))).unwrap();
        assert_eq!(u.path(), "/v1/current/%252e%252e");
        let e = build_url(&t, &h, &input(serde_json::json!({}))).unwrap_err();
        assert!(e.message.contains("field city"), "{e:?}");
    }

    #[test]
    fn output_is_mapped_by_pointer_or_top_level_fields() {
        let (t, mut h) = tool("/current", &[]);
        let answer = serde_json::json!({"temp": 1.5, "secret": "x", "main": {"t": 2}});
        assert_eq!(
            map_output(&t, &h, &answer),
            serde_json::json!({"temp": 1.5})
        );
        h.output.insert("temp".into(), "/main/t".into());
        assert_eq!(map_output(&t, &h, &answer), serde_json::json!({"temp": 2}));
    }
}
