//! The GET itself: one request per hop, redirects followed by hand so that every hop's
//! address is checked (`resolve`) and counted; the body read up to the size cap. A redirect
//! to another host is not followed: the host is what the policy approved, so the model
//! is told where the page went and fetches that URL through the policy itself.

use std::collections::HashSet;

use amber_policy::{UrlError, url_host};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, LOCATION};
use url::Url;

use super::convert::{Kind, kind_of};
use super::resolve::{RefusedAddress, check_literal, refusal_in};

/// Redirects followed before giving up.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// Why a fetch produced nothing to show.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("refused: {0}")]
    Refused(#[from] RefusedAddress),
    #[error("redirect loop: {}", shown_chain(.0))]
    RedirectLoop(Vec<Url>),
    #[error("too many redirects (more than {MAX_REDIRECTS}): {}", shown_chain(.0))]
    TooManyRedirects(Vec<Url>),
    #[error("{url} redirects to `{location}`, which is not a valid URL: {reason}")]
    BadRedirect {
        url: Url,
        location: String,
        reason: String,
    },
    #[error("request to {url} failed: {message}")]
    Transport { url: Url, message: String },
}

fn shown_chain(chain: &[Url]) -> String {
    chain
        .iter()
        .map(Url::as_str)
        .collect::<Vec<_>>()
        .join(" → ")
}

/// What the last hop answered.
#[derive(Debug)]
pub(crate) enum Fetched {
    Page(Page),
    /// A redirect to another host, not followed.
    OffHost {
        page: Head,
        to: Url,
    },
    /// A binary content type: the body was not read.
    Binary(Head),
}

/// Where the fetch ended and what it answered there.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) url: Url,
    pub(crate) status: StatusCode,
    pub(crate) content_type: Option<String>,
    /// The URLs redirected from, first to last (empty without redirects).
    pub(crate) redirected_from: Vec<Url>,
}

#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) head: Head,
    pub(crate) kind: Kind,
    pub(crate) body: Vec<u8>,
    /// The body was longer than `max_bytes`; the rest was not read.
    pub(crate) cut: bool,
}

/// GETs `url`, following same-host redirects, and reads at most `max_bytes` of the body.
pub(crate) async fn get(
    client: &reqwest::Client,
    url: Url,
    allow_private: bool,
    max_bytes: usize,
) -> Result<Fetched, FetchError> {
    let mut url = url;
    let mut chain: Vec<Url> = Vec::new();
    let mut seen: HashSet<Url> = HashSet::new();
    loop {
        let host = url_host(url.as_str())?;
        check_literal(&host, allow_private)?;
        seen.insert(without_fragment(&url));
        let response = client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| transport(&url, &e))?;
        let status = response.status();
        let location = response
            .headers()
            .get(LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let head = Head {
            url: url.clone(),
            status,
            content_type: response
                .headers()
                .get(CONTENT_TYPE)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            redirected_from: chain.clone(),
        };
        if let Some(location) = location.filter(|_| status.is_redirection()) {
            let next = url.join(&location).map_err(|e| FetchError::BadRedirect {
                url: url.clone(),
                location: location.clone(),
                reason: e.to_string(),
            })?;
            if url_host(next.as_str())? != host {
                return Ok(Fetched::OffHost {
                    page: head,
                    to: next,
                });
            }
            chain.push(url);
            if seen.contains(&without_fragment(&next)) {
                chain.push(next);
                return Err(FetchError::RedirectLoop(chain));
            }
            if chain.len() > MAX_REDIRECTS {
                chain.push(next);
                return Err(FetchError::TooManyRedirects(chain));
            }
            url = next;
            continue;
        }
        let kind = kind_of(head.content_type.as_deref());
        if kind == Kind::Binary {
            return Ok(Fetched::Binary(head));
        }
        let (body, cut) = read_capped(response, max_bytes)
            .await
            .map_err(|e| transport(&url, &e))?;
        return Ok(Fetched::Page(Page {
            head,
            kind,
            body,
            cut,
        }));
    }
}

/// At most `max_bytes` of the body, and whether there was more.
async fn read_capped(
    mut response: reqwest::Response,
    max_bytes: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let hint = response
        .content_length()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    let mut body = Vec::with_capacity(hint.min(max_bytes));
    while let Some(chunk) = response.chunk().await? {
        let room = max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn without_fragment(url: &Url) -> Url {
    let mut url = url.clone();
    url.set_fragment(None);
    url
}

fn transport(url: &Url, err: &reqwest::Error) -> FetchError {
    if let Some(refused) = refusal_in(err) {
        return FetchError::Refused(refused);
    }
    let message = if err.is_connect() {
        format!("cannot connect: {}", amber_llm::error_chain(err))
    } else {
        amber_llm::error_chain(err)
    };
    FetchError::Transport {
        url: url.clone(),
        message,
    }
}
