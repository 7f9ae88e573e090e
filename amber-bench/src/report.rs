//! The results: named figures (a number each, its unit in the key), grouped in sections for
//! the human table, plus notes and the goal verdicts. Rendered as Markdown tables (pasteable
//! into docs/benchmarks.md) or as one JSON object of numbers.
//!
//! Key rule: every key names its unit as one of its `_`-separated parts — `ms`, `us`, `mib`,
//! `kib`, `per_s`, `ratio`, `pct` or `count` — before the statistic, e.g. `cli_run_ms_median`,
//! `delta_events_count_1_subscriber_median`. A figure that is not a finite number (a ratio
//! over a zero median) is written as `null` in the JSON, with a note saying so.

use std::fmt::Write as _;

use crate::stats::Summary;

#[derive(Debug, Default)]
pub(crate) struct Report {
    sections: Vec<Section>,
    notes: Vec<String>,
    goals: Vec<Goal>,
    /// Why no goal is judged in this run (a configuration the goals are not stated for).
    unjudged: Option<String>,
}

#[derive(Debug)]
struct Section {
    title: String,
    rows: Vec<Row>,
}

#[derive(Debug)]
struct Row {
    key: String,
    label: String,
    value: f64,
}

/// One performance target and whether this run met it.
#[derive(Debug)]
struct Goal {
    text: String,
    measured: String,
    verdict: Verdict,
}

#[derive(Debug)]
enum Verdict {
    Met,
    NotMet,
    /// Measured, but in a configuration the goal is not stated for.
    NotJudged(String),
}

impl Report {
    /// Starts a section of the human table.
    pub(crate) fn section(&mut self, title: &str) {
        self.sections.push(Section {
            title: title.to_owned(),
            rows: Vec::new(),
        });
    }

    /// One figure. `key` carries the unit (see the module's key rule).
    pub(crate) fn put(&mut self, key: &str, label: &str, value: f64) {
        debug_assert!(has_unit(key), "report key without a unit: {key}");
        if self.sections.is_empty() {
            self.section("results");
        }
        if !value.is_finite() {
            self.note(format!(
                "{key} is not a finite number ({value}): null in --json"
            ));
        }
        let row = Row {
            key: key.to_owned(),
            label: label.to_owned(),
            value,
        };
        if let Some(section) = self.sections.last_mut() {
            section.rows.push(row);
        }
    }

    /// `{base}_median` and `{base}_p99` (e.g. base `daemon_ready_ms`).
    pub(crate) fn put_summary(&mut self, base: &str, label: &str, s: &Summary) {
        self.put(
            &format!("{base}_median"),
            &format!("{label}, median"),
            s.median,
        );
        self.put(&format!("{base}_p99"), &format!("{label}, p99"), s.p99);
    }

    /// `{base}_median` only (where a p99 says nothing more, e.g. a count).
    pub(crate) fn put_median(&mut self, base: &str, label: &str, s: &Summary) {
        self.put(
            &format!("{base}_median"),
            &format!("{label}, median"),
            s.median,
        );
    }

    pub(crate) fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// A goal: `met` judges the figure `key`. A goal whose figure this run did not measure
    /// (`--only`) is left out.
    pub(crate) fn goal(&mut self, text: &str, key: &str, met: impl Fn(f64) -> bool) {
        if let Some(value) = self.get(key) {
            let verdict = match (&self.unjudged, met(value)) {
                (Some(why), _) => Verdict::NotJudged(why.clone()),
                (None, true) => Verdict::Met,
                (None, false) => Verdict::NotMet,
            };
            self.push_goal(text, key, value, verdict);
        }
    }

    /// A goal this run measured but cannot judge (`why`, e.g. fewer sessions than stated).
    pub(crate) fn goal_not_judged(&mut self, text: &str, key: &str, why: &str) {
        if let Some(value) = self.get(key) {
            let why = self.unjudged.clone().unwrap_or_else(|| why.to_owned());
            self.push_goal(text, key, value, Verdict::NotJudged(why));
        }
    }

    /// No goal is judged in this run, for `why`.
    pub(crate) fn judge_no_goal(&mut self, why: String) {
        self.unjudged = Some(why);
    }

    fn push_goal(&mut self, text: &str, key: &str, value: f64, verdict: Verdict) {
        self.goals.push(Goal {
            text: text.to_owned(),
            measured: format!("{key} = {}", fmt(value)),
            verdict,
        });
    }

    pub(crate) fn get(&self, key: &str) -> Option<f64> {
        self.sections
            .iter()
            .flat_map(|s| &s.rows)
            .find(|r| r.key == key)
            .map(|r| r.value)
    }

    pub(crate) fn notes(&self) -> &[String] {
        &self.notes
    }

    /// One JSON object, keys in the order measured; a non-finite value is `null` (and
    /// noted when it was put).
    pub(crate) fn json(&self) -> String {
        let mut out = String::from("{");
        let mut first = true;
        for row in self.sections.iter().flat_map(|s| &s.rows) {
            let key = serde_json::to_string(&row.key).unwrap_or_default();
            let value = if row.value.is_finite() {
                fmt(row.value)
            } else {
                "null".to_owned()
            };
            let _ = write!(out, "{}\n  {key}: {value}", if first { "" } else { "," },);
            first = false;
        }
        out.push_str("\n}");
        out
    }

    /// Markdown: one table per section, then the goals, then the notes.
    pub(crate) fn human(&self) -> String {
        let mut out = String::new();
        for section in &self.sections {
            if section.rows.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "### {}\n\n| KPI | value | key |\n|---|---:|---|",
                section.title
            );
            for row in &section.rows {
                let _ = writeln!(
                    out,
                    "| {} | {} {} | `{}` |",
                    row.label,
                    fmt(row.value),
                    unit(&row.key),
                    row.key
                );
            }
            out.push('\n');
        }
        if !self.goals.is_empty() {
            out.push_str("### goals\n\n| goal | measured | verdict |\n|---|---|---|\n");
            for g in &self.goals {
                let verdict = match &g.verdict {
                    Verdict::Met => "met".to_owned(),
                    Verdict::NotMet => "NOT met".to_owned(),
                    Verdict::NotJudged(why) => format!("not judged ({why})"),
                };
                let _ = writeln!(out, "| {} | {} | {verdict} |", g.text, g.measured);
            }
            out.push('\n');
        }
        if !self.notes.is_empty() {
            out.push_str("### notes\n\n");
            for n in &self.notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        out
    }
}

/// A number as printed: integers and figures ≥ 1000 without decimals, others with 3 (µs
/// resolution for ms figures).
fn fmt(v: f64) -> String {
    if (v.fract() == 0.0 && v.abs() < 1e15) || v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The units a key may name (its `_`-separated part) and how the human table shows them.
const UNITS: &[(&str, &str)] = &[
    ("_ms", "ms"),
    ("_us", "µs"),
    ("_mib", "MiB"),
    ("_kib", "KiB"),
    ("_per_s", "/s"),
    ("_ratio", "×"),
    ("_pct", "%"),
    ("_count", ""),
];

/// The unit part of `key`, if it names one.
fn unit_of(key: &str) -> Option<&'static (&'static str, &'static str)> {
    UNITS
        .iter()
        .find(|(suffix, _)| key.contains(&format!("{suffix}_")) || key.ends_with(suffix))
}

/// Whether `key` follows the key rule (names its unit).
pub(crate) fn has_unit(key: &str) -> bool {
    unit_of(key).is_some()
}

/// The unit a key names, for the human table.
fn unit(key: &str) -> &'static str {
    unit_of(key).map_or("", |(_, u)| u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_one_object_of_numbers() {
        let mut r = Report::default();
        r.section("start");
        r.put("daemon_ready_ms_median", "ready", 2.125);
        r.put("events_per_s_1_subscriber", "events", 81234.0);
        r.put("bad_ratio", "nan", f64::NAN);
        r.put("inf_ratio", "inf", f64::INFINITY);
        let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(v["daemon_ready_ms_median"], 2.125);
        assert_eq!(v["events_per_s_1_subscriber"], 81234.0);
        // Not dropped: null, and a note names it.
        assert!(v["bad_ratio"].is_null() && v["inf_ratio"].is_null(), "{v}");
        assert!(
            r.notes().iter().any(|n| n.contains("bad_ratio")),
            "{:?}",
            r.notes()
        );
        assert!(
            r.notes().iter().any(|n| n.contains("inf_ratio")),
            "{:?}",
            r.notes()
        );
        assert_eq!(Report::default().json(), "{\n}");
    }

    #[test]
    fn goals_and_units() {
        let mut r = Report::default();
        r.put("rss_idle_mib", "idle RSS", 9.25);
        r.goal("idle RSS < 15 MB", "rss_idle_mib", |v| v < 15.0);
        r.goal("ready < 50 ms", "daemon_ready_ms_median", |v| v < 50.0);
        let text = r.human();
        assert!(
            text.contains("| idle RSS | 9.250 MiB | `rss_idle_mib` |"),
            "{text}"
        );
        assert!(text.contains("| met |"), "{text}");
        assert!(!text.contains("ready < 50 ms"), "{text}");
        assert_eq!(unit("daemon_ready_ms_p99"), "ms");
        assert_eq!(unit("events_per_s_10_subscribers"), "/s");
        assert_eq!(unit("tool_calls_count"), "");
    }

    #[test]
    fn the_key_rule() {
        for good in [
            "e2e_two_request_model_requests_count_median",
            "delta_events_count_10_subscribers_median",
            "compare_peak_rss_ratio_with_daemon",
            "tool_success_pct",
            "rss_idle_mib",
        ] {
            assert!(has_unit(good), "{good}");
        }
        for bad in [
            "e2e_two_request_model_requests_median",
            "delta_events_1_subscriber_median",
            "params_median",
            "msgs",
        ] {
            assert!(!has_unit(bad), "{bad}");
        }
    }

    #[test]
    fn goals_are_not_judged_outside_their_configuration() {
        let mut r = Report::default();
        r.put("rss_idle_mib", "idle RSS", 99.0);
        r.put("concurrent_errors_count", "errors", 0.0);
        r.goal_not_judged(
            "no error",
            "concurrent_errors_count",
            "--sessions 3: stated for 100",
        );
        let text = r.human();
        assert!(
            text.contains("| not judged (--sessions 3: stated for 100) |"),
            "{text}"
        );
        r.judge_no_goal("--delay-ms 20".into());
        r.goal("idle RSS < 15 MB", "rss_idle_mib", |v| v < 15.0);
        let text = r.human();
        assert!(
            text.contains("| rss_idle_mib = 99 | not judged (--delay-ms 20) |"),
            "{text}"
        );
        assert!(!text.contains("NOT met"), "{text}");
    }

    /// Every key of the latest full run recorded in docs/benchmarks.md follows the key rule
    /// (the docs are pasted from the human table, so this covers every KPI group).
    #[test]
    fn every_key_of_a_full_report_names_its_unit() {
        let docs = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/benchmarks.md"
        ))
        .unwrap();
        let latest = docs.split("### Latest run").nth(1).unwrap();
        let latest = latest.split("\n### ").next().unwrap();
        let keys: Vec<&str> = latest
            .lines()
            .filter(|l| l.starts_with("| ") && l.ends_with("` |"))
            .filter_map(|l| l.rsplit('`').nth(1))
            .collect();
        assert!(keys.len() > 60, "{keys:?}");
        for key in keys {
            assert!(has_unit(key), "docs/benchmarks.md: {key} names no unit");
        }
    }
}
