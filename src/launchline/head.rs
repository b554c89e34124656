//! The words in front of the launcher: the job's environment (`VAR=value`, `env -u NAME VAR=value`)
//! and the wrappers people put around torchrun (`sudo -E`, `srun ...`, `exec`, `nohup`, `time`,
//! `numactl ...`, `taskset`, `stdbuf`, `nice`, `timeout`, `uv run`, `conda run -n X`,
//! `apptainer exec IMAGE`, `python -m torch.distributed.run`), then which launcher it is.
//!
//! Each wrapper's options are read from its own manual: an option listed as taking a value
//! consumes the next word when written apart (`srun -N 2`), every other `-x` word is a flag.

/// Which launcher the command names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// `torchrun`
    Torchrun,
    /// `python -m torch.distributed.run`: the same parser as torchrun.
    RunModule,
    /// `python -m torch.distributed.launch`: deprecated; passes `--local-rank` unless `--use-env`.
    Launch,
    /// `accelerate launch`: HF Accelerate; it rendezvouses as torchrun does (it calls torch.distributed.run).
    Accelerate,
    /// `deepspeed`: DeepSpeed's launcher (static MASTER_ADDR/MASTER_PORT rendezvous; ssh/pdsh with a hostfile).
    Deepspeed,
    /// Some other program (`python train.py`, `bash run.sh`): not a launcher preflight reads.
    Other,
    /// No launcher words: just the arguments.
    Bare,
}

/// One word of the command: its value and, when it came from a pasted line, its text there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Word {
    /// The word as the program receives it (quotes removed).
    pub value: String,
    /// The word as written in the pasted line (quotes kept); None when it came as argv.
    pub raw: Option<String>,
    /// `$VAR`s in it that were not set, so the shell would put nothing there.
    pub unset: Vec<String>,
}

impl Word {
    pub fn plain(value: impl Into<String>) -> Word {
        Word {
            value: value.into(),
            raw: None,
            unset: Vec::new(),
        }
    }

    /// The word for a shell: as written when known, else quoted when needed.
    pub fn shell_text(&self) -> String {
        self.raw
            .clone()
            .unwrap_or_else(|| crate::shell::quote(&self.value))
    }
}

/// One `NAME=value` word of the job's environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvWord {
    /// Index of the word in the command.
    pub index: usize,
    pub name: String,
    pub value: String,
}

/// What comes before the launcher's own options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Head {
    pub env: Vec<EnvWord>,
    /// Names `env -u NAME` removes from the job's environment.
    pub unset: Vec<String>,
    /// The wrappers seen through, in order ("srun", "sudo", "numactl", ...).
    pub wrappers: Vec<String>,
    /// Index of the launcher's (or program's) first word.
    pub start: usize,
    /// Number of launcher words (`torchrun` 1, `python -m torch.distributed.run` 3, `accelerate launch` 2).
    pub len: usize,
    /// The program when it is not a torch launcher: `python` for `python train.py`, `bash`, ...
    pub program: String,
    /// For `python script.py` (launcher Other): the script's index.
    pub python_script: Option<usize>,
}

/// `NAME=value` with a shell variable name.
pub fn assignment(w: &str) -> Option<(&str, &str)> {
    let (name, value) = w.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some((name, value))
}

fn base(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

fn is_python(w: &str) -> bool {
    let b = base(w);
    b.starts_with("python")
        && b["python".len()..]
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
}

/// A wrapper's options: which take a value when written apart, and whether the first
/// non-option word is the wrapper's own operand (taskset's mask, timeout's duration, apptainer's image).
struct WrapperSpec {
    /// Words that name it: "srun", or "uv run" (two words).
    words: &'static [&'static str],
    /// Options taking a separate value (`-N 2`); `--long=value` is always one word.
    valued: &'static [&'static str],
    /// Operands after the options before the command (taskset's mask, timeout's duration, the image).
    operands: usize,
    /// `VAR=value` words are read after it (env, sudo).
    assigns: bool,
}

/// Options taking a value for conda, mamba and micromamba `run`.
const CONDA_VALUED: &[&str] = &["-n", "--name", "-p", "--prefix", "--cwd"];

/// Options taking a value for apptainer and singularity `exec` (the same CLI).
const CONTAINER_VALUED: &[&str] = &[
    "-B",
    "--bind",
    "--env",
    "--env-file",
    "--pwd",
    "-H",
    "--home",
    "-o",
    "--overlay",
    "--mount",
    "-W",
    "--workdir",
    "-S",
    "--scratch",
    "--security",
    "--network",
    "--app",
];

const WRAPPERS: &[WrapperSpec] = &[
    WrapperSpec {
        words: &["env"],
        valued: &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
        operands: 0,
        assigns: true,
    },
    WrapperSpec {
        words: &["sudo"],
        valued: &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U"],
        operands: 0,
        assigns: true,
    },
    WrapperSpec {
        // srun(1): the options that take an argument, short and long.
        words: &["srun"],
        valued: &[
            "-A",
            "-b",
            "-c",
            "-d",
            "-D",
            "-e",
            "-G",
            "-i",
            "-J",
            "-L",
            "-m",
            "-n",
            "-N",
            "-o",
            "-p",
            "-q",
            "-t",
            "-w",
            "-x",
            "-C",
            "-W",
            "-T",
            "--account",
            "--nodes",
            "--ntasks",
            "--ntasks-per-node",
            "--cpus-per-task",
            "--gpus",
            "--gpus-per-node",
            "--gpus-per-task",
            "--gres",
            "--partition",
            "--time",
            "--job-name",
            "--output",
            "--error",
            "--input",
            "--nodelist",
            "--exclude",
            "--mem",
            "--mem-per-cpu",
            "--mem-per-gpu",
            "--mpi",
            "--export",
            "--container-image",
            "--container-mounts",
            "--container-workdir",
            "--container-name",
            "--container-env",
            "--chdir",
            "--cpu-bind",
            "--gpu-bind",
            "--distribution",
            "--constraint",
            "--qos",
            "--reservation",
            "--jobid",
            "--het-group",
            "--kill-on-bad-exit",
            "--label-format",
            "--network",
            "--wait",
            "--dependency",
        ],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["exec"],
        valued: &["-a"],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["nohup"],
        valued: &[],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["time"],
        valued: &["-f", "-o", "--format", "--output"],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["nice"],
        valued: &["-n", "--adjustment"],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["ionice"],
        valued: &["-c", "-n", "--class", "--classdata"],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["timeout"],
        valued: &["-s", "-k", "--signal", "--kill-after"],
        operands: 1,
        assigns: false,
    },
    WrapperSpec {
        words: &["numactl"],
        valued: &[
            "-N",
            "-m",
            "-C",
            "-i",
            "-p",
            "--cpunodebind",
            "--membind",
            "--physcpubind",
            "--interleave",
            "--preferred",
        ],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["taskset"],
        valued: &[],
        operands: 1,
        assigns: false,
    },
    WrapperSpec {
        words: &["stdbuf"],
        valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["uv", "run"],
        valued: &[
            "--with",
            "--with-editable",
            "--with-requirements",
            "--python",
            "-p",
            "--project",
            "--directory",
            "--env-file",
            "--extra",
            "--group",
            "--package",
            "--index",
            "--index-url",
            "--extra-index-url",
        ],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["conda", "run"],
        valued: CONDA_VALUED,
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["mamba", "run"],
        valued: CONDA_VALUED,
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["micromamba", "run"],
        valued: CONDA_VALUED,
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["poetry", "run"],
        valued: &[],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["pixi", "run"],
        valued: &["-e", "--environment", "--manifest-path"],
        operands: 0,
        assigns: false,
    },
    WrapperSpec {
        words: &["apptainer", "exec"],
        valued: CONTAINER_VALUED,
        operands: 1,
        assigns: false,
    },
    WrapperSpec {
        words: &["singularity", "exec"],
        valued: CONTAINER_VALUED,
        operands: 1,
        assigns: false,
    },
];

fn wrapper_at(words: &[Word], i: usize) -> Option<&'static WrapperSpec> {
    WRAPPERS.iter().find(|w| {
        w.words.iter().enumerate().all(|(k, name)| {
            words.get(i + k).is_some_and(|x| {
                let v = x.value.as_str();
                if k == 0 { base(v) == *name } else { v == *name }
            })
        })
    })
}

/// Skips a wrapper's options and operands from `i`; returns the index after them.
fn skip_options(words: &[Word], mut i: usize, spec: &WrapperSpec, head: &mut Head) -> usize {
    let env_wrapper = spec.words == ["env"];
    while let Some(w) = words.get(i).map(|w| w.value.as_str()) {
        if w == "--" {
            i += 1;
            break;
        }
        if !w.starts_with('-') || w.len() < 2 {
            break;
        }
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if w.starts_with("--") => (n, Some(v)),
            _ => (w, None),
        };
        // `-uNAME`, `-N2`: a short option with its value glued on.
        let glued = w
            .get(..2)
            .zip(w.get(2..))
            .filter(|(n, v)| !w.starts_with("--") && !v.is_empty() && spec.valued.contains(n));
        let (name, value, used) = if let Some((n, v)) = glued {
            (n, Some(v.to_string()), 1)
        } else if let Some(v) = inline {
            (name, Some(v.to_string()), 1)
        } else if spec.valued.contains(&name) {
            (name, words.get(i + 1).map(|x| x.value.clone()), 2)
        } else {
            (name, None, 1)
        };
        if env_wrapper && (name == "-u" || name == "--unset") {
            if let Some(v) = value {
                head.unset.push(v);
            }
        }
        i += used;
    }
    if env_wrapper {
        return i;
    }
    (i + spec.operands).min(words.len())
}

/// Reads the environment, wrappers and launcher at the start of the command.
pub fn read(words: &[Word]) -> (Launcher, Head) {
    let mut head = Head::default();
    let mut i = 0;
    let mut assigns = true;
    loop {
        let Some(w) = words.get(i).map(|w| w.value.as_str()) else {
            head.start = i;
            return (Launcher::Bare, head);
        };
        if assigns {
            if let Some((name, value)) = assignment(w) {
                head.env.push(EnvWord {
                    index: i,
                    name: name.to_string(),
                    value: value.to_string(),
                });
                i += 1;
                continue;
            }
        }
        if let Some(spec) = wrapper_at(words, i) {
            head.wrappers.push(spec.words.join(" "));
            assigns = spec.assigns;
            i = skip_options(words, i + spec.words.len(), spec, &mut head);
            continue;
        }
        head.start = i;
        let second = words.get(i + 1).map(|w| w.value.as_str());
        let b = base(w);
        if b == "torchrun" {
            head.len = 1;
            head.program = "torchrun".into();
            return (Launcher::Torchrun, head);
        }
        if b == "accelerate" && second == Some("launch") {
            head.len = 2;
            head.program = "accelerate launch".into();
            return (Launcher::Accelerate, head);
        }
        if b == "deepspeed" {
            head.len = 1;
            head.program = "deepspeed".into();
            return (Launcher::Deepspeed, head);
        }
        if is_python(w) {
            return python(words, i, head);
        }
        let plain = head.env.is_empty() && head.wrappers.is_empty();
        if plain && (w.starts_with('-') || w.ends_with(".py")) {
            // Bare torchrun arguments (`preflight torchrun --nnodes=2 train.py`).
            return (Launcher::Bare, head);
        }
        head.program = w.to_string();
        return (Launcher::Other, head);
    }
}

/// `python [options] -m MODULE ...` or `python [options] script.py ...`.
fn python(words: &[Word], start: usize, mut head: Head) -> (Launcher, Head) {
    const VALUED: &[&str] = &["-W", "-X", "-c"];
    head.program = words[start].value.clone();
    let mut i = start + 1;
    while let Some(w) = words.get(i).map(|w| w.value.as_str()) {
        if w == "-m" || (w.starts_with("-m") && w.len() > 2) {
            let (module, used) = if w == "-m" {
                (words.get(i + 1).map(|x| x.value.as_str()), 2)
            } else {
                (Some(&w[2..]), 1)
            };
            let launcher = match module {
                Some("torch.distributed.run") => Launcher::RunModule,
                Some("torch.distributed.launch") => Launcher::Launch,
                Some("accelerate.commands.launch") => Launcher::Accelerate,
                Some("deepspeed.launcher.runner") => Launcher::Deepspeed,
                _ => {
                    head.program = format!("{} -m {}", head.program, module.unwrap_or_default());
                    return (Launcher::Other, head);
                }
            };
            head.len = i + used - start;
            head.program = format!("python -m {}", module.unwrap_or_default());
            return (launcher, head);
        }
        if w == "-c" {
            head.program = format!("{} -c", head.program);
            return (Launcher::Other, head);
        }
        if !w.starts_with('-') || w == "-" {
            head.python_script = Some(i);
            return (Launcher::Other, head);
        }
        i += if VALUED.contains(&w) { 2 } else { 1 };
    }
    (Launcher::Other, head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launchline::args::split_shell_words;

    fn head(line: &str) -> (Launcher, Head, Vec<Word>) {
        let w = split_shell_words(line).unwrap();
        let (l, h) = read(&w);
        (l, h, w)
    }

    #[test]
    fn environment_and_wrappers_in_front_are_seen_through() {
        let (l, h, w) = head(
            "NCCL_DEBUG=INFO env -u NCCL_IB_HCA NCCL_IB_DISABLE=1 sudo -E srun -N 2 --ntasks-per-node=1 numactl --cpunodebind=0 -m 0 torchrun --nnodes=2 t.py",
        );
        assert_eq!(l, Launcher::Torchrun);
        assert_eq!(w[h.start].value, "torchrun");
        let names: Vec<_> = h.env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, vec!["NCCL_DEBUG", "NCCL_IB_DISABLE"]);
        assert_eq!(h.unset, vec!["NCCL_IB_HCA"]);
        assert_eq!(h.wrappers, vec!["env", "sudo", "srun", "numactl"]);
    }

    #[test]
    fn operands_and_two_word_wrappers() {
        let (l, h, w) = head("timeout 2h taskset -c 0-15 stdbuf -oL uv run --with x torchrun t.py");
        assert_eq!(l, Launcher::Torchrun);
        assert_eq!(w[h.start].value, "torchrun");
        let (l, h, w) = head(
            "apptainer exec --nv -B /data:/data img.sif python3 -u -m torch.distributed.launch --use_env t.py",
        );
        assert_eq!(l, Launcher::Launch);
        assert_eq!(h.len, 4);
        assert_eq!(w[h.start + h.len].value, "--use_env");
        let (l, _, _) = head("conda run -n env --no-capture-output accelerate launch t.py");
        assert_eq!(l, Launcher::Accelerate);
    }

    #[test]
    fn other_programs_and_bare_arguments() {
        assert_eq!(head("deepspeed --num_gpus 8 t.py").0, Launcher::Deepspeed);
        let (l, h, _) = head("srun python train.py --x");
        assert_eq!((l, h.python_script), (Launcher::Other, Some(2)));
        assert_eq!(head("bash run.sh").0, Launcher::Other);
        assert_eq!(head("--nnodes=2 t.py").0, Launcher::Bare);
        assert_eq!(head("train.py").0, Launcher::Bare);
        // `VAR=x` after srun is the program srun runs, not an assignment.
        assert_eq!(head("srun A=1 torchrun t.py").0, Launcher::Other);
    }
}
