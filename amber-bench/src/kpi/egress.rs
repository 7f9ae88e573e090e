//! What the network allowlist's egress proxy costs a sandboxed download: the same `curl`s
//! run by a `bash` call through the run's daemon, in a session whose network is an
//! allowlist (through the proxy, as an HTTPS client would: a CONNECT tunnel) and in one
//! whose network is on (straight to the server), against a server of the bench's own on
//! loopback. Per session: the download speed of [`BIG_BYTES`] ([`BIG_RUNS`] times) and the
//! whole time of a small request ([`SMALL_RUNS`] times, one connection each), as curl
//! reports them (`speed_download`, `time_total`: no process start in either); `--runs N`
//! sets both counts. The KPI:
//! throughput through the proxy as a share of direct, and the time added per connection.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

use amber_proto::{Mode, NetworkMode, SandboxRequest, SessionNewParams};

use amber_mock_llm::Conversation;

use crate::args::{Args, Kpi};
use crate::error::BenchError;
use crate::report::Report;
use crate::scenario::Scenario;
use crate::stats::Summary;
use crate::suite::Suite;
use crate::task;

/// The download measured for throughput.
const BIG_BYTES: u64 = 512 * 1024 * 1024;
/// Downloads per session.
const BIG_RUNS: usize = 5;
/// Small requests per session, each on a connection of its own.
const SMALL_RUNS: usize = 200;
/// What a small request answers.
const SMALL_BODY: &[u8] = b"ok\n";

/// The goals (issue: "≥ 80% throughput, < 2 ms added per connection on loopback").
pub(crate) const GOAL_THROUGHPUT_SHARE: f64 = 0.8;
pub(crate) const GOAL_ADDED_MS: f64 = 2.0;

/// The measuring script, run by the session's `bash` call: `egress.sh proxy|direct BIG_RUNS
/// SMALL_RUNS`, the server's port in the workspace's file `port` (the scenario is fixed
/// before the server starts); its figures go to files in the workspace.
const SCRIPT: &str = r#"#!/bin/bash
set -u
mode=$1 port=$(cat port)
if [ "$mode" = proxy ]; then
    via=(--noproxy '' --proxy "$HTTP_PROXY" --proxytunnel)
else
    via=(--noproxy '*')
fi
for _ in $(seq 1 "$2"); do
    curl -sS -o /dev/null -w '%{speed_download}\n' "${via[@]}" "http://127.0.0.1:$port/big"
done > throughput.txt
for _ in $(seq 1 "$3"); do
    curl -sS -o /dev/null -w '%{time_total}\n' "${via[@]}" "http://127.0.0.1:$port/small"
done > latency.txt
"#;

/// The two ways a download goes.
const MODES: [&str; 2] = ["direct", "proxy"];

/// The scenario of `mode`: one `bash` call (`big` downloads, `small` requests), then a reply.
fn scenario(mode: &str, big: usize, small: usize) -> Result<Scenario, BenchError> {
    let text = format!(
        r#"name = "egress-{mode}"
description = "curl downloads, {mode}"
role = "sandbox"
prompt = "amber-bench egress: download {mode}."

[files]
"egress.sh" = '''
{SCRIPT}'''

[[turns]]
tool_calls = [{{ name = "bash", arguments = {{ command = "bash egress.sh {mode} {big} {small}", timeout_ms = 600000 }} }}]

[[turns]]
text = "Downloaded."
"#
    );
    Scenario::parse(&text, "egress")
}

/// The endpoint's conversations of this KPI (when it is selected).
pub(crate) fn conversations(args: &Args) -> Result<Vec<Conversation>, BenchError> {
    if !args.wants(Kpi::Egress) {
        return Ok(Vec::new());
    }
    MODES
        .iter()
        .map(|mode| {
            scenario(mode, args.runs(BIG_RUNS), args.runs(SMALL_RUNS))
                .map(|s| crate::endpoint::conversation(&s))
        })
        .collect()
}

/// A server of `/big` ([`BIG_BYTES`] of zeros) and `/small`, one thread per connection;
/// its port.
fn serve() -> Result<u16, BenchError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(BenchError::io("bind the egress server"))?;
    let port = listener
        .local_addr()
        .map_err(BenchError::io("the egress server's port"))?
        .port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    Ok(port)
}

fn answer(mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let big = head.starts_with(b"GET /big");
    let length = if big {
        BIG_BYTES
    } else {
        SMALL_BODY.len() as u64
    };
    let header =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n");
    if stream.write_all(header.as_bytes()).is_err() {
        return;
    }
    if !big {
        let _ = stream.write_all(SMALL_BODY);
        return;
    }
    let chunk = vec![0u8; 256 * 1024];
    let mut left = BIG_BYTES;
    while left > 0 {
        let n = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if stream.write_all(&chunk[..n]).is_err() {
            return;
        }
        left -= n as u64;
    }
}

/// One session's figures.
#[derive(Debug, Default)]
struct Samples {
    /// Bytes per second.
    throughput: Vec<f64>,
    /// ms per small request.
    latency: Vec<f64>,
}

/// Numbers, one per line, of the file `name` in `dir`.
fn read_figures(dir: &Path, name: &str, scale: f64) -> Result<Vec<f64>, BenchError> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path).map_err(BenchError::io(format!(
        "read {} (did the download run?)",
        path.display()
    )))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim()
                .parse::<f64>()
                .map(|v| v * scale)
                .map_err(|_| BenchError::Failed(format!("{}: not a number: {l}", path.display())))
        })
        .collect()
}

/// One session of `network`, its scenario run once, its figures read back.
async fn one(s: &mut Suite, network: NetworkMode, port: u16) -> Result<Samples, BenchError> {
    let mode = match network {
        NetworkMode::Allowlist => "proxy",
        _ => "direct",
    };
    let scenario = scenario(mode, s.args.runs(BIG_RUNS), s.args.runs(SMALL_RUNS))?;
    let cwd = task::workspace(&scenario, s.scratch.path(), None, mode)?;
    let port_file = Path::new(&cwd).join("port");
    std::fs::write(&port_file, port.to_string())
        .map_err(BenchError::io(format!("write {}", port_file.display())))?;
    let params = SessionNewParams {
        cwd: cwd.clone(),
        // The download runs unasked (no approver here); the sandbox holds in yolo.
        mode: Some(Mode::Yolo),
        sandbox: Some(SandboxRequest {
            network: Some(network),
            // The server is on loopback: only an entry naming the address reaches it.
            allow_domains: vec!["127.0.0.1".into()],
            ..SandboxRequest::default()
        }),
        ..SessionNewParams::default()
    };
    let client = s.client()?.clone();
    let (run, info) = task::run_with(&client, &[], &scenario, &params).await?;
    let got = info.sandbox.map(|i| i.network_mode);
    if got != Some(network) {
        return Err(BenchError::Failed(format!(
            "egress: the {mode} session got network {got:?}"
        )));
    }
    let Some(seen) = run.observed.first() else {
        return Err(BenchError::Failed(format!(
            "egress: the {mode} run saw no turn"
        )));
    };
    if !seen.ok() || seen.tools_ok() != 1 {
        return Err(BenchError::Failed(format!(
            "egress: the {mode} download failed: {} {}",
            seen.outcome(),
            seen.first_tool_failure.as_deref().unwrap_or_default()
        )));
    }
    let dir = Path::new(&cwd);
    Ok(Samples {
        throughput: read_figures(dir, "throughput.txt", 1.0)?,
        latency: read_figures(dir, "latency.txt", 1000.0)?,
    })
}

/// The server, the two sessions, the report.
pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let port = serve()?;
    let direct = one(s, NetworkMode::On, port).await?;
    let proxied = one(s, NetworkMode::Allowlist, port).await?;
    report(&mut s.report, &direct, &proxied);
    Ok(())
}

fn report(r: &mut Report, direct: &Samples, proxied: &Samples) {
    r.section(&format!(
        "egress proxy (network allowlist): curl in the sandbox, through the proxy (CONNECT) vs straight, {} MiB downloads and small requests",
        BIG_BYTES / (1024 * 1024)
    ));
    // MB (10^6 bytes), as the executor KPI reports its throughput.
    let mb = 1e6;
    let rows = [
        (direct, "egress_direct", "straight"),
        (proxied, "egress_proxy", "through the proxy"),
    ];
    for (samples, key, label) in rows {
        let speeds: Vec<f64> = samples.throughput.iter().map(|b| b / mb).collect();
        if let Some(t) = Summary::of(&speeds) {
            r.put_summary(
                &format!("{key}_speed_mb_per_s"),
                &format!("download speed, {label}"),
                &t,
            );
        }
        if let Some(l) = Summary::of(&samples.latency) {
            r.put_summary(
                &format!("{key}_request_ms"),
                &format!("a small request on a new connection, {label}"),
                &l,
            );
        }
    }
    if let (Some(d), Some(p)) = (
        Summary::of(&direct.throughput),
        Summary::of(&proxied.throughput),
    ) && d.median > 0.0
    {
        r.put(
            "egress_throughput_ratio",
            "download speed through the proxy over straight (median)",
            p.median / d.median,
        );
    }
    if let (Some(d), Some(p)) = (Summary::of(&direct.latency), Summary::of(&proxied.latency)) {
        r.put(
            "egress_added_ms_per_connection_median",
            "time the proxy adds to a connection and its request (median)",
            p.median - d.median,
        );
        r.put(
            "egress_added_ms_per_connection_p99",
            "time the proxy adds to a connection and its request (p99)",
            p.p99 - d.p99,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenario_parses_and_carries_the_script() {
        let scenario = scenario("proxy", 2, 3).unwrap();
        assert_eq!(scenario.prompt, "amber-bench egress: download proxy.");
        assert_eq!(
            scenario.files.get("egress.sh").map(String::as_str),
            Some(SCRIPT)
        );
    }

    #[test]
    fn figures_of_each_way_and_the_share_and_the_added_time() {
        let mb = 1e6;
        let direct = Samples {
            throughput: vec![1000.0 * mb, 1200.0 * mb, 1100.0 * mb],
            latency: vec![1.0, 1.2, 1.1],
        };
        let proxied = Samples {
            throughput: vec![880.0 * mb, 900.0 * mb, 990.0 * mb],
            latency: vec![1.5, 1.6, 1.7],
        };
        let mut r = Report::default();
        report(&mut r, &direct, &proxied);
        assert_eq!(r.get("egress_direct_speed_mb_per_s_median"), Some(1100.0));
        assert_eq!(r.get("egress_proxy_speed_mb_per_s_median"), Some(900.0));
        let share = r.get("egress_throughput_ratio").unwrap();
        assert!((share - 900.0 / 1100.0).abs() < 1e-9, "{share}");
        let added = r.get("egress_added_ms_per_connection_median").unwrap();
        assert!((added - 0.5).abs() < 1e-9, "{added}");
    }

    #[test]
    fn the_server_answers_both_paths() {
        let port = serve().unwrap();
        let mut small = TcpStream::connect(("127.0.0.1", port)).unwrap();
        small
            .write_all(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut got = String::new();
        small.read_to_string(&mut got).unwrap();
        assert!(
            got.starts_with("HTTP/1.1 200 OK") && got.ends_with("ok\n"),
            "{got}"
        );
    }
}
