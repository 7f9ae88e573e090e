//! Engine tests for `fetch`: a host asks once in write mode and a grant covers that host
//! only, `host` rules allow, ask or deny (globs included), read mode reaches only hosts an
//! allow rule names, yolo fetches anything no rule denies; the URL's host as the policy
//! reads it.

use super::*;
use crate::{UrlError, url_host};

fn host_rule(host: &str, decision: RuleDecision) -> Rule {
    Rule {
        tool: "fetch".into(),
        pattern: String::new(),
        host: Some(host.into()),
        sandbox: None,
        decision,
    }
}

fn with_rules(rules: &[Rule]) -> Case {
    let mut c = Case::new();
    c.config = RuleSet::new(rules).unwrap();
    c
}

fn fetch(c: &Case, mode: Mode, url: &str) -> Verdict {
    c.decide(mode, "fetch", true, json!({ "url": url }))
}

fn docs_rs() -> Scope {
    Scope::Host {
        tool: "fetch".into(),
        host: "docs.rs".into(),
    }
}

#[test]
fn write_mode_asks_per_host_and_a_grant_covers_only_that_host() {
    let mut c = Case::new();
    match fetch(&c, Mode::Write, "https://docs.rs/tokio") {
        Verdict::Ask {
            scopes, persist, ..
        } => {
            assert_eq!(scopes, vec![docs_rs()]);
            assert_eq!(scopes[0].describe(), "host:docs.rs");
            assert!(persist);
        }
        other => panic!("{other:?}"),
    }
    c.grants.grant(&[docs_rs()]);
    assert_eq!(
        fetch(&c, Mode::Write, "https://DOCS.rs/serde?x=1"),
        Verdict::Allow
    );
    assert!(is_ask(&fetch(&c, Mode::Write, "https://api.docs.rs/")));
    assert!(is_ask(&fetch(&c, Mode::Write, "https://crates.io/")));
}

#[test]
fn host_rules_allow_ask_and_deny_with_globs() {
    let c = with_rules(&[
        host_rule("docs.rs", RuleDecision::Allow),
        host_rule("*.example.com", RuleDecision::Allow),
        host_rule("evil.example.com", RuleDecision::Deny),
        host_rule("slow.example.org", RuleDecision::Ask),
    ]);
    assert_eq!(fetch(&c, Mode::Write, "https://docs.rs/a"), Verdict::Allow);
    assert_eq!(
        fetch(&c, Mode::Write, "http://a.b.example.com/x"),
        Verdict::Allow
    );
    // `*.example.com` is about subdomains: the bare domain still asks.
    assert!(is_ask(&fetch(&c, Mode::Write, "https://example.com/")));
    // Deny beats allow, in every mode.
    for mode in [Mode::Read, Mode::Write, Mode::Yolo] {
        match fetch(&c, mode, "https://evil.example.com/") {
            Verdict::Deny { reason, by } => {
                assert_eq!(by, ResolvedBy::Rule);
                assert!(reason.contains("fetch host=evil.example.com"), "{reason}");
            }
            other => panic!("{mode:?}: {other:?}"),
        }
    }
    match fetch(&c, Mode::Write, "https://slow.example.org/") {
        Verdict::Ask { persist, .. } => assert!(!persist),
        other => panic!("{other:?}"),
    }
}

#[test]
fn read_mode_fetches_only_hosts_an_allow_rule_names() {
    let c = with_rules(&[host_rule("docs.rs", RuleDecision::Allow)]);
    assert_eq!(fetch(&c, Mode::Read, "https://docs.rs/x"), Verdict::Allow);
    match fetch(&c, Mode::Read, "https://crates.io/") {
        Verdict::Deny { reason, by } => {
            assert_eq!(by, ResolvedBy::Policy);
            assert!(reason.contains("crates.io"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A session grant is not a rule: read mode still refuses.
    let mut granted = Case::new();
    granted.grants.grant(&[docs_rs()]);
    assert!(matches!(
        fetch(&granted, Mode::Read, "https://docs.rs/"),
        Verdict::Deny { .. }
    ));
}

#[test]
fn yolo_fetches_anything_no_rule_denies_and_a_whole_tool_rule_covers_every_host() {
    let c = Case::new();
    assert_eq!(fetch(&c, Mode::Yolo, "https://crates.io/"), Verdict::Allow);
    let all = Case::new().rules(&[("fetch", "*", RuleDecision::Allow)]);
    assert_eq!(
        fetch(&all, Mode::Write, "https://crates.io/"),
        Verdict::Allow
    );
    assert_eq!(
        fetch(&all, Mode::Read, "https://crates.io/"),
        Verdict::Allow
    );
}

#[test]
fn an_allow_always_answer_persists_a_host_rule() {
    let rules = rules_for(&[docs_rs()]);
    assert_eq!(rules, vec![host_rule("docs.rs", RuleDecision::Allow)]);
    let text = toml::to_string(&rules[0]).unwrap();
    assert!(
        text.contains("host = \"docs.rs\"") && !text.contains("pattern"),
        "{text}"
    );
}

#[test]
fn rule_shapes_are_checked() {
    let both = Rule {
        pattern: "*".into(),
        ..host_rule("docs.rs", RuleDecision::Allow)
    };
    let not_fetch = Rule {
        tool: "bash".into(),
        ..host_rule("docs.rs", RuleDecision::Allow)
    };
    let neither = Rule {
        host: None,
        ..host_rule("", RuleDecision::Allow)
    };
    for (rule, says) in [
        (both, "not both"),
        (not_fetch, "fetch"),
        (neither, "needs a `pattern`"),
        (host_rule(" ", RuleDecision::Allow), "empty"),
    ] {
        let err = RuleSet::new(&[rule]).unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
    }
    // A rule without a pattern is read from TOML when it names a host.
    let parsed: Rule =
        toml::from_str("tool = \"fetch\"\nhost = \"docs.rs\"\ndecision = \"allow\"\n").unwrap();
    assert_eq!(parsed, host_rule("docs.rs", RuleDecision::Allow));
}

#[test]
fn the_policy_reads_the_host_as_the_url_parser_does() {
    assert_eq!(url_host("https://Docs.RS./a").unwrap(), "docs.rs");
    assert_eq!(url_host("http://[::1]:8080/").unwrap(), "::1");
    assert_eq!(url_host("http://127.1/").unwrap(), "127.0.0.1");
    assert_eq!(url_host("http://0x7f000001/").unwrap(), "127.0.0.1");
    assert_eq!(
        url_host("https://user:pw@bücher.example/").unwrap(),
        "xn--bcher-kva.example"
    );
    assert!(matches!(
        url_host("ftp://docs.rs/"),
        Err(UrlError::Scheme(_))
    ));
    assert!(matches!(
        url_host("file:///etc/passwd"),
        Err(UrlError::Scheme(_))
    ));
    assert!(matches!(url_host("docs.rs"), Err(UrlError::Invalid(..))));
    // A URL the policy cannot read reaches nothing: the tool refuses it before any request.
    let c = Case::new();
    assert_eq!(fetch(&c, Mode::Read, "not a url"), Verdict::Allow);
    // Only the built-in `fetch` is read by its `url`.
    assert_eq!(
        c.decide(
            Mode::Write,
            "mcp__web__fetch",
            true,
            json!({"url": "https://x.io"})
        ),
        Verdict::Allow
    );
}
