//! Endpoints in torchrun's grammar (`HOST:PORT`, `[v6]:PORT`, `HOST`, `[v6]`, a bare IPv6 address) and torchrun's default ports.

use super::LauncherError;
use super::values::PORT_EXPECTED;

/// torchrun's default master port.
pub const DEFAULT_MASTER_PORT: u16 = 29500;
/// torchrun's c10d port when `--rdzv-endpoint` names no port.
pub const DEFAULT_RDZV_PORT: u16 = 29400;

/// Splits `HOST:PORT`, `[v6]:PORT`, `HOST`, `[v6]` or a bare IPv6 address.
pub fn split_endpoint(v: &str) -> Result<(String, Option<u16>), String> {
    let v = v.trim();
    let (host, port) = if let Some(rest) = v.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{v:?} has '[' without ']'"))?;
        match after {
            "" => (host, None),
            p => (
                host,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("{v:?}: expected ':' after ']'"))?,
                ),
            ),
        }
    } else if v.matches(':').count() > 1 {
        (v, None)
    } else {
        match v.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (v, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{v:?} has no host"));
    }
    let port = port
        .map(|p| match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{p:?} is not a port (1-65535)")),
        })
        .transpose()?;
    Ok((host.to_string(), port))
}

/// `--rdzv-endpoint` in torchrun's grammar (`HOST:PORT`, `[v6]:PORT`, `HOST`, `[v6]`, bare IPv6),
/// with the error in the launcher's terms.
pub(super) fn parse_endpoint(value: &str) -> Result<(String, Option<u16>), LauncherError> {
    split_endpoint(value).map_err(|why| LauncherError::BadValue {
        name: "--rdzv-endpoint".into(),
        value: value.into(),
        expected: if why.contains("not a port") {
            PORT_EXPECTED
        } else {
            "HOST:PORT"
        },
        fix: format!(
            "{why}; give HOST:PORT, e.g. --rdzv-endpoint=10.0.0.1:29500 or [fd00::1]:29500"
        ),
    })
}
