//! Which hosts a network allowlist lets through: [`DomainRules`] — allowed and denied host
//! patterns and the registry presets a person opted into — decides one host. **Deny wins**
//! over allow, whatever the order; a host no pattern names is [`HostVerdict::Unlisted`] (the
//! caller asks a person, or refuses headless).
//!
//! Patterns: `example.com` (that host only), `*.example.com` (its subdomains at any depth,
//! not `example.com` itself), `*` (every host), or an IP literal (that address only; a
//! hostname pattern never matches an IP literal). Hosts and patterns compare in lowercase
//! without a trailing dot; a host that is not ASCII must be given in its punycode (`xn--`)
//! form, as DNS carries it.

/// A registry preset: a name a person opts into (`allow_domains = ["preset:npm"]`), and the
/// hosts its tools fetch from.
pub const PRESETS: &[(&str, &[&str])] = &[
    ("npm", &["registry.npmjs.org", "registry.yarnpkg.com"]),
    ("pypi", &["pypi.org", "files.pythonhosted.org"]),
    (
        "crates",
        &[
            "crates.io",
            "index.crates.io",
            "static.crates.io",
            "static.rust-lang.org",
        ],
    ),
    (
        "go",
        &[
            "proxy.golang.org",
            "sum.golang.org",
            "storage.googleapis.com",
        ],
    ),
    (
        "debian",
        &[
            "deb.debian.org",
            "security.debian.org",
            "cdn-fastly.deb.debian.org",
        ],
    ),
    (
        "github",
        &[
            "github.com",
            "api.github.com",
            "codeload.github.com",
            "objects.githubusercontent.com",
            "raw.githubusercontent.com",
        ],
    ),
];

/// One host pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `*`.
    Any,
    /// `example.com`, or an IP literal.
    Exact(String),
    /// `*.example.com`: the suffix, with its leading dot (`.example.com`).
    Subdomains(String),
}

/// Why a pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("`{0}`: a host pattern is a host name, `*.NAME`, `*` or an IP address")]
    Malformed(String),
    #[error("`{0}`: a host pattern is ASCII; write an international name in its xn-- form")]
    NotAscii(String),
    #[error("`preset:{0}` is no preset; the presets are {1}")]
    UnknownPreset(String, String),
}

impl HostPattern {
    /// Parses one pattern.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let pattern = normalize(text);
        // `*.` names no domain (normalizing would make it `*`).
        if text.trim().starts_with("*.") && !pattern.starts_with("*.") {
            return Err(PatternError::Malformed(text.to_owned()));
        }
        if !pattern.is_ascii() {
            return Err(PatternError::NotAscii(text.to_owned()));
        }
        if pattern == "*" {
            return Ok(HostPattern::Any);
        }
        if pattern.parse::<std::net::IpAddr>().is_ok() {
            return Ok(HostPattern::Exact(pattern));
        }
        let (wild, name) = match pattern.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, pattern.as_str()),
        };
        let labels_ok = !name.is_empty()
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        if !labels_ok || name.len() > 253 {
            return Err(PatternError::Malformed(text.to_owned()));
        }
        Ok(if wild {
            HostPattern::Subdomains(format!(".{name}"))
        } else {
            HostPattern::Exact(name.to_owned())
        })
    }

    /// Whether `host` (already normalized) matches.
    /// How much a pattern covers: 0 one host, 1 a domain's subdomains, 2 everything.
    fn breadth(&self) -> u8 {
        match self {
            HostPattern::Exact(_) => 0,
            HostPattern::Subdomains(_) => 1,
            HostPattern::Any => 2,
        }
    }

    fn matches(&self, host: &str, host_is_ip: bool) -> bool {
        match self {
            HostPattern::Any => true,
            HostPattern::Exact(name) => name == host,
            HostPattern::Subdomains(suffix) => {
                !host_is_ip && host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Any => f.write_str("*"),
            HostPattern::Exact(name) => f.write_str(name),
            HostPattern::Subdomains(suffix) => write!(f, "*{suffix}"),
        }
    }
}

/// A pattern and where it came from (`allow_domains`, `preset:npm`, …), for the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPattern {
    pub pattern: HostPattern,
    /// The entry as written (`*.npmjs.org`, `preset:npm`).
    pub source: String,
}

/// The allowed and denied hosts in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainRules {
    allow: Vec<NamedPattern>,
    deny: Vec<NamedPattern>,
}

/// What the rules say of one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostVerdict {
    /// Allowed, by this entry.
    Allowed(String),
    /// Denied, by this entry (deny wins).
    Denied(String),
    /// No entry names it.
    Unlisted,
}

impl DomainRules {
    /// Rules from `allow_domains` and `deny_domains` entries: patterns, or `preset:NAME` (in
    /// either list).
    pub fn new<A, D>(allow: A, deny: D) -> Result<Self, PatternError>
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        D: IntoIterator,
        D::Item: AsRef<str>,
    {
        Ok(Self {
            allow: expand(allow)?,
            deny: expand(deny)?,
        })
    }

    /// These rules with `more` added (a session's or an agent's own lists).
    pub fn with(mut self, more: DomainRules) -> Self {
        self.allow.extend(more.allow);
        self.deny.extend(more.deny);
        self
    }

    /// The IP addresses the allow entries name one by one (not denied): the only private
    /// addresses a connection may reach, whether its host is that address or a name that
    /// resolves to it.
    pub fn named_addresses(&self) -> Vec<std::net::IpAddr> {
        self.allow
            .iter()
            .filter_map(|p| match &p.pattern {
                HostPattern::Exact(text) => text.parse::<std::net::IpAddr>().ok(),
                HostPattern::Subdomains(_) | HostPattern::Any => None,
            })
            .filter(|ip| !matches!(self.decide(&ip.to_string()), HostVerdict::Denied(_)))
            .collect()
    }

    /// The verdict for `host` (a name or an IP literal, brackets allowed for IPv6), by the
    /// most specific entry that matches (an exact host over `*.suffix` over `*`), so the
    /// audit names the entry that meant this host.
    pub fn decide(&self, host: &str) -> HostVerdict {
        let host = normalize(host.trim_start_matches('[').trim_end_matches(']'));
        let is_ip = host.parse::<std::net::IpAddr>().is_ok();
        let hit = |list: &[NamedPattern]| {
            list.iter()
                .filter(|p| p.pattern.matches(&host, is_ip))
                .min_by_key(|p| p.pattern.breadth())
                .map(|p| p.source.clone())
        };
        if let Some(rule) = hit(&self.deny) {
            return HostVerdict::Denied(rule);
        }
        match hit(&self.allow) {
            Some(rule) => HostVerdict::Allowed(rule),
            None => HostVerdict::Unlisted,
        }
    }
}

fn expand<I>(entries: I) -> Result<Vec<NamedPattern>, PatternError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.as_ref().trim();
        match entry.strip_prefix("preset:") {
            Some(name) => {
                let Some((_, hosts)) = PRESETS.iter().find(|(n, _)| *n == name) else {
                    let known: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
                    return Err(PatternError::UnknownPreset(
                        name.to_owned(),
                        known.join(", "),
                    ));
                };
                for host in *hosts {
                    out.push(NamedPattern {
                        pattern: HostPattern::parse(host)?,
                        source: entry.to_owned(),
                    });
                }
            }
            None => out.push(NamedPattern {
                pattern: HostPattern::parse(entry)?,
                source: entry.to_owned(),
            }),
        }
    }
    Ok(out)
}

/// Lowercase, without a trailing dot.
fn normalize(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> DomainRules {
        DomainRules::new(allow, deny).unwrap()
    }

    #[test]
    fn hosts_are_allowed_denied_or_unlisted_and_deny_wins() {
        let r = rules(
            &["example.com", "*.npmjs.org", "preset:pypi", "10.0.0.5"],
            &["evil.npmjs.org", "*.pythonhosted.org"],
        );
        let cases = [
            ("example.com", HostVerdict::Allowed("example.com".into())),
            ("EXAMPLE.com.", HostVerdict::Allowed("example.com".into())),
            ("www.example.com", HostVerdict::Unlisted),
            (
                "registry.npmjs.org",
                HostVerdict::Allowed("*.npmjs.org".into()),
            ),
            ("a.b.npmjs.org", HostVerdict::Allowed("*.npmjs.org".into())),
            ("npmjs.org", HostVerdict::Unlisted),
            (
                "evil.npmjs.org",
                HostVerdict::Denied("evil.npmjs.org".into()),
            ),
            ("notnpmjs.org", HostVerdict::Unlisted),
            ("pypi.org", HostVerdict::Allowed("preset:pypi".into())),
            (
                "files.pythonhosted.org",
                HostVerdict::Denied("*.pythonhosted.org".into()),
            ),
            ("10.0.0.5", HostVerdict::Allowed("10.0.0.5".into())),
            ("10.0.0.6", HostVerdict::Unlisted),
        ];
        for (host, want) in cases {
            assert_eq!(r.decide(host), want, "{host}");
        }
    }

    #[test]
    fn a_wildcard_never_matches_an_ip_literal_but_star_matches_all() {
        let r = rules(&["*.0.0.1"], &[]);
        assert_eq!(r.decide("127.0.0.1"), HostVerdict::Unlisted);
        let all = rules(&["*"], &["*.internal"]);
        assert_eq!(
            all.decide("anything.test"),
            HostVerdict::Allowed("*".into())
        );
        assert_eq!(all.decide("[::1]"), HostVerdict::Allowed("*".into()));
        assert_eq!(
            all.decide("db.internal"),
            HostVerdict::Denied("*.internal".into())
        );
    }

    #[test]
    fn the_named_addresses_are_the_allowed_ip_entries_not_denied() {
        let r = rules(
            &["*", "10.0.0.5", "example.com", "::1", "10.0.0.6"],
            &["10.0.0.6"],
        );
        assert_eq!(
            r.named_addresses(),
            [
                "10.0.0.5".parse::<std::net::IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
    }

    #[test]
    fn the_most_specific_entry_decides_whatever_the_order() {
        let r = rules(&["*", "*.example.com", "api.example.com", "10.0.0.5"], &[]);
        for (host, rule) in [
            ("api.example.com", "api.example.com"),
            ("www.example.com", "*.example.com"),
            ("example.org", "*"),
            ("10.0.0.5", "10.0.0.5"),
            ("10.0.0.6", "*"),
        ] {
            assert_eq!(r.decide(host), HostVerdict::Allowed(rule.into()), "{host}");
        }
        let deny = rules(&["api.example.com"], &["*", "*.example.com"]);
        assert_eq!(
            deny.decide("api.example.com"),
            HostVerdict::Denied("*.example.com".into()),
            "deny wins, by its most specific entry"
        );
    }

    #[test]
    fn bad_patterns_and_presets_are_refused_naming_the_entry() {
        let cases = [
            ("exa mple.com", "a host pattern is"),
            ("*.", "a host pattern is"),
            ("**.x.com", "a host pattern is"),
            ("-x.com", "a host pattern is"),
            ("a..b", "a host pattern is"),
            ("bücher.de", "xn-- form"),
            ("preset:maven", "the presets are npm, pypi"),
        ];
        for (entry, want) in cases {
            let err = DomainRules::new([entry], [""; 0]).unwrap_err().to_string();
            assert!(err.contains(want), "{entry}: {err}");
        }
    }

    #[test]
    fn every_preset_is_made_of_valid_host_names() {
        for (name, hosts) in PRESETS {
            assert!(!hosts.is_empty(), "{name}");
            for host in *hosts {
                assert!(
                    matches!(HostPattern::parse(host), Ok(HostPattern::Exact(_))),
                    "{name}: {host}"
                );
            }
        }
    }

    #[test]
    fn rules_add_up_and_deny_still_wins() {
        let config = rules(&["*.example.com"], &[]);
        let session = rules(&[], &["secret.example.com"]);
        let both = config.with(session);
        assert_eq!(
            both.decide("secret.example.com"),
            HostVerdict::Denied("secret.example.com".into())
        );
        assert_eq!(
            both.decide("docs.example.com"),
            HostVerdict::Allowed("*.example.com".into())
        );
    }
}
