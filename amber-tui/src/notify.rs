//! Notifications: a terminal bell and a desktop notification (OSC 9, or OSC 777 where the
//! terminal prefers it) when a session asks for an approval or ends a turn while the user is
//! not looking — the terminal is unfocused, or the session is not the attached one.
//!
//! Each event notifies once (keyed by its request or turn id: the attached session's own
//! subscription and the daemon-wide watch both report it), and bursts are rate-limited:
//! within [`MIN_GAP`] of the last notification further events are held and then sent as one
//! ("3 sessions need you"). [`Notifier`] is pure — it returns the bytes to write — so the
//! rules are tested without a terminal.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Shortest time between two notifications.
pub const MIN_GAP: Duration = Duration::from_secs(2);
/// Event keys remembered for de-duplication.
const REMEMBERED: usize = 256;

/// `[tui] notify` of config.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyMode {
    /// Bell and desktop notification.
    #[default]
    Auto,
    Bell,
    Osc,
    Off,
}

/// Which desktop-notification escape the terminal understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OscFlavor {
    /// `ESC ] 9 ; text BEL` (iTerm2, WezTerm, Windows Terminal, Ghostty, kitty, …).
    Nine,
    /// `ESC ] 777 ; notify ; title ; body BEL` (rxvt-unicode, foot, VTE terminals).
    SevenSevenSeven,
}

/// Something worth telling the user about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// Identifies the event (`approval:REQUEST_ID`, `turn:TURN_ID`): one notification each.
    pub key: String,
    /// One line: what happened and where.
    pub text: String,
}

/// Decides whether and how to notify; see the module docs.
#[derive(Debug)]
pub struct Notifier {
    mode: NotifyMode,
    osc: OscFlavor,
    /// Inside tmux: the desktop notification is wrapped for passthrough to the outer terminal.
    tmux: bool,
    seen: VecDeque<String>,
    last: Option<Instant>,
    /// Alerts held back by the rate limit, oldest first.
    held: Vec<Alert>,
}

impl Notifier {
    pub fn new(mode: NotifyMode, osc: OscFlavor, tmux: bool) -> Self {
        Notifier {
            mode,
            osc,
            tmux,
            seen: VecDeque::new(),
            last: None,
            held: Vec::new(),
        }
    }

    /// The mode from config.toml, the flavour from the terminal's environment.
    pub fn from_env() -> Self {
        let env = |k: &str| std::env::var(k).ok();
        Notifier::new(
            read_mode(config_path(env).as_deref()),
            osc_flavor(env),
            env("TMUX").is_some(),
        )
    }

    pub fn mode(&self) -> NotifyMode {
        self.mode
    }

    /// An event happened; returns the bytes to write now, if any. Events seen before are
    /// ignored; within [`MIN_GAP`] of the last notification the alert is held for
    /// [`Notifier::flush`].
    pub fn alert(&mut self, alert: Alert, now: Instant) -> Option<Vec<u8>> {
        if self.mode == NotifyMode::Off || self.seen.contains(&alert.key) {
            return None;
        }
        if self.seen.len() == REMEMBERED {
            self.seen.pop_front();
        }
        self.seen.push_back(alert.key.clone());
        if self.last.is_some_and(|t| now.duration_since(t) < MIN_GAP) {
            self.held.push(alert);
            return None;
        }
        self.last = Some(now);
        Some(self.bytes(&alert.text))
    }

    /// Called on every tick: the held alerts, as one notification, once the gap is over.
    pub fn flush(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.held.is_empty() || self.last.is_some_and(|t| now.duration_since(t) < MIN_GAP) {
            return None;
        }
        let held = std::mem::take(&mut self.held);
        let text = match held.as_slice() {
            [one] => one.text.clone(),
            many => format!(
                "{} events need you — {}",
                many.len(),
                many[many.len() - 1].text
            ),
        };
        self.last = Some(now);
        Some(self.bytes(&text))
    }

    fn bytes(&self, text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        if matches!(self.mode, NotifyMode::Auto | NotifyMode::Bell) {
            out.push(0x07);
        }
        if matches!(self.mode, NotifyMode::Auto | NotifyMode::Osc) {
            let body = clean(text);
            let osc = match self.osc {
                OscFlavor::Nine => format!("\x1b]9;amber: {body}\x07"),
                OscFlavor::SevenSevenSeven => format!("\x1b]777;notify;amber;{body}\x07"),
            };
            if self.tmux {
                // tmux forwards a DCS `tmux;` sequence (escapes doubled) to the outer
                // terminal when `allow-passthrough` is on, and drops it otherwise.
                out.extend_from_slice(b"\x1bPtmux;");
                out.extend_from_slice(osc.replace('\x1b', "\x1b\x1b").as_bytes());
                out.extend_from_slice(b"\x1b\\");
            } else {
                out.extend_from_slice(osc.as_bytes());
            }
        }
        out
    }
}

/// The text safe inside an OSC string: no control characters, no `;` (OSC 777 splits on
/// it), at most 200 characters.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() || c == ';' { ' ' } else { c })
        .take(200)
        .collect()
}

/// OSC 777 for terminals known to prefer it, else OSC 9.
pub fn osc_flavor(env: impl Fn(&str) -> Option<String>) -> OscFlavor {
    let term = env("TERM").unwrap_or_default();
    let prefers_777 = term.starts_with("rxvt")
        || term.starts_with("foot")
        || env("VTE_VERSION").is_some_and(|v| !v.is_empty());
    if prefers_777 {
        OscFlavor::SevenSevenSeven
    } else {
        OscFlavor::Nine
    }
}

/// The config file amberd reads: `$AMBER_CONFIG`, else `$XDG_CONFIG_HOME/amber/config.toml`,
/// else `~/.config/amber/config.toml`.
pub fn config_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(p) = set("AMBER_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let base = match set("XDG_CONFIG_HOME") {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(set("HOME")?).join(".config"),
    };
    Some(base.join("amber").join("config.toml"))
}

/// `[tui] notify` of the config file; the default when the file, the table or the key is
/// missing or unreadable (amberd reports a broken config; the TUI must still start).
pub fn read_mode(path: Option<&Path>) -> NotifyMode {
    #[derive(serde::Deserialize, Default)]
    struct File {
        #[serde(default)]
        tui: Tui,
    }
    #[derive(serde::Deserialize, Default)]
    struct Tui {
        #[serde(default)]
        notify: NotifyMode,
    }
    path.and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| toml::from_str::<File>(&text).ok())
        .map(|f| f.tui.notify)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(key: &str) -> Alert {
        Alert {
            key: key.into(),
            text: format!("{key} happened"),
        }
    }

    #[test]
    fn each_event_notifies_once_with_bell_and_osc() {
        let mut n = Notifier::new(NotifyMode::Auto, OscFlavor::Nine, false);
        let t = Instant::now();
        let bytes = n.alert(alert("approval:r1"), t).unwrap();
        assert_eq!(bytes, b"\x07\x1b]9;amber: approval:r1 happened\x07");
        assert_eq!(n.alert(alert("approval:r1"), t + MIN_GAP * 3), None);
    }

    #[test]
    fn bursts_are_held_and_sent_as_one() {
        let mut n = Notifier::new(NotifyMode::Bell, OscFlavor::Nine, false);
        let t = Instant::now();
        assert!(n.alert(alert("turn:a"), t).is_some());
        assert_eq!(
            n.alert(alert("turn:b"), t + Duration::from_millis(100)),
            None
        );
        assert_eq!(
            n.alert(alert("turn:c"), t + Duration::from_millis(200)),
            None
        );
        assert_eq!(n.flush(t + Duration::from_millis(500)), None, "too early");
        assert_eq!(n.flush(t + MIN_GAP), Some(b"\x07".to_vec()));
        assert_eq!(n.flush(t + MIN_GAP * 2), None, "sent once");
    }

    #[test]
    fn modes_choose_what_is_written() {
        let t = Instant::now();
        let mut osc = Notifier::new(NotifyMode::Osc, OscFlavor::SevenSevenSeven, false);
        assert_eq!(
            osc.alert(alert("k;x\n"), t).unwrap(),
            b"\x1b]777;notify;amber;k x  happened\x07"
        );
        let mut off = Notifier::new(NotifyMode::Off, OscFlavor::Nine, false);
        assert_eq!(off.alert(alert("k"), t), None);
        let mut tmux = Notifier::new(NotifyMode::Osc, OscFlavor::Nine, true);
        assert_eq!(
            tmux.alert(alert("k"), t).unwrap(),
            b"\x1bPtmux;\x1b\x1b]9;amber: k happened\x07\x1b\\"
        );
    }

    #[test]
    fn the_terminal_decides_the_flavour() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            osc_flavor(env(&[("TERM", "xterm-256color")])),
            OscFlavor::Nine
        );
        assert_eq!(
            osc_flavor(env(&[("TERM", "rxvt-unicode-256color")])),
            OscFlavor::SevenSevenSeven
        );
        assert_eq!(
            osc_flavor(env(&[("TERM", "xterm-256color"), ("VTE_VERSION", "7600")])),
            OscFlavor::SevenSevenSeven
        );
    }

    #[test]
    fn the_mode_comes_from_the_tui_table() {
        let dir = std::env::temp_dir().join(format!("amber-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        std::fs::write(
            &file,
            "[provider]\nmodel = \"m\"\n\n[tui]\nnotify = \"bell\"\n",
        )
        .unwrap();
        assert_eq!(read_mode(Some(&file)), NotifyMode::Bell);
        std::fs::write(&file, "[tui]\nnotify = \"loud\"\n").unwrap();
        assert_eq!(
            read_mode(Some(&file)),
            NotifyMode::Auto,
            "bad value: default"
        );
        assert_eq!(read_mode(Some(&dir.join("missing.toml"))), NotifyMode::Auto);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
