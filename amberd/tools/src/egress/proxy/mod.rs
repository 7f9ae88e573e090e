//! The egress proxy: how a sandboxed command whose network is an allowlist reaches
//! anything, run by amberd (or by an executor, next to the commands it runs). Each
//! command's listener (inside its network namespace, `amber_exec::egress`) is served here
//! from outside; every connection says where it wants to go (HTTP CONNECT,
//! a plain HTTP request, or SOCKS5: `protocol`), the session's network policy ([`Judge`])
//! decides by the name it gives — and, for a TLS tunnel, by the name its ClientHello gives
//! too (`sni`) — and only then is the name resolved, every address checked public and
//! connected (`dial`), and the bytes moved and counted (`relay`). TLS is never
//! intercepted. Every connection ends in one [`Record`] for the session's audit trail.
//!
//! A connection cannot hurt the daemon: its opening is bounded in size and time, a command
//! has at most [`MAX_CONNECTIONS`] open at once, and everything ends with the command.

mod dial;
mod protocol;
mod relay;
mod sni;

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::EgressOrigin;
use amber_exec::egress::DaemonEnd;
use amber_proto::ConnectionVerdict;
use futures::future::BoxFuture;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use protocol::{Host, Opening, Protocol, Refusal};
pub use relay::Bytes;

/// Connections one command may have open at once; more wait for one to end.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a client may take to say where it wants to go.
const OPENING_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the proxy waits for a TLS client's first message to read its server name.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The policy's answer for one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Let through; `rule` says by what. `private`: the addresses that are not public and
    /// still reachable, because the allowlist (or a person) named each one: the host may be
    /// one, or a name that resolves to one; any other private address is refused.
    Allowed {
        rule: String,
        private: Vec<std::net::IpAddr>,
    },
    /// Refused, by `rule` when an entry decided it; `reason` is what the command is told.
    Refused {
        rule: Option<String>,
        reason: String,
    },
}

/// One connection, as the audit trail keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub host: String,
    pub port: u16,
    pub protocol: &'static str,
    pub verdict: ConnectionVerdict,
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub bytes: Bytes,
    pub duration: Duration,
}

impl Record {
    /// The record as the session's `network_connection` event has it, of a command of
    /// `origin`; a refused or failed one is also noted for the command's result.
    pub fn into_event(self, origin: &EgressOrigin) -> amber_proto::NetworkConnection {
        let connection = amber_proto::NetworkConnection {
            call_id: origin.call_id.clone(),
            host: self.host,
            port: self.port,
            protocol: self.protocol.to_owned(),
            verdict: self.verdict,
            rule: self.rule,
            reason: self.reason,
            bytes_sent: self.bytes.sent,
            bytes_received: self.bytes.received,
            duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
        };
        if connection.verdict != ConnectionVerdict::Allowed {
            origin
                .log
                .push(amber_proto::describe_connection(&connection));
        }
        connection
    }
}

/// The session's network policy, as the proxy asks it.
pub trait Judge: Send + Sync + 'static {
    /// Decides `host` (a lowercase name, or an IP address as text) at `port` for a command
    /// of `origin`; may ask a person.
    fn judge<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        origin: &'a EgressOrigin,
    ) -> BoxFuture<'a, Judgement>;

    /// Keeps one connection's record (the session's `network_connection` event).
    fn record(&self, origin: &EgressOrigin, record: Record);
}

/// Serves one command's proxy: waits for its listener on `link`, then accepts and handles
/// connections until `until` is cancelled (the command ended), which ends them too.
pub fn serve(
    link: DaemonEnd,
    origin: EgressOrigin,
    until: CancellationToken,
    judge: Arc<dyn Judge>,
) {
    tokio::spawn(async move {
        let listener = tokio::select! {
            received = link.receive_listener() => received,
            () = until.cancelled() => return,
        };
        let listener = match listener {
            Ok(Some(listener)) => listener,
            // No namespace could be made: the command runs with the network off.
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(%err, "the egress proxy got no listener");
                return;
            }
        };
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            let permit = tokio::select! {
                permit = Arc::clone(&slots).acquire_owned() => permit,
                () = until.cancelled() => return,
            };
            let Ok(permit) = permit else { return };
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = until.cancelled() => return,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::debug!(%err, "egress accept failed");
                    continue;
                }
            };
            let judge = Arc::clone(&judge);
            let origin = origin.clone();
            let until = until.clone();
            tokio::spawn(async move {
                handle(stream, judge.as_ref(), &origin, &until).await;
                drop(permit);
            });
        }
    });
}

/// One connection: its opening, the verdict, the dial, the relay, the record.
async fn handle(
    mut client: TcpStream,
    judge: &dyn Judge,
    origin: &EgressOrigin,
    until: &CancellationToken,
) {
    let started = Instant::now();
    let opening = tokio::select! {
        opening = tokio::time::timeout(OPENING_TIMEOUT, protocol::read_opening(&mut client)) => opening,
        () = until.cancelled() => return,
    };
    let opening = match opening {
        Ok(Ok(opening)) => opening,
        Ok(Err(err)) => {
            let _ = err.answer(&mut client).await;
            return;
        }
        Err(_) => return,
    };
    let Opening {
        protocol,
        destination,
        forward,
    } = opening;
    let host = match &destination.host {
        Host::Name(name) => name.clone(),
        Host::Ip(ip) => ip.to_string(),
    };
    let port = destination.port;
    let mut record = Record {
        host: host.clone(),
        port,
        protocol: protocol_name(protocol),
        verdict: ConnectionVerdict::Denied,
        rule: None,
        reason: None,
        bytes: Bytes::default(),
        duration: Duration::ZERO,
    };
    let finish = |mut record: Record| {
        record.duration = started.elapsed();
        judge.record(origin, record);
    };
    // Before a refusal is sent, the record is kept: the command may end the moment it reads
    // it, and its result carries what was refused.
    let end = |mut record: Record, verdict: ConnectionVerdict, reason: &str| {
        record.verdict = verdict;
        record.reason = Some(reason.to_owned());
        finish(record);
    };
    let judgement = tokio::select! {
        judgement = judge.judge(&host, port, origin) => judgement,
        () = until.cancelled() => return,
    };
    let (rule, private) = match judgement {
        Judgement::Allowed { rule, private } => (rule, private),
        Judgement::Refused { rule, reason } => {
            record.rule = rule;
            end(record, ConnectionVerdict::Denied, &reason);
            let _ = protocol::refuse(&mut client, protocol, Refusal::NotAllowed, &reason).await;
            return;
        }
    };
    record.rule = Some(rule);
    let dialed = async {
        let addrs = dial::addresses(&destination.host, port, &private).await?;
        dial::connect(&host, port, &addrs).await
    };
    let dialed = tokio::select! {
        dialed = dialed => dialed,
        () = until.cancelled() => return,
    };
    let mut upstream = match dialed {
        Ok(upstream) => upstream,
        Err(err) => {
            let (refusal, verdict) = if err.refused() {
                (Refusal::NotAllowed, ConnectionVerdict::Denied)
            } else {
                (Refusal::Unreachable, ConnectionVerdict::Failed)
            };
            let reason = err.to_string();
            end(record, verdict, &reason);
            let _ = protocol::refuse(&mut client, protocol, refusal, &reason).await;
            return;
        }
    };
    if protocol::accept(&mut client, protocol).await.is_err() {
        return end(
            record,
            ConnectionVerdict::Failed,
            "the command closed the connection",
        );
    }
    if protocol == Protocol::Forward {
        use tokio::io::AsyncWriteExt;
        if let Err(err) = upstream.write_all(&forward).await {
            let reason = format!("the destination closed the connection: {err}");
            end(record, ConnectionVerdict::Failed, &reason);
            let _ = protocol::refuse(&mut client, protocol, Refusal::Failed, &reason).await;
            return;
        }
        record.bytes.sent += forward.len() as u64;
    }
    // A tunnel's first bytes are judged by their TLS name before any passes; a plain request
    // was judged by its URI.
    let gate = async {
        match protocol {
            Protocol::Forward => None,
            Protocol::Connect | Protocol::Socks5 => {
                tls_name_refused(&client, &host, port, judge, origin).await
            }
        }
    };
    let (relayed, refused) = relay::relay(&client, &upstream, until, gate).await;
    record.bytes.sent += relayed.sent;
    record.bytes.received += relayed.received;
    match refused {
        // Closing the tunnel is the refusal: nothing of the command's went through.
        Some((rule, reason)) => {
            record.rule = rule;
            end(record, ConnectionVerdict::Denied, &reason);
        }
        None => {
            record.verdict = ConnectionVerdict::Allowed;
            finish(record);
        }
    }
}

/// The protocol as the audit trail names it.
fn protocol_name(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Connect => "connect",
        Protocol::Forward => "http",
        Protocol::Socks5 => "socks5",
    }
}

/// For a tunnel, once the command sends: when its first bytes are a TLS ClientHello naming
/// another server than the tunnel's host, that name must be allowed too (else the tunnel to
/// an allowed front would carry a request for a host nobody allowed); a ClientHello that
/// cannot be read whole is refused, since it might hide one. `Some((rule, reason))` when
/// refused.
async fn tls_name_refused(
    client: &TcpStream,
    host: &str,
    port: u16,
    judge: &dyn Judge,
    origin: &EgressOrigin,
) -> Option<(Option<String>, String)> {
    // However long the command waits to speak (the server may speak first): only then is
    // the hello given its time.
    if client.readable().await.is_err() {
        return None;
    }
    let name = match sni::peek_client_hello(client, HELLO_TIMEOUT).await {
        sni::Sni::Name(name) => name,
        sni::Sni::Absent | sni::Sni::NotTls => return None,
        sni::Sni::Incomplete | sni::Sni::Unreadable => {
            // The command closed without a byte: nothing to judge, nothing passes.
            let mut first = [0u8; 1];
            if matches!(client.peek(&mut first).await, Ok(0) | Err(_)) {
                return None;
            }
            return Some((
                None,
                format!(
                    "the tunnel to {host} began a TLS ClientHello the proxy could not read \
                     whole within {} s",
                    HELLO_TIMEOUT.as_secs()
                ),
            ));
        }
    };
    if name == host {
        return None;
    }
    match judge.judge(&name, port, origin).await {
        Judgement::Allowed { .. } => None,
        Judgement::Refused { rule, reason } => Some((
            rule,
            format!("the tunnel to {host} carries TLS for {name}: {reason}"),
        )),
    }
}
