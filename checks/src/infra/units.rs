//! Numbers in words and from sysfs: byte sizes in binary units, hex attributes.

/// Exact size in the largest binary unit that divides it: "64 MiB", "1536 MiB", "65536 bytes" -> "64 KiB".
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    UNITS
        .iter()
        .find(|(size, _)| bytes >= *size && bytes % size == 0)
        .map(|(size, unit)| format!("{} {unit}", bytes / size))
        .unwrap_or_else(|| format!("{bytes} bytes"))
}

/// Parses a sysfs hex attribute such as `0x1003` or `1003`; None on garbage.
pub fn parse_hex_u32(s: &str) -> Option<u32> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
}
