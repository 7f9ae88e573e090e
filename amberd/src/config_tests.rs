//! Tests of the config: parsing, defaults, paths, and that every ```toml block of
//! docs/configuration.md is a real config file. How `[provider]` and `AMBER_*` resolve to
//! an endpoint is amber-llm's (`Endpoint::resolve`) and tested there.

use super::*;

/// An environment of these variables only (tests of env-dependent rules share it).
pub(crate) fn env(
    pairs: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Option<OsString> {
    move |k| {
        pairs
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| OsString::from(v))
    }
}

#[test]
fn named_providers_parse_and_reject_typos() {
    let cfg = Config::parse(
        "[providers.work]\nflavor = \"vllm\"\nbase_url = \"http://gpu:8000/v1\"\n\
         model = \"qwen\"\ncontext_window = 32768\nmax_tokens = 512\n\
         max_tokens_field = \"max_completion_tokens\"\ninclude_usage = false\n\
         headers = { X-Team = \"a\" }\n[providers.openrouter]\nmodel = \"x/y\"\n",
    )
    .unwrap();
    let work = &cfg.providers["work"];
    assert_eq!(work.flavor.as_deref(), Some("vllm"));
    assert_eq!(work.context_window, Some(32768));
    assert_eq!(
        work.max_tokens_field,
        Some(amber_llm::MaxTokensField::MaxCompletionTokens)
    );
    assert_eq!(work.include_usage, Some(false));
    assert_eq!(work.headers["X-Team"], "a");
    assert_eq!(cfg.providers["openrouter"].model.as_deref(), Some("x/y"));
    let err = Config::parse("[providers.x]\nbase = \"u\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("base"), "{err}");
    let err = Config::parse("[provider]\nmax_tokens_field = \"n\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_tokens_field"), "{err}");
}

#[test]
fn idle_exit_defaults_to_never() {
    assert_eq!(Config::default().server.idle_exit_secs, 0);
    let cfg = Config::parse("[server]\nidle_exit_secs = 900").unwrap();
    assert_eq!(cfg.server.idle_exit_secs, 900);
}

#[test]
fn compaction_shares_outside_zero_to_one_are_rejected() {
    for (key, v) in [
        ("threshold", "0.0"),
        ("threshold", "1.5"),
        ("headroom", "-0.1"),
    ] {
        let err = Config::parse(&format!("[compaction]\n{key} = {v}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("compaction.{key} must be")), "{err}");
        assert!(
            err.contains("above 0 and at most 1"),
            "one line, no gap: {err}"
        );
    }
    assert!(Config::parse("[compaction]\nheadroom = nan").is_err());
    assert!(Config::parse("[compaction]\nthreshold = 1.0\nheadroom = 0.1").is_ok());
}

#[test]
fn unknown_keys_are_rejected_with_their_name() {
    let err = Config::parse("[agent]\nmax_iterations = 3")
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_iterations"), "{err}");
}

/// Every ```toml block of docs/configuration.md is a valid config file, with its
/// commented-out example lines switched on too, so the documented keys are the real ones.
#[test]
fn documented_config_blocks_parse() {
    let doc = include_str!("../../docs/configuration.md");
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .collect();
    assert!(blocks.len() >= 4, "found {} toml blocks", blocks.len());
    for block in blocks {
        if let Err(err) = Config::parse(block) {
            panic!("docs/configuration.md block does not parse: {err}\n{block}");
        }
        let uncommented: String = block
            .lines()
            .map(|l| match l.trim_start().strip_prefix("# ") {
                Some(rest) if rest.contains(" = ") && !rest.starts_with('[') => rest,
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n");
        if let Err(err) = Config::parse(&uncommented) {
            panic!(
                "an example line of docs/configuration.md is not a real key: {err}\n{uncommented}"
            );
        }
    }
}

#[test]
fn tools_env_and_broad_workspace_keys_parse_and_are_checked() {
    let cfg = Config::parse(
        "[sessions]\nallow_broad_workspace = true\n[tools.env]\ninherit = \"core\"\n\
         exclude = [\"AWS_*\"]\nset = { CI = \"1\" }\n",
    )
    .unwrap();
    assert!(cfg.sessions.allow_broad_workspace);
    assert_eq!(cfg.tools.env.inherit, amber_exec::env_policy::Inherit::Core);
    assert_eq!(cfg.tools.env.exclude, ["AWS_*"]);
    assert!(!Config::default().sessions.allow_broad_workspace);
    let err = Config::parse("[tools.env]\nexclude = [\"[oops\"]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("tools.env.exclude"), "{err}");
    assert!(Config::parse("[tools.env]\ninherit = \"most\"\n").is_err());
}

#[test]
fn fetch_is_off_by_default_and_its_keys_parse_and_are_checked() {
    assert_eq!(Config::default().tools.fetch_settings(), None);
    let cfg = Config::parse(
        "[tools]\nfetch = true\nfetch_allow_private = true\nfetch_max_bytes = 4096\n\
         fetch_timeout_ms = 500\n",
    )
    .unwrap();
    let settings = cfg.tools.fetch_settings().unwrap();
    assert!(settings.allow_private);
    assert_eq!(settings.max_bytes, 4096);
    assert_eq!(settings.timeout, Duration::from_millis(500));
    let err = Config::parse("[tools]\nfetch = true\nfetch_max_bytes = 0\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("fetch_max_bytes"), "{err}");
    // A host rule is a rule without a pattern; a pattern rule still needs its pattern.
    let cfg =
        Config::parse("[[rules]]\ntool = \"fetch\"\nhost = \"docs.rs\"\ndecision = \"allow\"\n")
            .unwrap();
    assert_eq!(cfg.rules[0].host.as_deref(), Some("docs.rs"));
}

#[test]
fn sandbox_defaults_to_workspace_write_without_network() {
    let config = Config::parse("").unwrap();
    assert_eq!(
        config.sandbox.mode,
        amber_proto::SandboxMode::WorkspaceWrite
    );
    assert_eq!(config.sandbox.network, amber_proto::NetworkMode::Off);
    assert!(config.sandbox.writable_roots.is_empty());
}

#[test]
fn sandbox_keys_parse_and_relative_roots_unknown_modes_and_typos_are_rejected() {
    let config = Config::parse(
        "[sandbox]\nmode = \"read-only\"\nnetwork = true\nwritable_roots = [\"/var/cache/x\"]",
    )
    .unwrap();
    assert_eq!(config.sandbox.mode, amber_proto::SandboxMode::ReadOnly);
    assert_eq!(config.sandbox.network, amber_proto::NetworkMode::On);
    assert_eq!(
        config.sandbox.writable_roots,
        [PathBuf::from("/var/cache/x")]
    );
    let off = Config::parse("[sandbox]\nmode = \"off\"").unwrap();
    assert_eq!(off.sandbox.mode, amber_proto::SandboxMode::Off);

    let err = Config::parse("[sandbox]\nwritable_roots = [\"/ok\", \"cache\"]")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sandbox.writable_roots")
            && err.contains("`cache`")
            && err.contains("absolute"),
        "{err}"
    );
    let err = Config::parse("[sandbox]\nmode = \"strict\"")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("strict") && err.contains("workspace-write"),
        "{err}"
    );
    let err = Config::parse("[sandbox]\nnetwrok = true")
        .unwrap_err()
        .to_string();
    assert!(err.contains("netwrok"), "{err}");

    let keys = Config::parse(
        "[sandbox]\nsecret_paths = [\"~/vault\", \"/etc/token\"]\nallow_unix_sockets = [\"/run/d.sock\"]",
    )
    .unwrap();
    assert_eq!(
        keys.sandbox
            .secret_paths_under(Some(std::path::Path::new("/home/u"))),
        [
            std::path::PathBuf::from("/home/u/vault"),
            std::path::PathBuf::from("/etc/token")
        ]
    );
    assert_eq!(
        keys.sandbox.allow_unix_sockets,
        ["/run/d.sock"].map(std::path::PathBuf::from)
    );
    for (text, named) in [
        ("secret_paths = [\"vault\"]", "sandbox.secret_paths"),
        (
            "allow_unix_sockets = [\"d.sock\"]",
            "sandbox.allow_unix_sockets",
        ),
    ] {
        let err = Config::parse(&format!("[sandbox]\n{text}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{err}");
    }
}

#[test]
fn the_tui_table_is_accepted_and_checked() {
    assert_eq!(Config::default().tui.notify, TuiNotify::Auto);
    for (value, notify) in [
        ("auto", TuiNotify::Auto),
        ("bell", TuiNotify::Bell),
        ("osc", TuiNotify::Osc),
        ("off", TuiNotify::Off),
    ] {
        let config = Config::parse(&format!("[tui]\nnotify = \"{value}\"\n")).unwrap();
        assert_eq!(config.tui.notify, notify, "{value}");
    }
    assert_eq!(Config::parse("[tui]\n").unwrap().tui, TuiConfig::default());
    let err = Config::parse("[tui]\nnotify = \"loud\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("loud") && err.contains("bell"), "{err}");
    let err = Config::parse("[tui]\nnotfy = \"off\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("notfy"), "{err}");
}

#[test]
fn executors_listen_without_tls_is_refused() {
    let err = Config::parse("[executors]\nlisten = \"0.0.0.0:7443\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs tls_cert and tls_key"), "{err}");
    let cfg = Config::parse(
        "[executors]\nlisten = \"127.0.0.1:7443\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n\
         [environments.gpu1]\ndial_in = true\ntoken_file = \"t\"",
    )
    .unwrap();
    assert!(cfg.environments["gpu1"].dial_in);
    assert_eq!(Config::default().executors.listen, None, "off by default");
}

#[test]
fn agents_section_names_the_subagent_model_and_nothing_else() {
    let config = Config::parse("[agents]\nsubagent_model = \"small-1\"").unwrap();
    assert_eq!(config.agents.subagent_model(), Some("small-1"));
    for unset in ["", "[agents]", "[agents]\nsubagent_model = \"  \""] {
        assert_eq!(
            Config::parse(unset).unwrap().agents.subagent_model(),
            None,
            "{unset}"
        );
    }
    let err = Config::parse("[agents]\nsubagent_max_iterations = 3")
        .unwrap_err()
        .to_string();
    assert!(err.contains("subagent_max_iterations"), "{err}");
}

#[test]
fn agents_caps_are_each_sub_agents_default_and_ceiling() {
    use amber_tools::session::TaskCaps;
    let config = Config::parse(
        "[agents]\nsubagent_max_tokens = 1000\nsubagent_max_requests = 5\n\
         subagent_max_seconds = 60\nsubagent_max_usd = 0.5",
    )
    .unwrap();
    let agents = &config.agents;
    let defaults = agents.subagent_caps(&TaskCaps::default()).unwrap();
    assert_eq!(defaults.tokens, Some(1000));
    assert_eq!(defaults.requests, Some(5));
    assert_eq!(defaults.seconds, Some(60));
    assert_eq!(defaults.usd, amber_proto::CostUsd::from_usd(0.5));
    let lower = agents
        .subagent_caps(&TaskCaps {
            max_tokens: Some(10),
            max_usd: Some(0.1),
            ..TaskCaps::default()
        })
        .unwrap();
    assert_eq!((lower.tokens, lower.requests), (Some(10), Some(5)));
    assert_eq!(lower.usd, amber_proto::CostUsd::from_usd(0.1));
    // (asked, the key the refusal names)
    let above = [
        (
            TaskCaps {
                max_tokens: Some(1001),
                ..TaskCaps::default()
            },
            "subagent_max_tokens = 1000",
        ),
        (
            TaskCaps {
                max_requests: Some(6),
                ..TaskCaps::default()
            },
            "subagent_max_requests = 5",
        ),
        (
            TaskCaps {
                max_seconds: Some(61),
                ..TaskCaps::default()
            },
            "subagent_max_seconds = 60",
        ),
        (
            TaskCaps {
                max_usd: Some(0.51),
                ..TaskCaps::default()
            },
            "subagent_max_usd",
        ),
    ];
    for (asked, key) in above {
        let err = agents.subagent_caps(&asked).unwrap_err();
        assert!(err.contains(key), "{asked:?}: {err}");
    }
    // No configured cap: a call may ask any, and gets none unless it asks.
    let open = Config::parse("").unwrap().agents;
    assert_eq!(
        open.subagent_caps(&TaskCaps::default()).unwrap(),
        crate::config::SubagentCaps::default()
    );
}

#[test]
fn routines_parse_with_their_defaults_and_bad_ones_name_the_routine() {
    let cfg = Config::parse(
        "[[routines]]\nname = \"triage\"\ncron = \"0 7 * * 1-5\"\ncwd = \"/home/u/app\"\n\
         prompt = \"Triage new issues\"\nworktree = true\nmax_budget_usd = 1.0\n\
         missed = \"all\"\n\
         [[routines]]\nname = \"nightly\"\ncron = \"@daily\"\ncwd = \"/home/u/app\"\n\
         prompt = \"p\"\nsession = \"nightly-notes\"\n",
    )
    .unwrap();
    let [triage, nightly] = &cfg.routines[..] else {
        panic!("{:?}", cfg.routines)
    };
    assert_eq!(triage.missed, amber_proto::MissedPolicy::All);
    assert!(triage.worktree);
    assert_eq!(triage.max_budget_usd, amber_proto::CostUsd::from_usd(1.0));
    assert_eq!(triage.def().session, None);
    assert_eq!(nightly.missed, amber_proto::MissedPolicy::Latest);
    assert_eq!(nightly.def().session.as_deref(), Some("nightly-notes"));

    let routine = |extra: &str| {
        format!(
            "[[routines]]\nname = \"r\"\ncron = \"0 7 * * *\"\ncwd = \"/w\"\nprompt = \"p\"\n{extra}"
        )
    };
    for (text, says) in [
        (routine("when = 1\n"), "when".to_owned()),
        (routine("missed = \"some\"\n"), "some".to_owned()),
        (
            "[[routines]]\nname = \"r\"\ncron = \"0 25 * * *\"\ncwd = \"/w\"\nprompt = \"p\"\n"
                .to_owned(),
            "[[routines]] `r`: cron: hour `25`: out of 0-23".to_owned(),
        ),
        (
            "[[routines]]\nname = \"a b\"\ncron = \"@daily\"\ncwd = \"/w\"\nprompt = \"p\"\n"
                .to_owned(),
            "[[routines]] `a b`: name:".to_owned(),
        ),
        (
            "[[routines]]\nname = \"r\"\ncron = \"@daily\"\ncwd = \"w\"\nprompt = \"p\"\n"
                .to_owned(),
            "not an absolute path".to_owned(),
        ),
        (
            format!("{}{}", routine(""), routine("")),
            "[[routines]] `r`: the name is used twice".to_owned(),
        ),
    ] {
        let err = Config::parse(&text).unwrap_err().to_string();
        assert!(err.contains(&says), "{text}\n{err}");
    }
}
