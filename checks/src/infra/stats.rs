//! Small statistics over measured values: the median and a nearest-rank percentile.

/// The median of `values` (sorted in place); the mean of the two middle values
/// when their number is even. None when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 0 {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// The value at quantile `q` (0.0..=1.0) of already `sorted` values: the one at the
/// rounded index `(len - 1) * q`, itself rounded to 0.1. None when empty or when
/// `q` points past the end.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(i).map(|v| (v * 10.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [7.0]), Some(7.0));
        assert_eq!(median(&mut [9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn median_sorts_its_input() {
        let mut v = [3.0, -1.0, 2.0];
        assert_eq!(median(&mut v), Some(2.0));
        assert_eq!(v, [-1.0, 2.0, 3.0]);
    }

    #[test]
    fn percentile_picks_the_rounded_rank_and_rounds_to_a_tenth() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[12.34], 0.99), Some(12.3));
        let v: Vec<f64> = (1..=100).map(|i| i as f64 + 0.04).collect();
        // (100 - 1) * 0.5 = 49.5 rounds to index 50.
        assert_eq!(percentile(&v, 0.50), Some(51.0));
        // (100 - 1) * 0.99 = 98.01 rounds to index 98.
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        assert_eq!(percentile(&[1.25, 2.0], 0.0), Some(1.3));
    }

    #[test]
    fn percentile_past_the_end_is_none() {
        assert_eq!(percentile(&[1.0, 2.0], 2.0), None);
    }
}
