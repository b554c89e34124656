//! The job as the scale checks see it (world size, nodes, processes on this node, whether NCCL
//! runs over sockets) and the estimates they judge against, each with its formula in words.

use crate::core::CheckContext;
use crate::core::NodeFacts;

/// fds a Python/torch worker holds before it talks to anyone (stdio, libraries, pipes).
pub const BASE_FDS: u64 = 64;
/// fds the CUDA driver and NCCL's own machinery hold per GPU process (/dev/nvidia*, shm, pipes).
pub const GPU_FDS: u64 = 128;
/// Threads one worker process starts besides NCCL's socket helpers (Python, CUDA, NCCL's
/// proxy and service threads, gloo, the watchdog); torchrun sets OMP_NUM_THREADS=1.
pub const THREADS_PER_PROC: u64 = 64;
/// Channels NCCL opens per peer when nothing says otherwise (the estimate's default).
pub const DEFAULT_CHANNELS: u64 = 2;

#[derive(Clone, Debug)]
pub struct Job {
    /// Ranks in the whole job (nodes × processes per node), when known.
    pub world: Option<u64>,
    /// Nodes in the job, when known.
    pub nnodes: Option<u64>,
    /// Processes this node starts.
    pub local: u64,
    /// This node hosts the master (rank 0): the TCPStore server.
    pub master: bool,
    /// The job uses GPUs (NCCL) here.
    pub gpus: bool,
    /// NCCL will run over TCP sockets (no usable InfiniBand/RoCE, or told so).
    pub nccl_sockets: bool,
    /// NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD (1 × 1 unset).
    pub socks_per_conn: u64,
    pub nthreads: u64,
    pub channels: u64,
}

fn env_num(facts: &NodeFacts, name: &str) -> Option<u64> {
    facts.env.get(name)?.trim().parse().ok()
}

impl Job {
    pub fn of(facts: &NodeFacts, ctx: &CheckContext) -> Job {
        let visible = crate::gpu::visible_devices::visible_gpu_count(facts) as u64;
        let world = ctx.world_size.map(u64::from);
        let per_node_of_world = match (world, ctx.nnodes) {
            (Some(w), Some(n)) if n > 0 => Some(w / u64::from(n)),
            _ => None,
        };
        let local = ctx
            .nproc_per_node
            .map(u64::from)
            .or(per_node_of_world)
            .unwrap_or(visible)
            .max(1);
        let nnodes = ctx
            .nnodes
            .map(u64::from)
            .or_else(|| world.map(|w| w.div_ceil(local)));
        // `--expect-gpus 0` marks a CPU-only job; otherwise GPUs asked for or seen.
        let gpus = match ctx.expect_gpus {
            Some(n) => n > 0,
            None => visible > 0,
        };
        let env = |k: &str| facts.env.get(k).map(|v| v.trim().to_ascii_lowercase());
        let ib_off = env("NCCL_IB_DISABLE").as_deref() == Some("1");
        let net_socket = env("NCCL_NET").is_some_and(|v| v == "socket");
        let ib_active = !facts.ib.active_ports().is_empty();
        let nthreads = env_num(facts, "NCCL_SOCKET_NTHREADS")
            .unwrap_or(1)
            .clamp(1, 16);
        let nsocks = env_num(facts, "NCCL_NSOCKS_PERTHREAD")
            .unwrap_or(1)
            .clamp(1, 64);
        let channels = env_num(facts, "NCCL_MIN_NCHANNELS")
            .unwrap_or(DEFAULT_CHANNELS)
            .clamp(1, 64);
        Job {
            world,
            nnodes,
            local,
            master: ctx.rank.unwrap_or(0) == 0,
            gpus,
            nccl_sockets: gpus && (ib_off || net_socket || !ib_active),
            socks_per_conn: (nthreads * nsocks).min(64),
            nthreads,
            channels,
        }
    }

    /// File descriptors one worker needs, and the formula with the numbers put in.
    pub fn nofile_need(&self, world: u64) -> (u64, String) {
        let peers = world.saturating_sub(1);
        let mut need = BASE_FDS + world;
        let mut formula = format!("{BASE_FDS} base + {world} gloo full mesh (one per rank)");
        if self.gpus {
            let per_peer = if self.nccl_sockets {
                self.socks_per_conn + 1
            } else {
                1
            };
            need += GPU_FDS + peers * per_peer;
            formula.push_str(&format!(
                " + {GPU_FDS} CUDA/NCCL + {peers} peers × {per_peer} NCCL sockets{}",
                if self.nccl_sockets {
                    " (NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD data + 1 control, all-to-all)"
                } else {
                    " (bootstrap/proxy, all-to-all)"
                }
            ));
        }
        if self.master {
            need += world + 32;
            formula.push_str(&format!(
                " + {world} TCPStore clients + 32 margin (this node hosts the master)"
            ));
        }
        (need, format!("{formula} = {need}"))
    }

    /// Ephemeral ports this node's NCCL socket transport takes for an all-to-all:
    /// (N−1)·G²·channels·2, one port per socket since NCCL binds before it connects.
    pub fn ports_need(&self, nnodes: u64) -> (u64, String) {
        let g = self.local;
        let need = nnodes
            .saturating_sub(1)
            .saturating_mul(g * g)
            .saturating_mul(self.channels * 2);
        (
            need,
            format!(
                "(N−1)·G²·channels·2 = ({nnodes}−1)·{g}²·{}·2 = {need} (N nodes, G processes per node, channels from NCCL_MIN_NCHANNELS else {DEFAULT_CHANNELS}, send and receive)",
                self.channels
            ),
        )
    }

    /// Threads this node's workers start.
    pub fn threads_need(&self) -> (u64, String) {
        let socket_threads = if self.nccl_sockets {
            self.nthreads * self.channels * 2
        } else {
            0
        };
        let per = THREADS_PER_PROC + socket_threads;
        let need = self.local * per;
        let formula = if socket_threads > 0 {
            format!(
                "{} processes × ({THREADS_PER_PROC} + NCCL_SOCKET_NTHREADS {} × {} channels × 2 ring neighbours) = {need}",
                self.local, self.nthreads, self.channels
            )
        } else {
            format!(
                "{} processes × {THREADS_PER_PROC} threads (Python, CUDA, NCCL proxy, gloo, watchdog) = {need}",
                self.local
            )
        };
        (need, formula)
    }

    /// The words saying what the world size is, for summaries.
    pub fn world_words(&self) -> String {
        match (self.world, self.nnodes) {
            (Some(w), Some(n)) => format!("{w} ranks ({n} nodes × {} per node)", self.local),
            (Some(w), None) => format!("{w} ranks"),
            _ => "no world size known".into(),
        }
    }
}

/// The summary and hint when no world size is known.
pub const NO_WORLD: &str = "no world size known (give --nnodes N and --nproc-per-node G, or run under the launcher: WORLD_SIZE, SLURM_NNODES, torchrun's variables)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::scale::testkit::{ctx, defaults};

    #[test]
    fn world_and_sockets_from_the_context_and_the_environment() {
        let mut f = defaults();
        let j = Job::of(&f, &ctx(1, 64, 8));
        assert_eq!(
            (j.world, j.nnodes, j.local, j.master),
            (Some(512), Some(64), 8, false)
        );
        assert!(j.gpus && j.nccl_sockets, "8 GPUs expected, no InfiniBand");
        f.env.insert("NCCL_SOCKET_NTHREADS".into(), "4".into());
        f.env.insert("NCCL_NSOCKS_PERTHREAD".into(), "4".into());
        assert_eq!(Job::of(&f, &ctx(0, 2, 8)).socks_per_conn, 16);
        let none = Job::of(&f, &CheckContext::default());
        assert_eq!((none.world, none.nnodes, none.gpus), (None, None, false));
    }

    #[test]
    fn a_30_rank_gloo_worker_needs_more_than_24_fds_and_gpus_need_more() {
        let f = defaults();
        let gloo = Job::of(
            &f,
            &CheckContext {
                expect_gpus: Some(0),
                ..ctx(1, 3, 10)
            },
        );
        let (need, formula) = gloo.nofile_need(30);
        assert!(need > 24 && need < 1024, "{formula}");
        let gpu = Job::of(&f, &ctx(1, 3, 10));
        assert!(gpu.nofile_need(30).0 > need);
        assert!(
            gpu.nofile_need(30).0 < 1024,
            "a world of 30 fits the default 1024"
        );
        assert!(gpu.nofile_need(1024).0 > 1024, "1,024 GPU ranks do not");
    }

    #[test]
    fn port_estimate_follows_the_all_to_all_formula() {
        let j = Job::of(&defaults(), &ctx(1, 64, 8));
        let (need, formula) = j.ports_need(64);
        assert_eq!(need, 63 * 64 * 2 * 2);
        assert!(formula.contains("(64−1)·8²·2·2"), "{formula}");
    }
}
