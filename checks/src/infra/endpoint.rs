//! `host:port` as torchrun writes an endpoint.

/// `host:port` as torchrun writes an endpoint, bracketing IPv6 literals (`[fd00::1]:29500`).
pub fn host_port(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
