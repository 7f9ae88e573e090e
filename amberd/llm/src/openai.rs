//! The OpenAI chat-completions dialect, which every OpenAI-compatible server speaks:
//! `POST {base}/chat/completions` with bearer auth, the body of `wire.rs`, and chunks read by
//! `chunk.rs`, one `ChunkStream` per response stream (it remembers the shape of the
//! stream's plain text chunks).

use http::header::HeaderMap;

use crate::chunk::{self, ChunkStream};
use crate::decode::{ChunkDelta, Decoded};
use crate::dialect::{Dialect, StreamDecoder, bearer_headers};
use crate::error::ApiError;
use crate::{ChatRequest, LlmSettings, wire};

/// The canonical flavor name of chat completions.
pub(crate) const FLAVOR: &str = "openai";

/// OpenAI chat-completions.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OpenAiDialect;

impl Dialect for OpenAiDialect {
    fn name(&self) -> &'static str {
        FLAVOR
    }

    fn endpoint(&self, base_url: &str) -> String {
        format!("{}/chat/completions", base_url.trim().trim_end_matches('/'))
    }

    fn headers(&self, api_key: Option<&str>) -> Result<HeaderMap, ApiError> {
        bearer_headers(api_key)
    }

    fn body(&self, req: &ChatRequest, settings: &LlmSettings) -> serde_json::Value {
        wire::request_body(req, settings)
    }

    fn stream(&self) -> Box<dyn StreamDecoder> {
        Box::new(ChunkStream::default())
    }

    /// A fresh stream's reading, without making one: no decoder to box, no chunk shape
    /// to remember for a next chunk that never comes.
    fn decode_event(&self, event: &str, data: &str) -> Result<Decoded, ApiError> {
        chunk::parse_chunk(event, data)
    }

    fn decode_response(&self, body: &str) -> Result<ChunkDelta, ApiError> {
        chunk::parse_response(body)
    }

    fn structured_output(&self, settings: &LlmSettings) -> bool {
        settings.quirks.structured_output
    }
}

#[cfg(test)]
mod tests {
    use http::header::AUTHORIZATION;

    use super::*;

    #[test]
    fn extra_headers_quirks_then_config() {
        let settings = LlmSettings {
            api_key: Some("k".into()),
            quirks: crate::preset("openrouter").unwrap().quirks,
            extra_headers: vec![
                ("X-Title".into(), "my app".into()),
                ("HTTP-Referer".into(), String::new()),
                ("X-Extra".into(), "1".into()),
            ],
            ..LlmSettings::default()
        };
        let h = OpenAiDialect.request_headers(&settings).unwrap();
        assert_eq!(h.get("x-title").unwrap(), "my app");
        assert!(h.get("http-referer").is_none());
        assert_eq!(h.get("x-extra").unwrap(), "1");
        assert_eq!(h.get(AUTHORIZATION).unwrap(), "Bearer k");
        let bad = LlmSettings {
            extra_headers: vec![("Bad Name".into(), "v".into())],
            ..LlmSettings::default()
        };
        let err = OpenAiDialect.request_headers(&bad).unwrap_err();
        assert!(err.to_string().contains("Bad Name"), "{err}");
    }

    #[test]
    fn endpoint_trims_trailing_slash() {
        let d = OpenAiDialect;
        assert_eq!(
            d.endpoint("http://h:1/v1/"),
            "http://h:1/v1/chat/completions"
        );
        assert_eq!(
            d.endpoint("http://h:1/v1"),
            "http://h:1/v1/chat/completions"
        );
    }

    #[test]
    fn bearer_only_with_a_key() {
        let d = OpenAiDialect;
        assert!(d.headers(None).unwrap().get(AUTHORIZATION).is_none());
        assert!(d.headers(Some("  ")).unwrap().get(AUTHORIZATION).is_none());
        let h = d.headers(Some("sk-1")).unwrap();
        assert_eq!(h.get(AUTHORIZATION).unwrap(), "Bearer sk-1");
        assert!(d.headers(Some("bad\nkey")).is_err());
    }
}
