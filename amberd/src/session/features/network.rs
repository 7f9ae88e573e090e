//! The session's network allowlist as a feature: one policy for the egress proxy its
//! sandboxed commands go through and for `fetch`. Its entries are `[sandbox] allow_domains`
//! / `deny_domains` with the session's own (`session/new {sandbox}`) added; deny wins. A
//! host no entry names is asked through the approval flow (`network` approvals: once, for
//! the session, or always — kept in the data directory for every later session), or
//! refused with the reason when nobody can answer. Every connection of the proxy is a
//! durable `network_connection` event of the session.
//!
//! `fetch` follows the same entries before its own rules: a denied host is denied, an
//! allowed one is fetched without asking; one the allowlist does not name is left to the
//! policy (its `host` rules and approvals).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use amber_exec::egress::DaemonEnd;
use amber_policy::net::{DomainRules, HostVerdict};
use amber_proto::{Approval, Decision, EventKind, SessionNewParams};
use amber_tools::egress::{EgressOrigin, EgressService};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::config::SandboxConfig;
use crate::session::SessionShared;
use crate::session::feature::{AdvisedVerdict, Attach, Feature, SessionFeature, ToolAdvice, Turn};
use crate::session::gate::{Answer, request_approval};
use crate::session::services::Services;
use amber_tools::egress::proxy::{Judge, Judgement, Record};
use amber_tools::gate::GateCall;

/// The tool name of a proxy connection's approval (no model tool has it).
pub(crate) const APPROVAL_TOOL: &str = "network";

/// Where the hosts allowed "always" are kept, in the data directory.
const ALWAYS_FILE: &str = "network-allowed.json";

/// The feature: the daemon-wide hosts allowed always.
pub(crate) struct NetworkFeature {
    always: Arc<AlwaysAllowed>,
}

impl NetworkFeature {
    pub(crate) fn new(data_dir: &Path) -> Self {
        Self {
            always: Arc::new(AlwaysAllowed::load(data_dir.join(ALWAYS_FILE))),
        }
    }
}

impl Feature for NetworkFeature {
    fn check_new(&self, params: &SessionNewParams) -> Result<(), String> {
        if let Some(request) = &params.sandbox {
            DomainRules::new(&request.allow_domains, &request.deny_domains)
                .map_err(|err| format!("sandbox.allowDomains / denyDomains: {err}"))?;
        }
        Ok(())
    }

    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let own = own_rules(session.meta.sandbox.as_ref());
        let network = Arc::new(SessionNetwork {
            own,
            granted: Mutex::new(BTreeSet::new()),
            always: Arc::clone(&self.always),
            session: session.session.clone(),
            services: Arc::clone(session.services),
            asking: tokio::sync::Mutex::new(()),
        });
        Some(Arc::new(NetworkSessionFeature { network }))
    }
}

/// The session's own entries (its request's and its agent's), checked when the session was
/// made; a stored request that no longer parses counts as none, with a warning.
fn own_rules(request: Option<&amber_proto::SandboxRequest>) -> DomainRules {
    request
        .map(|r| DomainRules::new(&r.allow_domains, &r.deny_domains))
        .transpose()
        .unwrap_or_else(|err| {
            tracing::warn!(%err, "the session's allowDomains / denyDomains");
            None
        })
        .unwrap_or_default()
}

/// The configuration's entries as they stand now (a config that loads has valid ones: its
/// check refuses others) and the session's own.
fn rules_in_force(config: &SandboxConfig, own: &DomainRules) -> DomainRules {
    DomainRules::new(&config.allow_domains, &config.deny_domains)
        .unwrap_or_default()
        .with(own.clone())
}

/// The allowlist's entries of a session: the configuration's, then the session's own
/// request's (an executor's proxy judges by them).
pub(crate) fn entries(
    config: &SandboxConfig,
    request: Option<&amber_proto::SandboxRequest>,
) -> (Vec<String>, Vec<String>) {
    let mut allow = config.allow_domains.clone();
    let mut deny = config.deny_domains.clone();
    if let Some(request) = request {
        allow.extend(request.allow_domains.iter().cloned());
        deny.extend(request.deny_domains.iter().cloned());
    }
    (allow, deny)
}

/// One session's attachment: installs the proxy on its tools once it runs.
struct NetworkSessionFeature {
    network: Arc<SessionNetwork>,
}

impl SessionFeature for NetworkSessionFeature {
    fn started(&self, shared: &Arc<SessionShared>, _restored: bool) {
        let service: Arc<dyn EgressService> = Arc::new(Proxy(Arc::clone(&self.network)));
        shared.tools.set_egress(service);
    }

    /// `fetch` follows the allowlist: denied is denied, allowed runs unasked.
    fn before_tool<'a>(
        &'a self,
        _turn: &'a Turn<'a>,
        call: &'a GateCall<'a>,
    ) -> BoxFuture<'a, ToolAdvice> {
        let verdict = (call.call.name == "fetch")
            .then(|| call.args.get("url").and_then(|url| url.as_str()))
            .flatten()
            .and_then(|url| url::Url::parse(url).ok())
            .and_then(|url| url.host_str().map(str::to_owned))
            .map_or(AdvisedVerdict::NoOpinion, |host| {
                match self.network.listed(&host) {
                    Some(Judgement::Allowed { .. }) => AdvisedVerdict::Allow,
                    Some(Judgement::Refused { reason, .. }) => AdvisedVerdict::Deny(reason),
                    None => AdvisedVerdict::NoOpinion,
                }
            });
        Box::pin(std::future::ready(ToolAdvice {
            verdict,
            arguments: None,
        }))
    }
}

/// The session's network policy and the proxy it serves its commands with.
struct SessionNetwork {
    /// The session's own entries; the configuration's are read at each decision, so an edit
    /// of `[sandbox] allow_domains` holds from the next connection.
    own: DomainRules,
    /// Hosts a person allowed for this session.
    granted: Mutex<BTreeSet<String>>,
    always: Arc<AlwaysAllowed>,
    session: Weak<SessionShared>,
    services: Arc<Services>,
    /// One question at a time: the connections a command opens in parallel to one host
    /// wait for the first answer rather than each asking.
    asking: tokio::sync::Mutex<()>,
}

impl SessionNetwork {
    /// The verdict of the entries and the answers given so far; `None`: nobody decided.
    fn listed(&self, host: &str) -> Option<Judgement> {
        let rules = rules_in_force(&self.services.live().config.sandbox, &self.own);
        match rules.decide(host) {
            HostVerdict::Denied(rule) => Some(Judgement::Refused {
                reason: format!("{host} is denied by the network allowlist (`{rule}`)"),
                rule: Some(rule),
            }),
            HostVerdict::Allowed(rule) => Some(Judgement::Allowed {
                rule,
                // Private addresses only where an entry names each one.
                private: rules.named_addresses(),
            }),
            HostVerdict::Unlisted => {
                let named = rules.named_addresses();
                if self.granted.lock().is_ok_and(|g| g.contains(host)) {
                    return Some(approved(host, "approved for the session", named));
                }
                self.always
                    .contains(host)
                    .then(|| approved(host, "approved always", named))
            }
        }
    }

    async fn ask(&self, host: &str, port: u16, origin: &EgressOrigin) -> Judgement {
        let unlisted = |why: &str| Judgement::Refused {
            rule: None,
            reason: format!(
                "{host} is not on the network allowlist, and {why}; add it to `[sandbox] \
                 allow_domains` (or `--allow-domain {host}`) to reach it"
            ),
        };
        let Some(shared) = self.session.upgrade() else {
            return unlisted("its session is gone");
        };
        let _one_at_a_time = self.asking.lock().await;
        // Answered while this connection waited.
        if let Some(judgement) = self.listed(host) {
            return judgement;
        }
        let turn_id = shared.lock_live().turn_id.clone();
        let Some(turn_id) = turn_id.filter(|_| !origin.turn.is_cancelled()) else {
            return unlisted("no turn is running to ask in");
        };
        let approval = Approval {
            request_id: format!("apr_{}", uuid::Uuid::new_v4().simple()),
            call_id: origin.call_id.clone(),
            tool: APPROVAL_TOOL.to_owned(),
            arguments: serde_json::json!({"host": host, "port": port}),
            reason: match host
                .parse::<std::net::IpAddr>()
                .ok()
                .and_then(amber_policy::net::non_public)
            {
                Some(kind) => format!(
                    "a sandboxed command connects to {host}:{port}, a {kind} address the \
                     network allowlist does not name: allowing it opens a way into this \
                     machine's networks"
                ),
                None => format!(
                    "a sandboxed command connects to {host}:{port}, which the network \
                     allowlist does not name"
                ),
            },
            scope: format!("host:{host}"),
            unsandboxed: false,
            // An open channel out: no rule, hook or `--yes` answers it, only a person.
            person_only: true,
            mcp: None,
        };
        let answer = request_approval(
            &shared,
            &self.services,
            &turn_id,
            &origin.turn,
            approval,
            true,
        )
        .await;
        match answer {
            Answer::Decided(Decision::AllowOnce) => approved(host, "approved once", Vec::new()),
            Answer::Decided(Decision::AllowSession) => {
                if let Ok(mut granted) = self.granted.lock() {
                    granted.insert(host.to_owned());
                }
                approved(host, "approved for the session", Vec::new())
            }
            Answer::Decided(Decision::AllowAlways) => {
                if let Ok(mut granted) = self.granted.lock() {
                    granted.insert(host.to_owned());
                }
                self.always.insert(host);
                approved(host, "approved always", Vec::new())
            }
            Answer::Decided(Decision::Deny) => Judgement::Refused {
                rule: None,
                reason: format!("the user denied the connection to {host}"),
            },
            Answer::NoApprover => unlisted("no approver is connected to ask"),
            Answer::ApproverLeft => unlisted("the last approver disconnected"),
            Answer::Cancelled => unlisted("the turn was cancelled while asking"),
        }
    }
}

/// A person's answer: the host as they saw it. An IP address they allowed is reached even
/// when private (they were told so); a name still resolves to public addresses only, or to
/// those the allowlist names one by one (`named`).
fn approved(host: &str, rule: &str, mut named: Vec<std::net::IpAddr>) -> Judgement {
    named.extend(host.parse::<std::net::IpAddr>());
    Judgement::Allowed {
        rule: rule.to_owned(),
        private: named,
    }
}

impl Judge for SessionNetwork {
    fn judge<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        origin: &'a EgressOrigin,
    ) -> BoxFuture<'a, Judgement> {
        Box::pin(async move {
            match self.listed(host) {
                Some(judgement) => judgement,
                None => self.ask(host, port, origin).await,
            }
        })
    }

    fn record(&self, origin: &EgressOrigin, record: Record) {
        let Some(shared) = self.session.upgrade() else {
            return;
        };
        let turn_id = shared.lock_live().turn_id.clone();
        let connection = record.into_event(origin);
        shared
            .hub
            .publish(turn_id.as_deref(), EventKind::NetworkConnection(connection));
    }
}

/// The proxy the session's tools start commands with.
struct Proxy(Arc<SessionNetwork>);

impl EgressService for Proxy {
    fn serve(&self, link: DaemonEnd, origin: EgressOrigin, until: CancellationToken) {
        let judge: Arc<dyn Judge> = Arc::clone(&self.0) as _;
        amber_tools::egress::proxy::serve(link, origin, until, judge);
    }
}

/// The hosts a person allowed always: a JSON list in the data directory, read at start
/// and rewritten whole on each addition.
struct AlwaysAllowed {
    path: PathBuf,
    hosts: Mutex<BTreeSet<String>>,
}

impl AlwaysAllowed {
    fn load(path: PathBuf) -> Self {
        let hosts = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<BTreeSet<String>>(&bytes).ok())
            .unwrap_or_default();
        Self {
            path,
            hosts: Mutex::new(hosts),
        }
    }

    fn contains(&self, host: &str) -> bool {
        self.hosts.lock().is_ok_and(|hosts| hosts.contains(host))
    }

    fn insert(&self, host: &str) {
        let Ok(mut hosts) = self.hosts.lock() else {
            return;
        };
        if !hosts.insert(host.to_owned()) {
            return;
        }
        let written = serde_json::to_vec_pretty(&*hosts)
            .map_err(std::io::Error::other)
            .and_then(|bytes| amber_tools::atomic_write::replace_file_sync(&self.path, &bytes));
        if let Err(err) = written {
            tracing::warn!(%err, path = %self.path.display(), "could not keep an always-allowed host");
        }
    }
}
