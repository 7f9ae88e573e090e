//! A session's goal in the loop: before a turn would end, the model is asked, silently,
//! whether the goal is met. `GOAL MET: summary` ends the turn; anything else is a goal
//! not met yet, and the turn goes on with what remains restated to the model.

/// How [`question`] starts.
pub(crate) const QUESTION_START: &str = "[amber] Before you stop: the session's goal is";

/// The silent question put before a turn with a goal ends.
pub(crate) fn question(goal: &str) -> String {
    format!(
        "{QUESTION_START}\n\n{goal}\n\nIs it met now? Check it \
         against what you actually did and saw (run a check if one is needed). Reply with \
         one line: `GOAL MET: <one-sentence summary>` if it is, or `NOT MET: <what \
         remains>` if it is not. If work remains, you may instead go on working with tools."
    )
}

/// The model's answer to [`question`]: met, and its summary or what remains.
pub(crate) fn parse(answer: &str) -> (bool, String) {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let line = line.trim_start_matches(['`', '*', '#', ' ']);
    let upper = line.to_ascii_uppercase();
    if let Some(rest) = upper.strip_prefix("GOAL MET") {
        let summary = line[line.len() - rest.len()..].trim_start_matches([':', ' ', '-', '*', '`']);
        return (true, summary.trim_end_matches(['`', '*']).trim().to_owned());
    }
    let rest = upper
        .strip_prefix("NOT MET")
        .map_or(line, |rest| &line[line.len() - rest.len()..]);
    let note: String = rest
        .trim_start_matches([':', ' ', '-', '*', '`'])
        .trim_end_matches(['`', '*'])
        .chars()
        .take(500)
        .collect();
    let note = if note.trim().is_empty() {
        "the model did not say what remains".to_owned()
    } else {
        note.trim().to_owned()
    };
    (false, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_leniently() {
        // (answer, met, note)
        let table = [
            ("GOAL MET: wrote done.txt", true, "wrote done.txt"),
            ("goal met - all green", true, "all green"),
            ("**GOAL MET:** tests pass**", true, "tests pass"),
            ("\n`NOT MET: two tests fail`", false, "two tests fail"),
            ("not met", false, "the model did not say what remains"),
            ("I think we are close", false, "I think we are close"),
            ("", false, "the model did not say what remains"),
        ];
        for (answer, met, note) in table {
            assert_eq!(parse(answer), (met, note.to_owned()), "{answer:?}");
        }
    }
}
