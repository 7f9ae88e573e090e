//! OpenTelemetry traces of turns and tool calls (`[telemetry] otlp_endpoint`, off by
//! default): a span per turn and a child span per tool call, with the session, model and
//! outcome as attributes — never a prompt, an argument or an output. Exported in batches over
//! OTLP/HTTP with the JSON encoding (`POST {endpoint}/v1/traces`), which every OpenTelemetry
//! collector accepts; an export that fails is logged and dropped, never retried into memory.
//!
//! - [`export`]: the batching exporter.

pub mod export;

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{Value, json};

pub use export::Exporter;

/// `[telemetry]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://otel-collector:4318`); traces go to its
    /// `/v1/traces`. Absent: no traces.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the spans (default `amberd`).
    pub service_name: Option<String>,
}

impl TelemetryConfig {
    /// The endpoint is an http(s) URL.
    pub fn check(&self) -> Result<(), String> {
        if let Some(endpoint) = &self.otlp_endpoint {
            let url = url::Url::parse(endpoint)
                .map_err(|e| format!("[telemetry] otlp_endpoint `{endpoint}`: {e}"))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(format!(
                    "[telemetry] otlp_endpoint `{endpoint}`: OTLP/HTTP needs an http or https URL"
                ));
            }
        }
        Ok(())
    }
}

/// One finished span, as OTLP's JSON encoding has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(&'static str, String)>,
    /// The outcome: `false` marks the span an error.
    pub ok: bool,
}

impl Span {
    fn to_json(&self) -> Value {
        let attributes: Vec<Value> = self
            .attributes
            .iter()
            .map(|(key, value)| json!({"key": key, "value": {"stringValue": value}}))
            .collect();
        let mut span = json!({
            "traceId": hex(&self.trace_id),
            "spanId": hex(&self.span_id),
            "name": self.name,
            // SPAN_KIND_INTERNAL
            "kind": 1,
            "startTimeUnixNano": self.start_ns.to_string(),
            "endTimeUnixNano": self.end_ns.to_string(),
            "attributes": attributes,
            // STATUS_CODE_OK / STATUS_CODE_ERROR
            "status": {"code": if self.ok { 1 } else { 2 }},
        });
        if let Some(parent) = &self.parent {
            span["parentSpanId"] = Value::from(hex(parent));
        }
        span
    }
}

/// A batch of spans as an `ExportTraceServiceRequest` in OTLP's JSON encoding.
pub fn request_body(service: &str, spans: &[Span]) -> Value {
    json!({
        "resourceSpans": [{
            "resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": service}},
                {"key": "service.version", "value": {"stringValue": env!("CARGO_PKG_VERSION")}},
            ]},
            "scopeSpans": [{
                "scope": {"name": "amberd", "version": env!("CARGO_PKG_VERSION")},
                "spans": spans.iter().map(Span::to_json).collect::<Vec<_>>(),
            }],
        }],
    })
}

/// Now, in nanoseconds since the epoch.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A random id of `N` bytes, never all zero (OTLP's invalid id).
pub fn random_id<const N: usize>() -> [u8; N] {
    let mut id = [0u8; N];
    loop {
        for byte in &mut id {
            *byte = fastrand::u8(..);
        }
        if id.iter().any(|b| *b != 0) {
            return id;
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_is_encoded_as_otlp_json_with_hex_ids_and_string_times() {
        let span = Span {
            trace_id: [0xab; 16],
            span_id: [0x01; 8],
            parent: Some([0x02; 8]),
            name: "tool bash".to_owned(),
            start_ns: 1_700_000_000_000_000_000,
            end_ns: 1_700_000_000_500_000_000,
            attributes: vec![("amber.tool.outcome", "error".to_owned())],
            ok: false,
        };
        let body = request_body("amberd", &[span]);
        let span = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "ab".repeat(16));
        assert_eq!(span["spanId"], "0101010101010101");
        assert_eq!(span["parentSpanId"], "0202020202020202");
        assert_eq!(span["startTimeUnixNano"], "1700000000000000000");
        assert_eq!(span["status"]["code"], 2);
        assert_eq!(span["attributes"][0]["value"]["stringValue"], "error");
        assert_eq!(
            body["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
            "amberd"
        );
    }

    #[test]
    fn only_http_endpoints_are_accepted() {
        for (endpoint, ok) in [
            ("http://127.0.0.1:4318", true),
            ("https://otel.example.com", true),
            ("grpc://collector:4317", false),
            ("not a url", false),
        ] {
            let config = TelemetryConfig {
                otlp_endpoint: Some(endpoint.to_owned()),
                service_name: None,
            };
            assert_eq!(config.check().is_ok(), ok, "{endpoint}");
        }
    }
}
