//! `[telemetry]` in `agency.toml`: OpenTelemetry export of the event log
//! (traces and metrics over OTLP/HTTP, done by `agency-telemetry`). Off by
//! default, and no endpoint is ever implied unless it is switched on: then
//! the specification's default, `http://localhost:4318`.
//!
//! The standard variables win over the file, as the OpenTelemetry
//! specification says: `OTEL_EXPORTER_OTLP_ENDPOINT` (a base, `/v1/traces`
//! and `/v1/metrics` added), `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (used as they are),
//! `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`, values percent-decoded),
//! `OTEL_SERVICE_NAME`, `OTEL_SDK_DISABLED=true` (no export whatever the
//! file says), `OTEL_SEMCONV_STABILITY_OPT_IN` (`gen_ai_latest_experimental`)
//! and `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds). A variable alone never
//! switches export on: an inherited environment must not start sending
//! data anywhere; `enabled = true` in the file does.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The specification's default OTLP/HTTP endpoint.
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// `[telemetry]` as written in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySettings {
    /// Export traces and metrics (default: no).
    pub enabled: bool,
    /// The collector's OTLP/HTTP base URL (`/v1/traces`, `/v1/metrics`
    /// added); empty: `OTEL_EXPORTER_OTLP_ENDPOINT` or the default.
    pub endpoint: String,
    /// Headers sent with every export (an API key of a hosted collector:
    /// better in `OTEL_EXPORTER_OTLP_HEADERS`, out of the file).
    pub headers: BTreeMap<String, String>,
    /// `service.name` of the exported resource.
    pub service_name: String,
    /// Export prompt and answer content. The event log holds none, so
    /// nothing more is exported today; kept so that opting in is explicit.
    pub capture_content: bool,
    /// How often metrics are exported, in seconds.
    pub metrics_interval_secs: u64,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        TelemetrySettings {
            enabled: false,
            endpoint: String::new(),
            headers: BTreeMap::new(),
            service_name: "agency".to_owned(),
            capture_content: false,
            metrics_interval_secs: 60,
        }
    }
}

/// Which GenAI semantic conventions spans and metrics follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semconv {
    /// The pinned version, v1.37.0 (cache tokens as `agency.usage.*`).
    Pinned,
    /// `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`: the
    /// latest experimental attributes Agency knows (cache tokens as
    /// `gen_ai.usage.cache_read.input_tokens` and
    /// `gen_ai.usage.cache_creation.input_tokens`), the old ones not emitted.
    LatestExperimental,
}

/// What the exporter uses: the file and the environment resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub traces_url: String,
    pub metrics_url: String,
    pub headers: Vec<(String, String)>,
    pub service_name: String,
    pub capture_content: bool,
    pub semconv: Semconv,
    pub metrics_interval: Duration,
}

impl TelemetrySettings {
    /// The effective configuration, reading variables through `env`; `None`
    /// when export is off (the file's `enabled`, or `OTEL_SDK_DISABLED`).
    pub fn resolve(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TelemetryConfig>, String> {
        let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let disabled =
            var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if !self.enabled || disabled {
            return Ok(None);
        }
        let base = var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .map(|v| (v, "OTEL_EXPORTER_OTLP_ENDPOINT"))
            .or_else(|| {
                (!self.endpoint.is_empty()).then(|| (self.endpoint.clone(), "telemetry.endpoint"))
            })
            .unwrap_or_else(|| (DEFAULT_ENDPOINT.to_owned(), "the default endpoint"));
        check_url(&base.0, base.1)?;
        let signal = |key: &str, path: &str| -> Result<String, String> {
            match var(key) {
                Some(u) => check_url(&u, key).map(|()| u.trim().to_owned()),
                None => Ok(format!("{}{path}", base.0.trim().trim_end_matches('/'))),
            }
        };
        let traces_url = signal("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/v1/traces")?;
        let metrics_url = signal("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "/v1/metrics")?;
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in &self.headers {
            check_header(k, v, "telemetry.headers")?;
            headers.insert(k.to_ascii_lowercase(), v.clone());
        }
        if let Some(h) = var("OTEL_EXPORTER_OTLP_HEADERS") {
            for (k, v) in parse_headers(&h)? {
                headers.insert(k, v);
            }
        }
        let service_name = var("OTEL_SERVICE_NAME").unwrap_or_else(|| self.service_name.clone());
        let semconv = match var("OTEL_SEMCONV_STABILITY_OPT_IN") {
            Some(v)
                if v.split(',')
                    .any(|o| o.trim() == "gen_ai_latest_experimental") =>
            {
                Semconv::LatestExperimental
            }
            _ => Semconv::Pinned,
        };
        let interval_ms = match var("OTEL_METRIC_EXPORT_INTERVAL") {
            Some(v) => v.trim().parse::<u64>().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                format!("OTEL_METRIC_EXPORT_INTERVAL = {v:?} is not a positive number of milliseconds")
            })?,
            None => self.metrics_interval_secs.saturating_mul(1000),
        };
        Ok(Some(TelemetryConfig {
            traces_url,
            metrics_url,
            headers: headers.into_iter().collect(),
            service_name,
            capture_content: self.capture_content,
            semconv,
            metrics_interval: Duration::from_millis(interval_ms),
        }))
    }
}

/// Check `[telemetry]` as read from the file (the environment is checked
/// when the daemon starts, by [`TelemetrySettings::resolve`]).
pub(crate) fn validate(t: &TelemetrySettings) -> Result<(), String> {
    if !t.endpoint.is_empty() {
        check_url(&t.endpoint, "telemetry.endpoint")?;
    }
    for (k, v) in &t.headers {
        check_header(k, v, "telemetry.headers")?;
    }
    if t.service_name.trim().is_empty() {
        return Err("telemetry.service_name must not be empty".to_owned());
    }
    if t.metrics_interval_secs == 0 || t.metrics_interval_secs > 86_400 {
        return Err(format!(
            "telemetry.metrics_interval_secs = {} is out of range (1 to 86400)",
            t.metrics_interval_secs
        ));
    }
    Ok(())
}

fn check_url(u: &str, key: &str) -> Result<(), String> {
    let parsed =
        url::Url::parse(u.trim()).map_err(|e| format!("{key} = {u:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!(
            "{key} = {u:?} is not an http:// or https:// URL with a host (OTLP/HTTP, e.g. {DEFAULT_ENDPOINT})"
        ));
    }
    Ok(())
}

fn check_header(k: &str, v: &str, key: &str) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if k.is_empty() || !k.chars().all(token) {
        return Err(format!("{key}: {k:?} is not a valid header name"));
    }
    if v.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!(
            "{key}: the value of {k:?} holds a control character"
        ));
    }
    Ok(())
}

/// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs separated by commas,
/// values percent-encoded (the W3C Baggage format the specification names).
fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
    let key = "OTEL_EXPORTER_OTLP_HEADERS";
    let mut out = Vec::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!(
                "{key}: {pair:?} is not key=value (expected e.g. \"api-key=secret,x-team=a\")"
            ));
        };
        let (k, v) = (
            k.trim(),
            percent_decode(v.trim()).ok_or_else(|| {
                format!("{key}: the value of {k:?} is not valid percent-encoded UTF-8")
            })?,
        );
        check_header(k, &v, key)?;
        out.push((k.to_ascii_lowercase(), v));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> TelemetrySettings {
        TelemetrySettings {
            enabled: true,
            ..TelemetrySettings::default()
        }
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn off_by_default_and_a_variable_alone_does_not_switch_it_on() {
        let d = TelemetrySettings::default();
        assert_eq!(d.resolve(env(&[])).unwrap(), None);
        let e = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]);
        assert_eq!(d.resolve(e).unwrap(), None);
        let e = env(&[("OTEL_SDK_DISABLED", "true")]);
        assert_eq!(on().resolve(e).unwrap(), None);
    }

    #[test]
    fn env_wins_over_the_file_and_signal_endpoints_over_the_base() {
        let c = on().resolve(env(&[])).unwrap().unwrap();
        assert_eq!(c.traces_url, "http://localhost:4318/v1/traces");
        assert_eq!(c.metrics_url, "http://localhost:4318/v1/metrics");
        assert_eq!(c.semconv, Semconv::Pinned);
        assert_eq!(c.service_name, "agency");

        let mut file = on();
        file.endpoint = "http://file:4318/".into();
        file.service_name = "from-file".into();
        file.headers.insert("X-Team".into(), "file".into());
        file.headers.insert("x-keep".into(), "kept".into());
        let c = file.resolve(env(&[])).unwrap().unwrap();
        assert_eq!(c.traces_url, "http://file:4318/v1/traces");
        let c = file
            .resolve(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://env:4318/otlp"),
                ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:9/custom"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "x-team=env%20team, api-key=k1",
                ),
                ("OTEL_SERVICE_NAME", "from-env"),
                ("OTEL_METRIC_EXPORT_INTERVAL", "1500"),
                (
                    "OTEL_SEMCONV_STABILITY_OPT_IN",
                    "http, gen_ai_latest_experimental",
                ),
            ]))
            .unwrap()
            .unwrap();
        assert_eq!(c.traces_url, "https://env:4318/otlp/v1/traces");
        assert_eq!(c.metrics_url, "http://m:9/custom");
        assert_eq!(
            c.headers,
            vec![
                ("api-key".to_owned(), "k1".to_owned()),
                ("x-keep".to_owned(), "kept".to_owned()),
                ("x-team".to_owned(), "env team".to_owned()),
            ]
        );
        assert_eq!(c.service_name, "from-env");
        assert_eq!(c.metrics_interval, Duration::from_millis(1500));
        assert_eq!(c.semconv, Semconv::LatestExperimental);
        let other = on()
            .resolve(env(&[("OTEL_SEMCONV_STABILITY_OPT_IN", "http")]))
            .unwrap()
            .unwrap();
        assert_eq!(other.semconv, Semconv::Pinned);
    }

    #[test]
    fn bad_urls_and_headers_are_refused_naming_the_setting() {
        let e = on()
            .resolve(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")]))
            .unwrap_err();
        assert!(e.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{e}");
        let e = on()
            .resolve(env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://x/v1")]))
            .unwrap_err();
        assert!(e.contains("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), "{e}");
        let e = on()
            .resolve(env(&[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]))
            .unwrap_err();
        assert!(e.contains("not key=value"), "{e}");
        let e = on()
            .resolve(env(&[("OTEL_EXPORTER_OTLP_HEADERS", "bad name=1")]))
            .unwrap_err();
        assert!(e.contains("not a valid header name"), "{e}");
        let mut t = on();
        t.endpoint = "not a url".into();
        assert!(validate(&t).unwrap_err().contains("telemetry.endpoint"));
        let mut t = on();
        t.headers.insert("x".into(), "a\nb".into());
        assert!(validate(&t).unwrap_err().contains("control character"));
    }
}
