//! The results: named figures (a number each, its unit in the key), grouped in sections for
//! the human table, plus notes and the goal verdicts. Rendered as Markdown tables (pasteable
//! into docs/benchmarks.md) or as one JSON object of numbers.

use std::fmt::Write as _;

use crate::stats::Summary;

#[derive(Debug, Default)]
pub struct Report {
    sections: Vec<Section>,
    notes: Vec<String>,
    goals: Vec<Goal>,
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
    met: bool,
}

impl Report {
    /// Starts a section of the human table.
    pub fn section(&mut self, title: &str) {
        self.sections.push(Section {
            title: title.to_owned(),
            rows: Vec::new(),
        });
    }

    /// One figure. `key` carries the unit (`_ms`, `_mib`, `_per_s`, `_ratio`, `_pct`, `_count`).
    pub fn put(&mut self, key: &str, label: &str, value: f64) {
        if self.sections.is_empty() {
            self.section("results");
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
    pub fn put_summary(&mut self, base: &str, label: &str, s: &Summary) {
        self.put(
            &format!("{base}_median"),
            &format!("{label}, median"),
            s.median,
        );
        self.put(&format!("{base}_p99"), &format!("{label}, p99"), s.p99);
    }

    /// `{base}_median` only (where a p99 says nothing more, e.g. a count).
    pub fn put_median(&mut self, base: &str, label: &str, s: &Summary) {
        self.put(
            &format!("{base}_median"),
            &format!("{label}, median"),
            s.median,
        );
    }

    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// A goal: `met` judges the figure `key`. A goal whose figure this run did not measure
    /// (`--only`) is left out.
    pub fn goal(&mut self, text: &str, key: &str, met: impl Fn(f64) -> bool) {
        if let Some(value) = self.get(key) {
            self.goals.push(Goal {
                text: text.to_owned(),
                measured: format!("{key} = {}", fmt(value)),
                met: met(value),
            });
        }
    }

    pub fn get(&self, key: &str) -> Option<f64> {
        self.sections
            .iter()
            .flat_map(|s| &s.rows)
            .find(|r| r.key == key)
            .map(|r| r.value)
    }

    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// One JSON object, keys in the order measured; non-finite values are left out.
    pub fn json(&self) -> String {
        let mut out = String::from("{");
        let mut first = true;
        for row in self.sections.iter().flat_map(|s| &s.rows) {
            if !row.value.is_finite() {
                continue;
            }
            let key = serde_json::to_string(&row.key).unwrap_or_default();
            let _ = write!(
                out,
                "{}\n  {key}: {}",
                if first { "" } else { "," },
                fmt(row.value)
            );
            first = false;
        }
        out.push_str("\n}");
        out
    }

    /// Markdown: one table per section, then the goals, then the notes.
    pub fn human(&self) -> String {
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
                let verdict = if g.met { "met" } else { "NOT met" };
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

/// The unit a key names, for the human table.
fn unit(key: &str) -> &'static str {
    const UNITS: &[(&str, &str)] = &[
        ("_ms", "ms"),
        ("_us", "µs"),
        ("_mib", "MiB"),
        ("_kib", "KiB"),
        ("_per_s", "/s"),
        ("_ratio", "×"),
        ("_pct", "%"),
    ];
    UNITS
        .iter()
        .find(|(suffix, _)| key.contains(&format!("{suffix}_")) || key.ends_with(suffix))
        .map_or("", |(_, u)| u)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn json_is_one_object_of_numbers() {
        let mut r = Report::default();
        r.section("start");
        r.put("daemon_ready_ms_median", "ready", 2.125);
        r.put("events_per_s_1_subscriber", "events", 81234.0);
        r.put("bad_ms", "nan", f64::NAN);
        let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(v["daemon_ready_ms_median"], 2.125);
        assert_eq!(v["events_per_s_1_subscriber"], 81234.0);
        assert!(v.get("bad_ms").is_none());
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
}
