//! Checks for the nccl concern (pure functions of facts): which libnccl the job loads.

pub mod catalog;
pub mod ids;
pub mod probe;

use crate::core::CheckContext;
use crate::core::{Finding, Fix, NcclCandidate, NcclFacts, NodeFacts, Status};

use crate::nccl::ids::LIBRARY as ID;

/// The command that prints the NCCL PyTorch really uses.
const TORCH_NCCL: &str =
    "python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'";

pub fn check(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    if facts.nccl.library.is_none() && no_gpu_needed(facts, ctx) {
        return vec![not_needed(&facts.nccl)];
    }
    vec![check_library(&facts.nccl)]
}

/// No GPU on this node (none found, NVML absent or skipped with `--no-gpu`) and none
/// expected (`--expect-gpus 0`, or neither it nor `--nproc-per-node` given): NCCL is not used.
fn no_gpu_needed(facts: &NodeFacts, ctx: &CheckContext) -> bool {
    facts.gpu.gpus.is_empty() && matches!(ctx.gpus_expected(), None | Some(0))
}

/// `nccl.library` on a CPU-only node: a skip that says why, not a warning about a missing library.
fn not_needed(n: &NcclFacts) -> Finding {
    Finding::new(
        ID,
        Status::Skip,
        "libnccl",
        "no GPU on this node and none expected, so NCCL is not needed here (CPU jobs use gloo)",
    )
    .with("torch_version", &n.torch_version)
}

/// `nccl.library`: the libnccl a PyTorch job here loads, and whether that is clear-cut.
pub fn check_library(n: &NcclFacts) -> Finding {
    let Some(lib) = &n.library else {
        return not_found(n);
    };
    let version = n.version.as_deref().unwrap_or("unknown");
    let source = n.source.as_deref().unwrap_or("unknown");
    let base = |status, summary: String| {
        Finding::new(ID, status, lib.clone(), summary)
            .with("library", lib)
            .with("version", &n.version)
            .with("version_source", &n.version_source)
            .with("source", &n.source)
            .with("torch_version", &n.torch_version)
    };
    if let Some(err) = &n.error {
        return base(
            Status::Warn,
            format!(
                "found {lib} ({source}) but could not load it: {err}; the job may fail to \
                 load it too"
            ),
        )
        .with("error", err)
        .fix(
            Fix::new("See which of its dependencies are missing, then check what PyTorch loads")
                .command(format!("ldd {lib}"))
                .command(TORCH_NCCL),
        );
    }
    let versions = distinct_versions(&n.found);
    if versions.len() > 1 {
        return base(
            Status::Warn,
            format!(
                "{} different NCCL versions on this node ({}); the job loads {lib} (NCCL \
                 {version}) because {}",
                versions.len(),
                versions.join(", "),
                why_it_wins(n, source)
            ),
        )
        .with("found", found_evidence(&n.found))
        .fix(
            Fix::new(
                "Make sure every node loads the same NCCL: check what PyTorch reports, let NCCL \
                 print its version at start-up, and remove stale copies from LD_LIBRARY_PATH",
            )
            .command(TORCH_NCCL)
            .command("export NCCL_DEBUG=VERSION"),
        );
    }
    base(
        Status::Pass,
        format!("NCCL {version} from {lib} ({source})"),
    )
    .with("found", found_evidence(&n.found))
}

fn not_found(n: &NcclFacts) -> Finding {
    Finding::new(
        ID,
        Status::Warn,
        "libnccl",
        "no libnccl.so.2 found in the Python environments, LD_LIBRARY_PATH or the linker path; \
         PyTorch may still have NCCL linked in statically (conda builds, older wheels), \
         otherwise distributed jobs cannot use NCCL",
    )
    .with("torch_version", &n.torch_version)
    .with("error", &n.error)
    .fix(
        Fix::new(
            "Check what PyTorch reports; if it has no NCCL, install the NCCL wheel matching its \
             CUDA version in the job's Python environment",
        )
        .command(TORCH_NCCL)
        .command("pip install nvidia-nccl-cu12"),
    )
}

fn distinct_versions(found: &[NcclCandidate]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in found.iter().filter_map(|c| c.version.clone()) {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Why the first library found is the one the job loads.
fn why_it_wins(n: &NcclFacts, source: &str) -> String {
    let first_is_python = source.starts_with("python:");
    let ld_path_other = n
        .found
        .iter()
        .skip(1)
        .find(|c| c.source == "LD_LIBRARY_PATH" && c.version != n.version);
    match (first_is_python, ld_path_other) {
        (true, Some(other)) => format!(
            "PyTorch loads the NCCL wheel of its own environment ({source}); but {} (NCCL {}) \
             in LD_LIBRARY_PATH can take precedence over torch's RUNPATH",
            other.path,
            other.version.as_deref().unwrap_or("unknown")
        ),
        (true, None) => format!(
            "PyTorch loads the NCCL wheel of its own environment ({source}), which comes first"
        ),
        (false, _) if source == "LD_LIBRARY_PATH" => {
            "LD_LIBRARY_PATH is searched before the system linker path".into()
        }
        _ => format!("it is the first the dynamic linker finds ({source})"),
    }
}

fn found_evidence(found: &[NcclCandidate]) -> Vec<serde_json::Value> {
    found
        .iter()
        .map(|c| {
            serde_json::json!({
                "path": c.path,
                "source": c.source,
                "version": c.version,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(path: &str, source: &str, version: &str) -> NcclCandidate {
        NcclCandidate {
            path: path.into(),
            source: source.into(),
            version: Some(version.into()),
            version_source: Some("ncclGetVersion".into()),
            ..Default::default()
        }
    }

    fn facts(found: Vec<NcclCandidate>) -> NcclFacts {
        let first = found.first().cloned().unwrap_or_default();
        NcclFacts {
            library: Some(first.path),
            version: first.version,
            source: Some(first.source),
            version_source: first.version_source,
            torch_version: Some("2.5.1+cu124".into()),
            candidates: found.iter().map(|c| c.path.clone()).collect(),
            found,
            ..Default::default()
        }
    }

    const VENV: &str = "/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2";

    #[test]
    fn passes_naming_path_version_and_source() {
        let f = check_library(&facts(vec![cand(
            VENV,
            "python:/venv (VIRTUAL_ENV)",
            "2.21.5",
        )]));
        assert_eq!(f.status, Status::Pass);
        assert!(f.summary.contains("NCCL 2.21.5"));
        assert!(f.summary.contains(VENV));
        assert_eq!(f.evidence["source"], "python:/venv (VIRTUAL_ENV)");
        assert!(f.fix.is_none());
        // The same version found twice is fine.
        let twice = facts(vec![
            cand(VENV, "python:/venv (VIRTUAL_ENV)", "2.21.5"),
            cand("/ldpath/libnccl.so.2", "LD_LIBRARY_PATH", "2.21.5"),
        ]);
        assert_eq!(check_library(&twice).status, Status::Pass);
    }

    #[test]
    fn warns_when_nothing_found_mentioning_static_linking() {
        let f = check_library(&NcclFacts::default());
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("statically"));
        let cmds = f.fix.map(|x| x.commands).unwrap_or_default();
        assert!(cmds[0].contains("torch.cuda.nccl.version()"));
    }

    #[test]
    fn warns_on_different_versions_and_explains_the_winner() {
        let n = facts(vec![
            cand(VENV, "python:/venv (VIRTUAL_ENV)", "2.21.5"),
            cand("/opt/nccl/lib/libnccl.so.2", "LD_LIBRARY_PATH", "2.18.1"),
            cand(
                "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                "ld.so.cache",
                "2.23.4",
            ),
        ]);
        let f = check_library(&n);
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.summary.contains("3 different NCCL versions"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("2.21.5, 2.18.1, 2.23.4"));
        assert!(
            f.summary
                .contains("/opt/nccl/lib/libnccl.so.2 (NCCL 2.18.1) in LD_LIBRARY_PATH")
        );
        assert_eq!(f.evidence["found"][2]["version"], "2.23.4");
        let system = facts(vec![
            cand(
                "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                "ld.so.cache",
                "2.23.4",
            ),
            cand("/usr/local/cuda/lib64/libnccl.so.2", "system", "2.17.1"),
        ]);
        let s = check_library(&system);
        assert_eq!(s.status, Status::Warn);
        assert!(
            s.summary.contains("first the dynamic linker finds"),
            "{}",
            s.summary
        );
    }

    fn no_gpu_node(library: Option<&str>) -> NodeFacts {
        let mut f = NodeFacts::default();
        f.gpu.nvml_error = Some("GPU probe skipped (--no-gpu)".into());
        f.nccl.library = library.map(String::from);
        f
    }

    #[test]
    fn skips_when_no_gpu_is_there_or_expected() {
        let ctx = |expect_gpus, nproc_per_node| CheckContext {
            expect_gpus,
            nproc_per_node,
            ..Default::default()
        };
        for c in [ctx(None, None), ctx(Some(0), None)] {
            let f = &check(&no_gpu_node(None), &c)[0];
            assert_eq!(f.status, Status::Skip, "{c:?}");
            assert!(f.summary.contains("NCCL is not needed"), "{}", f.summary);
            assert!(f.fix.is_none());
        }
        // GPUs expected: the missing library still warns.
        for c in [ctx(Some(8), None), ctx(None, Some(4))] {
            assert_eq!(
                check(&no_gpu_node(None), &c)[0].status,
                Status::Warn,
                "{c:?}"
            );
        }
        // A library that is there is still judged.
        let f = &check(&no_gpu_node(Some(VENV)), &ctx(None, None))[0];
        assert_eq!(f.status, Status::Pass);
    }

    #[test]
    fn warns_when_dlopen_failed() {
        let mut n = facts(vec![cand(VENV, "python:/venv (VIRTUAL_ENV)", "2.21.5")]);
        n.error = Some("ncclGetVersion failed (libcudart.so.12: cannot open); version taken from the dist-info".into());
        let f = check_library(&n);
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("could not load"));
        let cmds = f.fix.map(|x| x.commands).unwrap_or_default();
        assert_eq!(cmds[0], format!("ldd {VENV}"));
    }

    #[test]
    fn fixture_probe_feeds_the_check() {
        let root = crate::infra::root::Root::at(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/nccl-envs"
        ));
        let n = crate::nccl::probe::probe(&root, &Default::default());
        let f = check_library(&n);
        // ld.so.cache (2.23.4) and /usr/local/cuda/lib64 (2.17.1) differ.
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["source"], "ld.so.cache");
    }
}
