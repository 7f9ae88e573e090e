//! The way out of a sandbox whose network is an allowlist: its network namespace has a
//! loopback and one listening socket, the egress proxy's, made by the sandbox helper inside
//! the namespace and handed to amberd over a Unix socket pair ([`pair`]). amberd
//! accepts on that listener from outside (a socket keeps the namespace it was made in), so
//! nothing in the namespace but the proxy's port leads anywhere, and there is no path, no
//! port on the host and no process in between that a command could reach another way.
//!
//! The command learns the proxy from the usual variables ([`proxy_vars`]); one that ignores
//! them reaches nothing (its namespace has no other interface).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The port of the proxy inside every allowlist sandbox (its namespace is fresh, so the
/// port is always free there): squid's, which tools and people recognise as a proxy.
pub const PROXY_PORT: u16 = 3128;

/// The helper's file descriptor of its end of the link (set up by `ChildSpec`).
pub const CHANNEL_FD: RawFd = 3;

/// The environment every command of an allowlist sandbox gets: the proxy for HTTP, HTTPS
/// and SOCKS clients, in the spellings tools read (curl, git and pip the lowercase ones,
/// npm and Go the uppercase), and nothing local sent through it.
pub fn proxy_vars(port: u16) -> Vec<(&'static str, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let local = "localhost,127.0.0.1,::1".to_owned();
    vec![
        ("HTTP_PROXY", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("http_proxy", http.clone()),
        ("https_proxy", http),
        ("ALL_PROXY", socks.clone()),
        ("all_proxy", socks),
        ("NO_PROXY", local.clone()),
        ("no_proxy", local),
    ]
}

/// amberd's end of one command's link: receives the proxy's listener once the helper made
/// it.
#[derive(Debug)]
pub struct DaemonEnd(OwnedFd);

/// The helper's end, passed to it as [`CHANNEL_FD`].
#[derive(Debug)]
pub struct ChildEnd(pub(crate) OwnedFd);

/// A fresh link: a close-on-exec socket pair, so no other child inherits it.
pub fn pair() -> io::Result<(DaemonEnd, ChildEnd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two descriptors into the array it is given.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned by nothing else.
    let (daemon, child) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((DaemonEnd(daemon), ChildEnd(child)))
}

impl DaemonEnd {
    /// Waits for the helper's listener: `Ok(None)` when the helper closed the link without
    /// one (it failed, or could make no namespace and runs the command with the network
    /// off).
    pub async fn receive_listener(self) -> io::Result<Option<tokio::net::TcpListener>> {
        let fd = self.0;
        set_nonblocking(fd.as_raw_fd())?;
        let stream = tokio::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(fd))?;
        loop {
            stream.readable().await?;
            match stream.try_io(tokio::io::Interest::READABLE, || {
                receive_fd(stream.as_raw_fd())
            }) {
                Ok(None) => return Ok(None),
                Ok(Some(listener)) => {
                    set_nonblocking(listener.as_raw_fd())?;
                    let listener = std::net::TcpListener::from(listener);
                    return tokio::net::TcpListener::from_std(listener).map(Some);
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(err) => return Err(err),
            }
        }
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns, integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Room for one descriptor's control message.
const CONTROL_LEN: usize = 64;

/// A message header over one byte of data (`iov`) and a control buffer (`control`); both
/// must outlive the header's use.
fn message(iov: &mut libc::iovec, control: &mut [u8; CONTROL_LEN]) -> libc::msghdr {
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CONTROL_LEN;
    msg
}

/// Sends `fd` over the link `channel` (the helper, before it `exec`s the command).
pub(crate) fn send_fd(channel: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [1u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u8; CONTROL_LEN];
    let mut msg = message(&mut iov, &mut control);
    // SAFETY: CMSG_SPACE computes a size from an integer.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    msg.msg_controllen = space;
    // SAFETY: the control buffer is CONTROL_LEN ≥ CMSG_SPACE(4) bytes, so the first header
    // and its data lie inside it; the pointers stay valid for this call.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        if header.is_null() {
            return Err(io::Error::other("no room for the control message"));
        }
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
    }
    // SAFETY: msg points at live buffers for the duration of the call.
    let sent = unsafe { libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one descriptor from the link: `None` at its end (the helper closed it).
fn receive_fd(channel: RawFd) -> io::Result<Option<OwnedFd>> {
    let mut byte = [0u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u8; CONTROL_LEN];
    let mut msg = message(&mut iov, &mut control);
    // SAFETY: msg points at live buffers; received descriptors are close-on-exec.
    let got = unsafe { libc::recvmsg(channel, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    if got == 0 {
        return Ok(None);
    }
    let mut received = None;
    // SAFETY: the kernel filled `control` up to msg_controllen; the CMSG_* walk stays in it.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                let count = ((*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                for index in 0..count {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(index)));
                    // The first is the listener; any more were never sent by a helper.
                    if received.is_none() {
                        received = Some(fd);
                    }
                }
            }
            header = libc::CMSG_NXTHDR(&msg, header);
        }
    }
    match received {
        Some(fd) if is_listening_tcp(fd.as_raw_fd()) => Ok(Some(fd)),
        Some(_) => Err(io::Error::other(
            "the sandbox helper sent something that is not a listening TCP socket",
        )),
        None => Err(io::Error::other(
            "the sandbox helper wrote on the egress link without a listener",
        )),
    }
}

fn is_listening_tcp(fd: RawFd) -> bool {
    let option = |name: libc::c_int| -> Option<libc::c_int> {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes an int into `value`, its size in `len`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (rc == 0).then_some(value)
    };
    option(libc::SO_ACCEPTCONN) == Some(1)
        && option(libc::SO_TYPE) == Some(libc::SOCK_STREAM)
        && matches!(
            option(libc::SO_DOMAIN),
            Some(libc::AF_INET | libc::AF_INET6)
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listener_crosses_the_link_and_still_accepts() {
        let (daemon, child) = pair().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        send_fd(child.0.as_raw_fd(), listener.as_raw_fd()).unwrap();
        drop(listener);
        drop(child);
        let received = daemon.receive_listener().await.unwrap().unwrap();
        assert_eq!(received.local_addr().unwrap(), addr);
        let connect = tokio::net::TcpStream::connect(addr);
        let (accepted, connected) = tokio::join!(received.accept(), connect);
        accepted.unwrap();
        connected.unwrap();
    }

    #[tokio::test]
    async fn a_closed_link_means_no_listener() {
        let (daemon, child) = pair().unwrap();
        drop(child);
        assert!(daemon.receive_listener().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn anything_but_a_listening_tcp_socket_is_refused() {
        let (daemon, child) = pair().unwrap();
        let file = std::fs::File::open("/dev/null").unwrap();
        send_fd(child.0.as_raw_fd(), file.as_raw_fd()).unwrap();
        assert!(daemon.receive_listener().await.is_err());
        let (daemon, child) = pair().unwrap();
        let connected = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(connected.local_addr().unwrap()).unwrap();
        send_fd(child.0.as_raw_fd(), stream.as_raw_fd()).unwrap();
        assert!(
            daemon.receive_listener().await.is_err(),
            "a connected socket"
        );
    }

    #[test]
    fn the_proxy_variables_name_the_port_in_both_spellings() {
        let vars = proxy_vars(3128);
        for name in ["HTTP_PROXY", "https_proxy", "ALL_PROXY", "no_proxy"] {
            assert!(vars.iter().any(|(n, _)| *n == name), "{name}");
        }
        assert!(vars.contains(&("HTTPS_PROXY", "http://127.0.0.1:3128".to_owned())));
        assert!(vars.contains(&("all_proxy", "socks5h://127.0.0.1:3128".to_owned())));
    }
}
