//! amberd's Prometheus metrics (`[metrics] listen`, off by default): what the daemon did
//! (tokens and cost by model, tool calls by outcome, turn durations) counted as it happens,
//! and what it holds (sessions, the fleet's queue and runners) read at each scrape. Built
//! with `prometheus-client` (no global registry: the daemon owns its [`Metrics`]).
//!
//! - [`serve`]: the listener, `GET /metrics` in the Prometheus text format.

pub mod serve;

use std::sync::atomic::AtomicU64;

use amber_proto::Usage;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde::Deserialize;

pub use serve::{Now, ServeError, serve};

/// `[metrics]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// `HOST:PORT` to serve `/metrics` on (plain HTTP: bind it where only your Prometheus
    /// reaches). Absent: no listener.
    pub listen: Option<String>,
}

type Labels = Vec<(String, String)>;

/// What the daemon holds at one moment, for the gauges.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// Sessions by state (`idle`, `running`, …).
    pub sessions: Vec<(String, i64)>,
    pub fleet: crate::fleet::FleetStatus,
}

/// The daemon's metrics.
pub struct Metrics {
    registry: Registry,
    tokens: Family<Labels, Counter>,
    cost: Family<Labels, Counter<f64, AtomicU64>>,
    tool_calls: Family<Labels, Counter>,
    turn_seconds: Histogram,
    sessions: Family<Labels, Gauge>,
    queue_depth: Family<Labels, Gauge>,
    runners: Family<Labels, Gauge>,
    fleet_sessions: Family<Labels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("amber");
        let tokens = Family::<Labels, Counter>::default();
        registry.register(
            "tokens",
            "Tokens of model requests, by model and kind (prompt, completion, cached)",
            tokens.clone(),
        );
        let cost = Family::<Labels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "cost_usd",
            "What model requests cost in US dollars, by model (models with a known price)",
            cost.clone(),
        );
        let tool_calls = Family::<Labels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls by tool and outcome (ok, error, denied)",
            tool_calls.clone(),
        );
        let turn_seconds =
            Histogram::new([0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0]);
        registry.register(
            "turn_seconds",
            "How long turns took, from their start to their end",
            turn_seconds.clone(),
        );
        let sessions = Family::<Labels, Gauge>::default();
        registry.register("sessions", "Sessions by state", sessions.clone());
        let queue_depth = Family::<Labels, Gauge>::default();
        registry.register(
            "fleet_queue_depth",
            "Fleet sessions waiting that a pool's runners could take (those asking for no pool count for every pool)",
            queue_depth.clone(),
        );
        let runners = Family::<Labels, Gauge>::default();
        registry.register(
            "runners",
            "Runners by pool and state (connected, busy, draining)",
            runners.clone(),
        );
        let fleet_sessions = Family::<Labels, Gauge>::default();
        registry.register(
            "fleet_sessions",
            "Fleet sessions by where they stand (queued, assigned, failed)",
            fleet_sessions.clone(),
        );
        Self {
            registry,
            tokens,
            cost,
            tool_calls,
            turn_seconds,
            sessions,
            queue_depth,
            runners,
            fleet_sessions,
        }
    }

    /// One model request's usage, on `model`.
    pub fn usage(&self, model: &str, usage: &Usage) {
        for (kind, n) in [
            ("prompt", usage.prompt_tokens),
            ("completion", usage.completion_tokens),
            ("cached", usage.cached_tokens),
        ] {
            if n > 0 {
                self.tokens
                    .get_or_create(&labels(&[("model", model), ("kind", kind)]))
                    .inc_by(n);
            }
        }
        if let Some(cost) = usage.cost_usd {
            self.cost
                .get_or_create(&labels(&[("model", model)]))
                .inc_by(cost.usd());
        }
    }

    /// A tool call ended with `outcome`.
    pub fn tool_call(&self, tool: &str, outcome: &str) {
        self.tool_calls
            .get_or_create(&labels(&[("tool", tool), ("outcome", outcome)]))
            .inc();
    }

    /// A turn took `seconds`.
    pub fn turn(&self, seconds: f64) {
        self.turn_seconds.observe(seconds);
    }

    /// The metrics in the Prometheus text format, the gauges set from `now`.
    pub fn render(&self, now: &Snapshot) -> String {
        self.sessions.clear();
        for (state, n) in &now.sessions {
            self.sessions
                .get_or_create(&labels(&[("state", state)]))
                .set(*n);
        }
        self.queue_depth.clear();
        for (pool, n) in &now.fleet.queued {
            self.queue_depth
                .get_or_create(&labels(&[("pool", pool)]))
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        self.runners.clear();
        for runner in &now.fleet.runners {
            let mut states = Vec::new();
            if runner.connected {
                states.push("connected");
            }
            if runner.held > 0 {
                states.push("busy");
            }
            if runner.draining {
                states.push("draining");
            }
            for state in states {
                self.runners
                    .get_or_create(&labels(&[("pool", &runner.pool), ("state", state)]))
                    .inc();
            }
        }
        self.fleet_sessions.clear();
        for (state, n) in &now.fleet.sessions {
            self.fleet_sessions
                .get_or_create(&labels(&[("state", state)]))
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if let Err(err) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::warn!("cannot encode the metrics: {err}");
        }
        out
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_gauges_render_in_the_prometheus_text_format() {
        let metrics = Metrics::new();
        let usage = Usage {
            prompt_tokens: 100,
            completion_tokens: 20,
            cached_tokens: 0,
            total_tokens: 120,
            cost_usd: amber_proto::CostUsd::from_usd(0.5),
            ..Usage::default()
        };
        metrics.usage("gpt-x", &usage);
        metrics.usage("gpt-x", &usage);
        metrics.tool_call("bash", "ok");
        metrics.turn(3.0);
        let now = Snapshot {
            sessions: vec![("idle".to_owned(), 4), ("running".to_owned(), 1)],
            fleet: crate::fleet::FleetStatus {
                queued: [("gpu".to_owned(), 3), ("any".to_owned(), 2)].into(),
                runners: vec![crate::fleet::RunnerSummary {
                    id: "r1".to_owned(),
                    pool: "gpu".to_owned(),
                    hostname: "h".to_owned(),
                    capacity: 2,
                    held: 1,
                    draining: false,
                    connected: true,
                }],
                sessions: [("assigned", 1)].into(),
            },
        };
        let text = metrics.render(&now);
        for line in [
            "amber_tokens_total{model=\"gpt-x\",kind=\"prompt\"} 200",
            "amber_tokens_total{model=\"gpt-x\",kind=\"completion\"} 40",
            "amber_cost_usd_total{model=\"gpt-x\"} 1.0",
            "amber_tool_calls_total{tool=\"bash\",outcome=\"ok\"} 1",
            "amber_turn_seconds_count 1",
            "amber_sessions{state=\"running\"} 1",
            "amber_fleet_queue_depth{pool=\"gpu\"} 3",
            "amber_fleet_queue_depth{pool=\"any\"} 2",
            "amber_runners{pool=\"gpu\",state=\"busy\"} 1",
            "amber_fleet_sessions{state=\"assigned\"} 1",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
        // A pool whose queue emptied is gone from the next scrape.
        let text = metrics.render(&Snapshot::default());
        assert!(!text.contains("pool=\"gpu\""), "{text}");
    }
}
