//! The server name (SNI) in the TLS ClientHello a tunnel's client sends first, so that the
//! egress proxy can check that a CONNECT tunnel's TLS names an allowed host too. The bytes are
//! peeked, never consumed: the tunnel relays them untouched. Only the first record is read;
//! anything malformed is `Unreadable` rather than a guess, since the answer gates a tunnel.

use std::time::Duration;

use tokio::net::TcpStream;

const CONTENT_TYPE_HANDSHAKE: u8 = 22;
const TLS_MAJOR_VERSION: u8 = 3;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const EXTENSION_SERVER_NAME: u16 = 0;
const NAME_TYPE_HOST_NAME: u8 = 0;
const RECORD_HEADER_LEN: usize = 5;
/// The most one TLS record may carry (RFC 8446 §5.1).
const MAX_RECORD_LEN: usize = 16 * 1024;
/// The first pause between peeks while a ClientHello is still arriving, and the longest.
const FIRST_PEEK_PAUSE: Duration = Duration::from_millis(2);
const LONGEST_PEEK_PAUSE: Duration = Duration::from_millis(50);

/// What the start of a tunnel says about the server it wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sni {
    /// The ClientHello's host name: ASCII lowercase, without a trailing dot.
    Name(String),
    /// A complete ClientHello without a server name.
    Absent,
    /// The first bytes are not a TLS handshake record.
    NotTls,
    /// More bytes are needed.
    Incomplete,
    /// A TLS handshake record that holds no readable ClientHello: malformed, or one longer
    /// than its first record.
    Unreadable,
}

/// The server name in `client_hello`, the first bytes a client sent.
pub(crate) fn server_name(client_hello: &[u8]) -> Sni {
    match client_hello.first() {
        None => return Sni::Incomplete,
        Some(&CONTENT_TYPE_HANDSHAKE) => {}
        Some(_) => return Sni::NotTls,
    }
    // Any minor version: servers take a first record's loosely, so this check must too.
    match client_hello.get(1) {
        None => return Sni::Incomplete,
        Some(&TLS_MAJOR_VERSION) => {}
        Some(_) => return Sni::NotTls,
    }
    let Some(&[high, low]) = client_hello.get(3..RECORD_HEADER_LEN) else {
        return Sni::Incomplete;
    };
    let record_len = usize::from(u16::from_be_bytes([high, low]));
    if record_len == 0 || record_len > MAX_RECORD_LEN {
        return Sni::Unreadable;
    }
    let Some(record) = client_hello.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + record_len) else {
        return Sni::Incomplete;
    };
    match record_server_name(record) {
        Ok(Some(name)) => Sni::Name(name),
        Ok(None) => Sni::Absent,
        Err(Malformed) => Sni::Unreadable,
    }
}

/// Peeks at the ClientHello a client sends first until its server name is known, the longest
/// record is in, or `timeout` passes; `Incomplete` if the stream ends, fails or times out
/// first. Nothing is consumed.
pub(crate) async fn peek_client_hello(stream: &TcpStream, timeout: Duration) -> Sni {
    let mut buffer = vec![0; RECORD_HEADER_LEN + MAX_RECORD_LEN];
    let peeking = async {
        let mut pause = FIRST_PEEK_PAUSE;
        loop {
            let Ok(peeked) = stream.peek(&mut buffer).await else {
                return Sni::Incomplete;
            };
            let sni = server_name(buffer.get(..peeked).unwrap_or_default());
            // No bytes peeked is the end of the stream: no more will come.
            if sni != Sni::Incomplete || peeked == 0 || peeked == buffer.len() {
                return sni;
            }
            // A peek finds the same bytes ready again at once, so waiting for readability
            // would spin: pause before looking for more.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PEEK_PAUSE);
        }
    };
    tokio::time::timeout(timeout, peeking)
        .await
        .unwrap_or(Sni::Incomplete)
}

/// A record that is not a well-formed ClientHello.
struct Malformed;

/// The host name in a handshake record that starts with a ClientHello.
fn record_server_name(record: &[u8]) -> Result<Option<String>, Malformed> {
    let mut handshake = Cursor::new(record);
    if handshake.u8()? != HANDSHAKE_CLIENT_HELLO {
        return Err(Malformed);
    }
    let hello_len = handshake.u24()?;
    // A ClientHello longer than its record continues in the next one: not read here.
    let mut hello = Cursor::new(handshake.take(hello_len)?);
    hello.take(2)?; // legacy_version
    hello.take(32)?; // random
    hello.u8_vector()?; // legacy_session_id
    hello.u16_vector()?; // cipher_suites
    hello.u8_vector()?; // legacy_compression_methods
    // Extensions may be left out altogether before TLS 1.3.
    if hello.is_empty() {
        return Ok(None);
    }
    let mut extensions = Cursor::new(hello.u16_vector()?);
    if !hello.is_empty() {
        return Err(Malformed);
    }
    let mut name = None;
    while !extensions.is_empty() {
        let extension_type = extensions.u16()?;
        let data = extensions.u16_vector()?;
        if extension_type == EXTENSION_SERVER_NAME {
            // Servers refuse a repeated extension; which copy one would read is not ours to guess.
            if name.is_some() {
                return Err(Malformed);
            }
            name = Some(host_name(data)?);
        }
    }
    Ok(name.flatten())
}

/// The host name in a server_name extension's data, if it has one.
fn host_name(extension: &[u8]) -> Result<Option<String>, Malformed> {
    let mut extension = Cursor::new(extension);
    let mut names = Cursor::new(extension.u16_vector()?);
    if !extension.is_empty() {
        return Err(Malformed);
    }
    let mut host_name = None;
    while !names.is_empty() {
        let name_type = names.u8()?;
        let name = names.u16_vector()?;
        if name_type == NAME_TYPE_HOST_NAME {
            // RFC 6066 allows one name of a type.
            if host_name.is_some() {
                return Err(Malformed);
            }
            host_name = Some(normalized(name)?);
        }
    }
    Ok(host_name)
}

/// A host name as the policy compares it: ASCII lowercase, without a trailing dot.
fn normalized(name: &[u8]) -> Result<String, Malformed> {
    let name = name.strip_suffix(b".").unwrap_or(name);
    let name_ok = !name.is_empty()
        && name
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_'));
    if !name_ok {
        return Err(Malformed);
    }
    String::from_utf8(name.to_ascii_lowercase()).map_err(|_| Malformed)
}

/// Reads a byte string front to back, every length checked against what is left.
struct Cursor<'bytes> {
    rest: &'bytes [u8],
}

impl<'bytes> Cursor<'bytes> {
    fn new(bytes: &'bytes [u8]) -> Self {
        Cursor { rest: bytes }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn take(&mut self, count: usize) -> Result<&'bytes [u8], Malformed> {
        let (taken, rest) = self.rest.split_at_checked(count).ok_or(Malformed)?;
        self.rest = rest;
        Ok(taken)
    }

    fn u8(&mut self) -> Result<u8, Malformed> {
        match self.take(1)? {
            [byte] => Ok(*byte),
            _ => Err(Malformed),
        }
    }

    fn u16(&mut self) -> Result<u16, Malformed> {
        match self.take(2)? {
            [high, low] => Ok(u16::from_be_bytes([*high, *low])),
            _ => Err(Malformed),
        }
    }

    fn u24(&mut self) -> Result<usize, Malformed> {
        match self.take(3)? {
            [high, middle, low] => {
                Ok(usize::from(*high) << 16 | usize::from(*middle) << 8 | usize::from(*low))
            }
            _ => Err(Malformed),
        }
    }

    /// A vector with a one-byte length.
    fn u8_vector(&mut self) -> Result<&'bytes [u8], Malformed> {
        let len = self.u8()?;
        self.take(usize::from(len))
    }

    /// A vector with a two-byte length.
    fn u16_vector(&mut self) -> Result<&'bytes [u8], Malformed> {
        let len = self.u16()?;
        self.take(usize::from(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn u16_prefixed(bytes: &[u8]) -> Vec<u8> {
        let len = u16::try_from(bytes.len()).unwrap();
        [&len.to_be_bytes()[..], bytes].concat()
    }

    fn extension(extension_type: u16, data: &[u8]) -> Vec<u8> {
        [&extension_type.to_be_bytes()[..], &u16_prefixed(data)].concat()
    }

    fn server_name_extension(names: &[(u8, &str)]) -> Vec<u8> {
        let list: Vec<u8> = names
            .iter()
            .flat_map(|(name_type, name)| {
                [&[*name_type][..], &u16_prefixed(name.as_bytes())].concat()
            })
            .collect();
        extension(EXTENSION_SERVER_NAME, &u16_prefixed(&list))
    }

    /// A TLS 1.3 ClientHello in one record, with `extensions` after supported_versions.
    fn client_hello(extensions: &[Vec<u8>]) -> Vec<u8> {
        let supported_versions = extension(43, &[0x02, 0x03, 0x04]);
        let extensions: Vec<u8> = std::iter::once(&supported_versions)
            .chain(extensions)
            .flatten()
            .copied()
            .collect();
        let mut hello = vec![0x03, 0x03];
        hello.extend([0x11; 32]); // random
        hello.push(32);
        hello.extend([0x22; 32]); // session id
        hello.extend(u16_prefixed(&[0x13, 0x01, 0x13, 0x02, 0x13, 0x03]));
        hello.extend([0x01, 0x00]); // compression: null only
        hello.extend(u16_prefixed(&extensions));
        let hello_len = u32::try_from(hello.len()).unwrap().to_be_bytes();
        let handshake = [&[HANDSHAKE_CLIENT_HELLO][..], &hello_len[1..], &hello].concat();
        [
            &[CONTENT_TYPE_HANDSHAKE, 0x03, 0x01][..],
            &u16_prefixed(&handshake),
        ]
        .concat()
    }

    fn example() -> Vec<u8> {
        client_hello(&[server_name_extension(&[(
            NAME_TYPE_HOST_NAME,
            "example.com",
        )])])
    }

    #[test]
    fn reads_the_server_name() {
        assert_eq!(server_name(&example()), Sni::Name("example.com".to_owned()));
        let loud = client_hello(&[server_name_extension(&[(
            NAME_TYPE_HOST_NAME,
            "WWW.Example.COM.",
        )])]);
        assert_eq!(server_name(&loud), Sni::Name("www.example.com".to_owned()));
        // Bytes after the record (the rest of the flight) do not matter.
        let followed = [example(), b"\x14\x03\x03\x00\x01\x01".to_vec()].concat();
        assert_eq!(server_name(&followed), Sni::Name("example.com".to_owned()));
    }

    #[test]
    fn a_captured_client_hello() {
        // A minimal TLS 1.2 ClientHello for "example.com" as on the wire, independent of the
        // builder: one suite, server_name then renegotiation_info.
        let hex = "1603010048010000440303000000000000000000000000000000000000000000000000000000\
                   0000000000000002c02f0100001900000010000e00000b6578616d706c652e636f6dff010001\
                   00";
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
            .collect();
        assert_eq!(server_name(&bytes), Sni::Name("example.com".to_owned()));
    }

    #[test]
    fn every_outcome() {
        let no_extensions = {
            let mut bytes = client_hello(&[]);
            // Drop the extensions block: the lengths in both headers shrink by its size.
            let extensions_len = 2 + 7;
            bytes.truncate(bytes.len() - extensions_len);
            let record_len = u16::try_from(bytes.len() - 5).unwrap();
            bytes[3..5].copy_from_slice(&record_len.to_be_bytes());
            let hello_len = u32::try_from(bytes.len() - 9).unwrap().to_be_bytes();
            bytes[6..9].copy_from_slice(&hello_len[1..]);
            bytes
        };
        let mut not_client_hello = example();
        not_client_hello[5] = 2;
        let mut longer_than_record = example();
        longer_than_record[7] = longer_than_record[7].wrapping_add(1);
        let mut oversized_record = example();
        oversized_record[3..5].copy_from_slice(&0x4001_u16.to_be_bytes());
        let cases: [(&str, Vec<u8>, Sni); 13] = [
            ("no server_name", client_hello(&[]), Sni::Absent),
            ("no extensions", no_extensions, Sni::Absent),
            (
                "no host_name entry",
                client_hello(&[server_name_extension(&[(7, "example.com")])]),
                Sni::Absent,
            ),
            (
                "two server_name extensions",
                client_hello(&[
                    server_name_extension(&[(NAME_TYPE_HOST_NAME, "allowed.test")]),
                    server_name_extension(&[(NAME_TYPE_HOST_NAME, "evil.test")]),
                ]),
                Sni::Unreadable,
            ),
            (
                "two host names",
                client_hello(&[server_name_extension(&[
                    (NAME_TYPE_HOST_NAME, "allowed.test"),
                    (NAME_TYPE_HOST_NAME, "evil.test"),
                ])]),
                Sni::Unreadable,
            ),
            (
                "a name with a NUL",
                client_hello(&[server_name_extension(&[(
                    NAME_TYPE_HOST_NAME,
                    "evil.test\0.allowed.test",
                )])]),
                Sni::Unreadable,
            ),
            ("not a ClientHello", not_client_hello, Sni::Unreadable),
            (
                "a ClientHello longer than its record",
                longer_than_record,
                Sni::Unreadable,
            ),
            ("a record over 16 KiB", oversized_record, Sni::Unreadable),
            (
                "plain HTTP",
                b"GET / HTTP/1.1\r\n\r\n".to_vec(),
                Sni::NotTls,
            ),
            ("SSH", b"SSH-2.0-OpenSSH_9.6\r\n".to_vec(), Sni::NotTls),
            ("nothing yet", Vec::new(), Sni::Incomplete),
            (
                "a record header only",
                example()[..5].to_vec(),
                Sni::Incomplete,
            ),
        ];
        for (case, bytes, expected) in cases {
            assert_eq!(server_name(&bytes), expected, "{case}");
        }
    }

    #[test]
    fn every_prefix_is_incomplete() {
        let hello = example();
        for len in 0..hello.len() {
            assert_eq!(
                server_name(&hello[..len]),
                Sni::Incomplete,
                "prefix of {len}"
            );
        }
    }

    /// Random and mutated bytes never panic the parser.
    #[test]
    fn survives_noise() {
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let hello = example();
        for round in 0..5000 {
            let bytes: Vec<u8> = match round % 3 {
                0 => (0..next() % 300).map(|_| next() as u8).collect(),
                1 => {
                    let mut bytes = vec![CONTENT_TYPE_HANDSHAKE, 3, 1];
                    bytes.extend((0..next() % 300).map(|_| next() as u8));
                    bytes
                }
                _ => {
                    let mut mutated = hello.clone();
                    for _ in 0..(next() % 3 + 1) {
                        let at = (next() as usize) % mutated.len();
                        mutated[at] = next() as u8;
                    }
                    mutated
                }
            };
            let _ = server_name(&bytes);
        }
    }

    #[tokio::test]
    async fn peeks_without_consuming() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let hello = example();
        let sent = hello.clone();
        let client = tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            // In two pieces, the second late: the peek must wait for it.
            let (first, second) = sent.split_at(20);
            stream.write_all(first).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            stream.write_all(second).await.unwrap();
            stream
        });
        let (mut server, _) = listener.accept().await.unwrap();
        let sni = peek_client_hello(&server, Duration::from_secs(5)).await;
        assert_eq!(sni, Sni::Name("example.com".to_owned()));
        let mut received = vec![0; hello.len()];
        server.read_exact(&mut received).await.unwrap();
        assert_eq!(received, hello);
        drop(client.await.unwrap());
    }

    #[tokio::test]
    async fn a_peek_gives_up_at_the_timeout_or_the_end() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut stalled = tokio::net::TcpStream::connect(address).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        stalled.write_all(&example()[..30]).await.unwrap();
        let sni = peek_client_hello(&server, Duration::from_millis(200)).await;
        assert_eq!(sni, Sni::Incomplete);

        let closed = tokio::net::TcpStream::connect(address).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        drop(closed);
        let sni = peek_client_hello(&server, Duration::from_secs(5)).await;
        assert_eq!(sni, Sni::Incomplete);
        drop(stalled);
    }
}
