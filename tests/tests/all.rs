//! amber's end-to-end suites, one module per subject, linked as one test binary (one link on
//! two cores instead of one per suite). Each suite drives the real `amberd` and `amber-cli`
//! against the scripted endpoint (`amber-mock-llm`) through the kit in `src/`; nextest runs
//! every test in a process of its own, so no suite shares state with another.

// A panic with a clear message is how a suite reports a failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The suites start the real binaries, git, shells and servers as the user.
#![allow(clippy::disallowed_methods)]

mod support;

mod acp;
mod acp_agents;
mod agents;
mod amberd_out_of_reach;
mod approvals;
mod background_agents;
mod bench;
mod budgets_hold;
mod checkpoints;
mod checkpoints_beneath;
mod checkpoints_cli;
mod checkpoints_store;
mod cli_commands;
mod cli_run;
mod cli_run_limits;
mod cli_wait;
mod compaction;
mod config_reload;
mod confinement;
mod cost_budget;
mod daemon_socket;
mod deploy_manifests;
mod detached_processes;
mod dialect_anthropic;
mod dialect_faults;
mod dialect_responses;
mod doctor;
mod durability;
mod editing;
mod executor_protocol;
mod executors;
mod fetch;
mod fleet;
mod goals;
mod grants;
mod greedy_clients;
mod guards;
mod hooks;
mod hostile_bridges;
mod hostile_repository;
mod install;
mod llm_errors;
mod mcp;
mod mcp_asks;
mod mcp_oauth;
mod mcp_server;
mod mcp_session;
mod messages;
mod mock_llm;
mod modes;
mod network_allowlist;
mod never_grantable;
mod output_schema;
mod oversized_session;
mod plugins;
mod policy_bypasses;
mod processes;
mod prompt;
mod recovery;
mod remote;
mod routines;
mod rpc_errors;
mod rules;
mod sandbox_escalation;
mod sandbox_escapes;
mod sandbox_extensions;
mod sandbox_secrets;
mod sandbox_sessions;
mod security_commands;
mod security_env;
mod session_watch;
mod sessions;
mod stop_reasons;
mod subagents;
mod subscriptions;
mod systemd;
mod telemetry;
mod tools;
mod tui;
mod tui_console;
mod turns;
mod unread_replies;
mod walls;
mod workspace_trust;
mod worktrees;

mod through_container;
mod through_dial;
mod through_executor;
mod through_ssh;
