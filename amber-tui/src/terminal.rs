//! Owning the terminal: raw mode, alternate screen, mouse capture, bracketed paste, focus
//! reports and (where the terminal supports it) disambiguated keys so Shift-Enter is seen.
//! Restored on every way out — drop, error, and panic (a hook restores before the panic
//! message prints).

use std::io::{self, Stdout};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, DisableFocusChange, DisableMouseCapture, EnableBracketedPaste,
    EnableFocusChange, EnableMouseCapture, Event, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
    supports_keyboard_enhancement,
};
use ratatui::crossterm::{cursor, execute};
use tokio::sync::mpsc;

pub type Backend = CrosstermBackend<Stdout>;

/// The terminal in TUI mode; dropping it restores the terminal.
pub struct Tui {
    pub terminal: Terminal<Backend>,
    stop: Arc<AtomicBool>,
}

static ENHANCED: AtomicBool = AtomicBool::new(false);
static ACTIVE: AtomicBool = AtomicBool::new(false);

impl Tui {
    /// Enters TUI mode and starts the input reader; events arrive on the returned channel.
    pub fn enter() -> io::Result<(Tui, mpsc::UnboundedReceiver<Event>)> {
        install_panic_hook();
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = io::stdout();
        if let Err(e) = execute!(
            out,
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste,
            // Focus in/out reports: notifications are for when the user is not looking.
            EnableFocusChange
        ) {
            restore();
            return Err(e);
        }
        if supports_keyboard_enhancement().unwrap_or(false)
            && execute!(
                out,
                PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
            )
            .is_ok()
        {
            ENHANCED.store(true, Ordering::SeqCst);
        }
        let terminal = match Terminal::new(CrosstermBackend::new(out)) {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let rx = spawn_reader(stop.clone());
        Ok((Tui { terminal, stop }, rx))
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.terminal.show_cursor();
        restore();
    }
}

/// Puts the terminal back the way the shell had it. Idempotent.
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = io::stdout();
    if ENHANCED.swap(false, Ordering::SeqCst) {
        let _ = execute!(out, PopKeyboardEnhancementFlags);
    }
    let _ = execute!(
        out,
        DisableFocusChange,
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen,
        cursor::Show
    );
    let _ = disable_raw_mode();
}

fn install_panic_hook() {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}

/// Reads terminal events on a thread of its own (crossterm's reader blocks) and forwards them;
/// it polls so it notices `stop` and never holds the terminal after the TUI is gone.
fn spawn_reader(stop: Arc<AtomicBool>) -> mpsc::UnboundedReceiver<Event> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match event::poll(Duration::from_millis(100)) {
                Ok(true) => match event::read() {
                    Ok(ev) => {
                        if tx.send(ev).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                },
                Ok(false) => {}
                Err(_) => return,
            }
        }
    });
    rx
}
