//! Where this node stands in the job: nnodes, rank, master address and port, job id, from flags, --hosts, Slurm or torchrun/Kubernetes env.
