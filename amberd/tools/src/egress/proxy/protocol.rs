//! The openings of the egress proxy's one port: SOCKS5 (first byte 0x05), an HTTP `CONNECT`
//! tunnel, or a plain-HTTP request in absolute form. This module reads where a client wants to
//! go and writes the proxy's answer in the client's protocol; allowing, connecting and relaying
//! are the caller's. Hosts come out normalized (names lowercase, every IP literal spelling an
//! address) so that the policy judges the destination a resolver would actually reach.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The most an HTTP request head may take, its blank line included.
const HEAD_CAP: usize = 64 * 1024;
/// The port of an `http://` URI that names none.
const HTTP_PORT: u16 = 80;
/// The first byte of a TLS record: a client told `https://` for the proxy itself.
const TLS_HANDSHAKE: u8 = 0x16;
/// The longest refusal message an `X-Amber-Refusal` header carries.
const REFUSAL_HEADER_CAP: usize = 512;

const SOCKS4_VERSION: u8 = 0x04;
/// SOCKS4's "request rejected or failed", the only refusal a SOCKS4 client understands.
const SOCKS4_REJECTED: u8 = 0x5B;
const SOCKS5_VERSION: u8 = 0x05;
const SOCKS5_NO_AUTHENTICATION: u8 = 0x00;
const SOCKS5_NO_ACCEPTABLE_METHODS: u8 = 0xFF;
const SOCKS5_CONNECT: u8 = 0x01;
const SOCKS5_IPV4: u8 = 0x01;
const SOCKS5_DOMAIN: u8 = 0x03;
const SOCKS5_IPV6: u8 = 0x04;
// Reply codes, RFC 1928 §6.
const SOCKS5_SUCCEEDED: u8 = 0x00;
const SOCKS5_GENERAL_FAILURE: u8 = 0x01;
const SOCKS5_NOT_ALLOWED: u8 = 0x02;
const SOCKS5_HOST_UNREACHABLE: u8 = 0x04;
const SOCKS5_COMMAND_NOT_SUPPORTED: u8 = 0x07;
const SOCKS5_ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;

/// Headers never forwarded to the origin: the proxy's own, the connection's, and `Host`, which
/// is rewritten from the URI.
const DROPPED_HEADERS: [&str; 7] = [
    "host",
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "te",
    "upgrade",
];
/// Headers that frame the body, which is relayed as it comes: kept whatever `Connection` names.
const FRAMING_HEADERS: [&str; 2] = ["content-length", "transfer-encoding"];

/// How the client asked for its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// An HTTP `CONNECT host:port` tunnel.
    Connect,
    /// A plain-HTTP request in absolute form, sent on to the origin.
    Forward,
    /// A SOCKS5 `CONNECT`.
    Socks5,
}

/// A destination host as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Host {
    /// A DNS name: ASCII lowercase, without a trailing dot.
    Name(String),
    /// An address literal; an IPv4-mapped IPv6 address is its IPv4 address.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => formatter.write_str(name),
            Host::Ip(IpAddr::V4(address)) => write!(formatter, "{address}"),
            Host::Ip(IpAddr::V6(address)) => write!(formatter, "[{address}]"),
        }
    }
}

/// Where the client wants to go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Destination {
    pub host: Host,
    pub port: u16,
}

impl fmt::Display for Destination {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}:{}", self.host, self.port)
    }
}

/// A client's opening, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Opening {
    pub protocol: Protocol,
    pub destination: Destination,
    /// Forward only: the bytes to send to the origin first — the request head rewritten to
    /// origin-form, the proxy's and the connection's headers dropped, `Host` from the URI and
    /// `Connection: close` (one request per proxied connection) — then any body bytes read
    /// past the head. Empty for Connect and Socks5, whose streams are left just past their
    /// openings.
    pub forward: Vec<u8>,
}

/// Why the proxy refuses a well-formed opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The policy does not allow the destination.
    NotAllowed,
    /// The destination could not be resolved or reached.
    Unreachable,
    /// Anything else went wrong.
    Failed,
}

impl Refusal {
    fn http_status(self) -> &'static str {
        match self {
            Refusal::NotAllowed => "403 Forbidden",
            Refusal::Unreachable | Refusal::Failed => "502 Bad Gateway",
        }
    }

    fn socks5_reply(self) -> u8 {
        match self {
            Refusal::NotAllowed => SOCKS5_NOT_ALLOWED,
            Refusal::Unreachable => SOCKS5_HOST_UNREACHABLE,
            Refusal::Failed => SOCKS5_GENERAL_FAILURE,
        }
    }
}

/// Why a destination host is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HostError {
    #[error("the host is empty")]
    Empty,
    #[error("{0:?} is not an IPv6 address")]
    Ipv6(String),
    #[error("{0:?} looks like an IPv4 address but is not one")]
    Ipv4(String),
    #[error("{0:?} is not a host name (ASCII letters, digits, `-`, `_` and `.` only)")]
    Name(String),
}

/// Why an opening could not be read. [`OpeningError::answer`] tells the client.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpeningError {
    #[error("reading the proxy opening: {0}")]
    Io(#[from] io::Error),
    #[error(
        "the client spoke TLS to the proxy itself; amber's egress proxy speaks plain HTTP and \
         SOCKS5 (an http:// proxy URL)"
    )]
    TlsToProxy,
    #[error("the opening is neither SOCKS5 nor HTTP (first byte {0:#04x})")]
    Unrecognized(u8),
    #[error("SOCKS4 is not supported; use SOCKS5")]
    Socks4,
    #[error("SOCKS5: the client offers no method without authentication, the only one taken")]
    Socks5NoAcceptableMethod,
    #[error("SOCKS5: the request has version {0:#04x}")]
    Socks5Version(u8),
    #[error("SOCKS5: command {0:#04x} is not supported, only CONNECT")]
    Socks5Command(u8),
    #[error("SOCKS5: address type {0:#04x} is not supported")]
    Socks5AddressType(u8),
    #[error("SOCKS5: {0}")]
    Socks5Host(HostError),
    #[error("the HTTP request head exceeds {} KiB", HEAD_CAP / 1024)]
    HeadTooLarge,
    #[error("malformed HTTP request: {0}")]
    MalformedHttp(&'static str),
    #[error("this is amber's egress proxy; send requests through it as a proxy")]
    NotProxied,
    #[error("an https:// URI in a plain HTTP request; clients send HTTPS through CONNECT")]
    HttpsWithoutConnect,
    #[error("the request URI: {0}")]
    Uri(url::ParseError),
    #[error("{0}")]
    HttpHost(HostError),
}

impl OpeningError {
    /// Tells the client why its opening failed, as far as its protocol has a way to.
    pub(crate) async fn answer<S: AsyncWrite + Unpin>(&self, stream: &mut S) -> io::Result<()> {
        match self {
            // Nobody to answer, or no protocol to answer in.
            OpeningError::Io(_) | OpeningError::TlsToProxy | OpeningError::Unrecognized(_) => {
                Ok(())
            }
            OpeningError::Socks4 => {
                let reply = [0x00, SOCKS4_REJECTED, 0, 0, 0, 0, 0, 0];
                stream.write_all(&reply).await?;
                stream.flush().await
            }
            OpeningError::Socks5NoAcceptableMethod => {
                let reply = [SOCKS5_VERSION, SOCKS5_NO_ACCEPTABLE_METHODS];
                stream.write_all(&reply).await?;
                stream.flush().await
            }
            OpeningError::Socks5Version(_) | OpeningError::Socks5Host(_) => {
                write_socks5_reply(stream, SOCKS5_GENERAL_FAILURE).await
            }
            OpeningError::Socks5Command(_) => {
                write_socks5_reply(stream, SOCKS5_COMMAND_NOT_SUPPORTED).await
            }
            OpeningError::Socks5AddressType(_) => {
                write_socks5_reply(stream, SOCKS5_ADDRESS_TYPE_NOT_SUPPORTED).await
            }
            OpeningError::HeadTooLarge => {
                let message = self.to_string();
                write_http_answer(stream, "431 Request Header Fields Too Large", &message).await
            }
            OpeningError::MalformedHttp(_)
            | OpeningError::NotProxied
            | OpeningError::HttpsWithoutConnect
            | OpeningError::Uri(_)
            | OpeningError::HttpHost(_) => {
                let message = self.to_string();
                write_http_answer(stream, "400 Bad Request", &message).await
            }
        }
    }
}

/// Reads a client's opening up to where its destination is known. A SOCKS5 client is told
/// the method it may use (no authentication), which its protocol needs before the request;
/// nothing else is written.
pub(crate) async fn read_opening<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
) -> Result<Opening, OpeningError> {
    match stream.read_u8().await? {
        SOCKS5_VERSION => read_socks5(stream).await,
        SOCKS4_VERSION => Err(OpeningError::Socks4),
        TLS_HANDSHAKE => Err(OpeningError::TlsToProxy),
        first if first.is_ascii_alphabetic() => {
            let (head, past_head) = read_http_head(stream, first).await?;
            parse_http(&head, past_head)
        }
        first => Err(OpeningError::Unrecognized(first)),
    }
}

/// Tells the client its destination is connected: the tunnel is open from here on.
pub(crate) async fn accept<S: AsyncWrite + Unpin>(
    stream: &mut S,
    protocol: Protocol,
) -> io::Result<()> {
    match protocol {
        Protocol::Connect => {
            stream
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await?;
            stream.flush().await
        }
        Protocol::Socks5 => write_socks5_reply(stream, SOCKS5_SUCCEEDED).await,
        // The origin's own response is the answer.
        Protocol::Forward => Ok(()),
    }
}

/// Tells the client the proxy will not connect it. HTTP clients get `message` as the body and
/// in `X-Amber-Refusal`; SOCKS5 has only the reply code.
pub(crate) async fn refuse<S: AsyncWrite + Unpin>(
    stream: &mut S,
    protocol: Protocol,
    refusal: Refusal,
    message: &str,
) -> io::Result<()> {
    match protocol {
        Protocol::Connect | Protocol::Forward => {
            write_http_answer(stream, refusal.http_status(), message).await
        }
        Protocol::Socks5 => write_socks5_reply(stream, refusal.socks5_reply()).await,
    }
}

/// A SOCKS5 reply; the bound address is not the client's business, so 0.0.0.0:0.
async fn write_socks5_reply<S: AsyncWrite + Unpin>(stream: &mut S, code: u8) -> io::Result<()> {
    let reply = [SOCKS5_VERSION, code, 0x00, SOCKS5_IPV4, 0, 0, 0, 0, 0, 0];
    stream.write_all(&reply).await?;
    stream.flush().await
}

async fn write_http_answer<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: &str,
    message: &str,
) -> io::Result<()> {
    // A header value is one line of visible ASCII.
    let header: String = message
        .trim()
        .chars()
        .take(REFUSAL_HEADER_CAP)
        .map(|character| match character {
            ' '..='~' => character,
            _ if character.is_control() => ' ',
            _ => '?',
        })
        .collect();
    let body = format!("{message}\n");
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\nX-Amber-Refusal: {header}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(answer.as_bytes()).await?;
    stream.flush().await
}

async fn read_socks5<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
) -> Result<Opening, OpeningError> {
    let method_count = stream.read_u8().await?;
    let mut methods = vec![0; usize::from(method_count)];
    stream.read_exact(&mut methods).await?;
    if !methods.contains(&SOCKS5_NO_AUTHENTICATION) {
        return Err(OpeningError::Socks5NoAcceptableMethod);
    }
    stream
        .write_all(&[SOCKS5_VERSION, SOCKS5_NO_AUTHENTICATION])
        .await?;
    stream.flush().await?;

    let mut request = [0; 4];
    stream.read_exact(&mut request).await?;
    let [version, command, _reserved, address_type] = request;
    if version != SOCKS5_VERSION {
        return Err(OpeningError::Socks5Version(version));
    }
    if command != SOCKS5_CONNECT {
        return Err(OpeningError::Socks5Command(command));
    }
    let host = match address_type {
        SOCKS5_IPV4 => {
            let mut octets = [0; 4];
            stream.read_exact(&mut octets).await?;
            Host::Ip(IpAddr::V4(Ipv4Addr::from(octets)))
        }
        SOCKS5_DOMAIN => {
            let length = stream.read_u8().await?;
            let mut name = vec![0; usize::from(length)];
            stream.read_exact(&mut name).await?;
            let name = String::from_utf8(name).map_err(|error| {
                let shown = String::from_utf8_lossy(error.as_bytes()).into_owned();
                OpeningError::Socks5Host(HostError::Name(shown))
            })?;
            parse_host(&name).map_err(OpeningError::Socks5Host)?
        }
        SOCKS5_IPV6 => {
            let mut octets = [0; 16];
            stream.read_exact(&mut octets).await?;
            Host::Ip(IpAddr::V6(Ipv6Addr::from(octets)).to_canonical())
        }
        other => return Err(OpeningError::Socks5AddressType(other)),
    };
    let port = stream.read_u16().await?;
    Ok(Opening {
        protocol: Protocol::Socks5,
        destination: Destination { host, port },
        forward: Vec::new(),
    })
}

/// Reads an HTTP request head whose first byte is read already: the head, its blank line
/// included, and the bytes read past it.
async fn read_http_head<S: AsyncRead + Unpin>(
    stream: &mut S,
    first: u8,
) -> Result<(Vec<u8>, Vec<u8>), OpeningError> {
    // Grows by doubling from a power of two, so never past HEAD_CAP.
    let mut buffer = Vec::with_capacity(1024);
    buffer.push(first);
    let mut searched_to = 0;
    loop {
        if let Some(end) = head_end(&buffer, searched_to) {
            let past_head = buffer.split_off(end);
            return Ok((buffer, past_head));
        }
        // The blank line may straddle reads: the next search backs up over a partial one.
        searched_to = buffer.len().saturating_sub(3);
        let room = HEAD_CAP.saturating_sub(buffer.len());
        if room == 0 {
            return Err(OpeningError::HeadTooLarge);
        }
        // A tunnel's bytes after its head (the TLS ClientHello whose SNI the caller peeks)
        // must stay unread, so a CONNECT head is read a byte at a time.
        let wanted = if could_be_connect(&buffer) { 1 } else { room };
        let read = (&mut *stream)
            .take(u64::try_from(wanted).unwrap_or(1))
            .read_buf(&mut buffer)
            .await?;
        if read == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
    }
}

fn could_be_connect(buffer: &[u8]) -> bool {
    const CONNECT: &[u8] = b"CONNECT ";
    let compared = buffer.len().min(CONNECT.len());
    buffer.get(..compared) == CONNECT.get(..compared)
}

/// Where the head ends: just past its first empty line (`\r\n` or a bare `\n`), searching
/// line breaks from `from` on.
fn head_end(buffer: &[u8], from: usize) -> Option<usize> {
    let searched = buffer.get(from..)?;
    searched
        .iter()
        .enumerate()
        .filter(|(_, byte)| **byte == b'\n')
        .find_map(|(offset, _)| {
            let next_line = from + offset + 1;
            match buffer.get(next_line..)? {
                [b'\n', ..] => Some(next_line + 1),
                [b'\r', b'\n', ..] => Some(next_line + 2),
                _ => None,
            }
        })
}

/// `METHOD SP target SP HTTP/1.x`
struct RequestLine<'head> {
    method: &'head str,
    target: &'head str,
    version: &'head str,
}

struct Header<'head> {
    name: &'head str,
    value: &'head [u8],
}

impl Header<'_> {
    fn is_one_of(&self, names: &[&str]) -> bool {
        names
            .iter()
            .any(|name| name.eq_ignore_ascii_case(self.name))
    }
}

fn parse_http(head: &[u8], past_head: Vec<u8>) -> Result<Opening, OpeningError> {
    if head.contains(&0) {
        return Err(OpeningError::MalformedHttp(
            "the request head contains a NUL byte",
        ));
    }
    let mut lines = head
        .split(|byte| *byte == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request = parse_request_line(lines.next().unwrap_or_default())?;
    let headers = lines
        .take_while(|line| !line.is_empty())
        .map(parse_header)
        .collect::<Result<Vec<_>, _>>()?;

    if request.method == "CONNECT" {
        return Ok(Opening {
            protocol: Protocol::Connect,
            destination: parse_authority(request.target)?,
            forward: Vec::new(),
        });
    }
    let (destination, origin_form) = parse_absolute_target(request.target)?;
    let forward = forward_head(&request, origin_form, &destination, &headers, past_head);
    Ok(Opening {
        protocol: Protocol::Forward,
        destination,
        forward,
    })
}

fn parse_request_line(line: &[u8]) -> Result<RequestLine<'_>, OpeningError> {
    let malformed =
        || OpeningError::MalformedHttp("the request line is not `METHOD target HTTP/1.x`");
    let line = std::str::from_utf8(line).map_err(|_| malformed())?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let method_ok = !method.is_empty() && method.bytes().all(is_token_byte);
    let target_ok = !target.is_empty() && target.bytes().all(|byte| byte.is_ascii_graphic());
    let version_ok = version
        .strip_prefix("HTTP/1.")
        .is_some_and(|minor| minor.len() == 1 && minor.bytes().all(|byte| byte.is_ascii_digit()));
    if !(method_ok && target_ok && version_ok) {
        return Err(malformed());
    }
    Ok(RequestLine {
        method,
        target,
        version,
    })
}

fn parse_header(line: &[u8]) -> Result<Header<'_>, OpeningError> {
    if line
        .first()
        .is_some_and(|byte| *byte == b' ' || *byte == b'\t')
    {
        return Err(OpeningError::MalformedHttp(
            "a header line continues the previous one (obs-fold)",
        ));
    }
    let mut parts = line.splitn(2, |byte| *byte == b':');
    let name = parts.next().unwrap_or_default();
    let value = parts
        .next()
        .ok_or(OpeningError::MalformedHttp("a header line has no colon"))?;
    if name.is_empty() || !name.iter().copied().all(is_token_byte) {
        return Err(OpeningError::MalformedHttp("a header name is not a token"));
    }
    let name = std::str::from_utf8(name)
        .map_err(|_| OpeningError::MalformedHttp("a header name is not a token"))?;
    let value = trim_whitespace(value);
    // Visible characters, spaces, tabs and obs-text: a bare CR or another control is not.
    if !value
        .iter()
        .all(|byte| *byte == b'\t' || (*byte >= b' ' && *byte != 0x7F))
    {
        return Err(OpeningError::MalformedHttp(
            "a header value contains a control character",
        ));
    }
    Ok(Header { name, value })
}

fn trim_whitespace(bytes: &[u8]) -> &[u8] {
    let is_space = |byte: &u8| *byte == b' ' || *byte == b'\t';
    let start = bytes.iter().position(|byte| !is_space(byte));
    let end = bytes.iter().rposition(|byte| !is_space(byte));
    match (start, end) {
        (Some(start), Some(end)) => bytes.get(start..=end).unwrap_or_default(),
        _ => &[],
    }
}

/// RFC 9110's `tchar`.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// CONNECT's authority-form, `host:port`, an IPv6 address in brackets.
fn parse_authority(target: &str) -> Result<Destination, OpeningError> {
    // The port never holds a colon, so the last one ends the host, bracketed or not.
    let (host, port) = target.rsplit_once(':').ok_or(OpeningError::MalformedHttp(
        "CONNECT takes the destination as host:port",
    ))?;
    if host.contains(':') && !host.starts_with('[') {
        return Err(OpeningError::MalformedHttp(
            "CONNECT takes an IPv6 address in brackets, as [::1]:443",
        ));
    }
    let port = parse_port(port).ok_or(OpeningError::MalformedHttp(
        "CONNECT's port is not a number up to 65535",
    ))?;
    let host = parse_host(host).map_err(OpeningError::HttpHost)?;
    Ok(Destination { host, port })
}

fn parse_port(text: &str) -> Option<u16> {
    // `u16::from_str` would also take a sign.
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// An absolute-form `http://` target: the destination and the target in origin-form.
fn parse_absolute_target(target: &str) -> Result<(Destination, &str), OpeningError> {
    if target.starts_with('/') || target == "*" {
        return Err(OpeningError::NotProxied);
    }
    let (scheme, rest) = target.split_once("://").ok_or(OpeningError::MalformedHttp(
        "a request through the proxy takes an absolute http:// URI",
    ))?;
    if scheme.eq_ignore_ascii_case("https") {
        return Err(OpeningError::HttpsWithoutConnect);
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(OpeningError::MalformedHttp(
            "the proxy forwards http:// URIs only",
        ));
    }
    // URL parsers disagree on backslashes (WHATWG reads one as `/`); URIs have none.
    if target.contains('\\') {
        return Err(OpeningError::MalformedHttp(
            "the request target contains a backslash",
        ));
    }
    // The host comes from the authority alone and the path is forwarded as sent, so what the
    // policy judges and what the origin is asked cannot disagree about where one ends.
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest
        .split_at_checked(authority_end)
        .ok_or(OpeningError::MalformedHttp("the URI names no host"))?;
    if authority.is_empty() {
        return Err(OpeningError::MalformedHttp("the URI names no host"));
    }
    let url = url::Url::parse(&format!("http://{authority}/")).map_err(OpeningError::Uri)?;
    let host = match url.host() {
        Some(url::Host::Domain(name)) => parse_host(name).map_err(OpeningError::HttpHost)?,
        Some(url::Host::Ipv4(address)) => Host::Ip(IpAddr::V4(address)),
        Some(url::Host::Ipv6(address)) => Host::Ip(IpAddr::V6(address).to_canonical()),
        None => return Err(OpeningError::MalformedHttp("the URI names no host")),
    };
    let port = url.port_or_known_default().unwrap_or(HTTP_PORT);
    let path_and_query = path_and_query.split('#').next().unwrap_or_default();
    Ok((Destination { host, port }, path_and_query))
}

/// The head sent to the origin: see [`Opening::forward`].
fn forward_head(
    request: &RequestLine<'_>,
    path_and_query: &str,
    destination: &Destination,
    headers: &[Header<'_>],
    past_head: Vec<u8>,
) -> Vec<u8> {
    let named_by_connection: Vec<&[u8]> = headers
        .iter()
        .filter(|header| header.is_one_of(&["connection", "proxy-connection"]))
        .flat_map(|header| header.value.split(|byte| *byte == b','))
        .map(trim_whitespace)
        .collect();
    let hop_by_hop = |header: &Header<'_>| {
        named_by_connection
            .iter()
            .any(|name| name.eq_ignore_ascii_case(header.name.as_bytes()))
            && !header.is_one_of(&FRAMING_HEADERS)
    };
    let host = if destination.port == HTTP_PORT {
        destination.host.to_string()
    } else {
        destination.to_string()
    };
    let slash = if path_and_query.starts_with('/') {
        ""
    } else {
        "/"
    };

    let mut head = Vec::with_capacity(1024 + past_head.len());
    head.extend_from_slice(
        format!(
            "{} {slash}{path_and_query} {}\r\nHost: {host}\r\n",
            request.method, request.version
        )
        .as_bytes(),
    );
    for header in headers {
        if header.is_one_of(&DROPPED_HEADERS) || hop_by_hop(header) {
            continue;
        }
        head.extend_from_slice(header.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(header.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head.extend_from_slice(&past_head);
    head
}

/// A destination host as a CONNECT authority, a SOCKS5 domain or a URI's name spells it.
pub(crate) fn parse_host(raw: &str) -> Result<Host, HostError> {
    if let Some(bracketed) = raw.strip_prefix('[') {
        return bracketed
            .strip_suffix(']')
            .and_then(|inner| inner.parse::<Ipv6Addr>().ok())
            .map(|address| Host::Ip(IpAddr::V6(address).to_canonical()))
            .ok_or_else(|| HostError::Ipv6(shown(raw)));
    }
    let lowercase = raw.to_ascii_lowercase();
    let host = lowercase.strip_suffix('.').unwrap_or(&lowercase);
    if host.is_empty() {
        return Err(HostError::Empty);
    }
    if let Ok(address) = host.parse::<IpAddr>() {
        return Ok(Host::Ip(address.to_canonical()));
    }
    if let Some(address) = legacy_ipv4(host) {
        return Ok(Host::Ip(IpAddr::V4(address)));
    }
    // A resolver's inet_aton might still read an address into it (`0x` is 0.0.0.0 to glibc),
    // and it names nothing in DNS: no name.
    if ends_in_number(host) {
        return Err(HostError::Ipv4(shown(raw)));
    }
    let name_ok = host.len() <= 253
        && host.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
        });
    if !name_ok {
        return Err(HostError::Name(shown(raw)));
    }
    Ok(Host::Name(host.to_owned()))
}

/// The IPv4 address that inet_aton reads into `text`: one to four dot-separated numbers, each
/// decimal, octal (a leading `0`) or hexadecimal (`0x`), the last filling the remaining bytes.
pub(crate) fn legacy_ipv4(text: &str) -> Option<Ipv4Addr> {
    let parts = text
        .split('.')
        .map(legacy_number)
        .collect::<Option<Vec<u32>>>()?;
    let (last, leading) = parts.split_last()?;
    if leading.len() > 3 || leading.iter().any(|part| *part > 255) {
        return None;
    }
    let last_bits = 32 - 8 * u32::try_from(leading.len()).ok()?;
    if u64::from(*last) >= 1_u64 << last_bits {
        return None;
    }
    let high = leading
        .iter()
        .enumerate()
        .fold(0_u32, |address, (index, part)| {
            address | (part << (24 - 8 * index))
        });
    Some(Ipv4Addr::from(high | last))
}

/// One part of a legacy IPv4 spelling, if it is a number that fits in 32 bits.
fn legacy_number(part: &str) -> Option<u32> {
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1
            && let Some(octal) = part.strip_prefix('0')
        {
            (octal, 8)
        } else {
            (part, 10)
        };
    // `from_str_radix` would also take a sign.
    if digits.is_empty() || !digits.chars().all(|digit| digit.is_digit(radix)) {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

/// Whether the last label is a number (decimal or `0x` hex): WHATWG's sign that a host was
/// meant as an IPv4 address.
fn ends_in_number(host: &str) -> bool {
    let last = host.rsplit('.').next().unwrap_or_default();
    let decimal = !last.is_empty() && last.bytes().all(|byte| byte.is_ascii_digit());
    let hexadecimal = last
        .strip_prefix("0x")
        .is_some_and(|hex| hex.bytes().all(|byte| byte.is_ascii_hexdigit()));
    decimal || hexadecimal
}

/// A client's host as an error shows it: bounded, since a head may hold 64 KiB of it.
fn shown(raw: &str) -> String {
    raw.chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    struct Exchange {
        opening: Result<Opening, OpeningError>,
        /// What the proxy wrote back, the answer to an error included.
        answered: Vec<u8>,
        /// What the proxy left unread.
        unread: Vec<u8>,
    }

    async fn exchange(input: &[u8]) -> Exchange {
        let (mut client, mut proxy) = duplex(1 << 20);
        client.write_all(input).await.unwrap();
        client.shutdown().await.unwrap();
        let opening = read_opening(&mut proxy).await;
        if let Err(error) = &opening {
            error.answer(&mut proxy).await.unwrap();
        }
        let mut unread = Vec::new();
        proxy.read_to_end(&mut unread).await.unwrap();
        drop(proxy);
        let mut answered = Vec::new();
        client.read_to_end(&mut answered).await.unwrap();
        Exchange {
            opening,
            answered,
            unread,
        }
    }

    fn name(name: &str) -> Host {
        Host::Name(name.to_owned())
    }

    fn ip(text: &str) -> Host {
        Host::Ip(text.parse().unwrap())
    }

    fn answered_status(answered: &[u8]) -> String {
        let text = String::from_utf8_lossy(answered);
        text.lines().next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn connect_reads_the_destination_and_leaves_the_tunnel_unread() {
        let cases = [
            (
                "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
                name("example.com"),
                443,
            ),
            (
                "CONNECT Example.COM.:8443 HTTP/1.0\r\n\r\n",
                name("example.com"),
                8443,
            ),
            (
                "CONNECT 10.1.2.3:443 HTTP/1.1\r\nProxy-Connection: keep-alive\r\n\r\n",
                ip("10.1.2.3"),
                443,
            ),
            ("CONNECT [::1]:443 HTTP/1.1\n\n", ip("::1"), 443),
            (
                "CONNECT [::ffff:127.0.0.1]:22 HTTP/1.1\r\n\r\n",
                ip("127.0.0.1"),
                22,
            ),
            ("CONNECT 0x7f.1:443 HTTP/1.1\r\n\r\n", ip("127.0.0.1"), 443),
        ];
        for (head, host, port) in cases {
            let tunnel = b"\x16\x03\x01 client hello";
            let exchange = exchange(&[head.as_bytes(), tunnel].concat()).await;
            let opening = exchange.opening.unwrap();
            assert_eq!(opening.protocol, Protocol::Connect, "{head}");
            assert_eq!(opening.destination, Destination { host, port }, "{head}");
            assert!(opening.forward.is_empty());
            assert_eq!(exchange.unread, tunnel, "{head}");
            assert!(exchange.answered.is_empty());
        }
    }

    #[tokio::test]
    async fn malformed_http_openings_are_answered_400() {
        let cases: [&[u8]; 14] = [
            b"CONNECT example.com HTTP/1.1\r\n\r\n",
            b"CONNECT example.com: HTTP/1.1\r\n\r\n",
            b"CONNECT example.com:99999 HTTP/1.1\r\n\r\n",
            b"CONNECT example.com:+443 HTTP/1.1\r\n\r\n",
            b"CONNECT ::1:443 HTTP/1.1\r\n\r\n",
            b"CONNECT [::1:443 HTTP/1.1\r\n\r\n",
            b"CONNECT user@example.com:443 HTTP/1.1\r\n\r\n",
            b"GET  http://example.com/ HTTP/1.1\r\n\r\n",
            b"GET http://example.com/ HTTP/2.0\r\n\r\n",
            b"GET http://example.com/ HTTP/1.1\r\nX-A: 1\r\n  folded\r\n\r\n",
            b"GET http://example.com/ HTTP/1.1\r\nNo colon here\r\n\r\n",
            b"GET http://example.com/ HTTP/1.1\r\nX-A: a\0b\r\n\r\n",
            b"GET http://exa_mple.com\\@allowed.com/ HTTP/1.1\r\n\r\n",
            b"GET ftp://example.com/ HTTP/1.1\r\n\r\n",
        ];
        for input in cases {
            let shown = String::from_utf8_lossy(input);
            let exchange = exchange(input).await;
            assert!(exchange.opening.is_err(), "{shown}");
            assert_eq!(
                answered_status(&exchange.answered),
                "HTTP/1.1 400 Bad Request",
                "{shown}"
            );
        }
    }

    #[tokio::test]
    async fn forward_rewrites_the_head_to_origin_form() {
        let input = b"POST http://Example.com:8080/a/b?q=1&r=%20 HTTP/1.1\r\n\
            Host: elsewhere.test\r\n\
            Proxy-Connection: keep-alive\r\n\
            Proxy-Authorization: Basic Zm9vOmJhcg==\r\n\
            Connection: keep-alive, X-Hop, Content-Length\r\n\
            X-Hop: 1\r\n\
            Content-Length: 11\r\n\
            User-Agent:   curl/8  \r\n\
            \r\n\
            hello world";
        let exchange = exchange(input).await;
        let opening = exchange.opening.unwrap();
        assert_eq!(opening.protocol, Protocol::Forward);
        assert_eq!(
            opening.destination,
            Destination {
                host: name("example.com"),
                port: 8080
            }
        );
        assert_eq!(
            String::from_utf8(opening.forward).unwrap(),
            "POST /a/b?q=1&r=%20 HTTP/1.1\r\n\
             Host: example.com:8080\r\n\
             Content-Length: 11\r\n\
             User-Agent: curl/8\r\n\
             Connection: close\r\n\
             \r\n\
             hello world"
        );
        assert!(exchange.unread.is_empty());
    }

    #[tokio::test]
    async fn forward_takes_the_host_from_the_uri() {
        let cases = [
            (
                "http://example.com",
                name("example.com"),
                80,
                "GET / HTTP/1.1\r\nHost: example.com\r\n",
            ),
            (
                "http://example.com?q",
                name("example.com"),
                80,
                "GET /?q HTTP/1.1\r\nHost: example.com\r\n",
            ),
            (
                "http://allowed.test@evil.test/x",
                name("evil.test"),
                80,
                "GET /x HTTP/1.1\r\nHost: evil.test\r\n",
            ),
            (
                "http://allowed.test:80@evil.test/",
                name("evil.test"),
                80,
                "GET / HTTP/1.1\r\nHost: evil.test\r\n",
            ),
            (
                "http://evil.test#@allowed.test/",
                name("evil.test"),
                80,
                "GET / HTTP/1.1\r\nHost: evil.test\r\n",
            ),
            (
                "HTTP://%65xample.COM./p#frag",
                name("example.com"),
                80,
                "GET /p HTTP/1.1\r\nHost: example.com\r\n",
            ),
            (
                "http://2130706433/",
                ip("127.0.0.1"),
                80,
                "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n",
            ),
            (
                "http://0x7f.1:80/",
                ip("127.0.0.1"),
                80,
                "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n",
            ),
            (
                "http://[::1]:8080/x",
                ip("::1"),
                8080,
                "GET /x HTTP/1.1\r\nHost: [::1]:8080\r\n",
            ),
        ];
        for (target, host, port, head_start) in cases {
            let input = format!("GET {target} HTTP/1.1\r\nHost: other.test\r\n\r\n");
            let opening = exchange(input.as_bytes()).await.opening.unwrap();
            assert_eq!(opening.destination, Destination { host, port }, "{target}");
            let forward = String::from_utf8(opening.forward).unwrap();
            assert!(forward.starts_with(head_start), "{target}: {forward}");
            assert!(
                forward.ends_with("\r\nConnection: close\r\n\r\n"),
                "{target}: {forward}"
            );
        }
    }

    #[tokio::test]
    async fn origin_form_is_told_this_is_a_proxy() {
        let exchange = exchange(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
        assert!(matches!(exchange.opening, Err(OpeningError::NotProxied)));
        let answered = String::from_utf8(exchange.answered).unwrap();
        assert!(
            answered.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answered}"
        );
        assert!(answered.contains(
            "X-Amber-Refusal: this is amber's egress proxy; send requests through it as a proxy\r\n"
        ));
    }

    #[tokio::test]
    async fn https_in_a_plain_request_is_refused() {
        let exchange = exchange(b"GET https://example.com/ HTTP/1.1\r\n\r\n").await;
        assert!(matches!(
            exchange.opening,
            Err(OpeningError::HttpsWithoutConnect)
        ));
        assert_eq!(
            answered_status(&exchange.answered),
            "HTTP/1.1 400 Bad Request"
        );
    }

    #[tokio::test]
    async fn a_head_past_the_cap_is_refused() {
        for request_line in [
            "GET http://example.com/ HTTP/1.1",
            "CONNECT example.com:443 HTTP/1.1",
        ] {
            let input = format!("{request_line}\r\nX-Big: {}\r\n\r\n", "a".repeat(HEAD_CAP));
            let exchange = exchange(input.as_bytes()).await;
            assert!(
                matches!(exchange.opening, Err(OpeningError::HeadTooLarge)),
                "{request_line}"
            );
            assert_eq!(
                answered_status(&exchange.answered),
                "HTTP/1.1 431 Request Header Fields Too Large"
            );
        }
    }

    #[tokio::test]
    async fn a_head_cut_short_or_not_http_is_not_answered() {
        let cases: [&[u8]; 3] = [
            b"GET http://example.com/ HTTP/1.1\r\n",
            b"\x16\x03\x01\x02\x00",
            b"\r\n\r\n",
        ];
        for input in cases {
            let exchange = exchange(input).await;
            assert!(exchange.opening.is_err());
            assert!(exchange.answered.is_empty());
        }
    }

    #[tokio::test]
    async fn socks5_connect_reads_each_address_type() {
        let cases: [(&[u8], Host); 5] = [
            (
                b"\x05\x01\x00\x05\x01\x00\x03\x0bExample.COM\x01\xbb",
                name("example.com"),
            ),
            (
                b"\x05\x01\x00\x05\x01\x00\x03\x0a127.0.0.01\x01\xbb",
                ip("127.0.0.1"),
            ),
            (
                b"\x05\x02\x02\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x01\xbb",
                ip("127.0.0.1"),
            ),
            (
                b"\x05\x01\x00\x05\x01\x00\x04\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01\x01\xbb",
                ip("2001:db8::1"),
            ),
            (
                b"\x05\x01\x00\x05\x01\x00\x04\0\0\0\0\0\0\0\0\0\0\xff\xff\x0a\0\0\x01\x01\xbb",
                ip("10.0.0.1"),
            ),
        ];
        for (input, host) in cases {
            let exchange = exchange(&[input, b"payload"].concat()).await;
            let opening = exchange.opening.unwrap();
            assert_eq!(opening.protocol, Protocol::Socks5);
            assert_eq!(opening.destination, Destination { host, port: 443 });
            assert_eq!(exchange.answered, b"\x05\x00");
            assert_eq!(exchange.unread, b"payload");
        }
    }

    #[tokio::test]
    async fn socks_refusals_are_answered_in_socks() {
        let no_method = b"\x05\x00".as_slice();
        let cases: [(&[u8], &[u8]); 8] = [
            (b"\x05\x01\x02", b"\x05\xff"),
            (no_method, b"\x05\xff"),
            (
                b"\x05\x01\x00\x05\x02\x00\x01\x7f\0\0\x01\0\x50",
                b"\x05\x00\x05\x07\x00\x01\0\0\0\0\0\0",
            ),
            (
                b"\x05\x01\x00\x05\x03\x00\x01\x7f\0\0\x01\0\x50",
                b"\x05\x00\x05\x07\x00\x01\0\0\0\0\0\0",
            ),
            (
                b"\x05\x01\x00\x05\x01\x00\x05",
                b"\x05\x00\x05\x08\x00\x01\0\0\0\0\0\0",
            ),
            (
                b"\x05\x01\x00\x05\x01\x00\x03\x00\x01\xbb",
                b"\x05\x00\x05\x01\x00\x01\0\0\0\0\0\0",
            ),
            (
                b"\x05\x01\x00\x05\x01\x00\x03\x05a b c\x01\xbb",
                b"\x05\x00\x05\x01\x00\x01\0\0\0\0\0\0",
            ),
            (
                b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00",
                b"\x00\x5b\0\0\0\0\0\0",
            ),
        ];
        for (input, answer) in cases {
            let exchange = exchange(input).await;
            assert!(exchange.opening.is_err(), "{input:x?}");
            assert_eq!(exchange.answered, answer, "{input:x?}");
        }
        let only_password = exchange(b"\x05\x01\x02").await;
        assert!(matches!(
            only_password.opening,
            Err(OpeningError::Socks5NoAcceptableMethod)
        ));
        let socks4 = exchange(b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00").await;
        assert!(matches!(socks4.opening, Err(OpeningError::Socks4)));
    }

    #[tokio::test]
    async fn accepts_and_refusals_in_each_protocol() {
        let cases: [(Protocol, Option<Refusal>, &[u8]); 8] = [
            (
                Protocol::Connect,
                None,
                b"HTTP/1.1 200 Connection established\r\n\r\n",
            ),
            (Protocol::Forward, None, b""),
            (Protocol::Socks5, None, b"\x05\x00\x00\x01\0\0\0\0\0\0"),
            (
                Protocol::Socks5,
                Some(Refusal::NotAllowed),
                b"\x05\x02\x00\x01\0\0\0\0\0\0",
            ),
            (
                Protocol::Socks5,
                Some(Refusal::Unreachable),
                b"\x05\x04\x00\x01\0\0\0\0\0\0",
            ),
            (
                Protocol::Socks5,
                Some(Refusal::Failed),
                b"\x05\x01\x00\x01\0\0\0\0\0\0",
            ),
            (
                Protocol::Connect,
                Some(Refusal::NotAllowed),
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n\
                  Content-Length: 26\r\nConnection: close\r\n\
                  X-Amber-Refusal: evil.test is not allowed\r\n\r\n\
                  evil.test is not allowed\n\n",
            ),
            (
                Protocol::Forward,
                Some(Refusal::Unreachable),
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n\
                  Content-Length: 26\r\nConnection: close\r\n\
                  X-Amber-Refusal: evil.test is not allowed\r\n\r\n\
                  evil.test is not allowed\n\n",
            ),
        ];
        for (protocol, refusal, expected) in cases {
            let mut written = Vec::new();
            match refusal {
                None => accept(&mut written, protocol).await.unwrap(),
                Some(refusal) => refuse(
                    &mut written,
                    protocol,
                    refusal,
                    "evil.test is not allowed\n",
                )
                .await
                .unwrap(),
            }
            assert_eq!(
                String::from_utf8_lossy(&written),
                String::from_utf8_lossy(expected),
                "{protocol:?} {refusal:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_refusal_header_is_one_line() {
        let mut written = Vec::new();
        refuse(
            &mut written,
            Protocol::Connect,
            Refusal::Failed,
            "line one\r\nX-Injected: 1\nnaïve",
        )
        .await
        .unwrap();
        let written = String::from_utf8(written).unwrap();
        assert!(
            written.contains("\r\nX-Amber-Refusal: line one  X-Injected: 1 na?ve\r\n\r\n"),
            "{written}"
        );
        assert!(written.starts_with("HTTP/1.1 502 Bad Gateway\r\n"));
    }

    #[test]
    fn legacy_ipv4_spellings() {
        let cases = [
            ("2130706433", Some("127.0.0.1")),
            ("0x7f000001", Some("127.0.0.1")),
            ("0X7F000001", Some("127.0.0.1")),
            ("0x7f.1", Some("127.0.0.1")),
            ("0177.0.0.1", Some("127.0.0.1")),
            ("127.1", Some("127.0.0.1")),
            ("127.0.1", Some("127.0.0.1")),
            ("1.2.3.4", Some("1.2.3.4")),
            ("0", Some("0.0.0.0")),
            ("255.255.255.255", Some("255.255.255.255")),
            ("4294967295", Some("255.255.255.255")),
            ("4294967296", None),
            ("1.16777216", None),
            ("256.1.1.1", None),
            ("1.2.3.4.5", None),
            ("0x", None),
            ("08.1.1.1", None),
            ("1..1", None),
            ("+1.2.3.4", None),
            ("1.2.3.", None),
            ("example.com", None),
            ("", None),
        ];
        for (text, expected) in cases {
            let expected = expected.map(|address| address.parse::<Ipv4Addr>().unwrap());
            assert_eq!(legacy_ipv4(text), expected, "{text}");
        }
    }

    #[test]
    fn hosts_are_normalized_or_refused() {
        let cases = [
            ("Example.COM.", Ok(name("example.com"))),
            ("a-b_c.example", Ok(name("a-b_c.example"))),
            ("localhost", Ok(name("localhost"))),
            ("xn--bcher-kva.example", Ok(name("xn--bcher-kva.example"))),
            ("0177.0.0.1", Ok(ip("127.0.0.1"))),
            ("2130706433.", Ok(ip("127.0.0.1"))),
            ("::1", Ok(ip("::1"))),
            ("[::1]", Ok(ip("::1"))),
            ("[::FFFF:7f00:1]", Ok(ip("127.0.0.1"))),
            ("", Err(HostError::Empty)),
            (".", Err(HostError::Empty)),
            ("[::1", Err(HostError::Ipv6("[::1".to_owned()))),
            (
                "[example.com]",
                Err(HostError::Ipv6("[example.com]".to_owned())),
            ),
            ("256.1.1.1", Err(HostError::Ipv4("256.1.1.1".to_owned()))),
            ("1.2.3.4.5", Err(HostError::Ipv4("1.2.3.4.5".to_owned()))),
            ("08.1.1.1", Err(HostError::Ipv4("08.1.1.1".to_owned()))),
            ("0x", Err(HostError::Ipv4("0x".to_owned()))),
            (
                "example.123",
                Err(HostError::Ipv4("example.123".to_owned())),
            ),
            (
                "exa mple.com",
                Err(HostError::Name("exa mple.com".to_owned())),
            ),
            (
                "bücher.example",
                Err(HostError::Name("bücher.example".to_owned())),
            ),
            ("a..b", Err(HostError::Name("a..b".to_owned()))),
            (
                "fe80::1%eth0",
                Err(HostError::Name("fe80::1%eth0".to_owned())),
            ),
            (
                "user@example.com",
                Err(HostError::Name("user@example.com".to_owned())),
            ),
        ];
        for (raw, expected) in cases {
            assert_eq!(parse_host(raw), expected, "{raw}");
        }
    }

    /// Random and mutated heads never panic the parser.
    #[test]
    fn http_parsing_survives_noise() {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let sample =
            b"GET http://user@Example.com:8080/a?b HTTP/1.1\r\nHost: x\r\nConnection: a, b\r\n\r\n";
        for round in 0..4000 {
            let bytes: Vec<u8> = if round % 2 == 0 {
                let mut mutated = sample.to_vec();
                for _ in 0..(next() % 4 + 1) {
                    let at = (next() as usize) % mutated.len();
                    mutated[at] = b" :/.[]@?#\\\r\n0x1aZ"[(next() as usize) % 17];
                }
                mutated
            } else {
                (0..next() % 200).map(|_| next() as u8).collect()
            };
            let _ = parse_http(&bytes, Vec::new());
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let _ = parse_host(text);
                let _ = parse_authority(text);
            }
        }
    }
}
