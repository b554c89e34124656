//! NCCL facts: the libnccl the job would load, its version and the candidates found.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NcclFacts {
    /// The libnccl a PyTorch job here would load.
    pub library: Option<String>,
    /// "2.21.5"
    pub version: Option<String>,
    /// Where it was found: "python:/path/to/venv", "ld.so.cache", "LD_LIBRARY_PATH".
    pub source: Option<String>,
    /// torch version in the same Python environment, when found.
    pub torch_version: Option<String>,
    /// Every libnccl found, in search order.
    pub candidates: Vec<String>,
    pub error: Option<String>,
    /// How `version` was read: "ncclGetVersion", "file name" or "dist-info".
    pub version_source: Option<String>,
    /// Every libnccl found, in search order, with what is known about each.
    pub found: Vec<NcclCandidate>,
}

/// One libnccl found on the search path.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NcclCandidate {
    pub path: String,
    /// Where it was found: "python:/venv", "LD_LIBRARY_PATH", "ld.so.cache", "system".
    pub source: String,
    pub version: Option<String>,
    /// "ncclGetVersion", "file name" or "dist-info".
    pub version_source: Option<String>,
    /// torch version in the same Python environment, when there is one.
    pub torch_version: Option<String>,
    /// Why ncclGetVersion could not be called, when it was tried and failed.
    pub error: Option<String>,
}
