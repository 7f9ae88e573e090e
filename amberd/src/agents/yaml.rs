//! The YAML subset agent front matter is written in, read into a JSON object so serde checks
//! it exactly as it checks TOML front matter (`front_matter.rs`).
//!
//! What it reads (docs/configuration.md "Custom agents"): one `key: value` per line at the
//! left margin; values plain (`gpt-4o`, `12`, `true`), single- or double-quoted, an inline
//! list (`[read, "search"]`), a block list (the key alone, then `- item` lines indented
//! under it) or a block scalar (`|` keeps line breaks, `>` folds them); `#` comments and
//! blank lines. Anything else — nested mappings, anchors, tags, a key twice — is an error
//! naming the line, never a guess.
//!
//! No YAML crate: serde_yaml is unmaintained, and this subset is a dozen rules.

use serde_json::{Map, Value};

/// Parses `text` into an object of scalars and lists of scalars.
pub(super) fn parse(text: &str) -> Result<Map<String, Value>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut map = Map::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        let number = at + 1;
        at += 1;
        if is_blank(line) {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(format!(
                "line {number}: unexpected indentation (nested mappings are not supported)"
            ));
        }
        let (key, rest) = split_key(line).ok_or_else(|| {
            format!(
                "line {number}: expected `key: value`, got `{}`",
                line.trim()
            )
        })?;
        let rest = strip_comment(rest).trim();
        let value = match rest {
            "" => {
                let (items, next) = block_list(&lines, at)?;
                at = next;
                items.map_or(Value::Null, Value::Array)
            }
            "|" | ">" | "|-" | ">-" => {
                let (text, next) = block_scalar(&lines, at, rest.starts_with('|'));
                at = next;
                Value::String(text)
            }
            _ if rest.starts_with('[') => {
                inline_list(rest).map_err(|e| format!("line {number}: {e}"))?
            }
            _ => scalar(rest).map_err(|e| format!("line {number}: {e}"))?,
        };
        if map.insert(key.to_owned(), value).is_some() {
            return Err(format!("line {number}: `{key}` is given twice"));
        }
    }
    Ok(map)
}

fn is_blank(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// `key: rest` with a plain key; `None` when the line is not of that shape.
fn split_key(line: &str) -> Option<(&str, &str)> {
    let colon = line.find(':')?;
    let (key, rest) = (line[..colon].trim_end(), &line[colon + 1..]);
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    // `key:value` without a space is a plain scalar in YAML, not a mapping.
    (plain && (rest.is_empty() || rest.starts_with([' ', '\t']))).then_some((key, rest))
}

/// The text before a ` #` comment that is outside quotes.
fn strip_comment(text: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && previous.is_whitespace() => return &text[..i],
            None => {}
        }
        previous = c;
    }
    text
}

/// The `- item` lines after a key with no value, from `at`: `(None, at)` when there are none.
fn block_list(lines: &[&str], mut at: usize) -> Result<(Option<Vec<Value>>, usize), String> {
    let mut items = Vec::new();
    while at < lines.len() {
        let line = lines[at];
        if is_blank(line) {
            at += 1;
            continue;
        }
        let trimmed = line.trim_start();
        let Some(item) = trimmed.strip_prefix('-') else {
            break;
        };
        if !(item.is_empty() || item.starts_with([' ', '\t'])) {
            break;
        }
        let item = strip_comment(item).trim();
        items.push(scalar(item).map_err(|e| format!("line {}: {e}", at + 1))?);
        at += 1;
    }
    Ok(((!items.is_empty()).then_some(items), at))
}

/// The indented lines after `|` or `>`, their common indentation removed.
fn block_scalar(lines: &[&str], mut at: usize, literal: bool) -> (String, usize) {
    let mut body: Vec<&str> = Vec::new();
    while at < lines.len() {
        let line = lines[at];
        if !line.trim().is_empty() && !line.starts_with([' ', '\t']) {
            break;
        }
        body.push(line);
        at += 1;
    }
    while body.last().is_some_and(|l| l.trim().is_empty()) {
        body.pop();
    }
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let trimmed: Vec<&str> = body
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect();
    let text = if literal {
        trimmed.join("\n")
    } else {
        // Folded: lines join with spaces; a blank line is a line break.
        let mut out = String::new();
        for line in trimmed {
            if line.is_empty() {
                out.push('\n');
            } else {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push(' ');
                }
                out.push_str(line);
            }
        }
        out
    };
    (text, at)
}

/// `[a, "b, c", 'd']`: a flow sequence of scalars.
fn inline_list(text: &str) -> Result<Value, String> {
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or("an inline list must end with `]` on the same line")?;
    let mut items = Vec::new();
    let mut current = String::new();
    let mut quote = None;
    for c in inner.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                current.push(c);
            }
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                current.push(c);
            }
            None if c == ',' => items.push(std::mem::take(&mut current)),
            None if c == '[' || c == ']' || c == '{' || c == '}' => {
                return Err("nested lists and mappings are not supported".into());
            }
            None => current.push(c),
        }
    }
    if quote.is_some() {
        return Err("an unterminated quote in the list".into());
    }
    if !current.trim().is_empty() || !items.is_empty() {
        items.push(current);
    }
    items
        .iter()
        .map(|item| match item.trim() {
            "" => Err("an empty item in the list".to_owned()),
            item => scalar(item),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// One scalar: quoted text, or plain text read as null, a boolean, an integer or a string.
fn scalar(text: &str) -> Result<Value, String> {
    if let Some(inner) = text.strip_prefix('"') {
        let inner = inner
            .strip_suffix('"')
            .ok_or("a double-quoted value must end with `\"`")?;
        return unescape_double(inner).map(Value::String);
    }
    if let Some(inner) = text.strip_prefix('\'') {
        let inner = inner
            .strip_suffix('\'')
            .ok_or("a single-quoted value must end with `'`")?;
        return Ok(Value::String(inner.replace("''", "'")));
    }
    if text.starts_with(['&', '*', '!', '{', '|', '>', '@', '`']) {
        return Err(format!(
            "`{text}`: anchors, aliases, tags and mappings are not supported; quote the value"
        ));
    }
    Ok(match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => match text.parse::<i64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::String(text.to_owned()),
        },
    })
}

fn unescape_double(inner: &str) -> Result<String, String> {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some(other) => return Err(format!("unsupported escape `\\{other}` in a quoted value")),
            None => return Err("a quoted value ends with a lone `\\`".into()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(text: &str) -> Value {
        Value::Object(parse(text).unwrap())
    }

    #[test]
    fn plain_and_quoted_scalars() {
        let parsed = object(
            "description: Reviews the diff # trailing comment\n\
             model: \"gpt-4o\"\n\
             provider: 'local''s'\n\
             max_iterations: 12\n\
             hash: \"a # b\"\n\
             empty:\n",
        );
        assert_eq!(
            parsed,
            json!({
                "description": "Reviews the diff", "model": "gpt-4o", "provider": "local's",
                "max_iterations": 12, "hash": "a # b", "empty": null
            })
        );
    }

    #[test]
    fn inline_and_block_lists() {
        let parsed = object(
            "tools: [read, \"search\", 'mcp__*']\n\
             other:\n\
             \x20 - bash   # a comment\n\
             \n\
             \x20 - \"todowrite\"\n\
             after: x\n",
        );
        assert_eq!(
            parsed,
            json!({
                "tools": ["read", "search", "mcp__*"],
                "other": ["bash", "todowrite"],
                "after": "x"
            })
        );
        assert_eq!(object("tools: []\n"), json!({"tools": []}));
    }

    #[test]
    fn block_scalars_keep_or_fold_lines() {
        let parsed = object("a: |\n  one\n    two\n\nb: >\n  three\n  four\n");
        assert_eq!(parsed, json!({"a": "one\n  two", "b": "three four"}));
    }

    #[test]
    fn what_it_does_not_read_is_an_error_naming_the_line() {
        let nested = parse("description: x\nnested:\n  key: value\n").unwrap_err();
        assert!(nested.contains("line 3"), "{nested}");
        let twice = parse("a: 1\na: 2\n").unwrap_err();
        assert!(
            twice.contains("line 2") && twice.contains("twice"),
            "{twice}"
        );
        let unterminated = parse("a: \"open\n").unwrap_err();
        assert!(unterminated.contains("line 1"), "{unterminated}");
        let anchor = parse("a: &x y\n").unwrap_err();
        assert!(anchor.contains("anchors"), "{anchor}");
        let shape = parse("just words\n").unwrap_err();
        assert!(shape.contains("key: value"), "{shape}");
        let list = parse("tools: [a, [b]]\n").unwrap_err();
        assert!(list.contains("nested"), "{list}");
    }
}
