//! Scenarios: what the scripted model answers, turn by turn, to one prompt. Parsed from the
//! TOML files in `amber-bench/bench/` (compiled in, so the binary runs from anywhere) or from
//! `--scenario FILE`. Pure: text in, validated [`Scenario`] out.

use std::collections::BTreeMap;
use std::path::Path;

use amber_mock_llm::pieces;
use serde::Deserialize;
use serde_json::Value;

use crate::error::BenchError;

/// The suite's scenario files, compiled in.
const BUILTIN: &[(&str, &str)] = &[
    (
        "two_request.toml",
        include_str!("../bench/two_request.toml"),
    ),
    ("multi_tool.toml", include_str!("../bench/multi_tool.toml")),
    ("stream_20k.toml", include_str!("../bench/stream_20k.toml")),
    (
        "stream_paced.toml",
        include_str!("../bench/stream_paced.toml"),
    ),
    ("search.toml", include_str!("../bench/search.toml")),
    ("sandbox.toml", include_str!("../bench/sandbox.toml")),
];

/// Characters per content delta when a turn gives its reply as one `text`.
const DEFAULT_CHUNK_CHARS: usize = 8;

/// Which KPIs use a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// A multi-request task: end-to-end time, daemon share, relay latency, tool success.
    Task,
    /// A long streamed reply: event throughput and the `amber-cli run --json` relay.
    Stream,
    /// A reply streamed at a steady pace (`chunk_interval_ms`): per-event relay latency
    /// when the daemon keeps up, as with a real model.
    Paced,
    /// `search` tool calls on the generated tree: grep vs `rg`, semantic index.
    Search,
    /// `bash` calls run with the session's OS sandbox off and on: what the sandbox adds to a
    /// tool call through the daemon. The hooks KPI runs the same scenario with and without
    /// hooks.
    Sandbox,
}

/// Where a scenario's session works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Workspace {
    /// A fresh temporary directory per run, with the scenario's `files`.
    #[default]
    Temp,
    /// The generated source tree (`--tree-files`).
    Tree,
}

/// One scenario file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: String,
    #[serde(default)]
    description: String,
    role: Role,
    prompt: String,
    #[serde(default)]
    workspace: Workspace,
    /// Files created in a `temp` workspace before each run (path → content).
    #[serde(default)]
    files: BTreeMap<String, String>,
    turns: Vec<TurnFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnFile {
    /// Model latency before the first byte of this answer (overrides `--delay-ms`).
    delay_ms: Option<u64>,
    /// Reply text, streamed in pieces of `chunk_chars`.
    text: Option<String>,
    chunk_chars: Option<usize>,
    /// Reply text given as exactly these content deltas.
    chunks: Option<Vec<String>>,
    /// A generated reply of this many distinct deltas (`w0 `, `w1 `, …): order is checkable.
    generate_chunks: Option<usize>,
    /// Pause between content deltas (default: none, as fast as the connection takes them).
    chunk_interval_ms: Option<u64>,
    #[serde(default)]
    tool_calls: Vec<ToolCallFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallFile {
    name: String,
    arguments: Value,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scenario {
    pub name: String,
    pub description: String,
    pub role: Role,
    pub prompt: String,
    pub workspace: Workspace,
    pub files: BTreeMap<String, String>,
    pub turns: Vec<Turn>,
}

/// One scripted model answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Turn {
    pub delay_ms: Option<u64>,
    pub chunk_interval_ms: Option<u64>,
    /// Content deltas, in order (their concatenation is the reply text).
    pub content: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
}

/// One scripted tool call: the name and the arguments' JSON text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    pub name: String,
    pub arguments: String,
}

impl Scenario {
    /// Parses and validates one scenario file's text; `origin` names it in errors.
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Scenario, BenchError> {
        let invalid = |message: String| BenchError::Scenario {
            origin: origin.to_owned(),
            message,
        };
        let file: ScenarioFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if file.name.trim().is_empty() || file.prompt.trim().is_empty() {
            return Err(invalid("`name` and `prompt` must not be empty".into()));
        }
        if file.turns.is_empty() {
            return Err(invalid("a scenario needs at least one `[[turns]]`".into()));
        }
        let turns = file
            .turns
            .into_iter()
            .enumerate()
            .map(|(i, t)| turn(t).map_err(|m| invalid(format!("turn {}: {m}", i + 1))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scenario {
            name: file.name,
            description: file.description,
            role: file.role,
            prompt: file.prompt,
            workspace: file.workspace,
            files: file.files,
            turns,
        })
    }

    /// Reads and parses a scenario file.
    pub(crate) fn load(path: &Path) -> Result<Scenario, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
            what: format!("read scenario {}", path.display()),
            source,
        })?;
        Scenario::parse(&text, &path.display().to_string())
    }

    /// The compiled-in suite.
    pub(crate) fn builtin() -> Result<Vec<Scenario>, BenchError> {
        BUILTIN
            .iter()
            .map(|(name, text)| Scenario::parse(text, name))
            .collect()
    }

    /// The reply text of the last turn that has content (what `message_completed` carries).
    pub(crate) fn final_text(&self) -> String {
        self.turns
            .iter()
            .rev()
            .find(|t| !t.content.is_empty())
            .map(|t| t.content.concat())
            .unwrap_or_default()
    }
}

fn turn(t: TurnFile) -> Result<Turn, String> {
    let sources = [
        t.text.is_some(),
        t.chunks.is_some(),
        t.generate_chunks.is_some(),
    ];
    if sources.iter().filter(|s| **s).count() > 1 {
        return Err("give at most one of `text`, `chunks`, `generate_chunks`".into());
    }
    let content = if let Some(text) = t.text {
        pieces(&text, t.chunk_chars.unwrap_or(DEFAULT_CHUNK_CHARS))
    } else if let Some(chunks) = t.chunks {
        chunks
    } else if let Some(n) = t.generate_chunks {
        (0..n).map(|i| format!("w{i} ")).collect()
    } else {
        Vec::new()
    };
    if content.is_empty() && t.tool_calls.is_empty() {
        return Err("a turn needs reply text or tool calls".into());
    }
    let tool_calls = t
        .tool_calls
        .into_iter()
        .map(|c| ToolCall {
            name: c.name,
            arguments: c.arguments.to_string(),
        })
        .collect();
    Ok(Turn {
        delay_ms: t.delay_ms,
        chunk_interval_ms: t.chunk_interval_ms,
        content,
        tool_calls,
    })
}

/// Refuses a set where one prompt contains another: the endpoint finds a conversation's
/// scenario by looking for its prompt in the user messages.
pub(crate) fn check_distinct(scenarios: &[Scenario]) -> Result<(), BenchError> {
    for (i, a) in scenarios.iter().enumerate() {
        for b in &scenarios[i + 1..] {
            if a.name == b.name || a.prompt.contains(&b.prompt) || b.prompt.contains(&a.prompt) {
                return Err(BenchError::Scenario {
                    origin: b.name.clone(),
                    message: format!("its name or prompt overlaps scenario `{}`", a.name),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_suite_parses() {
        let all = Scenario::builtin().unwrap();
        check_distinct(&all).unwrap();
        let names: Vec<_> = all.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "two_request",
                "multi_tool",
                "stream_20k",
                "stream_paced",
                "search",
                "sandbox"
            ]
        );
        let two = &all[0];
        assert_eq!(two.turns.len(), 2);
        assert_eq!(two.turns[0].tool_calls.len(), 1);
        assert_eq!(two.final_text(), "The command printed hello.");
        let stream = &all[2];
        assert_eq!(stream.role, Role::Stream);
        assert_eq!(stream.turns[0].content.len(), 20_000);
        assert_eq!(stream.turns[0].content[19_999], "w19999 ");
    }

    /// A file added to amber-bench/bench/ must be compiled in too (BUILTIN is a fixed list).
    #[test]
    fn builtin_list_matches_the_bench_dir() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".toml"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = BUILTIN.iter().map(|(n, _)| (*n).to_owned()).collect();
        listed.sort();
        assert_eq!(
            listed,
            on_disk,
            "BUILTIN in scenario.rs vs {}",
            dir.display()
        );
        for (name, text) in BUILTIN {
            assert_eq!(
                std::fs::read_to_string(dir.join(name)).unwrap(),
                *text,
                "{name}"
            );
        }
    }

    #[test]
    fn bad_scenarios_are_named() {
        let err = Scenario::parse("name = \"x\"\nrole = \"task\"\nprompt = \"p\"\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.toml"), "{err}");
        let empty_turn = "name = \"x\"\nrole = \"task\"\nprompt = \"p\"\n[[turns]]\n";
        let err = Scenario::parse(empty_turn, "y").unwrap_err().to_string();
        assert!(err.contains("turn 1"), "{err}");
        let two = "name = \"x\"\nrole = \"task\"\nprompt = \"p\"\n[[turns]]\ntext = \"a\"\nchunks = [\"b\"]\n";
        assert!(Scenario::parse(two, "z").is_err());
    }

    #[test]
    fn overlapping_prompts_are_refused() {
        let a = "name = \"a\"\nrole = \"task\"\nprompt = \"do it\"\n[[turns]]\ntext = \"ok\"\n";
        let b = "name = \"b\"\nrole = \"task\"\nprompt = \"do it now\"\n[[turns]]\ntext = \"ok\"\n";
        let set = [
            Scenario::parse(a, "a").unwrap(),
            Scenario::parse(b, "b").unwrap(),
        ];
        assert!(check_distinct(&set).is_err());
    }
}
