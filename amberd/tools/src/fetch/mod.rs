//! The `fetch` tool: an HTTP(S) GET of one URL, the page returned as markdown, text or as
//! is. Off unless `[tools] fetch = true` (the `core-tools` plugin registers it only then).
//!
//! What reaches the network: the policy (amber-policy, by the URL's host: `host:NAME`
//! approvals, `host` rules) decides before the call runs; here, **every hop's host must be
//! public** — an IP literal is judged as it is, a name by every address it resolves to, and
//! the connection goes only to the addresses that passed (`resolve`), unless
//! `fetch_allow_private`. No proxy is used (it would resolve the name itself). Redirects are
//! followed on the same host only, at most `get::MAX_REDIRECTS`; the whole fetch has one
//! timeout and the body a size cap (`max_bytes`, at most the configured ceiling). Binary
//! content types are refused before their body is read (`convert`).
//!
//! A page cannot hurt the daemon: HTML is converted off the runtime's workers by `html`,
//! which recurses nowhere, caps nesting and output, and stops at the fetch's deadline or
//! when the turn is cancelled — the call itself returns at once on cancel, and a page
//! past a bound comes back shortened with a note saying so.

mod convert;
mod get;
mod html;
mod resolve;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use url::Url;

use self::convert::{Format, Kind};
use self::get::{Fetched, Head, Page};
use self::resolve::CheckedResolver;
use super::args::Args;
use super::{Tool, ToolContext, ToolOutcome};

/// How `fetch` behaves, from `[tools]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchSettings {
    /// Reach loopback, private, link-local … addresses (`fetch_allow_private`).
    pub allow_private: bool,
    /// The most body bytes one call reads (`fetch_max_bytes`): the default and the ceiling
    /// of a call's `max_bytes`.
    pub max_bytes: usize,
    /// The whole fetch, every hop and the body included (`fetch_timeout_ms`).
    pub timeout: Duration,
}

/// Connecting alone may take this long (within the whole fetch's timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long past the deadline a conversion may take to notice it (it checks between
/// chunks of a few milliseconds' work) before the call gives up waiting.
const CONVERSION_GRACE: Duration = Duration::from_secs(2);

/// Test hook: amberd pauses this many milliseconds after each chunk of an HTML conversion,
/// so that a test can cancel or time out a conversion while it runs.
const CONVERT_PAUSE_ENV: &str = "AMBER_TEST_FETCH_CONVERT_PAUSE_MS";

pub struct FetchTool {
    settings: FetchSettings,
    /// Built on first use: loading the system's root certificates costs start-up time.
    client: OnceLock<Result<reqwest::Client, String>>,
    /// `AMBER_TEST_FETCH_CONVERT_PAUSE_MS`, read once.
    convert_pause: Option<Duration>,
}

impl FetchTool {
    pub fn new(settings: FetchSettings) -> Self {
        Self {
            settings,
            client: OnceLock::new(),
            convert_pause: amber_exec::test_switches::var(CONVERT_PAUSE_ENV)
                .and_then(|ms| ms.parse().ok())
                .map(Duration::from_millis),
        }
    }

    fn client(&self) -> Result<&reqwest::Client, String> {
        self.client
            .get_or_init(|| build_client(self.settings.allow_private))
            .as_ref()
            .map_err(Clone::clone)
    }
}

fn build_client(allow_private: bool) -> Result<reqwest::Client, String> {
    // Err only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        // Redirects are followed by `get`, which checks and counts every hop.
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would resolve the name itself, past the address check.
        .no_proxy()
        .dns_resolver(CheckedResolver { allow_private })
        .user_agent(concat!("amberd/", env!("CARGO_PKG_VERSION"), " (fetch)"))
        .build()
        .map_err(|e| {
            format!(
                "fetch: cannot build the HTTP client: {}",
                amber_llm::error_chain(&e)
            )
        })
}

impl Tool for FetchTool {
    fn name(&self) -> &str {
        "fetch"
    }

    fn description(&self) -> &str {
        "Fetch a web page or text file with an HTTP(S) GET. HTML comes back as markdown \
         (`format` \"markdown\", the default), as plain text (\"text\") or as sent (\"raw\"); \
         other text (JSON, plain text, code) as it is; binary content (images, PDFs, \
         archives) is refused. The result starts with the final URL, the status and the \
         content type. Redirects on the same host are followed; a redirect to another host \
         is reported, not followed: fetch that URL if you need it. `max_bytes` caps the body \
         read (the result says when it was cut). Only public addresses are reachable."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http:// or https:// URL to GET"},
                "format": {
                    "type": "string",
                    "enum": ["markdown", "text", "raw"],
                    "description": "How to return an HTML page (default markdown)"
                },
                "max_bytes": {
                    "type": "integer",
                    "minimum": 1,
                    "description": format!(
                        "Most body bytes to read (default and maximum {})",
                        self.settings.max_bytes
                    )
                }
            },
            "required": ["url"]
        })
    }

    fn read_only(&self) -> bool {
        // It changes nothing here; what it may reach is the policy's `host` decision.
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let request = match self.parse(&args) {
                Ok(request) => request,
                Err(outcome) => return outcome,
            };
            let client = match self.client() {
                Ok(client) => client,
                Err(message) => return ToolOutcome::error(message),
            };
            let timeout = self.settings.timeout;
            // One deadline for the whole call: every hop, the body and the conversion.
            let deadline = Instant::now() + timeout;
            let fetch = get::get(
                client,
                request.url.clone(),
                self.settings.allow_private,
                request.max_bytes,
            );
            let fetched = tokio::select! {
                () = ctx.cancel.cancelled() => {
                    return ToolOutcome::error("[cancelled] the turn was cancelled during the fetch");
                }
                fetched = tokio::time::timeout_at(deadline, fetch) => fetched,
            };
            match fetched {
                Err(_) => ToolOutcome::error(format!(
                    "fetching {} timed out after {} ms (`[tools] fetch_timeout_ms`)",
                    request.url,
                    timeout.as_millis()
                )),
                Ok(Err(err)) => ToolOutcome::error(err.to_string()),
                Ok(Ok(fetched)) => {
                    let shaping = Shaping {
                        format: request.format,
                        max_bytes: request.max_bytes,
                        deadline,
                        timeout,
                        cancel: &ctx.cancel,
                        pause: self.convert_pause,
                    };
                    render(fetched, &shaping).await
                }
            }
        })
    }
}

/// One call's arguments, checked.
struct Request {
    url: Url,
    format: Format,
    max_bytes: usize,
}

impl FetchTool {
    fn parse(&self, args: &Value) -> Result<Request, ToolOutcome> {
        let args = Args::new("fetch", args)?;
        let raw_url = args.string("url")?;
        // The policy judged the host of this same parse (`url_host`).
        amber_policy::url_host(raw_url).map_err(|e| ToolOutcome::error(e.to_string()))?;
        let url = Url::parse(raw_url).map_err(|e| ToolOutcome::error(e.to_string()))?;
        let format = match args.opt_string("format")? {
            None => Format::Markdown,
            Some(name) => Format::parse(name).ok_or_else(|| {
                ToolOutcome::error(format!(
                    "invalid arguments for `fetch`: `format` must be \"markdown\", \"text\" or \
                     \"raw\", got \"{name}\""
                ))
            })?,
        };
        let max_bytes = match args.opt_u64("max_bytes")? {
            Some(0) => {
                return Err(ToolOutcome::error(
                    "invalid arguments for `fetch`: `max_bytes` must be at least 1",
                ));
            }
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => self.settings.max_bytes,
        }
        .min(self.settings.max_bytes);
        Ok(Request {
            url,
            format,
            max_bytes,
        })
    }
}

/// How a fetched page becomes the result: the format asked for, and the call's bounds.
struct Shaping<'a> {
    format: Format,
    max_bytes: usize,
    /// The call's deadline, which the conversion shares.
    deadline: Instant,
    timeout: Duration,
    cancel: &'a CancellationToken,
    /// The test hook's pause between chunks of a conversion.
    pause: Option<Duration>,
}

/// The result the model sees: a header naming where the fetch ended, then the content.
async fn render(fetched: Fetched, shaping: &Shaping<'_>) -> ToolOutcome {
    match fetched {
        Fetched::OffHost { page, to } => {
            let host = to.host_str().unwrap_or_default().to_owned();
            ToolOutcome::ok(format!(
                "{}Location: {to}\n\nThe page redirects to another host ({host}), which fetch \
                 does not follow on its own: call fetch with that URL to read it.",
                header(&page)
            ))
        }
        Fetched::Binary(head) => {
            let content_type = head.content_type.clone().unwrap_or_default();
            ToolOutcome::error(format!(
                "{}\nrefused: `{content_type}` is binary content; fetch returns text and HTML only",
                header(&head)
            ))
        }
        Fetched::Page(page) => render_page(page, shaping).await,
    }
}

async fn render_page(page: Page, shaping: &Shaping<'_>) -> ToolOutcome {
    let Page {
        head,
        kind,
        body,
        cut,
    } = page;
    let kind = match kind {
        Kind::Unknown => convert::sniff(&body, cut),
        known => known,
    };
    let content_type = head.content_type.clone();
    let mut notes = Vec::new();
    if cut {
        notes.push(format!(
            "the body was cut at {} bytes (max_bytes); the rest was not read",
            shaping.max_bytes
        ));
    }
    let content = match (kind, shaping.format) {
        (Kind::Binary, _) => {
            return ToolOutcome::error(format!(
                "{}\nrefused: the response names no content type and its body is not text",
                header(&head)
            ));
        }
        (_, Format::Raw) => convert::raw(&body, cut, content_type.as_deref()),
        (Kind::Html, format) => {
            let style = match format {
                Format::Text => html::Style::Text,
                Format::Markdown | Format::Raw => html::Style::Markdown,
            };
            let converted = match convert_off_runtime(body, cut, content_type, style, shaping).await
            {
                Ok(converted) => converted,
                Err(outcome) => return outcome,
            };
            notes.extend(
                converted
                    .limits
                    .iter()
                    .map(|limit| limit_note(*limit, shaping)),
            );
            converted.text
        }
        (Kind::Text | Kind::Unknown, _) => convert::decode(&body, cut, content_type.as_deref()),
    };
    let mut out = header(&head);
    for note in notes {
        out.push_str(&format!("Note: {note}.\n"));
    }
    out.push('\n');
    if content.trim().is_empty() {
        out.push_str("(empty body)");
    } else {
        out.push_str(&content);
    }
    if head.status.is_success() {
        ToolOutcome::ok(out)
    } else {
        ToolOutcome::error(out)
    }
}

/// Decodes and converts the page on a blocking thread, within the call's deadline; the
/// turn's cancellation returns at once and tells the conversion to stop.
async fn convert_off_runtime(
    body: Vec<u8>,
    cut: bool,
    content_type: Option<String>,
    style: html::Style,
    shaping: &Shaping<'_>,
) -> Result<html::Converted, ToolOutcome> {
    let stop = Arc::new(AtomicBool::new(false));
    // However this call ends (returned, cancelled, its future dropped), the conversion
    // stops at its next check rather than running on for nobody.
    let _stop_on_exit = StopOnDrop(Arc::clone(&stop));
    let deadline = shaping.deadline.into_std();
    let pause = shaping.pause;
    let task = {
        let stop = Arc::clone(&stop);
        tokio::task::spawn_blocking(move || {
            let page = convert::decode(&body, cut, content_type.as_deref());
            let budget = html::Budget {
                deadline,
                stop: &stop,
                pause,
            };
            html::convert(&page, style, &budget)
        })
    };
    let joined = tokio::select! {
        () = shaping.cancel.cancelled() => {
            return Err(ToolOutcome::error(
                "[cancelled] the turn was cancelled while the page was being converted",
            ));
        }
        joined = tokio::time::timeout_at(shaping.deadline + CONVERSION_GRACE, task) => joined,
    };
    match joined {
        Ok(Ok(converted)) => Ok(converted),
        Ok(Err(err)) => Err(ToolOutcome::error(format!(
            "fetch: converting the page failed: {err}"
        ))),
        Err(_) => Err(ToolOutcome::error(format!(
            "fetch: converting the page did not end within {} ms (`[tools] fetch_timeout_ms`)",
            shaping.timeout.as_millis()
        ))),
    }
}

/// Sets the flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The note saying what a bound left out of a converted page.
fn limit_note(limit: html::Limit, shaping: &Shaping<'_>) -> String {
    match limit {
        html::Limit::Depth => format!(
            "the page nests elements deeper than {}; what lies deeper is shown as plain \
             text, without its structure",
            html::MAX_DEPTH
        ),
        html::Limit::Output(bytes) => format!(
            "the converted page was cut at {bytes} bytes; the rest of the page is not shown"
        ),
        html::Limit::Time => format!(
            "converting the page reached the time limit ({} ms, `[tools] fetch_timeout_ms`); \
             the converted part is shown, the rest is not",
            shaping.timeout.as_millis()
        ),
        // Only a cancelled or abandoned call sets the stop flag: nobody reads this result.
        html::Limit::Stopped => "converting the page was stopped".to_owned(),
    }
}

/// `URL:`, `Status:`, `Content-Type:` and, after redirects, where the fetch started.
fn header(head: &Head) -> String {
    let status = match head.status.canonical_reason() {
        Some(reason) => format!("{} {reason}", head.status.as_u16()),
        None => head.status.as_u16().to_string(),
    };
    let mut out = format!(
        "URL: {}\nStatus: {status}\nContent-Type: {}\n",
        head.url,
        head.content_type.as_deref().unwrap_or("(none)")
    );
    if let Some(first) = head.redirected_from.first() {
        let n = head.redirected_from.len();
        let plural = if n == 1 { "" } else { "s" };
        out.push_str(&format!(
            "Redirected from: {first} ({n} redirect{plural})\n"
        ));
    }
    out
}
