//! systemd's readiness protocol (`Type=notify`): `READY=1` once the
//! programs are attached and the endpoint listens, `RELOADING=1` while a
//! SIGHUP is applied, `STOPPING=1` on the way out. A datagram to
//! `$NOTIFY_SOCKET`, as `sd_notify(3)` sends it; nothing without one.
//! Written here rather than through a crate: it is one `sendto`.

use std::os::unix::net::UnixDatagram;

/// Sends `state` to the service manager, if one is listening.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    // A leading '@' names a socket in the abstract namespace.
    let _ = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
        }
        None => sock.send_to(state.as_bytes(), &path),
    };
}

/// `RELOADING=1` with the monotonic time systemd wants beside it.
pub fn reloading() {
    let usec = fsprof_sys::clock::mono_ns() / 1000;
    notify(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests in this process share the environment: only this one sets it.
    #[test]
    fn the_state_reaches_the_notify_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        std::env::set_var("NOTIFY_SOCKET", &path);
        notify("READY=1");
        std::env::remove_var("NOTIFY_SOCKET");
        let mut b = [0u8; 64];
        let n = rx.recv(&mut b).unwrap();
        assert_eq!(&b[..n], b"READY=1");
    }
}
