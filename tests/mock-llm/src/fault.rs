//! The faults a rendered answer gets after its dialect drew it, the same for every API: a
//! connection held open after the final event ([`MockTurn::Held`]), a reasoning delta
//! repeated forever ([`MockTurn::EndlessReasoning`]), raw bytes repeated forever
//! ([`MockTurn::EndlessRaw`]). Pure: the steps say what the server plays.

use std::time::Duration;

use bytes::Bytes;

use crate::reply::{Body, Frame, Reply, Step};
use crate::turn::MockTurn;

/// `reply`, as the dialect rendered it for `turn`, with `turn`'s faults applied. A whole
/// (non-streamed) body has none: its `Content-Length` ends it.
pub(crate) fn apply(turn: &MockTurn, reply: Reply) -> Reply {
    match turn {
        MockTurn::Delay { then, .. } => apply(then, reply),
        MockTurn::Held { hold_ms, then } => {
            let reply = apply(then, reply);
            let hold = Duration::from_millis(*hold_ms);
            with_steps(reply, |mut steps| {
                steps.push(Step::Hold(hold));
                steps
            })
        }
        MockTurn::EndlessReasoning { .. } => with_steps(reply, repeat_first_reasoning),
        MockTurn::EndlessRaw(text) => with_steps(reply, |_| {
            vec![Step::Repeat(Bytes::from(text.clone().into_bytes()))]
        }),
        _ => reply,
    }
}

/// `reply` with its streamed steps changed by `change`.
fn with_steps(reply: Reply, change: impl FnOnce(Vec<Step>) -> Vec<Step>) -> Reply {
    match reply.body {
        Body::Steps { steps, .. } => Reply {
            body: Body::steps(change(steps.iter().cloned().collect())),
            ..reply
        },
        Body::Whole(_) => reply,
    }
}

/// The steps up to the first reasoning delta, then that delta forever.
fn repeat_first_reasoning(steps: Vec<Step>) -> Vec<Step> {
    let mut out = Vec::new();
    for step in steps {
        if let Step::Data(bytes, Frame::Reasoning) = step {
            out.push(Step::Repeat(bytes));
            return out;
        }
        out.push(step);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ctx::Ctx;
    use crate::{chat, messages, responses};

    type Render = fn(&MockTurn, &Ctx, bool) -> Reply;
    const APIS: [(&str, Render); 3] = [
        ("chat", chat::render),
        ("responses", responses::render),
        ("messages", messages::render),
    ];

    fn steps(reply: &Reply) -> Arc<[Step]> {
        match &reply.body {
            Body::Steps { steps, .. } => steps.clone(),
            Body::Whole(_) => panic!("a streamed body expected"),
        }
    }

    #[test]
    fn a_held_answer_ends_its_stream_then_holds() {
        let turn = MockTurn::Held {
            hold_ms: 60_000,
            then: Box::new(MockTurn::text("hi")),
        };
        let ctx = Ctx::for_request(1, "m", 10);
        for (api, render) in APIS {
            let plain = render(&MockTurn::text("hi"), &ctx, true);
            let held = apply(&turn, render(&turn, &ctx, true));
            let (plain, held) = (steps(&plain), steps(&held));
            assert_eq!(held.len(), plain.len() + 1, "{api}");
            assert_eq!(held[..plain.len()], plain[..], "{api}");
            assert_eq!(
                held.last(),
                Some(&Step::Hold(Duration::from_secs(60))),
                "{api}"
            );
            // Not streamed: nothing to hold.
            let whole = apply(&turn, render(&turn, &ctx, false));
            assert!(matches!(whole.body, Body::Whole(_)), "{api}");
        }
    }

    #[test]
    fn endless_reasoning_repeats_one_reasoning_delta() {
        let piece = "think ".repeat(100);
        let turn = MockTurn::EndlessReasoning {
            piece: piece.clone(),
        };
        let ctx = Ctx::for_request(1, "m", 10);
        for (api, render) in APIS {
            let steps = steps(&apply(&turn, render(&turn, &ctx, true)));
            let Some(Step::Repeat(bytes)) = steps.last() else {
                panic!("{api}: the last step repeats");
            };
            let text = String::from_utf8_lossy(bytes);
            assert!(text.contains(&piece), "{api}: {text}");
            assert_eq!(
                steps
                    .iter()
                    .filter(|s| matches!(s, Step::Repeat(_)))
                    .count(),
                1
            );
        }
    }

    #[test]
    fn endless_raw_is_its_text_forever() {
        let turn = MockTurn::EndlessRaw("data: xxxx".into());
        let ctx = Ctx::for_request(1, "m", 10);
        for (api, render) in APIS {
            let steps = steps(&apply(&turn, render(&turn, &ctx, true)));
            assert_eq!(
                steps[..],
                [Step::Repeat(Bytes::from_static(b"data: xxxx"))],
                "{api}"
            );
        }
    }
}
