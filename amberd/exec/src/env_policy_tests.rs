//! Tests of the tool processes' environment: inherit, exclude, set, provider keys removed.

use super::*;

/// A daemon environment with a little of everything.
fn daemon_env() -> Vec<(OsString, OsString)> {
    [
        ("HOME", "/home/u"),
        ("PATH", "/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C"),
        ("EDITOR", "vi"),
        ("AMBER_API_KEY", "sk-amber"),
        ("OPENAI_API_KEY", "sk-openai"),
        ("GROQ_KEY", "gsk-groq"),
        ("GITHUB_TOKEN", "ghp"),
        ("github_token", "ghp-lower"),
        ("MY_SECRET", "s"),
        ("SecretSauce", "s2"),
        ("DB_PASSWORD", "pw"),
        ("CARGO_HOME", "/home/u/.cargo"),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect()
}

/// The provider keys as the daemon names them: two presets' and `extra`.
fn secrets(extra: &[&str]) -> BTreeSet<String> {
    provider_key_vars(
        ["OPENAI_API_KEY", "GROQ_API_KEY"]
            .into_iter()
            .chain(extra.iter().copied()),
    )
}

#[test]
fn the_amber_key_and_every_named_key_are_provider_keys() {
    let keys = secrets(&["MY_PROVIDER_KEY"]);
    for name in ["AMBER_API_KEY", "OPENAI_API_KEY", "MY_PROVIDER_KEY"] {
        assert!(keys.contains(name), "{name} missing from {keys:?}");
    }
    assert!(!keys.contains("GITHUB_TOKEN"), "{keys:?}");
}

fn names(env: &ToolEnv) -> Vec<String> {
    env.vars()
        .iter()
        .map(|(n, _)| n.to_string_lossy().into_owned())
        .collect()
}

fn parse(toml_text: &str) -> ToolEnvConfig {
    toml::from_str(toml_text).unwrap()
}

#[test]
fn policies_keep_and_remove_what_they_say() {
    // (case, [tools.env] toml, provider key vars, expected names in order)
    let cases: &[(&str, &str, &[&str], &[&str])] = &[
        (
            "default: everything but the secrets",
            "",
            &[],
            &[
                "HOME",
                "PATH",
                "LANG",
                "LC_ALL",
                "EDITOR",
                "GROQ_KEY",
                "CARGO_HOME",
            ],
        ),
        (
            "a configured api_key_env is removed by exact name",
            "",
            &["GROQ_KEY"],
            &["HOME", "PATH", "LANG", "LC_ALL", "EDITOR", "CARGO_HOME"],
        ),
        (
            "core keeps the documented set and LC_*",
            "inherit = \"core\"",
            &[],
            &["HOME", "PATH", "LANG", "LC_ALL"],
        ),
        (
            "none keeps nothing but gives a PATH",
            "inherit = \"none\"",
            &[],
            &["PATH"],
        ),
        (
            "exclude adds globs, any case",
            "exclude = [\"editor\", \"CARGO_*\"]",
            &["GROQ_KEY"],
            &["HOME", "PATH", "LANG", "LC_ALL"],
        ),
        (
            "ignoring the default globs never frees a provider key",
            "ignore_default_excludes = true",
            &["GROQ_KEY"],
            &[
                "HOME",
                "PATH",
                "LANG",
                "LC_ALL",
                "EDITOR",
                "GITHUB_TOKEN",
                "github_token",
                "MY_SECRET",
                "SecretSauce",
                "DB_PASSWORD",
                "CARGO_HOME",
            ],
        ),
        (
            "set adds and replaces, last",
            "inherit = \"core\"\nset = { PATH = \"/opt/bin\", FOO = \"1\" }",
            &[],
            &["HOME", "LANG", "LC_ALL", "FOO", "PATH"],
        ),
        (
            "set is explicit: it may name an excluded variable",
            "inherit = \"none\"\nset = { GITHUB_TOKEN = \"mine\", PATH = \"/bin\" }",
            &[],
            &["GITHUB_TOKEN", "PATH"],
        ),
    ];
    for (case, text, keys, expected) in cases {
        let env = ToolEnv::new(&parse(text), &secrets(keys), daemon_env()).unwrap();
        assert_eq!(names(&env), *expected, "{case}");
    }
}

#[test]
fn values_come_from_the_daemon_or_set() {
    let config = parse("set = { EDITOR = \"nano\" }");
    let env = ToolEnv::new(&config, &secrets(&[]), daemon_env()).unwrap();
    assert_eq!(env.get("EDITOR"), Some(OsStr::new("nano")));
    assert_eq!(env.get("HOME"), Some(OsStr::new("/home/u")));
    assert_eq!(env.get("AMBER_API_KEY"), None);
    let none = ToolEnv::new(&parse("inherit = \"none\""), &secrets(&[]), daemon_env()).unwrap();
    assert_eq!(none.get("PATH"), Some(OsStr::new(DEFAULT_PATH)));
}

#[test]
fn default_globs_match_whole_names_in_any_case() {
    let env: Vec<(OsString, OsString)> = [
        "X_API_KEY",
        "x_api_key",
        "API_KEY",
        "NPM_TOKEN",
        "TOKENIZER",
        "passwordless",
        "PASSWORD_STORE_DIR",
        "SECRETS",
    ]
    .into_iter()
    .map(|n| (n.into(), "v".into()))
    .collect();
    let kept = ToolEnv::new(&ToolEnvConfig::default(), &BTreeSet::new(), env).unwrap();
    // `*_API_KEY` needs the underscore; `*_TOKEN` must end the name.
    assert_eq!(names(&kept), ["API_KEY", "TOKENIZER"]);
}

#[test]
fn non_unicode_names_are_matched_too() {
    use std::os::unix::ffi::OsStringExt;
    let odd = OsString::from_vec(b"\xffMY_SECRET".to_vec());
    let plain = OsString::from_vec(b"\xffPLAIN".to_vec());
    let env = vec![(odd, "v".into()), (plain.clone(), "v".into())];
    let kept = ToolEnv::new(&ToolEnvConfig::default(), &BTreeSet::new(), env).unwrap();
    assert_eq!(kept.vars().len(), 1);
    assert_eq!(kept.vars()[0].0, plain);
}

#[test]
fn bad_globs_and_set_entries_are_config_errors() {
    let cases: &[(&str, &str)] = &[
        ("exclude = [\"[unclosed\"]", "is not a valid glob"),
        ("set = { \"\" = \"x\" }", "not a valid variable name"),
        ("set = { \"A=B\" = \"x\" }", "not a valid variable name"),
        ("set = { A = \"x\\u0000y\" }", "NUL"),
    ];
    for (text, message) in cases {
        let err = parse(text).validate().unwrap_err();
        assert!(err.to_string().contains(message), "{text}: {err}");
    }
    assert!(toml::from_str::<ToolEnvConfig>("inherit = \"some\"").is_err());
    assert!(toml::from_str::<ToolEnvConfig>("unknown = 1").is_err());
}

#[test]
fn the_process_default_strips_the_default_globs() {
    let env = ToolEnv::process_default();
    for (name, _) in env.vars() {
        let name = name.to_string_lossy().to_uppercase();
        assert!(
            !name.ends_with("_API_KEY") && !name.contains("SECRET"),
            "{name} leaked"
        );
    }
}

#[test]
fn star_only_globs_match_names_exactly_as_globset_does() {
    let globs = [
        "*_API_KEY",
        "*_TOKEN",
        "*SECRET*",
        "*PASSWORD*",
        "AWS_*",
        "exact",
        "a*b*c",
        "ab*b",
        "*",
        "**",
        "x*",
        "*x",
        "",
    ];
    let names = [
        "OPENAI_API_KEY",
        "openai_api_key",
        "API_KEY",
        "_API_KEY",
        "GITHUB_TOKEN",
        "TOKEN",
        "MY_SECRET",
        "SecretSauce",
        "DB_PASSWORD",
        "AWS_REGION",
        "aws_",
        "EXACT",
        "exactly",
        "abc",
        "aXbYc",
        "acb",
        "ab",
        "abb",
        "abXb",
        "x",
        "",
        "a/b/c",
        "PATH",
    ];
    for glob in globs {
        let parsed = globset::GlobBuilder::new(glob)
            .case_insensitive(true)
            .literal_separator(false)
            .build()
            .unwrap();
        let by_hand = Excludes::new(vec![parsed.clone()]);
        assert!(by_hand.simple.is_some(), "{glob:?} is star-only");
        let reference = parsed.compile_matcher();
        for name in names {
            assert_eq!(
                by_hand.is_match(name),
                reference.is_match(name),
                "{glob:?} against {name:?}"
            );
        }
    }
}

#[test]
fn other_globs_and_non_ascii_names_go_through_globset() {
    let globs: Vec<_> = ["SECRET_?", "KEY_[0-9]", "*SECRET*"]
        .into_iter()
        .map(|g| {
            globset::GlobBuilder::new(g)
                .case_insensitive(true)
                .literal_separator(false)
                .build()
                .unwrap()
        })
        .collect();
    let excludes = Excludes::new(globs);
    assert!(excludes.simple.is_none());
    for (name, excluded) in [
        ("SECRET_A", true),
        ("SECRE_AB", false),
        ("KEY_7", true),
        ("KEY_X", false),
        ("MY_SECRET_THING", true),
        ("PATH", false),
    ] {
        assert_eq!(excludes.is_match(name), excluded, "{name}");
    }
    // A non-ASCII name under star-only globs is globset's to judge (Unicode case folding).
    let star = Excludes::new(vec![
        globset::GlobBuilder::new("*SECRET*")
            .case_insensitive(true)
            .build()
            .unwrap(),
    ]);
    assert!(star.is_match("mon_sécret_secret"));
    assert!(!star.is_match("mon_sécret"));
}
