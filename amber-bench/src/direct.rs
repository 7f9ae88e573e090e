//! The baseline of the stream relay: one chat-completions request straight to the endpoint
//! (HTTP/1.0 over TCP, so the body ends with the connection and needs no de-chunking), its SSE
//! frames split and each chunk's JSON parsed for `choices[0].delta.content` — what any client
//! of the endpoint has to do at least. Also the text of `amber-cli run --json` output.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::error::BenchError;

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Delta,
}

#[derive(Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

/// Requests the stream for `prompt` and reads it to the end; the time and the reply text.
pub(crate) fn read_stream(
    addr: SocketAddr,
    model: &str,
    prompt: &str,
) -> Result<(Duration, String), BenchError> {
    let body = serde_json::json!({
        "model": model,
        "stream": true,
        "messages": [{"role": "user", "content": prompt}],
    })
    .to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    let mut stream =
        TcpStream::connect(addr).map_err(BenchError::io(format!("connect to {addr}")))?;
    let mut response = Vec::new();
    stream
        .write_all(request.as_bytes())
        .and_then(|()| stream.read_to_end(&mut response))
        .map_err(BenchError::io("read the stream from the endpoint"))?;
    let text = sse_text(&response)?;
    Ok((started.elapsed(), text))
}

/// The concatenated `delta.content` of an HTTP response carrying SSE chat-completion chunks.
fn sse_text(response: &[u8]) -> Result<String, BenchError> {
    let start = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| BenchError::Failed("the endpoint's answer has no header end".into()))?;
    let body = std::str::from_utf8(&response[start + 4..])
        .map_err(|e| BenchError::Failed(format!("the stream is not UTF-8: {e}")))?;
    let mut text = String::new();
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim_start();
        if data == "[DONE]" {
            break;
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| BenchError::Failed(format!("bad chunk ({e}): {data}")))?;
        for choice in chunk.choices {
            if let Some(content) = choice.delta.content {
                text.push_str(&content);
            }
        }
    }
    Ok(text)
}

/// The concatenated deltas of `message_delta` lines in `amber-cli run --json` output.
pub(crate) fn deltas_of_json_lines(stdout: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        delta: String,
    }
    let mut text = String::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        if let Ok(l) = serde_json::from_str::<Line>(line)
            && l.kind == "message_delta"
        {
            text.push_str(&l.delta);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_text_concatenates_content() {
        let response = b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n\
            data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
            data: {\"choices\":[{\"delta\":{\"content\":\"w0 \"}}]}\n\n\
            data: {\"choices\":[{\"delta\":{\"content\":\"w1 \"}}]}\n\n\
            data: {\"choices\":[],\"usage\":{}}\n\ndata: [DONE]\n\n";
        assert_eq!(sse_text(response).unwrap(), "w0 w1 ");
        assert!(sse_text(b"garbage").is_err());
    }

    #[test]
    fn json_lines_deltas() {
        let out = b"{\"type\":\"turn_started\",\"prompt\":\"x\"}\n\
            {\"type\":\"message_delta\",\"itemId\":\"i\",\"delta\":\"ab\"}\n\
            {\"type\":\"message_delta\",\"itemId\":\"i\",\"delta\":\"c\"}\n\
            {\"type\":\"result\",\"text\":\"abc\"}\n";
        assert_eq!(deltas_of_json_lines(out), "abc");
    }
}
