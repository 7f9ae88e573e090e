//! Small helpers shared across modules.

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
