//! Numbers in words for the terminal report: a bandwidth with its unit.

/// Bandwidth with three significant digits: `0.0921`, `3.92`, `41.2`, `118`.
pub fn bw(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a >= 0.1 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}
