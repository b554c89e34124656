//! NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME syntax: parse and match against interface names.
