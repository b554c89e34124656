//! The GEMM worker's output: one JSON object per line on stdout, read by the parent.
//!
//! The parent trusts nothing in them beyond their shape: lines are bounded ([`MAX_LINE`]),
//! numbers are checked for being finite, and GPU ordinals must be among those it asked for.

use serde::{Deserialize, Serialize};

/// Longest line the parent reads; longer ones are an error of the worker.
pub const MAX_LINE: usize = 4096;

/// One line of the worker.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// What the worker found about one GPU before multiplying.
    Gpu(GpuInfo),
    /// One data type's measured rate.
    Rate(RateLine),
    /// One checked multiply.
    Check(CheckLine),
    /// One window of the sustained load.
    Burn(BurnLine),
    /// One GPU failed on its own (the others go on).
    GpuError { gpu: u32, error: String },
    /// Everything finished.
    Done(bool),
    /// The worker failed as a whole.
    Error(String),
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GpuInfo {
    /// CUDA ordinal among the visible devices.
    pub gpu: u32,
    pub name: String,
    pub pci_bus_id: Option<String>,
    pub compute_capability: String,
    pub cublas_version: Option<u32>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RateLine {
    pub gpu: u32,
    pub dtype: String,
    pub tflops: f64,
    pub iters: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CheckLine {
    pub gpu: u32,
    pub dtype: String,
    pub checksum: String,
    pub wrong_elements: u64,
    pub wrong_rows: u32,
    pub wrong_cols: u32,
    pub exact: bool,
    pub first_wrong: Option<(u32, u32, f64, f64)>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct BurnLine {
    pub gpu: u32,
    /// Seconds since the burn started, at the end of this window.
    pub t_s: f64,
    pub tflops: f64,
}

impl Line {
    /// The line as the worker prints it.
    pub fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A line from the worker, or why it is not one.
    pub fn parse(text: &str) -> Result<Line, String> {
        if text.len() > MAX_LINE {
            return Err(format!("a line of {} bytes (over {MAX_LINE})", text.len()));
        }
        let line: Line = serde_json::from_str(text).map_err(|e| {
            format!(
                "not a worker line ({e}): {}",
                crate::measure::nccl::protocol::shorten(text)
            )
        })?;
        let finite = match &line {
            Line::Rate(r) => r.tflops.is_finite() && r.tflops >= 0.0,
            Line::Burn(b) => b.tflops.is_finite() && b.t_s.is_finite() && b.tflops >= 0.0,
            _ => true,
        };
        if !finite {
            return Err(format!("a rate that is not a finite number: {text}"));
        }
        Ok(line)
    }

    /// The GPU ordinal the line is about, if any.
    pub fn gpu(&self) -> Option<u32> {
        match self {
            Line::Gpu(g) => Some(g.gpu),
            Line::Rate(r) => Some(r.gpu),
            Line::Check(c) => Some(c.gpu),
            Line::Burn(b) => Some(b.gpu),
            Line::GpuError { gpu, .. } => Some(*gpu),
            Line::Done(_) | Line::Error(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let lines = [
            Line::Gpu(GpuInfo {
                gpu: 0,
                name: "NVIDIA H200".into(),
                pci_bus_id: Some("0000:19:00.0".into()),
                compute_capability: "9.0".into(),
                cublas_version: Some(120_803),
            }),
            Line::Rate(RateLine {
                gpu: 1,
                dtype: "bf16".into(),
                tflops: 712.5,
                iters: 40,
            }),
            Line::GpuError {
                gpu: 2,
                error: "out of memory".into(),
            },
            Line::Done(true),
            Line::Error("no GPU".into()),
        ];
        for l in lines {
            assert_eq!(Line::parse(&l.text()).unwrap(), l);
        }
    }

    #[test]
    fn garbage_and_lies_are_refused() {
        assert!(Line::parse("not json").is_err());
        assert!(Line::parse(r#"{"rate":{"gpu":0,"dtype":"bf16","tflops":-1,"iters":1}}"#).is_err());
        assert!(Line::parse(&"x".repeat(MAX_LINE + 1)).is_err());
        assert!(Line::parse(r#"{"burn":{"gpu":0,"t_s":1,"tflops":1e999}}"#).is_err());
    }
}
