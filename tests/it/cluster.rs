//! Multi-node scenarios: real `preflight cluster` processes in network namespaces.
