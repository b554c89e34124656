//! Numbers in words and from sysfs: byte sizes in binary units, hex attributes.

/// Exact size in the largest binary unit that divides it: "64 MiB", "1536 MiB", "65536 bytes" ->
/// "64 KiB"; a size that only a unit two steps smaller divides reads in the large one first,
/// the exact value after it: "23.5 GiB (24683652 KiB)".
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    let exact = UNITS
        .iter()
        .find(|(size, _)| bytes >= *size && bytes % size == 0)
        .map(|(size, unit)| (*size, format!("{} {unit}", bytes / size)));
    let largest = UNITS.iter().find(|(size, _)| bytes >= *size);
    match (exact, largest) {
        (Some((divides, text)), Some((big, unit))) if *big / divides > 1024 => {
            format!("{:.1} {unit} ({text})", bytes as f64 / *big as f64)
        }
        (Some((_, text)), _) => text,
        (None, Some((big, unit))) if bytes >= 1 << 20 => {
            format!("{:.1} {unit} ({bytes} bytes)", bytes as f64 / *big as f64)
        }
        _ => format!("{bytes} bytes"),
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_large_size_reads_in_its_large_unit() {
        use super::format_bytes;
        assert_eq!(format_bytes(24_683_652 << 10), "23.5 GiB (24683652 KiB)");
        assert_eq!(format_bytes(1536 << 20), "1536 MiB");
        assert_eq!(format_bytes(64 << 10), "64 KiB");
        assert_eq!(format_bytes((1 << 30) + 1), "1.0 GiB (1073741825 bytes)");
    }
}
