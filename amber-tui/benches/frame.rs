//! Frame time of the TUI, drawn to ratatui's `TestBackend` (the work a real frame does, minus
//! the terminal write): a 10k-message transcript (following the bottom, scrolled to the
//! middle, and right after a resize), a 50k-character reply streaming in with a delta
//! applied between frames, and a 20k-character reply written as one paragraph on one line
//! (shown as it grows: its open line is laid out again each frame). Goal: < 16 ms per frame;
//! results in docs/benchmarks.md.
//!
//! `cargo bench -p amber-tui --bench frame`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use amber_proto::{Mode, SessionInfo, SessionState, Usage};
use amber_tui::app::{App, Incoming, Scroll};
use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};

const WIDTH: u16 = 120;
const HEIGHT: u16 = 40;
/// Delta size of the streaming reply (a typical provider chunk is a few tokens).
const DELTA: usize = 40;
const REPLY_CHARS: usize = 50_000;
/// The one-line paragraph: models write paragraphs of a few thousand characters; this is
/// several times the longest.
const PARAGRAPH_CHARS: usize = 20_000;

/// An event as the daemon sends it, decoded as the runtime decodes it (outside the timing,
/// as amber-client decodes before the app sees it).
fn ev(seq: Option<u64>, mut body: Value) -> Incoming {
    body["sessionId"] = json!("s_1");
    body["turnId"] = json!("t_1");
    body["time"] = json!("2025-01-02T03:04:05Z");
    if let Some(seq) = seq {
        body["seq"] = json!(seq);
    }
    Incoming::from_json(&body.to_string())
}

fn app() -> App {
    let mut app = App::new("s_1");
    let info = SessionInfo {
        parent: None,
        goal: None,
        routine: None,
        session_id: "s_1".into(),
        cwd: "/w".into(),
        mode: Mode::Write,
        model: "m".into(),
        title: String::new(),
        name: None,
        state: SessionState::Running,
        created_at: String::new(),
        updated_at: String::new(),
        usage: Usage::default(),
        provider: None,
        agent: None,
        sandbox: None,
        worktree: None,
        max_budget_usd: None,
        max_tokens_total: None,
        environment: None,
    };
    app.load_snapshot(info, Vec::new(), Vec::new());
    app
}

/// 10k messages: prompts, markdown replies and tool calls with output, in turn.
fn big_transcript() -> App {
    let mut app = app();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        Some(seq)
    };
    for i in 0..10_000 {
        let e = match i % 4 {
            0 => {
                json!({"type": "turn_started", "prompt": format!("prompt {i}: please look at the build")})
            }
            1 => {
                json!({"type": "message_completed", "itemId": format!("i_{i}"), "role": "assistant",
                "text": format!("## Step {i}\n\nI will **check** `src/lib.rs` and then:\n\n- run the tests\n- fix what fails\n")})
            }
            2 => {
                json!({"type": "tool_call_started", "itemId": format!("i_{i}"), "callId": format!("c_{i}"), "name": "bash", "arguments": {"command": "cargo test"}})
            }
            _ => {
                json!({"type": "tool_call_completed", "callId": format!("c_{}", i - 1), "status": "ok", "output": "test a ... ok\ntest b ... ok\ntest c ... ok\ntest d ... ok\ntest e ... ok\ntest f ... ok\n", "durationMs": 1200})
            }
        };
        app.apply_event(ev(next(), e));
    }
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": 10_000})));
    app.drain_actions();
    app
}

/// ~50k characters of markdown, cut into `DELTA`-sized deltas (on char boundaries).
fn reply_deltas() -> Vec<String> {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < REPLY_CHARS {
        n += 1;
        text.push_str(&format!(
            "### Part {n}\n\nThis paragraph explains **step {n}** with `inline code` and a [link](https://example.com/{n}). \
             It is long enough to wrap across the width of the terminal a couple of times, like real prose does.\n\n\
             - first point of {n}\n- second point with *emphasis*\n\n```rust\nfn part_{n}() -> u32 {{\n    {n}\n}}\n```\n\n"
        ));
    }
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(DELTA).map(|c| c.iter().collect()).collect()
}

/// ~20k characters of prose with inline markup and no newline, in `DELTA`-sized deltas.
fn paragraph_deltas() -> Vec<String> {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < PARAGRAPH_CHARS {
        n += 1;
        text.push_str(&format!(
            "Sentence {n} says **something** about `module_{n}` and goes on for a while. "
        ));
    }
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(DELTA).map(|c| c.iter().collect()).collect()
}

fn frame(terminal: &mut Terminal<TestBackend>, app: &mut App) {
    terminal.draw(|f| amber_tui::ui::draw(app, f)).unwrap();
}

fn delta(d: &str) -> Incoming {
    ev(
        None,
        json!({"type": "message_delta", "itemId": "i_stream", "delta": d}),
    )
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame");
    g.measurement_time(Duration::from_secs(5));

    let mut app = big_transcript();
    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT)).unwrap();
    frame(&mut terminal, &mut app);
    g.bench_function("transcript_10k_follow", |b| {
        b.iter(|| frame(&mut terminal, black_box(&mut app)))
    });

    app.scroll = Scroll::Anchor {
        cell: 5_000,
        row: 0,
    };
    g.bench_function("transcript_10k_scrolled_middle", |b| {
        b.iter(|| {
            // Scroll a little each frame, as the wheel does.
            app.scroll_by(3);
            app.scroll_by(-3);
            frame(&mut terminal, black_box(&mut app));
        })
    });

    // Every frame at a new width: the visible cells are laid out again, nothing else.
    app.scroll = Scroll::Follow;
    let mut width = WIDTH;
    g.bench_function("transcript_10k_resize", |b| {
        b.iter(|| {
            width = if width == WIDTH { WIDTH - 7 } else { WIDTH };
            terminal.backend_mut().resize(width, HEIGHT);
            terminal
                .resize(ratatui::layout::Rect::new(0, 0, width, HEIGHT))
                .unwrap();
            frame(&mut terminal, black_box(&mut app));
        })
    });

    // A 50k-char reply streaming into the 10k transcript: one delta, one frame.
    let deltas: Vec<Incoming> = reply_deltas().iter().map(|d| delta(d)).collect();
    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT)).unwrap();
    g.bench_function("stream_50k_reply_delta_and_frame", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0u64;
            while done < iters {
                let mut app = big_transcript();
                for d in &deltas {
                    if done == iters {
                        break;
                    }
                    let start = Instant::now();
                    app.apply_event(d.clone());
                    frame(&mut terminal, &mut app);
                    total += start.elapsed();
                    done += 1;
                }
            }
            total
        })
    });

    // The same, measured only at the end of the reply (49–50k characters streamed).
    g.bench_function("stream_50k_reply_last_frames", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0u64;
            let tail = 100.min(deltas.len());
            while done < iters {
                let mut app = big_transcript();
                for d in &deltas[..deltas.len() - tail] {
                    app.apply_event(d.clone());
                }
                frame(&mut terminal, &mut app);
                for d in &deltas[deltas.len() - tail..] {
                    if done == iters {
                        break;
                    }
                    let start = Instant::now();
                    app.apply_event(d.clone());
                    frame(&mut terminal, &mut app);
                    total += start.elapsed();
                    done += 1;
                }
            }
            total
        })
    });
    // A 20k-char reply on one line: every delta moves the open line, which is wrapped
    // again per frame (the worst case: a frame per delta; the runtime caps at ~60 fps).
    let paragraph: Vec<Incoming> = paragraph_deltas().iter().map(|d| delta(d)).collect();
    g.bench_function("stream_20k_paragraph_delta_and_frame", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0u64;
            while done < iters {
                let mut app = big_transcript();
                for d in &paragraph {
                    if done == iters {
                        break;
                    }
                    let start = Instant::now();
                    app.apply_event(d.clone());
                    frame(&mut terminal, &mut app);
                    total += start.elapsed();
                    done += 1;
                }
            }
            total
        })
    });
    g.finish();
}

criterion_group!(frame_benches, benches);
criterion_main!(frame_benches);
