//! The NCCL all-reduce over every GPU of one node (`check --thorough`), as a single-node health
//! check runs it: one worker child drives them in one group.

use preflight_checks::model::NodeFacts;

/// Sizes of the one-node all-reduce: nccl-tests' 1M to 256M, doubling.
const INTRA_NODE_SIZES: (u64, u64) = (1 << 20, 256 << 20);
/// Longest the one-node all-reduce may take, CUDA and NCCL start-up included.
const INTRA_NODE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The NCCL all-reduce over every GPU this node sees (`check --thorough`): one worker child
/// drives them in one group, as a single-node health check does. Err is why it does not apply
/// (no GPU, no libnccl); a run that fails is a result with its `error`.
pub fn intra_node(facts: &NodeFacts) -> Result<preflight_checks::model::CollectiveResult, String> {
    use crate::measure::nccl;
    // The readiness the cluster's NCCL run uses: GPUs visible, libnccl loadable.
    let lib = nccl::available(facts)?;
    let gpus = preflight_checks::visible_devices::visible_gpu_count(facts);
    let (lo, hi) = INTRA_NODE_SIZES;
    let sizes: Vec<u64> = std::iter::successors(Some(lo), |s| Some(s * 2))
        .take_while(|s| *s <= hi)
        .collect();
    let job = nccl::NcclJob {
        nranks: gpus,
        first_rank: 0,
        gpus,
        sizes,
        warmup: 5,
        iters: 20,
        env: Default::default(),
        timeout: INTRA_NODE_TIMEOUT,
        lib: Some(lib),
        program: None,
    };
    let mut result = preflight_checks::model::CollectiveResult {
        op: "allreduce".into(),
        transport: "nccl".into(),
        ranks: gpus,
        order: vec![0],
        streams: Some(gpus),
        config: "advice".into(),
        ..Default::default()
    };
    let ran = nccl::start(&job).and_then(|mut w| {
        let id = w.unique_id(INTRA_NODE_TIMEOUT)?;
        w.give_id(&id)?;
        w.finish()
    });
    match ran {
        Ok(out) => {
            result.net = out.net;
            result.rows = out
                .rows
                .iter()
                .map(|r| super::rows::row(r.bytes, r.time_us, gpus, r.wrong))
                .collect();
        }
        Err(e) => {
            result.error = Some(e.to_string());
            result.failed_ranks = vec![0];
        }
    }
    Ok(result)
}
