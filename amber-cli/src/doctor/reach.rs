//! Whether the provider answers: one `GET {baseUrl}/models` from this client, bounded by
//! [`TIMEOUT`], without any credential (the client never has the key). Any HTTP answer —
//! 401 included — means the endpoint is reachable; only a failure to get one does not.

use std::time::Duration;

/// The bound of the whole request (connect, TLS, answer head).
pub(super) const TIMEOUT: Duration = Duration::from_secs(3);

/// What the GET found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reach {
    /// An HTTP answer with this status.
    Answered(u16),
    /// No answer: why (the error's causes on one line).
    Failed(String),
}

/// `{base}/models`, whatever the base ends with.
pub(super) fn models_url(base_url: &str) -> String {
    format!("{}/models", base_url.trim().trim_end_matches('/'))
}

/// GETs `url`.
pub(super) async fn get(url: &str) -> Reach {
    // Err only means a provider is installed already, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match reqwest::Client::builder()
        .timeout(TIMEOUT)
        .user_agent(concat!(
            "amber-cli/",
            env!("CARGO_PKG_VERSION"),
            " (doctor)"
        ))
        .build()
    {
        Ok(client) => client,
        Err(err) => return Reach::Failed(format!("HTTP client: {}", chain(&err))),
    };
    match client.get(url).send().await {
        Ok(response) => Reach::Answered(response.status().as_u16()),
        Err(err) if err.is_timeout() => {
            Reach::Failed(format!("no answer within {} s", TIMEOUT.as_secs()))
        }
        // reqwest's own text only repeats the URL; its causes say what went wrong.
        Err(err) => Reach::Failed(match std::error::Error::source(&err) {
            Some(cause) => chain(cause),
            None => chain(&err),
        }),
    }
}

/// An error and its causes, `a: b: c`, each said once (the cause — connection refused, DNS,
/// certificate — is what helps).
fn chain(err: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_url_joins_one_slash() {
        assert_eq!(
            models_url("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080/v1/models"
        );
        assert_eq!(
            models_url("https://api.openai.com/v1/"),
            "https://api.openai.com/v1/models"
        );
    }

    #[tokio::test]
    async fn any_http_answer_counts_and_a_refused_connection_does_not() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf).await.unwrap();
            conn.write_all(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            )
            .await
            .unwrap();
        });
        let url = models_url(&format!("http://127.0.0.1:{port}/v1"));
        assert_eq!(get(&url).await, Reach::Answered(401));
        server.await.unwrap();
        // Nothing listens there any more.
        match get(&url).await {
            Reach::Failed(why) => assert!(why.to_lowercase().contains("refused"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
