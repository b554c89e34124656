//! Test hosts as network namespaces joined by bridges (root only; see DESIGN.md safety rules).
