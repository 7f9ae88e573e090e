//! `error_chain`: an error and its sources as one line, for logs and error messages. The
//! transport's errors (reqwest, hyper, rustls) nest their root cause several sources deep;
//! the daemon uses the same helper for the other crates whose errors it reports (rmcp).

/// An error with its sources on one line, `a: b: c`, skipping a source whose text the
/// line already contains (many errors repeat their source in their own message).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}
