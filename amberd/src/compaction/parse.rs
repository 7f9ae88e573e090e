//! Tolerant parsing of the two JSON answers: code fences and prose around the object are
//! fine; the first JSON object carrying the expected key wins. Anything else is a
//! `Parse` error, which makes the whole compaction fail.

use serde_json::Value;

use super::{CompactionError, ExtractedSkill};

/// `{` positions tried before giving up on a reply.
const MAX_OBJECT_STARTS: usize = 256;
/// Memories kept from one extraction.
const MAX_MEMORIES: usize = 100;
/// Skills kept from one extraction.
const MAX_SKILLS: usize = 16;

/// How a message is treated when the context is rebuilt. Ordered by strength: a tool
/// step takes the strongest class of its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    Prune,
    Context,
    Core,
}

/// The extract answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Extraction {
    pub memories: Vec<String>,
    pub skills: Vec<ExtractedSkill>,
}

fn parse_error(stage: &'static str, message: impl Into<String>) -> CompactionError {
    CompactionError::Parse {
        stage,
        message: message.into(),
    }
}

/// The first JSON object in `text` that has one of `keys`.
pub(crate) fn find_object(text: &str, keys: &[&str]) -> Option<serde_json::Map<String, Value>> {
    let has_key = |v: &Value| keys.iter().any(|k| v.get(k).is_some());
    for (tried, (start, _)) in text.match_indices('{').enumerate() {
        if tried >= MAX_OBJECT_STARTS {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(value)) = stream.next()
            && has_key(&value)
            && let Value::Object(map) = value
        {
            return Some(map);
        }
    }
    None
}

/// One class per message of the collapsed context (index = id; `[0]`, the system
/// prompt, is `Core`). Ids not listed are `Context`.
pub(crate) fn classification(answer: &str, len: usize) -> Result<Vec<Class>, CompactionError> {
    const STAGE: &str = "classify";
    let object = find_object(answer, &["classification"])
        .ok_or_else(|| parse_error(STAGE, "no JSON object with \"classification\" in the reply"))?;
    let entries = match object.get("classification") {
        Some(Value::Array(entries)) => entries,
        _ => return Err(parse_error(STAGE, "\"classification\" is not an array")),
    };
    let mut classes = vec![Class::Context; len];
    if let Some(first) = classes.first_mut() {
        *first = Class::Core;
    }
    for entry in entries {
        let id = match entry.get("id") {
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => s.trim().trim_start_matches("id").trim().parse().ok(),
            _ => None,
        };
        let class = entry
            .get("class")
            .and_then(Value::as_str)
            .map(|c| c.trim().to_ascii_lowercase());
        let class = match class.as_deref() {
            Some("core") => Class::Core,
            Some("prune") => Class::Prune,
            _ => Class::Context,
        };
        match id.and_then(|id| usize::try_from(id).ok()) {
            Some(id) if id >= 1 && id < len => classes[id] = class,
            _ => tracing::debug!(%entry, "compaction: ignoring a classification entry"),
        }
    }
    Ok(classes)
}

/// The memories and skills of the extract answer.
pub(crate) fn extraction(answer: &str) -> Result<Extraction, CompactionError> {
    const STAGE: &str = "extract";
    let object = find_object(answer, &["memories", "skills"]).ok_or_else(|| {
        parse_error(
            STAGE,
            "no JSON object with \"memories\" or \"skills\" in the reply",
        )
    })?;
    let list = |key: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(&[][..]),
        Some(Value::Array(items)) => Ok(items.as_slice()),
        Some(_) => Err(parse_error(STAGE, format!("\"{key}\" is not an array"))),
    };
    let memories = list("memories")?
        .iter()
        .filter_map(|m| match m {
            Value::String(s) => Some(s.trim().to_owned()),
            Value::Null => None,
            other => Some(other.to_string()),
        })
        .filter(|m| !m.is_empty())
        .take(MAX_MEMORIES)
        .collect();
    let text = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    let skills = list("skills")?
        .iter()
        .map(|s| ExtractedSkill {
            name: text(s, "name"),
            description: text(s, "description"),
            body: text(s, "body"),
        })
        .filter(|s| !s.name.is_empty() && !s.body.is_empty())
        .take(MAX_SKILLS)
        .collect();
    Ok(Extraction { memories, skills })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_plain_fenced_and_with_prose() {
        let plain =
            r#"{"classification": [{"id": 1, "class": "core"}, {"id": 2, "class": "prune"}]}"#;
        let fenced = format!("```json\n{plain}\n```");
        let prose = format!("Sure! Here is it {{as asked}}:\n{plain}\nLet me know.");
        for answer in [plain.to_owned(), fenced, prose] {
            let classes = classification(&answer, 4).unwrap();
            assert_eq!(
                classes,
                vec![Class::Core, Class::Core, Class::Prune, Class::Context],
                "{answer}"
            );
        }
    }

    #[test]
    fn classification_is_lenient_about_entries() {
        let answer = r#"{"classification": [
            {"id": "2", "class": "CORE"}, {"id": 9, "class": "prune"}, {"id": 0, "class": "prune"},
            {"id": 3, "class": "weird"}, {"class": "prune"}, "junk"]}"#;
        let classes = classification(answer, 4).unwrap();
        assert_eq!(
            classes,
            vec![Class::Core, Class::Context, Class::Core, Class::Context]
        );
        // An empty list: everything counts as context.
        let classes = classification(r#"{"classification": []}"#, 3).unwrap();
        assert_eq!(classes, vec![Class::Core, Class::Context, Class::Context]);
    }

    #[test]
    fn garbage_is_a_parse_error() {
        for answer in [
            "",
            "I cannot do that.",
            "{\"classification\": ",
            "{\"memories\": []}",
            "{\"classification\": \"all core\"}",
        ] {
            match classification(answer, 3) {
                Err(CompactionError::Parse { stage, .. }) => assert_eq!(stage, "classify"),
                other => panic!("{answer:?}: {other:?}"),
            }
        }
        for answer in ["nope", "{\"classification\": []}", "{\"memories\": \"x\"}"] {
            match extraction(answer) {
                Err(CompactionError::Parse { stage, .. }) => assert_eq!(stage, "extract"),
                other => panic!("{answer:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn extraction_variants() {
        let answer = "```\n{\"memories\": [\" The tests run with `cargo nextest` \", \"\", 42], \
            \"skills\": [{\"name\": \"run-tests\", \"description\": \"How to test\", \
            \"body\": \"1. cargo nextest run\"}, {\"name\": \"\", \"body\": \"x\"}, \
            {\"name\": \"no-body\"}]}\n```";
        let got = extraction(answer).unwrap();
        assert_eq!(
            got.memories,
            vec!["The tests run with `cargo nextest`", "42"]
        );
        assert_eq!(got.skills.len(), 1);
        assert_eq!(got.skills[0].name, "run-tests");
        assert_eq!(got.skills[0].body, "1. cargo nextest run");
        let only_memories = extraction("{\"memories\": [\"a\"]}").unwrap();
        assert!(only_memories.skills.is_empty());
        let nothing = extraction("{\"memories\": [], \"skills\": null}").unwrap();
        assert_eq!(nothing, Extraction::default());
    }
}
