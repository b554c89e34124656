//! The checked multiply's inputs and its exact verification, on the CPU.
//!
//! Inputs are seeded small integers (|v| <= [`MAX_VALUE`]), exactly representable in FP8 E4M3
//! and wider, whose products summed over k <= [`MAX_K`] stay below 2^24: every partial sum is
//! an integer the FP32 accumulator holds exactly, so the product is the same bits on every
//! correct GPU, whatever its model, cuBLAS version or reduction order.
//!
//! The verification never multiplies the whole product on the CPU: two exact checksums
//! (Freivalds' test in i64: C·x against A·(B·x), and yᵀ·C against (yᵀ·A)·B) find the rows and
//! columns that hold a wrong element in O(n²), and only their crossings are compared one by
//! one, so the number of wrong elements is exact when few are wrong and a lower bound when
//! many are.

/// Largest absolute input value.
pub const MAX_VALUE: i32 = 15;
/// Largest inner dimension whose exact sums fit FP32's 24-bit significand: k·15·15 < 2^24.
pub const MAX_K: usize = 74_000;
/// Crossings of wrong rows and wrong columns compared one by one at most.
const MAX_CROSSINGS: usize = 1 << 16;

/// SplitMix64: a seeded, portable generator (the same numbers on every node).
#[derive(Clone, Copy)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An integer in -MAX_VALUE..=MAX_VALUE.
    pub fn small(&mut self) -> i8 {
        let span = (2 * MAX_VALUE + 1) as u64;
        ((self.next_u64() % span) as i32 - MAX_VALUE) as i8
    }
}

/// A column-major integer matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct IntMatrix {
    pub rows: usize,
    pub cols: usize,
    /// Column-major: element (i, j) at `i + j * rows`.
    pub values: Vec<i8>,
}

impl IntMatrix {
    /// The seeded input: the same on every node for the same (seed, rows, cols).
    pub fn seeded(seed: u64, rows: usize, cols: usize) -> IntMatrix {
        let mut g = SplitMix(seed);
        IntMatrix {
            rows,
            cols,
            values: (0..rows * cols).map(|_| g.small()).collect(),
        }
    }

    pub fn at(&self, i: usize, j: usize) -> i64 {
        i64::from(self.values[i + j * self.rows])
    }
}

/// What the exact check found in a product of `a` (m×k) and `b` (k×n).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Verdict {
    pub wrong_rows: Vec<u32>,
    pub wrong_cols: Vec<u32>,
    /// Wrong elements among the crossings compared (exact when `exact`).
    pub wrong_elements: u64,
    /// Every crossing of a wrong row and a wrong column was compared.
    pub exact: bool,
    /// The first wrong element found: (row, column, got, exact).
    pub first_wrong: Option<(u32, u32, f64, f64)>,
}

/// The value a result element stands for, when it is an integer the check can add exactly.
fn as_int(v: f32) -> Option<i64> {
    (v.is_finite() && v.fract() == 0.0 && v.abs() < 1.0e15).then_some(v as i64)
}

/// Checks the column-major m×n product `c` of `a` and `b` against the exact product.
pub fn verify(a: &IntMatrix, b: &IntMatrix, c: &[f32], seed: u64) -> Verdict {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || c.len() != m * n {
        return Verdict {
            wrong_rows: (0..m as u32).collect(),
            wrong_cols: (0..n as u32).collect(),
            wrong_elements: (m * n) as u64,
            exact: false,
            first_wrong: None,
        };
    }
    let mut g = SplitMix(seed ^ 0x5EED_C0DE);
    // Weights below 2^20: |C·x| < 2^24 · n · 2^20 fits i64 for n < 2^19.
    let x: Vec<i64> = (0..n)
        .map(|_| (g.next_u64() % (1 << 20)) as i64 + 1)
        .collect();
    let y: Vec<i64> = (0..m)
        .map(|_| (g.next_u64() % (1 << 20)) as i64 + 1)
        .collect();
    // Rows: C·x against A·(B·x).
    let bx: Vec<i64> = (0..k)
        .map(|p| (0..n).map(|j| b.at(p, j) * x[j]).sum())
        .collect();
    let mut want_rows = vec![0i64; m];
    for (p, bxp) in bx.iter().enumerate() {
        for (i, w) in want_rows.iter_mut().enumerate() {
            *w += a.at(i, p) * bxp;
        }
    }
    let mut got_rows = vec![0i64; m];
    let mut bad_row = vec![false; m];
    let mut bad_col = vec![false; n];
    for j in 0..n {
        for i in 0..m {
            match as_int(c[i + j * m]) {
                Some(v) => got_rows[i] += v * x[j],
                None => {
                    bad_row[i] = true;
                    bad_col[j] = true;
                }
            }
        }
    }
    // Columns: yᵀ·C against (yᵀ·A)·B.
    let ya: Vec<i64> = (0..k)
        .map(|p| (0..m).map(|i| y[i] * a.at(i, p)).sum())
        .collect();
    for j in 0..n {
        let want: i64 = (0..k).map(|p| ya[p] * b.at(p, j)).sum();
        let got: i64 = (0..m)
            .filter_map(|i| as_int(c[i + j * m]).map(|v| v * y[i]))
            .sum();
        if got != want {
            bad_col[j] = true;
        }
    }
    for i in 0..m {
        if got_rows[i] != want_rows[i] {
            bad_row[i] = true;
        }
    }
    let wrong_rows: Vec<u32> = (0..m).filter(|&i| bad_row[i]).map(|i| i as u32).collect();
    let wrong_cols: Vec<u32> = (0..n).filter(|&j| bad_col[j]).map(|j| j as u32).collect();
    let crossings = wrong_rows.len().saturating_mul(wrong_cols.len());
    let exact = crossings <= MAX_CROSSINGS;
    let mut wrong_elements = 0u64;
    let mut first_wrong = None;
    let mut visited = 0usize;
    'rows: for &i in &wrong_rows {
        for &j in &wrong_cols {
            if visited >= MAX_CROSSINGS {
                break 'rows;
            }
            visited += 1;
            let (i, j) = (i as usize, j as usize);
            let want: i64 = (0..k).map(|p| a.at(i, p) * b.at(p, j)).sum();
            let got = c[i + j * m];
            if as_int(got) != Some(want) {
                wrong_elements += 1;
                first_wrong.get_or_insert((i as u32, j as u32, f64::from(got), want as f64));
            }
        }
    }
    if !exact {
        // At least one wrong element per wrong row and per wrong column.
        wrong_elements = wrong_elements.max(wrong_rows.len().max(wrong_cols.len()) as u64);
    }
    Verdict {
        wrong_rows,
        wrong_cols,
        wrong_elements,
        exact,
        first_wrong,
    }
}

/// A 64-bit checksum of the result's bits (FNV-1a over 32-bit words), hex.
pub fn checksum(c: &[f32]) -> String {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for v in c {
        h ^= u64::from(v.to_bits());
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(a: &IntMatrix, b: &IntMatrix) -> Vec<f32> {
        let (m, k, n) = (a.rows, a.cols, b.cols);
        let mut c = vec![0f32; m * n];
        for j in 0..n {
            for i in 0..m {
                let s: i64 = (0..k).map(|p| a.at(i, p) * b.at(p, j)).sum();
                c[i + j * m] = s as f32;
            }
        }
        c
    }

    fn inputs(m: usize, k: usize, n: usize) -> (IntMatrix, IntMatrix) {
        (IntMatrix::seeded(1, m, k), IntMatrix::seeded(2, k, n))
    }

    #[test]
    fn inputs_are_seeded_small_and_the_same_every_time() {
        let a = IntMatrix::seeded(7, 33, 17);
        assert_eq!(a, IntMatrix::seeded(7, 33, 17));
        assert_ne!(a, IntMatrix::seeded(8, 33, 17));
        assert!(a.values.iter().all(|v| i32::from(*v).abs() <= MAX_VALUE));
        // Every value of the range is drawn.
        let distinct: std::collections::BTreeSet<i8> = a.values.iter().copied().collect();
        assert_eq!(distinct.len(), (2 * MAX_VALUE + 1) as usize);
    }

    #[test]
    fn the_exact_sums_fit_the_fp32_significand() {
        let worst = MAX_K as i64 * i64::from(MAX_VALUE) * i64::from(MAX_VALUE);
        assert!(worst < 1 << 24, "{worst}");
    }

    #[test]
    fn a_correct_product_passes() {
        let (a, b) = inputs(40, 64, 24);
        let c = product(&a, &b);
        let v = verify(&a, &b, &c, 3);
        assert_eq!(v.wrong_elements, 0);
        assert!(v.wrong_rows.is_empty() && v.wrong_cols.is_empty() && v.exact);
    }

    #[test]
    fn one_flipped_bit_is_found_at_its_place() {
        let (a, b) = inputs(40, 64, 24);
        let mut c = product(&a, &b);
        let at = 7 + 11 * 40;
        c[at] = f32::from_bits(c[at].to_bits() ^ 1 << 20);
        let v = verify(&a, &b, &c, 3);
        assert_eq!(v.wrong_rows, vec![7]);
        assert_eq!(v.wrong_cols, vec![11]);
        assert_eq!(v.wrong_elements, 1);
        let (r, col, got, want) = v.first_wrong.unwrap();
        assert_eq!((r, col), (7, 11));
        assert_ne!(got, want);
        assert_ne!(checksum(&c), checksum(&product(&a, &b)));
    }

    #[test]
    fn a_nan_and_a_fraction_are_wrong_and_several_are_counted() {
        let (a, b) = inputs(32, 16, 32);
        let mut c = product(&a, &b);
        c[0] = f32::NAN;
        c[5 + 3 * 32] += 0.5;
        c[9 + 30 * 32] += 4.0;
        let v = verify(&a, &b, &c, 9);
        assert_eq!(v.wrong_elements, 3);
        assert!(v.exact);
        assert_eq!(v.wrong_rows, vec![0, 5, 9]);
    }

    #[test]
    fn a_wholly_wrong_result_is_a_bounded_lower_count() {
        let (a, b) = inputs(300, 8, 300);
        let c = vec![1.5f32; 300 * 300];
        let started = std::time::Instant::now();
        let v = verify(&a, &b, &c, 1);
        assert!(!v.exact);
        assert!(v.wrong_elements >= 300);
        assert_eq!(v.wrong_rows.len(), 300);
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn a_result_of_the_wrong_size_is_all_wrong() {
        let (a, b) = inputs(4, 4, 4);
        let v = verify(&a, &b, &[0.0; 3], 1);
        assert_eq!(v.wrong_elements, 16);
    }
}
