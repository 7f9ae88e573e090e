//! An executor's egress proxy: the commands of a session whose network is an allowlist
//! reach the network of the executor's machine through a proxy running here, next to them,
//! with the entries the client sent (`session/open {network}`). No approval can reach an
//! executor, so a host the entries do not name is refused, the reason telling how to allow
//! it; every connection goes back to the client as a `network/connection` notification,
//! which it keeps as the session's `network_connection` event.

use std::sync::{Arc, Weak};

use amber_exec::egress::DaemonEnd;
use amber_policy::net::{DomainRules, HostVerdict};
use amber_tools::egress::proxy::{self, Judge, Judgement, Record};
use amber_tools::egress::{EgressOrigin, EgressService};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::wire::{NetworkConnectionNote, NetworkEntries};

/// Where a connection's record goes: the client, through the executor's live connection.
pub(crate) type Notify = Arc<dyn Fn(NetworkConnectionNote) + Send + Sync>;

/// One session's proxy here.
pub(crate) struct ExecutorEgress {
    judge: Arc<EntriesJudge>,
}

impl ExecutorEgress {
    /// The proxy of `session` with `entries`; entries that do not parse allow nothing (the
    /// client checked them: only a client of another version could send such).
    pub(crate) fn new(session: &str, entries: Option<&NetworkEntries>, notify: Notify) -> Self {
        let rules = entries
            .map(|e| DomainRules::new(&e.allow, &e.deny))
            .transpose()
            .unwrap_or_else(|err| {
                tracing::warn!(%err, session, "the session's network entries");
                None
            })
            .unwrap_or_default();
        Self {
            judge: Arc::new(EntriesJudge {
                session: session.to_owned(),
                rules,
                notify,
            }),
        }
    }
}

impl EgressService for ExecutorEgress {
    fn serve(&self, link: DaemonEnd, origin: EgressOrigin, until: CancellationToken) {
        let judge: Arc<dyn Judge> = Arc::clone(&self.judge) as _;
        proxy::serve(link, origin, until, judge);
    }
}

/// Decides by the entries alone.
struct EntriesJudge {
    session: String,
    rules: DomainRules,
    notify: Notify,
}

impl EntriesJudge {
    fn decide(&self, host: &str) -> Judgement {
        match self.rules.decide(host) {
            HostVerdict::Denied(rule) => Judgement::Refused {
                reason: format!("{host} is denied by the network allowlist (`{rule}`)"),
                rule: Some(rule),
            },
            HostVerdict::Allowed(rule) => Judgement::Allowed {
                rule,
                private: self.rules.named_addresses(),
            },
            HostVerdict::Unlisted => Judgement::Refused {
                rule: None,
                reason: format!(
                    "{host} is not on the network allowlist, and a command on an executor \
                     cannot ask for it (no approval reaches the executor); add it to \
                     `[sandbox] allow_domains` or the session's `allowDomains` to reach it"
                ),
            },
        }
    }
}

impl Judge for EntriesJudge {
    fn judge<'a>(
        &'a self,
        host: &'a str,
        _port: u16,
        _origin: &'a EgressOrigin,
    ) -> BoxFuture<'a, Judgement> {
        Box::pin(std::future::ready(self.decide(host)))
    }

    fn record(&self, origin: &EgressOrigin, record: Record) {
        (self.notify)(NetworkConnectionNote {
            session: self.session.clone(),
            connection: record.into_event(origin),
        });
    }
}

/// A notifier that sends through `executor` while it lives.
pub(crate) fn notifier(executor: Weak<crate::executor::Executor>) -> Notify {
    Arc::new(move |note| {
        if let Some(executor) = executor.upgrade() {
            executor.notify_network(&note);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn judge(allow: &[&str], deny: &[&str]) -> EntriesJudge {
        EntriesJudge {
            session: "s".into(),
            rules: DomainRules::new(allow, deny).unwrap(),
            notify: Arc::new(|_| {}),
        }
    }

    #[test]
    fn entries_decide_and_an_unlisted_host_is_refused_saying_how_to_allow_it() {
        let j = judge(&["*.example.com", "10.0.0.5"], &["bad.example.com"]);
        let named: IpAddr = "10.0.0.5".parse().unwrap();
        for host in ["api.example.com", "10.0.0.5"] {
            let Judgement::Allowed { private, .. } = j.decide(host) else {
                panic!("{host} is allowed");
            };
            assert_eq!(private, [named], "{host}");
        }
        assert!(matches!(
            j.decide("bad.example.com"),
            Judgement::Refused { rule: Some(_), .. }
        ));
        let Judgement::Refused { reason, rule: None } = j.decide("other.test") else {
            panic!("unlisted is refused");
        };
        assert!(reason.contains("allow_domains"), "{reason}");
    }

    #[test]
    fn without_entries_nothing_is_allowed() {
        let egress = ExecutorEgress::new("s", None, Arc::new(|_| {}));
        assert!(matches!(
            egress.judge.decide("example.com"),
            Judgement::Refused { .. }
        ));
    }
}
