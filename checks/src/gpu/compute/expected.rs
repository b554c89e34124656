//! Published dense tensor-core throughput per GPU model and data type, TFLOP/s (without 2:4
//! structured sparsity: NVIDIA's datasheets print "with sparsity" figures twice these).
//!
//! Sources, each NVIDIA's own datasheet or specification page for the part:
//! - H100 SXM5, H100 PCIe, H100 NVL: "NVIDIA H100 Tensor Core GPU" datasheet.
//! - H200 SXM, H200 NVL: "NVIDIA H200 Tensor Core GPU" datasheet (the SXM compute equals the
//!   H100 SXM's; the NVL's equals the H100 NVL's).
//! - B200: "NVIDIA HGX B200" specifications, per GPU at 1,000 W (TF32 2.2, BF16 4.5, FP8 9
//!   PFLOP/s with sparsity).
//! - FP8 (E4M3, FP32 accumulation): the same datasheets; parts without FP8 tensor cores have none.
//! - A100 (SXM4 and PCIe, 40 and 80 GB): "NVIDIA A100 Tensor Core GPU" datasheet.
//! - L40S, L4, A10: their product datasheets. V100 and T4: their datasheets (no BF16/TF32).
//!
//! A model missing here is judged against its peers only.

/// (substring of NVML's name, lower case; bf16, fp16, tf32, fp32, fp8) in TFLOP/s. More specific
/// names come first: the first match wins.
const TABLE: &[(&str, [Option<f64>; 5])] = &[
    (
        "h100 nvl",
        [Some(835.5), Some(835.5), Some(417.5), None, Some(1670.5)],
    ),
    (
        "h100 pcie",
        [Some(756.0), Some(756.0), Some(378.0), None, Some(1513.0)],
    ),
    (
        "h100",
        [Some(989.4), Some(989.4), Some(494.7), None, Some(1978.9)],
    ),
    (
        "h200 nvl",
        [Some(835.5), Some(835.5), Some(417.5), None, Some(1670.5)],
    ),
    (
        "h200",
        [Some(989.4), Some(989.4), Some(494.7), None, Some(1978.9)],
    ),
    (
        "h800",
        [Some(989.4), Some(989.4), Some(494.7), None, Some(1978.9)],
    ),
    (
        "b200",
        [Some(2250.0), Some(2250.0), Some(1100.0), None, Some(4500.0)],
    ),
    ("a100", [Some(312.0), Some(312.0), Some(156.0), None, None]),
    ("a800", [Some(312.0), Some(312.0), Some(156.0), None, None]),
    (
        "l40s",
        [Some(362.05), Some(362.05), Some(183.0), None, Some(733.0)],
    ),
    (
        "l4",
        [Some(121.0), Some(121.0), Some(60.0), None, Some(242.5)],
    ),
    ("a10", [Some(125.0), Some(125.0), Some(62.5), None, None]),
    ("v100-sxm2", [None, Some(125.0), None, Some(15.7), None]),
    ("v100", [None, Some(112.0), None, Some(14.0), None]),
    ("t4", [None, Some(65.0), None, Some(8.1), None]),
];

/// The published dense rate of `model` (NVML's name) for `dtype`, when known.
pub fn dense_tflops(model: &str, dtype: &str) -> Option<f64> {
    let column = match dtype {
        "bf16" => 0,
        "fp16" => 1,
        "tf32" => 2,
        "fp32" => 3,
        "fp8" => 4,
        _ => return None,
    };
    let name = model.to_ascii_lowercase();
    TABLE
        .iter()
        .find(|(key, _)| words_contain(&name, key))
        .and_then(|(_, rates)| rates[column])
}

/// `key` appears in `name` as whole words ("l4" is not "l40s", "a10" is not "a100").
fn words_contain(name: &str, key: &str) -> bool {
    name.match_indices(key).any(|(at, _)| {
        let before = name[..at].chars().next_back();
        let after = name[at + key.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_names_find_their_rows() {
        assert_eq!(dense_tflops("NVIDIA H100 80GB HBM3", "bf16"), Some(989.4));
        assert_eq!(dense_tflops("NVIDIA H100 PCIe", "bf16"), Some(756.0));
        assert_eq!(dense_tflops("NVIDIA H100 NVL", "tf32"), Some(417.5));
        assert_eq!(dense_tflops("NVIDIA H200", "bf16"), Some(989.4));
        assert_eq!(dense_tflops("NVIDIA H200 NVL", "bf16"), Some(835.5));
        assert_eq!(dense_tflops("NVIDIA B200", "bf16"), Some(2250.0));
        assert_eq!(dense_tflops("NVIDIA A100-SXM4-80GB", "tf32"), Some(156.0));
        assert_eq!(dense_tflops("NVIDIA A100 80GB PCIe", "fp16"), Some(312.0));
        assert_eq!(dense_tflops("NVIDIA L40S", "fp16"), Some(362.05));
        assert_eq!(dense_tflops("NVIDIA L4", "fp16"), Some(121.0));
        assert_eq!(dense_tflops("NVIDIA A10", "bf16"), Some(125.0));
        assert_eq!(dense_tflops("Tesla V100-SXM2-32GB", "fp16"), Some(125.0));
        assert_eq!(dense_tflops("Tesla T4", "fp32"), Some(8.1));
        assert_eq!(dense_tflops("Tesla T4", "bf16"), None);
        assert_eq!(dense_tflops("fake GPU 0", "bf16"), None);
        assert_eq!(dense_tflops("NVIDIA H100 80GB HBM3", "int8"), None);
        assert_eq!(dense_tflops("NVIDIA H200", "fp8"), Some(1978.9));
        assert_eq!(dense_tflops("NVIDIA L4", "fp8"), Some(242.5));
        assert_eq!(dense_tflops("NVIDIA A100-SXM4-80GB", "fp8"), None);
    }
}
