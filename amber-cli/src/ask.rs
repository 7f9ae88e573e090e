//! Inline approval prompts for `amber-cli run` on a terminal (without `--yes`): the request
//! is shown on stderr and answered with one key and Enter.

use std::io::{BufRead, Write};

use amber_proto::Decision;
use serde_json::Value;

/// What a request is about, in one or two lines.
pub(crate) fn describe(tool: &str, arguments: &Value, reason: &str, scope: &str) -> String {
    let detail = match arguments.get("command").and_then(Value::as_str) {
        Some(command) => command.to_owned(),
        None => match arguments.get("path").and_then(Value::as_str) {
            Some(path) => path.to_owned(),
            None => arguments.to_string(),
        },
    };
    format!("approval needed: {tool}: {detail}\n  why: {reason}\n  scope: {scope}")
}

/// Maps an answer to a decision; `None` for anything unrecognised.
pub(crate) fn parse_answer(answer: &str) -> Option<Decision> {
    match answer.trim() {
        "y" | "yes" | "Y" | "1" => Some(Decision::AllowOnce),
        "a" | "s" | "session" | "2" => Some(Decision::AllowSession),
        "A" | "always" | "3" => Some(Decision::AllowAlways),
        "n" | "no" | "N" | "d" | "deny" | "4" | "" => Some(Decision::Deny),
        _ => None,
    }
}

/// Asks on stderr and reads the answer from stdin (a terminal). Blocking: run it off the
/// async threads. End of input or an error counts as deny.
pub(crate) fn prompt(description: &str) -> Decision {
    let stdin = std::io::stdin();
    let mut stderr = std::io::stderr();
    let _ = writeln!(stderr, "\n{description}");
    loop {
        let _ = write!(
            stderr,
            "  [y] allow once  [a] allow for this session  [A] always  [n] deny > "
        );
        let _ = stderr.flush();
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return Decision::Deny,
            Ok(_) => {}
        }
        if let Some(decision) = parse_answer(&line) {
            return decision;
        }
        let _ = writeln!(stderr, "  please answer y, a, A or n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_map_to_decisions() {
        assert_eq!(parse_answer("y\n"), Some(Decision::AllowOnce));
        assert_eq!(parse_answer("a"), Some(Decision::AllowSession));
        assert_eq!(parse_answer("A"), Some(Decision::AllowAlways));
        assert_eq!(parse_answer("n"), Some(Decision::Deny));
        assert_eq!(parse_answer(""), Some(Decision::Deny));
        assert_eq!(parse_answer("maybe"), None);
    }

    #[test]
    fn descriptions_show_the_command() {
        let text = describe(
            "bash",
            &serde_json::json!({"command": "rm -rf build"}),
            "recursive delete",
            "bash: rm",
        );
        assert!(text.contains("rm -rf build") && text.contains("bash: rm"));
    }
}
