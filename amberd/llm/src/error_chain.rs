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

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with an optional source, its text given.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1
                .as_deref()
                .map(|l| l as &(dyn std::error::Error + 'static))
        }
    }

    #[test]
    fn sources_join_and_repeated_text_is_skipped() {
        let root = Layer("connection refused", None);
        let io = Layer(
            "tcp connect error: connection refused",
            Some(Box::new(root)),
        );
        let top = Layer("error sending request", Some(Box::new(io)));
        assert_eq!(
            error_chain(&top),
            "error sending request: tcp connect error: connection refused"
        );
        assert_eq!(error_chain(&Layer("alone", None)), "alone");
    }
}
