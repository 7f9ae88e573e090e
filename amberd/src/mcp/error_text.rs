//! rmcp errors as one short line for `McpServerInfo.error` and tool outcomes. rmcp wraps
//! transport failures in layers whose text names Rust types
//! (`Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`) and hides the
//! cause from `source()`; this unwraps those layers and reports the root cause, with the
//! URL when an HTTP request failed: `connection refused (http://127.0.0.1:9/mcp)`.

use std::error::Error;

use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::DynamicTransportError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// The error's text: for transport failures the root cause (plus the URL), else the
/// whole source chain.
pub(super) fn describe(err: &(dyn Error + 'static)) -> String {
    let mut levels: Vec<&(dyn Error + 'static)> = Vec::new();
    let mut unwrapped = false;
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(inner) = transport_inner(e) {
            unwrapped = true;
            current = Some(inner);
            continue;
        }
        levels.push(e);
        current = e.source();
    }
    let Some(root) = levels.last().filter(|_| unwrapped) else {
        return amber_llm::error_chain(err);
    };
    let mut text = tidy(&root.to_string());
    let url = levels.iter().find_map(|e| {
        e.downcast_ref::<reqwest::Error>()?
            .url()
            .map(|u| u.to_string())
    });
    if let Some(url) = url.filter(|u| !text.contains(u.as_str())) {
        text.push_str(&format!(" ({url})"));
    }
    text
}

/// The server's `WWW-Authenticate` challenge, when `err` is its 401 (authorization
/// required) or 403 (insufficient scope): where its authorization metadata is and which
/// scope it wants, for the next login.
pub(super) fn auth_challenge(err: &(dyn Error + 'static)) -> Option<String> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(required) = e.downcast_ref::<AuthRequiredError>() {
            return Some(required.www_authenticate_header.clone());
        }
        if let Some(scope) = e.downcast_ref::<InsufficientScopeError>() {
            return Some(scope.www_authenticate_header.clone());
        }
        current = transport_inner(e).or_else(|| e.source());
    }
    None
}

/// The error inside one of rmcp's transport wrappers.
fn transport_inner<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a (dyn Error + 'static)> {
    if let Some(t) = e.downcast_ref::<DynamicTransportError>() {
        return Some(t.error.as_ref());
    }
    if let Some(ClientInitializeError::TransportError { error, .. }) =
        e.downcast_ref::<ClientInitializeError>()
    {
        return Some(error);
    }
    if let Some(ServiceError::TransportSend(error)) = e.downcast_ref::<ServiceError>() {
        return Some(error);
    }
    match e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::Client(error)) => Some(error),
        _ => None,
    }
}

/// `Connection refused (os error 111)` → `connection refused`.
fn tidy(text: &str) -> String {
    let text = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => text,
    };
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => {
            first.to_lowercase().chain(text.chars().skip(1)).collect()
        }
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::RoleClient;
    use rmcp::transport::TokioChildProcess;

    use super::*;

    /// rmcp's wrapper, whose text names the transport's Rust type.
    fn dynamic(cause: std::io::Error) -> DynamicTransportError {
        DynamicTransportError::new::<TokioChildProcess, RoleClient>(cause)
    }

    fn wrapped(cause: std::io::Error) -> ClientInitializeError {
        ClientInitializeError::TransportError {
            error: dynamic(cause),
            context: "send initialize request".into(),
        }
    }

    #[test]
    fn transport_wrappers_give_way_to_the_root_cause() {
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(describe(&wrapped(refused)), "connection refused");
        let service =
            ServiceError::TransportSend(dynamic(std::io::Error::other("EOF while reading")));
        assert!(amber_llm::error_chain(&service).contains("rmcp::"));
        assert_eq!(describe(&service), "EOF while reading");
        // Errors without a transport layer keep their whole chain.
        assert_eq!(describe(&ServiceError::TransportClosed), "Transport closed");
    }
}
