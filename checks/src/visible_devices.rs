//! CUDA_VISIBLE_DEVICES: parse every form CUDA accepts and resolve it against the GPUs found.

use crate::model::Gpu;

/// Placeholder until the parser lands.
pub struct Visible<'a> {
    pub visible: Vec<&'a Gpu>,
}

pub fn resolve<'a>(_value: Option<&str>, gpus: &'a [Gpu]) -> Visible<'a> {
    Visible {
        visible: gpus.iter().collect(),
    }
}
