//! RDMA probes: InfiniBand/RoCE devices and ports, GID tables, and the PCIe paths of HCAs and GPUs.

pub mod gid;
pub mod ib;
pub mod paths;
