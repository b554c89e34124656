//! Cluster-wide checks over every node's facts and the pairwise link results (pure functions).
