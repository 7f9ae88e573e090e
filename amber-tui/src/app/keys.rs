//! Keys, paste and mouse → state changes and [`Action`]s. Modal layers take keys first:
//! the approval overlay, then the help overlay, then the completion popup, then the editor.

use amber_proto::Decision;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::{Action, App, CTRL_C_TICKS, NoticeKind, Scroll, popup_for};

/// Rows one mouse-wheel notch scrolls.
const WHEEL_ROWS: isize = 3;

impl App {
    /// Handles one key; returns what the runtime must do.
    pub fn on_key(&mut self, key: KeyEvent) -> Vec<Action> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        self.key(key);
        self.drain_actions()
    }

    /// Bracketed paste: the text goes into the editor as is (newlines included).
    pub fn on_paste(&mut self, text: &str) -> Vec<Action> {
        if self.approvals.is_empty()
            && self.rewind.is_none()
            && self.switcher.is_none()
            && self.model_picker.is_none()
        {
            self.input.insert_str(text);
            self.update_popup();
        }
        self.drain_actions()
    }

    /// Mouse wheel: positive scrolls down (towards newer output).
    pub fn on_wheel(&mut self, notches: isize) {
        self.scroll_by(notches * WHEEL_ROWS);
    }

    fn key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        if !(ctrl && key.code == KeyCode::Char('c')) && self.ctrl_c_armed > 0 {
            self.ctrl_c_armed = 0;
            self.clear_notice(NoticeKind::QuitArmed);
        }
        if key.code == KeyCode::Char('s') && ctrl {
            return self.toggle_switcher();
        }
        // The switcher is drawn over everything and takes every key while open.
        if self.switcher.is_some() {
            return self.switcher_key(key);
        }
        if self.model_picker.is_some() {
            return self.model_picker_key(key);
        }
        // The rewind picker takes every key (PgUp/PgDn scroll its preview), unless an
        // approval, which is drawn over it, needs an answer first.
        if self.rewind.is_some() && self.approvals.is_empty() {
            return self.rewind_key(key);
        }
        // Keys that work whatever is on screen.
        match key.code {
            KeyCode::Char('c') if ctrl => return self.ctrl_c(),
            KeyCode::PageUp => return self.scroll_by(-self.page()),
            KeyCode::PageDown => return self.scroll_by(self.page()),
            KeyCode::Char('o') if ctrl => {
                self.expanded = !self.expanded;
                return;
            }
            KeyCode::Char('t') if ctrl => return self.cycle_panel(),
            KeyCode::Char('d') if ctrl && self.input.is_empty() => {
                self.request(Action::Detach);
                return;
            }
            KeyCode::End if ctrl => {
                self.scroll = Scroll::Follow;
                return;
            }
            KeyCode::Home if ctrl => {
                self.scroll = Scroll::Anchor { cell: 0, row: 0 };
                return;
            }
            _ => {}
        }
        if self.denying.is_some() {
            // Typing why a call is denied: the overlay's line takes the keys.
            return self.denying_key(key.code, ctrl);
        }
        if self.form.is_some() {
            // Filling in an MCP server's form: its fields take the keys.
            return self.form_key(key.code, ctrl);
        }
        if let Some(approval) = self.approvals.front() {
            if key.code == KeyCode::Char('e') {
                self.denying = Some((approval.request_id.clone(), String::new()));
                return;
            }
            if key.code == KeyCode::Char('f')
                && let Some(form) = elicitation_form(approval)
            {
                self.form = Some(form);
                return;
            }
            let decision = match key.code {
                KeyCode::Char('y') => Some(Decision::AllowOnce),
                KeyCode::Char('a') => Some(Decision::AllowSession),
                KeyCode::Char('A') => Some(Decision::AllowAlways),
                KeyCode::Char('n') => Some(Decision::Deny),
                _ => None,
            };
            if let Some(decision) = decision {
                let request_id = approval.request_id.clone();
                // Closed here at once; `approval_resolved` will confirm (or another client won).
                self.approvals.pop_front();
                self.request(Action::Approve {
                    request_id,
                    decision,
                    feedback: None,
                    content: None,
                });
            } else if key.code == KeyCode::Esc {
                self.cancel_turn();
            }
            return;
        }
        if self.help {
            if matches!(
                key.code,
                KeyCode::Esc | KeyCode::Char('?') | KeyCode::Char('q') | KeyCode::F(1)
            ) {
                self.help = false;
            }
            return;
        }
        if self.popup.is_some() && self.popup_key(key) {
            return;
        }
        match key.code {
            // Shift-Tab: the next mode, read → write → yolo → read (the daemon's `/mode`).
            KeyCode::BackTab => {
                let next = match self.session.as_ref().map(|s| s.mode) {
                    Some(amber_proto::Mode::Read) => amber_proto::Mode::Write,
                    Some(amber_proto::Mode::Write) => amber_proto::Mode::Yolo,
                    Some(amber_proto::Mode::Yolo) | None => amber_proto::Mode::Read,
                };
                // Shown at once, and a second press goes on from it; the daemon's answer
                // (the session's next info) settles it.
                if let Some(session) = self.session.as_mut() {
                    session.mode = next;
                }
                self.request(Action::RunCommand {
                    name: "mode".to_owned(),
                    args: next.as_str().to_owned(),
                });
            }
            KeyCode::Enter if shift || alt => self.input.insert('\n'),
            KeyCode::Char('j') if ctrl => self.input.insert('\n'),
            KeyCode::Enter => return self.submit(),
            KeyCode::Esc => {
                if self.panel.is_some() {
                    self.panel = None;
                } else if self.running {
                    self.cancel_turn();
                } else if !matches!(self.scroll, Scroll::Follow) {
                    self.scroll = Scroll::Follow;
                }
                return;
            }
            KeyCode::Char('d') if ctrl => self.input.delete(),
            KeyCode::F(1) => {
                self.help = true;
                return;
            }
            KeyCode::Char('?') if self.input.is_empty() => {
                self.help = true;
                return;
            }
            KeyCode::Char('a') if ctrl => self.input.home(),
            KeyCode::Char('e') if ctrl => self.input.end(),
            KeyCode::Char('b') if ctrl => self.input.left(),
            KeyCode::Char('f') if ctrl => self.input.right(),
            KeyCode::Char('u') if ctrl => self.input.kill_to_start(),
            KeyCode::Char('k') if ctrl => self.input.kill_to_end(),
            KeyCode::Char('w') if ctrl => self.input.delete_word(),
            KeyCode::Backspace if ctrl || alt => self.input.delete_word(),
            KeyCode::Char('l') if ctrl => {
                self.scroll = Scroll::Follow;
                return;
            }
            KeyCode::Char(ch) if !ctrl => self.input.insert(ch),
            KeyCode::Backspace => self.input.backspace(),
            KeyCode::Delete => self.input.delete(),
            KeyCode::Left => self.input.left(),
            KeyCode::Right => self.input.right(),
            KeyCode::Home => self.input.home(),
            KeyCode::End => self.input.end(),
            KeyCode::Up if self.input.on_first_line() => self.input.history_prev(),
            KeyCode::Up => self.input.up(),
            KeyCode::Down if self.input.on_last_line() => self.input.history_next(),
            KeyCode::Down => self.input.down(),
            KeyCode::Tab => {}
            _ => return,
        }
        self.update_popup();
    }

    /// Keys for the open completion popup; false lets the editor have the key.
    fn popup_key(&mut self, key: KeyEvent) -> bool {
        let Some(popup) = self.popup.as_mut() else {
            return false;
        };
        match key.code {
            KeyCode::Up => popup.up(),
            KeyCode::Down => popup.down(),
            KeyCode::Esc => self.popup = None,
            KeyCode::Tab | KeyCode::Enter => {
                let start = popup.start;
                let Some(choice) = popup.choice() else {
                    self.popup = None;
                    return false;
                };
                let token = &self.input.text()[start..self.input.cursor()];
                if key.code == KeyCode::Enter && choice.trim_end() == token {
                    // Already complete: Enter sends.
                    self.popup = None;
                    return false;
                }
                self.input.replace_before_cursor(start, &choice);
                self.popup = None;
            }
            _ => return false,
        }
        true
    }

    pub(crate) fn update_popup(&mut self) {
        self.popup = popup_for(
            self.input.text(),
            self.input.cursor(),
            &self.commands,
            &self.files,
        );
    }

    fn submit(&mut self) {
        let text = self.input.take();
        self.popup = None;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        if let Some(command) = trimmed.strip_prefix('!') {
            self.run_shell(command);
            return;
        }
        if let Some(cmd) = trimmed.strip_prefix('/') {
            let (name, args) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
            if matches!(name, "detach" | "quit" | "exit") {
                // Detaching needs no daemon round trip; the session keeps running either way.
                self.request(Action::Detach);
                return;
            }
            if name == "help" {
                self.show_help();
                return;
            }
            if self.local_command(name, args) {
                return;
            }
            self.request(Action::RunCommand {
                name: name.to_owned(),
                args: args.trim().to_owned(),
            });
            return;
        }
        self.send_prompt(text);
    }

    /// A key while filling in an MCP server's form: Tab / Down and Up move between the
    /// fields, Enter moves on and on the last field sends it (allowed, with the values),
    /// Esc goes back to the approval.
    fn form_key(&mut self, code: KeyCode, ctrl: bool) {
        let Some(form) = self.form.as_mut() else {
            return;
        };
        match code {
            KeyCode::Esc => self.form = None,
            KeyCode::Tab | KeyCode::Down => form.next(),
            KeyCode::BackTab | KeyCode::Up => form.previous(),
            KeyCode::Backspace => form.backspace(),
            KeyCode::Enter if !form.is_last() && !ctrl => form.next(),
            KeyCode::Enter => {
                let Ok(content) = form.content() else {
                    return;
                };
                let request_id = form.request_id.clone();
                self.form = None;
                self.answer_front(request_id, Decision::AllowOnce, None, Some(content));
            }
            KeyCode::Char(c) if !ctrl => form.type_char(c),
            _ => {}
        }
    }

    /// Answers approval `request_id` and closes it here at once, when it is the one shown
    /// (`approval_resolved` will confirm, or say another client won).
    fn answer_front(
        &mut self,
        request_id: String,
        decision: Decision,
        feedback: Option<String>,
        content: Option<serde_json::Value>,
    ) {
        if self
            .approvals
            .front()
            .is_some_and(|a| a.request_id == request_id)
        {
            self.approvals.pop_front();
        }
        self.request(Action::Approve {
            request_id,
            decision,
            feedback,
            content,
        });
    }

    /// A key while typing why an approval is denied.
    fn denying_key(&mut self, code: KeyCode, ctrl: bool) {
        match code {
            KeyCode::Enter => {
                let Some((request_id, words)) = self.denying.take() else {
                    return;
                };
                let feedback = Some(words).filter(|w| !w.trim().is_empty());
                self.answer_front(request_id, Decision::Deny, feedback, None);
            }
            KeyCode::Esc => self.denying = None,
            KeyCode::Backspace => {
                if let Some((_, words)) = self.denying.as_mut() {
                    words.pop();
                }
            }
            KeyCode::Char(c) if !ctrl => {
                if let Some((_, words)) = self.denying.as_mut() {
                    words.push(c);
                }
            }
            _ => {}
        }
    }

    fn ctrl_c(&mut self) {
        if !self.approvals.is_empty() || self.running {
            self.cancel_turn();
        } else if !self.input.is_empty() {
            self.input.clear();
            self.popup = None;
        } else if self.ctrl_c_armed > 0 {
            self.request(Action::Detach);
        } else {
            self.ctrl_c_armed = CTRL_C_TICKS;
            self.set_notice(
                NoticeKind::QuitArmed,
                "press Ctrl-C again to quit (the session stays in amberd)",
            );
        }
    }

    fn cancel_turn(&mut self) {
        self.request(Action::Cancel);
        self.set_notice(NoticeKind::Cancelling, "cancelling the turn…");
    }

    fn page(&self) -> isize {
        self.view_size.1.saturating_sub(2).max(1) as isize
    }

    /// Scrolls the transcript by `delta` rows (negative = up, towards older output).
    pub fn scroll_by(&mut self, delta: isize) {
        let (width, height) = self.view_size;
        let (cell, row) = match self.scroll {
            Scroll::Follow if delta >= 0 => return,
            Scroll::Follow => self.view_top,
            Scroll::Anchor { cell, row } => (cell, row),
        };
        let (cell, row) = self
            .transcript
            .offset(cell, row, delta, width, self.expanded);
        let (_, at_end) =
            self.transcript
                .runs_from(cell, row, usize::from(height), width, self.expanded);
        self.scroll = if at_end && delta > 0 {
            Scroll::Follow
        } else {
            Scroll::Anchor { cell, row }
        };
    }
}

/// The form of an approval that is an MCP server's elicitation with fields to fill in.
pub fn elicitation_form(approval: &amber_proto::Approval) -> Option<super::form::ElicitForm> {
    let ask = approval.mcp.as_ref()?;
    if ask.kind != amber_proto::McpAskKind::Elicitation {
        return None;
    }
    super::form::ElicitForm::of(&approval.request_id, ask.requested_schema.as_ref()?)
}
