//! CUDA_VISIBLE_DEVICES: parse every form CUDA accepts and resolve it against the GPUs found.
