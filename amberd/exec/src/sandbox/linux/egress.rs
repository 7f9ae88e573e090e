//! The proxy's end inside an allowlist sandbox's network namespace, made by the helper right
//! after it entered the namespace: the loopback brought up, one TCP listener on
//! `127.0.0.1:PORT`, handed to amberd over the egress link and closed here, so the command
//! never holds it. amberd accepts on it from outside (`crate::egress`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::check;
use crate::egress::{CHANNEL_FD, send_fd};
use crate::sandbox::{EgressSpec, SandboxError};

/// Makes the listener and sends it; the link is closed in every case.
pub(super) fn open(egress: &EgressSpec) -> Result<(), SandboxError> {
    // SAFETY: CHANNEL_FD was set up for this helper by `ChildSpec` (dup2 before exec); owning
    // it here closes it when this returns, before the command is `exec`d.
    let channel = unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) };
    loopback_up()?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", egress.port))
        .map_err(|err| SandboxError::setup("binding the egress proxy's port", err))?;
    send_fd(channel.as_raw_fd(), listener.as_raw_fd())
        .map_err(|err| SandboxError::setup("handing the proxy's listener to amberd", err))
}

/// Closes the link without a listener (no namespace here: the network stays off).
pub(super) fn decline() {
    // SAFETY: as in `open`; dropping closes the helper's end, which amberd reads as "none".
    drop(unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) });
}

/// `ip link set lo up` in the new namespace (its only interface, down when made).
fn loopback_up() -> Result<(), SandboxError> {
    // SAFETY: a datagram socket only to carry the interface ioctls.
    let fd = check(
        "socket for lo",
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }.into(),
    )?;
    let fd = i32::try_from(fd).map_err(|_| {
        SandboxError::setup(
            "socket for lo",
            std::io::Error::other("descriptor out of range"),
        )
    })?;
    // SAFETY: the descriptor was just made and is owned by nothing else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; zeroed is a valid request.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS fills the flags of the interface the request names.
    check(
        "reading lo's flags",
        unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) }.into(),
    )?;
    // SAFETY: the union's flags member is what SIOCGIFFLAGS set.
    unsafe {
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads the request it is given.
    check(
        "bringing lo up",
        unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) }.into(),
    )?;
    Ok(())
}
