//! Finds the libnccl a PyTorch job would load and reads its version with ncclGetVersion.
//!
//! No Python is started (it would take seconds): the probe looks where pip and conda put
//! NCCL, in the order a job meets them, then the dynamic linker's places:
//! 1. Python environments: `VIRTUAL_ENV`, `CONDA_PREFIX`, each `PATH` dir holding
//!    `python3`/`python` (its prefix), `~/.local`, `/usr/local/lib/python3*/dist-packages`,
//!    `/usr/lib/python3/dist-packages`; in each, `nvidia/nccl/lib/libnccl.so.2` (the
//!    `nvidia-nccl-cu*` wheel PyTorch depends on) and `torch/`.
//! 2. `LD_LIBRARY_PATH` dirs.
//! 3. `/etc/ld.so.cache` entries for libnccl.so.2, then the usual library dirs.
//!
//! The version comes from calling `ncclGetVersion` in-process (no GPU needed), done only on
//! the real root or when asked; otherwise, or when that fails, from the file name
//! (`libnccl.so.2.21.5`) or the wheel's `nvidia_nccl_cu12-2.21.5.dist-info`.

use crate::core::{NcclCandidate, NcclFacts};
use crate::infra::root::Root;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Library dirs searched after the linker cache.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/local/cuda/lib64",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/lib/aarch64-linux-gnu",
];

/// At most this many libraries are opened to read their versions.
const MAX_DLOPEN: usize = 4;

/// Probes with `ncclGetVersion` when `root` is the real `/`.
pub fn probe(root: &Root, env: &BTreeMap<String, String>) -> NcclFacts {
    probe_with(root, env, root.is_system())
}

/// Probes; `dlopen` says whether to open each library found (paths mapped through `root`).
pub fn probe_with(root: &Root, env: &BTreeMap<String, String>, dlopen: bool) -> NcclFacts {
    let mut search = Search::default();
    for (source, site) in python_sites(root, env) {
        search.python_site(root, &source, &site);
    }
    for dir in env_dirs(env, "LD_LIBRARY_PATH") {
        search.lib_dir(root, "LD_LIBRARY_PATH", &dir);
    }
    for path in ld_cache_paths(root) {
        search.lib_file(root, "ld.so.cache", &path);
    }
    for dir in SYSTEM_DIRS {
        search.lib_dir(root, "system", dir);
    }
    search.finish(root, dlopen)
}

#[derive(Default)]
struct Search {
    found: Vec<NcclCandidate>,
    /// Canonical paths already recorded, to drop the same file seen twice (merged /usr).
    seen: Vec<PathBuf>,
    /// The first torch seen anywhere, for when no libnccl sits beside it.
    first_torch: Option<String>,
}

impl Search {
    fn python_site(&mut self, root: &Root, source: &str, site: &str) {
        let torch = torch_version(root, site);
        if self.first_torch.is_none() {
            self.first_torch.clone_from(&torch);
        }
        let lib = format!("{site}/nvidia/nccl/lib/libnccl.so.2");
        if !root.exists(&lib) {
            return;
        }
        let mut c = self.candidate(root, source, &lib);
        if c.version.is_none() {
            c.version = nccl_wheel_version(root, site);
            c.version_source = c.version.as_ref().map(|_| "dist-info".to_string());
        }
        c.torch_version = torch;
        self.push(root, c);
    }

    fn lib_dir(&mut self, root: &Root, source: &str, dir: &str) {
        let dir = dir.trim_end_matches('/');
        for name in ["libnccl.so.2", "libnccl.so"] {
            let path = format!("{dir}/{name}");
            if root.exists(&path) {
                self.lib_file(root, source, &path);
                return;
            }
        }
    }

    fn lib_file(&mut self, root: &Root, source: &str, path: &str) {
        if root.exists(path) {
            let c = self.candidate(root, source, path);
            self.push(root, c);
        }
    }

    fn candidate(&self, root: &Root, source: &str, path: &str) -> NcclCandidate {
        let version = version_from_file_name(root, path);
        NcclCandidate {
            path: path.to_string(),
            source: source.to_string(),
            version_source: version.as_ref().map(|_| "file name".to_string()),
            version,
            ..Default::default()
        }
    }

    fn push(&mut self, root: &Root, c: NcclCandidate) {
        let real = root.path(&c.path);
        let canonical = std::fs::canonicalize(&real).unwrap_or(real);
        if !self.seen.contains(&canonical) {
            self.seen.push(canonical);
            self.found.push(c);
        }
    }

    fn finish(mut self, root: &Root, dlopen: bool) -> NcclFacts {
        if dlopen {
            for c in self.found.iter_mut().take(MAX_DLOPEN) {
                read_version_into(root, c);
            }
        }
        let mut facts = NcclFacts {
            candidates: self.found.iter().map(|c| c.path.clone()).collect(),
            torch_version: self.first_torch.clone(),
            ..Default::default()
        };
        if let Some(first) = self.found.first() {
            facts.library = Some(first.path.clone());
            facts.source = Some(first.source.clone());
            facts.version.clone_from(&first.version);
            facts.version_source.clone_from(&first.version_source);
            facts.error.clone_from(&first.error);
            if first.torch_version.is_some() {
                facts.torch_version.clone_from(&first.torch_version);
            }
        }
        facts.found = std::mem::take(&mut self.found);
        facts
    }
}

/// Calls ncclGetVersion; on failure keeps the file-name or dist-info version and says so.
fn read_version_into(root: &Root, c: &mut NcclCandidate) {
    match read_version(&root.path(&c.path)) {
        Ok(v) => {
            c.version = Some(v);
            c.version_source = Some("ncclGetVersion".into());
            c.error = None;
        }
        Err(e) => {
            let fallback = match &c.version_source {
                Some(s) => format!("version taken from the {s}"),
                None => "version unknown".to_string(),
            };
            c.error = Some(format!("ncclGetVersion failed ({e}); {fallback}"));
        }
    }
}

/// Opens `path` and calls `ncclGetVersion`. Needs no GPU. The library stays mapped
/// (RTLD_NODELETE): unloading NCCL at exit is not worth the risk.
pub fn read_version(path: &Path) -> Result<String, String> {
    use libloading::os::unix::{Library, RTLD_LAZY, RTLD_LOCAL};
    type GetVersion = unsafe extern "C" fn(*mut libc::c_int) -> libc::c_int;
    // SAFETY: loading a shared library runs its initialisers; libnccl's are benign, and a file
    // that is not a shared library makes dlopen fail without running anything.
    let lib = unsafe { Library::open(Some(path), RTLD_LAZY | RTLD_LOCAL | libc::RTLD_NODELETE) }
        .map_err(|e| e.to_string())?;
    // SAFETY: ncclGetVersion has had this signature since NCCL 2.0.
    let get: libloading::os::unix::Symbol<GetVersion> =
        unsafe { lib.get(b"ncclGetVersion\0") }.map_err(|e| e.to_string())?;
    let mut code: libc::c_int = 0;
    // SAFETY: the pointer is to a live local int.
    let rc = unsafe { get(&mut code) };
    if rc != 0 {
        return Err(format!("ncclGetVersion returned error {rc}"));
    }
    decode_version(code).ok_or_else(|| format!("ncclGetVersion gave an odd code {code}"))
}

/// NCCL_VERSION_CODE to "2.21.5": major*10000+minor*100+patch from 2.9 on, major*1000+minor*100+patch before.
pub fn decode_version(code: i32) -> Option<String> {
    if code <= 0 {
        return None;
    }
    let (major, minor, patch) = if code >= 10000 {
        (code / 10000, (code % 10000) / 100, code % 100)
    } else {
        (code / 1000, (code % 1000) / 100, code % 100)
    };
    Some(format!("{major}.{minor}.{patch}"))
}

/// "2.21.5" from `libnccl.so.2.21.5`, the file itself or its symlink target.
fn version_from_file_name(root: &Root, path: &str) -> Option<String> {
    let own = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let target = root.link_name(path);
    [own, target]
        .into_iter()
        .flatten()
        .find_map(|name| full_version_in_name(&name))
        .or_else(|| sibling_version(root, path))
}

/// A lone `libnccl.so.2.X.Y` beside `path` names its version (the link may have been copied).
fn sibling_version(root: &Root, path: &str) -> Option<String> {
    let dir = Path::new(path).parent()?;
    let versions: Vec<String> = root
        .list(dir)
        .iter()
        .filter_map(|n| full_version_in_name(n))
        .collect();
    match versions.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

fn full_version_in_name(name: &str) -> Option<String> {
    let v = name.strip_prefix("libnccl.so.")?;
    let parts: Vec<&str> = v.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (parts.len() == 3 && numeric).then(|| v.to_string())
}

/// "2.21.5" from `nvidia_nccl_cu12-2.21.5.dist-info` in a site-packages dir.
fn nccl_wheel_version(root: &Root, site: &str) -> Option<String> {
    root.list(site).iter().find_map(|n| {
        let stem = n.strip_suffix(".dist-info")?;
        let (name, version) = stem.rsplit_once('-')?;
        name.starts_with("nvidia_nccl_cu")
            .then(|| version.to_string())
    })
}

/// torch's version from `torch/version.py`, else `torch-*.dist-info`.
fn torch_version(root: &Root, site: &str) -> Option<String> {
    if let Ok(text) = root.read(format!("{site}/torch/version.py")) {
        if let Some(v) = text.lines().find_map(parse_version_assignment) {
            return Some(v);
        }
    }
    let dist = root
        .list(site)
        .into_iter()
        .find(|n| n.starts_with("torch-") && n.ends_with(".dist-info"))?;
    let metadata = root.read(format!("{site}/{dist}/METADATA")).ok();
    metadata
        .as_deref()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("Version:").map(|v| v.trim().to_string()))
        })
        .or_else(|| {
            dist.strip_suffix(".dist-info")
                .and_then(|s| s.strip_prefix("torch-"))
                .map(str::to_string)
        })
}

/// `__version__ = '2.5.1+cu124'` (either quote, optional type annotation).
fn parse_version_assignment(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("__version__")?;
    let value = rest.split_once('=')?.1.trim();
    let quote = value.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = &value[1..];
    let end = inner.find(quote)?;
    Some(inner[..end].to_string())
}

fn env_dirs(env: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    env.get(key)
        .map(|v| {
            v.split(':')
                .filter(|d| d.starts_with('/'))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// (source, site-packages dir) for every Python environment, in the order a job meets them.
fn python_sites(root: &Root, env: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut prefixes: Vec<(String, String)> = Vec::new();
    for key in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = env.get(key).filter(|p| p.starts_with('/')) {
            prefixes.push((
                format!("python:{p} ({key})"),
                p.trim_end_matches('/').into(),
            ));
        }
    }
    for dir in env_dirs(env, "PATH") {
        let dir = dir.trim_end_matches('/');
        let has_python = ["python3", "python"]
            .iter()
            .any(|n| root.exists(format!("{dir}/{n}")));
        if let (true, Some(parent)) = (has_python, Path::new(dir).parent()) {
            let prefix = parent.to_string_lossy().trim_end_matches('/').to_string();
            prefixes.push((format!("python:{dir}/python3 (PATH)"), prefix));
        }
    }
    let mut sites: Vec<(String, String)> = Vec::new();
    for (source, prefix) in prefixes {
        for kind in ["site-packages", "dist-packages"] {
            for site in versioned_dirs(root, &format!("{prefix}/lib"), kind) {
                sites.push((source.clone(), site));
            }
        }
    }
    if let Some(home) = env.get("HOME").filter(|h| h.starts_with('/')) {
        let home = home.trim_end_matches('/');
        for site in versioned_dirs(root, &format!("{home}/.local/lib"), "site-packages") {
            sites.push((format!("python:{home}/.local (user site)"), site));
        }
    }
    for site in versioned_dirs(root, "/usr/local/lib", "dist-packages") {
        sites.push(("python:/usr/local (system)".into(), site));
    }
    sites.push((
        "python:/usr (system)".into(),
        "/usr/lib/python3/dist-packages".into(),
    ));
    dedup_sites(root, sites)
}

/// `<lib>/python3*/<kind>` that exist.
fn versioned_dirs(root: &Root, lib: &str, kind: &str) -> Vec<String> {
    root.list(lib)
        .into_iter()
        .filter(|n| n.starts_with("python3"))
        .map(|n| format!("{lib}/{n}/{kind}"))
        .filter(|d| root.exists(d))
        .collect()
}

fn dedup_sites(root: &Root, sites: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut seen: Vec<PathBuf> = Vec::new();
    sites
        .into_iter()
        .filter(|(_, site)| {
            let real = root.path(site);
            let canonical = std::fs::canonicalize(&real).unwrap_or(real);
            let fresh = !seen.contains(&canonical);
            seen.push(canonical);
            fresh
        })
        .collect()
}

/// Absolute paths ending in `/libnccl.so.2` in the linker cache's string table.
fn ld_cache_paths(root: &Root) -> Vec<String> {
    let Ok(bytes) = root.read_bytes("/etc/ld.so.cache") else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for s in bytes.split(|b| *b == 0) {
        let s = String::from_utf8_lossy(s);
        if s.starts_with('/') && s.ends_with("/libnccl.so.2") && !out.contains(&s.to_string()) {
            out.push(s.into_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::infra::testutil::proptest_config())]

        /// `torch/version.py` lines and library file names: no panic, bounded time.
        #[test]
        fn version_parsers_take_any_text(
            text in crate::infra::testutil::near_lines("__version__ = '2.5.1+cu124'\n__version__: str = \"2.4.0\"\n__version__ = '\nlibnccl.so.2.21.5\nlibnccl.so.2\nlibnccl.so..1.\nnvidia_nccl_cu12-2.21.5.dist-info"),
        ) {
            let start = std::time::Instant::now();
            for line in text.lines() {
                let _ = parse_version_assignment(line);
                if let Some(v) = full_version_in_name(line) {
                    proptest::prop_assert_eq!(v.split('.').count(), 3);
                }
            }
            let took = start.elapsed();
            proptest::prop_assert!(took < crate::infra::testutil::PROP_LIMIT, "took {took:?}");
        }
    }

    const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/nccl-envs");

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn full_env() -> BTreeMap<String, String> {
        env(&[
            ("VIRTUAL_ENV", "/venv"),
            ("CONDA_PREFIX", "/conda"),
            ("PATH", "/opt/py/bin:/usr/local/bin:/usr/bin:/bin"),
            ("HOME", "/home/user"),
            ("LD_LIBRARY_PATH", "/ldpath:/does/not/exist"),
        ])
    }

    #[test]
    fn search_order_follows_a_pytorch_job() {
        let f = probe_with(&Root::at(FIXTURE), &full_env(), false);
        let sources: Vec<&str> = f.found.iter().map(|c| c.source.as_str()).collect();
        assert_eq!(
            sources,
            vec![
                "python:/venv (VIRTUAL_ENV)",
                "python:/conda (CONDA_PREFIX)",
                "python:/opt/py/bin/python3 (PATH)",
                "python:/home/user/.local (user site)",
                "LD_LIBRARY_PATH",
                "ld.so.cache",
                "system",
            ],
            "{f:#?}"
        );
        assert_eq!(
            f.library.as_deref(),
            Some("/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2")
        );
        assert_eq!(f.source.as_deref(), Some("python:/venv (VIRTUAL_ENV)"));
        assert_eq!(f.version.as_deref(), Some("2.21.5"));
        assert_eq!(f.version_source.as_deref(), Some("dist-info"));
        assert_eq!(f.torch_version.as_deref(), Some("2.5.1+cu124"));
        assert_eq!(f.candidates.len(), 7);
        assert_eq!(f.error, None);
    }

    #[test]
    fn versions_from_dist_info_metadata_and_file_names() {
        let f = probe_with(&Root::at(FIXTURE), &full_env(), false);
        let v: Vec<Option<&str>> = f.found.iter().map(|c| c.version.as_deref()).collect();
        assert_eq!(
            v,
            vec![
                Some("2.21.5"),
                Some("2.20.5"),
                Some("2.19.3"),
                Some("2.18.1"),
                Some("2.21.5"),
                Some("2.23.4"),
                Some("2.17.1"),
            ]
        );
        assert_eq!(f.found[1].torch_version.as_deref(), Some("2.4.0"));
        assert_eq!(f.found[4].version_source.as_deref(), Some("file name"));
    }

    #[test]
    fn without_python_envs_the_linker_cache_wins() {
        let f = probe_with(&Root::at(FIXTURE), &env(&[]), false);
        assert_eq!(f.source.as_deref(), Some("ld.so.cache"));
        assert_eq!(
            f.library.as_deref(),
            Some("/usr/lib/x86_64-linux-gnu/libnccl.so.2")
        );
        assert_eq!(f.version.as_deref(), Some("2.23.4"));
        // torch lives in /usr/local/lib/python3.10/dist-packages without its own NCCL.
        assert_eq!(f.torch_version.as_deref(), Some("2.3.1"));
    }

    #[test]
    fn nothing_found_in_an_empty_root() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = probe_with(&Root::at(d.path()), &full_env(), true);
        assert_eq!(f.library, None);
        assert!(f.candidates.is_empty());
        assert_eq!(f.version, None);
    }

    #[test]
    fn failed_dlopen_falls_back_and_says_so() {
        let f = probe_with(&Root::at(FIXTURE), &full_env(), true);
        assert_eq!(f.version.as_deref(), Some("2.21.5"));
        assert_eq!(f.version_source.as_deref(), Some("dist-info"));
        let e = f.error.as_deref().unwrap_or_default();
        assert!(e.contains("ncclGetVersion failed"), "{e}");
        assert!(e.contains("dist-info"), "{e}");
    }

    #[test]
    fn decodes_both_version_code_schemes() {
        assert_eq!(decode_version(22105).as_deref(), Some("2.21.5"));
        assert_eq!(decode_version(2708).as_deref(), Some("2.7.8"));
        assert_eq!(decode_version(20903).as_deref(), Some("2.9.3"));
        assert_eq!(decode_version(0), None);
        assert_eq!(decode_version(-3), None);
    }

    #[test]
    fn parses_torch_version_lines() {
        assert_eq!(
            parse_version_assignment("__version__ = '2.5.1+cu124'").as_deref(),
            Some("2.5.1+cu124")
        );
        assert_eq!(
            parse_version_assignment("__version__: str = \"2.6.0\"").as_deref(),
            Some("2.6.0")
        );
        assert_eq!(parse_version_assignment("cuda = '12.4'"), None);
        assert_eq!(parse_version_assignment("__version__ = "), None);
    }

    /// Builds a real shared library exporting ncclGetVersion and reads it through dlopen.
    #[test]
    fn real_dlopen_reads_ncclgetversion() {
        let d = tempfile::tempdir().expect("tempdir");
        let site = d.path().join("venv/lib/python3.12/site-packages");
        let libdir = site.join("nvidia/nccl/lib");
        std::fs::create_dir_all(&libdir).expect("mkdir");
        std::fs::create_dir_all(site.join("nvidia_nccl_cu12-2.20.5.dist-info")).expect("mkdir");
        let src = d.path().join("nccl.c");
        std::fs::write(&src, "int ncclGetVersion(int *v){*v=22105;return 0;}\n").expect("write");
        let out = libdir.join("libnccl.so.2");
        let built = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .status();
        match built {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("cc failed: {s}"),
            Err(e) => {
                eprintln!("skipping real dlopen test: cannot run cc ({e})");
                return;
            }
        }
        assert_eq!(read_version(&out).as_deref(), Ok("2.21.5"));
        let f = probe_with(&Root::at(d.path()), &env(&[("VIRTUAL_ENV", "/venv")]), true);
        // ncclGetVersion beats the dist-info name, which says 2.20.5 here.
        assert_eq!(f.version.as_deref(), Some("2.21.5"));
        assert_eq!(f.version_source.as_deref(), Some("ncclGetVersion"));
        assert_eq!(f.error, None);
    }

    #[test]
    fn dlopen_of_a_missing_file_is_an_error_not_a_crash() {
        let e = read_version(Path::new("/nonexistent/libnccl.so.2"));
        assert!(e.is_err());
    }
}
