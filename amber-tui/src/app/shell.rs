//! `!CMD`: the user runs a shell command themselves, from the prompt, in the session's
//! directory — as the user (it is what they typed, as in their own terminal), not through
//! the model's tools, the policy or the sandbox. The output is shown in the transcript and
//! goes to the model with the user's next prompt, so "why does this fail?" after `!make`
//! needs no copying.
//!
//! The command itself runs in the runtime ([`Action::Shell`], `run::shell`); what is shown
//! and sent is pure state here.

use super::{Action, App, Scroll};
use crate::transcript::{Cell, InfoKind};

/// The most of a command's output kept for the transcript and the model (its end: that is
/// where errors are).
pub(crate) const MAX_OUTPUT_CHARS: usize = 16_000;

/// How a `!` command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    /// stdout, then stderr.
    pub output: String,
    /// The exit status; `None`: killed by a signal.
    pub code: Option<i32>,
}

impl App {
    /// `!CMD` typed at the prompt: runs it (the answer comes back to [`App::on_shell`]).
    pub(crate) fn run_shell(&mut self, command: &str) {
        let command = command.trim();
        if command.is_empty() {
            self.transcript.push(Cell::Info {
                text: "type a shell command after `!` (it runs as you, in the session's \
                       directory; its output goes with your next prompt)"
                    .to_owned(),
                kind: InfoKind::Command,
            });
            return;
        }
        let cwd = self.session.as_ref().map(|s| s.cwd.clone());
        self.transcript.push(Cell::Info {
            text: format!("$ {command}"),
            kind: InfoKind::Command,
        });
        // The session's directory is on its executor's machine: running the command here
        // would run it on the wrong one.
        let elsewhere = self
            .session
            .as_ref()
            .and_then(|s| s.environment.as_ref())
            .map(|e| e.spec.clone());
        if let Some(spec) = elsewhere {
            self.on_shell(
                command.to_owned(),
                Err(format!(
                    "the session's tools run in {spec}, not here: run the command there, or ask the model to run it"
                )),
            );
            return;
        }
        self.request(Action::Shell {
            command: command.to_owned(),
            cwd,
        });
        self.scroll = Scroll::Follow;
    }

    /// A `!` command ended (or could not start): its output in the transcript, and kept for
    /// the next prompt.
    pub fn on_shell(&mut self, command: String, result: Result<ShellOutcome, String>) {
        let (shown, for_model) = match result {
            Ok(outcome) => {
                let output = tail(outcome.output.trim_end(), MAX_OUTPUT_CHARS);
                let exit = match outcome.code {
                    Some(code) => format!("(exit status {code})"),
                    None => "(killed by a signal)".to_owned(),
                };
                // The transcript says how it ended only when that is news; the model always.
                let mut shown = output.clone();
                if outcome.code != Some(0) {
                    if !shown.is_empty() {
                        shown.push('\n');
                    }
                    shown.push_str(&exit);
                }
                let for_model = format!("$ {command}\n{output}\n{exit}");
                (shown, Some(for_model))
            }
            Err(e) => (format!("could not run it: {e}"), None),
        };
        let kind = if for_model.is_some() {
            InfoKind::Command
        } else {
            InfoKind::Warn
        };
        let text = if shown.is_empty() {
            "(no output)".to_owned()
        } else {
            shown
        };
        self.transcript.push(Cell::Info { text, kind });
        if let Some(ran) = for_model {
            self.shell_context.push(ran);
        }
        self.scroll = Scroll::Follow;
    }

    /// `text` with the `!` commands run since the last prompt before it, for the model.
    pub(crate) fn with_shell_context(&mut self, text: String) -> String {
        if self.shell_context.is_empty() {
            return text;
        }
        let ran = std::mem::take(&mut self.shell_context).join("\n\n");
        format!("I ran this in the workspace myself:\n```\n{ran}\n```\n\n{text}")
    }
}

/// The last `max` characters of `text`, marked when cut.
fn tail(text: &str, max: usize) -> String {
    let chars = text.chars().count();
    if chars <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().skip(chars - max).collect();
    format!("[… {} characters before this cut]\n{cut}", chars - max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn app() -> App {
        App::new("s1")
    }

    #[test]
    fn a_bang_line_runs_the_command_not_a_prompt() {
        let mut app = app();
        app.input.insert_str("!cargo test -q");
        let enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(
            app.on_key(enter),
            [Action::Shell {
                command: "cargo test -q".into(),
                cwd: None,
            }]
        );
        assert!(app.queued.is_empty(), "no prompt was sent");
    }

    #[test]
    fn the_output_goes_with_the_next_prompt_once() {
        let mut app = app();
        app.on_shell(
            "make".into(),
            Ok(ShellOutcome {
                output: "error: no rule\n".into(),
                code: Some(2),
            }),
        );
        let Some(Cell::Info { text, .. }) = app.transcript.cells().last() else {
            panic!("no cell");
        };
        assert_eq!(text, "error: no rule\n(exit status 2)");
        app.send_prompt("why?".into());
        let sent = app.drain_actions();
        let [Action::Prompt { text, .. }] = sent.as_slice() else {
            panic!("{sent:?}");
        };
        assert!(
            text.contains("$ make\nerror: no rule\n(exit status 2)"),
            "{text}"
        );
        assert!(text.ends_with("\n\nwhy?"), "{text}");
        app.send_prompt("and now?".into());
        let sent = app.drain_actions();
        assert_eq!(
            sent,
            [Action::Prompt {
                local_id: 2,
                text: "and now?".into()
            }]
        );
    }

    #[test]
    fn a_bang_line_is_refused_for_a_session_on_an_executor() {
        let mut app = app();
        let info: amber_proto::SessionInfo = serde_json::from_value(serde_json::json!({
            "sessionId": "s1", "cwd": "/src", "mode": "write", "model": "m", "title": "",
            "state": "idle", "createdAt": "2026-01-01T00:00:00Z",
            "updatedAt": "2026-01-01T00:00:00Z",
            "environment": {"spec": "ssh://build1/src", "state": "connected"}
        }))
        .unwrap();
        app.session = Some(info);
        app.run_shell("ls");
        assert!(
            !app.drain_actions()
                .iter()
                .any(|a| matches!(a, Action::Shell { .. })),
            "nothing runs here"
        );
        let Some(Cell::Info { text, .. }) = app.transcript.cells().last() else {
            panic!("no cell");
        };
        assert!(text.contains("ssh://build1/src, not here"), "{text}");
    }

    #[test]
    fn a_command_that_could_not_run_is_not_sent() {
        let mut app = app();
        app.on_shell("nope".into(), Err("no such directory".into()));
        app.send_prompt("hi".into());
        assert_eq!(
            app.drain_actions(),
            [Action::Prompt {
                local_id: 1,
                text: "hi".into()
            }]
        );
    }

    #[test]
    fn long_output_keeps_its_end() {
        let long = "x".repeat(MAX_OUTPUT_CHARS + 10) + "END";
        let kept = tail(&long, MAX_OUTPUT_CHARS);
        assert!(kept.ends_with("END"));
        assert!(
            kept.starts_with("[… 13 characters before this cut]"),
            "{kept}"
        );
    }
}
