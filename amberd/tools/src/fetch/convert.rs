//! What `fetch` makes of a body: its content type decides (HTML is converted, other text
//! passes through, binary types are refused before the body is read), its charset decodes
//! it, and the requested format shapes HTML — markdown or text (`html`, bounded) or the
//! body as is.

/// How the model wants an HTML page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Markdown,
    Text,
    Raw,
}

impl Format {
    pub(crate) fn parse(name: &str) -> Option<Format> {
        match name {
            "markdown" => Some(Format::Markdown),
            "text" => Some(Format::Text),
            "raw" => Some(Format::Raw),
            _ => None,
        }
    }
}

/// What a content type says about the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Html,
    Text,
    /// No content type: the bytes decide (`sniff`).
    Unknown,
    Binary,
}

/// The kind of a `Content-Type` header value (`None`: no header).
pub(crate) fn kind_of(content_type: Option<&str>) -> Kind {
    let Some(value) = content_type else {
        return Kind::Unknown;
    };
    let essence = essence(value);
    if essence.is_empty() {
        return Kind::Unknown;
    }
    if matches!(essence.as_str(), "text/html" | "application/xhtml+xml") {
        return Kind::Html;
    }
    let textual = essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/ecmascript"
                | "application/x-javascript"
                | "application/x-ndjson"
                | "application/toml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/x-sh"
                | "application/sql"
                | "application/graphql"
                | "application/csv"
        );
    if textual { Kind::Text } else { Kind::Binary }
}

/// `text/html` of `Text/HTML; charset=UTF-8`.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The `charset` parameter of a content type, if any.
fn charset(content_type: Option<&str>) -> Option<String> {
    content_type?.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_ascii_lowercase())
    })
}

/// A body without a content type: text when it holds no NUL and is UTF-8, HTML when it
/// also starts like a page.
pub(crate) fn sniff(body: &[u8], cut: bool) -> Kind {
    if body.contains(&0) || as_utf8(body, cut).is_none() {
        return Kind::Binary;
    }
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let head = head.trim_start();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        Kind::Html
    } else {
        Kind::Text
    }
}

/// The body as UTF-8; of a body the size cap cut, a sequence cut short at the very end is
/// let go. `None` when it is not UTF-8.
fn as_utf8(body: &[u8], cut: bool) -> Option<&str> {
    match std::str::from_utf8(body) {
        Ok(text) => Some(text),
        Err(err) if cut && err.error_len().is_none() => {
            std::str::from_utf8(&body[..err.valid_up_to()]).ok()
        }
        Err(_) => None,
    }
}

/// The body decoded by its declared charset (UTF-8 when none or unknown); invalid bytes
/// become U+FFFD, a UTF-8 sequence the cap cut at the end is dropped.
pub(crate) fn decode(body: &[u8], cut: bool, content_type: Option<&str>) -> String {
    let encoding = charset(content_type)
        .and_then(|label| encoding_rs::Encoding::for_label(label.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    if encoding == encoding_rs::UTF_8
        && let Some(text) = as_utf8(body, cut)
    {
        return text.to_owned();
    }
    encoding.decode(body).0.into_owned()
}

/// The body as is, when it is UTF-8; otherwise a note saying what it is.
pub(crate) fn raw(body: &[u8], cut: bool, content_type: Option<&str>) -> String {
    if let Some(text) = as_utf8(body, cut) {
        return text.to_owned();
    }
    let declared = charset(content_type)
        .map(|c| format!("charset {c}"))
        .unwrap_or_else(|| "no charset declared".to_owned());
    format!(
        "[the body ({} bytes, {declared}) is not UTF-8, so format \"raw\" cannot show it as \
         is; format \"markdown\" or \"text\" decodes it by its charset]",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_decide_the_kind() {
        assert_eq!(kind_of(Some("text/html; charset=utf-8")), Kind::Html);
        assert_eq!(kind_of(Some("Application/XHTML+XML")), Kind::Html);
        for textual in [
            "text/plain",
            "text/markdown",
            "application/json",
            "application/ld+json",
            "image/svg+xml",
            "application/javascript",
        ] {
            assert_eq!(kind_of(Some(textual)), Kind::Text, "{textual}");
        }
        for binary in [
            "image/png",
            "application/pdf",
            "application/octet-stream",
            "video/mp4",
        ] {
            assert_eq!(kind_of(Some(binary)), Kind::Binary, "{binary}");
        }
        assert_eq!(kind_of(None), Kind::Unknown);
        assert_eq!(sniff(b"<!DOCTYPE html><p>x", false), Kind::Html);
        assert_eq!(sniff(b"plain words", false), Kind::Text);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0", false), Kind::Binary);
        assert_eq!(sniff(b"caf\xe9", false), Kind::Binary);
    }

    #[test]
    fn charsets_decode_and_raw_refuses_what_is_not_utf8() {
        let latin1 = b"caf\xe9";
        assert_eq!(
            decode(latin1, false, Some("text/plain; charset=ISO-8859-1")),
            "café"
        );
        assert_eq!(decode("café".as_bytes(), false, Some("text/plain")), "café");
        // A sequence the size cap cut at the end is dropped, not shown as garbage.
        let cut = &"café".as_bytes()[..4];
        assert_eq!(decode(cut, true, None), "caf");
        assert_eq!(raw(cut, true, None), "caf");
        assert_eq!(decode(latin1, false, None), "caf\u{fffd}");
        let note = raw(latin1, false, Some("text/plain; charset=\"iso-8859-1\""));
        assert!(
            note.contains("not UTF-8") && note.contains("iso-8859-1"),
            "{note}"
        );
        assert!(!note.contains('\u{fffd}'), "{note}");
    }
}
