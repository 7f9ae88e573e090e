//! An agent file: front matter between `+++` lines (TOML) or `---` lines (YAML, the subset
//! of `yaml.rs`), then the body, which is the agent's system prompt.
//!
//! Both syntaxes land in one serde type with unknown keys refused, so a key misspelt in
//! either is the same clear error; the checks serde cannot make (non-empty strings, an
//! iteration cap of at least one, valid tool globs) follow in `Definition::check`.

use amber_proto::Mode;
use serde::Deserialize;

use super::tools::ToolFilter;

/// What an agent file defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Definition {
    pub description: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub mode: Option<Mode>,
    /// The tool allow-list (names or globs); `None`: every tool.
    pub tools: Option<Vec<String>>,
    pub max_iterations: Option<u32>,
    /// The sandbox network of a session that runs as this agent, where the caller asked
    /// for none.
    pub network: Option<amber_proto::NetworkMode>,
    /// Network allowlist entries the agent adds to its session's (`[sandbox]`'s patterns).
    pub allow_domains: Vec<String>,
    pub deny_domains: Vec<String>,
    /// The body: the agent's system prompt.
    pub prompt: String,
}

/// The keys of the front matter, as either syntax spells them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    /// Optional; when given it must be the file's name (the name is the file stem).
    name: Option<String>,
    description: String,
    model: Option<String>,
    provider: Option<String>,
    mode: Option<Mode>,
    tools: Option<ToolList>,
    max_iterations: Option<u32>,
    network: Option<amber_proto::NetworkMode>,
    allow_domains: Option<ToolList>,
    deny_domains: Option<ToolList>,
}

/// `tools = ["read", "search"]`, or one comma-separated string (`tools: read, search`); the
/// domain lists are written the same way.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ToolList {
    List(Vec<String>),
    Text(String),
}

impl ToolList {
    fn into_names(self) -> Vec<String> {
        match self {
            ToolList::List(names) => names.into_iter().map(|n| n.trim().to_owned()).collect(),
            ToolList::Text(text) => text
                .split(',')
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect(),
        }
    }
}

/// Parses the file of agent `name`. `Err` is the problem, for a message that names the file.
pub(crate) fn parse(name: &str, text: &str) -> Result<Definition, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (syntax, front, body) = split(text)?;
    let front: FrontMatter = match syntax {
        Syntax::Toml => toml::from_str(front).map_err(|e| format!("TOML front matter: {e}"))?,
        Syntax::Yaml => {
            let object =
                super::yaml::parse(front).map_err(|e| format!("YAML front matter: {e}"))?;
            // The path names the key serde rejected (`max_iterations: invalid value …`).
            serde_path_to_error::deserialize(serde_json::Value::Object(object))
                .map_err(|e| format!("YAML front matter: {e}"))?
        }
    };
    if let Some(given) = &front.name
        && given != name
    {
        return Err(format!(
            "`name` is `{given}`, but the file is `{name}.md`: an agent's name is its file name"
        ));
    }
    Definition {
        description: front.description.trim().to_owned(),
        model: front.model.map(|m| m.trim().to_owned()),
        provider: front.provider.map(|p| p.trim().to_owned()),
        mode: front.mode,
        tools: front.tools.map(ToolList::into_names),
        max_iterations: front.max_iterations,
        network: front.network,
        allow_domains: front
            .allow_domains
            .map(ToolList::into_names)
            .unwrap_or_default(),
        deny_domains: front
            .deny_domains
            .map(ToolList::into_names)
            .unwrap_or_default(),
        prompt: body.trim().to_owned(),
    }
    .check()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Toml,
    Yaml,
}

/// `(syntax, front matter, body)`.
fn split(text: &str) -> Result<(Syntax, &str, &str), String> {
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    let (syntax, fence) = match first.trim_end() {
        "+++" => (Syntax::Toml, "+++"),
        "---" => (Syntax::Yaml, "---"),
        _ => {
            return Err(
                "no front matter: the file must start with a `---` line (YAML) or a \
                 `+++` line (TOML), then `description`, then the same line again"
                    .into(),
            );
        }
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == fence {
            return Ok((syntax, &rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(format!("the front matter has no closing `{fence}` line"))
}

impl Definition {
    fn check(self) -> Result<Definition, String> {
        if self.description.is_empty() {
            return Err("`description` is empty".into());
        }
        if self.model.as_deref() == Some("") {
            return Err("`model` is empty (leave it out for the session's default)".into());
        }
        if self.provider.as_deref() == Some("") {
            return Err("`provider` is empty (leave it out for the session's default)".into());
        }
        if self.max_iterations == Some(0) {
            return Err("`max_iterations` must be at least 1".into());
        }
        amber_policy::net::DomainRules::new(&self.allow_domains, &self.deny_domains)
            .map_err(|e| format!("`allow_domains` / `deny_domains`: {e}"))?;
        if let Some(tools) = &self.tools {
            ToolFilter::new(tools).map_err(|e| format!("`tools`: {e}"))?;
        }
        if self.prompt.is_empty() {
            return Err(
                "the body after the front matter (the agent's system prompt) is empty".into(),
            );
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML_AGENT: &str = "+++\n\
        description = \"Writes docs\"\n\
        model = \"gpt-4o\"\n\
        provider = \"local\"\n\
        mode = \"read\"\n\
        tools = [\"read\", \"mcp__*\"]\n\
        max_iterations = 7\n\
        +++\n\
        \n\
        You write documentation.\n";

    const YAML_AGENT: &str = "---\n\
        description: Writes docs\n\
        model: gpt-4o\n\
        provider: \"local\"\n\
        mode: read\n\
        tools:\n\
        \x20 - read\n\
        \x20 - 'mcp__*'\n\
        max_iterations: 7\n\
        ---\n\
        \n\
        You write documentation.\n";

    #[test]
    fn both_syntaxes_define_the_same_agent() {
        let toml = parse("docs", TOML_AGENT).unwrap();
        let yaml = parse("docs", YAML_AGENT).unwrap();
        assert_eq!(toml, yaml);
        assert_eq!(
            toml,
            Definition {
                description: "Writes docs".into(),
                model: Some("gpt-4o".into()),
                provider: Some("local".into()),
                mode: Some(Mode::Read),
                tools: Some(vec!["read".into(), "mcp__*".into()]),
                max_iterations: Some(7),
                network: None,
                allow_domains: Vec::new(),
                deny_domains: Vec::new(),
                prompt: "You write documentation.".into(),
            }
        );
    }

    #[test]
    fn the_example_of_the_configuration_docs_parses() {
        let text = "---\n\
            description: Writes and fixes the user docs    # required\n\
            model: gpt-4o                                   # default of the session's model\n\
            provider: openrouter                            # a provider name (provider/list)\n\
            mode: write                                     # read | write | yolo\n\
            tools: [read, search, edit, \"mcp__docs__*\"]     # allow-list: names or globs\n\
            max_iterations: 30                              # replaces [agent] max_tool_iterations\n\
            ---\n\
            You are the docs agent.\n";
        let agent = parse("docs", text).unwrap();
        assert_eq!(agent.description, "Writes and fixes the user docs");
        assert_eq!(agent.mode, Some(Mode::Write));
        assert_eq!(
            agent.tools.unwrap(),
            ["read", "search", "edit", "mcp__docs__*"]
        );
        assert_eq!(agent.max_iterations, Some(30));
    }

    #[test]
    fn an_agent_may_set_its_network_and_allowlist_entries() {
        let yaml = parse(
            "deps",
            "---\ndescription: d\nnetwork: allowlist\nallow_domains: [preset:npm, \"*.example.com\"]\n\
             deny_domains: uploads.example.com\n---\nb\n",
        )
        .unwrap();
        assert_eq!(yaml.network, Some(amber_proto::NetworkMode::Allowlist));
        assert_eq!(yaml.allow_domains, ["preset:npm", "*.example.com"]);
        assert_eq!(yaml.deny_domains, ["uploads.example.com"]);
        let toml = parse(
            "deps",
            "+++\ndescription = \"d\"\nnetwork = false\nallow_domains = [\"crates.io\"]\n+++\nb\n",
        )
        .unwrap();
        assert_eq!(toml.network, Some(amber_proto::NetworkMode::Off));
        let bad = parse(
            "deps",
            "---\ndescription: d\nallow_domains: [preset:maven]\n---\nb\n",
        );
        assert!(bad.unwrap_err().contains("allow_domains"));
    }

    #[test]
    fn only_description_is_required() {
        let agent = parse("a", "---\ndescription: d\n---\nbody\n").unwrap();
        assert_eq!(agent.description, "d");
        assert_eq!((agent.model, agent.mode, agent.tools), (None, None, None));
        assert_eq!(agent.prompt, "body");
    }

    #[test]
    fn liberal_in_what_a_tools_list_looks_like() {
        let inline = parse(
            "a",
            "---\ndescription: d\ntools: [read, \"bash\"]\n---\nb\n",
        )
        .unwrap();
        assert_eq!(inline.tools.unwrap(), ["read", "bash"]);
        let text = parse("a", "---\ndescription: d\ntools: read, bash\n---\nb\n").unwrap();
        assert_eq!(text.tools.unwrap(), ["read", "bash"]);
        let toml = parse("a", "+++\ndescription = \"d\"\ntools = \"read\"\n+++\nb\n").unwrap();
        assert_eq!(toml.tools.unwrap(), ["read"]);
        let crlf = parse("a", "---\r\ndescription: d\r\n---\r\nbody\r\n").unwrap();
        assert_eq!(
            (crlf.description.as_str(), crlf.prompt.as_str()),
            ("d", "body")
        );
    }

    #[test]
    fn a_name_key_must_match_the_file() {
        assert!(parse("docs", "---\nname: docs\ndescription: d\n---\nb\n").is_ok());
        let err = parse("docs", "---\nname: other\ndescription: d\n---\nb\n").unwrap_err();
        assert!(err.contains("docs.md") && err.contains("other"), "{err}");
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let cases = [
            ("no front matter", "just a prompt\n", "no front matter"),
            ("unclosed", "---\ndescription: d\nbody\n", "closing `---`"),
            ("no description", "---\nmodel: m\n---\nb\n", "description"),
            (
                "empty description",
                "---\ndescription: \"\"\n---\nb\n",
                "`description` is empty",
            ),
            (
                "unknown key",
                "---\ndescription: d\ncolour: red\n---\nb\n",
                "colour",
            ),
            (
                "bad mode",
                "---\ndescription: d\nmode: sideways\n---\nb\n",
                "sideways",
            ),
            (
                "zero cap",
                "---\ndescription: d\nmax_iterations: 0\n---\nb\n",
                "at least 1",
            ),
            (
                "negative cap",
                "---\ndescription: d\nmax_iterations: -3\n---\nb\n",
                "max_iterations",
            ),
            (
                "bad glob",
                "---\ndescription: d\ntools: [\"[a\"]\n---\nb\n",
                "`tools`",
            ),
            ("empty body", "---\ndescription: d\n---\n\n", "body"),
            ("toml syntax", "+++\ndescription = \n+++\nb\n", "TOML"),
            (
                "yaml syntax",
                "---\ndescription: d\n  nested: x\n---\nb\n",
                "YAML",
            ),
        ];
        for (what, text, expected) in cases {
            let err = parse("a", text).expect_err(what);
            assert!(err.contains(expected), "{what}: {err}");
        }
    }
}
